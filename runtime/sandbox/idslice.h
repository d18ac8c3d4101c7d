/* Id slices: concurrent root-mode runs get disjoint host id ranges (podman's --userns=auto
 * idea), so per-user kernel limits (inflight SCM_RIGHTS fds, pipe buffer pages, RLIMIT_NPROC)
 * are never shared between them. Slice k is held by an flock on one lock file per slice. */
#ifndef RB_IDSLICE_H
#define RB_IDSLICE_H

#include "common/error.h"

/* Host-wide: every root-mode run takes its slice here, whatever its state directory. */
#define RB_IDSLICE_DIR "/run/runbox/id-slices"

/* Takes the lowest free slice of n in dir (made 0700 if missing): *slot is its index, the
 * return value the lock's fd (O_CLOEXEC), held for as long as it is open. The kernel drops
 * the lock when its last holder exits, so a killed runbox leaves nothing to clean up. All n
 * taken is an error naming n. */
int rb_idslice_acquire(const char *dir, unsigned n, unsigned *slot, struct rb_error *err);

#endif

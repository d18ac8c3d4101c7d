/* Opening files as the sandbox's user namespace sees them. A rootless runner cannot read what
 * a sandbox user other than its root wrote with a private mode (0600 files, 0700 directories):
 * those belong to subordinate host ids. A helper process that joined the sandbox's user
 * namespace holds CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH over exactly the ids mapped there,
 * and opens such a file for the runner, which gets the fd. The runner owns the namespace's
 * owner, so it may send a child there (setns); the helper gains nothing over the host that the
 * runner did not have: its capabilities cover only the sandbox's ids. */
#ifndef RB_NSOPEN_H
#define RB_NSOPEN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct rb_nsopener {
	pid_t pid; /* the helper, or -1 before the first need */
	int sock;  /* SOCK_SEQPACKET to it */
	int userns_fd;
	bool failed; /* it could not be started: every later try answers EACCES at once */
};

#define RB_NSOPENER_INIT                                                                                               \
	{                                                                                                              \
		.pid = -1, .sock = -1, .userns_fd = -1                                                                 \
	}

/* Keeps a duplicate of userns_fd (the sandbox's user namespace, struct rb_sandbox.userns_fd:
 * /proc/<init>/ns/user cannot be opened later, init being non-dumpable); the helper itself
 * starts at the first rb_nsopener_open. */
int rb_nsopener_prepare(struct rb_nsopener *o, int userns_fd, struct rb_error *err);

/* openat2(dirfd, name, {flags | O_CLOEXEC | O_NOFOLLOW, resolve}) done by the helper, for
 * rb_harvest's reopen hook (ctx is the struct rb_nsopener). name is one path component or
 * ".". Returns the fd, or -1 with errno (the helper's, or EACCES when there is no helper). */
int rb_nsopener_open(void *ctx, int dirfd, const char *name, uint64_t flags, uint64_t resolve);

/* Ends the helper and closes everything. Idempotent. */
void rb_nsopener_close(struct rb_nsopener *o);

#endif

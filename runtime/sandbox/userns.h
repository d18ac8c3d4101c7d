/* Identity: which ids the sandbox's user namespace maps, and to what. The sandbox's ids always
 * map to unprivileged host ids, never to host root. As root: a subordinate range (the "runbox"
 * entry of /etc/subuid and /etc/subgid, else RB_DEFAULT_SUBID_SLICES slices of RB_SANDBOX_IDS from
 * RB_DEFAULT_SUBID_START), one slice per concurrent run.
 * Rootless: an owner user namespace (the caller's own id plus its subordinate range through
 * newuidmap/newgidmap when present, else the caller's id alone) holds the network namespace,
 * and the sandbox's namespace is its child. */
#ifndef RB_USERNS_H
#define RB_USERNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "policy/policy.h"

#define RB_DEFAULT_SUBID_START 1000000000u
#define RB_DEFAULT_SUBID_COUNT 65536u
#define RB_SANDBOX_IDS         65536u
/* Without a "runbox" entry, root mode's range holds this many slices of RB_SANDBOX_IDS. */
#define RB_DEFAULT_SUBID_SLICES 1024u

struct rb_idmap_line {
	uint32_t inside, outside, count;
};

struct rb_idmap {
	struct rb_idmap_line lines[3];
	unsigned n;
};

struct rb_idplan {
	/* Rootless: the spawner first makes an owner user namespace with these maps. */
	bool outer;
	bool outer_helpers; /* write the outer maps with newuidmap/newgidmap */
	struct rb_idmap outer_uid, outer_gid;
	/* The sandbox's user namespace, in the ids of its parent namespace. */
	struct rb_idmap uid, gid;
	bool single;      /* one id only: setgroups is denied, no other users inside */
	uint32_t slices;  /* root mode: disjoint RB_SANDBOX_IDS slices the range holds (0: none) */
	char source[160]; /* how the range was chosen, for the result and `check` */
};

/* Decides the maps for pol on this host. id_range "required" with no range is an error that
 * names the file and the fix. */
int rb_userns_plan(const struct rb_policy *pol, struct rb_idplan *plan, struct rb_error *err);

/* Root mode with a range of more than one slice: moves plan's host ids to the lowest slice no
 * live run holds (rb_idslice_acquire in lock_dir) and sets *lock_fd to the lock, to be closed
 * once the sandbox is gone. Otherwise (rootless, or a range of one slice, which concurrent
 * runs then share) *lock_fd is -1 and plan is unchanged. */
int rb_userns_take_slice(struct rb_idplan *plan, const char *lock_dir, int *lock_fd, struct rb_error *err);

/* Writes uid_map, setgroups (when deny) and gid_map of pid directly. */
int rb_userns_write_maps(pid_t pid, const struct rb_idmap *uid, const struct rb_idmap *gid, bool deny_setgroups,
                         struct rb_error *err);
/* Writes the outer maps of pid: newuidmap/newgidmap, or directly for a single id. */
int rb_userns_write_outer(pid_t pid, const struct rb_idplan *plan, struct rb_error *err);

/* "0 1000000000 65536" for the result. */
void rb_idmap_format(const struct rb_idmap *m, char *buf, size_t len);

/* Looks up NAME or UID in a subid file ("/etc/subuid"): start and count of the first entry. */
int rb_subid_lookup(const char *file, const char *name, uint32_t id, uint32_t *start, uint32_t *count);

#endif

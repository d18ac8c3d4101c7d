/* How runbox serve's file calls reach a path of a sandbox: parsed lexically, resolved by openat2
 * from the sandbox's own root (RESOLVE_IN_ROOT), the last component never followed, acting as the
 * sandbox root's host ids. Shared by files.c, fsops.c and snapshot.c. */
#ifndef RB_SERVE_FSROOT_H
#define RB_SERVE_FSROOT_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/error.h"
#include "serve/serve.h"

/* An absolute sandbox path split into its parent (relative to the root, "." for the root's
 * children) and its last component (empty for the root itself). */
struct rb_fspath {
	char full[PATH_MAX];   /* normalized: "/a/b" */
	char parent[PATH_MAX]; /* "a" */
	char name[NAME_MAX + 1];
};

/* what names the argument ("query `path`", "$.from"). Absolute, no `..`; `.` and repeated
 * slashes are dropped. */
int rb_fspath_parse(const char *path, const char *what, struct rb_fspath *p, struct rb_error *err);

/* The target of the link at rel (relative to /workspace, no link in it) into target: true, or
 * false when rel is no link. */
typedef bool (*rb_fspath_lookup_fn)(void *ctx, const char *rel, char *target, size_t len);

/* Whether a link at name (relative to /workspace) to target stays in /workspace, followed as the
 * kernel would: relative from the link's directory, or absolute below /workspace, through the
 * links lookup names on the way (NULL: none; the text alone), at most 40 of them. */
bool rb_fspath_link_inside(const char *name, const char *target, rb_fspath_lookup_fn lookup, void *ctx);

/* The thread's file system credentials while it acts for a sandbox (as root: fsuid and fsgid set
 * to the sandbox root's host ids, no supplementary groups, which drops every capability over
 * files, as the sandbox's root has none over the host's). Per thread: setfsuid(2), and
 * setgroups(2) as the raw system call, not glibc's process-wide one. */
struct rb_fscred {
	bool on;
	uid_t ouid;
	gid_t ogid;
	int n_groups;
	gid_t *groups;
};
int rb_fscred_enter(const struct rb_serve_fs *fs, struct rb_fscred *c, struct rb_error *err);
void rb_fscred_leave(struct rb_fscred *c);

/* openat2(fs->root, rel, flags | O_NOFOLLOW | O_CLOEXEC) with RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS: `..` and absolute links stay in the sandbox. full names it in err. */
int rb_fs_open_in_root(int root, const char *rel, int flags, const char *full, struct rb_error *err);
/* The parent directory of p (O_PATH), made with its missing parents (as mkdir -p, mode 0755)
 * when make is set. */
int rb_fs_open_parent(const struct rb_serve_fs *fs, const struct rb_fspath *p, bool make, struct rb_error *err);
/* One component below dirfd: no link followed, no mount crossed when no_xdev. Opened for its
 * data (neither O_PATH nor O_DIRECTORY), it must be a regular file, and a FIFO or a device
 * there is refused without blocking (RB_ERR_CONFLICT). */
int rb_fs_open_child(int dirfd, const char *name, int flags, bool no_xdev, const char *full, struct rb_error *err);

/* 403 when fd is on a kernel filesystem (proc, sysfs, cgroup, ...): the daemon reads and
 * writes the sandbox's files, never the kernel's interfaces (of its processes or the host). */
int rb_fs_not_kernel(int fd, const char *full, struct rb_error *err);

/* The stat object of the API: {path, name, type, size, mode, mtime, mtime_ns, target?};
 * dirfd/name as fstatat(AT_SYMLINK_NOFOLLOW) sees it. */
json_t *rb_fs_stat_json(const char *full, const char *name, const struct stat *st, int dirfd);

/* A mode argument: an octal string ("0644") of permission bits (at most 07777). */
int rb_fs_parse_mode(const char *s, const char *what, mode_t *out, struct rb_error *err);

#endif

/* /proc/self/mountinfo, parsed once per reader: one struct per mount, fields unescaped
 * (proc(5): a space in a path is \040). */
#ifndef RB_MOUNTINFO_H
#define RB_MOUNTINFO_H

#include <limits.h>

#include "common/error.h"

struct rb_mount {
	char root[PATH_MAX];        /* the path within the filesystem that is mounted here */
	char mount_point[PATH_MAX]; /* where, in this mount namespace */
	char fstype[64];
	char source[PATH_MAX];
	char super_opts[4096]; /* the filesystem's options (cgroup v1: its controllers) */
};

/* Calls fn for each mount of /proc/self/mountinfo in order until fn returns nonzero, which is
 * then returned; 0 after the last; -1 when the file cannot be read (err says why). */
int rb_mountinfo_each(int (*fn)(const struct rb_mount *m, void *ctx), void *ctx, struct rb_error *err);
/* The same over a mountinfo text already read (tests). */
int rb_mountinfo_each_in(const char *text, int (*fn)(const struct rb_mount *m, void *ctx), void *ctx);

#endif

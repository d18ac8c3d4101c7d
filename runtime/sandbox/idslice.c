/* Id slice allocation by flock (see idslice.h). */
#define _GNU_SOURCE
#include "runtime/sandbox/idslice.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

int rb_idslice_acquire(const char *dir, unsigned n, unsigned *slot, struct rb_error *err)
{
	/* The parent (/run/runbox) is also the root run directory's: 0711, never 0700, or the
	 * sandbox's host ids could not reach the run directories below it. Only the slices'
	 * own directory is private. */
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash && slash != parent) {
		*slash = '\0';
		if (rb_mkdir_p(parent, 0711, err) < 0)
			return -1;
	}
	if (rb_mkdir_p(dir, 0700, err) < 0)
		return -1;
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (dfd < 0 || fstat(dfd, &st) < 0)
		return rb_error_set(err, errno, "id slices: open `%s`", dir);
	/* Whoever may write here could hold every slice, or hand two runs one. */
	if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return rb_error_set(err, 0, "id slices: `%s` is not owned by us or is group or world writable", dir);
	for (unsigned k = 0; k < n; k++) {
		char name[32];
		snprintf(name, sizeof name, "slice-%u.lock", k);
		int fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return rb_error_set(err, errno, "id slices: open `%s/%s`", dir, name);
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			*slot = k;
			return fd;
		}
		int e = errno;
		close(fd);
		if (e != EWOULDBLOCK)
			return rb_error_set(err, e, "id slices: lock `%s/%s`", dir, name);
	}
	return rb_error_set(err, 0, "id slices: all %u slices in `%s` are held by live runs", n, dir);
}

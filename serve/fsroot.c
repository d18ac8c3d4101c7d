/* Paths of a sandbox for runbox serve's file calls (see fsroot.h): lexical parsing, openat2
 * resolution from the sandbox's root, the per-thread credentials of its root, the stat object. */
#define _GNU_SOURCE
#include "serve/fsroot.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

int rb_fspath_parse(const char *path, const char *what, struct rb_fspath *p, struct rb_error *err)
{
	memset(p, 0, sizeof *p);
	if (!path || path[0] != '/')
		return rb_error_setk(err, RB_ERR_INPUT, 0, "%s: an absolute path inside the sandbox, not `%s`", what,
		                     path ? path : "");
	if (strlen(path) >= PATH_MAX)
		return rb_error_setk(err, RB_ERR_INPUT, ENAMETOOLONG, "%s: longer than %d bytes", what, PATH_MAX - 1);
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", path);
	size_t n = 0;
	p->full[0] = '\0';
	const char *last = NULL;
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (!strcmp(t, "."))
			continue;
		if (!strcmp(t, ".."))
			return rb_error_setk(err, RB_ERR_INPUT, 0, "%s: `..` is not taken in a path (`%s`)", what,
			                     path);
		if (strlen(t) > NAME_MAX)
			return rb_error_setk(err, RB_ERR_INPUT, ENAMETOOLONG, "%s: a component over %d bytes", what,
			                     NAME_MAX);
		n += (size_t)snprintf(p->full + n, sizeof p->full - n, "/%s", t);
		last = t;
	}
	if (!last) {
		snprintf(p->full, sizeof p->full, "/");
		snprintf(p->parent, sizeof p->parent, ".");
		return 0;
	}
	snprintf(p->name, sizeof p->name, "%s", last);
	size_t plen = n - strlen(last) - 1;
	if (plen == 0)
		snprintf(p->parent, sizeof p->parent, ".");
	else
		snprintf(p->parent, sizeof p->parent, "%.*s", (int)plen - 1, p->full + 1);
	return 0;
}

#define LINK_HOPS 40 /* links followed on one path, as the kernel's MAXSYMLINKS */

/* A path being resolved below /workspace: relative to it, no link in it ("" is /workspace). */
struct walk {
	char path[PATH_MAX];
	size_t len;
	unsigned hops;
	rb_fspath_lookup_fn lookup;
	void *ctx;
};

/* To the parent directory; false at /workspace, whose parent is outside. */
static bool walk_up(struct walk *w)
{
	if (!w->len)
		return false;
	const char *s = memrchr(w->path, '/', w->len);
	w->len = s ? (size_t)(s - w->path) : 0;
	w->path[w->len] = '\0';
	return true;
}

/* Follows target from the directory w is at, through every link lookup names. */
static bool walk_follow(struct walk *w, const char *target)
{
	if (!target[0])
		return false;
	_cleanup_free_ char *buf = strdup(target);
	if (!buf)
		return false;
	char *save = NULL, *t = strtok_r(buf, "/", &save);
	if (target[0] == '/') { /* the sandbox's root: inside only below /workspace */
		while (t && !strcmp(t, "."))
			t = strtok_r(NULL, "/", &save);
		if (!t || strcmp(t, "workspace") != 0)
			return false;
		w->len = 0;
		w->path[0] = '\0';
		t = strtok_r(NULL, "/", &save);
	}
	for (; t; t = strtok_r(NULL, "/", &save)) {
		if (!strcmp(t, "."))
			continue;
		if (!strcmp(t, "..")) {
			if (!walk_up(w))
				return false;
			continue;
		}
		size_t at = w->len, n = strlen(t);
		if (at + 1 + n >= sizeof w->path)
			return false;
		if (at)
			w->path[w->len++] = '/';
		memcpy(w->path + w->len, t, n + 1);
		w->len += n;
		char next[PATH_MAX];
		if (w->lookup && w->lookup(w->ctx, w->path, next, sizeof next)) {
			/* A link on the way: what follows goes on from where it leads. */
			w->len = at;
			w->path[at] = '\0';
			if (++w->hops > LINK_HOPS || !walk_follow(w, next))
				return false;
		}
	}
	return true;
}

/* Whether a link at name (relative to /workspace) to target stays inside /workspace, followed as
 * the kernel follows it: relative from the link's directory, absolute from the sandbox's root
 * (below /workspace), and through every link lookup knows on the way (a `..` after a link goes
 * up from where the link leads, not from the text before it). */
bool rb_fspath_link_inside(const char *name, const char *target, rb_fspath_lookup_fn lookup, void *ctx)
{
	struct walk w = {.lookup = lookup, .ctx = ctx};
	int n = snprintf(w.path, sizeof w.path, "%s", name);
	if (n < 0 || (size_t)n >= sizeof w.path)
		return false;
	w.len = (size_t)n;
	walk_up(&w); /* the link's directory */
	return walk_follow(&w, target);
}

int rb_fscred_enter(const struct rb_serve_fs *fs, struct rb_fscred *c, struct rb_error *err)
{
	memset(c, 0, sizeof *c);
	if (!fs->as_ids)
		return 0;
	int n = getgroups(0, NULL);
	if (n < 0)
		return rb_error_set(err, errno, "getgroups");
	c->groups = calloc((size_t)n + 1, sizeof *c->groups);
	if (!c->groups)
		return rb_error_set(err, ENOMEM, "getgroups");
	if ((c->n_groups = getgroups(n, c->groups)) < 0 || syscall(SYS_setgroups, 0, NULL) < 0) {
		int e = errno;
		free(c->groups);
		c->groups = NULL;
		return rb_error_set(err, e, "setgroups (this thread's)");
	}
	c->on = true;
	c->ogid = (gid_t)setfsgid(fs->gid);
	c->ouid = (uid_t)setfsuid(fs->uid);
	return 0;
}

void rb_fscred_leave(struct rb_fscred *c)
{
	if (!c->on)
		return;
	setfsuid(c->ouid);
	setfsgid(c->ogid);
	/* Cannot fail here: CAP_SETGID is not a file capability, setfsuid left it. */
	(void)!syscall(SYS_setgroups, (size_t)c->n_groups, c->groups);
	free(c->groups);
	c->groups = NULL;
	c->on = false;
}

/* flags | O_CLOEXEC, and O_NOFOLLOW unless follow_last (a parent directory: a link there is
 * followed, inside the root). */
static int openat2_how(int dirfd, const char *rel, int flags, uint64_t resolve, bool follow_last)
{
	struct open_how how = {
	    /* The kernel adds O_LARGEFILE itself (not to O_PATH, which takes no other flag). */
	    .flags = (uint64_t)(flags | (follow_last ? 0 : O_NOFOLLOW) | O_CLOEXEC),
	    .mode = ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) ? 0600 : 0,
	    .resolve = resolve,
	};
	int fd;
	do
		fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
	while (fd < 0 && errno == EAGAIN);
	return fd;
}

static int openat2_fd(int dirfd, const char *rel, int flags, uint64_t resolve)
{
	return openat2_how(dirfd, rel, flags, resolve, false);
}

/* A directory of the sandbox by its path from the root: links on the way, the last one too,
 * resolved as the sandbox sees them (RESOLVE_IN_ROOT), never to a host path. */
static int open_dir_in_root(int root, const char *rel)
{
	return openat2_how(root, rel, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS, true);
}

int rb_fs_open_in_root(int root, const char *rel, int flags, const char *full, struct rb_error *err)
{
	int fd = openat2_fd(root, rel, flags, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
	if (fd < 0)
		rb_error_set(err, errno, "%s", full);
	return fd;
}

int rb_fs_open_child(int dirfd, const char *name, int flags, bool no_xdev, const char *full, struct rb_error *err)
{
	/* A name the sandbox controls may be a FIFO (or a device): opened for its data it would
	 * block the daemon's thread until a peer came, so it is opened without blocking and taken
	 * only as a regular file. */
	bool data = !(flags & (O_PATH | O_DIRECTORY));
	int fd =
	    openat2_fd(dirfd, name, flags | (data ? O_NONBLOCK : 0),
	               RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (no_xdev ? RESOLVE_NO_XDEV : 0));
	struct stat st;
	if (fd >= 0 && data && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return rb_error_setk(err, RB_ERR_CONFLICT, EINVAL, "%s: not a regular file", full);
	}
	if (fd < 0 && data && errno == ENXIO) /* a FIFO opened to write with no reader */
		return rb_error_setk(err, RB_ERR_CONFLICT, ENXIO, "%s: not a regular file", full);
	if (fd < 0) {
		int e = errno;
		if (e == ELOOP)
			return rb_error_setk(err, RB_ERR_CONFLICT, e, "%s: a symbolic link (never followed)", full);
		if (e == EXDEV)
			return rb_error_setk(err, RB_ERR_FORBIDDEN, e,
			                     "%s: a mount point (an input or the sandbox's own)", full);
		rb_error_set(err, e, "%s", full);
	}
	return fd;
}

int rb_fs_open_parent(const struct rb_serve_fs *fs, const struct rb_fspath *p, bool make, struct rb_error *err)
{
	char shown[PATH_MAX];
	snprintf(shown, sizeof shown, "/%s", strcmp(p->parent, ".") ? p->parent : "");
	int fd = open_dir_in_root(fs->root, p->parent);
	if (fd >= 0 || errno != ENOENT || !make) {
		if (fd < 0)
			rb_error_set(err, errno, "%s", shown);
		return fd;
	}
	/* mkdir -p, each prefix resolved from the root as a whole (links inside stay inside),
	 * each directory made in the one resolved before it. */
	_cleanup_close_ int cur = openat2_fd(fs->root, ".", O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT);
	if (cur < 0)
		return rb_error_set(err, errno, "the sandbox's root");
	char prefix[PATH_MAX];
	size_t n = 0;
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", p->parent);
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		n += (size_t)snprintf(prefix + n, sizeof prefix - n, "%s%s", n ? "/" : "", t);
		int next = open_dir_in_root(fs->root, prefix);
		if (next < 0 && errno == ENOENT) {
			if (mkdirat(cur, t, 0755) < 0 && errno != EEXIST)
				return rb_error_set(err, errno, "mkdir /%s", prefix);
			next =
			    openat2_fd(fs->root, prefix, O_PATH | O_DIRECTORY, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
		}
		if (next < 0)
			return rb_error_set(err, errno, "/%s", prefix);
		close(cur);
		cur = next;
	}
	return rb_steal_fd(&cur);
}

int rb_fs_not_kernel(int fd, const char *full, struct rb_error *err)
{
	static const unsigned long kernel[] = {
	    PROC_SUPER_MAGIC,
	    SYSFS_MAGIC,
	    CGROUP_SUPER_MAGIC,
	    CGROUP2_SUPER_MAGIC,
	    DEBUGFS_MAGIC,
	    SECURITYFS_MAGIC,
	    BPF_FS_MAGIC,
	    TRACEFS_MAGIC,
	    DEVPTS_SUPER_MAGIC,
	    PSTOREFS_MAGIC,
	    EFIVARFS_MAGIC,
	    NSFS_MAGIC,
	    BINFMTFS_MAGIC,
	    SELINUX_MAGIC,
	    SMACK_MAGIC,
	    0x62656570 /* configfs */,
	    0x65735543 /* fusectl */,
	};
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return rb_error_set(err, errno, "statfs %s", full);
	for (size_t i = 0; i < sizeof kernel / sizeof kernel[0]; i++)
		if ((unsigned long)sf.f_type == kernel[i])
			return rb_error_setk(err, RB_ERR_FORBIDDEN, EACCES,
			                     "%s: a kernel interface (proc, sysfs, ...), not a file of the sandbox's",
			                     full);
	return 0;
}

json_t *rb_fs_stat_json(const char *full, const char *name, const struct stat *st, int dirfd)
{
	const char *type = S_ISREG(st->st_mode)   ? "file"
	                   : S_ISDIR(st->st_mode) ? "dir"
	                   : S_ISLNK(st->st_mode) ? "symlink"
	                                          : "other";
	char mode[8], mtime[40], sec[24];
	snprintf(mode, sizeof mode, "%04o", (unsigned)(st->st_mode & 07777));
	struct tm tm;
	time_t t = st->st_mtim.tv_sec;
	gmtime_r(&t, &tm);
	strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(mtime, sizeof mtime, "%s.%06ldZ", sec, st->st_mtim.tv_nsec / 1000);
	json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:I}", "path", full, "name", name, "type", type, "size",
	                      (json_int_t)st->st_size, "mode", mode, "mtime", mtime, "mtime_ns",
	                      (json_int_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
	if (o && S_ISLNK(st->st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dirfd, name[0] ? name : "", target, sizeof target - 1);
		if (n >= 0)
			json_object_set_new(o, "target", json_stringn(target, (size_t)n));
	}
	return o;
}

int rb_fs_parse_mode(const char *s, const char *what, mode_t *out, struct rb_error *err)
{
	char *end;
	errno = 0;
	unsigned long v = s && *s ? strtoul(s, &end, 8) : 0;
	if (!s || !*s || errno || *end || v > 07777)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "%s: an octal mode (\"0644\", at most 07777), not `%s`",
		                     what, s ? s : "");
	*out = (mode_t)v;
	return 0;
}

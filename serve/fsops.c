/* runbox serve's file system calls on a session's sandbox: stat, list, mkdir, remove, rename,
 * each resolved from the sandbox's root (fsroot.h), never following the last component, never
 * crossing a mount where it changes anything, and recorded in the session's run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/log.h"
#include "serve/fsroot.h"
#include "serve/serve.h"

#define LIST_MAX_ENTRIES 100000u
#define LIST_MAX_DEPTH   64u
#define REMOVE_MAX_DEPTH 256u

/* The session's sandbox and path p, parsed: everything a call starts from, and what its
 * record names when it fails. */
struct call {
	struct rb_serve *sv;
	const char *sid, *type; /* type: the event its success records */
	const char *asked;      /* the path as the caller gave it */
	bool parsed;            /* p holds it */
	struct rb_serve_fs fs;
	struct rb_fspath p;
	json_t *data; /* what a failure records beside its path and outcome (taken), or NULL */
	struct rb_error err;
};

static int begin(struct rb_serve *sv, const char *sid, const char *type, const char *path, const char *what,
                 struct call *c)
{
	*c = (struct call){.sv = sv, .sid = sid, .type = type, .asked = path, .fs = {.root = -1, .ws = -1}};
	rb_error_clear(&c->err);
	if (rb_fspath_parse(path, what, &c->p, &c->err) < 0)
		return -1;
	c->parsed = true;
	return rb_serve_sandbox(sv, sid, &c->fs, &c->err);
}

/* A path for a record: as parsed, else as asked (null when it is no UTF-8 string). */
static json_t *path_json(const char *s)
{
	json_t *v = s ? json_stringn(s, strnlen(s, PATH_MAX)) : NULL;
	return v ? v : json_null();
}

unsigned rb_serve_fs_record_failed(struct rb_serve *sv, const char *sid, const char *type, json_t *data,
                                   const struct rb_error *err, unsigned status)
{
	if (!data)
		data = json_object();
	json_t *msg = json_string(err->msg);
	json_object_set_new(data, "error", msg ? msg : json_string("(a message not in UTF-8)"));
	if (err->errnum && strerrorname_np(err->errnum))
		json_object_set_new(data, "errno", json_string(strerrorname_np(err->errnum)));
	json_object_set_new(data, "status", json_integer(status));
	struct rb_error rerr;
	rb_error_clear(&rerr);
	/* A session gone meanwhile has no record to add to; any other miss is the daemon's to say. */
	if (rb_serve_record(sv, sid, type, data, &rerr) < 0 && rerr.kind != RB_ERR_NOT_FOUND)
		rb_warn("session %s: a failed %s not recorded: %s", sid, type, rerr.msg);
	return status;
}

/* The reply of a call that failed, recorded before it as a success is: refused attempts
 * (a `..`, a kernel file system, a link, a missing path) are in the run's record too. */
static unsigned end_error(struct call *c, json_t **reply)
{
	rb_serve_fs_release(&c->fs);
	json_t *d = c->data ? c->data : json_object();
	c->data = NULL;
	json_object_set_new(d, strcmp(c->type, "fs_rename") ? "path" : "from",
	                    path_json(c->parsed ? c->p.full : c->asked));
	return rb_serve_fs_record_failed(c->sv, c->sid, c->type, d, &c->err, rb_serve_error(&c->err, reply));
}

/* fstatat of p's last component from its parent, not following it (the root: itself). */
static int stat_at(int pfd, const struct rb_fspath *p, struct stat *st, struct rb_error *err)
{
	if (fstatat(pfd, p->name[0] ? p->name : "", st, AT_SYMLINK_NOFOLLOW | (p->name[0] ? 0 : AT_EMPTY_PATH)) < 0)
		return rb_error_set(err, errno, "%s", p->full);
	return 0;
}

unsigned rb_serve_fs_stat(struct rb_serve *sv, const char *sid, const char *path, json_t **reply)
{
	struct call c;
	if (begin(sv, sid, "fs_stat", path, "query `path`", &c) < 0)
		return end_error(&c, reply);
	struct rb_fscred cr;
	if (rb_fscred_enter(&c.fs, &cr, &c.err) < 0)
		return end_error(&c, reply);
	_cleanup_close_ int pfd = rb_fs_open_parent(&c.fs, &c.p, false, &c.err);
	struct stat st;
	/* Below a kernel filesystem the daemon would read the kernel's view (a /proc link's target
	 * as the host's root names it), not the sandbox's files. */
	int r = pfd < 0 || rb_fs_not_kernel(pfd, c.p.full, &c.err) < 0 ? -1 : stat_at(pfd, &c.p, &st, &c.err);
	json_t *o = r == 0 ? rb_fs_stat_json(c.p.full, c.p.name, &st, pfd) : NULL;
	rb_fscred_leave(&cr);
	if (r < 0)
		return end_error(&c, reply);
	/* What is revealed is recorded before the reply carries it. */
	if (rb_serve_record(
	        sv, sid, "fs_stat",
	        json_pack("{s:s, s:s}", "path", c.p.full, "type", json_string_value(json_object_get(o, "type"))),
	        &c.err) < 0) {
		json_decref(o);
		return end_error(&c, reply);
	}
	rb_serve_fs_release(&c.fs);
	*reply = o;
	return 200;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of the directory dfd (shown as full), sorted by name, into out: each followed by
 * its own entries while depth > 1. Directories below are opened one component at a time, never
 * through a link. */
static int list_dir(int dfd, const char *full, unsigned depth, json_t *out, bool *truncated, struct rb_error *err)
{
	int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dup_fd < 0)
		return rb_error_set(err, errno, "%s", full);
	_cleanup_closedir_ DIR *d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return rb_error_set(err, errno, "%s", full);
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof *names);
			if (!nn) {
				r = rb_error_set(err, ENOMEM, "%s", full);
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name))) {
			r = rb_error_set(err, ENOMEM, "%s", full);
			break;
		}
		n++;
	}
	if (n)
		qsort(names, n, sizeof *names, cmp_names);
	for (size_t i = 0; i < n && r == 0; i++) {
		if (json_array_size(out) >= LIST_MAX_ENTRIES) {
			*truncated = true;
			break;
		}
		char child[PATH_MAX];
		if ((size_t)snprintf(child, sizeof child, "%s/%s", strcmp(full, "/") ? full : "", names[i]) >=
		    sizeof child)
			continue;
		struct stat st;
		if (fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		json_array_append_new(out, rb_fs_stat_json(child, names[i], &st, dirfd(d)));
		if (depth > 1 && S_ISDIR(st.st_mode)) {
			struct rb_error sub;
			_cleanup_close_ int cfd =
			    rb_fs_open_child(dirfd(d), names[i], O_PATH | O_DIRECTORY, false, child, &sub);
			/* A kernel filesystem's mount point is listed, never what is below it; nor what is
			 * below a directory these ids may not read (it is listed: a list of it is a 403). */
			if (cfd >= 0 && rb_fs_not_kernel(cfd, child, &sub) == 0 &&
			    (r = list_dir(cfd, child, depth - 1, out, truncated, &sub)) < 0) {
				if (sub.errnum == EACCES)
					r = 0;
				else
					*err = sub;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

unsigned rb_serve_fs_list(struct rb_serve *sv, const char *sid, const char *path, unsigned depth, json_t **reply)
{
	struct call c;
	if (begin(sv, sid, "fs_list", path, "query `path`", &c) < 0)
		return end_error(&c, reply);
	if (depth < 1 || depth > LIST_MAX_DEPTH) {
		rb_error_setk(&c.err, RB_ERR_INPUT, 0, "query `depth`: from 1 to %u, not %u", LIST_MAX_DEPTH, depth);
		return end_error(&c, reply);
	}
	struct rb_fscred cr;
	if (rb_fscred_enter(&c.fs, &cr, &c.err) < 0)
		return end_error(&c, reply);
	_cleanup_close_ int pfd = rb_fs_open_parent(&c.fs, &c.p, false, &c.err);
	_cleanup_close_ int dfd = -1;
	if (pfd >= 0)
		dfd = c.p.name[0] ? rb_fs_open_child(pfd, c.p.name, O_PATH | O_DIRECTORY, false, c.p.full, &c.err)
		                  : fcntl(pfd, F_DUPFD_CLOEXEC, 3);
	json_t *entries = json_array();
	bool truncated = false;
	int r = dfd < 0 || rb_fs_not_kernel(dfd, c.p.full, &c.err) < 0
	            ? -1
	            : list_dir(dfd, c.p.full, depth, entries, &truncated, &c.err);
	rb_fscred_leave(&cr);
	if (r < 0) {
		json_decref(entries);
		if (c.err.errnum == ENOTDIR)
			c.err.kind = RB_ERR_CONFLICT;
		return end_error(&c, reply);
	}
	if (rb_serve_record(sv, sid, "fs_list",
	                    json_pack("{s:s, s:i, s:I}", "path", c.p.full, "depth", (int)depth, "entries",
	                              (json_int_t)json_array_size(entries)),
	                    &c.err) < 0) {
		json_decref(entries);
		return end_error(&c, reply);
	}
	rb_serve_fs_release(&c.fs);
	*reply = json_pack("{s:s, s:o}", "path", c.p.full, "entries", entries);
	if (truncated)
		json_object_set_new(*reply, "truncated", json_true());
	return 200;
}

/* The stat object of p, for a reply. */
static json_t *stat_of(const struct call *c, struct rb_error *err)
{
	_cleanup_close_ int pfd = rb_fs_open_parent(&c->fs, &c->p, false, err);
	struct stat st;
	if (pfd < 0 || stat_at(pfd, &c->p, &st, err) < 0)
		return NULL;
	return rb_fs_stat_json(c->p.full, c->p.name, &st, pfd);
}

unsigned rb_serve_fs_mkdir_mode(struct rb_serve *sv, const char *sid, const char *path, bool parents, mode_t mode,
                                json_t **reply)
{
	struct call c;
	if (begin(sv, sid, "fs_mkdir", path, "$.path", &c) < 0)
		return end_error(&c, reply);
	if (!c.p.name[0]) {
		rb_error_setk(&c.err, RB_ERR_CONFLICT, EEXIST, "/: exists");
		return end_error(&c, reply);
	}
	struct rb_fscred cr;
	if (rb_fscred_enter(&c.fs, &cr, &c.err) < 0)
		return end_error(&c, reply);
	_cleanup_close_ int pfd = rb_fs_open_parent(&c.fs, &c.p, parents, &c.err);
	int r = pfd < 0 ? -1 : rb_fs_not_kernel(pfd, c.p.full, &c.err);
	bool made = false;
	if (r == 0 && mkdirat(pfd, c.p.name, 0700) == 0)
		made = true;
	else if (r == 0 && !(errno == EEXIST && parents))
		r = rb_error_set(&c.err, errno, "mkdir %s", c.p.full);
	if (r == 0) {
		/* The mode exactly (no umask), on what was made; an existing one must be a directory. */
		_cleanup_close_ int dfd =
		    rb_fs_open_child(pfd, c.p.name, O_RDONLY | O_DIRECTORY, false, c.p.full, &c.err);
		if (dfd < 0) {
			if (c.err.errnum == ENOTDIR)
				c.err.kind = RB_ERR_CONFLICT;
			r = -1;
		} else if (made && fchmod(dfd, mode) < 0) {
			r = rb_error_set(&c.err, errno, "chmod %s", c.p.full);
		}
	}
	json_t *o = r == 0 ? stat_of(&c, &c.err) : NULL;
	rb_fscred_leave(&cr);
	if (!o)
		return end_error(&c, reply);
	char m[8];
	snprintf(m, sizeof m, "%04o", (unsigned)mode);
	if (rb_serve_record(
	        sv, sid, "fs_mkdir",
	        json_pack("{s:s, s:s, s:b, s:b}", "path", c.p.full, "mode", m, "parents", parents, "made", made),
	        &c.err) < 0) {
		json_decref(o);
		return end_error(&c, reply);
	}
	rb_serve_fs_release(&c.fs);
	*reply = o;
	return 200;
}

unsigned rb_serve_fs_mkdir(struct rb_serve *sv, const char *sid, const char *path, bool parents, json_t **reply)
{
	return rb_serve_fs_mkdir_mode(sv, sid, path, parents, 0755, reply);
}

/* Empties the directory dfd (shown as full): links are unlinked, never followed; a directory
 * below is opened one component at a time without crossing a mount (an input mounted below is
 * an error, never entered). counts what went. */
static int empty_dir(int dfd, const char *full, unsigned depth, uint64_t *count, struct rb_error *err)
{
	if (depth > REMOVE_MAX_DEPTH)
		return rb_error_setk(err, RB_ERR_CONFLICT, ELOOP, "%s: nested deeper than %u", full, REMOVE_MAX_DEPTH);
	int dup_fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dup_fd < 0)
		return rb_error_set(err, errno, "%s", full);
	_cleanup_closedir_ DIR *d = fdopendir(dup_fd);
	if (!d) {
		close(dup_fd);
		return rb_error_set(err, errno, "%s", full);
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char child[PATH_MAX];
		snprintf(child, sizeof child, "%s/%s", full, e->d_name);
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			return rb_error_set(err, errno, "%s", child);
		}
		if (S_ISDIR(st.st_mode)) {
			_cleanup_close_ int cfd =
			    rb_fs_open_child(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY, true, child, err);
			if (cfd < 0 || empty_dir(cfd, child, depth + 1, count, err) < 0)
				return -1;
		}
		if (unlinkat(dirfd(d), e->d_name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
			return rb_error_set(err, errno, "remove %s", child);
		(*count)++;
	}
	return 0;
}

/* 403 when p's last component is a mount point (the sandbox's /workspace, an input): those are
 * the sandbox's structure, never removed or renamed. */
static int not_mount(int pfd, const struct rb_fspath *p, struct rb_error *err)
{
	_cleanup_close_ int fd = rb_fs_open_child(pfd, p->name, O_PATH, true, p->full, err);
	if (fd >= 0 || err->errnum == ELOOP)
		return 0; /* a link is itself removable: only never followed */
	return -1;
}

unsigned rb_serve_fs_remove(struct rb_serve *sv, const char *sid, const char *path, bool recursive, json_t **reply)
{
	struct call c;
	if (begin(sv, sid, "fs_remove", path, "$.path", &c) < 0)
		return end_error(&c, reply);
	if (!c.p.name[0]) {
		rb_error_setk(&c.err, RB_ERR_FORBIDDEN, EBUSY, "/: the sandbox's root is not removed");
		return end_error(&c, reply);
	}
	struct rb_fscred cr;
	if (rb_fscred_enter(&c.fs, &cr, &c.err) < 0)
		return end_error(&c, reply);
	_cleanup_close_ int pfd = rb_fs_open_parent(&c.fs, &c.p, false, &c.err);
	struct stat st;
	uint64_t count = 0;
	int r = pfd < 0 ? -1 : rb_fs_not_kernel(pfd, c.p.full, &c.err);
	if (r == 0)
		r = stat_at(pfd, &c.p, &st, &c.err);
	if (r == 0)
		r = not_mount(pfd, &c.p, &c.err);
	if (r == 0 && S_ISDIR(st.st_mode) && recursive) {
		_cleanup_close_ int dfd =
		    rb_fs_open_child(pfd, c.p.name, O_RDONLY | O_DIRECTORY, true, c.p.full, &c.err);
		r = dfd < 0 ? -1 : empty_dir(dfd, c.p.full, 1, &count, &c.err);
	}
	if (r == 0 && unlinkat(pfd, c.p.name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		r = rb_error_set(&c.err, errno, "remove %s%s", c.p.full,
		                 errno == ENOTEMPTY ? " (a directory with entries: give recursive)" : "");
	else if (r == 0)
		count++;
	rb_fscred_leave(&cr);
	/* What went is recorded, also when a part went before an error (with the error). */
	json_t *d =
	    json_pack("{s:b, s:I, s:b}", "recursive", recursive, "entries", (json_int_t)count, "complete", r == 0);
	if (r < 0) {
		c.data = d;
		return end_error(&c, reply);
	}
	json_object_set_new(d, "path", json_string(c.p.full));
	if (rb_serve_record(sv, sid, "fs_remove", d, &c.err) < 0)
		return end_error(&c, reply);
	rb_serve_fs_release(&c.fs);
	*reply = json_pack("{s:s, s:b}", "path", c.p.full, "removed", 1);
	return 200;
}

unsigned rb_serve_fs_rename(struct rb_serve *sv, const char *sid, const char *from, const char *to, bool overwrite,
                            json_t **reply)
{
	struct call c;
	struct rb_fspath top = {0};
	int r = begin(sv, sid, "fs_rename", from, "$.from", &c);
	bool to_parsed = r == 0 && rb_fspath_parse(to, "$.to", &top, &c.err) == 0;
	c.data = json_pack("{s:o, s:b}", "to", path_json(to_parsed ? top.full : to), "overwrite", overwrite);
	if (!to_parsed)
		return end_error(&c, reply);
	if (!c.p.name[0] || !top.name[0]) {
		rb_error_setk(&c.err, RB_ERR_FORBIDDEN, EBUSY, "/: the sandbox's root is not renamed");
		return end_error(&c, reply);
	}
	struct rb_fscred cr;
	if (rb_fscred_enter(&c.fs, &cr, &c.err) < 0)
		return end_error(&c, reply);
	_cleanup_close_ int fpfd = rb_fs_open_parent(&c.fs, &c.p, false, &c.err);
	_cleanup_close_ int tpfd = fpfd < 0 ? -1 : rb_fs_open_parent(&c.fs, &top, false, &c.err);
	r = tpfd < 0 ? -1 : 0;
	if (r == 0)
		r = rb_fs_not_kernel(fpfd, c.p.full, &c.err) < 0 || rb_fs_not_kernel(tpfd, top.full, &c.err) < 0 ? -1
		                                                                                                 : 0;
	if (r == 0)
		r = not_mount(fpfd, &c.p, &c.err);
	struct stat tst;
	if (r == 0 && fstatat(tpfd, top.name, &tst, AT_SYMLINK_NOFOLLOW) == 0)
		r = not_mount(tpfd, &top, &c.err);
	/* The names themselves move: a link is renamed, never followed. */
	if (r == 0 && renameat2(fpfd, c.p.name, tpfd, top.name, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
		int e = errno;
		r = rb_error_set(&c.err, e, "rename %s to %s", c.p.full, top.full);
		if (e == EXDEV)
			c.err.kind = RB_ERR_CONFLICT; /* another file system: not moved by a rename */
		else if (e == EEXIST)
			rb_error_prefix(&c.err, "overwrite not given");
	}
	json_t *o = NULL;
	if (r == 0) {
		struct stat st;
		if (fstatat(tpfd, top.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			r = rb_error_set(&c.err, errno, "%s", top.full);
		else
			o = rb_fs_stat_json(top.full, top.name, &st, tpfd);
	}
	rb_fscred_leave(&cr);
	if (r < 0)
		return end_error(&c, reply);
	json_object_set_new(c.data, "from", json_string(c.p.full));
	if (rb_serve_record(sv, sid, "fs_rename", rb_steal_ptr(&c.data), &c.err) < 0) {
		json_decref(o);
		return end_error(&c, reply);
	}
	rb_serve_fs_release(&c.fs);
	*reply = o;
	return 200;
}

/* The JSON bodies of POST fs/mkdir, fs/remove, fs/rename: unknown keys and wrong types are
 * named by their JSON path. */
static int body_keys(const json_t *body, const char *const *known, struct rb_error *err)
{
	struct rb_jsonck ck = {"request", "body", err};
	if (!json_is_object(body))
		return rb_jsonck_expected(&ck, "$", "an object", body);
	return rb_jsonck_keys(&ck, "$", body, known);
}

static int body_str(const json_t *body, const char *key, bool required, const char **out, struct rb_error *err)
{
	struct rb_jsonck ck = {"request", "body", err};
	char p[64];
	snprintf(p, sizeof p, "$.%s", key);
	json_t *v = json_object_get(body, key);
	*out = json_string_value(v);
	if (!v)
		return required ? rb_jsonck_bad(&ck, p, "missing") : 0;
	if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
		return rb_jsonck_expected(&ck, p, "a string without NUL", v);
	return 0;
}

static int body_bool(const json_t *body, const char *key, bool *out, struct rb_error *err)
{
	struct rb_jsonck ck = {"request", "body", err};
	char p[64];
	snprintf(p, sizeof p, "$.%s", key);
	json_t *v = json_object_get(body, key);
	*out = json_is_true(v);
	if (v && !json_is_boolean(v))
		return rb_jsonck_expected(&ck, p, "true or false", v);
	return 0;
}

/* A body refused: recorded as the call it was for, with the path it named (if any). */
static unsigned body_failed(struct rb_serve *sv, const char *sid, const char *type, const char *key, const char *path,
                            const struct rb_error *err, json_t **reply)
{
	return rb_serve_fs_record_failed(sv, sid, type, json_pack("{s:o}", key, path_json(path)), err,
	                                 rb_serve_error(err, reply));
}

unsigned rb_serve_fs_mkdir_json(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply)
{
	static const char *const known[] = {"path", "parents", "mode", NULL};
	struct rb_error err;
	rb_error_clear(&err);
	const char *path = NULL, *ms;
	bool parents;
	mode_t mode = 0755;
	if (body_keys(body, known, &err) < 0 || body_str(body, "path", true, &path, &err) < 0 ||
	    body_bool(body, "parents", &parents, &err) < 0 || body_str(body, "mode", false, &ms, &err) < 0 ||
	    (ms && rb_fs_parse_mode(ms, "$.mode", &mode, &err) < 0))
		return body_failed(sv, sid, "fs_mkdir", "path", path, &err, reply);
	return rb_serve_fs_mkdir_mode(sv, sid, path, parents, mode, reply);
}

unsigned rb_serve_fs_remove_json(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply)
{
	static const char *const known[] = {"path", "recursive", NULL};
	struct rb_error err;
	rb_error_clear(&err);
	const char *path = NULL;
	bool recursive;
	if (body_keys(body, known, &err) < 0 || body_str(body, "path", true, &path, &err) < 0 ||
	    body_bool(body, "recursive", &recursive, &err) < 0)
		return body_failed(sv, sid, "fs_remove", "path", path, &err, reply);
	return rb_serve_fs_remove(sv, sid, path, recursive, reply);
}

unsigned rb_serve_fs_rename_json(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply)
{
	static const char *const known[] = {"from", "to", "overwrite", NULL};
	struct rb_error err;
	rb_error_clear(&err);
	const char *from = NULL, *to;
	bool overwrite;
	if (body_keys(body, known, &err) < 0 || body_str(body, "from", true, &from, &err) < 0 ||
	    body_str(body, "to", true, &to, &err) < 0 || body_bool(body, "overwrite", &overwrite, &err) < 0)
		return body_failed(sv, sid, "fs_rename", "from", from, &err, reply);
	return rb_serve_fs_rename(sv, sid, from, to, overwrite, reply);
}

/* File bodies of runbox serve: a PUT streamed into a temporary file beside its target (hashed on
 * the way, written by the sandbox's writer so its pages are the session's memory, recorded, then
 * renamed into place), a GET handed out as an open descriptor, both
 * resolved from the sandbox's root (fsroot.h) and bounded; never a whole body in memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "runtime/sandbox/writer.h"
#include "serve/fsroot.h"
#include "serve/serve.h"

struct rb_serve_put {
	struct rb_serve *sv; /* a failure midway is recorded in its session's run */
	char sid[64];
	struct rb_serve_fs fs;
	struct rb_fspath p;
	int pfd, fd;
	int writer; /* the sandbox's writer (rb_serve_sandbox_writer): every byte goes through it */
	char tmp[40];
	mode_t mode;
	uint64_t size, cap;
	EVP_MD_CTX *md;
	bool ephemeral; /* recorded by path and size only */
	bool parsed;    /* p holds the path */
};

void rb_serve_put_ephemeral(struct rb_serve_put *put)
{
	put->ephemeral = true;
}

static void put_free(struct rb_serve_put *p)
{
	if (p->writer >= 0)
		close(p->writer);
	if (p->fd >= 0)
		close(p->fd);
	if (p->tmp[0] && p->pfd >= 0) {
		struct rb_fscred cr;
		struct rb_error e;
		if (rb_fscred_enter(&p->fs, &cr, &e) == 0) {
			unlinkat(p->pfd, p->tmp, 0);
			rb_fscred_leave(&cr);
		}
	}
	if (p->pfd >= 0)
		close(p->pfd);
	rb_serve_fs_release(&p->fs);
	EVP_MD_CTX_free(p->md);
	free(p);
}

void rb_serve_put_abort(struct rb_serve_put *p)
{
	if (p)
		put_free(p);
}

/* A PUT that failed, recorded as file_write with the path (as asked, before it parsed), the
 * bytes taken so far and the outcome: refused writes are in the run's record too. */
static unsigned write_failed(const struct rb_serve_put *p, const char *asked, const struct rb_error *err,
                             unsigned status)
{
	const char *path = p->parsed ? p->p.full : asked;
	json_t *v = path ? json_stringn(path, strnlen(path, PATH_MAX)) : NULL;
	return rb_serve_fs_record_failed(
	    p->sv, p->sid, "file_write",
	    json_pack("{s:o, s:I}", "path", v ? v : json_null(), "size", (json_int_t)p->size), err, status);
}

unsigned rb_serve_put_begin(struct rb_serve *sv, const char *sid, const char *path, mode_t mode, bool parents,
                            uint64_t cap, struct rb_serve_put **out, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	*out = NULL;
	struct rb_serve_put *p = calloc(1, sizeof *p);
	if (!p)
		return rb_error_set(&err, ENOMEM, "PUT"), rb_serve_error(&err, reply);
	p->pfd = p->fd = p->writer = p->fs.root = p->fs.ws = -1;
	p->sv = sv;
	p->mode = mode;
	p->cap = cap;
	snprintf(p->sid, sizeof p->sid, "%s", sid);
	p->md = EVP_MD_CTX_new();
	if (!p->md || !EVP_DigestInit_ex(p->md, EVP_sha256(), NULL)) {
		rb_error_set(&err, ENOMEM, "sha256");
		goto fail;
	}
	if (rb_fspath_parse(path, "query `path`", &p->p, &err) < 0)
		goto fail;
	p->parsed = true;
	if (rb_serve_sandbox(sv, sid, &p->fs, &err) < 0)
		goto fail;
	if (!p->p.name[0]) {
		rb_error_setk(&err, RB_ERR_CONFLICT, EISDIR, "/: a directory");
		goto fail;
	}
	struct rb_fscred cr;
	if (rb_fscred_enter(&p->fs, &cr, &err) < 0)
		goto fail;
	int r = (p->pfd = rb_fs_open_parent(&p->fs, &p->p, parents, &err)) < 0 ? -1 : 0;
	if (r == 0)
		r = rb_fs_not_kernel(p->pfd, p->p.full, &err);
	/* What is there must be a file: a directory or a link is never written through. */
	struct stat st;
	if (r == 0 && fstatat(p->pfd, p->p.name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
		r = rb_error_setk(&err, RB_ERR_CONFLICT, S_ISDIR(st.st_mode) ? EISDIR : ELOOP, "%s: %s", p->p.full,
		                  S_ISDIR(st.st_mode)   ? "a directory"
		                  : S_ISLNK(st.st_mode) ? "a symbolic link (never followed)"
		                                        : "not a regular file");
	char hex[17];
	if (r == 0 && rb_random_hex(hex, sizeof hex) < 0)
		r = rb_error_set(&err, EIO, "getrandom");
	if (r == 0) {
		snprintf(p->tmp, sizeof p->tmp, ".runbox-put-%s", hex);
		p->fd = rb_fs_open_child(p->pfd, p->tmp, O_WRONLY | O_CREAT | O_EXCL, true, p->p.full, &err);
		if (p->fd < 0) {
			p->tmp[0] = '\0';
			r = -1;
		}
	}
	rb_fscred_leave(&cr);
	if (r == 0 && (p->writer = rb_serve_sandbox_writer(sv, sid, &err)) < 0)
		r = -1;
	if (r == 0)
		r = rb_writer_file(p->writer, p->fd, &err);
	if (r < 0)
		goto fail;
	*out = p;
	return 200;
fail:;
	unsigned stc = write_failed(p, path, &err, rb_serve_error(&err, reply));
	put_free(p);
	return stc;
}

int rb_serve_put_write(struct rb_serve_put *p, const void *data, size_t len, struct rb_error *err)
{
	int r = 0;
	if (p->size + len > p->cap)
		r = rb_error_setk(err, RB_ERR_CONFLICT, EFBIG, "%s: over the cap of %" PRIu64 " bytes", p->p.full,
		                  p->cap);
	else if (rb_writer_data(p->writer, data, len, p->size, err) < 0)
		r = rb_error_prefix(err, "write %s", p->p.full);
	if (r < 0) {
		/* Recorded with the status the API answers it with (a body over its cap: 413). */
		write_failed(p, NULL, err, err->errnum == EFBIG ? 413 : rb_error_http_status(rb_error_kind_of(err)));
		return -1;
	}
	EVP_DigestUpdate(p->md, data, len);
	p->size += len;
	return 0;
}

unsigned rb_serve_put_finish(struct rb_serve *sv, struct rb_serve_put *p, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	unsigned char md[32];
	unsigned mdlen = 0;
	char digest[72] = "sha256:";
	EVP_DigestFinal_ex(p->md, md, &mdlen);
	for (unsigned i = 0; i < 32; i++)
		snprintf(digest + 7 + 2 * (size_t)i, 3, "%02x", md[i]);
	uint64_t written = 0;
	int r = rb_writer_sync(p->writer, &written, &err) < 0 ? rb_error_prefix(&err, "write %s", p->p.full) : 0;
	if (r == 0 && written != p->size)
		r = rb_error_set(&err, EIO, "write %s: %" PRIu64 " of %" PRIu64 " bytes written", p->p.full, written,
		                 p->size);
	if (r == 0 && fchmod(p->fd, p->mode) < 0)
		r = rb_error_set(&err, errno, "chmod %s", p->p.full);
	/* Written: the writer serves the session's next call. */
	if (r == 0)
		rb_serve_sandbox_writer_done(sv, p->sid, rb_steal_fd(&p->writer));
	if (r == 0 && close(p->fd) < 0)
		r = rb_error_set(&err, errno, "close %s", p->p.full);
	p->fd = -1;
	char mode[8];
	snprintf(mode, sizeof mode, "%04o", (unsigned)p->mode);
	/* Recorded, durably, before the file is in place at its path. */
	if (r == 0 && p->ephemeral)
		r = rb_serve_record(sv, p->sid, "file_write",
		                    json_pack("{s:s, s:I, s:s, s:b}", "path", p->p.full, "size", (json_int_t)p->size,
		                              "mode", mode, "ephemeral", 1),
		                    &err);
	else if (r == 0)
		r = rb_serve_record(sv, p->sid, "file_write",
		                    json_pack("{s:s, s:I, s:s, s:s}", "path", p->p.full, "size", (json_int_t)p->size,
		                              "sha256", digest, "mode", mode),
		                    &err);
	struct rb_fscred cr;
	if (r == 0 && rb_fscred_enter(&p->fs, &cr, &err) == 0) {
		/* The temporary name moves over the target: a link put there meanwhile is replaced,
		 * never followed. */
		if (renameat(p->pfd, p->tmp, p->pfd, p->p.name) < 0)
			r = rb_error_set(&err, errno, "rename into %s", p->p.full);
		else
			p->tmp[0] = '\0';
		rb_fscred_leave(&cr);
	} else if (r == 0) {
		r = -1;
	}
	unsigned st = 200;
	if (r < 0)
		st = write_failed(p, NULL, &err, rb_serve_error(&err, reply));
	else if (p->ephemeral)
		*reply = json_pack("{s:s, s:I, s:b}", "path", p->p.full, "size", (json_int_t)p->size, "ephemeral", 1);
	else
		*reply = json_pack("{s:s, s:I, s:s}", "path", p->p.full, "size", (json_int_t)p->size, "sha256", digest);
	put_free(p);
	return st;
}

/* A GET that failed, recorded as file_read with the path and the outcome (a file not revealed is
 * still an attempt in the run's record). */
static unsigned read_failed(struct rb_serve *sv, const char *sid, const char *path, const struct rb_error *err,
                            json_t **reply)
{
	json_t *v = path ? json_stringn(path, strnlen(path, PATH_MAX)) : NULL;
	return rb_serve_fs_record_failed(sv, sid, "file_read", json_pack("{s:o}", "path", v ? v : json_null()), err,
	                                 rb_serve_error(err, reply));
}

unsigned rb_serve_get_open(struct rb_serve *sv, const char *sid, const char *path, uint64_t max_bytes, int *out,
                           uint64_t *size, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	*out = -1;
	*size = 0;
	struct rb_fspath p;
	struct rb_serve_fs fs = {.root = -1, .ws = -1};
	bool parsed = rb_fspath_parse(path, "query `path`", &p, &err) == 0;
	if (!parsed || rb_serve_sandbox(sv, sid, &fs, &err) < 0)
		return read_failed(sv, sid, parsed ? p.full : path, &err, reply);
	if (max_bytes > RB_SERVE_STREAM_CAP)
		max_bytes = RB_SERVE_STREAM_CAP;
	struct rb_fscred cr;
	if (rb_fscred_enter(&fs, &cr, &err) < 0) {
		rb_serve_fs_release(&fs);
		return read_failed(sv, sid, p.full, &err, reply);
	}
	_cleanup_close_ int pfd = rb_fs_open_parent(&fs, &p, false, &err);
	_cleanup_close_ int opath = -1, fd = -1;
	int r = pfd < 0 ? -1 : 0;
	struct stat st = {0};
	if (r == 0 && !p.name[0])
		r = rb_error_setk(&err, RB_ERR_CONFLICT, EISDIR, "/: not a regular file");
	if (r == 0 && (opath = rb_fs_open_child(pfd, p.name, O_PATH, false, p.full, &err)) < 0)
		r = -1;
	if (r == 0 && fstat(opath, &st) < 0)
		r = rb_error_set(&err, errno, "stat %s", p.full);
	if (r == 0 && S_ISLNK(st.st_mode))
		r = rb_error_setk(&err, RB_ERR_CONFLICT, ELOOP, "%s: a symbolic link (never followed)", p.full);
	else if (r == 0 && !S_ISREG(st.st_mode))
		r = rb_error_setk(&err, RB_ERR_CONFLICT, EISDIR, "%s: not a regular file", p.full);
	if (r == 0)
		r = rb_fs_not_kernel(opath, p.full, &err);
	if (r == 0 && (uint64_t)st.st_size > max_bytes)
		r = rb_error_setk(&err, RB_ERR_CONFLICT, EFBIG, "%s: %lld bytes, over the cap of %" PRIu64, p.full,
		                  (long long)st.st_size, max_bytes);
	/* Opened for reading only now that it is known to be a regular file (no device, no fifo
	 * is ever opened): the same inode, reopened through this thread's descriptor table. */
	if (r == 0) {
		char self[64];
		snprintf(self, sizeof self, "/proc/thread-self/fd/%d", opath);
		if ((fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
			r = rb_error_set(&err, errno, "open %s", p.full);
	}
	rb_fscred_leave(&cr);
	rb_serve_fs_release(&fs);
	/* What is revealed is recorded before the reply carries it. */
	if (r == 0)
		r = rb_serve_record(sv, sid, "file_read",
		                    json_pack("{s:s, s:I}", "path", p.full, "size", (json_int_t)st.st_size), &err);
	if (r < 0)
		return read_failed(sv, sid, p.full, &err, reply);
	*out = rb_steal_fd(&fd);
	*size = (uint64_t)st.st_size;
	return 200;
}

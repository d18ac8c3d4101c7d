/* Snapshots of a session's /workspace for runbox serve: written as tar+zstd (libarchive) into
 * the content-addressed store, and hydrated back, bounded, every member checked before any is
 * written, each written through openat2 below /workspace that follows no link and crosses no mount. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/cleanup.h"
#include "common/paths.h"
#include "common/util.h"
#include "ledger/ledger.h"
#include "runtime/run/artifacts.h"
#include "runtime/sandbox/writer.h"
#include "serve/fsroot.h"
#include "serve/known.h"
#include "serve/manifest.h"
#include "serve/serve.h"

#define CHUNK (64u << 10)

/* A sha256 over what passes, and its count. */
struct hashed {
	EVP_MD_CTX *md;
	uint64_t bytes;
};

static void hashed_hex(struct hashed *h, char digest[RB_ARTIFACT_DIGEST_LEN])
{
	unsigned char md[32];
	unsigned n = 0;
	EVP_DigestFinal_ex(h->md, md, &n);
	snprintf(digest, RB_ARTIFACT_DIGEST_LEN, "sha256:");
	for (unsigned i = 0; i < 32; i++)
		snprintf(digest + 7 + 2 * (size_t)i, 3, "%02x", md[i]);
}

/* An unnamed file in dir (O_TMPFILE): nothing is left behind by a crash. */
static int spool_file(const char *dir, struct rb_error *err)
{
	if (rb_mkdir_p(dir, 0700, err) < 0)
		return -1;
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd >= 0 ? fd : rb_error_set(err, errno, "a temporary file in `%s`", dir);
	/* A file system without O_TMPFILE: a named one, unlinked at once. */
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/.tmp-spool-XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "a temporary file in `%s`", dir);
	unlink(path);
	return fd;
}

/* ---- persist ---------------------------------------------------------------------------- */

struct packer {
	struct archive *a;
	int out;
	struct hashed h;
	uint64_t members, bytes, cap_in;
	json_t *skipped;   /* links leaving /workspace: a hydrate refuses them, so they are not kept */
	dev_t dev;         /* /workspace's: anything on another device (an input, a skill) is left out */
	int top;           /* /workspace */
	json_t *ephemeral; /* a manifest's ephemeral files ({"rel": true}), left out; or NULL */
	struct rb_error *err;
	bool failed;
};

static la_ssize_t pack_write(struct archive *a, void *ctx, const void *buf, size_t len)
{
	struct packer *p = ctx;
	if (p->h.bytes + len > p->cap_in) {
		rb_error_setk(p->err, RB_ERR_CONFLICT, EFBIG, "snapshot: over %" PRIu64 " bytes compressed", p->cap_in);
		p->failed = true;
		archive_set_error(a, EFBIG, "over the cap");
		return -1;
	}
	if (rb_write_all(p->out, buf, len) < 0) {
		rb_error_set(p->err, errno, "snapshot: write the store's temporary file");
		p->failed = true;
		archive_set_error(a, errno, "write");
		return -1;
	}
	EVP_DigestUpdate(p->h.md, buf, len);
	p->h.bytes += len;
	return (la_ssize_t)len;
}

static int pack_fail(struct packer *p, const char *what)
{
	if (!p->failed)
		rb_error_setk(p->err, RB_ERR_INTERNAL, archive_errno(p->a), "snapshot: %s: %s", what,
		              archive_error_string(p->a) ? archive_error_string(p->a) : "libarchive failed");
	p->failed = true;
	return -1;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names of the directory dfd, sorted (a snapshot of the same tree is the same archive). */
static int dir_names(int dfd, char ***out, size_t *n, struct rb_error *err)
{
	*out = NULL;
	*n = 0;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "open a directory of /workspace");
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rb_error_set(err, errno, "open a directory of /workspace");
	}
	size_t cap = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 32;
			char **nn = realloc(*out, cap * sizeof **out);
			if (!nn)
				return rb_error_set(err, ENOMEM, "snapshot");
			*out = nn;
		}
		if (!((*out)[*n] = strdup(e->d_name)))
			return rb_error_set(err, ENOMEM, "snapshot");
		(*n)++;
	}
	if (*n)
		qsort(*out, *n, sizeof **out, cmp_names);
	return 0;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* The tree's link at rel (below /workspace, opened without following a link or leaving its mount),
 * for rb_fspath_link_inside. */
static bool tree_link(void *ctx, const char *rel, char *target, size_t len)
{
	const struct packer *p = ctx;
	struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV};
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, p->top, rel, &how, sizeof how);
	ssize_t n = fd < 0 ? -1 : readlinkat(fd, "", target, len - 1);
	if (n < 0)
		return false;
	target[n] = '\0';
	return true;
}

static int pack_entry(struct packer *p, int dfd, const char *name, const char *rel, const struct stat *st, int fd)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return rb_error_set(p->err, ENOMEM, "snapshot");
	archive_entry_set_pathname(e, rel);
	archive_entry_set_mode(e, st->st_mode & (S_IFMT | 07777));
	archive_entry_set_uid(e, 0); /* hydrated as the sandbox's root, whoever wrote it */
	archive_entry_set_gid(e, 0);
	archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (S_ISREG(st->st_mode))
		archive_entry_set_size(e, st->st_size);
	if (S_ISLNK(st->st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dfd, name, target, sizeof target - 1);
		if (n < 0) {
			archive_entry_free(e);
			return rb_error_set(p->err, errno, "snapshot: readlink /workspace/%s", rel);
		}
		target[n] = '\0';
		if (!rb_fspath_link_inside(rel, target, tree_link, p)) {
			archive_entry_free(e);
			p->members--;
			if (json_array_size(p->skipped) < 100)
				json_array_append_new(p->skipped, json_sprintf("/workspace/%s", rel));
			return 0;
		}
		archive_entry_set_symlink(e, target);
	}
	int r = archive_write_header(p->a, e) == ARCHIVE_OK ? 0 : pack_fail(p, rel);
	archive_entry_free(e);
	if (r < 0 || !S_ISREG(st->st_mode))
		return r;
	/* The size in the header, exactly: a file that grew is cut there, one that shrank padded. */
	_cleanup_free_ char *buf = malloc(CHUNK);
	if (!buf)
		return rb_error_set(p->err, ENOMEM, "snapshot");
	uint64_t left = (uint64_t)st->st_size;
	while (left) {
		ssize_t n = read(fd, buf, left < CHUNK ? (size_t)left : CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return rb_error_set(p->err, errno, "snapshot: read /workspace/%s", rel);
		if (n == 0) {
			memset(buf, 0, CHUNK);
			n = (ssize_t)(left < CHUNK ? left : CHUNK);
		}
		if (archive_write_data(p->a, buf, (size_t)n) < 0)
			return pack_fail(p, rel);
		left -= (uint64_t)n;
	}
	return 0;
}

/* The tree below dfd (rel its name inside /workspace, "" at the top), depth first. */
static int pack_dir(struct packer *p, int dfd, const char *rel, unsigned depth)
{
	if (depth > 256)
		return rb_error_setk(p->err, RB_ERR_CONFLICT, ELOOP, "snapshot: /workspace/%s: nested too deep", rel);
	char **names;
	size_t n;
	if (dir_names(dfd, &names, &n, p->err) < 0)
		return -1;
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		char child[PATH_MAX];
		if ((size_t)snprintf(child, sizeof child, "%s%s%s", rel, rel[0] ? "/" : "", names[i]) >= sizeof child) {
			r = rb_error_setk(p->err, RB_ERR_CONFLICT, ENAMETOOLONG,
			                  "snapshot: a path too long below /workspace/%s", rel);
			break;
		}
		if (!strncmp(names[i], ".runbox-put-", 12))
			continue; /* a PUT under way */
		if (p->ephemeral && json_object_get(p->ephemeral, child))
			continue; /* never in a snapshot (SPEC "runbox serve") */
		struct stat st;
		if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno == ENOENT)
				continue;
			r = rb_error_set(p->err, errno, "snapshot: /workspace/%s", child);
			break;
		}
		if (st.st_dev != p->dev)
			continue; /* a mount: an input, a skill, never the workspace's own */
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
			continue; /* a fifo or a socket holds nothing to keep */
		if (++p->members > RB_SERVE_SNAPSHOT_MAX_MEMBERS) {
			r = rb_error_setk(p->err, RB_ERR_CONFLICT, EFBIG, "snapshot: over %u entries in /workspace",
			                  RB_SERVE_SNAPSHOT_MAX_MEMBERS);
			break;
		}
		char shown[PATH_MAX + 12];
		snprintf(shown, sizeof shown, "/workspace/%s", child);
		_cleanup_close_ int fd = -1;
		if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
			/* Opened without following or crossing anything; checked again once open. */
			fd = rb_fs_open_child(dfd, names[i],
			                      (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0) | O_RDONLY | O_NONBLOCK, true,
			                      shown, p->err);
			if (fd < 0 && p->err->errnum == EXDEV) {
				p->members--;
				continue; /* a mount of the same device */
			}
			if (fd < 0 || fstat(fd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))) {
				r = fd < 0 ? -1
				           : rb_error_setk(p->err, RB_ERR_CONFLICT, 0, "snapshot: %s changed", shown);
				break;
			}
		}
		if (S_ISREG(st.st_mode)) {
			p->bytes += (uint64_t)st.st_size;
			if (p->bytes > RB_SERVE_SNAPSHOT_MAX_BYTES) {
				r = rb_error_setk(p->err, RB_ERR_CONFLICT, EFBIG,
				                  "snapshot: over %llu bytes in /workspace",
				                  (unsigned long long)RB_SERVE_SNAPSHOT_MAX_BYTES);
				break;
			}
		}
		char arel[PATH_MAX + 2];
		snprintf(arel, sizeof arel, "%s%s", child, S_ISDIR(st.st_mode) ? "/" : "");
		r = pack_entry(p, dfd, names[i], arel, &st, fd);
		if (r == 0 && S_ISDIR(st.st_mode))
			r = pack_dir(p, fd, child, depth + 1);
	}
	free_names(names, n);
	return r;
}

/* Moves the finished object (fd, unnamed) into the store under digest; an object already
 * there is kept. */
static int store_commit(const char *store, int fd, const char *digest, struct rb_error *err)
{
	char path[PATH_MAX], dir[PATH_MAX];
	if (rb_artifact_path(store, digest, path, err) < 0)
		return -1;
	snprintf(dir, sizeof dir, "%s", path);
	*strrchr(dir, '/') = '\0';
	if (rb_mkdir_p(dir, 0755, err) < 0)
		return -1;
	if (fchmod(fd, 0644) < 0 || fsync(fd) < 0)
		return rb_error_set(err, errno, "snapshot: the store's object");
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST)
		return rb_error_set(err, errno, "snapshot: link `%s`%s", path,
		                    errno == ENOENT ? " (the store's file system has no O_TMPFILE)" : "");
	return rb_artifact_sync(store, err);
}

unsigned rb_serve_snapshot(struct rb_serve *sv, const char *sid, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_serve_fs fs;
	if (rb_serve_sandbox(sv, sid, &fs, &err) < 0)
		return rb_serve_error(&err, reply);
	char store[PATH_MAX + 16], tenant[sizeof fs.tenant];
	snprintf(store, sizeof store, "%s/artifacts", fs.state_dir);
	snprintf(tenant, sizeof tenant, "%s", fs.tenant);
	struct packer p = {.out = -1,
	                   .cap_in = RB_SERVE_SNAPSHOT_MAX_BYTES,
	                   .err = &err,
	                   .skipped = json_array(),
	                   .ephemeral = rb_serve_session_ephemeral(sv, sid)};
	struct stat wst = {0};
	_cleanup_close_ int top = -1;
	int r = 0;
	if ((p.h.md = EVP_MD_CTX_new()) == NULL || !EVP_DigestInit_ex(p.h.md, EVP_sha256(), NULL))
		r = rb_error_set(&err, ENOMEM, "sha256");
	if (r == 0 && ((top = openat(fs.ws, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 || fstat(top, &wst) < 0))
		r = rb_error_set(&err, errno, "snapshot: open /workspace");
	if (r == 0 && (p.out = spool_file(store, &err)) < 0)
		r = -1;
	p.dev = wst.st_dev;
	p.top = top;
	if (r == 0 && (!(p.a = archive_write_new()) || archive_write_set_format_pax_restricted(p.a) != ARCHIVE_OK ||
	               archive_write_add_filter_zstd(p.a) != ARCHIVE_OK ||
	               /* Not padded to a 10 KiB block: zeros after the zstd frame are no zstd. */
	               archive_write_set_bytes_in_last_block(p.a, 1) != ARCHIVE_OK ||
	               archive_write_open2(p.a, &p, NULL, pack_write, NULL, NULL) != ARCHIVE_OK))
		r = p.a ? pack_fail(&p, "libarchive (tar, zstd)") : rb_error_set(&err, ENOMEM, "snapshot");
	/* Read as the daemon, within /workspace's own mount only: nothing of the host is there. */
	if (r == 0)
		r = pack_dir(&p, top, "", 0);
	if (r == 0 && archive_write_close(p.a) != ARCHIVE_OK)
		r = pack_fail(&p, "finish the archive");
	if (p.a)
		archive_write_free(p.a);
	char digest[RB_ARTIFACT_DIGEST_LEN] = "";
	struct rb_serve_known *known = rb_serve_known(sv);
	unsigned over = 0; /* the tenant's bound of snapshot bytes: 507 */
	bool reserved = false;
	if (r == 0) {
		hashed_hex(&p.h, digest);
		/* Held to the tenant's bound before a byte of it is in the store. */
		over = rb_serve_known_snapshot_reserve(known, store, digest, tenant, p.h.bytes, &err);
		reserved = over == 0;
		r = reserved ? store_commit(store, p.out, digest, &err) : -1;
	}
	if (p.out >= 0)
		close(p.out);
	EVP_MD_CTX_free(p.h.md);
	json_decref(p.ephemeral);
	rb_serve_fs_release(&fs);
	/* Recorded before the reply names it: the store keeps what a snapshot event names. Then
	 * the daemon answers for it (GET /v1/snapshots/REF, a create's or a hydrate's snapshot). */
	bool stored = r == 0;
	if (stored)
		r = rb_serve_record(sv, sid, "snapshot",
		                    json_pack("{s:s, s:s, s:I, s:I, s:I, s:O}", "ref", digest, "digest", digest, "size",
		                              (json_int_t)p.h.bytes, "members", (json_int_t)p.members, "bytes",
		                              (json_int_t)p.bytes, "skipped_links", p.skipped),
		                    &err);
	if (reserved && rb_serve_known_snapshot_settle(known, digest, tenant, p.h.bytes, r == 0, &err) < 0)
		r = -1;
	if (r < 0) {
		json_decref(p.skipped);
		unsigned st = rb_serve_error(&err, reply);
		if (over)
			st = over;
		if (stored)
			return st; /* its record is what failed */
		/* Refused (over the tenant's bound, over 100000 entries) or failed: recorded too, with no
		 * ref (nothing of it is kept in the store). */
		return rb_serve_fs_record_failed(sv, sid, "snapshot",
		                                 json_pack("{s:I, s:I, s:I}", "size", (json_int_t)p.h.bytes, "members",
		                                           (json_int_t)p.members, "bytes", (json_int_t)p.bytes),
		                                 &err, st);
	}
	*reply = json_pack("{s:s, s:I, s:I, s:I, s:o}", "ref", digest, "size", (json_int_t)p.h.bytes, "members",
	                   (json_int_t)p.members, "bytes", (json_int_t)p.bytes, "skipped_links", p.skipped);
	return 200;
}

/* ---- hydrate ---------------------------------------------------------------------------- */

struct rb_serve_hydrate {
	char sid[64];
	struct rb_serve_hydrate_bounds b;
	int fd; /* the spooled upload */
	struct hashed h;
};

static int ref_ok(const char *ref, struct rb_error *err)
{
	if (!ref || strncmp(ref, "sha256:", 7) != 0 || !rb_artifact_digest_valid(ref))
		return rb_error_setk(err, RB_ERR_INPUT, 0, "snapshot: a reference is \"sha256:<64 hex>\", not `%s`",
		                     ref ? ref : "");
	return 0;
}

/* Opens the snapshot object of ref, which a snapshot event must name (never another object of
 * the store), of tenant's sessions when tenant is given: a reference is no capability, so one
 * tenant's snapshot never restores into, nor is read by, another's (404, as for none). The
 * daemon's table of known snapshots answers (serve/known.h): a ref of none of them, or of
 * another tenant's, is a 404 without the ledger or the disk. */
static int open_snapshot(struct rb_serve *sv, const char *state_dir, const char *ref, const char *tenant,
                         uint64_t *size, struct rb_error *err)
{
	if (ref_ok(ref, err) < 0)
		return -1;
	if (!rb_serve_known_snapshot(rb_serve_known(sv), ref, tenant))
		return rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no snapshot %s", ref);
	char store[PATH_MAX + 16], path[PATH_MAX];
	snprintf(store, sizeof store, "%s/artifacts", state_dir);
	if (rb_artifact_path(store, ref, path, err) < 0)
		return -1;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return rb_error_setk(err, e == ENOENT ? RB_ERR_NOT_FOUND : RB_ERR_UNSET, e,
		                     "snapshot %s: its object is gone from the store", ref);
	}
	*size = (uint64_t)st.st_size;
	return fd;
}

unsigned rb_serve_snapshot_open(struct rb_serve *sv, const char *ref, const char *tenant, int *fd, uint64_t *size,
                                json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_paths paths;
	if (rb_paths_init(&paths, rb_serve_host(sv), rb_serve_state_dir(sv), &err) < 0 ||
	    (*fd = open_snapshot(sv, paths.state_dir, ref, tenant, size, &err)) < 0)
		return rb_serve_error(&err, reply);
	return 200;
}

/* A member's name made relative ("./a/b" -> "a/b"); refused when absolute, holding `..`, or
 * too long. "" for the top itself. */
static int member_name(const char *raw, char *out, size_t len, struct rb_error *err)
{
	out[0] = '\0';
	if (!raw || raw[0] == '/')
		return rb_error_setk(err, RB_ERR_INPUT, 0, "hydrate: member `%s`: an absolute name", raw ? raw : "");
	char buf[PATH_MAX];
	if (strlen(raw) >= sizeof buf - 1)
		return rb_error_setk(err, RB_ERR_INPUT, ENAMETOOLONG, "hydrate: a member's name too long");
	snprintf(buf, sizeof buf, "%s", raw);
	size_t n = 0;
	out[0] = '\0';
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (!strcmp(t, "."))
			continue;
		if (!strcmp(t, ".."))
			return rb_error_setk(err, RB_ERR_INPUT, 0, "hydrate: member `%s`: `..` leaves /workspace", raw);
		if (strlen(t) > NAME_MAX || n + strlen(t) + 2 >= len)
			return rb_error_setk(err, RB_ERR_INPUT, ENAMETOOLONG, "hydrate: member `%s`: a name too long",
			                     raw);
		n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "/" : "", t);
	}
	return 0;
}

static struct archive *reader(int fd, struct rb_error *err)
{
	struct archive *a = archive_read_new();
	if (!a) {
		rb_error_set(err, ENOMEM, "hydrate");
		return NULL;
	}
	archive_read_support_filter_zstd(a);
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_none(a);
	archive_read_support_format_tar(a);
	if (lseek(fd, 0, SEEK_SET) < 0 || archive_read_open_fd(a, fd, CHUNK) != ARCHIVE_OK) {
		rb_error_setk(err, RB_ERR_INPUT, 0, "hydrate: not a tar archive (plain, gzip or zstd): %s",
		              archive_error_string(a) ? archive_error_string(a) : "unreadable");
		archive_read_free(a);
		return NULL;
	}
	return a;
}

/* Whether name or one of its parents is a key of set. */
/* The archive's link at rel (the links table, name -> target), for rb_fspath_link_inside. */
static bool archive_link(void *ctx, const char *rel, char *target, size_t len)
{
	const char *t = json_string_value(json_object_get(ctx, rel));
	if (!t || strlen(t) >= len)
		return false;
	memcpy(target, t, strlen(t) + 1);
	return true;
}

static bool under_any(const json_t *set, const char *name)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", name);
	for (char *s = buf + strlen(buf); s > buf; s--) {
		if (*s != '/' && s != buf + strlen(buf))
			continue;
		char keep = *s;
		*s = '\0';
		bool hit = json_object_get(set, buf) != NULL;
		*s = keep;
		if (hit)
			return true;
	}
	return false;
}

/* Pass one: every member checked before anything is written (names, types, links, bounds). */
#define HYDRATE_NAMES_MAX (16u << 20)

static int check_members(int fd, const struct rb_serve_hydrate_bounds *b, uint64_t *members, uint64_t *bytes,
                         struct rb_error *err)
{
	struct archive *a = reader(fd, err);
	if (!a)
		return -1;
	_cleanup_json_ json_t *files = json_object(), *links = json_object();
	struct archive_entry *e;
	int r = 0, st = ARCHIVE_EOF;
	*members = *bytes = 0;
	/* The names kept to check later members against (files for hard links, links for what lies
	 * below them) are bounded in bytes, not only in count: a small compressed archive of long
	 * names must not make the daemon hold hundreds of MB. */
	size_t kept = 0;
	while (r == 0 && ((st = archive_read_next_header(a, &e)) == ARCHIVE_OK || st == ARCHIVE_WARN)) {
		char name[PATH_MAX];
		if (member_name(archive_entry_pathname(e), name, sizeof name, err) < 0) {
			r = -1;
			break;
		}
		if (++*members > b->members) {
			r = rb_error_setk(err, RB_ERR_CONFLICT, EFBIG, "hydrate: over %" PRIu64 " members", b->members);
			break;
		}
		if (!name[0])
			continue; /* "./": /workspace itself */
		if ((kept += strlen(name) + 64) > HYDRATE_NAMES_MAX) {
			r = rb_error_setk(err, RB_ERR_CONFLICT, EFBIG, "hydrate: over %u MiB of member names",
			                  HYDRATE_NAMES_MAX >> 20);
			break;
		}
		if (under_any(links, name)) {
			r = rb_error_setk(err, RB_ERR_INPUT, 0, "hydrate: member `%s`: below a link of the archive",
			                  name);
			break;
		}
		const char *hard = archive_entry_hardlink(e);
		mode_t type = archive_entry_filetype(e);
		if (hard) {
			char target[PATH_MAX];
			if (member_name(hard, target, sizeof target, err) < 0) {
				r = -1;
			} else if (!json_object_get(files, target)) {
				r = rb_error_setk(err, RB_ERR_INPUT, 0,
				                  "hydrate: member `%s`: a hard link to `%s`, not a file before it",
				                  name, hard);
			}
		} else if (type == AE_IFLNK) {
			const char *t = archive_entry_symlink(e);
			if (!t || !rb_fspath_link_inside(name, t, NULL, NULL))
				r = rb_error_setk(err, RB_ERR_INPUT, 0,
				                  "hydrate: member `%s`: a link to `%s` leaves /workspace", name,
				                  t ? t : "");
			else
				json_object_set_new(links, name, json_string(t));
		} else if (type == AE_IFREG) {
			*bytes += (uint64_t)(archive_entry_size(e) > 0 ? archive_entry_size(e) : 0);
			if (*bytes > b->bytes_out)
				r = rb_error_setk(err, RB_ERR_CONFLICT, EFBIG,
				                  "hydrate: over %" PRIu64 " bytes unpacked", b->bytes_out);
			json_object_set_new(files, name, json_true());
		} else if (type != AE_IFDIR) {
			r = rb_error_setk(err, RB_ERR_INPUT, 0,
			                  "hydrate: member `%s`: neither a file, a directory nor a link", name);
		}
	}
	if (r == 0 && st != ARCHIVE_EOF)
		r = rb_error_setk(err, RB_ERR_INPUT, 0, "hydrate: the archive is damaged: %s",
		                  archive_error_string(a) ? archive_error_string(a) : "unreadable");
	archive_read_free(a);
	/* Each link once more, through the archive's other links (x/p -> .., then
	 * q -> x/p/x/p/../../etc), which may come after it. */
	const char *ln;
	json_t *lt;
	json_object_foreach(links, ln, lt)
	{
		if (r == 0 && !rb_fspath_link_inside(ln, json_string_value(lt), archive_link, links))
			r = rb_error_setk(
			    err, RB_ERR_INPUT, 0,
			    "hydrate: member `%s`: a link to `%s` leaves /workspace through the archive's links", ln,
			    json_string_value(lt));
	}
	return r;
}

/* The directory rel below ws, each component opened without following a link or crossing a
 * mount, made (0755) when missing. */
static int open_dirs(int ws, const char *rel, struct rb_error *err)
{
	_cleanup_close_ int cur = fcntl(ws, F_DUPFD_CLOEXEC, 3);
	if (cur < 0)
		return rb_error_set(err, errno, "hydrate: /workspace");
	char buf[PATH_MAX], shown[PATH_MAX + 12];
	snprintf(buf, sizeof buf, "%s", rel);
	size_t n = (size_t)snprintf(shown, sizeof shown, "/workspace");
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		n += (size_t)snprintf(shown + n, sizeof shown - n, "/%s", t);
		if (mkdirat(cur, t, 0755) < 0 && errno != EEXIST)
			return rb_error_set(err, errno, "hydrate: mkdir %s", shown);
		int next = rb_fs_open_child(cur, t, O_PATH | O_DIRECTORY, true, shown, err);
		if (next < 0)
			return -1;
		close(cur);
		cur = next;
	}
	return rb_steal_fd(&cur);
}

static void split(const char *name, char *dir, char *base)
{
	const char *s = strrchr(name, '/');
	snprintf(dir, PATH_MAX, "%.*s", s ? (int)(s - name) : 0, name);
	snprintf(base, NAME_MAX + 1, "%s", s ? s + 1 : name);
}

/* A file member's bytes into fd, through writer (the sandbox's), bounded by *left. */
static int extract_data(struct archive *a, int fd, int writer, const char *shown, const uint64_t *left,
                        struct rb_error *err)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int st;
	bool sent = false; /* the file is the writer's (its first bytes came) */
	while ((st = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK || st == ARCHIVE_WARN) {
		if ((uint64_t)off + len > *left)
			return rb_error_setk(err, RB_ERR_CONFLICT, EFBIG,
			                     "hydrate: %s: over the bound of bytes unpacked", shown);
		if (!sent && len && rb_writer_file(writer, fd, err) < 0)
			return rb_error_prefix(err, "hydrate: write %s", shown);
		sent = sent || len;
		if (len && rb_writer_data(writer, buf, len, (uint64_t)off, err) < 0)
			return rb_error_prefix(err, "hydrate: write %s", shown);
	}
	if (st != ARCHIVE_EOF)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "hydrate: %s: %s", shown,
		                     archive_error_string(a) ? archive_error_string(a) : "damaged");
	if (sent && rb_writer_sync(writer, NULL, err) < 0)
		return rb_error_prefix(err, "hydrate: write %s", shown);
	return 0;
}

/* One member into /workspace; a file's bytes go through writer (the sandbox's). */
static int extract_one(struct archive *a, struct archive_entry *e, int ws, int writer, const char *name, uint64_t *left,
                       struct rb_error *err)
{
	char dir[PATH_MAX], base[NAME_MAX + 1], shown[PATH_MAX + 12];
	split(name, dir, base);
	snprintf(shown, sizeof shown, "/workspace/%s", name);
	_cleanup_close_ int pfd = open_dirs(ws, dir, err);
	if (pfd < 0)
		return -1;
	mode_t type = archive_entry_filetype(e), perm = archive_entry_perm(e);
	const char *hard = archive_entry_hardlink(e);
	if (hard) {
		char target[PATH_MAX], tdir[PATH_MAX], tbase[NAME_MAX + 1];
		member_name(hard, target, sizeof target, err);
		split(target, tdir, tbase);
		_cleanup_close_ int tpfd = open_dirs(ws, tdir, err);
		if (tpfd < 0)
			return -1;
		unlinkat(pfd, base, 0);
		if (linkat(tpfd, tbase, pfd, base, 0) < 0)
			return rb_error_set(err, errno, "hydrate: link %s", shown);
		return 0;
	}
	if (type == AE_IFDIR) {
		bool made = mkdirat(pfd, base, 0700) == 0;
		if (!made && errno != EEXIST)
			return rb_error_set(err, errno, "hydrate: mkdir %s", shown);
		/* The sandbox's layout is the sandbox's: /workspace/out keeps its owner and mode. */
		if (!made && !dir[0] && !strcmp(base, "out"))
			return 0;
		_cleanup_close_ int dfd = rb_fs_open_child(pfd, base, O_RDONLY | O_DIRECTORY, true, shown, err);
		if (dfd < 0 && !made && err->errnum == EXDEV) {
			rb_error_clear(err);
			return 0; /* a mount point (an input, skills): left as mounted, never changed */
		}
		/* Always the owner's to enter and fill: the archive's later members go in it. */
		if (dfd < 0 || fchmod(dfd, (perm & 01777) | 0700) < 0)
			return dfd < 0 ? -1 : rb_error_set(err, errno, "hydrate: chmod %s", shown);
		return 0;
	}
	if (type == AE_IFLNK) {
		struct stat st;
		if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
			unlinkat(pfd, base, 0);
		if (symlinkat(archive_entry_symlink(e), pfd, base) < 0)
			return rb_error_set(err, errno, "hydrate: symlink %s", shown);
		return 0;
	}
	/* A file: a link or a mount already at its name is never written through. */
	_cleanup_close_ int fd = rb_fs_open_child(pfd, base, O_WRONLY | O_CREAT | O_TRUNC, true, shown, err);
	if (fd < 0)
		return -1;
	if (extract_data(a, fd, writer, shown, left, err) < 0) {
		unlinkat(pfd, base, 0); /* no part of a file is left (its pages are the session's) */
		return -1;
	}
	uint64_t size = (uint64_t)(archive_entry_size(e) > 0 ? archive_entry_size(e) : 0);
	if (ftruncate(fd, (off_t)size) < 0 || fchmod(fd, perm & 0777) < 0)
		return rb_error_set(err, errno, "hydrate: %s", shown);
	*left -= size < *left ? size : *left;
	struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
	futimens(fd, ts);
	return 0;
}

/* Checks the archive in fd, then extracts it into the session's /workspace, as its root. */
static int hydrate_fd(struct rb_serve *sv, const char *sid, int fd, const struct rb_serve_hydrate_bounds *b,
                      uint64_t *members, uint64_t *bytes, struct rb_error *err)
{
	if (check_members(fd, b, members, bytes, err) < 0)
		return -1;
	struct rb_serve_fs fs;
	if (rb_serve_sandbox(sv, sid, &fs, err) < 0)
		return -1;
	_cleanup_close_ int writer = rb_serve_sandbox_writer(sv, sid, err);
	struct rb_fscred cr;
	if (writer < 0 || rb_fscred_enter(&fs, &cr, err) < 0) {
		rb_serve_fs_release(&fs);
		return -1;
	}
	struct archive *a = reader(fd, err);
	int r = a ? 0 : -1, st = ARCHIVE_EOF;
	uint64_t left = *bytes;
	struct archive_entry *e;
	while (r == 0 && ((st = archive_read_next_header(a, &e)) == ARCHIVE_OK || st == ARCHIVE_WARN)) {
		char name[PATH_MAX];
		if (member_name(archive_entry_pathname(e), name, sizeof name, err) < 0)
			r = -1;
		else if (name[0])
			r = extract_one(a, e, fs.ws, writer, name, &left, err);
	}
	if (r == 0 && st != ARCHIVE_EOF)
		r = rb_error_setk(err, RB_ERR_INPUT, 0, "hydrate: the archive is damaged");
	if (a)
		archive_read_free(a);
	rb_fscred_leave(&cr);
	rb_serve_fs_release(&fs);
	if (r == 0)
		rb_serve_sandbox_writer_done(sv, sid, rb_steal_fd(&writer));
	return r;
}

static void bounds_clamp(struct rb_serve_hydrate_bounds *b, const struct rb_serve_hydrate_bounds *asked)
{
	b->members = RB_SERVE_SNAPSHOT_MAX_MEMBERS;
	b->bytes_out = RB_SERVE_SNAPSHOT_MAX_BYTES;
	b->bytes_in = RB_SERVE_SNAPSHOT_MAX_BYTES;
	if (asked && asked->members && asked->members < b->members)
		b->members = asked->members;
	if (asked && asked->bytes_out && asked->bytes_out < b->bytes_out)
		b->bytes_out = asked->bytes_out;
	if (asked && asked->bytes_in && asked->bytes_in < b->bytes_in)
		b->bytes_in = asked->bytes_in;
}

static unsigned hydrate_reply(struct rb_serve *sv, const char *sid, int fd, const struct rb_serve_hydrate_bounds *b,
                              json_t *event, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	uint64_t members = 0, bytes = 0;
	int r = hydrate_fd(sv, sid, fd, b, &members, &bytes, &err);
	json_object_set_new(event, "members", json_integer((json_int_t)members));
	json_object_set_new(event, "bytes", json_integer((json_int_t)bytes));
	if (r < 0)
		json_object_set_new(event, "error", json_string(err.msg));
	/* Recorded whatever came of it: a refused archive is an event too. */
	struct rb_error rerr;
	int rec = rb_serve_record(sv, sid, "hydrate", event, &rerr);
	if (r < 0)
		return rb_serve_error(&err, reply);
	if (rec < 0)
		return rb_serve_error(&rerr, reply);
	*reply = json_pack("{s:I, s:I}", "members", (json_int_t)members, "bytes", (json_int_t)bytes);
	return 200;
}

unsigned rb_serve_hydrate_ref(struct rb_serve *sv, const char *sid, const char *ref,
                              const struct rb_serve_hydrate_bounds *asked, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_serve_hydrate_bounds b;
	bounds_clamp(&b, asked);
	struct rb_serve_fs fs;
	if (rb_serve_sandbox(sv, sid, &fs, &err) < 0)
		return rb_serve_error(&err, reply);
	uint64_t size = 0;
	_cleanup_close_ int fd = open_snapshot(sv, fs.state_dir, ref, fs.tenant, &size, &err);
	rb_serve_fs_release(&fs);
	if (fd >= 0 && size > b.bytes_in)
		rb_error_setk(&err, RB_ERR_CONFLICT, EFBIG, "hydrate: %s is %" PRIu64 " bytes, over %" PRIu64, ref,
		              size, b.bytes_in);
	json_t *v = ref ? json_stringn(ref, strnlen(ref, 256)) : NULL;
	json_t *event =
	    json_pack("{s:s, s:o, s:I}", "source", "snapshot", "ref", v ? v : json_null(), "size", (json_int_t)size);
	/* Refused (no such snapshot of the tenant's, over the bound of bytes in): recorded too. */
	if (fd < 0 || size > b.bytes_in)
		return rb_serve_fs_record_failed(sv, sid, "hydrate", event, &err, rb_serve_error(&err, reply));
	return hydrate_reply(sv, sid, fd, &b, event, reply);
}

unsigned rb_serve_hydrate_begin(struct rb_serve *sv, const char *sid, const struct rb_serve_hydrate_bounds *asked,
                                struct rb_serve_hydrate **out, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	*out = NULL;
	struct rb_serve_fs fs;
	if (rb_serve_sandbox(sv, sid, &fs, &err) < 0)
		return rb_serve_error(&err, reply);
	struct rb_serve_hydrate *h = calloc(1, sizeof *h);
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/artifacts", fs.state_dir);
	rb_serve_fs_release(&fs);
	if (!h)
		return rb_error_set(&err, ENOMEM, "hydrate"), rb_serve_error(&err, reply);
	snprintf(h->sid, sizeof h->sid, "%s", sid);
	bounds_clamp(&h->b, asked);
	h->h.md = EVP_MD_CTX_new();
	if (!h->h.md || !EVP_DigestInit_ex(h->h.md, EVP_sha256(), NULL) || (h->fd = spool_file(dir, &err)) < 0) {
		if (!h->h.md)
			rb_error_set(&err, ENOMEM, "sha256");
		EVP_MD_CTX_free(h->h.md);
		free(h);
		return rb_serve_error(&err, reply);
	}
	*out = h;
	return 200;
}

int rb_serve_hydrate_write(struct rb_serve_hydrate *h, const void *data, size_t len, struct rb_error *err)
{
	if (h->h.bytes + len > h->b.bytes_in)
		return rb_error_setk(err, RB_ERR_CONFLICT, EFBIG, "hydrate: the archive is over %" PRIu64 " bytes",
		                     h->b.bytes_in);
	if (rb_write_all(h->fd, data, len) < 0)
		return rb_error_set(err, errno, "hydrate: spool the archive");
	EVP_DigestUpdate(h->h.md, data, len);
	h->h.bytes += len;
	return 0;
}

void rb_serve_hydrate_abort(struct rb_serve_hydrate *h)
{
	if (!h)
		return;
	if (h->fd >= 0)
		close(h->fd);
	EVP_MD_CTX_free(h->h.md);
	free(h);
}

unsigned rb_serve_hydrate_finish(struct rb_serve *sv, struct rb_serve_hydrate *h, json_t **reply)
{
	char digest[RB_ARTIFACT_DIGEST_LEN];
	hashed_hex(&h->h, digest);
	unsigned st = hydrate_reply(
	    sv, h->sid, h->fd, &h->b,
	    json_pack("{s:s, s:s, s:I}", "source", "upload", "sha256", digest, "size", (json_int_t)h->h.bytes), reply);
	rb_serve_hydrate_abort(h);
	return st;
}

/* The digest walk of a directory image (images/digest.h): per-call state only, bounded, on one
 * filesystem, reading regular files alone, with a cache of content hashes keyed by inode. */
#define _GNU_SOURCE
/* The SHA256_* calls, as in common/util.c: no OpenSSL provider set-up at every start. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "images/digest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#define MAX_DEPTH   256
#define READ_CHUNK  (1u << 20)
#define CACHE_MAGIC "runbox-digest-cache 1"
/* The cache's soundness rests on this: a file's content does not change without its ctime
 * changing (no call sets ctime; it moves on every write, truncate, chmod, rename and link).
 * File times come from the kernel's coarse clock, so a file changed in the tick in which the
 * walk started could change again within that tick with the same ctime: files whose ctime is
 * not a margin older than the walk's start are hashed every time, never cached. A second is
 * many ticks, and covers a clock stepped back by less than that. */
#define RACY_NS 1000000000LL

/* One regular file's content hash, valid while (dev, ino, size, mtime, ctime) are unchanged. */
struct cached {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
	unsigned char md[SHA256_DIGEST_LENGTH];
};

struct walk {
	const struct rb_digest_limits *lim;
	const char *root;
	dev_t dev;        /* the root's filesystem: entries on another one are not entered */
	int64_t start_ns; /* the walk's start (CLOCK_REALTIME_COARSE), for the racy check */
	SHA256_CTX listing;
	struct cached *old; /* the cache read at the start, sorted by (dev, ino) */
	size_t n_old;
	bool loaded;         /* a cache file was read whole (n_old may be 0) */
	struct cached *seen; /* what the cache will hold after this walk */
	size_t n_seen, cap_seen;
	unsigned char *buf; /* READ_CHUNK bytes for file contents */
	struct rb_digest_stats st;
	char path[PATH_MAX]; /* the current entry relative to the root, with a leading '/' */
	struct rb_error *err;
};

static int64_t ns_of(const struct timespec *t)
{
	return (int64_t)t->tv_sec * 1000000000LL + t->tv_nsec;
}

static int by_inode(const void *a, const void *b)
{
	const struct cached *x = a, *y = b;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* By table, not sprintf: a walk encodes a hash per file and per link, and sprintf's setup was
 * a fifth of a cached walk's time. */
static void to_hex(const unsigned char md[SHA256_DIGEST_LENGTH], char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[64] = '\0';
}

static bool from_hex(const char *hex, unsigned char md[SHA256_DIGEST_LENGTH])
{
	if (strlen(hex) != 2 * (size_t)SHA256_DIGEST_LENGTH)
		return false;
	for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return false;
		md[i] = (unsigned char)v;
	}
	return true;
}

static int changed(struct walk *w)
{
	return rb_error_set(w->err, 0, "image `%s`: `%s` changed while it was digested", w->root, w->path);
}

static int failed(struct walk *w, int errnum, const char *what)
{
	return rb_error_set(w->err, errnum, "image `%s`: %s `%s`", w->root, what, w->path);
}

/* ---- the cache file ------------------------------------------------------------------ */

/* A cache that cannot be read is no cache: it costs time, never correctness. */
static void cache_load(struct walk *w, const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	_cleanup_fclose_ FILE *f = fdopen(rb_steal_fd(&fd), "r");
	char line[256];
	if (!f || !fgets(line, sizeof line, f) || strcmp(line, CACHE_MAGIC "\n") != 0)
		return;
	size_t cap = 0;
	while (fgets(line, sizeof line, f)) {
		struct cached c;
		char hex[80];
		if (sscanf(line, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNd64 " %" SCNd64 " %79s", &c.dev, &c.ino,
		           &c.size, &c.mtime_ns, &c.ctime_ns, hex) != 6 ||
		    !from_hex(hex, c.md) || w->n_old >= w->lim->max_entries)
			goto drop;
		if (w->n_old == cap) {
			cap = cap ? 2 * cap : 1024;
			struct cached *n = realloc(w->old, cap * sizeof *n);
			if (!n)
				goto drop;
			w->old = n;
		}
		w->old[w->n_old++] = c;
	}
	if (w->n_old)
		qsort(w->old, w->n_old, sizeof *w->old, by_inode);
	w->loaded = !ferror(f);
	return;
drop:
	free(w->old);
	w->old = NULL;
	w->n_old = 0;
}

/* Whether the walk's entries (sorted) are the cache it read, hard links once: then the file
 * is not rewritten (a temporary file and a rename per walk, for nothing). */
static bool cache_unchanged(const struct walk *w)
{
	size_t j = 0;
	for (size_t i = 0; i < w->n_seen; i++) {
		const struct cached *c = &w->seen[i], *o = &w->old[j];
		if (i && !by_inode(c, c - 1))
			continue;
		if (j >= w->n_old || by_inode(c, o) || c->size != o->size || c->mtime_ns != o->mtime_ns ||
		    c->ctime_ns != o->ctime_ns || memcmp(c->md, o->md, sizeof c->md) != 0)
			return false;
		j++;
	}
	return j == w->n_old;
}

static void cache_store(struct walk *w, const char *path)
{
	char tmp[PATH_MAX + 32];
	if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
		return;
	if (w->n_seen)
		qsort(w->seen, w->n_seen, sizeof *w->seen, by_inode);
	if (w->loaded && cache_unchanged(w))
		return;
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rb_debug("image digest: cache `%s` not written: %s", tmp, strerror(errno));
		return;
	}
	FILE *f = fdopen(rb_steal_fd(&fd), "w");
	if (!f) {
		unlink(tmp);
		return;
	}
	fputs(CACHE_MAGIC "\n", f);
	for (size_t i = 0; i < w->n_seen; i++) {
		const struct cached *c = &w->seen[i];
		if (i && !by_inode(c, c - 1))
			continue; /* a hard link: one inode, one entry */
		char hex[65];
		to_hex(c->md, hex);
		fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRId64 " %" PRId64 " %s\n", c->dev, c->ino, c->size,
		        c->mtime_ns, c->ctime_ns, hex);
	}
	bool bad = ferror(f) != 0;
	if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
		rb_debug("image digest: cache `%s` not written", path);
		unlink(tmp);
	}
}

static const struct cached *cache_find(const struct walk *w, const struct stat *st)
{
	if (!w->n_old)
		return NULL;
	struct cached key = {.dev = st->st_dev, .ino = st->st_ino};
	const struct cached *c = bsearch(&key, w->old, w->n_old, sizeof key, by_inode);
	if (c && c->size == (uint64_t)st->st_size && c->mtime_ns == ns_of(&st->st_mtim) &&
	    c->ctime_ns == ns_of(&st->st_ctim))
		return c;
	return NULL;
}

static int remember(struct walk *w, const struct stat *st, const unsigned char md[SHA256_DIGEST_LENGTH])
{
	if (ns_of(&st->st_ctim) >= w->start_ns - RACY_NS || ns_of(&st->st_mtim) >= w->start_ns - RACY_NS)
		return 0;
	if (w->n_seen == w->cap_seen) {
		size_t cap = w->cap_seen ? 2 * w->cap_seen : 1024;
		struct cached *n = realloc(w->seen, cap * sizeof *n);
		if (!n)
			return rb_error_set(w->err, ENOMEM, "image `%s`: digest cache", w->root);
		w->seen = n;
		w->cap_seen = cap;
	}
	struct cached *c = &w->seen[w->n_seen++];
	*c = (struct cached){.dev = st->st_dev,
	                     .ino = st->st_ino,
	                     .size = (uint64_t)st->st_size,
	                     .mtime_ns = ns_of(&st->st_mtim),
	                     .ctime_ns = ns_of(&st->st_ctim)};
	memcpy(c->md, md, sizeof c->md);
	return 0;
}

/* ---- the walk ------------------------------------------------------------------------ */

/* One listing record: the path, a NUL (a name may hold any other byte), then the fields. */
static void record(struct walk *w, const struct stat *st, const char *content)
{
	char fields[160];
	int n;
	if (st)
		n = snprintf(fields, sizeof fields, "%o %u %u %lld %s\n", (unsigned)st->st_mode, (unsigned)st->st_uid,
		             (unsigned)st->st_gid, (long long)st->st_size, content);
	else
		n = snprintf(fields, sizeof fields, "%s\n", content);
	SHA256_Update(&w->listing, w->path, strlen(w->path) + 1);
	SHA256_Update(&w->listing, fields, (size_t)n);
}

/* A file's capabilities (security.capability), the one xattr an image keeps (images/import.h):
 * a record of their own after the file's, so a file without any digests as it always did. */
static int file_caps(struct walk *w, int dfd, const char *name)
{
	char at[64 + NAME_MAX];
	snprintf(at, sizeof at, "/proc/self/fd/%d/%s", dfd, name);
	unsigned char v[64];
	ssize_t n = lgetxattr(at, "security.capability", v, sizeof v);
	if (n < 0)
		return errno == ENODATA || errno == ENOTSUP || errno == EOPNOTSUPP || errno == EACCES
		           ? 0
		           : failed(w, errno, "read xattrs of");
	char hex[2 * sizeof v + 8] = "fcap ";
	for (ssize_t i = 0; i < n; i++)
		snprintf(hex + 5 + 2 * i, 3, "%02x", v[i]);
	record(w, NULL, hex);
	return 0;
}

/* A regular file's content hash, read through an fd that never blocks and must stay the file
 * that was listed: another file, more or fewer bytes than its size, or a change of its times
 * while it was read is a file that changed while it was digested. */
static int hash_file(struct walk *w, int dfd, const char *name, const struct stat *st,
                     unsigned char md[SHA256_DIGEST_LENGTH], bool *unreadable)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM)) {
		*unreadable = true; /* rootless: what the caller cannot read, the sandbox cannot either */
		return 0;
	}
	struct stat a, b;
	if (fd < 0)
		return failed(w, errno, "open");
	if (fstat(fd, &a) < 0)
		return failed(w, errno, "stat");
	if (!S_ISREG(a.st_mode) || a.st_dev != st->st_dev || a.st_ino != st->st_ino)
		return changed(w);
	SHA256_CTX c;
	SHA256_Init(&c);
	uint64_t total = 0;
	for (;;) {
		ssize_t n = read(fd, w->buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return rb_error_set(w->err, 0, "image `%s`: reading `%s` would block: not a file on disk",
			                    w->root, w->path);
		if (n < 0)
			return failed(w, errno, "read");
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > (uint64_t)a.st_size)
			return changed(w);
		SHA256_Update(&c, w->buf, (size_t)n);
	}
	if (total != (uint64_t)a.st_size || fstat(fd, &b) < 0 || b.st_size != a.st_size ||
	    ns_of(&b.st_mtim) != ns_of(&a.st_mtim) || ns_of(&b.st_ctim) != ns_of(&a.st_ctim) ||
	    ns_of(&a.st_ctim) != ns_of(&st->st_ctim))
		return changed(w);
	SHA256_Final(md, &c);
	w->st.files_read++;
	return 0;
}

static int walk_dir(struct walk *w, int dfd, size_t plen, unsigned depth);

/* One entry of the directory dfd, named name, whose path w->path (plen bytes) already is. */
static int visit(struct walk *w, int dfd, const char *name, size_t plen, unsigned depth)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT) < 0)
		return errno == ENOENT ? changed(w) : failed(w, errno, "stat");
	if (st.st_dev != w->dev) {
		record(w, NULL, "mount"); /* another filesystem: the overlay's lower layer has none of it */
		return 0;
	}
	char content[72] = "-";
	if (S_ISREG(st.st_mode)) {
		w->st.bytes += (uint64_t)st.st_size;
		if (w->st.bytes > w->lim->max_bytes)
			return rb_error_set(w->err, 0,
			                    "image `%s`: its files hold more than %" PRIu64
			                    " bytes (at `%s`), the most policy images.max_bytes lets runbox digest",
			                    w->root, w->lim->max_bytes, w->path);
		unsigned char md[SHA256_DIGEST_LENGTH] = {0};
		bool unreadable = false;
		const struct cached *c = cache_find(w, &st);
		if (c) {
			memcpy(md, c->md, sizeof md);
			w->st.files_cached++;
		} else if (hash_file(w, dfd, name, &st, md, &unreadable) < 0) {
			return -1;
		}
		if (unreadable) {
			snprintf(content, sizeof content, "unreadable");
		} else {
			to_hex(md, content);
			if (remember(w, &st, md) < 0)
				return -1;
		}
		record(w, &st, content);
		return file_caps(w, dfd, name);
	}
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(dfd, name, target, sizeof target);
		if (n < 0 || n >= (ssize_t)sizeof target)
			return n < 0 ? failed(w, errno, "readlink") : changed(w);
		/* SHA256_Init and friends, not SHA256(): the one-shot call goes through EVP's
		 * provider layer. */
		unsigned char md[SHA256_DIGEST_LENGTH];
		SHA256_CTX c;
		SHA256_Init(&c);
		SHA256_Update(&c, target, (size_t)n);
		SHA256_Final(md, &c);
		to_hex(md, content);
	} else if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
		snprintf(content, sizeof content, "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	}
	if (!S_ISDIR(st.st_mode)) {
		record(w, &st, content); /* a link, device, FIFO or socket: listed, never opened */
		return 0;
	}
	if (depth >= MAX_DEPTH)
		return rb_error_set(w->err, 0, "image `%s`: `%s` is deeper than %d directories", w->root, w->path,
		                    MAX_DEPTH);
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && (errno == EACCES || errno == EPERM)) {
		record(w, &st, "unreadable");
		return 0;
	}
	if (fd < 0)
		return failed(w, errno, "open");
	struct stat a;
	if (fstat(fd, &a) < 0 || a.st_dev != st.st_dev || a.st_ino != st.st_ino) {
		close(fd);
		return changed(w);
	}
	record(w, &st, content);
	return walk_dir(w, fd, plen, depth + 1);
}

/* Takes dfd. Its entries in byte order of their names, so the digest names the content, not
 * the order a filesystem happens to list it in. */
static int walk_dir(struct walk *w, int dfd, size_t plen, unsigned depth)
{
	_cleanup_closedir_ DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return failed(w, errno, "open");
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0;
	struct dirent *e;
	for (errno = 0; (e = readdir(d)); errno = 0) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (w->st.entries + n + 1 > w->lim->max_entries) {
			r = rb_error_set(w->err, 0,
			                 "image `%s`: more than %" PRIu64
			                 " entries (in `%s`), the most policy images.max_entries lets runbox digest",
			                 w->root, w->lim->max_entries, *w->path ? w->path : "/");
			goto out;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			char **nn = realloc(names, cap * sizeof *nn);
			if (!nn) {
				r = rb_error_set(w->err, ENOMEM, "image `%s`: list `%s`", w->root, w->path);
				goto out;
			}
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name))) {
			r = rb_error_set(w->err, ENOMEM, "image `%s`: list `%s`", w->root, w->path);
			goto out;
		}
		n++;
	}
	if (errno) {
		r = failed(w, errno, "list");
		goto out;
	}
	w->st.entries += n;
	if (n)
		qsort(names, n, sizeof *names, by_name);
	for (size_t i = 0; i < n && r == 0; i++) {
		size_t len = strlen(names[i]);
		if (plen + 1 + len >= sizeof w->path) {
			r = rb_error_set(w->err, ENAMETOOLONG, "image `%s`: a path below `%s`", w->root, w->path);
			break;
		}
		w->path[plen] = '/';
		memcpy(w->path + plen + 1, names[i], len + 1);
		r = visit(w, dirfd(d), names[i], plen + 1 + len, depth);
		w->path[plen] = '\0';
	}
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

int rb_tree_digest(const char *root, const char *cache, const struct rb_digest_limits *lim, char out[72],
                   struct rb_digest_stats *stats, struct rb_error *err)
{
	_cleanup_free_ struct walk *w = calloc(1, sizeof *w);
	_cleanup_free_ unsigned char *buf = malloc(READ_CHUNK);
	if (!w || !buf)
		return rb_error_set(err, ENOMEM, "image `%s`: digest", root);
	w->lim = lim;
	w->root = root;
	w->buf = buf;
	w->err = err;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME_COARSE, &now);
	w->start_ns = ns_of(&now);
	if (cache)
		cache_load(w, cache);

	int r = -1;
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		r = rb_error_set(err, errno, "image `%s`: open", root);
		if (fd >= 0)
			close(fd);
		goto out;
	}
	w->dev = st.st_dev;
	w->st.entries = 1;
	SHA256_Init(&w->listing);
	strcpy(w->path, "/");
	record(w, &st, "-");
	w->path[0] = '\0';
	if ((r = walk_dir(w, fd, 0, 1)) < 0)
		goto out;
	unsigned char md[SHA256_DIGEST_LENGTH];
	char hex[65];
	SHA256_Final(md, &w->listing);
	to_hex(md, hex);
	snprintf(out, 72, "sha256:%s", hex);
	if (cache)
		cache_store(w, cache);
	rb_debug("image digest of `%s`: %" PRIu64 " entries, %" PRIu64 " bytes, %" PRIu64 " files read, %" PRIu64
	         " from the cache",
	         root, w->st.entries, w->st.bytes, w->st.files_read, w->st.files_cached);
	if (stats)
		*stats = w->st;
out:
	free(w->old);
	free(w->seen);
	return r;
}

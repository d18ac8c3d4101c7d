/* Harvest of /workspace/out from the host side: an iterative walk by openat2 that never
 * follows a link, classifies each entry on what was actually opened, enforces the caps,
 * records every skip, scrubs and stores each file content-addressed. */
#define _GNU_SOURCE
#include "runtime/run/harvest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "runtime/run/store_behind.h"

/* Every open is one component below a directory fd we already hold: no "..", no link of
 * any kind, no other mount. A swap of any component into a symlink then fails (ELOOP)
 * instead of leading outside. */
#define RESOLVE_FLAGS (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

static const char *const reason_names[RB_HARVEST_REASON_COUNT] = {
    [RB_HARVEST_SYMLINK] = "symlink",
    [RB_HARVEST_FIFO] = "fifo",
    [RB_HARVEST_SOCKET] = "socket",
    [RB_HARVEST_DEVICE] = "device",
    [RB_HARVEST_OVER_FILE_CAP] = "over_file_cap",
    [RB_HARVEST_OVER_TOTAL_CAP] = "over_total_cap",
    [RB_HARVEST_OVER_COUNT_CAP] = "over_count_cap",
    [RB_HARVEST_OVER_DEPTH] = "over_depth",
    [RB_HARVEST_CHANGED] = "changed_during_harvest",
    [RB_HARVEST_HARDLINK] = "hardlink_of",
    [RB_HARVEST_MOUNT_POINT] = "mount_point",
    [RB_HARVEST_SCRUB_FAILED] = "scrub_failed",
    [RB_HARVEST_UNREADABLE] = "unreadable",
};

const char *rb_harvest_reason_name(enum rb_harvest_reason r)
{
	return (unsigned)r < RB_HARVEST_REASON_COUNT ? reason_names[r] : "unknown";
}

void rb_harvest_caps_default(struct rb_harvest_caps *caps)
{
	*caps = (struct rb_harvest_caps){
	    .max_file_bytes = RB_HARVEST_DEFAULT_FILE_BYTES,
	    .max_total_bytes = RB_HARVEST_DEFAULT_TOTAL_BYTES,
	    .max_files = RB_HARVEST_DEFAULT_FILES,
	    .max_depth = RB_HARVEST_DEFAULT_DEPTH,
	    .max_skip_records = RB_HARVEST_DEFAULT_SKIP_RECORDS,
	};
}

/* Files at least this large are stored behind the walk (store_behind.h): their SHA-256 and
 * write overlap the read and scrub of the next file; with a scrubber that may run on two
 * threads, one is scrubbed there too while the walk scrubs the next. Smaller ones are done in
 * line, where a thread would cost more than it saves. One file behind at a time: at most one
 * more file's bytes (and its scrubbed copy) are held than in line. */
#define STORE_BEHIND_MIN (1U << 20)

/* The file being stored behind, and what its artifact will record. */
struct behind {
	bool pending; /* started and not yet made an artifact (or a skip, or a failure) */
	struct rb_store_behind sb;
	char *path;
	int64_t size;       /* st_size, for a skip record */
	uint64_t original;  /* bytes read */
	json_t *redactions; /* scrubbed in line: what the scrubber returned */
};

/* Hard links: the first path of every (dev, ino) with more than one link. */
struct link {
	dev_t dev;
	ino_t ino;
	char *path;
};

struct walk {
	const struct rb_harvest_caps *caps;
	rb_harvest_scrub_fn scrub;
	void *scrub_ctx;
	bool scrub_concurrent; /* scrub may run on two threads at once */
	const char *store_dir;
	rb_harvest_race_fn race;
	void *race_ctx;
	rb_harvest_reopen_fn reopen;
	void *reopen_ctx;
	struct rb_progress progress;
	struct rb_harvest_result *res;
	struct link *links; /* open addressing, size a power of two */
	size_t n_links, cap_links;
	uint64_t bytes_accepted; /* counted against max_total_bytes */
	struct behind behind;
	/* A file's buffer once done with, for the next file to be read into: pages already
	 * faulted in, where a new large malloc would fault in and zero every page again. */
	char *spare;
};

/* Keeps the larger of buf and the spare (malloc'd, or NULL), frees the other. */
static void spare_put(struct walk *w, char *buf)
{
	if (!buf)
		return;
	if (w->spare && malloc_usable_size(w->spare) >= malloc_usable_size(buf)) {
		free(buf);
		return;
	}
	free(w->spare);
	w->spare = buf;
}

/* A buffer of at least size bytes: the spare when it is large enough. */
static char *spare_take(struct walk *w, size_t size)
{
	if (w->spare && malloc_usable_size(w->spare) >= size)
		return rb_steal_ptr(&w->spare);
	return malloc(size);
}

/* openat2 below dirfd, never following a link; refused (EACCES, EPERM), a second try through
 * the reopen hook, with the same flags and resolve rules (rootless: as the sandbox's user
 * namespace, see runtime/sandbox/nsopen.c). */
static int open_beneath(struct walk *w, int dirfd, const char *name, uint64_t flags)
{
	struct open_how how = {.flags = flags | O_CLOEXEC | O_NOFOLLOW, .resolve = RESOLVE_FLAGS};
	for (int tries = 0;; tries++) {
		long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof how);
		if (fd >= 0)
			return (int)fd;
		/* EAGAIN: the kernel saw a concurrent rename and could not vouch for the walk. */
		if ((errno == EAGAIN || errno == EINTR) && tries < 16)
			continue;
		break;
	}
	if ((errno == EACCES || errno == EPERM) && w->reopen) {
		/* The hook may fork its helper, which needs this process single-threaded. */
		int e = errno;
		rb_store_behind_wait(&w->behind.sb);
		errno = e;
		return w->reopen(w->reopen_ctx, dirfd, name, flags, RESOLVE_FLAGS);
	}
	return -1;
}

struct frame {
	DIR *dir;
	char *path; /* relative to out; "" for out itself */
	uint32_t depth;
};

static int oom(struct rb_error *err)
{
	return rb_error_set(err, ENOMEM, "harvest");
}

static size_t link_slot(const struct walk *w, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)dev;
	size_t i = (size_t)(h ^ (h >> 29)) & (w->cap_links - 1);
	while (w->links[i].path && !(w->links[i].dev == dev && w->links[i].ino == ino))
		i = (i + 1) & (w->cap_links - 1);
	return i;
}

static const char *link_find(const struct walk *w, const struct stat *st)
{
	if (w->cap_links == 0)
		return NULL;
	return w->links[link_slot(w, st->st_dev, st->st_ino)].path;
}

static int link_add(struct walk *w, const struct stat *st, const char *path)
{
	if (2 * (w->n_links + 1) > w->cap_links) {
		size_t ncap = w->cap_links ? 2 * w->cap_links : 64;
		struct link *old = w->links;
		size_t ocap = w->cap_links;
		w->links = calloc(ncap, sizeof *w->links);
		if (!w->links) {
			w->links = old;
			return -1;
		}
		w->cap_links = ncap;
		for (size_t i = 0; i < ocap; i++)
			if (old[i].path)
				w->links[link_slot(w, old[i].dev, old[i].ino)] = old[i];
		free(old);
	}
	size_t i = link_slot(w, st->st_dev, st->st_ino);
	if (w->links[i].path)
		return 0;
	w->links[i] = (struct link){st->st_dev, st->st_ino, strdup(path)};
	if (!w->links[i].path)
		return -1;
	w->n_links++;
	return 0;
}

static char *join(const char *parent, const char *name)
{
	char *p;
	if (asprintf(&p, "%s%s%s", parent, *parent ? "/" : "", name) < 0)
		return NULL;
	return p;
}

/* Records a skip: always counted, listed while under max_skip_records. */
static int skip(struct walk *w, const char *path, enum rb_harvest_reason reason, const char *other, int64_t size,
                struct rb_error *err)
{
	struct rb_harvest_result *res = w->res;
	res->skipped_total++;
	res->skipped_by_reason[reason]++;
	if (res->n_skipped >= w->caps->max_skip_records)
		return 0;
	if (res->n_skipped == res->cap_skipped_) {
		size_t ncap = res->cap_skipped_ ? 2 * res->cap_skipped_ : 16;
		struct rb_harvest_skip *n = reallocarray(res->skipped, ncap, sizeof *n);
		if (!n)
			return oom(err);
		res->skipped = n;
		res->cap_skipped_ = ncap;
	}
	struct rb_harvest_skip *s = &res->skipped[res->n_skipped];
	*s = (struct rb_harvest_skip){.path = strdup(*path ? path : "."), .reason = reason, .size = size};
	if (other)
		s->other = strdup(other);
	if (!s->path || (other && !s->other)) {
		free(s->path);
		free(s->other);
		return oom(err);
	}
	res->n_skipped++;
	return 0;
}

/* Errors that mean the harvest cannot go on, rather than "this entry is bad". */
static bool fatal_errno(int e)
{
	return e == ENOMEM || e == EMFILE || e == ENFILE || e == ENOSYS || e == EINVAL;
}

static int fatal(int e, const char *path, struct rb_error *err)
{
	if (e == ENOSYS)
		return rb_error_set(err, e, "harvest needs openat2 (Linux 5.6 or later)");
	return rb_error_set(err, e, "harvest: open `%s`", *path ? path : ".");
}

/* The classifying open (O_PATH) failed. */
static int classify_failed(struct walk *w, const char *path, int e, struct rb_error *err)
{
	if (fatal_errno(e))
		return fatal(e, path, err);
	if (e == ENOENT)
		return skip(w, path, RB_HARVEST_CHANGED, "vanished", -1, err);
	if (e == EXDEV)
		return skip(w, path, RB_HARVEST_MOUNT_POINT, NULL, -1, err);
	return skip(w, path, RB_HARVEST_UNREADABLE, strerror(e), -1, err);
}

/* The reading open failed, after the entry was classified: anything but a permission or I/O
 * error means it is no longer what was classified. */
static int reopen_failed(struct walk *w, const char *path, int e, int64_t size, struct rb_error *err)
{
	if (fatal_errno(e))
		return fatal(e, path, err);
	if (e == EACCES || e == EPERM || e == EIO)
		return skip(w, path, RB_HARVEST_UNREADABLE, strerror(e), size, err);
	return skip(w, path, RB_HARVEST_CHANGED, strerror(e), size, err);
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && (a->st_mode & S_IFMT) == (b->st_mode & S_IFMT);
}

/* A directory: entered through the O_PATH fd we classified ("." below it), so no swap of
 * the name can redirect the walk. */
static int enter_dir(struct walk *w, const struct frame *f, int pfd, const char *name, int opath, const struct stat *st,
                     char **path, struct frame *sub, struct rb_error *err)
{
	if (f->depth + 1 > w->caps->max_depth)
		return skip(w, *path, RB_HARVEST_OVER_DEPTH, NULL, -1, err);
	if (w->race)
		w->race(w->race_ctx, pfd, name);
	_cleanup_close_ int dfd = open_beneath(w, opath, ".", O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return reopen_failed(w, *path, errno, -1, err);
	struct stat st2;
	if (fstat(dfd, &st2) < 0)
		return skip(w, *path, RB_HARVEST_UNREADABLE, strerror(errno), -1, err);
	if (!same_file(st, &st2))
		return skip(w, *path, RB_HARVEST_CHANGED, "replaced while opened", -1, err);
	DIR *d = fdopendir(dfd);
	if (!d)
		return rb_error_set(err, errno, "harvest: fdopendir `%s`", *path);
	rb_steal_fd(&dfd); /* the DIR owns it now */
	*sub = (struct frame){.dir = d, .path = rb_steal_ptr(path), .depth = f->depth + 1};
	w->res->dirs_seen++;
	return 0;
}

static uint64_t redaction_sum(const json_t *r)
{
	if (json_is_integer(r))
		return json_integer_value(r) > 0 ? (uint64_t)json_integer_value(r) : 0;
	uint64_t n = 0;
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)r, k, v) if (json_is_integer(v) && json_integer_value(v) > 0) n +=
	    (uint64_t)json_integer_value(v);
	return n;
}

static int add_artifact(struct walk *w, const char *path, uint64_t size, uint64_t original, const char *digest,
                        json_t *redactions, struct rb_error *err)
{
	struct rb_harvest_result *res = w->res;
	if (res->n_artifacts == res->cap_artifacts_) {
		size_t ncap = res->cap_artifacts_ ? 2 * res->cap_artifacts_ : 16;
		struct rb_harvest_artifact *n = reallocarray(res->artifacts, ncap, sizeof *n);
		if (!n)
			return oom(err);
		res->artifacts = n;
		res->cap_artifacts_ = ncap;
	}
	struct rb_harvest_artifact *a = &res->artifacts[res->n_artifacts];
	*a = (struct rb_harvest_artifact){.path = strdup(path), .size = size, .original_size = original};
	if (!a->path)
		return oom(err);
	snprintf(a->digest, sizeof a->digest, "%s", digest);
	a->redactions = redactions ? json_incref(redactions) : NULL;
	a->redaction_count = redactions ? redaction_sum(redactions) : 0;
	res->n_artifacts++;
	res->bytes_stored += size;
	res->redactions_total += a->redaction_count;
	return 0;
}

static void report(const struct walk *w, bool final)
{
	struct rb_progress_report r = {.what = "harvested",
	                               .done = w->res->bytes_read,
	                               .is_bytes = true,
	                               .items = w->res->n_artifacts,
	                               .items_what = "files",
	                               .final = final};
	rb_progress_say(&w->progress, &r);
}

/* The file behind, once done: its artifact, a scrub_failed skip or the harvest's failure (the
 * store not writable), as in line. */
static int finish_behind(struct walk *w, struct rb_error *err)
{
	struct behind *b = &w->behind;
	if (!b->pending)
		return 0;
	rb_store_behind_wait(&b->sb);
	b->pending = false;
	int r;
	if (b->sb.scrub_failed) {
		/* Not stored, so not counted: its bytes were taken from the room when it was sent. */
		w->bytes_accepted -= b->original;
		r = skip(w, b->path, RB_HARVEST_SCRUB_FAILED, b->sb.err.msg[0] ? b->sb.err.msg : NULL, b->size, err);
	} else if (b->sb.r < 0) {
		*err = b->sb.err;
		r = rb_error_prefix(err, "harvest `%s`", b->path);
	} else {
		if (b->sb.created) {
			w->res->objects_new++;
			w->res->bytes_new += b->sb.len;
		}
		r = add_artifact(w, b->path, b->sb.len, b->original, b->sb.digest,
		                 b->sb.scrub ? b->sb.redactions : b->redactions, err);
	}
	spare_put(w, rb_steal_ptr(&b->sb.bytes));
	spare_put(w, rb_steal_ptr(&b->sb.read));
	rb_store_behind_clear(&b->sb);
	free(b->path);
	json_decref(b->redactions);
	b->path = NULL;
	b->redactions = NULL;
	if (r == 0)
		report(w, false);
	return r;
}

/* Hands *bytes (len of them; taken) behind the walk, once the file before is done: to be
 * scrubbed there and stored (scrub), or stored as they are (NULL: redactions are the in-line
 * scrub's). */
static int start_behind(struct walk *w, const char *path, int64_t size, rb_harvest_scrub_fn scrub, char **bytes,
                        size_t len, uint64_t original, json_t *redactions, struct rb_error *err)
{
	if (finish_behind(w, err) < 0)
		return -1;
	struct behind *b = &w->behind;
	b->path = strdup(path);
	if (!b->path)
		return oom(err);
	b->size = size;
	b->original = original;
	b->redactions = redactions ? json_incref(redactions) : NULL;
	b->pending = true;
	rb_store_behind_start(&b->sb, w->store_dir, scrub, w->scrub_ctx, rb_steal_ptr(bytes), len);
	return 0;
}

/* With a scrubber that may run on two threads, a large file goes behind whole when the thread
 * is free, or only storing (a short wait); while it scrubs, this one is scrubbed in line. */
static bool scrub_behind(struct walk *w, size_t n)
{
	if (!w->scrub || !w->scrub_concurrent || n < STORE_BEHIND_MIN)
		return false;
	return !w->behind.pending || !w->behind.sb.scrub || !rb_store_behind_busy(&w->behind.sb);
}

/* Reads at most limit + 1 bytes: one more than allowed tells "over" without reading more.
 * Into a private buffer, never a mapping of the file: a process the step left running may
 * still write it, and a truncation under a mapping is SIGBUS here, a rewrite new bytes
 * between the scrub and the store. The copy is what is scrubbed, hashed and stored. */
static int read_bounded(struct walk *w, int fd, uint64_t hint, uint64_t limit, char **out, size_t *out_len,
                        uint64_t *counter)
{
	size_t cap = (size_t)(hint < limit ? hint : limit) + 1, n = 0;
	_cleanup_free_ char *buf = spare_take(w, cap);
	if (!buf)
		return -1;
	for (;;) {
		if (n == cap) {
			if (cap > limit)
				break;
			size_t ncap = cap > limit / 2 ? (size_t)limit + 1 : 2 * cap;
			char *nb = realloc(buf, ncap);
			if (!nb)
				return -1;
			buf = nb;
			cap = ncap;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if ((*counter >> 20) != ((*counter + (uint64_t)r) >> 20))
			report(w, false); /* a large file: each MiB */
		*counter += (uint64_t)r;
	}
	*out = rb_steal_ptr(&buf);
	*out_len = n;
	return 0;
}

static int harvest_file(struct walk *w, int pfd, const char *name, const char *path, const struct stat *st,
                        struct rb_error *err)
{
	struct rb_harvest_result *res = w->res;
	const struct rb_harvest_caps *caps = w->caps;
	int64_t size = st->st_size;
	res->files_seen++;

	/* Another name of a file met before is counted once, whatever happened to the first. */
	const char *first = st->st_nlink > 1 ? link_find(w, st) : NULL;
	if (first)
		return skip(w, path, RB_HARVEST_HARDLINK, first, size, err);
	/* Caps on what fstat says first: a 100 GB sparse file is never opened for reading. */
	if ((uint64_t)size > caps->max_file_bytes)
		return skip(w, path, RB_HARVEST_OVER_FILE_CAP, NULL, size, err);
	if (res->n_artifacts + (w->behind.pending ? 1 : 0) >= caps->max_files)
		return skip(w, path, RB_HARVEST_OVER_COUNT_CAP, NULL, size, err);
	uint64_t room = caps->max_total_bytes - w->bytes_accepted;
	if ((uint64_t)size > room)
		return skip(w, path, RB_HARVEST_OVER_TOTAL_CAP, NULL, size, err);

	if (w->race)
		w->race(w->race_ctx, pfd, name);
	/* Reopened by name, so checked against the classified inode below. O_NONBLOCK and
	 * O_NOCTTY keep a FIFO or tty swapped in meanwhile from blocking or attaching. */
	_cleanup_close_ int fd = open_beneath(w, pfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return reopen_failed(w, path, errno, size, err);
	struct stat st2;
	if (fstat(fd, &st2) < 0)
		return skip(w, path, RB_HARVEST_UNREADABLE, strerror(errno), size, err);
	if (!same_file(st, &st2))
		return skip(w, path, RB_HARVEST_CHANGED, "replaced between classify and open", size, err);
	if (st->st_nlink > 1 && link_add(w, st, path) < 0)
		return oom(err);

	uint64_t file_limit = caps->max_file_bytes < room ? caps->max_file_bytes : room;
	if (file_limit > SIZE_MAX / 4)
		file_limit = SIZE_MAX / 4;
	_cleanup_free_ char *buf = NULL;
	size_t n;
	if (read_bounded(w, fd, (uint64_t)st2.st_size, file_limit, &buf, &n, &res->bytes_read) < 0) {
		if (errno == ENOMEM)
			return oom(err);
		return skip(w, path, RB_HARVEST_UNREADABLE, strerror(errno), size, err);
	}
	if (n > file_limit) {
		/* It grew after fstat. */
		if (file_limit == caps->max_file_bytes)
			return skip(w, path, RB_HARVEST_OVER_FILE_CAP, "grew while read", size, err);
		return skip(w, path, RB_HARVEST_OVER_TOTAL_CAP, NULL, size, err);
	}

	if (scrub_behind(w, n)) {
		if (finish_behind(w, err) < 0)
			return -1;
		w->bytes_accepted += n;
		return start_behind(w, path, size, w->scrub, &buf, n, n, NULL, err);
	}
	_cleanup_free_ char *scrubbed = NULL;
	size_t scrubbed_len = 0;
	_cleanup_json_ json_t *redactions = NULL;
	if (w->scrub) {
		struct rb_error serr = {0};
		if (w->scrub(w->scrub_ctx, buf, n, &scrubbed, &scrubbed_len, &redactions, &serr) < 0)
			return skip(w, path, RB_HARVEST_SCRUB_FAILED, serr.msg[0] ? serr.msg : NULL, size, err);
	}
	size_t len = scrubbed ? scrubbed_len : n;
	w->bytes_accepted += n;
	/* Large by the bytes read, as in scrub_behind: two objects stored at once (one behind, one
	 * in line) come from files of different sizes, equal only where scrubbing made them so
	 * (then the store counts the object new once). Only the scrubbed copy is stored: the read
	 * one goes first. */
	if (n >= STORE_BEHIND_MIN) {
		if (scrubbed)
			spare_put(w, rb_steal_ptr(&buf));
		return start_behind(w, path, size, NULL, scrubbed ? &scrubbed : &buf, len, n, redactions, err);
	}
	const char *data = scrubbed ? scrubbed : buf;
	char digest[RB_ARTIFACT_DIGEST_LEN];
	bool created;
	if (rb_artifact_store(w->store_dir, data, len, digest, &created, err) < 0)
		return rb_error_prefix(err, "harvest `%s`", path);
	if (created) {
		res->objects_new++;
		res->bytes_new += len;
	}
	spare_put(w, rb_steal_ptr(&buf));
	spare_put(w, rb_steal_ptr(&scrubbed));
	int r = add_artifact(w, path, len, n, digest, redactions, err);
	report(w, false);
	return r;
}

/* One directory entry. On a directory to descend, fills *sub. */
static int visit(struct walk *w, const struct frame *f, const char *name, struct frame *sub, struct rb_error *err)
{
	int pfd = dirfd(f->dir);
	_cleanup_free_ char *path = join(f->path, name);
	if (!path)
		return oom(err);
	w->res->entries_seen++;
	/* Classify on an O_PATH fd: never opens a FIFO or device, and with O_NOFOLLOW under
	 * RESOLVE_NO_SYMLINKS a symlink yields a descriptor of the link itself. */
	_cleanup_close_ int opath = open_beneath(w, pfd, name, O_PATH);
	if (opath < 0)
		return classify_failed(w, path, errno, err);
	struct stat st;
	if (fstat(opath, &st) < 0)
		return skip(w, path, RB_HARVEST_UNREADABLE, strerror(errno), -1, err);
	switch (st.st_mode & S_IFMT) {
	case S_IFREG: return harvest_file(w, pfd, name, path, &st, err);
	case S_IFDIR: return enter_dir(w, f, pfd, name, opath, &st, &path, sub, err);
	case S_IFLNK: return skip(w, path, RB_HARVEST_SYMLINK, NULL, -1, err);
	case S_IFIFO: return skip(w, path, RB_HARVEST_FIFO, NULL, -1, err);
	case S_IFSOCK: return skip(w, path, RB_HARVEST_SOCKET, NULL, -1, err);
	case S_IFCHR:
	case S_IFBLK: return skip(w, path, RB_HARVEST_DEVICE, NULL, -1, err);
	default: return skip(w, path, RB_HARVEST_UNREADABLE, "unknown file type", -1, err);
	}
}

static int cmp_artifact(const void *a, const void *b)
{
	return strcmp(((const struct rb_harvest_artifact *)a)->path, ((const struct rb_harvest_artifact *)b)->path);
}

static int cmp_skip(const void *a, const void *b)
{
	return strcmp(((const struct rb_harvest_skip *)a)->path, ((const struct rb_harvest_skip *)b)->path);
}

/* The walk is iterative: the stack holds one open directory per level, at most
 * max_depth + 1, so a 1,000-deep tree costs neither recursion nor descriptors. */
static int walk_tree(struct walk *w, int out_dirfd, struct rb_error *err)
{
	struct frame *stack = calloc((size_t)w->caps->max_depth + 1, sizeof *stack);
	if (!stack)
		return oom(err);
	size_t top = 0;
	int r = -1;

	int rootfd = open_beneath(w, out_dirfd, ".", O_RDONLY | O_DIRECTORY);
	if (rootfd < 0) {
		if (errno == ENOSYS)
			fatal(ENOSYS, "", err);
		else
			rb_error_set(err, errno, "harvest: open the out directory");
		goto out;
	}
	stack[0] = (struct frame){.dir = fdopendir(rootfd), .path = strdup(""), .depth = 0};
	if (!stack[0].dir || !stack[0].path) {
		if (!stack[0].dir)
			close(rootfd);
		free(stack[0].path);
		oom(err);
		goto out;
	}
	top = 1;
	w->res->dirs_seen = 1;

	while (top > 0) {
		struct frame *f = &stack[top - 1];
		errno = 0;
		struct dirent *de = readdir(f->dir);
		if (!de) {
			int e = errno;
			if (e != 0 && skip(w, f->path, RB_HARVEST_UNREADABLE, strerror(e), -1, err) < 0)
				goto out;
			closedir(f->dir);
			free(f->path);
			top--;
			continue;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		struct frame sub = {0};
		if (visit(w, f, de->d_name, &sub, err) < 0)
			goto out;
		if (sub.dir)
			stack[top++] = sub;
	}
	r = 0;
out:
	while (top > 0) {
		top--;
		closedir(stack[top].dir);
		free(stack[top].path);
	}
	free(stack);
	return r;
}

/* A recorded path through the scrubber: *path replaced by its scrubbed form when that
 * differs (or by a marker when the scrubber fails: a name is never kept unscrubbed). Returns
 * true when it was replaced, false when unchanged or out of memory (then kept as it was only
 * if the scrubber said it holds nothing). */
static bool scrub_path(const struct walk *w, char **path)
{
	if (!w->scrub || !*path)
		return false;
	char *out = NULL;
	size_t out_len = 0;
	json_t *red = NULL;
	struct rb_error err;
	char *repl;
	if (w->scrub(w->scrub_ctx, *path, strlen(*path), &out, &out_len, &red, &err) < 0)
		repl = strdup("[REDACTED:scrub-failed]");
	else if (out)
		repl = strndup(out, out_len);
	else
		return false;
	free(out);
	json_decref(red);
	if (!repl) { /* out of memory: the marker is a constant length, written over the name */
		snprintf(*path, strlen(*path) + 1, "%s", "[REDACTED]");
		return true;
	}
	free(*path);
	*path = repl;
	return true;
}

/* Every name the result records, scrubbed before it is sorted, printed or put in the ledger. */
static void scrub_paths(const struct walk *w, struct rb_harvest_result *res)
{
	for (size_t i = 0; i < res->n_artifacts; i++)
		res->artifacts[i].path_redacted = scrub_path(w, &res->artifacts[i].path);
	for (size_t i = 0; i < res->n_skipped; i++) {
		res->skipped[i].path_redacted = scrub_path(w, &res->skipped[i].path);
		res->skipped[i].other_redacted = scrub_path(w, &res->skipped[i].other);
	}
}

bool rb_harvest_cpu_to_spare(void)
{
	double load;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	return cpus > 1 && getloadavg(&load, 1) == 1 && load + 1 <= (double)cpus;
}

int rb_harvest_hooked(int out_dirfd, const struct rb_harvest_caps *caps, rb_harvest_scrub_fn scrub, void *scrub_ctx,
                      const char *store_dir, const struct rb_harvest_hooks *hooks, struct rb_harvest_result *res,
                      struct rb_error *err)
{
	memset(res, 0, sizeof *res);
	if (caps)
		res->caps = *caps;
	else
		rb_harvest_caps_default(&res->caps);
	if (res->caps.max_depth > RB_HARVEST_DEPTH_LIMIT)
		return rb_error_set(err, 0, "harvest: max_depth %" PRIu32 " is above the limit %u", res->caps.max_depth,
		                    RB_HARVEST_DEPTH_LIMIT);
	struct walk w = {
	    .caps = &res->caps,
	    .scrub = scrub,
	    .scrub_ctx = scrub_ctx,
	    .scrub_concurrent = hooks && hooks->scrub_concurrent,
	    .store_dir = store_dir,
	    .race = hooks ? hooks->race : NULL,
	    .race_ctx = hooks ? hooks->race_ctx : NULL,
	    .reopen = hooks ? hooks->reopen : NULL,
	    .reopen_ctx = hooks ? hooks->reopen_ctx : NULL,
	    .progress = hooks ? hooks->progress : (struct rb_progress){0},
	    .res = res,
	};
	int r = walk_tree(&w, out_dirfd, err);
	struct rb_error late;
	if (finish_behind(&w, r == 0 ? err : &late) < 0)
		r = -1;
	report(&w, true);
	free(w.spare);
	for (size_t i = 0; i < w.cap_links; i++)
		free(w.links[i].path);
	free(w.links);
	scrub_paths(&w, res);

	if (res->n_artifacts > 1)
		qsort(res->artifacts, res->n_artifacts, sizeof *res->artifacts, cmp_artifact);
	if (res->n_skipped > 1)
		qsort(res->skipped, res->n_skipped, sizeof *res->skipped, cmp_skip);
	/* One syncfs for the batch, and only when something new was written: the ledger will
	 * name these objects, so they must outlive a crash of the host. */
	if (r == 0 && res->objects_new > 0 && rb_artifact_sync(store_dir, err) < 0)
		r = -1;
	res->complete = r == 0;
	if (res->skipped_total > 0)
		rb_debug("harvest: %" PRIu64 " entries skipped, %zu listed", res->skipped_total, res->n_skipped);
	return r;
}

int rb_harvest_with_race(int out_dirfd, const struct rb_harvest_caps *caps, rb_harvest_scrub_fn scrub, void *scrub_ctx,
                         const char *store_dir, rb_harvest_race_fn race, void *race_ctx, struct rb_harvest_result *res,
                         struct rb_error *err)
{
	struct rb_harvest_hooks hooks = {.race = race, .race_ctx = race_ctx};
	return rb_harvest_hooked(out_dirfd, caps, scrub, scrub_ctx, store_dir, &hooks, res, err);
}

int rb_harvest(int out_dirfd, const struct rb_harvest_caps *caps, rb_harvest_scrub_fn scrub, void *scrub_ctx,
               const char *store_dir, struct rb_harvest_result *res, struct rb_error *err)
{
	return rb_harvest_hooked(out_dirfd, caps, scrub, scrub_ctx, store_dir, NULL, res, err);
}

/* Paths are whatever bytes the sandbox chose; JSON needs UTF-8. A path that is not valid
 * UTF-8 is written with every non-ASCII byte and backslash as \xNN, and flagged. */
static int set_path(json_t *o, const char *key, const char *path)
{
	json_t *s = json_string(path);
	if (s)
		return json_object_set_new(o, key, s);
	size_t len = strlen(path);
	_cleanup_free_ char *esc = malloc(4 * len + 1);
	if (!esc)
		return -1;
	char *p = esc;
	for (const unsigned char *c = (const unsigned char *)path; *c; c++)
		p += (*c >= 0x80 || *c == '\\') ? sprintf(p, "\\x%02x", *c) : sprintf(p, "%c", *c);
	char flag[64];
	snprintf(flag, sizeof flag, "%s_escaped", key);
	if (json_object_set_new(o, key, json_string(esc)) < 0 || json_object_set_new(o, flag, json_true()) < 0)
		return -1;
	return 0;
}

json_t *rb_harvest_json(const struct rb_harvest_result *res)
{
	_cleanup_json_ json_t *o = json_object();
	json_t *arts = json_array(), *skips = json_array(), *by = json_object();
	if (!o || json_object_set_new(o, "artifacts", arts) < 0 || json_object_set_new(o, "skipped", skips) < 0 ||
	    json_object_set_new(o, "skipped_by_reason", by) < 0)
		return NULL;
	for (size_t i = 0; i < res->n_artifacts; i++) {
		const struct rb_harvest_artifact *a = &res->artifacts[i];
		json_t *j = json_object();
		if (!j || json_array_append_new(arts, j) < 0 || set_path(j, "path", a->path) < 0)
			return NULL;
		if (a->path_redacted)
			json_object_set_new(j, "path_redacted", json_true());
		json_object_set_new(j, "size", json_integer((json_int_t)a->size));
		json_object_set_new(j, "original_size", json_integer((json_int_t)a->original_size));
		json_object_set_new(j, "digest", json_string(a->digest));
		json_object_set_new(j, "redactions", a->redactions ? json_deep_copy(a->redactions) : json_object());
		json_object_set_new(j, "redaction_count", json_integer((json_int_t)a->redaction_count));
	}
	for (size_t i = 0; i < res->n_skipped; i++) {
		const struct rb_harvest_skip *s = &res->skipped[i];
		json_t *j = json_object();
		if (!j || json_array_append_new(skips, j) < 0 || set_path(j, "path", s->path) < 0)
			return NULL;
		if (s->path_redacted)
			json_object_set_new(j, "path_redacted", json_true());
		if (s->other_redacted)
			json_object_set_new(
			    j, s->reason == RB_HARVEST_HARDLINK ? "hardlink_of_redacted" : "detail_redacted",
			    json_true());
		if (s->reason == RB_HARVEST_HARDLINK) {
			/* "hardlink_of:<path>", and the first path on its own for readers. */
			_cleanup_free_ char *reason = NULL;
			if (asprintf(&reason, "hardlink_of:%s", s->other ? s->other : "") < 0)
				return NULL;
			json_t *rs = json_string(reason);
			if (rs)
				json_object_set_new(j, "reason", rs);
			else
				json_object_set_new(j, "reason", json_string("hardlink_of"));
			if (s->other && set_path(j, "hardlink_of", s->other) < 0)
				return NULL;
		} else {
			json_object_set_new(j, "reason", json_string(rb_harvest_reason_name(s->reason)));
			if (s->other)
				json_object_set_new(j, "detail", json_string(s->other));
		}
		if (s->size >= 0)
			json_object_set_new(j, "size", json_integer(s->size));
	}
	for (unsigned r = 0; r < RB_HARVEST_REASON_COUNT; r++)
		if (res->skipped_by_reason[r])
			json_object_set_new(by, rb_harvest_reason_name(r),
			                    json_integer((json_int_t)res->skipped_by_reason[r]));
	json_object_set_new(o, "skipped_total", json_integer((json_int_t)res->skipped_total));
	json_object_set_new(o, "skipped_listed", json_integer((json_int_t)res->n_skipped));
	json_object_set_new(o, "entries_seen", json_integer((json_int_t)res->entries_seen));
	json_object_set_new(o, "dirs_seen", json_integer((json_int_t)res->dirs_seen));
	json_object_set_new(o, "files_seen", json_integer((json_int_t)res->files_seen));
	json_object_set_new(o, "bytes_read", json_integer((json_int_t)res->bytes_read));
	json_object_set_new(o, "bytes_stored", json_integer((json_int_t)res->bytes_stored));
	json_object_set_new(o, "objects_new", json_integer((json_int_t)res->objects_new));
	json_object_set_new(o, "bytes_new", json_integer((json_int_t)res->bytes_new));
	json_object_set_new(o, "redactions_total", json_integer((json_int_t)res->redactions_total));
	json_object_set_new(o, "complete", json_boolean(res->complete));
	json_t *caps = json_pack("{s:I, s:I, s:I, s:I, s:I}", "max_file_bytes", (json_int_t)res->caps.max_file_bytes,
	                         "max_total_bytes", (json_int_t)res->caps.max_total_bytes, "max_files",
	                         (json_int_t)res->caps.max_files, "max_depth", (json_int_t)res->caps.max_depth,
	                         "max_skip_records", (json_int_t)res->caps.max_skip_records);
	if (!caps || json_object_set_new(o, "caps", caps) < 0)
		return NULL;
	return rb_steal_ptr(&o);
}

void rb_harvest_result_free(struct rb_harvest_result *res)
{
	if (!res)
		return;
	for (size_t i = 0; i < res->n_artifacts; i++) {
		free(res->artifacts[i].path);
		if (res->artifacts[i].redactions)
			json_decref(res->artifacts[i].redactions);
	}
	for (size_t i = 0; i < res->n_skipped; i++) {
		free(res->skipped[i].path);
		free(res->skipped[i].other);
	}
	free(res->artifacts);
	free(res->skipped);
	res->artifacts = NULL;
	res->skipped = NULL;
	res->n_artifacts = res->n_skipped = 0;
	res->cap_artifacts_ = res->cap_skipped_ = 0;
}

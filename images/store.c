/* The image store (images/store.h): lookups by name or digest, references written by rename,
 * the listing, and removal that a live run's image survives. */
#define _GNU_SOURCE
#include "images/store.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

#define META_MAX (64u << 10)

bool rb_store_name_valid(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 128 || !isalnum((unsigned char)name[0]))
		return false;
	if (!strcmp(name, "minimal") || !strcmp(name, "host") || !strncmp(name, "sha256:", 7))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._:-", name[i]))
			return false;
	return true;
}

static bool digest_valid(const char *d)
{
	if (strncmp(d, "sha256:", 7) != 0 || strlen(d) != 71)
		return false;
	for (const char *p = d + 7; *p; p++)
		if (!isdigit((unsigned char)*p) && !(*p >= 'a' && *p <= 'f'))
			return false;
	return true;
}

int rb_store_dirs(const struct rb_paths *paths, char store[PATH_MAX], char refs[PATH_MAX], struct rb_error *err)
{
	snprintf(store, PATH_MAX, "%s/images/store", paths->state_dir);
	snprintf(refs, PATH_MAX, "%s/images/refs", paths->state_dir);
	if (rb_state_dir_make(paths->state_dir, err) < 0 || rb_mkdir_p(store, 0700, err) < 0 ||
	    rb_mkdir_p(refs, 0700, err) < 0)
		return -1;
	return 0;
}

/* The digest a reference file names, or 1 when there is no such reference. */
static int read_ref(const char *refs, const char *name, char digest[72], struct rb_error *err)
{
	char path[PATH_MAX + 160];
	snprintf(path, sizeof path, "%s/%s", refs, name);
	_cleanup_free_ char *text = NULL;
	if (rb_read_file(path, 128, &text, NULL, err) < 0)
		return errno == ENOENT || err->errnum == ENOENT ? 1 : -1;
	text[strcspn(text, "\n")] = '\0';
	if (!digest_valid(text))
		return rb_error_set(err, 0, "image reference `%s`: `%s` holds no sha256 digest", name, path);
	snprintf(digest, 72, "%s", text);
	return 0;
}

static int load_meta(const char *store, const char *digest, struct rb_store_image *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	char meta[PATH_MAX + 96];
	snprintf(out->digest, sizeof out->digest, "%s", digest);
	snprintf(out->rootfs, sizeof out->rootfs, "%s/%s/rootfs", store, digest + 7);
	snprintf(meta, sizeof meta, "%s/%s/meta.json", store, digest + 7);
	struct stat st;
	if (stat(out->rootfs, &st) < 0) {
		rb_error_set(err, 0, "image `%s`: not in the store", digest);
		return 1;
	}
	_cleanup_free_ char *text = NULL;
	if (rb_read_file(meta, META_MAX, &text, NULL, err) < 0)
		return -1;
	json_error_t je;
	_cleanup_json_ json_t *m = json_loads(text, 0, &je);
	const char *d = json_string_value(json_object_get(m, "digest"));
	if (!m || !d || strcmp(d, digest) != 0)
		return rb_error_set(err, 0, "image `%s`: `%s` is not its metadata", digest, meta);
	out->size = (uint64_t)json_integer_value(json_object_get(m, "size"));
	out->files = (uint64_t)json_integer_value(json_object_get(m, "files"));
	out->created = (int64_t)json_integer_value(json_object_get(m, "created"));
	const char *src = json_string_value(json_object_get(m, "source"));
	snprintf(out->source, sizeof out->source, "%s", src ? src : "");
	return 0;
}

int rb_store_lookup(const struct rb_paths *paths, const char *ref, struct rb_store_image *out, struct rb_error *err)
{
	char store[PATH_MAX], refs[PATH_MAX], digest[72];
	snprintf(store, sizeof store, "%s/images/store", paths->state_dir);
	snprintf(refs, sizeof refs, "%s/images/refs", paths->state_dir);
	if (!strncmp(ref, "sha256:", 7)) {
		if (!digest_valid(ref))
			return rb_error_set(err, 0, "image `%s`: a digest is sha256: and 64 lowercase hex digits", ref);
		snprintf(digest, sizeof digest, "%s", ref);
	} else {
		if (!rb_store_name_valid(ref)) {
			rb_error_set(err, 0, "image `%s`: not a store reference", ref);
			return 1;
		}
		int r = read_ref(refs, ref, digest, err);
		if (r > 0)
			rb_error_set(err, 0, "image `%s`: no such name in the store", ref);
		if (r)
			return r;
	}
	return load_meta(store, digest, out, err);
}

static int writable(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (type == FTW_D && (st->st_mode & 0700) != 0700)
		chmod(path, (st->st_mode & 07777) | 0700);
	return 0;
}

int rb_store_rm_tree(const char *path, struct rb_error *err)
{
	nftw(path, writable, 32, FTW_PHYS | FTW_MOUNT);
	return rb_rm_rf(path, err);
}

/* Written whole to a private temporary name, then renamed over the reference. */
static int write_ref(const char *refs, const char *name, const char *digest, struct rb_error *err)
{
	char path[PATH_MAX + 160], tmp[PATH_MAX + 200], line[80];
	snprintf(path, sizeof path, "%s/%s", refs, name);
	snprintf(tmp, sizeof tmp, "%s/.tmp-%d-%s", refs, (int)getpid(), name);
	int n = snprintf(line, sizeof line, "%s\n", digest);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return rb_error_set(err, errno, "create `%s`", tmp);
	if (write(fd, line, (size_t)n) != n || fsync(fd) < 0) {
		int e = errno;
		unlink(tmp);
		return rb_error_set(err, e, "write `%s`", tmp);
	}
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return rb_error_set(err, e, "rename `%s` to `%s`", tmp, path);
	}
	return 0;
}

int rb_store_tag(const struct rb_paths *paths, const char *name, const char *digest, struct rb_error *err)
{
	char store[PATH_MAX], refs[PATH_MAX];
	if (!rb_store_name_valid(name))
		return rb_error_set(err, 0,
		                    "image name `%s`: 1-128 of A-Z a-z 0-9 . _ : -, starting with a letter or digit, "
		                    "not `minimal`, `host` or `sha256:...`",
		                    name);
	if (rb_store_dirs(paths, store, refs, err) < 0)
		return -1;
	struct rb_store_image img;
	int r = load_meta(store, digest, &img, err);
	if (r)
		return -1;
	return write_ref(refs, name, digest, err);
}

int rb_store_commit(const struct rb_paths *paths, const char *tmpdir, const char *digest, struct rb_error *err)
{
	char store[PATH_MAX], refs[PATH_MAX], dest[PATH_MAX + 80];
	if (rb_store_dirs(paths, store, refs, err) < 0)
		return -1;
	snprintf(dest, sizeof dest, "%s/%s", store, digest + 7);
	if (rename(tmpdir, dest) == 0)
		return 0;
	int e = errno;
	if (e == EEXIST || e == ENOTEMPTY) {
		rb_store_rm_tree(tmpdir, NULL); /* the same tree is in the store already */
		return 0;
	}
	return rb_error_set(err, e, "rename `%s` to `%s`", tmpdir, dest);
}

/* Calls fn for every reference: its name and the digest it names. */
static int each_ref(const char *refs, int (*fn)(const char *name, const char *digest, void *ctx), void *ctx,
                    struct rb_error *err)
{
	_cleanup_closedir_ DIR *d = opendir(refs);
	if (!d)
		return errno == ENOENT ? 0 : rb_error_set(err, errno, "open `%s`", refs);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !rb_store_name_valid(e->d_name))
			continue;
		char digest[72];
		struct rb_error rerr;
		if (read_ref(refs, e->d_name, digest, &rerr) != 0)
			continue;
		int r = fn(e->d_name, digest, ctx);
		if (r)
			return r;
	}
	return 0;
}

static int add_name(const char *name, const char *digest, void *ctx)
{
	json_t *by_digest = ctx;
	json_t *names = json_object_get(by_digest, digest);
	if (!names) {
		names = json_array();
		json_object_set_new(by_digest, digest, names);
	}
	json_array_append_new(names, json_string(name));
	return 0;
}

static int by_created(const void *a, const void *b)
{
	json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
	json_int_t cx = json_integer_value(json_object_get(x, "created"));
	json_int_t cy = json_integer_value(json_object_get(y, "created"));
	if (cx != cy)
		return cx < cy ? -1 : 1;
	return strcmp(json_string_value(json_object_get(x, "digest")), json_string_value(json_object_get(y, "digest")));
}

int rb_store_list(const struct rb_paths *paths, json_t **out, struct rb_error *err)
{
	char store[PATH_MAX], refs[PATH_MAX];
	*out = NULL;
	if (rb_store_dirs(paths, store, refs, err) < 0)
		return -1;
	_cleanup_json_ json_t *names = json_object();
	if (each_ref(refs, add_name, names, err) < 0)
		return -1;
	_cleanup_closedir_ DIR *d = opendir(store);
	if (!d)
		return rb_error_set(err, errno, "open `%s`", store);
	size_t n = 0, cap = 0;
	_cleanup_free_ json_t **items = NULL;
	struct dirent *e;
	while ((e = readdir(d))) {
		char digest[80];
		snprintf(digest, sizeof digest, "sha256:%s", e->d_name);
		struct rb_store_image img;
		struct rb_error merr;
		if (!digest_valid(digest) || load_meta(store, digest, &img, &merr) != 0)
			continue; /* a temporary import, a removal under way, or not the store's */
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of json_t pointers
			json_t **ni = realloc(items, cap * sizeof *ni);
			if (!ni) {
				for (size_t i = 0; i < n; i++)
					json_decref(items[i]);
				return rb_error_set(err, ENOMEM, "list `%s`", store);
			}
			items = ni;
		}
		json_t *nm = json_object_get(names, digest);
		items[n++] = json_pack("{s:O, s:s, s:I, s:I, s:I, s:s}", "names", nm ? nm : json_array(), "digest",
		                       digest, "size", (json_int_t)img.size, "files", (json_int_t)img.files, "created",
		                       (json_int_t)img.created, "source", img.source);
	}
	if (n)
		// NOLINTNEXTLINE(bugprone-sizeof-expression): an array of json_t pointers
		qsort(items, n, sizeof *items, by_created);
	json_t *arr = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, items[i]);
	*out = arr;
	return 0;
}

struct refs_to {
	const char *digest;
	const char *except; /* a name not to count */
	unsigned n;
	const char *refs; /* when set: remove each one found */
};

static int count_ref(const char *name, const char *digest, void *ctx)
{
	struct refs_to *c = ctx;
	if (strcmp(digest, c->digest) != 0 || (c->except && !strcmp(name, c->except)))
		return 0;
	c->n++;
	if (c->refs) {
		char path[PATH_MAX + 160];
		snprintf(path, sizeof path, "%s/%s", c->refs, name);
		unlink(path);
	}
	return 0;
}

/* The id of a live run on digest, or 0 (none). */
static int in_use(const json_t *live_runs, const char *digest, char run_id[128])
{
	size_t i;
	json_t *r;
	json_array_foreach(live_runs, i, r)
	{
		const char *img = json_string_value(json_object_get(r, "image"));
		const char *state = json_string_value(json_object_get(r, "state"));
		if (img && state && !strcmp(state, "running") && !strcmp(img, digest)) {
			snprintf(run_id, 128, "%s", json_string_value(json_object_get(r, "run_id")));
			return 1;
		}
	}
	return 0;
}

int rb_store_remove(const struct rb_paths *paths, const char *ref, const json_t *live_runs, struct rb_error *err)
{
	char store[PATH_MAX], refs[PATH_MAX];
	if (rb_store_dirs(paths, store, refs, err) < 0)
		return -1;
	struct rb_store_image img;
	if (rb_store_lookup(paths, ref, &img, err) != 0)
		return -1;
	bool by_name = strncmp(ref, "sha256:", 7) != 0;
	struct refs_to others = {.digest = img.digest, .except = by_name ? ref : NULL};
	if (each_ref(refs, count_ref, &others, err) < 0)
		return -1;
	bool tree_goes = !by_name || others.n == 0;
	if (tree_goes) {
		char run_id[128];
		if (in_use(live_runs, img.digest, run_id))
			return rb_error_set(err, EBUSY, "image `%s` (%s): live run `%s` runs on it", ref, img.digest,
			                    run_id);
	}
	if (by_name) {
		char path[PATH_MAX + 160];
		snprintf(path, sizeof path, "%s/%s", refs, ref);
		if (unlink(path) < 0)
			return rb_error_set(err, errno, "remove `%s`", path);
	} else {
		struct refs_to all = {.digest = img.digest, .refs = refs};
		if (each_ref(refs, count_ref, &all, err) < 0)
			return -1;
	}
	if (!tree_goes)
		return 0;
	/* Renamed away first, so no lookup ever finds a half-removed tree. */
	char dir[PATH_MAX + 80], gone[PATH_MAX + 120];
	snprintf(dir, sizeof dir, "%s/%s", store, img.digest + 7);
	snprintf(gone, sizeof gone, "%s/.rm-%d-%s", store, (int)getpid(), img.digest + 7);
	if (rename(dir, gone) < 0)
		return rb_error_set(err, errno, "rename `%s`", dir);
	return rb_store_rm_tree(gone, err);
}

int rb_store_hold_temp(const char *dir, struct rb_error *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "open `%s`", dir);
	if (flock(fd, LOCK_EX) < 0) {
		int e = errno;
		close(fd);
		return rb_error_set(err, e, "lock `%s`", dir);
	}
	return fd;
}

/* A temporary tree of the store: an import's or a build's (.tmp-, .build-, held locked by its
 * maker while it works) or a removal's (.rm-, renamed away before its deletion). */
static bool temporary(const char *name)
{
	return !strncmp(name, ".tmp-", 5) || !strncmp(name, ".build-", 7) || !strncmp(name, ".rm-", 4);
}

/* A temporary tree is over when nobody holds its lock, and it is older than a minute (a maker
 * locks it just after making it). */
static bool temp_is_over(int store_fd, const char *name, time_t now)
{
	struct stat st;
	if (fstatat(store_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) || now - st.st_mtime < 60)
		return false;
	_cleanup_close_ int fd = openat(store_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
}

static bool in_use_by(const json_t *live_runs, const char *digest)
{
	char run_id[128];
	return in_use(live_runs, digest, run_id);
}

int rb_image_gc(const struct rb_paths *paths, const json_t *live_runs, bool dry_run, json_t **report,
                struct rb_error *err)
{
	*report = NULL;
	char store[PATH_MAX], refs[PATH_MAX];
	if (rb_store_dirs(paths, store, refs, err) < 0)
		return -1;
	_cleanup_json_ json_t *names = json_object();
	if (!names || each_ref(refs, add_name, names, err) < 0)
		return names ? -1 : rb_error_set(err, ENOMEM, "image gc");
	_cleanup_closedir_ DIR *d = opendir(store);
	if (!d)
		return rb_error_set(err, errno, "open `%s`", store);
	_cleanup_json_ json_t *removed = json_array();
	json_int_t kept = 0, bytes = 0;
	time_t now = time(NULL);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char path[PATH_MAX + 300];
		snprintf(path, sizeof path, "%s/%s", store, e->d_name);
		if (temporary(e->d_name)) {
			if (!temp_is_over(dirfd(d), e->d_name, now)) {
				kept++;
				continue;
			}
			if (!dry_run && rb_store_rm_tree(path, err) < 0)
				return -1;
			json_array_append_new(removed, json_pack("{s:s}", "temporary", e->d_name));
			continue;
		}
		char digest[80];
		snprintf(digest, sizeof digest, "sha256:%.70s", e->d_name);
		struct rb_store_image img;
		struct rb_error merr;
		if (!digest_valid(digest) || load_meta(store, digest, &img, &merr) != 0)
			continue; /* not the store's: left alone */
		if (json_object_get(names, digest) || in_use_by(live_runs, digest)) {
			kept++;
			continue;
		}
		/* Renamed away first, as rm does, so no run finds half of it. */
		char gone[PATH_MAX + 300];
		snprintf(gone, sizeof gone, "%s/.rm-%d-%s", store, (int)getpid(), e->d_name);
		if (!dry_run && rename(path, gone) < 0)
			return rb_error_set(err, errno, "remove `%s`", path);
		if (!dry_run && rb_store_rm_tree(gone, err) < 0)
			return -1;
		json_array_append_new(removed, json_pack("{s:s, s:I}", "digest", digest, "size", (json_int_t)img.size));
		bytes += (json_int_t)img.size;
	}
	*report = json_pack("{s:O, s:I, s:I, s:b}", "removed", removed, "kept", kept, "removed_bytes", bytes, "dry_run",
	                    dry_run);
	return *report ? 0 : rb_error_set(err, ENOMEM, "image gc");
}

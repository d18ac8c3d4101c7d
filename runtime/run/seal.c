/* Sealed copies of skill bundles and artifact inputs (see seal.h): one walk that never follows a
 * link copies and hashes, so that what is digested is what the sandbox gets. */
#define _GNU_SOURCE
/* SHA256_* straight from libcrypto, as common/util.c does (no EVP provider start-up). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "runtime/run/seal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/copyfd.h"
#include "common/util.h"

struct walk {
	SHA256_CTX sha;
	struct rb_seal_budget *budget;
	dev_t dev;
	char path[PATH_MAX]; /* the entry's path relative to the top */
	struct rb_error *err;
};

static void put(SHA256_CTX *sha, const char *s)
{
	SHA256_Update(sha, s, strlen(s) + 1);
}

static void hex_of(const unsigned char md[SHA256_DIGEST_LENGTH], char out[65])
{
	for (size_t i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int take_entry(struct rb_seal_budget *b, const char *what, struct rb_error *err)
{
	if (b->entries >= b->max_entries)
		return rb_error_set(err, EFBIG,
		                    "`%s`: over the %" PRIu64 " files, directories and links a run may copy", what,
		                    b->max_entries);
	b->entries++;
	return 0;
}

/* Copies the open regular file in to a new file name below dst with mode; *size and hex get
 * what was copied (read to its end, within the budget's bytes). */
static int copy_contents(int in, const char *what, int dst, const char *name, mode_t mode, struct rb_seal_budget *b,
                         uint64_t *size, char hex[65], struct rb_error *err)
{
	_cleanup_close_ int out = openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return rb_error_set(err, errno, "copy of `%s`: create", what);
	enum rb_copy_fail why;
	*size = 0;
	hex[0] = '\0';
	int r = rb_copy_fd(in, out, b->max_bytes - b->bytes, size, hex, &why);
	b->bytes += *size;
	if (r < 0 && why == RB_COPY_CAP)
		return rb_error_set(err, EFBIG, "`%s`: over the %" PRIu64 " MiB a run may copy", what,
		                    b->max_bytes >> 20);
	if (r < 0)
		return rb_error_set(err, errno, why == RB_COPY_READ ? "read `%s`" : "copy of `%s`: write", what);
	if (fchmod(out, mode) < 0)
		return rb_error_set(err, errno, "copy of `%s`: chmod", what);
	if (close(rb_steal_fd(&out)) < 0)
		return rb_error_set(err, errno, "copy of `%s`: close", what);
	return 0;
}

static void record(struct walk *w, char type, mode_t mode)
{
	char t[2] = {type, '\0'}, m[16];
	snprintf(m, sizeof m, "%04o", (unsigned)mode);
	put(&w->sha, t);
	put(&w->sha, m);
	put(&w->sha, w->path);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The names in the directory sd, sorted; at most what the budget has left. */
static int list_dir(struct walk *w, int sd, char ***out, size_t *n_out)
{
	*out = NULL;
	*n_out = 0;
	int fd = dup(sd);
	if (fd < 0)
		return rb_error_set(w->err, errno, "list `%s`", w->path);
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rb_error_set(w->err, errno, "list `%s`", w->path);
	}
	_cleanup_closedir_ DIR *dir = d;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	uint64_t left = w->budget->max_entries - w->budget->entries;
	while ((errno = 0, e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n >= left) {
			free_names(names, n);
			return rb_error_set(w->err, EFBIG,
			                    "`%s`: over the %" PRIu64 " files, directories and links a run may copy",
			                    w->path, w->budget->max_entries);
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			char **more = realloc(names, cap * sizeof *names);
			if (!more) {
				free_names(names, n);
				return rb_error_set(w->err, ENOMEM, "list `%s`", w->path);
			}
			names = more;
		}
		if (!(names[n] = strdup(e->d_name))) {
			free_names(names, n);
			return rb_error_set(w->err, ENOMEM, "list `%s`", w->path);
		}
		n++;
	}
	if (errno) {
		int e2 = errno;
		free_names(names, n);
		return rb_error_set(w->err, e2, "list `%s`", w->path);
	}
	if (n)
		qsort(names, n, sizeof *names, cmp_names);
	*out = names;
	*n_out = n;
	return 0;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && (a->st_mode & S_IFMT) == (b->st_mode & S_IFMT);
}

static int copy_dir(struct walk *w, int sd, int dd, int depth);

/* One entry of the directory sd, copied into dd; w->path names it. */
static int copy_entry(struct walk *w, int sd, int dd, const char *name, int depth)
{
	struct stat st, now;
	if (fstatat(sd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return rb_error_set(w->err, errno, "stat `%s`", w->path);
	if (take_entry(w->budget, w->path, w->err) < 0)
		return -1;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(sd, name, target, sizeof target - 1);
		if (n < 0)
			return rb_error_set(w->err, errno, "readlink `%s`", w->path);
		target[n] = '\0';
		if (symlinkat(target, dd, name) < 0)
			return rb_error_set(w->err, errno, "copy of `%s`: symlink", w->path);
		record(w, 'l', 0777);
		put(&w->sha, target);
		return 0;
	}
	if (S_ISDIR(st.st_mode)) {
		if (st.st_dev != w->dev)
			return rb_error_set(w->err, EXDEV, "`%s` is another filesystem mounted inside the bundle",
			                    w->path);
		if (depth >= RB_SEAL_MAX_DEPTH)
			return rb_error_set(w->err, ELOOP, "`%s`: deeper than %d directories", w->path,
			                    RB_SEAL_MAX_DEPTH);
		_cleanup_close_ int sub = openat(sd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || fstat(sub, &now) < 0)
			return rb_error_set(w->err, errno, "open `%s`", w->path);
		if (!same_file(&st, &now))
			return rb_error_set(w->err, EAGAIN, "`%s` changed while it was copied", w->path);
		if (mkdirat(dd, name, 0700) < 0)
			return rb_error_set(w->err, errno, "copy of `%s`: mkdir", w->path);
		_cleanup_close_ int dsub = openat(dd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dsub < 0)
			return rb_error_set(w->err, errno, "copy of `%s`: open", w->path);
		mode_t mode = now.st_mode & 0555;
		record(w, 'd', mode);
		if (copy_dir(w, sub, dsub, depth + 1) < 0)
			return -1;
		if (fchmod(dsub, mode | S_IWUSR) < 0)
			return rb_error_set(w->err, errno, "copy of `%s`: chmod", w->path);
		return 0;
	}
	if (!S_ISREG(st.st_mode))
		return rb_error_set(w->err, EINVAL, "`%s` is a %s: a bundle holds files, directories and links only",
		                    w->path,
		                    S_ISFIFO(st.st_mode)   ? "fifo"
		                    : S_ISSOCK(st.st_mode) ? "socket"
		                                           : "device");
	/* O_NONBLOCK: should it have become a fifo since the stat, the open does not wait. */
	_cleanup_close_ int in = openat(sd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (in < 0 || fstat(in, &now) < 0)
		return rb_error_set(w->err, errno, "open `%s`", w->path);
	if (!same_file(&st, &now))
		return rb_error_set(w->err, EAGAIN, "`%s` changed while it was copied", w->path);
	mode_t mode = now.st_mode & 0555;
	uint64_t size = 0;
	char hex[65], sz[24];
	if (copy_contents(in, w->path, dd, name, mode, w->budget, &size, hex, w->err) < 0)
		return -1;
	record(w, 'f', mode);
	snprintf(sz, sizeof sz, "%" PRIu64, size);
	put(&w->sha, sz);
	put(&w->sha, hex);
	return 0;
}

static int copy_dir(struct walk *w, int sd, int dd, int depth)
{
	char **names;
	size_t n;
	if (list_dir(w, sd, &names, &n) < 0)
		return -1;
	size_t base = strlen(w->path);
	bool top = !strcmp(w->path, ".");
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		size_t room = top ? sizeof w->path : sizeof w->path - base;
		int len =
		    top ? snprintf(w->path, room, "%s", names[i]) : snprintf(w->path + base, room, "/%s", names[i]);
		if (len < 0 || (size_t)len >= room)
			r = rb_error_set(w->err, ENAMETOOLONG, "`%s`: a name too long", w->path);
		else
			r = copy_entry(w, sd, dd, names[i], depth);
		if (top)
			snprintf(w->path, sizeof w->path, ".");
		else
			w->path[base] = '\0';
	}
	free_names(names, n);
	return r;
}

int rb_seal_tree(int src, int dst, const char *name, struct rb_seal_budget *budget, char digest[RB_SEAL_DIGEST_LEN],
                 struct rb_error *err)
{
	struct walk w = {.budget = budget, .err = err};
	snprintf(w.path, sizeof w.path, ".");
	struct stat st;
	_cleanup_close_ int sd = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sd < 0 || fstat(sd, &st) < 0)
		return rb_error_set(err, errno, "open the bundle");
	w.dev = st.st_dev;
	if (take_entry(budget, ".", err) < 0)
		return -1;
	if (mkdirat(dst, name, 0700) < 0)
		return rb_error_set(err, errno, "copy of the bundle: mkdir `%s`", name);
	_cleanup_close_ int dd = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dd < 0)
		return rb_error_set(err, errno, "copy of the bundle: open `%s`", name);
	SHA256_Init(&w.sha);
	mode_t mode = st.st_mode & 0555;
	record(&w, 'd', mode);
	if (copy_dir(&w, sd, dd, 1) < 0)
		return -1;
	if (fchmod(dd, mode | S_IWUSR) < 0)
		return rb_error_set(err, errno, "copy of the bundle: chmod `%s`", name);
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_Final(md, &w.sha);
	char hex[65];
	hex_of(md, hex);
	snprintf(digest, RB_SEAL_DIGEST_LEN, "sha256:%s", hex);
	return 0;
}

int rb_seal_file(int src, const char *what, int dst, const char *name, struct rb_seal_budget *budget,
                 struct rb_error *err)
{
	char self[64];
	snprintf(self, sizeof self, "/proc/self/fd/%d", src);
	struct stat st, now;
	/* Reopened for reading through the fd's own link: the very file src names, not a path. */
	_cleanup_close_ int in = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (in < 0 || fstat(in, &now) < 0 || fstat(src, &st) < 0)
		return rb_error_set(err, errno, "open `%s`", what);
	if (!S_ISREG(now.st_mode) || !same_file(&st, &now))
		return rb_error_set(err, EINVAL, "`%s` is not a regular file", what);
	if (take_entry(budget, what, err) < 0)
		return -1;
	uint64_t size = 0;
	char hex[65];
	return copy_contents(in, what, dst, name, 0444, budget, &size, hex, err);
}

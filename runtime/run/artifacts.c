/* The content-addressed artifact store: objects named by their sha256, written through a
 * temporary file and a rename so that a reader never sees half an object. Objects are 0640
 * with the store's group (0600 where that group cannot be given): readable by the store's
 * owner (runbox, `artifact get`) and whom the operator puts in that group, never by others. A
 * run gets its artifact inputs as copies (runtime/run/seal.h), never the object itself. */
#define _GNU_SOURCE
#include "runtime/run/artifacts.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

static bool is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[64] == '\0';
}

bool rb_artifact_digest_valid(const char *digest)
{
	if (!digest)
		return false;
	if (strncmp(digest, "sha256:", 7) == 0)
		digest += 7;
	return strlen(digest) == 64 && is_hex64(digest);
}

int rb_artifact_path(const char *store_dir, const char *digest, char out[PATH_MAX], struct rb_error *err)
{
	if (!rb_artifact_digest_valid(digest))
		return rb_error_set(err, 0, "invalid artifact digest `%s` (expected sha256:<64 lowercase hex>)",
		                    digest ? digest : "(null)");
	const char *hex = strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;
	int n = snprintf(out, PATH_MAX, "%s/sha256/%.2s/%s", store_dir, hex, hex);
	if (n < 0 || n >= PATH_MAX)
		return rb_error_set(err, ENAMETOOLONG, "artifact store `%s`", store_dir);
	return 0;
}

/* An object of the right size under its digest name is that content: it only ever appears there
 * by link or rename of a complete write. */
static bool holds(const char *path, size_t len)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == (uint64_t)len;
}

/* Writes one object under a temporary name in dir, then links it at path: 1 when this write put
 * it there, 0 when a concurrent one (another harvest thread, another run) did first, so that of
 * two writers of one object exactly one counts it as new. A file at path that is not the object
 * (a size that differs) is replaced, as are objects on a filesystem without hard links. */
static int write_object(const char *dir, const char *path, const char *hex, const char *data, size_t len, gid_t group,
                        struct rb_error *err)
{
	char tmp[PATH_MAX];
	uint32_t rnd = 0;
	if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
		rnd = (uint32_t)rb_now_us();
	int n = snprintf(tmp, sizeof tmp, "%s/.tmp-%.16s-%d-%08x", dir, hex, (int)getpid(), rnd);
	if (n < 0 || n >= (int)sizeof tmp)
		return rb_error_set(err, ENAMETOOLONG, "artifact store `%s`", dir);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == ENOENT) {
		/* The shard directory is made on first use only, 0711: searchable but not
		 * listable: an object is found by its digest, never by browsing the store. */
		if (rb_mkdir_p(dir, 0711, err) < 0)
			return -1;
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return rb_error_set(err, errno, "create `%s`", tmp);
	/* Group-readable only once the group is the store's; else it stays 0600. */
	mode_t mode = fchown(fd, (uid_t)-1, group) == 0 ? 0640 : 0600;
	if (rb_write_all(fd, data, len) < 0 || fchmod(fd, mode) < 0) {
		int e = errno;
		unlink(tmp);
		return rb_error_set(err, e, "write `%s`", tmp);
	}
	if (close(rb_steal_fd(&fd)) < 0) {
		int e = errno;
		unlink(tmp);
		return rb_error_set(err, e, "close `%s`", tmp);
	}
	if (link(tmp, path) == 0) {
		unlink(tmp);
		return 1;
	}
	if (errno == EEXIST && holds(path, len)) {
		unlink(tmp);
		return 0;
	}
	/* rename replaces atomically. */
	if (rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		return rb_error_set(err, e, "rename `%s` to `%s`", tmp, path);
	}
	return 1;
}

int rb_artifact_store(const char *store_dir, const char *data, size_t len, char digest_out[RB_ARTIFACT_DIGEST_LEN],
                      bool *created, struct rb_error *err)
{
	if (created)
		*created = false;
	char hex[65];
	rb_sha256_hex(data, len, hex);
	char path[PATH_MAX], dir[PATH_MAX];
	if (rb_artifact_path(store_dir, hex, path, err) < 0)
		return -1;
	snprintf(dir, sizeof dir, "%s/sha256/%.2s", store_dir, hex);

	/* Deduplicated: the object is there already (holds, with its mode). */
	struct stat st;
	bool present = lstat(path, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == (uint64_t)len;
	/* An object an older runbox left world-readable (0644) loses that when met again. */
	if (present && (st.st_mode & 0007) && chmod(path, st.st_mode & 0770) < 0)
		return rb_error_set(err, errno, "chmod `%s`", path);
	/* Reused: its mtime says so, for `runbox gc`, which leaves objects touched within its
	 * grace time, as the ledger may not have this run's artifact event yet (storegc.c). One
	 * it removed meanwhile is written again. */
	if (present && utimensat(AT_FDCWD, path, NULL, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		present = false;
	if (!present) {
		/* A store made by this write (below) is ours, and so is its group. */
		struct stat sd;
		gid_t group = stat(store_dir, &sd) == 0 ? sd.st_gid : getegid();
		int placed = write_object(dir, path, hex, data, len, group, err);
		if (placed < 0)
			return -1;
		if (created)
			*created = placed == 1;
	}
	snprintf(digest_out, RB_ARTIFACT_DIGEST_LEN, "sha256:%s", hex);
	return 0;
}

int rb_artifact_sync(const char *store_dir, struct rb_error *err)
{
	_cleanup_close_ int fd = open(store_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "open `%s`", store_dir);
	if (syncfs(fd) < 0)
		return rb_error_set(err, errno, "syncfs `%s`", store_dir);
	return 0;
}

int rb_artifact_read(const char *store_dir, const char *digest, char **data, size_t *len, struct rb_error *err)
{
	*data = NULL;
	*len = 0;
	char path[PATH_MAX];
	if (rb_artifact_path(store_dir, digest, path, err) < 0)
		return -1;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rb_error_set(err, errno, "artifact %s: open `%s`", digest, path);
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > RB_ARTIFACT_READ_MAX)
		return rb_error_set(err, EINVAL, "artifact %s: `%s` is not a stored object", digest, path);
	_cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return rb_error_set(err, ENOMEM, "artifact %s", digest);
	size_t n = 0;
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return rb_error_set(err, r < 0 ? errno : EIO, "artifact %s: read `%s`", digest, path);
		n += (size_t)r;
	}
	char hex[65];
	rb_sha256_hex(buf, n, hex);
	const char *want = strncmp(digest, "sha256:", 7) == 0 ? digest + 7 : digest;
	if (strcmp(hex, want) != 0)
		return rb_error_set(err, EIO,
		                    "artifact %s: `%s` no longer has that digest (sha256:%s): the store is damaged",
		                    digest, path, hex);
	buf[n] = '\0';
	*data = rb_steal_ptr(&buf);
	*len = n;
	return 0;
}

/* One component below dirfd, never through a link. */
static int open_beneath(int dirfd, const char *name, uint64_t flags)
{
	struct open_how how = {.flags = flags | O_NOFOLLOW | O_CLOEXEC,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof how);
}

int rb_artifact_export(const char *store_dir, const char *digest, int dirfd, const char *relpath, bool force,
                       struct rb_error *err)
{
	if (!relpath[0] || relpath[0] == '/')
		return rb_error_set(err, EINVAL, "artifact path `%s`: not a relative path", relpath);
	_cleanup_free_ char *path = strdup(relpath);
	if (!path)
		return rb_error_set(err, ENOMEM, "artifact path `%s`", relpath);
	_cleanup_close_ int dfd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
	if (dfd < 0)
		// cppcheck-suppress memleak ; path is _cleanup_free_
		return rb_error_set(err, errno, "artifact path `%s`", relpath);
	char *name = path;
	for (char *slash; (slash = strchr(name, '/')); name = slash + 1) {
		*slash = '\0';
		if (!name[0] || !strcmp(name, ".") || !strcmp(name, ".."))
			return rb_error_set(err, EINVAL, "artifact path `%s`: empty, `.` or `..` component", relpath);
		if (mkdirat(dfd, name, 0755) < 0 && errno != EEXIST)
			return rb_error_set(err, errno, "mkdir `%s` (of `%s`)", name, relpath);
		int next = open_beneath(dfd, name, O_PATH | O_DIRECTORY);
		if (next < 0)
			return rb_error_set(err, errno, "open `%s` (of `%s`): not a directory, or a link", name,
			                    relpath);
		close(dfd);
		dfd = next;
	}
	if (!name[0] || !strcmp(name, ".") || !strcmp(name, ".."))
		return rb_error_set(err, EINVAL, "artifact path `%s`: empty, `.` or `..` component", relpath);
	_cleanup_free_ char *data = NULL;
	size_t len;
	if (rb_artifact_read(store_dir, digest, &data, &len, err) < 0)
		return -1;
	/* Without force, O_EXCL: an entry already there (a file, a link, anything) stays. With
	 * force, a temporary file renamed over it: rename replaces a link, never writes through it. */
	char tmp[300];
	snprintf(tmp, sizeof tmp, ".runbox-%d-%.16s", (int)getpid(),
	         strncmp(digest, "sha256:", 7) ? digest : digest + 7);
	const char *target = force ? tmp : name;
	_cleanup_close_ int fd = openat(dfd, target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EEXIST && !force)
		return rb_error_set(err, 0, "`%s` exists already (--force replaces it)", relpath);
	if (fd < 0)
		return rb_error_set(err, errno, "create `%s`", relpath);
	if (rb_write_all(fd, data, len) < 0 || close(rb_steal_fd(&fd)) < 0) {
		int e = errno;
		unlinkat(dfd, target, 0);
		return rb_error_set(err, e, "write `%s`", relpath);
	}
	if (force && renameat(dfd, tmp, dfd, name) < 0) {
		int e = errno;
		unlinkat(dfd, tmp, 0);
		return rb_error_set(err, e, "replace `%s`", relpath);
	}
	return 0;
}

/* Import into the image store: every member of the source (a tarball read by libarchive, or a
 * directory read by libarchive's disk reader) is created below the new tree's fd, its parent
 * resolved beneath it, so no name and no link can write outside the tree. */
#define _GNU_SOURCE
/* The SHA256_* calls, as in images/digest.c: no OpenSSL provider set-up. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "images/import.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <dirent.h>
#include <linux/openat2.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/never_input.h"
#include "common/util.h"
#include "images/digest.h"
#include "images/store.h"

#define MAX_OWNER 65535u

/* A directory's mode and owner, set once every member is in: a 0555 directory must still
 * take the members below it. */
struct dirmode {
	char *path;
	mode_t mode;
	uid_t uid;
	gid_t gid;
};

struct unpack {
	const struct rb_import_opts *opts;
	const char *src;
	int root;     /* the new tree (O_PATH) */
	bool as_root; /* real root: owners are set from the source's */
	uint64_t members, bytes;
	struct archive *tarball; /* the source tarball's reader, for the bytes read of it; or NULL */
	uint64_t tarball_size;
	struct dirmode *dirs;
	size_t n_dirs, cap_dirs;
	char buf[1 << 16];
	struct rb_error *err;
};

/* Bytes of the tarball read (compressed, of its size), or bytes unpacked when the total is not known. */
static void report(const struct unpack *u, bool final)
{
	if (!u->opts->progress.fn)
		return;
	struct rb_progress_report r = {
	    .what = "read", .is_bytes = true, .items = u->members, .items_what = "members", .final = final};
	if (u->tarball) {
		la_int64_t n = archive_filter_bytes(u->tarball, -1);
		r.done = n > 0 ? (uint64_t)n : 0;
		r.total = u->tarball_size;
		if (final || r.done > r.total)
			r.done = r.total;
	} else {
		r.what = "unpacked";
		r.done = u->bytes;
	}
	rb_progress_say(&u->opts->progress, &r);
}

static void free_dirs(struct unpack *u)
{
	for (size_t i = 0; i < u->n_dirs; i++)
		free(u->dirs[i].path);
	free(u->dirs);
}

/* Real root (the identity map of the initial user namespace) may give files any owner. */
static bool real_root(void)
{
	if (geteuid() != 0)
		return false;
	_cleanup_free_ char *map = NULL;
	if (rb_read_file("/proc/self/uid_map", 4096, &map, NULL, NULL) < 0)
		return false;
	unsigned long a, b, n;
	return sscanf(map, "%lu %lu %lu", &a, &b, &n) == 3 && a == 0 && b == 0 && n == 4294967295ul;
}

/* A member's name made relative and canonical into out: leading `/` and `.` components
 * dropped (as tar does), `..` refused. "" is the tree's root. */
static int clean_name(struct unpack *u, const char *name, char out[PATH_MAX])
{
	size_t n = 0;
	const char *p = name;
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = strchrnul(p, '/');
		size_t len = (size_t)(e - p);
		if (len == 2 && p[0] == '.' && p[1] == '.')
			return rb_error_set(u->err, 0, "import `%s`: member `%s` has a `..` component (refused)",
			                    u->src, name);
		if (len && !(len == 1 && p[0] == '.')) {
			if (n + len + 2 >= PATH_MAX)
				return rb_error_set(u->err, ENAMETOOLONG, "import `%s`: member `%s`", u->src, name);
			if (n)
				out[n++] = '/';
			memcpy(out + n, p, len);
			n += len;
		}
		p = e;
	}
	out[n] = '\0';
	return 0;
}

/* A directory below the tree, resolved beneath it: a link on the way that leaves the tree
 * (absolute, or `..` past its root) fails with EXDEV, which the error names. */
static int open_beneath(struct unpack *u, const char *rel, const char *member)
{
	if (!*rel)
		return fcntl(u->root, F_DUPFD_CLOEXEC, 0);
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	int fd = (int)syscall(SYS_openat2, u->root, rel, &how, sizeof how);
	if (fd < 0 && errno == EXDEV)
		return rb_error_set(u->err, EXDEV,
		                    "import `%s`: member `%s`: its path `%s` leaves the tree through a link (refused)",
		                    u->src, member, rel);
	return fd;
}

/* The parent directory of rel (made, with missing parents, as tar does), and rel's last name. */
static int open_parent(struct unpack *u, char *rel, const char *member, const char **base)
{
	char *slash = strrchr(rel, '/');
	if (!slash) {
		*base = rel;
		return fcntl(u->root, F_DUPFD_CLOEXEC, 0);
	}
	*slash = '\0';
	*base = slash + 1;
	int fd = open_beneath(u, rel, member);
	if (fd >= 0 || errno != ENOENT || u->err->errnum == EXDEV) {
		if (fd < 0 && u->err->errnum != EXDEV)
			rb_error_set(u->err, errno, "import `%s`: member `%s`: open `%s`", u->src, member, rel);
		*slash = '/';
		return fd;
	}
	/* Some parent is missing: make each, one component at a time, every one resolved anew. */
	for (char *p = rel;; p++) {
		if (*p != '/' && *p)
			continue;
		char c = *p;
		*p = '\0';
		int d = open_beneath(u, rel, member);
		if (d < 0 && errno == ENOENT && u->err->errnum != EXDEV) {
			char *s = strrchr(rel, '/');
			const char *leaf = s ? s + 1 : rel;
			if (s)
				*s = '\0';
			int pd = open_beneath(u, s ? rel : "", member);
			if (s)
				*s = '/';
			if (pd < 0 || (mkdirat(pd, leaf, 0755) < 0 && errno != EEXIST)) {
				if (pd >= 0)
					close(pd);
				*p = c;
				*slash = '/';
				return u->err->errnum == EXDEV
				           ? -1
				           : rb_error_set(u->err, errno, "import `%s`: member `%s`: make `%s`", u->src,
				                          member, rel);
			}
			close(pd);
			d = open_beneath(u, rel, member);
		}
		*p = c;
		if (d < 0) {
			*slash = '/';
			return u->err->errnum == EXDEV
			           ? -1
			           : rb_error_set(u->err, errno, "import `%s`: member `%s`: open `%s`", u->src, member,
			                          rel);
		}
		if (!c) {
			*slash = '/';
			return d;
		}
		close(d);
	}
}

/* Whatever is at base in pfd goes (as tar replaces a member), unless it is a directory. */
static int clear(struct unpack *u, int pfd, const char *base, const char *member)
{
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISDIR(st.st_mode))
		return rb_error_set(u->err, EISDIR, "import `%s`: member `%s` would replace a directory", u->src,
		                    member);
	if (unlinkat(pfd, base, 0) < 0)
		return rb_error_set(u->err, errno, "import `%s`: member `%s`: remove the earlier one", u->src, member);
	return 0;
}

/* A member's data, no more than the size its header gave (which the byte cap was charged). */
static int write_data(struct unpack *u, struct archive *a, int fd, const char *member, uint64_t size)
{
	const void *blk;
	size_t len;
	la_int64_t off;
	int r;
	while ((r = archive_read_data_block(a, &blk, &len, &off)) == ARCHIVE_OK) {
		if (off < 0 || (uint64_t)off + len > size)
			return rb_error_set(u->err, EFBIG,
			                    "import `%s`: member `%s` holds more than its size, %" PRIu64 " bytes",
			                    u->src, member, size);
		const char *p = blk;
		while (len) {
			ssize_t w = pwrite(fd, p, len, off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return rb_error_set(u->err, errno, "import `%s`: write member `%s`", u->src, member);
			p += w;
			off += w;
			len -= (size_t)w;
		}
		report(u, false); /* a large member is many blocks */
	}
	if (r != ARCHIVE_EOF)
		return rb_error_set(u->err, archive_errno(a), "import `%s`: member `%s`: %s", u->src, member,
		                    archive_error_string(a));
	return 0;
}

static int remember_dir(struct unpack *u, const char *rel, mode_t mode, uid_t uid, gid_t gid)
{
	if (u->n_dirs == u->cap_dirs) {
		size_t cap = u->cap_dirs ? 2 * u->cap_dirs : 64;
		struct dirmode *nd = realloc(u->dirs, cap * sizeof *nd);
		if (!nd)
			return rb_error_set(u->err, ENOMEM, "import `%s`", u->src);
		u->dirs = nd;
		u->cap_dirs = cap;
	}
	char *path = strdup(rel);
	if (!path)
		return rb_error_set(u->err, ENOMEM, "import `%s`", u->src);
	u->dirs[u->n_dirs++] = (struct dirmode){path, mode, uid, gid};
	// cppcheck-suppress memleak ; path is u->dirs' now, freed by free_dirs
	return 0;
}

/* The member's file capabilities (its security.capability xattr, as a tar's SCHILY.xattr header
 * or a directory's file carries it), set last: a chown would clear them. Every other xattr is
 * left out. */
static int file_caps(struct unpack *u, struct archive_entry *e, int fd, const char *member)
{
	archive_entry_xattr_reset(e);
	const char *name;
	const void *value;
	size_t size;
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK)
		if (!strcmp(name, "security.capability") && fsetxattr(fd, name, value, size, 0) < 0)
			return rb_error_set(u->err, errno, "import `%s`: member `%s`: set its file capabilities",
			                    u->src, member);
	return 0;
}

/* One member, created below the tree. rel is its clean name (modified in place). */
static int one(struct unpack *u, struct archive *a, struct archive_entry *e, char *rel, const char *member)
{
	mode_t type = archive_entry_filetype(e);
	mode_t mode = archive_entry_perm(e) & 07777;
	uint64_t uid = (uint64_t)archive_entry_uid(e), gid = (uint64_t)archive_entry_gid(e);
	if (type == AE_IFCHR || type == AE_IFBLK)
		return rb_error_set(u->err, EPERM, "import `%s`: member `%s` is a device node (refused)", u->src,
		                    member);
	if (type != AE_IFDIR && type != AE_IFREG && type != AE_IFLNK && type != AE_IFIFO && !archive_entry_hardlink(e))
		return rb_error_set(u->err, EPERM,
		                    "import `%s`: member `%s` is a socket or of an unknown type (refused)", u->src,
		                    member);
	if (u->as_root && (uid > MAX_OWNER || gid > MAX_OWNER))
		return rb_error_set(u->err, ERANGE,
		                    "import `%s`: member `%s` is owned by %" PRIu64 ":%" PRIu64 ", outside 0..%u",
		                    u->src, member, uid, gid, MAX_OWNER);
	if (type != AE_IFDIR && !u->opts->keep_setuid)
		mode &= ~(mode_t)(S_ISUID | S_ISGID);
	if (type == AE_IFDIR && !*rel)
		return remember_dir(u, rel, mode, (uid_t)uid, (gid_t)gid) < 0 ? -1 : 0;
	if (type == AE_IFDIR) {
		/* Made now (private until its mode is set at the end), replacing a file or link. */
		char copy[PATH_MAX];
		snprintf(copy, sizeof copy, "%s", rel);
		const char *b;
		_cleanup_close_ int dpfd = open_parent(u, copy, member, &b);
		struct stat st;
		if (dpfd < 0)
			return -1;
		if (fstatat(dpfd, b, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode) && unlinkat(dpfd, b, 0) < 0)
			return rb_error_set(u->err, errno, "import `%s`: member `%s`: remove the earlier one", u->src,
			                    member);
		if (mkdirat(dpfd, b, 0700) < 0 && errno != EEXIST)
			return rb_error_set(u->err, errno, "import `%s`: make directory `%s`", u->src, member);
		return remember_dir(u, rel, mode, (uid_t)uid, (gid_t)gid) < 0 ? -1 : 0;
	}
	if (!*rel)
		return rb_error_set(u->err, EINVAL, "import `%s`: member `%s` names the root as a file", u->src,
		                    member);
	const char *base;
	_cleanup_close_ int pfd = open_parent(u, rel, member, &base);
	if (pfd < 0)
		return -1;
	if (clear(u, pfd, base, member) < 0)
		return -1;
	const char *hard = archive_entry_hardlink(e);
	if (hard) {
		char trel[PATH_MAX];
		if (clean_name(u, hard, trel) < 0)
			return -1;
		char *ts = strrchr(trel, '/');
		const char *tbase = ts ? ts + 1 : trel;
		if (ts)
			*ts = '\0';
		_cleanup_close_ int tfd = open_beneath(u, ts ? trel : "", member);
		struct stat st;
		if (tfd < 0 || fstatat(tfd, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			return u->err->errnum == EXDEV
			           ? -1
			           : rb_error_set(u->err, EINVAL,
			                          "import `%s`: member `%s` is a hard link to `%s`, "
			                          "which is no earlier file of the tree (refused)",
			                          u->src, member, hard);
		if (linkat(tfd, tbase, pfd, base, 0) < 0)
			return rb_error_set(u->err, errno, "import `%s`: link member `%s`", u->src, member);
		return 0;
	}
	if (type == AE_IFLNK) {
		const char *target = archive_entry_symlink(e);
		if (!target || symlinkat(target, pfd, base) < 0)
			return rb_error_set(u->err, target ? errno : EINVAL, "import `%s`: symlink member `%s`", u->src,
			                    member);
		if (u->as_root && fchownat(pfd, base, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0)
			return rb_error_set(u->err, errno, "import `%s`: chown member `%s`", u->src, member);
		return 0;
	}
	if (type == AE_IFIFO) {
		if (mkfifoat(pfd, base, 0600) < 0)
			return rb_error_set(u->err, errno, "import `%s`: member `%s`", u->src, member);
		if (u->as_root && fchownat(pfd, base, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW) < 0)
			return rb_error_set(u->err, errno, "import `%s`: chown member `%s`", u->src, member);
		if (fchmodat(pfd, base, mode, 0) < 0)
			return rb_error_set(u->err, errno, "import `%s`: chmod member `%s`", u->src, member);
		return 0;
	}
	_cleanup_close_ int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return rb_error_set(u->err, errno, "import `%s`: create member `%s`", u->src, member);
	/* Charged before any byte is read: a sparse member's holes count, as the digest counts them. */
	la_int64_t size = archive_entry_size(e) > 0 ? archive_entry_size(e) : 0;
	u->bytes += (uint64_t)size;
	if (u->bytes > u->opts->max_bytes)
		return rb_error_set(u->err, EFBIG,
		                    "import `%s`: more than %" PRIu64
		                    " bytes unpacked (at member `%s`): a decompression bomb, or raise --max-bytes",
		                    u->src, u->opts->max_bytes, member);
	if (write_data(u, a, fd, member, (uint64_t)size) < 0)
		return -1;
	if (size > 0 && ftruncate(fd, size) < 0) /* a sparse file's hole at its end */
		return rb_error_set(u->err, errno, "import `%s`: member `%s`", u->src, member);
	/* Owner before mode: chown clears setuid bits. */
	if (u->as_root && fchown(fd, (uid_t)uid, (gid_t)gid) < 0)
		return rb_error_set(u->err, errno, "import `%s`: chown member `%s`", u->src, member);
	if (fchmod(fd, mode) < 0)
		return rb_error_set(u->err, errno, "import `%s`: chmod member `%s`", u->src, member);
	return u->opts->keep_file_caps ? file_caps(u, e, fd, member) : 0;
}

/* Directories last, in the order they came (a later layer's mode wins), so a read-only one
 * still took its members. One a whiteout removed has a NULL path. */
static int finish_dirs(struct unpack *u)
{
	for (size_t i = 0; i < u->n_dirs; i++) {
		struct dirmode *d = &u->dirs[i];
		if (!d->path)
			continue;
		_cleanup_close_ int fd =
		    *d->path ? open_beneath(u, d->path, d->path) : fcntl(u->root, F_DUPFD_CLOEXEC, 0);
		if (fd < 0)
			return u->err->errnum == EXDEV
			           ? -1
			           : rb_error_set(u->err, errno, "import `%s`: directory `%s`", u->src, d->path);
		/* O_PATH fds take neither fchown nor fchmod: through /proc/self/fd, which is this fd. */
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
		if (u->as_root && chown(proc, d->uid, d->gid) < 0)
			return rb_error_set(u->err, errno, "import `%s`: chown directory `%s`", u->src, d->path);
		if (chmod(proc, d->mode) < 0)
			return rb_error_set(u->err, errno, "import `%s`: chmod directory `%s`", u->src, d->path);
	}
	return 0;
}

static int unpack_all(struct unpack *u, struct archive *a, bool disk, const char *prefix)
{
	struct archive_entry *e;
	int r;
	size_t plen = prefix ? strlen(prefix) : 0;
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		if (++u->members > u->opts->max_members)
			return rb_error_set(u->err, E2BIG,
			                    "import `%s`: more than %" PRIu64
			                    " members: an archive bomb, or raise --max-members",
			                    u->src, u->opts->max_members);
		const char *name = archive_entry_pathname(e);
		if (!name)
			return rb_error_set(u->err, EINVAL, "import `%s`: a member without a name", u->src);
		if (disk) {
			if (strncmp(name, prefix, plen) != 0 || (name[plen] && name[plen] != '/'))
				return rb_error_set(u->err, EINVAL, "import `%s`: `%s` is not below it", u->src, name);
			name += plen;
			if (archive_read_disk_can_descend(a))
				archive_read_disk_descend(a);
		}
		char rel[PATH_MAX];
		if (clean_name(u, name, rel) < 0 || one(u, a, e, rel, name) < 0)
			return -1;
		report(u, false);
	}
	if (r != ARCHIVE_EOF)
		return rb_error_set(u->err, archive_errno(a), "import `%s`: %s", u->src, archive_error_string(a));
	return 0;
}

static void free_archive(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

/* ---- OCI image layouts ------------------------------------------------------------------ */

#define OCI_JSON_MAX   (4u << 20)
#define OCI_WHITEOUT   ".wh."
#define OCI_OPAQUE     ".wh..wh..opq"
#define OCI_MAX_LAYERS 256

static bool is_layout(const char *dir)
{
	char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/oci-layout", dir);
	if (access(p, F_OK) < 0)
		return false;
	snprintf(p, sizeof p, "%s/index.json", dir);
	return access(p, F_OK) == 0;
}

/* A blob of the layout, opened and checked against its digest (read whole once). */
static int open_blob(struct unpack *u, const char *layout, const char *digest, uint64_t max)
{
	bool ok = digest && !strncmp(digest, "sha256:", 7) && strlen(digest) == 71;
	for (const char *p = digest ? digest + 7 : ""; ok && *p; p++)
		ok = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
	if (!ok)
		return rb_error_set(u->err, EINVAL, "import `%s`: `%s` is no sha256 digest of a blob", u->src,
		                    digest ? digest : "(none)");
	char path[PATH_MAX + 96];
	snprintf(path, sizeof path, "%s/blobs/sha256/%s", layout, digest + 7);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = fd < 0 ? errno : EINVAL;
		if (fd >= 0)
			close(fd);
		return rb_error_set(u->err, e, "import `%s`: blob `%s`", u->src, path);
	}
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return rb_error_set(u->err, EFBIG, "import `%s`: blob `%s` is larger than %" PRIu64 " bytes", u->src,
		                    digest, max);
	}
	SHA256_CTX c;
	SHA256_Init(&c);
	ssize_t n;
	while ((n = read(fd, u->buf, sizeof u->buf)) > 0)
		SHA256_Update(&c, u->buf, (size_t)n);
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_Final(md, &c);
	char hex[65];
	for (unsigned i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * (size_t)i, 3, "%02x", md[i]);
	if (n < 0 || strcmp(hex, digest + 7) != 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return rb_error_set(u->err, n < 0 ? errno : 0, "import `%s`: blob `%s` does not hash to its name",
		                    u->src, digest);
	}
	return fd;
}

static int load_json(struct unpack *u, const char *layout, const char *digest, json_t **out)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *text = NULL;
	if (digest) {
		fd = open_blob(u, layout, digest, OCI_JSON_MAX);
		if (fd < 0)
			return -1;
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
		if (rb_read_file(proc, OCI_JSON_MAX, &text, NULL, u->err) < 0)
			return -1;
	} else {
		char path[PATH_MAX + 16];
		snprintf(path, sizeof path, "%s/index.json", layout);
		if (rb_read_file(path, OCI_JSON_MAX, &text, NULL, u->err) < 0)
			return -1;
	}
	json_error_t je;
	*out = json_loads(text, 0, &je);
	if (!json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		return rb_error_set(u->err, 0, "import `%s`: %s: %s", u->src, digest ? digest : "index.json",
		                    je.text[0] ? je.text : "not a JSON object");
	}
	return 0;
}

/* The image manifest an index names: its only manifest (one level of nested index allowed). */
static int find_manifest(struct unpack *u, const char *layout, json_t **manifest)
{
	_cleanup_json_ json_t *idx = NULL;
	if (load_json(u, layout, NULL, &idx) < 0)
		return -1;
	for (int depth = 0; depth < 3; depth++) {
		json_t *ms = json_object_get(idx, "manifests");
		if (json_array_size(ms) != 1)
			return rb_error_set(
			    u->err, 0,
			    "import `%s`: the index lists %zu manifests; runbox imports a layout of one image", u->src,
			    json_array_size(ms));
		json_t *m = json_array_get(ms, 0);
		const char *mt = json_string_value(json_object_get(m, "mediaType"));
		json_t *next = NULL;
		if (load_json(u, layout, json_string_value(json_object_get(m, "digest")), &next) < 0)
			return -1;
		if (mt && strstr(mt, "image.index")) {
			json_decref(idx);
			idx = next;
			continue;
		}
		*manifest = next;
		return 0;
	}
	return rb_error_set(u->err, 0, "import `%s`: indexes nested too deep", u->src);
}

/* Removes name below dfd, a directory's contents first; never follows a link. */
static int remove_at(struct unpack *u, int dfd, const char *name, unsigned depth)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : rb_error_set(u->err, errno, "import `%s`: whiteout `%s`", u->src, name);
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0
		           ? rb_error_set(u->err, errno, "import `%s`: whiteout `%s`", u->src, name)
		           : 0;
	if (depth > 256)
		return rb_error_set(u->err, ELOOP, "import `%s`: whiteout `%s`: too deep", u->src, name);
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(u->err, errno, "import `%s`: whiteout `%s`", u->src, name);
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return rb_error_set(u->err, errno, "import `%s`: whiteout `%s`", u->src, name);
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
		    remove_at(u, dirfd(d), e->d_name, depth + 1) < 0)
			return -1;
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0)
		return rb_error_set(u->err, errno, "import `%s`: whiteout `%s`", u->src, name);
	return 0;
}

/* The remembered directories at path (unless only_below) and below it are gone. */
static void forget(struct unpack *u, const char *path, bool only_below)
{
	size_t n = strlen(path);
	for (size_t i = 0; i < u->n_dirs; i++) {
		char *p = u->dirs[i].path;
		if (!p || !*p)
			continue;
		bool below = n == 0 || (!strncmp(p, path, n) && p[n] == '/');
		if (below || (!only_below && !strcmp(p, path))) {
			free(p);
			u->dirs[i].path = NULL;
		}
	}
}

/* A whiteout member: `.wh.NAME` removes NAME of the lower layers, `.wh..wh..opq` every entry
 * of its directory. Other members: 0 with *is_wh false. */
static int whiteout(struct unpack *u, char *rel, const char *member, bool *is_wh)
{
	char *slash = strrchr(rel, '/');
	const char *base = slash ? slash + 1 : rel;
	*is_wh = !strncmp(base, OCI_WHITEOUT, strlen(OCI_WHITEOUT));
	if (!*is_wh)
		return 0;
	if (slash)
		*slash = '\0';
	_cleanup_close_ int pfd = open_beneath(u, slash ? rel : "", member);
	if (pfd < 0)
		return errno == ENOENT && u->err->errnum != EXDEV ? 0 : -1;
	/* An O_PATH fd is no directory to read: the real one, opened through it. */
	_cleanup_close_ int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return rb_error_set(u->err, errno, "import `%s`: whiteout `%s`", u->src, member);
	if (strcmp(base, OCI_OPAQUE) == 0) {
		_cleanup_closedir_ DIR *d = fdopendir(fcntl(dfd, F_DUPFD_CLOEXEC, 0));
		if (!d)
			return rb_error_set(u->err, errno, "import `%s`: opaque `%s`", u->src, member);
		struct dirent *e;
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
			    remove_at(u, dfd, e->d_name, 0) < 0)
				return -1;
		forget(u, slash ? rel : "", true);
		return 0;
	}
	const char *target = base + strlen(OCI_WHITEOUT);
	if (!*target || !strcmp(target, ".") || !strcmp(target, ".."))
		return rb_error_set(u->err, EINVAL, "import `%s`: whiteout `%s` names nothing", u->src, member);
	char gone[PATH_MAX];
	snprintf(gone, sizeof gone, "%s%s%s", slash ? rel : "", slash ? "/" : "", target);
	forget(u, gone, false);
	return remove_at(u, dfd, target, 0);
}

static struct archive *layer_reader(struct unpack *u, int fd)
{
	struct archive *a = archive_read_new();
	if (!a || archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
	    archive_read_support_filter_xz(a) != ARCHIVE_OK || archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
	    archive_read_support_format_tar(a) != ARCHIVE_OK || lseek(fd, 0, SEEK_SET) < 0 ||
	    archive_read_open_fd(a, fd, 1 << 16) != ARCHIVE_OK) {
		rb_error_set(u->err, a ? archive_errno(a) : ENOMEM, "import `%s`: a layer: %s", u->src,
		             a ? archive_error_string(a) : "libarchive");
		if (a)
			archive_read_free(a);
		return NULL;
	}
	return a;
}

/* One layer: its whiteouts first (they apply to the layers below it), then its members. */
static int apply_layer(struct unpack *u, int fd, const char *digest)
{
	uint64_t headers = 0;
	for (int pass = 0; pass < 2; pass++) {
		__attribute__((cleanup(free_archive))) struct archive *a = layer_reader(u, fd);
		if (!a)
			return -1;
		struct archive_entry *e;
		int r;
		while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
			const char *name = archive_entry_pathname(e);
			char rel[PATH_MAX] = ""; /* clean_name fills it; clang-analyzer cannot see memcpy does */
			bool wh;
			if (!name)
				return rb_error_set(u->err, EINVAL, "import `%s`: layer %s: a member without a name",
				                    u->src, digest);
			if (clean_name(u, name, rel) < 0)
				return -1;
			if (pass == 0) {
				if (++headers > u->opts->max_members)
					return rb_error_set(u->err, E2BIG,
					                    "import `%s`: layer %s has more than %" PRIu64
					                    " members: an archive bomb, or raise --max-members",
					                    u->src, digest, u->opts->max_members);
				if (whiteout(u, rel, name, &wh) < 0)
					return -1;
				continue;
			}
			char *slash = strrchr(rel, '/');
			if (!strncmp(slash ? slash + 1 : rel, OCI_WHITEOUT, strlen(OCI_WHITEOUT)))
				continue;
			if (++u->members > u->opts->max_members)
				return rb_error_set(u->err, E2BIG,
				                    "import `%s`: more than %" PRIu64
				                    " members: an archive bomb, or raise --max-members",
				                    u->src, u->opts->max_members);
			if (one(u, a, e, rel, name) < 0)
				return -1;
			report(u, false);
		}
		if (r != ARCHIVE_EOF)
			return rb_error_set(u->err, archive_errno(a), "import `%s`: layer %s: %s", u->src, digest,
			                    archive_error_string(a));
	}
	return 0;
}

/* index.json -> manifest -> its layers, applied in order. */
static int unpack_layout(struct unpack *u, const char *layout)
{
	_cleanup_json_ json_t *m = NULL;
	if (find_manifest(u, layout, &m) < 0)
		return -1;
	json_t *layers = json_object_get(m, "layers");
	if (!json_is_array(layers) || json_array_size(layers) > OCI_MAX_LAYERS)
		return rb_error_set(u->err, 0, "import `%s`: the manifest has no layers, or more than %d", u->src,
		                    OCI_MAX_LAYERS);
	size_t i;
	json_t *l;
	json_array_foreach(layers, i, l)
	{
		const char *digest = json_string_value(json_object_get(l, "digest"));
		_cleanup_close_ int fd = open_blob(u, layout, digest, u->opts->max_bytes);
		if (fd < 0 || apply_layer(u, fd, digest) < 0)
			return -1;
	}
	return 0;
}

static int write_meta(const char *tmp, const char *digest, const struct rb_digest_stats *st, const char *src,
                      struct rb_error *err)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/meta.json", tmp);
	_cleanup_json_ json_t *m =
	    json_pack("{s:s, s:I, s:I, s:I, s:s}", "digest", digest, "size", (json_int_t)st->bytes, "files",
	              (json_int_t)st->entries, "created", (json_int_t)time(NULL), "source", src);
	_cleanup_free_ char *text = m ? json_dumps(m, JSON_COMPACT) : NULL;
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	size_t len = text ? strlen(text) : 0;
	if (fd < 0 || !text || write(fd, text, len) != (ssize_t)len)
		return rb_error_set(err, errno, "write `%s`", path);
	return 0;
}

/* A host path may be imported only where an image may come from: never an input's forbidden
 * places, and below the policy's images.allow. */
static int source_allowed(const struct rb_paths *paths, const char *real, bool dir, const struct rb_import_opts *opts,
                          struct rb_error *err)
{
	if (rb_never_input_check(paths, real, dir, "image import", err) < 0)
		return -1;
	bool allowed = false;
	for (unsigned i = 0; opts->pol && i < opts->pol->n_image_allow && !allowed; i++)
		allowed = rb_path_under(real, opts->pol->image_allow[i]);
	if (!allowed)
		return rb_error_set(err, 0,
		                    "import `%s`: policy `%s` allows no image source there (a prefix of it in the "
		                    "policy's images.allow would)",
		                    real, opts->pol ? opts->pol->name : "(none)");
	return 0;
}

/* The source unpacked into tmp/rootfs, its digest in out. label is what meta.json records as
 * the source; NULL for a host path, which is then checked by source_allowed. */
static int unpack_into(const struct rb_paths *paths, const char *src, const char *label,
                       const struct rb_import_opts *opts, const char *tmp, char out[72], struct rb_error *err)
{
	struct stat st;
	if (stat(src, &st) < 0)
		return rb_error_set(err, errno, "import `%s`", src);
	char real[PATH_MAX];
	if (!realpath(src, real))
		return rb_error_set(err, errno, "import `%s`", src);
	if (!label && source_allowed(paths, real, S_ISDIR(st.st_mode), opts, err) < 0)
		return -1;
	__attribute__((cleanup(free_archive))) struct archive *a = NULL;
	bool disk = S_ISDIR(st.st_mode), layout = disk && is_layout(real);
	if (layout) {
		/* read below, layer by layer */
	} else if (disk) {
		a = archive_read_disk_new();
		if (!a || archive_read_disk_set_symlink_physical(a) != ARCHIVE_OK ||
		    archive_read_disk_set_behavior(a, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS |
		                                          (opts->keep_file_caps ? 0 : ARCHIVE_READDISK_NO_XATTR) |
		                                          ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS) !=
		        ARCHIVE_OK ||
		    archive_read_disk_open(a, real) != ARCHIVE_OK)
			return rb_error_set(err, a ? archive_errno(a) : ENOMEM, "import `%s`: %s", src,
			                    a ? archive_error_string(a) : "libarchive");
	} else if (S_ISREG(st.st_mode)) {
		a = archive_read_new();
		if (!a || archive_read_support_filter_gzip(a) != ARCHIVE_OK ||
		    archive_read_support_filter_xz(a) != ARCHIVE_OK ||
		    archive_read_support_filter_zstd(a) != ARCHIVE_OK ||
		    archive_read_support_format_tar(a) != ARCHIVE_OK ||
		    archive_read_open_filename(a, real, 1 << 16) != ARCHIVE_OK)
			return rb_error_set(err, a ? archive_errno(a) : ENOMEM, "import `%s`: not a tarball: %s", src,
			                    a ? archive_error_string(a) : "libarchive");
	} else {
		return rb_error_set(err, 0, "import `%s`: neither a directory nor a tarball", src);
	}
	char rootfs[PATH_MAX + 16];
	snprintf(rootfs, sizeof rootfs, "%s/rootfs", tmp);
	if (mkdir(rootfs, 0755) < 0)
		return rb_error_set(err, errno, "make `%s`", rootfs);
	_cleanup_free_ struct unpack *u = calloc(1, sizeof *u);
	if (!u)
		return rb_error_set(err, ENOMEM, "import `%s`", src);
	*u = (struct unpack){.opts = opts,
	                     .src = src,
	                     .as_root = real_root(),
	                     .tarball = !disk ? a : NULL,
	                     .tarball_size = (uint64_t)st.st_size,
	                     .err = err};
	rb_error_clear(err);
	u->root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (u->root < 0)
		// cppcheck-suppress memleak ; u is _cleanup_free_
		return rb_error_set(err, errno, "open `%s`", rootfs);
	int r = layout ? unpack_layout(u, real) : unpack_all(u, a, disk, real);
	if (r == 0)
		r = finish_dirs(u);
	if (r == 0)
		report(u, true);
	close(u->root);
	free_dirs(u);
	if (r < 0)
		return -1;
	/* The digest walk counts the implicit parents too: bounded by twice the members. */
	struct rb_digest_limits lim = {.max_entries = 2 * opts->max_members + 16, .max_bytes = opts->max_bytes};
	struct rb_digest_stats stats;
	if (rb_tree_digest(rootfs, NULL, &lim, out, &stats, err) < 0)
		return -1;
	return write_meta(tmp, out, &stats, label ? label : real, err);
}

static int import(const struct rb_paths *paths, const char *src, const char *label, const struct rb_import_opts *opts,
                  char out[72], struct rb_error *err)
{
	char store[PATH_MAX], refs[PATH_MAX], tmp[PATH_MAX + 32];
	if (opts->name && !rb_store_name_valid(opts->name))
		return rb_error_set(err, 0, "image name `%s`: not a valid store reference", opts->name);
	if (rb_store_dirs(paths, store, refs, err) < 0)
		return -1;
	snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", store);
	if (!mkdtemp(tmp))
		return rb_error_set(err, errno, "make `%s`", tmp);
	_cleanup_close_ int hold = rb_store_hold_temp(tmp, err);
	if (hold < 0) {
		rb_store_rm_tree(tmp, NULL);
		return -1;
	}
	if (unpack_into(paths, src, label, opts, tmp, out, err) < 0 || rb_store_commit(paths, tmp, out, err) < 0) {
		rb_store_rm_tree(tmp, NULL);
		return -1;
	}
	if (opts->name && rb_store_tag(paths, opts->name, out, err) < 0)
		return -1;
	return 0;
}

/* A file's privileges are kept only where the operator's policy allows keeping them. */
int rb_import_privileges_allowed(const struct rb_import_opts *opts, struct rb_error *err)
{
	const char *pol = opts->pol ? opts->pol->name : "(none)";
	if (opts->keep_setuid && !(opts->pol && opts->pol->image_keep_setuid))
		return rb_error_set(err, EPERM,
		                    "--keep-setuid: policy `%s` has images.keep_setuid false (setuid and setgid "
		                    "bits are dropped unless the operator's policy allows keeping them)",
		                    pol);
	if (opts->keep_file_caps && !(opts->pol && opts->pol->image_keep_file_caps))
		return rb_error_set(err, EPERM,
		                    "--keep-file-caps: policy `%s` has images.keep_file_caps false (file capabilities "
		                    "are dropped unless the operator's policy allows keeping them)",
		                    pol);
	return 0;
}

int rb_image_import(const struct rb_paths *paths, const char *src, const struct rb_import_opts *opts, char out[72],
                    struct rb_error *err)
{
	if (rb_import_privileges_allowed(opts, err) < 0)
		return -1;
	return import(paths, src, NULL, opts, out, err);
}

int rb_image_import_built(const struct rb_paths *paths, const char *tree, const char *label,
                          const struct rb_import_opts *opts, char out[72], struct rb_error *err)
{
	if (rb_import_privileges_allowed(opts, err) < 0)
		return -1;
	return import(paths, tree, label, opts, out, err);
}

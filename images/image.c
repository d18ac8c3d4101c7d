/* The built-in images: where their rootfs lives, what is bound into them, their digest. */
#define _GNU_SOURCE
#include "images/image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/never_input.h"
#include "common/util.h"
#include "images/digest.h"
#include "images/store.h"

/* runbox's own minimal image is small; the bound only keeps a broken build from a long walk. */
static const struct rb_digest_limits builtin_limits = {.max_entries = 100000, .max_bytes = 4ull << 30};

/* Files of the host image's /etc: nothing of the host's except what the loader needs. */
static const char host_passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
                                  "sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n"
                                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
static const char host_group[] = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";
static const char host_hosts[] = "127.0.0.1\tlocalhost\n::1\tlocalhost\n";
static const char host_nsswitch[] = "passwd: files\ngroup: files\nhosts: files dns\n";

static int put_file(const char *dir, const char *name, const char *text, struct rb_error *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return rb_error_set(err, errno, "create `%s`", path);
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len)
		return rb_error_set(err, errno, "write `%s`", path);
	return 0;
}

/* The host image's lower layer: mount points, the /usr-merge links and a minimal /etc. Built
 * once per state directory into a temporary name and renamed, so a half-built one is never
 * used. Host secrets (/root, /home, /etc/shadow, /etc/ssh, sockets) are never in it. */
static int build_host_skeleton(const char *rootfs, struct rb_error *err)
{
	char tmp[PATH_MAX + 16];
	snprintf(tmp, sizeof tmp, "%s.tmp%d", rootfs, (int)getpid());
	static const char *const dirs[] = {"usr", "etc",    "etc/alternatives", "proc", "dev",
	                                   "sys", "tmp",    "workspace",        "root", "run",
	                                   "var", "var/tmp"};
	for (size_t i = 0; i < RB_ARRAY_SIZE(dirs); i++) {
		char d[PATH_MAX + 64];
		snprintf(d, sizeof d, "%s/%s", tmp, dirs[i]);
		if (rb_mkdir_p(d, 0755, err) < 0)
			return -1;
	}
	/* Debian is /usr-merged: mirror whichever of these links the host has. */
	static const char *const links[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};
	for (size_t i = 0; i < RB_ARRAY_SIZE(links); i++) {
		char host[64], target[PATH_MAX], l[PATH_MAX + 64];
		snprintf(host, sizeof host, "/%s", links[i]);
		ssize_t n = readlink(host, target, sizeof target - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		snprintf(l, sizeof l, "%s/%s", tmp, links[i]);
		if (symlink(target, l) < 0)
			return rb_error_set(err, errno, "symlink `%s`", l);
	}
	char etc[PATH_MAX + 8];
	snprintf(etc, sizeof etc, "%s/etc", tmp);
	if (put_file(etc, "passwd", host_passwd, err) < 0 || put_file(etc, "group", host_group, err) < 0 ||
	    put_file(etc, "hosts", host_hosts, err) < 0 || put_file(etc, "nsswitch.conf", host_nsswitch, err) < 0 ||
	    put_file(etc, "hostname", "runbox\n", err) < 0 || put_file(etc, "ld.so.cache", "", err) < 0)
		return -1;
	if (rename(tmp, rootfs) < 0) {
		int e = errno;
		rb_rm_rf(tmp, NULL);
		if (e == EEXIST || e == ENOTEMPTY)
			return 0; /* another runbox built it first */
		return rb_error_set(err, e, "rename `%s`", tmp);
	}
	return 0;
}

static void add_bind(struct rb_image *img, const char *src, const char *dest)
{
	struct rb_image_bind *b = &img->binds[img->n_binds];
	if (img->n_binds >= RB_IMAGE_MAX_BINDS || strlen(src) >= sizeof b->src || strlen(dest) >= sizeof b->dest ||
	    access(src, F_OK) < 0)
		return;
	img->n_binds++;
	snprintf(b->src, sizeof b->src, "%s", src);
	snprintf(b->dest, sizeof b->dest, "%s", dest);
}

/* The host image's digest names what the host has installed: os-release plus dpkg's status.
 * dpkg's status is megabytes, so the digest is cached beside the skeleton, keyed by its mtime. */
static void host_digest(const char *dir, char out[72])
{
	struct stat st;
	char key[96] = "none", cache[PATH_MAX + 16];
	if (stat("/var/lib/dpkg/status", &st) == 0)
		snprintf(key, sizeof key, "%lld.%09ld %lld", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec,
		         (long long)st.st_size);
	snprintf(cache, sizeof cache, "%s/digest", dir);
	char *text = NULL;
	if (rb_read_file(cache, 256, &text, NULL, NULL) == 0) {
		size_t kl = strlen(key);
		if (!strncmp(text, key, kl) && text[kl] == ' ' && strlen(text + kl + 1) >= 71) {
			snprintf(out, 72, "%.71s", text + kl + 1);
			free(text);
			return;
		}
	}
	free(text);
	char *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	rb_read_file("/etc/os-release", 1 << 20, &a, &la, NULL);
	rb_read_file("/var/lib/dpkg/status", 64 << 20, &b, &lb, NULL);
	char *both = malloc(la + lb + 1);
	if (both) {
		if (a)
			memcpy(both, a, la);
		if (b)
			memcpy(both + la, b, lb);
	}
	char hex[65];
	rb_sha256_hex(both ? both : "", both ? la + lb : 0, hex);
	snprintf(out, 72, "sha256:%s", hex);
	free(a);
	free(b);
	free(both);
	char tmp[PATH_MAX + 32], line[200];
	snprintf(tmp, sizeof tmp, "%s.%d", cache, (int)getpid());
	int n = snprintf(line, sizeof line, "%s %s", key, out);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0 && write(fd, line, (size_t)n) == n)
		rename(tmp, cache);
	else
		unlink(tmp);
}

/* The cache of a directory's digest walk: in the state directory (0700), one file per
 * directory, named by the sha256 of its real path. */
static int digest_of(const char *rootfs, const struct rb_paths *paths, const struct rb_digest_limits *lim, char out[72],
                     struct rb_error *err)
{
	char dir[PATH_MAX + 32], cache[PATH_MAX + 128], hex[65];
	snprintf(dir, sizeof dir, "%s/cache/images", paths->state_dir);
	rb_sha256_hex(rootfs, strlen(rootfs), hex);
	snprintf(cache, sizeof cache, "%s/%s", dir, hex);
	struct rb_error cerr;
	if (rb_state_dir_make(paths->state_dir, &cerr) < 0 || rb_mkdir_p(dir, 0700, &cerr) < 0) {
		rb_debug("image digest: no cache: %s", cerr.msg);
		return rb_tree_digest(rootfs, NULL, lim, out, NULL, err);
	}
	return rb_tree_digest(rootfs, cache, lim, out, NULL, err);
}

/* A host directory as the image: allowed only where nothing in it is never an input and the
 * operator's policy names it in images.allow. Checked on its real path, before any walk. */
static int allow_dir(const char *rootfs, const struct rb_policy *pol, const struct rb_paths *paths,
                     struct rb_error *err)
{
	if (rb_never_input_check(paths, rootfs, true, "image", err) < 0)
		return -1;
	for (unsigned i = 0; i < pol->n_image_allow; i++)
		if (rb_path_under(rootfs, pol->image_allow[i]))
			return 0;
	return rb_error_set(err, 0,
	                    "image `%s`: policy `%s` allows no directory image there (a prefix of it in the "
	                    "policy's images.allow would)",
	                    rootfs, pol->name);
}

int rb_image_resolve(const char *name, const struct rb_policy *pol, const struct rb_paths *paths, struct rb_image *out,
                     struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "%s", name);
	if (!strcmp(name, "minimal")) {
		snprintf(out->rootfs, sizeof out->rootfs, "%s/minimal/rootfs", paths->images_dir);
		char stamp[PATH_MAX + 16];
		snprintf(stamp, sizeof stamp, "%s/minimal/.built", paths->images_dir);
		if (access(stamp, F_OK) < 0)
			return rb_error_set(
			    err, errno, "image `minimal` is not built or installed (`%s`; `make` or `make install`)",
			    stamp);
		out->owned_by_runbox = true;
		return digest_of(out->rootfs, paths, &builtin_limits, out->digest, err);
	}
	if (!strcmp(name, "host")) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/images/host", paths->state_dir);
		if (rb_mkdir_p(dir, 0755, err) < 0)
			return -1;
		snprintf(out->rootfs, sizeof out->rootfs, "%s/images/host/rootfs-v1", paths->state_dir);
		if (access(out->rootfs, F_OK) < 0 && build_host_skeleton(out->rootfs, err) < 0)
			return -1;
		add_bind(out, "/usr", "usr");
		add_bind(out, "/etc/ld.so.cache", "etc/ld.so.cache");
		add_bind(out, "/etc/alternatives", "etc/alternatives");
		host_digest(dir, out->digest);
		out->owned_by_runbox = true;
		return 0;
	}
	if (name[0] != '/') {
		/* The store's images are runbox's own, with the digest their import computed. */
		struct rb_store_image img;
		int r = rb_store_lookup(paths, name, &img, err);
		if (r < 0 || (r > 0 && !strncmp(name, "sha256:", 7)))
			return -1;
		if (r == 0) {
			struct stat st;
			if (stat(img.rootfs, &st) < 0)
				return rb_error_set(err, errno, "image `%s`: `%s`", name, img.rootfs);
			snprintf(out->rootfs, sizeof out->rootfs, "%s", img.rootfs);
			snprintf(out->digest, sizeof out->digest, "%s", img.digest);
			out->dev = st.st_dev;
			out->ino = st.st_ino;
			out->owned_by_runbox = true;
			return 0;
		}
	}
	if (name[0] == '/') {
		/* A directory as an image (its own root filesystem), read-only below the overlay and
		 * never idmapped: its files keep the owners the host gave them. */
		struct stat st;
		if (stat(name, &st) < 0 || !S_ISDIR(st.st_mode))
			return rb_error_set(err, errno ? errno : ENOTDIR, "image `%s`: not a directory", name);
		if (!realpath(name, out->rootfs))
			return rb_error_set(err, errno, "image `%s`", name);
		if (allow_dir(out->rootfs, pol, paths, err) < 0)
			return -1;
		out->dev = st.st_dev;
		out->ino = st.st_ino;
		snprintf(out->name, sizeof out->name, "dir");
		struct rb_digest_limits lim = {.max_entries = pol->image_max_entries,
		                               .max_bytes = pol->image_max_bytes};
		return digest_of(out->rootfs, paths, &lim, out->digest, err);
	}
	return rb_error_set(
	    err, 0,
	    "unknown image `%s` (known: minimal, host, a name or sha256: digest in the image store, or an "
	    "absolute path to a root filesystem)",
	    name);
}

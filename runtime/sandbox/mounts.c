/* Root filesystem construction in the sandbox's mount namespace (see mounts.h). */
#define _GNU_SOURCE
#include "runtime/sandbox/mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

/* runc's masked and read-only /proc paths. */
static const char *const masked_paths[] = {
    "proc/acpi",       "proc/asound",      "proc/kcore",       "proc/keys", "proc/latency_stats",
    "proc/timer_list", "proc/timer_stats", "proc/sched_debug", "proc/scsi", "proc/interrupts",
};
static const char *const readonly_paths[] = {
    "proc/bus", "proc/fs", "proc/irq", "proc/sys", "proc/sysrq-trigger",
};

/* Devices bound from the host, checked to be the character device they claim to be. */
static const struct {
	const char *name;
	unsigned major, minor;
} devices[] = {
    {"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7}, {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
};

static int openat2_beneath(int dirfd, const char *path, int flags, struct rb_error *err)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW),
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
	if (fd < 0)
		return rb_error_set(err, errno, "open `/%s` in the new root", path);
	return fd;
}

/* Appends the kernel's own words from an fs context, which name the bad option. */
static int fs_error(int fsfd, struct rb_error *err, int errnum, const char *what)
{
	char msg[256] = "";
	ssize_t n = read(fsfd, msg, sizeof msg - 1);
	if (n > 0) {
		msg[n] = '\0';
		msg[strcspn(msg, "\n")] = '\0';
		return rb_error_set(err, errnum, "%s (kernel: %s)", what, msg);
	}
	return rb_error_set(err, errnum, "%s", what);
}

/* A new filesystem of type with string options, mounted by fd on target (relative to rootfd). */
static int mount_new(int rootfd, const char *target, const char *type, const char *const *opts, unsigned attrs,
                     struct rb_error *err)
{
	_cleanup_close_ int fsfd = fsopen(type, FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return rb_error_set(err, errno, "fsopen `%s` for /%s", type, target);
	for (const char *const *o = opts; o && *o; o++) {
		char key[64];
		const char *eq = strchr(*o, '=');
		snprintf(key, sizeof key, "%.*s", eq ? (int)(eq - *o) : (int)strlen(*o), *o);
		int r = eq ? fsconfig(fsfd, FSCONFIG_SET_STRING, key, eq + 1, 0)
		           : fsconfig(fsfd, FSCONFIG_SET_FLAG, key, NULL, 0);
		if (r < 0) {
			char what[160];
			snprintf(what, sizeof what, "%s option `%s` for /%s", type, *o, target);
			return fs_error(fsfd, err, errno, what);
		}
	}
	if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		char what[160];
		snprintf(what, sizeof what, "create %s for /%s", type, target);
		return fs_error(fsfd, err, errno, what);
	}
	_cleanup_close_ int mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, attrs);
	if (mfd < 0)
		return rb_error_set(err, errno, "fsmount %s for /%s", type, target);
	/* AT_FDCWD: a host path chosen by the runner (the staging dir), not one in the new root. */
	_cleanup_close_ int tfd = rootfd == AT_FDCWD ? open(target, O_PATH | O_DIRECTORY | O_CLOEXEC)
	                                             : openat2_beneath(rootfd, target, O_PATH | O_DIRECTORY, err);
	if (tfd < 0)
		return rootfd == AT_FDCWD ? rb_error_set(err, errno, "open `%s`", target) : -1;
	if (move_mount(mfd, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return rb_error_set(err, errno, "attach %s on /%s", type, target);
	return 0;
}

/* Clones the tree at srcfd (an fd, or a path when srcfd is AT_FDCWD) read-only, nosuid and
 * nodev onto target; with the mounts below it when recursive. */
static int bind_ro_attrs(int srcfd, const char *src, int rootfd, const char *target, bool is_dir, uint64_t attrs,
                         bool recursive, struct rb_error *err);
static int bind_ro(int srcfd, const char *src, int rootfd, const char *target, bool is_dir, struct rb_error *err)
{
	return bind_ro_attrs(srcfd, src, rootfd, target, is_dir,
	                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, true, err);
}

static int bind_ro_attrs(int srcfd, const char *src, int rootfd, const char *target, bool is_dir, uint64_t attrs,
                         bool recursive, struct rb_error *err)
{
	unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW | (recursive ? AT_RECURSIVE : 0);
	if (!src || !*src)
		flags |= AT_EMPTY_PATH;
	_cleanup_close_ int tree = open_tree(srcfd, src ? src : "", flags);
	if (tree < 0 && errno == EINVAL && !recursive)
		/* The kernel refuses a single mount whose subtree holds mounts locked to it:
		 * binding it would uncover what they hide. */
		return rb_error_set(err, 0, "/%s: other mounts are below it on the host; an input is one mount",
		                    target);
	if (tree < 0)
		return rb_error_set(err, errno, "clone mount of `%s` for /%s", src && *src ? src : "input", target);
	struct mount_attr attr = {.attr_set = attrs};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
		return rb_error_set(err, errno, "make /%s read-only", target);
	_cleanup_close_ int tfd = openat2_beneath(rootfd, target, O_PATH | (is_dir ? O_DIRECTORY : 0), err);
	if (tfd < 0)
		return -1;
	if (move_mount(tree, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return rb_error_set(err, errno, "attach bind on /%s", target);
	return 0;
}

/* Makes the mount at target read-only, keeping the flags the kernel locked on it. */
static int remount_ro(int rootfd, const char *target, struct rb_error *err)
{
	_cleanup_close_ int fd = openat2_beneath(rootfd, target, O_PATH, err);
	if (fd < 0)
		return -1;
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
	if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
		return rb_error_set(err, errno, "make /%s read-only", target);
	return 0;
}

static int make_dir(int rootfd, const char *path, mode_t mode, struct rb_error *err)
{
	char parent[PATH_MAX], copy[PATH_MAX];
	snprintf(copy, sizeof copy, "%s", path);
	snprintf(parent, sizeof parent, "%s", dirname(copy));
	_cleanup_close_ int pfd =
	    strcmp(parent, ".") ? openat2_beneath(rootfd, parent, O_PATH | O_DIRECTORY, err) : dup(rootfd);
	if (pfd < 0)
		return -1;
	snprintf(copy, sizeof copy, "%s", path);
	const char *base = basename(copy);
	if (mkdirat(pfd, base, mode) < 0 && errno != EEXIST)
		return rb_error_set(err, errno, "mkdir `/%s` in the new root", path);
	return 0;
}

static int make_file(int rootfd, const char *path, struct rb_error *err)
{
	char parent[PATH_MAX], copy[PATH_MAX];
	snprintf(copy, sizeof copy, "%s", path);
	snprintf(parent, sizeof parent, "%s", dirname(copy));
	_cleanup_close_ int pfd = openat2_beneath(rootfd, parent, O_PATH | O_DIRECTORY, err);
	if (pfd < 0)
		return -1;
	snprintf(copy, sizeof copy, "%s", path);
	_cleanup_close_ int fd = openat(pfd, basename(copy), O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return rb_error_set(err, errno, "create `/%s` in the new root", path);
	return 0;
}

/* Creates every missing directory of a path below rootfd (parents first). */
static int make_dirs(int rootfd, const char *path, mode_t mode, struct rb_error *err)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *p = buf;; p++) {
		if (*p == '/' || !*p) {
			char c = *p;
			*p = '\0';
			if (*buf && make_dir(rootfd, buf, mode, err) < 0)
				return -1;
			*p = c;
			if (!c)
				return 0;
		}
	}
}

static int size_opt(char *buf, size_t len, uint64_t bytes, uint64_t fallback)
{
	return snprintf(buf, len, "size=%llu", (unsigned long long)(bytes ? bytes : fallback));
}

/* The image, attached read-only on dir: the runner's idmapped clone when it made one, else a
 * clone of the image's directory. Either way the overlay's lower layer is then named `lower`. */
static int attach_lower(const struct rb_image *image, int lower_fd, const char *dir, struct rb_error *err)
{
	if (lower_fd >= 0) {
		/* The runner's clone of the image's mount. Idmapped when it is runbox's own image
		 * (never a directory image, rb_image.owned_by_runbox): the image's files owned by
		 * host ids 0..65535 show as the sandbox's own, so root inside can change them
		 * (copy-up). */
		if (move_mount(lower_fd, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return rb_error_set(err, errno, "attach the image's clone on `%s`", dir);
		return 0;
	}
	_cleanup_close_ int tree = open_tree(AT_FDCWD, image->rootfs,
	                                     OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_SYMLINK_NOFOLLOW);
	if (tree < 0)
		return rb_error_set(err, errno, "clone mount of the image `%s`", image->rootfs);
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
	if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof attr) < 0)
		return rb_error_set(err, errno, "make the image `%s` read-only", image->rootfs);
	if (move_mount(tree, "", AT_FDCWD, dir, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return rb_error_set(err, errno, "attach the image on `%s`", dir);
	return 0;
}

/* The layers are named relative to the staging dir, made the cwd here: the overlay's options,
 * which the sandbox reads in /proc/self/mountinfo, then say lower, upper and work, never the
 * run directory's host path (the state directory's) nor the image's. */
static int mount_overlay(const char *staging, const struct rb_image *image, int lower_fd, bool writable,
                         struct rb_error *err)
{
	char merged[PATH_MAX + 8], lower[PATH_MAX + 8], opts[256];
	const char *lowerdir = "lower", *upper = "upper", *work = "work";
	if (writable) {
		/* A build's tree: the runner's idmapped clone is the root, and what the step writes
		 * lands in the tree. Without that clone the sandbox's root could not write the tree's
		 * files, so nothing else stands in for it. */
		if (lower_fd < 0)
			return rb_error_set(err, ENOTSUP, "the build's tree `%s` could not be idmapped for the sandbox",
			                    image->rootfs);
		snprintf(merged, sizeof merged, "%s/root", staging);
		if (mkdir(merged, 0755) < 0)
			return rb_error_set(err, errno, "mkdir `%s`", merged);
		if (move_mount(lower_fd, "", AT_FDCWD, merged, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return rb_error_set(err, errno, "attach the build's tree on `%s`", merged);
		return 0;
	}
	snprintf(lower, sizeof lower, "%s/lower", staging);
	if (mkdir(lower, 0755) < 0)
		return rb_error_set(err, errno, "mkdir `%s`", lower);
	if (attach_lower(image, lower_fd, lower, err) < 0)
		return -1;
	snprintf(merged, sizeof merged, "%s/root", staging);
	if (chdir(staging) < 0)
		return rb_error_set(err, errno, "chdir `%s`", staging);
	if (mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0 || mkdir(merged, 0755) < 0)
		return rb_error_set(err, errno, "prepare overlay dirs in `%s`", staging);

	_cleanup_close_ int fsfd = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fsfd >= 0) {
		/* One fsconfig per layer: no escaping of ':' or ',' in paths (kernel >= 6.8). */
		int r = fsconfig(fsfd, FSCONFIG_SET_STRING, "lowerdir+", lowerdir, 0);
		if (r < 0 && errno == EINVAL)
			goto legacy;
		if (r < 0 || fsconfig(fsfd, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
		    fsconfig(fsfd, FSCONFIG_SET_STRING, "workdir", work, 0) < 0)
			return fs_error(fsfd, err, errno, "overlay layers");
		fsconfig(fsfd, FSCONFIG_SET_FLAG, "userxattr", NULL, 0);
		if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
			if (errno == EINVAL) /* before 6.5 overlay parses its options only here */
				goto legacy;
			return fs_error(fsfd, err, errno, "create overlay");
		}
		_cleanup_close_ int mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NODEV);
		if (mfd < 0)
			return rb_error_set(err, errno, "fsmount overlay");
		if (move_mount(mfd, "", AT_FDCWD, merged, MOVE_MOUNT_F_EMPTY_PATH) < 0)
			return rb_error_set(err, errno, "attach overlay on `%s`", merged);
		return 0;
	}
legacy:
	/* mount(2) takes one option string; the relative names need no escaping. */
	snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s,userxattr", lowerdir, upper, work);
	if (mount("overlay", merged, "overlay", MS_NODEV, opts) == 0)
		return 0;
	snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s,workdir=%s", lowerdir, upper, work);
	if (mount("overlay", merged, "overlay", MS_NODEV, opts) < 0)
		return rb_error_set(err, errno, "mount overlay on `%s`", merged);
	return 0;
}

static int build_dev(int rootfd, struct rb_error *err)
{
	static const char *const tmpfs_opts[] = {"mode=0755", "size=65536", NULL};
	if (mount_new(rootfd, "dev", "tmpfs", tmpfs_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, err) < 0)
		return -1;
	for (size_t i = 0; i < RB_ARRAY_SIZE(devices); i++) {
		char host[32], dest[32];
		snprintf(host, sizeof host, "/dev/%s", devices[i].name);
		snprintf(dest, sizeof dest, "dev/%s", devices[i].name);
		/* The host node must be the device it claims to be, not a link to procfs
		 * (CVE-2025-31133): open it without following links and check its type. */
		_cleanup_close_ int src = open(host, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (src < 0 || fstat(src, &st) < 0)
			return rb_error_set(err, errno, "open host `%s`", host);
		if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != devices[i].major ||
		    minor(st.st_rdev) != devices[i].minor)
			return rb_error_set(err, 0, "host `%s` is not the character device %u:%u", host,
			                    devices[i].major, devices[i].minor);
		if (make_file(rootfd, dest, err) < 0)
			return -1;
		_cleanup_close_ int tree = open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (tree < 0)
			return rb_error_set(err, errno, "clone mount of `%s`", host);
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC};
		if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
			return rb_error_set(err, errno, "set flags on /%s", dest);
		_cleanup_close_ int tfd = openat2_beneath(rootfd, dest, O_PATH, err);
		if (tfd < 0)
			return -1;
		if (move_mount(tree, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
			return rb_error_set(err, errno, "attach /%s", dest);
	}
	static const char *const pts_opts[] = {"newinstance", "ptmxmode=0666", "mode=0620", NULL};
	static const char *const shm_opts[] = {"mode=01777", "size=67108864", NULL};
	if (make_dir(rootfd, "dev/pts", 0755, err) < 0 || make_dir(rootfd, "dev/shm", 01777, err) < 0 ||
	    mount_new(rootfd, "dev/pts", "devpts", pts_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, err) < 0 ||
	    mount_new(rootfd, "dev/shm", "tmpfs", shm_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err) < 0)
		return -1;
	static const char *const links[][2] = {
	    {"pts/ptmx", "ptmx"},          {"/proc/self/fd", "fd"},       {"/proc/self/fd/0", "stdin"},
	    {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"},
	};
	_cleanup_close_ int dev = openat2_beneath(rootfd, "dev", O_PATH | O_DIRECTORY, err);
	if (dev < 0)
		return -1;
	for (size_t i = 0; i < RB_ARRAY_SIZE(links); i++)
		if (symlinkat(links[i][0], dev, links[i][1]) < 0)
			return rb_error_set(err, errno, "symlink /dev/%s", links[i][1]);
	/* Nobody inside may swap /dev/null for something else. */
	return remount_ro(rootfd, "dev", err);
}

/* Writes text to a new file dir/name (on the run's scratch tmpfs) and binds it read-only over
 * target: the sandbox reads the run's own value, and mountinfo names only `/name` on a tmpfs. */
static int mask_with_text(int rootfd, const char *dir, const char *name, const char *text, const char *target,
                          struct rb_error *err)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
		return rb_error_set(err, ENAMETOOLONG, "mask for /%s", target);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return rb_error_set(err, errno, "create `%s`", path);
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len)
		return rb_error_set(err, errno ? errno : EIO, "write `%s`", path);
	_cleanup_close_ int src = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0)
		return rb_error_set(err, errno, "open `%s`", path);
	return bind_ro_attrs(src, NULL, rootfd, target, false,
	                     MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, false, err);
}

/* Host identifiers no namespace covers, replaced by per-run values: the kernel command line
 * (the host's boot options, often its machine or VM names) by "runbox", and the boot id (the
 * same for every process since the host booted, so it links runs to one host) by a random
 * UUID of this run's. */
static int mask_host_ids(int rootfd, const char *staging, struct rb_error *err)
{
	uint8_t b[16];
	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
		return rb_error_set(err, errno, "getrandom: the run's boot id");
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	char id[40];
	snprintf(id, sizeof id, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n", b[0], b[1],
	         b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
	if (mask_with_text(rootfd, staging, "cmdline", "runbox\n", "proc/cmdline", err) < 0)
		return -1;
	return mask_with_text(rootfd, staging, "boot_id", id, "proc/sys/kernel/random/boot_id", err);
}

static int build_proc(int rootfd, const char *staging, struct rb_error *err)
{
	if (mount_new(rootfd, "proc", "proc", NULL, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err) < 0)
		return -1;
	for (size_t i = 0; i < RB_ARRAY_SIZE(masked_paths); i++) {
		struct rb_error ignored;
		_cleanup_close_ int fd = openat2_beneath(rootfd, masked_paths[i], O_PATH, &ignored);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			continue; /* not on this kernel */
		if (S_ISDIR(st.st_mode)) {
			static const char *const opts[] = {"size=4096", "mode=0555", NULL};
			if (mount_new(rootfd, masked_paths[i], "tmpfs", opts,
			              MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
			              err) < 0)
				return -1;
		} else {
			/* Not nodev: the mask must read as empty (runc), not fail with EACCES. */
			_cleanup_close_ int null = openat2_beneath(rootfd, "dev/null", O_PATH, err);
			if (null < 0 ||
			    bind_ro_attrs(null, NULL, rootfd, masked_paths[i], false,
			                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false, err) < 0)
				return -1;
		}
	}
	for (size_t i = 0; i < RB_ARRAY_SIZE(readonly_paths); i++) {
		struct rb_error ignored;
		_cleanup_close_ int fd = openat2_beneath(rootfd, readonly_paths[i], O_PATH, &ignored);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			continue;
		if (bind_ro(fd, NULL, rootfd, readonly_paths[i], S_ISDIR(st.st_mode), err) < 0)
			return -1;
	}
	return mask_host_ids(rootfd, staging, err);
}

/* The sources of inputs and skill bundles, opened in this mount namespace before anything is
 * mounted: a sealed copy (runtime/run/seal.h) lives in the staging directory, which the scratch
 * tmpfs then hides. */
struct sources {
	int in[RB_MAX_INPUTS], skills[RB_MAX_INPUTS];
};

static void close_sources(struct sources *s)
{
	for (unsigned i = 0; i < RB_MAX_INPUTS; i++) {
		if (s->in[i] >= 0)
			close(s->in[i]);
		if (s->skills[i] >= 0)
			close(s->skills[i]);
	}
}

/* The runner's fd names a mount of the host's namespace, which open_tree cannot clone from
 * here: the same path is opened in ours, and bind_tree requires the very same inode. */
static int open_sources(const struct rb_rootfs_spec *spec, struct sources *s, struct rb_error *err)
{
	if (spec->n_inputs > RB_MAX_INPUTS || spec->n_skills > RB_MAX_INPUTS)
		return rb_error_set(err, E2BIG, "at most %d inputs and %d skills", RB_MAX_INPUTS, RB_MAX_INPUTS);
	for (unsigned i = 0; i < spec->n_inputs; i++)
		if ((s->in[i] = open(spec->inputs[i].host, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
			return rb_error_set(err, errno, "input `%s`", spec->inputs[i].host);
	for (unsigned i = 0; i < spec->n_skills; i++)
		if ((s->skills[i] = open(spec->skills[i].host, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
			return rb_error_set(err, errno, "input `%s`", spec->skills[i].host);
	return 0;
}

static int bind_tree(int rootfd, const char *dir, const struct rb_input *binds, const int *here, unsigned n,
                     const char *staging, const int *cow_lower, struct rb_error *err);

/* A file's owner as this user namespace shows it is one it maps: the kernel shows an unmapped
 * one as the overflow ids (65534), and overlayfs cannot copy such a file up (its chown to an
 * unmapped id fails), so the overlay would be read-only in all but name. */
static bool owner_mapped(const struct stat *st)
{
	char *text = NULL;
	unsigned long ou = 65534, og = 65534;
	if (rb_read_file("/proc/sys/kernel/overflowuid", 32, &text, NULL, NULL) == 0)
		ou = strtoul(text, NULL, 10);
	free(text);
	text = NULL;
	if (rb_read_file("/proc/sys/kernel/overflowgid", 32, &text, NULL, NULL) == 0)
		og = strtoul(text, NULL, 10);
	free(text);
	return st->st_uid != ou && st->st_gid != og;
}

/* A writable overlay over the input at srcfd, on target (below rootfd): its lower layer a
 * read-only clone of the input (one mount, as a read-only input is), attached at
 * staging/cow/N/lower; its upper and work layers beside it on the scratch tmpfs, so what the
 * sandbox writes there counts against limits.rootfs_size and dies with the run. The layers are
 * named relative to the staging dir (the cwd), as the root's are (mount_overlay). */
static int mount_cow(const char *staging, unsigned n, int srcfd, int idmapped, const struct rb_input *in, int rootfd,
                     const char *target, struct rb_error *err)
{
	char dir[64], lower[80], upper[80], work[80];
	snprintf(dir, sizeof dir, "cow/%u", n);
	snprintf(lower, sizeof lower, "%s/lower", dir);
	snprintf(upper, sizeof upper, "%s/upper", dir);
	snprintf(work, sizeof work, "%s/work", dir);
	struct stat st, id;
	if (fstat(srcfd, &st) < 0 || (idmapped >= 0 && fstat(idmapped, &id) < 0))
		return rb_error_set(err, errno, "input `%s`", in->host);
	if (idmapped >= 0) {
		if (id.st_dev != st.st_dev || id.st_ino != st.st_ino)
			return rb_error_set(err, 0, "input `%s` changed while the sandbox was being built", in->host);
		st = id; /* the owner as the idmapped clone shows it */
	}
	if (!owner_mapped(&st))
		return rb_error_set(err, EOVERFLOW,
		                    "input `%s` (cow): its owner (uid %u, gid %u as the sandbox sees them) has "
		                    "no id in the sandbox's user namespace, so overlayfs cannot copy its files up "
		                    "and the overlay would be read-only: give a folder the sandbox's ids own (the "
		                    "caller's own, in a rootless run), or bind it read-only (without :cow)",
		                    in->host, (unsigned)st.st_uid, (unsigned)st.st_gid);
	if (!staging || chdir(staging) < 0)
		return rb_error_set(err, staging ? errno : EINVAL, "input `%s` (cow): chdir to the staging dir",
		                    in->host);
	if ((mkdir("cow", 0700) < 0 && errno != EEXIST) || mkdir(dir, 0700) < 0 || mkdir(lower, 0755) < 0 ||
	    mkdir(upper, 0755) < 0 || mkdir(work, 0700) < 0)
		return rb_error_set(err, errno, "input `%s` (cow): prepare its layers in `%s/%s`", in->host, staging,
		                    dir);
	/* The merged root shows the upper's attributes: the input's own, so the step may write
	 * where it could write had the folder been its own. */
	if (chown(upper, st.st_uid, st.st_gid) < 0 || chmod(upper, st.st_mode & 07777) < 0)
		return rb_error_set(err, errno, "input `%s` (cow): its upper layer's owner", in->host);
	_cleanup_close_ int tree =
	    idmapped >= 0 ? dup(idmapped) : open_tree(srcfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
	if (tree < 0 && idmapped < 0 && errno == EINVAL)
		return rb_error_set(err, 0, "input `%s`: other mounts are below it on the host; an input is one mount",
		                    in->host);
	if (tree < 0)
		return rb_error_set(err, errno, "input `%s` (cow): clone its mount", in->host);
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
	if (idmapped < 0 && mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
		return rb_error_set(err, errno, "input `%s` (cow): make its lower layer read-only", in->host);
	if (move_mount(tree, "", AT_FDCWD, lower, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		return rb_error_set(err, errno, "input `%s` (cow): attach its lower layer", in->host);
	_cleanup_close_ int fsfd = fsopen("overlay", FSOPEN_CLOEXEC);
	if (fsfd < 0)
		return rb_error_set(err, errno, "input `%s` (cow): fsopen overlay", in->host);
	int r = fsconfig(fsfd, FSCONFIG_SET_STRING, "lowerdir+", lower, 0);
	if (r < 0 && errno == EINVAL) /* before 6.8: one string, which these names need no escaping in */
		r = fsconfig(fsfd, FSCONFIG_SET_STRING, "lowerdir", lower, 0);
	if (r < 0 || fsconfig(fsfd, FSCONFIG_SET_STRING, "upperdir", upper, 0) < 0 ||
	    fsconfig(fsfd, FSCONFIG_SET_STRING, "workdir", work, 0) < 0)
		return fs_error(fsfd, err, errno, "input (cow): overlay layers");
	fsconfig(fsfd, FSCONFIG_SET_FLAG, "userxattr", NULL, 0);
	if (fsconfig(fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0) {
		char what[PATH_MAX + 128];
		snprintf(what, sizeof what,
		         "input `%s` (cow): the kernel refused the overlay over it (overlayfs in this user "
		         "namespace, or over this filesystem)",
		         in->host);
		return fs_error(fsfd, err, errno, what);
	}
	_cleanup_close_ int mfd = fsmount(fsfd, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	if (mfd < 0)
		return rb_error_set(err, errno, "input `%s` (cow): fsmount overlay", in->host);
	_cleanup_close_ int tfd = openat2_beneath(rootfd, target, O_PATH | O_DIRECTORY, err);
	if (tfd < 0)
		return -1;
	if (move_mount(mfd, "", tfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		return rb_error_set(err, errno, "input `%s` (cow): attach the overlay on /%s", in->host, target);
	return 0;
}

/* A cow input outside /workspace/in: its folder made in the workspace tmpfs, the overlay on it. */
static int cow_outside_in(int rootfd, const struct rb_rootfs_spec *spec, const struct sources *src,
                          struct rb_error *err)
{
	for (unsigned i = 0; i < spec->n_inputs; i++) {
		const struct rb_input *in = &spec->inputs[i];
		if (!in->cow || !strncmp(in->dest, "in/", 3))
			continue;
		char target[PATH_MAX + 16];
		snprintf(target, sizeof target, "workspace/%s", in->dest);
		if (make_dirs(rootfd, target, 0755, err) < 0 ||
		    mount_cow(spec->staging, i, src->in[i], spec->cow_lower[i], in, rootfd, target, err) < 0)
			return -1;
	}
	return 0;
}

static int build_workspace(int rootfd, const struct rb_rootfs_spec *spec, const struct sources *src,
                           struct rb_error *err)
{
	char size[48], uid[32], gid[32];
	size_opt(size, sizeof size, spec->workspace_bytes, 1ULL << 30);
	snprintf(uid, sizeof uid, "uid=%u", (unsigned)spec->uid);
	snprintf(gid, sizeof gid, "gid=%u", (unsigned)spec->gid);
	const char *opts[] = {"mode=0755", size, uid, gid, NULL};
	if (make_dir(rootfd, "workspace", 0755, err) < 0 ||
	    mount_new(rootfd, "workspace", "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err) < 0 ||
	    make_dir(rootfd, "workspace/out", 0755, err) < 0 || make_dir(rootfd, "workspace/in", 0755, err) < 0)
		return -1;
	_cleanup_close_ int ws = openat2_beneath(rootfd, "workspace", O_PATH | O_DIRECTORY, err);
	if (ws < 0 || fchownat(ws, "out", spec->uid, spec->gid, AT_SYMLINK_NOFOLLOW) < 0)
		return rb_error_set(err, errno, "chown /workspace/out");
	if (bind_tree(rootfd, "workspace/in", spec->inputs, src->in, spec->n_inputs, spec->staging, spec->cow_lower,
	              err) < 0 ||
	    cow_outside_in(rootfd, spec, src, err) < 0)
		return -1;
	if (!spec->n_skills)
		return 0;
	return make_dir(rootfd, "workspace/skills", 0755, err) < 0
	           ? -1
	           : bind_tree(rootfd, "workspace/skills", spec->skills, src->skills, spec->n_skills, NULL, NULL, err);
}

/* A read-only tmpfs at dir holding read-only binds of host paths (inputs, skill bundles), and
 * the overlays of cow inputs that go below /workspace/in (mount_cow, staging given). */
static int bind_tree(int rootfd, const char *dir, const struct rb_input *binds, const int *here, unsigned n,
                     const char *staging, const int *cow_lower, struct rb_error *err)
{
	static const char *const in_opts[] = {"mode=0755", "size=1048576", NULL};
	if (mount_new(rootfd, dir, "tmpfs", in_opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err) < 0)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		const struct rb_input *in = &binds[i];
		if (in->cow && (!staging || strncmp(in->dest, "in/", 3) != 0))
			continue; /* outside this tree: cow_outside_in */
		char target[PATH_MAX + 64], parent[PATH_MAX + 64];
		snprintf(target, sizeof target, "%s/%s", dir, in->cow ? in->dest + 3 : in->dest);
		snprintf(parent, sizeof parent, "%s", target);
		*strrchr(parent, '/') = '\0';
		if (make_dirs(rootfd, parent, 0755, err) < 0)
			return -1;
		if ((in->is_dir ? make_dir(rootfd, target, 0755, err) : make_file(rootfd, target, err)) < 0)
			return -1;
		struct stat a, b;
		if (fstat(here[i], &a) < 0 || fstat(in->fd, &b) < 0)
			return rb_error_set(err, errno, "input `%s`", in->host);
		if (a.st_dev != b.st_dev || a.st_ino != b.st_ino)
			return rb_error_set(err, 0, "input `%s` changed while the sandbox was being built", in->host);
		if (in->cow) {
			if (mount_cow(staging, i, here[i], cow_lower ? cow_lower[i] : -1, in, rootfd, target, err) < 0)
				return -1;
			continue;
		}
		/* One mount, not the mounts below it: an input never carries another
		 * filesystem (a host /proc, a user's FUSE mount) in with it. */
		if (bind_ro_attrs(here[i], NULL, rootfd, target, in->is_dir,
		                  MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, false, err) < 0)
			return rb_error_prefix(err, "input `%s`", in->host);
	}
	return remount_ro(rootfd, dir, err);
}

/* What the root's build carries from one step to the next. */
struct rootfs_build {
	const struct rb_rootfs_spec *spec;
	struct sources src;
	int rootfd; /* the merged overlay root, before the pivot */
};

static void close_build(struct rootfs_build *b)
{
	close_sources(&b->src);
	if (b->rootfd >= 0)
		close(b->rootfd);
}

/* Nothing done in the new mount namespace may propagate back to the host. */
static int private_propagation(struct rootfs_build *b, struct rb_error *err)
{
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return rb_error_set(err, errno, "make / private");
	return 0;
}

/* Inputs and skills are opened before any mount hides a path they name. */
static int sources(struct rootfs_build *b, struct rb_error *err)
{
	return open_sources(b->spec, &b->src, err);
}

/* A size-capped tmpfs holds the overlay's upper layer and the staging tree. */
static int scratch(struct rootfs_build *b, struct rb_error *err)
{
	char size[48];
	size_opt(size, sizeof size, b->spec->rootfs_bytes, 1ULL << 30);
	const char *opts[] = {"mode=0755", size, NULL};
	return mount_new(AT_FDCWD, b->spec->staging, "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
}

/* The read-only image under a writable upper layer; every later step works beneath it. */
static int overlay_root(struct rootfs_build *b, struct rb_error *err)
{
	if (mount_overlay(b->spec->staging, b->spec->image, b->spec->lower_fd, b->spec->writable_image, err) < 0)
		return -1;
	char merged[PATH_MAX + 8];
	snprintf(merged, sizeof merged, "%s/root", b->spec->staging);
	b->rootfd = open(merged, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (b->rootfd < 0)
		return rb_error_set(err, errno, "open `%s`", merged);
	return 0;
}

/* The image's own read-only binds (the host image's /usr, /etc, ...). */
static int image_binds(struct rootfs_build *b, struct rb_error *err)
{
	for (unsigned i = 0; i < b->spec->image->n_binds; i++) {
		const struct rb_image_bind *bind = &b->spec->image->binds[i];
		struct stat st;
		if (stat(bind->src, &st) < 0)
			return rb_error_set(err, errno, "image bind `%s`", bind->src);
		if (bind_ro(AT_FDCWD, bind->src, b->rootfd, bind->dest, S_ISDIR(st.st_mode), err) < 0)
			return -1;
	}
	return 0;
}

/* In gateway mode /etc/resolv.conf is the run's own file naming the DNS stub, bound read-only
 * over the image's (or placed in the overlay's upper layer where the image has none, or a
 * symlink: a link into /run would name a file the sandbox does not have). After the image's
 * binds, so a bound /etc gets it too. */
static int resolv(struct rootfs_build *b, struct rb_error *err)
{
	static const char text[] = "# runbox: the gateway's DNS stub answers every query REFUSED at once (a blocked\n"
	                           "# name fails fast; the run's result lists the names asked)\n"
	                           "nameserver 127.0.0.1\n";
	if (!b->spec->resolv_stub)
		return 0;
	if (make_dirs(b->rootfd, "etc", 0755, err) < 0)
		return -1;
	struct rb_error ignored;
	int fd = openat2_beneath(b->rootfd, "etc/resolv.conf", O_PATH | O_NOFOLLOW, &ignored);
	struct stat st;
	bool file = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
	if (fd >= 0)
		close(fd);
	if (!file) {
		_cleanup_close_ int etc = openat2_beneath(b->rootfd, "etc", O_PATH | O_DIRECTORY, err);
		if (etc < 0)
			return -1;
		if (unlinkat(etc, "resolv.conf", 0) < 0 && errno != ENOENT)
			return rb_error_set(err, errno, "replace /etc/resolv.conf (not a file) with the DNS stub's");
		if (make_file(b->rootfd, "etc/resolv.conf", err) < 0)
			return -1;
	}
	return mask_with_text(b->rootfd, b->spec->staging, "resolv.conf", text, "etc/resolv.conf", err);
}

static int tmp(struct rootfs_build *b, struct rb_error *err)
{
	char size[48];
	size_opt(size, sizeof size, b->spec->tmp_bytes, 256ULL << 20);
	const char *opts[] = {"mode=01777", size, NULL};
	if (make_dir(b->rootfd, "tmp", 01777, err) < 0)
		return -1;
	return mount_new(b->rootfd, "tmp", "tmpfs", opts, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err);
}

static int workspace(struct rootfs_build *b, struct rb_error *err)
{
	return build_workspace(b->rootfd, b->spec, &b->src, err);
}

/* Device nodes are made after the binds, so no image or input can shadow them. */
static int dev(struct rootfs_build *b, struct rb_error *err)
{
	if (make_dir(b->rootfd, "dev", 0755, err) < 0)
		return -1;
	return build_dev(b->rootfd, err);
}

/* proc with its masks over what would tell the host's secrets. */
static int proc(struct rootfs_build *b, struct rb_error *err)
{
	if (make_dir(b->rootfd, "proc", 0555, err) < 0)
		return -1;
	return build_proc(b->rootfd, b->spec->staging, err);
}

/* sysfs belongs to the network namespace's owner, which the sandbox is not: an empty read-only
 * /sys keeps tools that probe it from failing oddly. */
static int sys(struct rootfs_build *b, struct rb_error *err)
{
	static const char *const opts[] = {"mode=0555", "size=4096", NULL};
	if (make_dir(b->rootfd, "sys", 0555, err) < 0)
		return -1;
	return mount_new(b->rootfd, "sys", "tmpfs", opts,
	                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err);
}

/* pivot_root(".", ".") stacks the old root under the new one; it is detached at once, so no
 * path of the host stays reachable. */
static int pivot(struct rootfs_build *b, struct rb_error *err)
{
	if (fchdir(b->rootfd) < 0)
		return rb_error_set(err, errno, "chdir to the new root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return rb_error_set(err, errno, "pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		return rb_error_set(err, errno, "detach the old root");
	if (chdir("/") < 0)
		return rb_error_set(err, errno, "chdir /");
	return 0;
}

int rb_rootfs_build(const struct rb_rootfs_spec *spec, struct rb_error *err)
{
	/* The order is the security argument. */
	static int (*const steps[])(struct rootfs_build *, struct rb_error *) = {
	    private_propagation, /* first: nothing below reaches the host's mounts */
	    sources,             /* what the steps' inputs name, opened before mounts hide it */
	    scratch,             /* a capped tmpfs for the upper layer */
	    overlay_root,        /* the image, read-only, under it */
	    image_binds,         /* the image's binds, read-only */
	    resolv,              /* gateway mode: /etc/resolv.conf names the DNS stub */
	    tmp,                 /* /tmp: capped tmpfs */
	    workspace,           /* /workspace, its inputs read-only, /workspace/out */
	    dev,                 /* after every bind: nothing shadows the device nodes */
	    proc,                /* masked */
	    sys,                 /* empty, read-only */
	    pivot,               /* last: the host's root detached */
	};
	__attribute__((cleanup(close_build))) struct rootfs_build b = {.spec = spec, .rootfd = -1};
	for (unsigned i = 0; i < RB_MAX_INPUTS; i++)
		b.src.in[i] = b.src.skills[i] = -1;
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (steps[i](&b, err) < 0)
			return -1;
	return 0;
}

int rb_input_open(const struct rb_input_req *req, struct rb_input *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	out->fd = -1;
	const char *what = req->what;
	if (!req->from || !*req->from)
		return rb_error_set(err, 0, "%s: empty source", what);
	char real[PATH_MAX];
	if (!realpath(req->from, real))
		return rb_error_set(err, errno, "%s: `%s`", what, req->from);
	const char *dest;
	char base[PATH_MAX + 8];
	if (req->to) {
		dest = req->to;
		const char *prefix = req->cow ? "/workspace/" : "/workspace/in/";
		if (strncmp(dest, prefix, strlen(prefix)) != 0)
			return rb_error_set(err, 0, "%s: destination must be under %s", what, prefix);
		dest += strlen(prefix);
		if (req->cow && (!strcmp(dest, "in") || !strcmp(dest, "out") || !strncmp(dest, "out/", 4) ||
		                 !strcmp(dest, "skills") || !strncmp(dest, "skills/", 7)))
			return rb_error_set(
			    err, 0,
			    "%s: a cow input goes under /workspace/in/ or another folder of /workspace, "
			    "never on /workspace/in itself, /workspace/out or /workspace/skills",
			    what);
	} else {
		char copy[PATH_MAX];
		snprintf(copy, sizeof copy, "%s", real);
		snprintf(base, sizeof base, "%s%s", req->cow ? "in/" : "", basename(copy));
		dest = base;
	}
	/* No "..", no empty or "." components: the destination stays inside /workspace/in. */
	char check[PATH_MAX];
	snprintf(check, sizeof check, "%s", dest);
	if (!*check)
		return rb_error_set(err, 0, "%s: empty destination", what);
	char *save = NULL;
	for (char *c = strtok_r(check, "/", &save); c; c = strtok_r(NULL, "/", &save))
		if (!strcmp(c, "..") || !strcmp(c, "."))
			return rb_error_set(err, 0, "%s: destination may not contain `.` or `..`", what);
	if (dest[0] == '/' || strstr(dest, "//") || dest[strlen(dest) - 1] == '/')
		return rb_error_set(err, 0, "%s: malformed destination", what);
	snprintf(out->dest, sizeof out->dest, "%s", dest);
	snprintf(out->host, sizeof out->host, "%s", real);
	/* real has no links left in it: one met now was put there since realpath, and would
	 * make the object opened differ from the path that the policy checks. */
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	out->fd = (int)syscall(SYS_openat2, AT_FDCWD, real, &how, sizeof how);
	struct stat st;
	if (out->fd < 0 || fstat(out->fd, &st) < 0)
		return rb_error_set(err, errno, "%s: `%s`", what, real);
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)) {
		close(out->fd);
		out->fd = -1;
		return rb_error_set(err, 0, "%s: `%s`: only files and directories can be inputs", what, real);
	}
	out->is_dir = S_ISDIR(st.st_mode);
	out->cow = req->cow;
	if (out->cow && !out->is_dir)
		return rb_error_set(err, 0, "%s: `%s`: cow needs a folder (overlayfs layers are folders)", what, real);
	return 0;
}

int rb_input_parse(const char *arg, struct rb_input *out, struct rb_error *err)
{
	char src[PATH_MAX], what[PATH_MAX + 16];
	const char *colon = strchr(arg, ':');
	snprintf(src, sizeof src, "%.*s", colon ? (int)(colon - arg) : (int)strlen(arg), arg);
	snprintf(what, sizeof what, "--input `%.*s`", PATH_MAX - 1, arg);
	struct rb_input_req req = {.from = src, .to = colon ? colon + 1 : NULL, .what = what};
	return rb_input_open(&req, out, err);
}

/* `runbox check`: what this host supports, tried for real where trying is harmless (in forked
 * children inside fresh namespaces), read from /proc and /sys where it is not. Each finding is
 * an item with a state, a concrete detail (the errno met, the value read) and the fix. */
#define _GNU_SOURCE
#include "runtime/check/hostcheck.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/gen.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <pwd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "runtime/sandbox/cgroup.h"
#include "runtime/sandbox/userns.h"

#define NOT_RUN (-1)

/* ---- items ------------------------------------------------------------------------------ */

static void vappend(char *buf, size_t size, const char *fmt, va_list ap) __attribute__((format(printf, 3, 0)));
static void vappend(char *buf, size_t size, const char *fmt, va_list ap)
{
	size_t len = strnlen(buf, size);
	if (len + 1 >= size)
		return;
	vsnprintf(buf + len, size - len, fmt, ap);
}

/* Appends to a NUL-terminated buffer, truncating silently: details are for people. */
static void appendf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappend(buf, size, fmt, ap);
	va_end(ap);
}

static void detail(struct rb_hostcheck_item *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void detail(struct rb_hostcheck_item *it, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappend(it->detail, sizeof(it->detail), fmt, ap);
	va_end(ap);
}

static void fix(struct rb_hostcheck_item *it, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fix(struct rb_hostcheck_item *it, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vappend(it->fix, sizeof(it->fix), fmt, ap);
	va_end(ap);
}

static struct rb_hostcheck_item *add(struct rb_hostcheck *hc, const char *name, bool required)
{
	/* RB_HOSTCHECK_MAX is sized above the fixed list of checks below; the last slot absorbs
	 * any overflow rather than writing past the array. */
	struct rb_hostcheck_item *it = &hc->items[hc->n < RB_HOSTCHECK_MAX ? hc->n++ : RB_HOSTCHECK_MAX - 1];
	memset(it, 0, sizeof(*it));
	snprintf(it->name, sizeof(it->name), "%s", name);
	it->required = required;
	it->state = RB_CHECK_OK;
	return it;
}

/* "EPERM (Operation not permitted)" */
static const char *errstr(int e, char *buf, size_t size)
{
	const char *n = strerrorname_np(e);
	snprintf(buf, size, "%s (%s)", n ? n : "?", strerror(e));
	return buf;
}
#define ERRSTR(e) errstr((e), (char[96]){0}, 96)

const char *rb_hostcheck_state_name(enum rb_hostcheck_state state)
{
	switch (state) {
	case RB_CHECK_OK: return "ok";
	case RB_CHECK_DEGRADED: return "degraded";
	case RB_CHECK_MISSING: return "missing";
	}
	return "?";
}

bool rb_hostcheck_runnable(const struct rb_hostcheck *hc)
{
	for (size_t i = 0; i < hc->n; i++)
		if (hc->items[i].required && hc->items[i].state == RB_CHECK_MISSING)
			return false;
	return true;
}

/* ---- small readers ---------------------------------------------------------------------- */

/* First line of a small file, trailing newline removed; -1 when it cannot be read. */
static int read_line(const char *path, char *out, size_t size)
{
	_cleanup_free_ char *buf = NULL;
	if (rb_read_file(path, 1 << 16, &buf, NULL, NULL) < 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(out, size, "%s", buf);
	return 0;
}

/* A sysctl's integer value, or -1 when the knob does not exist on this kernel. */
static long read_long(const char *path)
{
	char buf[64];
	if (read_line(path, buf, sizeof(buf)) < 0)
		return -1;
	char *end;
	errno = 0;
	long v = strtol(buf, &end, 10);
	return (errno || end == buf) ? -1 : v;
}

static bool has_word(const char *list, const char *word, const char *seps)
{
	size_t wl = strlen(word);
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, seps);
		if (n == wl && strncmp(p, word, wl) == 0)
			return true;
		p += n;
		p += strspn(p, seps);
	}
	return false;
}

/* ---- /proc/self/mountinfo --------------------------------------------------------------- */

struct mnt {
	int id, parent;
	char root[PATH_MAX], point[PATH_MAX], fstype[64], super[512];
};

struct mnts {
	struct mnt *v;
	size_t n;
};

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' && r[3] >= '0' &&
		    r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

static void mnts_free(struct mnts *m)
{
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

static int mnts_load(struct mnts *m)
{
	_cleanup_free_ char *buf = NULL;
	if (rb_read_file("/proc/self/mountinfo", 16 << 20, &buf, NULL, NULL) < 0)
		return -1;
	size_t cap = 0;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		struct mnt e = {0};
		char root[PATH_MAX], point[PATH_MAX];
		if (sscanf(line, "%d %d %*s %4095s %4095s", &e.id, &e.parent, root, point) != 4)
			continue;
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(sep + 3, "%63s %*s %511s", e.fstype, e.super) < 1)
			continue;
		unescape(root);
		unescape(point);
		snprintf(e.root, sizeof(e.root), "%s", root);
		snprintf(e.point, sizeof(e.point), "%s", point);
		if (m->n == cap) {
			cap = cap ? cap * 2 : 64;
			struct mnt *nv = realloc(m->v, cap * sizeof(*nv));
			if (!nv)
				return -1;
			m->v = nv;
		}
		m->v[m->n++] = e;
	}
	return 0;
}

/* ---- forked probes ---------------------------------------------------------------------- */

/* What a probe child sends back: the errno met at each of its steps (0 ok, NOT_RUN). */
struct probe {
	int err[24];
	long val[4];
};

typedef void (*probe_fn)(void *arg, struct probe *p);

/* Runs fn in a forked child so that namespaces, mounts and seccomp filters it sets up die
 * with it. Returns -1 when the child could not be started or died without answering. */
static int run_probe(probe_fn fn, void *arg, struct probe *p)
{
	for (size_t i = 0; i < RB_ARRAY_SIZE(p->err); i++)
		p->err[i] = NOT_RUN;
	memset(p->val, 0, sizeof(p->val));
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		close(fds[0]);
		fn(arg, p);
		ssize_t w = write(fds[1], p, sizeof(*p));
		_exit(w == (ssize_t)sizeof(*p) ? 0 : 1);
	}
	close(fds[1]);
	struct probe got = {0};
	size_t have = 0;
	while (have < sizeof(got)) {
		ssize_t n = read(fds[0], (char *)&got + have, sizeof(got) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (have != sizeof(got))
		return -1;
	*p = got;
	return 0;
}

/* Records the outcome of one step; true when it failed. */
static bool failed(struct probe *p, int step, long r)
{
	p->err[step] = r < 0 ? (errno ? errno : EIO) : 0;
	return r < 0;
}

static int write_str(const char *path, const char *s)
{
	struct rb_error e = {0};
	return rb_write_file(path, s, &e) < 0 ? (errno = e.errnum ? e.errnum : EIO, -1) : 0;
}

/* Maps root in a fresh user namespace to the caller's own ids, which any user may do for
 * itself once setgroups is denied. */
static int self_maps(uid_t uid, gid_t gid)
{
	char map[64];
	if (write_str("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
		return -1;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (write_str("/proc/self/uid_map", map) < 0)
		return -1;
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	return write_str("/proc/self/gid_map", map);
}

/* ---- context ---------------------------------------------------------------------------- */

enum cg_mode { CG_NONE, CG_LEGACY, CG_HYBRID, CG_UNIFIED };

/* One cgroup hierarchy as runbox would use it. Paths named *_rel are as in /proc/self/cgroup. */
struct hier {
	bool mounted;
	char mount[PATH_MAX];
	char self_rel[PATH_MAX]; /* the caller's cgroup */
	char self[PATH_MAX];
	char parent_rel[PATH_MAX]; /* where runbox makes run cgroups (runtime/sandbox/cgroup.c's rule) */
	char parent[PATH_MAX];
	char try_rel[PATH_MAX]; /* the deepest existing directory on the way to parent: what
	                         * runbox's first mkdir needs to write to */
	char try_dir[PATH_MAX];
};

static const char *const v1_ctrls[] = {"memory", "pids", "cpu", "freezer"};

struct ctx {
	struct rb_hostcheck *hc;
	const struct rb_host *host;
	bool root;
	uid_t uid;
	gid_t gid;
	char user[64];
	int kmaj, kmin;
	char release[128];
	char exe[PATH_MAX];
	long aa_restrict;
	struct mnts mi;
	char tmpdir[PATH_MAX];

	enum cg_mode cgmode;
	const char *parent_env; /* RUNBOX_CGROUP_PARENT of the host, or NULL */
	int parent_errno;       /* rb_cgroup_parent refused it (EINVAL: a ".."; ENAMETOOLONG) */
	struct hier v2, v1[4];
	char v2_test[PATH_MAX + 128]; /* a test cgroup we made in v2; removed before returning */
	char v2_test_rel[PATH_MAX + 128];
	bool v2_test_kill;
};

static bool kernel_at_least(const struct ctx *c, int maj, int min)
{
	return c->kmaj > maj || (c->kmaj == maj && c->kmin >= min);
}

/* ---- kernel ----------------------------------------------------------------------------- */

static void check_kernel(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "kernel", false);
	struct utsname u;
	if (uname(&u) < 0) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "uname failed: %s", ERRSTR(errno));
		fix(it, "none needed unless other checks fail");
		return;
	}
	snprintf(c->release, sizeof(c->release), "%s", u.release);
	if (sscanf(u.release, "%d.%d", &c->kmaj, &c->kmin) != 2)
		c->kmaj = c->kmin = 0;
	detail(it, "Linux %s %s", u.release, u.machine);
	if (!kernel_at_least(c, 5, 7)) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "; before 5.7 destroying an IPC namespace costs about 8 ms (fixed by "
		           "e1eb26fa62d0), so every sandbox pays it at teardown, and clone3 lacks "
		           "CLONE_INTO_CGROUP");
		fix(it, "a kernel >= 5.7 (>= 5.14 adds cgroup.kill, >= 6.8 overlay lowerdir+)");
	} else if (!kernel_at_least(c, 5, 14)) {
		detail(it, "; no cgroup.kill before 5.14 (runbox freezes and kills instead)");
	}
}

/* ---- user namespaces -------------------------------------------------------------------- */

enum { UN_UNSHARE, UN_MAPS, UN_CAPS };

static void userns_probe(void *arg, struct probe *p)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (failed(p, UN_UNSHARE, unshare(CLONE_NEWUSER)))
		return;
	if (failed(p, UN_MAPS, self_maps(uid, gid)))
		return;
	/* Capabilities granted in the new namespace must be usable: AppArmor's userns restriction
	 * lets unshare succeed and then denies them. */
	if (failed(p, UN_CAPS, unshare(CLONE_NEWUTS)))
		return;
	failed(p, UN_CAPS, sethostname("runbox-check", 12));
}

static void apparmor_fix(struct ctx *c, struct rb_hostcheck_item *it)
{
	fix(it,
	    "AppArmor restricts unprivileged user namespaces: as root add /etc/apparmor.d/runbox "
	    "containing `abi <abi/4.0>, include <tunables/global> profile runbox %s flags=(unconfined) "
	    "{ userns, }` and run `apparmor_parser -r /etc/apparmor.d/runbox`; or `sysctl -w "
	    "kernel.apparmor_restrict_unprivileged_userns=0`",
	    c->exe[0] ? c->exe : "/usr/local/bin/runbox");
}

static void check_userns(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "user namespaces", true);
	long max = read_long("/proc/sys/user/max_user_namespaces");
	long clone_ok = read_long("/proc/sys/kernel/unprivileged_userns_clone");
	struct probe p;
	int r = run_probe(userns_probe, c, &p);

	if (r < 0) {
		it->state = RB_CHECK_MISSING;
		detail(it, "the probe child died before answering");
	} else if (p.err[UN_UNSHARE]) {
		it->state = RB_CHECK_MISSING;
		detail(it, "unshare(CLONE_NEWUSER) as uid %u: %s", (unsigned)c->uid, ERRSTR(p.err[UN_UNSHARE]));
	} else if (p.err[UN_MAPS]) {
		it->state = RB_CHECK_MISSING;
		detail(it, "unshare(CLONE_NEWUSER) as uid %u works, but writing its own uid/gid map failed: %s",
		       (unsigned)c->uid, ERRSTR(p.err[UN_MAPS]));
	} else if (p.err[UN_CAPS]) {
		it->state = RB_CHECK_MISSING;
		detail(it,
		       "unshare(CLONE_NEWUSER) as uid %u works, but capabilities inside are denied "
		       "(sethostname in a new UTS namespace: %s)",
		       (unsigned)c->uid, ERRSTR(p.err[UN_CAPS]));
	} else {
		detail(it,
		       "unshare(CLONE_NEWUSER) as uid %u works; own uid/gid map written; capabilities "
		       "usable inside",
		       (unsigned)c->uid);
	}
	detail(it, "; user.max_user_namespaces=");
	if (max >= 0)
		detail(it, "%ld", max);
	else
		detail(it, "absent (no CONFIG_USER_NS)");
	if (clone_ok >= 0)
		detail(it, "; kernel.unprivileged_userns_clone=%ld", clone_ok);
	if (c->aa_restrict >= 0)
		detail(it, "; kernel.apparmor_restrict_unprivileged_userns=%ld", c->aa_restrict);

	if (it->state == RB_CHECK_OK) {
		if (c->root && (clone_ok == 0 || c->aa_restrict == 1))
			detail(it, " (root is exempt; unprivileged users cannot run runbox rootless here)");
		return;
	}
	int e = r < 0 ? 0 : p.err[UN_UNSHARE] ? p.err[UN_UNSHARE] : p.err[UN_MAPS] ? p.err[UN_MAPS] : p.err[UN_CAPS];
	if (max < 0)
		fix(it, "a kernel built with CONFIG_USER_NS=y");
	else if (max == 0)
		fix(it, "`sysctl -w user.max_user_namespaces=15000` (persist it in /etc/sysctl.d/)");
	else if (e == ENOSPC)
		fix(it, "raise user.max_user_namespaces (now %ld): `sysctl -w user.max_user_namespaces=%ld`", max,
		    max * 2 + 1000);
	else if (!c->root && clone_ok == 0)
		fix(it, "`sysctl -w kernel.unprivileged_userns_clone=1` (persist it in /etc/sysctl.d/), or run "
		        "runbox as root");
	else if (!c->root && c->aa_restrict == 1)
		apparmor_fix(c, it);
	else
		fix(it, "allow unshare(CLONE_NEWUSER) for runbox: when nested in a container, run that container "
		        "with a seccomp profile that permits unshare and mount (docker/podman --security-opt "
		        "seccomp=unconfined) or --privileged");
}

/* ---- subordinate ids -------------------------------------------------------------------- */

/* A helper is usable when it is setuid root or carries the capability in its file caps. */
static bool helper_privileged(const char *path, cap_value_t need, char *how, size_t size)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		snprintf(how, size, "%s: %s", path, ERRSTR(errno));
		return false;
	}
	if ((st.st_mode & S_ISUID) && st.st_uid == 0) {
		snprintf(how, size, "%s setuid root", path);
		return true;
	}
	cap_t caps = cap_get_file(path);
	if (caps) {
		cap_flag_value_t v = CAP_CLEAR;
		cap_get_flag(caps, need, CAP_PERMITTED, &v);
		cap_free(caps);
		if (v == CAP_SET) {
			snprintf(how, size, "%s has file capability %s", path,
			         need == CAP_SETUID ? "cap_setuid" : "cap_setgid");
			return true;
		}
	}
	snprintf(how, size, "%s is neither setuid root nor has file capabilities", path);
	return false;
}

static void check_subids(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "subordinate ids", false);
	uint32_t us = 0, uc = 0, gs = 0, gc = 0;
	if (c->root) {
		/* As root runbox writes the maps itself; the range comes from a "runbox" entry. */
		bool hu = rb_subid_lookup("/etc/subuid", "runbox", UINT32_MAX, &us, &uc) == 0;
		bool hg = rb_subid_lookup("/etc/subgid", "runbox", UINT32_MAX, &gs, &gc) == 0;
		if (!hu && !hg) {
			detail(it,
			       "default range %u:%u, %u slices of %u for concurrent runs (no `runbox` entry in "
			       "/etc/subuid or /etc/subgid)",
			       RB_DEFAULT_SUBID_START, RB_DEFAULT_SUBID_SLICES * RB_SANDBOX_IDS,
			       RB_DEFAULT_SUBID_SLICES, RB_SANDBOX_IDS);
			return;
		}
		if (hu)
			detail(it, "uids runbox:%" PRIu32 ":%" PRIu32 " from /etc/subuid", us, uc);
		else
			detail(it, "uids: default %u:%u", RB_DEFAULT_SUBID_START, RB_DEFAULT_SUBID_COUNT);
		if (hg)
			detail(it, "; gids runbox:%" PRIu32 ":%" PRIu32 " from /etc/subgid", gs, gc);
		else
			detail(it, "; gids: default %u:%u", RB_DEFAULT_SUBID_START, RB_DEFAULT_SUBID_COUNT);
		if ((hu && uc < RB_DEFAULT_SUBID_COUNT) || (hg && gc < RB_DEFAULT_SUBID_COUNT)) {
			it->state = RB_CHECK_DEGRADED;
			detail(it, "; fewer than %u ids: ids above the range are unmapped in the sandbox",
			       RB_DEFAULT_SUBID_COUNT);
			fix(it, "give runbox %u ids in both files, e.g. `runbox:%u:%u`", RB_DEFAULT_SUBID_COUNT,
			    RB_DEFAULT_SUBID_START, RB_DEFAULT_SUBID_COUNT);
		}
		return;
	}

	bool hu = rb_subid_lookup("/etc/subuid", c->user, (uint32_t)c->uid, &us, &uc) == 0;
	bool hg = rb_subid_lookup("/etc/subgid", c->user, (uint32_t)c->uid, &gs, &gc) == 0;
	char nu[PATH_MAX], ng[PATH_MAX], howu[PATH_MAX + 96] = "", howg[PATH_MAX + 96] = "";
	bool have_u = rb_find_in_path("newuidmap", nu, sizeof(nu));
	bool have_g = rb_find_in_path("newgidmap", ng, sizeof(ng));
	bool ok_u = have_u && helper_privileged(nu, CAP_SETUID, howu, sizeof(howu));
	bool ok_g = have_g && helper_privileged(ng, CAP_SETGID, howg, sizeof(howg));

	if (hu)
		detail(it, "/etc/subuid %s:%" PRIu32 ":%" PRIu32 "", c->user, us, uc);
	else
		detail(it, "no entry for %s (uid %u) in /etc/subuid", c->user, (unsigned)c->uid);
	if (hg)
		detail(it, "; /etc/subgid %s:%" PRIu32 ":%" PRIu32 "", c->user, gs, gc);
	else
		detail(it, "; no entry for %s in /etc/subgid", c->user);
	detail(it, "; newuidmap: %s; newgidmap: %s", have_u ? howu : "not on PATH", have_g ? howg : "not on PATH");

	if (hu && hg && ok_u && ok_g) {
		if (uc < RB_SANDBOX_IDS || gc < RB_SANDBOX_IDS) {
			it->state = RB_CHECK_DEGRADED;
			detail(it, " (fewer than %u ids: higher ids are unmapped in the sandbox)", RB_SANDBOX_IDS);
			fix(it, "`usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s` (as root)",
			    c->user);
		}
		return;
	}
	it->state = RB_CHECK_DEGRADED;
	detail(it, " -> single-id mapping: the sandbox's root is your uid and no other id exists inside");
	if (!hu || !hg)
		fix(it, "`usermod --add-subuids 100000-165535 --add-subgids 100000-165535 %s` (as root)", c->user);
	if (!have_u || !have_g)
		fix(it, "%s`apt-get install uidmap` (newuidmap, newgidmap)", it->fix[0] ? "; " : "");
	else if (!ok_u || !ok_g)
		fix(it,
		    "%sreinstall uidmap so newuidmap/newgidmap are setuid root (`apt-get install --reinstall uidmap`)",
		    it->fix[0] ? "; " : "");
}

/* ---- overlay, new mount API, fresh /proc (one child, one user+mount+pid namespace) -------- */

enum {
	OV_UNSHARE,
	OV_MAPS,
	OV_TMPFS,
	OV_PREP,
	OV_MOUNT,
	OV_LOOKUP,
	OV_WRITE,
	OV_FSOPEN,
	OV_LOWERPLUS,
	OV_FSCONFIG,
	OV_CREATE,
	OV_FSMOUNT,
	OV_MOVE,
	OV_NEWLOOKUP,
	OV_PROC,
};

static int touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	return fd < 0 ? -1 : close(fd);
}

static void overlay_probe(void *arg, struct probe *p)
{
	const struct ctx *c = arg;
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (failed(p, OV_UNSHARE, unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID)))
		return;
	if (failed(p, OV_MAPS, self_maps(uid, gid)))
		return;
	/* The new namespace already receives no propagation back to the host (it belongs to a less
	 * privileged user namespace); private makes that explicit. */
	(void)mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	if (failed(p, OV_TMPFS, mount("tmpfs", c->tmpdir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=4m")))
		return;
	/* Paths relative to the tmpfs: whatever TMPDIR holds (',' or ':') cannot break the
	 * overlay option string. */
	if (failed(p, OV_PREP, chdir(c->tmpdir)))
		return;
	const char *dirs[] = {"l", "u", "w", "m", "u2", "w2", "m2", "p"};
	for (size_t i = 0; i < RB_ARRAY_SIZE(dirs); i++)
		if (failed(p, OV_PREP, mkdir(dirs[i], 0700)))
			return;
	if (failed(p, OV_PREP, touch("l/probe")))
		return;

	if (!failed(p, OV_MOUNT, mount("overlay", "m", "overlay", 0, "lowerdir=l,upperdir=u,workdir=w"))) {
		if (!failed(p, OV_LOOKUP, access("m/probe", F_OK)))
			failed(p, OV_WRITE, touch("m/written"));
		umount2("m", MNT_DETACH);
	}

	int fd = fsopen("overlay", FSOPEN_CLOEXEC);
	if (!failed(p, OV_FSOPEN, fd)) {
		if (failed(p, OV_LOWERPLUS, fsconfig(fd, FSCONFIG_SET_STRING, "lowerdir+", "l", 0))) {
			/* A rejected parameter may leave the context unusable: start over. */
			close(fd);
			fd = fsopen("overlay", FSOPEN_CLOEXEC);
			if (failed(p, OV_FSCONFIG, fd) ||
			    failed(p, OV_FSCONFIG, fsconfig(fd, FSCONFIG_SET_STRING, "lowerdir", "l", 0)))
				goto proc;
		}
		if (failed(p, OV_FSCONFIG, fsconfig(fd, FSCONFIG_SET_STRING, "upperdir", "u2", 0)) ||
		    failed(p, OV_FSCONFIG, fsconfig(fd, FSCONFIG_SET_STRING, "workdir", "w2", 0)))
			goto proc;
		if (failed(p, OV_CREATE, fsconfig(fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0)))
			goto proc;
		int mfd = fsmount(fd, FSMOUNT_CLOEXEC, 0);
		if (failed(p, OV_FSMOUNT, mfd))
			goto proc;
		if (!failed(p, OV_MOVE, move_mount(mfd, "", AT_FDCWD, "m2", MOVE_MOUNT_F_EMPTY_PATH)))
			failed(p, OV_NEWLOOKUP, access("m2/probe", F_OK));
		close(mfd);
	}
proc:
	if (fd >= 0)
		close(fd);
	/* procfs needs a pid namespace of our own: the first child is its pid 1. */
	pid_t pid = fork();
	if (pid < 0) {
		failed(p, OV_PROC, -1);
		return;
	}
	if (pid == 0)
		_exit(mount("proc", "p", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ? errno : 0);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	p->err[OV_PROC] = WIFEXITED(st) ? WEXITSTATUS(st) : ECHILD;
}

/* Mounts that cover parts of a procfs mount: a container runtime's masks. The kernel refuses
 * a fresh procfs in a user namespace unless some procfs mount is fully visible; only mounts
 * over permanently empty directories (binfmt_misc) are tolerated. */
static bool proc_masked(const struct mnts *mi, char *list, size_t size)
{
	bool any_proc = false;
	list[0] = '\0';
	for (size_t i = 0; i < mi->n; i++) {
		const struct mnt *pm = &mi->v[i];
		if (strcmp(pm->fstype, "proc") != 0 || strcmp(pm->root, "/") != 0)
			continue;
		any_proc = true;
		size_t covered = 0;
		char mine[1024] = "";
		for (size_t j = 0; j < mi->n; j++) {
			const struct mnt *ch = &mi->v[j];
			if (ch->parent != pm->id || ch->id == pm->id)
				continue;
			const char *rel = ch->point + strlen(pm->point);
			if (strncmp(ch->point, pm->point, strlen(pm->point)) != 0 || *rel != '/')
				continue;
			if (strcmp(rel, "/sys/fs/binfmt_misc") == 0)
				continue;
			covered++;
			appendf(mine, sizeof(mine), "%s%s", mine[0] ? ", " : "", ch->point);
		}
		if (covered == 0)
			return false;
		if (!list[0])
			snprintf(list, size, "%s", mine);
	}
	return any_proc;
}

static void not_tested(struct rb_hostcheck_item *it, const char *what, int e)
{
	it->state = RB_CHECK_MISSING;
	detail(it, "not tested: %s failed: %s", what, ERRSTR(e));
	fix(it, "see `user namespaces`");
}

static void check_mounts(struct ctx *c)
{
	struct rb_hostcheck_item *ov = add(c->hc, "overlayfs in userns", true);
	struct rb_hostcheck_item *api = add(c->hc, "new mount API", false);
	struct rb_hostcheck_item *lp = add(c->hc, "overlay lowerdir+", false);
	struct rb_hostcheck_item *pr = add(c->hc, "fresh /proc", true);
	char masks[1024];
	bool masked = proc_masked(&c->mi, masks, sizeof(masks));

	struct probe p;
	const char *tmp = rb_host_getenv(c->host, "TMPDIR");
	snprintf(c->tmpdir, sizeof(c->tmpdir), "%s/runbox-check-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	int r = -1, mkerr = 0;
	if (!mkdtemp(c->tmpdir))
		mkerr = errno;
	else {
		r = run_probe(overlay_probe, c, &p);
		rmdir(c->tmpdir);
	}
	if (mkerr || r < 0) {
		struct rb_hostcheck_item *all[] = {ov, api, lp, pr};
		for (size_t i = 0; i < RB_ARRAY_SIZE(all); i++) {
			all[i]->state = i == 1 || i == 2 ? RB_CHECK_DEGRADED : RB_CHECK_MISSING;
			if (mkerr)
				detail(all[i], "not tested: mkdtemp `%s`: %s", c->tmpdir, ERRSTR(mkerr));
			else
				detail(all[i], "not tested: the probe child died before answering");
			fix(all[i], "set TMPDIR to a writable directory and run `runbox check` again");
		}
		return;
	}
	int ns_err = p.err[OV_UNSHARE] ? p.err[OV_UNSHARE] : p.err[OV_MAPS];
	if (ns_err) {
		const char *what =
		    p.err[OV_UNSHARE] ? "unshare(CLONE_NEWUSER|CLONE_NEWNS|CLONE_NEWPID)" : "writing the uid/gid map";
		not_tested(ov, what, ns_err);
		not_tested(api, what, ns_err);
		api->state = RB_CHECK_DEGRADED;
		not_tested(lp, what, ns_err);
		lp->state = RB_CHECK_DEGRADED;
		not_tested(pr, what, ns_err);
		if (masked)
			detail(pr, "; and /proc is masked here (mounts over %s)", masks);
		return;
	}
	if (p.err[OV_TMPFS] || p.err[OV_PREP]) {
		int e = p.err[OV_TMPFS] ? p.err[OV_TMPFS] : p.err[OV_PREP];
		struct rb_hostcheck_item *all[] = {ov, api, lp, pr};
		for (size_t i = 0; i < RB_ARRAY_SIZE(all); i++) {
			all[i]->state = i == 1 || i == 2 ? RB_CHECK_DEGRADED : RB_CHECK_MISSING;
			detail(all[i], "not tested: %s in a user namespace failed: %s",
			       p.err[OV_TMPFS] ? "mounting a tmpfs" : "preparing layer directories", ERRSTR(e));
			if (!c->root && c->aa_restrict == 1)
				apparmor_fix(c, all[i]);
			else
				fix(all[i], "allow mount(2) in user namespaces for runbox (when nested in a container: "
				            "--security-opt seccomp=unconfined --security-opt apparmor=unconfined)");
		}
		return;
	}

	/* overlay through mount(2) */
	if (p.err[OV_MOUNT]) {
		ov->state = RB_CHECK_MISSING;
		detail(ov, "mount(\"overlay\") in a user namespace: %s", ERRSTR(p.err[OV_MOUNT]));
		if (p.err[OV_MOUNT] == ENODEV)
			fix(ov, "`modprobe overlay` (CONFIG_OVERLAY_FS)");
		else if (!kernel_at_least(c, 5, 11))
			fix(ov, "a kernel >= 5.11 (overlayfs in user namespaces), or Debian/Ubuntu's kernel which "
			        "allows it earlier");
		else
			fix(ov, "allow overlayfs mounts in user namespaces (an LSM or the container around runbox "
			        "forbids it)");
	} else if (p.err[OV_LOOKUP] || p.err[OV_WRITE]) {
		ov->state = RB_CHECK_MISSING;
		detail(ov, "overlay mounted in a user namespace, but %s: %s",
		       p.err[OV_LOOKUP] ? "the lower layer's file is not visible" : "writing to it failed",
		       ERRSTR(p.err[OV_LOOKUP] ? p.err[OV_LOOKUP] : p.err[OV_WRITE]));
		fix(ov, "a kernel with working overlayfs in user namespaces (>= 5.11)");
	} else {
		detail(ov, "overlay (lower, upper, work on a tmpfs) mounted, read and written inside a user "
		           "namespace");
	}

	/* new mount API */
	if (p.err[OV_FSOPEN]) {
		api->state = RB_CHECK_DEGRADED;
		detail(api, "fsopen(\"overlay\") in a user namespace: %s; runbox falls back to mount(2)",
		       ERRSTR(p.err[OV_FSOPEN]));
		fix(api, "a kernel >= 5.2 (fsopen), best >= 6.8 (overlay lowerdir+)");
	} else {
		int stepv[] = {OV_FSCONFIG, OV_CREATE, OV_FSMOUNT, OV_MOVE, OV_NEWLOOKUP};
		const char *names[] = {"fsconfig", "fsconfig(FSCONFIG_CMD_CREATE)", "fsmount", "move_mount",
		                       "lookup through the new mount"};
		size_t bad = RB_ARRAY_SIZE(stepv);
		for (size_t i = 0; i < RB_ARRAY_SIZE(stepv); i++)
			if (p.err[stepv[i]] > 0) {
				bad = i;
				break;
			}
		if (bad < RB_ARRAY_SIZE(stepv)) {
			api->state = RB_CHECK_DEGRADED;
			detail(api, "fsopen(\"overlay\") works, but %s failed: %s; runbox falls back to mount(2)",
			       names[bad], ERRSTR(p.err[stepv[bad]]));
			fix(api, "a kernel >= 6.8, where overlayfs speaks the new mount API natively");
		} else {
			detail(api, "fsopen(\"overlay\") + fsconfig + fsmount + move_mount work in a user namespace");
		}
	}

	/* lowerdir+ */
	if (p.err[OV_FSOPEN]) {
		lp->state = RB_CHECK_DEGRADED;
		detail(lp, "not tested: no fsopen(\"overlay\")");
		fix(lp, "a kernel >= 6.8");
	} else if (p.err[OV_LOWERPLUS]) {
		lp->state = RB_CHECK_DEGRADED;
		detail(lp,
		       "fsconfig(\"lowerdir+\"): %s (kernel < 6.8): layers go in one lowerdir= string, so ':' , ',' "
		       "and '\\' in layer paths must be escaped",
		       ERRSTR(p.err[OV_LOWERPLUS]));
		fix(lp, "a kernel >= 6.8");
	} else {
		detail(lp, "fsconfig(\"lowerdir+\") accepted: each layer is passed as its own path, no escaping");
	}

	/* fresh /proc */
	if (p.err[OV_PROC]) {
		pr->state = RB_CHECK_MISSING;
		detail(pr, "mounting procfs in a new user+pid namespace: %s", ERRSTR(p.err[OV_PROC]));
		if (masked) {
			detail(pr,
			       "; /proc is masked (mounts over %s), so the kernel refuses a fresh procfs "
			       "(mount_too_revealing): typical when nested in a container",
			       masks);
			fix(pr, "run the outer container with an unmasked /proc: docker run --security-opt "
			        "systempaths=unconfined, podman run --security-opt unmask=ALL (Kubernetes: "
			        "securityContext.procMount: Unmasked)");
		} else {
			fix(pr, "allow procfs mounts in user namespaces for runbox (an LSM or the outer container "
			        "forbids it)");
		}
	} else {
		detail(pr, "procfs mounts in a new user+pid namespace");
		if (masked)
			detail(pr, " (some procfs mount is unmasked; mounts over %s)", masks);
		else
			detail(pr, "; no mounts cover /proc");
	}
}

/* ---- seccomp ---------------------------------------------------------------------------- */

enum { SC_CONTROL, SC_NNP, SC_INIT, SC_RULE, SC_LOAD, SC_EFFECT };

static void seccomp_probe(void *arg, struct probe *p)
{
	/* Negative control: without the filter, fchdir(-1) answers EBADF. */
	long r = syscall(SYS_fchdir, -1);
	p->err[SC_CONTROL] = r < 0 ? errno : 0;
	if (failed(p, SC_NNP, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)))
		return;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		p->err[SC_INIT] = ENOMEM;
		return;
	}
	p->err[SC_INIT] = 0;
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EXDEV), SCMP_SYS(fchdir), 0);
	p->err[SC_RULE] = rc < 0 ? -rc : 0;
	if (rc == 0) {
		rc = seccomp_load(ctx);
		p->err[SC_LOAD] = rc < 0 ? -rc : 0;
		if (rc == 0) {
			r = syscall(SYS_fchdir, -1);
			p->err[SC_EFFECT] = r < 0 ? errno : 0;
		}
	}
	seccomp_release(ctx);
}

static void check_seccomp(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "seccomp", true);
	const struct scmp_version *v = seccomp_version();
	unsigned api = seccomp_api_get();
	int mode = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	int mode_err = mode < 0 ? errno : 0;
	char actions[256] = "";
	bool have_actions = read_line("/proc/sys/kernel/seccomp/actions_avail", actions, sizeof(actions)) == 0;
	struct probe p;
	int r = run_probe(seccomp_probe, c, &p);

	if (mode_err == EINVAL) {
		it->state = RB_CHECK_MISSING;
		detail(it, "prctl(PR_GET_SECCOMP): EINVAL: the kernel has no seccomp");
		fix(it, "a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y");
		return;
	}
	if (mode == 2)
		detail(it, "runbox already runs under a seccomp filter (nested: the outer filter applies too); ");
	if (!have_actions) {
		it->state = RB_CHECK_MISSING;
		detail(it, "/proc/sys/kernel/seccomp/actions_avail unreadable");
	} else if (!has_word(actions, "kill_process", " \t") || !has_word(actions, "errno", " \t")) {
		it->state = RB_CHECK_MISSING;
		detail(it, "actions_avail lacks kill_process or errno (%s)", actions);
	}
	if (r < 0) {
		it->state = RB_CHECK_MISSING;
		detail(it, "the filter probe child died before answering");
	} else if (p.err[SC_NNP] || p.err[SC_INIT] || p.err[SC_RULE] || p.err[SC_LOAD]) {
		it->state = RB_CHECK_MISSING;
		int e = p.err[SC_NNP]    ? p.err[SC_NNP]
		        : p.err[SC_INIT] ? p.err[SC_INIT]
		        : p.err[SC_RULE] ? p.err[SC_RULE]
		                         : p.err[SC_LOAD];
		detail(it, "loading a test filter failed: %s", ERRSTR(e));
	} else if (p.err[SC_CONTROL] != EBADF || p.err[SC_EFFECT] != EXDEV) {
		it->state = RB_CHECK_MISSING;
		detail(it, "a loaded test filter had no effect (fchdir(-1): %s before, %s after, want EXDEV)",
		       ERRSTR(p.err[SC_CONTROL]), ERRSTR(p.err[SC_EFFECT]));
	} else {
		detail(it, "a test filter loads and acts (fchdir: EBADF without, EXDEV with)");
	}
	if (have_actions)
		detail(it, "; actions: %s", actions);
	detail(it, "; libseccomp %u.%u.%u, API level %u", v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0, api);
	if (it->state == RB_CHECK_MISSING) {
		fix(it, "a kernel with CONFIG_SECCOMP_FILTER and libseccomp >= 2.5; when nested in a container, "
		        "one whose own filter allows seccomp(2) and prctl(PR_SET_NO_NEW_PRIVS)");
		return;
	}
	if (v && (v->major < 2 || (v->major == 2 && v->minor < 5))) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, " (< 2.5: no SCMP_FLTATR_CTL_OPTIMIZE binary tree, slower filters)");
		fix(it, "libseccomp >= 2.5 (`apt-get install libseccomp2` from a newer release)");
	}
}

/* ---- cgroups ---------------------------------------------------------------------------- */

/* The caller's path in one hierarchy from /proc/self/cgroup: ctrl NULL means the v2 line. */
static bool own_cgroup(const char *ctrl, char *out, size_t size)
{
	_cleanup_free_ char *buf = NULL;
	if (rb_read_file("/proc/self/cgroup", 1 << 16, &buf, NULL, NULL) < 0)
		return false;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		const char *ctrls = c1 + 1;
		bool match = ctrl ? has_word(ctrls, ctrl, ",") : (strncmp(line, "0:", 2) == 0 && !*ctrls);
		if (match) {
			snprintf(out, size, "%s", c2 + 1);
			return true;
		}
	}
	return false;
}

/* Joins a hierarchy's mount with a cgroup path, allowing for a mount whose root is not "/". */
static void cg_dir(const struct mnt *mt, const char *path, char *out, size_t size)
{
	size_t rl = strlen(mt->root);
	const char *rel = path;
	if (strcmp(mt->root, "/") != 0 && strncmp(path, mt->root, rl) == 0)
		rel = path + rl;
	snprintf(out, size, "%s%s", mt->point, strcmp(rel, "/") == 0 ? "" : rel);
}

static const struct mnt *find_cg_mount(const struct mnts *mi, const char *ctrl)
{
	for (size_t i = 0; i < mi->n; i++) {
		const struct mnt *e = &mi->v[i];
		if (!ctrl && strcmp(e->fstype, "cgroup2") == 0)
			return e;
		if (ctrl && strcmp(e->fstype, "cgroup") == 0 && has_word(e->super, ctrl, ","))
			return e;
	}
	return NULL;
}

/* Where runbox makes run cgroups in this hierarchy: rb_cgroup_parent, the rule runs follow. */
static void hier_init(struct ctx *c, struct hier *h, const char *ctrl)
{
	const struct mnt *mt = find_cg_mount(&c->mi, ctrl);
	if (!mt)
		return;
	h->mounted = true;
	snprintf(h->mount, sizeof(h->mount), "%s", mt->point);
	if (!own_cgroup(ctrl, h->self_rel, sizeof(h->self_rel)))
		snprintf(h->self_rel, sizeof(h->self_rel), "/");
	cg_dir(mt, h->self_rel, h->self, sizeof(h->self));
	if (rb_cgroup_parent(c->parent_env, h->self_rel, h->parent_rel, sizeof(h->parent_rel)) < 0) {
		/* Runs refuse it too (rb_cgroup_create fails): check_cgroup_mode says why. */
		c->parent_errno = errno;
		snprintf(h->parent_rel, sizeof(h->parent_rel), "%s", h->self_rel);
	}
	cg_dir(mt, h->parent_rel, h->parent, sizeof(h->parent));
	snprintf(h->try_rel, sizeof(h->try_rel), "%s", h->parent_rel);
	for (;;) {
		struct stat st;
		cg_dir(mt, h->try_rel, h->try_dir, sizeof(h->try_dir));
		if (stat(h->try_dir, &st) == 0 || strcmp(h->try_rel, "/") == 0)
			break;
		char *slash = strrchr(h->try_rel, '/');
		if (slash == h->try_rel)
			slash[1] = '\0';
		else if (slash)
			*slash = '\0';
		else
			snprintf(h->try_rel, sizeof(h->try_rel), "/");
	}
}

static void cg_init(struct ctx *c)
{
	struct statfs sf;
	bool found = statfs("/sys/fs/cgroup", &sf) == 0;
	if (found && sf.f_type == CGROUP2_SUPER_MAGIC)
		c->cgmode = CG_UNIFIED;
	else if (found && sf.f_type == TMPFS_MAGIC) {
		struct statfs uf;
		c->cgmode = statfs("/sys/fs/cgroup/unified", &uf) == 0 && uf.f_type == CGROUP2_SUPER_MAGIC ? CG_HYBRID
		                                                                                           : CG_LEGACY;
	} else
		c->cgmode = CG_NONE;

	const char *parent = rb_host_getenv(c->host, RB_CGROUP_PARENT_VAR);
	c->parent_env = parent && *parent ? parent : NULL;
	hier_init(c, &c->v2, NULL);
	for (size_t i = 0; i < RB_ARRAY_SIZE(v1_ctrls); i++)
		hier_init(c, &c->v1[i], v1_ctrls[i]);
}

/* Creates a uniquely named test cgroup under dir; returns 0 or the errno. */
static int make_test_cgroup(const char *dir, char *out, size_t size, char *name, size_t nsize)
{
	char id[24];
	rb_new_run_id(id);
	snprintf(name, nsize, "runbox-check-%s", id);
	snprintf(out, size, "%s/%s", dir, name);
	if (access(dir, W_OK) < 0)
		return errno;
	return mkdir(out, 0755) < 0 ? errno : 0;
}

/* rmdir with a bounded backoff: a just-reaped child may keep the cgroup busy briefly. */
static int remove_test_cgroup(const char *path)
{
	for (int i = 0, delay_us = 1000; i < 10; i++, delay_us *= 2) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY)
			return errno;
		usleep((useconds_t)delay_us);
	}
	return EBUSY;
}

static void check_cgroup_mode(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "cgroup mode", false);
	switch (c->cgmode) {
	case CG_UNIFIED: detail(it, "unified: cgroup2 at /sys/fs/cgroup; runbox uses cgroup v2"); break;
	case CG_HYBRID:
		detail(it, "hybrid: tmpfs at /sys/fs/cgroup with cgroup2 at /sys/fs/cgroup/unified; runbox uses "
		           "the v1 controllers for limits");
		break;
	case CG_LEGACY: detail(it, "legacy: cgroup v1 only; runbox uses the v1 controllers for limits"); break;
	case CG_NONE:
		it->state = RB_CHECK_MISSING;
		detail(it, "no cgroup filesystem at /sys/fs/cgroup: no limit can be enforced (every result says "
		           "so)");
		fix(it, "mount cgroup2: `mount -t cgroup2 none /sys/fs/cgroup`");
		return;
	}
	if (c->parent_env)
		detail(it, "; RUNBOX_CGROUP_PARENT=%s", c->parent_env);
	if (c->parent_errno) {
		it->state = RB_CHECK_MISSING;
		detail(it, " is refused (%s): runs cannot make their cgroup under it", ERRSTR(c->parent_errno));
		fix(it, "set RUNBOX_CGROUP_PARENT to a path without `..`");
	}
}

static void check_cgroup_v2(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "cgroup v2 controllers", false);
	if (!c->v2.mounted) {
		if (c->cgmode == CG_UNIFIED) {
			it->state = RB_CHECK_MISSING;
			detail(it, "no cgroup2 mount or no \"0::\" line in /proc/self/cgroup");
			fix(it, "mount cgroup2 at /sys/fs/cgroup");
		} else {
			detail(it, "no cgroup2 hierarchy (not needed: the v1 controllers are used)");
		}
		return;
	}
	char path[PATH_MAX + 32], ctrls[256] = "";
	snprintf(path, sizeof(path), "%s/cgroup.controllers", c->v2.self);
	if (read_line(path, ctrls, sizeof(ctrls)) < 0) {
		it->state = c->cgmode == CG_UNIFIED ? RB_CHECK_MISSING : RB_CHECK_OK;
		detail(it, "cannot read `%s`: %s", path, ERRSTR(errno));
		if (it->state != RB_CHECK_OK)
			fix(it, "run runbox from a cgroup it can read, or set RUNBOX_CGROUP_PARENT");
		return;
	}
	detail(it, "%s in %s (the caller's cgroup %s)", ctrls[0] ? ctrls : "none", c->v2.mount, c->v2.self_rel);
	if (c->cgmode != CG_UNIFIED) {
		detail(it, "; memory, pids, cpu come from v1 here");
		return;
	}
	const char *want[] = {"memory", "pids", "cpu"};
	char miss[64] = "";
	for (size_t i = 0; i < RB_ARRAY_SIZE(want); i++)
		if (!has_word(ctrls, want[i], " "))
			snprintf(miss + strlen(miss), sizeof(miss) - strlen(miss), "%s%s", miss[0] ? " " : "", want[i]);
	if (miss[0]) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "; missing %s: those limits are reported as not enforced", miss);
		if (c->root)
			fix(it, "enable them from the parent: `echo '+memory +pids +cpu' > "
			        "<parent>/cgroup.subtree_control`");
		else
			fix(it, "delegate them to your user: a user@.service.d drop-in with `Delegate=cpu cpuset io "
			        "memory pids`, then `systemctl daemon-reload`; run in a delegated scope: "
			        "`systemd-run --user -p Delegate=yes --scope runbox ...`");
	}
}

static void check_cgroup_v1(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "cgroup v1 controllers", false);
	if (c->cgmode == CG_UNIFIED || c->cgmode == CG_NONE) {
		detail(it, "none used (%s)", c->cgmode == CG_UNIFIED ? "unified hierarchy" : "no cgroups");
		return;
	}
	static const char *const lose[] = {"no memory limit", "no pids limit", "no cpu limit",
	                                   "timeouts kill pid by pid instead of freezing first"};
	char miss[256] = "";
	for (size_t i = 0; i < RB_ARRAY_SIZE(v1_ctrls); i++) {
		if (c->v1[i].mounted) {
			detail(it, "%s%s at %s (cgroup %s)", it->detail[0] ? "; " : "", v1_ctrls[i], c->v1[i].mount,
			       c->v1[i].self_rel);
		} else {
			size_t ml = strlen(miss);
			snprintf(miss + ml, sizeof(miss) - ml, "%s%s (%s)", ml ? ", " : "", v1_ctrls[i], lose[i]);
		}
	}
	/* v1 charges socket buffers only to a cgroup whose TCP limit is set; runbox sets it to the
	 * memory limit where the file exists (runtime/sandbox/cgroup_v1.c). */
	if (c->v1[0].mounted) {
		char tcp[PATH_MAX + 64];
		snprintf(tcp, sizeof tcp, "%s/memory.kmem.tcp.limit_in_bytes", c->v1[0].mount);
		if (access(tcp, F_OK) == 0) {
			detail(it, "; socket buffers count against the memory limit (memory.kmem.tcp.limit_in_bytes)");
		} else {
			it->state = RB_CHECK_DEGRADED;
			detail(it, "; memory is partly enforced: socket buffers are not charged (no "
			           "memory.kmem.tcp.limit_in_bytes: a kernel without v1 kmem accounting)");
			fix(it,
			    "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1), which charges socket buffers");
		}
	}
	if (miss[0]) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "%snot mounted: %s", it->detail[0] ? "; " : "", miss);
		fix(it,
		    "%smount the controller (`mount -t cgroup -o <ctrl> cgroup /sys/fs/cgroup/<ctrl>`), or boot "
		    "with cgroup v2 (systemd.unified_cgroup_hierarchy=1)",
		    it->fix[0] ? "; " : "");
	}
}

static void check_cgroup_delegation(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "cgroup delegation", false);
	char name[64], path[PATH_MAX + 80], bad[1024] = "";

	/* The v2 test cgroup also serves the cgroup.kill and CLONE_INTO_CGROUP probes, so it is
	 * made whenever the hierarchy exists, and removed at the end of rb_hostcheck_run. */
	int e2 = -1;
	if (c->v2.mounted) {
		e2 = make_test_cgroup(c->v2.try_dir, path, sizeof(path), name, sizeof(name));
		if (e2 == 0) {
			snprintf(c->v2_test, sizeof(c->v2_test), "%s", path);
			snprintf(c->v2_test_rel, sizeof(c->v2_test_rel), "%s/%s",
			         strcmp(c->v2.try_rel, "/") == 0 ? "" : c->v2.try_rel, name);
			char kill_path[PATH_MAX + 160];
			snprintf(kill_path, sizeof(kill_path), "%s/cgroup.kill", path);
			c->v2_test_kill = access(kill_path, F_OK) == 0;
		}
	}
	if (c->cgmode == CG_UNIFIED) {
		char procs[PATH_MAX + 16];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", c->v2.try_dir);
		detail(it, "run cgroups go under %s", c->v2.parent);
		if (e2) {
			appendf(bad, sizeof(bad), "cannot create a cgroup in %s: %s", c->v2.try_dir,
			        ERRSTR(e2 < 0 ? ENOENT : e2));
		} else if (access(procs, W_OK) < 0) {
			appendf(bad, sizeof(bad), "cannot move processes: %s: %s", procs, ERRSTR(errno));
		} else {
			char cpath[PATH_MAX + 160], ctrls[256] = "";
			snprintf(cpath, sizeof(cpath), "%s/cgroup.controllers", c->v2_test);
			read_line(cpath, ctrls, sizeof(ctrls));
			detail(it, "; a test cgroup made in %s gets: %s", c->v2.try_dir,
			       ctrls[0] ? ctrls : "no controllers");
			if (!has_word(ctrls, "memory", " ") || !has_word(ctrls, "pids", " ")) {
				it->state = RB_CHECK_DEGRADED;
				detail(it,
				       " (no memory or pids limits for runbox's cgroups: enable them in "
				       "%s/cgroup.subtree_control)",
				       c->v2.try_dir);
			}
		}
	} else if (c->cgmode != CG_NONE) {
		size_t okn = 0;
		for (size_t i = 0; i < RB_ARRAY_SIZE(v1_ctrls); i++) {
			if (!c->v1[i].mounted)
				continue;
			int e = make_test_cgroup(c->v1[i].try_dir, path, sizeof(path), name, sizeof(name));
			if (e == 0)
				e = remove_test_cgroup(path);
			if (e == 0) {
				okn++;
				detail(it, "%s%s", it->detail[0] ? ", " : "can create run cgroups under ",
				       c->v1[i].parent);
			} else {
				appendf(bad, sizeof(bad), "%s%s: %s", bad[0] ? "; " : "cannot create a cgroup in ",
				        c->v1[i].try_dir, ERRSTR(e));
			}
		}
		if (okn)
			detail(it, " (test cgroups made and removed)");
	} else {
		snprintf(bad, sizeof(bad), "no cgroup hierarchy");
	}
	if (bad[0]) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "%s%s: limits there are reported as not enforced", it->detail[0] ? "; " : "", bad);
	}
	if (it->state == RB_CHECK_OK)
		return;
	if (!c->root)
		fix(it, "run runbox in a delegated cgroup: `systemd-run --user -p Delegate=yes --scope runbox ...`%s",
		    c->cgmode == CG_UNIFIED ? "" : " (needs cgroup v2: boot with systemd.unified_cgroup_hierarchy=1)");
	else
		fix(it, "run runbox from a cgroup it may write to, or set RUNBOX_CGROUP_PARENT to one");
}

static void check_cgroup_kill(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "cgroup.kill", false);
	bool freezer = c->v1[3].mounted;
	bool present = c->v2_test[0] && c->v2_test_kill;
	/* The root cgroup has no cgroup.kill: only a non-root cgroup tells. */
	if (!c->v2_test[0] && c->v2.mounted && strcmp(c->v2.self_rel, "/") != 0) {
		char p[PATH_MAX + 16];
		snprintf(p, sizeof(p), "%s/cgroup.kill", c->v2.self);
		present = access(p, F_OK) == 0;
	}
	bool known = c->v2_test[0] || (c->v2.mounted && strcmp(c->v2.self_rel, "/") != 0);
	if (c->cgmode == CG_UNIFIED) {
		if (present) {
			detail(it, "present: a timeout kills the whole cgroup in one write");
		} else {
			it->state = RB_CHECK_DEGRADED;
			detail(it, "%s: runbox freezes, kills each pid, thaws",
			       known ? "absent (kernel < 5.14)" : "unknown (no writable test cgroup)");
			fix(it, "%s", known ? "a kernel >= 5.14" : "see `cgroup delegation`");
		}
		return;
	}
	if (present)
		detail(it, "present on the v2 hierarchy; ");
	if (c->cgmode == CG_NONE) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "no cgroups: runbox kills the sandbox's pid 1 (the pid namespace takes the rest)");
		fix(it, "see `cgroup mode`");
	} else if (freezer) {
		detail(it, "limits are on v1 here, so a timeout freezes (freezer v1), kills each pid, thaws");
	} else {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "limits are on v1 and the freezer is not mounted: a timeout kills pid by pid");
		fix(it, "mount the v1 freezer or boot with cgroup v2");
	}
}

/* A clone3(CLONE_INTO_CGROUP) child checks from inside where it landed. It shares nothing
 * with the parent but a copy of memory, so it sticks to raw syscalls and plain functions. */
static void check_clone_into_cgroup(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "CLONE_INTO_CGROUP", false);
	if (!c->v2_test[0]) {
		if (c->cgmode == CG_UNIFIED) {
			it->state = RB_CHECK_DEGRADED;
			detail(it, "not tested (no writable v2 cgroup); %s",
			       kernel_at_least(c, 5, 7) ? "kernel >= 5.7 has it" : "kernel < 5.7 lacks it");
			fix(it, "see `cgroup delegation`");
		} else {
			detail(it, "not used: limits are on v1 here, runbox moves the child via cgroup.procs before "
			           "releasing it");
		}
		return;
	}
	_cleanup_close_ int dfd = open(c->v2_test, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int e = 0, landed = -1;
	if (dfd < 0) {
		e = errno;
	} else {
		struct clone_args ca;
		memset(&ca, 0, sizeof(ca));
		ca.flags = CLONE_INTO_CGROUP;
		ca.exit_signal = SIGCHLD;
		ca.cgroup = (uint64_t)dfd;
		long pid = syscall(SYS_clone3, &ca, sizeof(ca));
		if (pid == 0) {
			char buf[4096], want[PATH_MAX + 160];
			int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
			ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
			buf[n > 0 ? n : 0] = '\0';
			snprintf(want, sizeof(want), "0::%s\n", c->v2_test_rel);
			syscall(SYS_exit_group, strstr(buf, want) ? 0 : 1);
		}
		if (pid < 0) {
			e = errno;
		} else {
			int st = 0;
			while (waitpid((pid_t)pid, &st, 0) < 0 && errno == EINTR)
				;
			landed = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		}
	}
	if (e) {
		it->state = c->cgmode == CG_UNIFIED ? RB_CHECK_DEGRADED : RB_CHECK_OK;
		detail(it, "clone3(CLONE_INTO_CGROUP): %s", ERRSTR(e));
		if (c->cgmode == CG_UNIFIED) {
			detail(it, "; runbox moves the child via cgroup.procs before releasing it");
			fix(it, "a kernel >= 5.7");
		} else {
			detail(it, " (not used: limits are on v1 here)");
		}
		return;
	}
	if (!landed) {
		it->state = c->cgmode == CG_UNIFIED ? RB_CHECK_DEGRADED : RB_CHECK_OK;
		detail(it, "clone3(CLONE_INTO_CGROUP) returned, but the child was not in %s", c->v2_test_rel);
		if (c->cgmode == CG_UNIFIED)
			fix(it, "a kernel >= 5.7");
		return;
	}
	detail(it, "clone3 started a child directly in a test cgroup");
	if (c->cgmode != CG_UNIFIED)
		detail(it, " (v2 hierarchy); not used here: limits are on v1, runbox moves the child via "
		           "cgroup.procs before releasing it");
}

/* ---- nftables --------------------------------------------------------------------------- */

enum { NF_UNSHARE, NF_OPEN, NF_BIND, NF_SEND, NF_RECV };

static int gen_cb(const struct nlmsghdr *nlh, void *data)
{
	long *genid = data;
	struct nftnl_gen *gen = nftnl_gen_alloc();
	if (!gen)
		return MNL_CB_ERROR;
	if (nftnl_gen_nlmsg_parse(nlh, gen) == 0)
		*genid = (long)nftnl_gen_get_u32(gen, NFTNL_GEN_ID);
	nftnl_gen_free(gen);
	return MNL_CB_OK;
}

static void nft_probe(void *arg, struct probe *p)
{
	const struct ctx *c = arg;
	/* MNL_SOCKET_BUFFER_SIZE is not a constant; 8192 is its upper bound. */
	char buf[8192];
	const size_t bufsize = sizeof(buf);
	/* As runbox's spawner does: rootless callers first get a user namespace of their own, so
	 * the netns (and its nftables) is ruled by a namespace they hold capabilities in. */
	if (failed(p, NF_UNSHARE, unshare(c->root ? CLONE_NEWNET : CLONE_NEWUSER | CLONE_NEWNET)))
		return;
	struct mnl_socket *nl = mnl_socket_open(NETLINK_NETFILTER);
	if (failed(p, NF_OPEN, nl ? 0 : -1))
		return;
	/* A safety net against a kernel that never answers, not a measurement. */
	struct timeval tv = {.tv_sec = 5};
	setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (failed(p, NF_BIND, mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID)))
		goto out;
	uint32_t seq = 1;
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, NFT_MSG_GETGEN, AF_UNSPEC, NLM_F_ACK, seq);
	if (failed(p, NF_SEND, mnl_socket_sendto(nl, nlh, nlh->nlmsg_len)))
		goto out;
	p->val[0] = -1;
	unsigned portid = mnl_socket_get_portid(nl);
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, bufsize);
		if (n < 0) {
			failed(p, NF_RECV, -1);
			break;
		}
		int r = mnl_cb_run(buf, (size_t)n, seq, portid, gen_cb, &p->val[0]);
		if (r < 0) {
			failed(p, NF_RECV, -1);
			break;
		}
		if (r == MNL_CB_STOP) {
			p->err[NF_RECV] = 0;
			break;
		}
	}
out:
	mnl_socket_close(nl);
}

static void check_nftables(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "nftables", false);
	struct probe p;
	if (run_probe(nft_probe, c, &p) < 0) {
		it->state = RB_CHECK_MISSING;
		detail(it, "the probe child died before answering");
		fix(it, "run `runbox check` again; report a bug if it persists");
		return;
	}
	static const char *const steps[] = {"unshare(CLONE_NEWNET)", "socket(NETLINK_NETFILTER)", "bind",
	                                    "sending NFT_MSG_GETGEN", "NFT_MSG_GETGEN"};
	const char *where = c->root ? "a fresh network namespace" : "a fresh user+network namespace";
	for (size_t i = 0; i < RB_ARRAY_SIZE(steps); i++) {
		if (p.err[i] <= 0)
			continue;
		it->state = RB_CHECK_MISSING;
		detail(it, "probing in %s: %s failed: %s", where, steps[i], ERRSTR(p.err[i]));
		detail(it, "; without nftables a sandbox still has no route out (only lo), but blocked egress is "
		           "not counted or ledgered");
		if (i == NF_UNSHARE)
			fix(it, "see `user namespaces` (network namespaces need the same permission)");
		else if (p.err[i] == EPROTONOSUPPORT || p.err[i] == EOPNOTSUPP || p.err[i] == ENOENT)
			fix(it, "`modprobe nf_tables` (a kernel with CONFIG_NF_TABLES)");
		else
			fix(it, "allow netlink NETFILTER sockets for runbox (an LSM or the outer container's seccomp "
			        "forbids them)");
		return;
	}
	struct stat st;
	bool module = stat("/sys/module/nf_tables", &st) == 0;
	detail(it, "NFT_MSG_GETGEN answered in %s (generation %ld); nf_tables %s", where, p.val[0],
	       module ? "loaded" : "built in or loaded on demand");
}

/* ---- hardening sysctls ------------------------------------------------------------------ */

static void check_tiocsti(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "dev.tty.legacy_tiocsti", false);
	long v = read_long("/proc/sys/dev/tty/legacy_tiocsti");
	if (v < 0) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "absent (kernel < 6.2): TIOCSTI can push input into a tty on the host; runbox's "
		           "seccomp filter blocks it in the sandbox, which never gets a host tty");
		fix(it, "a kernel >= 6.2, then `sysctl -w dev.tty.legacy_tiocsti=0`");
	} else if (v != 0) {
		it->state = RB_CHECK_DEGRADED;
		detail(it,
		       "%ld: TIOCSTI still pushes input into ttys host-wide; the sandbox's seccomp filter "
		       "blocks it anyway",
		       v);
		fix(it, "`sysctl -w dev.tty.legacy_tiocsti=0` (persist it in /etc/sysctl.d/)");
	} else {
		detail(it, "0: TIOCSTI disabled host-wide");
	}
}

static void check_io_uring(struct ctx *c)
{
	struct rb_hostcheck_item *it = add(c->hc, "kernel.io_uring_disabled", false);
	long v = read_long("/proc/sys/kernel/io_uring_disabled");
	if (v < 0) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "absent (kernel < 6.6): io_uring is open to every process on the host; runbox's "
		           "seccomp filter denies io_uring_* in the sandbox");
		fix(it, "a kernel >= 6.6, then `sysctl -w kernel.io_uring_disabled=2`");
	} else if (v == 0) {
		it->state = RB_CHECK_DEGRADED;
		detail(it, "0: io_uring open to every process on the host; runbox's seccomp filter denies "
		           "io_uring_* in the sandbox");
		fix(it, "`sysctl -w kernel.io_uring_disabled=2` (or 1 with kernel.io_uring_group) and persist it "
		        "in /etc/sysctl.d/");
	} else {
		detail(it, "%ld: io_uring %s", v,
		       v == 1 ? "limited to kernel.io_uring_group and privileged processes" : "disabled");
	}
}

/* ---- syscalls --------------------------------------------------------------------------- */

static void syscall_item(struct ctx *c, const char *name, bool required, long r, int e, bool ok_on_einval,
                         const char *since, const char *without)
{
	struct rb_hostcheck_item *it = add(c->hc, name, required);
	if (r >= 0 || (ok_on_einval && e == EINVAL)) {
		detail(it, "available (since %s)", since);
		return;
	}
	it->state = required ? RB_CHECK_MISSING : RB_CHECK_DEGRADED;
	detail(it, "%s: %s", name, ERRSTR(e));
	if (e == ENOSYS || e == EPERM)
		detail(it, " (kernel < %s, or a seccomp filter around runbox)", since);
	detail(it, "; %s", without);
	fix(it, "a kernel >= %s; when nested in a container, a seccomp profile that allows %s", since, name);
}

static void check_syscalls(struct ctx *c)
{
	long r = syscall(SYS_pidfd_open, getpid(), 0);
	int e = errno;
	if (r >= 0)
		close((int)r);
	syscall_item(c, "pidfd_open", false, r, e, false, "5.3",
	             "runbox waits with SIGCHLD and a timerfd instead of polling a pidfd");

	/* A size below the first version is rejected before anything is cloned. */
	errno = 0;
	r = syscall(SYS_clone3, NULL, 0);
	e = errno;
	syscall_item(c, "clone3", true, r < 0 ? -1 : 0, e, true, "5.3",
	             "the sandbox's pid 1 is created with clone3 (CLONE_PARENT, namespaces, CLONE_INTO_CGROUP)");

	/* first > last: EINVAL from a kernel that has it, nothing closed. */
	errno = 0;
	r = syscall(SYS_close_range, 3, 2, 0);
	e = errno;
	syscall_item(c, "close_range", false, r, e, true, "5.9",
	             "runbox closes inherited fds by walking /proc/self/fd instead");

	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_NO_MAGICLINKS};
	r = syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
	e = errno;
	if (r >= 0)
		close((int)r);
	syscall_item(c, "openat2", false, r, e, false, "5.6",
	             "paths are resolved component by component with O_NOFOLLOW instead of RESOLVE_BENEATH");
}

/* ---- entry ------------------------------------------------------------------------------ */

int rb_hostcheck_run(struct rb_hostcheck *out, const struct rb_host *host)
{
	memset(out, 0, sizeof(*out));
	struct ctx c = {.hc = out, .host = host};
	c.uid = getuid();
	c.gid = getgid();
	c.root = geteuid() == 0;
	out->rootless = !c.root;
	struct passwd pw, *pwp = NULL;
	char pwbuf[4096];
	if (getpwuid_r(c.uid, &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp)
		snprintf(c.user, sizeof(c.user), "%s", pw.pw_name);
	else
		snprintf(c.user, sizeof(c.user), "%u", (unsigned)c.uid);
	ssize_t n = readlink("/proc/self/exe", c.exe, sizeof(c.exe) - 1);
	c.exe[n > 0 ? n : 0] = '\0';
	c.aa_restrict = read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	mnts_load(&c.mi);

	check_kernel(&c);
	check_userns(&c);
	check_subids(&c);
	check_mounts(&c);
	check_seccomp(&c);
	cg_init(&c);
	check_cgroup_mode(&c);
	check_cgroup_v2(&c);
	check_cgroup_v1(&c);
	check_cgroup_delegation(&c);
	check_cgroup_kill(&c);
	check_clone_into_cgroup(&c);
	if (c.v2_test[0]) {
		int e = remove_test_cgroup(c.v2_test);
		if (e) {
			struct rb_hostcheck_item *it = add(out, "cgroup cleanup", false);
			it->state = RB_CHECK_DEGRADED;
			detail(it, "could not remove test cgroup %s: %s", c.v2_test, ERRSTR(e));
			fix(it, "`rmdir %s`", c.v2_test);
		}
	}
	check_nftables(&c);
	check_tiocsti(&c);
	check_io_uring(&c);
	check_syscalls(&c);
	mnts_free(&c.mi);
	return 0;
}

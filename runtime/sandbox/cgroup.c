/* Chooses the cgroup manager for a run (v2, v1 or none) from what the host offers, dispatches
 * the public calls to it, and holds the file helpers the managers share. */
#define _GNU_SOURCE
#include "runtime/sandbox/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/mountinfo.h"
#include "common/util.h"
#include "runtime/sandbox/cgroup-internal.h"

#define ROOTLESS_FIX "run under `systemd-run --user -p Delegate=yes --scope runbox ...`"

const char *rb_limit_name(enum rb_limit_kind kind)
{
	static const char *const names[RB_LIMIT_COUNT] = {"memory", "pids", "cpus", "cpu_weight"};
	return (unsigned)kind < RB_LIMIT_COUNT ? names[kind] : "?";
}

/* ---- helpers ---- */

int rb_cg_join(char *out, const char *dir, const char *file)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, file);
	if (n < 0 || n >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

bool rb_cg_exists(const char *dir, const char *file)
{
	char p[PATH_MAX];
	return rb_cg_join(p, dir, file) == 0 && access(p, F_OK) == 0;
}

int rb_cg_read(const char *dir, const char *file, char *buf, size_t n)
{
	char p[PATH_MAX];
	if (rb_cg_join(p, dir, file) < 0)
		return -1;
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = 0;
	while (len + 1 < n) {
		ssize_t r = read(fd, buf + len, n - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	return 0;
}

int rb_cg_read_u64(const char *dir, const char *file, uint64_t *out)
{
	char buf[64];
	if (rb_cg_read(dir, file, buf, sizeof buf) < 0)
		return -1;
	if (!strncmp(buf, "max", 3)) {
		*out = UINT64_MAX;
		return 0;
	}
	char *end;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (errno || end == buf) {
		errno = EINVAL;
		return -1;
	}
	*out = v;
	return 0;
}

int rb_cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out)
{
	char buf[4096];
	if (rb_cg_read(dir, file, buf, sizeof buf) < 0)
		return -1;
	size_t kl = strlen(key);
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (!strncmp(line, key, kl) && line[kl] == ' ') {
			*out = strtoull(line + kl + 1, NULL, 10);
			return 0;
		}
		line = nl ? nl + 1 : NULL;
	}
	errno = ENOENT;
	return -1;
}

int rb_cg_write(const char *dir, const char *file, const char *value, struct rb_error *err)
{
	char p[PATH_MAX];
	if (rb_cg_join(p, dir, file) < 0)
		return rb_error_set(err, errno, "cgroup file `%s/%s`", dir, file);
	return rb_write_file(p, value, err);
}

int rb_cg_mkdir(const char *path, bool *created, struct rb_error *err)
{
	if (created)
		*created = false;
	if (mkdir(path, 0755) == 0) {
		if (created)
			*created = true;
		return 0;
	}
	if (errno == EEXIST)
		return 0;
	return rb_error_set(err, errno, "mkdir `%s`", path);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int rb_cg_rmdir(const char *path, struct rb_error *err)
{
	/* A cgroup whose last task just died can stay busy for a moment; never wait unbounded. */
	unsigned delay = 1;
	int e = 0;
	for (int i = 0; i < 10; i++) {
		if (rmdir(path) == 0 || errno == ENOENT)
			return 0;
		e = errno;
		if (e != EBUSY && e != EAGAIN)
			break;
		sleep_ms(delay);
		delay *= 2;
	}
	return rb_error_set(err, e, "rmdir `%s`", path);
}

/* Calls fn(pid, arg) for each pid in dir/cgroup.procs; returns the count, -1 if unreadable. */
static int each_proc(const char *dir, void (*fn)(pid_t, void *), void *arg)
{
	char p[PATH_MAX];
	if (rb_cg_join(p, dir, "cgroup.procs") < 0)
		return -1;
	_cleanup_free_ char *buf = NULL;
	/* A pid is at most 8 bytes with its newline; 4 MiB covers any pids.max a run gets. */
	if (rb_read_file(p, 4u << 20, &buf, NULL, NULL) < 0)
		return -1;
	int n = 0;
	for (char *s = buf; *s;) {
		char *end;
		long pid = strtol(s, &end, 10);
		if (end == s)
			break;
		if (pid > 0) {
			n++;
			if (fn)
				fn((pid_t)pid, arg);
		}
		s = end;
		while (*s == '\n')
			s++;
	}
	return n;
}

static void kill_one(pid_t pid, void *arg)
{
	(void)arg;
	kill(pid, SIGKILL);
}

int rb_cg_kill_listed(const char *dir)
{
	return each_proc(dir, kill_one, NULL);
}

int rb_cg_count_procs(const char *dir)
{
	return each_proc(dir, NULL, NULL);
}

int rb_cg_self_path(const char *ctrl, char *out, size_t n)
{
	_cleanup_free_ char *text = NULL;
	struct rb_error err;
	if (rb_read_file("/proc/self/cgroup", 1 << 20, &text, NULL, &err) < 0) {
		errno = err.errnum;
		return -1;
	}
	return rb_cg_self_path_in(text, ctrl, out, n);
}

int rb_cg_self_path_in(const char *text, const char *ctrl, char *out, size_t n)
{
	char line[4096];
	for (const char *p = text; rb_next_line(&p, line, sizeof line);) {
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c1 = *c2 = '\0';
		const char *ctrls = c1 + 1, *path = c2 + 1;
		bool match = false;
		if (!ctrl) {
			match = !strcmp(line, "0") && !*ctrls;
		} else {
			_cleanup_free_ char *list = strdup(ctrls);
			char *save = NULL;
			for (char *t = list ? strtok_r(list, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save))
				if (!strcmp(t, ctrl))
					match = true;
		}
		if (match) {
			if ((size_t)snprintf(out, n, "%s", path) >= n) {
				errno = ENAMETOOLONG;
				return -1;
			}
			return 0;
		}
	}
	errno = ENOENT;
	return -1;
}

int rb_cgroup_parent(const char *parent, const char *self_rel, char *out, size_t n)
{
	const char *p = parent && *parent ? parent : "runbox";
	/* "/a/b" is a path from the hierarchy's root; "name" lies under the caller's own cgroup,
	 * which on v1 differs per hierarchy. */
	int r;
	if (p[0] == '/')
		r = snprintf(out, n, "%s", p);
	else
		r = snprintf(out, n, "%s/%s", strcmp(self_rel, "/") != 0 ? self_rel : "", p);
	if (r < 0 || (size_t)r >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* Trailing slashes would make "<parent>/<id>" ambiguous for the checks below. */
	size_t len = strlen(out);
	while (len > 1 && out[len - 1] == '/')
		out[--len] = '\0';
	if (strstr(out, "/../") || !strcmp(out + (len >= 3 ? len - 3 : 0), "/..")) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

void rb_cg_limit_enforced(struct rb_cgroup *cg, enum rb_limit_kind k, const char *mechanism)
{
	struct rb_limit_status *s = &cg->limits[k];
	s->enforced = true;
	s->partial = false;
	snprintf(s->mechanism, sizeof s->mechanism, "%s", mechanism);
	s->reason[0] = '\0';
}

void rb_cg_limit_partial(struct rb_cgroup *cg, enum rb_limit_kind k, const char *fmt, ...)
{
	struct rb_limit_status *s = &cg->limits[k];
	s->partial = true;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->reason, sizeof s->reason, fmt, ap);
	va_end(ap);
}

void rb_cg_limit_not_enforced(struct rb_cgroup *cg, enum rb_limit_kind k, const char *fmt, ...)
{
	struct rb_limit_status *s = &cg->limits[k];
	s->enforced = false;
	s->mechanism[0] = '\0';
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->reason, sizeof s->reason, fmt, ap);
	va_end(ap);
}

uint64_t rb_cg_weight_to_shares(uint64_t weight)
{
	/* systemd's mapping: default weight 100 is the default 1024 shares. */
	uint64_t s = weight * 1024 / 100;
	return s < 2 ? 2 : s > 262144 ? 262144 : s;
}

/* ---- mode and manager choice ---- */

static enum rb_cg_mode detect_mode(void)
{
	struct statfs fs;
	if (statfs("/sys/fs/cgroup", &fs) < 0)
		return RB_CG_MODE_NONE;
	if (fs.f_type == CGROUP2_SUPER_MAGIC)
		return RB_CG_MODE_UNIFIED;
	if (fs.f_type != TMPFS_MAGIC)
		return RB_CG_MODE_NONE;
	if (statfs("/sys/fs/cgroup/unified", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC)
		return RB_CG_MODE_HYBRID;
	return RB_CG_MODE_LEGACY;
}

static const char *mode_name(enum rb_cg_mode m)
{
	switch (m) {
	case RB_CG_MODE_UNIFIED: return "unified (cgroup v2)";
	case RB_CG_MODE_HYBRID: return "hybrid";
	case RB_CG_MODE_LEGACY: return "legacy (cgroup v1)";
	default: return "no cgroup filesystem";
	}
}

/* v2 serves a run when its hierarchy has the controllers the limits need; on hybrid hosts
 * those usually live on v1 and v2 holds only hugetlb. */
static bool v2_has_controllers(const char *mount)
{
	char buf[512];
	if (rb_cg_read(mount, "cgroup.controllers", buf, sizeof buf) < 0)
		return false;
	bool mem = false, pids = false, cpu = false;
	char *save = NULL;
	for (char *t = strtok_r(buf, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
		mem |= !strcmp(t, "memory");
		pids |= !strcmp(t, "pids");
		cpu |= !strcmp(t, "cpu");
	}
	return mem && pids && cpu;
}

static void set_none(struct rb_cgroup *cg, const char *why)
{
	cg->ops = &rb_cgroup_none_ops;
	snprintf(cg->none_reason, sizeof cg->none_reason, "%s", why);
	for (int k = 0; k < RB_LIMIT_COUNT; k++)
		if (cg->limits[k].requested)
			rb_cg_limit_not_enforced(cg, (enum rb_limit_kind)k, "%s", why);
}

int rb_cgroup_create(const char *run_id, const char *parent, const struct rb_limits *lim, struct rb_cgroup **out,
                     struct rb_error *err)
{
	*out = NULL;
	if (!run_id || !*run_id || strchr(run_id, '/') || !strcmp(run_id, ".") || !strcmp(run_id, "..") ||
	    strlen(run_id) >= sizeof((struct rb_cgroup *)0)->run_id)
		return rb_error_set(err, EINVAL, "cgroup: bad run id `%s`", run_id ? run_id : "");
	struct rb_cgroup *cg = calloc(1, sizeof *cg);
	if (!cg)
		return rb_error_set(err, ENOMEM, "cgroup");
	cg->v2_dirfd = -1;
	snprintf(cg->run_id, sizeof cg->run_id, "%s", run_id);
	cg->parent_rel = parent;
	static const struct rb_limits nothing;
	if (!lim)
		lim = &nothing;
	cg->limits[RB_LIMIT_MEMORY].requested = lim->memory_bytes > 0;
	cg->limits[RB_LIMIT_PIDS].requested = lim->pids > 0;
	cg->limits[RB_LIMIT_CPUS].requested = lim->cpus > 0;
	cg->limits[RB_LIMIT_CPU_WEIGHT].requested = lim->cpu_weight > 0;

	cg->mode = detect_mode();
	const char *v2_mount = cg->mode == RB_CG_MODE_UNIFIED  ? "/sys/fs/cgroup"
	                       : cg->mode == RB_CG_MODE_HYBRID ? "/sys/fs/cgroup/unified"
	                                                       : NULL;
	const struct rb_cgroup_ops *order[2] = {NULL, NULL};
	if (v2_mount && (cg->mode == RB_CG_MODE_UNIFIED || v2_has_controllers(v2_mount))) {
		snprintf(cg->v2_mount, sizeof cg->v2_mount, "%s", v2_mount);
		order[0] = &rb_cgroup_v2_ops;
		if (cg->mode == RB_CG_MODE_HYBRID)
			order[1] = &rb_cgroup_v1_ops;
	} else if (cg->mode == RB_CG_MODE_HYBRID || cg->mode == RB_CG_MODE_LEGACY) {
		order[0] = &rb_cgroup_v1_ops;
	}

	char why[RB_ERROR_MAX];
	snprintf(why, sizeof why, "no usable cgroup hierarchy (%s)", mode_name(cg->mode));
	for (size_t i = 0; i < RB_ARRAY_SIZE(order) && order[i]; i++) {
		struct rb_error e = {0};
		cg->ops = order[i];
		int r = cg->ops->create(cg, lim, &e);
		if (r == 0) {
			cg->parent_rel = NULL; /* the caller's string, needed only while creating */
			*out = cg;
			return 0;
		}
		if (r < 0) {
			/* The host could enforce it and writing it failed: the run must not go on. */
			struct rb_error ignored;
			cg->ops->destroy(cg, &ignored);
			if (cg->v2_dirfd >= 0)
				close(cg->v2_dirfd);
			free(cg);
			if (err)
				*err = e;
			return -1;
		}
		/* Remove what this manager made before it found it could not serve the run. */
		struct rb_error ignored;
		cg->ops->destroy(cg, &ignored);
		if (cg->v2_dirfd >= 0) {
			close(cg->v2_dirfd);
			cg->v2_dirfd = -1;
		}
		bool perm = e.errnum == EACCES || e.errnum == EPERM || e.errnum == EROFS;
		if (snprintf(why, sizeof why, "%s%s%s", e.msg, perm && geteuid() != 0 ? "; " : "",
		             perm && geteuid() != 0 ? ROOTLESS_FIX : "") >= (int)sizeof why)
			rb_debug("cgroup: reason truncated");
	}
	cg->parent_rel = NULL;
	set_none(cg, why);
	rb_debug("cgroup: no limits for run %s: %s", run_id, why);
	*out = cg;
	return 0;
}

int rb_cgroup_clone_fd(const struct rb_cgroup *cg)
{
	return cg->ops->clone_fd(cg);
}

int rb_cgroup_self_join_fds(const struct rb_cgroup *cg, int *fds, unsigned max, struct rb_error *err)
{
	return cg->ops->self_join_fds ? cg->ops->self_join_fds(cg, fds, max, err) : 0;
}

int rb_cgroup_attach(struct rb_cgroup *cg, pid_t pid, struct rb_error *err)
{
	return cg->ops->attach(cg, pid, err);
}

int rb_cgroup_step_procs(struct rb_cgroup *cg, unsigned step, struct rb_error *err)
{
	rb_error_clear(err);
	if (!cg->ops->step_procs)
		return -1;
	return cg->ops->step_procs(cg, step, err);
}

int rb_cgroup_gateway_join(struct rb_cgroup *cg, struct rb_cgroup_join *j, struct rb_error *err)
{
	j->clone_fd = -1;
	j->n = 0;
	rb_error_clear(err);
	if (!cg->ops->gateway_join)
		return 0;
	int r = cg->ops->gateway_join(cg, j, err);
	if (r < 0)
		rb_cgroup_join_close(j);
	return r;
}

void rb_cgroup_join_close(struct rb_cgroup_join *j)
{
	if (j->clone_fd >= 0)
		close(j->clone_fd);
	j->clone_fd = -1;
	while (j->n > 0)
		close(j->fds[--j->n]);
}

const char *rb_cgroup_gateway_mechanism(const struct rb_cgroup *cg)
{
	if (cg->ops == &rb_cgroup_v2_ops)
		return "cgroup v2: leaf `" RB_CG_GATEWAY_LEAF "` of the run's cgroup";
	if (cg->ops == &rb_cgroup_v1_ops)
		return "cgroup v1: leaf `" RB_CG_GATEWAY_LEAF "` of the run's cgroup in each hierarchy";
	return "";
}

int rb_cgroup_kill(struct rb_cgroup *cg, struct rb_error *err)
{
	return cg->ops->kill(cg, err);
}

void rb_cgroup_sample(struct rb_cgroup *cg)
{
	if (cg->ops->sample)
		cg->ops->sample(cg);
}

void rb_cgroup_stats(struct rb_cgroup *cg, struct rb_cgroup_stats *out)
{
	memset(out, 0, sizeof *out);
	cg->ops->stats(cg, out);
}

const struct rb_limit_status *rb_cgroup_limit(const struct rb_cgroup *cg, enum rb_limit_kind kind)
{
	static const struct rb_limit_status bad;
	return (unsigned)kind < RB_LIMIT_COUNT ? &cg->limits[kind] : &bad;
}

const char *rb_cgroup_manager_name(const struct rb_cgroup *cg)
{
	return cg->ops->name;
}

const char *rb_cgroup_path(const struct rb_cgroup *cg)
{
	if (cg->ops == &rb_cgroup_v2_ops)
		return cg->v2_path;
	if (cg->ops == &rb_cgroup_v1_ops)
		for (int c = 0; c < RB_V1_COUNT; c++)
			if (cg->v1[c].path[0])
				return cg->v1[c].path;
	return "";
}

const char *rb_cgroup_none_reason(const struct rb_cgroup *cg)
{
	return cg->ops == &rb_cgroup_none_ops ? cg->none_reason : "";
}

int rb_cgroup_destroy(struct rb_cgroup *cg, struct rb_error *err)
{
	if (!cg)
		return 0;
	int r = cg->ops->destroy(cg, err);
	if (cg->v2_dirfd >= 0)
		close(cg->v2_dirfd);
	free(cg);
	return r;
}

unsigned rb_cgroup_dirs(const struct rb_cgroup *cg, const char **dirs, unsigned max)
{
	unsigned n = 0;
	if (cg->v2_created && cg->v2_path[0] && n < max)
		dirs[n++] = cg->v2_path;
	for (int c = 0; c < RB_V1_COUNT; c++)
		if (cg->v1[c].created && cg->v1[c].path[0] && n < max)
			dirs[n++] = cg->v1[c].path;
	return n;
}

/* Kills what dir holds and removes it, its child cgroups first (a v2 run with a memory limit
 * has "init" and "step-N" leaves, which hold the processes; a run that called its gateway has
 * a "gateway" leaf, on v1 in each hierarchy). The depth is bounded: runbox
 * makes one level. */
static int reclaim_dir(const char *dir, int depth, struct rb_error *err)
{
	int r = 0;
	if (depth < 2) {
		_cleanup_closedir_ DIR *d = opendir(dir);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (e->d_type != DT_DIR || !strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char sub[PATH_MAX];
			if (rb_cg_join(sub, dir, e->d_name) < 0)
				continue;
			if (reclaim_dir(sub, depth + 1, err) < 0)
				r = -1;
		}
	}
	for (int tries = 0; tries < 100 && rb_cg_count_procs(dir) > 0; tries++) {
		rb_cg_kill_listed(dir);
		usleep(10000);
	}
	if (rb_cg_rmdir(dir, err) < 0)
		r = -1;
	return r;
}

static int cgroup_mount_above(const struct rb_mount *m, void *ctx)
{
	const char *path = ctx;
	if (strcmp(m->fstype, "cgroup") != 0 && strcmp(m->fstype, "cgroup2") != 0)
		return 0;
	size_t n = strlen(m->mount_point);
	return !strcmp(m->mount_point, "/") || (!strncmp(path, m->mount_point, n) && path[n] == '/' && path[n + 1]);
}

/* Is path below a cgroup filesystem's mount point? */
static bool under_cgroup_mount(const char *path)
{
	return rb_mountinfo_each(cgroup_mount_above, (void *)path, NULL) == 1;
}

/* The parent's last component a run's cgroup may sit in: "runbox", or the last component of
 * the parent the caller names (RUNBOX_CGROUP_PARENT; docs/cgroups.md), by the same rule
 * rb_cgroup_create follows. */
static bool parent_name_ok(const char *name, size_t len, const char *parent)
{
	if (len == 6 && !strncmp(name, "runbox", 6))
		return true;
	char named[PATH_MAX];
	if (!parent || !*parent || rb_cgroup_parent(parent, "/", named, sizeof named) < 0)
		return false;
	const char *last = strrchr(named, '/');
	last = last ? last + 1 : named;
	return strlen(last) == len && !strncmp(last, name, len);
}

/* gc reads the cgroups to reclaim from a state file, which is only data: before anything in
 * dir is killed or removed it must be <a cgroup mount>/.../runbox/<run_id>, spelled
 * canonically (no ".", "..", "//" or symlink), on a cgroup filesystem and owned by us, as the
 * cgroups runbox makes are. 1: reclaim it; 0: it does not exist; -1: refused (err says why). */
static int reclaimable(const char *dir, const char *run_id, const char *named, struct rb_error *err)
{
	size_t idl = strlen(run_id), n = strlen(dir);
	if (!idl || strchr(run_id, '/') || !strcmp(run_id, ".") || !strcmp(run_id, ".."))
		return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: bad run id", dir);
	if (dir[0] != '/' || n >= PATH_MAX)
		return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: not an absolute path", dir);
	for (const char *c = dir; *c;) {
		const char *e = strchr(c + 1, '/');
		size_t len = e ? (size_t)(e - c - 1) : strlen(c + 1);
		if (!len || (len == 1 && c[1] == '.') || (len == 2 && c[1] == '.' && c[2] == '.'))
			return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: not a canonical path", dir);
		c = e ? e : c + 1 + len;
	}
	/* .../<parent>/<run_id> */
	const char *id_at = dir + n - idl;
	if (n < idl + 2 || id_at[-1] != '/' || strcmp(id_at, run_id) != 0)
		return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: not the cgroup of run %s", dir, run_id);
	const char *parent = id_at - 1;
	while (parent > dir && parent[-1] != '/')
		parent--;
	if (!parent_name_ok(parent, (size_t)(id_at - 1 - parent), named))
		return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: not under a runbox cgroup parent", dir);
	if (!under_cgroup_mount(dir))
		return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: not under a cgroup mount", dir);
	char real[PATH_MAX];
	if (!realpath(dir, real))
		return errno == ENOENT ? 0 : rb_error_set(err, errno, "refusing to reclaim `%s`: realpath", dir);
	if (strcmp(real, dir) != 0)
		return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: it resolves to `%s`", dir, real);
	struct statfs fs;
	struct stat st;
	if (statfs(dir, &fs) < 0 || lstat(dir, &st) < 0)
		return errno == ENOENT ? 0 : rb_error_set(err, errno, "refusing to reclaim `%s`: stat", dir);
	if (fs.f_type != CGROUP2_SUPER_MAGIC && fs.f_type != CGROUP_SUPER_MAGIC)
		return rb_error_set(err, EINVAL, "refusing to reclaim `%s`: not on a cgroup filesystem", dir);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return rb_error_set(err, EPERM, "refusing to reclaim `%s`: not a cgroup directory of uid %u", dir,
		                    (unsigned)geteuid());
	return 1;
}

int rb_cgroup_reclaim(const char *run_id, const char *parent, const char *const *dirs, unsigned n, struct rb_error *err)
{
	int r = 0;
	for (unsigned i = 0; i < n; i++) {
		int ok = reclaimable(dirs[i], run_id, parent, err);
		if (ok < 0 || (ok > 0 && reclaim_dir(dirs[i], 0, err) < 0))
			r = -1;
	}
	return r;
}

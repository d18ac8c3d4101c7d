/* The cgroup v1 manager (hybrid and legacy hosts, as root): one directory per run in each of
 * the memory, pids, cpu, cpuacct and freezer hierarchies (with a "gateway" leaf in each for the
 * run's gateway); kill by freeze, SIGKILL, thaw. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/mountinfo.h"
#include "common/util.h"
#include "runtime/sandbox/cgroup-internal.h"

static const char *const ctrl_names[RB_V1_COUNT] = {"memory", "pids", "cpu", "cpuacct", "freezer"};

struct find_ctrl {
	const char *ctrl;
	char *mount, *root; /* PATH_MAX each */
};

/* The v1 mount holding ctrl (fstype "cgroup", the controller among the super options) and its
 * root, so co-mounted cpu,cpuacct resolve to one place. */
static int holds_ctrl(const struct rb_mount *m, void *ctx)
{
	struct find_ctrl *f = ctx;
	if (strcmp(m->fstype, "cgroup") != 0)
		return 0;
	char opts[sizeof m->super_opts];
	snprintf(opts, sizeof opts, "%s", m->super_opts);
	char *save = NULL;
	for (char *t = strtok_r(opts, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (!strcmp(t, f->ctrl)) {
			snprintf(f->mount, PATH_MAX, "%s", m->mount_point);
			snprintf(f->root, PATH_MAX, "%s", m->root);
			return 1;
		}
	return 0;
}

static int find_mount(const char *mountinfo, const char *ctrl, char *mount, char *root)
{
	struct find_ctrl f = {ctrl, mount, root};
	return rb_mountinfo_each_in(mountinfo, holds_ctrl, &f) == 1 ? 0 : -1;
}

static int locate(struct rb_cgroup *cg, struct rb_error *err)
{
	/* Each read once for the five controllers: /proc files are generated at every read. */
	_cleanup_free_ char *mountinfo = NULL, *self_cgroups = NULL;
	if (rb_read_file("/proc/self/mountinfo", 1 << 22, &mountinfo, NULL, err) < 0 ||
	    rb_read_file("/proc/self/cgroup", 1 << 20, &self_cgroups, NULL, err) < 0)
		return -1;
	bool any = false;
	for (int c = 0; c < RB_V1_COUNT; c++) {
		struct rb_cg_v1_hier *h = &cg->v1[c];
		char root[PATH_MAX], self[PATH_MAX], parent_rel[PATH_MAX];
		if (find_mount(mountinfo, ctrl_names[c], h->mount, root) < 0) {
			h->mount[0] = '\0';
			continue;
		}
		if (rb_cg_self_path_in(self_cgroups, ctrl_names[c], self, sizeof self) < 0)
			return rb_error_set(err, errno, "no %s entry in /proc/self/cgroup", ctrl_names[c]);
		/* Without a cgroup namespace a bind-mounted hierarchy shows our path with its root. */
		const char *rel = self;
		size_t rl = strlen(root);
		if (strcmp(root, "/") != 0 && !strncmp(self, root, rl) && (self[rl] == '/' || !self[rl]))
			rel = self[rl] ? self + rl : "/";
		if (rb_cgroup_parent(cg->parent_rel, rel, parent_rel, sizeof parent_rel) < 0)
			return rb_error_set(err, errno, "cgroup parent `%s`", cg->parent_rel ? cg->parent_rel : "");
		char abs[PATH_MAX];
		if ((size_t)snprintf(abs, sizeof abs, "%s%s", h->mount, parent_rel) >= sizeof abs ||
		    rb_cg_join(h->path, abs, cg->run_id) < 0)
			return rb_error_set(err, ENAMETOOLONG, "cgroup parent `%s`", parent_rel);
		memcpy(h->parent, abs, sizeof abs);
		h->primary = true;
		for (int d = 0; d < c; d++)
			if (cg->v1[d].mount[0] && !strcmp(cg->v1[d].mount, h->mount))
				h->primary = false;
		any = true;
	}
	if (!any)
		return rb_error_set(err, ENOENT, "no cgroup v1 memory, pids or cpu hierarchy is mounted");
	return 0;
}

static const char *dir_of(const struct rb_cgroup *cg, enum rb_cg_v1_ctrl c)
{
	return cg->v1[c].mount[0] ? cg->v1[c].path : NULL;
}

static int v1_create(struct rb_cgroup *cg, const struct rb_limits *lim, struct rb_error *err)
{
	if (locate(cg, err) < 0)
		return RB_CG_UNAVAILABLE;
	for (int c = 0; c < RB_V1_COUNT; c++) {
		struct rb_cg_v1_hier *h = &cg->v1[c];
		if (!h->mount[0] || !h->primary)
			continue;
		if (rb_mkdir_p(h->parent, 0755, err) < 0 || rb_cg_mkdir(h->path, &h->created, err) < 0)
			return RB_CG_UNAVAILABLE; /* destroy() removes what was made */
		if (!h->created) {
			rb_error_set(err, EEXIST, "cgroup for run %s already exists: `%s`", cg->run_id, h->path);
			return -1;
		}
	}

	char v[64];
	const char *d;
	if (cg->limits[RB_LIMIT_MEMORY].requested) {
		if (!(d = dir_of(cg, RB_V1_MEMORY))) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_MEMORY, "no cgroup v1 memory hierarchy is mounted");
		} else {
			snprintf(v, sizeof v, "%" PRIu64, lim->memory_bytes);
			if (rb_cg_write(d, "memory.limit_in_bytes", v, err) < 0)
				return -1;
			/* memory+swap equal to memory: no swap. Absent without swap accounting. */
			bool memsw = rb_cg_exists(d, "memory.memsw.limit_in_bytes");
			if (memsw && rb_cg_write(d, "memory.memsw.limit_in_bytes", v, err) < 0)
				return -1;
			/* v1 charges socket buffers to the cgroup only once its TCP limit is set (v2
			 * always does): without it a step holds as much loopback TCP buffer as the host's
			 * tcp_mem allows, whatever its memory limit. */
			struct rb_error terr;
			rb_error_clear(&terr);
			bool tcp = rb_cg_exists(d, "memory.kmem.tcp.limit_in_bytes") &&
			           rb_cg_write(d, "memory.kmem.tcp.limit_in_bytes", v, &terr) == 0;
			char mech[64];
			snprintf(mech, sizeof mech, "cgroup v1 memory.limit_in_bytes%s%s", memsw ? ", memsw" : "",
			         tcp ? ", kmem.tcp" : "");
			rb_cg_limit_enforced(cg, RB_LIMIT_MEMORY, mech);
			if (!tcp)
				rb_cg_limit_partial(cg, RB_LIMIT_MEMORY, "socket buffers are not charged (%s)",
				                    terr.msg[0] ? terr.msg : "no memory.kmem.tcp.limit_in_bytes here");
		}
	}
	if (cg->limits[RB_LIMIT_PIDS].requested) {
		if (!(d = dir_of(cg, RB_V1_PIDS))) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_PIDS, "no cgroup v1 pids hierarchy is mounted");
		} else {
			snprintf(v, sizeof v, "%" PRIu64, lim->pids);
			if (rb_cg_write(d, "pids.max", v, err) < 0)
				return -1;
			rb_cg_limit_enforced(cg, RB_LIMIT_PIDS, "cgroup v1 pids.max");
		}
	}
	if (cg->limits[RB_LIMIT_CPUS].requested) {
		if (!(d = dir_of(cg, RB_V1_CPU)) || !rb_cg_exists(d, "cpu.cfs_quota_us")) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_CPUS, "no cgroup v1 cpu hierarchy with CFS bandwidth");
		} else {
			double q = fmax(1000.0, round(lim->cpus * 100000.0));
			snprintf(v, sizeof v, "%.0f", q);
			if (rb_cg_write(d, "cpu.cfs_period_us", "100000", err) < 0 ||
			    rb_cg_write(d, "cpu.cfs_quota_us", v, err) < 0)
				return -1;
			rb_cg_limit_enforced(cg, RB_LIMIT_CPUS, "cgroup v1 cpu.cfs_quota_us");
		}
	}
	if (cg->limits[RB_LIMIT_CPU_WEIGHT].requested) {
		if (!(d = dir_of(cg, RB_V1_CPU)) || !rb_cg_exists(d, "cpu.shares")) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_CPU_WEIGHT, "no cgroup v1 cpu hierarchy");
		} else {
			snprintf(v, sizeof v, "%" PRIu64, rb_cg_weight_to_shares(lim->cpu_weight));
			if (rb_cg_write(d, "cpu.shares", v, err) < 0)
				return -1;
			rb_cg_limit_enforced(cg, RB_LIMIT_CPU_WEIGHT, "cgroup v1 cpu.shares");
		}
	}
	return 0;
}

static int v1_clone_fd(const struct rb_cgroup *cg)
{
	return -1;
}

static int v1_attach(struct rb_cgroup *cg, pid_t pid, struct rb_error *err)
{
	char v[24];
	snprintf(v, sizeof v, "%d", (int)pid);
	for (int c = 0; c < RB_V1_COUNT; c++)
		if (cg->v1[c].created && rb_cg_write(cg->v1[c].path, "cgroup.procs", v, err) < 0)
			return -1;
	return 0;
}

static int v1_self_join_fds(const struct rb_cgroup *cg, int *fds, unsigned max, struct rb_error *err)
{
	unsigned n = 0;
	for (int c = 0; c < RB_V1_COUNT; c++) {
		if (!cg->v1[c].created)
			continue;
		char path[PATH_MAX];
		if (n == max) {
			rb_error_set(err, E2BIG, "more cgroup v1 hierarchies than %u", max);
			goto fail;
		}
		if (rb_cg_join(path, cg->v1[c].path, "tasks") < 0) {
			rb_error_set(err, ENAMETOOLONG, "cgroup path `%s`", cg->v1[c].path);
			goto fail;
		}
		if ((fds[n] = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
			rb_error_set(err, errno, "open `%s`", path);
			goto fail;
		}
		n++;
	}
	return (int)n;
fail:
	while (n > 0)
		close(fds[--n]);
	return -1;
}

/* Every hierarchy's "gateway" leaf: the run's limits are hierarchical on v1 too (memory on
 * every kernel since 5.16 and by default before, cpu's CFS quota, pids), so what runs there
 * counts against the run's cgroup. The child writes "0" to each `tasks` before it execs. */
static int v1_gateway_join(struct rb_cgroup *cg, struct rb_cgroup_join *j, struct rb_error *err)
{
	for (int c = 0; c < RB_V1_COUNT; c++) {
		struct rb_cg_v1_hier *h = &cg->v1[c];
		if (!h->created)
			continue;
		char dir[PATH_MAX], tasks[PATH_MAX];
		if (rb_cg_join(dir, h->path, RB_CG_GATEWAY_LEAF) < 0 || rb_cg_join(tasks, dir, "tasks") < 0)
			return rb_error_set(err, ENAMETOOLONG, "cgroup `%s/%s`", h->path, RB_CG_GATEWAY_LEAF);
		bool made = false;
		if (rb_cg_mkdir(dir, &made, err) < 0)
			return -1;
		h->gw_created |= made;
		if (j->n == RB_CGROUP_MAX_JOIN_FDS)
			return rb_error_set(err, E2BIG, "more cgroup v1 hierarchies than %d", RB_CGROUP_MAX_JOIN_FDS);
		if ((j->fds[j->n] = open(tasks, O_WRONLY | O_CLOEXEC)) < 0)
			return rb_error_set(err, errno, "open `%s`", tasks);
		j->n++;
	}
	return j->n > 0 ? 1 : 0;
}

/* Calls fn on the run's directory in each hierarchy, and on its gateway leaf where made. */
static void each_dir(const struct rb_cgroup *cg, void (*fn)(const char *dir, void *arg), void *arg)
{
	for (int c = 0; c < RB_V1_COUNT; c++) {
		const struct rb_cg_v1_hier *h = &cg->v1[c];
		char leaf[PATH_MAX];
		if (!h->created)
			continue;
		fn(h->path, arg);
		if (h->gw_created && rb_cg_join(leaf, h->path, RB_CG_GATEWAY_LEAF) == 0)
			fn(leaf, arg);
	}
}

static void count_one(const char *dir, void *arg)
{
	int n = rb_cg_count_procs(dir);
	if (n > 0)
		*(int *)arg += n;
}

static int count_all(const struct rb_cgroup *cg)
{
	int total = 0;
	each_dir(cg, count_one, &total);
	return total;
}

static void kill_one(const char *dir, void *arg)
{
	(void)arg;
	rb_cg_kill_listed(dir);
}

static void kill_all(const struct rb_cgroup *cg)
{
	each_dir(cg, kill_one, NULL);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int v1_kill(struct rb_cgroup *cg, struct rb_error *err)
{
	const char *fr = cg->v1[RB_V1_FREEZER].created ? cg->v1[RB_V1_FREEZER].path : NULL;
	if (!count_all(cg))
		return 0;
	/* Frozen tasks cannot fork, so one pass over cgroup.procs reaches every one of them;
	 * the SIGKILLs are delivered when the cgroup thaws. */
	bool frozen = false;
	if (fr && rb_cg_write(fr, "freezer.state", "FROZEN", NULL) == 0) {
		uint64_t deadline = rb_now_us() + 2000000;
		char st[32] = "";
		while (rb_now_us() < deadline) {
			if (rb_cg_read(fr, "freezer.state", st, sizeof st) == 0 && !strncmp(st, "FROZEN", 6)) {
				frozen = true;
				break;
			}
			sleep_ms(1);
		}
	}
	kill_all(cg);
	if (fr && rb_cg_write(fr, "freezer.state", "THAWED", err) < 0)
		return -1;
	if (fr && !frozen)
		rb_debug("cgroup %s: freezer did not settle, killing in a loop", fr);
	uint64_t deadline = rb_now_us() + (uint64_t)RB_CG_KILL_WAIT_MS * 1000;
	unsigned delay = 1;
	while (count_all(cg) > 0) {
		if (rb_now_us() >= deadline)
			return rb_error_set(err, EBUSY, "cgroup `%s` still has processes after %d ms",
			                    rb_cgroup_path(cg), RB_CG_KILL_WAIT_MS);
		kill_all(cg); /* a task that was forking when the freezer missed it */
		sleep_ms(delay);
		if (delay < 50)
			delay *= 2;
	}
	return 0;
}

static void v1_sample(struct rb_cgroup *cg)
{
	uint64_t v;
	const char *d;
	if ((d = dir_of(cg, RB_V1_PIDS)) && cg->v1[RB_V1_PIDS].created && rb_cg_read_u64(d, "pids.current", &v) == 0 &&
	    v > cg->pids_sampled)
		cg->pids_sampled = v;
	if ((d = dir_of(cg, RB_V1_MEMORY)) && cg->v1[RB_V1_MEMORY].created &&
	    rb_cg_read_u64(d, "memory.usage_in_bytes", &v) == 0 && v > cg->mem_sampled)
		cg->mem_sampled = v;
}

static void v1_stats(struct rb_cgroup *cg, struct rb_cgroup_stats *out)
{
	v1_sample(cg);
	uint64_t v;
	const char *d;
	if ((d = dir_of(cg, RB_V1_MEMORY))) {
		if (rb_cg_read_u64(d, "memory.max_usage_in_bytes", &v) == 0) {
			out->have_memory_peak = true;
			out->memory_peak_bytes = v;
		}
		/* oom_kill in memory.oom_control since 4.13; before it, failcnt (limit hits) is the
		 * best sign there is, and may count reclaim that killed nothing. */
		if (rb_cg_read_key(d, "memory.oom_control", "oom_kill", &v) == 0 ||
		    rb_cg_read_u64(d, "memory.failcnt", &v) == 0) {
			out->have_oom = true;
			out->oom_kills = v;
		}
	}
	if ((d = dir_of(cg, RB_V1_PIDS))) {
		if (rb_cg_read_u64(d, "pids.peak", &v) == 0) {
			out->have_pids_peak = true;
			out->pids_peak = v;
		} else if (rb_cg_exists(d, "pids.current")) {
			out->have_pids_peak = true;
			out->pids_peak = cg->pids_sampled;
		}
	}
	if ((d = dir_of(cg, RB_V1_CPUACCT)) && rb_cg_read_u64(d, "cpuacct.usage", &v) == 0) {
		out->have_cpu = true;
		/* The hierarchy's usage holds the gateway's, which the run's cost counts apart. */
		char gw[PATH_MAX];
		uint64_t g;
		if (rb_cg_join(gw, d, RB_CG_GATEWAY_LEAF) == 0 && rb_cg_read_u64(gw, "cpuacct.usage", &g) == 0)
			v = g < v ? v - g : 0;
		out->cpu_usec = v / 1000;
	}
}

static int v1_destroy(struct rb_cgroup *cg, struct rb_error *err)
{
	int r = 0;
	for (int c = RB_V1_COUNT - 1; c >= 0; c--) {
		struct rb_cg_v1_hier *h = &cg->v1[c];
		if (!h->created)
			continue;
		struct rb_error e = {0};
		char leaf[PATH_MAX];
		/* The leaf first: a cgroup with children cannot go. Empty already (killed). */
		if (h->gw_created && rb_cg_join(leaf, h->path, RB_CG_GATEWAY_LEAF) == 0 && rb_cg_rmdir(leaf, &e) == 0)
			h->gw_created = false;
		if (h->gw_created || rb_cg_rmdir(h->path, &e) < 0) {
			if (r == 0 && err)
				*err = e;
			r = -1;
			continue;
		}
		h->created = false;
	}
	return r;
}

const struct rb_cgroup_ops rb_cgroup_v1_ops = {
    .name = "v1",
    .create = v1_create,
    .clone_fd = v1_clone_fd,
    .attach = v1_attach,
    .self_join_fds = v1_self_join_fds,
    .gateway_join = v1_gateway_join,
    .kill = v1_kill,
    .sample = v1_sample,
    .stats = v1_stats,
    .destroy = v1_destroy,
};

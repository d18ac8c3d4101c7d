/* The cgroup v2 manager: one directory per run under runbox's parent in the unified hierarchy,
 * limits through memory.max, memory.swap.max, pids.max, cpu.max and cpu.weight, kill through
 * cgroup.kill (or freeze, kill, thaw), and the CLONE_INTO_CGROUP directory fd. With a memory
 * limit, init and each step get a leaf of their own below it, so that an OOM kill takes one
 * step (memory.oom.group), not init and with it the rest of the run. The run's gateway runs in
 * a "gateway" leaf, so the run's limits bound it too. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/sandbox/cgroup-internal.h"

static const char *const wanted[] = {"memory", "pids", "cpu"};

static bool has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += wl)
		if ((p == list || p[-1] == ' ' || p[-1] == '+') && (p[wl] == '\0' || p[wl] == ' ' || p[wl] == '\n'))
			return true;
	return false;
}

/* The "no internal processes" rule: a non-root cgroup that holds processes cannot hand
 * controllers to children. When that cgroup is the caller's own (a delegated scope runbox
 * was started in), move this process into a leaf beside runbox's parent, as nsjail does. */
static int move_self_to_leaf(const char *self_abs)
{
	char leaf[PATH_MAX];
	if (rb_cg_join(leaf, self_abs, "supervisor") < 0 || rb_cg_mkdir(leaf, NULL, NULL) < 0)
		return -1;
	char pid[24];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (rb_cg_write(leaf, "cgroup.procs", pid, NULL) < 0)
		return -1;
	/* And this process's children there (its sandbox factory, runtime/sandbox/factory.h):
	 * one left behind would keep the cgroup from delegating. */
	char procs[PATH_MAX], *list = NULL;
	if (rb_cg_join(procs, self_abs, "cgroup.procs") < 0 || rb_read_file(procs, 1 << 16, &list, NULL, NULL) < 0)
		return 0;
	char *save = NULL;
	for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char stat[64], *text = NULL;
		snprintf(stat, sizeof stat, "/proc/%s/stat", line);
		if (rb_read_file(stat, 4096, &text, NULL, NULL) == 0) {
			const char *end = strrchr(text, ')'); /* past the command's name, which may hold ") " */
			int ppid = 0;
			if (end && sscanf(end, ") %*c %d", &ppid) == 1 && ppid == (int)getpid())
				rb_cg_write(leaf, "cgroup.procs", line, NULL);
		}
		free(text);
	}
	free(list);
	return 0;
}

/* Hands memory, pids and cpu to dir's children where dir has them. Failure is not an error
 * here: a limit whose controller stays missing is reported as not enforced, with why. */
static void enable_subtree(const char *dir, const char *self_abs, char *why, size_t why_n)
{
	char avail[512], on[512];
	if (rb_cg_read(dir, "cgroup.controllers", avail, sizeof avail) < 0 ||
	    rb_cg_read(dir, "cgroup.subtree_control", on, sizeof on) < 0)
		return;
	for (size_t i = 0; i < RB_ARRAY_SIZE(wanted); i++) {
		if (has_word(on, wanted[i]) || !has_word(avail, wanted[i]))
			continue;
		char op[32];
		snprintf(op, sizeof op, "+%s", wanted[i]);
		struct rb_error e = {0};
		if (rb_cg_write(dir, "cgroup.subtree_control", op, &e) == 0)
			continue;
		if (e.errnum == EBUSY && self_abs && !strcmp(dir, self_abs) && move_self_to_leaf(self_abs) == 0 &&
		    rb_cg_write(dir, "cgroup.subtree_control", op, &e) == 0)
			continue;
		if (e.errnum == EBUSY)
			snprintf(why, why_n,
			         "`%s` holds processes, so it cannot delegate %s (no internal processes rule)", dir,
			         wanted[i]);
		else
			memccpy(why, e.msg, '\0', why_n - 1), why[why_n - 1] = '\0';
	}
}

/* May runbox write dir's subtree_control? Only for cgroups it made, the caller's own cgroup
 * and what lies below it, and the parent the operator named (and below). */
static bool ours(const char *dir, const char *self_abs, const char *parent_abs, bool parent_named)
{
	size_t sl = strlen(self_abs), pl = strlen(parent_abs);
	if (!strncmp(dir, self_abs, sl) && (dir[sl] == '\0' || dir[sl] == '/'))
		return true;
	return parent_named && !strncmp(dir, parent_abs, pl) && (dir[pl] == '\0' || dir[pl] == '/');
}

static int make_parent(struct rb_cgroup *cg, const char *parent_rel, const char *self_abs, bool named, char *parent_abs,
                       char *why, size_t why_n, struct rb_error *err)
{
	if ((size_t)snprintf(parent_abs, PATH_MAX, "%s%s", cg->v2_mount, parent_rel) >= PATH_MAX)
		return rb_error_set(err, ENAMETOOLONG, "cgroup parent `%s`", parent_rel);
	char cur[PATH_MAX];
	snprintf(cur, sizeof cur, "%s", cg->v2_mount);
	for (const char *p = parent_rel; *p;) {
		while (*p == '/')
			p++;
		size_t len = strcspn(p, "/");
		if (!len)
			break;
		char next[PATH_MAX];
		if ((size_t)snprintf(next, sizeof next, "%s/%.*s", cur, (int)len, p) >= sizeof next)
			return rb_error_set(err, ENAMETOOLONG, "cgroup parent `%s`", parent_rel);
		/* Each level of ours hands the controllers down, also when the level below exists
		 * already (made by a run that needed none); levels above ours are only read. */
		if (ours(cur, self_abs, parent_abs, named))
			enable_subtree(cur, self_abs, why, why_n);
		if (access(next, F_OK) < 0 && rb_cg_mkdir(next, NULL, err) < 0)
			return -1;
		snprintf(cur, sizeof cur, "%s", next);
		p += len;
	}
	enable_subtree(parent_abs, self_abs, why, why_n);
	return 0;
}

/* Below the run's cgroup: "init" (step 0: init is cloned into it) and, per step, "step-N". */
static int v2_leaf(const struct rb_cgroup *cg, unsigned step, char out[PATH_MAX])
{
	char name[32];
	if (step == 0)
		snprintf(name, sizeof name, "init");
	else
		snprintf(name, sizeof name, "step-%u", step);
	return rb_cg_join(out, cg->v2_path, name);
}

/* A cgroup that hands memory to its children may hold no process itself, which is why init
 * needs a leaf too. false (and nothing changed) when the run's cgroup cannot delegate memory. */
static bool v2_make_leaves(struct rb_cgroup *cg)
{
	char init[PATH_MAX];
	if (rb_cg_write(cg->v2_path, "cgroup.subtree_control", "+memory", NULL) < 0 || v2_leaf(cg, 0, init) < 0 ||
	    rb_cg_mkdir(init, NULL, NULL) < 0)
		return false;
	int fd = open(init, O_DIRECTORY | O_CLOEXEC | O_RDONLY);
	if (fd < 0) {
		rmdir(init);
		return false;
	}
	close(cg->v2_dirfd);
	cg->v2_dirfd = fd;
	cg->v2_leaves = true;
	return true;
}

static int v2_create(struct rb_cgroup *cg, const struct rb_limits *lim, struct rb_error *err)
{
	char self_rel[PATH_MAX], parent_rel[PATH_MAX], self_abs[PATH_MAX], parent_abs[PATH_MAX];
	if (rb_cg_self_path(NULL, self_rel, sizeof self_rel) < 0) {
		rb_error_set(err, errno, "no cgroup v2 entry in /proc/self/cgroup");
		return RB_CG_UNAVAILABLE;
	}
	if (rb_cgroup_parent(cg->parent_rel, self_rel, parent_rel, sizeof parent_rel) < 0)
		return rb_error_set(err, errno, "cgroup parent `%s`", cg->parent_rel ? cg->parent_rel : "");
	if (snprintf(self_abs, sizeof self_abs, "%s%s", cg->v2_mount, strcmp(self_rel, "/") != 0 ? self_rel : "") >=
	    (int)sizeof self_abs)
		return rb_error_set(err, ENAMETOOLONG, "cgroup `%s`", self_rel);
	bool named = cg->parent_rel && *cg->parent_rel;
	char why[256] = "";
	if (make_parent(cg, parent_rel, self_abs, named, parent_abs, why, sizeof why, err) < 0)
		return RB_CG_UNAVAILABLE;
	if (rb_cg_join(cg->v2_path, parent_abs, cg->run_id) < 0) {
		rb_error_set(err, errno, "cgroup `%s/%s`", parent_abs, cg->run_id);
		return RB_CG_UNAVAILABLE;
	}
	if (rb_cg_mkdir(cg->v2_path, &cg->v2_created, err) < 0)
		return RB_CG_UNAVAILABLE;
	if (!cg->v2_created) {
		cg->v2_path[0] = '\0';
		rb_error_set(err, EEXIST, "cgroup for run %s already exists under `%s`", cg->run_id, parent_abs);
		return -1;
	}
	cg->v2_dirfd = open(cg->v2_path, O_DIRECTORY | O_CLOEXEC | O_RDONLY);
	if (cg->v2_dirfd < 0)
		return rb_error_set(err, errno, "open `%s`", cg->v2_path);

	const char *p = cg->v2_path;
	char v[64];
	if (!why[0] &&
	    snprintf(why, sizeof why, "controller not enabled in `%s` (not delegated)", parent_abs) >= (int)sizeof why)
		rb_debug("cgroup: reason truncated");
	if (cg->limits[RB_LIMIT_MEMORY].requested) {
		if (!rb_cg_exists(p, "memory.max")) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_MEMORY, "memory %s", why);
		} else {
			snprintf(v, sizeof v, "%" PRIu64, lim->memory_bytes);
			if (rb_cg_write(p, "memory.max", v, err) < 0)
				return -1;
			/* Swap off, so the limit holds; no file means no swap accounting. */
			bool swap = rb_cg_exists(p, "memory.swap.max");
			if (swap && rb_cg_write(p, "memory.swap.max", "0", err) < 0)
				return -1;
			/* One OOM kills the whole step, not one process of it: memory.oom.group on
			 * each step's leaf. Without leaves, on the run's cgroup (init goes too). */
			if (rb_cg_exists(p, "memory.oom.group") && !v2_make_leaves(cg) &&
			    rb_cg_write(p, "memory.oom.group", "1", err) < 0)
				return -1;
			rb_cg_limit_enforced(cg, RB_LIMIT_MEMORY,
			                     swap ? "cgroup v2 memory.max, memory.swap.max=0" : "cgroup v2 memory.max");
		}
	}
	if (cg->limits[RB_LIMIT_PIDS].requested) {
		if (!rb_cg_exists(p, "pids.max")) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_PIDS, "pids %s", why);
		} else {
			snprintf(v, sizeof v, "%" PRIu64, lim->pids);
			if (rb_cg_write(p, "pids.max", v, err) < 0)
				return -1;
			rb_cg_limit_enforced(cg, RB_LIMIT_PIDS, "cgroup v2 pids.max");
		}
	}
	if (cg->limits[RB_LIMIT_CPUS].requested) {
		if (!rb_cg_exists(p, "cpu.max")) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_CPUS, "cpu %s", why);
		} else {
			/* The kernel refuses quotas under 1 ms. */
			double q = fmax(1000.0, round(lim->cpus * 100000.0));
			snprintf(v, sizeof v, "%.0f 100000", q);
			if (rb_cg_write(p, "cpu.max", v, err) < 0)
				return -1;
			rb_cg_limit_enforced(cg, RB_LIMIT_CPUS, "cgroup v2 cpu.max");
		}
	}
	if (cg->limits[RB_LIMIT_CPU_WEIGHT].requested) {
		if (!rb_cg_exists(p, "cpu.weight")) {
			rb_cg_limit_not_enforced(cg, RB_LIMIT_CPU_WEIGHT, "cpu %s", why);
		} else {
			uint64_t w = lim->cpu_weight > 10000 ? 10000 : lim->cpu_weight;
			snprintf(v, sizeof v, "%" PRIu64, w);
			if (rb_cg_write(p, "cpu.weight", v, err) < 0)
				return -1;
			rb_cg_limit_enforced(cg, RB_LIMIT_CPU_WEIGHT, "cgroup v2 cpu.weight");
		}
	}
	return 0;
}

static int v2_clone_fd(const struct rb_cgroup *cg)
{
	return cg->v2_dirfd;
}

static int v2_attach(struct rb_cgroup *cg, pid_t pid, struct rb_error *err)
{
	char v[24], init[PATH_MAX];
	snprintf(v, sizeof v, "%d", (int)pid);
	if (!cg->v2_leaves)
		return rb_cg_write(cg->v2_path, "cgroup.procs", v, err);
	if (v2_leaf(cg, 0, init) < 0)
		return rb_error_set(err, errno, "cgroup `%s/init`", cg->v2_path);
	return rb_cg_write(init, "cgroup.procs", v, err);
}

static int v2_step_procs(struct rb_cgroup *cg, unsigned step, struct rb_error *err)
{
	if (!cg->v2_leaves)
		return -1;
	char dir[PATH_MAX], procs[PATH_MAX];
	if (step == 0 || v2_leaf(cg, step, dir) < 0 || rb_cg_join(procs, dir, "cgroup.procs") < 0)
		return rb_error_set(err, ENAMETOOLONG, "cgroup `%s/step-%u`", cg->v2_path, step);
	bool made = false;
	if (rb_cg_mkdir(dir, &made, err) < 0)
		return -1;
	if (made && step > cg->v2_steps)
		cg->v2_steps = step;
	if (rb_cg_write(dir, "memory.oom.group", "1", err) < 0)
		return -1;
	int fd = open(procs, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "open `%s`", procs);
	return fd;
}

static int v2_gateway_join(struct rb_cgroup *cg, struct rb_cgroup_join *j, struct rb_error *err)
{
	char dir[PATH_MAX], procs[PATH_MAX];
	if (rb_cg_join(dir, cg->v2_path, RB_CG_GATEWAY_LEAF) < 0 || rb_cg_join(procs, dir, "cgroup.procs") < 0)
		return rb_error_set(err, ENAMETOOLONG, "cgroup `%s/%s`", cg->v2_path, RB_CG_GATEWAY_LEAF);
	/* Without controllers in the run's cgroup.subtree_control the leaf has none of its own,
	 * and its processes count against the run's cgroup's limits, which hold for the subtree. */
	bool made = false;
	if (rb_cg_mkdir(dir, &made, err) < 0)
		return -1;
	cg->v2_gw |= made;
	if ((j->clone_fd = open(dir, O_DIRECTORY | O_CLOEXEC | O_RDONLY)) < 0)
		return rb_error_set(err, errno, "open `%s`", dir);
	if ((j->fds[0] = open(procs, O_WRONLY | O_CLOEXEC)) < 0)
		return rb_error_set(err, errno, "open `%s`", procs);
	j->n = 1;
	return 1;
}

/* SIGKILLs what the run's cgroup and each of its leaves list (cgroup.procs is per cgroup). */
static void kill_listed_tree(const struct rb_cgroup *cg)
{
	char leaf[PATH_MAX];
	rb_cg_kill_listed(cg->v2_path);
	for (unsigned i = 0; cg->v2_leaves && i <= cg->v2_steps; i++)
		if (v2_leaf(cg, i, leaf) == 0)
			rb_cg_kill_listed(leaf);
	if (cg->v2_gw && rb_cg_join(leaf, cg->v2_path, RB_CG_GATEWAY_LEAF) == 0)
		rb_cg_kill_listed(leaf);
}

/* Waits until cgroup.events says "populated 0", waking on its change notifications. When
 * cgroup.kill is missing each wake-up also kills what a fork race let through. */
static int wait_empty(const struct rb_cgroup *cg, bool rekill, struct rb_error *err)
{
	const char *dir = cg->v2_path;
	char p[PATH_MAX];
	if (rb_cg_join(p, dir, "cgroup.events") < 0)
		return rb_error_set(err, errno, "cgroup `%s`", dir);
	_cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "open `%s`", p);
	uint64_t deadline = rb_now_us() + (uint64_t)RB_CG_KILL_WAIT_MS * 1000;
	for (;;) {
		uint64_t populated = 1;
		if (rb_cg_read_key(dir, "cgroup.events", "populated", &populated) < 0)
			return rb_error_set(err, errno, "read `%s`", p);
		if (!populated)
			return 0;
		uint64_t now = rb_now_us();
		if (now >= deadline)
			return rb_error_set(err, EBUSY, "cgroup `%s` still has processes after %d ms", dir,
			                    RB_CG_KILL_WAIT_MS);
		if (rekill)
			kill_listed_tree(cg);
		struct pollfd pfd = {.fd = fd, .events = POLLPRI};
		/* The 50 ms cap makes a missed notification cost little; it is no timing assumption. */
		uint64_t left_ms = (deadline - now) / 1000;
		poll(&pfd, 1, left_ms > 50 ? 50 : (int)left_ms + 1);
	}
}

static int v2_kill(struct rb_cgroup *cg, struct rb_error *err)
{
	const char *p = cg->v2_path;
	if (!p[0])
		return 0;
	if (rb_cg_exists(p, "cgroup.kill")) {
		if (rb_cg_write(p, "cgroup.kill", "1", err) < 0)
			return -1;
		return wait_empty(cg, false, err);
	}
	/* Before 5.14: freeze so nothing forks while we kill, then thaw so SIGKILL is delivered. */
	bool frozen = rb_cg_exists(p, "cgroup.freeze") && rb_cg_write(p, "cgroup.freeze", "1", NULL) == 0;
	if (frozen) {
		uint64_t deadline = rb_now_us() + 1000000, f = 0;
		while (rb_cg_read_key(p, "cgroup.events", "frozen", &f) == 0 && !f && rb_now_us() < deadline)
			usleep(1000);
	}
	kill_listed_tree(cg);
	if (frozen && rb_cg_write(p, "cgroup.freeze", "0", err) < 0)
		return -1;
	return wait_empty(cg, true, err);
}

static void v2_sample(struct rb_cgroup *cg)
{
	uint64_t v;
	if (!cg->v2_path[0])
		return;
	if (rb_cg_read_u64(cg->v2_path, "pids.current", &v) == 0 && v > cg->pids_sampled)
		cg->pids_sampled = v;
	if (rb_cg_read_u64(cg->v2_path, "memory.current", &v) == 0 && v > cg->mem_sampled)
		cg->mem_sampled = v;
}

static void v2_stats(struct rb_cgroup *cg, struct rb_cgroup_stats *out)
{
	const char *p = cg->v2_path;
	if (!p[0])
		return;
	v2_sample(cg);
	uint64_t v;
	if (rb_cg_read_u64(p, "memory.peak", &v) == 0) {
		out->have_memory_peak = true;
		out->memory_peak_bytes = v;
	} else if (rb_cg_exists(p, "memory.current")) {
		out->have_memory_peak = true;
		out->memory_peak_bytes = cg->mem_sampled;
	}
	if (rb_cg_read_key(p, "memory.events", "oom_kill", &v) == 0) {
		out->have_oom = true;
		out->oom_kills = v;
	}
	if (rb_cg_read_u64(p, "pids.peak", &v) == 0) {
		out->have_pids_peak = true;
		out->pids_peak = v;
	} else if (rb_cg_exists(p, "pids.current")) {
		out->have_pids_peak = true;
		out->pids_peak = cg->pids_sampled;
	}
	if (rb_cg_read_key(p, "cpu.stat", "usage_usec", &v) == 0) {
		out->have_cpu = true;
		out->cpu_usec = v;
		/* The subtree's usage holds the gateway's, which the run's cost counts apart. */
		char gw[PATH_MAX];
		uint64_t g;
		if (cg->v2_gw && rb_cg_join(gw, p, RB_CG_GATEWAY_LEAF) == 0 &&
		    rb_cg_read_key(gw, "cpu.stat", "usage_usec", &g) == 0)
			out->cpu_usec = g < v ? v - g : 0;
	}
}

static int v2_destroy(struct rb_cgroup *cg, struct rb_error *err)
{
	if (!cg->v2_created)
		return 0;
	if (cg->v2_dirfd >= 0) {
		close(cg->v2_dirfd);
		cg->v2_dirfd = -1;
	}
	char leaf[PATH_MAX];
	/* Leaves first: a cgroup with children cannot go. Empty already (killed). */
	if (cg->v2_gw) {
		if (rb_cg_join(leaf, cg->v2_path, RB_CG_GATEWAY_LEAF) < 0 || rb_cg_rmdir(leaf, err) < 0)
			return -1;
		cg->v2_gw = false;
	}
	if (cg->v2_leaves) {
		for (unsigned i = 0; i <= cg->v2_steps; i++)
			if (v2_leaf(cg, i, leaf) == 0 && rb_cg_rmdir(leaf, err) < 0)
				return -1;
	}
	if (rb_cg_rmdir(cg->v2_path, err) < 0)
		return -1;
	cg->v2_created = false;
	return 0;
}

const struct rb_cgroup_ops rb_cgroup_v2_ops = {
    .name = "v2",
    .create = v2_create,
    .clone_fd = v2_clone_fd,
    .attach = v2_attach,
    .step_procs = v2_step_procs,
    .gateway_join = v2_gateway_join,
    .kill = v2_kill,
    .sample = v2_sample,
    .stats = v2_stats,
    .destroy = v2_destroy,
};

/* The cgroup managers' shared state and their table of functions (crun's cgroup-internal.h):
 * cgroup.c chooses a manager once per run; only the managers and cgroup.c include this. */
#ifndef RB_CGROUP_INTERNAL_H
#define RB_CGROUP_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "runtime/sandbox/cgroup.h"

enum rb_cg_mode { RB_CG_MODE_NONE, RB_CG_MODE_UNIFIED, RB_CG_MODE_HYBRID, RB_CG_MODE_LEGACY };

/* The v1 controllers runbox uses; cpu and cpuacct may share one hierarchy (cpu,cpuacct). */
enum rb_cg_v1_ctrl { RB_V1_MEMORY, RB_V1_PIDS, RB_V1_CPU, RB_V1_CPUACCT, RB_V1_FREEZER, RB_V1_COUNT };

/* What create() may answer besides 0 (ready) and -1 (a hard error, err filled). */
#define RB_CG_UNAVAILABLE 1 /* this manager cannot serve this host/user; err holds why */

struct rb_cgroup;

struct rb_cgroup_ops {
	const char *name; /* "v2", "v1", "none" */
	/* Makes <parent>/<run_id> and applies the limits; fills cg->limits[]. */
	int (*create)(struct rb_cgroup *cg, const struct rb_limits *lim, struct rb_error *err);
	int (*clone_fd)(const struct rb_cgroup *cg);
	int (*attach)(struct rb_cgroup *cg, pid_t pid, struct rb_error *err);
	/* See rb_cgroup_self_join_fds (NULL: the manager has none). */
	int (*self_join_fds)(const struct rb_cgroup *cg, int *fds, unsigned max, struct rb_error *err);
	/* A step's own leaf (NULL: the manager has none); see rb_cgroup_step_procs. */
	int (*step_procs)(struct rb_cgroup *cg, unsigned step, struct rb_error *err);
	/* The run's gateway leaf (NULL: the manager has none); see rb_cgroup_gateway_join. */
	int (*gateway_join)(struct rb_cgroup *cg, struct rb_cgroup_join *j, struct rb_error *err);
	int (*kill)(struct rb_cgroup *cg, struct rb_error *err);
	void (*sample)(struct rb_cgroup *cg);
	void (*stats)(struct rb_cgroup *cg, struct rb_cgroup_stats *out);
	/* Removes what create() made; cg itself is freed by the caller. */
	int (*destroy)(struct rb_cgroup *cg, struct rb_error *err);
};

struct rb_cg_v1_hier {
	char mount[PATH_MAX]; /* "" when the controller is not mounted */
	char parent[PATH_MAX];
	char path[PATH_MAX];
	bool created;
	bool gw_created; /* its "gateway" leaf (rb_cgroup_gateway_join) */
	bool primary;    /* first controller of a shared hierarchy: the one that mkdirs/attaches */
};

struct rb_cgroup {
	const struct rb_cgroup_ops *ops;
	enum rb_cg_mode mode;
	char run_id[64];
	const char *parent_rel; /* override (as in /proc/self/cgroup, relative to the root) or NULL */
	struct rb_limit_status limits[RB_LIMIT_COUNT];
	char none_reason[RB_ERROR_MAX];

	/* v2 */
	char v2_mount[PATH_MAX];
	char v2_path[PATH_MAX];
	int v2_dirfd; /* where init is cloned into: the run's cgroup, or its "init" leaf */
	bool v2_created;
	bool v2_leaves;    /* init and each step in a leaf of their own (see v2_make_leaves) */
	unsigned v2_steps; /* step leaves made, step-1 .. step-N */
	bool v2_gw;        /* the "gateway" leaf made (rb_cgroup_gateway_join) */

	/* v1 */
	struct rb_cg_v1_hier v1[RB_V1_COUNT];

	uint64_t pids_sampled, mem_sampled; /* peaks seen by sample(), where no peak file exists */
};

extern const struct rb_cgroup_ops rb_cgroup_v2_ops, rb_cgroup_v1_ops, rb_cgroup_none_ops;

/* --- helpers shared by the managers (cgroup.c) --- */

/* dir/file joined into out (PATH_MAX); -1 with ENAMETOOLONG when it does not fit. */
int rb_cg_join(char *out, const char *dir, const char *file);
bool rb_cg_exists(const char *dir, const char *file);
/* Reads a small cgroup file (at most n-1 bytes) into buf; -1 with errno on failure. */
int rb_cg_read(const char *dir, const char *file, char *buf, size_t n);
/* A file holding one number; "max" reads as UINT64_MAX. */
int rb_cg_read_u64(const char *dir, const char *file, uint64_t *out);
/* A "key value" line of a flat-keyed file (memory.events, cpu.stat, memory.oom_control). */
int rb_cg_read_key(const char *dir, const char *file, const char *key, uint64_t *out);
int rb_cg_write(const char *dir, const char *file, const char *value, struct rb_error *err);
/* mkdir that reports whether this call created the directory (EEXIST is fine, created=false). */
int rb_cg_mkdir(const char *path, bool *created, struct rb_error *err);
/* rmdir with bounded backoff (runc: 1 ms doubling, 10 tries); ENOENT counts as removed. */
int rb_cg_rmdir(const char *path, struct rb_error *err);
/* SIGKILLs every pid listed in dir/cgroup.procs; returns how many were listed. */
int rb_cg_kill_listed(const char *dir);
/* Counts the pids in dir/cgroup.procs (-1 when unreadable). */
int rb_cg_count_procs(const char *dir);
/* The caller's cgroup in a hierarchy from /proc/self/cgroup: "0::" for v2 (ctrl NULL), else
 * the line whose controller list holds ctrl. */
int rb_cg_self_path(const char *ctrl, char *out, size_t n);
/* The same, from the text of /proc/self/cgroup already read. */
int rb_cg_self_path_in(const char *text, const char *ctrl, char *out, size_t n);
void rb_cg_limit_enforced(struct rb_cgroup *cg, enum rb_limit_kind k, const char *mechanism);
/* After rb_cg_limit_enforced: the limit holds, but not over what fmt names. */
void rb_cg_limit_partial(struct rb_cgroup *cg, enum rb_limit_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rb_cg_limit_not_enforced(struct rb_cgroup *cg, enum rb_limit_kind k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* cpu weight (1..10000, default 100) as v1 cpu.shares (2..262144, default 1024), as runc. */
uint64_t rb_cg_weight_to_shares(uint64_t weight);

/* The leaf a run's gateway runs in, below the run's cgroup in each hierarchy. */
#define RB_CG_GATEWAY_LEAF "gateway"

/* How long kill() waits for the cgroup to empty before it reports a failure. */
#define RB_CG_KILL_WAIT_MS 10000

#endif

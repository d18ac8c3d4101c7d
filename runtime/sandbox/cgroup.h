/* Per-run cgroups behind one interface (crun's managers): v2, v1 (hybrid and legacy hosts)
 * and "none" (no writable hierarchy: every limit reported as not enforced, with the reason).
 * Callers never ask which one is in use. */
#ifndef RB_CGROUP_H
#define RB_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct rb_limits {
	uint64_t memory_bytes; /* 0: not requested */
	uint64_t pids;         /* 0: not requested */
	double cpus;           /* 0: not requested */
	uint64_t cpu_weight;   /* 0: not requested */
};

enum rb_limit_kind { RB_LIMIT_MEMORY, RB_LIMIT_PIDS, RB_LIMIT_CPUS, RB_LIMIT_CPU_WEIGHT, RB_LIMIT_COUNT };

struct rb_limit_status {
	bool requested;
	bool enforced;
	bool partial;       /* enforced, but not over everything it names: reason says what not */
	char mechanism[64]; /* "cgroup v2 memory.max", "cgroup v1 memory.limit_in_bytes" */
	char reason[192];   /* why not enforced, or (partial) what it does not cover */
};

struct rb_cgroup_stats {
	bool have_memory_peak, have_oom, have_pids_peak, have_cpu;
	uint64_t memory_peak_bytes;
	uint64_t oom_kills;
	uint64_t pids_peak;
	uint64_t cpu_usec; /* the sandbox's own: the gateway leaf's usage is not in it (its CPU is
	                    * the host's cost for the run, counted once, from its rusage) */
};

struct rb_cgroup;

/* The host variable naming the cgroup parent. The sandbox never reads it: a run, gc and
 * `runbox check` take it from their rb_host (common/host.h) and pass it down as `parent`. */
#define RB_CGROUP_PARENT_VAR "RUNBOX_CGROUP_PARENT"

/* The parent a caller named (NULL or "": runbox's default, "runbox") resolved in one
 * hierarchy, as a path from its root, into out (n bytes): an absolute one ("/a/b") as is, a
 * relative one (and the default) under self_rel, the caller's own cgroup there; trailing
 * slashes dropped. -1 with errno ENAMETOOLONG, or EINVAL for a ".." component.
 * rb_cgroup_create, gc's reclaim and `runbox check` all use this. */
int rb_cgroup_parent(const char *parent, const char *self_rel, char *out, size_t n);

/* Creates the run's cgroup under runbox's own parent (rb_cgroup_parent: parent, the caller's
 * RUNBOX_CGROUP_PARENT, or else a "runbox" child of the caller's cgroup) and applies lim. A parent starting with '/' is
 * a path from each hierarchy's root; otherwise it lies under the caller's own cgroup. Never fails because limits cannot
 * be enforced: it then returns the "none" manager with reasons filled in. Fails only when a limit was requested and the
 * host could enforce it but writing it failed. */
int rb_cgroup_create(const char *run_id, const char *parent, const struct rb_limits *lim, struct rb_cgroup **out,
                     struct rb_error *err);

/* A directory fd for clone3's CLONE_INTO_CGROUP, or -1 when attach() must be used. */
int rb_cgroup_clone_fd(const struct rb_cgroup *cg);
/* Files the spawner writes "0" into, each once, to join the run's cgroups itself before it
 * clones init, which then starts inside; opened here into fds (at most max), close-on-exec.
 * Returns how many (0: the manager has none; clone_fd or attach is used), -1 on error. On v1
 * these are the hierarchies' `tasks` files: a task moving only itself takes no threadgroup
 * lock, so no RCU grace period, which writing init's pid to cgroup.procs waits for. */
#define RB_CGROUP_MAX_JOIN_FDS 8
int rb_cgroup_self_join_fds(const struct rb_cgroup *cg, int *fds, unsigned max, struct rb_error *err);
/* Moves pid in before the child is released (when clone_fd is -1 and there are no
 * self_join_fds). No-op for "none". */
int rb_cgroup_attach(struct rb_cgroup *cg, pid_t pid, struct rb_error *err);
/* A step's own cgroup, where the kernel's OOM killer takes the whole step and only it
 * (memory.oom.group), never the sandbox's init: an fd of its cgroup.procs, opened here, for
 * the step's process to write "0" to before it execs (the kernel checks the opener's
 * credentials, 5.16+). -1 with err->errnum 0 when the manager has no per-step leaves (v1,
 * "none", v2 without a memory limit): the step then shares the run's cgroup. */
int rb_cgroup_step_procs(struct rb_cgroup *cg, unsigned step, struct rb_error *err);
/* How a process the runner starts for the run on the host side (its gateway) gets into the
 * run's cgroup before it execs: clone_fd for clone3's CLONE_INTO_CGROUP (-1: none), else the
 * child writes "0" into each of fds once (v1: each hierarchy's `tasks`; v2: `cgroup.procs`,
 * for kernels whose clone3 lacks CLONE_INTO_CGROUP). A child cloned in may write them too: a
 * move into the cgroup it is in changes nothing. */
struct rb_cgroup_join {
	int clone_fd;
	int fds[RB_CGROUP_MAX_JOIN_FDS];
	unsigned n;
};
/* The run's "gateway" leaf, beside the steps' leaves, made on the first call: the run's memory,
 * pids and cpu limits bound what runs in it, as they bound the steps. 1 with *j filled (the
 * caller closes it with rb_cgroup_join_close); 0 with nothing to join when the manager has no
 * cgroup ("none": then nothing of the run's bounds the process, as every requested limit of the
 * run already says); -1 on error (err names the file). */
int rb_cgroup_gateway_join(struct rb_cgroup *cg, struct rb_cgroup_join *j, struct rb_error *err);
void rb_cgroup_join_close(struct rb_cgroup_join *j);
/* What places the gateway ("cgroup v2 leaf `gateway` of the run's cgroup"), "" for "none". */
const char *rb_cgroup_gateway_mechanism(const struct rb_cgroup *cg);
/* Kills every process in the cgroup (cgroup.kill, or freeze-kill-thaw) and waits until empty. */
int rb_cgroup_kill(struct rb_cgroup *cg, struct rb_error *err);
void rb_cgroup_stats(struct rb_cgroup *cg, struct rb_cgroup_stats *out);
const struct rb_limit_status *rb_cgroup_limit(const struct rb_cgroup *cg, enum rb_limit_kind kind);
const char *rb_cgroup_manager_name(const struct rb_cgroup *cg); /* "v2", "v1", "none" */
/* Records current memory and pids use as peaks, for hosts without memory.peak/pids.peak; cheap,
 * the runner may call it while a step runs. rb_cgroup_stats samples once more itself. */
void rb_cgroup_sample(struct rb_cgroup *cg);
/* The run's cgroup directory (v2; on v1 the memory hierarchy's), "" for "none". */
const char *rb_cgroup_path(const struct rb_cgroup *cg);
/* Why the "none" manager was chosen (for `runbox check` and the result), "" otherwise. */
const char *rb_cgroup_none_reason(const struct rb_cgroup *cg);
/* Removes the cgroup (bounded rmdir retries) and frees cg. Reports a failure to remove. */
int rb_cgroup_destroy(struct rb_cgroup *cg, struct rb_error *err);

const char *rb_limit_name(enum rb_limit_kind kind); /* "memory", "pids", "cpus", "cpu_weight" */

/* The directories this run's cgroup made (v2: one; v1: one per hierarchy), for the run's
 * state file: `runbox gc` reclaims them after the runner was killed. Returns the count. */
unsigned rb_cgroup_dirs(const struct rb_cgroup *cg, const char **dirs, unsigned max);
/* Kills whatever is left in each directory and removes it (bounded). A missing one is fine.
 * The list comes from a state file, so each directory is first checked to be run_id's own
 * cgroup: <cgroup mount>/.../runbox/<run_id> (or the last component of parent, the caller's
 * RUNBOX_CGROUP_PARENT, in place of "runbox"), canonical, no symlink, on a cgroup filesystem,
 * owned by the caller's euid; any other is refused (-1, err names it) and left untouched. */
int rb_cgroup_reclaim(const char *run_id, const char *parent, const char *const *dirs, unsigned n,
                      struct rb_error *err);

#endif

/* A run: one sandbox, the steps run in it, and their results. The CLI and the session API
 * are thin layers over these calls. */
#ifndef RB_RUN_H
#define RB_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/paths.h"
#include "images/image.h"
#include "policy/policy.h"
#include "common/token.h"
#include "runtime/sandbox/cgroup.h"
#include "runtime/sandbox/factory.h"
#include "runtime/run/gwproc.h"
#include "runtime/sandbox/mounts.h"
#include "runtime/sandbox/sandbox.h"
#include "scrub/scrub.h"
#include "runtime/sandbox/seccomp.h"
#include "runtime/sandbox/step.h"

#define RB_MAX_LINGER 8
/* The steps' full stdout and stderr kept in the run dir: every step's and both streams' bytes
 * together, for the run. */
#define RB_STEP_LOG_CAP (64ULL << 20)
#define RB_BG_LOG_CAP   (16ULL << 20) /* what background processes print */

struct rb_run_config {
	const char *image;     /* NULL: "host" */
	const char *policy;    /* NULL: "default" */
	const char *state_dir; /* NULL: the default location */
	uint64_t timeout_ms;   /* 0: the policy's */
	uint64_t memory_bytes; /* 0: the policy's */
	uint64_t pids;
	double cpus;
	int net_mode;                          /* -1: the policy's */
	const struct rb_input_req *input_reqs; /* n_inputs of them, each with its own name */
	unsigned n_inputs;
	const char *const *skill_dirs; /* bundle folders, mounted at /workspace/skills/<name> */
	const char *const *skill_names;
	unsigned n_skills;
	const char *run_id;         /* NULL: a new time-ordered id */
	const char *tenant;         /* NULL: "local" */
	const char *agent;          /* NULL: "cli" */
	const char *gateway_config; /* NULL: the default places (gateway/config.h) */
	/* An eventfd the caller writes a signal number to on SIGINT/SIGTERM (the session's
	 * cancel, runtime/run/session.h); 0 or less: none. The library masks no signal. */
	int cancel_fd;
	/* Makes the run's sandbox (rb_factory_start, before any key or thread); outlives the run. */
	const struct rb_factory *factory;
	/* The host's environment the run's places (XDG_*, RUNBOX_*) and its policy's env.pass are
	 * read from (common/host.h); outlives the run. NULL: an empty one. */
	const struct rb_host *host;
	/* A sandbox made ahead of its run's owner (runbox serve's warm pool): no tenant, agent or
	 * run token until rb_session_bind (runtime/run/session.h) gives them; tenant and agent
	 * above are ignored. */
	bool unbound;
	/* A recipe build's tree (images/build.h, in the store's temporary space) as the run's root
	 * itself, writable through an idmapped mount (no overlay): image is then ignored. Only the
	 * build's commands set it (runtime/run/buildcmd.h); it needs root with subordinate ids. */
	const char *build_root;
};

struct rb_session;
struct rb_chunk;

struct rb_buf {
	char *data;
	size_t len, cap, limit;
	bool truncated;
};

/* What the runner itself spent on a step, beside what the sandbox spent (docs/result.md). */
struct rb_host_cost {
	uint64_t cpu_user_us, cpu_sys_us;  /* the runner's own CPU over the step (getrusage RUSAGE_SELF) */
	uint64_t stdout_read, stderr_read; /* bytes read and scrubbed */
	/* Bytes drained past every cap (the result's buffer and the run's logs full, no copy to a
	 * terminal): spliced to /dev/null, never read into the runner nor scrubbed. */
	uint64_t stdout_dropped, stderr_dropped;
};

enum rb_step_status {
	RB_STEP_EXITED,
	RB_STEP_SIGNALED,
	RB_STEP_TIMEOUT,
	RB_STEP_CANCELLED,
	RB_STEP_SETUP_FAILED,
	RB_STEP_EXEC_FAILED,
};

struct rb_step_result {
	enum rb_step_status status;
	int exit_code; /* RB_STEP_EXITED */
	int signal;    /* RB_STEP_SIGNALED, or the signal that cancelled */
	bool oom_killed, seccomp_killed;
	int exec_errno;
	char error[RB_ERROR_MAX];
	uint64_t wall_us, user_us, sys_us, maxrss_kb;
	struct rb_buf out, err; /* scrubbed as they came, then capped (never cut before the scrub) */
	struct rb_cgroup_stats cgroup;
	json_t *egress; /* the drop counters after the step (rb_net_counters_json), or NULL */
	struct rb_host_cost host;
	json_t *gateway_calls;    /* the step's gateway call records (ledger events), or NULL */
	unsigned gateway_refused; /* how many of them were refused */
	char gateway_hint[512];   /* the first refusal, said in one line; "" when none */
	bool tty;                 /* it ran on a terminal (rb_proc_req.tty): out holds the terminal's output */
};

/* The ledger's part in a run (rb_record_attach fills it in), placed where the runner would
 * otherwise wait. prepare(ctx) runs once while init builds the sandbox's root: it opens the
 * ledger (a failure is met again, and reported, by commit). Before each step's exec request,
 * rb_run_exec saves write_ahead(ctx) in the run's state file: {"committed": the run's events in
 * the ledger so far, "events": those not committed yet}, so that `runbox gc` records them if
 * the runner dies before they are in. Right after the request, commit(ctx) commits them while
 * the step starts and runs (or leaves them for the commit after the step if another process
 * holds the ledger); if it fails, the sandbox is killed and rb_run_exec fails with its error. */
struct rb_run_ledger {
	void (*prepare)(void *ctx);
	json_t *(*write_ahead)(void *ctx);
	int (*commit)(void *ctx, struct rb_error *err);
	void *ctx;
};

struct rb_run {
	char id[72];
	const struct rb_factory *factory; /* the config's */
	/* This run instance's random nonce: in its run_start event, its state file and its
	 * tokens' key (rb_token_run_key), so nothing of an earlier run with the same id counts
	 * as this run's. */
	char instance[RB_TOKEN_NONCE_LEN + 1];
	struct rb_paths paths;
	struct rb_policy policy;
	struct rb_image image;
	struct rb_bpf bpf;
	struct rb_input *inputs; /* n_inputs of them, allocated: the struct stays small, so a run
	                          * touches (and its forks copy) little memory */
	unsigned n_inputs;
	struct rb_input *skills;
	unsigned n_skills;
	struct rb_sandbox_spec spec;
	struct rb_limits limits;
	uint64_t timeout_ms;
	char dir[4096]; /* the run's directory under paths.run_dir */
	struct rb_cgroup *cg;
	struct rb_sandbox sb;
	bool started;                   /* a sandbox exists (stopping the run kills it) */
	bool begun;                     /* init is released and builds the root */
	bool ready;                     /* rb_run_start completed: init said `ready` */
	char start_error[RB_ERROR_MAX]; /* why rb_run_start failed, or "" */
	char tenant[RB_TOKEN_FIELD_MAX], agent[RB_TOKEN_FIELD_MAX];
	char token[RB_TOKEN_MAX];      /* the run token (gateway mode), "" otherwise */
	char gateway_config[PATH_MAX]; /* --gateway-config, "" for the default places */
	uint8_t token_key[RB_TOKEN_KEY_LEN];
	size_t token_keylen;
	struct rb_gwproc gw;
	/* Output of what earlier steps left running: their stdout/stderr pipes, drained into
	 * <dir>/background.log while later steps run and at the run's end. */
	int linger[RB_MAX_LINGER];
	unsigned n_linger;
	int bg_log;
	int id_slice_fd; /* the lock holding this run's host id slice (root mode), or -1 */
	uint64_t bg_log_bytes;
	uint64_t step_log_bytes; /* written to the steps' logs so far, against RB_STEP_LOG_CAP */
	unsigned steps_run;
	uint64_t oom_kills_seen; /* the cgroup's OOM kill count after the last step */
	struct rb_run_ledger ledger;
	bool state_saved;           /* the state file is written, with: */
	json_t *saved_write_ahead;  /* its write-ahead, to skip rewriting it unchanged */
	bool keep_state;            /* rb_run_close leaves it, for gc (rb_run_keep_state) */
	int cancel_fd;              /* rb_run_config.cancel_fd, or -1 */
	struct rb_session *session; /* the open session on the sandbox (rb_run_exec's, or a caller's) */
	/* The run's control socket (runtime/run/control.h), from its sandbox's making to its close;
	 * an open session handles it. end_reason: why the run was stopped from outside ("killed by
	 * runbox kill"), "" otherwise; its run_end event says it. */
	struct rb_control *control;
	char end_reason[64];
	bool unbound; /* rb_run_config.unbound, until rb_session_bind */
};

/* Loads policy and image, checks inputs, plans ids and prepares seccomp. No sandbox yet. */
int rb_run_open(const struct rb_run_config *cfg, struct rb_run *run, struct rb_error *err);
/* The host ids of the sandbox's root where they are not the runner's (as root, a subordinate
 * range): what a file made for the sandbox must be reachable by. */
bool rb_run_sandbox_root_ids(const struct rb_run *run, uid_t *uid, gid_t *gid);
/* Whether host ids uid and gid are both inside the sandbox's id maps (ids its inodes carry). */
bool rb_run_ids_in_sandbox(const struct rb_run *run, uid_t uid, gid_t gid);
/* Lowers the run's timeout and cgroup limits to those given (0: keep), before rb_run_start.
 * Raising one, or lifting none into one above the policy's, is an error: only narrowing. */
int rb_run_narrow(struct rb_run *run, uint64_t timeout_ms, uint64_t memory_bytes, uint64_t pids, double cpus,
                  struct rb_error *err);
/* Writes the state file with what the ledger still lacks and leaves it behind at
 * rb_run_close, for `runbox gc` to commit: the ledger refused the run's last commit. */
int rb_run_keep_state(struct rb_run *run, struct rb_error *err);
/* Creates the sandbox (once). */
int rb_run_start(struct rb_run *run, struct rb_error *err);
/* A file the step gets (its script, a skill's inputs): a sealed memfd that the step's process
 * holds at fd RB_STEP_FILE_FD + its index in rb_step_req.files, readable at
 * RB_STEP_FILE_PATH "<fd>" (runtime/sandbox/step.h). Never written into the sandbox's tree. */
struct rb_step_file {
	const char *name; /* names the memfd ("memfd:runbox-<name>" in /proc/self/fd) */
	const char *data;
	size_t len;
};

/* A terminal's size, in character cells (struct winsize's rows and columns). */
struct rb_tty_size {
	uint16_t rows, cols;
};

struct rb_step_req {
	char *const *argv;
	char *const *env;                 /* added after the policy's variables; may be NULL */
	const struct rb_step_file *files; /* at most RB_STEP_MAX_FILES */
	unsigned n_files;
	uint64_t timeout_ms; /* 0: the run's */
	const char *cwd;     /* the step's working directory, absolute; NULL: /workspace */
	/* Takes the step's stdout/stderr chunks as they come, scrubbed (NULL: none); the CLI's copies
	 * them to the terminal. */
	int (*sink)(void *ctx, const struct rb_chunk *chunk);
	void *sink_ctx;
	/* Scrubs the streams as they come (NULL: one knowing the run token), before they are
	 * captured, copied or logged; a copy to a terminal shows control bytes, never obeys them. */
	struct rb_scrubber *scrubber;
	/* With stdin_stream, stdin_fd (a host fd, e.g. runbox's own stdin) is copied into the
	 * step's stdin as the step reads it, at most RB_STEP_STDIN_CAP bytes; its EOF closes the
	 * step's stdin. Else the step's stdin is the sandbox's /dev/null. */
	bool stdin_stream;
	int stdin_fd;
	/* A terminal for the step (rb_proc_req.tty), of tty_size; its output is the step's stdout.
	 * resize_fd (or -1): a nonblocking fd the caller writes struct rb_tty_size records to
	 * (the CLI, from its SIGWINCH handler); the last one read is the terminal's new size. */
	bool tty;
	struct rb_tty_size tty_size;
	int resize_fd;
};

/* The most a step's streamed stdin carries (docker run -i has none; runbox has a fixed one,
 * as every stream it moves is bounded): beyond it the step's stdin is closed, as at EOF, and
 * runbox warns. Larger data goes in as an --input. */
#define RB_STEP_STDIN_CAP (256ull << 20)

/* Runs one step: a process of the run's session (opened at the first), waited for; its
 * timeout kills the sandbox. A step that could not start is a result (SETUP_FAILED / EXEC_FAILED), not an
 * error; errors are runbox's own. */
int rb_run_exec(struct rb_run *run, const struct rb_step_req *req, struct rb_step_result *res, struct rb_error *err);
/* rb_run_exec of a plain command. */
int rb_run_step(struct rb_run *run, char *const argv[], int (*sink)(void *ctx, const struct rb_chunk *chunk),
                void *sink_ctx, struct rb_step_result *res, struct rb_error *err);
/* Kills the sandbox (SIGKILL to init, not waited for: rb_run_close reaps it while the runner
 * commits the ledger in between) and stops the gateway (its counts land in run->gw.stats).
 * Idempotent. */
void rb_run_stop(struct rb_run *run);
/* Stops, removes the cgroup and the run directory, frees. Always safe to call. */
void rb_run_close(struct rb_run *run);

/* The CLI's exit code for a result: status, 128+n, 124, 125, 126, 127. */
int rb_step_exit_code(const struct rb_step_result *res);
void rb_step_result_free(struct rb_step_result *res);

#endif

/* A whole run from a manifest: one sandbox, the steps in order (batched scripts and skills'
 * entry points), a harvest of /workspace/out after every step, and the ledger's record. */
#ifndef RB_RUNFILE_H
#define RB_RUNFILE_H

#include <jansson.h>
#include <stdio.h>

#include "common/error.h"
#include "common/progress.h"
#include "policy/manifest.h"

struct rb_factory;

/* What the command line gave beside the manifest (SPEC "Who may say what": ceilings). */
struct rb_runfile_opts {
	const char *state_dir;                /* NULL: the default location */
	struct rb_manifest_ceilings ceilings; /* --policy, --image, --timeout, --memory, --pids, --cpus */
	int net_mode;                         /* --net: -1 when not given */
	json_t *labels;                       /* --label: {"K": "V"} into run_start, or NULL */
	/* A view of the run as it goes, beside (or instead of) the JSON: begin once the run has its
	 * id, step with each step's result object as it ends, end with the run's closing object
	 * (run_id, result, exit, ...). Each may be NULL; ctx is theirs. */
	void (*on_begin)(void *ctx, const char *run_id);
	void (*on_step)(void *ctx, const json_t *step);
	void (*on_end)(void *ctx, const json_t *result);
	void *ctx;
	const char *gateway_config;       /* --gateway-config, or NULL */
	int cancel_fd;                    /* the run's cancel (rb_run_config.cancel_fd) */
	const struct rb_factory *factory; /* makes the run's sandbox (rb_run_config) */
	const struct rb_host *host;       /* the host's environment (rb_run_config) */
	struct rb_progress progress;      /* each step's harvest (runtime/run/collect.h); zero: none */
};

/* Runs the manifest at path, writing the run's JSON result to out (NULL: nowhere) as it goes:
 * each step's object as the step ends (runtime/run/result_stream.h), so the runner never holds
 * more than one step of it; also on step failures. *exit_code is 0 when every step succeeded,
 * else the failed step's code (125 for runbox's own failure). Returns -1, with nothing
 * written, only when runbox could not run at all (bad manifest, policy...). */
int rb_runfile_execute(const char *path, const struct rb_runfile_opts *opts, FILE *out, int *exit_code,
                       struct rb_error *err);

#endif

/* Live runs on this host: a state file per run beside its run directory (<run_dir>/<id>.state),
 * naming its owner (pid and start time) and its control socket (<id>.ctl), so `runbox ps`,
 * `kill` and `gc` work across processes and after a crash of runbox. */
#ifndef RB_LIFECYCLE_H
#define RB_LIFECYCLE_H

#include <jansson.h>

#include "common/error.h"
#include "common/paths.h"
#include "runtime/run/run.h"

/* Writes the run's state file (atomically) once the sandbox exists, and again when the
 * ledger's write-ahead changes (struct rb_run_ledger); write_ahead may be NULL. */
int rb_lifecycle_register(const struct rb_run *run, json_t *write_ahead, struct rb_error *err);
/* The run's first state file, before anything of the run exists (its run directory, its
 * cgroup): made only if there is none, so it also claims the run id. 0, 1 when a state file
 * of that id exists (a live run's, or one gc has yet to clean up), -1 with err. */
int rb_lifecycle_claim(const struct rb_run *run, struct rb_error *err);
void rb_lifecycle_unregister(const struct rb_run *run);

/* Every registered run: {run_id, tenant, agent, started, runner_pid, state: running|abandoned,
 * image: the digest it runs on}. */
int rb_lifecycle_list(const struct rb_paths *paths, json_t **runs, struct rb_error *err);
/* Asks the owner of run_id (the process its state file names by pid and start time: `runbox
 * run`, or `runbox serve`) over the run's control socket (runtime/run/control.h) to cancel it:
 * its processes get sig first (SIGKILL: the sandbox goes at once), and its end is recorded
 * with the reason "killed by runbox kill". No signal goes to the owner itself. */
int rb_lifecycle_kill(const struct rb_paths *paths, const char *run_id, int sig, struct rb_error *err);
/* For each run whose runner is gone: kills what is left (init, the cgroup), removes the cgroup
 * and the run directory, records the run as abandoned in the ledger, after the events its
 * state file wrote ahead if the ledger never got them. *report lists them. */
int rb_lifecycle_gc(const struct rb_paths *paths, json_t **report, struct rb_error *err);
/* The same cleanup for the runs take accepts (NULL: every run whose owner is gone), recorded
 * with run_end {result} after a cleanup {what, ok, by}: runbox gc's is ("abandoned", "runbox
 * gc after the runner died", "gc"); runbox serve at its start takes its dead predecessors'
 * sessions and records them ("lost", "daemon lost", "serve"), serve/restart.c. take sees only
 * dead owners' runs of this state directory, and is never called for a live one. */
struct rb_lifecycle_gc_how {
	bool (*take)(json_t *st, void *ctx);
	void *ctx;
	const char *result, *what, *by;
};
int rb_lifecycle_gc_how(const struct rb_paths *paths, const struct rb_lifecycle_gc_how *how, json_t **report,
                        struct rb_error *err);

#endif

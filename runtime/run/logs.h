/* A run's captured output kept with its records: each step's stdout and stderr, as scrubbed and
 * capped while the run wrote them to its directory, copied under <state_dir>/results/<run id>/logs
 * before that directory goes, for `runbox logs` as long as `runbox gc` keeps the run's results. */
#ifndef RB_LOGS_H
#define RB_LOGS_H

#include <limits.h>

#include "common/error.h"
#include "runtime/run/run.h"

/* Copies the run's step logs (those with bytes) to rb_logs_dir's folder (0700, files 0600).
 * Their total is already bounded by RB_STEP_LOG_CAP. Returns 0, or -1 with err. */
int rb_logs_keep(const struct rb_run *run, struct rb_error *err);

/* <state_dir>/results/<run_id>/logs into out. */
void rb_logs_dir(const char *state_dir, const char *run_id, char out[PATH_MAX]);

#endif

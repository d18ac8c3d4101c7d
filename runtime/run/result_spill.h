/* What a manifest run's result does not hold, kept beside it: a per-run bound on the steps'
 * output in the result and a per-step bound on its artifact list; the rest goes to files in
 * the run's result directory, <state_dir>/results/<run_id>/, which the result names. */
#ifndef RB_RESULT_SPILL_H
#define RB_RESULT_SPILL_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/run/run.h"

#define RB_RESULT_OUTPUT_MAX (8ULL << 20) /* the steps' stdout and stderr in one run's result */
#define RB_RESULT_ARTIFACTS  100          /* artifacts listed per step; the rest in a file */

struct rb_result_spill {
	char dir[PATH_MAX]; /* the run's result directory, made at the first spill */
	bool made;
	uint64_t output_left; /* of RB_RESULT_OUTPUT_MAX */
};

void rb_result_spill_init(struct rb_result_spill *sp, const char *state_dir, const char *run_id);
/* Sets step[key] to the stream's text while the run's output budget has room for it; else
 * step[key] is "" and step[key + "_file"] names a file holding it. */
void rb_result_spill_output(struct rb_result_spill *sp, unsigned step, const char *key, const struct rb_buf *b,
                            json_t *step_json);
/* A harvest object (rb_harvest_json) listing more than RB_RESULT_ARTIFACTS artifacts keeps
 * the first ones, with "artifacts_total" and "artifacts_file" (every one, a JSON line each). */
void rb_result_spill_artifacts(struct rb_result_spill *sp, unsigned step, json_t *harvest);

#endif

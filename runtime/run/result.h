/* The result of a step as one JSON object (docs/result.md). */
#ifndef RB_RESULT_H
#define RB_RESULT_H

#include <jansson.h>

#include "runtime/run/run.h"

json_t *rb_result_json(const struct rb_run *run, char *const argv[], const struct rb_step_result *res);

#endif

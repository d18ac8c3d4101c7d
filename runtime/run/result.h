/* The result of a step as one JSON object (docs/result.md). */
#ifndef RB_RESULT_H
#define RB_RESULT_H

#include <jansson.h>

#include "runtime/run/run.h"

/* The one serializer of a step's result, for `runbox run` and each step of a manifest run. */
json_t *rb_result_json(const struct rb_run *run, char *const argv[], const struct rb_step_result *res);
/* What every step's object holds (docs/result.md): exit, exit_code, signal, timed_out,
 * oom_killed, seccomp_killed, error, wall_ms, cpu. */
void rb_result_step_fields(json_t *o, const struct rb_step_result *res);
/* o[key]: the stream as text when it is valid UTF-8, else base64 under "<key>_base64". */
void rb_result_put_output(json_t *o, const char *key, const struct rb_buf *b);

#endif

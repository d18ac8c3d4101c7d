/* A manifest run's result, written as it happens: the run's head, then each step's object as
 * the step ends (and freed), then the run's tail; so the runner holds one step at a time, not
 * a tree of every step. A closed reader never stops the run: writes then stop, the run goes on
 * and is recorded. */
#ifndef RB_RESULT_STREAM_H
#define RB_RESULT_STREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct rb_result_stream {
	FILE *out; /* NULL: nothing is written */
	size_t steps;
	bool broken; /* a write failed (EPIPE, ENOSPC): the rest is not written */
};

/* Writes `{` and head's members, then `"steps": [`. */
void rb_result_stream_begin(struct rb_result_stream *s, FILE *out, const json_t *head);
/* Writes one step's object (not consumed). */
void rb_result_stream_step(struct rb_result_stream *s, const json_t *step);
/* Writes `]`, tail's members and `}`. */
void rb_result_stream_end(struct rb_result_stream *s, const json_t *tail);

#endif

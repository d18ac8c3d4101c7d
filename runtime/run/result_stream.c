/* A manifest run's result, streamed (see result_stream.h). */
#define _GNU_SOURCE
#include "runtime/run/result_stream.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/jsonout.h"

/* Writes text and flushes, with SIGPIPE blocked: a reader that went away (`| head -1`) makes
 * the write fail with EPIPE instead of killing the runner mid-run. The SIGPIPE that write
 * raised stays pending while blocked and is taken here, so it never arrives later. */
static void put(struct rb_result_stream *s, const char *text, size_t len)
{
	if (!s->out || s->broken)
		return;
	sigset_t pipe_only, old;
	sigemptyset(&pipe_only);
	sigaddset(&pipe_only, SIGPIPE);
	sigprocmask(SIG_BLOCK, &pipe_only, &old);
	bool ok = fwrite(text, 1, len, s->out) == len && fflush(s->out) == 0;
	if (!ok) {
		s->broken = true;
		const struct timespec now = {0, 0};
		while (sigtimedwait(&pipe_only, NULL, &now) == SIGPIPE)
			;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* o as printed JSON: DEL and the C1 controls escaped too (common/jsonout.h). */
static char *dump(const json_t *o)
{
	_cleanup_free_ char *text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | RB_JSON_REAL_PRECISION);
	return text ? rb_json_escape_controls(text) : NULL;
}

/* The object's members without its braces and the last newline: "\n  \"k\": v,\n  ..."
 * (JSON_INDENT(2)); nothing for an empty object. */
static void put_members(struct rb_result_stream *s, const json_t *o)
{
	if (!json_object_size(o))
		return;
	char *text = dump(o);
	if (!text) {
		s->broken = true;
		return;
	}
	size_t len = strlen(text); /* "{\n  ...\n}" */
	if (len >= 4)
		put(s, text + 1, len - 3);
	free(text);
}

static void put_str(struct rb_result_stream *s, const char *text)
{
	put(s, text, strlen(text));
}

void rb_result_stream_begin(struct rb_result_stream *s, FILE *out, const json_t *head)
{
	*s = (struct rb_result_stream){.out = out};
	put_str(s, "{");
	put_members(s, head);
	put_str(s, json_object_size(head) ? ",\n  \"steps\": [" : "\n  \"steps\": [");
}

void rb_result_stream_step(struct rb_result_stream *s, const json_t *step)
{
	char *text = dump(step);
	if (!text) {
		s->broken = true;
		return;
	}
	put_str(s, s->steps++ ? ",\n" : "\n");
	put_str(s, text);
	free(text);
}

void rb_result_stream_end(struct rb_result_stream *s, const json_t *tail)
{
	put_str(s, s->steps ? "\n  ]" : "]");
	if (json_object_size(tail))
		put_str(s, ",");
	put_members(s, tail);
	put_str(s, "\n}\n");
}

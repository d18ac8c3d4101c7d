/* An incremental reader and rewriter of a text/event-stream (the WHATWG "server-sent events"
 * format): bytes in any split, each complete event handed to a callback with its data, the
 * event written out again with the data the callback returns; events bounded in size. */
#ifndef RB_GATEWAY_SSE_H
#define RB_GATEWAY_SSE_H

#include <stddef.h>

#include "scrub/scrub.h"

#define RB_SSE_EVENT_MAX ((size_t)4 * 1024 * 1024) /* an event's bytes, all its lines */

/* What becomes of an event's data: kept as it is, replaced by *out, or dropped (the event's
 * other fields, id and event, are still written so Last-Event-ID stays right). */
enum rb_sse_verdict { RB_SSE_KEEP, RB_SSE_REPLACE, RB_SSE_DROP };

/* data: the event's data lines joined with '\n' (not NUL-terminated; len may be 0). An event
 * with no data line is passed through without a call. < 0: the stream fails (why set). */
typedef int (*rb_sse_event_fn)(void *cls, const char *data, size_t len, struct rb_buf_out *out,
                               enum rb_sse_verdict *verdict, char *why, size_t why_len);

struct rb_sse;

/* max: the event bound (0: RB_SSE_EVENT_MAX). An event's other fields are written again only
 * when they are id, event or retry (a client ignores the rest), their values scrubbed by
 * fields (NULL: as they came): only the data passes the callback. NULL when out of memory. */
struct rb_sse *rb_sse_new(size_t max, rb_sse_event_fn fn, void *cls, struct rb_scrubber *fields);
void rb_sse_free(struct rb_sse *s);
/* Appends to out what the events complete so far become. < 0 (why set): an event over the
 * bound, the callback's failure, or out of memory; the stream is then dead. */
int rb_sse_feed(struct rb_sse *s, const char *p, size_t n, struct rb_buf_out *out, char *why, size_t why_len);
/* The end of the stream: an unfinished last event is discarded, as a client would. */
int rb_sse_finish(struct rb_sse *s, struct rb_buf_out *out, char *why, size_t why_len);

/* Appends n bytes to out; -1 when out of memory. */
int rb_sse_append(struct rb_buf_out *out, const char *p, size_t n);

#endif

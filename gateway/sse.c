/* The event-stream rewriter (see sse.h): pending bytes split into lines (LF, CRLF or CR), an
 * empty line ends an event, whose data lines are joined, judged by the callback and written
 * out as one "data:" line per line of the result; its id, event and retry lines scrubbed. */
#define _GNU_SOURCE
#include "gateway/sse.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rb_sse {
	size_t max;
	rb_sse_event_fn fn;
	void *cls;
	struct rb_scrubber *fields; /* the other fields' values, or NULL */
	char *buf;                  /* the current event's bytes so far */
	size_t len, cap;
	size_t scan;  /* where the unscanned line starts (the lines before it are whole) */
	bool started; /* past a leading byte-order mark */
	bool dead;
};

int rb_sse_append(struct rb_buf_out *out, const char *p, size_t n)
{
	if (!n)
		return 0;
	char *d = realloc(out->data, out->len + n + 1);
	if (!d)
		return -1;
	memcpy(d + out->len, p, n);
	out->len += n;
	d[out->len] = '\0';
	out->data = d;
	return 0;
}

struct rb_sse *rb_sse_new(size_t max, rb_sse_event_fn fn, void *cls, struct rb_scrubber *fields)
{
	struct rb_sse *s = calloc(1, sizeof *s);
	if (s)
		*s = (struct rb_sse){.max = max ? max : RB_SSE_EVENT_MAX, .fn = fn, .cls = cls, .fields = fields};
	return s;
}

void rb_sse_free(struct rb_sse *s)
{
	if (!s)
		return;
	free(s->buf);
	free(s);
}

/* The line at p (n bytes, no terminator): its field name and value (one leading space of the
 * value dropped, as the format says). A comment (leading ':') has the name "". */
static void field(const char *p, size_t n, const char **name, size_t *nl, const char **val, size_t *vl)
{
	const char *colon = memchr(p, ':', n);
	*name = p;
	*nl = colon ? (size_t)(colon - p) : n;
	*val = colon ? colon + 1 : p + n;
	*vl = colon ? n - *nl - 1 : 0;
	if (*vl && **val == ' ')
		(*val)++, (*vl)--;
}

/* Calls f for each line of the event in ev (len bytes, the empty line excluded). */
static void each_line(const char *ev, size_t len, void (*f)(void *, const char *, size_t), void *cls)
{
	size_t i = 0;
	while (i < len) {
		size_t j = i;
		while (j < len && ev[j] != '\n' && ev[j] != '\r')
			j++;
		f(cls, ev + i, j - i);
		if (j < len && ev[j] == '\r' && j + 1 < len && ev[j + 1] == '\n')
			j++;
		i = j + 1;
	}
}

struct ev_walk {
	struct rb_buf_out data;  /* the data lines, joined */
	struct rb_buf_out other; /* id, event, retry lines (comments and others dropped), each with '\n' */
	bool has_data, oom;
};

static void ev_line(void *cls, const char *p, size_t n)
{
	struct ev_walk *w = cls;
	const char *name, *val;
	size_t nl, vl;
	field(p, n, &name, &nl, &val, &vl);
	if (nl == 4 && !memcmp(name, "data", 4)) {
		if (w->has_data && rb_sse_append(&w->data, "\n", 1) < 0)
			w->oom = true;
		if (rb_sse_append(&w->data, val, vl) < 0)
			w->oom = true;
		w->has_data = true;
	} else if ((nl == 2 && !memcmp(name, "id", 2)) || (nl == 5 && !memcmp(name, "event", 5)) ||
	           (nl == 5 && !memcmp(name, "retry", 5))) { /* as a client would read it again */
		if (rb_sse_append(&w->other, p, n) < 0 || rb_sse_append(&w->other, "\n", 1) < 0)
			w->oom = true;
	}
}

/* Writes one data line per line of d (one empty data line for none). */
static int put_data(struct rb_buf_out *out, const char *d, size_t n)
{
	for (size_t i = 0;;) {
		size_t j = i;
		while (j < n && d[j] != '\n' && d[j] != '\r')
			j++;
		if (rb_sse_append(out, "data: ", 6) < 0 || rb_sse_append(out, d + i, j - i) < 0 ||
		    rb_sse_append(out, "\n", 1) < 0)
			return -1;
		if (j >= n)
			return 0;
		if (d[j] == '\r' && j + 1 < n && d[j + 1] == '\n')
			j++;
		i = j + 1;
	}
}

static int event(struct rb_sse *s, const char *ev, size_t len, struct rb_buf_out *out, char *why, size_t wn)
{
	struct ev_walk w = {0};
	each_line(ev, len, ev_line, &w);
	int r = 0;
	if (w.oom) {
		snprintf(why, wn, "out of memory");
		r = -1;
		goto done;
	}
	if (s->fields && w.other.len) { /* a redaction holds no line break: the lines stay lines */
		struct rb_buf_out clean = {0};
		struct rb_error err;
		if (rb_scrub_buffer(s->fields, w.other.data, w.other.len, &clean, NULL, &err) < 0) {
			snprintf(why, wn, "scrub: %s", err.msg);
			r = -1;
			goto done;
		}
		free(w.other.data);
		w.other = clean;
	}
	if (!w.has_data) { /* nothing a client dispatches: its fields only */
		if (w.other.len &&
		    (rb_sse_append(out, w.other.data, w.other.len) < 0 || rb_sse_append(out, "\n", 1) < 0))
			r = -1;
		goto done;
	}
	struct rb_buf_out repl = {0};
	enum rb_sse_verdict v = RB_SSE_KEEP;
	if (s->fn(s->cls, w.data.data ? w.data.data : "", w.data.len, &repl, &v, why, wn) < 0) {
		free(repl.data);
		r = -1;
		goto done;
	}
	if (v == RB_SSE_DROP && !w.other.len) {
		free(repl.data);
		goto done;
	}
	if (rb_sse_append(out, w.other.data ? w.other.data : "", w.other.len) < 0)
		r = -1;
	if (r == 0 && v != RB_SSE_DROP)
		r = v == RB_SSE_REPLACE ? put_data(out, repl.data ? repl.data : "", repl.len)
		                        : put_data(out, w.data.data ? w.data.data : "", w.data.len);
	if (r == 0 && rb_sse_append(out, "\n", 1) < 0)
		r = -1;
	free(repl.data);
	if (r < 0)
		snprintf(why, wn, "out of memory");
done:
	free(w.data.data);
	free(w.other.data);
	return r;
}

int rb_sse_feed(struct rb_sse *s, const char *p, size_t n, struct rb_buf_out *out, char *why, size_t why_len)
{
	if (s->dead) {
		snprintf(why, why_len, "the event stream already failed");
		return -1;
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + n + 1)
			cap *= 2;
		char *b = realloc(s->buf, cap);
		if (!b) {
			s->dead = true;
			snprintf(why, why_len, "out of memory");
			return -1;
		}
		s->buf = b, s->cap = cap;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	if (!s->started && s->len >= 3) {
		if (!memcmp(s->buf, "\xef\xbb\xbf", 3)) {
			memmove(s->buf, s->buf + 3, s->len - 3);
			s->len -= 3;
		}
		s->started = true;
	}
	if (!s->started)
		return 0;
	/* Whole lines from scan on; an empty one ends the event. A CR at the end may be half
	 * of a CRLF: wait for the next byte. */
	size_t i = s->scan, ev_start = 0;
	while (i < s->len) {
		size_t j = i;
		while (j < s->len && s->buf[j] != '\n' && s->buf[j] != '\r')
			j++;
		if (j == s->len || (s->buf[j] == '\r' && j + 1 == s->len))
			break;
		size_t next = j + 1 + (s->buf[j] == '\r' && s->buf[j + 1] == '\n');
		if (j == i) { /* an empty line: the event [ev_start, i) is complete */
			if (event(s, s->buf + ev_start, i - ev_start, out, why, why_len) < 0) {
				s->dead = true;
				return -1;
			}
			ev_start = next;
		}
		i = next;
	}
	memmove(s->buf, s->buf + ev_start, s->len - ev_start);
	s->len -= ev_start;
	s->scan = i - ev_start;
	if (s->len > s->max) {
		s->dead = true;
		snprintf(why, why_len, "an event of the stream is over %zu bytes", s->max);
		return -1;
	}
	return 0;
}

int rb_sse_finish(struct rb_sse *s, struct rb_buf_out *out, char *why, size_t why_len)
{
	if (s->dead) {
		snprintf(why, why_len, "the event stream already failed");
		return -1;
	}
	s->len = 0, s->scan = 0; /* an unfinished event is not dispatched by a client either */
	return 0;
}

/* Connector calls: the decision (gateway/decide.h), the upstream's address checked and pinned,
 * the client's credentials stripped and the operator's added, the answer scrubbed and streamed,
 * and the call's record. A call's transfer runs on the thread answering its client, driven by
 * libmicrohttpd's reader (a bounded buffer between them: curl pauses when it is full); a
 * long-lived answer (an event stream) runs on a producer thread of the run's instead, through a
 * socketpair (curl's writes block on it: backpressure). */
#define _GNU_SOURCE
#include "gateway/connector.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "gateway/approval.h"
#include "gateway/curlpool.h"
#include "gateway/decide.h"
#include "gateway/record.h"
#include "gateway/workers.h"

#define READ_BLOCK ((size_t)32 * 1024)
/* Bytes of an answer held for a client that reads slower than the upstream sends: past them
 * curl pauses the transfer. */
#define INLINE_HIGH ((size_t)256 * 1024)

/* ---- secrets ---------------------------------------------------------------------------- */

static bool granted(const struct rb_gw_ctx *ctx, const char *name)
{
	for (unsigned i = 0; i < ctx->n_grants; i++)
		if (!strcmp(ctx->grants[i], name))
			return true;
	return false;
}

/* One door's secrets: out[i] for conns[i], loaded when grant says the run may call it. */
static int load_secrets(const struct rb_gw_ctx *ctx, const struct rb_gw_connector *conns, unsigned n,
                        bool (*grant)(const struct rb_gw_ctx *, const char *), const char *kind,
                        struct rb_gw_secret **outp, struct rb_error *err)
{
	struct rb_gw_secret *out = calloc(n ? n : 1, sizeof *out);
	*outp = out;
	if (!out)
		return rb_error_set(err, ENOMEM, "gateway: secrets");
	for (unsigned i = 0; i < n; i++) {
		const struct rb_gw_connector *c = &conns[i];
		struct rb_gw_secret *s = &out[i];
		if (!grant(ctx, c->name))
			continue;
		struct rb_error e = {0};
		if (rb_gwconf_secret(c, s->value, sizeof s->value, &e) < 0) {
			snprintf(s->error, sizeof s->error, "%s", e.msg);
			rb_warn("gateway: %s; its calls are refused", e.msg);
			continue;
		}
		s->len = strlen(s->value);
		char label[RB_SCRUB_LABEL_MAX + 1];
		snprintf(label, sizeof label, "%s.%.29s", kind, c->name);
		/* Basic's password alone is scrubbed too: "user:" is no secret, the rest is. */
		struct rb_scrub_secret sec[2] = {{label, s->value, s->len}};
		size_t ns = 1;
		const char *colon = c->inject == RB_INJECT_BASIC ? strchr(s->value, ':') : NULL;
		if (colon && strlen(colon + 1) >= RB_SCRUB_MIN_SECRET)
			sec[ns++] = (struct rb_scrub_secret){label, colon + 1, strlen(colon + 1)};
		if (rb_scrub_new_labeled(sec, ns, &s->scrub, &e) < 0) {
			OPENSSL_cleanse(s->value, sizeof s->value);
			s->len = 0;
			snprintf(s->error, sizeof s->error, "%s `%s`: credential refused: %s", kind, c->name, e.msg);
			rb_warn("gateway: %s; its calls are refused", s->error);
		}
	}
	return 0;
}

static bool mcp_granted(const struct rb_gw_ctx *ctx, const char *name)
{
	for (unsigned i = 0; i < ctx->n_mcp_grants; i++)
		if (!strcmp(ctx->mcp_grants[i].name, name))
			return true;
	return false;
}

int rb_gw_secrets_load(struct rb_gw_ctx *ctx, struct rb_error *err)
{
	const struct rb_gwconf *k = ctx->conf;
	if (load_secrets(ctx, k ? k->connectors : NULL, k ? k->n_connectors : 0, granted, "connector", &ctx->secrets,
	                 err) < 0 ||
	    load_secrets(ctx, k ? k->mcp : NULL, k ? k->n_mcp : 0, mcp_granted, "mcp", &ctx->mcp_secrets, err) < 0) {
		rb_gw_secrets_free(ctx);
		return -1;
	}
	return 0;
}

static void free_secrets(struct rb_gw_secret *s, unsigned n)
{
	for (unsigned i = 0; s && i < n; i++) {
		rb_scrub_free(s[i].scrub);
		OPENSSL_cleanse(s[i].value, sizeof s[i].value);
	}
	free(s);
}

void rb_gw_secrets_free(struct rb_gw_ctx *ctx)
{
	free_secrets(ctx->secrets, ctx->conf ? ctx->conf->n_connectors : 0);
	free_secrets(ctx->mcp_secrets, ctx->conf ? ctx->conf->n_mcp : 0);
	ctx->secrets = ctx->mcp_secrets = NULL;
}

/* ---- records and denials ---------------------------------------------------------------- */

void rb_gw_record(const struct rb_gw_ctx *ctx, json_t *ev)
{
	if (ctx->event_fd < 0 || !ev) {
		json_decref(ev);
		return;
	}
	json_t *line = json_pack("{s:o}", "call", ev);
	_cleanup_free_ char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
	json_decref(line);
	if (!text)
		return;
	size_t n = strlen(text);
	text[n] = '\n'; /* the NUL becomes the line's end: one write per record */
	pthread_mutex_lock(ctx->event_lock);
	for (size_t off = 0; off <= n;) {
		ssize_t w = write(ctx->event_fd, text + off, n + 1 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	pthread_mutex_unlock(ctx->event_lock);
}

static json_t *record_new(const char *door, const char *connector, const char *method, unsigned status,
                          const char *rule, const char *host, uint64_t t0_us)
{
	return json_pack("{s:s, s:s?, s:s, s:i, s:s?, s:s?, s:f}", "door", door, "connector", connector, "method",
	                 method, "status", (int)status, "rule", rule, "host", host, "gateway_ms",
	                 (double)(rb_now_us() - t0_us) / 1000);
}

json_t *rb_gw_record_new(const char *door, const char *name, const char *method, unsigned status, const char *rule,
                         const char *host, uint64_t t0_us)
{
	return record_new(door, name, method, status, rule, host, t0_us);
}

enum MHD_Result rb_gw_respond_json(struct MHD_Connection *mc, unsigned status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return MHD_NO;
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == 401)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"runbox\"");
	if (status == 429)
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
	enum MHD_Result ret = MHD_queue_response(mc, status, r);
	MHD_destroy_response(r);
	return ret;
}

enum MHD_Result rb_gw_deny(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, unsigned status, const char *door,
                           const char *connector, const char *method, const char *rule, const char *host,
                           const char *error, const char *hint, uint64_t t0_us)
{
	__atomic_add_fetch(ctx->refused, 1, __ATOMIC_RELAXED);
	json_t *ev = record_new(door, connector, method, status, rule, host, t0_us);
	if (ev) {
		json_object_set_new(ev, "refused", json_true());
		json_object_set_new(ev, "error", json_string(error));
		json_object_set_new(ev, "hint", json_string(hint));
	}
	rb_gw_record(ctx, ev);
	return rb_gw_respond_json(
	    mc, status,
	    json_pack("{s:s, s:s, s:s, s:s}", "error", error, "rule", rule, "host", host ? host : "", "hint", hint));
}

/* ---- forwarding ------------------------------------------------------------------------- */

struct fwd {
	const struct rb_gw_ctx *ctx;
	const struct rb_gw_connector *conn; /* NULL on the proxy door */
	const struct rb_gw_secret *sec;
	const char *door;
	char name[300];        /* the connector, or the proxied host:port */
	struct rb_gw_handle h; /* the transfer's easy handle and its multi (curlpool.h) */
	struct curl_slist *hdrs, *resolve;
	int sp[2];    /* [0]: read by libmicrohttpd's reader; [1]: written by the producer */
	bool started; /* the producer runs (on one of the run's workers) */
	/* On the client's thread (not a stream): the transfer is in h's multi, driven by drive(). */
	bool inl, in_multi, xfer_done, paused;
	char *buf; /* the answer's scrubbed bytes not yet read by the client: [off, len) */
	size_t buf_off, buf_len, buf_cap;
	unsigned progress; /* a callback of curl's ran: drive() returns before waiting */
	bool produced;     /* under lock: the producer is done with f */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool head_done;
	bool headless; /* the transfer ended before a final response's head */
	long status;
	json_t *resp_headers; /* [[name, value], ...] of the final response, unscrubbed */
	struct rb_scrub_stream *ss;
	bool failed;    /* the body did not arrive whole (__atomic: the reader checks it after EOF) */
	bool has_ctype; /* the client sent a Content-Type */
	bool stream;    /* a long-lived answer: no low-speed bound, ends when the gateway stops */
	uint64_t t0, up0, up1, bytes_up, bytes_down;
	CURLcode rc;
	char method[16];
	char host[300];
	const char *route;
	char errbuf[CURL_ERROR_SIZE];
	struct rb_idem_entry *idem; /* the key this call holds, or NULL */
	json_t *approval;           /* the approval's record, when it was held */
	const char *const *drop;    /* client headers not forwarded beyond stripped()'s */
	const struct rb_gw_filter *filter;
	void *filter_cls;
	json_t *extra;                     /* the door's fields for the record */
	char pool_key[RB_GW_CURLPOOL_KEY]; /* whose handle h is (take_handle) */
	bool reusable; /* the transfer ended whole: its handle (and connection) go back to the pool */
};

static bool resp_dropped(const char *name);
static bool value_ok(const char *v);

static void head_complete(struct fwd *f)
{
	/* The filter sees the head on the producer's thread, before any body byte, and before
	 * the handler reads the headers (under the lock below). */
	if (f->filter && f->filter->head && f->status >= 200 && !f->head_done)
		f->filter->head(f->filter_cls, f->status, f->resp_headers);
	pthread_mutex_lock(&f->lock);
	f->head_done = true;
	pthread_cond_broadcast(&f->cond); /* the handler waits on it, and fwd_free for produced */
	pthread_mutex_unlock(&f->lock);
}

static size_t on_header(char *p, size_t size, size_t n, void *cls)
{
	struct fwd *f = cls;
	size_t len = size * n;
	f->progress++;
	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		const char *sp = memchr(p, ' ', len);
		f->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		json_array_clear(f->resp_headers);
		return len;
	}
	if (len <= 2 && (p[0] == '\r' || p[0] == '\n')) {
		if (f->status >= 200)
			head_complete(f);
		return len;
	}
	const char *colon = memchr(p, ':', len);
	if (!colon)
		return len;
	size_t nl = (size_t)(colon - p), vs = nl + 1;
	while (vs < len && (p[vs] == ' ' || p[vs] == '\t'))
		vs++;
	size_t ve = len;
	while (ve > vs && (p[ve - 1] == '\r' || p[ve - 1] == '\n' || p[ve - 1] == ' '))
		ve--;
	json_array_append_new(f->resp_headers, json_pack("[s%, s%]", p, nl, p + vs, ve - vs));
	return len;
}

/* The answer as the client gets it, kept for a retry with the same key (within the table's
 * bounds, idem.h; past them the key's retries get 409). Only this call's producer writes. */
static void keep(struct fwd *f, const char *p, size_t n)
{
	if (f->idem)
		rb_idem_keep(f->ctx->idem, f->idem, p, n);
}

/* The head as the client gets it: hop-by-hop dropped, scrubbed; NULL on the proxy door. */
static json_t *client_headers(const struct fwd *f)
{
	json_t *out = json_array();
	size_t i;
	json_t *h;
	json_array_foreach(f->resp_headers, i, h)
	{
		const char *hn = json_string_value(json_array_get(h, 0)), *hv = json_string_value(json_array_get(h, 1));
		if (!hn || !hv || resp_dropped(hn) || !value_ok(hn) || !value_ok(hv))
			continue;
		struct rb_buf_out sn = {0}, sv = {0};
		struct rb_error err;
		if (!f->sec)
			json_array_append_new(out, json_pack("[s, s]", hn, hv));
		else if (rb_scrub_buffer(f->sec->scrub, hn, strlen(hn), &sn, NULL, &err) == 0 &&
		         rb_scrub_buffer(f->sec->scrub, hv, strlen(hv), &sv, NULL, &err) == 0)
			json_array_append_new(out, json_pack("[s, s]", sn.data, sv.data));
		free(sn.data);
		free(sv.data);
	}
	return out;
}

/* Answer bytes toward the client: into the buffer its reader drains, or the producer's
 * socketpair. false: the client is gone (or no memory). */
static bool emit(struct fwd *f, const char *p, size_t n)
{
	if (!f->inl)
		return rb_send_all(f->sp[1], p, n) == 0;
	if (!n)
		return true;
	if (f->buf_off && f->buf_off == f->buf_len)
		f->buf_off = f->buf_len = 0;
	if (f->buf_len + n > f->buf_cap) {
		if (f->buf_off) {
			memmove(f->buf, f->buf + f->buf_off, f->buf_len - f->buf_off);
			f->buf_len -= f->buf_off;
			f->buf_off = 0;
		}
		size_t cap = f->buf_cap ? f->buf_cap : READ_BLOCK;
		while (cap < f->buf_len + n)
			cap *= 2;
		char *nb = cap == f->buf_cap ? f->buf : realloc(f->buf, cap);
		if (!nb)
			return false;
		f->buf = nb;
		f->buf_cap = cap;
	}
	memcpy(f->buf + f->buf_len, p, n);
	f->buf_len += n;
	return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *cls)
{
	struct fwd *f = cls;
	size_t len = size * n;
	f->progress++;
	if (!f->head_done)
		head_complete(f);
	/* The client has not read what came: curl waits (the same bytes come again after). */
	if (f->inl && f->buf_len - f->buf_off >= INLINE_HIGH) {
		f->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	if (!f->ss) { /* the proxy door: no credential to scrub, the bytes pass as they are */
		f->bytes_down += len;
		return emit(f, p, len) ? len : 0;
	}
	struct rb_buf_out out = {0};
	struct rb_error err;
	/* A door's filter scrubs itself, a unit at a time (an event, a message), so that an
	 * event stream is not held back by the stream scrubber's window. */
	if (f->filter ? f->filter->feed(f->filter_cls, p, len, &out, f->errbuf, sizeof f->errbuf) < 0
	              : rb_scrub_stream_feed(f->ss, p, len, &out, &err) < 0) {
		free(out.data);
		return 0; /* nothing unscrubbed leaves: the transfer ends */
	}
	keep(f, out.data, out.len);
	bool ok = emit(f, out.data, out.len);
	f->bytes_down += out.len;
	free(out.data);
	return ok ? len : 0;
}

/* curl's message for the transfer, scrubbed of the credential in place: a message may quote
 * the URL, whose query can hold it. */
static const char *curl_error(struct fwd *f)
{
	if (!f->errbuf[0])
		snprintf(f->errbuf, sizeof f->errbuf, "%s", curl_easy_strerror(f->rc));
	struct rb_buf_out out = {0};
	struct rb_error err;
	if (f->sec && rb_scrub_buffer(f->sec->scrub, f->errbuf, strlen(f->errbuf), &out, NULL, &err) == 0)
		snprintf(f->errbuf, sizeof f->errbuf, "%s", out.data);
	else if (f->sec)
		snprintf(f->errbuf, sizeof f->errbuf, "%s", curl_easy_strerror(f->rc));
	free(out.data);
	return f->errbuf;
}

/* After the transfer (f->rc its outcome): the scrubber's tail, the record, the idempotency
 * key's state, then the end of the answer. */
static void transfer_end(struct fwd *f)
{
	f->up1 = rb_now_us();
	bool headless = !f->head_done;
	f->headless = headless;
	if (headless)
		head_complete(f); /* the handler answers 502 itself and records nothing yet */
	bool whole = f->rc == CURLE_OK;
	if (whole && !headless && f->ss) {
		struct rb_buf_out out = {0};
		struct rb_error err;
		whole = f->filter ? f->filter->finish(f->filter_cls, &out, f->errbuf, sizeof f->errbuf) == 0
		                  : rb_scrub_stream_finish(f->ss, &out, &err) == 0;
		keep(f, out.data, out.len);
		whole = whole && emit(f, out.data, out.len);
		f->bytes_down += out.len;
		free(out.data);
	}
	double up_ms = (double)(f->up1 - f->up0) / 1000;
	json_t *ev =
	    record_new(f->door, f->name, f->method, headless ? 502 : (unsigned)f->status, f->route, f->host, f->t0);
	json_object_set_new(ev, "route", json_string(f->route));
	json_object_set_new(ev, "upstream_ms", json_real(up_ms));
	json_object_set_new(ev, "bytes_up", json_integer((json_int_t)f->bytes_up));
	json_object_set_new(ev, "bytes_down", json_integer((json_int_t)f->bytes_down));
	if (!whole) {
		json_object_set_new(ev, "error", json_string(curl_error(f)));
		__atomic_store_n(&f->failed, true, __ATOMIC_RELEASE);
	}
	if (f->approval)
		json_object_set(ev, "approval", f->approval);
	if (f->extra)
		json_object_update(ev, f->extra);
	if (f->filter && f->filter->record)
		f->filter->record(f->filter_cls, ev);
	/* The key's state before the client sees the end: a retry after the answer replays it;
	 * one that was sent and lost is never sent again. */
	if (f->idem && !headless) {
		f->idem->status = (unsigned)f->status;
		f->idem->headers = client_headers(f);
		rb_idem_set(f->ctx->idem, f->idem, whole ? RB_IDEM_DONE : RB_IDEM_UNKNOWN);
		json_object_set_new(ev, "idempotency", json_string(whole ? "recorded" : "unknown"));
	}
	/* Recorded before the client sees the end: a step that got its answer finds its call in
	 * the record when it ends. */
	if (!headless)
		rb_gw_record(f->ctx, ev);
	else
		json_decref(ev);
	f->reusable = whole && !headless;
	f->xfer_done = true;
	if (!f->inl)
		shutdown(f->sp[1], SHUT_WR);
}

static void *produce(void *cls)
{
	struct fwd *f = cls;
	f->up0 = rb_now_us();
	f->rc = rb_gw_handle_perform(&f->h);
	transfer_end(f);
	return NULL;
}

/* One step of a transfer on the client's thread: what curl can do now, or else a wait of up to
 * a second for its sockets and timers. Its end runs transfer_end. */
static void drive(struct fwd *f)
{
	unsigned seen = f->progress;
	int running = 1;
	CURLMcode mc = curl_multi_perform(f->h.multi, &running);
	if (mc == CURLM_OK && running) {
		if (f->progress != seen)
			return;
		if ((mc = curl_multi_poll(f->h.multi, NULL, 0, 1000, NULL)) == CURLM_OK)
			return;
	}
	f->rc = mc == CURLM_OK ? CURLE_OK : CURLE_RECV_ERROR;
	int q;
	for (CURLMsg *m; mc == CURLM_OK && (m = curl_multi_info_read(f->h.multi, &q));)
		if (m->msg == CURLMSG_DONE && m->easy_handle == f->h.easy)
			f->rc = m->data.result;
	curl_multi_remove_handle(f->h.multi, f->h.easy);
	f->in_multi = false;
	transfer_end(f);
}

/* The producer as a worker's job: says when it is done, as a join would. */
static void *produce_job(void *cls)
{
	struct fwd *f = cls;
	produce(f);
	pthread_mutex_lock(&f->lock);
	f->produced = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static void wait_produced(struct fwd *f)
{
	pthread_mutex_lock(&f->lock);
	while (!f->produced)
		pthread_cond_wait(&f->cond, &f->lock);
	pthread_mutex_unlock(&f->lock);
	f->started = false;
}

/* Until the transfer ended (its producer's, or driven here). */
static void finish(struct fwd *f)
{
	if (f->started)
		wait_produced(f);
	while (f->in_multi)
		drive(f);
}

static void fwd_free(void *cls)
{
	struct fwd *f = cls;
	if (!f)
		return;
	if (f->in_multi) { /* the client went before the answer's end: the call ends so, recorded */
		curl_multi_remove_handle(f->h.multi, f->h.easy);
		f->in_multi = false;
		f->rc = CURLE_WRITE_ERROR;
		snprintf(f->errbuf, sizeof f->errbuf, "the client closed the connection before the answer's end");
		transfer_end(f);
	}
	if (f->sp[0] >= 0)
		close(f->sp[0]); /* a producer still writing gets EPIPE and ends the transfer */
	if (f->started)
		wait_produced(f);
	if (f->sp[1] >= 0)
		close(f->sp[1]);
	rb_gw_curlpool_give(f->ctx->curlpool, f->pool_key, &f->h, f->reusable);
	free(f->buf);
	curl_slist_free_all(f->hdrs);
	curl_slist_free_all(f->resolve);
	json_decref(f->resp_headers);
	json_decref(f->approval);
	json_decref(f->extra);
	if (f->filter && f->filter->free)
		f->filter->free(f->filter_cls);
	rb_scrub_stream_free(f->ss);
	pthread_mutex_destroy(&f->lock);
	pthread_cond_destroy(&f->cond);
	free(f);
}

/* The client's side of a transfer it drives: what the buffer holds, else curl's next bytes. */
static ssize_t inline_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fwd *f = cls;
	while (f->buf_off == f->buf_len && !f->xfer_done) {
		if (f->paused) {
			f->paused = false;
			curl_easy_pause(f->h.easy, CURLPAUSE_CONT); /* may deliver at once, into the buffer */
		} else {
			drive(f);
		}
	}
	size_t n = f->buf_len - f->buf_off;
	if (n) {
		n = n < max ? n : max;
		memcpy(buf, f->buf + f->buf_off, n);
		f->buf_off += n;
		return (ssize_t)n;
	}
	return f->failed ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
}

static ssize_t reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct fwd *f = cls;
	for (;;) {
		ssize_t n = recv(f->sp[0], buf, max, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0)
			return n;
		if (n == 0 && !__atomic_load_n(&f->failed, __ATOMIC_ACQUIRE))
			return MHD_CONTENT_READER_END_OF_STREAM;
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
}

/* Client headers that never go upstream: credentials, hop-by-hop, what curl sets itself. */
static bool stripped(const char *name, const struct rb_gw_connector *c)
{
	static const char *const names[] = {
	    "authorization", "cookie",  "host",           "connection", "keep-alive", "transfer-encoding", "te",
	    "trailer",       "upgrade", "content-length", "expect",     NULL};
	for (unsigned i = c ? 0 : 1; names[i]; i++) /* the proxy door (c NULL) passes Authorization */
		if (!strcasecmp(name, names[i]))
			return true;
	if (!strncasecmp(name, "proxy-", 6))
		return true;
	/* A compressed answer could not be scrubbed: a credentialed door asks for identity. */
	if (c && !strcasecmp(name, "accept-encoding"))
		return true;
	return c && c->inject == RB_INJECT_HEADER && !strcasecmp(name, c->inject_name);
}

static bool resp_dropped(const char *name)
{
	static const char *const names[] = {"connection", "keep-alive", "transfer-encoding", "content-length",
	                                    "te",         "trailer",    "upgrade",           "proxy-authenticate",
	                                    NULL};
	for (unsigned i = 0; names[i]; i++)
		if (!strcasecmp(name, names[i]))
			return true;
	return false;
}

struct hdr_walk {
	struct fwd *f;
	bool bad;
	char bad_name[64];
	bool has_ctype;
};

static bool value_ok(const char *v)
{
	for (; *v; v++)
		if (*v == '\r' || *v == '\n' || (unsigned char)*v < 0x09 || *v == 0x7f)
			return false;
	return true;
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct hdr_walk *w = cls;
	if (!value_ok(key) || (value && !value_ok(value)) || strchr(key, ' ') || strchr(key, ':')) {
		w->bad = true;
		snprintf(w->bad_name, sizeof w->bad_name, "%.60s", key);
		return MHD_NO;
	}
	if (stripped(key, w->f->conn))
		return MHD_YES;
	for (unsigned i = 0; w->f->drop && w->f->drop[i]; i++)
		if (!strcasecmp(key, w->f->drop[i]))
			return MHD_YES;
	if (!strcasecmp(key, "content-type"))
		w->has_ctype = true;
	char *line = NULL;
	if (asprintf(&line, value && *value ? "%s: %s" : "%s;", key, value ? value : "") < 0)
		return MHD_NO;
	w->f->hdrs = curl_slist_append(w->f->hdrs, line);
	free(line);
	return MHD_YES;
}

struct query_walk {
	const struct rb_gw_connector *conn;
	char *q;
	size_t len, cap;
	bool oom;
};

static void q_append(struct query_walk *w, const char *s)
{
	size_t n = strlen(s);
	if (w->len + n + 1 > w->cap) {
		size_t cap = (w->len + n + 1) * 2;
		char *q = realloc(w->q, cap);
		if (!q) {
			w->oom = true;
			return;
		}
		w->q = q, w->cap = cap;
	}
	if (!w->q)
		return;
	memcpy(w->q + w->len, s, n + 1);
	w->len += n;
}

/* The query as sent (the endpoint's unescape is the identity): kept raw, but for the
 * parameter the credential goes into, which the client may not set. */
static int hex_digit(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

/* A byte a query name or value may carry as itself: RFC 3986's unreserved and the sub-delims
 * and ':', '@', '/', '?' that mean nothing in a query, but not '&', '=', '+', '#' or '%'. */
static bool query_literal(unsigned char c)
{
	return (c < 0x80 && isalnum(c)) || (c && strchr("-._~!$'()*,;:@/?", c));
}

/* raw (a name or a value as the client sent it: the endpoint does not unescape) onto w in one
 * canonical spelling: "%XX" decoded and then kept when it is a literal, re-encoded when not; a
 * raw '+' stays a '+' (a space to a form decoder); any other byte that is no literal encoded.
 * So a raw '#' can never end the query (and drop what follows), and what the upstream decodes
 * is what the client meant. */
static void q_append_canonical(struct query_walk *w, const char *raw)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(raw);
	char *out = malloc(3 * n + 1);
	if (!out) {
		w->oom = true;
		return;
	}
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)raw[i];
		int h = c == '%' ? hex_digit(raw[i + 1]) : -1, l = h < 0 ? -1 : hex_digit(raw[i + 2]);
		if (l >= 0) {
			c = (unsigned char)(h * 16 + l);
			i += 2;
		} else if (c == '+') {
			out[o++] = '+';
			continue;
		}
		if (query_literal(c)) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	out[o] = '\0';
	q_append(w, out);
	free(out);
}

/* Whether raw (a query name as sent) decodes to name: "%XX" and '+' as a form decoder reads
 * them, so "k%65y" and "key" are one name to the upstream, and to this check. */
static bool query_name_is(const char *raw, const char *name)
{
	for (size_t i = 0;; i++, name++) {
		int c = (unsigned char)raw[i];
		int h = c == '%' ? hex_digit(raw[i + 1]) : -1, l = h < 0 ? -1 : hex_digit(raw[i + 2]);
		if (l >= 0) {
			c = h * 16 + l;
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c != (unsigned char)*name)
			return false;
		if (!c)
			return true;
	}
}

/* key and value come as the client sent them (the endpoint keeps them escaped): the
 * credential's own name is dropped however the client spelled it. */
static enum MHD_Result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct query_walk *w = cls;
	if (w->conn && w->conn->inject == RB_INJECT_QUERY && query_name_is(key, w->conn->inject_name))
		return MHD_YES;
	q_append(w, w->len ? "&" : "?");
	q_append_canonical(w, key);
	if (value) {
		q_append(w, "=");
		q_append_canonical(w, value);
	}
	return MHD_YES;
}

/* host and port of the connector's URL, its addresses checked, the first pinned for curl. */
static int pin_upstream(struct fwd *f, const char *url, char *why, size_t n)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL;
	int r = -1;
	if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
		snprintf(why, n, "URL `%.200s` does not parse", url);
		goto out;
	}
	snprintf(f->host, sizeof f->host, "%s:%s", host, port);
	char bare[256];
	size_t hl = strlen(host);
	if (host[0] == '[' && hl > 2)
		snprintf(bare, sizeof bare, "%.*s", (int)(hl - 2), host + 1);
	else
		snprintf(bare, sizeof bare, "%s", host);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int g = getaddrinfo(bare, port, &hints, &ai);
	if (g != 0) {
		snprintf(why, n, "resolve `%s`: %s", bare, gai_strerror(g));
		goto out;
	}
	char first[64] = "";
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		if (!rb_gw_address_allowed(f->ctx->conf, a->ai_addr, why, n)) {
			freeaddrinfo(ai);
			goto out;
		}
		if (!first[0]) {
			char t[INET6_ADDRSTRLEN];
			getnameinfo(a->ai_addr, a->ai_addrlen, t, sizeof t, NULL, 0, NI_NUMERICHOST);
			snprintf(first, sizeof first, a->ai_family == AF_INET6 ? "[%s]" : "%s", t);
		}
	}
	freeaddrinfo(ai);
	char entry[400];
	snprintf(entry, sizeof entry, "%s:%s:%s", bare, port, first);
	f->resolve = curl_slist_append(NULL, entry);
	r = f->resolve ? 0 : -1;
out:
	curl_free(host);
	curl_free(port);
	curl_url_cleanup(u);
	return r;
}

/* An easy handle for f's upstream, from the run's pool: keyed by the door and the connector (or
 * the proxied host:port), so a connection only ever carries one connector's calls. */
static bool take_handle(struct fwd *f)
{
	snprintf(f->pool_key, sizeof f->pool_key, "%s %s", f->door, f->name);
	return rb_gw_curlpool_take(f->ctx->curlpool, f->pool_key, &f->h);
}

static char *credential_header(const struct rb_gw_connector *c, const struct rb_gw_secret *s)
{
	char *line = NULL;
	if (c->inject == RB_INJECT_BEARER) {
		if (asprintf(&line, "Authorization: Bearer %s", s->value) < 0)
			return NULL;
	} else if (c->inject == RB_INJECT_HEADER) {
		if (asprintf(&line, "%s: %s", c->inject_name, s->value) < 0)
			return NULL;
	} else if (c->inject == RB_INJECT_BASIC) {
		size_t cap = 4 * ((s->len + 2) / 3) + 1;
		char *b64 = malloc(cap);
		if (!b64)
			return NULL;
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)s->value, (int)s->len);
		int r = asprintf(&line, "Authorization: Basic %s", b64);
		OPENSSL_cleanse(b64, cap);
		free(b64);
		if (r < 0)
			return NULL;
	}
	return line;
}

/* A stream's transfer ends once the gateway stops (curl calls this about once a second). */
static int on_progress(void *cls, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct fwd *f = cls;
	struct pollfd p = {.fd = f->ctx->stop_fd, .events = POLLIN};
	return f->ctx->stop_fd >= 0 && poll(&p, 1, 0) > 0;
}

/* Sends f's request to url and answers the client: the head once the upstream's came, the body
 * streamed by libmicrohttpd's reader from the producer's socketpair. Consumes f. */
static enum MHD_Result forward(struct fwd *f, struct MHD_Connection *mc, const char *url, const char *method,
                               const char *body, size_t body_len)
{
	CURL *c = f->h.easy;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect goes back to the client, uncredentialed */
	curl_easy_setopt(c, CURLOPT_PROXY, "");          /* the gateway's own environment names no proxy */
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_RESOLVE, f->resolve); /* the address checked above, nothing else */
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	/* curl sends a request again when a reused connection dies before any answer byte: a call
	 * that holds an Idempotency-Key or an approval is sent at most once, so on a new one. */
	if (f->idem || f->approval)
		curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
	if (!f->stream) {
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	} else { /* an event stream may idle: it ends with the gateway instead */
		curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(c, CURLOPT_XFERINFODATA, f);
		curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	}
	if (f->conn) /* the connector's whole-call bound: past it the outcome is unknown */
		curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)f->conn->timeout_s);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, f->hdrs);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, f);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, f->errbuf);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0 || body_len) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
		curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, body_len ? body : "");
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	f->bytes_up = body_len;
	rb_gw_record_sent(f->ctx, &(struct rb_gw_sent){f->door, f->name, method, f->host, f->route, url, body_len},
	                  &f->extra); /* before any byte leaves; the completion carries its id (extra) */
	if (!f->stream) {             /* driven here until its head, then by the client's reads */
		f->inl = true;
		f->up0 = rb_now_us();
		if (curl_multi_add_handle(f->h.multi, c) != CURLM_OK) {
			fwd_free(f);
			return MHD_NO;
		}
		f->in_multi = true;
		while (!f->head_done && f->in_multi)
			drive(f);
	} else {
		if (rb_gw_workers_run(f->ctx->workers, produce_job, f) < 0) {
			fwd_free(f);
			return MHD_NO;
		}
		f->started = true;
		pthread_mutex_lock(&f->lock);
		while (!f->head_done)
			pthread_cond_wait(&f->cond, &f->lock);
		pthread_mutex_unlock(&f->lock);
	}

	if (f->headless || f->status < 200) { /* no answer from the upstream */
		finish(f);
		const struct rb_gw_ctx *ctx = f->ctx;
		const char *door = f->door;
		uint64_t t0 = f->t0;
		char name[sizeof f->name];
		snprintf(name, sizeof name, "%s", f->name);
		char e[400], host[sizeof f->host];
		snprintf(e, sizeof e, "upstream: %s", curl_error(f));
		snprintf(host, sizeof host, "%s", f->host);
		/* Never connected: nothing was sent, a retry may send. Else it may have arrived. */
		bool lost = f->idem && f->rc != CURLE_COULDNT_CONNECT && f->rc != CURLE_COULDNT_RESOLVE_HOST;
		if (f->idem)
			lost ? rb_idem_set(ctx->idem, f->idem, RB_IDEM_UNKNOWN) : rb_idem_forget(ctx->idem, f->idem);
		json_t *approval = json_incref(f->approval);
		json_t *extra = json_incref(f->extra);
		fwd_free(f);
		json_t *ev = record_new(door, name, method, 502, "upstream", host, t0);
		if (extra)
			json_object_update(ev, extra);
		json_decref(extra);
		json_object_set_new(ev, "error", json_string(e));
		if (approval)
			json_object_set_new(ev, "approval", approval);
		if (lost)
			json_object_set_new(ev, "idempotency", json_string("unknown"));
		rb_gw_record(ctx, ev);
		return rb_gw_respond_json(mc, 502,
		                          json_pack("{s:s, s:s, s:s, s:s}", "error", e, "rule", "upstream", "host",
		                                    host, "hint",
		                                    "the connector's upstream did not answer; retry later"));
	}
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, READ_BLOCK,
	                                                           f->inl ? inline_reader : reader, f, fwd_free);
	if (!r) {
		fwd_free(f);
		return MHD_NO;
	}
	size_t i;
	json_t *h;
	json_array_foreach(f->resp_headers, i, h)
	{
		const char *hn = json_string_value(json_array_get(h, 0)), *hv = json_string_value(json_array_get(h, 1));
		if (!hn || !hv || resp_dropped(hn) || !value_ok(hn) || !value_ok(hv))
			continue;
		struct rb_buf_out sn = {0}, sv = {0};
		struct rb_error err;
		if (!f->sec)
			MHD_add_response_header(r, hn, hv);
		else if (rb_scrub_buffer(f->sec->scrub, hn, strlen(hn), &sn, NULL, &err) == 0 &&
		         rb_scrub_buffer(f->sec->scrub, hv, strlen(hv), &sv, NULL, &err) == 0)
			MHD_add_response_header(r, sn.data, sv.data);
		free(sn.data);
		free(sv.data);
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(mc, (unsigned)f->status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result replay(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const struct rb_idem_entry *e,
                              const char *door, const char *name, const char *method, const char *route,
                              const char *host, uint64_t t0_us)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(e->len, e->body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	size_t i;
	json_t *h;
	json_array_foreach(e->headers, i, h)
	{
		MHD_add_response_header(r, json_string_value(json_array_get(h, 0)),
		                        json_string_value(json_array_get(h, 1)));
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(r, "Idempotent-Replayed", "true");
	json_t *ev = record_new(door, name, method, e->status, route, host, t0_us);
	json_object_set_new(ev, "route", json_string(route));
	json_object_set_new(ev, "idempotency", json_string("replayed"));
	json_object_set_new(ev, "bytes_down", json_integer((json_int_t)e->len));
	rb_gw_record(ctx, ev);
	enum MHD_Result ret = MHD_queue_response(mc, e->status, r);
	MHD_destroy_response(r);
	return ret;
}

bool rb_gw_idem_key_ok(const char *k)
{
	size_t n = strlen(k);
	for (const char *p = k; *p; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			return false;
	return n > 0 && n <= 255;
}

enum MHD_Result rb_gw_idem_claim(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *door,
                                 const char *name, const char *method, const char *ikey, const char *digest, bool held,
                                 const char *route, const char *host, uint64_t t0_us, struct rb_idem_entry **out,
                                 bool *answered)
{
	char key[65];
	/* the door too: a connector and an MCP server of one name hold apart keys */
	const char *parts[4] = {door, name, ikey ? "key" : "digest", ikey ? ikey : digest};
	size_t lens[4] = {strlen(parts[0]), strlen(parts[1]), strlen(parts[2]), strlen(parts[3])};
	rb_idem_hash(parts, lens, 4, key);
	struct rb_idem_entry *e;
	*answered = true;
	char err[300];
	switch (rb_idem_claim(ctx->idem, key, digest, held ? RB_IDEM_PENDING : RB_IDEM_IN_FLIGHT, &e)) {
	case RB_IDEM_NEW:
		*out = e;
		*answered = false;
		return MHD_YES;
	case RB_IDEM_REPLAY: return replay(ctx, mc, e, door, name, method, route, host, t0_us);
	case RB_IDEM_MISMATCH:
		return rb_gw_deny(ctx, mc, 422, door, name, method, "idempotency", host,
		                  "this Idempotency-Key was used with another request",
		                  "use a new key for a different request", t0_us);
	case RB_IDEM_BUSY:
		snprintf(err, sizeof err, "the first call with this key is %s%s%s",
		         e->approval[0] ? "held for approval " : "still in flight", e->approval, "");
		return rb_gw_deny(ctx, mc, 409, door, name, method, "idempotency", host, err,
		                  e->approval[0] ? "wait for `runbox approve` and retry with the same key"
		                                 : "retry with the same key once the first call answered",
		                  t0_us);
	case RB_IDEM_REFUSED:
		return rb_gw_deny(ctx, mc, 403, door, name, method, "approval", host,
		                  "the first call with this key was denied approval",
		                  "a denied call stays denied; ask for approval again with a new key", t0_us);
	case RB_IDEM_LOST:
		return rb_gw_deny(ctx, mc, 409, door, name, method, "idempotency", host,
		                  e->too_big ? "the first call's answer was too large to keep for a retry"
		                             : "the first call with this key was sent and its outcome is unknown",
		                  "it is never sent again: check the upstream, then use a new key", t0_us);
	case RB_IDEM_FULL: break;
	}
	return rb_gw_deny(ctx, mc, 429, door, name, method, "idempotency", host,
	                  "the run holds too many idempotency keys", "reuse keys or finish the run", t0_us);
}

/* The first APPROVAL_EXCERPT bytes of a body, printable ASCII as is and every other byte as
 * \xNN: what an approver reads of it (with its size; the whole is in args_digest). */
#define APPROVAL_EXCERPT 2048
static json_t *excerpt(const char *b, size_t n)
{
	size_t m = n < APPROVAL_EXCERPT ? n : APPROVAL_EXCERPT;
	char *out = malloc(4 * m + 1);
	if (!out)
		return json_string("");
	size_t o = 0;
	for (size_t i = 0; i < m; i++) {
		unsigned char c = (unsigned char)b[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)sprintf(out + o, "\\x%02x", c);
	}
	out[o] = '\0';
	json_t *s = json_string(out);
	free(out);
	return s;
}

/* Holds the call until `runbox approve` (1), or answers the denial (0). The request names the
 * call as it will be sent: the decided path, the query (before the credential joins it) and
 * the body's size and first bytes; the approval binds to that one held request. */
static int hold(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, struct fwd *f,
                const struct rb_policy_approval *rule, const char *name, const char *method, const char *path,
                const char *query, const char *body, size_t body_len, const char *digest, const char *tenant,
                const char *agent, const char *uhost, enum MHD_Result *ret)
{
	char id[24], why[300], eff[400];
	rb_gw_approval_id(id);
	snprintf(f->idem->approval, sizeof f->idem->approval, "%s", id);
	snprintf(eff, sizeof eff, "%s %s%s", method, name, path);
	char result[300];
	snprintf(result, sizeof result, "allowed by route %s; held by network.approval for %s", f->route, method);
	json_t *req =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "id", id, "run",
	              ctx->run_id ? ctx->run_id : "", "connector", name, "method", method, "effect", eff, "args_digest",
	              digest, "target", uhost, "tenant", tenant ? tenant : "", "agent", agent ? agent : "",
	              "policy_result", result, "credential_scope", name, "created", (json_int_t)time(NULL), "expires",
	              (json_int_t)time(NULL) + (json_int_t)rule->timeout_s);
	json_object_set_new(req, "query", json_string(query ? query : ""));
	json_object_set_new(req, "body_bytes", json_integer((json_int_t)body_len));
	json_object_set_new(req, "body_excerpt", excerpt(body ? body : "", body ? body_len : 0));
	json_t *ev = record_new("connector", name, method, 202, f->route, uhost, f->t0);
	json_object_set_new(ev, "approval", json_pack("{s:O, s:s}", "request", req, "state", "requested"));
	rb_gw_record(ctx, ev);
	int d = ctx->approvals_dir
	            ? rb_gw_approval_wait(ctx->approvals_dir, id, req, rule->timeout_s, ctx->stop_fd, why, sizeof why)
	            : -2;
	if (!ctx->approvals_dir)
		snprintf(why, sizeof why, "the gateway has no approvals directory");
	json_decref(req);
	const char *state = d == 1 ? "approved" : d == 0 ? "denied" : d == -1 ? "expired" : "error";
	f->approval = json_pack("{s:s, s:s}", "id", id, "state", state);
	if (d == 1) {
		rb_idem_set(ctx->idem, f->idem, RB_IDEM_IN_FLIGHT);
		return 1;
	}
	rb_idem_set(ctx->idem, f->idem, RB_IDEM_DENIED);
	__atomic_add_fetch(ctx->refused, 1, __ATOMIC_RELAXED);
	char e[400];
	snprintf(e, sizeof e, "%s %s%s was held for approval %s: %s", method, name, path, id, why);
	ev = record_new("connector", name, method, 403, "approval", uhost, f->t0);
	json_object_set_new(ev, "refused", json_true());
	json_object_set_new(ev, "error", json_string(e));
	json_object_set_new(ev, "hint", json_string("the call needs `runbox approve ID` on the host"));
	json_object_set(ev, "approval", f->approval);
	rb_gw_record(ctx, ev);
	*ret = rb_gw_respond_json(mc, 403,
	                          json_pack("{s:s, s:s, s:s, s:s, s:s}", "error", e, "rule", "approval", "host", uhost,
	                                    "hint", "the call needs `runbox approve ID` on the host", "approval", id));
	return 0;
}

const struct rb_gw_secret *rb_gw_secret_of(const struct rb_gw_ctx *ctx, const struct rb_gw_connector *c)
{
	const struct rb_gwconf *k = ctx->conf;
	if (!k || !c)
		return NULL;
	if (c >= k->connectors && c < k->connectors + k->n_connectors)
		return &ctx->secrets[c - k->connectors];
	if (ctx->mcp_secrets && c >= k->mcp && c < k->mcp + k->n_mcp)
		return &ctx->mcp_secrets[c - k->mcp];
	return NULL;
}

void rb_gw_upstream_host(const struct rb_gw_connector *c, char *out, size_t n)
{
	const char *h = c ? strstr(c->url, "://") : NULL;
	if (!h) {
		snprintf(out, n, "%s", "");
		return;
	}
	h += 3;
	snprintf(out, n, "%.*s", (int)strcspn(h, "/"), h);
}

/* The start every credentialed door shares: the credential there, the upstream's address
 * checked and pinned, the client's headers taken (stripped: stripped(), and drop), its query
 * kept in *qw. NULL when refused (*ret the denial's answer). */
static struct fwd *credentialed_begin(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *door,
                                      const struct rb_gw_connector *conn, const char *name, const char *method,
                                      const char *route, const char *const *drop, struct query_walk *qw, uint64_t t0_us,
                                      enum MHD_Result *ret)
{
	char uhost[256];
	rb_gw_upstream_host(conn, uhost, sizeof uhost);
	const struct rb_gw_secret *sec = rb_gw_secret_of(ctx, conn);
	if (!sec || sec->error[0] || !sec->len) {
		char e[300];
		snprintf(e, sizeof e, "%s `%s`: its credential is not available to the gateway",
		         strcmp(door, "mcp") ? "connector" : "MCP server", name);
		*ret = rb_gw_deny(ctx, mc, 403, door, name, method, "credential", uhost, e,
		                  "the operator's credential for this connector is missing or refused; the gateway "
		                  "log and the run's record say why",
		                  t0_us);
		return NULL;
	}
	*ret = MHD_NO;
	struct fwd *f = calloc(1, sizeof *f);
	if (!f)
		return NULL;
	f->sp[0] = f->sp[1] = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->ctx = ctx, f->conn = conn, f->sec = sec, f->t0 = t0_us, f->route = route, f->door = door, f->drop = drop;
	snprintf(f->name, sizeof f->name, "%s", name);
	snprintf(f->method, sizeof f->method, "%s", method);
	f->resp_headers = json_array();
	char why[300];
	struct hdr_walk hw = {.f = f};
	if (pin_upstream(f, conn->url, why, sizeof why) < 0) {
		char host[sizeof f->host];
		snprintf(host, sizeof host, "%s", f->host);
		fwd_free(f);
		*ret = rb_gw_deny(ctx, mc, 403, door, name, method, "address", host, why,
		                  "the connector's upstream resolves to an address the gateway does not reach; the "
		                  "operator may name it in private_upstreams",
		                  t0_us);
		return NULL;
	}
	MHD_get_connection_values(mc, MHD_HEADER_KIND, add_header, &hw);
	if (hw.bad) {
		char e[200], host[sizeof f->host];
		snprintf(e, sizeof e, "header `%s` holds a line break or control byte", hw.bad_name);
		snprintf(host, sizeof host, "%s", f->host);
		fwd_free(f);
		*ret = rb_gw_deny(ctx, mc, 403, door, name, method, "header", host, e,
		                  "send header values without CR, LF or control bytes", t0_us);
		return NULL;
	}
	f->has_ctype = hw.has_ctype;
	*qw = (struct query_walk){.conn = conn};
	MHD_get_connection_values(mc, MHD_GET_ARGUMENT_KIND, add_arg, qw);
	return f;
}

/* The end every credentialed door shares: the credential joins the query or the headers, the
 * URL is the upstream's with upstream_path and the kept query, and the call goes out. Consumes f
 * and qw's query. */
static enum MHD_Result credentialed_send(struct fwd *f, struct MHD_Connection *mc, struct query_walk *qw,
                                         const char *upstream_path, const char *method, const char *body,
                                         size_t body_len)
{
	const struct rb_gw_connector *conn = f->conn;
	const struct rb_gw_secret *sec = f->sec;
	struct rb_error err;
	if (conn->inject == RB_INJECT_QUERY) {
		char *enc = curl_easy_escape(NULL, sec->value, (int)sec->len);
		q_append(qw, qw->len ? "&" : "?");
		q_append(qw, conn->inject_name);
		q_append(qw, "=");
		if (enc)
			q_append(qw, enc);
		qw->oom = qw->oom || !enc;
		if (enc) {
			OPENSSL_cleanse(enc, strlen(enc));
			curl_free(enc);
		}
	}
	char *cred = credential_header(conn, sec);
	char *url = NULL;
	bool ok = !qw->oom && (conn->inject == RB_INJECT_QUERY || cred) &&
	          asprintf(&url, "%s%s%s", conn->url, upstream_path, qw->q ? qw->q : "") >= 0;
	if (qw->q) {
		OPENSSL_cleanse(qw->q, qw->len);
		free(qw->q);
		qw->q = NULL;
	}
	if (ok && cred)
		f->hdrs = curl_slist_append(f->hdrs, cred);
	if (cred) {
		OPENSSL_cleanse(cred, strlen(cred));
		free(cred);
	}
	if (ok && !f->has_ctype)
		f->hdrs = curl_slist_append(f->hdrs, "Content-Type:");
	f->hdrs = ok ? curl_slist_append(f->hdrs, "Expect:") : f->hdrs;
	/* The producer's socketpair only for a streamed answer (forward). */
	ok = ok && f->hdrs && take_handle(f) && rb_scrub_stream_new(sec->scrub, &f->ss, &err) == 0 &&
	     (!f->stream || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->sp) == 0);
	if (!ok) {
		if (url) {
			OPENSSL_cleanse(url, strlen(url));
			free(url);
		}
		fwd_free(f);
		return MHD_NO;
	}
	enum MHD_Result r = forward(f, mc, url, method, body, body_len);
	OPENSSL_cleanse(url, strlen(url)); /* curl keeps its own copy */
	free(url);
	return r;
}

const char *rb_gw_door_name(const char *rest, char name[RB_GWCONF_NAME_MAX])
{
	const char *slash = strchr(rest, '/');
	size_t nl = slash ? (size_t)(slash - rest) : strlen(rest);
	snprintf(name, RB_GWCONF_NAME_MAX, "%.*s", (int)(nl < RB_GWCONF_NAME_MAX ? nl : RB_GWCONF_NAME_MAX - 1), rest);
	return rest + nl;
}

enum MHD_Result rb_gw_connector_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *rest,
                                     const char *method, const char *body, size_t body_len, const char *tenant,
                                     const char *agent, uint64_t t0_us)
{
	char name[RB_GWCONF_NAME_MAX];
	struct rb_gw_request rq = {.connector = name,
	                           .method = method,
	                           .raw_path = rb_gw_door_name(rest, name),
	                           .conf = ctx->conf,
	                           .grants = ctx->grants,
	                           .n_grants = ctx->n_grants,
	                           .tenant = tenant,
	                           .agent = agent};
	struct rb_gw_verdict v;
	rb_gw_decide(&rq, &v);
	char uhost[256] = ""; /* the upstream's host[:port] as configured, for the record and the denial */
	rb_gw_upstream_host(v.conn, uhost, sizeof uhost);
	if (v.status || !v.conn)
		return rb_gw_deny(ctx, mc, v.status ? v.status : 500, "connector", name, method,
		                  v.status ? v.rule : "internal", uhost, v.status ? v.error : "no connector decided",
		                  v.status ? v.hint : "report this to the operator", t0_us);
	struct query_walk qw;
	enum MHD_Result ret;
	struct fwd *f = credentialed_begin(ctx, mc, "connector", v.conn, name, method, v.route, NULL, &qw, t0_us, &ret);
	if (!f)
		return ret;
	/* Idempotency and approval, before the credential joins the query: the request's digest
	 * (method, normalized path, query, body) is what a retry must repeat. */
	const char *ikey = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Idempotency-Key");
	const struct rb_policy_approval *rule = rb_gw_approval_rule(ctx->approvals, ctx->n_approvals, name, method);
	char digest[65];
	const char *dparts[4] = {method, v.path, qw.q ? qw.q : "", body ? body : ""};
	size_t dlens[4] = {strlen(method), strlen(v.path), qw.q ? qw.len : 0, body ? body_len : 0};
	rb_idem_hash(dparts, dlens, 4, digest);
	if ((ikey || rule) && ctx->idem) {
		char host[sizeof f->host];
		snprintf(host, sizeof host, "%s", f->host);
		if (ikey && !rb_gw_idem_key_ok(ikey)) {
			free(qw.q);
			fwd_free(f);
			return rb_gw_deny(ctx, mc, 400, "connector", name, method, "idempotency", host,
			                  "Idempotency-Key is 1..255 visible ASCII bytes", "send a shorter, plain key",
			                  t0_us);
		}
		bool answered;
		ret = rb_gw_idem_claim(ctx, mc, "connector", name, method, ikey, digest, rule != NULL, v.route, host,
		                       t0_us, &f->idem, &answered);
		if (answered) {
			free(qw.q);
			fwd_free(f);
			return ret;
		}
		if (rule && !hold(ctx, mc, f, rule, name, method, v.upstream_path, qw.q, body, body_len, digest, tenant,
		                  agent, host, &ret)) {
			free(qw.q);
			fwd_free(f);
			return ret;
		}
	}
	return credentialed_send(f, mc, &qw, v.upstream_path, method, body, body_len);
}

enum MHD_Result rb_gw_upstream_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc,
                                    const struct rb_gw_upstream *u)
{
	struct query_walk qw;
	enum MHD_Result ret;
	struct fwd *f =
	    credentialed_begin(ctx, mc, u->door, u->conn, u->name, u->method, u->route, u->drop, &qw, u->t0_us, &ret);
	if (!f) {
		json_decref(u->extra);
		if (u->filter && u->filter->free)
			u->filter->free(u->filter_cls);
		if (u->idem) /* refused before it left: a retry may send */
			rb_idem_forget(ctx->idem, u->idem);
		return ret;
	}
	f->filter = u->filter, f->filter_cls = u->filter_cls, f->extra = u->extra, f->stream = u->stream;
	f->idem = u->idem;
	for (unsigned i = 0; u->add && u->add[i]; i++)
		f->hdrs = curl_slist_append(f->hdrs, u->add[i]);
	return credentialed_send(f, mc, &qw, u->upstream_path, u->method, u->body, u->body_len);
}

enum MHD_Result rb_gw_proxy_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *body, size_t body_len, uint64_t t0_us)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *scheme = NULL;
	char hp[300] = "";
	bool parsed = u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	              curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK && !strcmp(scheme, "http") &&
	              curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
	              curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK;
	bool userinfo = parsed && strchr(url + 7, '@') && strchr(url + 7, '@') < strchr(url + 7, '/');
	struct rb_gw_verdict v = {0};
	if (parsed) {
		for (char *c = host; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		snprintf(hp, sizeof hp, "%s:%s", host, port);
		struct rb_gw_request rq = {.door = RB_GW_DOOR_PROXY,
		                           .method = method,
		                           .host = host,
		                           .port = (unsigned)strtoul(port, NULL, 10),
		                           .proxy = ctx->proxy,
		                           .n_proxy = ctx->n_proxy};
		rb_gw_decide(&rq, &v);
	}
	curl_free(host);
	curl_free(port);
	curl_free(scheme);
	curl_url_cleanup(u);
	if (!parsed || userinfo)
		return rb_gw_deny(ctx, mc, 403, "proxy", NULL, method, "url", hp,
		                  "the request's URL is not plain http://host[:port]/path",
		                  "the proxy forwards absolute-form http:// requests without userinfo", t0_us);
	if (v.status)
		return rb_gw_deny(ctx, mc, v.status, "proxy", hp, method, v.rule, hp, v.error, v.hint, t0_us);

	struct fwd *f = calloc(1, sizeof *f);
	if (!f)
		return MHD_NO;
	f->sp[0] = f->sp[1] = -1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->ctx = ctx, f->t0 = t0_us, f->route = v.route, f->door = "proxy";
	snprintf(f->name, sizeof f->name, "%s", hp);
	snprintf(f->method, sizeof f->method, "%s", method);
	f->resp_headers = json_array();
	char why[300];
	if (pin_upstream(f, url, why, sizeof why) < 0) {
		fwd_free(f);
		return rb_gw_deny(
		    ctx, mc, 403, "proxy", hp, method, "address", hp, why,
		    "the host resolves to an address the gateway does not reach; the operator may name it in "
		    "the gateway config's private_upstreams",
		    t0_us);
	}
	struct hdr_walk hw = {.f = f};
	MHD_get_connection_values(mc, MHD_HEADER_KIND, add_header, &hw);
	if (hw.bad) {
		char e[200];
		snprintf(e, sizeof e, "header `%s` holds a line break or control byte", hw.bad_name);
		fwd_free(f);
		return rb_gw_deny(ctx, mc, 403, "proxy", hp, method, "header", hp, e,
		                  "send header values without CR, LF or control bytes", t0_us);
	}
	if (!hw.has_ctype)
		f->hdrs = curl_slist_append(f->hdrs, "Content-Type:");
	f->hdrs = curl_slist_append(f->hdrs, "Expect:");
	/* The query, which libmicrohttpd took off the URL: as the client sent it, in one spelling. */
	struct query_walk qw = {0};
	MHD_get_connection_values(mc, MHD_GET_ARGUMENT_KIND, add_arg, &qw);
	char *full = NULL;
	if (qw.oom || asprintf(&full, "%s%s", url, qw.q ? qw.q : "") < 0)
		full = NULL;
	free(qw.q);
	if (!full || !f->hdrs || !take_handle(f) ||
	    (f->stream && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->sp) < 0)) {
		free(full);
		fwd_free(f);
		return MHD_NO;
	}
	enum MHD_Result ret = forward(f, mc, full, method, body, body_len);
	free(full);
	return ret;
}

/* The MCP door (see mcp.h): the request's JSON-RPC messages read and judged (rb_gw_decide, the
 * MCP door; a tools/call's tool on the allowlist), the session id translated, the call sent
 * through the connector's credentialed forwarding, and the answer scrubbed and rewritten
 * (tools/list results filtered, as one JSON body or event by event). */
#define _GNU_SOURCE
#include "gateway/mcp.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "common/cleanup.h"
#include "gateway/approval.h"
#include "gateway/idem.h"
#include "gateway/sse.h"

/* ---- the run's sessions ----------------------------------------------------------------- */

struct session {
	char server[RB_GWCONF_NAME_MAX];
	char local[40];     /* "mcp-" and 32 hex digits: what the sandbox sees */
	char upstream[256]; /* the server's Mcp-Session-Id: never shown to the sandbox */
};

struct rb_gw_mcp_sessions {
	pthread_mutex_t lock;
	struct session s[RB_GW_MCP_SESSIONS];
	unsigned n;
};

struct rb_gw_mcp_sessions *rb_gw_mcp_sessions_new(void)
{
	struct rb_gw_mcp_sessions *t = calloc(1, sizeof *t);
	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

void rb_gw_mcp_sessions_free(struct rb_gw_mcp_sessions *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
}

bool rb_gw_mcp_session_find(struct rb_gw_mcp_sessions *t, const char *server, const char *local, char *out, size_t n)
{
	bool found = false;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n && !found; i++)
		if (!strcmp(t->s[i].server, server) && !strcmp(t->s[i].local, local)) {
			snprintf(out, n, "%s", t->s[i].upstream);
			found = true;
		}
	pthread_mutex_unlock(&t->lock);
	return found;
}

bool rb_gw_mcp_session_map(struct rb_gw_mcp_sessions *t, const char *server, const char *upstream, char *out, size_t n)
{
	bool ok = false;
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n && !ok; i++)
		if (!strcmp(t->s[i].server, server) && !strcmp(t->s[i].upstream, upstream)) {
			snprintf(out, n, "%s", t->s[i].local);
			ok = true;
		}
	if (!ok && t->n == RB_GW_MCP_SESSIONS) { /* the oldest makes room: a client that never ended it */
		memmove(&t->s[0], &t->s[1], (t->n - 1) * sizeof t->s[0]);
		t->n--;
	}
	if (!ok) {
		struct session *s = &t->s[t->n];
		unsigned char r[16] = {0};
		if (getrandom(r, sizeof r, 0) == (ssize_t)sizeof r) {
			snprintf(s->server, sizeof s->server, "%s", server);
			snprintf(s->upstream, sizeof s->upstream, "%s", upstream);
			char *p = s->local + snprintf(s->local, sizeof s->local, "mcp-");
			for (unsigned i = 0; i < sizeof r; i++)
				p += snprintf(p, 3, "%02x", r[i]);
			snprintf(out, n, "%s", s->local);
			t->n++;
			ok = true;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return ok;
}

void rb_gw_mcp_session_forget(struct rb_gw_mcp_sessions *t, const char *server, const char *local)
{
	pthread_mutex_lock(&t->lock);
	for (unsigned i = 0; i < t->n; i++)
		if (!strcmp(t->s[i].server, server) && !strcmp(t->s[i].local, local)) {
			t->s[i] = t->s[--t->n];
			break;
		}
	pthread_mutex_unlock(&t->lock);
}

/* An Mcp-Session-Id as the spec has it: 1..255 visible ASCII bytes. */
static bool session_id_ok(const char *v)
{
	size_t n = strlen(v);
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
			return false;
	return n > 0 && n < 256;
}

/* ---- the tool filter -------------------------------------------------------------------- */

static unsigned filter_one(const struct rb_gw_connector *server, const struct rb_gw_mcp_grant *g, json_t *m,
                           unsigned *kept)
{
	json_t *tools = json_object_get(json_object_get(m, "result"), "tools");
	if (!json_is_object(m) || json_object_get(m, "method") || !json_is_array(tools))
		return 0;
	unsigned removed = 0;
	for (size_t i = 0; i < json_array_size(tools);) {
		const char *name = json_string_value(json_object_get(json_array_get(tools, i), "name"));
		if (name && rb_gw_mcp_tool_allowed(server, g, name)) {
			i++;
			if (kept)
				(*kept)++;
			continue;
		}
		json_array_remove(tools, i);
		removed++;
	}
	return removed;
}

unsigned rb_gw_mcp_filter_tools(const struct rb_gw_connector *server, const struct rb_gw_mcp_grant *g, json_t *msg,
                                unsigned *kept)
{
	if (!json_is_array(msg))
		return filter_one(server, g, msg, kept);
	unsigned removed = 0;
	size_t i;
	json_t *m;
	json_array_foreach(msg, i, m)
	{
		removed += filter_one(server, g, m, kept);
	}
	return removed;
}

/* ---- the answer's rewriter -------------------------------------------------------------- */

enum mode { MODE_PASS, MODE_JSON, MODE_SSE, MODE_REFUSE };

struct mcp_filter {
	const struct rb_gw_ctx *ctx;
	const struct rb_gw_connector *server;
	const struct rb_gw_mcp_grant *grant;
	const struct rb_gw_secret *sec;
	enum mode mode;
	char refuse_why[200];
	struct rb_scrub_stream *ss; /* MODE_PASS: an error answer, scrubbed as a connector's */
	struct rb_sse *sse;
	struct rb_buf_out json; /* MODE_JSON: the body so far */
	char req_session[40];   /* the local session the request named */
	bool deleting;          /* a DELETE: a 2xx ends the session */
	char new_session[40];   /* the local id the answer carries */
	unsigned messages, removed, kept, dropped;
};

static int scrub(const struct mcp_filter *m, const char *p, size_t n, struct rb_buf_out *out, char *why, size_t wn)
{
	struct rb_error err;
	if (rb_scrub_buffer(m->sec->scrub, p, n, out, NULL, &err) < 0) {
		snprintf(why, wn, "scrub: %s", err.msg);
		return -1;
	}
	return 0;
}

/* Every string value in v scrubbed as the client will read it, decoded: a tool's text is JSON
 * inside JSON-RPC's JSON, so an encoding of the credential in it is one level deeper than the
 * wire's scrub sees. */
static int scrub_strings(const struct mcp_filter *m, json_t *v, unsigned depth, char *why, size_t wn)
{
	if (depth > 64) {
		snprintf(why, wn, "an MCP message nests deeper than 64");
		return -1;
	}
	if (json_is_object(v)) {
		const char *k;
		json_t *e;
		json_object_foreach(v, k, e)
		{
			if (scrub_strings(m, e, depth + 1, why, wn) < 0)
				return -1;
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e)
		{
			if (scrub_strings(m, e, depth + 1, why, wn) < 0)
				return -1;
		}
	} else if (json_is_string(v)) {
		struct rb_buf_out o = {0};
		if (scrub(m, json_string_value(v), json_string_length(v), &o, why, wn) < 0)
			return -1;
		int r = o.len != json_string_length(v) || memcmp(o.data ? o.data : "", json_string_value(v), o.len) != 0
		            ? json_string_setn(v, o.data ? o.data : "", o.len)
		            : 0;
		free(o.data);
		if (r < 0) {
			snprintf(why, wn, "out of memory");
			return -1;
		}
	}
	return 0;
}

/* One JSON-RPC payload (scrubbed already): parsed, tools filtered, its strings scrubbed as
 * decoded, written again and scrubbed again (decoding \u escapes can show a form of the
 * credential the first pass could not see). *dropped when it is no JSON. */
static int rewrite(struct mcp_filter *m, const char *p, size_t n, struct rb_buf_out *out, bool *dropped, char *why,
                   size_t wn)
{
	json_error_t jerr;
	*dropped = false;
	_cleanup_json_ json_t *msg = json_loadb(p, n, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg || (!json_is_object(msg) && !json_is_array(msg))) {
		*dropped = true;
		return 0;
	}
	m->messages += json_is_array(msg) ? (unsigned)json_array_size(msg) : 1;
	m->removed += rb_gw_mcp_filter_tools(m->server, m->grant, msg, &m->kept);
	if (scrub_strings(m, msg, 0, why, wn) < 0)
		return -1;
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	if (!text) {
		snprintf(why, wn, "out of memory");
		return -1;
	}
	return scrub(m, text, strlen(text), out, why, wn);
}

static int on_event(void *cls, const char *data, size_t len, struct rb_buf_out *out, enum rb_sse_verdict *v, char *why,
                    size_t wn)
{
	struct mcp_filter *m = cls;
	struct rb_buf_out clean = {0};
	if (scrub(m, data, len, &clean, why, wn) < 0)
		return -1;
	bool dropped = false;
	int r = 0;
	if (!clean.len) {
		*v = RB_SSE_KEEP; /* an empty data line (a priming event): nothing to judge */
	} else {
		r = rewrite(m, clean.data, clean.len, out, &dropped, why, wn);
		*v = dropped ? RB_SSE_DROP : RB_SSE_REPLACE;
		m->dropped += dropped;
	}
	free(clean.data);
	return r;
}

static void f_head(void *cls, long status, json_t *headers)
{
	struct mcp_filter *m = cls;
	const char *ctype = "";
	size_t i;
	json_t *h;
	json_array_foreach(headers, i, h)
	{
		const char *name = json_string_value(json_array_get(h, 0)),
		           *val = json_string_value(json_array_get(h, 1));
		if (!name || !val)
			continue;
		if (!strcasecmp(name, "content-type"))
			ctype = val;
		if (strcasecmp(name, "mcp-session-id") != 0)
			continue;
		/* The upstream's id stays here; the sandbox gets the run's local name for it. */
		char local[40];
		if (!session_id_ok(val) ||
		    !rb_gw_mcp_session_map(m->ctx->mcp_sessions, m->server->name, val, local, sizeof local)) {
			m->mode = MODE_REFUSE;
			snprintf(m->refuse_why, sizeof m->refuse_why, "%s",
			         session_id_ok(val)
			             ? "no random session id could be drawn"
			             : "the MCP server's Mcp-Session-Id is not 1..255 visible ASCII bytes");
			json_array_set_new(h, 1, json_string("invalid"));
			return;
		}
		snprintf(m->new_session, sizeof m->new_session, "%s", local);
		json_array_set_new(h, 1, json_string(local));
	}
	if (m->req_session[0] && (status == 404 || (m->deleting && status >= 200 && status < 300)))
		rb_gw_mcp_session_forget(m->ctx->mcp_sessions, m->server->name, m->req_session);
	if (status < 200 || status >= 300) {
		m->mode = MODE_PASS; /* an error answer: no message to filter, scrubbed as it streams */
		return;
	}
	size_t tl = strcspn(ctype, "; \t");
	if (tl == 17 && !strncasecmp(ctype, "text/event-stream", 17)) {
		m->mode = MODE_SSE;
		m->sse = rb_sse_new(RB_GW_MCP_MESSAGE_MAX, on_event, m, m->sec->scrub);
	} else if (tl == 16 && !strncasecmp(ctype, "application/json", 16)) {
		m->mode = MODE_JSON;
	} else {
		m->mode = MODE_REFUSE; /* fine while the body is empty (202) */
		snprintf(m->refuse_why, sizeof m->refuse_why,
		         "the MCP server answered %ld with Content-Type `%.60s`, not application/json or "
		         "text/event-stream",
		         status, ctype);
	}
}

static int f_feed(void *cls, const char *p, size_t n, struct rb_buf_out *out, char *why, size_t wn)
{
	struct mcp_filter *m = cls;
	struct rb_error err;
	switch (m->mode) {
	case MODE_PASS:
		if (!m->ss && rb_scrub_stream_new(m->sec->scrub, &m->ss, &err) < 0) {
			snprintf(why, wn, "%s", err.msg);
			return -1;
		}
		if (rb_scrub_stream_feed(m->ss, p, n, out, &err) < 0) {
			snprintf(why, wn, "%s", err.msg);
			return -1;
		}
		return 0;
	case MODE_JSON:
		if (m->json.len + n > RB_GW_MCP_MESSAGE_MAX) {
			snprintf(why, wn, "the MCP server's JSON answer is over %zu bytes", RB_GW_MCP_MESSAGE_MAX);
			return -1;
		}
		if (rb_sse_append(&m->json, p, n) < 0) {
			snprintf(why, wn, "out of memory");
			return -1;
		}
		return 0;
	case MODE_SSE:
		if (!m->sse) {
			snprintf(why, wn, "out of memory");
			return -1;
		}
		return rb_sse_feed(m->sse, p, n, out, why, wn);
	case MODE_REFUSE: break;
	}
	if (!n)
		return 0;
	snprintf(why, wn, "%s", m->refuse_why);
	return -1;
}

static int f_finish(void *cls, struct rb_buf_out *out, char *why, size_t wn)
{
	struct mcp_filter *m = cls;
	struct rb_error err;
	switch (m->mode) {
	case MODE_PASS:
		if (m->ss && rb_scrub_stream_finish(m->ss, out, &err) < 0) {
			snprintf(why, wn, "%s", err.msg);
			return -1;
		}
		return 0;
	case MODE_JSON: {
		if (!m->json.len)
			return 0;
		struct rb_buf_out clean = {0};
		bool dropped = false;
		int r = scrub(m, m->json.data, m->json.len, &clean, why, wn);
		if (r == 0)
			r = rewrite(m, clean.data, clean.len, out, &dropped, why, wn);
		free(clean.data);
		if (r == 0 && dropped) {
			snprintf(why, wn, "the MCP server's JSON answer is not a JSON-RPC message");
			return -1;
		}
		return r;
	}
	case MODE_SSE: return m->sse ? rb_sse_finish(m->sse, out, why, wn) : 0;
	case MODE_REFUSE: return 0;
	}
	return 0;
}

static void f_record(void *cls, json_t *ev)
{
	struct mcp_filter *m = cls;
	if (m->new_session[0])
		json_object_set_new(ev, "mcp_session", json_string(m->new_session));
	static const char *const modes[] = {"pass", "json", "sse", "refused"};
	json_object_set_new(ev, "mcp_answer", json_string(modes[m->mode]));
	json_object_set_new(ev, "mcp_answer_messages", json_integer(m->messages));
	if (m->kept || m->removed) {
		json_object_set_new(ev, "tools_listed", json_integer(m->kept));
		json_object_set_new(ev, "tools_removed", json_integer(m->removed));
	}
	if (m->dropped)
		json_object_set_new(ev, "events_dropped", json_integer(m->dropped));
	if (m->mode == MODE_REFUSE && m->refuse_why[0])
		json_object_set_new(ev, "mcp_error", json_string(m->refuse_why));
}

static void f_free(void *cls)
{
	struct mcp_filter *m = cls;
	if (!m)
		return;
	rb_scrub_stream_free(m->ss);
	rb_sse_free(m->sse);
	free(m->json.data);
	free(m);
}

static const struct rb_gw_filter mcp_filter_ops = {f_head, f_feed, f_finish, f_record, f_free};

/* ---- the request ------------------------------------------------------------------------ */

/* A tools/call refused: a JSON-RPC error for each request of the message (a batch is refused
 * whole: none of it is sent), answered 200 so the client's session goes on, and recorded as a
 * refusal. */
static enum MHD_Result refuse_tools(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const json_t *msg,
                                    const struct rb_gw_verdict *v, const char *name, const char *method,
                                    const char *tool, const char *uhost, json_t *approval, uint64_t t0_us)
{
	__atomic_add_fetch(ctx->refused, 1, __ATOMIC_RELAXED);
	json_t *ev = rb_gw_record_new("mcp", name, method, 403, v->rule, uhost, t0_us);
	json_object_set_new(ev, "server", json_string(name));
	json_object_set_new(ev, "mcp_method", json_string(json_is_array(msg) ? "batch" : "tools/call"));
	json_object_set_new(ev, "tool", json_string(tool));
	json_object_set_new(ev, "refused", json_true());
	json_object_set_new(ev, "error", json_string(v->error));
	json_object_set_new(ev, "hint", json_string(v->hint));
	json_object_set_new(ev, "jsonrpc_error", json_integer(-32602));
	if (approval)
		json_object_set_new(ev, "approval", approval);
	rb_gw_record(ctx, ev);
	json_t *out = json_array();
	size_t n = json_is_array(msg) ? json_array_size(msg) : 1;
	for (size_t i = 0; i < n; i++) {
		const json_t *m = json_is_array(msg) ? json_array_get(msg, i) : msg;
		json_t *id = json_object_get(m, "id");
		if (!id || !json_object_get(m, "method"))
			continue; /* a notification or a response gets no answer */
		json_t *data = json_pack("{s:s, s:s, s:s, s:s}", "error", v->error, "rule", v->rule, "host", uhost,
		                         "hint", v->hint);
		json_array_append_new(out, json_pack("{s:s, s:O, s:{s:i, s:s, s:o}}", "jsonrpc", "2.0", "id", id,
		                                     "error", "code", -32602, "message", v->error, "data", data));
	}
	json_t *body = json_is_array(msg) ? out : json_incref(json_array_get(out, 0));
	if (!json_is_array(msg))
		json_decref(out);
	if (!body) /* a tools/call notification: nothing to answer it with */
		return rb_gw_respond_json(mc, 202, json_object());
	return rb_gw_respond_json(mc, 200, body);
}

struct hold_call {
	const struct rb_policy_approval *rule;
	const char *name, *tool, *text, *uhost, *tenant, *agent, *route;
	uint64_t t0_us;
};

/* Holds the call until `runbox approve` (1, *approval its record), or answers the denial as a
 * JSON-RPC error (0, *ret). The request is a connector's (approval.h), with the tool. */
static int hold(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const json_t *msg, const struct hold_call *h,
                json_t **approval, enum MHD_Result *ret)
{
	char id[24], why[300], eff[300], result[300], digest[65];
	rb_gw_approval_id(id);
	const char *parts[1] = {h->text ? h->text : ""};
	size_t lens[1] = {strlen(parts[0])};
	rb_idem_hash(parts, lens, 1, digest);
	snprintf(eff, sizeof eff, "tools/call %s %.200s", h->name, h->tool);
	snprintf(result, sizeof result, "allowed by the tools of MCP server %s; held by network.approval for %.200s",
	         h->name, h->tool);
	json_t *req =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "id", id, "run",
	              ctx->run_id ? ctx->run_id : "", "mcp", h->name, "tool", h->tool, "method", "tools/call", "effect",
	              eff, "args_digest", digest, "target", h->uhost, "tenant", h->tenant ? h->tenant : "", "agent",
	              h->agent ? h->agent : "", "policy_result", result, "credential_scope", h->name, "created",
	              (json_int_t)time(NULL), "expires", (json_int_t)time(NULL) + (json_int_t)h->rule->timeout_s);
	/* What the approver is shown is what will be sent: the tool's arguments as parsed. */
	json_t *args = json_object_get(json_object_get(msg, "params"), "arguments");
	json_object_set_new(req, "arguments", args ? json_deep_copy(args) : json_object());
	json_t *ev = rb_gw_record_new("mcp", h->name, "POST", 202, h->route, h->uhost, h->t0_us);
	json_object_set_new(ev, "server", json_string(h->name));
	json_object_set_new(ev, "mcp_method", json_string("tools/call"));
	json_object_set_new(ev, "tool", json_string(h->tool));
	json_object_set_new(ev, "approval", json_pack("{s:O, s:s}", "request", req, "state", "requested"));
	rb_gw_record(ctx, ev);
	int d = ctx->approvals_dir ? rb_gw_approval_wait(ctx->approvals_dir, id, req, h->rule->timeout_s, ctx->stop_fd,
	                                                 why, sizeof why)
	                           : -2;
	if (!ctx->approvals_dir)
		snprintf(why, sizeof why, "the gateway has no approvals directory");
	json_decref(req);
	const char *state = d == 1 ? "approved" : d == 0 ? "denied" : d == -1 ? "expired" : "error";
	*approval = json_pack("{s:s, s:s}", "id", id, "state", state);
	if (d == 1)
		return 1;
	struct rb_gw_verdict v = {.status = 403, .rule = "approval"};
	snprintf(v.error, sizeof v.error, "tools/call %s %.100s was held for approval %s: %.100s", h->name, h->tool, id,
	         why);
	snprintf(v.hint, sizeof v.hint, "the call needs `runbox approve ID` on the host");
	*ret = refuse_tools(ctx, mc, msg, &v, h->name, "POST", h->tool, h->uhost, *approval, h->t0_us);
	*approval = NULL;
	return 0;
}

static enum MHD_Result bad_message(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *name,
                                   const char *method, const char *uhost, const char *why, uint64_t t0_us)
{
	return rb_gw_deny(ctx, mc, 400, "mcp", name, method, "mcp.jsonrpc", uhost, why,
	                  "POST one JSON-RPC message (or a batch of at most 64) as MCP's Streamable HTTP transport "
	                  "sends it",
	                  t0_us);
}

enum MHD_Result rb_gw_mcp_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *rest,
                               const char *method, const char *body, size_t body_len, const char *tenant,
                               const char *agent, uint64_t t0_us)
{
	char name[RB_GWCONF_NAME_MAX];
	struct rb_gw_request rq = {.door = RB_GW_DOOR_MCP,
	                           .connector = name,
	                           .method = method,
	                           .raw_path = rb_gw_door_name(rest, name),
	                           .conf = ctx->conf,
	                           .mcp_grants = ctx->mcp_grants,
	                           .n_mcp_grants = ctx->n_mcp_grants,
	                           .tenant = tenant,
	                           .agent = agent};
	struct rb_gw_verdict v;
	rb_gw_decide(&rq, &v);
	char uhost[256];
	rb_gw_upstream_host(v.conn, uhost, sizeof uhost);
	if (v.status || !v.conn)
		return rb_gw_deny(ctx, mc, v.status ? v.status : 500, "mcp", name, method,
		                  v.status ? v.rule : "internal", uhost, v.status ? v.error : "no MCP server decided",
		                  v.status ? v.hint : "report this to the operator", t0_us);

	/* The messages: each read as the upstream will read it (one parse, duplicates refused,
	 * sent as the gateway wrote it again), each tools/call's tool decided. */
	_cleanup_json_ json_t *msg = NULL;
	json_t *extra = json_pack("{s:s}", "server", name);
	const char *first_tool = NULL, *held_tool = NULL;
	const struct rb_policy_approval *held = NULL;
	if (!strcmp(method, "POST")) {
		json_error_t jerr;
		msg = body_len ? json_loadb(body, body_len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
		size_t n = json_is_array(msg) ? json_array_size(msg) : 1;
		const char *why = !msg                                          ? "the body is not JSON"
		                  : !json_is_object(msg) && !json_is_array(msg) ? "the body is not a JSON-RPC message"
		                  : n == 0 || n > RB_GW_MCP_BATCH_MAX           ? "a batch holds 1..64 messages"
		                                                                : NULL;
		json_t *methods = json_array();
		for (size_t i = 0; !why && i < n; i++) {
			const json_t *m = json_is_array(msg) ? json_array_get(msg, i) : msg;
			const json_t *mj = json_object_get(m, "method");
			if (!json_is_object(m) || (mj && !json_is_string(mj))) {
				why = "a message is not a JSON-RPC object with a string method";
				break;
			}
			const char *mm = json_string_value(mj);
			json_array_append_new(methods, json_string(mm ? mm : "response"));
			if (!mm || strcmp(mm, "tools/call") != 0)
				continue;
			const char *tool = json_string_value(json_object_get(json_object_get(m, "params"), "name"));
			if (!tool) {
				why = "a tools/call without a string params.name";
				break;
			}
			first_tool = first_tool ? first_tool : tool;
			const struct rb_policy_approval *r =
			    rb_gw_approval_mcp_rule(ctx->approvals, ctx->n_approvals, name, tool);
			if (r && json_is_array(msg)) {
				/* One approval shows one call, its arguments as they will be sent: a held
				 * call in a batch would carry the batch's other calls past it unseen. */
				json_decref(methods);
				json_decref(extra);
				struct rb_gw_verdict bv = {.status = 403, .rule = "approval"};
				snprintf(bv.error, sizeof bv.error,
				         "tools/call %s %.100s needs approval, and a call held for approval is sent "
				         "alone, not "
				         "in a batch",
				         name, tool);
				snprintf(bv.hint, sizeof bv.hint, "send the tools/call as a message of its own");
				return refuse_tools(ctx, mc, msg, &bv, name, method, tool, uhost, NULL, t0_us);
			}
			if (r && !held) {
				held = r;
				held_tool = tool;
			}
			rq.tool = tool;
			struct rb_gw_verdict tv;
			rb_gw_decide(&rq, &tv);
			if (tv.status) {
				json_decref(methods);
				json_decref(extra);
				return refuse_tools(ctx, mc, msg, &tv, name, method, tool, uhost, NULL, t0_us);
			}
		}
		if (why) {
			json_decref(methods);
			json_decref(extra);
			return bad_message(ctx, mc, name, method, uhost, why, t0_us);
		}
		if (json_is_array(msg)) {
			json_object_set_new(extra, "mcp_method", json_string("batch"));
			json_object_set_new(extra, "mcp_batch", methods);
		} else {
			json_object_set(extra, "mcp_method", json_array_get(methods, 0));
			json_decref(methods);
		}
		if (first_tool)
			json_object_set_new(extra, "tool", json_string(first_tool));
	}

	/* The session: the sandbox names the run's local id; the upstream gets its own. */
	struct mcp_filter *m = calloc(1, sizeof *m);
	if (!m) {
		json_decref(extra);
		return MHD_NO;
	}
	*m = (struct mcp_filter){.ctx = ctx,
	                         .server = v.conn,
	                         .grant = v.grant,
	                         .sec = rb_gw_secret_of(ctx, v.conn),
	                         .deleting = !strcmp(method, "DELETE")};
	const char *sid = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Mcp-Session-Id");
	char upstream[256], line[300] = "";
	if (sid) {
		if (!rb_gw_mcp_session_find(ctx->mcp_sessions, name, sid, upstream, sizeof upstream)) {
			f_free(m);
			json_decref(extra);
			return rb_gw_deny(ctx, mc, 404, "mcp", name, method, "mcp.session", uhost,
			                  "this run has no such MCP session",
			                  "initialize a new session (a session id of another run, or one that ended, "
			                  "is not known here)",
			                  t0_us);
		}
		snprintf(m->req_session, sizeof m->req_session, "%s", sid);
		snprintf(line, sizeof line, "Mcp-Session-Id: %s", upstream);
		json_object_set_new(extra, "mcp_session", json_string(sid));
	}
	_cleanup_free_ char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
	if (msg && !text) {
		f_free(m);
		json_decref(extra);
		return MHD_NO;
	}
	/* A tools/call with an Idempotency-Key is the connector's retry (the same table): the same
	 * key and message (its JSON-RPC id too) replays the first answer, never a second call. */
	const char *ikey = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Idempotency-Key");
	struct rb_idem_entry *idem = NULL;
	if (ikey && first_tool && !json_is_array(msg) && ctx->idem) {
		if (!rb_gw_idem_key_ok(ikey)) {
			f_free(m);
			json_decref(extra);
			return rb_gw_deny(ctx, mc, 400, "mcp", name, method, "idempotency", uhost,
			                  "Idempotency-Key is 1..255 visible ASCII bytes", "send a shorter, plain key",
			                  t0_us);
		}
		char digest[65];
		const char *parts[2] = {"tools/call", text};
		size_t lens[2] = {strlen(parts[0]), strlen(text)};
		rb_idem_hash(parts, lens, 2, digest);
		bool answered;
		enum MHD_Result ret = rb_gw_idem_claim(ctx, mc, "mcp", name, method, ikey, digest, false, v.route,
		                                       uhost, t0_us, &idem, &answered);
		if (answered) {
			f_free(m);
			json_decref(extra);
			return ret;
		}
	}
	if (held) { /* the policy holds this tool: sent only once `runbox approve` says so */
		struct hold_call hc = {.rule = held,
		                       .name = name,
		                       .tool = held_tool,
		                       .text = text,
		                       .uhost = uhost,
		                       .tenant = tenant,
		                       .agent = agent,
		                       .route = v.route,
		                       .t0_us = t0_us};
		enum MHD_Result ret;
		json_t *approval = NULL;
		if (!hold(ctx, mc, msg, &hc, &approval, &ret)) {
			if (idem)
				rb_idem_set(ctx->idem, idem, RB_IDEM_DENIED);
			f_free(m);
			json_decref(extra);
			return ret;
		}
		json_object_set_new(extra, "approval", approval);
	}
	static const char *const drop[] = {"mcp-session-id", NULL};
	const char *add[] = {line[0] ? line : NULL, NULL};
	struct rb_gw_upstream u = {.door = "mcp",
	                           .conn = v.conn,
	                           .name = name,
	                           .method = method,
	                           .route = v.route,
	                           .upstream_path = rq.raw_path[0] ? v.upstream_path : "", /* "": the URL itself */
	                           .body = text,
	                           .body_len = text ? strlen(text) : 0,
	                           .drop = drop,
	                           .add = add,
	                           .filter = &mcp_filter_ops,
	                           .filter_cls = m,
	                           .extra = extra,
	                           .stream = true,
	                           .idem = idem,
	                           .t0_us = t0_us};
	return rb_gw_upstream_call(ctx, mc, &u);
}

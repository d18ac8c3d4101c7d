/* envd, the in-sandbox API of E2B, over a serve session: process.Process (Start and Connect as
 * Connect server streams, List, SendInput, CloseStdin, SendSignal), /files, /health. Each
 * call is the native call (rb_serve_proc_*, rb_serve_put_*, rb_serve_get_open), so the same ledger event. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "serve/e2b_internal.h"

#define POLL_MS       1000u /* the longest a stream blocks without checking its deadline */
#define KEEPALIVE_MAX 50u   /* seconds between keepalive events, at most */
#define START_WAIT_MS 5000u /* for the pid of a process that was asked for */
#define PROC_PREFIX   "/process.Process/"
#define FS_PREFIX     "/filesystem.Filesystem/"

bool e2b_is_envd_path(const char *url)
{
	return !strcmp(url, "/health") || !strcmp(url, "/files") || !strncmp(url, PROC_PREFIX, strlen(PROC_PREFIX)) ||
	       !strncmp(url, FS_PREFIX, strlen(FS_PREFIX));
}

/* The user of the call: Authorization: Basic base64("NAME:"), or ?username=. Both of E2B's users
 * run as the policy's one identity; any other name is refused. 1 for root, 0 for user, -1. */
static int call_user(struct MHD_Connection *conn, const char **why)
{
	const char *name = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "username");
	char buf[128] = "";
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!name && auth && !strncasecmp(auth, "Basic ", 6)) {
		size_t n = 0;
		_cleanup_free_ char *dec = e2b_unb64(auth + 6, &n);
		if (!dec || n >= sizeof buf) {
			*why = "Authorization: not Basic base64(user:)";
			return -1;
		}
		memcpy(buf, dec, n);
		buf[n] = '\0';
		buf[strcspn(buf, ":")] = '\0';
		name = buf;
	}
	if (!name || !*name || !strcmp(name, "user") || !strcmp(name, "root"))
		return name && !strcmp(name, "root");
	*why = "unknown user: a runbox sandbox has the users `user` and `root` (both its policy's identity)";
	return -1;
}

/* ---- streams: Start and Connect ---- */

enum stream_state { S_START, S_RUN, S_DONE };

struct pstream {
	struct e2b_stream base;
	struct rb_e2b *e;
	char sid[E2B_ID_HEX], id[E2B_ID_HEX];
	uint32_t pid;
	uint64_t after;
	uint64_t deadline_us, keepalive_us, next_keepalive_us; /* 0: none */
	bool kill_at_deadline;
	enum stream_state state;
	char *buf; /* envelopes not yet taken */
	size_t len, off, cap;
	json_t *fail; /* an error to end with at once (before any event) */
};

static void emit(struct pstream *ps, json_t *event)
{
	json_t *m = json_pack("{s:o}", "event", event);
	if (e2b_envelope(&ps->buf, &ps->len, &ps->cap, E2B_ENV_MSG, m) < 0)
		rb_warn("e2b: sandbox %s: an event did not fit in memory", ps->sid);
	json_decref(m);
}

static void end_stream(struct pstream *ps, const char *code, const char *msg)
{
	json_t *m = code ? json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg) : json_object();
	e2b_envelope(&ps->buf, &ps->len, &ps->cap, E2B_ENV_END, m);
	json_decref(m);
	ps->state = S_DONE;
}

/* The end event of a native result. */
static json_t *end_event(const json_t *res)
{
	const char *status = json_string_value(json_object_get(res, "status"));
	json_t *ev = json_object();
	char text[64];
	if (status && !strcmp(status, "exited")) {
		json_int_t code = json_integer_value(json_object_get(res, "exit_code"));
		snprintf(text, sizeof text, "exit status %lld", (long long)code);
		json_object_set_new(ev, "exitCode", json_integer(code));
		json_object_set_new(ev, "exited", json_true());
	} else if (status && !strcmp(status, "signaled")) {
		int sig = (int)json_integer_value(json_object_get(res, "signal"));
		const char *name = strsignal(sig);
		snprintf(text, sizeof text, "signal: %s", name ? name : "unknown");
		for (char *c = text; *c; c++)
			*c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
		json_object_set_new(ev, "exitCode", json_integer(-1));
		json_object_set_new(ev, "exited", json_false());
	} else {
		snprintf(text, sizeof text, "%s", status ? status : "unknown");
		json_object_set_new(ev, "exitCode", json_integer(json_integer_value(json_object_get(res, "exit"))));
		json_object_set_new(ev, "exited", json_false());
		const char *err = json_string_value(json_object_get(res, "error"));
		json_object_set_new(ev, "error", json_string(err ? err : status ? status : "failed"));
	}
	json_object_set_new(ev, "status", json_string(text));
	return json_pack("{s:o}", "end", ev);
}

/* Turns the native chunks of one output call into data events. */
static void emit_chunks(struct pstream *ps, const json_t *chunks)
{
	size_t i;
	json_t *c;
	json_array_foreach(chunks, i, c)
	{
		const char *data = json_string_value(json_object_get(c, "data"));
		const char *enc = json_string_value(json_object_get(c, "encoding"));
		const char *stream = json_string_value(json_object_get(c, "stream"));
		if (!data || !stream)
			continue;
		_cleanup_free_ char *b64 = NULL;
		if (enc && !strcmp(enc, "base64"))
			b64 = strdup(data);
		else
			b64 = e2b_b64(data, json_string_length(json_object_get(c, "data")));
		if (!b64)
			continue;
		emit(ps, json_pack("{s:{s:s}}", "data", !strcmp(stream, "stderr") ? "stderr" : "stdout", b64));
	}
}

/* One round: blocks until there is something to send or the stream ends. */
static void advance(struct pstream *ps)
{
	if (ps->fail) {
		json_t *f = ps->fail;
		ps->fail = NULL;
		end_stream(ps, json_string_value(json_object_get(f, "code")),
		           json_string_value(json_object_get(f, "message")));
		json_decref(f);
		return;
	}
	if (ps->state == S_START) {
		emit(ps, json_pack("{s:{s:I}}", "start", "pid", (json_int_t)ps->pid));
		ps->state = S_RUN;
		return;
	}
	while (ps->state == S_RUN && ps->len == ps->off) {
		uint64_t now = rb_now_us(), wait = (uint64_t)POLL_MS * 1000u;
		if (ps->deadline_us && now >= ps->deadline_us) {
			if (ps->kill_at_deadline) {
				json_t *r = NULL, *b = json_pack("{s:s}", "signal", "KILL");
				rb_serve_proc_signal(ps->e->sv, ps->sid, ps->id, b, &r);
				json_decref(b);
				json_decref(r);
			}
			end_stream(ps, "deadline_exceeded", "the command's timeout passed (Connect-Timeout-Ms)");
			return;
		}
		if (ps->next_keepalive_us && now >= ps->next_keepalive_us) {
			emit(ps, json_pack("{s:{}}", "keepalive"));
			ps->next_keepalive_us = now + ps->keepalive_us;
			return;
		}
		if (ps->deadline_us && ps->deadline_us - now < wait)
			wait = ps->deadline_us - now;
		if (ps->next_keepalive_us && ps->next_keepalive_us - now < wait)
			wait = ps->next_keepalive_us - now;
		_cleanup_json_ json_t *r = NULL;
		unsigned st = rb_serve_proc_output(ps->e->sv, ps->sid, ps->id, ps->after, (unsigned)(wait / 1000u), &r);
		if (st != 200) {
			end_stream(ps, st == 404 ? "not_found" : e2b_code_of_status(st), e2b_native_msg(r));
			return;
		}
		emit_chunks(ps, json_object_get(r, "chunks"));
		ps->after = (uint64_t)json_integer_value(json_object_get(r, "next_seq"));
		if (json_is_true(json_object_get(r, "exited"))) {
			emit(ps, end_event(json_object_get(r, "result")));
			end_stream(ps, NULL, NULL);
		}
	}
}

static size_t pstream_next(struct e2b_stream *st, char *out, size_t max)
{
	struct pstream *ps = (struct pstream *)st;
	while (ps->off == ps->len) {
		if (ps->state == S_DONE)
			return 0;
		ps->len = ps->off = 0;
		advance(ps);
	}
	size_t n = ps->len - ps->off < max ? ps->len - ps->off : max;
	memcpy(out, ps->buf + ps->off, n);
	ps->off += n;
	return n;
}

static void pstream_free(struct e2b_stream *st)
{
	struct pstream *ps = (struct pstream *)st;
	json_decref(ps->fail);
	free(ps->buf);
	free(ps);
}

static struct pstream *pstream_new(struct rb_e2b *e, struct MHD_Connection *conn, const char *sid)
{
	struct pstream *ps = calloc(1, sizeof *ps);
	if (!ps)
		return NULL;
	ps->base.next = pstream_next;
	ps->base.free = pstream_free;
	ps->e = e;
	snprintf(ps->sid, sizeof ps->sid, "%s", sid);
	uint64_t now = rb_now_us();
	const char *t = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connect-Timeout-Ms");
	if (t && *t) {
		char *end;
		unsigned long long ms = strtoull(t, &end, 10);
		if (!*end && ms)
			ps->deadline_us = now + ms * 1000u;
	}
	const char *k = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Keepalive-Ping-Interval");
	unsigned long ka = k ? strtoul(k, NULL, 10) : 0;
	if (ka > KEEPALIVE_MAX || (!ka && !k))
		ka = KEEPALIVE_MAX;
	ps->keepalive_us = (uint64_t)ka * 1000000u;
	ps->next_keepalive_us = ka ? now + ps->keepalive_us : 0;
	return ps;
}

/* A stream that only ends, with an error: how a streaming RPC refuses. */
static void stream_error(struct rb_e2b *e, struct MHD_Connection *conn, const char *sid, struct e2b_reply *rp,
                         const char *code, const char *msg)
{
	struct pstream *ps = pstream_new(e, conn, sid);
	if (!ps) {
		e2b_rpc_error(rp, "internal", "out of memory");
		return;
	}
	ps->fail = json_pack("{s:s, s:s}", "code", code, "message", msg);
	ps->state = S_RUN;
	rp->status = 200;
	rp->stream = &ps->base;
}

/* The pid inside the sandbox of a process just asked for (0 if it never started), waiting for
 * the dispatcher to see it start; *result set when it ended already. */
static uint32_t wait_pid(struct rb_e2b *e, const char *sid, const char *id, json_t **result)
{
	uint64_t until = rb_now_us() + (uint64_t)START_WAIT_MS * 1000u;
	*result = NULL;
	while (rb_now_us() < until) {
		_cleanup_json_ json_t *r = NULL;
		if (rb_serve_proc_get(e->sv, sid, id, &r) != 200)
			return 0;
		json_int_t pid = json_integer_value(json_object_get(r, "pid"));
		if (json_object_get(r, "result"))
			*result = json_incref(json_object_get(r, "result"));
		if (pid > 0 || *result)
			return (uint32_t)pid;
		/* Waits for the dispatcher's next round (no chunk has this seq). */
		json_t *o = NULL;
		rb_serve_proc_output(e->sv, sid, id, UINT64_MAX, 10, &o);
		json_decref(o);
	}
	return 0;
}

/* ProcessConfig into the native start body; NULL with *why when malformed. */
static json_t *native_start(const json_t *cfg, const char *cmd, bool want_stdin, bool root, const char **why)
{
	json_t *args = json_object_get(cfg, "args"), *envs = json_object_get(cfg, "envs");
	json_t *cwd = json_object_get(cfg, "cwd");
	if (!cmd || !*cmd) {
		*why = "process.cmd: missing";
		return NULL;
	}
	if ((args && !json_is_array(args)) || (envs && !json_is_object(envs)) || (cwd && !json_is_string(cwd))) {
		*why = "process: args an array, envs an object, cwd a string";
		return NULL;
	}
	json_t *argv = json_pack("[s]", cmd);
	size_t i;
	json_t *a;
	json_array_foreach(args, i, a)
	{
		if (!json_is_string(a)) {
			json_decref(argv);
			*why = "process.args: strings";
			return NULL;
		}
		json_array_append(argv, a);
	}
	/* The user's home is /workspace (docs/e2b.md); envs given win. */
	json_t *env = json_pack("{s:s, s:s}", "HOME", E2B_HOME, "USER", root ? "root" : "user");
	if (envs)
		json_object_update(env, envs);
	_cleanup_free_ char *dir = e2b_path(json_string_value(cwd));
	return json_pack("{s:o, s:o, s:s, s:b}", "argv", argv, "env", env, "cwd", dir ? dir : E2B_HOME, "stdin",
	                 want_stdin);
}

static void proc_start(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, struct e2b_reply *rp)
{
	const char *why = NULL;
	_cleanup_json_ json_t *m = e2b_rpc_body(rq->body, rq->len, true, &why);
	if (!m)
		return stream_error(e, rq->conn, sid, rp, "invalid_argument", why);
	if (json_object_get(m, "pty") && !json_is_null(json_object_get(m, "pty")))
		return stream_error(e, rq->conn, sid, rp, "unimplemented",
		                    "PTY terminals are not supported by runbox serve");
	int root = call_user(rq->conn, &why);
	if (root < 0)
		return stream_error(e, rq->conn, sid, rp, "invalid_argument", why);
	json_t *cfg = json_object_get(m, "process");
	const char *cmd = json_string_value(json_object_get(cfg, "cmd"));
	const char *tag = json_string_value(json_object_get(m, "tag"));
	if (tag && strlen(tag) > E2B_TAG_MAX)
		return stream_error(e, rq->conn, sid, rp, "invalid_argument", "tag: longer than 256 bytes");
	bool want_stdin = json_is_true(json_object_get(m, "stdin"));
	/* E2B runs the user's login shell; an image without bash gets sh, found on the first try. */
	bool swap = cmd && !strcmp(cmd, "/bin/bash") && e2b_bash_get(e, sid) == 0;
	char id[E2B_ID_HEX] = "";
	uint32_t pid = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		_cleanup_json_ json_t *nb = native_start(cfg, swap ? "/bin/sh" : cmd, want_stdin, root == 1, &why);
		if (!nb)
			return stream_error(e, rq->conn, sid, rp, "invalid_argument", why);
		_cleanup_json_ json_t *r = NULL;
		unsigned st = rb_serve_proc_start(e->sv, sid, nb, &r);
		if (st != 201)
			return stream_error(e, rq->conn, sid, rp, st == 404 ? "unavailable" : e2b_code_of_status(st),
			                    e2b_native_msg(r));
		snprintf(id, sizeof id, "%s", json_string_value(json_object_get(r, "id")));
		_cleanup_json_ json_t *res = NULL;
		pid = wait_pid(e, sid, id, &res);
		const char *status = json_string_value(json_object_get(res, "status"));
		bool not_found =
		    status && !strcmp(status, "exec_failed") && json_integer_value(json_object_get(res, "exit")) == 127;
		if (!swap && cmd && !strcmp(cmd, "/bin/bash") && e2b_bash_get(e, sid) < 0) {
			e2b_bash_set(e, sid, !not_found);
			if (not_found) {
				swap = true;
				continue;
			}
		}
		/* A process that could not start (no such cwd, no such program) is envd's start error. */
		if (status && (!strcmp(status, "exec_failed") || !strcmp(status, "setup_failed"))) {
			const char *msg = json_string_value(json_object_get(res, "error"));
			return stream_error(e, rq->conn, sid, rp, "invalid_argument", msg ? msg : status);
		}
		break;
	}
	e2b_proc_add(e, sid, pid, id, tag, cfg);
	struct pstream *ps = pstream_new(e, rq->conn, sid);
	if (!ps)
		return e2b_rpc_error(rp, "internal", "out of memory");
	snprintf(ps->id, sizeof ps->id, "%s", id);
	ps->pid = pid;
	ps->kill_at_deadline = true;
	rp->status = 200;
	rp->stream = &ps->base;
}

/* The selector {pid} or {tag} of a message's `process`. */
static int selected(struct rb_e2b *e, const char *sid, const json_t *m, char id[E2B_ID_HEX], uint32_t *pid)
{
	const json_t *sel = json_object_get(m, "process");
	json_t *p = json_object_get(sel, "pid");
	const char *tag = json_string_value(json_object_get(sel, "tag"));
	if (!p && !tag)
		return -1;
	return e2b_proc_find(e, sid, (uint32_t)json_integer_value(p), tag, id, pid);
}

static void proc_connect(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, struct e2b_reply *rp)
{
	const char *why = NULL;
	_cleanup_json_ json_t *m = e2b_rpc_body(rq->body, rq->len, true, &why);
	if (!m)
		return stream_error(e, rq->conn, sid, rp, "invalid_argument", why);
	char id[E2B_ID_HEX];
	uint32_t pid = 0;
	if (selected(e, sid, m, id, &pid) < 0)
		return stream_error(e, rq->conn, sid, rp, "not_found", "no such process");
	struct pstream *ps = pstream_new(e, rq->conn, sid);
	if (!ps)
		return e2b_rpc_error(rp, "internal", "out of memory");
	snprintf(ps->id, sizeof ps->id, "%s", id);
	ps->pid = pid;
	/* Output from now on, as envd gives a new subscriber. */
	for (;;) {
		_cleanup_json_ json_t *r = NULL;
		if (rb_serve_proc_output(e->sv, sid, id, ps->after, 0, &r) != 200 ||
		    !json_array_size(json_object_get(r, "chunks")))
			break;
		ps->after = (uint64_t)json_integer_value(json_object_get(r, "next_seq"));
	}
	rp->status = 200;
	rp->stream = &ps->base;
}

static void proc_list(struct rb_e2b *e, const char *sid, struct e2b_reply *rp)
{
	_cleanup_json_ json_t *all = e2b_proc_list(e, sid);
	json_t *out = json_array();
	size_t i;
	json_t *p;
	json_array_foreach(all, i, p)
	{
		_cleanup_json_ json_t *r = NULL;
		const char *id = json_string_value(json_object_get(p, "id"));
		if (rb_serve_proc_get(e->sv, sid, id, &r) != 200 ||
		    strcmp(json_string_value(json_object_get(r, "state")) ?: "", "running") != 0)
			continue;
		json_t *o =
		    json_pack("{s:O, s:O}", "config", json_object_get(p, "config"), "pid", json_object_get(p, "pid"));
		if (json_object_get(p, "tag"))
			json_object_set(o, "tag", json_object_get(p, "tag"));
		json_array_append_new(out, o);
	}
	rp->status = 200;
	rp->json = json_pack("{s:o}", "processes", out);
}

static void native_fail(struct e2b_reply *rp, unsigned st, json_t *r)
{
	e2b_rpc_error(rp, e2b_code_of_status(st), e2b_native_msg(r));
}

static void proc_input(struct rb_e2b *e, const char *sid, const json_t *m, bool close, struct e2b_reply *rp)
{
	char id[E2B_ID_HEX];
	if (selected(e, sid, m, id, NULL) < 0)
		return e2b_rpc_error(rp, "not_found", "no such process");
	const json_t *in = json_object_get(m, "input");
	if (json_object_get(in, "pty"))
		return e2b_rpc_error(rp, "unimplemented", "PTY terminals are not supported by runbox serve");
	const char *b64 = json_string_value(json_object_get(in, "stdin"));
	size_t n = 0;
	_cleanup_free_ char *data = b64 ? e2b_unb64(b64, &n) : NULL;
	if (!close && (!b64 || !data))
		return e2b_rpc_error(rp, "invalid_argument", "input.stdin: base64 bytes");
	_cleanup_json_ json_t *r = NULL;
	unsigned st = rb_serve_proc_stdin(e->sv, sid, id, data ? data : "", data ? n : 0, close, &r);
	if (st != 200)
		return native_fail(rp, st, r);
	rp->status = 200;
	rp->json = json_object();
}

static void proc_signal(struct rb_e2b *e, const char *sid, const json_t *m, struct e2b_reply *rp)
{
	char id[E2B_ID_HEX];
	if (selected(e, sid, m, id, NULL) < 0)
		return e2b_rpc_error(rp, "not_found", "no such process");
	const json_t *s = json_object_get(m, "signal");
	int sig = json_is_integer(s) ? (int)json_integer_value(s) : 0;
	if (json_is_string(s))
		sig = !strcmp(json_string_value(s), "SIGNAL_SIGKILL")   ? SIGKILL
		      : !strcmp(json_string_value(s), "SIGNAL_SIGTERM") ? SIGTERM
		                                                        : 0;
	if (sig != SIGKILL && sig != SIGTERM)
		return e2b_rpc_error(rp, "invalid_argument", "signal: SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	/* A process that ended is not found, as envd says (the SDK's kill then answers false). */
	_cleanup_json_ json_t *g = NULL;
	if (rb_serve_proc_get(e->sv, sid, id, &g) != 200 ||
	    strcmp(json_string_value(json_object_get(g, "state")) ?: "", "running") != 0)
		return e2b_rpc_error(rp, "not_found", "the process is not running");
	_cleanup_json_ json_t *b = json_pack("{s:i}", "signal", sig), *r = NULL;
	unsigned st = rb_serve_proc_signal(e->sv, sid, id, b, &r);
	if (st != 200)
		return native_fail(rp, st, r);
	rp->status = 200;
	rp->json = json_object();
}

static void process_rpc(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, const char *method,
                        struct e2b_reply *rp)
{
	if (!strcmp(method, "Start"))
		return proc_start(e, rq, sid, rp);
	if (!strcmp(method, "Connect"))
		return proc_connect(e, rq, sid, rp);
	const char *why = NULL;
	_cleanup_json_ json_t *m = e2b_rpc_body(rq->body, rq->len, false, &why);
	if (!m)
		return e2b_rpc_error(rp, "invalid_argument", why);
	if (!strcmp(method, "List"))
		return proc_list(e, sid, rp);
	if (!strcmp(method, "SendInput"))
		return proc_input(e, sid, m, false, rp);
	if (!strcmp(method, "CloseStdin"))
		return proc_input(e, sid, m, true, rp);
	if (!strcmp(method, "SendSignal"))
		return proc_signal(e, sid, m, rp);
	e2b_rpc_error(rp, "unimplemented", "process method not supported by runbox serve (docs/e2b.md)");
}

static void files_get(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, struct e2b_reply *rp)
{
	const char *why = NULL;
	if (call_user(rq->conn, &why) < 0)
		return e2b_api_error(rp, 400, "%s", why);
	_cleanup_free_ char *path = e2b_path(MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "path"));
	_cleanup_json_ json_t *r = NULL;
	unsigned st = rb_serve_get_open(e->sv, sid, path ? path : "", RB_SERVE_STREAM_CAP, &rp->fd, &rp->fd_len, &r);
	if (st != 200)
		return e2b_api_error(rp, st, "%s", e2b_native_msg(r));
	rp->status = 200;
	rp->raw_type = "application/octet-stream";
}

#define MAX_FILES 64 /* in one POST /files */

struct e2b_files {
	struct rb_e2b *e;
	char sid[E2B_ID_HEX];
	char *qpath;              /* ?path=, or NULL */
	struct rb_serve_put *put; /* the file being written */
	char *path;               /* its path */
	uint64_t len;             /* its bytes so far */
	json_t *written;          /* [{name, type, path}] of the files ended */
	unsigned status;          /* the refusal (its message in why), or 0 */
	char *why;
};

static void files_fail(struct e2b_files *f, unsigned status, const char *why)
{
	if (f->status)
		return;
	f->status = status;
	f->why = strdup(why ? why : "the upload failed");
	rb_serve_put_abort(f->put);
	f->put = NULL;
}

struct e2b_files *e2b_files_begin(struct rb_e2b *e, struct MHD_Connection *conn, const char *sid)
{
	struct e2b_files *f = calloc(1, sizeof *f);
	if (!f || !(f->written = json_array())) {
		free(f);
		return NULL;
	}
	f->e = e;
	snprintf(f->sid, sizeof f->sid, "%s", sid);
	const char *qpath = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
	if (qpath && *qpath && !(f->qpath = strdup(qpath)))
		files_fail(f, 500, "out of memory");
	const char *why = NULL;
	if (call_user(conn, &why) < 0)
		files_fail(f, 400, why);
	return f;
}

/* The file being written is in place: one more entry of the reply. */
static void file_end(struct e2b_files *f)
{
	if (!f->put)
		return;
	_cleanup_json_ json_t *r = NULL;
	unsigned st = rb_serve_put_finish(f->e->sv, f->put, &r);
	f->put = NULL;
	if (st != 200)
		return files_fail(f, st, e2b_native_msg(r));
	const char *base = strrchr(f->path, '/');
	json_array_append_new(f->written, json_pack("{s:s, s:s, s:s}", "name", base ? base + 1 : f->path, "type",
	                                            "file", "path", f->path));
}

void e2b_files_next(struct e2b_files *f, const char *name)
{
	file_end(f);
	if (f->status)
		return;
	/* As envd: ?path= names the file of each part, else the part's filename does. */
	const char *given = f->qpath ? f->qpath : name;
	if (!given || !*given)
		return files_fail(f, 400, "a file without a path (give ?path= or the part's filename)");
	if (json_array_size(f->written) == MAX_FILES)
		return files_fail(f, 400, "too many files in one request");
	free(f->path);
	f->len = 0;
	if (!(f->path = e2b_path(given)))
		return files_fail(f, 500, "out of memory");
	size_t i;
	json_t *w;
	json_array_foreach(f->written, i, w)
	{
		if (!strcmp(json_string_value(json_object_get(w, "path")), f->path))
			return files_fail(f, 400, "two files to the same path in one request");
	}
	_cleanup_json_ json_t *r = NULL;
	unsigned st = e2b_file_put_begin(f->e, f->sid, f->path, &f->put, &r);
	if (st != 200)
		files_fail(f, st, e2b_native_msg(r));
}

void e2b_files_write(struct e2b_files *f, const char *data, size_t len)
{
	if (f->status || !f->put)
		return;
	struct rb_error err;
	/* A failure is recorded (file_write) by the write itself. */
	if (rb_serve_put_write(f->put, data, len, &err) < 0)
		return files_fail(f, err.errnum == EFBIG ? 413 : rb_error_http_status(rb_error_kind_of(&err)), err.msg);
	f->len += len;
}

uint64_t e2b_files_len(const struct e2b_files *f)
{
	return f->len;
}

void e2b_files_refuse(struct e2b_files *f, unsigned status, const char *why)
{
	/* A file cut short is recorded as a failed write, as a refused one is. */
	if (f->put && !f->status) {
		struct rb_error err;
		rb_error_setk(&err, RB_ERR_INPUT, 0, "%s", why);
		rb_serve_fs_record_failed(f->e->sv, f->sid, "file_write",
		                          json_pack("{s:s, s:I}", "path", f->path, "size", (json_int_t)f->len), &err,
		                          status);
	}
	files_fail(f, status, why);
}

bool e2b_files_refused(const struct e2b_files *f)
{
	return f->status != 0;
}

void e2b_files_end(struct e2b_files *f, struct e2b_reply *rp)
{
	file_end(f);
	if (!f->status && !json_array_size(f->written))
		files_fail(f, 400, "no file in the request");
	if (f->status)
		return e2b_api_error(rp, f->status, "%s", f->why);
	rp->status = 200;
	rp->json = json_incref(f->written);
}

void e2b_files_free(struct e2b_files *f)
{
	if (!f)
		return;
	rb_serve_put_abort(f->put);
	json_decref(f->written);
	free(f->qpath);
	free(f->path);
	free(f->why);
	free(f);
}

static void route(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, struct e2b_reply *rp);

void e2b_envd(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, struct e2b_reply *rp)
{
	route(e, rq, sid, rp);
	/* A streaming call (application/connect+json) reads its error from the end of the stream. */
	const char *ct = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *code = json_string_value(json_object_get(rp->json, "code"));
	if (ct && !strncasecmp(ct, "application/connect+", 20) && !rp->stream && rp->status >= 400 && code) {
		_cleanup_json_ json_t *err = rp->json;
		rp->json = NULL;
		stream_error(e, rq->conn, sid, rp, code, json_string_value(json_object_get(err, "message")));
	}
}

static void route(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, struct e2b_reply *rp)
{
	bool get = !strcmp(rq->method, "GET"), post = !strcmp(rq->method, "POST");
	if (!strcmp(rq->url, "/health")) {
		/* 502 once the session is gone, however it went: the SDK's "not running". */
		rp->status = !get ? 405 : e2b_session_alive(e, sid) ? 204 : 502;
		return;
	}
	if (!strcmp(rq->url, "/files")) {
		if (get)
			return files_get(e, rq, sid, rp);
		return e2b_api_error(rp, 405, "/files: GET or POST");
	}
	if (!post)
		return e2b_rpc_error(rp, "unimplemented", "Connect RPCs are POST");
	if (!strncmp(rq->url, PROC_PREFIX, strlen(PROC_PREFIX)))
		return process_rpc(e, rq, sid, rq->url + strlen(PROC_PREFIX), rp);
	return e2b_fs_rpc(e, rq, sid, rq->url + strlen(FS_PREFIX), rp);
}

/* runbox serve's HTTP/1.1 API on a unix socket (libmicrohttpd, a thread per connection; every
 * call into a session goes through sessions.c's lock). Routes under /v1 (docs/serve.md). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "serve/http.h"
#include "serve/keys.h"
#include "serve/known.h"
#include "serve/manifest.h"
#include "serve/inflight.h"
#include "serve/ports.h"
#include "serve/restart.h"
#include "serve/resume.h"

#define BODY_CAP (1u << 20) /* a JSON body or one stdin write */

struct rb_serve_http {
	struct MHD_Daemon *d;
	struct rb_serve *sv;
	const struct rb_serve_keys *keys;   /* TCP: every call names a tenant's key; NULL on the unix socket */
	struct rb_serve_inflight *inflight; /* TCP: each tenant's calls in flight */
	int fd;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
};

/* One request: its JSON body gathered (at most BODY_CAP), or a file's streamed to disk. */
struct upload {
	char *data;
	size_t len, cap;
	bool too_big;
	int raw_fd; /* a reply of raw bytes (a file, a snapshot), sent from this descriptor */
	uint64_t raw_len;
	struct rb_serve_put *put;     /* PUT files: the body goes here as it comes */
	struct rb_serve_hydrate *hyd; /* POST hydrate with a body: spooled to disk as it comes */
	bool hydrate_ref;             /* POST hydrate?snapshot=REF: no body */
	unsigned failed;              /* a streamed body failed: this status, with reply */
	json_t *reply;
	const char *tenant;             /* the caller's key's tenant (TCP), or NULL: the operator, every tenant */
	const struct rb_serve_key *key; /* that key (its policies and images), or NULL */
	bool holds_call;                /* counted in its tenant's calls in flight */
	struct ostream *stream;         /* GET .../output?stream=1: an NDJSON reply fed as output comes */
};

/* An NDJSON stream of one process's output (respond_stream): lines not yet sent, and where
 * it is. Freed by libmicrohttpd when the reply ends, however it ends. */
struct ostream {
	struct rb_serve *sv;
	int sock; /* the client's socket, polled for its hangup while nothing comes */
	char sid[128], pid[128];
	uint64_t after_seq;
	char *text;
	size_t len, off;
	bool end;
};

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, json_t *body)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		text = strdup("{\"error\": \"out of memory\"}");
	if (!text)
		return MHD_NO;
	size_t n = strlen(text);
	char *withnl = realloc(text, n + 2);
	if (withnl) {
		text = withnl;
		text[n++] = '\n';
		text[n] = '\0';
	}
	struct MHD_Response *r = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_401(struct MHD_Connection *conn, json_t *body)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return MHD_NO;
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
	enum MHD_Result ret = MHD_queue_response(conn, 401, r);
	MHD_destroy_response(r);
	return ret;
}

static unsigned error(json_t **reply, unsigned status, const char *msg)
{
	*reply = json_pack("{s:s}", "error", msg);
	return status;
}

/* A parsed JSON body ({} when empty), or a 400 naming where it fails to parse. */
static json_t *parse(const struct upload *u, json_t **reply, unsigned *st)
{
	if (!u->len)
		return json_object();
	json_error_t je;
	json_t *v = json_loadb(u->data, u->len, JSON_REJECT_DUPLICATES, &je);
	if (!v) {
		char msg[300];
		snprintf(msg, sizeof msg, "request body: not JSON at line %d column %d: %s", je.line, je.column,
		         je.text);
		*st = error(reply, 400, msg);
	}
	return v;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	if (!s || !*s)
		return false;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || s[0] == '-')
		return false;
	*out = v;
	return true;
}

/* A query's boolean: absent false, else "0" or "1". */
static bool query_bool(struct MHD_Connection *conn, const char *key, bool *out, json_t **reply, unsigned *st)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
	*out = v && !strcmp(v, "1");
	if (v && strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
		char msg[96];
		snprintf(msg, sizeof msg, "query `%s`: expected 0 or 1", key);
		*st = error(reply, 400, msg);
		return false;
	}
	return true;
}

static bool query_u64(struct MHD_Connection *conn, const char *key, uint64_t *out, json_t **reply, unsigned *st)
{
	const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, key);
	if (v && !parse_u64(v, out)) {
		char msg[96];
		snprintf(msg, sizeof msg, "query `%s`: expected a non-negative integer", key);
		*st = error(reply, 400, msg);
		return false;
	}
	return true;
}

/* A call on a session refused before it began (a bad query, a declared length over the cap):
 * recorded as type, the event its success records, with data (taken; its path as asked) and the
 * reply's error, errnum and status, as every refused file call is. */
static unsigned call_refused(struct rb_serve *sv, const char *sid, const char *type, json_t *data, int errnum,
                             unsigned st, json_t **reply)
{
	struct rb_error err;
	rb_error_setk(&err, RB_ERR_INPUT, 0, "%s", json_string_value(json_object_get(*reply, "error")));
	err.errnum = errnum;
	return rb_serve_fs_record_failed(sv, sid, type, data, &err, st);
}

/* {"path": path as asked}, null when it is not UTF-8 (or none was given). */
static json_t *asked_path(const char *path)
{
	json_t *v = path ? json_stringn(path, strnlen(path, 4096)) : NULL;
	return json_pack("{s:o}", "path", v ? v : json_null());
}

/* A hydrate's source as its event names it: {"source": "snapshot", "ref"} or {"source": "upload"}. */
static json_t *hydrate_source(struct MHD_Connection *conn)
{
	const char *ref = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "snapshot");
	json_t *v = ref ? json_stringn(ref, strnlen(ref, 256)) : NULL;
	return ref ? json_pack("{s:s, s:o}", "source", "snapshot", "ref", v ? v : json_null())
	           : json_pack("{s:s}", "source", "upload");
}

/* A hydrate's bounds, lowered by the query (max_members, max_bytes unpacked, max_in_bytes). */
static bool hydrate_bounds(struct MHD_Connection *conn, struct rb_serve_hydrate_bounds *b, json_t **reply, unsigned *st)
{
	memset(b, 0, sizeof *b);
	return query_u64(conn, "max_members", &b->members, reply, st) &&
	       query_u64(conn, "max_bytes", &b->bytes_out, reply, st) &&
	       query_u64(conn, "max_in_bytes", &b->bytes_in, reply, st);
}

/* The first call of a POST .../hydrate: with ?snapshot=REF it takes no body; else the body is
 * spooled to an unnamed file as it comes, refused past the bound of bytes in. */
static unsigned hydrate_start(struct rb_serve *sv, struct MHD_Connection *conn, const char *sid, struct upload *u,
                              json_t **reply)
{
	unsigned st = 400;
	struct rb_serve_hydrate_bounds b;
	if (!hydrate_bounds(conn, &b, reply, &st))
		return call_refused(sv, sid, "hydrate", hydrate_source(conn), 0, st, reply);
	if (MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "snapshot")) {
		u->hydrate_ref = true;
		return 200;
	}
	uint64_t clen = 0;
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	uint64_t cap =
	    b.bytes_in && b.bytes_in < RB_SERVE_SNAPSHOT_MAX_BYTES ? b.bytes_in : RB_SERVE_SNAPSHOT_MAX_BYTES;
	if (cl && parse_u64(cl, &clen) && clen > cap)
		return call_refused(sv, sid, "hydrate", hydrate_source(conn), EFBIG,
		                    error(reply, 413, "hydrate: the archive is over its bound of bytes in"), reply);
	return rb_serve_hydrate_begin(sv, sid, &b, &u->hyd, reply);
}

/* /v1/sessions/SID/fs/OP: stat and list by query, mkdir, remove and rename by a JSON body. */
static unsigned route_fs(struct rb_serve *sv, struct MHD_Connection *conn, const char *sid, const char *op, bool get,
                         bool post, struct upload *u, json_t **reply)
{
	const char *fp = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
	unsigned st = 400;
	if (!strcmp(op, "stat") || !strcmp(op, "list")) {
		if (!get)
			return error(reply, 405, "fs/stat, fs/list: GET");
		if (!strcmp(op, "stat"))
			return rb_serve_fs_stat(sv, sid, fp, reply);
		uint64_t depth = 1;
		if (!query_u64(conn, "depth", &depth, reply, &st))
			return call_refused(sv, sid, "fs_list", asked_path(fp), 0, st, reply);
		return rb_serve_fs_list(sv, sid, fp, depth > 1000 ? 1000 : (unsigned)depth, reply);
	}
	unsigned (*call)(struct rb_serve *, const char *, const json_t *, json_t **) =
	    !strcmp(op, "mkdir")    ? rb_serve_fs_mkdir_json
	    : !strcmp(op, "remove") ? rb_serve_fs_remove_json
	    : !strcmp(op, "rename") ? rb_serve_fs_rename_json
	                            : NULL;
	if (!call)
		return error(reply, 404, "no such path (fs/stat, list, mkdir, remove, rename)");
	if (!post)
		return error(reply, 405, "fs/mkdir, fs/remove, fs/rename: POST");
	json_t *body = parse(u, reply, &st);
	if (!body)
		return st;
	st = call(sv, sid, body, reply);
	json_decref(body);
	return st;
}

/* Whether GET .../output asks for the NDJSON stream: ?stream=1, or an Accept naming
 * application/x-ndjson. A bad ?stream is a 400 (true, with *st set). */
static bool wants_stream(struct MHD_Connection *conn, json_t **reply, unsigned *st)
{
	bool q = false;
	*st = 200;
	if (!query_bool(conn, "stream", &q, reply, st))
		return true;
	const char *acc = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
	const char *qs = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "stream");
	if (qs && !q)
		return false; /* ?stream=0: the long-poll, whatever Accept says */
	return q || (acc && strstr(acc, "application/x-ndjson"));
}

/* The first step of a stream, checked now (an unknown process is a plain 404); its reply is
 * sent by respond_stream. */
static unsigned stream_open(struct rb_serve *sv, const char *sid, const char *pid, uint64_t after, struct upload *u,
                            json_t **reply)
{
	struct ostream *o = calloc(1, sizeof *o);
	if (!o)
		return error(reply, 500, "out of memory");
	o->sv = sv;
	o->sock = -1;
	o->after_seq = after;
	snprintf(o->sid, sizeof o->sid, "%s", sid);
	snprintf(o->pid, sizeof o->pid, "%s", pid);
	unsigned st = rb_serve_proc_stream_step(sv, sid, pid, &o->after_seq, 0, &o->text, &o->len, &o->end);
	if (st != 200) {
		json_error_t je;
		*reply = o->text ? json_loads(o->text, 0, &je) : NULL;
		if (*reply)
			json_object_del(*reply, "status");
		else
			error(reply, st, "no such process");
		free(o->text);
		free(o);
		return st;
	}
	u->stream = o;
	return 200;
}

/* Whether the client of a stream hung up (its socket's peer closed or reset). */
static bool client_gone(int sock)
{
	struct pollfd pf = {.fd = sock, .events = POLLRDHUP};
	return sock >= 0 && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* libmicrohttpd's reader of a stream: the lines left, else the next step, waiting a second at
 * a time (with no lock held) and checking the client between waits. A client gone ends the
 * reply, and only the reply: the process runs on to its end or its timeout. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct ostream *o = cls;
	(void)pos;
	while (o->off == o->len) {
		free(o->text);
		o->text = NULL;
		o->len = o->off = 0;
		if (o->end)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (client_gone(o->sock))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		rb_serve_proc_stream_step(o->sv, o->sid, o->pid, &o->after_seq, 1000, &o->text, &o->len, &o->end);
	}
	size_t n = o->len - o->off < max ? o->len - o->off : max;
	memcpy(buf, o->text + o->off, n);
	o->off += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct ostream *o = cls;
	free(o->text);
	free(o);
}

static enum MHD_Result respond_stream(struct MHD_Connection *conn, struct upload *u)
{
	struct ostream *o = rb_steal_ptr(&u->stream);
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	o->sock = ci ? ci->connect_fd : -1;
	struct MHD_Response *r =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, o, stream_free);
	if (!r) {
		stream_free(o);
		return MHD_NO;
	}
	/* A quiet process may say nothing for longer than the idle timeout of connections. */
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

/* The route: /v1/sessions[/SID[/processes[/PID[/output|stdin|signal|resize]]]]. */
/* The one tenant check of every /v1/sessions/ID call: 0 when the caller may use sid (no key,
 * or its key's tenant owns it); else the answer a session that does not exist gets (or a lost
 * one's), the same for another tenant's, so nothing tells one from the other. Called before
 * anything of the call is done, streamed bodies' first steps included. */
static unsigned session_refused(struct rb_serve *sv, const char *sid, const char *tenant, json_t **reply)
{
	char owner[128];
	if (rb_serve_session_tenant(sv, sid, owner, sizeof owner) == 0 && (!tenant || !strcmp(owner, tenant)))
		return 0;
	/* An id the daemon never knew (of this tenant) costs a table lookup, not the ledger. */
	if (!rb_serve_known_has(rb_serve_known(sv), sid, tenant)) {
		*reply = json_pack("{s:o}", "error", json_sprintf("no session `%.64s`", sid));
		return 404;
	}
	return rb_serve_lost(rb_serve_host(sv), rb_serve_state_dir(sv), sid, tenant, reply);
}

static unsigned route(struct rb_serve *sv, struct MHD_Connection *conn, const char *url, const char *method,
                      struct upload *u, json_t **reply)
{
	char buf[512];
	if (strncmp(url, "/v1/", 4) != 0 || strlen(url) >= sizeof buf)
		return error(reply, 404, "no such path (the API is under /v1/)");
	snprintf(buf, sizeof buf, "%s", url + 4);
	char *seg[6] = {0};
	int n = 0;
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (n == 6)
			return error(reply, 404, "no such path");
		seg[n++] = t;
	}
	bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST"), del = !strcmp(method, "DELETE");
	if (n == 2 && !strcmp(seg[0], "snapshots")) {
		if (!get)
			return error(reply, 405, "/v1/snapshots/REF: GET");
		return rb_serve_snapshot_open(sv, seg[1], u->tenant, &u->raw_fd, &u->raw_len, reply);
	}
	if (n == 1 && !strcmp(seg[0], "stats")) {
		if (u->tenant)
			return error(reply, 403, "/v1/stats: the operator's (the unix socket), not a tenant key's");
		return get ? rb_serve_stats(sv, reply) : error(reply, 405, "/v1/stats: GET");
	}
	if (n >= 1 && !strcmp(seg[0], "approvals")) {
		const char *what = n != 3                       ? NULL
		                   : !strcmp(seg[2], "approve") ? "approved"
		                   : !strcmp(seg[2], "deny")    ? "denied"
		                                                : NULL;
		if (n != 1 && !what)
			return error(reply, 404, "no such path");
		if (!(what ? post : get))
			return error(reply, 405, what ? "/v1/approvals/ID/approve|deny: POST" : "/v1/approvals: GET");
		return rb_serve_approvals(sv, what ? seg[1] : NULL, what, u->tenant, reply);
	}
	if (n < 1 || strcmp(seg[0], "sessions") != 0)
		return error(reply, 404, "no such path");
	unsigned st = 400;
	json_t *body = NULL;
	if (n == 1) {
		if (get)
			return rb_serve_session_list_tenant(sv, u->tenant, reply);
		if (!post)
			return error(reply, 405, "/v1/sessions: GET or POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		/* A key's session is its tenant's, of its policies and images (serve/keys.h). */
		char why[256];
		if (!rb_serve_key_may_create(u->key, body, why, sizeof why)) {
			json_decref(body);
			return error(reply, 403, why);
		}
		st = rb_serve_session_create(sv, body, reply);
		json_decref(body);
		return st;
	}
	const char *sid = seg[1];
	if (n == 3 && !strcmp(seg[2], "resume")) { /* serve/resume.c: live or closed, the tenant's only */
		if (!post)
			return error(reply, 405, "/v1/sessions/ID/resume: POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		st = rb_serve_session_resume(sv, sid, body, u->key, reply);
		json_decref(body);
		return st;
	}
	unsigned refused = session_refused(sv, sid, u->tenant, reply);
	if (refused)
		return refused;
	if (n == 2) {
		if (get)
			return rb_serve_session_get(sv, sid, reply);
		if (del)
			return rb_serve_session_delete(sv, sid, reply);
		return error(reply, 405, "/v1/sessions/ID: GET or DELETE");
	}
	if (n == 3 && !strcmp(seg[2], "files")) {
		const char *fp = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
		if (!strcmp(method, "PUT") && u->put)
			return rb_serve_put_finish(sv, rb_steal_ptr(&u->put), reply);
		uint64_t max = RB_SERVE_STREAM_CAP;
		if (get && !query_u64(conn, "max_bytes", &max, reply, &st))
			return call_refused(sv, sid, "file_read", asked_path(fp), 0, st, reply);
		if (get)
			return rb_serve_get_open(sv, sid, fp, max, &u->raw_fd, &u->raw_len, reply);
		return error(reply, 405, "/v1/sessions/ID/files: GET or PUT");
	}
	if (n == 4 && !strcmp(seg[2], "fs"))
		return route_fs(sv, conn, sid, seg[3], get, post, u, reply);
	if (n == 3 && !strcmp(seg[2], "snapshots")) {
		if (!post)
			return error(reply, 405, "/v1/sessions/ID/snapshots: POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		bool empty = json_is_object(body) && json_object_size(body) == 0;
		json_decref(body);
		if (!empty)
			return error(reply, 400, "request body: $: snapshots takes {} (no key)");
		return rb_serve_snapshot(sv, sid, reply);
	}
	if (n == 3 && !strcmp(seg[2], "hydrate")) {
		if (!post)
			return error(reply, 405, "/v1/sessions/ID/hydrate: POST");
		if (u->hyd)
			return rb_serve_hydrate_finish(sv, rb_steal_ptr(&u->hyd), reply);
		if (!u->hydrate_ref)
			return error(reply, 400, "hydrate: a tar body or ?snapshot=REF");
		struct rb_serve_hydrate_bounds b;
		if (!hydrate_bounds(conn, &b, reply, &st))
			return st;
		return rb_serve_hydrate_ref(
		    sv, sid, MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "snapshot"), &b, reply);
	}
	if (n == 3 && !strcmp(seg[2], "manifest")) { /* serve/manifest.c */
		if (!post)
			return error(reply, 405, "/v1/sessions/ID/manifest: POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		st = rb_serve_manifest_post(sv, sid, body, reply);
		json_decref(body);
		return st;
	}
	if (n == 3 && !strcmp(seg[2], "ports")) { /* serve/ports.c */
		if (get)
			return rb_serve_port_list(sv, sid, reply);
		if (!post)
			return error(reply, 405, "/v1/sessions/ID/ports: GET or POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		st = json_is_object(body) ? rb_serve_port_open(sv, sid, body, reply)
		                          : error(reply, 400, "ports: the body is an object");
		json_decref(body);
		return st;
	}
	if (n == 4 && !strcmp(seg[2], "ports")) {
		unsigned pn;
		if (!del)
			return error(reply, 405, "/v1/sessions/ID/ports/N: DELETE");
		if (rb_serve_port_number(seg[3], &pn) < 0)
			return error(reply, 400, "ports: N is 3000-9999");
		return rb_serve_port_close(sv, sid, pn, reply);
	}
	if (strcmp(seg[2], "processes") != 0)
		return error(reply, 404, "no such path");
	if (n == 3) {
		if (!post)
			return error(reply, 405, "/v1/sessions/ID/processes: POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		st = rb_serve_proc_start(sv, sid, body, reply);
		json_decref(body);
		return st;
	}
	const char *pid = seg[3];
	if (n == 4) {
		if (!get)
			return error(reply, 405, "/v1/sessions/ID/processes/PID: GET");
		return rb_serve_proc_get(sv, sid, pid, reply);
	}
	if (n != 5)
		return error(reply, 404, "no such path");
	if (!strcmp(seg[4], "output")) {
		if (!get)
			return error(reply, 405, "output: GET");
		uint64_t after = 0, wait = 0;
		const char *a = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "after_seq");
		const char *w = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "wait_ms");
		if (a && !parse_u64(a, &after))
			return error(reply, 400, "query `after_seq`: expected a non-negative integer");
		if (w && !parse_u64(w, &wait))
			return error(reply, 400, "query `wait_ms`: expected a non-negative integer");
		if (wants_stream(conn, reply, &st)) {
			if (st != 200)
				return st;
			return stream_open(sv, sid, pid, after, u, reply);
		}
		return rb_serve_proc_output(sv, sid, pid, after,
		                            wait > RB_SERVE_MAX_WAIT_MS ? RB_SERVE_MAX_WAIT_MS : (unsigned)wait, reply);
	}
	if (!strcmp(seg[4], "stdin")) {
		if (!post)
			return error(reply, 405, "stdin: POST");
		const char *c = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "close");
		if (c && strcmp(c, "0") != 0 && strcmp(c, "1") != 0)
			return error(reply, 400, "query `close`: expected 0 or 1");
		return rb_serve_proc_stdin(sv, sid, pid, u->data, u->len, c && !strcmp(c, "1"), reply);
	}
	if (!strcmp(seg[4], "resize")) {
		if (!post)
			return error(reply, 405, "resize: POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		st = rb_serve_proc_resize(sv, sid, pid, body, reply);
		json_decref(body);
		return st;
	}
	if (!strcmp(seg[4], "signal")) {
		if (!post)
			return error(reply, 405, "signal: POST");
		if (!(body = parse(u, reply, &st)))
			return st;
		st = rb_serve_proc_signal(sv, sid, pid, body, reply);
		json_decref(body);
		return st;
	}
	return error(reply, 404, "no such path");
}

/* Whether url is /v1/sessions/SID/LEAF (exactly), SID into sid. */
static bool session_leaf(const char *url, const char *leaf, char *sid, size_t len)
{
	static const char pre[] = "/v1/sessions/";
	if (strncmp(url, pre, sizeof pre - 1) != 0)
		return false;
	const char *s = url + sizeof pre - 1, *slash = strchr(s, '/');
	if (!slash || slash == s || (size_t)(slash - s) >= len || strcmp(slash + 1, leaf) != 0)
		return false;
	snprintf(sid, len, "%.*s", (int)(slash - s), s);
	return true;
}

/* The first call of a PUT .../files: the file is opened (its temporary beside the target)
 * before any byte is read, so a bad path or a body over the cap is refused unread. */
static unsigned put_start(struct rb_serve *sv, struct MHD_Connection *conn, const char *sid, struct upload *u,
                          json_t **reply)
{
	unsigned st = 400;
	bool parents;
	mode_t mode = 0644;
	uint64_t clen = 0;
	const char *path = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *ms = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "mode");
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (!query_bool(conn, "parents", &parents, reply, &st))
		return call_refused(sv, sid, "file_write", asked_path(path), 0, st, reply);
	if (ms) {
		char *end;
		unsigned long v = strtoul(ms, &end, 8);
		if (!*ms || *end || v > 07777)
			return call_refused(sv, sid, "file_write", asked_path(path), 0,
			                    error(reply, 400, "query `mode`: an octal mode (\"0644\", at most 07777)"),
			                    reply);
		mode = (mode_t)v;
	}
	if (cl && parse_u64(cl, &clen) && clen > RB_SERVE_STREAM_CAP)
		return call_refused(sv, sid, "file_write", asked_path(path), EFBIG,
		                    error(reply, 413, "file over the cap of 1 GiB"), reply);
	return rb_serve_put_begin(sv, sid, path, mode, parents, RB_SERVE_STREAM_CAP, &u->put, reply);
}

static enum MHD_Result respond_fd(struct MHD_Connection *conn, struct upload *u)
{
	struct MHD_Response *r = MHD_create_response_from_fd64(u->raw_len, u->raw_fd);
	if (!r)
		return MHD_NO;
	u->raw_fd = -1; /* the response owns it */
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(conn, 200, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **req_cls)
{
	struct rb_serve_http *h = cls;
	struct upload *u = *req_cls;
	rb_log_use(rb_serve_logger(h->sv)); /* this connection's thread logs as the daemon does */
	if (!u) {
		/* A TCP caller is known by its key before a byte of its body is read. */
		const char *tenant = NULL;
		const struct rb_serve_key *key = NULL;
		if (h->keys && !(tenant = rb_serve_key_tenant(
		                     key = rb_serve_keys_find(h->keys, MHD_lookup_connection_value(
		                                                           conn, MHD_HEADER_KIND, "Authorization"))))) {
			json_t *reply = NULL;
			error(&reply, 401, "a bearer key is required (Authorization: Bearer KEY)");
			return respond_401(conn, reply);
		}
		char sid[128];
		json_t *reply = NULL;
		unsigned st = 0;
		struct rb_error err;
		if (tenant && (st = rb_serve_inflight_take(h->inflight, tenant, &err)) != 0) {
			error(&reply, st, err.msg);
			return respond(conn, st, reply);
		}
		u = calloc(1, sizeof *u);
		if (!u) {
			if (tenant)
				rb_serve_inflight_put(h->inflight, tenant);
			return MHD_NO;
		}
		u->raw_fd = -1;
		u->cap = BODY_CAP;
		u->tenant = tenant;
		u->key = key;
		u->holds_call = tenant != NULL;
		*req_cls = u;
		/* A file's or an archive's body streams to disk: its call starts now, once the caller's
		 * tenant is known to own the session (never a directory made or a byte spooled in
		 * another tenant's sandbox first). */
		bool put = !strcmp(method, "PUT") && session_leaf(url, "files", sid, sizeof sid);
		bool hyd = !put && !strcmp(method, "POST") && session_leaf(url, "hydrate", sid, sizeof sid);
		if ((put || hyd) && (st = session_refused(h->sv, sid, tenant, &reply)) != 0)
			return respond(conn, st, reply);
		if (put)
			st = put_start(h->sv, conn, sid, u, &reply);
		else if (hyd)
			st = hydrate_start(h->sv, conn, sid, u, &reply);
		if (st && st != 200)
			return respond(conn, st, reply);
		return MHD_YES;
	}
	if (*size) {
		struct rb_error err;
		if (u->failed) {
			/* Read and dropped: the error is the reply. */
		} else if (u->hydrate_ref) {
			u->failed = error(&u->reply, 400, "hydrate: ?snapshot=REF takes no body");
		} else if (u->put || u->hyd) {
			int r = u->put ? rb_serve_put_write(u->put, data, *size, &err)
			               : rb_serve_hydrate_write(u->hyd, data, *size, &err);
			if (r < 0) {
				u->failed = rb_serve_error(&err, &u->reply);
				if (err.errnum == EFBIG)
					u->failed = 413;
				rb_serve_put_abort(rb_steal_ptr(&u->put));
				rb_serve_hydrate_abort(rb_steal_ptr(&u->hyd));
				/* The rest of the body is read and dropped, never kept: a reply sent while
				 * the client still writes is lost to it when the connection resets. */
			}
		} else if (u->len + *size > u->cap) {
			u->too_big = true;
		} else {
			char *nd = realloc(u->data, u->len + *size + 1);
			if (!nd)
				return MHD_NO;
			u->data = nd;
			memcpy(u->data + u->len, data, *size);
			u->len += *size;
			u->data[u->len] = '\0';
		}
		*size = 0;
		return MHD_YES;
	}
	json_t *reply = NULL;
	unsigned st;
	if (u->failed) {
		st = u->failed;
		reply = rb_steal_ptr(&u->reply);
	} else {
		st = u->too_big ? error(&reply, 413, "request body over 1 MiB")
		                : route(h->sv, conn, url, method, u, &reply);
	}
	if (st == 200 && u->raw_fd >= 0)
		return respond_fd(conn, u);
	if (st == 200 && u->stream)
		return respond_stream(conn, u);
	return respond(conn, st, reply);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct rb_serve_http *h = cls;
	struct upload *u = *req_cls;
	if (u) {
		if (u->holds_call)
			rb_serve_inflight_put(h->inflight, u->tenant);
		free(u->data);
		if (u->raw_fd >= 0)
			close(u->raw_fd);
		rb_serve_put_abort(u->put); /* a client gone mid-body: its temporary file goes */
		rb_serve_hydrate_abort(u->hyd);
		if (u->stream)
			stream_free(u->stream);
		json_decref(u->reply);
	}
	free(u);
	*req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	rb_debug("serve: http: %s", msg);
}

static struct MHD_Daemon *mhd_start(struct rb_serve_http *h)
{
	return MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
	                        NULL, NULL, on_request, h, MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
	                        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd, MHD_OPTION_CONNECTION_LIMIT, 512u,
	                        MHD_OPTION_CONNECTION_TIMEOUT, 120u, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	                        MHD_OPTION_END);
}

int rb_serve_http_share(struct rb_serve_http *h, const char *group, struct rb_error *err)
{
	struct group gr, *g = NULL;
	char buf[4096];
	char *end = NULL;
	unsigned long gid = strtoul(group, &end, 10);
	if (getgrnam_r(group, &gr, buf, sizeof buf, &g) == 0 && g)
		gid = g->gr_gid;
	else if (!*group || *end)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "--group `%s`: no such group", group);
	/* From 0600 to 0660 only once the group is the one named: never open to another. */
	if (chown(h->path, (uid_t)-1, (gid_t)gid) < 0 || chmod(h->path, 0660) < 0)
		return rb_error_set(err, errno, "socket %s: group `%s`", h->path, group);
	return 0;
}

/* addr as a loopback socket address; anything else is refused. */
static int loopback_addr(const char *addr, struct sockaddr_storage *ss, socklen_t *len, struct rb_error *err)
{
	char host[64];
	const char *colon = strrchr(addr, ':');
	char *end = NULL;
	unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
	if (!colon || !colon[1] || *end || port == 0 || port > 65535 || (size_t)(colon - addr) >= sizeof host)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "--listen `%s`: expected HOST:PORT (127.0.0.1:8080)", addr);
	snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof host, "127.0.0.1");
	size_t hl = strlen(host);
	if (hl > 2 && host[0] == '[' && host[hl - 1] == ']') {
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a6->sin6_addr) == 1 && IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) {
			a6->sin6_family = AF_INET6;
			a6->sin6_port = htons((uint16_t)port);
			*len = sizeof *a6;
			return 0;
		}
	} else if (inet_pton(AF_INET, host, &a4->sin_addr) == 1 && (ntohl(a4->sin_addr.s_addr) >> 24) == 127) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*len = sizeof *a4;
		return 0;
	}
	return rb_error_setk(
	    err, RB_ERR_FORBIDDEN, 0,
	    "--listen `%s`: only a loopback address (127.0.0.0/8, [::1], localhost): the API has no TLS", addr);
}

int rb_serve_http_start_tcp(struct rb_serve *sv, const char *addr, const struct rb_serve_keys *keys, unsigned max_calls,
                            struct rb_serve_http **out, struct rb_error *err)
{
	struct sockaddr_storage ss = {0};
	socklen_t len = 0;
	if (!keys)
		return rb_error_setk(err, RB_ERR_INPUT, 0,
		                     "--listen needs --keys FILE: TCP callers are known by their key");
	if (loopback_addr(addr, &ss, &len, err) < 0)
		return -1;
	struct rb_serve_http *h = calloc(1, sizeof *h);
	if (!h)
		return rb_error_set(err, ENOMEM, "serve");
	h->sv = sv;
	h->keys = keys;
	h->inflight = rb_serve_inflight_new(max_calls);
	h->fd = h->inflight ? socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
	int one = 1;
	if (h->fd < 0 || setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(h->fd, (struct sockaddr *)&ss, len) < 0 || listen(h->fd, 64) < 0) {
		rb_error_set(err, errno, "--listen %s", addr);
		if (h->fd >= 0)
			close(h->fd);
		rb_serve_inflight_free(h->inflight);
		free(h);
		return -1;
	}
	h->d = mhd_start(h);
	if (!h->d) {
		close(h->fd);
		rb_serve_inflight_free(h->inflight);
		free(h);
		return rb_error_setk(err, RB_ERR_HOST, 0, "--listen %s: libmicrohttpd did not start", addr);
	}
	*out = h;
	return 0;
}

int rb_serve_http_start(struct rb_serve *sv, const char *path, struct rb_serve_http **out, struct rb_error *err)
{
	struct rb_serve_http *h = calloc(1, sizeof *h);
	if (!h)
		return rb_error_set(err, ENOMEM, "serve");
	h->sv = sv;
	h->fd = -1;
	if (strlen(path) >= sizeof h->path) {
		free(h);
		return rb_error_setk(err, RB_ERR_INPUT, 0, "socket path %s: too long for a unix socket", path);
	}
	snprintf(h->path, sizeof h->path, "%s", path);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	memcpy(a.sun_path, h->path, sizeof h->path);
	h->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (h->fd < 0) {
		free(h);
		return rb_error_set(err, errno, "socket");
	}
	/* A socket left by a daemon that died is replaced; one that answers is another daemon's. */
	struct stat st;
	if (lstat(path, &st) == 0) {
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		bool live = probe >= 0 && S_ISSOCK(st.st_mode) && connect(probe, (struct sockaddr *)&a, sizeof a) == 0;
		if (probe >= 0)
			close(probe);
		if (live || !S_ISSOCK(st.st_mode)) {
			close(h->fd);
			free(h);
			return rb_error_setk(err, RB_ERR_CONFLICT, EEXIST, "socket %s: %s", path,
			                     live ? "another runbox serve answers on it"
			                          : "exists and is not a socket");
		}
		unlink(path);
	}
	/* Made 0600 from the start: bound under a umask that leaves the owner alone. */
	mode_t old = umask(0177);
	int r = bind(h->fd, (struct sockaddr *)&a, sizeof a);
	int e = errno;
	umask(old);
	if (r < 0 || chmod(path, 0600) < 0 || listen(h->fd, 64) < 0) {
		rb_error_set(err, r < 0 ? e : errno, "socket %s", path);
		close(h->fd);
		free(h);
		return -1;
	}
	h->d = mhd_start(h);
	if (!h->d) {
		unlink(path);
		close(h->fd);
		free(h);
		return rb_error_setk(err, RB_ERR_HOST, 0, "socket %s: libmicrohttpd did not start", path);
	}
	*out = h;
	return 0;
}

void rb_serve_http_stop(struct rb_serve_http *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	close(h->fd);
	if (h->path[0])
		unlink(h->path);
	rb_serve_inflight_free(h->inflight);
	free(h);
}

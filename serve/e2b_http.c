/* The E2B front end's listener: a second libmicrohttpd daemon on loopback TCP (a thread per
 * connection), routing envd paths (by E2b-Sandbox-Id, X-Access-Token) and the control plane. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "serve/e2b_internal.h"
#include "serve/inflight.h"

#define BODY_CAP (1u << 20) /* a JSON body; a file's streams to disk (e2b_files) */

struct e2b_http {
	struct MHD_Daemon *d;
	int fd;
	struct rb_serve_inflight *inflight; /* each tenant's calls in flight */
};

#define UNKNOWN_IDLE_S 5u  /* an unknown caller's connection idle this long is closed */
#define UNKNOWN_BODY_S 10u /* and its body is answered after this long */

struct upload {
	char *data;
	size_t len;
	bool too_big;
	bool files_post;
	struct e2b_files *files; /* a known caller's POST /files: its files written as they come */
	struct MHD_PostProcessor *pp;
	char *part;      /* the multipart part being read: its filename */
	const char *bad; /* a body that cannot be taken */
	bool unknown;    /* no valid key (control) or sandbox token (envd): its body is dropped unread */
	uint64_t unknown_since_us;
	bool answered;   /* before its body ended (an unknown caller's, sending too long) */
	char tenant[65]; /* the caller's, when it holds one of its calls in flight; else "" */
};

static bool append(char **buf, size_t *len, size_t cap, const char *data, size_t n)
{
	if (*len + n > cap)
		return false;
	char *nb = realloc(*buf, *len + n + 1);
	if (!nb)
		return false;
	memcpy(nb + *len, data, n);
	*len += n;
	nb[*len] = '\0';
	*buf = nb;
	return true;
}

static enum MHD_Result post_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                 const char *ctype, const char *enc, const char *data, uint64_t off, size_t size)
{
	(void)kind, (void)key, (void)ctype, (void)enc;
	struct upload *u = cls;
	if (!filename)
		return MHD_YES; /* a form field that is not a file */
	/* A part begins at offset 0; libmicrohttpd may announce it with no data first. */
	if (off == 0 && !(u->part && !e2b_files_len(u->files) && !strcmp(u->part, filename))) {
		free(u->part);
		u->part = strdup(filename);
		e2b_files_next(u->files, filename);
	}
	if (size)
		e2b_files_write(u->files, data, size);
	return e2b_files_refused(u->files) ? MHD_NO : MHD_YES;
}

/* E2b-Sandbox-Port, when given, names envd's. */
static bool envd_port(struct MHD_Connection *conn, const char **port)
{
	*port = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	return !*port || !strcmp(*port, "49983");
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct e2b_stream *st = cls;
	size_t n = st->next(st, buf, max);
	return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
	struct e2b_stream *st = cls;
	st->free(st);
}

static enum MHD_Result send_reply(struct MHD_Connection *conn, struct e2b_reply *rp)
{
	struct MHD_Response *r;
	const char *type = "application/json";
	if (rp->stream) {
		r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, rp->stream, stream_free);
		if (!r) {
			rp->stream->free(rp->stream);
			return MHD_NO;
		}
		rp->stream = NULL;
		type = "application/connect+json";
	} else if (rp->fd >= 0) {
		r = MHD_create_response_from_fd64(rp->fd_len, rp->fd);
		if (!r)
			return MHD_NO;
		rp->fd = -1; /* the response owns it */
		type = rp->raw_type ? rp->raw_type : "application/octet-stream";
	} else if (rp->raw) {
		r = MHD_create_response_from_buffer(rp->raw_len, rp->raw, MHD_RESPMEM_MUST_FREE);
		if (!r)
			return MHD_NO;
		rp->raw = NULL;
		type = rp->raw_type ? rp->raw_type : "application/octet-stream";
	} else if (rp->json) {
		char *text = json_dumps(rp->json, JSON_COMPACT);
		if (!text)
			return MHD_NO;
		r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
		if (!r) {
			free(text);
			return MHD_NO;
		}
	} else {
		r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	enum MHD_Result ret = MHD_queue_response(conn, rp->status ? rp->status : 500, r);
	MHD_destroy_response(r);
	return ret;
}

/* An envd refusal in the form its caller reads: a Connect error for an RPC, else {code, message}. */
static void envd_refusal(const char *url, unsigned status, const char *why, struct e2b_reply *rp)
{
	if (url[0] == '/' && strchr(url + 1, '.') && strchr(url + 1, '/'))
		e2b_rpc_error(rp, status == 401 ? "unauthenticated" : "unavailable", why);
	else
		e2b_api_error(rp, status, "%s", why);
	rp->status = status;
}

static void route(struct rb_e2b *e, struct MHD_Connection *conn, const char *url, const char *method, struct upload *u,
                  struct e2b_reply *rp)
{
	struct e2b_req rq = {.conn = conn, .method = method, .url = url, .body = u->data ? u->data : "", .len = u->len};
	if (u->too_big)
		return e2b_api_error(rp, 413, "request body over its cap (%u MiB)", BODY_CAP >> 20);
	const char *port;
	if (!envd_port(conn, &port))
		return e2b_api_error(rp, 502, "port %s of the sandbox: runbox serves envd (49983) only (docs/e2b.md)",
		                     port);
	if (!e2b_is_envd_path(url))
		return e2b_control(e, &rq, rp);
	/* The caller was known by its headers before its files were written. */
	if (u->files)
		return e2b_files_end(u->files, rp);
	char sid[E2B_ID_HEX];
	const char *why = "";
	unsigned st = e2b_authorize(e, conn, sid, NULL, &why);
	if (st)
		return envd_refusal(url, st, why, rp);
	if (u->files_post)
		return e2b_api_error(rp, u->bad ? 400 : 503, "%s",
		                     u->bad ? u->bad : "the upload was not taken (try again)");
	e2b_envd(e, &rq, sid, rp);
}

/* The first call of a known caller's POST /files: its files are written as the body comes. */
static enum MHD_Result files_start(struct rb_e2b *e, struct MHD_Connection *conn, const char *sid, struct upload *u)
{
	const char *ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	const char *ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
	const char *port;
	/* The bytes are written as they come: a compressed body would land compressed. */
	if (ce && strcasecmp(ce, "identity") != 0)
		u->bad = "Content-Encoding: runbox serve takes uploads uncompressed (write without gzip)";
	if (u->bad || !envd_port(conn, &port))
		return MHD_YES; /* refused by route() once the body is dropped */
	if (!(u->files = e2b_files_begin(e, conn, sid)))
		return MHD_NO;
	if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0) {
		e2b_files_next(u->files, NULL); /* the body is the file */
		return MHD_YES;
	}
	u->pp = MHD_create_post_processor(conn, 65536, post_part, u);
	if (!u->pp)
		e2b_files_refuse(u->files, 400, "a multipart body without a boundary");
	return MHD_YES;
}

/* The call's reply, routed and queued. */
static enum MHD_Result answer(struct rb_e2b *e, struct MHD_Connection *conn, const char *url, const char *method,
                              struct upload *u)
{
	struct e2b_reply rp = E2B_REPLY_INIT;
	route(e, conn, url, method, u, &rp);
	enum MHD_Result ret = send_reply(conn, &rp);
	json_decref(rp.json);
	free(rp.raw);
	if (rp.stream)
		rp.stream->free(rp.stream);
	if (rp.fd >= 0)
		close(rp.fd);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *data, size_t *size, void **req_cls)
{
	(void)version;
	struct rb_e2b *e = cls;
	struct upload *u = *req_cls;
	rb_log_use(rb_serve_logger(e->sv));
	if (!u) {
		u = calloc(1, sizeof *u);
		if (!u)
			return MHD_NO;
		*req_cls = u;
		/* A caller is known by its headers before a byte of its body is kept: an unknown one's
		 * body is read and dropped (route() then answers it as it would have), never held in
		 * memory for anyone who can reach the port, nor a connection for long. */
		char sid[E2B_ID_HEX], tenant[65] = "";
		const char *why;
		const struct e2b_key *k = NULL;
		u->unknown =
		    e2b_is_envd_path(url)
		        ? e2b_authorize(e, conn, sid, tenant, &why) != 0
		        : !(k = e2b_key_find(e, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-API-Key")));
		if (u->unknown) {
			/* Its body is read and dropped, so that a client sending one hears its 401 (a reply
			 * before the body ends is a reset to most clients), but briefly: a connection that
			 * idles UNKNOWN_IDLE_S is closed, one still sending after UNKNOWN_BODY_S answered. */
			MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, UNKNOWN_IDLE_S);
			u->unknown_since_us = rb_now_us();
			return MHD_YES;
		}
		if (k)
			snprintf(tenant, sizeof tenant, "%s", k->tenant);
		struct rb_error err;
		unsigned st = rb_serve_inflight_take(e->http->inflight, tenant, &err);
		if (st) {
			struct e2b_reply rp = E2B_REPLY_INIT;
			e2b_api_error(&rp, st, "%s", err.msg);
			enum MHD_Result ret = send_reply(conn, &rp);
			json_decref(rp.json);
			return ret;
		}
		memcpy(u->tenant, tenant, sizeof tenant);
		u->files_post = !strcmp(method, "POST") && !strcmp(url, "/files");
		return u->files_post ? files_start(e, conn, sid, u) : MHD_YES;
	}
	if (u->answered) {
		*size = 0;
		return MHD_YES;
	}
	if (u->unknown && *size && rb_now_us() - u->unknown_since_us > UNKNOWN_BODY_S * 1000000ull) {
		*size = 0;
		u->answered = true;
		return answer(e, conn, url, method, u);
	}
	if (*size) {
		if (u->bad || u->unknown || (u->files && e2b_files_refused(u->files))) {
			/* Refused already: the rest of the body is read and dropped. */
		} else if (u->pp) {
			if (MHD_post_process(u->pp, data, *size) != MHD_YES)
				e2b_files_refuse(u->files, 400, "a malformed multipart body");
		} else if (u->files) {
			e2b_files_write(u->files, data, *size);
		} else if (!u->files_post && !u->too_big && !append(&u->data, &u->len, BODY_CAP, data, *size)) {
			u->too_big = true;
		}
		*size = 0;
		return MHD_YES;
	}
	/* A multipart body ends at its closing boundary: one cut short is refused, its file not kept. */
	if (u->pp && MHD_destroy_post_processor(u->pp) != MHD_YES)
		e2b_files_refuse(u->files, 400, "a multipart body cut short (no closing boundary)");
	u->pp = NULL;
	return answer(e, conn, url, method, u);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	(void)conn, (void)toe;
	struct rb_e2b *e = cls;
	struct upload *u = *req_cls;
	if (!u)
		return;
	if (u->tenant[0])
		rb_serve_inflight_put(e->http->inflight, u->tenant);
	if (u->pp)
		MHD_destroy_post_processor(u->pp);
	e2b_files_free(u->files); /* a client gone mid-body: the file it was writing goes */
	free(u->part);
	free(u->data);
	free(u);
	*req_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	char msg[512];
	vsnprintf(msg, sizeof msg, fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	rb_debug("e2b: http: %s", msg);
}

/* "HOST:PORT" on loopback only: 127.0.0.0/8, localhost, [::1]. */
static int loopback_socket(const char *listen_at, char *url, size_t url_len, struct rb_error *err)
{
	char host[64];
	const char *colon = strrchr(listen_at, ':');
	if (!colon || (size_t)(colon - listen_at) >= sizeof host)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "--e2b-listen `%s`: expected HOST:PORT", listen_at);
	memcpy(host, listen_at, (size_t)(colon - listen_at));
	host[colon - listen_at] = '\0';
	char *end;
	unsigned long p = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || p > 65535)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "--e2b-listen `%s`: bad port", listen_at);
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	if (!strcmp(host, "[::1]") || !strcmp(host, "::1")) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		a->sin6_port = htons((uint16_t)p);
		sl = sizeof *a;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)p);
		if (!strcmp(host, "localhost"))
			a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else if (inet_pton(AF_INET, host, &a->sin_addr) != 1 || (ntohl(a->sin_addr.s_addr) >> 24) != 127)
			return rb_error_setk(
			    err, RB_ERR_INPUT, 0,
			    "--e2b-listen `%s`: only a loopback address (127.0.0.0/8, localhost, [::1])", listen_at);
		sl = sizeof *a;
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return rb_error_set(err, e, "--e2b-listen %s", listen_at);
	}
	char addr[INET6_ADDRSTRLEN] = "";
	bool v6 = ss.ss_family == AF_INET6;
	inet_ntop(ss.ss_family,
	          v6 ? (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr
	             : (void *)&((struct sockaddr_in *)&ss)->sin_addr,
	          addr, sizeof addr);
	snprintf(url, url_len, v6 ? "http://[%s]:%u" : "http://%s:%u", addr,
	         (unsigned)ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port));
	return fd;
}

int rb_e2b_start(struct rb_serve *sv, const char *listen_at, const char *keys_path, unsigned max_calls,
                 struct rb_e2b **out, struct rb_error *err)
{
	struct rb_e2b *e = calloc(1, sizeof *e);
	if (!e)
		return rb_error_set(err, ENOMEM, "e2b");
	e->sv = sv;
	pthread_mutex_init(&e->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->stop_cv, &ca);
	pthread_condattr_destroy(&ca);
	e->http = calloc(1, sizeof *e->http);
	if (!e->http) {
		rb_e2b_stop(e);
		return rb_error_set(err, ENOMEM, "e2b");
	}
	e->http->fd = -1;
	if (!(e->http->inflight = rb_serve_inflight_new(max_calls))) {
		rb_e2b_stop(e);
		return rb_error_set(err, ENOMEM, "e2b");
	}
	if (e2b_keys_load(e, keys_path, err) < 0 ||
	    (e->http->fd = loopback_socket(listen_at, e->url, sizeof e->url, err)) < 0 ||
	    e2b_reaper_start(e, err) < 0) {
		rb_e2b_stop(e);
		return -1;
	}
	e->http->d = MHD_start_daemon(
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
	    on_request, e, MHD_OPTION_NOTIFY_COMPLETED, on_completed, e, MHD_OPTION_LISTEN_SOCKET,
	    (MHD_socket)e->http->fd, MHD_OPTION_CONNECTION_LIMIT, 512u, MHD_OPTION_CONNECTION_TIMEOUT, 120u,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
	if (!e->http->d) {
		rb_e2b_stop(e);
		return rb_error_setk(err, RB_ERR_HOST, 0, "--e2b-listen %s: libmicrohttpd did not start", listen_at);
	}
	*out = e;
	return 0;
}

const char *rb_e2b_url(const struct rb_e2b *e)
{
	return e->url;
}

void rb_e2b_stop(struct rb_e2b *e)
{
	if (!e)
		return;
	if (e->http && e->http->d)
		MHD_stop_daemon(e->http->d);
	if (e->http && e->http->fd >= 0)
		close(e->http->fd);
	if (e->http)
		rb_serve_inflight_free(e->http->inflight);
	free(e->http);
	e2b_reaper_stop(e);
	e2b_table_free(e);
	free(e->keys);
	pthread_cond_destroy(&e->stop_cv);
	pthread_mutex_destroy(&e->lock);
	free(e);
}

/* The gateway endpoint: libmicrohttpd glue on passed listening sockets, and the
 * handler for /v1/health and /v1/whoami (token checked with common/token.c
 * against the run's scope). */
#define _GNU_SOURCE
#include "gateway/endpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "gateway/connector.h"
#include "gateway/curlpool.h"
#include "gateway/dns.h"
#include "gateway/mcp.h"
#include "gateway/cpushare.h"
#include "gateway/ratelimit.h"
#include "gateway/tunnel.h"
#include "gateway/workers.h"

#define CONN_LIMIT     64 /* the client is the sandbox: bound what it can hold open */
#define CONN_TIMEOUT_S 30u
#define PEEK_WAIT_MS   10                    /* between peeks at a connection's first bytes while they are a prefix */
#define CONN_MEMORY    (32 * 1024)           /* request headers beyond this get 431/413 from libmicrohttpd */
#define BODY_MAX       ((size_t)1024 * 1024) /* a connector call's request body, held until it is sent */
#define TUNNEL_LIMIT   32                    /* CONNECT tunnels (and connections still being classified) at once */

struct rb_gateway {
	struct rb_gateway_scope scope;
	/* One daemon without a listening socket: the acceptors hand it every connection that is
	 * not a CONNECT (MHD_add_connection); a CONNECT's authority-form is served by tunnel.c. */
	struct MHD_Daemon *daemon;
	int listen[RB_GATEWAY_MAX_FDS]; /* the gateway's dups of the listeners */
	pthread_t acceptors[RB_GATEWAY_MAX_FDS];
	unsigned n;     /* acceptors running */
	int stop_fd;    /* an eventfd, readable once rb_gateway_stop began */
	unsigned doors; /* connections being classified or tunnelled (under door_lock) */
	pthread_mutex_t door_lock;
	pthread_cond_t door_done;
	struct rb_gw_tunnel_env tenv;
	struct rb_gw_dns *dns; /* the DNS stub's thread, when served */
	struct rb_idem idem;   /* the run's idempotency keys and held calls */
	uint64_t requests;     /* updated with __atomic builtins from the daemons' threads */
	uint64_t unauthorized;
	uint64_t rate_limited;
	uint64_t refused;
	struct rb_ratelimit rate; /* one bucket for the run, over all its listening sockets */
	struct rb_gw_cpu cpu;     /* what the run's calls cost here, and its share of a core */
	struct rb_gw_ctx ctx;     /* the connector door */
	pthread_mutex_t event_lock;
};

/* One request's state between libmicrohttpd's calls: the body of a connector call. */
struct req {
	uint64_t t0;
	uint64_t cpu0;    /* the connection thread's CPU clock at the request's start */
	pthread_t thread; /* that thread (a connection's requests are served on it) */
	char *body;
	size_t len;
	bool too_big;
};

/* ---- the handler
 * -----------------------------------------------------------------------------
 */

static unsigned error_body(unsigned status, const char *msg, json_t **body)
{
	*body = json_pack("{s:s}", "error", msg);
	return status;
}

/* "Bearer <token>": scheme case-insensitive (RFC 7235), at least one space. */
static const char *bearer(const char *authorization)
{
	if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	const char *t = authorization + 7;
	while (*t == ' ')
		t++;
	return *t ? t : NULL;
}

unsigned rb_gateway_handle(const struct rb_gateway_scope *scope, const char *method, const char *path,
                           const char *authorization, int64_t now, json_t **body)
{
	bool health = !strcmp(path, "/v1/health"), whoami = !strcmp(path, "/v1/whoami");
	if (!health && !whoami)
		return error_body(404, "not found", body);
	if (strcmp(method, "GET") != 0)
		return error_body(405, "method not allowed", body);
	if (health) {
		*body = json_pack("{s:b}", "ok", 1);
		return 200;
	}
	const char *token = bearer(authorization);
	if (!token)
		return error_body(401, "missing bearer token", body);
	struct rb_token_claims c;
	struct rb_error err = {0};
	if (rb_token_verify(scope->key, scope->keylen, token, scope->run_id, now, &c, &err) < 0)
		return error_body(401, err.msg, body); /* token.c's messages are safe to return */
	*body = json_pack("{s:s, s:s, s:s, s:I}", "tenant", c.tenant, "agent", c.agent, "run", c.run, "expires",
	                  (json_int_t)c.expires);
	return 200;
}

/* ---- libmicrohttpd glue
 * ------------------------------------------------------------------- */

static enum MHD_Result proxy_request(struct rb_gateway *gw, struct MHD_Connection *conn, const char *url,
                                     const char *method, struct req *rq);

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls)
{
	struct rb_gateway *gw = cls;
	struct req *rq = *req_cls;
	bool proxy = !strncmp(url, "http://", 7) || !strcmp(method, "CONNECT");
	bool mcp = !strncmp(url, "/v1/mcp/", 8);
	bool connector = !strncmp(url, "/v1/connectors/", 15) || proxy || mcp;
	if (!rq) {
		if (!(rq = calloc(1, sizeof *rq)))
			return MHD_NO;
		rq->t0 = rb_now_us();
		rq->cpu0 = rb_gw_thread_cpu_ns();
		rq->thread = pthread_self();
		*req_cls = rq;
		return MHD_YES;
	}
	if (*upload_data_size) { /* only a connector call takes a body, up to BODY_MAX */
		size_t n = *upload_data_size;
		*upload_data_size = 0;
		if (!connector || rq->too_big)
			return MHD_YES;
		char *b = rq->len + n <= BODY_MAX ? realloc(rq->body, rq->len + n + 1) : NULL;
		if (!b) {
			rq->too_big = true;
			return MHD_YES;
		}
		memcpy(b + rq->len, upload_data, n);
		rq->body = b;
		rq->len += n;
		return MHD_YES;
	}
	__atomic_add_fetch(&gw->requests, 1, __ATOMIC_RELAXED);
	/* Before any work on the request (the token's HMAC included). */
	if (!rb_ratelimit_take(&gw->rate, rb_now_us())) {
		__atomic_add_fetch(&gw->rate_limited, 1, __ATOMIC_RELAXED);
		return rb_gw_respond_json(
		    conn, 429,
		    json_pack("{s:s, s:s}", "error", "rate limited", "hint",
		              "the run's gateway requests are over its rate; retry after a second"));
	}
	if (!rb_gw_cpu_admit(&gw->cpu, rb_now_us()))
		return rb_gw_respond_json(conn, 429, rb_gw_cpu_refusal());
	const char *authz = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	json_t *body = NULL;
	if (proxy)
		return proxy_request(gw, conn, url, method, rq);
	if (connector) {
		/* The token is the second factor beside the socket: checked before any decision. */
		unsigned st = rb_gateway_handle(&gw->scope, "GET", "/v1/whoami", authz, (int64_t)time(NULL), &body);
		if (st != 200) {
			__atomic_add_fetch(&gw->unauthorized, 1, __ATOMIC_RELAXED);
			json_t *ev = json_pack("{s:s, s:s, s:i, s:s, s:b, s:O?}", "door", mcp ? "mcp" : "connector",
			                       "method", method, "status", (int)st, "rule", "token", "refused", 1,
			                       "error", json_object_get(body, "error"));
			rb_gw_record(&gw->ctx, ev);
			return rb_gw_respond_json(conn, st, body);
		}
		_cleanup_json_ json_t *who = body;
		if (rq->too_big)
			return rb_gw_deny(&gw->ctx, conn, 413, mcp ? "mcp" : "connector", NULL, method, "body", NULL,
			                  "request body over 1 MiB", "send a smaller body", rq->t0);
		if (mcp)
			return rb_gw_mcp_call(&gw->ctx, conn, url + 8, method, rq->body, rq->len,
			                      json_string_value(json_object_get(who, "tenant")),
			                      json_string_value(json_object_get(who, "agent")), rq->t0);
		return rb_gw_connector_call(&gw->ctx, conn, url + 15, method, rq->body, rq->len,
		                            json_string_value(json_object_get(who, "tenant")),
		                            json_string_value(json_object_get(who, "agent")), rq->t0);
	}
	unsigned status = rb_gateway_handle(&gw->scope, method, url, authz, (int64_t)time(NULL), &body);
	if (status == 401)
		__atomic_add_fetch(&gw->unauthorized, 1, __ATOMIC_RELAXED);
	return rb_gw_respond_json(conn, status, body);
}

static enum MHD_Result proxy_request(struct rb_gateway *gw, struct MHD_Connection *conn, const char *url,
                                     const char *method, struct req *rq)
{
	char tok[RB_TOKEN_MAX + 16], authz[RB_TOKEN_MAX + 32];
	const char *pa = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Proxy-Authorization");
	json_t *body = NULL;
	unsigned st = 401;
	if (rb_gw_proxy_token(pa, tok, sizeof tok)) {
		snprintf(authz, sizeof authz, "Bearer %s", tok);
		st = rb_gateway_handle(&gw->scope, "GET", "/v1/whoami", authz, (int64_t)time(NULL), &body);
		OPENSSL_cleanse(tok, sizeof tok);
		OPENSSL_cleanse(authz, sizeof authz);
	} else {
		body =
		    json_pack("{s:s}", "error", "missing proxy credentials (the run token as HTTP_PROXY's password)");
	}
	if (st != 200) {
		__atomic_add_fetch(&gw->unauthorized, 1, __ATOMIC_RELAXED);
		rb_gw_record(&gw->ctx,
		             json_pack("{s:s, s:s, s:i, s:s, s:b, s:O?}", "door", "proxy", "method", method, "status",
		                       407, "rule", "token", "refused", 1, "error", json_object_get(body, "error")));
		char *text = json_dumps(body, JSON_COMPACT);
		json_decref(body);
		struct MHD_Response *r =
		    text ? MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE) : NULL;
		if (!r) {
			free(text);
			return MHD_NO;
		}
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
		MHD_add_response_header(r, MHD_HTTP_HEADER_PROXY_AUTHENTICATE, "Basic realm=\"runbox\"");
		enum MHD_Result ret = MHD_queue_response(conn, 407, r);
		MHD_destroy_response(r);
		return ret;
	}
	json_decref(body);
	if (!strcmp(method, "CONNECT")) /* tunnels are served before libmicrohttpd (gateway/tunnel.c) */
		return rb_gw_deny(&gw->ctx, conn, 403, "connect", url, method, "connect", url,
		                  "CONNECT after another request on the same connection is not served",
		                  "send CONNECT as the first request of a new connection to the proxy", rq->t0);
	if (rq->too_big)
		return rb_gw_deny(&gw->ctx, conn, 413, "proxy", NULL, method, "body", NULL, "request body over 1 MiB",
		                  "send a smaller body", rq->t0);
	return rb_gw_proxy_call(&gw->ctx, conn, url, method, rq->body, rq->len, rq->t0);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **req_cls, enum MHD_RequestTerminationCode toe)
{
	struct rb_gateway *gw = cls;
	struct req *rq = *req_cls;
	if (rq) {
		/* The request's CPU on its connection's thread: its handling and its answer's writes. */
		if (pthread_equal(rq->thread, pthread_self()))
			rb_gw_cpu_charge(&gw->cpu, rq->cpu0, rb_now_us());
		free(rq->body);
		free(rq);
	}
	*req_cls = NULL;
}

/* The path and query reach the handler as sent: the connector door decodes and judges them
 * itself (an encoded '/' or '..' must be seen to be refused) and forwards them unchanged. */
static size_t no_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	return strlen(s);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	vsnprintf(line, sizeof line, fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	rb_debug("gateway: %s", line);
}

/* ---- the listeners: CONNECT before libmicrohttpd
 * --------------------------------------------------------- */

struct acceptor_arg {
	struct rb_gateway *gw;
	int fd;
};

struct door_arg {
	struct rb_gateway *gw;
	int fd;
	struct sockaddr_storage addr;
	socklen_t addr_len;
};

static void door_end(struct rb_gateway *gw)
{
	pthread_mutex_lock(&gw->door_lock);
	if (--gw->doors == 0)
		pthread_cond_broadcast(&gw->door_done);
	pthread_mutex_unlock(&gw->door_lock);
}

/* A new connection: its first bytes say which server takes it. libmicrohttpd does not parse
 * CONNECT's authority-form target (and can only answer an upgrade with 101), so "CONNECT " goes
 * to tunnel.c; anything else to the daemon, with the bytes still unread (MSG_PEEK). */
static void *door(void *cls)
{
	struct door_arg *d = cls;
	struct rb_gateway *gw = d->gw;
	uint64_t cpu0 = rb_gw_thread_cpu_ns(); /* the classification and a whole tunnel are this thread's */
	static const char connect_[] = "CONNECT ";
	char peek[sizeof connect_ - 1];
	ssize_t n = 0;
	uint64_t deadline = rb_now_us() + (uint64_t)CONN_TIMEOUT_S * 1000000u;
	for (;;) {
		uint64_t now = rb_now_us();
		struct pollfd p[2] = {{.fd = d->fd, .events = POLLIN | POLLRDHUP},
		                      {.fd = gw->stop_fd, .events = POLLIN}};
		int r = now >= deadline ? 0 : poll(p, 2, (int)((deadline - now) / 1000 + 1));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || p[1].revents)
			break;
		n = recv(d->fd, peek, sizeof peek, MSG_PEEK);
		/* Short of the whole word while still a prefix of it: wait for more, unless no more can
		 * come. The bytes stay unread, so the socket polls readable at once: the wait is on the
		 * stop fd alone, PEEK_WAIT_MS at a time, never a spin. */
		if (n > 0 && (size_t)n < sizeof peek && !memcmp(peek, connect_, (size_t)n) &&
		    !(p[0].revents & (POLLHUP | POLLRDHUP | POLLERR))) {
			struct pollfd s = {.fd = gw->stop_fd, .events = POLLIN};
			int w = poll(&s, 1, PEEK_WAIT_MS);
			if (w > 0 || (w < 0 && errno != EINTR))
				break;
			continue;
		}
		break;
	}
	if (n == (ssize_t)sizeof peek && !memcmp(peek, connect_, sizeof peek))
		rb_gw_tunnel_serve(&gw->tenv, d->fd);
	else if (n > 0)
		MHD_add_connection(gw->daemon, d->fd, (const struct sockaddr *)&d->addr, d->addr_len); /* it owns fd */
	else
		close(d->fd);
	free(d);
	rb_gw_cpu_charge(&gw->cpu, cpu0, rb_now_us());
	door_end(gw);
	return NULL;
}

static void *acceptor(void *cls)
{
	struct acceptor_arg a = *(struct acceptor_arg *)cls;
	free(cls);
	struct rb_gateway *gw = a.gw;
	for (;;) {
		struct pollfd p[2] = {{.fd = a.fd, .events = POLLIN}, {.fd = gw->stop_fd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[1].revents)
			return NULL;
		if (!p[0].revents)
			continue;
		struct door_arg *d = calloc(1, sizeof *d);
		if (!d)
			continue;
		d->gw = gw;
		d->addr_len = sizeof d->addr;
		d->fd = accept4(a.fd, (struct sockaddr *)&d->addr, &d->addr_len, SOCK_CLOEXEC);
		if (d->fd < 0) {
			free(d);
			continue;
		}
		pthread_mutex_lock(&gw->door_lock);
		bool room = gw->doors < TUNNEL_LIMIT;
		gw->doors += room;
		pthread_mutex_unlock(&gw->door_lock);
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (!room || pthread_create(&t, &attr, door, d) != 0) {
			close(d->fd); /* over the bound: refused at once, not queued */
			free(d);
			if (room)
				door_end(gw);
		}
		pthread_attr_destroy(&attr);
	}
}

int rb_gateway_start(const struct rb_gateway_config *cfg, struct rb_gateway **out, struct rb_error *err)
{
	*out = NULL;
	if (cfg->n_listen_fds == 0 || cfg->n_listen_fds > RB_GATEWAY_MAX_FDS)
		return rb_error_set(err, EINVAL, "gateway: %u listening sockets (1..%d)", cfg->n_listen_fds,
		                    RB_GATEWAY_MAX_FDS);
	if (!cfg->key || cfg->keylen == 0 || cfg->keylen > RB_GATEWAY_KEY_MAX)
		return rb_error_set(err, EINVAL, "gateway: token key of %zu bytes", cfg->keylen);
	if (!cfg->run_id || strlen(cfg->run_id) >= RB_TOKEN_FIELD_MAX)
		return rb_error_set(err, EINVAL, "gateway: bad run id");
	struct rb_gateway *gw = calloc(1, sizeof *gw);
	if (!gw)
		return rb_error_set(err, ENOMEM, "gateway");
	memcpy(gw->scope.key, cfg->key, cfg->keylen);
	gw->scope.keylen = cfg->keylen;
	snprintf(gw->scope.run_id, sizeof gw->scope.run_id, "%s", cfg->run_id);
	pthread_mutex_init(&gw->event_lock, NULL);
	gw->ctx = (struct rb_gw_ctx){.conf = cfg->conf,
	                             .grants = cfg->grants,
	                             .n_grants = cfg->conf ? cfg->n_grants : 0,
	                             .event_fd = cfg->event_fd,
	                             .event_lock = &gw->event_lock,
	                             .refused = &gw->refused,
	                             .proxy = cfg->proxy,
	                             .n_proxy = cfg->n_proxy,
	                             .idem = &gw->idem,
	                             .approvals = cfg->approvals,
	                             .n_approvals = cfg->n_approvals,
	                             .approvals_dir = cfg->approvals_dir,
	                             .run_id = gw->scope.run_id,
	                             .stop_fd = -1,
	                             .mcp_grants = cfg->conf ? cfg->mcp : NULL,
	                             .n_mcp_grants = cfg->conf ? cfg->n_mcp : 0,
	                             .mcp_sessions = rb_gw_mcp_sessions_new(),
	                             .curlpool = rb_gw_curlpool_new(),
	                             .workers = rb_gw_workers_new(&gw->cpu)};
	rb_idem_init(&gw->idem);
	if (!gw->ctx.mcp_sessions || !gw->ctx.curlpool || !gw->ctx.workers) {
		rb_gw_mcp_sessions_free(gw->ctx.mcp_sessions);
		rb_gw_curlpool_free(gw->ctx.curlpool);
		rb_gw_workers_free(gw->ctx.workers);
		rb_idem_destroy(&gw->idem);
		pthread_mutex_destroy(&gw->event_lock);
		free(gw);
		return rb_error_set(err, ENOMEM, "gateway: MCP sessions or upstream handles");
	}
	if (rb_gw_secrets_load(&gw->ctx, err) < 0) {
		rb_gw_mcp_sessions_free(gw->ctx.mcp_sessions);
		rb_gw_curlpool_free(gw->ctx.curlpool);
		rb_gw_workers_free(gw->ctx.workers);
		rb_idem_destroy(&gw->idem);
		pthread_mutex_destroy(&gw->event_lock);
		free(gw);
		return -1;
	}
	rb_ratelimit_init(&gw->rate, cfg->rate ? cfg->rate : RB_GATEWAY_RATE,
	                  cfg->burst ? cfg->burst : RB_GATEWAY_BURST, rb_now_us());
	rb_gw_cpu_init(&gw->cpu, cfg->cpus, rb_now_us());
	gw->ctx.cpu = &gw->cpu;
	gw->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	gw->ctx.stop_fd = gw->stop_fd;
	pthread_mutex_init(&gw->door_lock, NULL);
	pthread_cond_init(&gw->door_done, NULL);
	for (unsigned i = 0; i < RB_GATEWAY_MAX_FDS; i++)
		gw->listen[i] = -1;
	gw->tenv = (struct rb_gw_tunnel_env){.ctx = &gw->ctx,
	                                     .scope = &gw->scope,
	                                     .rate = &gw->rate,
	                                     .requests = &gw->requests,
	                                     .unauthorized = &gw->unauthorized,
	                                     .rate_limited = &gw->rate_limited,
	                                     .stop_fd = gw->stop_fd};
	gw->daemon = MHD_start_daemon(
	    /* A thread per connection: a connector's answer is streamed by blocking reads. */
	    MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_NO_LISTEN_SOCKET |
	        MHD_USE_ERROR_LOG,
	    0, NULL, NULL, on_request, gw, MHD_OPTION_NOTIFY_COMPLETED, on_completed, gw, MHD_OPTION_UNESCAPE_CALLBACK,
	    no_unescape, NULL, MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
	    CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY, MHD_OPTION_EXTERNAL_LOGGER,
	    mhd_log, NULL, MHD_OPTION_END);
	if (gw->stop_fd < 0 || !gw->daemon) {
		rb_error_set(err, gw->stop_fd < 0 ? errno : 0, "gateway: %s",
		             gw->stop_fd < 0 ? "eventfd" : "libmicrohttpd did not start");
		rb_gateway_stop(gw, NULL);
		return -1;
	}
	if (cfg->serve_dns && rb_gw_dns_start(&gw->ctx, cfg->dns_fd, gw->stop_fd, 0, &gw->dns) < 0) {
		rb_error_set(err, errno, "gateway: DNS stub on fd %d", cfg->dns_fd);
		rb_gateway_stop(gw, NULL);
		return -1;
	}
	for (unsigned i = 0; i < cfg->n_listen_fds; i++) {
		/* A dup: the gateway closes its own at stop; the caller's stays for its owner. */
		gw->listen[i] = fcntl(cfg->listen_fds[i], F_DUPFD_CLOEXEC, 3);
		if (gw->listen[i] < 0) {
			rb_error_set(err, errno, "gateway: dup listening socket %d", cfg->listen_fds[i]);
			rb_gateway_stop(gw, NULL);
			return -1;
		}
		struct acceptor_arg *a = malloc(sizeof *a);
		if (a)
			*a = (struct acceptor_arg){gw, gw->listen[i]};
		if (!a || pthread_create(&gw->acceptors[i], NULL, acceptor, a) != 0) {
			free(a);
			rb_error_set(err, EAGAIN, "gateway: acceptor thread for listening socket %d",
			             cfg->listen_fds[i]);
			rb_gateway_stop(gw, NULL);
			return -1;
		}
		gw->n = i + 1;
	}
	*out = gw;
	return 0;
}

void rb_gateway_get_stats(const struct rb_gateway *gw, struct rb_gateway_stats *out)
{
	out->requests = __atomic_load_n(&gw->requests, __ATOMIC_RELAXED);
	out->unauthorized = __atomic_load_n(&gw->unauthorized, __ATOMIC_RELAXED);
	out->rate_limited = __atomic_load_n(&gw->rate_limited, __ATOMIC_RELAXED);
	out->refused = __atomic_load_n(&gw->refused, __ATOMIC_RELAXED);
	rb_gw_cpu_read(&gw->cpu, &out->cpu_ns, &out->cpu_limited);
}

json_t *rb_gateway_stats_json(const struct rb_gateway_stats *s)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:f, s:I}", "requests", (json_int_t)s->requests, "unauthorized",
	                 (json_int_t)s->unauthorized, "rate_limited", (json_int_t)s->rate_limited, "refused",
	                 (json_int_t)s->refused, "cpu_ms", (double)s->cpu_ns / 1e6, "cpu_limited",
	                 (json_int_t)s->cpu_limited);
}

void rb_gateway_stop(struct rb_gateway *gw, struct rb_gateway_stats *final)
{
	if (!gw)
		return;
	if (gw->stop_fd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(gw->stop_fd, &one, sizeof one); /* readable from now on: every door ends */
		(void)w;
	}
	for (unsigned i = 0; i < gw->n; i++)
		pthread_join(gw->acceptors[i], NULL);
	rb_gw_dns_stop(gw->dns);
	pthread_mutex_lock(&gw->door_lock);
	while (gw->doors)
		pthread_cond_wait(&gw->door_done, &gw->door_lock);
	pthread_mutex_unlock(&gw->door_lock);
	for (unsigned i = 0; i < RB_GATEWAY_MAX_FDS; i++)
		if (gw->listen[i] >= 0)
			close(gw->listen[i]);
	if (gw->daemon)
		MHD_stop_daemon(gw->daemon); /* joins its threads */
	rb_gw_workers_free(gw->ctx.workers); /* waits for its threads: no call runs now */
	gw->ctx.workers = NULL;
	if (final) /* after every thread of the run's calls ended: their CPU is all counted */
		rb_gateway_get_stats(gw, final);
	if (gw->stop_fd >= 0)
		close(gw->stop_fd);
	pthread_mutex_destroy(&gw->door_lock);
	pthread_cond_destroy(&gw->door_done);
	rb_idem_destroy(&gw->idem);
	rb_ratelimit_destroy(&gw->rate);
	rb_gw_cpu_destroy(&gw->cpu);
	rb_gw_secrets_free(&gw->ctx);
	rb_gw_mcp_sessions_free(gw->ctx.mcp_sessions);
	rb_gw_curlpool_free(gw->ctx.curlpool); /* after the daemon: no call holds a handle */
	pthread_mutex_destroy(&gw->event_lock);
	OPENSSL_cleanse(gw->scope.key, sizeof gw->scope.key);
	free(gw);
}

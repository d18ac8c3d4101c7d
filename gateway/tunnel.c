/* CONNECT tunnels (see tunnel.h): the head read and judged on the raw socket, the upstream's
 * address checked and connected to, the bytes relayed both ways, and one record per tunnel. */
#define _GNU_SOURCE
#include "gateway/tunnel.h"

#include "gateway/cpushare.h"
#include "gateway/record.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "common/cleanup.h"
#include "gateway/decide.h"

#define HEAD_MAX           8192
#define HEAD_TIMEOUT_MS    10000
#define CONNECT_TIMEOUT_MS 10000
#define RELAY_BLOCK        65536

bool rb_gw_proxy_token(const char *h, char *out, size_t n)
{
	if (!h || strncasecmp(h, "Basic ", 6) != 0)
		return false;
	h += 6;
	while (*h == ' ')
		h++;
	size_t len = strlen(h);
	if (len % 4 || len / 4 * 3 >= n)
		return false;
	int got = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)h, (int)len);
	if (got < 0)
		return false;
	while (got > 0 && len && h[--len] == '=')
		got--;
	out[got] = '\0';
	if (strncmp(out, "runbox:", 7) != 0)
		return false;
	memmove(out, out + 7, (size_t)got - 6);
	return true;
}

/* One tunnel's state, from the head to the record. */
struct tun {
	const struct rb_gw_tunnel_env *env;
	int fd;
	uint64_t t0;
	char head[HEAD_MAX + 1];
	size_t head_len, body_off; /* body_off: the first byte after the head (early client data) */
	char host[300];            /* lower-cased, IPv6 in brackets */
	char bare[300];            /* for the resolver: no brackets */
	unsigned port;
	char hp[320]; /* host:port, the record's connector and host */
};

static const char *status_text(unsigned st)
{
	switch (st) {
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 407: return "Proxy Authentication Required";
	case 429: return "Too Many Requests";
	case 502: return "Bad Gateway";
	default: return "Error";
	}
}

/* The answer on the raw socket: status, the JSON body, and Connection: close. */
static void answer(int fd, unsigned st, json_t *body)
{
	_cleanup_free_ char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return;
	char head[400];
	int n = snprintf(head, sizeof head,
	                 "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n%s%s"
	                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
	                 st, status_text(st), st == 407 ? "Proxy-Authenticate: Basic realm=\"runbox\"\r\n" : "",
	                 st == 429 ? "Retry-After: 1\r\n" : "", strlen(text));
	if (rb_send_all(fd, head, (size_t)n) == 0)
		(void)rb_send_all(fd, text, strlen(text));
}

static void refuse(struct tun *t, unsigned st, const char *rule, const char *error, const char *hint)
{
	const struct rb_gw_ctx *ctx = t->env->ctx;
	if (st == 403 || st == 400)
		__atomic_add_fetch(ctx->refused, 1, __ATOMIC_RELAXED);
	json_t *ev =
	    json_pack("{s:s, s:s?, s:s, s:i, s:s, s:s, s:b, s:s, s:s, s:f}", "door", "connect", "connector",
	              t->hp[0] ? t->hp : NULL, "method", "CONNECT", "status", (int)st, "rule", rule, "host", t->hp,
	              "refused", 1, "error", error, "hint", hint, "gateway_ms", (double)(rb_now_us() - t->t0) / 1000);
	rb_gw_record(ctx, ev);
	answer(t->fd, st, json_pack("{s:s, s:s, s:s, s:s}", "error", error, "rule", rule, "host", t->hp, "hint", hint));
}

/* Waits for fd to be readable (or writable) until deadline; false on the deadline or a stop. */
static bool wait_fd(int fd, short ev, int stop_fd, uint64_t deadline_us)
{
	for (;;) {
		uint64_t now = rb_now_us();
		if (now >= deadline_us)
			return false;
		struct pollfd p[2] = {{.fd = fd, .events = ev}, {.fd = stop_fd, .events = POLLIN}};
		int r = poll(p, 2, (int)((deadline_us - now + 999) / 1000));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || p[1].revents)
			return false;
		return true;
	}
}

/* Reads until the head's blank line; the bytes after it stay in t->head from body_off. A head
 * holding a NUL or a control byte other than CR, LF and TAB is refused (-2) before it is
 * parsed: the parsers below read it as C strings, which a NUL would cut short of the line
 * ends that memmem found past it. */
static int read_head(struct tun *t)
{
	uint64_t deadline = t->t0 + (uint64_t)HEAD_TIMEOUT_MS * 1000;
	while (t->head_len < HEAD_MAX) {
		if (!wait_fd(t->fd, POLLIN, t->env->stop_fd, deadline))
			return -1;
		ssize_t n = recv(t->fd, t->head + t->head_len, HEAD_MAX - t->head_len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		t->head_len += (size_t)n;
		t->head[t->head_len] = '\0';
		char *end = memmem(t->head, t->head_len, "\r\n\r\n", 4);
		if (end) {
			t->body_off = (size_t)(end - t->head) + 4;
			for (size_t i = 0; i < t->body_off; i++) {
				unsigned char c = (unsigned char)t->head[i];
				if ((c < 0x20 && c != '\r' && c != '\n' && c != '\t') || c == 0x7f)
					return -2;
			}
			return 0;
		}
	}
	return -1;
}

/* "CONNECT host:port HTTP/1.x": the authority into t (host lower-cased). */
static bool parse_target(struct tun *t, char **lines)
{
	char *line = t->head, *eol = strstr(line, "\r\n");
	if (!eol)
		return false;
	*eol = '\0';
	*lines = eol + 2;
	char *target = line + 8, *sp = strchr(target, ' ');
	if (!sp || (strcmp(sp + 1, "HTTP/1.1") != 0 && strcmp(sp + 1, "HTTP/1.0") != 0))
		return false;
	*sp = '\0';
	char *colon = strrchr(target, ':');
	if (!colon || colon == target || !colon[1] || strlen(colon + 1) > 5)
		return false;
	char *endp;
	unsigned long port = strtoul(colon + 1, &endp, 10);
	if (*endp || port == 0 || port > 65535 || !isdigit((unsigned char)colon[1]))
		return false;
	*colon = '\0';
	size_t hl = strlen(target);
	if (hl >= sizeof t->bare - 2)
		return false;
	bool v6 = target[0] == '[';
	if (v6 && (hl < 3 || target[hl - 1] != ']'))
		return false;
	for (size_t i = 0; i < hl; i++) {
		unsigned char c = (unsigned char)target[i];
		bool okc = v6 ? (isxdigit(c) || c == ':' || c == '.' || ((i == 0 || i == hl - 1) && strchr("[]", c)))
		              : (isalnum(c) || c == '-' || c == '.');
		if (!okc)
			return false;
		target[i] = (char)tolower(c);
	}
	snprintf(t->host, sizeof t->host, "%s", target);
	snprintf(t->bare, sizeof t->bare, "%.*s", (int)(v6 ? hl - 2 : hl), v6 ? target + 1 : target);
	t->port = (unsigned)port;
	snprintf(t->hp, sizeof t->hp, "%s:%u", t->host, t->port);
	return true;
}

/* The Proxy-Authorization value among the header lines (NULL when absent); false when a line
 * is not "name: value" or holds a control byte. */
static bool find_proxy_auth(char *lines, const char **pa)
{
	*pa = NULL;
	while (*lines && strncmp(lines, "\r\n", 2) != 0) {
		char *eol = strstr(lines, "\r\n");
		if (!eol)
			return false;
		*eol = '\0';
		for (char *c = lines; *c; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				return false;
		char *colon = strchr(lines, ':');
		if (!colon || colon == lines)
			return false;
		if ((size_t)(colon - lines) == 19 && !strncasecmp(lines, "Proxy-Authorization", 19)) {
			char *v = colon + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			*pa = v;
		}
		lines = eol + 2;
	}
	return true;
}

/* Resolves, checks every address, connects to the first that answers (all were checked). */
static int connect_upstream(struct tun *t, char *addr, size_t addr_len, char *why, size_t n)
{
	char port[8];
	snprintf(port, sizeof port, "%u", t->port);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	int g = getaddrinfo(t->bare, port, &hints, &ai);
	if (g != 0) {
		snprintf(why, n, "resolve `%s`: %s", t->bare, gai_strerror(g));
		return -2;
	}
	for (struct addrinfo *a = ai; a; a = a->ai_next)
		if (!rb_gw_address_allowed(t->env->ctx->conf, a->ai_addr, why, n)) {
			freeaddrinfo(ai);
			return -2;
		}
	int fd = -1;
	snprintf(why, n, "no address of `%s` answered", t->bare);
	for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		int r = connect(fd, a->ai_addr, a->ai_addrlen);
		if (r < 0 && errno == EINPROGRESS &&
		    wait_fd(fd, POLLOUT, t->env->stop_fd, rb_now_us() + (uint64_t)CONNECT_TIMEOUT_MS * 1000)) {
			int e = 0;
			socklen_t el = sizeof e;
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
			r = e ? -1 : 0;
			errno = e ? e : ETIMEDOUT;
		} else if (r < 0) {
			errno = errno == EINPROGRESS ? ETIMEDOUT : errno;
		}
		if (r < 0) {
			snprintf(why, n, "connect to `%s`: %s", t->hp, strerror(errno));
			close(fd);
			fd = -1;
			continue;
		}
		getnameinfo(a->ai_addr, a->ai_addrlen, addr, (socklen_t)addr_len, NULL, 0, NI_NUMERICHOST);
		fcntl(fd, F_SETFL, 0);
	}
	freeaddrinfo(ai);
	return fd;
}

/* Why a relay ended, for the record. */
static const char *relay(struct tun *t, int up, const struct rb_gw_tunnel_limits *lim, uint64_t *bytes_up,
                         uint64_t *bytes_down)
{
	uint64_t start = rb_now_us(), end = start + (uint64_t)lim->max_s * 1000000u;
	uint64_t max_bytes = (uint64_t)lim->max_mib << 20;
	/* A peer that stops reading blocks a send at most the idle bound. */
	struct timeval tv = {.tv_sec = lim->idle_s};
	setsockopt(t->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	setsockopt(up, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (t->head_len > t->body_off) { /* what the client sent before it saw the 200 */
		if (rb_send_all(up, t->head + t->body_off, t->head_len - t->body_off) < 0)
			return "upstream closed";
		*bytes_up += t->head_len - t->body_off;
	}
	_cleanup_free_ char *buf = malloc(RELAY_BLOCK);
	if (!buf)
		return "out of memory";
	for (;;) {
		uint64_t now = rb_now_us();
		if (now >= end)
			return "max_s";
		uint64_t left_ms = (end - now) / 1000 + 1, idle_ms = (uint64_t)lim->idle_s * 1000;
		struct pollfd p[3] = {{.fd = t->fd, .events = POLLIN},
		                      {.fd = up, .events = POLLIN},
		                      {.fd = t->env->stop_fd, .events = POLLIN}};
		int r = poll(p, 3, (int)(left_ms < idle_ms ? left_ms : idle_ms));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return "poll failed";
		if (r == 0)
			return rb_now_us() >= end ? "max_s" : "idle_s";
		if (p[2].revents)
			return "gateway stopped";
		for (int side = 0; side < 2; side++) {
			if (!p[side].revents)
				continue;
			int from = side ? up : t->fd, to = side ? t->fd : up;
			ssize_t n = recv(from, buf, RELAY_BLOCK, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return side ? "upstream closed" : "client closed";
			if (rb_send_all(to, buf, (size_t)n) < 0)
				return side ? "client closed" : "upstream closed";
			*(side ? bytes_down : bytes_up) += (uint64_t)n;
			if (*bytes_up + *bytes_down > max_bytes)
				return "max_mib";
		}
	}
}

void rb_gw_tunnel_serve(const struct rb_gw_tunnel_env *env, int fd)
{
	struct tun *t = calloc(1, sizeof *t);
	if (!t) {
		close(fd);
		return;
	}
	t->env = env, t->fd = fd, t->t0 = rb_now_us();
	const struct rb_gw_ctx *ctx = env->ctx;
	char *lines = NULL;
	const char *pa = NULL;
	int head = read_head(t);
	if (head == -1)
		goto out; /* nothing judged yet: a client that never finished its head */
	__atomic_add_fetch(env->requests, 1, __ATOMIC_RELAXED);
	if (head < 0) {
		refuse(t, 400, "url", "the CONNECT request's head holds a NUL or a control byte",
		       "send CONNECT with plain header lines");
		goto out;
	}
	if (!rb_ratelimit_take(env->rate, rb_now_us())) {
		__atomic_add_fetch(env->rate_limited, 1, __ATOMIC_RELAXED);
		answer(fd, 429,
		       json_pack("{s:s, s:s}", "error", "rate limited", "hint",
		                 "the run's gateway requests are over its rate; retry after a second"));
		goto out;
	}
	if (ctx->cpu && !rb_gw_cpu_admit(ctx->cpu, rb_now_us())) {
		answer(fd, 429, rb_gw_cpu_refusal());
		goto out;
	}
	if (!parse_target(t, &lines) || !find_proxy_auth(lines, &pa)) {
		refuse(t, 400, "url", "the CONNECT request is not `CONNECT host:port HTTP/1.1` with plain header lines",
		       "send CONNECT with a host name or IP literal and a port");
		goto out;
	}
	/* The token is the second factor beside the socket: checked before any decision. */
	char tok[RB_TOKEN_MAX + 16], authz[RB_TOKEN_MAX + 32];
	json_t *who = NULL;
	unsigned st = 401;
	if (rb_gw_proxy_token(pa, tok, sizeof tok)) {
		snprintf(authz, sizeof authz, "Bearer %s", tok);
		st = rb_gateway_handle(env->scope, "GET", "/v1/whoami", authz, (int64_t)time(NULL), &who);
		OPENSSL_cleanse(tok, sizeof tok);
		OPENSSL_cleanse(authz, sizeof authz);
	}
	if (st != 200) {
		__atomic_add_fetch(env->unauthorized, 1, __ATOMIC_RELAXED);
		const char *e = json_string_value(json_object_get(who, "error"));
		rb_gw_record(ctx, json_pack("{s:s, s:s, s:s, s:i, s:s, s:b, s:s}", "door", "connect", "connector",
		                            t->hp, "method", "CONNECT", "status", 407, "rule", "token", "refused", 1,
		                            "error", e ? e : "missing proxy credentials"));
		json_decref(who);
		answer(
		    fd, 407,
		    json_pack("{s:s}", "error", "missing proxy credentials (the run token as HTTPS_PROXY's password)"));
		goto out;
	}
	json_decref(who);
	struct rb_gw_request rq = {.door = RB_GW_DOOR_CONNECT,
	                           .method = "CONNECT",
	                           .host = t->host,
	                           .port = t->port,
	                           .proxy = ctx->proxy,
	                           .n_proxy = ctx->n_proxy};
	struct rb_gw_verdict v;
	rb_gw_decide(&rq, &v);
	if (v.status) {
		refuse(t, v.status, v.rule, v.error, v.hint);
		goto out;
	}
	char addr[64] = "", why[300];
	int up = connect_upstream(t, addr, sizeof addr, why, sizeof why);
	if (up == -2) {
		refuse(t, 403, "address", why,
		       "the host resolves to an address the gateway does not reach; the operator may name it in the "
		       "gateway config's private_upstreams");
		goto out;
	}
	if (up < 0) {
		json_t *ev =
		    json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s}", "door", "connect", "connector", t->hp, "method",
		              "CONNECT", "status", 502, "rule", "upstream", "host", t->hp, "error", why);
		rb_gw_record(ctx, ev);
		answer(fd, 502,
		       json_pack("{s:s, s:s, s:s, s:s}", "error", why, "rule", "upstream", "host", t->hp, "hint",
		                 "the host did not accept the connection; retry later"));
		goto out;
	}
	/* Connected, nothing relayed yet: the client's first byte up may be the request itself. */
	json_t *link = NULL; /* the sent record's id, for the tunnel's end */
	rb_gw_record_sent(ctx, &(struct rb_gw_sent){"connect", t->hp, "CONNECT", t->hp, v.route, NULL, 0}, &link);
	static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
	double setup_ms = (double)(rb_now_us() - t->t0) / 1000;
	uint64_t bytes_up = 0, bytes_down = 0, r0 = rb_now_us();
	const struct rb_gw_tunnel_limits deflim = {RB_GWCONF_TUNNEL_IDLE_S, RB_GWCONF_TUNNEL_MAX_S,
	                                           RB_GWCONF_TUNNEL_MAX_MIB};
	const struct rb_gw_tunnel_limits *lim = ctx->conf && ctx->conf->tunnel.idle_s ? &ctx->conf->tunnel : &deflim;
	const char *ended =
	    (rb_send_all(fd, ok, sizeof ok - 1) == 0) ? relay(t, up, lim, &bytes_up, &bytes_down) : "client closed";
	close(up);
	/* Recorded before the client's side closes: a tunnel the upstream ended is in the record
	 * by the time the client sees its end. */
	json_t *ev = json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:s}", "door", "connect",
	                       "connector", t->hp, "method", "CONNECT", "status", 200, "rule", "network.proxy", "route",
	                       v.route, "host", t->hp, "address", addr, "bytes_up", (json_int_t)bytes_up, "bytes_down",
	                       (json_int_t)bytes_down, "gateway_ms", setup_ms, "duration_ms",
	                       (double)(rb_now_us() - r0) / 1000, "ended", ended);
	json_object_update(ev, link);
	json_decref(link);
	rb_gw_record(ctx, ev);
out:
	close(fd);
	OPENSSL_cleanse(t->head, sizeof t->head); /* it held the run token */
	free(t);
}

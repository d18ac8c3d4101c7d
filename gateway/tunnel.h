/* The CONNECT door of the installing proxy: a tunnel to a host:port on the policy's allowlist,
 * bytes passed both ways untouched (nothing intercepted, so no CA inside), bounded in idle
 * time, total time and bytes, and recorded when it ends. Served before libmicrohttpd. */
#ifndef RB_GATEWAY_TUNNEL_H
#define RB_GATEWAY_TUNNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/connector.h"
#include "gateway/endpoint.h"
#include "gateway/ratelimit.h"

/* What a tunnel needs from its endpoint, all owned by it. */
struct rb_gw_tunnel_env {
	const struct rb_gw_ctx *ctx; /* the decision's inputs, the records */
	const struct rb_gateway_scope *scope;
	struct rb_ratelimit *rate; /* the run's one bucket: a CONNECT takes a token like any request */
	uint64_t *requests, *unauthorized, *rate_limited; /* the endpoint's counts (__atomic) */
	int stop_fd;                                      /* readable once the endpoint stops */
};

/* Serves one connection whose first bytes are "CONNECT ": reads its head (8 KiB at most,
 * within 10 s), then rate limit, run token (Proxy-Authorization, 407 without it), the decision
 * (rb_gw_decide, door CONNECT), the address rule, the connect; then "200 Connection
 * established" and the relay until either side closes or a bound is met. A refusal is the
 * uniform JSON answer and a record. Closes fd. */
void rb_gw_tunnel_serve(const struct rb_gw_tunnel_env *env, int fd);

/* Proxy-Authorization: Basic base64("runbox:" TOKEN), as clients send HTTP_PROXY's userinfo:
 * the token into out (NUL-terminated). false when the header is absent or not of that form. */
bool rb_gw_proxy_token(const char *header, char *out, size_t n);

#endif

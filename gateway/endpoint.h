/* The gateway endpoint: HTTP on listening sockets the runner opened inside the sandbox's netns
 * (an acceptor per socket; CONNECT to gateway/tunnel.c, the rest to one libmicrohttpd daemon), served
 * from the host side; and the DNS stub's socket (gateway/dns.h). The handler
 * takes everything it needs (token key, expected run) from its scope, never from the process,
 * so the full broker (`runbox gateway serve`, receiving the sockets over a unix socket) can
 * take the sockets over with the same code. */
#ifndef RB_GATEWAY_ENDPOINT_H
#define RB_GATEWAY_ENDPOINT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/token.h"
#include "gateway/config.h"
#include "gateway/decide.h"
#include "policy/policy.h"

#define RB_GATEWAY_MAX_FDS 4
#define RB_GATEWAY_KEY_MAX 64
/* A run's request rate: a sandbox flooding its endpoint gets 429 beyond it, so the host's
 * work for the run's requests is bounded (token bucket, gateway/ratelimit.h). */
#define RB_GATEWAY_RATE  50  /* requests per second, sustained */
#define RB_GATEWAY_BURST 100 /* at once, from a full bucket */

struct rb_gateway_config {
	const int *listen_fds; /* listening TCP sockets; the gateway serves dups, the caller keeps its fds */
	unsigned n_listen_fds; /* 1..RB_GATEWAY_MAX_FDS */
	const uint8_t *key;    /* the run instance's token key, rb_token_run_key (copied) */
	size_t keylen;
	const char *run_id;   /* the one run whose tokens are accepted (copied) */
	uint64_t rate, burst; /* 0: RB_GATEWAY_RATE, RB_GATEWAY_BURST */
	/* The connectors (NULL: none) and those the run's policy grants; both must outlive the
	 * gateway. Credentials are read at start (gateway/connector.h). */
	const struct rb_gwconf *conf;
	const char *const *grants;
	unsigned n_grants;
	/* The MCP servers the policy's network.mcp grants, with its narrowing (must outlive the
	 * gateway; gateway/mcp.h). */
	const struct rb_gw_mcp_grant *mcp;
	unsigned n_mcp;
	const char *const *proxy; /* the policy's network.proxy (must outlive the gateway) */
	unsigned n_proxy;
	int event_fd;   /* each call's record, one JSON line ({"call": {...}}); -1: none */
	bool serve_dns; /* dns_fd is the sandbox's 127.0.0.1:53 UDP socket: serve the stub there (taken) */
	/* The policy's network.approval (must outlive the gateway) and where held calls'
	 * requests and decisions are (gateway/approval.h); NULL: held calls are denied. */
	const struct rb_policy_approval *approvals;
	unsigned n_approvals;
	const char *approvals_dir;
	int dns_fd;
	/* The share of a core the run's calls may spend here (its cpu limit, when a gateway daemon
	 * serves it: gateway/cpushare.h); 0: none, as a per-run gateway is in the run's cgroup. */
	double cpus;
};

/* What one run's endpoint knows: enough to answer any request without other state. */
struct rb_gateway_scope {
	uint8_t key[RB_GATEWAY_KEY_MAX];
	size_t keylen;
	char run_id[RB_TOKEN_FIELD_MAX];
};

struct rb_gateway_stats {
	uint64_t requests;     /* every request answered */
	uint64_t unauthorized; /* answered 401: missing, bad, expired or other run's token */
	uint64_t rate_limited; /* answered 429: over the run's request rate */
	uint64_t refused;      /* connector calls refused (403, 404) */
	uint64_t cpu_ns;       /* the gateway CPU the run's calls spent (its threads' clocks) */
	uint64_t cpu_limited;  /* answered 429: over the run's share of a core (cpus) */
};

struct rb_gateway;

int rb_gateway_start(const struct rb_gateway_config *cfg, struct rb_gateway **out, struct rb_error *err);
/* A consistent-enough snapshot (each count is read atomically); safe while serving. */
void rb_gateway_get_stats(const struct rb_gateway *gw, struct rb_gateway_stats *out);
/* {"requests", "unauthorized", "rate_limited", "refused", "cpu_ms", "cpu_limited"} for the result. */
json_t *rb_gateway_stats_json(const struct rb_gateway_stats *s);
/* Stops the daemons (joins their threads) and closes the gateway's dups. NULL is fine. */
/* final (NULL: not wanted) gets the counts once every thread serving the run has ended. */
void rb_gateway_stop(struct rb_gateway *gw, struct rb_gateway_stats *final);

/* The transport-free handler: GET /v1/health -> 200 {"ok":true}; GET /v1/whoami with
 * "Authorization: Bearer <token>" -> 200 {"tenant","agent","run","expires"} or 401
 * {"error": why}; other paths 404, other methods 405. Returns the HTTP status and a new JSON
 * body in *body. authorization may be NULL (header absent). */
unsigned rb_gateway_handle(const struct rb_gateway_scope *scope, const char *method, const char *path,
                           const char *authorization, int64_t now, json_t **body);

#endif

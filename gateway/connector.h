/* The credentialed door: /v1/connectors/NAME/PATH forwarded with libcurl, the credential added
 * host side, the answer scrubbed of it and streamed back; and the call records and uniform
 * denials every door writes. Used by gateway/endpoint.c only. */
#ifndef RB_GATEWAY_CONNECTOR_H
#define RB_GATEWAY_CONNECTOR_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/config.h"
#include "gateway/idem.h"
#include "policy/policy.h"
#include "scrub/scrub.h"

/* A connector's credential, read once at start; error set instead when it could not be. */
struct rb_gw_secret {
	char value[RB_GWCONF_SECRET_MAX];
	size_t len;
	char error[256];
	struct rb_scrubber *scrub; /* the credential in every encoding, plus the scrubber's rules */
};

/* What the door needs, owned by the endpoint. */
struct rb_gw_ctx {
	const struct rb_gwconf *conf;
	const char *const *grants;
	unsigned n_grants;
	struct rb_gw_secret *secrets; /* one per conf->connectors[i] (granted ones loaded) */
	int event_fd;                 /* call records, one JSON line each ({"call": {...}}); -1: none */
	pthread_mutex_t *event_lock;
	uint64_t *refused;        /* counts refusals (__atomic) */
	const char *const *proxy; /* the policy's network.proxy */
	unsigned n_proxy;
	struct rb_idem *idem;                       /* the run's idempotency keys and held calls */
	const struct rb_policy_approval *approvals; /* the policy's network.approval */
	unsigned n_approvals;
	const char *approvals_dir; /* where held calls' requests and decisions are (approval.h); NULL: none */
	const char *run_id;
	int stop_fd; /* readable once the endpoint stops: a held call ends */
};

/* Loads the granted connectors' secrets and scrubbers into ctx->secrets (allocated, n =
 * conf->n_connectors). A secret that cannot be read is kept as its error: calls to it fail. */
int rb_gw_secrets_load(struct rb_gw_ctx *ctx, struct rb_error *err);
void rb_gw_secrets_free(struct rb_gw_ctx *ctx);

/* Writes one call record (consumes ev). */
void rb_gw_record(const struct rb_gw_ctx *ctx, json_t *ev);

/* A refusal: status, {"error","rule","host","hint"}, and its record (door, method, ...). */
enum MHD_Result rb_gw_deny(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, unsigned status, const char *door,
                           const char *connector, const char *method, const char *rule, const char *host,
                           const char *error, const char *hint, uint64_t t0_us);

/* Serves one connector call; rest is the URL after "/v1/connectors/", body the request's,
 * tenant and agent the token's. */
enum MHD_Result rb_gw_connector_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *rest,
                                     const char *method, const char *body, size_t body_len, const char *tenant,
                                     const char *agent, uint64_t t0_us);

/* The installing proxy's door: an absolute-form request (url "http://host[:port]/..."),
 * checked by rb_gw_decide and the address rules, forwarded without credentials and
 * unscrubbed (there is no secret on this door), streamed back. */
enum MHD_Result rb_gw_proxy_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *body, size_t body_len, uint64_t t0_us);

uint64_t rb_gw_now_us(void);
/* Queues body (taken) as a JSON answer with status: no-store; 401 names the Bearer realm,
 * 429 says Retry-After. */
enum MHD_Result rb_gw_respond_json(struct MHD_Connection *mc, unsigned status, json_t *body);

#endif

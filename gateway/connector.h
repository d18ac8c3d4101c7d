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
	/* The MCP door (gateway/mcp.h): the servers the policy's network.mcp grants, their
	 * secrets (one per conf->mcp[i], granted ones loaded), and the run's sessions. */
	const struct rb_gw_mcp_grant *mcp_grants;
	unsigned n_mcp_grants;
	struct rb_gw_secret *mcp_secrets;
	struct rb_gw_mcp_sessions *mcp_sessions;
	int event_fd; /* call records, one JSON line each ({"call": {...}}); -1: none */
	pthread_mutex_t *event_lock;
	uint64_t *refused;        /* counts refusals (__atomic) */
	const char *const *proxy; /* the policy's network.proxy */
	unsigned n_proxy;
	struct rb_idem *idem;                       /* the run's idempotency keys and held calls */
	const struct rb_policy_approval *approvals; /* the policy's network.approval */
	unsigned n_approvals;
	const char *approvals_dir; /* where held calls' requests and decisions are (approval.h); NULL: none */
	const char *run_id;
	int stop_fd;                     /* readable once the endpoint stops: a held call ends */
	struct rb_gw_curlpool *curlpool; /* the run's idle upstream handles (curlpool.h); NULL: none kept */
	struct rb_gw_workers *workers;   /* the run's producer threads (workers.h); NULL: one per call */
	struct rb_gw_cpu *cpu;           /* the run's gateway CPU (cpushare.h); NULL: not counted */
};

struct rb_gw_mcp_grant;
struct rb_gw_mcp_sessions;
struct rb_gw_curlpool;
struct rb_gw_workers;
struct rb_gw_cpu;

/* Loads the granted connectors' (and MCP servers') secrets and scrubbers into ctx->secrets (allocated, n =
 * conf->n_connectors). A secret that cannot be read is kept as its error: calls to it fail. */
int rb_gw_secrets_load(struct rb_gw_ctx *ctx, struct rb_error *err);
void rb_gw_secrets_free(struct rb_gw_ctx *ctx);

/* Writes one call record (consumes ev). */
void rb_gw_record(const struct rb_gw_ctx *ctx, json_t *ev);

/* A new call record (door, connector, method, status, rule, host, gateway_ms), to add to and
 * pass to rb_gw_record. */
json_t *rb_gw_record_new(const char *door, const char *name, const char *method, unsigned status, const char *rule,
                         const char *host, uint64_t t0_us);

/* A refusal: status, {"error","rule","host","hint"}, and its record (door, method, ...). */
enum MHD_Result rb_gw_deny(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, unsigned status, const char *door,
                           const char *connector, const char *method, const char *rule, const char *host,
                           const char *error, const char *hint, uint64_t t0_us);

/* "NAME/PATH" (after /v1/connectors/ or /v1/mcp/): NAME into name, cut to its size; returns
 * the rest ("/PATH", or "" for none). */
const char *rb_gw_door_name(const char *rest, char name[RB_GWCONF_NAME_MAX]);

/* Serves one connector call; rest is the URL after "/v1/connectors/", body the request's,
 * tenant and agent the token's. */
enum MHD_Result rb_gw_connector_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *rest,
                                     const char *method, const char *body, size_t body_len, const char *tenant,
                                     const char *agent, uint64_t t0_us);

/* The credential of a connector or MCP server of ctx->conf, or NULL. */
const struct rb_gw_secret *rb_gw_secret_of(const struct rb_gw_ctx *ctx, const struct rb_gw_connector *c);
/* The upstream's host[:port] as configured ("" for NULL). */
void rb_gw_upstream_host(const struct rb_gw_connector *c, char *out, size_t n);

/* A rewriter of a credentialed answer on its way to the client (the MCP door's tool filter). Called on the call's
 * producer thread; cls lives until free. */
struct rb_gw_filter {
	/* The final head: the status and the headers ([[name, value], ...], as the upstream sent
	 * them, before they are scrubbed), which it may edit. */
	void (*head)(void *cls, long status, json_t *headers);
	/* The upstream's body bytes in, the client's appended to out; < 0 (why set) ends the
	 * answer with an error. The filter scrubs (the secret's scrubber, before it parses
	 * anything): with a filter the stream scrubber is not used. */
	int (*feed)(void *cls, const char *p, size_t n, struct rb_buf_out *out, char *why, size_t why_len);
	int (*finish)(void *cls, struct rb_buf_out *out, char *why, size_t why_len);
	void (*record)(void *cls, json_t *ev); /* its fields into the call's record */
	void (*free)(void *cls);
};

/* One credentialed call of a door other than the connector's (the MCP door): the decision
 * made by the caller (conn, route), the credential added as the connector's is, the client's
 * headers stripped as a connector's (and drop's), add's lines added, the answer scrubbed
 * and rewritten by the filter, then streamed. */
struct rb_gw_upstream {
	const char *door; /* "mcp" */
	const struct rb_gw_connector *conn;
	const char *name, *method, *route;
	const char *upstream_path; /* appended to conn->url: the verdict's upstream_path, what was decided */
	const char *body;
	size_t body_len;
	const char *const *drop; /* NULL-terminated */
	const char *const *add;  /* NULL-terminated "Name: value" lines */
	const struct rb_gw_filter *filter;
	void *filter_cls; /* taken, even on a refusal */
	json_t *extra;    /* fields added to the call's record (taken) */
	bool stream; /* a long-lived answer (an event stream): no low-speed bound; it ends when the gateway stops */
	struct rb_idem_entry *idem; /* the Idempotency-Key this call claimed (rb_gw_idem_claim), or NULL */
	uint64_t t0_us;
};
enum MHD_Result rb_gw_upstream_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc,
                                    const struct rb_gw_upstream *u);

/* An Idempotency-Key: 1..255 visible ASCII bytes. */
bool rb_gw_idem_key_ok(const char *key);
/* The door's claim of ikey (or, for a held call without one, of digest) in the run's table
 * (gateway/idem.h), or the answer to a retry: the recorded answer replayed, or the uniform
 * refusal (422 another request, 409 in flight or lost, 403 denied, 429 full). *answered false:
 * *out is this call's entry, passed on to the call that sends it. */
enum MHD_Result rb_gw_idem_claim(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *door,
                                 const char *name, const char *method, const char *ikey, const char *digest, bool held,
                                 const char *route, const char *host, uint64_t t0_us, struct rb_idem_entry **out,
                                 bool *answered);

/* The installing proxy's door: an absolute-form request (url "http://host[:port]/..."),
 * checked by rb_gw_decide and the address rules, forwarded without credentials and
 * unscrubbed (there is no secret on this door), streamed back. */
enum MHD_Result rb_gw_proxy_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *url,
                                 const char *method, const char *body, size_t body_len, uint64_t t0_us);

/* Queues body (taken) as a JSON answer with status: no-store; 401 names the Bearer realm,
 * 429 says Retry-After. */
enum MHD_Result rb_gw_respond_json(struct MHD_Connection *mc, unsigned status, json_t *body);

#endif

/* The MCP door: /v1/mcp/NAME passes Streamable HTTP MCP traffic to the operator's MCP server
 * NAME with its credential added (the connector's forwarding, gateway/connector.h), a tool
 * allowlist on tools/call and on tools/list answers (JSON and event streams), and the run's
 * sessions: the upstream's Mcp-Session-Id never enters the sandbox, which gets a local id. */
#ifndef RB_GATEWAY_MCP_H
#define RB_GATEWAY_MCP_H

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gateway/config.h"
#include "gateway/connector.h"
#include "gateway/decide.h"

#define RB_GW_MCP_SESSIONS    64                        /* a run's sessions; then the oldest goes */
#define RB_GW_MCP_MESSAGE_MAX ((size_t)4 * 1024 * 1024) /* a JSON answer, or one event's data */
#define RB_GW_MCP_BATCH_MAX   64                        /* messages in one batch (a JSON array) */

/* One run's sessions: local id <-> the upstream's, per server. Lives in the run's gateway
 * state (struct rb_gateway), never in the process. */
struct rb_gw_mcp_sessions *rb_gw_mcp_sessions_new(void);
void rb_gw_mcp_sessions_free(struct rb_gw_mcp_sessions *t);
/* The upstream id of server's local session into out; false when the run has no such session. */
bool rb_gw_mcp_session_find(struct rb_gw_mcp_sessions *t, const char *server, const char *local, char *out, size_t n);
/* The local id of server's upstream session (made on first sight, the run's oldest forgotten
 * when the table is full) into out; false when no random id could be drawn. */
bool rb_gw_mcp_session_map(struct rb_gw_mcp_sessions *t, const char *server, const char *upstream, char *out, size_t n);
void rb_gw_mcp_session_forget(struct rb_gw_mcp_sessions *t, const char *server, const char *local);

/* Removes from msg (a JSON-RPC message, or a batch of them) every tool of a result's "tools"
 * array the allowlist does not allow (entries without a string name too). Returns how many
 * were removed; *kept (may be NULL) adds how many stayed. */
unsigned rb_gw_mcp_filter_tools(const struct rb_gw_connector *server, const struct rb_gw_mcp_grant *g, json_t *msg,
                                unsigned *kept);

/* Serves one MCP call; rest is the URL after "/v1/mcp/", body the request's (POST), tenant and
 * agent the token's. */
enum MHD_Result rb_gw_mcp_call(const struct rb_gw_ctx *ctx, struct MHD_Connection *mc, const char *rest,
                               const char *method, const char *body, size_t body_len, const char *tenant,
                               const char *agent, uint64_t t0_us);

#endif

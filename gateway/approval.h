/* Held calls: a connector call (or an MCP tools/call) the policy's network.approval names waits for a decision. The
 * request is a file <dir>/<ID>.json (dir: the run's live directory's approvals/); `runbox
 * approve ID` or `runbox deny ID` decides by creating <ID>.decision ("approved" or "denied")
 * with link(), so the first decision wins; the gateway writes "expired" the same way when the
 * rule's timeout passes. */
#ifndef RB_GATEWAY_APPROVAL_H
#define RB_GATEWAY_APPROVAL_H

#include <jansson.h>
#include <stddef.h>

#include "policy/policy.h"

/* The rule holding connector's method, or NULL. */
const struct rb_policy_approval *rb_gw_approval_rule(const struct rb_policy_approval *rules, unsigned n,
                                                     const char *connector, const char *method);

/* The rule holding the MCP server's tools/call of tool (names, or "x*" prefixes), or NULL. */
const struct rb_policy_approval *rb_gw_approval_mcp_rule(const struct rb_policy_approval *rules, unsigned n,
                                                         const char *server, const char *tool);

/* A fresh id: "apr-" and 16 hex digits. */
void rb_gw_approval_id(char out[24]);

/* Writes request (an object; "id" must be set) as <dir>/<id>.json, then waits for the
 * decision until timeout_s passes or stop_fd is readable. Returns 1 approved, 0 denied, -1
 * expired or stopped (why says which), -2 when the request could not be written (why). */
int rb_gw_approval_wait(const char *dir, const char *id, json_t *request, unsigned timeout_s, int stop_fd, char *why,
                        size_t n);

#endif

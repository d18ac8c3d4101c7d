/* The record of a call before it leaves the gateway: every door writes a "sent" record (door,
 * method, host, the decided path, an id, bytes up) before its first byte goes upstream, and the
 * call's completion record carries the same id. So a call the gateway never finished (killed,
 * an upstream that never answers, a run ended mid-transfer) is still in the run's record. */
#ifndef RB_GATEWAY_RECORD_H
#define RB_GATEWAY_RECORD_H

#include <jansson.h>
#include <stdint.h>

#include "gateway/connector.h"

#define RB_GW_CALL_ID_MAX 24 /* "call-" and 16 hex digits, NUL */

/* What a sent record says; no field may hold a credential. */
struct rb_gw_sent {
	const char *door;   /* "connector", "mcp", "proxy", "connect" */
	const char *name;   /* the connector, MCP server, or proxied host:port */
	const char *method; /* the HTTP method, or "CONNECT" */
	const char *host;   /* the upstream's host:port */
	const char *route;  /* the route (or rule) that allowed it */
	const char *url;    /* the upstream URL: only its path is recorded (a query may hold the credential); or NULL */
	uint64_t bytes_up;  /* the request body's size (0 for a tunnel) */
};

/* Writes s as {"phase": "sent", "id": ...} through ctx and sets the same "id" in *link (an
 * object, made when NULL), which the caller merges into the call's completion record. */
void rb_gw_record_sent(const struct rb_gw_ctx *ctx, const struct rb_gw_sent *s, json_t **link);

#endif

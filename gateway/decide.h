/* The gateway's one decision: may this call go out, and if not, which rule refused it and what
 * the agent can do. Every door asks here (connector, absolute-form proxy, CONNECT); nothing here
 * does I/O. */
#ifndef RB_GATEWAY_DECIDE_H
#define RB_GATEWAY_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "gateway/config.h"

/* Which door a request came through. */
enum rb_gw_door {
	RB_GW_DOOR_CONNECTOR, /* /v1/connectors/NAME/PATH: connector, grants, path, routes */
	RB_GW_DOOR_PROXY,     /* an absolute-form http:// request: host and port on network.proxy */
	RB_GW_DOOR_CONNECT,   /* CONNECT host:port: the same allowlist as the proxy door */
	RB_GW_DOOR_MCP,       /* /v1/mcp/NAME: the server, network.mcp, routes, and a tools/call's tool */
};

/* The policy's narrowing of one MCP server's tools (network.mcp [{"name", "tools"}]). */
struct rb_gw_mcp_grant {
	const char *name;
	const char *const *tools; /* NULL: the config's allowlist as it is */
	unsigned n_tools;
};

struct rb_gw_request {
	const char *connector; /* the name in /v1/connectors/NAME/... */
	const char *method;
	const char *raw_path; /* after the name, as sent (still percent-encoded), "" for none */
	const struct rb_gwconf *conf;
	const char *const *grants; /* the policy's network.connectors */
	unsigned n_grants;
	enum rb_gw_door door; /* 0: the connector door */
	/* The proxy and CONNECT doors: host (lower-cased by the caller; an IP literal as written,
	 * IPv6 in brackets), port, and the policy's network.proxy entries. */
	const char *host;
	unsigned port;
	const char *const *proxy;
	unsigned n_proxy;
	/* The MCP door: connector is the server's name; grants are the policy's network.mcp;
	 * tool is a tools/call's params.name (NULL for any other message). */
	const struct rb_gw_mcp_grant *mcp_grants;
	unsigned n_mcp_grants;
	const char *tool;
	/* The connector and MCP doors: the run's tenant and agent (its token's claims), for routes
	 * that name theirs. */
	const char *tenant;
	const char *agent;
};

struct rb_gw_verdict {
	unsigned status;  /* 0: allowed; else 403, or 404 for an unknown connector */
	const char *rule; /* what refused it ("network.connectors", "path", "route") or the route matched */
	const struct rb_gw_connector *conn;  /* the connector, or the MCP server */
	const struct rb_gw_mcp_grant *grant; /* the MCP door: the policy's grant of it */
	const char *route;                   /* the template that allowed it */
	char path[1024];                     /* the normalized path (decoded segments), to match and to record */
	/* path as sent upstream: each byte outside RFC 3986's pchar percent-encoded ('#', '?',
	 * '%', space, non-ASCII...), so the upstream gets exactly the path that was decided, never
	 * a raw string that libcurl or the upstream would parse otherwise (a raw '#' would start a
	 * fragment there and cut the path after the route matched it). */
	char upstream_path[3 * 1024];
	char error[256];
	char hint[256];
};

/* Fills *v. The connector and MCP doors (the MCP door: the server in conf->mcp, granted by
 * network.mcp, then the same path and route checks, then a tools/call's tool, rule "mcp.tools"): the path is refused
 * before any route is consulted when a segment is empty, "." or "..", or would decode to one, or to anything holding
 * '/', '\', NUL or a control byte. The proxy and CONNECT doors: host and port against network.proxy; an entry "h:p"
 * allows exactly h on p; "*.s:p" any name ending in ".s" on p (not s itself). An IP literal is allowed only by an entry
 * naming it; a port only by an entry naming it (rule "network.proxy" when refused). */
void rb_gw_decide(const struct rb_gw_request *rq, struct rb_gw_verdict *v);

/* An MCP tool is allowed when the server's "tools" names it (or a prefix "x*" covers it) and,
 * when the policy narrows the server (g->tools), the policy's list does too. */
bool rb_gw_mcp_tool_allowed(const struct rb_gw_connector *server, const struct rb_gw_mcp_grant *g, const char *tool);

/* true when the gateway may connect to sa: a public address, or one the config's
 * private_upstreams names. Else false and why says which class it is in (loopback, private,
 * link-local, CGNAT, metadata, ...). */
bool rb_gw_address_allowed(const struct rb_gwconf *conf, const struct sockaddr *sa, char *why, size_t n);

#endif

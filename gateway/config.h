/* The gateway's configuration, the operator's (SPEC "Who may say what"): connectors (upstream,
 * credential reference, how it is added, allowed routes) and the private upstreams it may
 * reach. Validated strictly (common/jsoncheck.h); secrets are read only by rb_gwconf_secret. */
#ifndef RB_GATEWAY_CONFIG_H
#define RB_GATEWAY_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "common/paths.h"

#define RB_GWCONF_MAX_CONNECTORS 16
#define RB_GWCONF_MAX_ROUTES     8
#define RB_GWCONF_MAX_LIST       8
#define RB_GWCONF_NAME_MAX       64
#define RB_GWCONF_MAX_PROXY      128 /* a policy's list bound, RB_POLICY_MAX_LIST */
#define RB_GWCONF_SECRET_MAX     4096
#define RB_GWCONF_FILE_MAX       ((size_t)256 * 1024)
#define RB_GWCONF_MAX_MCP        8  /* MCP servers ("mcp": {...}) */
#define RB_GWCONF_MAX_TOOLS      32 /* an MCP server's tool allowlist */
#define RB_GWCONF_TOOL_MAX       64 /* a tool name, or a prefix ending in '*' */

enum rb_gw_inject { RB_INJECT_BEARER, RB_INJECT_HEADER, RB_INJECT_BASIC, RB_INJECT_QUERY };
enum rb_gw_cred { RB_CRED_FILE, RB_CRED_ENV };

struct rb_gw_route {
	char methods[RB_GWCONF_MAX_LIST][16]; /* upper case: "GET" */
	unsigned n_methods;
	char paths[RB_GWCONF_MAX_LIST][200]; /* templates: "/v1/<star>": a last star is any rest, else one segment */
	unsigned n_paths;
	/* Whose runs the route serves: their token's tenant and agent among these (none listed:
	 * any). A route of one tenant's is no route for another's run. */
	char tenants[RB_GWCONF_MAX_LIST][RB_GWCONF_NAME_MAX + 1];
	unsigned n_tenants;
	char agents[RB_GWCONF_MAX_LIST][RB_GWCONF_NAME_MAX + 1];
	unsigned n_agents;
};

struct rb_gw_connector {
	char name[RB_GWCONF_NAME_MAX];
	char url[1024]; /* http:// or https://, no query, no trailing '/' */
	enum rb_gw_cred cred;
	char cred_ref[PATH_MAX]; /* the file, or the environment variable's name */
	enum rb_gw_inject inject;
	char inject_name[128]; /* the header or query parameter (RB_INJECT_HEADER, RB_INJECT_QUERY) */
	struct rb_gw_route routes[RB_GWCONF_MAX_ROUTES];
	unsigned n_routes;
	unsigned timeout_s; /* "timeout_s": the whole upstream call's bound (RB_GWCONF_TIMEOUT_S) */
	/* An MCP server's "tools" (gateway/mcp.h): names, or prefixes ending in '*'; only MCP
	 * servers have them (n_tools 0 on a connector). */
	char tools[RB_GWCONF_MAX_TOOLS][RB_GWCONF_TOOL_MAX];
	unsigned n_tools;
};

#define RB_GWCONF_TIMEOUT_S      300u
#define RB_GWCONF_TUNNEL_IDLE_S  60u   /* a CONNECT tunnel with no byte either way this long ends */
#define RB_GWCONF_TUNNEL_MAX_S   3600u /* a tunnel's whole life */
#define RB_GWCONF_TUNNEL_MAX_MIB 4096u /* bytes both ways together, in MiB */

/* "tunnel": {"idle_s", "max_s", "max_mib"}: the bounds of each CONNECT tunnel. */
struct rb_gw_tunnel_limits {
	unsigned idle_s, max_s, max_mib;
};

/* About 200 KiB: allocate it. */
struct rb_gwconf {
	char origin[PATH_MAX]; /* the file it came from, "" when none (no connectors) */
	struct rb_gw_connector connectors[RB_GWCONF_MAX_CONNECTORS];
	unsigned n_connectors;
	/* "mcp": upstream MCP servers (Streamable HTTP), the connector's keys plus "tools";
	 * "routes" optional (default: GET, POST and DELETE on the URL itself). */
	struct rb_gw_connector mcp[RB_GWCONF_MAX_MCP];
	unsigned n_mcp;
	char private_upstreams[RB_GWCONF_MAX_LIST][64]; /* addresses, as written ("127.0.0.1", "::1") */
	unsigned n_private;
	struct rb_gw_tunnel_limits tunnel; /* defaults filled in when absent */
};

/* Parses text (from origin, for messages) into *out. Unknown keys and wrong types are errors
 * naming their JSON path. */
int rb_gwconf_parse(const char *text, const char *origin, struct rb_gwconf *out, struct rb_error *err);
/* Loads path; NULL: the first of <config_dir>/gateway.json and /etc/runbox/gateway.json that
 * exists, else an empty config (no connectors). *out->origin says which. */
int rb_gwconf_load(const char *path, const struct rb_paths *paths, struct rb_gwconf *out, struct rb_error *err);
const struct rb_gw_connector *rb_gwconf_find(const struct rb_gwconf *c, const char *name);
/* The MCP server of that name, or NULL. */
const struct rb_gw_connector *rb_gwconf_find_mcp(const struct rb_gwconf *c, const char *name);
/* The connector's credential into buf (NUL-terminated, one trailing newline dropped). A file
 * must be a regular file of the caller, with no group or other permission bits; an env
 * variable must be set and non-empty. Errors name the connector and why, never the value. */
int rb_gwconf_secret(const struct rb_gw_connector *c, char *buf, size_t len, struct rb_error *err);

#endif

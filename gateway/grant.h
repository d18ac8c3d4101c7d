/* A run's grant as the runner sends it (the per-run gateway's fd-3 config, or the daemon's
 * registration line, common/gwsock.h) parsed into what rb_gateway_start takes. */
#ifndef RB_GATEWAY_GRANT_H
#define RB_GATEWAY_GRANT_H

#include <jansson.h>

#include "common/error.h"
#include "gateway/endpoint.h"

struct rb_gw_grant {
	json_t *cfg; /* held: the strings below point into it */
	uint8_t key[RB_GATEWAY_KEY_MAX];
	int fds[RB_GATEWAY_MAX_FDS];
	const char *grants[RB_GWCONF_MAX_CONNECTORS];
	const char *proxy[RB_GWCONF_MAX_PROXY];
	struct rb_policy_approval approvals[RB_POLICY_MAX_APPROVALS];
	struct rb_gw_mcp_grant mcp[RB_POLICY_MAX_MCP]; /* the policy's network.mcp */
	const char *mcp_tools[RB_POLICY_MAX_MCP][RB_POLICY_MCP_TOOLS];
	/* Filled but for conf and event_fd, which are the caller's. */
	struct rb_gateway_config gc;
};

/* Parses cfg (a reference is taken). fdmap NULL: "listen_fds" and "dns_fd" are descriptor
 * numbers; else indexes into fdmap's n_fdmap descriptors. Errors name the field. */
int rb_gw_grant_parse(json_t *cfg, const int *fdmap, unsigned n_fdmap, struct rb_gw_grant *g, struct rb_error *err);
/* Drops the reference and wipes the key. */
void rb_gw_grant_free(struct rb_gw_grant *g);

#endif

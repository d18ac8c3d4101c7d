/* A run's grant from its JSON (see grant.h): shared by the per-run gateway and the daemon. */
#include "gateway/grant.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

static int hex_decode(const char *hex, uint8_t *out, size_t max, size_t *len)
{
	size_t n = strlen(hex);
	if (n % 2 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	*len = n / 2;
	return 0;
}

/* v as a descriptor: itself, or fdmap[v]; -1 when it is neither. */
static int fd_of(const json_t *v, const int *fdmap, unsigned n_fdmap)
{
	if (!json_is_integer(v))
		return -1;
	json_int_t i = json_integer_value(v);
	if (!fdmap)
		return i >= 0 && i < 65536 ? (int)i : -1;
	return i >= 0 && i < (json_int_t)n_fdmap ? fdmap[i] : -1;
}

int rb_gw_grant_parse(json_t *cfg, const int *fdmap, unsigned n_fdmap, struct rb_gw_grant *g, struct rb_error *err)
{
	memset(g, 0, sizeof *g);
	const char *run_id = json_string_value(json_object_get(cfg, "run_id"));
	const char *key_hex = json_string_value(json_object_get(cfg, "key"));
	json_t *fds_j = json_object_get(cfg, "listen_fds");
	size_t keylen = 0;
	if (!run_id)
		return rb_error_set(err, EINVAL, "grant: no run_id");
	if (!key_hex || hex_decode(key_hex, g->key, sizeof g->key, &keylen) < 0)
		return rb_error_set(err, EINVAL, "grant of run %s: bad key", run_id);
	if (!json_is_array(fds_j) || json_array_size(fds_j) == 0 || json_array_size(fds_j) > RB_GATEWAY_MAX_FDS)
		return rb_error_set(err, EINVAL, "grant of run %s: listen_fds is not 1..%d descriptors", run_id,
		                    RB_GATEWAY_MAX_FDS);
	g->cfg = json_incref(cfg);
	struct rb_gateway_config *gc = &g->gc;
	size_t i;
	json_t *v;
	unsigned n = 0;
	json_array_foreach(fds_j, i, v)
	{
		if ((g->fds[n++] = fd_of(v, fdmap, n_fdmap)) < 0) {
			rb_gw_grant_free(g);
			return rb_error_set(err, EINVAL, "grant of run %s: listen_fds[%zu] is no descriptor", run_id,
			                    i);
		}
	}
	json_t *dns_j = json_object_get(cfg, "dns_fd");
	gc->serve_dns = json_is_integer(dns_j);
	gc->dns_fd = gc->serve_dns ? fd_of(dns_j, fdmap, n_fdmap) : -1;
	if (gc->serve_dns && gc->dns_fd < 0) {
		rb_gw_grant_free(g);
		return rb_error_set(err, EINVAL, "grant of run %s: dns_fd is no descriptor", run_id);
	}
	json_t *cpus = json_object_get(cfg, "cpus");
	gc->cpus = json_is_number(cpus) && json_number_value(cpus) > 0 ? json_number_value(cpus) : 0;
	unsigned n_grants = 0, n_proxy = 0, n_approvals = 0;
	json_array_foreach(json_object_get(cfg, "connectors"), i, v)
	{
		if (n_grants < RB_GWCONF_MAX_CONNECTORS && json_is_string(v))
			g->grants[n_grants++] = json_string_value(v);
	}
	json_array_foreach(json_object_get(cfg, "proxy"), i, v)
	{
		if (n_proxy < RB_GWCONF_MAX_PROXY && json_is_string(v))
			g->proxy[n_proxy++] = json_string_value(v);
	}
	json_array_foreach(json_object_get(cfg, "approval"), i, v)
	{
		if (n_approvals == RB_POLICY_MAX_APPROVALS)
			break;
		struct rb_policy_approval *a = &g->approvals[n_approvals++];
		snprintf(a->connector, sizeof a->connector, "%s",
		         json_string_value(json_object_get(v, "connector")) ?: "");
		a->timeout_s = (unsigned)json_integer_value(json_object_get(v, "timeout_s"));
		snprintf(a->mcp, sizeof a->mcp, "%s", json_string_value(json_object_get(v, "mcp")) ?: "");
		json_t *tl = json_object_get(v, "tools");
		for (size_t j = 0; j < json_array_size(tl) && a->n_tools < 8; j++)
			if (json_is_string(json_array_get(tl, j)))
				snprintf(a->tools[a->n_tools++], sizeof a->tools[0], "%s",
				         json_string_value(json_array_get(tl, j)));
		size_t j;
		json_t *m;
		json_array_foreach(json_object_get(v, "methods"), j, m)
		{
			if (a->n_methods < 8 && json_is_string(m))
				snprintf(a->methods[a->n_methods++], sizeof a->methods[0], "%s", json_string_value(m));
		}
	}
	/* The policy's network.mcp: [{"name", "tools": [...] (absent: not narrowed)}]. */
	unsigned n_mcp = 0;
	json_array_foreach(json_object_get(cfg, "mcp"), i, v)
	{
		const char *mname = json_string_value(json_object_get(v, "name"));
		const json_t *ts = json_object_get(v, "tools");
		if (n_mcp == RB_POLICY_MAX_MCP || !mname)
			continue;
		struct rb_gw_mcp_grant *mg = &g->mcp[n_mcp];
		*mg = (struct rb_gw_mcp_grant){.name = mname, .tools = json_is_array(ts) ? g->mcp_tools[n_mcp] : NULL};
		size_t j;
		json_t *t;
		json_array_foreach(ts, j, t)
		{
			if (mg->n_tools < RB_POLICY_MCP_TOOLS && json_is_string(t))
				g->mcp_tools[n_mcp][mg->n_tools++] = json_string_value(t);
		}
		n_mcp++;
	}
	gc->mcp = g->mcp;
	gc->n_mcp = n_mcp;
	gc->listen_fds = g->fds;
	gc->n_listen_fds = n;
	gc->key = g->key;
	gc->keylen = keylen;
	gc->run_id = run_id;
	gc->grants = g->grants;
	gc->n_grants = n_grants;
	gc->proxy = g->proxy;
	gc->n_proxy = n_proxy;
	gc->event_fd = -1;
	gc->rate = (uint64_t)json_integer_value(json_object_get(cfg, "rate"));
	gc->burst = (uint64_t)json_integer_value(json_object_get(cfg, "burst"));
	gc->approvals = g->approvals;
	gc->n_approvals = n_approvals;
	gc->approvals_dir = json_string_value(json_object_get(cfg, "approvals_dir"));
	return 0;
}

void rb_gw_grant_free(struct rb_gw_grant *g)
{
	OPENSSL_cleanse(g->key, sizeof g->key);
	json_decref(g->cfg);
	g->cfg = NULL;
}

/* The gateway's policy decision for a call (connector granted, path normalized, route matched)
 * and the address classes it never connects to unless the operator names the address. */
#define _GNU_SOURCE
#include "gateway/decide.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(char c)
{
	return isdigit((unsigned char)c)    ? c - '0'
	       : isxdigit((unsigned char)c) ? (tolower((unsigned char)c) - 'a' + 10)
	                                    : -1;
}

static void refuse(struct rb_gw_verdict *v, unsigned status, const char *rule, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void refuse(struct rb_gw_verdict *v, unsigned status, const char *rule, const char *hint, const char *fmt, ...)
{
	v->status = status;
	v->rule = rule;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->error, sizeof v->error, fmt, ap);
	va_end(ap);
	snprintf(v->hint, sizeof v->hint, "%s", hint);
}

/* seg[0..s) is "." or "..", alone or before a ';'. */
static bool dot_segment(const char *seg, size_t s)
{
	size_t d = 0;
	while (d < s && d < 3 && seg[d] == '.')
		d++;
	return (d == 1 || d == 2) && (d == s || seg[d] == ';');
}

/* raw ("/a/b%20c") into out ("/a/b c"), one segment at a time; false if any segment is empty,
 * "." or "..", also before a ';' (Tomcat, Jetty and Spring read "..;x" as "..": a route's prefix
 * would be left upstream), or decodes to '/', '\', NUL or a control byte. */
static bool normalize(const char *raw, char *out, size_t n)
{
	size_t o = 0;
	if (!*raw)
		raw = "/";
	if (*raw != '/')
		return false;
	const char *p = raw;
	while (*p) {
		p++; /* past the '/' */
		char seg[1024];
		size_t s = 0;
		while (*p && *p != '/') {
			int c = (unsigned char)*p;
			if (c == '%') {
				int h = hexval(p[1]), l = h < 0 ? -1 : hexval(p[2]);
				if (l < 0)
					return false;
				c = h * 16 + l;
				p += 3;
			} else {
				p++;
			}
			if (c < 0x20 || c == 0x7f || c == '/' || c == '\\' || s + 1 >= sizeof seg)
				return false;
			seg[s++] = (char)c;
		}
		seg[s] = '\0';
		bool last = !*p;
		if ((s == 0 && !last) || dot_segment(seg, s))
			return false;
		if (o + s + 2 >= n)
			return false;
		out[o++] = '/';
		memcpy(out + o, seg, s);
		o += s;
	}
	out[o] = '\0';
	return true;
}

/* path ("/a/b c#") into out ("/a/b%20c%23"): '/' separates, each other byte is kept when it is
 * an RFC 3986 pchar (unreserved, sub-delims, ':', '@') and percent-encoded when not. */
static bool encode_pchar(const char *path, char *out, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		bool keep = (*p < 0x80 && isalnum(*p)) || strchr("/-._~!$&'()*+,;=:@", *p);
		if (o + (keep ? 1 : 3) >= n)
			return false;
		if (keep) {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
	return true;
}

/* name among the route's n names (none: any name, and a run without one too). */
static bool listed(const char (*names)[RB_GWCONF_NAME_MAX + 1], unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (name && !strcmp(names[i], name))
			return true;
	return n == 0;
}

/* A template's last '*' takes any rest (one segment at least); an inner '*' one segment. */
static bool path_matches(const char *tmpl, const char *path)
{
	while (*tmpl) {
		if (*tmpl == '*') {
			if (!tmpl[1])
				return *path != '\0';
			const char *slash = strchr(path, '/');
			if (!slash || slash == path)
				return false;
			path = slash;
			tmpl++;
			continue;
		}
		if (*tmpl != *path)
			return false;
		tmpl++, path++;
	}
	return *path == '\0';
}

static void decide_proxy(const struct rb_gw_request *rq, struct rb_gw_verdict *v);

void rb_gw_decide(const struct rb_gw_request *rq, struct rb_gw_verdict *v)
{
	memset(v, 0, sizeof *v);
	if (rq->door == RB_GW_DOOR_PROXY || rq->door == RB_GW_DOOR_CONNECT)
		return decide_proxy(rq, v);
	bool mcp = rq->door == RB_GW_DOOR_MCP;
	v->conn = !rq->conf ? NULL
	          : mcp     ? rb_gwconf_find_mcp(rq->conf, rq->connector)
	                    : rb_gwconf_find(rq->conf, rq->connector);
	if (!v->conn && mcp)
		return refuse(v, 404, "mcp", "the gateway's config has no such MCP server; ask the operator",
		              "no MCP server `%s`", rq->connector);
	if (!v->conn)
		return refuse(v, 404, "connector", "the gateway's config has no such connector; ask the operator",
		              "no connector `%s`", rq->connector);
	bool granted = false;
	for (unsigned i = 0; mcp && i < rq->n_mcp_grants && !granted; i++)
		if (!strcmp(rq->mcp_grants[i].name, rq->connector))
			granted = true, v->grant = &rq->mcp_grants[i];
	for (unsigned i = 0; !mcp && i < rq->n_grants && !granted; i++)
		granted = !strcmp(rq->grants[i], rq->connector);
	if (!granted && mcp)
		return refuse(v, 403, "network.mcp", "the run's policy does not list this MCP server in network.mcp",
		              "MCP server `%s` is not granted to this run", rq->connector);
	if (!granted)
		return refuse(v, 403, "network.connectors",
		              "the run's policy does not list this connector in network.connectors",
		              "connector `%s` is not granted to this run", rq->connector);
	if (!normalize(rq->raw_path, v->path, sizeof v->path) ||
	    !encode_pchar(v->path, v->upstream_path, sizeof v->upstream_path))
		return refuse(v, 403, "path",
		              "send a plain path: no empty, '.' or '..' segments (nor '..;'), no encoded '/', '\\' or "
		              "control bytes",
		              "path `%.200s` is refused", rq->raw_path);
	for (unsigned r = 0; r < v->conn->n_routes; r++) {
		const struct rb_gw_route *rt = &v->conn->routes[r];
		bool m = false;
		for (unsigned i = 0; i < rt->n_methods && !m; i++)
			m = !strcmp(rt->methods[i], rq->method);
		m = m && listed(rt->tenants, rt->n_tenants, rq->tenant) && listed(rt->agents, rt->n_agents, rq->agent);
		for (unsigned i = 0; m && i < rt->n_paths; i++)
			if (path_matches(rt->paths[i], v->path)) {
				v->route = rt->paths[i];
				v->rule = "route";
				if (mcp && rq->tool && !rb_gw_mcp_tool_allowed(v->conn, v->grant, rq->tool))
					return refuse(
					    v, 403, "mcp.tools",
					    "the tool is not on the allowlist of this MCP server (the gateway "
					    "config's tools, narrowed by the policy's network.mcp); tools/list "
					    "shows the allowed ones",
					    "tool `%.100s` of MCP server `%s` is not allowed", rq->tool, rq->connector);
				return;
			}
	}
	char what[1300];
	snprintf(what, sizeof what, "%.16s %.1000s", rq->method, v->path);
	refuse(v, 403, "route", "the connector's routes in the gateway config do not allow this method and path",
	       "%s matches no route of the connector", what);
}

static bool tool_in(const char *entry, const char *tool)
{
	size_t n = strlen(entry);
	if (n && entry[n - 1] == '*')
		return !strncmp(entry, tool, n - 1);
	return !strcmp(entry, tool);
}

bool rb_gw_mcp_tool_allowed(const struct rb_gw_connector *server, const struct rb_gw_mcp_grant *g, const char *tool)
{
	if (!tool || !*tool)
		return false;
	bool ok = false;
	for (unsigned i = 0; i < server->n_tools && !ok; i++)
		ok = tool_in(server->tools[i], tool);
	if (!ok || !g || !g->tools)
		return ok;
	for (unsigned i = 0; i < g->n_tools; i++)
		if (tool_in(g->tools[i], tool))
			return true;
	return false;
}

static void decide_proxy(const struct rb_gw_request *rq, struct rb_gw_verdict *v)
{
	const char *const *allow = rq->proxy, *host = rq->host ? rq->host : "";
	unsigned n_allow = rq->n_proxy, port = rq->port;
	size_t hl = strlen(host);
	for (unsigned i = 0; i < n_allow; i++) {
		const char *e = allow[i], *colon = strrchr(e, ':');
		if (!colon || strtoul(colon + 1, NULL, 10) != port)
			continue;
		size_t el = (size_t)(colon - e);
		bool m;
		if (el > 2 && e[0] == '*' && e[1] == '.')
			m = hl > el - 1 && !strncmp(host + hl - (el - 1), e + 1, el - 1) && host[0] != '[';
		else
			m = hl == el && !strncmp(host, e, el);
		if (m) {
			v->rule = "network.proxy";
			v->route = allow[i];
			return;
		}
	}
	refuse(v, 403, "network.proxy",
	       "the run's policy does not list this host:port in network.proxy (IP literals and other ports need "
	       "their own entry)",
	       "%s%.200s:%u is not on the proxy allowlist", rq->door == RB_GW_DOOR_CONNECT ? "CONNECT " : "", host,
	       port);
}

static bool in4(uint32_t a, uint32_t net, unsigned bits)
{
	uint32_t mask = bits ? ~0u << (32 - bits) : 0;
	return (a & mask) == (net & mask);
}

static const char *class4(uint32_t a)
{
	if (in4(a, 0x7f000000, 8))
		return "loopback";
	if (in4(a, 0xa9fea9fe, 32))
		return "metadata";
	if (in4(a, 0xa9fe0000, 16))
		return "link-local";
	if (in4(a, 0x0a000000, 8) || in4(a, 0xac100000, 12) || in4(a, 0xc0a80000, 16))
		return "private";
	if (in4(a, 0x64400000, 10))
		return "CGNAT";
	if (in4(a, 0x00000000, 8) || in4(a, 0xe0000000, 4) || in4(a, 0xf0000000, 4) || in4(a, 0xc0000000, 24) ||
	    in4(a, 0xc6120000, 15))
		return "reserved";
	return NULL;
}

/* Only global unicast (2000::/3) is the internet, and not its prefixes that carry an IPv4
 * address (6to4 2002::/16, Teredo 2001::/32; a relay would reach a private or metadata one) nor
 * documentation (2001:db8::/32). Outside 2000::/3 lie multicast, site-local, NAT64's
 * 64:ff9b::/96 (an IPv4 address inside too), discard and the unassigned. */
static bool v6_global(const struct in6_addr *a)
{
	const uint8_t *b = a->s6_addr;
	bool sixto4 = b[0] == 0x20 && b[1] == 0x02;
	bool teredo = b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0;
	bool doc = b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8;
	return (b[0] & 0xe0) == 0x20 && !sixto4 && !teredo && !doc;
}

bool rb_gw_address_allowed(const struct rb_gwconf *conf, const struct sockaddr *sa, char *why, size_t n)
{
	char text[INET6_ADDRSTRLEN] = "";
	const char *cls = NULL;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, text, sizeof text);
		cls = class4(ntohl(s4->sin_addr.s_addr));
	} else if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		inet_ntop(AF_INET6, a, text, sizeof text);
		if (IN6_IS_ADDR_V4MAPPED(a) || IN6_IS_ADDR_V4COMPAT(a)) {
			uint32_t v4;
			memcpy(&v4, a->s6_addr + 12, 4);
			cls = class4(ntohl(v4));
			if (!cls && IN6_IS_ADDR_V4COMPAT(a))
				cls = "reserved";
		} else if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a)) {
			cls = "loopback";
		} else if (IN6_IS_ADDR_LINKLOCAL(a)) {
			cls = "link-local";
		} else if ((a->s6_addr[0] & 0xfe) == 0xfc) {
			cls = "private";
		} else if (!v6_global(a)) {
			cls = "reserved";
		}
	} else {
		snprintf(why, n, "address family %d", sa->sa_family);
		return false;
	}
	if (!cls)
		return true;
	for (unsigned i = 0; conf && i < conf->n_private; i++) {
		unsigned char want[16], got[16];
		int fam = strchr(conf->private_upstreams[i], ':') ? AF_INET6 : AF_INET;
		if (inet_pton(fam, conf->private_upstreams[i], want) == 1 && inet_pton(fam, text, got) == 1 &&
		    !memcmp(want, got, fam == AF_INET ? 4 : 16))
			return true;
	}
	snprintf(why, n, "%s is a %s address, not in the gateway config's private_upstreams", text, cls);
	return false;
}

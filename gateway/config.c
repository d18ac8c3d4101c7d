/* The gateway's configuration: strict parsing of gateway.json (connectors, private upstreams),
 * where it is found, and reading a connector's credential (file or environment). */
#define _GNU_SOURCE
#include "gateway/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/util.h"

static int get_str(const struct rb_jsonck *c, const char *path, const json_t *v, char *out, size_t len)
{
	if (!json_is_string(v))
		return rb_jsonck_expected(c, path, "a string", v);
	const char *s = json_string_value(v);
	if (!*s || strlen(s) >= len)
		return rb_jsonck_bad(c, path, "1..%zu bytes", len - 1);
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x21 || *p == 0x7f)
			return rb_jsonck_bad(c, path, "\"%.80s\": no spaces or control characters", s);
	snprintf(out, len, "%s", s);
	return 0;
}

static bool name_ok(const char *s)
{
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '_' && *s != '-')
			return false;
	return true;
}

/* A header name is an RFC 9110 token; the ones the gateway manages itself are refused. */
static const char *header_why(const char *s)
{
	for (const char *p = s; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("!#$%&'*+-.^_`|~", *p))
			return "not an HTTP header name";
	static const char *const managed[] = {"host",       "content-length", "transfer-encoding",
	                                      "connection", "cookie",         NULL};
	for (unsigned i = 0; managed[i]; i++)
		if (!strcasecmp(s, managed[i]))
			return "a header the gateway sets itself";
	return NULL;
}

static int parse_strings(const struct rb_jsonck *c, const char *path, const json_t *v, char *out, size_t each,
                         unsigned max, unsigned *n)
{
	if (!json_is_array(v))
		return rb_jsonck_expected(c, path, "an array of strings", v);
	if (json_array_size(v) == 0 || json_array_size(v) > max)
		return rb_jsonck_bad(c, path, "1..%u entries, got %zu", max, json_array_size(v));
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		char ip[300];
		snprintf(ip, sizeof ip, "%s[%zu]", path, i);
		if (get_str(c, ip, e, out + i * each, each) < 0)
			return -1;
	}
	*n = (unsigned)json_array_size(v);
	return 0;
}

static int parse_route(const struct rb_jsonck *c, const char *path, const json_t *v, struct rb_gw_route *r)
{
	static const char *const keys[] = {"methods", "paths", "tenants", "agents", NULL};
	if (!json_is_object(v))
		return rb_jsonck_expected(c, path, "an object", v);
	if (rb_jsonck_keys(c, path, v, keys) < 0)
		return -1;
	char p[300];
	snprintf(p, sizeof p, "%s.methods", path);
	const json_t *m = json_object_get(v, "methods");
	if (!m)
		return rb_jsonck_bad(c, p, "missing");
	if (parse_strings(c, p, m, r->methods[0], sizeof r->methods[0], RB_GWCONF_MAX_LIST, &r->n_methods) < 0)
		return -1;
	for (unsigned i = 0; i < r->n_methods; i++) {
		for (char *s = r->methods[i]; *s; s++) {
			if (!isalpha((unsigned char)*s))
				return rb_jsonck_bad(c, p, "\"%s\": a method is letters", r->methods[i]);
			*s = (char)toupper((unsigned char)*s);
		}
	}
	snprintf(p, sizeof p, "%s.paths", path);
	const json_t *ps = json_object_get(v, "paths");
	if (!ps)
		return rb_jsonck_bad(c, p, "missing");
	if (parse_strings(c, p, ps, r->paths[0], sizeof r->paths[0], RB_GWCONF_MAX_LIST, &r->n_paths) < 0)
		return -1;
	for (unsigned i = 0; i < r->n_paths; i++) {
		const char *t = r->paths[i], *star = strchr(t, '*');
		if (t[0] != '/' || strstr(t, "//") || strstr(t, "/../") || strstr(t, "/./") || strchr(t, '%') ||
		    strchr(t, '?'))
			return rb_jsonck_bad(c, p,
			                     "\"%s\": a path template starts with '/', has no empty, '.' or '..' "
			                     "segments, no '%%' and no query",
			                     t);
		for (; star; star = strchr(star + 1, '*'))
			if (star[-1] != '/' || (star[1] && star[1] != '/'))
				return rb_jsonck_bad(c, p, "\"%s\": '*' stands for a whole segment", t);
	}
	const json_t *ts = json_object_get(v, "tenants"), *as = json_object_get(v, "agents");
	snprintf(p, sizeof p, "%s.tenants", path);
	if (ts && parse_strings(c, p, ts, r->tenants[0], sizeof r->tenants[0], RB_GWCONF_MAX_LIST, &r->n_tenants) < 0)
		return -1;
	snprintf(p, sizeof p, "%s.agents", path);
	if (as && parse_strings(c, p, as, r->agents[0], sizeof r->agents[0], RB_GWCONF_MAX_LIST, &r->n_agents) < 0)
		return -1;
	return 0;
}

/* An optional positive integer at obj.key, 1..max; *out keeps its default when absent. */
static int get_uint(const struct rb_jsonck *c, const char *parent, const json_t *obj, const char *key, unsigned max,
                    unsigned *out)
{
	const json_t *v = json_object_get(obj, key);
	char p[400];
	rb_jsonck_join(p, sizeof p, parent, key);
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return rb_jsonck_expected(c, p, "an integer", v);
	if (json_integer_value(v) < 1 || json_integer_value(v) > (json_int_t)max)
		return rb_jsonck_bad(c, p, "1..%u", max);
	*out = (unsigned)json_integer_value(v);
	return 0;
}

/* "tools": an MCP server's allowlist, names as MCP writes them (visible ASCII, no spaces), a
 * trailing '*' a prefix. */
static int parse_tools(const struct rb_jsonck *c, const char *path, const json_t *v, struct rb_gw_connector *k)
{
	if (parse_strings(c, path, v, k->tools[0], sizeof k->tools[0], RB_GWCONF_MAX_TOOLS, &k->n_tools) < 0)
		return -1;
	for (unsigned i = 0; i < k->n_tools; i++) {
		const char *star = strchr(k->tools[i], '*');
		if (star && star[1])
			return rb_jsonck_bad(c, path, "\"%s\": '*' only at the end (a prefix)", k->tools[i]);
	}
	return 0;
}

static int parse_connector(const struct rb_jsonck *c, const char *name, const json_t *v, struct rb_gw_connector *k,
                           bool mcp)
{
	static const char *const conn_keys[] = {"url", "credential", "inject", "routes", NULL};
	static const char *const mcp_keys[] = {"url", "credential", "inject", "tools", NULL};
	static const char *const conn_all[] = {"url", "credential", "inject", "routes", "timeout_s", NULL};
	static const char *const mcp_all[] = {"url", "credential", "inject", "routes", "timeout_s", "tools", NULL};
	const char *const *keys = mcp ? mcp_keys : conn_keys, *const *all_keys = mcp ? mcp_all : conn_all;
	char path[300], p[340];
	snprintf(path, sizeof path, "%s.%s", mcp ? "mcp" : "connectors", name);
	if (!name_ok(name) || !*name || strlen(name) >= sizeof k->name)
		return rb_jsonck_bad(c, path, "a %s name is [a-z0-9_-]{1,63}", mcp ? "server" : "connector");
	snprintf(k->name, sizeof k->name, "%s", name);
	if (!json_is_object(v))
		return rb_jsonck_expected(c, path, "an object", v);
	if (rb_jsonck_keys(c, path, v, all_keys) < 0)
		return -1;
	k->timeout_s = RB_GWCONF_TIMEOUT_S;
	if (get_uint(c, path, v, "timeout_s", 86400, &k->timeout_s) < 0)
		return -1;
	for (unsigned i = 0; keys[i]; i++)
		if (!json_object_get(v, keys[i])) {
			snprintf(p, sizeof p, "%s.%s", path, keys[i]);
			return rb_jsonck_bad(c, p, "missing");
		}

	snprintf(p, sizeof p, "%s.url", path);
	if (get_str(c, p, json_object_get(v, "url"), k->url, sizeof k->url) < 0)
		return -1;
	const char *host = !strncmp(k->url, "http://", 7)    ? k->url + 7
	                   : !strncmp(k->url, "https://", 8) ? k->url + 8
	                                                     : NULL;
	if (!host || !*host || *host == '/' || strchr(k->url, '?') || strchr(k->url, '#') || strchr(host, '@'))
		return rb_jsonck_bad(c, p, "\"%s\": an http:// or https:// URL with a host, no user, query or fragment",
		                     k->url);
	size_t ul = strlen(k->url);
	while (ul && k->url[ul - 1] == '/')
		k->url[--ul] = '\0';

	snprintf(p, sizeof p, "%s.credential", path);
	const json_t *cr = json_object_get(v, "credential");
	static const char *const ckeys[] = {"file", "env", NULL};
	if (!json_is_object(cr))
		return rb_jsonck_expected(c, p, "an object {\"file\": PATH} or {\"env\": NAME}", cr);
	if (rb_jsonck_keys(c, p, cr, ckeys) < 0)
		return -1;
	if (json_object_size(cr) != 1)
		return rb_jsonck_bad(c, p, "exactly one of \"file\" and \"env\"");
	char q[360];
	if (json_object_get(cr, "file")) {
		k->cred = RB_CRED_FILE;
		snprintf(q, sizeof q, "%s.file", p);
		if (get_str(c, q, json_object_get(cr, "file"), k->cred_ref, sizeof k->cred_ref) < 0)
			return -1;
		if (k->cred_ref[0] != '/')
			return rb_jsonck_bad(c, q, "\"%s\": an absolute path", k->cred_ref);
	} else {
		k->cred = RB_CRED_ENV;
		snprintf(q, sizeof q, "%s.env", p);
		if (get_str(c, q, json_object_get(cr, "env"), k->cred_ref, sizeof k->cred_ref) < 0)
			return -1;
		for (const char *s = k->cred_ref; *s; s++)
			if (!isalnum((unsigned char)*s) && *s != '_')
				return rb_jsonck_bad(c, q, "\"%s\": an environment variable name is [A-Za-z0-9_]+",
				                     k->cred_ref);
	}

	snprintf(p, sizeof p, "%s.inject", path);
	const json_t *in = json_object_get(v, "inject");
	const char *is = json_string_value(in);
	if (is && !strcmp(is, "bearer")) {
		k->inject = RB_INJECT_BEARER;
	} else if (is && !strcmp(is, "basic")) {
		k->inject = RB_INJECT_BASIC;
	} else if (json_is_object(in)) {
		static const char *const ikeys[] = {"header", "query", NULL};
		if (rb_jsonck_keys(c, p, in, ikeys) < 0)
			return -1;
		if (json_object_size(in) != 1)
			return rb_jsonck_bad(c, p, "exactly one of \"header\" and \"query\"");
		bool header = json_object_get(in, "header") != NULL;
		k->inject = header ? RB_INJECT_HEADER : RB_INJECT_QUERY;
		snprintf(q, sizeof q, "%s.%s", p, header ? "header" : "query");
		if (get_str(c, q, json_object_get(in, header ? "header" : "query"), k->inject_name,
		            sizeof k->inject_name) < 0)
			return -1;
		const char *why = header ? header_why(k->inject_name) : NULL;
		if (!header)
			for (const char *s = k->inject_name; *s && !why; s++)
				if (!isalnum((unsigned char)*s) && !strchr("-_.~", *s))
					why = "a query parameter name is [A-Za-z0-9._~-]+";
		if (why)
			return rb_jsonck_bad(c, q, "\"%s\": %s", k->inject_name, why);
	} else {
		return rb_jsonck_expected(c, p, "\"bearer\", \"basic\", {\"header\": NAME} or {\"query\": NAME}", in);
	}

	if (mcp) {
		snprintf(p, sizeof p, "%s.tools", path);
		if (parse_tools(c, p, json_object_get(v, "tools"), k) < 0)
			return -1;
	}
	snprintf(p, sizeof p, "%s.routes", path);
	const json_t *rs = json_object_get(v, "routes");
	if (mcp && !rs) { /* the MCP endpoint is the URL itself: POST, the GET stream, DELETE */
		static const char *const methods[] = {"GET", "POST", "DELETE"};
		for (unsigned i = 0; i < 3; i++)
			snprintf(k->routes[0].methods[i], sizeof k->routes[0].methods[i], "%s", methods[i]);
		k->routes[0].n_methods = 3;
		snprintf(k->routes[0].paths[0], sizeof k->routes[0].paths[0], "/");
		k->routes[0].n_paths = 1;
		k->n_routes = 1;
		return 0;
	}
	if (!json_is_array(rs))
		return rb_jsonck_expected(c, p, "an array of routes", rs);
	if (json_array_size(rs) == 0 || json_array_size(rs) > RB_GWCONF_MAX_ROUTES)
		return rb_jsonck_bad(c, p, "1..%d routes, got %zu", RB_GWCONF_MAX_ROUTES, json_array_size(rs));
	size_t i;
	json_t *r;
	json_array_foreach(rs, i, r)
	{
		snprintf(q, sizeof q, "%s[%zu]", p, i);
		if (parse_route(c, q, r, &k->routes[i]) < 0)
			return -1;
	}
	k->n_routes = (unsigned)json_array_size(rs);
	return 0;
}

int rb_gwconf_parse(const char *text, const char *origin, struct rb_gwconf *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	snprintf(out->origin, sizeof out->origin, "%s", origin);
	struct rb_jsonck c = {"gateway config", origin, err};
	_cleanup_json_ json_t *root = rb_jsonck_load(&c, text);
	if (!root)
		return -1;
	static const char *const keys[] = {"connectors", "mcp", "private_upstreams", "tunnel", NULL};
	if (rb_jsonck_keys(&c, "", root, keys) < 0)
		return -1;
	out->tunnel =
	    (struct rb_gw_tunnel_limits){RB_GWCONF_TUNNEL_IDLE_S, RB_GWCONF_TUNNEL_MAX_S, RB_GWCONF_TUNNEL_MAX_MIB};
	const json_t *tu = json_object_get(root, "tunnel");
	if (tu) {
		static const char *const tkeys[] = {"idle_s", "max_s", "max_mib", NULL};
		if (!json_is_object(tu))
			return rb_jsonck_expected(&c, "tunnel", "an object {\"idle_s\", \"max_s\", \"max_mib\"}", tu);
		if (rb_jsonck_keys(&c, "tunnel", tu, tkeys) < 0 ||
		    get_uint(&c, "tunnel", tu, "idle_s", 86400, &out->tunnel.idle_s) < 0 ||
		    get_uint(&c, "tunnel", tu, "max_s", 7 * 86400, &out->tunnel.max_s) < 0 ||
		    get_uint(&c, "tunnel", tu, "max_mib", 1u << 20, &out->tunnel.max_mib) < 0)
			return -1;
	}
	const json_t *cs = json_object_get(root, "connectors");
	if (cs) {
		if (!json_is_object(cs))
			return rb_jsonck_expected(&c, "connectors", "an object of connectors by name", cs);
		if (json_object_size(cs) > RB_GWCONF_MAX_CONNECTORS)
			return rb_jsonck_bad(&c, "connectors", "at most %d connectors", RB_GWCONF_MAX_CONNECTORS);
		const char *name;
		json_t *v;
		json_object_foreach((json_t *)cs, name, v)
		{
			if (parse_connector(&c, name, v, &out->connectors[out->n_connectors], false) < 0)
				return -1;
			out->n_connectors++;
		}
	}
	const json_t *ms = json_object_get(root, "mcp");
	if (ms) {
		if (!json_is_object(ms))
			return rb_jsonck_expected(&c, "mcp", "an object of MCP servers by name", ms);
		if (json_object_size(ms) > RB_GWCONF_MAX_MCP)
			return rb_jsonck_bad(&c, "mcp", "at most %d MCP servers", RB_GWCONF_MAX_MCP);
		const char *name;
		json_t *v;
		json_object_foreach((json_t *)ms, name, v)
		{
			if (parse_connector(&c, name, v, &out->mcp[out->n_mcp], true) < 0)
				return -1;
			out->n_mcp++;
		}
	}
	const json_t *pu = json_object_get(root, "private_upstreams");
	if (pu) {
		if (parse_strings(&c, "private_upstreams", pu, out->private_upstreams[0],
		                  sizeof out->private_upstreams[0], RB_GWCONF_MAX_LIST, &out->n_private) < 0)
			return -1;
		for (unsigned i = 0; i < out->n_private; i++) {
			unsigned char a[16];
			if (inet_pton(AF_INET, out->private_upstreams[i], a) != 1 &&
			    inet_pton(AF_INET6, out->private_upstreams[i], a) != 1)
				return rb_jsonck_bad(&c, "private_upstreams", "\"%s\": an IPv4 or IPv6 address",
				                     out->private_upstreams[i]);
		}
	}
	return 0;
}

int rb_gwconf_load(const char *path, const struct rb_paths *paths, struct rb_gwconf *out, struct rb_error *err)
{
	char found[PATH_MAX] = "";
	if (path) {
		snprintf(found, sizeof found, "%s", path);
	} else {
		char cand[PATH_MAX];
		snprintf(cand, sizeof cand, "%s/gateway.json", paths->config_dir);
		if (access(cand, F_OK) == 0)
			snprintf(found, sizeof found, "%s", cand);
		else if (access("/etc/runbox/gateway.json", F_OK) == 0)
			snprintf(found, sizeof found, "%s", "/etc/runbox/gateway.json");
	}
	if (!found[0]) {
		memset(out, 0, sizeof *out);
		out->tunnel = (struct rb_gw_tunnel_limits){RB_GWCONF_TUNNEL_IDLE_S, RB_GWCONF_TUNNEL_MAX_S,
		                                           RB_GWCONF_TUNNEL_MAX_MIB};
		return 0;
	}
	_cleanup_free_ char *text = NULL;
	if (rb_read_document(found, RB_GWCONF_FILE_MAX, &text, err) < 0)
		return rb_error_prefix(err, "gateway config");
	return rb_gwconf_parse(text, found, out, err);
}

const struct rb_gw_connector *rb_gwconf_find(const struct rb_gwconf *c, const char *name)
{
	for (unsigned i = 0; i < c->n_connectors; i++)
		if (!strcmp(c->connectors[i].name, name))
			return &c->connectors[i];
	return NULL;
}

const struct rb_gw_connector *rb_gwconf_find_mcp(const struct rb_gwconf *c, const char *name)
{
	for (unsigned i = 0; i < c->n_mcp; i++)
		if (!strcmp(c->mcp[i].name, name))
			return &c->mcp[i];
	return NULL;
}

int rb_gwconf_secret(const struct rb_gw_connector *c, char *buf, size_t len, struct rb_error *err)
{
	buf[0] = '\0';
	size_t n;
	if (c->cred == RB_CRED_ENV) {
		const char *v = getenv(c->cred_ref);
		if (!v || !*v)
			return rb_error_set(err, 0,
			                    "connector `%s`: credential variable %s is not set in the gateway's "
			                    "environment",
			                    c->name, c->cred_ref);
		n = strlen(v);
		if (n >= len)
			return rb_error_set(err, 0, "connector `%s`: credential in %s is over %zu bytes", c->name,
			                    c->cred_ref, len - 1);
		memcpy(buf, v, n + 1);
	} else {
		_cleanup_close_ int fd = open(c->cred_ref, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			return rb_error_set(err, errno, "connector `%s`: credential file `%s`", c->name, c->cred_ref);
		struct stat st;
		if (fstat(fd, &st) < 0)
			return rb_error_set(err, errno, "connector `%s`: credential file `%s`: fstat", c->name,
			                    c->cred_ref);
		if (!S_ISREG(st.st_mode))
			return rb_error_set(err, 0, "connector `%s`: credential file `%s` is not a regular file",
			                    c->name, c->cred_ref);
		if (st.st_uid != geteuid())
			return rb_error_set(err, 0,
			                    "connector `%s`: credential file `%s` is owned by uid %u, not by the "
			                    "gateway's uid %u",
			                    c->name, c->cred_ref, (unsigned)st.st_uid, (unsigned)geteuid());
		if (st.st_mode & 077)
			return rb_error_set(err, 0,
			                    "connector `%s`: credential file `%s` has mode %04o; it must be 0600 "
			                    "(no group or other access)",
			                    c->name, c->cred_ref, (unsigned)(st.st_mode & 07777));
		ssize_t r;
		n = 0;
		while (n < len - 1 && (r = read(fd, buf + n, len - 1 - n)) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				return rb_error_set(err, errno, "connector `%s`: read credential file `%s`", c->name,
				                    c->cred_ref);
			n += (size_t)r;
		}
		buf[n] = '\0';
		if (n == len - 1)
			return rb_error_set(err, 0, "connector `%s`: credential file `%s` is over %zu bytes", c->name,
			                    c->cred_ref, len - 2);
		if (n && buf[n - 1] == '\n')
			buf[--n] = '\0';
		if (n && buf[n - 1] == '\r')
			buf[--n] = '\0';
		if (memchr(buf, '\0', n) || !n)
			return rb_error_set(err, 0, "connector `%s`: credential file `%s` is empty or holds a NUL byte",
			                    c->name, c->cred_ref);
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f) {
			memset(buf, 0, len);
			return rb_error_set(err, 0,
			                    "connector `%s`: credential holds a control character (it goes into a "
			                    "header)",
			                    c->name);
		}
	return 0;
}

/* gateway/decide.c and gateway/config.c: the one decision (grants, path normalization, routes,
 * the proxy allowlist), the address classes, and the config's strict parsing. Each refusal
 * beside an allowed control. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/config.h"
#include "gateway/decide.h"

static const char CONF[] =
    "{\"connectors\": {\"gh\": {\"url\": \"https://api.example.org/\", \"credential\": {\"env\": \"GH\"},"
    " \"inject\": \"bearer\", \"routes\": [{\"methods\": [\"get\"], \"paths\": [\"/repos/*/issues\", \"/v1/*\"]}]},"
    " \"other\": {\"url\": \"http://127.0.0.1:1\", \"credential\": {\"file\": \"/x\"}, \"inject\": {\"query\": \"k\"},"
    " \"routes\": [{\"methods\": [\"POST\"], \"paths\": [\"/\"]}]}}, \"private_upstreams\": [\"10.1.2.3\"]}";

static struct rb_gwconf *load(const char *text, struct rb_error *err)
{
	struct rb_gwconf *c = calloc(1, sizeof *c);
	assert_non_null(c);
	if (rb_gwconf_parse(text, "t.json", c, err) < 0) {
		free(c);
		return NULL;
	}
	return c;
}

static unsigned decide(const struct rb_gwconf *c, const char *name, const char *method, const char *path,
                       struct rb_gw_verdict *v)
{
	const char *grants[] = {"gh"};
	struct rb_gw_request rq = {
	    .connector = name, .method = method, .raw_path = path, .conf = c, .grants = grants, .n_grants = 1};
	rb_gw_decide(&rq, v);
	return v->status;
}

static void test_decide_connector(void **state)
{
	struct rb_error err = {0};
	struct rb_gwconf *c = load(CONF, &err);
	assert_non_null(c);
	struct rb_gw_verdict v;
	assert_int_equal(decide(c, "gh", "GET", "/v1/a/b", &v), 0);
	assert_string_equal(v.route, "/v1/*");
	assert_int_equal(decide(c, "gh", "GET", "/repos/x/issues", &v), 0);
	assert_string_equal(v.route, "/repos/*/issues");
	assert_int_equal(decide(c, "gh", "GET", "/v1/a%20b", &v), 0);
	assert_string_equal(v.path, "/v1/a b");
	assert_string_equal(v.upstream_path, "/v1/a%20b");
	/* What goes upstream is what was decided: the inner star took "r#" as one segment, so '#'
	 * (a fragment to libcurl, which would send "/repos/o/r") and '%' go encoded; pchars stay. */
	assert_int_equal(decide(c, "gh", "GET", "/repos/r#/issues", &v), 0);
	assert_string_equal(v.upstream_path, "/repos/r%23/issues");
	assert_int_equal(decide(c, "gh", "GET", "/v1/a%25b%3fc/@:+,;=!$&'()*~._-\xc3\xa9", &v), 0);
	assert_string_equal(v.upstream_path, "/v1/a%25b%3Fc/@:+,;=!$&'()*~._-%C3%A9");
	/* routes: the one-segment star, the method, a bare prefix */
	assert_int_equal(decide(c, "gh", "GET", "/repos/x/y/issues", &v), 403);
	assert_string_equal(v.rule, "route");
	assert_int_equal(decide(c, "gh", "POST", "/v1/a", &v), 403);
	assert_int_equal(decide(c, "gh", "GET", "/v1", &v), 403);
	assert_int_equal(decide(c, "gh", "GET", "/v1/", &v), 403);
	/* traversal shapes, before any route */
	const char *bad[] = {"/v1/../admin",
	                     "/v1/%2e%2e/admin",
	                     "/v1/%2E%2e/x",
	                     "/v1/.%2e/x",
	                     "/v1/./x",
	                     "/v1//x",
	                     "/v1/a%2fb",
	                     "/v1/a%2Fb",
	                     "/v1/a%5cb",
	                     "/v1/a\\b",
	                     "/v1/a%00b",
	                     "/v1/a%0d%0ab",
	                     "/v1/%zz",
	                     "/v1/%4",
	                     "v1/x",
	                     "/v1/..",
	                     "/v1/..;/admin",
	                     "/v1/.;x/y",
	                     "/v1/%2e%2e;jsessionid=1/x"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		assert_int_equal(decide(c, "gh", "GET", bad[i], &v), 403);
		assert_string_equal(v.rule, "path");
	}
	/* control: dots and a ';' that are no dot segment pass */
	assert_int_equal(decide(c, "gh", "GET", "/v1/...", &v), 0);
	assert_int_equal(decide(c, "gh", "GET", "/v1/a;b", &v), 0);
	assert_int_equal(decide(c, "gh", "GET", "/v1/.x;y", &v), 0);
	/* grants and names */
	assert_int_equal(decide(c, "other", "POST", "/", &v), 403);
	assert_string_equal(v.rule, "network.connectors");
	assert_int_equal(decide(c, "nope", "GET", "/v1/x", &v), 404);
	assert_string_equal(v.rule, "connector");
	assert_non_null(strstr(v.hint, "operator"));
	/* the URL's trailing slash is dropped; methods are upper-cased */
	assert_string_equal(rb_gwconf_find(c, "gh")->url, "https://api.example.org");
	assert_string_equal(rb_gwconf_find(c, "gh")->routes[0].methods[0], "GET");
	free(c);
}

static void expect_bad(const char *text, const char *msg);

/* A route naming tenants and agents serves only runs whose token says one of each; the same
 * connector's unnamed route serves every run (the control). */
static void test_route_per_tenant_agent(void **state)
{
	static const char conf[] =
	    "{\"connectors\": {\"gh\": {\"url\": \"https://api.example.org\", \"credential\": {\"env\": \"T\"},"
	    " \"inject\": \"bearer\", \"routes\": [{\"methods\": [\"POST\"], \"paths\": [\"/repos/*\"],"
	    " \"tenants\": [\"acme\"], \"agents\": [\"triage\"]}, {\"methods\": [\"GET\"], \"paths\": "
	    "[\"/repos/*\"]}]}}}";
	struct rb_error err = {0};
	struct rb_gwconf *c = load(conf, &err);
	assert_non_null(c);
	const char *grants[] = {"gh"};
	struct rb_gw_verdict v;
	struct rb_gw_request rq = {.connector = "gh",
	                           .method = "POST",
	                           .raw_path = "/repos/x",
	                           .conf = c,
	                           .grants = grants,
	                           .n_grants = 1,
	                           .tenant = "acme",
	                           .agent = "triage"};
	rb_gw_decide(&rq, &v);
	assert_int_equal(v.status, 0);
	const char *who[][2] = {{"other", "triage"}, {"acme", "writer"}, {NULL, NULL}};
	for (size_t i = 0; i < 3; i++) {
		rq.tenant = who[i][0], rq.agent = who[i][1];
		rb_gw_decide(&rq, &v);
		assert_int_equal(v.status, 403);
		assert_string_equal(v.rule, "route");
	}
	rq.method = "GET"; /* the unnamed route: any run */
	rb_gw_decide(&rq, &v);
	assert_int_equal(v.status, 0);
	expect_bad("{\"connectors\": {\"gh\": {\"url\": \"https://a.example\", \"credential\": {\"env\": \"T\"},"
	           " \"inject\": \"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"], \"tenants\": "
	           "\"acme\"}]}}}",
	           "tenants");
	free(c);
}

static void decide_proxy(const char *const *allow, unsigned n, const char *host, unsigned port, struct rb_gw_verdict *v,
                         enum rb_gw_door door)
{
	struct rb_gw_request rq = {
	    .connector = host, .door = door, .host = host, .port = port, .proxy = allow, .n_proxy = n};
	rb_gw_decide(&rq, v);
}
#define rb_gw_decide_proxy(a, n, h, p, v) decide_proxy(a, n, h, p, v, door)

static void proxy_door(enum rb_gw_door door)
{
	const char *allow[] = {"pypi.example.org:80", "*.mirror.example.org:8080", "127.0.0.1:3128", "[::1]:81"};
	struct rb_gw_verdict v;
	rb_gw_decide_proxy(allow, 4, "pypi.example.org", 80, &v);
	assert_int_equal(v.status, 0);
	assert_string_equal(v.route, "pypi.example.org:80");
	rb_gw_decide_proxy(allow, 4, "a.b.mirror.example.org", 8080, &v);
	assert_int_equal(v.status, 0);
	rb_gw_decide_proxy(allow, 4, "127.0.0.1", 3128, &v);
	assert_int_equal(v.status, 0);
	rb_gw_decide_proxy(allow, 4, "[::1]", 81, &v);
	assert_int_equal(v.status, 0);
	const struct {
		const char *host;
		unsigned port;
	} bad[] = {{"pypi.example.org", 443},
	           {"xpypi.example.org", 80},
	           {"pypi.example.org.evil", 80},
	           {"mirror.example.org", 8080},
	           {"evilmirror.example.org", 8080},
	           {"a.mirror.example.org", 80},
	           {"127.0.0.2", 3128},
	           {"127.0.0.1", 80},
	           {"[::2]", 81}};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		rb_gw_decide_proxy(allow, 4, bad[i].host, bad[i].port, &v);
		assert_int_equal(v.status, 403);
		assert_string_equal(v.rule, "network.proxy");
	}
}

/* The absolute-form proxy and CONNECT are one rule, asked through the one decision. */
static void test_decide_proxy(void **state)
{
	proxy_door(RB_GW_DOOR_PROXY);
	proxy_door(RB_GW_DOOR_CONNECT);
	struct rb_gw_verdict v;
	const char *allow[] = {"pypi.example.org:443"};
	decide_proxy(allow, 1, "pypi.example.org", 443, &v, RB_GW_DOOR_CONNECT);
	assert_int_equal(v.status, 0);
	decide_proxy(allow, 1, "pypi.example.org", 443, &v, RB_GW_DOOR_CONNECTOR); /* not a connector name */
	assert_int_equal(v.status, 404);
}

static bool allowed4(const struct rb_gwconf *c, const char *ip)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	char why[200];
	return rb_gw_address_allowed(c, (struct sockaddr *)&sa, why, sizeof why);
}

static bool allowed6(const char *ip)
{
	struct sockaddr_in6 sa = {.sin6_family = AF_INET6};
	assert_int_equal(inet_pton(AF_INET6, ip, &sa.sin6_addr), 1);
	char why[200];
	return rb_gw_address_allowed(NULL, (struct sockaddr *)&sa, why, sizeof why);
}

static void test_addresses(void **state)
{
	struct rb_error err = {0};
	struct rb_gwconf *c = load(CONF, &err);
	assert_non_null(c);
	assert_true(allowed4(c, "93.184.216.34"));
	assert_true(allowed4(c, "10.1.2.3")); /* named in private_upstreams */
	const char *bad4[] = {"127.0.0.1",   "10.1.2.4",   "172.16.0.1", "192.168.1.1", "169.254.169.254",
	                      "169.254.1.1", "100.64.0.1", "0.0.0.0",    "224.0.0.1",   "255.255.255.255"};
	for (size_t i = 0; i < sizeof bad4 / sizeof *bad4; i++)
		assert_false(allowed4(c, bad4[i]));
	assert_true(allowed6("2606:4700::1111"));
	assert_true(allowed6("2001:4860:4860::8888"));
	/* Beside the local classes, every address that carries an IPv4 one (NAT64, 6to4, Teredo,
	 * whose relays would reach 169.254.169.254) and all outside 2000::/3. */
	const char *bad6[] = {"::1",
	                      "::",
	                      "fe80::1",
	                      "fc00::1",
	                      "fd00:ec2::254",
	                      "::ffff:127.0.0.1",
	                      "::ffff:10.0.0.1",
	                      "ff02::1",
	                      "64:ff9b::a9fe:a9fe",
	                      "64:ff9b:1::a9fe:a9fe",
	                      "2002:a9fe:a9fe::1",
	                      "2001:0:4136:e378:8000:63bf:3fff:fdd2",
	                      "2001:db8::1",
	                      "100::1",
	                      "4000::1"};
	for (size_t i = 0; i < sizeof bad6 / sizeof *bad6; i++)
		assert_false(allowed6(bad6[i]));
	free(c);
}

static void expect_bad(const char *text, const char *msg)
{
	struct rb_error err = {0};
	struct rb_gwconf *c = load(text, &err);
	assert_null(c);
	if (!strstr(err.msg, msg))
		fail_msg("error `%s` lacks `%s`", err.msg, msg);
}

static void test_config_strict(void **state)
{
	expect_bad("{\"connector\": {}}", "connector: unknown key");
	expect_bad(
	    "{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"env\": \"X\"}, \"inject\": \"bearer\","
	    " \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"]}], \"x\": 1}}}",
	    "connectors.a.x: unknown key");
	expect_bad(
	    "{\"connectors\": {\"a\": {\"url\": \"ftp://h\", \"credential\": {\"env\": \"X\"}, \"inject\": \"bearer\","
	    " \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"]}]}}}",
	    "connectors.a.url");
	expect_bad("{\"connectors\": {\"a\": {\"url\": \"http://u:p@h\", \"credential\": {\"env\": \"X\"}, \"inject\": "
	           "\"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"]}]}}}",
	           "connectors.a.url");
	expect_bad(
	    "{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"env\": \"X\", \"file\": \"/f\"}, "
	    "\"inject\": \"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"]}]}}}",
	    "connectors.a.credential: exactly one");
	expect_bad("{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"file\": \"rel\"}, \"inject\": "
	           "\"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"]}]}}}",
	           "connectors.a.credential.file");
	expect_bad("{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"env\": \"X\"}, \"inject\": "
	           "{\"header\": \"Host\"}, \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"]}]}}}",
	           "connectors.a.inject.header");
	expect_bad("{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"env\": \"X\"}, \"inject\": "
	           "\"digest\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/\"]}]}}}",
	           "connectors.a.inject: expected");
	expect_bad("{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"env\": \"X\"}, \"inject\": "
	           "\"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/a/../b\"]}]}}}",
	           "connectors.a.routes[0].paths");
	expect_bad("{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"env\": \"X\"}, \"inject\": "
	           "\"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/a*\"]}]}}}",
	           "'*' stands for a whole segment");
	expect_bad("{\"connectors\": {\"a\": {\"url\": \"http://h\", \"credential\": {\"env\": \"X\"}, \"inject\": "
	           "\"bearer\"}}}",
	           "connectors.a.routes: missing");
	expect_bad("{\"connectors\": {\"A/b\": {}}}", "connectors.A/b: a connector name");
	expect_bad("{\"private_upstreams\": [\"localhost\"]}", "private_upstreams");
	expect_bad("{\"connectors\": {}, \"connectors\": {}}", "duplicate");
	/* control: the same shapes, valid */
	struct rb_error err = {0};
	struct rb_gwconf *c = load(CONF, &err);
	assert_non_null(c);
	assert_int_equal(c->n_connectors, 2);
	assert_int_equal(c->n_private, 1);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decide_connector), cmocka_unit_test(test_route_per_tenant_agent),
	    cmocka_unit_test(test_decide_proxy),     cmocka_unit_test(test_addresses),
	    cmocka_unit_test(test_config_strict),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* gateway/sse.c, gateway/mcp.c's tool filter and the MCP door of gateway/decide.c: events
 * rewritten in any split of the stream, bounded; tools/list results filtered (batches too);
 * the door's refusals (server, grant, tool) each beside an allowed control; the run's session
 * table; the config's mcp block parsed strictly. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/config.h"
#include "gateway/decide.h"
#include "gateway/mcp.h"
#include "gateway/sse.h"

/* ---- the event-stream rewriter ---------------------------------------------------------- */

/* The test's callback: data "drop" is dropped, "bad" fails, other data is upper-cased. */
static int upcase(void *cls, const char *data, size_t len, struct rb_buf_out *out, enum rb_sse_verdict *v, char *why,
                  size_t wn)
{
	unsigned *calls = cls;
	(*calls)++;
	if (len == 4 && !memcmp(data, "drop", 4)) {
		*v = RB_SSE_DROP;
		return 0;
	}
	if (len == 3 && !memcmp(data, "bad", 3)) {
		snprintf(why, wn, "bad event");
		return -1;
	}
	for (size_t i = 0; i < len; i++) {
		char ch = data[i] >= 'a' && data[i] <= 'z' ? (char)(data[i] - 32) : data[i];
		assert_int_equal(rb_sse_append(out, &ch, 1), 0);
	}
	*v = RB_SSE_REPLACE;
	return 0;
}

/* in fed in chunks of step bytes (0: whole); the output, NUL-terminated (caller frees). */
static char *run(const char *in, size_t len, size_t step, size_t max, int *rc, unsigned *calls)
{
	struct rb_sse *s = rb_sse_new(max, upcase, calls, NULL);
	assert_non_null(s);
	struct rb_buf_out out = {0};
	char why[200] = "";
	*rc = 0;
	for (size_t off = 0; off < len && *rc == 0;) {
		size_t n = step && len - off > step ? step : len - off;
		*rc = rb_sse_feed(s, in + off, n, &out, why, sizeof why);
		off += n;
	}
	if (*rc == 0)
		*rc = rb_sse_finish(s, &out, why, sizeof why);
	rb_sse_free(s);
	if (!out.data)
		out.data = strdup("");
	return out.data;
}

static void test_sse_rewrite(void **state)
{
	/* LF, CRLF and CR endings, a comment, an id, a two-line data, a dropped event with an id,
	 * a priming event without data, a BOM; the last event unfinished. */
	static const char in[] = "\xef\xbb\xbf: comment\nid: 1\nevent: message\ndata: abc\n\n"
	                         "data: two\r\ndata: lines\r\n\r\n"
	                         "id: 2\rdata: drop\r\r"
	                         "id: 3\n\n"
	                         "data: drop\n\n"
	                         "data:nospace\n\n"
	                         "data: unfinished\n";
	static const char want[] = "id: 1\nevent: message\ndata: ABC\n\n"
	                           "data: TWO\ndata: LINES\n\n"
	                           "id: 2\n\n"
	                           "id: 3\n\n"
	                           "data: NOSPACE\n\n";
	/* Every split gives the same output: the parser keeps partial lines, CRLFs and events. */
	for (size_t step = 0; step <= 9; step++) {
		int rc;
		unsigned calls = 0;
		char *got = run(in, sizeof in - 1, step, 0, &rc, &calls);
		assert_int_equal(rc, 0);
		assert_string_equal(got, want);
		assert_int_equal(calls, 5); /* the unfinished and the data-less events are not judged */
		free(got);
	}
	/* control: an event the callback fails ends the stream with its reason */
	int rc;
	unsigned calls = 0;
	char *got = run("data: ok\n\ndata: bad\n\ndata: after\n\n", 36, 5, 0, &rc, &calls);
	assert_int_equal(rc, -1);
	assert_string_equal(got, "data: OK\n\n");
	free(got);
}

static void test_sse_fields_scrubbed(void **state)
{
	/* A server echoing a credential in an event's id, its event name or a field of its own: the
	 * id and event are written scrubbed, the unknown field not at all; the data is the callback's. */
	static const char secret[] = "rbx-cred-Xq3bT9wLm2Kp7Rz4Nv8H";
	const char *const secrets[] = {secret};
	struct rb_scrubber *sc = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new(secrets, 1, &sc, &err), 0);
	struct rb_sse *s = rb_sse_new(0, upcase, &(unsigned){0}, sc);
	char in[512], why[200] = "";
	int n = snprintf(in, sizeof in, "id: Bearer %s\nevent: %s\nx-note: %s\nretry: 100\ndata: hi\n\n", secret,
	                 secret, secret);
	struct rb_buf_out out = {0};
	assert_int_equal(rb_sse_feed(s, in, (size_t)n, &out, why, sizeof why), 0);
	assert_non_null(out.data);
	assert_null(strstr(out.data, secret));
	assert_null(strstr(out.data, "x-note"));
	assert_non_null(strstr(out.data, "id: Bearer [REDACTED:"));
	assert_non_null(strstr(out.data, "\nevent: [REDACTED:"));
	assert_non_null(strstr(out.data, "\nretry: 100\ndata: HI\n\n"));
	free(out.data);
	rb_sse_free(s);
	rb_scrub_free(sc);
}

static void test_sse_bound(void **state)
{
	/* An event over the bound fails, however it is split; one at the bound passes. */
	char big[200];
	memset(big, 'x', sizeof big);
	memcpy(big, "data: ", 6);
	for (size_t step = 1; step <= 64; step *= 4) {
		int rc;
		unsigned calls = 0;
		char *got = run(big, sizeof big, step, 100, &rc, &calls);
		assert_int_equal(rc, -1);
		assert_int_equal(calls, 0);
		free(got);
	}
	char ok_ev[100];
	memset(ok_ev, 'y', sizeof ok_ev);
	memcpy(ok_ev, "data: ", 6);
	memcpy(ok_ev + sizeof ok_ev - 2, "\n\n", 2);
	int rc;
	unsigned calls = 0;
	char *got = run(ok_ev, sizeof ok_ev, 7, 100, &rc, &calls);
	assert_int_equal(rc, 0);
	assert_int_equal(calls, 1);
	free(got);
}

/* ---- the tool filter and the door's decision -------------------------------------------- */

static const char CONF[] =
    "{\"mcp\": {\"files\": {\"url\": \"http://127.0.0.1:9/mcp\", \"credential\": {\"env\": \"K\"},"
    " \"inject\": \"bearer\", \"tools\": [\"echo\", \"read_*\"]},"
    " \"other\": {\"url\": \"http://127.0.0.1:9/mcp\", \"credential\": {\"env\": \"K\"},"
    " \"inject\": {\"header\": \"X-Key\"}, \"tools\": [\"*\"]}},"
    " \"connectors\": {\"files\": {\"url\": \"http://127.0.0.1:9\", \"credential\": {\"env\": \"K\"},"
    " \"inject\": \"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/*\"]}]}}}";

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

static char *filtered(const struct rb_gw_connector *s, const struct rb_gw_mcp_grant *g, const char *msg,
                      unsigned *removed, unsigned *kept)
{
	json_error_t jerr;
	json_t *m = json_loads(msg, 0, &jerr);
	assert_non_null(m);
	*kept = 0;
	*removed = rb_gw_mcp_filter_tools(s, g, m, kept);
	char *out = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	return out;
}

static void test_filter_tools(void **state)
{
	struct rb_error err = {0};
	struct rb_gwconf *c = load(CONF, &err);
	assert_non_null(c);
	const struct rb_gw_connector *s = rb_gwconf_find_mcp(c, "files");
	assert_non_null(s);
	unsigned removed, kept;
	char *out =
	    filtered(s, NULL,
	             "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"echo\"},{\"name\":\"rm\"},"
	             "{\"name\":\"read_file\"},{\"title\":\"no name\"},{\"name\":7},{\"name\":\"read\"}],"
	             "\"nextCursor\":\"c\"}}",
	             &removed, &kept);
	assert_string_equal(out, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"echo\"},"
	                         "{\"name\":\"read_file\"}],\"nextCursor\":\"c\"}}");
	assert_int_equal(removed, 4);
	assert_int_equal(kept, 2);
	free(out);
	/* A batch: each message; a request (it has a method) and other results are left alone. */
	out = filtered(s, NULL,
	               "[{\"id\":1,\"result\":{\"tools\":[{\"name\":\"rm\"}]}},"
	               "{\"id\":2,\"method\":\"x\",\"result\":{\"tools\":[{\"name\":\"rm\"}]}},"
	               "{\"id\":3,\"result\":{\"content\":[{\"name\":\"rm\"}]}}]",
	               &removed, &kept);
	assert_string_equal(out,
	                    "[{\"id\":1,\"result\":{\"tools\":[]}},{\"id\":2,\"method\":\"x\",\"result\":{\"tools\":"
	                    "[{\"name\":\"rm\"}]}},{\"id\":3,\"result\":{\"content\":[{\"name\":\"rm\"}]}}]");
	assert_int_equal(removed, 1);
	free(out);
	/* The policy narrows within the config's list, never beyond it. */
	const char *narrow[] = {"read_*", "rm"};
	struct rb_gw_mcp_grant g = {.name = "files", .tools = narrow, .n_tools = 2};
	out = filtered(
	    s, &g, "{\"id\":1,\"result\":{\"tools\":[{\"name\":\"echo\"},{\"name\":\"rm\"},{\"name\":\"read_x\"}]}}",
	    &removed, &kept);
	assert_string_equal(out, "{\"id\":1,\"result\":{\"tools\":[{\"name\":\"read_x\"}]}}");
	free(out);
	struct rb_gw_mcp_grant none = {.name = "files", .tools = narrow, .n_tools = 0};
	assert_false(rb_gw_mcp_tool_allowed(s, &none, "echo"));
	assert_true(rb_gw_mcp_tool_allowed(s, NULL, "echo"));
	assert_false(rb_gw_mcp_tool_allowed(s, NULL, ""));
	assert_true(rb_gw_mcp_tool_allowed(rb_gwconf_find_mcp(c, "other"), NULL, "anything"));
	free(c);
}

static unsigned mcp_decide(const struct rb_gwconf *c, const char *name, const char *method, const char *path,
                           const char *tool, struct rb_gw_verdict *v)
{
	struct rb_gw_mcp_grant grants[] = {{.name = "files"}};
	struct rb_gw_request rq = {.door = RB_GW_DOOR_MCP,
	                           .connector = name,
	                           .method = method,
	                           .raw_path = path,
	                           .conf = c,
	                           .mcp_grants = grants,
	                           .n_mcp_grants = 1,
	                           .tool = tool};
	rb_gw_decide(&rq, v);
	return v->status;
}

static void test_decide_mcp(void **state)
{
	struct rb_error err = {0};
	struct rb_gwconf *c = load(CONF, &err);
	assert_non_null(c);
	struct rb_gw_verdict v;
	assert_int_equal(mcp_decide(c, "files", "POST", "", NULL, &v), 0); /* control */
	assert_ptr_equal(v.conn, rb_gwconf_find_mcp(c, "files"));
	assert_int_equal(mcp_decide(c, "files", "POST", "", "echo", &v), 0);
	assert_int_equal(mcp_decide(c, "files", "GET", "", NULL, &v), 0);
	assert_int_equal(mcp_decide(c, "files", "DELETE", "", NULL, &v), 0);
	assert_int_equal(mcp_decide(c, "files", "POST", "", "rm", &v), 403);
	assert_string_equal(v.rule, "mcp.tools");
	assert_int_equal(mcp_decide(c, "other", "POST", "", NULL, &v), 403);
	assert_string_equal(v.rule, "network.mcp");
	assert_int_equal(mcp_decide(c, "nope", "POST", "", NULL, &v), 404);
	assert_string_equal(v.rule, "mcp");
	/* The default route: the URL itself, three methods; a connector of the same name is not
	 * the MCP server. */
	assert_int_equal(mcp_decide(c, "files", "PUT", "", NULL, &v), 403);
	assert_string_equal(v.rule, "route");
	assert_int_equal(mcp_decide(c, "files", "POST", "/admin", NULL, &v), 403);
	assert_int_equal(mcp_decide(c, "files", "POST", "/%2e%2e", NULL, &v), 403);
	assert_string_equal(v.rule, "path");
	free(c);
}

static void test_sessions(void **state)
{
	struct rb_gw_mcp_sessions *t = rb_gw_mcp_sessions_new();
	assert_non_null(t);
	char first[40], again[40], other[40], up[256];
	assert_true(rb_gw_mcp_session_map(t, "files", "U-0", first, sizeof first));
	assert_int_equal(strncmp(first, "mcp-", 4), 0);
	assert_int_equal(strlen(first), 36);
	assert_true(rb_gw_mcp_session_map(t, "files", "U-0", again, sizeof again));
	assert_string_equal(first, again); /* one local id per upstream session */
	assert_true(rb_gw_mcp_session_map(t, "other", "U-0", other, sizeof other));
	assert_string_not_equal(first, other); /* per server */
	assert_true(rb_gw_mcp_session_find(t, "files", first, up, sizeof up));
	assert_string_equal(up, "U-0");
	assert_false(rb_gw_mcp_session_find(t, "other", first, up, sizeof up)); /* another server's name */
	assert_false(rb_gw_mcp_session_find(t, "files", "U-0", up, sizeof up)); /* the upstream's own id */
	rb_gw_mcp_session_forget(t, "other", other);
	assert_false(rb_gw_mcp_session_find(t, "other", other, up, sizeof up));
	/* Full: the oldest goes, the newest stays. */
	char last[40];
	for (unsigned i = 1; i < RB_GW_MCP_SESSIONS + 1; i++) {
		char u[16];
		snprintf(u, sizeof u, "U-%u", i);
		assert_true(rb_gw_mcp_session_map(t, "files", u, last, sizeof last));
	}
	assert_false(rb_gw_mcp_session_find(t, "files", first, up, sizeof up));
	assert_true(rb_gw_mcp_session_find(t, "files", last, up, sizeof up));
	char want[16];
	snprintf(want, sizeof want, "U-%u", RB_GW_MCP_SESSIONS);
	assert_string_equal(up, want);
	rb_gw_mcp_sessions_free(t);
}

static void expect_bad(const char *text, const char *needle)
{
	struct rb_error err = {0};
	struct rb_gwconf *c = load(text, &err);
	if (c)
		fail_msg("accepted: %s", text);
	if (!strstr(err.msg, needle))
		fail_msg("`%s` lacks `%s`", err.msg, needle);
}

static void test_config_mcp(void **state)
{
	expect_bad(
	    "{\"mcp\": {\"a\": {\"url\": \"http://h/mcp\", \"credential\": {\"env\": \"X\"}, \"inject\": \"bearer\"}}}",
	    "mcp.a.tools: missing");
	expect_bad(
	    "{\"mcp\": {\"a\": {\"url\": \"http://h/mcp\", \"credential\": {\"env\": \"X\"}, \"inject\": \"bearer\", "
	    "\"tools\": [\"a*b\"]}}}",
	    "mcp.a.tools");
	expect_bad(
	    "{\"mcp\": {\"a\": {\"url\": \"http://h/mcp\", \"credential\": {\"env\": \"X\"}, \"inject\": \"bearer\", "
	    "\"tools\": []}}}",
	    "mcp.a.tools");
	expect_bad(
	    "{\"mcp\": {\"a\": {\"url\": \"http://h/mcp\", \"credential\": {\"env\": \"X\"}, \"inject\": \"bearer\", "
	    "\"tools\": [\"x\"], \"extra\": 1}}}",
	    "mcp.a");
	expect_bad("{\"mcp\": {\"B\": {}}}", "mcp.B: a server name");
	expect_bad("{\"mcp\": []}", "mcp");
	/* control: with routes given, they are the server's */
	struct rb_error err = {0};
	struct rb_gwconf *c = load(
	    "{\"mcp\": {\"a\": {\"url\": \"http://h/mcp\", \"credential\": {\"env\": \"X\"}, \"inject\": \"bearer\", "
	    "\"tools\": [\"x\"], \"routes\": [{\"methods\": [\"POST\"], \"paths\": [\"/\"]}]}}}",
	    &err);
	assert_non_null(c);
	assert_int_equal(c->n_mcp, 1);
	assert_int_equal(c->mcp[0].n_routes, 1);
	assert_int_equal(c->mcp[0].routes[0].n_methods, 1);
	assert_int_equal(c->n_connectors, 0);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sse_rewrite), cmocka_unit_test(test_sse_fields_scrubbed),
	    cmocka_unit_test(test_sse_bound),   cmocka_unit_test(test_filter_tools),
	    cmocka_unit_test(test_decide_mcp),  cmocka_unit_test(test_sessions),
	    cmocka_unit_test(test_config_mcp),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

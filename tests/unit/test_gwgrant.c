/* The gateway daemon's wire pieces: a run's grant parsed for the per-run gateway (descriptor
 * numbers) and for the daemon (indexes into the passed descriptors, out-of-range refused), and
 * the daemon's socket path rule. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <string.h>
#include <unistd.h>

#include "common/gwsock.h"
#include "gateway/grant.h"

static json_t *grant(const char *extra)
{
	char text[1024];
	snprintf(text, sizeof text,
	         "{\"run_id\": \"r1\", \"key\": \"00ff10\", \"connectors\": [\"a\", \"b\"], \"proxy\": [\"x:443\"],"
	         " \"approval\": [{\"connector\": \"a\", \"methods\": [\"POST\"], \"timeout_s\": 9}]%s}",
	         extra);
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	assert_non_null(j);
	return j;
}

static void test_per_run_fds(void **state)
{
	json_t *j = grant(", \"listen_fds\": [4, 5], \"dns_fd\": 7, \"rate\": 3");
	struct rb_gw_grant g;
	struct rb_error err;
	assert_int_equal(rb_gw_grant_parse(j, NULL, 0, &g, &err), 0);
	assert_int_equal(g.gc.n_listen_fds, 2);
	assert_int_equal(g.gc.listen_fds[0], 4);
	assert_int_equal(g.gc.listen_fds[1], 5);
	assert_true(g.gc.serve_dns);
	assert_int_equal(g.gc.dns_fd, 7);
	assert_int_equal(g.gc.keylen, 3);
	assert_int_equal(g.gc.key[1], 0xff);
	assert_string_equal(g.gc.run_id, "r1");
	assert_int_equal(g.gc.n_grants, 2);
	assert_string_equal(g.gc.grants[1], "b");
	assert_int_equal(g.gc.n_proxy, 1);
	assert_int_equal(g.gc.n_approvals, 1);
	assert_int_equal(g.gc.approvals[0].timeout_s, 9);
	assert_string_equal(g.gc.approvals[0].methods[0], "POST");
	assert_int_equal(g.gc.rate, 3);
	rb_gw_grant_free(&g);
	json_decref(j);
}

static void test_daemon_indexes(void **state)
{
	int passed[] = {40, 41, 42};
	json_t *j = grant(", \"listen_fds\": [0, 1], \"dns_fd\": 2");
	struct rb_gw_grant g;
	struct rb_error err;
	assert_int_equal(rb_gw_grant_parse(j, passed, 3, &g, &err), 0);
	assert_int_equal(g.gc.listen_fds[0], 40);
	assert_int_equal(g.gc.listen_fds[1], 41);
	assert_int_equal(g.gc.dns_fd, 42);
	rb_gw_grant_free(&g);
	json_decref(j);
	/* An index past what was passed names no descriptor of the run's: refused (control: above). */
	j = grant(", \"listen_fds\": [0, 3]");
	assert_int_equal(rb_gw_grant_parse(j, passed, 3, &g, &err), -1);
	assert_non_null(strstr(err.msg, "listen_fds[1]"));
	json_decref(j);
	j = grant(", \"listen_fds\": [0], \"dns_fd\": 5");
	assert_int_equal(rb_gw_grant_parse(j, passed, 3, &g, &err), -1);
	assert_non_null(strstr(err.msg, "dns_fd"));
	json_decref(j);
	j = grant(", \"listen_fds\": [-1]");
	assert_int_equal(rb_gw_grant_parse(j, passed, 3, &g, &err), -1);
	json_decref(j);
	/* No DNS socket named: none served. */
	j = grant(", \"listen_fds\": [2]");
	assert_int_equal(rb_gw_grant_parse(j, passed, 3, &g, &err), 0);
	assert_false(g.gc.serve_dns);
	rb_gw_grant_free(&g);
	json_decref(j);
}

static void test_bad_grants(void **state)
{
	struct rb_gw_grant g;
	struct rb_error err;
	json_error_t jerr;
	const char *bad[] = {
	    "{\"key\": \"00\", \"listen_fds\": [4]}",                                /* no run id */
	    "{\"run_id\": \"r\", \"key\": \"0\", \"listen_fds\": [4]}",              /* odd hex */
	    "{\"run_id\": \"r\", \"key\": \"zz\", \"listen_fds\": [4]}",             /* not hex */
	    "{\"run_id\": \"r\", \"key\": \"00\", \"listen_fds\": []}",              /* no listener */
	    "{\"run_id\": \"r\", \"key\": \"00\", \"listen_fds\": [\"4\"]}",         /* not a number */
	    "{\"run_id\": \"r\", \"key\": \"00\", \"listen_fds\": [4, 5, 6, 7, 8]}", /* too many */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		json_t *j = json_loads(bad[i], 0, &jerr);
		assert_non_null(j);
		assert_int_equal(rb_gw_grant_parse(j, NULL, 0, &g, &err), -1);
		json_decref(j);
	}
	json_t *ok = json_loads("{\"run_id\": \"r\", \"key\": \"00\", \"listen_fds\": [4]}", 0, &jerr);
	assert_int_equal(rb_gw_grant_parse(ok, NULL, 0, &g, &err), 0); /* the control */
	rb_gw_grant_free(&g);
	json_decref(ok);
}

static void test_socket_path(void **state)
{
	char buf[256];
	char *set[] = {"RUNBOX_GATEWAY_SOCKET=/tmp/x.sock", NULL};
	char *empty[] = {"RUNBOX_GATEWAY_SOCKET=", "XDG_RUNTIME_DIR=/run/user/7", NULL};
	char *xdg[] = {"XDG_RUNTIME_DIR=/run/user/7", NULL};
	char *none[] = {NULL};
	struct rb_host h = {.env = set};
	assert_string_equal(rb_gwsock_path(&h, buf, sizeof buf), "/tmp/x.sock");
	h.env = empty;
	assert_null(rb_gwsock_path(&h, buf, sizeof buf)); /* set empty: no daemon */
	h.env = xdg;
	const char *p = rb_gwsock_path(&h, buf, sizeof buf);
	assert_string_equal(p, geteuid() == 0 ? "/run/runbox/gateway.sock" : "/run/user/7/runbox/gateway.sock");
	h.env = none;
	p = rb_gwsock_path(&h, buf, sizeof buf);
	if (geteuid() == 0)
		assert_string_equal(p, "/run/runbox/gateway.sock");
	else
		assert_null(p);
	h.env = set;
	assert_null(rb_gwsock_path(&h, buf, 5)); /* too long for buf */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_per_run_fds),
	    cmocka_unit_test(test_daemon_indexes),
	    cmocka_unit_test(test_bad_grants),
	    cmocka_unit_test(test_socket_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

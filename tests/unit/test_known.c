/* serve/known.c: the session ids runbox serve answers for without the ledger: those the ledger
 * recorded before the daemon started (data.session of a run_start, a label with the same text
 * is not one), and those added since, each of its own tenant. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "ledger/ledger.h"
#include "serve/known.h"

#define SA "0123456789abcdef0123456789abcdef"
#define SB "fedcba9876543210fedcba9876543210"

static void ledger_sessions_are_known_to_their_tenant(void **state)
{
	char top[] = "/tmp/rbx-known-ut.XXXXXX";
	assert_non_null(mkdtemp(top));
	char dir[64];
	snprintf(dir, sizeof dir, "%s/state", top);
	struct rb_ledger *l = NULL;
	struct rb_error err;
	assert_int_equal(rb_ledger_open(dir, &l, &err), 0);
	json_t *d = json_pack("{s:s}", "session", SA);
	assert_int_equal(rb_ledger_append(l, "run-a", "ta", "ag", "run_start", d, &err), 0);
	json_decref(d);
	/* Not a session: the id only in a label. */
	d = json_pack("{s:{s:s}}", "labels", "x", "\"session\":\"" SB "\"");
	assert_int_equal(rb_ledger_append(l, "run-b", "ta", "ag", "run_start", d, &err), 0);
	json_decref(d);
	rb_ledger_close(l);

	struct rb_serve_known *k = NULL;
	assert_int_equal(rb_serve_known_load(dir, &k, &err), 0);
	assert_true(rb_serve_known_has(k, SA, "ta"));
	assert_true(rb_serve_known_has(k, SA, NULL));
	assert_false(rb_serve_known_has(k, SA, "tb")); /* another tenant's is unknown to it */
	assert_false(rb_serve_known_has(k, SB, NULL));
	assert_false(rb_serve_known_has(k, "nope", NULL));
	/* One made since. */
	assert_int_equal(rb_serve_known_add(k, SB, "tb", &err), 0);
	assert_true(rb_serve_known_has(k, SB, "tb"));
	assert_false(rb_serve_known_has(k, SB, "ta"));
	rb_serve_known_free(k);
	rb_rm_rf(top, &err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(ledger_sessions_are_known_to_their_tenant),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* runtime/run/gwproc.c: the step's count of its gateway calls: completions counted, sent
 * records not; a sent record no completion of its id follows is unanswered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>

#include "runtime/run/gwproc.h"

static void test_answered(void **state)
{
	json_t *calls =
	    json_pack("[{s:s, s:s, s:s}, {s:s, s:s, s:i}, {s:s, s:s, s:s}, {s:s, s:s}]", "phase", "sent", "id",
	              "call-a", "door", "connector", "id", "call-a", "door", "connector", "status", 200, "phase",
	              "sent", "id", "call-b", "door", "connector", "door", "dns", "connector", "example.invalid");
	size_t unanswered = 99;
	assert_int_equal(rb_gwproc_answered(calls, &unanswered), 2); /* call-a's completion and the DNS record */
	assert_int_equal(unanswered, 1);                             /* call-b went out and never came back */
	/* control: its completion arrives, and nothing is unanswered */
	json_array_append_new(calls, json_pack("{s:s, s:s, s:i}", "id", "call-b", "door", "connector", "status", 502));
	assert_int_equal(rb_gwproc_answered(calls, &unanswered), 3);
	assert_int_equal(unanswered, 0);
	json_decref(calls);
	json_t *none = json_array();
	assert_int_equal(rb_gwproc_answered(none, &unanswered), 0);
	assert_int_equal(unanswered, 0);
	json_decref(none);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_answered),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* common/jsoncheck.c: a value that is not there (a missing key, no body) is described as
 * "nothing", never read through; a present one as itself (the control). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <string.h>

#include "common/error.h"
#include "common/jsoncheck.h"

static void missing_value_is_nothing(void **state)
{
	(void)state;
	struct rb_error err = {0};
	struct rb_jsonck ck = {"request", "body", &err};
	assert_int_equal(rb_jsonck_expected(&ck, "$", "an object", NULL), -1);
	assert_string_equal(err.msg, "request body: $: expected an object, got nothing");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_INPUT);
}

static void present_value_is_described(void **state)
{
	(void)state;
	struct rb_error err = {0};
	struct rb_jsonck ck = {"request", "body", &err};
	json_t *v = json_integer(5);
	assert_int_equal(rb_jsonck_expected(&ck, "$.port", "an integer", v), -1);
	assert_string_equal(err.msg, "request body: $.port: expected an integer, got 5");
	json_decref(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(missing_value_is_nothing),
	    cmocka_unit_test(present_value_is_described),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

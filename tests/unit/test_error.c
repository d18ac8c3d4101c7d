/* common/error.c: a message that fits is whole; one that does not ends in " [truncated]", from
 * rb_error_set and rb_error_prefix alike; a kind said is kept, one not said is read from errno,
 * and each kind maps onto its HTTP status. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/error.h"

static bool ends_with(const char *s, const char *tail)
{
	size_t a = strlen(s), b = strlen(tail);
	return a >= b && !strcmp(s + a - b, tail);
}

static void truncation_is_marked(void **state)
{
	(void)state;
	struct rb_error err = {0};
	rb_error_set(&err, ENOENT, "open `%s`", "/short");
	assert_string_equal(err.msg, "open `/short`: No such file or directory");
	char longpath[2 * RB_ERROR_MAX];
	memset(longpath, 'a', sizeof longpath - 1);
	longpath[sizeof longpath - 1] = '\0';
	rb_error_set(&err, ENOENT, "open `%s`", longpath);
	assert_int_equal(strlen(err.msg), RB_ERROR_MAX - 1);
	assert_true(ends_with(err.msg, " [truncated]"));
	rb_error_set(&err, 0, "%.400s", longpath);
	assert_false(ends_with(err.msg, " [truncated]")); /* control: 400 bytes fit */
	rb_error_prefix(&err, "policy %.200s", longpath);
	assert_true(ends_with(err.msg, " [truncated]"));
	assert_int_equal(strncmp(err.msg, "policy aaa", 10), 0);
}

static void kinds(void **state)
{
	(void)state;
	struct rb_error err = {0};
	rb_error_set(&err, 0, "manifest x: steps[0]: expected a string");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_INPUT);
	rb_error_set(&err, ENOENT, "image `x`");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_NOT_FOUND);
	rb_error_set(&err, EBUSY, "image `x`: live run");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_CONFLICT);
	rb_error_set(&err, ENOSYS, "clone3");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_HOST);
	rb_error_set(&err, EIO, "read");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_INTERNAL);
	rb_error_setk(&err, RB_ERR_FORBIDDEN, 0, "policy `strict` refuses it");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_FORBIDDEN);
	rb_error_prefix(&err, "run");
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_FORBIDDEN);
	assert_int_equal(rb_error_http_status(RB_ERR_INPUT), 400);
	assert_int_equal(rb_error_http_status(RB_ERR_NOT_FOUND), 404);
	assert_int_equal(rb_error_http_status(RB_ERR_FORBIDDEN), 403);
	assert_int_equal(rb_error_http_status(RB_ERR_CONFLICT), 409);
	assert_int_equal(rb_error_http_status(RB_ERR_HOST), 503);
	assert_int_equal(rb_error_http_status(RB_ERR_INTERNAL), 500);
	assert_string_equal(rb_error_kind_name(RB_ERR_CONFLICT), "conflict");
	rb_error_clear(&err);
	assert_int_equal(err.kind, RB_ERR_UNSET);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(truncation_is_marked),
	    cmocka_unit_test(kinds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

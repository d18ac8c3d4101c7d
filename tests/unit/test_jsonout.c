/* common/jsonout.c: printed JSON carries DEL and the C1 controls escaped, and decodes to the
 * same value; other text (é, €, U+00A0) is printed as it is. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/jsonout.h"

static char *printed(json_t *v)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(rb_json_print(f, v, JSON_COMPACT), 0);
	fclose(f);
	return buf;
}

static void test_controls_escaped(void **state)
{
	json_t *v = json_pack("{s:s}", "out",
	                      "a\xc2\x85"
	                      "b\x7f"
	                      "c\xc2\x9b"
	                      "31m\x1b");
	char *text = printed(v);
	assert_string_equal(text, "{\"out\":\"a\\u0085b\\u007fc\\u009b31m\\u001B\"}\n");
	for (const char *p = text; *p; p++)
		assert_true((unsigned char)*p < 0x7f); /* nothing raw is left */
	json_t *back = json_loads(text, 0, NULL);
	assert_true(json_equal(back, v)); /* the same value */
	json_decref(back);
	json_decref(v);
	free(text);
}

static void test_text_unchanged(void **state)
{
	/* control: UTF-8 text, U+00A0 (C2 A0, just past the C1 range) and U+0100 pass as they are */
	json_t *v = json_pack("[s]", "na\xc3\xafve \xc3\xa9 \xe2\x82\xac \xc2\xa0\xc2\xa9 \xc4\x80");
	char *text = printed(v);
	assert_string_equal(text, "[\"na\xc3\xafve \xc3\xa9 \xe2\x82\xac \xc2\xa0\xc2\xa9 \xc4\x80\"]\n");
	json_decref(v);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_controls_escaped),
	    cmocka_unit_test(test_text_unchanged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

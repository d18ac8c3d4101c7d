/* common/ttysafe.c: control bytes reach a terminal as visible text; \n, \t, \r, printable
 * ASCII and UTF-8 text (é, €) pass unchanged, also when a chunk ends inside a character; a
 * message line also escapes \n, \r and bytes that are not UTF-8. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "common/ttysafe.h"

static char *safe(struct rb_ttysafe *st, const char *in, size_t len, char *out)
{
	size_t n = rb_ttysafe(st, in, len, out);
	out[n] = '\0';
	return out;
}

static void test_controls_shown(void **state)
{
	struct rb_ttysafe st = {0};
	char out[RB_TTYSAFE_ROOM(64)];
	const char osc[] = "a\033]0;title\007b\033[2J\x7f\x01";
	assert_string_equal(safe(&st, osc, sizeof osc - 1, out), "a\\x1b]0;title\\x07b\\x1b[2J\\x7f\\x01");
	/* C1 CSI as UTF-8 (U+009B) */
	assert_string_equal(safe(&st,
	                         "x\xc2\x9b"
	                         "31m",
	                         6, out),
	                    "x\\u009b31m");
	/* control: text, \n, \t, \r and UTF-8 pass unchanged */
	const char text[] = "line\tone\r\nna\xc3\xafve \xe2\x82\xac \xc2\xa9\n";
	assert_string_equal(safe(&st, text, sizeof text - 1, out), text);
}

static void test_split_lead_byte(void **state)
{
	struct rb_ttysafe st = {0};
	char out[RB_TTYSAFE_ROOM(8)];
	assert_string_equal(safe(&st, "a\xc2", 2, out), "a");
	assert_string_equal(safe(&st, "\x9b", 1, out), "\\u009b");
	assert_string_equal(safe(&st, "\xc2", 1, out), "");
	assert_string_equal(safe(&st, "\xa9", 1, out), "\xc2\xa9");
	assert_string_equal(safe(&st, "\xc2", 1, out), "");
	size_t n = rb_ttysafe_end(&st, out);
	assert_int_equal(n, 1);
	assert_int_equal((unsigned char)out[0], 0xc2);
}

static void test_line_escapes(void **state)
{
	char out[256];
	/* a harvested file's name in a store error: ESC, OSC, BEL, a forged second line, CR */
	rb_ttysafe_line("harvest `a\033[31mred\033]0;t\007`\nrunbox: error: fake\rok", out, sizeof out);
	assert_string_equal(out, "harvest `a\\x1b[31mred\\x1b]0;t\\x07`\\x0arunbox: error: fake\\x0dok");
	/* C1 CSI as UTF-8, DEL, and bytes that are not UTF-8 (a lone C1 byte, a cut sequence,
	 * an overlong NUL, a surrogate) */
	rb_ttysafe_line("x\xc2\x9b"
	                "1m\x7f \x9b \xe2\x82 \xc0\x80 \xed\xa0\x80",
	                out, sizeof out);
	assert_string_equal(out, "x\\u009b1m\\x7f \\x9b \\xe2\\x82 \\xc0\\x80 \\xed\\xa0\\x80");
	/* control: text, \t and UTF-8 (é, €, U+00A0, an emoji) pass unchanged */
	const char text[] = "plain name\tcaf\xc3\xa9 \xe2\x82\xac \xc2\xa0 \xf0\x9f\x98\x80";
	assert_int_equal(rb_ttysafe_line(text, out, sizeof out), sizeof text - 1);
	assert_string_equal(out, text);
}

static void test_line_cut(void **state)
{
	char out[8];
	/* an escape or a character that does not fit is left out whole, never cut */
	assert_int_equal(rb_ttysafe_line("abcd\033", out, sizeof out), 4);
	assert_string_equal(out, "abcd");
	assert_int_equal(rb_ttysafe_line("abcdef\xc3\xa9", out, sizeof out), 6);
	assert_string_equal(out, "abcdef");
	assert_int_equal(rb_ttysafe_line("abc\033", out, sizeof out), 7);
	assert_string_equal(out, "abc\\x1b");
}

/* rb_ttysafe_fputs writes what rb_ttysafe_line makes of the whole text, whatever its length:
 * pieces never cut a UTF-8 character (é across a piece boundary stays é) nor let a control
 * byte through. */
static void fputs_long_text(void **state)
{
	(void)state;
	char in[2200];
	size_t n = 0;
	for (int i = 0; i < 500; i++)
		n += (size_t)sprintf(in + n, "\xc3\xa9");
	n += (size_t)sprintf(in + n, "\x1b[2J\r\n\x9b");
	for (int i = 0; i < 500; i++)
		in[n++] = (char)('a' + i % 26);
	in[n] = '\0';
	static char whole[4 * sizeof in], got[4 * sizeof in];
	rb_ttysafe_line(in, whole, sizeof whole);
	FILE *f = fmemopen(got, sizeof got, "w");
	assert_non_null(f);
	rb_ttysafe_fputs(f, in);
	fclose(f);
	assert_string_equal(got, whole);
	assert_null(strchr(got, '\x1b'));
	assert_non_null(strstr(got, "\xc3\xa9\\x1b[2J"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(fputs_long_text),      cmocka_unit_test(test_controls_shown),
	    cmocka_unit_test(test_split_lead_byte), cmocka_unit_test(test_line_escapes),
	    cmocka_unit_test(test_line_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* images/buildlog.c: mmdebstrap's --verbose output counted into progress (fetched after
 * "I: downloading packages" only, unpacked, M from apt's "newly installed"), its I:/W:/E: lines
 * passed on, the rest kept and said only when the build failed; lines split across chunks. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "images/buildlog.h"

struct seen {
	struct rb_progress_report last;
	char lines[64][128];
	unsigned n_lines, n_reports, n_final;
};

static void on(void *arg, const struct rb_progress_report *r)
{
	struct seen *s = arg;
	s->n_reports++;
	if (r->line) {
		if (s->n_lines < 64)
			snprintf(s->lines[s->n_lines++], 128, "%s", r->line);
		return;
	}
	s->last = *r;
	s->last.what = r->what; /* static strings */
	if (r->final)
		s->n_final++;
}

static const char log_text[] = "I: running apt-get update...\n"
                               "Get:3 copy:/repo ./ Packages [328 B]\n"
                               "I: downloading packages with apt...\n"
                               "0 upgraded, 3 newly installed, 0 to remove and 0 not upgraded.\n"
                               "Get:1 copy:/repo ./ a 1.0 [716 B]\n"
                               "Get:2 copy:/repo ./ b 1.0 [716 B]\n"
                               "Get:3 copy:/repo ./ c 1.0 [716 B]\n"
                               "I: installing essential packages...\n"
                               "Unpacking a (1.0) ...\n"
                               "W: a warning\n";

static void test_counts(void **state)
{
	struct seen s = {0};
	struct rb_progress p = {.fn = on, .arg = &s};
	static struct rb_buildlog b;
	rb_buildlog_init(&b, &p);
	/* One byte at a time: a line is whole however the pipe cut it. */
	for (size_t i = 0; i < sizeof log_text - 1; i++)
		rb_buildlog_feed(&b, log_text + i, 1);
	assert_int_equal(b.fetched, 3); /* the Get: of the update is no package */
	assert_int_equal(b.unpacked, 1);
	assert_int_equal(b.total, 3);
	assert_string_equal(s.last.what, "unpacked");
	assert_int_equal(s.last.done, 1);
	assert_int_equal(s.last.total, 3);
	assert_int_equal(s.last.items, 3);
	assert_int_equal(s.n_lines, 4);
	assert_string_equal(s.lines[0], "I: running apt-get update...");
	assert_string_equal(s.lines[3], "W: a warning");
	rb_buildlog_end(&b, false);
	assert_int_equal(s.n_final, 1);
	assert_int_equal(s.n_lines, 4); /* succeeded: apt's own lines stay unsaid */
}

static void test_failure_says_kept_lines(void **state)
{
	struct seen s = {0};
	struct rb_progress p = {.fn = on, .arg = &s};
	static struct rb_buildlog b;
	rb_buildlog_init(&b, &p);
	const char t[] = "I: downloading packages with apt...\nErr:1 copy:/repo a\n  Failed to stat\nno newline at end";
	rb_buildlog_feed(&b, t, sizeof t - 1);
	assert_int_equal(s.n_lines, 1);
	rb_buildlog_end(&b, true);
	assert_int_equal(s.n_lines, 4);
	assert_string_equal(s.lines[1], "Err:1 copy:/repo a");
	assert_string_equal(s.lines[3], "no newline at end");
	assert_int_equal(s.n_final, 1);
}

static void test_ring_keeps_the_last(void **state)
{
	struct seen s = {0};
	struct rb_progress p = {.fn = on, .arg = &s};
	static struct rb_buildlog b;
	rb_buildlog_init(&b, &p);
	char l[64];
	for (int i = 0; i < RB_BUILDLOG_KEEP + 5; i++) {
		int n = snprintf(l, sizeof l, "line %d\n", i);
		rb_buildlog_feed(&b, l, (size_t)n);
	}
	rb_buildlog_end(&b, true);
	assert_int_equal(s.n_lines, RB_BUILDLOG_KEEP);
	assert_string_equal(s.lines[0], "line 5");
	snprintf(l, sizeof l, "line %d", RB_BUILDLOG_KEEP + 4);
	assert_string_equal(s.lines[RB_BUILDLOG_KEEP - 1], l);
}

static void test_no_callback(void **state)
{
	static struct rb_buildlog b;
	rb_buildlog_init(&b, NULL);
	rb_buildlog_feed(&b, log_text, sizeof log_text - 1);
	rb_buildlog_end(&b, true); /* nothing to call: no crash */
	assert_int_equal(b.fetched, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_counts),
	    cmocka_unit_test(test_failure_says_kept_lines),
	    cmocka_unit_test(test_ring_keeps_the_last),
	    cmocka_unit_test(test_no_callback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

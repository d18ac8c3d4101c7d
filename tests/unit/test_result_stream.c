/* runtime/run/result_stream.c: a streamed result parses as the one object it stands for (head,
 * steps, tail; no steps too), and a reader that went away makes the stream stop, not the
 * process (SIGPIPE is taken, not delivered). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/run/result_stream.h"

static json_t *stream(unsigned n_steps)
{
	FILE *f = tmpfile();
	assert_non_null(f);
	struct rb_result_stream s;
	json_t *head = json_pack("{s:s, s:s}", "run_id", "r1", "tenant", "t");
	rb_result_stream_begin(&s, f, head);
	for (unsigned i = 0; i < n_steps; i++) {
		json_t *st = json_pack("{s:i, s:s}", "step", (int)i + 1, "stdout", "a\nb");
		rb_result_stream_step(&s, st);
		json_decref(st);
	}
	json_t *tail = json_pack("{s:s, s:i}", "result", "success", "exit", 0);
	rb_result_stream_end(&s, tail);
	assert_false(s.broken);
	json_decref(head);
	json_decref(tail);
	rewind(f);
	json_error_t jerr;
	json_t *o = json_loadf(f, 0, &jerr);
	fclose(f);
	if (!o)
		fail_msg("not JSON: %s", jerr.text);
	return o;
}

static void test_parses_as_one_object(void **state)
{
	(void)state;
	for (unsigned n = 0; n <= 3; n++) {
		json_t *o = stream(n);
		assert_string_equal(json_string_value(json_object_get(o, "run_id")), "r1");
		assert_string_equal(json_string_value(json_object_get(o, "result")), "success");
		json_t *steps = json_object_get(o, "steps");
		assert_int_equal(json_array_size(steps), n);
		if (n)
			assert_string_equal(json_string_value(json_object_get(json_array_get(steps, n - 1), "stdout")),
			                    "a\nb");
		json_decref(o);
	}
}

static void test_closed_reader_stops_the_stream(void **state)
{
	(void)state;
	int p[2];
	assert_int_equal(pipe(p), 0);
	close(p[0]); /* the reader went away */
	FILE *f = fdopen(p[1], "w");
	struct rb_result_stream s;
	json_t *o = json_pack("{s:s}", "run_id", "r1");
	rb_result_stream_begin(&s, f, o); /* SIGPIPE's default would end this test here */
	assert_true(s.broken);
	rb_result_stream_step(&s, o);
	rb_result_stream_end(&s, o);
	sigset_t pending;
	sigpending(&pending);
	assert_false(sigismember(&pending, SIGPIPE));
	json_decref(o);
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parses_as_one_object),
	    cmocka_unit_test(test_closed_reader_stops_the_stream),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* common/log.c: a logger is the caller's (level and sink), per thread: two threads with their
 * own loggers each get their own lines only, at their own level; without one, nothing below a
 * warning is written. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

struct capture {
	char text[8192];
	size_t len;
	unsigned lines;
	bool bad_len;
};

static void capture_sink(void *ctx, enum rb_log_level level, const char *line, size_t len)
{
	(void)level;
	struct capture *c = ctx;
	c->bad_len |= strlen(line) != len; /* (no cmocka assertion off the main thread) */
	c->len += (size_t)snprintf(c->text + c->len, sizeof c->text - c->len, "%s\n", line);
	c->lines++;
}

struct worker {
	const char *name;
	enum rb_log_level level;
	struct capture cap;
	bool started_without;
};

static void *log_thread(void *arg)
{
	struct worker *w = arg;
	struct rb_logger lg = {.level = w->level, .sink = capture_sink, .ctx = &w->cap};
	const struct rb_logger *old = rb_log_use(&lg);
	w->started_without = old == NULL; /* a new thread starts with none */
	for (int i = 0; i < 50; i++) {
		rb_warn("%s warn %d", w->name, i);
		rb_debug("%s debug %d", w->name, i);
	}
	rb_log_use(old);
	return NULL;
}

static void loggers_are_per_thread(void **state)
{
	(void)state;
	struct worker w[2] = {{.name = "alpha", .level = RB_LOG_DEBUG}, {.name = "beta", .level = RB_LOG_WARN}};
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, log_thread, &w[i]), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		assert_true(w[i].started_without);
		assert_false(w[i].cap.bad_len);
	}
	/* alpha asked for debug: both kinds; beta for warnings: no debug line. */
	assert_int_equal(w[0].cap.lines, 100);
	assert_int_equal(w[1].cap.lines, 50);
	assert_non_null(strstr(w[0].cap.text, "runbox: warning: alpha warn 0\n"));
	assert_non_null(strstr(w[0].cap.text, "alpha debug 49\n"));
	assert_null(strstr(w[1].cap.text, "debug"));
	assert_null(strstr(w[0].cap.text, "beta"));
	assert_null(strstr(w[1].cap.text, "alpha"));
}

static void explicit_logger_and_level(void **state)
{
	(void)state;
	struct capture cap = {0};
	struct rb_logger lg = {.level = RB_LOG_INFO, .sink = capture_sink, .ctx = &cap};
	rb_logf(&lg, RB_LOG_INFO, "shown %d", 1);
	rb_logf(&lg, RB_LOG_DEBUG, "not shown");
	assert_int_equal(cap.lines, 1);
	assert_string_equal(cap.text, "runbox: info: shown 1\n");
	/* A line with text from a sandbox stays one line, its controls shown escaped. */
	rb_logf(&lg, RB_LOG_ERROR, "name %s", "a\nb\x1b[2J");
	assert_int_equal(cap.lines, 2);
	assert_non_null(strstr(cap.text, "runbox: error: name a\\x0ab\\x1b[2J\n"));
	assert_int_equal(rb_log_level(), RB_LOG_WARN); /* none in use: the default */
	const struct rb_logger *old = rb_log_use(&lg);
	assert_int_equal(rb_log_level(), RB_LOG_INFO);
	rb_info("through the thread's");
	assert_int_equal(cap.lines, 3);
	rb_log_use(old);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(loggers_are_per_thread),
	    cmocka_unit_test(explicit_logger_and_level),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

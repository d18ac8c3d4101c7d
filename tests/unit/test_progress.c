/* cli/progress.c: on a terminal (a pty here) nothing for the first 0.2 s, then a bar redrawn
 * with \r and an erase-line at most 10 times a second, erased at the end for a summary line; on
 * a pipe never a control byte, plain lines only once the work lasts 5 s; off says nothing; a
 * work's own line is shown with its control bytes escaped. Elapsed time is made by moving the
 * reporter's start back, as the work lasting that long would. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pty.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/progress.h"

/* What is readable on fd now, as a string. */
static char *drain(int fd, char *buf, size_t len)
{
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, len - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	buf[n] = '\0';
	return buf;
}

static void back(struct rb_cli_progress *p, long long ms)
{
	long long ns = p->start.tv_nsec - (ms % 1000) * 1000000LL;
	p->start.tv_sec -= ms / 1000;
	if (ns < 0) {
		ns += 1000000000LL;
		p->start.tv_sec--;
	}
	p->start.tv_nsec = ns;
}

static const struct rb_progress_report half = {
    .what = "read", .done = 50 << 20, .total = 100 << 20, .is_bytes = true, .items = 7, .items_what = "members"};

static void test_terminal(void **state)
{
	int m, s;
	struct winsize ws = {.ws_row = 30, .ws_col = 160};
	assert_int_equal(openpty(&m, &s, NULL, NULL, &ws), 0);
	fcntl(m, F_SETFL, O_NONBLOCK);
	char buf[8192];
	struct rb_cli_progress p;
	rb_cli_progress_init(&p, s, "import", false);
	assert_true(p.tty);
	struct rb_progress sink = rb_cli_progress_sink(&p);
	rb_progress_say(&sink, &half);
	usleep(50000);
	assert_string_equal(drain(m, buf, sizeof buf), ""); /* quick work: no bar yet */
	back(&p, 1000);
	rb_progress_say(&sink, &half);
	usleep(50000);
	drain(m, buf, sizeof buf);
	assert_non_null(strstr(buf, "\r\033[Kimport [############------------]  50%  50.0 MiB / 100.0 MiB"));
	assert_non_null(strstr(buf, "7 members"));
	rb_progress_say(&sink, &half); /* within 0.1 s of the last draw: not redrawn */
	usleep(50000);
	assert_string_equal(drain(m, buf, sizeof buf), "");
	struct rb_progress_report line = {.line = "W: \033]0;title\007 said"};
	rb_progress_say(&sink, &line);
	usleep(50000);
	drain(m, buf, sizeof buf);
	/* erased, the line (its controls as text), then the bar again */
	assert_non_null(strstr(buf, "\r\033[KW: \\x1b]0;title\\x07 said"));
	assert_non_null(strstr(buf, "\r\033[Kimport ["));
	struct rb_progress_report fin = half;
	fin.done = fin.total;
	fin.final = true;
	rb_progress_say(&sink, &fin); /* a final report is always drawn */
	rb_cli_progress_end(&p, true);
	usleep(50000);
	drain(m, buf, sizeof buf);
	assert_non_null(strstr(buf, "100%"));
	assert_non_null(strstr(buf, "\r\033[Krunbox: import: done, read 100.0 MiB, 7 members, 1."));
	close(m);
	close(s);
}

static void test_pipe(void **state)
{
	int pp[2];
	assert_int_equal(pipe2(pp, O_NONBLOCK), 0);
	char buf[8192];
	struct rb_cli_progress p;
	rb_cli_progress_init(&p, pp[1], "harvest", false);
	assert_false(p.tty);
	struct rb_progress sink = rb_cli_progress_sink(&p);
	back(&p, 4000);
	rb_progress_say(&sink, &half);
	rb_cli_progress_end(&p, true);
	assert_string_equal(drain(pp[0], buf, sizeof buf), ""); /* under 5 s: nothing at all */

	rb_cli_progress_init(&p, pp[1], "harvest", false);
	back(&p, 6000);
	rb_progress_say(&sink, &half);
	rb_progress_say(&sink, &half); /* the next plain line only 5 s later */
	struct rb_progress_report line = {.line = "I: \033[2J"};
	rb_progress_say(&sink, &line);
	rb_cli_progress_end(&p, true);
	drain(pp[0], buf, sizeof buf);
	assert_null(strchr(buf, '\r'));
	assert_null(strchr(buf, '\033'));
	const char *first = strstr(buf, "runbox: harvest:  50%  50.0 MiB / 100.0 MiB");
	assert_non_null(first);
	assert_null(strstr(first + 1, "runbox: harvest:  50%"));
	assert_non_null(strstr(buf, "I: \\x1b[2J\n"));
	assert_non_null(strstr(buf, "runbox: harvest: done, read 50.0 MiB, 7 members, 6."));
	close(pp[0]);
	close(pp[1]);
}

static void test_off(void **state)
{
	int m, s;
	assert_int_equal(openpty(&m, &s, NULL, NULL, NULL), 0);
	fcntl(m, F_SETFL, O_NONBLOCK);
	char buf[4096];
	struct rb_cli_progress p;
	rb_cli_progress_init(&p, s, "harvest", true); /* --json */
	struct rb_progress sink = rb_cli_progress_sink(&p);
	back(&p, 10000);
	rb_progress_say(&sink, &half);
	struct rb_progress_report line = {.line = "I: x"};
	rb_progress_say(&sink, &line);
	rb_cli_progress_end(&p, true);
	usleep(50000);
	assert_string_equal(drain(m, buf, sizeof buf), "");
	close(m);
	close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_terminal),
	    cmocka_unit_test(test_pipe),
	    cmocka_unit_test(test_off),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* runtime/sandbox/channel.c: messages and their descriptors cross whole; a message longer than
 * RB_CHAN_MAX_MSG (a step's long command line) travels as a sealed memfd body that only
 * rb_chan_recv_body reads, and a body that is not such a memfd (a pipe could stall the reader)
 * or not of the announced length is refused. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "runtime/sandbox/channel.h"

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

/* An exec-like request whose one argument has n bytes. */
static json_t *request(size_t n)
{
	char *arg = malloc(n + 1);
	assert_non_null(arg);
	memset(arg, 'a', n);
	arg[n] = '\0';
	json_t *m = json_pack("{s:s, s:[s]}", "op", "exec", "argv", arg);
	free(arg);
	return m;
}

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* A request with an argument of n bytes and a pipe's two ends crosses whole: the same JSON,
 * the same two descriptors in their places (what is written into the pipe comes out of the
 * first), and nothing else (a body's memfd is not among them). */
static void round_trip(size_t n_bytes)
{
	int sv[2], p[2];
	pair(sv);
	assert_int_equal(pipe(p), 0);
	json_t *m = request(n_bytes);
	struct rb_error err = {0};
	assert_int_equal(rb_chan_send(sv[0], m, p, 2, &err), 0);
	json_t *got = NULL;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n = 0;
	assert_int_equal(rb_chan_recv_body(sv[1], &got, fds, &n, &err), 1);
	assert_true(json_equal(m, got));
	assert_int_equal(n, 2);
	assert_int_equal(write(p[1], "x", 1), 1);
	char c = 0;
	assert_int_equal(read(fds[0], &c, 1), 1);
	assert_int_equal(c, 'x');
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
	json_decref(got);
	json_decref(m);
	close(p[0]), close(p[1]), close(sv[0]), close(sv[1]);
}

static void small_message_with_fds(void **state)
{
	round_trip(100);
}

/* 1 MiB of argument: the body carries it. A plain receiver gets only the announcement. */
static void long_message_as_body(void **state)
{
	round_trip(1 << 20);
	int sv[2];
	pair(sv);
	json_t *m = request(1 << 20);
	struct rb_error err = {0};
	assert_int_equal(rb_chan_send(sv[0], m, NULL, 0, &err), 0);
	json_t *got = NULL;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n = 0;
	assert_int_equal(rb_chan_recv(sv[1], &got, fds, &n, &err), 1);
	assert_non_null(json_object_get(got, "rb_body"));
	assert_null(json_object_get(got, "op"));
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
	json_decref(got);
	json_decref(m);
	close(sv[0]), close(sv[1]);
}

/* An announcement whose fd is a pipe: refused at once (a read would wait for a writer that
 * never comes), and every received fd is closed. */
static void body_that_is_a_pipe_refused(void **state)
{
	int sv[2], p[2];
	pair(sv);
	assert_int_equal(pipe(p), 0);
	json_t *forged = json_pack("{s:i}", "rb_body", 100000);
	struct rb_error err = {0};
	assert_int_equal(rb_chan_send(sv[0], forged, &p[0], 1, &err), 0);
	json_t *got = NULL;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n = 0;
	assert_int_equal(rb_chan_recv_body(sv[1], &got, fds, &n, &err), -1);
	assert_int_equal(err.errnum, EPROTO);
	assert_null(got);
	assert_int_equal(n, 0);
	json_decref(forged);
	close(p[0]), close(p[1]), close(sv[0]), close(sv[1]);
}

/* A sealed memfd of another length than announced is refused too; the control: the same
 * memfd announced with its own length is read. */
static void body_of_another_length_refused(void **state)
{
	int sv[2];
	pair(sv);
	size_t len = 70000;
	char *text = malloc(len + 1);
	assert_non_null(text);
	memset(text, ' ', len);
	memcpy(text, "{\"op\":\"x\"}", 10);
	text[len] = '\0';
	struct rb_error err = {0};
	int fd = rb_sealed_memfd("test", text, len, &err);
	assert_true(fd >= 0);
	json_t *wrong = json_pack("{s:i}", "rb_body", (int)len + 1);
	json_t *right = json_pack("{s:i}", "rb_body", (int)len);
	json_t *got = NULL;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n = 0;

	assert_int_equal(rb_chan_send(sv[0], wrong, &fd, 1, &err), 0);
	assert_int_equal(rb_chan_recv_body(sv[1], &got, fds, &n, &err), -1);
	assert_int_equal(err.errnum, EPROTO);

	assert_int_equal(rb_chan_send(sv[0], right, &fd, 1, &err), 0);
	assert_int_equal(rb_chan_recv_body(sv[1], &got, fds, &n, &err), 1);
	assert_string_equal(json_string_value(json_object_get(got, "op")), "x");
	assert_int_equal(n, 0);
	json_decref(got);
	json_decref(wrong);
	json_decref(right);
	free(text);
	close(fd), close(sv[0]), close(sv[1]);
}

static void too_long_refused(void **state)
{
	int sv[2];
	pair(sv);
	json_t *m = request(RB_CHAN_MAX_BODY);
	struct rb_error err = {0};
	assert_int_equal(rb_chan_send(sv[0], m, NULL, 0, &err), -1);
	assert_int_equal(err.errnum, EMSGSIZE);
	json_decref(m);
	assert_true(is_open(sv[0]));
	close(sv[0]), close(sv[1]);
}

/* A peer that closes with our message unread (init failing its setup before it reads the
 * runner's reply) resets the connection; what it sent before closing is still read, in order,
 * and then the end. The kernel reports the reset before the queued datagrams: without the
 * retry the runner saw "Connection reset by peer" in place of init's error. */
static void reset_peer_messages_still_read(void **state)
{
	(void)state;
	int sv[2];
	pair(sv);
	struct rb_error err = {0};
	json_t *unread = json_pack("{s:s}", "op", "go");
	json_t *last = json_pack("{s:s, s:s}", "op", "error", "message", "/dev is a symlink");
	assert_int_equal(rb_chan_send(sv[0], unread, NULL, 0, &err), 0);
	assert_int_equal(rb_chan_send(sv[1], last, NULL, 0, &err), 0);
	close(sv[1]);
	json_t *got = NULL;
	assert_int_equal(rb_chan_recv_body(sv[0], &got, NULL, NULL, &err), 1);
	assert_true(json_equal(last, got));
	json_decref(got);
	got = NULL;
	assert_int_equal(rb_chan_recv_body(sv[0], &got, NULL, NULL, &err), 0);
	assert_null(got);
	json_decref(unread), json_decref(last);
	close(sv[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(small_message_with_fds),
	    cmocka_unit_test(long_message_as_body),
	    cmocka_unit_test(body_that_is_a_pipe_refused),
	    cmocka_unit_test(body_of_another_length_refused),
	    cmocka_unit_test(too_long_refused),
	    cmocka_unit_test(reset_peer_messages_still_read),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

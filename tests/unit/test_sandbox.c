/* runtime/sandbox/sandbox.c: the wait for init's `ready` is bounded. An init that never answers fails
 * the wait with ETIMEDOUT and a clear message; one that answers in time is accepted. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "runtime/sandbox/channel.h"
#include "runtime/sandbox/sandbox.h"

/* A sandbox handle with no init: only the control socket, whose other end is *peer. */
static void fake_sandbox(struct rb_sandbox *sb, int *peer)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	memset(sb, 0, sizeof *sb);
	sb->init_pid = -1;
	sb->pidfd = sb->userns_fd = sb->workspace_fd = sb->root_fd = -1;
	sb->reaped = true;
	sb->net = (struct rb_net)RB_NET_INIT;
	sb->ctl = sv[0];
	*peer = sv[1];
}

static void silent_init_times_out(void **state)
{
	struct rb_sandbox sb;
	int peer;
	fake_sandbox(&sb, &peer);
	struct rb_error err = {0};
	assert_int_equal(rb_sandbox_wait_ready(&sb, 200, &err), -1);
	assert_int_equal(err.errnum, ETIMEDOUT);
	assert_non_null(strstr(err.msg, "did not report its root ready within 200 ms"));
	assert_int_equal(sb.ctl, -1); /* destroyed */
	close(peer);
}

static void ready_in_time(void **state)
{
	struct rb_sandbox sb;
	int peer;
	fake_sandbox(&sb, &peer);
	struct rb_error err = {0};
	json_t *ready = json_pack("{s:s}", "ev", "ready");
	assert_int_equal(rb_chan_send(peer, ready, NULL, 0, &err), 0);
	json_decref(ready);
	assert_int_equal(rb_sandbox_wait_ready(&sb, 200, &err), 0);
	rb_sandbox_destroy(&sb);
	close(peer);
}

static void init_gone_is_not_a_timeout(void **state)
{
	struct rb_sandbox sb;
	int peer;
	fake_sandbox(&sb, &peer);
	close(peer);
	struct rb_error err = {0};
	assert_int_equal(rb_sandbox_wait_ready(&sb, 60000, &err), -1);
	assert_non_null(strstr(err.msg, "ended without a word"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(silent_init_times_out),
	    cmocka_unit_test(ready_in_time),
	    cmocka_unit_test(init_gone_is_not_a_timeout),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* runtime/run/control.c: a run's control socket is 0600; a kill request from the owner's uid
 * is taken (with its signal), one from another uid is refused by the peer check even where the
 * socket's mode lets it connect; a request for another run, a silent peer and a bad signal are
 * refused; a run directory whose path is longer than sun_path works; close removes it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/run/control.h"

#define RUN "0testrun0001"

static char dir[4096];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/rb-control-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	struct rb_error err;
	return rb_rm_rf(dir, &err) < 0 ? -1 : 0;
}

/* A client in a child (as uid, unless uid < 0) asking to kill run with sig; its exit status
 * says what it got: 0 taken, 1 refused by the owner (msg has `want`), 2 anything else. */
static pid_t client(const char *run_dir, const char *run, int sig, int uid, const char *want)
{
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	if (uid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)uid) < 0 || setuid((uid_t)uid) < 0))
		_exit(3);
	struct rb_error err;
	if (rb_control_request_kill(run_dir, run, sig, &err) == 0)
		_exit(0);
	_exit(strstr(err.msg, want) ? 1 : 2);
}

static int child_status(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

/* The owner's side: waits for a peer, handles it. */
static int serve_one(struct rb_control *c, struct rb_control_req *req)
{
	struct pollfd pf = {.fd = rb_control_fd(c), .events = POLLIN};
	if (poll(&pf, 1, 10000) != 1)
		return -2;
	struct rb_error err;
	return rb_control_handle(c, req, &err);
}

static void test_owner_request_taken(void **state)
{
	(void)state;
	struct rb_control *c;
	struct rb_error err;
	assert_int_equal(rb_control_open(dir, RUN, &c, &err), 0);
	char path[4200];
	snprintf(path, sizeof path, "%s/%s.ctl", dir, RUN);
	struct stat st;
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_uid, geteuid());

	pid_t pid = client(dir, RUN, SIGINT, -1, "");
	struct rb_control_req req;
	assert_int_equal(serve_one(c, &req), 1);
	assert_int_equal(req.sig, SIGINT);
	assert_int_equal(req.uid, geteuid());
	assert_int_equal(req.pid, pid);
	assert_int_equal(child_status(pid), 0);

	/* Nothing waiting: the handler returns at once with nothing to do. */
	assert_int_equal(rb_control_handle(c, &req, &err), 0);
	rb_control_close(c);
	assert_int_equal(lstat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
	/* No socket: the client says the owner takes no requests. */
	assert_int_equal(child_status(client(dir, RUN, SIGTERM, -1, "takes no requests")), 1);
}

static void test_other_uid_refused(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* making a peer of another uid needs root */
	struct rb_control *c;
	struct rb_error err;
	assert_int_equal(chmod(dir, 0755), 0);
	assert_int_equal(rb_control_open(dir, RUN, &c, &err), 0);
	char path[4200];
	snprintf(path, sizeof path, "%s/%s.ctl", dir, RUN);
	/* 0600 keeps uid 65534 out at connect already. */
	assert_int_equal(child_status(client(dir, RUN, SIGTERM, 65534, "connect")), 1);
	/* Past the mode: the peer check itself refuses it, and nothing is to be done. */
	assert_int_equal(chmod(path, 0666), 0);
	pid_t pid = client(dir, RUN, SIGTERM, 65534, "refused: uid 65534");
	struct rb_control_req req;
	assert_int_equal(serve_one(c, &req), 0);
	assert_int_equal(child_status(pid), 1);
	/* Control: the same request on the same socket from the owner's uid is taken. */
	pid = client(dir, RUN, SIGTERM, -1, "");
	assert_int_equal(serve_one(c, &req), 1);
	assert_int_equal(req.sig, SIGTERM);
	assert_int_equal(child_status(pid), 0);
	rb_control_close(c);
}

static void test_bad_requests_refused(void **state)
{
	(void)state;
	struct rb_control *c;
	struct rb_error err;
	struct rb_control_req req;
	assert_int_equal(rb_control_open(dir, RUN, &c, &err), 0);
	/* Another run's id on this socket (its name made to match by a link). */
	char a[4200], b[4200];
	snprintf(a, sizeof a, "%s/%s.ctl", dir, RUN);
	snprintf(b, sizeof b, "%s/0otherrun.ctl", dir);
	assert_int_equal(symlink(a, b), 0);
	pid_t pid = client(dir, "0otherrun", SIGTERM, -1, "this socket is run " RUN);
	assert_int_equal(serve_one(c, &req), 0);
	assert_int_equal(child_status(pid), 1);
	/* A signal out of range. */
	pid = client(dir, RUN, 99, -1, "signal out of range");
	assert_int_equal(serve_one(c, &req), 0);
	assert_int_equal(child_status(pid), 1);
	/* A peer that connects and says nothing holds the owner only RB_CONTROL_READ_MS. */
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", a);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
	alarm(10); /* a handler that waited for ever fails the test instead of hanging it */
	assert_int_equal(serve_one(c, &req), 0);
	alarm(0);
	char ans[256] = {0};
	assert_true(read(fd, ans, sizeof ans - 1) > 0);
	assert_non_null(strstr(ans, "no message in time"));
	close(fd);
	/* Control: a good request after them is taken. */
	pid = client(dir, RUN, SIGKILL, -1, "");
	assert_int_equal(serve_one(c, &req), 1);
	assert_int_equal(req.sig, SIGKILL);
	assert_int_equal(child_status(pid), 0);
	rb_control_close(c);
	/* An id that is no run id names no file. */
	assert_int_equal(rb_control_open(dir, "../x", &c, &err), -1);
	assert_null(c);
}

static void test_long_run_dir(void **state)
{
	(void)state;
	char deep[4096];
	snprintf(deep, sizeof deep, "%s/%0150d", dir, 0);
	assert_true(strlen(deep) > sizeof(((struct sockaddr_un *)0)->sun_path));
	assert_int_equal(mkdir(deep, 0700), 0);
	struct rb_control *c;
	struct rb_error err;
	assert_int_equal(rb_control_open(deep, RUN, &c, &err), 0);
	pid_t pid = client(deep, RUN, SIGTERM, -1, "");
	struct rb_control_req req;
	assert_int_equal(serve_one(c, &req), 1);
	assert_int_equal(child_status(pid), 0);
	rb_control_close(c);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_owner_request_taken, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_other_uid_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_requests_refused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_long_run_dir, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

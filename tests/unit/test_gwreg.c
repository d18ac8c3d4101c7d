/* runtime/run/gwreg.c: a daemon that refuses the peer answers and closes without reading its
 * grant; the runner reports the refusal, not the send's broken pipe. Control: a daemon that
 * reads the grant and says ready serves the run. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/gwsock.h"
#include "common/util.h"
#include "runtime/run/gwreg.h"

struct fake_daemon {
	int listener;
	int read_grant; /* 0: refuse at once, as the daemon does a peer of another uid */
	char path[108];
	char dir[64];
};

static void *serve_one(void *arg)
{
	struct fake_daemon *d = arg;
	int c = accept4(d->listener, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return NULL;
	if (d->read_grant) {
		char b;
		while (read(c, &b, 1) == 1 && b != '\n')
			;
		static const char ready[] = "{\"ready\": {\"run_id\": \"r\"}}\n";
		(void)rb_send_all(c, ready, sizeof ready - 1);
		/* the registration stays open while the run is served: wait for the runner to close */
		while (read(c, &b, 1) > 0)
			;
	} else {
		static const char no[] = "{\"error\": \"peer uid 65533 may not register runs\"}\n";
		(void)rb_send_all(c, no, sizeof no - 1);
	}
	close(c);
	return NULL;
}

static void start(struct fake_daemon *d, pthread_t *t)
{
	snprintf(d->dir, sizeof d->dir, "/tmp/rbx-gwreg.XXXXXX");
	assert_non_null(mkdtemp(d->dir));
	snprintf(d->path, sizeof d->path, "%s/gw.sock", d->dir);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", d->path);
	d->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(d->listener >= 0);
	assert_int_equal(bind(d->listener, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(d->listener, 1), 0);
	assert_int_equal(pthread_create(t, NULL, serve_one, d), 0);
}

static void stop(struct fake_daemon *d, pthread_t t)
{
	pthread_join(t, NULL);
	close(d->listener);
	unlink(d->path);
	rmdir(d->dir);
}

/* A grant larger than the socket's send buffer: the send cannot finish before the daemon
 * closes, so it fails (EPIPE or ECONNRESET) whichever of the two runs first. */
static char *big_grant(void)
{
	size_t n = RB_GWSOCK_LINE_MAX - 1024;
	char *g = malloc(n + 1);
	assert_non_null(g);
	memset(g, ' ', n);
	g[0] = '{';
	g[n - 1] = '}';
	g[n] = '\0';
	return g;
}

/* One registration of a big grant with a fake daemon that reads it (or refuses at once). */
static int register_with(int read_grant, int *conn, struct rb_error *err)
{
	struct fake_daemon d = {.read_grant = read_grant};
	pthread_t t;
	start(&d, &t);
	char *g = big_grant();
	json_t *early = NULL;
	int r = rb_gwreg_register(d.path, g, NULL, 0, 5000, conn, &early, err);
	if (*conn >= 0)
		close(*conn); /* the daemon's thread waits for the registration to close */
	json_decref(early);
	free(g);
	stop(&d, t);
	return r;
}

static void test_refusal_is_reported(void **state)
{
	(void)state;
	int conn = -1;
	struct rb_error err = {0};
	assert_int_equal(register_with(0, &conn, &err), -1);
	assert_int_equal(conn, -1);
	assert_non_null(strstr(err.msg, "refused the run: peer uid 65533 may not register runs"));
}

static void test_ready_serves(void **state)
{
	(void)state;
	int conn = -1;
	struct rb_error err = {0};
	assert_int_equal(register_with(1, &conn, &err), 1);
	assert_true(conn >= 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refusal_is_reported),
	    cmocka_unit_test(test_ready_serves),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

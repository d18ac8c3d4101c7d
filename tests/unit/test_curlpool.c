/* gateway/curlpool.c and its use by the connector door: loopback upstreams that count the TCP
 * connections they accept see N sequential calls of one connector on one connection, and
 * (controls) another connector, or another upstream, on its own; no option of a call (a
 * credential header) stays on the handle for the next; a call with an Idempotency-Key goes
 * on a new connection; a call whose answer was cut short closes its connection and the next
 * call opens a new one; an 8 MiB answer reaches a slow client and a fast one whole (the
 * transfer paused and resumed on the client's thread), and its connection is reused. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/token.h"
#include "gateway/config.h"
#include "gateway/curlpool.h"
#include "gateway/endpoint.h"

#define BIG_BODY ((size_t)8 << 20) /* /big's answer: more than the gateway's buffers hold */

/* A loopback HTTP/1.1 upstream, keep-alive: "ok" to every GET, BIG_BODY bytes to /big. */
struct upstream {
	int lfd;
	unsigned port;
	unsigned accepts, closes; /* __atomic */
	pthread_mutex_t lock;
	char last[4096]; /* the last request's head */
	pthread_t acceptor;
};

static struct upstream ups[3]; /* outlive the tests: connection threads end on their own */

struct up_conn {
	struct upstream *u;
	int fd;
};

static void *up_conn_thread(void *arg)
{
	struct up_conn *c = arg;
	char buf[8192];
	size_t len = 0;
	for (;;) {
		char *end = memmem(buf, len, "\r\n\r\n", 4);
		if (!end) {
			ssize_t n = len < sizeof buf ? recv(c->fd, buf + len, sizeof buf - len, 0) : -1;
			if (n <= 0)
				break;
			len += (size_t)n;
			continue;
		}
		size_t head = (size_t)(end + 4 - buf);
		pthread_mutex_lock(&c->u->lock);
		snprintf(c->u->last, sizeof c->u->last, "%.*s", (int)head, buf);
		pthread_mutex_unlock(&c->u->lock);
		bool big = !strncmp(buf, "GET /big ", 9);
		char resp[128];
		int rl = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n%s",
		                  big ? BIG_BODY : 2, big ? "" : "ok");
		if (send(c->fd, resp, (size_t)rl, MSG_NOSIGNAL) != rl)
			break;
		static const char block[65536];
		for (size_t sent = 0; big && sent < BIG_BODY; sent += sizeof block)
			if (send(c->fd, block, sizeof block, MSG_NOSIGNAL) != (ssize_t)sizeof block)
				break;
		memmove(buf, buf + head, len - head);
		len -= head;
	}
	close(c->fd);
	__atomic_add_fetch(&c->u->closes, 1, __ATOMIC_SEQ_CST);
	free(c);
	return NULL;
}

static void *up_accept_thread(void *arg)
{
	struct upstream *u = arg;
	for (;;) {
		int fd = accept4(u->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			return NULL;
		__atomic_add_fetch(&u->accepts, 1, __ATOMIC_SEQ_CST);
		struct up_conn *c = calloc(1, sizeof *c);
		assert_non_null(c);
		c->u = u, c->fd = fd;
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, up_conn_thread, c), 0);
		pthread_detach(t);
	}
}

static int loopback_listener(unsigned *port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

static void up_start(struct upstream *u)
{
	memset(u, 0, sizeof *u);
	pthread_mutex_init(&u->lock, NULL);
	u->lfd = loopback_listener(&u->port);
	assert_int_equal(pthread_create(&u->acceptor, NULL, up_accept_thread, u), 0);
}

static void up_stop(struct upstream *u)
{
	shutdown(u->lfd, SHUT_RDWR); /* the acceptor's accept fails: it ends */
	pthread_join(u->acceptor, NULL);
	close(u->lfd);
}

static unsigned accepts(struct upstream *u)
{
	return __atomic_load_n(&u->accepts, __ATOMIC_SEQ_CST);
}

static bool last_has(struct upstream *u, const char *s)
{
	pthread_mutex_lock(&u->lock);
	bool has = strcasestr(u->last, s) != NULL;
	pthread_mutex_unlock(&u->lock);
	return has;
}

static size_t discard(char *p, size_t size, size_t n, void *cls)
{
	return size * n;
}

/* One GET of url on h (taken from the pool), headers added; its status. */
static long get(struct rb_gw_handle *h, const char *url, struct curl_slist *hdrs)
{
	curl_easy_setopt(h->easy, CURLOPT_URL, url);
	curl_easy_setopt(h->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h->easy, CURLOPT_HTTPHEADER, hdrs);
	long status = 0;
	if (rb_gw_handle_perform(h) == CURLE_OK)
		curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

/* ---- the pool ---------------------------------------------------------------------------- */

static void test_pool_keeps_one_connection_per_key(void **state)
{
	(void)state;
	struct upstream *u = &ups[0];
	up_start(u);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%u/x", u->port);
	struct rb_gw_curlpool *p = rb_gw_curlpool_new();
	assert_non_null(p);
	for (int i = 0; i < 5; i++) {
		struct rb_gw_handle c;
		assert_true(rb_gw_curlpool_take(p, "connector a", &c));
		assert_int_equal(get(&c, url, NULL), 200);
		rb_gw_curlpool_give(p, "connector a", &c, true);
	}
	assert_int_equal(accepts(u), 1); /* five calls, one connection */

	/* Control: another key (another connector of the same upstream) never takes a's. */
	struct rb_gw_handle c;
	assert_true(rb_gw_curlpool_take(p, "connector b", &c));
	struct curl_slist *cred = curl_slist_append(NULL, "X-Credential: secret-of-b");
	assert_int_equal(get(&c, url, cred), 200);
	assert_true(last_has(u, "X-Credential: secret-of-b"));
	rb_gw_curlpool_give(p, "connector b", &c, true);
	assert_int_equal(accepts(u), 2);

	/* The next call of b reuses b's connection without b's last header: reset per call. */
	assert_true(rb_gw_curlpool_take(p, "connector b", &c));
	assert_int_equal(get(&c, url, NULL), 200);
	assert_false(last_has(u, "X-Credential"));
	rb_gw_curlpool_give(p, "connector b", &c, true);
	assert_int_equal(accepts(u), 2);

	/* A handle given back as not reusable (its answer cut short) is closed, not kept. */
	assert_true(rb_gw_curlpool_take(p, "connector a", &c));
	assert_int_equal(get(&c, url, NULL), 200);
	rb_gw_curlpool_give(p, "connector a", &c, false);
	assert_true(rb_gw_curlpool_take(p, "connector a", &c));
	assert_int_equal(get(&c, url, NULL), 200);
	rb_gw_curlpool_give(p, "connector a", &c, true);
	assert_int_equal(accepts(u), 3);

	/* More idle handles than the pool holds: the oldest are closed, none leaks. */
	struct rb_gw_handle many[RB_GW_CURLPOOL_IDLE + 2];
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE + 2; i++)
		assert_true(rb_gw_curlpool_take(p, "connector z", &many[i]));
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE + 2; i++)
		rb_gw_curlpool_give(p, "connector z", &many[i], true);
	curl_slist_free_all(cred);
	rb_gw_curlpool_free(p);
	up_stop(u);
}

/* ---- through the gateway ---------------------------------------------------------------- */

struct gw_fixture {
	struct rb_gwconf conf;
	struct rb_gateway *gw;
	int lfd;
	unsigned port;
	char token[RB_TOKEN_MAX];
};

static void gw_start(struct gw_fixture *g, unsigned port_a, unsigned port_b)
{
	static const char *const grants[] = {"a", "b"};
	static const uint8_t key[RB_TOKEN_KEY_LEN] = {1, 2, 3};
	char text[1024];
	snprintf(text, sizeof text,
	         "{\"connectors\": {"
	         "\"a\": {\"url\": \"http://127.0.0.1:%u\", \"credential\": {\"env\": \"RBX_TEST_CRED_A\"}, "
	         "\"inject\": \"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/*\"]}]}, "
	         "\"b\": {\"url\": \"http://127.0.0.1:%u\", \"credential\": {\"env\": \"RBX_TEST_CRED_B\"}, "
	         "\"inject\": \"bearer\", \"routes\": [{\"methods\": [\"GET\"], \"paths\": [\"/*\"]}]}}, "
	         "\"private_upstreams\": [\"127.0.0.1\"]}",
	         port_a, port_b);
	struct rb_error err = {0};
	setenv("RBX_TEST_CRED_A", "credential-of-connector-a", 1);
	setenv("RBX_TEST_CRED_B", "credential-of-connector-b", 1);
	assert_int_equal(rb_gwconf_parse(text, "test", &g->conf, &err), 0);
	g->lfd = loopback_listener(&g->port);
	struct rb_gateway_config gc = {.listen_fds = &g->lfd,
	                               .n_listen_fds = 1,
	                               .key = key,
	                               .keylen = sizeof key,
	                               .run_id = "run-pool",
	                               .rate = 1000000,
	                               .burst = 1000000,
	                               .conf = &g->conf,
	                               .grants = grants,
	                               .n_grants = 2,
	                               .event_fd = -1,
	                               .dns_fd = -1};
	if (rb_gateway_start(&gc, &g->gw, &err) < 0)
		fail_msg("rb_gateway_start: %s", err.msg);
	assert_int_equal(rb_token_issue(key, sizeof key, "tenant", "agent", "run-pool",
	                                "00000000000000000000000000000000", (int64_t)time(NULL) + 3600, g->token,
	                                sizeof g->token, &err),
	                 0);
}

/* A connector call through the gateway on the client's own handle, with extra (a header line)
 * when not NULL: its status. */
static long gw_get_with(struct gw_fixture *g, CURL *client, const char *connector, const char *path, const char *extra)
{
	char url[128], auth[RB_TOKEN_MAX + 32];
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/connectors/%s%s", g->port, connector, path);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", g->token);
	struct curl_slist *h = curl_slist_append(NULL, auth);
	if (extra)
		h = curl_slist_append(h, extra);
	curl_easy_setopt(client, CURLOPT_URL, url);
	curl_easy_setopt(client, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(client, CURLOPT_HTTPHEADER, h);
	long status = 0;
	if (curl_easy_perform(client) == CURLE_OK)
		curl_easy_getinfo(client, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	return status;
}

/* A body's bytes as a client receives them, read slowly when slow (a pause every 64 KiB). */
struct counted {
	bool slow;
	size_t bytes, nonzero, since_pause;
};

static size_t count_body(char *p, size_t size, size_t n, void *cls)
{
	struct counted *c = cls;
	for (size_t i = 0; i < size * n; i++)
		c->nonzero += p[i] != 0;
	c->bytes += size * n;
	c->since_pause += size * n;
	if (c->slow && c->since_pause >= 65536) {
		c->since_pause = 0;
		usleep(3000);
	}
	return size * n;
}

static long gw_get_counted(struct gw_fixture *g, CURL *client, const char *connector, const char *path,
                           struct counted *c)
{
	char url[128], auth[RB_TOKEN_MAX + 32];
	snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/connectors/%s%s", g->port, connector, path);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s", g->token);
	struct curl_slist *h = curl_slist_append(NULL, auth);
	curl_easy_setopt(client, CURLOPT_URL, url);
	curl_easy_setopt(client, CURLOPT_WRITEFUNCTION, count_body);
	curl_easy_setopt(client, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(client, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(client, CURLOPT_BUFFERSIZE, 16384L);
	long status = 0;
	if (curl_easy_perform(client) == CURLE_OK)
		curl_easy_getinfo(client, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_setopt(client, CURLOPT_WRITEDATA, NULL);
	curl_slist_free_all(h);
	return status;
}

static long gw_get(struct gw_fixture *g, CURL *client, const char *connector, const char *path)
{
	return gw_get_with(g, client, connector, path, NULL);
}

/* Sends a call for /big and hangs up after the first bytes of its answer. */
static void gw_get_cut_short(struct gw_fixture *g, const char *connector)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {
	    .sin_family = AF_INET, .sin_port = htons((uint16_t)g->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
	char req[RB_TOKEN_MAX + 200];
	int n = snprintf(req, sizeof req,
	                 "GET /v1/connectors/%s/big HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n\r\n",
	                 connector, g->token);
	assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	char buf[4096];
	assert_true(recv(fd, buf, sizeof buf, 0) > 0);
	close(fd);
}

static void test_gateway_reuses_the_connection_per_connector(void **state)
{
	(void)state;
	struct upstream *ua = &ups[1], *ub = &ups[2];
	up_start(ua);
	up_start(ub);
	static struct gw_fixture g; /* a config is about 200 KiB */
	gw_start(&g, ua->port, ub->port);
	CURL *client = curl_easy_init();
	assert_non_null(client);
	for (int i = 0; i < 10; i++)
		assert_int_equal(gw_get(&g, client, "a", "/x"), 200);
	assert_int_equal(accepts(ua), 1); /* ten calls, one upstream connection */
	assert_true(last_has(ua, "Authorization: Bearer credential-of-connector-a"));

	/* Control: another connector's upstream gets its own connection, with its own credential. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(gw_get(&g, client, "b", "/x"), 200);
	assert_int_equal(accepts(ub), 1);
	assert_true(last_has(ub, "Authorization: Bearer credential-of-connector-b"));
	assert_false(last_has(ub, "credential-of-connector-a"));
	assert_int_equal(accepts(ua), 1);

	/* A call with an Idempotency-Key is sent at most once: on a new connection, never on a
	 * kept one curl might resend it on. The next plain call reuses again (control). */
	assert_int_equal(gw_get_with(&g, client, "a", "/x", "Idempotency-Key: once-only"), 200);
	assert_true(last_has(ua, "Idempotency-Key: once-only"));
	assert_int_equal(accepts(ua), 2);
	assert_int_equal(gw_get(&g, client, "a", "/x"), 200);
	assert_int_equal(accepts(ua), 2);

	/* An answer cut short (the client hung up mid-body): its upstream connection is closed,
	 * and the next call opens a new one. */
	unsigned closed = __atomic_load_n(&ua->closes, __ATOMIC_SEQ_CST);
	gw_get_cut_short(&g, "a");
	for (int i = 0; i < 3000 && __atomic_load_n(&ua->closes, __ATOMIC_SEQ_CST) == closed; i++)
		usleep(10000); /* the producer sees the hang-up once its socketpair is full */
	assert_true(__atomic_load_n(&ua->closes, __ATOMIC_SEQ_CST) > closed);
	assert_int_equal(gw_get(&g, client, "a", "/x"), 200);
	assert_int_equal(accepts(ua), 3);

	/* /big (8 MiB, far more than the 256 KiB the gateway holds for a client) to a client that
	 * reads slowly: curl pauses and resumes the transfer, and every byte arrives, once; then
	 * to one that reads at once. Both end whole: the next call reuses the connection. */
	for (int slow = 1; slow >= 0; slow--) {
		struct counted c = {.slow = slow};
		assert_int_equal(gw_get_counted(&g, client, "a", "/big", &c), 200);
		assert_int_equal(c.bytes, BIG_BODY);
		assert_int_equal(c.nonzero, 0);
		unsigned before = __atomic_load_n(&ua->accepts, __ATOMIC_SEQ_CST);
		assert_int_equal(gw_get(&g, client, "a", "/x"), 200);
		assert_int_equal(__atomic_load_n(&ua->accepts, __ATOMIC_SEQ_CST), before);
	}

	curl_easy_cleanup(client);
	rb_gateway_stop(g.gw, NULL);
	close(g.lfd);
	up_stop(ua);
	up_stop(ub);
}

int main(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pool_keeps_one_connection_per_key),
	    cmocka_unit_test(test_gateway_reuses_the_connection_per_connector),
	};
	int r = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return r;
}

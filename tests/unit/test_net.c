/* runtime/sandbox/net.c and the gateway endpoint, as root: the spawner S sets the namespace up and hands
 * its fds over SCM_RIGHTS; loopback works inside; every attempt to leave is dropped and counted,
 * even through a veth an attacker adds from outside, while the same test host answers a plain
 * namespace (control); the endpoint answers the right token only. Traffic goes only to
 * loopback and to test hosts in namespaces this test creates (names rbxt-*). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/icmp6.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "gateway/endpoint.h"
#include "common/token.h"
#include "runtime/sandbox/net.h"

#include "net_fixture.h"

/* A fresh, plain network namespace (lo down, no table), kept alive by the returned fd. */
static int plain_netns(void)
{
	assert_int_equal(unshare(CLONE_NEWNET), 0);
	int fd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	leave();
	return fd;
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	if (system(cmd) != 0)
		fail_msg("command failed: %s", cmd);
}

/* Runs `ip ARGS` inside the namespace nsfd. */
#define ip_in(nsfd, ...)                                                                                               \
	do {                                                                                                           \
		enter(nsfd);                                                                                           \
		sh("ip " __VA_ARGS__);                                                                                 \
		leave();                                                                                               \
	} while (0)

static struct rb_net_counters counters(struct rb_net *net)
{
	struct rb_net_counters c;
	struct rb_error err = {0};
	if (rb_net_read_counters(net, &c, &err) < 0)
		fail_msg("%s", err.msg);
	return c;
}

/* ---- sockets ---- */

static socklen_t addr(const char *ip, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, ip, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		return sizeof *a4;
	}
	assert_int_equal(inet_pton(AF_INET6, ip, &a6->sin6_addr), 1);
	a6->sin6_family = AF_INET6;
	a6->sin6_port = htons(port);
	return sizeof *a6;
}

static int server(int type, const char *ip, uint16_t *port)
{
	struct sockaddr_storage ss;
	socklen_t len = addr(ip, 0, &ss);
	int fd = socket(ss.ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	int one = 1;
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	assert_int_equal(bind(fd, (struct sockaddr *)&ss, len), 0);
	if (type == SOCK_STREAM)
		assert_int_equal(listen(fd, 16), 0);
	len = sizeof ss;
	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &len), 0);
	*port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
	                                      : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

/* Non-blocking connect; waits up to wait_ms for the handshake. Returns 0 when connected,
 * else the errno (ETIMEDOUT when still in progress). */
static int tcp_try(const char *ip, uint16_t port, int wait_ms, int *out_fd)
{
	struct sockaddr_storage ss;
	socklen_t len = addr(ip, port, &ss);
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(fd >= 0);
	int r = connect(fd, (struct sockaddr *)&ss, len) == 0 ? 0 : errno;
	if (r == EINPROGRESS) {
		struct pollfd p = {fd, POLLOUT, 0};
		if (poll(&p, 1, wait_ms) == 1) {
			socklen_t sl = sizeof r;
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &r, &sl);
		} else {
			r = ETIMEDOUT;
		}
	}
	if (out_fd && r == 0)
		*out_fd = fd;
	else
		close(fd);
	return r;
}

static int udp_send(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = addr(ip, port, &ss);
	int fd = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	int r = sendto(fd, "ping", 4, 0, (struct sockaddr *)&ss, len) == 4 ? 0 : errno;
	close(fd);
	return r;
}

static bool readable(int fd, int wait_ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	return poll(&p, 1, wait_ms) == 1;
}

static uint16_t csum(const void *data, size_t n)
{
	const uint16_t *w = data;
	uint32_t s = 0;
	for (; n > 1; n -= 2)
		s += *w++;
	if (n)
		s += *(const uint8_t *)w;
	s = (s >> 16) + (s & 0xffff);
	s += s >> 16;
	return (uint16_t)~s;
}

/* One ICMP(v6) echo request on a raw socket; returns the send's errno, and in *replied whether an
 * echo reply came back within wait_ms. */
static int ping(const char *ip, int wait_ms, bool *replied)
{
	struct sockaddr_storage ss;
	socklen_t len = addr(ip, 0, &ss);
	bool v6 = ss.ss_family == AF_INET6;
	int fd = socket(ss.ss_family, SOCK_RAW | SOCK_CLOEXEC, v6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
	assert_true(fd >= 0);
	struct icmphdr h = {.type = v6 ? ICMP6_ECHO_REQUEST : ICMP_ECHO, .un.echo = {htons(0x7262), htons(1)}};
	if (!v6)
		h.checksum = csum(&h, sizeof h); /* the kernel fills it in for ICMPv6 */
	int r = sendto(fd, &h, sizeof h, 0, (struct sockaddr *)&ss, len) == sizeof h ? 0 : errno;
	*replied = false;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (r == 0 && !*replied && readable(fd, wait_ms)) {
		uint8_t buf[1500];
		ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
		size_t off = v6 ? 0 : (size_t)(buf[0] & 0xf) * 4; /* raw IPv4 sockets see the IP header */
		if (n >= (ssize_t)(off + 1) && buf[off] == (v6 ? ICMP6_ECHO_REPLY : ICMP_ECHOREPLY))
			*replied = true;
	}
	close(fd);
	return r;
}

/* ---- tests ---- */

static void test_setup_and_fd_passing(void **state)
{
	struct rb_net g, n;
	spawn_sandbox_net(RB_NET_GATEWAY, &g);
	assert_true(g.netns_fd >= 0 && g.nft_fd >= 0 && g.listen_fd4 >= 0);
	assert_int_equal(g.mode, RB_NET_GATEWAY);
	assert_true(g.port != 0);
	if (g.ipv6) { /* IPv6 is on here; the same port on ::1 */
		assert_true(g.listen_fd6 >= 0);
		assert_int_equal(g.port6, g.port);
	}
	int fds[RB_NET_NFDS];
	assert_int_equal(rb_net_fds(&g, fds, RB_NET_NFDS), g.listen_fd6 >= 0 ? 5 : 4);
	/* The DNS stub's socket: UDP on 127.0.0.1:53, where the sandbox's resolver looks. */
	struct sockaddr_in da;
	socklen_t dl = sizeof da;
	int dtype = 0;
	socklen_t tl = sizeof dtype;
	assert_int_equal(getsockname(g.dns_fd, (struct sockaddr *)&da, &dl), 0);
	assert_int_equal(getsockopt(g.dns_fd, SOL_SOCKET, SO_TYPE, &dtype, &tl), 0);
	assert_int_equal(dtype, SOCK_DGRAM);
	assert_int_equal(ntohs(da.sin_port), 53);
	assert_int_equal(ntohl(da.sin_addr.s_addr), INADDR_LOOPBACK);
	assert_int_equal(fds[0], g.netns_fd);
	assert_int_equal(fds[1], g.nft_fd);
	assert_int_equal(fds[2], g.listen_fd4);
	char url[64];
	rb_net_api_url(&g, url, sizeof url);
	char want[64];
	snprintf(want, sizeof want, "http://127.0.0.1:%u", (unsigned)g.port);
	assert_string_equal(url, want);

	spawn_sandbox_net(RB_NET_NONE, &n);
	assert_int_equal(n.listen_fd4, -1);
	assert_int_equal(n.listen_fd6, -1);
	assert_int_equal(n.dns_fd, -1); /* control: no stub without the gateway */
	assert_int_equal(rb_net_fds(&n, fds, RB_NET_NFDS), 2);
	rb_net_api_url(&n, url, sizeof url);
	assert_string_equal(url, "");

	/* Adopt with a missing fd: the field becomes -1; a surplus fd is closed. */
	struct rb_net copy = g;
	int two[2] = {dup(g.netns_fd), dup(g.nft_fd)};
	rb_net_adopt_fds(&copy, two, 2);
	assert_int_equal(copy.netns_fd, two[0]);
	assert_int_equal(copy.listen_fd4, -1);
	rb_net_close(&copy);
	assert_int_equal(fcntl(two[0], F_GETFD), -1);

	rb_net_close(&g);
	rb_net_close(&n);
	assert_int_equal(g.netns_fd, -1);
}

/* Server and client inside one sandbox talk over loopback, and the gateway listener accepts;
 * nothing of that is counted. */
static void test_loopback_works(void **state)
{
	struct rb_net net;
	spawn_sandbox_net(RB_NET_GATEWAY, &net);
	enter(net.netns_fd);
	int c = -1;
	assert_int_equal(tcp_try("127.0.0.1", net.port, 5000, &c), 0);
	int a = accept4(net.listen_fd4, NULL, NULL, SOCK_CLOEXEC);
	assert_true(a >= 0);
	close(a);
	close(c);
	if (net.listen_fd6 >= 0) {
		assert_int_equal(tcp_try("::1", net.port6, 5000, &c), 0);
		a = accept4(net.listen_fd6, NULL, NULL, SOCK_CLOEXEC);
		assert_true(a >= 0);
		close(a);
		close(c);
	}
	/* a step's own server on another loopback address and port */
	uint16_t p;
	int s = server(SOCK_STREAM, "127.0.0.2", &p);
	assert_int_equal(tcp_try("127.0.0.2", p, 5000, &c), 0);
	assert_true(readable(s, 5000));
	a = accept4(s, NULL, NULL, SOCK_CLOEXEC);
	assert_true(a >= 0);
	assert_int_equal(write(c, "hello", 5), 5);
	char buf[8] = {0};
	assert_true(readable(a, 5000));
	assert_int_equal(read(a, buf, sizeof buf), 5);
	assert_string_equal(buf, "hello");
	close(a);
	close(c);
	close(s);
	/* UDP on loopback */
	int u = server(SOCK_DGRAM, "127.0.0.1", &p);
	assert_int_equal(udp_send("127.0.0.1", p), 0);
	assert_true(readable(u, 5000));
	close(u);
	leave();
	struct rb_net_counters cnt = counters(&net);
	for (int i = 0; i < RB_NFT_NCOUNTERS; i++)
		assert_int_equal(cnt.c[i].packets, 0);
	rb_net_close(&net);
}

/* (d) With only lo and the default routes through it, an attempt to reach any other address
 * reaches the output hook and is counted. Control: a plain namespace with the same routes and no
 * table lets the same datagram through lo (sendto succeeds). The address is the test host's,
 * which is not attached here: nothing can leave either namespace. */
static void test_default_route_drops_and_counts(void **state)
{
	int plain = plain_netns();
	ip_in(plain, "link set lo up");
	ip_in(plain, "route add default dev lo");
	ip_in(plain, "-6 route add default dev lo");
	enter(plain);
	assert_int_equal(udp_send("10.99.0.1", 9), 0);
	assert_int_equal(udp_send("fd99::1", 9), 0);
	leave();
	close(plain);

	struct rb_net net;
	spawn_sandbox_net(RB_NET_NONE, &net);
	enter(net.netns_fd);
	assert_int_equal(udp_send("10.99.0.1", 9), EPERM);
	assert_int_equal(udp_send("fd99::1", 9), EPERM);
	assert_int_equal(tcp_try("10.99.0.1", 80, 0, NULL), ETIMEDOUT); /* the SYN is dropped */
	assert_int_equal(tcp_try("fd99::1", 80, 0, NULL), ETIMEDOUT);
	bool replied;
	assert_int_equal(ping("10.99.0.1", 0, &replied), EPERM);
	assert_int_equal(ping("fd99::1", 0, &replied), EPERM);
	leave();
	struct rb_net_counters c = counters(&net);
	assert_int_equal(c.c[RB_NFT_IPV4_UDP].packets, 1);
	assert_int_equal(c.c[RB_NFT_IPV6_UDP].packets, 1);
	assert_true(c.c[RB_NFT_IPV4_TCP].packets >= 1);
	assert_true(c.c[RB_NFT_IPV6_TCP].packets >= 1);
	assert_int_equal(c.c[RB_NFT_IPV4_ICMP].packets, 1);
	assert_int_equal(c.c[RB_NFT_IPV6_ICMP].packets, 1);
	rb_net_close(&net);
}

/* (c) A test host H in its own namespace, a veth from H to a plain namespace C (control) and a
 * veth from H into the sandbox's namespace, with address and route added from outside as an
 * attacker would. H answers C over TCP, UDP and ICMP, v4 and v6; from the sandbox every try is
 * dropped and counted; and H cannot reach into the sandbox either: its SYN gets in, but the
 * answer is traffic that would leave, dropped by the same output chain. */
static void test_veth_attacker_route(void **state)
{
	char vh_c[16], v_c[16], vh_s[16], v_s[16], path[64];
	int id = (int)getpid() % 1000000;
	snprintf(vh_c, sizeof vh_c, "rbxt-hc%d", id);
	snprintf(v_c, sizeof v_c, "rbxt-c%d", id);
	snprintf(vh_s, sizeof vh_s, "rbxt-hs%d", id);
	snprintf(v_s, sizeof v_s, "rbxt-s%d", id);
	int host = plain_netns(), ctl = plain_netns();
	struct rb_net net;
	spawn_sandbox_net(RB_NET_GATEWAY, &net);

	ip_in(host, "link set lo up");
	ip_in(ctl, "link set lo up");
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getpid(), ctl);
	ip_in(host, "link add %s type veth peer name %s netns %s", vh_c, v_c, path);
	snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getpid(), net.netns_fd);
	ip_in(host, "link add %s type veth peer name %s netns %s", vh_s, v_s, path);
	ip_in(host, "addr add 10.99.1.1/24 dev %s", vh_c);
	ip_in(host, "addr add fd99:1::1/64 dev %s nodad", vh_c);
	ip_in(host, "link set %s up", vh_c);
	ip_in(host, "addr add 10.99.0.1/24 dev %s", vh_s);
	ip_in(host, "addr add fd99::1/64 dev %s nodad", vh_s);
	ip_in(host, "link set %s up", vh_s);
	ip_in(ctl, "addr add 10.99.1.2/24 dev %s", v_c);
	ip_in(ctl, "addr add fd99:1::2/64 dev %s nodad", v_c);
	ip_in(ctl, "link set %s up", v_c);
	/* the attacker's part: an address and a route into the sandbox's namespace */
	ip_in(net.netns_fd, "addr add 10.99.0.2/24 dev %s", v_s);
	ip_in(net.netns_fd, "addr add fd99::2/64 dev %s nodad", v_s);
	ip_in(net.netns_fd, "link set %s up", v_s);
	ip_in(net.netns_fd, "route add 10.99.0.0/16 dev %s", v_s);

	/* H's services */
	enter(host);
	uint16_t tp4, tp6, up4, up6;
	int t4 = server(SOCK_STREAM, "0.0.0.0", &tp4), t6 = server(SOCK_STREAM, "::", &tp6);
	int u4 = server(SOCK_DGRAM, "0.0.0.0", &up4), u6 = server(SOCK_DGRAM, "::", &up6);
	leave();

	/* CONTROL: the plain namespace reaches H. */
	enter(ctl);
	int c;
	assert_int_equal(tcp_try("10.99.1.1", tp4, 10000, &c), 0);
	close(c);
	assert_int_equal(tcp_try("fd99:1::1", tp6, 10000, &c), 0);
	close(c);
	assert_int_equal(udp_send("10.99.1.1", up4), 0);
	assert_true(readable(u4, 10000));
	assert_int_equal(udp_send("fd99:1::1", up6), 0);
	assert_true(readable(u6, 10000));
	bool replied;
	assert_int_equal(ping("10.99.1.1", 10000, &replied), 0);
	assert_true(replied);
	assert_int_equal(ping("fd99:1::1", 10000, &replied), 0);
	assert_true(replied);
	uint16_t cp;
	int cs = server(SOCK_STREAM, "0.0.0.0", &cp); /* for the inbound control */
	leave();
	char buf[16];
	while (recv(u4, buf, sizeof buf, MSG_DONTWAIT) > 0)
		;
	while (recv(u6, buf, sizeof buf, MSG_DONTWAIT) > 0)
		;
	while ((c = accept4(t4, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(c);
	while ((c = accept4(t6, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(c);
	enter(host);
	assert_int_equal(tcp_try("10.99.1.2", cp, 10000, &c), 0); /* inbound control */
	close(c);
	leave();
	close(cs);

	/* The sandbox: the same tries, to the same H, over the attacker's route. */
	struct rb_net_counters before = counters(&net);
	enter(net.netns_fd);
	assert_int_equal(tcp_try("10.99.0.1", tp4, 1000, NULL), ETIMEDOUT);
	assert_int_equal(tcp_try("fd99::1", tp6, 1000, NULL), ETIMEDOUT);
	assert_int_equal(udp_send("10.99.0.1", up4), EPERM);
	assert_int_equal(udp_send("fd99::1", up6), EPERM);
	assert_int_equal(ping("10.99.0.1", 0, &replied), EPERM);
	assert_int_equal(ping("fd99::1", 0, &replied), EPERM);
	uint16_t sp;
	int ss = server(SOCK_STREAM, "0.0.0.0", &sp); /* a step listening on every address */
	leave();
	assert_false(readable(u4, 200));
	assert_false(readable(u6, 200));
	assert_int_equal(accept4(t4, NULL, NULL, SOCK_CLOEXEC), -1);
	assert_int_equal(accept4(t6, NULL, NULL, SOCK_CLOEXEC), -1);
	/* inbound: H tries the sandbox's address; the SYN gets in, the SYN-ACK cannot leave */
	enter(host);
	assert_int_equal(tcp_try("10.99.0.2", sp, 1000, NULL), ETIMEDOUT);
	leave();
	close(ss);

	struct rb_net_counters after = counters(&net);
	for (int i = 0; i < RB_NFT_NCOUNTERS; i++)
		if (i != RB_NFT_IPV4_OTHER && i != RB_NFT_IPV6_OTHER && after.c[i].packets <= before.c[i].packets)
			fail_msg("counter %s did not rise (%ju)", rb_nft_counter_name((enum rb_nft_counter)i),
			         (uintmax_t)after.c[i].packets);
	json_t *j = rb_net_counters_json(&after);
	char *text = json_dumps(j, JSON_COMPACT);
	printf("egress: %s\n", text);
	free(text);
	json_decref(j);

	close(t4);
	close(t6);
	close(u4);
	close(u6);
	rb_net_close(&net); /* the veths die with the namespaces */
	close(ctl);
	close(host);
}

/* ---- the gateway endpoint on the sandbox's listeners ---- */

static const uint8_t key[RB_TOKEN_KEY_LEN] = "gateway-test-key-0123456789abcd";

/* One HTTP/1.0 request from inside the current namespace; returns the status, body in body. */
static int http_get(const char *ip, uint16_t port, const char *path, const char *token, char *body, size_t bl)
{
	int fd;
	if (tcp_try(ip, port, 5000, &fd) != 0)
		return -1;
	fcntl(fd, F_SETFL, 0);
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	char req[2048];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: gw\r\n%s%s%s\r\n", path,
	                 token ? "Authorization: Bearer " : "", token ? token : "", token ? "\r\n" : "");
	assert_int_equal(write(fd, req, (size_t)n), n);
	char resp[8192];
	size_t got = 0;
	ssize_t r;
	while (got < sizeof resp - 1 && (r = read(fd, resp + got, sizeof resp - 1 - got)) > 0)
		got += (size_t)r;
	resp[got] = '\0';
	close(fd);
	int status = 0;
	sscanf(resp, "HTTP/1.%*d %d", &status);
	const char *b = strstr(resp, "\r\n\r\n");
	snprintf(body, bl, "%s", b ? b + 4 : "");
	return status;
}

static void test_gateway_endpoint(void **state)
{
	struct rb_net net;
	spawn_sandbox_net(RB_NET_GATEWAY, &net);
	int fds[2] = {net.listen_fd4, net.listen_fd6};
	struct rb_gateway_config cfg = {.listen_fds = fds,
	                                .n_listen_fds = net.listen_fd6 >= 0 ? 2 : 1,
	                                .key = key,
	                                .keylen = sizeof key,
	                                .run_id = "run-A",
	                                .event_fd = -1};
	struct rb_gateway *gw;
	struct rb_error err = {0};
	if (rb_gateway_start(&cfg, &gw, &err) < 0)
		fail_msg("%s", err.msg);
	int64_t now = (int64_t)time(NULL);
	char good[RB_TOKEN_MAX], other[RB_TOKEN_MAX], expired[RB_TOKEN_MAX], wrongkey[RB_TOKEN_MAX];
	assert_int_equal(rb_token_issue(key, sizeof key, "acme", "agent-1", "run-A", "0123456789abcdef0123456789abcdef",
	                                now + 600, good, sizeof good, &err),
	                 0);
	assert_int_equal(rb_token_issue(key, sizeof key, "acme", "agent-1", "run-B", "0123456789abcdef0123456789abcdef",
	                                now + 600, other, sizeof other, &err),
	                 0);
	assert_int_equal(rb_token_issue(key, sizeof key, "acme", "agent-1", "run-A", "0123456789abcdef0123456789abcdef",
	                                now - 1, expired, sizeof expired, &err),
	                 0);
	uint8_t k2[RB_TOKEN_KEY_LEN] = {1};
	assert_int_equal(rb_token_issue(k2, sizeof k2, "acme", "agent-1", "run-A", "0123456789abcdef0123456789abcdef",
	                                now + 600, wrongkey, sizeof wrongkey, &err),
	                 0);

	char body[4096];
	enter(net.netns_fd);
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/health", NULL, body, sizeof body), 200);
	assert_string_equal(body, "{\"ok\":true}");
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/whoami", good, body, sizeof body), 200);
	json_t *j = json_loads(body, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "tenant")), "acme");
	assert_string_equal(json_string_value(json_object_get(j, "agent")), "agent-1");
	assert_string_equal(json_string_value(json_object_get(j, "run")), "run-A");
	assert_int_equal(json_integer_value(json_object_get(j, "expires")), now + 600);
	json_decref(j);
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/whoami", NULL, body, sizeof body), 401);
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/whoami", other, body, sizeof body), 401);
	assert_non_null(strstr(body, "another run"));
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/whoami", expired, body, sizeof body), 401);
	assert_non_null(strstr(body, "expired"));
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/whoami", wrongkey, body, sizeof body), 401);
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/whoami", "garbage", body, sizeof body), 401);
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/nope", good, body, sizeof body), 404);
	/* The connector door checks the token first: an expired one is 401 before any decision;
	 * the good one (control) gets to the decision, which knows no connector without a config. */
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/connectors/x/v1/y", expired, body, sizeof body), 401);
	assert_non_null(strstr(body, "expired"));
	assert_int_equal(http_get("127.0.0.1", net.port, "/v1/connectors/x/v1/y", good, body, sizeof body), 404);
	assert_non_null(strstr(body, "\"rule\":\"connector\""));
	unsigned expect = 10;
	if (net.listen_fd6 >= 0) {
		assert_int_equal(http_get("::1", net.port6, "/v1/whoami", good, body, sizeof body), 200);
		expect++;
	}
	leave();
	struct rb_gateway_stats st;
	rb_gateway_get_stats(gw, &st);
	assert_int_equal(st.requests, expect);
	assert_int_equal(st.unauthorized, 6);
	assert_int_equal(st.refused, 1);
	/* The endpoint's traffic stayed on the sandbox's loopback: nothing counted. */
	struct rb_net_counters c = counters(&net);
	for (int i = 0; i < RB_NFT_NCOUNTERS; i++)
		assert_int_equal(c.c[i].packets, 0);
	rb_gateway_stop(gw, NULL);
	/* The caller's listeners are still its own after the gateway stopped. */
	assert_true(fcntl(net.listen_fd4, F_GETFD) >= 0);
	rb_net_close(&net);
}

/* The handler without any transport, as a separate daemon would run it. */
static void test_gateway_handler(void **state)
{
	struct rb_gateway_scope scope = {.keylen = sizeof key};
	memcpy(scope.key, key, sizeof key);
	snprintf(scope.run_id, sizeof scope.run_id, "run-A");
	char tok[RB_TOKEN_MAX], authz[RB_TOKEN_MAX + 16];
	struct rb_error err = {0};
	assert_int_equal(rb_token_issue(key, sizeof key, "t", "a", "run-A", "0123456789abcdef0123456789abcdef", 2000,
	                                tok, sizeof tok, &err),
	                 0);
	json_t *b = NULL;
	snprintf(authz, sizeof authz, "bearer   %s", tok);
	assert_int_equal(rb_gateway_handle(&scope, "GET", "/v1/whoami", authz, 1000, &b), 200);
	json_decref(b);
	assert_int_equal(rb_gateway_handle(&scope, "GET", "/v1/whoami", authz, 2000, &b), 401);
	json_decref(b);
	snprintf(authz, sizeof authz, "Basic %s", tok);
	assert_int_equal(rb_gateway_handle(&scope, "GET", "/v1/whoami", authz, 1000, &b), 401);
	json_decref(b);
	assert_int_equal(rb_gateway_handle(&scope, "POST", "/v1/health", NULL, 1000, &b), 405);
	json_decref(b);
}

static int group_setup(void **state)
{
	orig_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	return orig_ns < 0 || geteuid() != 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_setup_and_fd_passing),
	    cmocka_unit_test(test_loopback_works),
	    cmocka_unit_test(test_default_route_drops_and_counts),
	    cmocka_unit_test(test_veth_attacker_route),
	    cmocka_unit_test(test_gateway_endpoint),
	    cmocka_unit_test(test_gateway_handler),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}

/* runtime/sandbox/nft.c: the table matches the golden `nft list table` output; counters count exactly
 * and are read from outside the namespace; root in a child user namespace (the sandbox's
 * position) cannot list, flush or change the table, while the owner can (control), and the same
 * root can in a namespace it owns itself (control). Runs as root. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/sandbox/net.h"
#include "runtime/sandbox/nft.h"

#include "net_fixture.h"

static ino_t ns_ino(int fd)
{
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	return st.st_ino;
}

/* ---- golden listing ---- */

static char *golden_path(void)
{
	static char p[PATH_MAX];
	const char *src = getenv("RB_SRCDIR");
	if (src) {
		snprintf(p, sizeof p, "%s/tests/unit/golden/nft_table.txt", src);
		return p;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) { /* build/unit/test_nft -> ../../tests/unit/golden */
		exe[n] = '\0';
		snprintf(p, sizeof p, "%s/../../tests/unit/golden/nft_table.txt", dirname(exe));
		if (access(p, R_OK) == 0)
			return p;
	}
	snprintf(p, sizeof p, "tests/unit/golden/nft_table.txt");
	return p;
}

/* "packets 12 bytes 345" -> "packets 0 bytes 0"; handles are not printed without -a. */
static void normalise(char *s)
{
	char *out = s;
	for (const char *in = s; *in;) {
		unsigned long long a, b;
		int used = 0;
		if (sscanf(in, "packets %llu bytes %llu%n", &a, &b, &used) == 2 && used > 0) {
			static const char zero[] = "packets 0 bytes 0"; /* never longer than what it replaces */
			in += used;
			memcpy(out, zero, sizeof zero - 1);
			out += sizeof zero - 1;
		} else {
			*out++ = *in++;
		}
	}
	*out = '\0';
}

static void test_golden(void **state)
{
	struct rb_net net;
	spawn_sandbox_net(RB_NET_GATEWAY, &net);
	/* Some traffic first, so normalising the counter values is exercised. */
	enter(net.netns_fd);
	int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
	inet_pton(AF_INET, "10.99.0.1", &a.sin_addr); /* a test-host address; nothing answers */
	assert_int_equal(sendto(u, "x", 1, 0, (struct sockaddr *)&a, sizeof a), -1);
	close(u);
	FILE *p = popen("nft list table inet runbox", "r");
	assert_non_null(p);
	char got[16384];
	size_t n = fread(got, 1, sizeof got - 1, p);
	got[n] = '\0';
	assert_int_equal(pclose(p), 0);
	leave();
	assert_non_null(strstr(got, "packets 1 bytes 29")); /* the one datagram, before normalising */
	normalise(got);
	char *want = NULL;
	size_t wl;
	struct rb_error err = {0};
	if (rb_read_file(golden_path(), 1 << 20, &want, &wl, &err) < 0)
		fail_msg("%s", err.msg);
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "--- got\n%s--- want (%s)\n%s", got, golden_path(), want);
		fail_msg("nft list table inet runbox differs from the golden file");
	}
	free(want);
	rb_net_close(&net);
}

/* ---- counters, read from outside ---- */

static void test_counters_exact_from_outside(void **state)
{
	struct rb_net net;
	spawn_sandbox_net(RB_NET_NONE, &net);
	assert_true(net.nft_fd >= 0 && net.netns_fd >= 0);
	assert_int_equal(net.listen_fd4, -1);
	assert_int_equal(net.listen_fd6, -1);
	assert_int_equal(net.port, 0);
	struct rb_net_counters c;
	struct rb_error err = {0};
	assert_int_equal(rb_net_read_counters(&net, &c, &err), 0);
	for (int i = 0; i < RB_NFT_NCOUNTERS; i++)
		assert_int_equal(c.c[i].packets, 0);

	enter(net.netns_fd);
	int u4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), u6 = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
	inet_pton(AF_INET, "10.99.0.1", &a.sin_addr);
	inet_pton(AF_INET6, "fd99::1", &a6.sin6_addr);
	for (int i = 0; i < 3; i++) {
		errno = 0;
		assert_int_equal(sendto(u4, "x", 1, 0, (struct sockaddr *)&a, sizeof a), -1);
		assert_int_equal(errno, EPERM);
	}
	assert_int_equal(sendto(u6, "xy", 2, 0, (struct sockaddr *)&a6, sizeof a6), -1);
	assert_int_equal(errno, EPERM);
	close(u4);
	close(u6);
	leave();

	/* We are back in the original namespace: the read goes through the socket S opened. */
	int here = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	assert_true(ns_ino(here) != ns_ino(net.netns_fd));
	close(here);
	assert_int_equal(rb_net_read_counters(&net, &c, &err), 0);
	assert_int_equal(c.c[RB_NFT_IPV4_UDP].packets, 3);
	assert_int_equal(c.c[RB_NFT_IPV4_UDP].bytes, 3 * 29); /* 20 IP + 8 UDP + 1 */
	assert_int_equal(c.c[RB_NFT_IPV6_UDP].packets, 1);
	assert_int_equal(c.c[RB_NFT_IPV6_UDP].bytes, 40 + 8 + 2);
	assert_int_equal(c.c[RB_NFT_IPV4_TCP].packets, 0);

	json_t *j = rb_net_counters_json(&c);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "blocked_packets")), 4);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "by_protocol"), "ipv4_udp")), 3);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "by_protocol"), "ipv6_udp")), 1);
	json_decref(j);

	/* A second install into the same namespace is refused (the table is there). */
	enter(net.netns_fd);
	int fd = rb_nft_open(&err);
	assert_true(fd >= 0);
	assert_int_equal(rb_nft_install(fd, &err), -1);
	assert_int_equal(err.errnum, EEXIST);
	close(fd);
	leave();
	rb_net_close(&net);
}

/* ---- ownership ---- */

static uint64_t cap_eff(void)
{
	char *s = NULL;
	size_t n;
	uint64_t v = 0;
	if (rb_read_file("/proc/self/status", 1 << 16, &s, &n, NULL) == 0) {
		const char *p = strstr(s, "CapEff:");
		if (p)
			v = strtoull(p + 7, NULL, 16);
	}
	free(s);
	return v;
}

struct probe {
	int has_net_admin;
	int get, del, install, read; /* errnum of each attempt on the runner-owned table, 0 = worked */
	int own_install, own_get;    /* the same root on a namespace its own userns owns */
};

static int try_errno(int r, const struct rb_error *err)
{
	return r == 0 ? 0 : (err->errnum ? err->errnum : -1);
}

static void write_map(pid_t pid, const char *file, const char *map)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	struct rb_error err = {0};
	if (rb_write_file(path, map, &err) < 0)
		fail_msg("%s", err.msg);
}

static void test_child_userns_root_cannot_touch_table(void **state)
{
	struct rb_net net;
	spawn_sandbox_net(RB_NET_GATEWAY, &net);
	int go[2], res[2];
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(res, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* The sandbox's position: in the netns, then a new user namespace (root inside it,
		 * all capabilities in it), as clone(CLONE_NEWUSER) without CLONE_NEWNET gives. */
		struct probe p = {0};
		struct rb_error err = {0};
		char c;
		/* Root inside maps to an unprivileged host id, as for the sandbox: become that id
		 * first (after joining the netns, which needs root), then make the userns. */
		if (setns(net.netns_fd, CLONE_NEWNET) < 0 || setgroups(0, NULL) < 0 ||
		    setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0 ||
		    unshare(CLONE_NEWUSER) < 0) {
			perror("probe: setns/setresuid/unshare(CLONE_NEWUSER)");
			_exit(10);
		}
		if (write(go[1], "u", 1) != 1 || read(res[0], &c, 1) != 1) /* parent writes the maps */
			_exit(11);
		if (getuid() != 0)
			_exit(12);
		p.has_net_admin = (cap_eff() >> 12) & 1; /* CAP_NET_ADMIN */
		int fd = rb_nft_open(&err);
		if (fd < 0)
			_exit(13);
		struct rb_nft_count cnt[RB_NFT_NCOUNTERS];
		p.get = try_errno(rb_nft_get_table(fd, &err), &err);
		p.del = try_errno(rb_nft_delete_table(fd, &err), &err);
		p.install = try_errno(rb_nft_install(fd, &err), &err);
		p.read = try_errno(rb_nft_read(fd, cnt, &err), &err);
		close(fd);
		/* Control: a netns this userns owns is the sandbox's to rule. */
		if (unshare(CLONE_NEWNET) < 0)
			_exit(14);
		fd = rb_nft_open(&err);
		p.own_install = try_errno(rb_nft_install(fd, &err), &err);
		p.own_get = try_errno(rb_nft_get_table(fd, &err), &err);
		_exit(write(go[1], &p, sizeof p) == sizeof p ? 0 : 15);
	}
	close(go[1]); /* so a child that fails early gives EOF, not a hang */
	close(res[0]);
	char c;
	assert_int_equal(read(go[0], &c, 1), 1);
	write_map(pid, "setgroups", "deny");
	write_map(pid, "uid_map", "0 65534 1");
	write_map(pid, "gid_map", "0 65534 1");
	assert_int_equal(write(res[1], "g", 1), 1);
	struct probe p;
	ssize_t got = read(go[0], &p, sizeof p);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("probe child failed: status 0x%x (exit codes 10..15 name the step)", status);
	assert_int_equal(got, sizeof p);

	assert_int_equal(p.has_net_admin, 1); /* it holds CAP_NET_ADMIN ... */
	assert_int_equal(p.get, EPERM);       /* ... and still cannot list, */
	assert_int_equal(p.del, EPERM);       /* flush/delete, */
	assert_int_equal(p.install, EPERM);   /* add, */
	assert_int_equal(p.read, EPERM);      /* or read the counters */
	assert_int_equal(p.own_install, 0);   /* control: it can in a netns it owns */
	assert_int_equal(p.own_get, 0);

	/* Control: the owner can, and the table survived. */
	struct rb_error err = {0};
	assert_int_equal(rb_nft_get_table(net.nft_fd, &err), 0);
	struct rb_net_counters cnt;
	assert_int_equal(rb_net_read_counters(&net, &cnt, &err), 0);
	close(go[0]);
	close(res[1]);
	rb_net_close(&net);
}

/* The owner can delete (a pool resetting a namespace); after that the counters are gone and
 * reading says so instead of reporting zeros. */
static void test_owner_delete_then_read_fails(void **state)
{
	struct rb_net net;
	spawn_sandbox_net(RB_NET_NONE, &net);
	struct rb_error err = {0};
	assert_int_equal(rb_nft_delete_table(net.nft_fd, &err), 0);
	assert_int_equal(rb_nft_get_table(net.nft_fd, &err), -1);
	assert_int_equal(err.errnum, ENOENT);
	struct rb_net_counters c;
	assert_int_equal(rb_net_read_counters(&net, &c, &err), -1);
	rb_net_close(&net);
}

static int group_setup(void **state)
{
	orig_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	return orig_ns < 0 || geteuid() != 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_golden),
	    cmocka_unit_test(test_counters_exact_from_outside),
	    cmocka_unit_test(test_child_userns_root_cannot_touch_table),
	    cmocka_unit_test(test_owner_delete_then_read_fails),
	};
	return cmocka_run_group_tests(tests, group_setup, NULL);
}

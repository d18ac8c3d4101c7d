/* Unit tests for runtime/sandbox/seccomp.c: each filter runs in a forked child that tries a syscall
 * and exits with the errno it met; every denial has a control (the same call without the
 * filter gives another result), so no test passes because the call fails anyway. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <seccomp.h>

#include "common/util.h"
#include "runtime/sandbox/seccomp.h"

#define KILLED(sig) (1000 + (sig))
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

static char data_dir[PATH_MAX];
static struct rb_bpf dflt; /* the shipped default profile, built once */
/* Unprivileged runs: every child first enters fresh user, mount, net, uts and ipc
 * namespaces, so the unfiltered controls have the capabilities root would have and a
 * denial cannot be mistaken for a missing privilege. */
static bool unprivileged;

/* ------------------------------------------------------------------------ harness -- */

static void write_str(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = write(fd, text, strlen(text));
		(void)n;
		close(fd);
	}
}

/* Best effort: where unprivileged user namespaces are off, controls stay as they are. */
static void enter_own_userns(void)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS | CLONE_NEWIPC) < 0)
		return;
	/* Mapped, so that a nested user namespace (the unshare probe) may be created. */
	write_str("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
	write_str("/proc/self/uid_map", map);
	snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
	write_str("/proc/self/gid_map", map);
}

/* Runs fn in a forked child (own session so vhangup or a pty cannot touch the caller's
 * terminal, no_new_privs, then the filter when bpf is given). Returns fn's result (an errno,
 * 0 on success) or KILLED(signal). */
static int in_child(const struct rb_bpf *bpf, int (*fn)(void *), void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka catches SIGSEGV and friends to report a failure and carry on: a child
		 * must die of its signal instead of running the rest of the suite. */
		static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGABRT};
		for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
			signal(sigs[i], SIG_DFL);
		setsid();
		if (unprivileged)
			enter_own_userns();
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
			_exit(250);
		if (bpf && rb_seccomp_apply(bpf) < 0)
			_exit(251);
		int e = fn(arg);
		_exit(e < 0 || e > 249 ? 249 : e);
	}
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? KILLED(WTERMSIG(st)) : WEXITSTATUS(st);
}

static const char *what(int r)
{
	static char bufs[4][64];
	static unsigned turn;
	char *buf = bufs[turn++ % 4]; /* several calls per printf */
	if (r >= 1000)
		snprintf(buf, sizeof bufs[0], "killed by signal %d", r - 1000);
	else if (r == 0)
		snprintf(buf, sizeof bufs[0], "success");
	else
		snprintf(buf, sizeof bufs[0], "%s", strerrorname_np(r) ? strerrorname_np(r) : "?");
	return buf;
}

/* The denial proof: filtered gives want; unfiltered gives something else. */
static void expect_denied(const char *label, int (*fn)(void *), void *arg, int want)
{
	int ctl = in_child(NULL, fn, arg);
	int got = in_child(&dflt, fn, arg);
	if (got != want || ctl == want)
		print_error("%s: filtered %s (want %s), control %s\n", label, what(got), what(want), what(ctl));
	assert_int_equal(got, want);
	assert_int_not_equal(ctl, want);
}

/* The allowance proof: filtered gives the same as unfiltered, and that is not EPERM. */
static void expect_allowed(const char *label, int (*fn)(void *), void *arg)
{
	int ctl = in_child(NULL, fn, arg);
	int got = in_child(&dflt, fn, arg);
	if (got != ctl || got == EPERM)
		print_error("%s: filtered %s, control %s\n", label, what(got), what(ctl));
	assert_int_equal(got, ctl);
	assert_int_not_equal(got, EPERM);
}

static void policy_init(struct rb_policy *p, const char *hash)
{
	memset(p, 0, sizeof *p);
	snprintf(p->name, sizeof p->name, "test");
	snprintf(p->hash, sizeof p->hash, "%s", hash);
	snprintf(p->seccomp_profile, sizeof p->seccomp_profile, "default");
}

/* ------------------------------------------------------------------------- probes -- */

static int p_unshare_user(void *a)
{
	return unshare(CLONE_NEWUSER) < 0 ? errno : 0;
}

static int p_clone_flags(void *a)
{
	unsigned long flags = *(unsigned long *)a;
	long r = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	if (r == 0)
		_exit(0);
	if (r < 0)
		return errno;
	int st;
	waitpid((pid_t)r, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 248;
}

static int p_fork(void *a)
{
	pid_t pid = fork();
	if (pid == 0)
		_exit(0);
	if (pid < 0)
		return errno;
	int st;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 248;
}

static void *thread_fn(void *a)
{
	return a;
}

static int p_thread(void *a)
{
	pthread_t t;
	int r = pthread_create(&t, NULL, thread_fn, NULL);
	if (r)
		return r;
	return pthread_join(t, NULL);
}

struct clone_args_v0 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static int p_clone3(void *a)
{
	struct clone_args_v0 ca = {.exit_signal = SIGCHLD};
	long r = syscall(SYS_clone3, &ca, sizeof ca);
	if (r == 0)
		_exit(0);
	if (r < 0)
		return errno;
	int st;
	waitpid((pid_t)r, &st, 0);
	return 0;
}

static int p_mount(void *a)
{
	/* The target does not exist, so even an unfiltered root mounts nothing. */
	return mount("none", "/nonexistent-runbox-test", "tmpfs", 0, NULL) < 0 ? errno : 0;
}

struct sock_args {
	int fam, type, proto;
	bool pair;
};

static int p_socket(void *a)
{
	struct sock_args *s = a;
	int fds[2];
	int r = s->pair ? socketpair(s->fam, s->type, s->proto, fds) : (fds[0] = socket(s->fam, s->type, s->proto));
	return r < 0 ? errno : 0;
}

struct tty_args {
	char path[128];
	unsigned long cmd;
};

static int p_tty_ioctl(void *a)
{
	struct tty_args *t = a;
	/* After setsid, opening the slave makes it our controlling tty, so TIOCSTI is
	 * permitted to anyone without the filter (legacy_tiocsti) and to root always. */
	int fd = open(t->path, O_RDWR);
	if (fd < 0)
		return 247;
	char buf[64] = {'x'};
	if (t->cmd == TIOCLINUX)
		buf[0] = 6; /* TIOCL_GETSHIFTSTATE: read-only even on a real VT */
	return syscall(SYS_ioctl, fd, t->cmd, buf) < 0 ? errno : 0;
}

static int p_personality(void *a)
{
	return syscall(SYS_personality, *(unsigned long *)a) < 0 ? errno : 0;
}

struct sc_args {
	long nr;
	long a[6];
};

static int p_syscall(void *a)
{
	struct sc_args *s = a;
	return syscall(s->nr, s->a[0], s->a[1], s->a[2], s->a[3], s->a[4], s->a[5]) < 0 ? errno : 0;
}

static int p_int80_getpid(void *a)
{
	long ret;
	/* i386 getpid is 20; int 0x80 enters the kernel as AUDIT_ARCH_I386. */
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	return ret == getpid() ? 0 : 246;
}

static int p_x32_getpid(void *a)
{
	long r = syscall(39 | 0x40000000L);
	if (r < 0)
		return errno;
	return r == getpid() ? 0 : 246;
}

static int p_shell(void *a)
{
	/* A normal dynamically linked userland: fork, pipes, exec, /proc, threads (sort). */
	execl("/bin/sh", "sh", "-c",
	      "ls / >/dev/null && echo hi | cat >/dev/null && uname -a >/dev/null && "
	      "seq 1 20000 | sort --parallel=2 -S 1M -n >/dev/null && "
	      "grep -q '^Seccomp:[[:space:]]*2' /proc/self/status",
	      (char *)NULL);
	return errno;
}

/* ---------------------------------------------------------------------- the tests -- */

static void test_normal_userland_runs(void **s)
{
	/* The script's last check (Seccomp: 2 in /proc/self/status) proves the filter is on;
	 * unfiltered it fails, unless the test itself already runs under a filter. */
	int ctl = in_child(NULL, p_shell, NULL);
	assert_true(ctl == 1 || ctl == 0);
	assert_int_equal(in_child(&dflt, p_shell, NULL), 0);
}

static void test_namespaces_denied(void **s)
{
	expect_denied("unshare(CLONE_NEWUSER)", p_unshare_user, NULL, EPERM);
	unsigned long newns = CLONE_NEWNS, plain = 0, newuser = CLONE_NEWUSER, newnet = CLONE_NEWNET;
	expect_denied("clone(CLONE_NEWNS)", p_clone_flags, &newns, EPERM);
	expect_denied("clone(CLONE_NEWUSER)", p_clone_flags, &newuser, EPERM);
	expect_denied("clone(CLONE_NEWNET)", p_clone_flags, &newnet, EPERM);
	expect_allowed("clone(SIGCHLD)", p_clone_flags, &plain);
	expect_allowed("fork", p_fork, NULL);
	expect_allowed("pthread_create", p_thread, NULL);
	expect_denied("clone3", p_clone3, NULL, ENOSYS);
	expect_denied("mount(tmpfs)", p_mount, NULL, EPERM);
}

static void test_socket_families(void **s)
{
	struct sock_args packet = {AF_PACKET, SOCK_RAW, 0, false};
	struct sock_args alg = {AF_ALG, SOCK_SEQPACKET, 0, false};
	struct sock_args vsock = {AF_VSOCK, SOCK_STREAM, 0, false};
	struct sock_args audit = {AF_NETLINK, SOCK_RAW, 9 /* NETLINK_AUDIT */, false};
	struct sock_args inetpair = {AF_INET, SOCK_STREAM, 0, true};
	expect_denied("socket(AF_PACKET)", p_socket, &packet, EPERM);
	expect_denied("socket(AF_ALG)", p_socket, &alg, EPERM);
	expect_denied("socket(AF_VSOCK)", p_socket, &vsock, EPERM);
	expect_denied("socket(AF_NETLINK, NETLINK_AUDIT)", p_socket, &audit, EPERM);
	expect_denied("socketpair(AF_INET)", p_socket, &inetpair, EPERM);

	struct sock_args inet = {AF_INET, SOCK_STREAM, 0, false};
	struct sock_args inet6 = {AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0, false};
	struct sock_args unx = {AF_UNIX, SOCK_STREAM, 0, false};
	struct sock_args route = {AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE, false};
	struct sock_args pair = {AF_UNIX, SOCK_SEQPACKET, 0, true};
	expect_allowed("socket(AF_INET)", p_socket, &inet);
	expect_allowed("socket(AF_INET6)", p_socket, &inet6);
	expect_allowed("socket(AF_UNIX)", p_socket, &unx);
	expect_allowed("socket(AF_NETLINK, NETLINK_ROUTE)", p_socket, &route);
	expect_allowed("socketpair(AF_UNIX)", p_socket, &pair);
	assert_int_equal(in_child(&dflt, p_socket, &inet), 0);
	assert_int_equal(in_child(&dflt, p_socket, &route), 0);
}

/* The socket type, for AF_INET and AF_INET6: SOCK_PACKET makes an AF_PACKET socket through
 * the allowed family; SOCK_RAW needs CAP_NET_RAW granted. Controls: without the filter both
 * succeed here (root, or root of the child's own user and network namespaces). */
static void test_socket_types(void **s)
{
	struct sock_args pkt = {AF_INET, SOCK_PACKET, 0, false};
	struct sock_args pkt_flags = {AF_INET, SOCK_PACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, false};
	struct sock_args pkt6 = {AF_INET6, SOCK_PACKET, 0, false};
	struct sock_args raw = {AF_INET, SOCK_RAW, IPPROTO_ICMP, false};
	struct sock_args raw6 = {AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMPV6, false};
	expect_denied("socket(AF_INET, SOCK_PACKET)", p_socket, &pkt, ESOCKTNOSUPPORT);
	expect_denied("socket(AF_INET, SOCK_PACKET | NONBLOCK | CLOEXEC)", p_socket, &pkt_flags, ESOCKTNOSUPPORT);
	expect_denied("socket(AF_INET, SOCK_RAW)", p_socket, &raw, ESOCKTNOSUPPORT);
	expect_denied("socket(AF_INET6, SOCK_RAW)", p_socket, &raw6, ESOCKTNOSUPPORT);
	/* The kernel maps only AF_INET's SOCK_PACKET; for AF_INET6 it is refused anyway. */
	assert_int_equal(in_child(&dflt, p_socket, &pkt6), ESOCKTNOSUPPORT);

	struct sock_args tcp = {AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0, false};
	struct sock_args udp6 = {AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0, false};
	expect_allowed("socket(AF_INET, SOCK_STREAM | NONBLOCK)", p_socket, &tcp);
	expect_allowed("socket(AF_INET6, SOCK_DGRAM | CLOEXEC)", p_socket, &udp6);

	/* Granted CAP_NET_RAW, the filter lets SOCK_RAW through (the kernel then decides);
	 * SOCK_PACKET stays refused. */
	struct rb_policy p;
	struct rb_bpf b;
	struct rb_error e = {0};
	policy_init(&p, "cafe"); /* the default's hash: only the capability tells them apart */
	p.caps = 1ULL << 13;     /* CAP_NET_RAW */
	assert_int_equal(rb_seccomp_prepare(&p, data_dir, NULL, &b, &e), 0);
	assert_int_equal(in_child(&b, p_socket, &raw), in_child(NULL, p_socket, &raw));
	assert_int_equal(in_child(&b, p_socket, &raw), 0);
	assert_int_equal(in_child(&b, p_socket, &raw6), 0);
	assert_int_equal(in_child(&b, p_socket, &pkt), ESOCKTNOSUPPORT);
	assert_int_equal(in_child(&b, p_socket, &pkt_flags), ESOCKTNOSUPPORT);
	rb_seccomp_free(&b);
}

static void test_tty_ioctls(void **s)
{
	int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(master >= 0);
	assert_int_equal(grantpt(master), 0);
	assert_int_equal(unlockpt(master), 0);
	struct tty_args t;
	assert_int_equal(ptsname_r(master, t.path, sizeof t.path), 0);

	t.cmd = TIOCSTI;
	expect_denied("ioctl(TIOCSTI)", p_tty_ioctl, &t, EPERM);
	assert_int_equal(in_child(NULL, p_tty_ioctl, &t), 0); /* the control really injects */
	t.cmd = (0x123UL << 32) | TIOCSTI;                    /* CVE-2019-10063: the kernel keeps the low 32 bits */
	expect_denied("ioctl((0x123<<32)|TIOCSTI)", p_tty_ioctl, &t, EPERM);
	t.cmd = (0xffffffffUL << 32) | TIOCSTI;
	expect_denied("ioctl((0xffffffff<<32)|TIOCSTI)", p_tty_ioctl, &t, EPERM);
	t.cmd = TIOCLINUX;
	expect_denied("ioctl(TIOCLINUX)", p_tty_ioctl, &t, EPERM);
	t.cmd = (0x1UL << 40) | TIOCLINUX;
	expect_denied("ioctl((1<<40)|TIOCLINUX)", p_tty_ioctl, &t, EPERM);

	t.cmd = TIOCGWINSZ;
	expect_allowed("ioctl(TIOCGWINSZ)", p_tty_ioctl, &t);
	assert_int_equal(in_child(&dflt, p_tty_ioctl, &t), 0);
	t.cmd = TCGETS;
	expect_allowed("ioctl(TCGETS)", p_tty_ioctl, &t);
	close(master);
}

/* Every command number near the two holes, and the holes with random high halves: only
 * the exact low-32 values are denied. Denied shows as EPERM, allowed as EBADF (fd -1). */
static int p_ioctl_sweep(void *a)
{
	for (uint32_t lo = 0x5300; lo < 0x5600; lo++) {
		int want = lo == TIOCSTI || lo == TIOCLINUX ? EPERM : EBADF;
		for (uint64_t hi = 0; hi < 3; hi++) {
			uint64_t cmd = (hi == 0 ? 0 : hi == 1 ? 0x1ULL : 0xdeadbeefULL) << 32 | lo;
			if (syscall(SYS_ioctl, -1, cmd, 0) != -1 || errno != want)
				return 240;
		}
	}
	static const uint32_t far[] = {
	    0, 1, 0x5412 ^ 0x80000000u, 0xffffffffu, 0x80045430u, 0xc0045406u, 0x5402, 0x541b, 0x541d, 0x5411, 0x5413};
	for (size_t i = 0; i < sizeof far / sizeof far[0]; i++)
		if (syscall(SYS_ioctl, -1, (uint64_t)far[i], 0) != -1 || errno != EBADF)
			return 241;
	return 0;
}

static void test_ioctl_sweep(void **s)
{
	assert_int_equal(in_child(&dflt, p_ioctl_sweep, NULL), 0);
	assert_int_equal(in_child(NULL, p_ioctl_sweep, NULL), 240); /* control: no EPERM hole */
}

static void test_personality(void **s)
{
	unsigned long rie = 0x0400000, query = 0xffffffff, linux32 = 0x8, hi = (1UL << 32) | 0x0400000;
	expect_denied("personality(READ_IMPLIES_EXEC)", p_personality, &rie, EPERM);
	expect_denied("personality((1<<32)|READ_IMPLIES_EXEC)", p_personality, &hi, EPERM);
	expect_allowed("personality(0xffffffff)", p_personality, &query);
	expect_allowed("personality(PER_LINUX32)", p_personality, &linux32);
	assert_int_equal(in_child(&dflt, p_personality, &query), 0);
}

/* Each name with every argument -1 (init_module with 0s): the kernel rejects those
 * arguments with EINVAL, EFAULT, EBADF, ESRCH or ENOSYS, never by doing anything. */
static const char *const must_deny[] = {
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "unshare",
    "setns",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "name_to_handle_at",
    "open_by_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "stime",
    "lookup_dcookie",
    "quotactl",
    "quotactl_fd",
    "nfsservctl",
    "vhangup",
    "syslog",
    "iopl",
    "ioperm",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "uselib",
    "ustat",
    "sysfs",
    "_sysctl",
    "process_madvise",
    "fanotify_init",
    "sethostname",
    "setdomainname",
};

static void test_must_deny_list(void **s)
{
	unsigned proven = 0, native = 0;
	for (size_t i = 0; i < sizeof must_deny / sizeof must_deny[0]; i++) {
		int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, must_deny[i]);
		assert_int_not_equal(nr, __NR_SCMP_ERROR);
		if (nr < 0)
			continue; /* stime: no such call on x86_64 */
		native++;
		struct sc_args a = {nr, {-1, -1, -1, -1, -1, -1}};
		if (strcmp(must_deny[i], "init_module") == 0)
			memset(a.a, 0, sizeof a.a);
		int got = in_child(&dflt, p_syscall, &a);
		int ctl = in_child(NULL, p_syscall, &a);
		if (got != EPERM)
			print_error("%s: filtered %s, want EPERM\n", must_deny[i], what(got));
		assert_int_equal(got, EPERM);
		if (ctl == EPERM)
			print_message("note: %s gives EPERM even unfiltered here; not proven\n", must_deny[i]);
		else
			proven++;
	}
	print_message("must-deny: %u of %u native calls proven against a control\n", proven, native);
	assert_true(unprivileged || proven == native);
}

static void test_named_exploit_primitives(void **s)
{
	static const char *const names[] = {"keyctl",          "bpf",   "userfaultfd", "io_uring_setup",
	                                    "perf_event_open", "ptrace"};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		struct sc_args a = {seccomp_syscall_resolve_name(names[i]), {-1, -1, -1, -1, -1, -1}};
		expect_denied(names[i], p_syscall, &a, EPERM);
	}
	/* A success control too: userfaultfd(0) and keyctl(GET_KEYRING_ID, session) work bare. */
	struct sc_args uffd = {SYS_userfaultfd, {0}};
	struct sc_args key = {SYS_keyctl, {0 /* KEYCTL_GET_KEYRING_ID */, -3 /* SESSION */, 0}};
	assert_int_equal(in_child(&dflt, p_syscall, &uffd), EPERM);
	assert_int_equal(in_child(&dflt, p_syscall, &key), EPERM);
	assert_int_equal(in_child(NULL, p_syscall, &key), 0);
}

static void test_compat_arches_killed(void **s)
{
	int ctl = in_child(NULL, p_int80_getpid, NULL);
	int got = in_child(&dflt, p_int80_getpid, NULL);
	print_message("int 0x80 getpid: control %s, filtered %s\n", what(ctl), what(got));
	if (ctl == 0) {
		assert_int_equal(got, KILLED(SIGSYS));
	} else {
		/* No ia32 emulation on this kernel: int 0x80 faults before seccomp sees it. */
		print_message("note: no ia32 emulation here, so the filter is never consulted\n");
		assert_int_not_equal(got, 0);
	}

	ctl = in_child(NULL, p_x32_getpid, NULL);
	got = in_child(&dflt, p_x32_getpid, NULL);
	print_message("x32 getpid: control %s, filtered %s\n", what(ctl), what(got));
	assert_int_equal(got, KILLED(SIGSYS));
	assert_int_not_equal(ctl, KILLED(SIGSYS));
}

/* A classic-BPF evaluator for the opcodes libseccomp emits, so the filter can be checked
 * on inputs this kernel cannot produce (it has no ia32 emulation) and on many more
 * argument values than a syscall sweep can afford. */
static uint32_t bpf_eval(const struct rb_bpf *b, const struct seccomp_data *d)
{
	uint32_t acc = 0;
	for (size_t pc = 0; pc < b->len;) {
		const struct sock_filter *f = &b->insns[pc++];
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			assert_true(f->k % 4 == 0 && f->k + 4 <= sizeof *d);
			memcpy(&acc, (const char *)d + f->k, 4);
			break;
		case BPF_ALU | BPF_AND | BPF_K: acc &= f->k; break;
		case BPF_JMP | BPF_JA: pc += f->k; break;
		case BPF_JMP | BPF_JEQ | BPF_K: pc += acc == f->k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGT | BPF_K: pc += acc > f->k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JGE | BPF_K: pc += acc >= f->k ? f->jt : f->jf; break;
		case BPF_JMP | BPF_JSET | BPF_K: pc += (acc & f->k) ? f->jt : f->jf; break;
		case BPF_RET | BPF_K: return f->k;
		default: fail_msg("unexpected BPF opcode %#x at %zu", f->code, pc - 1);
		}
	}
	fail_msg("filter ran off its end");
	return 0;
}

#define RET_EPERM (SECCOMP_RET_ERRNO | EPERM)

static uint32_t eval(uint32_t arch, int nr, uint64_t a0, uint64_t a1, uint64_t a2)
{
	struct seccomp_data d = {.nr = nr, .arch = arch, .args = {a0, a1, a2}};
	return bpf_eval(&dflt, &d);
}

static uint64_t rnd64(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17; /* xorshift: reproducible, no libc state */
	return *x;
}

static void test_filter_logic(void **s)
{
	/* The evaluator agrees with the kernel on what the kernel can show. */
	assert_int_equal(eval(AUDIT_ARCH_X86_64, SYS_getpid, 0, 0, 0), SECCOMP_RET_ALLOW);
	assert_int_equal(eval(AUDIT_ARCH_X86_64, SYS_mount, 0, 0, 0), RET_EPERM);
	assert_int_equal(eval(AUDIT_ARCH_X86_64, SYS_clone3, 0, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
	assert_int_equal(eval(AUDIT_ARCH_X86_64, 39 | 0x40000000, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
	/* i386 (int 0x80) and any other arch token: killed, whatever the number. */
	for (int nr = 0; nr < 450; nr++)
		assert_int_equal(eval(AUDIT_ARCH_I386, nr, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
	assert_int_equal(eval(AUDIT_ARCH_AARCH64, SYS_getpid, 0, 0, 0), SECCOMP_RET_KILL_PROCESS);
	/* Numbers newer than libseccomp's table answer ENOSYS so a newer libc falls back. */
	int hi = 0;
	for (int nr = 511; nr > 0 && hi == 0; nr--) {
		char *n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
		if (n)
			hi = nr;
		free(n);
	}
	assert_int_equal(eval(AUDIT_ARCH_X86_64, hi + 1, 0, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
	assert_int_equal(eval(AUDIT_ARCH_X86_64, 511, 0, 0, 0), SECCOMP_RET_ERRNO | ENOSYS);
	assert_int_equal(eval(AUDIT_ARCH_X86_64, 512, 0, 0, 0), RET_EPERM);

	uint64_t x = 0x9e3779b97f4a7c15ULL;
	for (int i = 0; i < 200000; i++) {
		uint64_t r = rnd64(&x);
		/* ioctl: denied exactly when the low 32 bits are TIOCSTI or TIOCLINUX. */
		uint64_t cmd = i % 4 == 0   ? (r & 0xffffffff00000000ULL) | (i % 8 ? TIOCSTI : TIOCLINUX)
		               : i % 4 == 1 ? (r & ~0xffULL) | 0x12 /* near TIOCSTI */
		                            : r;
		uint32_t lo = (uint32_t)cmd;
		uint32_t want = lo == TIOCSTI || lo == TIOCLINUX ? RET_EPERM : SECCOMP_RET_ALLOW;
		assert_int_equal(eval(AUDIT_ARCH_X86_64, SYS_ioctl, 3, cmd, 0), want);
		/* clone: allowed exactly when no namespace flag is set. */
		uint64_t fl = r & (i % 2 ? ~0x7E020000ULL : ~0ULL);
		want = (fl & 0x7E020000ULL) == 0 ? SECCOMP_RET_ALLOW : RET_EPERM;
		assert_int_equal(eval(AUDIT_ARCH_X86_64, SYS_clone, fl, 0, 0), want);
		/* socket: family in the low 32 bits, netlink only with protocol 0. */
		uint64_t fam = (r & 0xffffffff00000000ULL) | (r % 48), proto = (r >> 8) % 3;
		uint32_t f32 = (uint32_t)fam;
		bool ok = f32 == AF_UNIX || f32 == AF_INET || f32 == AF_INET6 ||
		          (f32 == AF_NETLINK && proto == NETLINK_ROUTE);
		assert_int_equal(eval(AUDIT_ARCH_X86_64, SYS_socket, fam, SOCK_STREAM, proto),
		                 ok ? SECCOMP_RET_ALLOW : RET_EPERM);
		/* socket type for the IP families: only type & 0xf counts (the flags and the
		 * high half are ignored); stream and datagram pass, every other type is refused. */
		uint64_t ipfam = (r & 0xffffffff00000000ULL) | (i % 3 ? AF_INET : AF_INET6);
		uint64_t type = (r >> 5) & (i % 5 ? 0xfULL | SOCK_NONBLOCK | SOCK_CLOEXEC : ~0ULL);
		uint32_t t = (uint32_t)type & 0xf;
		want = t == SOCK_STREAM || t == SOCK_DGRAM ? SECCOMP_RET_ALLOW : SECCOMP_RET_ERRNO | ESOCKTNOSUPPORT;
		assert_int_equal(eval(AUDIT_ARCH_X86_64, SYS_socket, ipfam, type, r >> 40), want);
	}
}

/* -------------------------------------------------------------------- policy lists -- */

static void test_policy_unknown_names(void **s)
{
	struct rb_policy p;
	struct rb_bpf b;
	struct rb_error e = {0};
	char *deny[] = {"getpid", "fooo"};
	policy_init(&p, "h1");
	memcpy(p.seccomp_deny, deny, sizeof deny);
	p.n_seccomp_deny = 2;
	assert_int_equal(rb_seccomp_prepare(&p, data_dir, NULL, &b, &e), -1);
	assert_non_null(strstr(e.msg, "unknown syscall `fooo` in policy deny list"));
	assert_null(b.insns);

	char *allow[] = {"barr"};
	policy_init(&p, "h1");
	memcpy(p.seccomp_allow, allow, sizeof allow);
	p.n_seccomp_allow = 1;
	assert_int_equal(rb_seccomp_prepare(&p, data_dir, NULL, &b, &e), -1);
	assert_non_null(strstr(e.msg, "unknown syscall `barr` in policy allow list"));

	char *wholesale[] = {"ioctl"};
	policy_init(&p, "h1");
	memcpy(p.seccomp_allow, wholesale, sizeof wholesale);
	p.n_seccomp_allow = 1;
	assert_int_equal(rb_seccomp_prepare(&p, data_dir, NULL, &b, &e), -1);
	assert_non_null(strstr(e.msg, "`ioctl`"));

	/* Known to libseccomp but not an x86_64 call: denied already, so accepted. */
	char *other_arch[] = {"stime"};
	policy_init(&p, "h1");
	memcpy(p.seccomp_deny, other_arch, sizeof other_arch);
	p.n_seccomp_deny = 1;
	assert_int_equal(rb_seccomp_prepare(&p, data_dir, NULL, &b, &e), 0);
	rb_seccomp_free(&b);
}

static int p_getpid(void *a)
{
	return syscall(SYS_getpid) < 0 ? errno : 0;
}

static void test_policy_deny_overrides_allow(void **s)
{
	struct rb_policy p;
	struct rb_bpf b;
	struct rb_error e = {0};
	char *both[] = {"getpid"};
	policy_init(&p, "h2");
	memcpy(p.seccomp_deny, both, sizeof both);
	memcpy(p.seccomp_allow, both, sizeof both);
	p.n_seccomp_deny = p.n_seccomp_allow = 1;
	assert_int_equal(rb_seccomp_prepare(&p, data_dir, NULL, &b, &e), 0);
	assert_int_equal(in_child(&b, p_getpid, NULL), EPERM);
	assert_int_equal(in_child(&dflt, p_getpid, NULL), 0); /* control: the profile allows it */
	rb_seccomp_free(&b);

	/* allow adds: ptrace(-1, ...) then reaches the kernel (ESRCH), not the filter. */
	char *ptr[] = {"ptrace"};
	policy_init(&p, "h3");
	memcpy(p.seccomp_allow, ptr, sizeof ptr);
	p.n_seccomp_allow = 1;
	assert_int_equal(rb_seccomp_prepare(&p, data_dir, NULL, &b, &e), 0);
	struct sc_args a = {SYS_ptrace, {-1, -1, -1, -1, -1, -1}};
	assert_int_not_equal(in_child(&b, p_syscall, &a), EPERM);
	assert_int_equal(in_child(&dflt, p_syscall, &a), EPERM);
	rb_seccomp_free(&b);
}

/* ----------------------------------------------------------------- profile checks -- */

static char tmp_root[PATH_MAX];

static void write_profile(const char *name, const char *text)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/policy/seccomp/%s.json", tmp_root, name);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void expect_profile_error(const char *name, const char *text, const char *needle)
{
	write_profile(name, text);
	struct rb_policy p;
	struct rb_bpf b;
	struct rb_error e = {0};
	policy_init(&p, "hp");
	snprintf(p.seccomp_profile, sizeof p.seccomp_profile, "%s", name);
	int r = rb_seccomp_prepare(&p, tmp_root, NULL, &b, &e);
	if (r == 0 || !strstr(e.msg, needle))
		print_error("profile %s: got `%s`, want it to contain `%s`\n", name, r == 0 ? "success" : e.msg,
		            needle);
	assert_int_equal(r, -1);
	assert_non_null(strstr(e.msg, needle));
}

static void test_profile_validation(void **s)
{
	snprintf(tmp_root, sizeof tmp_root, "/tmp/rbx-seccomp-test-XXXXXX");
	assert_non_null(mkdtemp(tmp_root));
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof dir, "%s/policy/seccomp", tmp_root);
	struct rb_error e = {0};
	assert_int_equal(rb_mkdir_p(dir, 0700, &e), 0);

	write_profile("ok", "{\"default_errno\":\"EPERM\",\"allow\":[\"read\",\"exit_group\"],"
	                    "\"deny\":[\"ptrace\"],\"errno\":{\"ENOSYS\":[\"clone3\"]}}");
	struct rb_policy p;
	struct rb_bpf b;
	policy_init(&p, "hp");
	snprintf(p.seccomp_profile, sizeof p.seccomp_profile, "ok");
	assert_int_equal(rb_seccomp_prepare(&p, tmp_root, NULL, &b, &e), 0);
	rb_seccomp_free(&b);

	expect_profile_error("k", "{\"default_errno\":\"EPERM\",\"allow\":[],\"alow\":[]}", "unknown key `alow`");
	expect_profile_error("u", "{\"default_errno\":\"EPERM\",\"allow\":[\"read\",\"reed\"]}",
	                     "unknown syscall `reed` in `allow`");
	expect_profile_error("a", "{\"default_errno\":\"EPERM\",\"allow\":[\"socketcall\"]}",
	                     "`socketcall` in `allow` is not an x86_64 syscall");
	expect_profile_error("d",
	                     "{\"default_errno\":\"EPERM\",\"allow\":[\"read\"],"
	                     "\"deny\":[\"read\"]}",
	                     "`read` appears in both `allow` and `deny`");
	expect_profile_error("f", "{\"default_errno\":\"EPERM\",\"allow\":[\"ioctl\"]}",
	                     "`ioctl` is filtered by argument");
	expect_profile_error("g", "{\"default_errno\":\"EPERM\",\"allow\":[],\"filtered\":[\"read\"]}",
	                     "no argument filter for `read`");
	expect_profile_error("e", "{\"default_errno\":\"EPREM\",\"allow\":[]}", "unknown errno `EPREM`");
	expect_profile_error("e2",
	                     "{\"default_errno\":\"EPERM\",\"allow\":[],"
	                     "\"errno\":{\"ENOSIS\":[\"clone3\"]}}",
	                     "unknown errno `ENOSIS`");
	expect_profile_error("m", "{\"allow\":[]}", "`default_errno` is required");
	expect_profile_error("j", "{\"default_errno\":\"EPERM\",\"allow\":[}", "line 1");
	expect_profile_error("t", "{\"default_errno\":\"EPERM\",\"allow\":[1]}", "`allow[0]` must be a string");
	expect_profile_error("dup", "{\"default_errno\":\"EPERM\",\"allow\":[],\"allow\":[]}", "duplicate");

	policy_init(&p, "hp");
	snprintf(p.seccomp_profile, sizeof p.seccomp_profile, "missing");
	assert_int_equal(rb_seccomp_prepare(&p, tmp_root, NULL, &b, &e), -1);
	assert_non_null(strstr(e.msg, "missing.json"));
	snprintf(p.seccomp_profile, sizeof p.seccomp_profile, "../x");
	assert_int_equal(rb_seccomp_prepare(&p, tmp_root, NULL, &b, &e), -1);
	assert_non_null(strstr(e.msg, "bad profile name `../x`"));
	assert_int_equal(rb_rm_rf(tmp_root, &e), 0);
}

/* -------------------------------------------------------------------------- cache -- */

static void cache_file(const char *dir, char *out, size_t n)
{
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof cmd, "ls %s/*.bpf", dir);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(out, (int)n, f));
	out[strcspn(out, "\n")] = '\0';
	assert_null(fgets(cmd, sizeof cmd, f)); /* exactly one entry */
	pclose(f);
}

static void prepare_cached(const struct rb_policy *p, const char *cdir, struct rb_bpf *b)
{
	struct rb_error e = {0};
	if (rb_seccomp_prepare(p, data_dir, cdir, b, &e) < 0)
		print_error("prepare: %s\n", e.msg);
	assert_non_null(b->insns);
}

static void assert_same(const struct rb_bpf *a, const struct rb_bpf *b)
{
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->insns, b->insns, a->len * sizeof *a->insns);
}

static void test_cache(void **s)
{
	char root[] = "/tmp/rbx-seccomp-cache-XXXXXX";
	assert_non_null(mkdtemp(root));
	char cdir[PATH_MAX];
	snprintf(cdir, sizeof cdir, "%s/a/b", root); /* does not exist yet: mkdir -p */
	struct rb_policy p;
	policy_init(&p, "cafe");
	struct rb_bpf b1, b2, b3;

	uint64_t t0 = rb_now_us();
	prepare_cached(&p, cdir, &b1);
	uint64_t t1 = rb_now_us();
	prepare_cached(&p, cdir, &b2);
	uint64_t t2 = rb_now_us();
	print_message("seccomp: build+export+store %" PRIu64 " us, cache hit %" PRIu64 " us, %u insns\n", t1 - t0,
	              t2 - t1, b1.len);
	assert_false(b1.from_cache);
	assert_true(b2.from_cache);
	assert_same(&b1, &b2);
	assert_same(&b1, &dflt); /* the uncached build of the same inputs */
	rb_seccomp_free(&b2);

	char path[PATH_MAX];
	cache_file(cdir, path, sizeof path);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal((size_t)st.st_size, b1.len * sizeof *b1.insns);

	/* The cached filter really filters: it denies what the built one denies. */
	prepare_cached(&p, cdir, &b3);
	assert_true(b3.from_cache);
	assert_int_equal(in_child(&b3, p_unshare_user, NULL), EPERM);
	rb_seccomp_free(&b3);

	/* Group/world writable: ignored and rebuilt, and the rebuilt file is private again. */
	assert_int_equal(chmod(path, 0666), 0);
	prepare_cached(&p, cdir, &b3);
	assert_false(b3.from_cache);
	assert_same(&b1, &b3);
	rb_seccomp_free(&b3);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	prepare_cached(&p, cdir, &b3);
	assert_true(b3.from_cache);
	rb_seccomp_free(&b3);

	/* Wrong size (not a multiple of 8): ignored and rebuilt. */
	assert_int_equal(truncate(path, 12), 0);
	prepare_cached(&p, cdir, &b3);
	assert_false(b3.from_cache);
	assert_same(&b1, &b3);
	rb_seccomp_free(&b3);
	/* Too large (more than 4096 instructions). */
	assert_int_equal(truncate(path, 4097 * 8), 0);
	prepare_cached(&p, cdir, &b3);
	assert_false(b3.from_cache);
	rb_seccomp_free(&b3);
	/* A multiple of 8 that is not a filter (zeros). */
	assert_int_equal(truncate(path, 0), 0);
	assert_int_equal(truncate(path, 64), 0);
	prepare_cached(&p, cdir, &b3);
	assert_false(b3.from_cache);
	assert_same(&b1, &b3);
	rb_seccomp_free(&b3);

	/* A symlink in its place is not followed. */
	char other[PATH_MAX + 16];
	snprintf(other, sizeof other, "%s/other", root);
	assert_int_equal(rename(path, other), 0);
	assert_int_equal(symlink(other, path), 0);
	prepare_cached(&p, cdir, &b3);
	assert_false(b3.from_cache);
	rb_seccomp_free(&b3);
	struct stat lst;
	assert_int_equal(lstat(path, &lst), 0);
	assert_true(S_ISREG(lst.st_mode)); /* replaced by a real file */

	/* Owned by someone else. */
	if (!unprivileged) {
		assert_int_equal(chown(path, 65534, 65534), 0);
		prepare_cached(&p, cdir, &b3);
		assert_false(b3.from_cache);
		rb_seccomp_free(&b3);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_uid, 0);
	}

	/* Another policy hash is another key: no hit. */
	struct rb_policy q;
	policy_init(&q, "beef");
	prepare_cached(&q, cdir, &b3);
	assert_false(b3.from_cache);
	assert_same(&b1, &b3);
	rb_seccomp_free(&b3);
	/* Extra names are part of the key too. */
	char *deny[] = {"getpid"};
	memcpy(q.seccomp_deny, deny, sizeof deny);
	q.n_seccomp_deny = 1;
	prepare_cached(&q, cdir, &b3);
	assert_false(b3.from_cache);
	assert_true(b3.len != b1.len || memcmp(b3.insns, b1.insns, b1.len * sizeof *b1.insns) != 0);
	rb_seccomp_free(&b3);

	rb_seccomp_free(&b1);
	struct rb_error e = {0};
	assert_int_equal(rb_rm_rf(root, &e), 0);
}

static void test_apply_rejects_empty(void **s)
{
	struct rb_bpf none = {0};
	assert_int_equal(rb_seccomp_apply(&none), -EINVAL);
	assert_int_equal(rb_seccomp_apply(NULL), -EINVAL);
}

/* ------------------------------------------------------------------------- main -- */

/* Root in the initial user namespace (not `unshare -r`, whose root owns nothing). */
static bool host_root(void)
{
	char buf[128] = "";
	FILE *f = fopen("/proc/self/uid_map", "r");
	if (!f)
		return false;
	bool whole = fgets(buf, sizeof buf, f) && strcmp(buf, "         0          0 4294967295\n") == 0;
	fclose(f);
	return geteuid() == 0 && whole;
}

static int setup(void **s)
{
	unprivileged = !host_root();
	if (access("policy/seccomp/default.json", R_OK) == 0) {
		snprintf(data_dir, sizeof data_dir, ".");
	} else {
		/* build/unit/test_seccomp -> the source tree two levels up */
		ssize_t n = readlink("/proc/self/exe", data_dir, sizeof data_dir - 1);
		if (n <= 0)
			return -1;
		data_dir[n] = '\0';
		for (int i = 0; i < 3; i++) {
			char *slash = strrchr(data_dir, '/');
			if (!slash)
				return -1;
			*slash = '\0';
		}
	}
	struct rb_policy p;
	policy_init(&p, "cafe");
	struct rb_error e = {0};
	if (rb_seccomp_prepare(&p, data_dir, NULL, &dflt, &e) < 0) {
		fprintf(stderr, "default profile: %s\n", e.msg);
		return -1;
	}
	return dflt.from_cache ? -1 : 0;
}

static int teardown(void **s)
{
	rb_seccomp_free(&dflt);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_normal_userland_runs),
	    cmocka_unit_test(test_namespaces_denied),
	    cmocka_unit_test(test_socket_families),
	    cmocka_unit_test(test_socket_types),
	    cmocka_unit_test(test_tty_ioctls),
	    cmocka_unit_test(test_ioctl_sweep),
	    cmocka_unit_test(test_personality),
	    cmocka_unit_test(test_must_deny_list),
	    cmocka_unit_test(test_named_exploit_primitives),
	    cmocka_unit_test(test_compat_arches_killed),
	    cmocka_unit_test(test_filter_logic),
	    cmocka_unit_test(test_policy_unknown_names),
	    cmocka_unit_test(test_policy_deny_overrides_allow),
	    cmocka_unit_test(test_profile_validation),
	    cmocka_unit_test(test_cache),
	    cmocka_unit_test(test_apply_rejects_empty),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

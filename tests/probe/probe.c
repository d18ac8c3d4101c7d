/* probe: the in-sandbox test probe. `probe NAME [ARGS]` performs one operation and exits
 * with the errno it met (0 = it succeeded), so the same call can be run inside the sandbox
 * and outside it as the negative control. Static, libc only, one file, table-driven.
 *
 * Exit codes: 0 success; 1..199 the errno met (predicates such as `caps-zero` exit 1 for
 * "false"); 200 unknown operation; 202 bad arguments. One line on stderr on failure. */
#define _GNU_SOURCE
/* Every operation has the table's signature; most ignore some of it. */
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/kcmp.h>
#include <linux/keyctl.h>
#include <linux/mount.h>
#include <linux/perf_event.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FALSE   1   /* a predicate did not hold */
#define EXIT_UNKNOWN 200 /* no such operation */
#define EXIT_USAGE   202 /* bad arguments */

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif
#ifndef NETLINK_ROUTE
#define NETLINK_ROUTE 0
#endif
#ifndef NETLINK_AUDIT
#define NETLINK_AUDIT 9
#endif

/* errno as an exit code; never 0 when a call reported failure. */
static int err(void)
{
	return errno > 0 && errno < EXIT_UNKNOWN ? errno : EIO;
}

static long num(const char *s)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 0);
	if (errno || *s == '\0' || *end != '\0') {
		fprintf(stderr, "probe: not a number: %s\n", s);
		exit(EXIT_USAGE);
	}
	return v;
}

/* Runs fn in a forked child and returns the child's exit code (or 128+signal). Lets the
 * probe do things (setsid, attach) to itself without changing the caller. */
static int in_child(int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	if (pid < 0)
		return err();
	if (pid == 0)
		_exit(fn(arg));
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return err();
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- files ---- */

static int op_open(int argc, char **argv)
{
	int flags = O_RDONLY;
	if (argc > 1)
		flags = !strcmp(argv[1], "w") ? O_WRONLY : !strcmp(argv[1], "rw") ? O_RDWR : O_RDONLY;
	int fd = open(argv[0], flags | O_CLOEXEC);
	if (fd < 0)
		return err();
	close(fd);
	return 0;
}

static int op_read(int argc, char **argv)
{
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err();
	char buf[4096];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
			return EIO;
	int rc = n < 0 ? err() : 0;
	close(fd);
	return rc;
}

/* 0 if PATH is an empty file (reads 0 bytes) or an empty directory; 1 if not. */
static int op_empty(int argc, char **argv)
{
	struct stat st;
	if (stat(argv[0], &st) < 0)
		return err();
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(argv[0]);
		if (!d)
			return err();
		int n = 0;
		for (struct dirent *e; (e = readdir(d));)
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				n++;
		closedir(d);
		printf("%d entries\n", n);
		return n ? EXIT_FALSE : 0;
	}
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return err();
	char buf[256];
	ssize_t n = read(fd, buf, sizeof buf);
	int rc = n < 0 ? err() : 0;
	close(fd);
	if (rc)
		return rc;
	printf("%zd bytes\n", n);
	return n ? EXIT_FALSE : 0;
}

static int op_write(int argc, char **argv)
{
	int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return err();
	size_t len = strlen(argv[1]);
	int rc = write(fd, argv[1], len) == (ssize_t)len ? 0 : err();
	if (close(fd) < 0 && !rc)
		rc = err();
	return rc;
}

static int op_stat(int argc, char **argv)
{
	struct stat st;
	if (lstat(argv[0], &st) < 0)
		return err();
	printf("uid=%u gid=%u mode=%o size=%jd\n", (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)st.st_mode,
	       (intmax_t)st.st_size);
	return 0;
}

static int op_mkdir(int argc, char **argv)
{
	return mkdir(argv[0], 0755) < 0 ? err() : 0;
}
static int op_chdir(int argc, char **argv)
{
	return chdir(argv[0]) < 0 ? err() : 0;
}
static int op_chroot(int argc, char **argv)
{
	return chroot(argv[0]) < 0 ? err() : 0;
}

static int op_cwd(int argc, char **argv)
{
	char buf[PATH_MAX];
	if (!getcwd(buf, sizeof buf))
		return err();
	puts(buf);
	return 0;
}

/* ---- namespaces ---- */

static int op_unshare_user(int argc, char **argv)
{
	return unshare(CLONE_NEWUSER) < 0 ? err() : 0;
}
static int op_unshare_net(int argc, char **argv)
{
	return unshare(CLONE_NEWNET) < 0 ? err() : 0;
}
static int op_unshare_mnt(int argc, char **argv)
{
	return unshare(CLONE_NEWNS) < 0 ? err() : 0;
}

static int op_setns(int argc, char **argv)
{
	int fd = open(argv[0], O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err();
	int rc = setns(fd, 0) < 0 ? err() : 0;
	close(fd);
	return rc;
}

static int reap(pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) < 0)
		return err();
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int op_clone_newns(int argc, char **argv)
{
	long pid = syscall(SYS_clone, CLONE_NEWNS | SIGCHLD, 0, 0, 0, 0);
	if (pid < 0)
		return err();
	if (pid == 0)
		_exit(0);
	return reap((pid_t)pid);
}

static int op_clone3(int argc, char **argv)
{
	struct clone_args ca;
	memset(&ca, 0, sizeof ca);
	ca.exit_signal = SIGCHLD;
	long pid = syscall(SYS_clone3, &ca, sizeof ca);
	if (pid < 0)
		return err();
	if (pid == 0)
		_exit(0);
	return reap((pid_t)pid);
}

static int op_fork(int argc, char **argv)
{
	pid_t pid = fork();
	if (pid < 0)
		return err();
	if (pid == 0)
		_exit(0);
	return reap(pid);
}

static int op_nsinfo(int argc, char **argv)
{
	static const char *const ns[] = {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"};
	for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
		char path[64], link[128];
		snprintf(path, sizeof path, "/proc/self/ns/%s", ns[i]);
		ssize_t n = readlink(path, link, sizeof link - 1);
		if (n < 0)
			return err();
		link[n] = '\0';
		printf("%s\n", link);
	}
	return 0;
}

/* ---- mounts ---- */

/* A mount that succeeds is undone at once, so a control run on the host leaves nothing. */
static int mounted(const char *dir, int rc)
{
	if (rc == 0)
		umount2(dir, MNT_DETACH);
	return rc;
}

static int op_mount_tmpfs(int argc, char **argv)
{
	return mounted(argv[0], mount("tmpfs", argv[0], "tmpfs", 0, "size=1m") < 0 ? err() : 0);
}

static int op_mount_proc(int argc, char **argv)
{
	return mounted(argv[0], mount("proc", argv[0], "proc", 0, NULL) < 0 ? err() : 0);
}

/* CVE-2022-0492: a cgroup v1 hierarchy (release_agent) mounted from a user namespace. */
static int op_mount_cgroup1(int argc, char **argv)
{
	const char *opts = argc > 1 ? argv[1] : "rdma";
	return mounted(argv[0], mount("cgroup", argv[0], "cgroup", 0, opts) < 0 ? err() : 0);
}

static int op_fsopen(int argc, char **argv)
{
	long fd = syscall(SYS_fsopen, argv[0], 0);
	if (fd < 0)
		return err();
	close((int)fd);
	return 0;
}

static int op_open_tree(int argc, char **argv)
{
	long fd = syscall(SYS_open_tree, AT_FDCWD, argv[0], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return err();
	close((int)fd);
	return 0;
}

/* No args: a move_mount the kernel rejects (EBADF) unless a filter answers first.
 * SRC DST: clone SRC and attach it at DST for real (then detach it). */
static int op_move_mount(int argc, char **argv)
{
	if (argc < 2)
		return syscall(SYS_move_mount, -1, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0 ? err() : 0;
	long fd = syscall(SYS_open_tree, AT_FDCWD, argv[0], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return err();
	int rc = syscall(SYS_move_mount, (int)fd, "", AT_FDCWD, argv[1], MOVE_MOUNT_F_EMPTY_PATH) < 0 ? err() : 0;
	close((int)fd);
	return mounted(argv[1], rc);
}

/* Paths that do not exist: the kernel says ENOENT, a filter says EPERM; nothing pivots. */
static int op_pivot_root(int argc, char **argv)
{
	return syscall(SYS_pivot_root, "/nonexistent-rbx-probe", "/nonexistent-rbx-probe") < 0 ? err() : 0;
}

/* ---- dangerous kernel interfaces ---- */

static int op_keyctl(int argc, char **argv)
{
	return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0) < 0 ? err() : 0;
}

static int op_bpf(int argc, char **argv)
{
	union bpf_attr a;
	memset(&a, 0, sizeof a);
	a.map_type = BPF_MAP_TYPE_ARRAY;
	a.key_size = 4;
	a.value_size = 4;
	a.max_entries = 1;
	long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &a, sizeof a);
	if (fd < 0)
		return err();
	close((int)fd);
	return 0;
}

static int op_perf_event_open(int argc, char **argv)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd < 0)
		return err();
	close((int)fd);
	return 0;
}

static int op_userfaultfd(int argc, char **argv)
{
	long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
	if (fd < 0)
		return err();
	close((int)fd);
	return 0;
}

static int op_io_uring_setup(int argc, char **argv)
{
	struct io_uring_params p;
	memset(&p, 0, sizeof p);
	long fd = syscall(SYS_io_uring_setup, 1, &p);
	if (fd < 0)
		return err();
	close((int)fd);
	return 0;
}

static int sleeper(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return pid;
}

static void stop_sleeper(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* With no PID, attach to a child of our own, which any kernel allows. */
static int op_ptrace_attach(int argc, char **argv)
{
	pid_t pid = argc > 0 ? (pid_t)num(argv[0]) : sleeper();
	if (pid < 0)
		return err();
	int rc = 0;
	if (ptrace(PTRACE_ATTACH, pid, 0, 0) < 0)
		rc = err();
	else {
		waitpid(pid, NULL, __WALL);
		ptrace(PTRACE_DETACH, pid, 0, 0);
	}
	if (argc == 0)
		stop_sleeper(pid);
	return rc;
}

static int op_process_vm_readv(int argc, char **argv)
{
	pid_t pid = argc > 0 ? (pid_t)num(argv[0]) : getpid();
	static char src[16] = "probe";
	char dst[16];
	struct iovec l = {dst, sizeof dst}, r = {src, sizeof src};
	return process_vm_readv(pid, &l, 1, &r, 1, 0) < 0 ? err() : 0;
}

static int op_kcmp(int argc, char **argv)
{
	return syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, 0, 0) < 0 ? err() : 0;
}

static int op_pidfd_getfd(int argc, char **argv)
{
	long pfd = syscall(SYS_pidfd_open, getpid(), 0);
	if (pfd < 0)
		return err();
	long fd = syscall(SYS_pidfd_getfd, (int)pfd, 0, 0);
	int rc = fd < 0 ? err() : 0;
	if (fd >= 0)
		close((int)fd);
	close((int)pfd);
	return rc;
}

struct handle {
	struct file_handle fh;
	unsigned char buf[MAX_HANDLE_SZ];
};

static int op_name_to_handle_at(int argc, char **argv)
{
	struct handle h;
	int mount_id;
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	return name_to_handle_at(AT_FDCWD, argv[0], &h.fh, &mount_id, 0) < 0 ? err() : 0;
}

/* The "shocker" call. Uses a real handle of PATH (default /) when it can get one, else a
 * bogus one, so the call itself is always made. */
static int op_open_by_handle_at(int argc, char **argv)
{
	const char *path = argc > 0 ? argv[0] : "/";
	struct handle h;
	int mount_id;
	memset(&h, 0, sizeof h);
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0) < 0) {
		h.fh.handle_bytes = 8;
		h.fh.handle_type = 1;
	}
	int mfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (mfd < 0)
		return err();
	int fd = open_by_handle_at(mfd, &h.fh, O_RDONLY | O_CLOEXEC);
	int rc = fd < 0 ? err() : 0;
	if (fd >= 0)
		close(fd);
	close(mfd);
	return rc;
}

/* ---- sockets and network ---- */

struct sockname {
	const char *name;
	int family, type, proto;
};

static const struct sockname socknames[] = {
    {"packet", AF_PACKET, SOCK_RAW, 0},
    {"alg", AF_ALG, SOCK_SEQPACKET, 0},
    {"vsock", AF_VSOCK, SOCK_STREAM, 0},
    {"netlink-route", AF_NETLINK, SOCK_RAW, NETLINK_ROUTE},
    {"netlink-audit", AF_NETLINK, SOCK_RAW, NETLINK_AUDIT},
    {"inet", AF_INET, SOCK_STREAM, 0},
    {"inet6", AF_INET6, SOCK_STREAM, 0},
    {"unix", AF_UNIX, SOCK_STREAM, 0},
    {"raw", AF_INET, SOCK_RAW, IPPROTO_ICMP},
    {"raw6", AF_INET6, SOCK_RAW, IPPROTO_ICMPV6},
    {"inet-packet", AF_INET, SOCK_PACKET, 0}, /* the kernel makes it an AF_PACKET socket */
};

static int op_socket(int argc, char **argv)
{
	int family, type = SOCK_STREAM, proto = 0;
	const struct sockname *sn = NULL;
	for (size_t i = 0; i < sizeof socknames / sizeof socknames[0]; i++)
		if (!strcmp(argv[0], socknames[i].name))
			sn = &socknames[i];
	if (sn) {
		family = sn->family;
		type = sn->type;
		proto = sn->proto;
	} else {
		family = (int)num(argv[0]);
		if (argc > 1)
			type = (int)num(argv[1]);
		if (argc > 2)
			proto = (int)num(argv[2]);
	}
	int fd = socket(family, type | SOCK_CLOEXEC, proto);
	if (fd < 0)
		return err();
	close(fd);
	return 0;
}

static int parse_addr(const char *host, const char *port, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof *ss);
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	uint16_t p = htons((uint16_t)num(port));
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = p;
		*len = sizeof *in;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = p;
		*len = sizeof *in6;
		return 0;
	}
	fprintf(stderr, "probe: not a numeric address: %s\n", host);
	exit(EXIT_USAGE);
}

/* TCP: a connect bounded by 2 s (ETIMEDOUT); UDP: connect and send one byte. */
static int op_connect(int argc, char **argv)
{
	struct sockaddr_storage ss;
	socklen_t len;
	parse_addr(argv[0], argv[1], &ss, &len);
	bool udp = argc > 2 && !strcmp(argv[2], "udp");
	int fd = socket(ss.ss_family, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err();
	int rc = 0;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINPROGRESS) {
			rc = err();
		} else {
			struct pollfd p = {fd, POLLOUT, 0};
			int n = poll(&p, 1, 2000);
			if (n < 0)
				rc = err();
			else if (n == 0)
				rc = ETIMEDOUT;
			else {
				int soerr = 0;
				socklen_t sl = sizeof soerr;
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
				rc = soerr;
			}
		}
	}
	if (!rc && udp && send(fd, "x", 1, 0) < 0)
		rc = err();
	close(fd);
	return rc;
}

/* A server and a client on 127.0.0.1 inside one process: loopback works. */
static int op_listen_connect(int argc, char **argv)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int rc = 0, s = -1, c = -1, a_fd = -1;
	char ch = 'x', got = 0;
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 || bind(s, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(s, 1) < 0 || getsockname(s, (struct sockaddr *)&a, &len) < 0 ||
	    (c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(c, (struct sockaddr *)&a, sizeof a) < 0 || (a_fd = accept4(s, NULL, NULL, SOCK_CLOEXEC)) < 0 ||
	    write(c, &ch, 1) != 1 || read(a_fd, &got, 1) != 1)
		rc = err();
	else if (got != ch)
		rc = EIO;
	if (a_fd >= 0)
		close(a_fd);
	if (c >= 0)
		close(c);
	if (s >= 0)
		close(s);
	return rc;
}

/* ---- ttys ---- */

struct tty_req {
	unsigned long cmd;
};

/* In a child that is a session leader with the fresh pty as its controlling tty, so that
 * without a filter TIOCSTI is allowed to anyone (legacy_tiocsti=1); only a filter or the
 * sysctl stops it. */
static int tty_child(void *arg)
{
	const struct tty_req *r = arg;
	if (setsid() < 0)
		return err();
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0)
		return err();
	char *name = ptsname(m);
	if (!name)
		return err();
	int s = open(name, O_RDWR | O_CLOEXEC);
	if (s < 0)
		return err();
	ioctl(s, TIOCSCTTY, 0);
	int rc;
	if (r->cmd == TIOCLINUX) {
		char sub = 6; /* TIOCL_GETSHIFTSTATE: harmless; a pty answers EINVAL */
		rc = ioctl(s, TIOCLINUX, &sub) < 0 ? err() : 0;
	} else if (r->cmd == TIOCGWINSZ) {
		struct winsize ws;
		rc = ioctl(s, TIOCGWINSZ, &ws) < 0 ? err() : 0;
	} else {
		char c = '\n';
		rc = ioctl(s, r->cmd, &c) < 0 ? err() : 0;
	}
	return rc;
}

static int op_ioctl_tiocsti(int argc, char **argv)
{
	struct tty_req r = {TIOCSTI};
	if (argc > 0 && !strcmp(argv[0], "high"))
		r.cmd = (0x123UL << 32) | TIOCSTI; /* CVE-2019-10063: beats a 64-bit compare */
	return in_child(tty_child, &r);
}

/* TIOCSTI on the terminal the probe was given as stdin (runbox run -t: the sandbox's pty, its
 * controlling terminal), pushing one harmless byte (a newline). */
static int op_ioctl_tiocsti_stdin(int argc, char **argv)
{
	char c = '\n';
	if (!isatty(0))
		return ENOTTY;
	return ioctl(0, TIOCSTI, &c) < 0 ? err() : 0;
}

static int op_ioctl_tioclinux(int argc, char **argv)
{
	struct tty_req r = {TIOCLINUX};
	return in_child(tty_child, &r);
}

static int op_ioctl_tiocgwinsz(int argc, char **argv)
{
	struct tty_req r = {TIOCGWINSZ};
	return in_child(tty_child, &r);
}

/* ---- syscall ABI ---- */

static int op_personality(int argc, char **argv)
{
	return personality((unsigned long)num(argv[0])) < 0 ? err() : 0;
}

/* getpid through the i386 entry point; a filter that denies compat arches kills us here. */
static int op_int80_getpid(int argc, char **argv)
{
	long ret = 20; /* __NR_getpid on i386 */
	__asm__ volatile("int $0x80" : "+a"(ret) : : "r8", "r9", "r10", "r11", "memory");
	if (ret < 0)
		return (int)-ret;
	printf("%ld\n", ret);
	return 0;
}

static int op_x32_getpid(int argc, char **argv)
{
	long ret = syscall(39 | 0x40000000);
	if (ret < 0)
		return err();
	printf("%ld\n", ret);
	return 0;
}

/* ---- identity and privilege ---- */

static int op_setuid(int argc, char **argv)
{
	return setuid((uid_t)num(argv[0])) < 0 ? err() : 0;
}
static int op_setgid(int argc, char **argv)
{
	return setgid((gid_t)num(argv[0])) < 0 ? err() : 0;
}

/* Value of "Key:" in /proc/self/status, copied into out. */
static int status_field(const char *key, char *out, size_t outlen)
{
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return err();
	char line[256];
	size_t klen = strlen(key);
	int rc = ENOENT;
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			char *v = line + klen + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = '\0';
			snprintf(out, outlen, "%s", v);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

static int op_caps_zero(int argc, char **argv)
{
	static const char *const sets[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	bool zero = true;
	for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) {
		char v[64];
		int rc = status_field(sets[i], v, sizeof v);
		if (rc)
			return rc;
		printf("%s=%s\n", sets[i], v);
		if (strtoull(v, NULL, 16) != 0)
			zero = false;
	}
	return zero ? 0 : EXIT_FALSE;
}

static const char *const capnames[] = {
    "chown",
    "dac_override",
    "dac_read_search",
    "fowner",
    "fsetid",
    "kill",
    "setgid",
    "setuid",
    "setpcap",
    "linux_immutable",
    "net_bind_service",
    "net_broadcast",
    "net_admin",
    "net_raw",
    "ipc_lock",
    "ipc_owner",
    "sys_module",
    "sys_rawio",
    "sys_chroot",
    "sys_ptrace",
    "sys_pacct",
    "sys_admin",
    "sys_boot",
    "sys_nice",
    "sys_resource",
    "sys_time",
    "sys_tty_config",
    "mknod",
    "lease",
    "audit_write",
    "audit_control",
    "setfcap",
    "mac_override",
    "mac_admin",
    "syslog",
    "wake_alarm",
    "block_suspend",
    "audit_read",
    "perfmon",
    "bpf",
    "checkpoint_restore",
};

/* 0 if CapEff holds NAME (cap_sys_admin, sys_admin or a number). */
static int op_caps_has(int argc, char **argv)
{
	const char *n = argv[0];
	if (!strncasecmp(n, "cap_", 4))
		n += 4;
	long bit = -1;
	for (size_t i = 0; i < sizeof capnames / sizeof capnames[0]; i++)
		if (!strcasecmp(n, capnames[i]))
			bit = (long)i;
	if (bit < 0)
		bit = num(n);
	char v[64];
	int rc = status_field("CapEff", v, sizeof v);
	if (rc)
		return rc;
	printf("CapEff=%s\n", v);
	return (strtoull(v, NULL, 16) >> bit) & 1 ? 0 : EXIT_FALSE;
}

static int field_is(const char *key, const char *want)
{
	char v[64];
	int rc = status_field(key, v, sizeof v);
	if (rc)
		return rc;
	printf("%s=%s\n", key, v);
	return strcmp(v, want) ? EXIT_FALSE : 0;
}

static int op_nnp(int argc, char **argv)
{
	return field_is("NoNewPrivs", "1");
}
static int op_seccomp_mode(int argc, char **argv)
{
	return field_is("Seccomp", "2");
}

/* 0 if only fds 0, 1 and 2 are open; prints any other with its target. */
static int op_fds(int argc, char **argv)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return err();
	int self = dirfd(d), extra = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		int fd = atoi(e->d_name);
		if (fd <= 2 || fd == self)
			continue;
		char link[PATH_MAX] = "?";
		ssize_t n = readlinkat(self, e->d_name, link, sizeof link - 1);
		if (n >= 0)
			link[n] = '\0';
		printf("fd %d -> %s\n", fd, link);
		extra++;
	}
	closedir(d);
	return extra ? EXIT_FALSE : 0;
}

static int op_uid(int argc, char **argv)
{
	printf("uid=%u euid=%u\n", (unsigned)getuid(), (unsigned)geteuid());
	return getuid() == (uid_t)num(argv[0]) ? 0 : EXIT_FALSE;
}

static int op_gid(int argc, char **argv)
{
	printf("gid=%u egid=%u\n", (unsigned)getgid(), (unsigned)getegid());
	return getgid() == (gid_t)num(argv[0]) ? 0 : EXIT_FALSE;
}

static int op_pid(int argc, char **argv)
{
	printf("pid=%d ppid=%d\n", (int)getpid(), (int)getppid());
	return getpid() == (pid_t)num(argv[0]) ? 0 : EXIT_FALSE;
}

static int op_hostname(int argc, char **argv)
{
	return sethostname(argv[0], strlen(argv[0])) < 0 ? err() : 0;
}

/* ---- processes ---- */

static int op_ls_pids(int argc, char **argv)
{
	DIR *d = opendir("/proc");
	if (!d)
		return err();
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
			printf("%s\n", e->d_name);
	closedir(d);
	return 0;
}

static int op_kill(int argc, char **argv)
{
	return kill((pid_t)num(argv[0]), (int)num(argv[1])) < 0 ? err() : 0;
}

/* Extra arguments are ignored: tests put a marker there to find the process from the host. */
static int op_sleep_forever(int argc, char **argv)
{
	for (;;)
		pause();
	return 0;
}

/* An attacker's watcher: keeps DIR/NAME holding SRC's bytes. It puts a copy there at once,
 * then, whenever an inotify event on NAME shows other bytes there (someone created, truncated
 * or wrote it), renames a fresh copy over it and prints "swapped N". Runs until killed. */
static bool same_bytes(int dir, const char *name, const char *want, size_t len)
{
	int fd = openat(dir, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	char buf[65536 + 1];
	size_t got = 0;
	for (ssize_t n; got < sizeof buf && (n = read(fd, buf + got, sizeof buf - got)) > 0;)
		got += (size_t)n;
	close(fd);
	return got == len && !memcmp(buf, want, len);
}

static uint64_t now_ms(void);

/* Reads the real uid and the seccomp mode of /proc/PID/status; 0 on success. */
static int pid_status(pid_t pid, uid_t *uid, int *seccomp)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return err();
	int found = 0;
	while (fgets(line, sizeof line, f)) {
		unsigned long v;
		if (sscanf(line, "Uid: %lu", &v) == 1)
			*uid = (uid_t)v, found |= 1;
		else if (sscanf(line, "Seccomp: %lu", &v) == 1)
			*seccomp = (int)v, found |= 2;
	}
	fclose(f);
	return found == 3 ? 0 : ENOENT;
}

/* mem-watch MS FILE: for MS milliseconds, watches every process of this uid and tries once
 * to open its /proc/PID/mem for writing, as a process left behind by an earlier step could.
 * Keeps "window=W breach=B opened=O" in FILE, rewritten as the counts change: W processes
 * were seen between a change of ids and their seccomp filter ("Seccomp: 0"); B times the open
 * succeeded while the filter was still absent (read after the open, so the memory opened was
 * the one before execve); O opens of filtered processes succeeded (the control: same uid,
 * dumpable, so allowed). */
static int op_mem_watch(int argc, char **argv)
{
	uint64_t end = now_ms() + (uint64_t)num(argv[0]);
	static unsigned char in_window[1 << 16], tried[1 << 16];
	unsigned window = 0, breach = 0, opened = 0, reported = ~0U;
	uid_t me = getuid();
	pid_t self = getpid();
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
	while (now_ms() < end) {
		if (window + breach + opened != reported) {
			FILE *f = fopen(tmp, "we");
			if (!f)
				return err();
			fprintf(f, "window=%u breach=%u opened=%u\n", window, breach, opened);
			if (fclose(f) || rename(tmp, argv[1]) < 0)
				return err();
			reported = window + breach + opened;
		}
		DIR *d = opendir("/proc");
		if (!d)
			return err();
		struct dirent *e;
		while ((e = readdir(d))) {
			long pid = strtol(e->d_name, NULL, 10);
			uid_t uid;
			int mode;
			if (pid <= 1 || pid == self || pid >= (1 << 16) || pid_status((pid_t)pid, &uid, &mode) ||
			    uid != me)
				continue;
			if (mode == 0 && !in_window[pid]) {
				in_window[pid] = 1;
				window++;
			}
			if (tried[pid])
				continue;
			char path[64];
			snprintf(path, sizeof path, "/proc/%ld/mem", pid);
			int fd = open(path, O_RDWR | O_CLOEXEC);
			if (fd < 0)
				continue; /* refused: tried again on the next pass, the window may be open */
			tried[pid] = 1;
			if (pid_status((pid_t)pid, &uid, &mode) == 0 && mode == 0)
				breach++;
			else
				opened++;
			close(fd);
		}
		closedir(d);
	}
	return 0;
}

static int op_swap_watch(int argc, char **argv)
{
	static char src[65536];
	int sfd = open(argv[2], O_RDONLY | O_CLOEXEC);
	if (sfd < 0)
		return err();
	ssize_t len = read(sfd, src, sizeof src);
	close(sfd);
	if (len < 0)
		return err();
	int dir = open(argv[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
	int in = inotify_init1(IN_CLOEXEC);
	if (dir < 0 || in < 0 ||
	    inotify_add_watch(in, argv[0], IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_ATTRIB) < 0)
		return err();
	char tmp[NAME_MAX + 1];
	snprintf(tmp, sizeof tmp, ".swap-%.200s", argv[1]);
	unsigned swaps = 0;
	for (bool check = true;;) {
		if (check && !same_bytes(dir, argv[1], src, (size_t)len)) {
			int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
			if (fd < 0 || write(fd, src, (size_t)len) != len)
				return err();
			close(fd);
			if (renameat(dir, tmp, dir, argv[1]) < 0)
				return err();
			printf("swapped %u\n", ++swaps);
			fflush(stdout);
		}
		char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		ssize_t n = read(in, ev, sizeof ev);
		if (n < 0 && errno != EINTR)
			return err();
		check = false;
		for (char *p = ev; n > 0 && p < ev + n;) {
			const struct inotify_event *e = (const struct inotify_event *)p;
			if (e->len && !strcmp(e->name, argv[1]))
				check = true;
			p += sizeof *e + e->len;
		}
	}
}

/* Double fork: the grandchild, reparented to PID 1, writes its pid to FILE and sleeps. */
static int op_daemonize(int argc, char **argv)
{
	pid_t pid = fork();
	if (pid < 0)
		return err();
	if (pid == 0) {
		setsid();
		pid_t gc = fork();
		if (gc != 0)
			_exit(gc < 0 ? 1 : 0);
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		char buf[32];
		int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
		fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			if (write(fd, buf, (size_t)n) != n)
				_exit(1);
			close(fd);
		}
		for (;;)
			pause();
	}
	return reap(pid);
}

static int op_exit(int argc, char **argv)
{
	exit((int)num(argv[0]));
}

static int op_kill_self(int argc, char **argv)
{
	int sig = (int)num(argv[0]);
	signal(sig, SIG_DFL);
	kill(getpid(), sig);
	return err();
}

/* Touch MB mebibytes, one write per page, so they are really charged. */
static int op_alloc(int argc, char **argv)
{
	size_t len = (size_t)num(argv[0]) << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return err();
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	return 0;
}

/* Fork N sleeping children; 0 if every fork worked, else the errno of the first failure.
 * The children die with us. */
static int op_forkbomb(int argc, char **argv)
{
	long n = num(argv[0]);
	pid_t *kids = calloc((size_t)n + 1, sizeof *kids);
	if (!kids)
		return ENOMEM;
	long made = 0;
	int rc = 0;
	for (; made < n; made++) {
		pid_t pid = fork();
		if (pid < 0) {
			rc = err();
			break;
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
		kids[made] = pid;
	}
	printf("forked %ld of %ld\n", made, n);
	for (long i = 0; i < made; i++)
		stop_sleeper(kids[i]);
	free(kids);
	return rc;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int op_busy(int argc, char **argv)
{
	uint64_t end = now_ms() + (uint64_t)num(argv[0]);
	volatile uint64_t x = 0;
	while (now_ms() < end)
		x++;
	return 0;
}

/* Write MB mebibytes to PATH (0: until an error); exits with the write's errno. */
static int op_write_fill(int argc, char **argv)
{
	long mb = num(argv[1]);
	int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return err();
	static char buf[1 << 20];
	memset(buf, 'x', sizeof buf);
	int rc = 0;
	for (long i = 0; mb == 0 || i < mb; i++) {
		ssize_t n = write(fd, buf, sizeof buf);
		if (n != (ssize_t)sizeof buf) {
			rc = n < 0 ? err() : ENOSPC;
			break;
		}
	}
	if (close(fd) < 0 && !rc)
		rc = err();
	return rc;
}

/* ---- the table ---- */

struct op {
	const char *name;
	int min_args;
	const char *args;
	int (*fn)(int argc, char **argv);
	bool predicate; /* exit 1 means "false", not EPERM */
};

/* For the VM test, which has no setpriv that changes ids: become UID:GID (no supplementary
 * groups) and exec PROG. Returns only when that failed. */
static int op_exec_as(int argc, char **argv)
{
	uid_t u = (uid_t)strtoul(argv[0], NULL, 10);
	gid_t g = (gid_t)strtoul(argv[1], NULL, 10);
	if (setgroups(0, NULL) < 0 || setresgid(g, g, g) < 0 || setresuid(u, u, u) < 0)
		return err();
	execvp(argv[2], argv + 2);
	return err();
}

static const struct op ops[] = {
    {"open", 1, "PATH [r|w|rw]", op_open, false},
    {"read", 1, "PATH", op_read, false},
    {"empty", 1, "PATH", op_empty, true},
    {"write", 2, "PATH TEXT", op_write, false},
    {"stat", 1, "PATH", op_stat, false},
    {"mkdir", 1, "PATH", op_mkdir, false},
    {"chdir", 1, "PATH", op_chdir, false},
    {"chroot", 1, "DIR", op_chroot, false},
    {"cwd", 0, "", op_cwd, false},
    {"unshare-user", 0, "", op_unshare_user, false},
    {"unshare-net", 0, "", op_unshare_net, false},
    {"unshare-mnt", 0, "", op_unshare_mnt, false},
    {"setns", 1, "PATH", op_setns, false},
    {"clone-newns", 0, "", op_clone_newns, false},
    {"clone3", 0, "", op_clone3, false},
    {"fork", 0, "", op_fork, false},
    {"nsinfo", 0, "", op_nsinfo, false},
    {"mount-tmpfs", 1, "DIR", op_mount_tmpfs, false},
    {"mount-proc", 1, "DIR", op_mount_proc, false},
    {"mount-cgroup1", 1, "DIR [OPTS]", op_mount_cgroup1, false},
    {"fsopen", 1, "TYPE", op_fsopen, false},
    {"open-tree", 1, "PATH", op_open_tree, false},
    {"move-mount", 0, "[SRC DST]", op_move_mount, false},
    {"pivot-root", 0, "", op_pivot_root, false},
    {"keyctl", 0, "", op_keyctl, false},
    {"bpf", 0, "", op_bpf, false},
    {"perf-event-open", 0, "", op_perf_event_open, false},
    {"userfaultfd", 0, "", op_userfaultfd, false},
    {"io-uring-setup", 0, "", op_io_uring_setup, false},
    {"ptrace-attach", 0, "[PID]", op_ptrace_attach, false},
    {"process-vm-readv", 0, "[PID]", op_process_vm_readv, false},
    {"kcmp", 0, "", op_kcmp, false},
    {"pidfd-getfd", 0, "", op_pidfd_getfd, false},
    {"name-to-handle-at", 1, "PATH", op_name_to_handle_at, false},
    {"open-by-handle-at", 0, "[PATH]", op_open_by_handle_at, false},
    {"socket", 1,
     "FAMILY [TYPE [PROTO]] | packet|alg|vsock|netlink-route|netlink-audit|inet|"
     "inet6|unix|raw|raw6|inet-packet",
     op_socket, false},
    {"connect", 2, "HOST PORT [tcp|udp]", op_connect, false},
    {"listen-connect", 0, "", op_listen_connect, false},
    {"ioctl-tiocsti", 0, "[high]", op_ioctl_tiocsti, false},
    {"ioctl-tiocsti-stdin", 0, "", op_ioctl_tiocsti_stdin, false},
    {"ioctl-tioclinux", 0, "", op_ioctl_tioclinux, false},
    {"ioctl-tiocgwinsz", 0, "", op_ioctl_tiocgwinsz, false},
    {"personality", 1, "N", op_personality, false},
    {"int80-getpid", 0, "", op_int80_getpid, false},
    {"x32-getpid", 0, "", op_x32_getpid, false},
    {"setuid", 1, "N", op_setuid, false},
    {"setgid", 1, "N", op_setgid, false},
    {"caps-zero", 0, "", op_caps_zero, true},
    {"caps-has", 1, "NAME", op_caps_has, true},
    {"nnp", 0, "", op_nnp, true},
    {"seccomp-mode", 0, "", op_seccomp_mode, true},
    {"fds", 0, "", op_fds, true},
    {"uid", 1, "N", op_uid, true},
    {"gid", 1, "N", op_gid, true},
    {"pid", 1, "N", op_pid, true},
    {"hostname", 1, "NAME", op_hostname, false},
    {"ls-pids", 0, "", op_ls_pids, false},
    {"kill", 2, "PID SIG", op_kill, false},
    {"sleep-forever", 0, "[MARKER]", op_sleep_forever, false},
    {"daemonize", 1, "FILE [MARKER]", op_daemonize, false},
    {"swap-watch", 3, "DIR NAME SRC [MARKER]", op_swap_watch, false},
    {"mem-watch", 2, "MS FILE", op_mem_watch, false},
    {"exit", 1, "N", op_exit, false},
    {"kill-self", 1, "SIG", op_kill_self, false},
    {"alloc", 1, "MB", op_alloc, false},
    {"forkbomb", 1, "N", op_forkbomb, false},
    {"busy", 1, "MS", op_busy, false},
    {"write-fill", 2, "PATH MB", op_write_fill, false},
    {"exec-as", 3, "UID GID PROG [ARGS]", op_exec_as, false},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: probe NAME [ARGS]; exit code = errno met (0 = success)\n");
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
		fprintf(f, "  %s %s\n", ops[i].name, ops[i].args);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "list")) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		const struct op *o = &ops[i];
		if (strcmp(argv[1], o->name))
			continue;
		if (argc - 2 < o->min_args) {
			fprintf(stderr, "usage: probe %s %s\n", o->name, o->args);
			return EXIT_USAGE;
		}
		int rc = o->fn(argc - 2, argv + 2);
		fflush(stdout);
		if (rc == EXIT_FALSE && o->predicate)
			fprintf(stderr, "probe %s: false\n", o->name);
		else if (rc > 0 && rc < EXIT_UNKNOWN)
			fprintf(stderr, "probe %s: %s\n", o->name, strerror(rc));
		else if (rc)
			fprintf(stderr, "probe %s: exit %d\n", o->name, rc);
		return rc;
	}
	fprintf(stderr, "probe: unknown operation %s\n", argv[1]);
	return EXIT_UNKNOWN;
}

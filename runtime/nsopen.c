/* The helper that opens files from inside the sandbox's user namespace (see nsopen.h). */
#define _GNU_SOURCE
#include "runtime/nsopen.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"

struct request {
	uint64_t flags;
	uint64_t resolve;
	char name[256];
};

struct reply {
	int32_t errnum; /* 0: the fd came with it */
};

/* Sends buf (and fd when >= 0) as one datagram. */
static int send_with_fd(int sock, const void *buf, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&ctl, 0, sizeof ctl);
		m.msg_control = ctl.b;
		m.msg_controllen = sizeof ctl.b;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -1;
}

/* Receives one datagram of exactly len bytes into buf; *fd gets the fd that came with it, or
 * -1. Returns 0, or -1 (error, short datagram, or the other end gone). */
static int recv_with_fd(int sock, void *buf, size_t len, int *fd)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
	*fd = -1;
	ssize_t n;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len >= CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof *fd);
	if (n != (ssize_t)len || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	return 0;
}

__attribute__((noreturn)) static void helper(int sock, int userns_fd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* Nothing else of the runner's: only the socket and the namespace stay open. */
	for (int fd = 0; fd < 3; fd++)
		if (fd != sock && fd != userns_fd)
			close(fd);
	int keep_lo = sock < userns_fd ? sock : userns_fd, keep_hi = sock < userns_fd ? userns_fd : sock;
	syscall(SYS_close_range, 3, keep_lo - 1, 0);
	syscall(SYS_close_range, keep_lo + 1, keep_hi - 1, 0);
	syscall(SYS_close_range, keep_hi + 1, ~0U, 0);
	struct reply rep = {0};
	if (setns(userns_fd, CLONE_NEWUSER) < 0)
		rep.errnum = errno;
	close(userns_fd);
	for (;;) {
		struct request req;
		int dirfd;
		if (recv_with_fd(sock, &req, sizeof req, &dirfd) < 0)
			_exit(0); /* the runner is gone, or spoke nonsense */
		int fd = -1;
		struct reply r = rep;
		req.name[sizeof req.name - 1] = '\0';
		if (!r.errnum && (dirfd < 0 || strchr(req.name, '/')))
			r.errnum = EINVAL; /* one component below the directory it sent, nothing else */
		if (!r.errnum) {
			struct open_how how = {.flags = req.flags | O_CLOEXEC | O_NOFOLLOW,
			                       .resolve = req.resolve | RESOLVE_BENEATH};
			fd = (int)syscall(SYS_openat2, dirfd, req.name, &how, sizeof how);
			if (fd < 0)
				r.errnum = errno;
		}
		if (dirfd >= 0)
			close(dirfd);
		if (send_with_fd(sock, &r, sizeof r, fd) < 0)
			_exit(0);
		if (fd >= 0)
			close(fd);
	}
}

int rb_nsopener_prepare(struct rb_nsopener *o, int userns_fd, struct rb_error *err)
{
	*o = (struct rb_nsopener)RB_NSOPENER_INIT;
	if (userns_fd < 0)
		return rb_error_set(err, EBADF, "the sandbox's user namespace is not known");
	o->userns_fd = fcntl(userns_fd, F_DUPFD_CLOEXEC, 3);
	if (o->userns_fd < 0)
		return rb_error_set(err, errno, "dup the sandbox's user namespace fd");
	return 0;
}

static int start(struct rb_nsopener *o)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	/* The runner is single-threaded when it harvests, so a fork is safe; the helper only
	 * ever opens files and passes them back. */
	pid_t pid = fork();
	if (pid < 0) {
		close(sp[0]);
		close(sp[1]);
		return -1;
	}
	if (pid == 0) {
		close(sp[0]);
		helper(sp[1], o->userns_fd);
	}
	close(sp[1]);
	o->pid = pid;
	o->sock = sp[0];
	return 0;
}

int rb_nsopener_open(void *ctx, int dirfd, const char *name, uint64_t flags, uint64_t resolve)
{
	struct rb_nsopener *o = ctx;
	if (!o || o->failed || o->userns_fd < 0 || strlen(name) >= sizeof((struct request *)0)->name) {
		errno = EACCES;
		return -1;
	}
	if (o->pid < 0 && start(o) < 0) {
		o->failed = true;
		errno = EACCES;
		return -1;
	}
	struct request req = {.flags = flags, .resolve = resolve};
	snprintf(req.name, sizeof req.name, "%s", name);
	struct reply rep;
	int fd = -1;
	if (send_with_fd(o->sock, &req, sizeof req, dirfd) < 0 || recv_with_fd(o->sock, &rep, sizeof rep, &fd) < 0) {
		o->failed = true;
		errno = EACCES;
		return -1;
	}
	if (rep.errnum) {
		if (fd >= 0)
			close(fd);
		errno = rep.errnum;
		return -1;
	}
	if (fd < 0)
		errno = EIO;
	return fd;
}

void rb_nsopener_close(struct rb_nsopener *o)
{
	if (o->sock >= 0)
		close(o->sock); /* the helper reads EOF and exits */
	if (o->pid > 0)
		while (waitpid(o->pid, NULL, 0) < 0 && errno == EINTR)
			;
	if (o->userns_fd >= 0)
		close(o->userns_fd);
	*o = (struct rb_nsopener)RB_NSOPENER_INIT;
}

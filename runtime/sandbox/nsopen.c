/* The helper that opens files from inside the sandbox's user namespace (see nsopen.h). */
#define _GNU_SOURCE
#include "runtime/sandbox/nsopen.h"

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
#include "common/util.h"
#include "runtime/sandbox/channel.h"

/* The protocol, on the control channel's framing (runtime/sandbox/channel.c): a request
 * {"name", "flags", "resolve"} with the directory fd attached; a reply {"errno"}, with the
 * opened fd attached when errno is 0. */

__attribute__((noreturn)) static void helper(int sock, int userns_fd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* A copy of the runner's memory (the run token's key among it) about to live in the
	 * sandbox's user namespace: nothing may read it, even if it could name this process. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	int joined = setns(userns_fd, CLONE_NEWUSER) < 0 ? errno : 0;
	/* Nothing else of the runner's stays open: only the socket. */
	rb_close_except(0, &sock, 1);
	for (;;) {
		json_t *req = NULL;
		int fds[RB_CHAN_MAX_FDS];
		unsigned n_fds = 0;
		struct rb_error err;
		if (rb_chan_recv(sock, &req, fds, &n_fds, &err) <= 0)
			_exit(0); /* the runner is gone */
		const char *name = json_string_value(json_object_get(req, "name"));
		int e = joined;
		int fd = -1;
		if (!e && (n_fds != 1 || !name || strchr(name, '/')))
			e = EINVAL; /* one name below the one directory it was sent, nothing else */
		if (!e) {
			struct open_how how = {
			    .flags =
			        (uint64_t)json_integer_value(json_object_get(req, "flags")) | O_CLOEXEC | O_NOFOLLOW,
			    .resolve = (uint64_t)json_integer_value(json_object_get(req, "resolve")) | RESOLVE_BENEATH};
			fd = (int)syscall(SYS_openat2, fds[0], name, &how, sizeof how);
			if (fd < 0)
				e = errno;
		}
		for (unsigned i = 0; i < n_fds; i++)
			close(fds[i]);
		json_decref(req);
		json_t *rep = json_pack("{s:i}", "errno", e);
		int r = rb_chan_send(sock, rep, &fd, fd >= 0 ? 1 : 0, &err);
		json_decref(rep);
		if (fd >= 0)
			close(fd);
		if (r < 0)
			_exit(0);
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
	if (!o || o->failed || o->userns_fd < 0) {
		errno = EACCES;
		return -1;
	}
	if (o->pid < 0 && start(o) < 0) {
		o->failed = true;
		errno = EACCES;
		return -1;
	}
	json_t *req =
	    json_pack("{s:s, s:I, s:I}", "name", name, "flags", (json_int_t)flags, "resolve", (json_int_t)resolve);
	json_t *rep = NULL;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n_fds = 0;
	struct rb_error err;
	int r = req ? rb_chan_send(o->sock, req, &dirfd, 1, &err) : -1;
	json_decref(req);
	if (r < 0 || rb_chan_recv(o->sock, &rep, fds, &n_fds, &err) <= 0) {
		o->failed = true;
		errno = EACCES;
		return -1;
	}
	int e = (int)json_integer_value(json_object_get(rep, "errno"));
	json_decref(rep);
	for (unsigned i = 1; i < n_fds; i++)
		close(fds[i]);
	if (e || n_fds == 0) {
		if (n_fds > 0)
			close(fds[0]);
		errno = e ? e : EIO;
		return -1;
	}
	return fds[0];
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

/* Starting, watching and stopping runbox-gateway for one run (see gwproc.h). */
#define _GNU_SOURCE
#include "runtime/run/gwproc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/paths.h"
#include "common/util.h"

/* The gateway's fds: 0 /dev/null, 1 its counts, 3 the config, then the listeners, then the
 * readiness pipe (named in the config as ready_fd). */
#define CONFIG_FD       3
#define FIRST_LISTEN_FD 4
#define MAX_LISTEN_FDS  8

/* "exited with status 3", "was killed by signal 9" */
static void describe(int status, char *buf, size_t n)
{
	if (WIFSIGNALED(status))
		snprintf(buf, n, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
}

/* ru (may be NULL) gets the gateway's own CPU time, part of the run's host cost. */
static int reap(pid_t pid, struct rusage *ru)
{
	int status = 0;
	while (wait4(pid, &status, 0, ru) < 0 && errno == EINTR)
		;
	return status;
}

/* In the child between fork and exec: only async-signal-safe calls. The errno of a failure
 * goes to efd (CLOEXEC: an exec that works closes it, which the parent reads as EOF). */
static _Noreturn void child(const char *bin, int cfg_fd, int out_fd, int ready_fd, int efd, const int *fds,
                            unsigned n_fds)
{
	/* Every source fd first moves above the targets, so no dup2 clobbers another. */
	int moved[MAX_LISTEN_FDS];
	cfg_fd = fcntl(cfg_fd, F_DUPFD, 64);
	out_fd = fcntl(out_fd, F_DUPFD, 64);
	ready_fd = fcntl(ready_fd, F_DUPFD, 64);
	efd = fcntl(efd, F_DUPFD_CLOEXEC, 64);
	for (unsigned i = 0; i < n_fds; i++)
		moved[i] = fcntl(fds[i], F_DUPFD, 64);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int target_ready = FIRST_LISTEN_FD + (int)n_fds;
	bool ok = cfg_fd >= 0 && out_fd >= 0 && ready_fd >= 0 && efd >= 0 && null >= 0 && dup2(null, 0) == 0 &&
	          dup2(out_fd, 1) == 1 && dup2(cfg_fd, CONFIG_FD) == CONFIG_FD;
	for (unsigned i = 0; ok && i < n_fds; i++)
		ok = moved[i] >= 0 && dup2(moved[i], FIRST_LISTEN_FD + (int)i) >= 0;
	ok = ok && dup2(ready_fd, target_ready) == target_ready;
	if (ok)
		ok = (efd = dup3(efd, target_ready + 1, O_CLOEXEC)) >= 0;
	if (ok) {
		closefrom(target_ready + 2);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execl(bin, "runbox-gateway", (char *)NULL);
	}
	int e = errno ? errno : EBADF;
	if (efd >= 0) {
		ssize_t w = write(efd, &e, sizeof e);
		(void)w;
	}
	_exit(127);
}

/* Waits for the readiness byte; the gateway's exit (pidfd) or the deadline ends the wait. */
static int await_ready(int ready_fd, int pidfd, pid_t pid, const char *bin, struct rb_error *err)
{
	uint64_t deadline = rb_now_us() + (uint64_t)RB_GWPROC_READY_MS * 1000;
	for (;;) {
		uint64_t now = rb_now_us();
		if (now >= deadline)
			break;
		struct pollfd p[2] = {{.fd = ready_fd, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
		int r = poll(p, 2, (int)((deadline - now + 999) / 1000));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return rb_error_set(err, errno, "gateway `%s`: poll for readiness", bin);
		if (r == 0)
			break;
		if (p[0].revents) {
			char c;
			ssize_t n = read(ready_fd, &c, 1);
			if (n == 1)
				return 0;
			if (n < 0 && errno == EINTR)
				continue;
		}
		/* EOF on the readiness pipe, or the process is gone: it ended before serving. */
		char how[64];
		kill(pid, SIGKILL); /* not reaped yet, so pid is still ours */
		describe(reap(pid, NULL), how, sizeof how);
		return rb_error_set(err, 0, "gateway `%s` %s before it was ready", bin, how);
	}
	kill(pid, SIGKILL);
	reap(pid, NULL);
	return rb_error_set(err, 0, "gateway `%s` did not say it was ready within %d ms; killed", bin,
	                    RB_GWPROC_READY_MS);
}

int rb_gwproc_start(struct rb_gwproc *gw, const int *fds, unsigned n_fds, const char *run_id, const uint8_t *key,
                    size_t keylen, struct rb_error *err)
{
	gw->pid = 0;
	gw->pidfd = gw->out = -1;
	if (n_fds > MAX_LISTEN_FDS)
		return rb_error_set(err, E2BIG, "gateway: %u listeners", n_fds);
	struct rb_parts parts;
	if (rb_parts_find(&parts, err) < 0)
		return -1;
	const char *bin = parts.gateway;

	/* The config (with the key) goes through a socket, never argv or the environment; a
	 * socket, so a gateway that died early costs an EPIPE (MSG_NOSIGNAL), not a SIGPIPE. */
	char hex[2 * 64 + 1] = "";
	for (size_t i = 0; i < keylen && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	json_t *listen = json_array();
	for (unsigned i = 0; i < n_fds; i++)
		json_array_append_new(listen, json_integer(FIRST_LISTEN_FD + (int)i));
	json_t *cfg = json_pack("{s:s, s:s, s:o, s:i}", "run_id", run_id, "key", hex, "listen_fds", listen, "ready_fd",
	                        FIRST_LISTEN_FD + (int)n_fds);
	_cleanup_free_ char *text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	memset(hex, 0, sizeof hex);
	if (!text)
		return rb_error_set(err, ENOMEM, "gateway: config");
	int cp[2] = {-1, -1}, op[2] = {-1, -1}, rp[2] = {-1, -1}, ep[2] = {-1, -1};
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) < 0 || pipe2(op, O_CLOEXEC) < 0 ||
	    pipe2(rp, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		int e = errno;
		int all[] = {cp[0], cp[1], op[0], op[1], rp[0], rp[1], ep[0], ep[1]};
		for (size_t i = 0; i < RB_ARRAY_SIZE(all); i++)
			if (all[i] >= 0)
				close(all[i]);
		return rb_error_set(err, e, "gateway: pipe");
	}
	_cleanup_close_ int cfg_w = cp[1];
	_cleanup_close_ int out_r = op[0];
	_cleanup_close_ int ready_r = rp[0];
	_cleanup_close_ int exec_r = ep[0];
	pid_t pid = fork();
	if (pid == 0)
		child(bin, cp[0], op[1], rp[1], ep[1], fds, n_fds);
	int fork_errno = errno;
	close(cp[0]), close(op[1]), close(rp[1]), close(ep[1]);
	if (pid < 0)
		return rb_error_set(err, fork_errno, "gateway: fork");

	/* EOF: the exec worked (the CLOEXEC end closed); an int: the errno it failed with. */
	int child_errno = 0;
	ssize_t got;
	while ((got = read(exec_r, &child_errno, sizeof child_errno)) < 0 && errno == EINTR)
		;
	if (got != 0) {
		reap(pid, NULL);
		return rb_error_set(err, got == (ssize_t)sizeof child_errno ? child_errno : EIO, "gateway: exec `%s`",
		                    bin);
	}
	size_t len = strlen(text);
	ssize_t w = send(cfg_w, text, len, MSG_NOSIGNAL);
	int send_errno = errno;
	memset(text, 0, len);
	close(rb_steal_fd(&cfg_w)); /* EOF ends the gateway's read of its config */
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		reap(pid, NULL);
		return rb_error_set(err, e, "gateway `%s`: pidfd_open", bin);
	}
	/* A gateway that did not get its config ends before it is ready: that says more than
	 * the EPIPE here. */
	if (await_ready(ready_r, pidfd, pid, bin, err) < 0)
		return -1;
	if (w != (ssize_t)len) {
		kill(pid, SIGKILL);
		reap(pid, NULL);
		return rb_error_set(err, w < 0 ? send_errno : EIO, "gateway `%s`: write its config", bin);
	}
	gw->pid = pid;
	gw->pidfd = rb_steal_fd(&pidfd);
	gw->out = rb_steal_fd(&out_r);
	return 0;
}

int rb_gwproc_watch_fd(const struct rb_gwproc *gw)
{
	return gw->pid > 0 ? gw->pidfd : -1;
}

void rb_gwproc_reap(struct rb_gwproc *gw, struct rb_error *err)
{
	if (gw->pid <= 0) {
		rb_error_set(err, 0, "gateway is not running");
		return;
	}
	char how[64];
	describe(reap(gw->pid, NULL), how, sizeof how);
	gw->pid = 0;
	close(gw->pidfd);
	close(gw->out);
	gw->pidfd = gw->out = -1;
	gw->failed = true;
	rb_error_set(err, 0, "gateway %s during the run", how);
}

void rb_gwproc_stop(struct rb_gwproc *gw)
{
	if (gw->pid <= 0)
		return;
	/* Through the pidfd: never a signal to a pid someone else may have reused. */
	syscall(SYS_pidfd_send_signal, gw->pidfd, SIGTERM, NULL, 0);
	char buf[512];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(gw->out, buf + len, sizeof buf - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (len += (size_t)n) >= sizeof buf - 1)
			break;
	}
	buf[len] = '\0';
	close(gw->out);
	gw->out = -1;
	struct rusage ru = {0};
	int status = reap(gw->pid, &ru);
	close(gw->pidfd);
	gw->pidfd = -1;
	gw->pid = 0;
	json_error_t jerr;
	gw->stats = json_loads(buf, 0, &jerr);
	/* The gateway's CPU is the host's work for the run: it goes into the run's cost. */
	double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
	if (json_is_object(gw->stats))
		json_object_set_new(gw->stats, "cpu_ms", json_real(cpu_ms));
	gw->failed = !gw->stats || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* The step's process: the hardening sequence between fork and execve (see step.h). */
#define _GNU_SOURCE
#include "runtime/step.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/close_range.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "runtime/caps.h"

extern char **environ;

__attribute__((noreturn)) static void fail(int errfd, int errnum, int is_exec, const char *msg)
{
	struct rb_step_failure f = {.errnum = errnum, .is_exec = is_exec};
	snprintf(f.msg, sizeof f.msg, "%s", msg);
	ssize_t w = write(errfd, &f, sizeof f);
	(void)w;
	_exit(125);
}

/* close_range where the kernel has it, else a walk of /proc/self/fd. */
static void close_fds_except(int keep)
{
	if (syscall(SYS_close_range, 3, keep - 1, 0) == 0 && syscall(SYS_close_range, keep + 1, ~0U, 0) == 0)
		return;
	for (int fd = 3; fd < 65536; fd++)
		if (fd != keep)
			close(fd);
}

/* Moves the three stdio fds into place even when their numbers collide with 0..2. */
static int setup_stdio(const int fds[3])
{
	int tmp[3];
	for (int i = 0; i < 3; i++) {
		tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
		if (tmp[i] < 0)
			return -1;
	}
	for (int i = 0; i < 3; i++)
		if (dup2(tmp[i], i) < 0)
			return -1;
	return 0;
}

__attribute__((noreturn)) static void child(const struct rb_exec_spec *exec, char *const argv[], char *const envp[],
                                            const char *cwd, const int fds[3], int errfd)
{
	struct rb_error err;
	char msg[RB_ERROR_MAX];

	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	if (setsid() < 0)
		fail(errfd, errno, 0, "setsid");
	if (setup_stdio(fds) < 0)
		fail(errfd, errno, 0, "stdio");
	if (chdir(cwd) < 0) {
		snprintf(msg, sizeof msg, "chdir `%s`", cwd);
		fail(errfd, errno, 0, msg);
	}
	for (unsigned i = 0; i < exec->n_rlimits; i++) {
		/* Only the host's root may raise a hard limit: a policy value above it becomes the
		 * hard limit, which is stricter than asked, never looser. */
		struct rlimit rl;
		if (getrlimit(exec->rlimits[i].resource, &rl) < 0)
			fail(errfd, errno, 0, "getrlimit");
		rlim_t v = exec->rlimits[i].value;
		if (rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
			v = rl.rlim_max;
		rl.rlim_cur = rl.rlim_max = v;
		if (setrlimit(exec->rlimits[i].resource, &rl) < 0) {
			snprintf(msg, sizeof msg, "setrlimit %d", exec->rlimits[i].resource);
			fail(errfd, errno, 0, msg);
		}
	}
	if (rb_caps_drop_bounding(exec->caps, &err) < 0)
		fail(errfd, err.errnum, 0, err.msg);
	if (exec->uid != 0 && exec->caps && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		fail(errfd, errno, 0, "PR_SET_KEEPCAPS");
	if (!exec->setgroups_denied && setgroups(0, NULL) < 0)
		fail(errfd, errno, 0, "setgroups");
	if (setresgid(exec->gid, exec->gid, exec->gid) < 0)
		fail(errfd, errno, 0, "setresgid");
	if (setresuid(exec->uid, exec->uid, exec->uid) < 0)
		fail(errfd, errno, 0, "setresuid");
	if (rb_caps_set(exec->caps, exec->uid, &err) < 0)
		fail(errfd, err.errnum, 0, err.msg);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(errfd, errno, 0, "no_new_privs");
	close_fds_except(errfd);
	/* The filter may deny what came before, so it comes last; only execve follows. */
	if (exec->bpf && exec->bpf->len) {
		int r = rb_seccomp_apply(exec->bpf);
		if (r < 0)
			fail(errfd, -r, 0, "load seccomp filter");
	}
	environ = (char **)envp;
	execvp(argv[0], argv);
	int e = errno;
	snprintf(msg, sizeof msg, "exec `%s`", argv[0]);
	fail(errfd, e, 1, msg);
}

pid_t rb_step_spawn(const struct rb_exec_spec *exec, char *const argv[], char *const envp[], const char *cwd,
                    const int fds[3], struct rb_step_failure *failure)
{
	memset(failure, 0, sizeof *failure);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		failure->errnum = errno;
		snprintf(failure->msg, sizeof failure->msg, "pipe");
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		failure->errnum = errno;
		snprintf(failure->msg, sizeof failure->msg, "fork");
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		child(exec, argv, envp, cwd, fds, p[1]);
	}
	close(p[1]);
	ssize_t n;
	do
		n = read(p[0], failure, sizeof *failure);
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n == (ssize_t)sizeof *failure)
		return -1; /* the child wrote why and exits 125; init reaps it */
	memset(failure, 0, sizeof *failure);
	return pid;
}

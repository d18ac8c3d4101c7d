/* The step's process: the hardening sequence between its clone and execve (see step.h). */
#define _GNU_SOURCE
#include "runtime/sandbox/step.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/close_range.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/sandbox/caps.h"

/* The child runs on its own stack in the parent's memory (CLONE_VM | CLONE_VFORK, as
 * posix_spawn does), with init stopped until it execs or exits: nothing of init's memory is
 * copied, which is the costly part of a fork. So a failure is written straight into the
 * caller's struct, and the child keeps to what touches only its own task: its fd table, fs,
 * credentials, signal handlers and limits are its own (no CLONE_FILES, CLONE_FS, CLONE_SIGHAND
 * or CLONE_THREAD); it never changes a global of init's (environ included) and ends in execve
 * or _exit. */
struct spawn_args {
	const struct rb_exec_spec *exec;
	char *const *argv;
	char *const *envp;
	const char *cwd;
	const int *fds; /* what becomes fds 0..n_fds-1: stdio, then the step's files */
	unsigned n_fds;
	int cgroup_procs;
	bool ctty;
	struct rb_step_failure *failure;
};

__attribute__((noreturn)) static void fail(struct rb_step_failure *f, int errnum, int is_exec, const char *msg)
{
	f->errnum = errnum;
	f->is_exec = is_exec;
	snprintf(f->msg, sizeof f->msg, "%s", msg);
	f->failed = 1;
	_exit(125);
}

/* Every fd from first up, the declared ones below it: close_range where the kernel has it,
 * else one by one. */
static void close_fds_from(unsigned first)
{
	if (syscall(SYS_close_range, first, ~0U, 0) == 0)
		return;
	for (int fd = (int)first; fd < 65536; fd++)
		close(fd);
}

/* Puts fds[i] at fd i (stdio, then the step's files) even when the numbers collide: each is
 * first copied above n, where no target lies. The copies are close-on-exec and are closed
 * with the rest; the targets are not (dup2 clears the flag), so they cross execve. */
static int setup_fds(const int *fds, unsigned n)
{
	int tmp[3 + RB_STEP_MAX_FILES];
	for (unsigned i = 0; i < n; i++) {
		tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, (int)n);
		if (tmp[i] < 0)
			return -1;
	}
	for (unsigned i = 0; i < n; i++)
		if (dup2(tmp[i], (int)i) < 0)
			return -1;
	return 0;
}

static const char *env_path(char *const envp[])
{
	for (char *const *e = envp; e && *e; e++)
		if (!strncmp(*e, "PATH=", 5))
			return *e + 5;
	return "/usr/local/bin:/usr/bin:/bin";
}

/* execvp's search, with the PATH of the step's environment (execvpe would take init's own,
 * which is empty) and without touching environ. Returns the errno to report: EACCES if any
 * candidate was found but not executable, else the last "not found". */
static int exec_search(char *const argv[], char *const envp[])
{
	const char *file = argv[0];
	if (strchr(file, '/')) {
		execve(file, argv, envp);
		return errno;
	}
	size_t flen = strlen(file);
	if (flen == 0 || flen > NAME_MAX)
		return flen ? ENAMETOOLONG : ENOENT;
	bool denied = false;
	int last = ENOENT;
	for (const char *p = env_path(envp);;) {
		const char *colon = strchrnul(p, ':');
		size_t dlen = (size_t)(colon - p);
		char path[PATH_MAX];
		if (dlen + 1 + flen < sizeof path) {
			if (dlen)
				memcpy(path, p, dlen);
			else
				path[dlen++] = '.'; /* an empty element is the cwd, as in execvp */
			path[dlen] = '/';
			memcpy(path + dlen + 1, file, flen + 1);
			execve(path, argv, envp);
			if (errno == EACCES)
				denied = true;
			else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP && errno != ENAMETOOLONG)
				return errno; /* found, but it cannot run: say why */
			else
				last = errno;
		}
		if (!*colon)
			break;
		p = colon + 1;
	}
	return denied ? EACCES : last;
}

static int child(void *arg)
{
	const struct spawn_args *a = arg;
	const struct rb_exec_spec *exec = a->exec;
	struct rb_step_failure *f = a->failure;
	struct rb_error err;
	char msg[RB_ERROR_MAX];

	/* Its own cgroup before anything else, so everything it does is the step's. Kernels
	 * before 5.16 check the writer's credentials, not the opener's, and refuse: the step then
	 * stays in init's leaf, under the same limits, where an OOM kill takes only the largest
	 * process. */
	if (a->cgroup_procs >= 0 && write(a->cgroup_procs, "0", 1) < 0 && errno != EACCES && errno != EPERM)
		fail(f, errno, 0, "join the step's cgroup");
	/* And a cgroup namespace rooted there. The one init was cloned with is rooted where init
	 * was at its clone: on v1, the runner's own cgroups (init joins the run's only later),
	 * so /proc/self/cgroup showed host paths. Now the step's cgroup reads as "/". */
	if (unshare(CLONE_NEWCGROUP) < 0)
		fail(f, errno, 0, "the step's cgroup namespace");

	/* Every disposition is already the default (init reset them and installs none): only the
	 * mask, which blocks what init reads from its signalfd, is cleared. */
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	if (setsid() < 0)
		fail(f, errno, 0, "setsid");
	if (setup_fds(a->fds, a->n_fds) < 0)
		fail(f, errno, 0, "stdio and the step's files");
	/* The sandbox's own pty (never a host one) as the new session's terminal, this group in
	 * its foreground: ^C typed into it is SIGINT to the step, as in any terminal. */
	if (a->ctty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0)
		fail(f, errno, 0, "TIOCSCTTY: the terminal as the step's controlling terminal");
	if (chdir(a->cwd) < 0) {
		snprintf(msg, sizeof msg, "chdir `%s`", a->cwd);
		fail(f, errno, 0, msg);
	}
	for (unsigned i = 0; i < exec->n_rlimits; i++) {
		/* Only the host's root may raise a hard limit: a policy value above it becomes the
		 * hard limit, which is stricter than asked, never looser. */
		struct rlimit rl;
		if (getrlimit(exec->rlimits[i].resource, &rl) < 0)
			fail(f, errno, 0, "getrlimit");
		rlim_t v = exec->rlimits[i].value;
		if (rl.rlim_max != RLIM_INFINITY && v > rl.rlim_max)
			v = rl.rlim_max;
		rl.rlim_cur = rl.rlim_max = v;
		if (setrlimit(exec->rlimits[i].resource, &rl) < 0) {
			snprintf(msg, sizeof msg, "setrlimit %d", exec->rlimits[i].resource);
			fail(f, errno, 0, msg);
		}
	}
	/* A change of ids sets the memory's dumpable flag to fs.suid_dumpable, and this memory is
	 * init's until execve. Where that is 1, a process of the step's uid left by an earlier
	 * step could open this child's /proc/PID/mem before its filter and write into init. So
	 * the ids change with every capability kept (PR_SET_KEEPCAPS): while the permitted set
	 * is not a subset of the opener's, the kernel refuses it (cap_ptrace_access_check). The
	 * flag goes back to 0 before the capabilities drop to the policy's (a drop leaves it
	 * alone), and execve sets it afresh for the step's program. The bounding set was dropped
	 * to the policy's by init, once for every step. */
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		fail(f, errno, 0, "PR_SET_KEEPCAPS");
	/* The raw system calls: glibc's wrappers would try to apply the change to every thread
	 * of the process they believe they are in, which is init's. */
	if (!exec->setgroups_denied && syscall(SYS_setgroups, 0, NULL) < 0)
		fail(f, errno, 0, "setgroups");
	if (syscall(SYS_setresgid, exec->gid, exec->gid, exec->gid) < 0)
		fail(f, errno, 0, "setresgid");
	if (syscall(SYS_setresuid, exec->uid, exec->uid, exec->uid) < 0)
		fail(f, errno, 0, "setresuid");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		fail(f, errno, 0, "PR_SET_DUMPABLE");
	if (rb_caps_set(exec->caps, exec->uid, &err) < 0)
		fail(f, err.errnum, 0, err.msg);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fail(f, errno, 0, "no_new_privs");
	close_fds_from(a->n_fds); /* all but stdio and the declared files */
	/* The filter may deny what came before, so it comes last; only execve follows. */
	if (exec->bpf && exec->bpf->len) {
		int r = rb_seccomp_apply(exec->bpf);
		if (r < 0)
			fail(f, -r, 0, "load seccomp filter");
	}
	int e = exec_search(a->argv, a->envp);
	snprintf(msg, sizeof msg, "exec `%s`", a->argv[0]);
	fail(f, e, 1, msg);
}

/* The child's stack, this call's own: CLONE_VFORK returns once the child has exec'd or
 * exited, so it is unmapped then. The child uses a few KiB: hardening and an execve; a guard
 * page below catches the unexpected. */
#define CHILD_STACK ((size_t)256 << 10)

pid_t rb_step_spawn(const struct rb_exec_spec *exec, char *const argv[], char *const envp[], const char *cwd,
                    const int fds[3], const int *files, unsigned n_files, int cgroup_procs, bool ctty,
                    struct rb_step_failure *failure)
{
	memset(failure, 0, sizeof *failure);
	if (n_files > RB_STEP_MAX_FILES) {
		failure->errnum = E2BIG;
		snprintf(failure->msg, sizeof failure->msg, "at most %d files per step", RB_STEP_MAX_FILES);
		return -1;
	}
	int all[3 + RB_STEP_MAX_FILES];
	memcpy(all, fds, 3 * sizeof *all);
	for (unsigned i = 0; i < n_files; i++)
		all[3 + i] = files[i];
	char *base = rb_stack_alloc(CHILD_STACK);
	char *stack = base ? base + CHILD_STACK : NULL;
	if (!stack) {
		failure->errnum = errno;
		snprintf(failure->msg, sizeof failure->msg, "child stack");
		return -1;
	}
	_Static_assert(RB_STEP_FILE_FD == 3, "the step's files follow stdio");
	struct spawn_args a = {exec, argv, envp, cwd, all, 3 + n_files, cgroup_procs, ctty, failure};
	/* init blocks its signals (it reads them from a signalfd), so none can reach a handler
	 * between the clone and the child's reset. */
	pid_t pid = clone(child, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	int clone_errno = errno;
	munmap(base, CHILD_STACK);
	errno = clone_errno;
	if (pid < 0) {
		failure->errnum = errno;
		snprintf(failure->msg, sizeof failure->msg, "clone");
		return -1;
	}
	if (failure->failed)
		return -1; /* the child wrote why and exited 125; init reaps it */
	return pid;
}

/* A step's process inside the sandbox: cloned by init (CLONE_VM | CLONE_VFORK: no copy of
 * init's memory), hardened in SPEC's order (setsid, stdio and a terminal, rlimits, capabilities,
 * no_new_privs, fds closed, seccomp last) and exec'd. A failure before execve is written into
 * init's memory before the child exits, so "exec never happened" is never mistaken for the
 * step's own exit status. */
#ifndef RB_STEP_H
#define RB_STEP_H

#include <stdbool.h>
#include <sys/types.h>

#include "runtime/sandbox/sandbox.h"

/* Why a step could not start: the stage that failed and its errno. */
struct rb_step_failure {
	int failed; /* set by the child: it never reached a successful execve */
	int errnum;
	int is_exec; /* 1: execve itself failed (126/127), 0: setup before it (125) */
	char msg[240];
};

/* The step's files (its script, a skill's inputs) are sealed memfds from the runner, declared
 * fds of the step's process: file i is fd RB_STEP_FILE_FD + i, read through
 * RB_STEP_FILE_PATH "<fd>". Nothing of them is in the sandbox's tree, so nothing a step does
 * there can change what a later step runs or reads. */
#define RB_STEP_FILE_FD   3
#define RB_STEP_FILE_PATH "/proc/self/fd/"
#define RB_STEP_MAX_FILES 4

/* In init: starts the step's process with stdio fds[0..2] and files[0..n_files-1] at
 * RB_STEP_FILE_FD.. (every other fd closed) and returns its pid, or -1 with *failure filled
 * when it never reached execve. cgroup_procs (or -1): the step's own cgroup.procs, which the
 * process joins first (rb_cgroup_step_procs). ctty: fds[0] is a terminal (a pty slave of the
 * sandbox's own devpts), made the new session's controlling terminal (TIOCSCTTY), with the
 * process's group in its foreground. */
pid_t rb_step_spawn(const struct rb_exec_spec *exec, char *const argv[], char *const envp[], const char *cwd,
                    const int fds[3], const int *files, unsigned n_files, int cgroup_procs, bool ctty,
                    struct rb_step_failure *failure);

#endif

/* The session API: a run's sandbox held open, processes started in it (several at once), their
 * output read as sequence-numbered chunks, their stdin written, signalled, waited on. `runbox
 * run`, manifest runs and `runbox serve` all stand on it (docs/internals/session.md). */
#ifndef RB_SESSION_H
#define RB_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "runtime/run/run.h"

struct rb_session;
struct rb_proc;

enum rb_stream { RB_STREAM_STDOUT = 1, RB_STREAM_STDERR = 2 };

/* One piece of a process's output, scrubbed. seq counts from 1 over both streams of the
 * process. A chunk with len 0 and data NULL ends its stream (sinks only). */
struct rb_chunk {
	uint64_t seq;
	enum rb_stream stream;
	const char *data;
	size_t len;
};

/* Called with each chunk as it comes, scrubbed. Returns 0, or -1 when its reader is gone
 * (EPIPE): the process's stream is then closed, so it meets EPIPE as in a pipeline. */
typedef int (*rb_output_sink)(void *ctx, const struct rb_chunk *chunk);

/* What to start. argv, or script (run by the policy's shell from a sealed memfd, never
 * written into the sandbox's tree). */
struct rb_proc_req {
	char *const *argv;
	const char *script;
	const char *cwd;                  /* NULL: /workspace */
	char *const *env;                 /* added after the policy's variables; may be NULL */
	const struct rb_step_file *files; /* at most RB_STEP_MAX_FILES (one less with a script) */
	unsigned n_files;
	uint64_t timeout_ms; /* 0: the run's */
	bool stdin_pipe;     /* stdin a pipe the caller writes (rb_proc_write); else /dev/null */
	/* A terminal: init makes a pty in the sandbox's own devpts; its slave is the process's
	 * controlling terminal on fds 0-2, its master comes back to the runner. Output is then one
	 * stream (RB_STREAM_STDOUT), rb_proc_write types into the terminal (stdin_pipe is not
	 * needed), rb_proc_resize changes its size. tty_size 0x0: 24x80. */
	bool tty;
	struct rb_tty_size tty_size;
	bool keep_chunks; /* keep output for rb_proc_read (up to RB_PROC_KEEP_CAP bytes) */
	/* A run's step: its timeout kills the whole sandbox (SPEC "Timeouts"). Otherwise only the
	 * process's group is killed, and the sandbox's other processes go on. */
	bool timeout_kills_sandbox;
	rb_output_sink sink; /* NULL: none */
	void *sink_ctx;
	struct rb_scrubber *scrubber; /* NULL: one knowing the run token, made at the first byte */
};

/* Output kept per process for rb_proc_read: beyond it the oldest chunks are dropped. */
#define RB_PROC_KEEP_CAP (16u << 20)
/* And per session, over all its processes (running and ended, until freed): beyond it the
 * oldest chunks of the process that keeps the most are dropped. */
#define RB_SESSION_KEEP_CAP (64u << 20)

/* Opens the run's sandbox (it is created now; init builds its root while the first process's
 * request waits in its socket). The session watches run->cancel_fd (rb_run_config.cancel_fd):
 * each signal number written to that eventfd is a cancel; the first is passed to every running
 * process with RB_CANCEL_GRACE_S to end, a second (or the grace running out) kills the
 * sandbox. The library masks no signal and writes to no terminal; the caller catches SIGPIPE
 * (a write to a closed stdin then fails with EPIPE). One thread drives a session at a time. */
int rb_session_open(struct rb_run *run, struct rb_session **out, struct rb_error *err);
/* Waits until the sandbox's root is built (init said `ready`), as the first rb_proc_start
 * would; then rb_session_dispatch may run before any process. Returns 0, or -1 with err. */
int rb_session_ready(struct rb_session *s, struct rb_error *err);
/* A session opened on an unbound run (rb_run_config.unbound: a sandbox made before its owner
 * was known, as runbox serve's warm pool makes them) holds nothing of an owner: no tenant, no
 * agent, no run token, no process. Binding gives it its owner, once, before its first process;
 * the token (gateway mode) is issued now, for them. Returns 0, or -1 with err (already bound,
 * a process started, a field too long). */
struct rb_session_owner {
	const char *tenant;
	const char *agent;
};
int rb_session_bind(struct rb_session *s, const struct rb_session_owner *owner, struct rb_error *err);
/* An epoll fd, readable when something of the session needs rb_session_dispatch. */
int rb_session_fd(const struct rb_session *s);
/* Handles what is ready (output, init's reports, deadlines, the cancel, the gateway), waiting
 * up to timeout_ms (-1: until something is). Returns 0, or -1 with err. */
int rb_session_dispatch(struct rb_session *s, int timeout_ms, struct rb_error *err);
/* A writer in the sandbox (runtime/sandbox/writer.h): returns the caller's end of its socket
 * (the caller closes it; sends and answers time out after RB_SESSION_WRITER_TIMEOUT_S), or -1
 * with err. Files written through it are charged to the sandbox's memory. Called as the
 * session's other calls are (one thread at a time); the writer then serves any thread. */
#define RB_SESSION_WRITER_TIMEOUT_S 60
int rb_session_writer(struct rb_session *s, struct rb_error *err);
/* Kills what is left (the whole sandbox) and frees the session; the run stays the caller's
 * (rb_run_close). Processes not yet freed end as killed and stay readable. */
void rb_session_close(struct rb_session *s);

/* Starts a process. Returns 0 with *out (also when it could not start: its result then says
 * why, as SETUP_FAILED or EXEC_FAILED), or -1 for runbox's own failure. */
/* On an unbound session it fails (RB_ERR_CONFLICT): a process never runs without an owner. */
int rb_proc_start(struct rb_session *s, const struct rb_proc_req *req, struct rb_proc **out, struct rb_error *err);
/* An eventfd, readable when the process has new output or has ended (rb_proc_read clears it). */
int rb_proc_fd(const struct rb_proc *p);
/* The process's id in its session (as init names it) and its pid inside the sandbox (0 until
 * it started). */
int64_t rb_proc_id(const struct rb_proc *p);
pid_t rb_proc_pid(const struct rb_proc *p);
/* Kept chunks with seq > after_seq, at most max of them, into out; their data stays valid until
 * the next rb_session_dispatch. Returns their count. */
size_t rb_proc_read(struct rb_proc *p, uint64_t after_seq, struct rb_chunk *out, size_t max);
/* Writes to the process's stdin without blocking: returns the bytes taken (0: the pipe is
 * full, or a terminal's process has not started yet), or -1 with err (no stdin pipe, closed,
 * the process closed its end). */
ssize_t rb_proc_write(struct rb_proc *p, const void *data, size_t len, struct rb_error *err);
/* Ends the process's stdin: a pipe is closed; on a terminal in canonical mode the terminal's
 * EOF character (VEOF, ^D) is typed, then nothing more is written. */
void rb_proc_close_stdin(struct rb_proc *p);
/* A terminal's new size (TIOCSWINSZ on its master: the kernel sends SIGWINCH to its foreground
 * process group). Before the process started, the size is kept and set once it has. Returns 0,
 * or -1 with err (no terminal, or it is gone). */
int rb_proc_resize(struct rb_proc *p, struct rb_tty_size size, struct rb_error *err);
/* Sends sig to the process's group (through init). */
int rb_proc_signal(struct rb_proc *p, int sig, struct rb_error *err);
bool rb_proc_done(const struct rb_proc *p);
/* Whether it runs on a terminal (started with tty). */
bool rb_proc_tty(const struct rb_proc *p);
/* Dispatches the session until the process ended or timeout_ms passed (-1: no limit). Returns
 * 1 when it ended, 0 on the timeout, -1 with err. */
int rb_proc_wait(struct rb_proc *p, int timeout_ms, struct rb_error *err);
/* The result once done: exit code or signal, timed out, OOM, seccomp kill, wall and cpu time,
 * peaks, the capped output. */
const struct rb_step_result *rb_proc_result(const struct rb_proc *p);
/* Moves the result out (the caller frees it with rb_step_result_free). */
void rb_proc_take_result(struct rb_proc *p, struct rb_step_result *res);
/* Frees a process handle; one still running is killed first (SIGKILL to its group). */
void rb_proc_free(struct rb_proc *p);

#endif

/* What session.c, process.c and run.c share: the session's and a process's state, each watched
 * fd a named slot with its one handler, and the run's steps that the session calls. */
#ifndef RB_SESSION_INTERNAL_H
#define RB_SESSION_INTERNAL_H

#include <jansson.h>
#include <sys/resource.h>

#include "runtime/run/session.h"

#define RB_CANCEL_GRACE_S 2

struct rb_session;

/* One fd in the session's epoll set and what handles it. */
struct watch {
	int fd; /* -1: not watched */
	void (*handler)(struct rb_session *s, struct watch *w);
	struct rb_proc *proc; /* the process whose slot this is, or NULL */
};

struct rb_session {
	struct rb_run *run;
	int epfd;
	struct watch ctl;       /* init's reports */
	struct watch init_exit; /* init's pidfd: the sandbox died */
	struct watch cancel;    /* the caller's cancel eventfd */
	struct watch grace;     /* the cancel's grace period */
	struct watch gw4, gw6;  /* the gateway's listeners, until the first call starts it */
	struct watch gwdns;     /* the DNS stub's socket: a first query starts it too */
	struct watch gw_proc;   /* the gateway's process, once started */
	struct watch gw_calls;  /* its stdout: call records as it writes them */
	struct watch linger;    /* output of what finished processes left running */
	struct watch control;   /* the run's control socket: `runbox kill` (runtime/run/control.h) */
	int cancel_sig;         /* the first cancel's signal, or 0 */
	bool dead;              /* init is gone */
	struct rb_proc **procs; /* every process not yet freed */
	unsigned n_procs, cap_procs;
	size_t kept_bytes; /* the output its processes keep, RB_SESSION_KEEP_CAP at most */
	int64_t next_id;
};

/* A step's scrubber, made when its first output byte comes: building one (the run token in
 * six encodings, the format rules) is ~1.4 ms and ~1.8 MiB that a step printing nothing, as
 * most do, never needs. given: the run's own (a manifest's), else one is made (own). */
struct step_scrub {
	struct rb_scrubber *given;
	struct rb_scrubber *own;
	const char *token;
};

struct kept_chunk {
	uint64_t seq;
	enum rb_stream stream;
	char *data;
	size_t len;
};

/* Where one stream's bytes go: the result's capped buffer, the run's step log (capped), the
 * caller's sink and the kept chunks; all only after the scrub. */
struct stream_out {
	struct rb_proc *p; /* NULL: a lingering pipe, to its log only */
	enum rb_stream stream;
	struct rb_buf *buf;
	int log;           /* the log, or -1: none yet, or none at all */
	char log_name[32]; /* a step's log, made in the run's directory at its first byte ("": none) */
	const char *log_dir;
	uint64_t *log_bytes;
	uint64_t log_cap;
	struct step_scrub *scrubber; /* NULL: not scrubbed (background output, to its log only) */
	struct rb_scrub_stream *scrub;
	int null_fd; /* /dev/null, or -1: dropped bytes are then read and discarded */
	uint64_t *read, *dropped;
	bool closed; /* the sink's reader is gone */
	bool open;   /* the pipe is still read */
};

struct rb_proc {
	struct rb_session *s;
	int64_t id;
	pid_t pid;
	unsigned step_no;
	struct watch out, err, timer;
	struct stream_out so_out, so_err;
	int stdin_w;
	/* A terminal (rb_proc_req.tty): its master comes with init's `started`; out reads it,
	 * stdin_w writes it, tty_fd sets its size; each its own copy, closed on its own. */
	bool tty, stdin_closed, tty_failed;
	int tty_fd;
	struct watch idle; /* a terminal's output paused: what the scrubber holds goes out */
	struct rb_tty_size tty_size;
	int efd;
	bool started, done, timed_out, timeout_kills_sandbox;
	int cancel_sig;
	struct rb_step_result res;
	struct step_scrub scrubber;
	rb_output_sink sink;
	void *sink_ctx;
	int null_fd;
	uint64_t next_seq;
	bool keep;
	struct kept_chunk *chunks;
	size_t n_chunks, cap_chunks, kept_bytes;
	uint64_t t0;
	struct rusage ru0;
};

/* The session's side of a process (process.c calls them). */
int rb_session_watch(struct rb_session *s, struct watch *w, int fd);
void rb_session_kill(struct rb_session *s, const char *why);
/* rb_session_close without waiting for the sandbox's end: SIGKILL to init, reaped later by
 * rb_run_close while the runner commits the ledger (rb_run_stop). */
void rb_session_release(struct rb_session *s);
void rb_session_send_signal(struct rb_session *s, int64_t id, int sig);
void rb_session_forget(struct rb_session *s, struct rb_proc *p);
int rb_session_add(struct rb_session *s, struct rb_proc *p);

/* The process's side (session.c calls them). */
/* init's report on the process; fds came with it (a terminal's master with `started`): the
 * process takes what it keeps, setting its slot to -1, and the caller closes the rest. */
void rb_proc_on_event(struct rb_proc *p, const char *ev, json_t *msg, int *fds, unsigned n_fds);
/* Whether the process's stdin may still take bytes (a terminal's before it started too). */
bool rb_proc_stdin_open(const struct rb_proc *p);
void rb_proc_end(struct rb_proc *p, const char *why); /* the sandbox is gone */
void rb_proc_cancel(struct rb_proc *p, int sig);
void rb_proc_notify(struct rb_proc *p);

/* The run's steps the session takes (run.c). */
int rb_run_begin(struct rb_run *run, struct rb_error *err);
/* Gives an unbound run (rb_run_config.unbound) its tenant and agent, and in gateway mode the
 * run token they are written into; once. */
int rb_run_bind(struct rb_run *run, const char *tenant, const char *agent, struct rb_error *err);
int rb_run_await_ready(struct rb_run *run, struct rb_error *err);
int rb_run_save_state(struct rb_run *run, struct rb_error *err);
void rb_run_kill_sandbox(struct rb_run *run);
json_t *rb_run_step_env(const struct rb_run *run);
void rb_run_gateway_down(struct rb_run *run, const struct rb_error *why);
/* The pipes that finished processes left to their background processes (process.c). */
void rb_run_linger(struct rb_run *run, int fd);
void rb_run_drain_linger(struct rb_run *run, bool close_all);

#endif

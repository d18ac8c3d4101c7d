/* A process in a session: its request to init, its output (scrubbed, sequence-numbered, to the
 * result's capped buffer, the run's logs, the caller's sink and the kept chunks), its stdin,
 * signals, deadline and result. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/run/session-internal.h"
#include "runtime/sandbox/channel.h"
#include "scrub/scrub.h"

static void buf_append(struct rb_buf *b, const char *data, size_t n)
{
	if (b->len + n > b->limit) {
		b->truncated = true;
		n = b->limit > b->len ? b->limit - b->len : 0;
	}
	if (!n)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		if (cap > b->limit + 1)
			cap = b->limit + 1;
		char *d = realloc(b->data, cap);
		if (!d) {
			b->truncated = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static int open_log(const char *dir, const char *name)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* Its oldest kept chunk goes. */
static void drop_oldest(struct rb_proc *p)
{
	p->kept_bytes -= p->chunks[0].len;
	if (p->s)
		p->s->kept_bytes -= p->chunks[0].len;
	free(p->chunks[0].data);
	memmove(p->chunks, p->chunks + 1, --p->n_chunks * sizeof *p->chunks);
}

/* The session's process whose kept output goes first: of the ended ones (their output read or
 * not, it is complete) the one that keeps the most, else of the running ones; NULL: none. */
static struct rb_proc *largest_keeper(const struct rb_session *s)
{
	struct rb_proc *big = NULL;
	for (unsigned i = 0; i < s->n_procs; i++) {
		struct rb_proc *q = s->procs[i];
		if (q->n_chunks &&
		    (!big || (q->done && !big->done) || (q->done == big->done && q->kept_bytes > big->kept_bytes)))
			big = q;
	}
	return big;
}

/* Kept for rb_proc_read; beyond RB_PROC_KEEP_CAP the oldest go, and beyond RB_SESSION_KEEP_CAP
 * for the session those of an ended process first (largest_keeper): 64 processes at once, and
 * the ended ones kept, hold no more than the session's bound. */
static void keep_chunk(struct rb_proc *p, const struct rb_chunk *c)
{
	while (p->n_chunks && p->kept_bytes + c->len > RB_PROC_KEEP_CAP)
		drop_oldest(p);
	for (struct rb_proc *big;
	     p->s && p->s->kept_bytes + c->len > RB_SESSION_KEEP_CAP && (big = largest_keeper(p->s)) != NULL;)
		drop_oldest(big);
	if (p->n_chunks == p->cap_chunks) {
		size_t cap = p->cap_chunks ? p->cap_chunks * 2 : 16;
		struct kept_chunk *v = realloc(p->chunks, cap * sizeof *v);
		if (!v)
			return;
		p->chunks = v;
		p->cap_chunks = cap;
	}
	char *d = malloc(c->len ? c->len : 1);
	if (!d)
		return;
	memcpy(d, c->data, c->len);
	p->chunks[p->n_chunks++] = (struct kept_chunk){c->seq, c->stream, d, c->len};
	p->kept_bytes += c->len;
	if (p->s)
		p->s->kept_bytes += c->len;
}

/* Scrubbed bytes to everyone who takes them. A sink whose reader went away (EPIPE: `runbox
 * run ... | head -1`) closes the stream: the process then meets EPIPE or SIGPIPE as in a
 * pipeline, and the run goes on to its end. */
static void emit(struct stream_out *so, const char *data, size_t n)
{
	if (so->buf)
		buf_append(so->buf, data, n);
	if (so->log < 0 && so->log_name[0] && n && *so->log_bytes < so->log_cap) {
		so->log = open_log(so->log_dir, so->log_name);
		so->log_name[0] = '\0'; /* tried once */
	}
	if (so->log >= 0 && *so->log_bytes < so->log_cap) {
		size_t room = (size_t)(so->log_cap - *so->log_bytes);
		ssize_t w = write(so->log, data, n < room ? n : room);
		if (w > 0)
			*so->log_bytes += (uint64_t)w;
	}
	struct rb_proc *p = so->p;
	if (!p || !n)
		return;
	struct rb_chunk c = {++p->next_seq, so->stream, data, n};
	if (p->keep)
		keep_chunk(p, &c);
	if (p->sink && !so->closed && p->sink(p->sink_ctx, &c) < 0)
		so->closed = true;
	rb_proc_notify(p);
}

static int scrub_stream_start(struct step_scrub *ss, struct rb_scrub_stream **stream, struct rb_error *err)
{
	if (!ss->given && !ss->own) {
		struct rb_scrub_secret secret = {"run-token", ss->token, strlen(ss->token)};
		if (rb_scrub_new_labeled(&secret, ss->token[0] ? 1 : 0, &ss->own, err) < 0)
			return -1;
	}
	return rb_scrub_stream_new(ss->given ? ss->given : ss->own, stream, err);
}

/* Passes a chunk (NULL: the stream's end) through the scrubber to the stream's takers. When
 * the scrubber fails (out of memory), nothing of the chunk leaves, and the buffer says it lost
 * bytes. */
static void scrub_emit(struct stream_out *so, const char *chunk, size_t n)
{
	if (!so->scrubber) {
		if (chunk)
			emit(so, chunk, n);
		return;
	}
	struct rb_buf_out o = {0};
	struct rb_error err;
	int r = 0;
	if (!so->scrub && !chunk)
		return; /* nothing came, nothing is held */
	if (!so->scrub)
		r = scrub_stream_start(so->scrubber, &so->scrub, &err);
	if (r == 0)
		r = chunk ? rb_scrub_stream_feed(so->scrub, chunk, n, &o, &err)
		          : rb_scrub_stream_finish(so->scrub, &o, &err);
	if (r < 0) {
		rb_warn("step output: %s: bytes are missing from it", err.msg);
		if (so->buf)
			so->buf->truncated = true;
		return;
	}
	if (o.len)
		emit(so, o.data, o.len);
	free(o.data);
}

/* Nothing more of the stream can reach anyone: the buffer is full (or absent), the log too, no
 * sink and nothing kept. */
static bool saturated(const struct stream_out *so)
{
	bool taken = so->p && ((so->p->sink && !so->closed) || so->p->keep);
	bool logged = so->log >= 0 || so->log_name[0];
	return !taken && (!so->buf || so->buf->truncated) && (!logged || *so->log_bytes >= so->log_cap);
}

static void count(uint64_t *c, ssize_t n)
{
	if (c)
		*c += (uint64_t)n;
}

/* Empties what is there now without bringing it into the runner (spliced to /dev/null), so
 * the writer never blocks on a full pipe: a process flooding its output costs the host no
 * more than its caps. Returns as pump does. */
static bool drop(int fd, struct stream_out *so)
{
	char chunk[4096];
	for (;;) {
		ssize_t n = -1;
		if (so->null_fd >= 0)
			n = splice(fd, NULL, so->null_fd, NULL, 1 << 20, SPLICE_F_NONBLOCK);
		if (so->null_fd < 0 || (n < 0 && errno == EINVAL)) /* no splice to /dev/null here */
			n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno == EAGAIN;
		count(so->dropped, n);
	}
}

/* Reads what is there now; returns false at EOF or error, and once the sink's reader is gone. */
static bool pump(int fd, struct stream_out *so)
{
	char chunk[16384];
	for (;;) {
		if (so->closed)
			return false;
		if (saturated(so))
			return drop(fd, so);
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno == EAGAIN;
		count(so->read, n);
		scrub_emit(so, chunk, (size_t)n);
	}
}

/* The process ended: what the scrubber held back, then the end of the stream to the sink. */
static void finish(struct stream_out *so)
{
	scrub_emit(so, NULL, 0);
	struct rb_proc *p = so->p;
	struct rb_chunk end = {p->next_seq, so->stream, NULL, 0};
	if (p->sink && !so->closed)
		p->sink(p->sink_ctx, &end);
	rb_scrub_stream_free(so->scrub);
	so->scrub = NULL;
}

void rb_run_drain_linger(struct rb_run *run, bool close_all)
{
	if (!run->n_linger)
		return;
	if (run->bg_log < 0)
		run->bg_log = open_log(run->dir, "background.log");
	_cleanup_close_ int null_fd = run->bg_log_bytes >= RB_BG_LOG_CAP ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
	struct stream_out so = {
	    .log = run->bg_log, .log_bytes = &run->bg_log_bytes, .log_cap = RB_BG_LOG_CAP, .null_fd = null_fd};
	unsigned kept = 0;
	for (unsigned i = 0; i < run->n_linger; i++) {
		if (pump(run->linger[i], &so) && !close_all)
			run->linger[kept++] = run->linger[i];
		else {
			if (run->session && run->session->linger.fd == run->linger[i])
				rb_session_watch(run->session, &run->session->linger, -1);
			close(run->linger[i]);
		}
	}
	run->n_linger = kept;
}

void rb_run_linger(struct rb_run *run, int fd)
{
	if (run->n_linger == RB_MAX_LINGER) {
		if (run->session && run->session->linger.fd == run->linger[0])
			rb_session_watch(run->session, &run->session->linger, -1);
		close(run->linger[0]);
		memmove(run->linger, run->linger + 1, (RB_MAX_LINGER - 1) * sizeof *run->linger);
		run->n_linger--;
	}
	run->linger[run->n_linger++] = fd;
}

void rb_proc_notify(struct rb_proc *p)
{
	uint64_t one = 1;
	if (p->efd >= 0 && write(p->efd, &one, sizeof one) < 0)
		return; /* the counter is full: it is readable anyway */
}

/* A terminal is read by a person: what the scrubber holds back at a chunk's end (a word that
 * could still grow into a secret) would hold the echo of what they type until the next space.
 * Once the output pauses for TTY_IDLE_MS, the held bytes are scrubbed as a stream's end and let
 * out, and a new stream begins: a secret is still caught within a burst of output, not across
 * a pause (a step that means to leak one can always transform it past any scrubber). */
#define TTY_IDLE_MS 20

static void arm_idle(struct rb_proc *p)
{
	struct itimerspec its = {.it_value = {.tv_nsec = TTY_IDLE_MS * 1000000L}};
	if (p->idle.fd >= 0 && p->so_out.scrub && timerfd_settime(p->idle.fd, 0, &its, NULL) < 0)
		rb_debug("process %lld: idle timer: %s", (long long)p->id, strerror(errno));
}

static void on_idle(struct rb_session *s, struct watch *w)
{
	struct rb_proc *p = w->proc;
	uint64_t n;
	if (read(w->fd, &n, sizeof n) < 0 && errno != EAGAIN)
		rb_debug("process %lld: idle timer: %s", (long long)p->id, strerror(errno));
	if (!p->so_out.scrub)
		return;
	scrub_emit(&p->so_out, NULL, 0);
	rb_scrub_stream_free(p->so_out.scrub);
	p->so_out.scrub = NULL;
}

static void stop_idle(struct rb_proc *p)
{
	int fd = p->idle.fd;
	if (fd < 0)
		return;
	if (p->s)
		rb_session_watch(p->s, &p->idle, -1);
	p->idle.fd = -1;
	close(fd);
}

static void on_output(struct rb_session *s, struct watch *w)
{
	struct rb_proc *p = w->proc;
	struct stream_out *so = w == &p->out ? &p->so_out : &p->so_err;
	so->open = pump(w->fd, so);
	if (p->tty)
		arm_idle(p);
	/* Ended, or our reader closed its end: the process's end is closed too, so it is not left
	 * blocked on a full pipe nobody reads. */
	if (!so->open) {
		int fd = w->fd;
		rb_session_watch(s, w, -1);
		close(fd);
	}
}

static void stop_timer(struct rb_proc *p)
{
	int fd = p->timer.fd;
	if (fd < 0)
		return;
	if (p->s)
		rb_session_watch(p->s, &p->timer, -1);
	p->timer.fd = -1;
	close(fd);
}

static void on_timer(struct rb_session *s, struct watch *w)
{
	struct rb_proc *p = w->proc;
	stop_timer(p);
	if (!p->cancel_sig) {
		p->timed_out = true;
		p->res.status = RB_STEP_TIMEOUT;
	}
	if (p->timeout_kills_sandbox) {
		rb_session_kill(s, NULL);
		return;
	}
	/* Only this process's group; its exit report follows, and ends it. */
	rb_session_send_signal(s, p->id, SIGKILL);
}

static uint64_t tv_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* The runner's own CPU since ru0: every thread of it (the ledger's commit, the scrub). */
static void host_cpu(const struct rusage *ru0, struct rb_host_cost *h)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return;
	h->cpu_user_us = tv_us(&ru.ru_utime) - tv_us(&ru0->ru_utime);
	h->cpu_sys_us = tv_us(&ru.ru_stime) - tv_us(&ru0->ru_stime);
}

static void fill_from_status(struct rb_step_result *res, int status)
{
	if (WIFEXITED(status)) {
		res->status = RB_STEP_EXITED;
		res->exit_code = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		res->status = RB_STEP_SIGNALED;
		res->signal = WTERMSIG(status);
		res->seccomp_killed = res->signal == SIGSYS;
	}
}

static void close_stream(struct rb_proc *p, struct watch *w, bool keep_for_background)
{
	int fd = w->fd;
	if (fd < 0)
		return;
	if (p->s)
		rb_session_watch(p->s, w, -1);
	w->fd = -1;
	/* A server the process left running keeps its stdout: the pipe stays open, drained into
	 * background.log, until the run ends. */
	if (keep_for_background && p->s)
		rb_run_linger(p->s->run, fd);
	else
		close(fd);
}

/* The process is over (it exited, or the sandbox went): the rest of its output, its end to the
 * sink, its costs and the cgroup's word on OOM. */
static void proc_finish(struct rb_proc *p)
{
	struct rb_run *run = p->s->run;
	struct rb_step_result *res = &p->res;
	stop_timer(p);
	stop_idle(p);
	if (p->cancel_sig) {
		res->status = RB_STEP_CANCELLED;
		res->signal = p->cancel_sig;
	} else if (p->timed_out) {
		res->status = RB_STEP_TIMEOUT;
	}
	/* What the main process wrote before it exited is in the pipes now; a background process
	 * that still holds them open does not hold the process open. */
	if (p->out.fd >= 0)
		p->so_out.open = pump(p->out.fd, &p->so_out);
	if (p->err.fd >= 0)
		p->so_err.open = pump(p->err.fd, &p->so_err);
	finish(&p->so_out);
	finish(&p->so_err);
	bool alive = !run->sb.reaped;
	close_stream(p, &p->out, alive && p->so_out.open);
	close_stream(p, &p->err, alive && p->so_err.open);
	if (p->stdin_w >= 0)
		close(p->stdin_w);
	p->stdin_w = -1;
	if (p->tty_fd >= 0)
		close(p->tty_fd);
	p->tty_fd = -1;
	res->wall_us = rb_now_us() - p->t0;
	host_cpu(&p->ru0, &res->host);
	if (run->sb.net.nft_fd >= 0) {
		struct rb_net_counters c;
		struct rb_error nerr;
		if (rb_net_read_counters(&run->sb.net, &c, &nerr) == 0)
			res->egress = rb_net_counters_json(&c);
		else
			rb_warn("%s", nerr.msg);
	}
	if (run->cg) {
		rb_cgroup_stats(run->cg, &res->cgroup);
		/* The OOM killer killed something while the process ran: the process itself, or one
		 * it waited for (a shell then exits 137 itself). The count is the run's. */
		bool oom = res->cgroup.have_oom && res->cgroup.oom_kills > run->oom_kills_seen;
		if (res->cgroup.have_oom)
			run->oom_kills_seen = res->cgroup.oom_kills;
		/* Where the run's cgroup itself has memory.oom.group (v2 without step leaves), the
		 * OOM killer takes init too: the process still died of the OOM kill, not of runbox. */
		if (p->started && res->status == RB_STEP_SETUP_FAILED && oom) {
			res->status = RB_STEP_SIGNALED;
			res->signal = SIGKILL;
			res->error[0] = '\0';
		}
		res->oom_killed = oom;
	}
	p->done = true;
	rb_debug("process %lld: ended", (long long)p->id);
	rb_proc_notify(p);
}

/* init's answer to an exec request that is not `started`: why the process could not start. */
static void not_started(struct rb_step_result *res, json_t *ev)
{
	bool is_exec = json_is_true(json_object_get(ev, "is_exec"));
	res->status = is_exec ? RB_STEP_EXEC_FAILED : RB_STEP_SETUP_FAILED;
	res->exec_errno = (int)json_integer_value(json_object_get(ev, "errno"));
	const char *m = json_string_value(json_object_get(ev, "message"));
	snprintf(res->error, sizeof res->error, "%s%s%s", m ? m : "step did not start", res->exec_errno ? ": " : "",
	         res->exec_errno ? strerror(res->exec_errno) : "");
}

/* The master of the terminal init made: checked to be a pty master (ptmx's device, a pty
 * number) before anything reads, writes or sizes it; then read as the process's output, written
 * as its stdin, and given the size asked for meanwhile. */
static int take_tty(struct rb_proc *p, int *fds, unsigned n_fds, struct rb_error *err)
{
	struct stat st;
	unsigned ptn;
	if (n_fds < 1 || fds[0] < 0)
		return rb_error_set(err, EPROTO, "init started the process without its terminal");
	if (fstat(fds[0], &st) < 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 5 || minor(st.st_rdev) != 2 ||
	    ioctl(fds[0], TIOCGPTN, &ptn) < 0)
		return rb_error_set(err, EPROTO, "init sent a terminal that is no pty master");
	/* Of the sandbox's own devpts, never the host's: the slave's filesystem says which (the
	 * master's may be a ptmx node elsewhere). */
	struct stat host_pts, slave_st;
	_cleanup_close_ int slave = ioctl(fds[0], TIOCGPTPEER, O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (slave < 0 || fstat(slave, &slave_st) < 0)
		return rb_error_set(err, errno, "the terminal's slave");
	if (stat("/dev/pts", &host_pts) == 0 && host_pts.st_dev == slave_st.st_dev)
		return rb_error_set(err, EPROTO, "init sent a terminal of the host's devpts");
	int master = fds[0];
	if (fcntl(master, F_SETFL, O_NONBLOCK) < 0)
		return rb_error_set(err, errno, "the terminal: O_NONBLOCK");
	p->tty_fd = fcntl(master, F_DUPFD_CLOEXEC, 3);
	if (p->tty_fd < 0)
		return rb_error_set(err, errno, "the terminal: dup");
	if (!p->stdin_closed && (p->stdin_w = fcntl(master, F_DUPFD_CLOEXEC, 3)) < 0)
		return rb_error_set(err, errno, "the terminal: dup");
	int idle = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (idle < 0)
		return rb_error_set(err, errno, "the terminal: timerfd_create");
	if (rb_session_watch(p->s, &p->idle, idle) < 0) {
		close(idle);
		return rb_error_set(err, errno, "session: epoll");
	}
	if (rb_session_watch(p->s, &p->out, master) < 0)
		return rb_error_set(err, errno, "session: epoll");
	fds[0] = -1;
	p->so_out.open = true;
	struct winsize ws = {.ws_row = p->tty_size.rows, .ws_col = p->tty_size.cols};
	ioctl(p->tty_fd, TIOCSWINSZ, &ws); /* a resize before the start; the same size is no change */
	return 0;
}

void rb_proc_on_event(struct rb_proc *p, const char *ev, json_t *m, int *fds, unsigned n_fds)
{
	struct rb_step_result *res = &p->res;
	if (!p->started && !strcmp(ev, "started")) {
		p->started = true;
		p->pid = (pid_t)json_integer_value(json_object_get(m, "pid"));
		rb_debug("process %lld: started", (long long)p->id);
		struct rb_error terr;
		if (p->tty && take_tty(p, fds, n_fds, &terr) < 0) {
			/* A process on a terminal nobody can read or type into does not go on. */
			rb_session_send_signal(p->s, p->id, SIGKILL);
			if (!p->cancel_sig && !p->timed_out) {
				res->status = RB_STEP_SETUP_FAILED;
				snprintf(res->error, sizeof res->error, "%s", terr.msg);
				p->tty_failed = true;
			}
		}
		if (p->cancel_sig) /* the cancel came before the process existed */
			rb_session_send_signal(p->s, p->id, p->cancel_sig);
	} else if (!p->started) {
		not_started(res, m);
		proc_finish(p);
	} else if (!strcmp(ev, "exited")) {
		if (!p->tty_failed)
			fill_from_status(res, (int)json_integer_value(json_object_get(m, "status")));
		res->user_us = (uint64_t)json_integer_value(json_object_get(m, "utime_us"));
		res->sys_us = (uint64_t)json_integer_value(json_object_get(m, "stime_us"));
		res->maxrss_kb = (uint64_t)json_integer_value(json_object_get(m, "maxrss_kb"));
		proc_finish(p);
	}
}

void rb_proc_end(struct rb_proc *p, const char *why)
{
	if (p->done)
		return;
	if (!p->timed_out && !p->cancel_sig) {
		p->res.status = RB_STEP_SETUP_FAILED;
		snprintf(p->res.error, sizeof p->res.error, "%s",
		         why          ? why
		         : p->started ? "the sandbox's init died during the step"
		                      : "the sandbox's init ended before the step started");
	}
	proc_finish(p);
}

void rb_proc_cancel(struct rb_proc *p, int sig)
{
	if (!p->cancel_sig)
		p->cancel_sig = sig;
}

/* A memfd holding a file the process gets, sealed against every change (writes, growing,
 * shrinking, and new seals or their removal) before it leaves the runner: the process reads
 * the bytes the ledger recorded, and nothing in the sandbox can alter them. */
static int file_fd(const struct rb_step_file *f, struct rb_error *err)
{
	char name[64];
	snprintf(name, sizeof name, "runbox-%s", f->name);
	return rb_sealed_memfd(name, f->data, f->len, err);
}

static struct rb_proc *proc_new(struct rb_session *s, const struct rb_proc_req *req)
{
	struct rb_run *run = s->run;
	struct rb_proc *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->s = s;
	p->out = (struct watch){-1, on_output, p};
	p->err = (struct watch){-1, on_output, p};
	p->timer = (struct watch){-1, on_timer, p};
	p->idle = (struct watch){-1, on_idle, p};
	p->stdin_w = p->null_fd = p->tty_fd = -1;
	p->tty = p->res.tty = req->tty;
	p->tty_size = req->tty_size;
	if (!p->tty_size.rows || !p->tty_size.cols)
		p->tty_size = (struct rb_tty_size){24, 80};
	p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->timeout_kills_sandbox = req->timeout_kills_sandbox;
	p->sink = req->sink;
	p->sink_ctx = req->sink_ctx;
	p->keep = req->keep_chunks;
	p->scrubber = (struct step_scrub){req->scrubber, NULL, run->token};
	p->res.out.limit = run->policy.max_stdout ? run->policy.max_stdout : 1 << 20;
	p->res.err.limit = run->policy.max_stderr ? run->policy.max_stderr : 1 << 20;
	p->t0 = rb_now_us();
	getrusage(RUSAGE_SELF, &p->ru0);
	p->step_no = ++run->steps_run;
	/* Without a sink or kept chunks, what no cap lets in is spliced away unread. */
	if (!p->sink && !p->keep)
		p->null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	p->so_out = (struct stream_out){.p = p,
	                                .stream = RB_STREAM_STDOUT,
	                                .buf = &p->res.out,
	                                .log = -1,
	                                .log_dir = run->dir,
	                                .log_bytes = &run->step_log_bytes,
	                                .log_cap = RB_STEP_LOG_CAP,
	                                .scrubber = &p->scrubber,
	                                .null_fd = p->null_fd,
	                                .read = &p->res.host.stdout_read,
	                                .dropped = &p->res.host.stdout_dropped};
	p->so_err = p->so_out;
	p->so_err.stream = RB_STREAM_STDERR;
	p->so_err.buf = &p->res.err;
	/* A step's logs are made at their first byte: most steps print nothing on one stream. */
	snprintf(p->so_out.log_name, sizeof p->so_out.log_name, "step-%u.stdout", p->step_no);
	snprintf(p->so_err.log_name, sizeof p->so_err.log_name, "step-%u.stderr", p->step_no);
	p->so_err.read = &p->res.host.stderr_read;
	p->so_err.dropped = &p->res.host.stderr_dropped;
	if (p->efd < 0 || rb_session_add(s, p) < 0) {
		if (p->efd >= 0)
			close(p->efd);
		free(p);
		return NULL;
	}
	return p;
}

/* Could not start: the result says why; the handle is done. */
static int start_failed(struct rb_proc *p, enum rb_step_status status, const char *why)
{
	p->res.status = status;
	snprintf(p->res.error, sizeof p->res.error, "%s", why);
	proc_finish(p);
	return 0;
}

/* A cancel already waiting when a process is asked for: it never starts. */
static bool cancel_pending(struct rb_session *s)
{
	if (s->cancel.fd >= 0) {
		struct pollfd pf = {.fd = s->cancel.fd, .events = POLLIN};
		if (poll(&pf, 1, 0) == 1)
			s->cancel.handler(s, &s->cancel);
	}
	return s->cancel_sig != 0;
}

struct request {
	json_t *msg;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n_fds;
	int out_r, err_r, stdin_w;
};

static void request_free(struct request *q)
{
	json_decref(q->msg);
	for (unsigned i = 0; i < q->n_fds; i++)
		close(q->fds[i]);
	if (q->out_r >= 0)
		close(q->out_r);
	if (q->err_r >= 0)
		close(q->err_r);
	if (q->stdin_w >= 0)
		close(q->stdin_w);
}

static int add_pipe(struct request *q, int *keep, bool keep_write, struct rb_error *err)
{
	int pp[2];
	if (pipe2(pp, O_CLOEXEC) < 0)
		return rb_error_set(err, errno, "pipe");
	*keep = keep_write ? pp[1] : pp[0];
	q->fds[q->n_fds++] = keep_write ? pp[0] : pp[1];
	fcntl(*keep, F_SETFL, O_NONBLOCK);
	return 0;
}

/* The exec request for init (init.c's handle_exec): stdin, stdout, stderr, the files, the
 * process's own cgroup last. */
static int build_request(struct rb_proc *p, const struct rb_proc_req *req, struct request *q, struct rb_error *err)
{
	struct rb_run *run = p->s->run;
	char shell_arg[32];
	char *script_argv[3] = {run->policy.shell[0] ? run->policy.shell : "/bin/sh", shell_arg, NULL};
	struct rb_step_file files[RB_STEP_MAX_FILES];
	unsigned n_files = 0;
	if (req->script) {
		files[n_files++] = (struct rb_step_file){"script.sh", req->script, strlen(req->script)};
		snprintf(shell_arg, sizeof shell_arg, RB_STEP_FILE_PATH "%d", RB_STEP_FILE_FD);
	}
	if (req->n_files > RB_STEP_MAX_FILES - n_files)
		return rb_error_set(err, E2BIG, "at most %d files per step", RB_STEP_MAX_FILES);
	for (unsigned i = 0; i < req->n_files; i++)
		files[n_files++] = req->files[i];
	char *const *argv = req->script ? script_argv : req->argv;
	if (!argv || !argv[0])
		return rb_error_set(err, EINVAL, "process: neither a command nor a script");
	size_t bad = 0;
	json_t *args = rb_json_strv(argv, &bad);
	if (!args)
		return rb_error_set(err, EINVAL, "argv[%zu] of the command is not valid UTF-8", bad);
	json_t *env = rb_run_step_env(run);
	json_t *jfiles = json_array();
	bool stdin_pipe = req->stdin_pipe && !req->tty; /* a terminal is its stdin */
	q->msg = json_pack("{s:s, s:I, s:o, s:o, s:s, s:o, s:b, s:b}", "op", "exec", "id", (json_int_t)p->id, "argv",
	                   args, "env", env, "cwd", req->cwd ? req->cwd : "/workspace", "files", jfiles, "stdin",
	                   stdin_pipe, "cgroup", 0);
	if (!q->msg)
		return rb_error_set(err, EINVAL, "process: its cwd is not valid UTF-8");
	/* No stdio travels with a terminal's request: init makes the pty inside (init.c). */
	if (p->tty)
		json_object_set_new(q->msg, "tty",
		                    json_pack("{s:i, s:i}", "rows", p->tty_size.rows, "cols", p->tty_size.cols));
	for (char *const *e = req->env; e && *e; e++) {
		json_t *s = json_string(*e);
		if (!s || json_array_append_new(env, s) < 0)
			return rb_error_set(err, EINVAL, "environment entry %zu is not valid UTF-8",
			                    (size_t)(e - req->env));
	}
	_Static_assert(3 + RB_STEP_MAX_FILES + 1 + 1 <= RB_CHAN_MAX_FDS,
	               "stdin, stdout, stderr, files, cgroup and a long request's body in one message");
	if (!p->tty && ((stdin_pipe && add_pipe(q, &q->stdin_w, true, err) < 0) ||
	                add_pipe(q, &q->out_r, false, err) < 0 || add_pipe(q, &q->err_r, false, err) < 0))
		return -1;
	for (unsigned i = 0; i < n_files; i++) {
		int fd = file_fd(&files[i], err);
		if (fd < 0)
			return -1;
		q->fds[q->n_fds++] = fd;
		json_array_append_new(jfiles, json_pack("{s:s}", "name", files[i].name));
	}
	/* Last: the process's own cgroup, which it joins before anything else. */
	if (run->cg) {
		struct rb_error cerr;
		int cgfd = rb_cgroup_step_procs(run->cg, p->step_no, &cerr);
		if (cgfd >= 0) {
			q->fds[q->n_fds++] = cgfd;
			json_object_set_new(q->msg, "cgroup", json_true());
		} else if (cerr.errnum) {
			rb_warn("step %u runs in the run's cgroup: %s", p->step_no, cerr.msg);
		}
	}
	return 0;
}

int rb_proc_start(struct rb_session *s, const struct rb_proc_req *req, struct rb_proc **out, struct rb_error *err)
{
	struct rb_run *run = s->run;
	*out = NULL;
	if (s->dead || run->sb.reaped)
		return rb_error_set(err, 0, "the sandbox is gone");
	if (run->unbound)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0,
		                     "run %s: no process before the session is bound (rb_session_bind)", run->id);
	struct rb_proc *p = proc_new(s, req);
	if (!p)
		return rb_error_set(err, ENOMEM, "process");
	*out = p;
	if (cancel_pending(s)) {
		rb_proc_cancel(p, s->cancel_sig);
		return start_failed(p, RB_STEP_CANCELLED, "cancelled before it started");
	}
	__attribute__((cleanup(request_free))) struct request q = {.out_r = -1, .err_r = -1, .stdin_w = -1};
	int r = build_request(p, req, &q, err);
	if (r == 0)
		r = rb_run_save_state(run, err); /* what is about to run, written ahead of the ledger */
	_cleanup_close_ int tfd = r == 0 ? timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK) : -1;
	if (r == 0 && tfd < 0)
		r = rb_error_set(err, errno, "timerfd_create");
	/* Sent even while init still builds the root: it cannot block there (the one queued
	 * message, at most RB_CHAN_MAX_MSG, fits in the socket's buffer), so the wait for `ready`
	 * below keeps its limit. */
	if (r == 0)
		r = rb_chan_send(run->sb.ctl, q.msg, q.fds, q.n_fds, err);
	for (unsigned i = 0; i < q.n_fds; i++)
		close(q.fds[i]);
	q.n_fds = 0;
	/* The first request went while init built the root: its `ready` comes first. A setup that
	 * failed ended init, and the request may have met the closed socket: init's word on why
	 * answers for both. */
	struct rb_error serr;
	if (!run->ready && rb_run_await_ready(run, &serr) < 0) {
		rb_session_kill(s, serr.msg);
		return 0;
	}
	if (r < 0) {
		rb_session_forget(s, p);
		rb_proc_free(p);
		*out = NULL;
		return -1;
	}
	/* The deadline counts from here (the sandbox ready, the request sent), the ledger's commit
	 * and init's `started` included: nothing the sandbox does can make the runner wait past it. */
	uint64_t timeout_ms = req->timeout_ms ? req->timeout_ms : run->timeout_ms;
	if (timeout_ms) {
		struct itimerspec its = {.it_value = {.tv_sec = (time_t)(timeout_ms / 1000),
		                                      .tv_nsec = (long)(timeout_ms % 1000) * 1000000L}};
		if (timerfd_settime(tfd, 0, &its, NULL) < 0 || rb_session_watch(s, &p->timer, tfd) < 0) {
			rb_error_set(err, errno, "the process's deadline");
			rb_session_kill(s, NULL); /* no process runs without its deadline */
			return -1;
		}
		(void)rb_steal_fd(&tfd); /* the slot's now */
	}
	/* A terminal's output is watched once its master comes (take_tty). */
	if (!p->tty && (rb_session_watch(s, &p->out, q.out_r) < 0 || rb_session_watch(s, &p->err, q.err_r) < 0)) {
		rb_error_set(err, errno, "session: epoll");
		rb_session_kill(s, NULL);
		return -1;
	}
	q.out_r = q.err_r = -1;
	p->so_out.open = p->so_err.open = !p->tty;
	p->stdin_w = rb_steal_fd(&q.stdin_w);
	rb_debug("process %lld: exec sent", (long long)p->id);
	if (run->ledger.commit && run->ledger.commit(run->ledger.ctx, err) < 0) {
		rb_session_kill(s, NULL); /* a process the ledger cannot record does not go on */
		return -1;
	}
	return 0;
}

int rb_proc_fd(const struct rb_proc *p)
{
	return p->efd;
}

int64_t rb_proc_id(const struct rb_proc *p)
{
	return p->id;
}

pid_t rb_proc_pid(const struct rb_proc *p)
{
	return p->pid;
}

size_t rb_proc_read(struct rb_proc *p, uint64_t after_seq, struct rb_chunk *out, size_t max)
{
	uint64_t v;
	if (read(p->efd, &v, sizeof v) < 0 && errno != EAGAIN)
		rb_debug("process %lld: eventfd: %s", (long long)p->id, strerror(errno));
	size_t n = 0;
	for (size_t i = 0; i < p->n_chunks && n < max; i++)
		if (p->chunks[i].seq > after_seq)
			out[n++] = (struct rb_chunk){p->chunks[i].seq, p->chunks[i].stream, p->chunks[i].data,
			                             p->chunks[i].len};
	if (n < p->n_chunks && n == max)
		rb_proc_notify(p); /* more remain: still readable */
	return n;
}

bool rb_proc_stdin_open(const struct rb_proc *p)
{
	return !p->done && (p->stdin_w >= 0 || (p->tty && !p->started && !p->stdin_closed));
}

ssize_t rb_proc_write(struct rb_proc *p, const void *data, size_t len, struct rb_error *err)
{
	if (p->stdin_w < 0 && rb_proc_stdin_open(p))
		return 0; /* a terminal whose master has not come yet */
	if (p->stdin_w < 0)
		return rb_error_set(err, EBADF, "process %lld: no stdin to write (not a pipe, or closed)",
		                    (long long)p->id);
	ssize_t w;
	do
		w = write(p->stdin_w, data, len);
	while (w < 0 && errno == EINTR);
	if (w < 0 && errno == EAGAIN)
		return 0;
	if (w < 0)
		return rb_error_set(err, errno, "process %lld: write stdin", (long long)p->id);
	return w;
}

/* A terminal has no end of its own: closing it is typing its EOF character, which the line
 * discipline turns into a read of 0 bytes in canonical mode (in raw mode a program reads its
 * bytes itself, and ^D is one of them). */
static void type_eof(int master)
{
	struct termios t;
	if (tcgetattr(master, &t) < 0 || !(t.c_lflag & ICANON) || t.c_cc[VEOF] == _POSIX_VDISABLE)
		return;
	char c = (char)t.c_cc[VEOF];
	if (write(master, &c, 1) < 0)
		rb_debug("terminal: EOF not typed: %s", strerror(errno));
}

void rb_proc_close_stdin(struct rb_proc *p)
{
	p->stdin_closed = true;
	if (p->stdin_w >= 0 && p->tty)
		type_eof(p->stdin_w);
	if (p->stdin_w >= 0)
		close(p->stdin_w);
	p->stdin_w = -1;
}

int rb_proc_resize(struct rb_proc *p, struct rb_tty_size size, struct rb_error *err)
{
	if (!p->tty)
		return rb_error_set(err, ENOTTY, "process %lld: it has no terminal", (long long)p->id);
	if (!size.rows || !size.cols)
		return rb_error_set(err, EINVAL, "process %lld: a terminal of %u rows and %u columns", (long long)p->id,
		                    size.rows, size.cols);
	if (p->done)
		return rb_error_set(err, ESRCH, "process %lld: it has ended", (long long)p->id);
	p->tty_size = size;
	if (p->tty_fd < 0)
		return 0; /* set when the terminal comes (take_tty) */
	struct winsize ws = {.ws_row = size.rows, .ws_col = size.cols};
	if (ioctl(p->tty_fd, TIOCSWINSZ, &ws) < 0)
		return rb_error_set(err, errno, "process %lld: TIOCSWINSZ", (long long)p->id);
	return 0;
}

int rb_proc_signal(struct rb_proc *p, int sig, struct rb_error *err)
{
	if (!p->s || p->s->dead)
		return rb_error_set(err, ESRCH, "process %lld: the sandbox is gone", (long long)p->id);
	if (p->done)
		return rb_error_set(err, ESRCH, "process %lld: it has ended", (long long)p->id);
	if (sig <= 0 || sig >= NSIG)
		return rb_error_set(err, EINVAL, "process %lld: no signal %d", (long long)p->id, sig);
	rb_session_send_signal(p->s, p->id, sig);
	return 0;
}

bool rb_proc_done(const struct rb_proc *p)
{
	return p->done;
}

int rb_proc_wait(struct rb_proc *p, int timeout_ms, struct rb_error *err)
{
	uint64_t deadline = timeout_ms >= 0 ? rb_now_us() + (uint64_t)timeout_ms * 1000 : 0;
	while (!p->done) {
		if (!p->s)
			return rb_error_set(err, 0, "process %lld: its session is closed", (long long)p->id);
		int left = -1;
		if (timeout_ms >= 0) {
			uint64_t now = rb_now_us();
			if (now >= deadline)
				return 0;
			left = (int)((deadline - now + 999) / 1000);
		}
		if (rb_session_dispatch(p->s, left, err) < 0)
			return -1;
	}
	return 1;
}

bool rb_proc_tty(const struct rb_proc *p)
{
	return p->tty;
}

const struct rb_step_result *rb_proc_result(const struct rb_proc *p)
{
	return p->done ? &p->res : NULL;
}

void rb_proc_take_result(struct rb_proc *p, struct rb_step_result *res)
{
	*res = p->res;
	memset(&p->res.out, 0, sizeof p->res.out);
	memset(&p->res.err, 0, sizeof p->res.err);
	p->res.egress = NULL;
}

void rb_proc_free(struct rb_proc *p)
{
	if (!p)
		return;
	if (p->s && !p->done && p->started)
		rb_session_send_signal(p->s, p->id, SIGKILL);
	if (p->s && !p->done) {
		/* Its report, if one comes, names no handle now. */
		p->res.status = RB_STEP_SIGNALED;
		p->res.signal = SIGKILL;
		proc_finish(p);
	}
	if (p->s) {
		rb_session_forget(p->s, p);
		p->s->kept_bytes -= p->kept_bytes;
	}
	struct watch *ws[] = {&p->out, &p->err, &p->timer, &p->idle};
	for (size_t i = 0; i < RB_ARRAY_SIZE(ws); i++)
		if (ws[i]->fd >= 0) {
			if (p->s)
				rb_session_watch(p->s, ws[i], -1);
			close(ws[i]->fd);
		}
	rb_scrub_stream_free(p->so_out.scrub);
	rb_scrub_stream_free(p->so_err.scrub);
	rb_scrub_free(p->scrubber.own);
	if (p->so_out.log >= 0)
		close(p->so_out.log);
	if (p->so_err.log >= 0)
		close(p->so_err.log);
	if (p->null_fd >= 0)
		close(p->null_fd);
	if (p->stdin_w >= 0)
		close(p->stdin_w);
	if (p->tty_fd >= 0)
		close(p->tty_fd);
	for (size_t i = 0; i < p->n_chunks; i++)
		free(p->chunks[i].data);
	free(p->chunks);
	rb_step_result_free(&p->res);
	close(p->efd);
	free(p);
}

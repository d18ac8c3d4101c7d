/* A session: a run's sandbox held open for processes, one epoll set whose every fd is a named
 * slot with its one handler (init's reports, init's death, the cancel, the gateway, lingering
 * output; each process adds its stdout, stderr and deadline). */
#define _GNU_SOURCE
#include "runtime/run/session.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/run/control.h"
#include "runtime/run/session-internal.h"
#include "runtime/sandbox/channel.h"

int rb_session_watch(struct rb_session *s, struct watch *w, int fd)
{
	if (w->fd == fd)
		return 0;
	if (w->fd >= 0)
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	w->fd = -1;
	if (fd < 0)
		return 0;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = w};
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -1;
	w->fd = fd;
	return 0;
}

static struct rb_proc *proc_by_id(struct rb_session *s, int64_t id)
{
	for (unsigned i = 0; i < s->n_procs; i++)
		if (s->procs[i]->id == id)
			return s->procs[i];
	return NULL;
}

void rb_session_send_signal(struct rb_session *s, int64_t id, int sig)
{
	if (s->dead)
		return;
	json_t *m = id ? json_pack("{s:s, s:I, s:i}", "op", "signal", "id", (json_int_t)id, "sig", sig)
	               : json_pack("{s:s, s:i}", "op", "signal", "sig", sig);
	struct rb_error err;
	rb_chan_send(s->run->sb.ctl, m, NULL, 0, &err);
	json_decref(m);
}

int rb_session_writer(struct rb_session *s, struct rb_error *err)
{
	if (s->dead || s->run->sb.reaped || !s->run->ready)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "the sandbox is not up");
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
		return rb_error_set(err, errno, "socketpair for the sandbox's writer");
	struct timeval tv = {.tv_sec = RB_SESSION_WRITER_TIMEOUT_S};
	json_t *m = json_pack("{s:s}", "op", "writer");
	int r = m ? 0 : rb_error_set(err, ENOMEM, "the sandbox's writer");
	if (r == 0 && (setsockopt(sp[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
	               setsockopt(sp[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0))
		r = rb_error_set(err, errno, "the sandbox's writer: timeouts");
	if (r == 0)
		r = rb_chan_send(s->run->sb.ctl, m, &sp[1], 1, err);
	json_decref(m);
	close(sp[1]);
	if (r < 0) {
		close(sp[0]);
		return -1;
	}
	return sp[0];
}

static void drop_grace(struct rb_session *s)
{
	int fd = s->grace.fd;
	rb_session_watch(s, &s->grace, -1);
	if (fd >= 0)
		close(fd);
}

/* The sandbox goes (SIGKILL to init; reaped and the cgroup killed when reap): every process
 * still running ends with why, unless its own deadline or a cancel already named the reason. */
static void end_session(struct rb_session *s, const char *why, bool reap)
{
	rb_session_watch(s, &s->ctl, -1);
	rb_session_watch(s, &s->init_exit, -1);
	rb_session_watch(s, &s->gw4, -1);
	rb_session_watch(s, &s->gw6, -1);
	rb_session_watch(s, &s->gwdns, -1);
	drop_grace(s);
	s->dead = true;
	if (reap)
		rb_run_kill_sandbox(s->run);
	else
		rb_sandbox_kill(&s->run->sb);
	for (unsigned i = 0; i < s->n_procs; i++)
		if (!s->procs[i]->done)
			rb_proc_end(s->procs[i], why);
}

void rb_session_kill(struct rb_session *s, const char *why)
{
	end_session(s, why, true);
}

static void on_ctl(struct rb_session *s, struct watch *w)
{
	json_t *m = NULL;
	struct rb_error err;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n_fds = 0;
	if (rb_chan_recv(s->run->sb.ctl, &m, fds, &n_fds, &err) <= 0) {
		rb_session_kill(s, NULL);
		return;
	}
	const char *ev = json_string_value(json_object_get(m, "ev"));
	int64_t id = (int64_t)json_integer_value(json_object_get(m, "id"));
	struct rb_proc *p = proc_by_id(s, id);
	if (ev && p && !p->done)
		rb_proc_on_event(p, ev, m, fds, n_fds);
	else if (ev && !p && id > 0 && !strcmp(ev, "started"))
		rb_session_send_signal(s, id, SIGKILL); /* its handle was freed before it started */
	for (unsigned i = 0; i < n_fds; i++)            /* what no process took (a terminal's master it kept) */
		if (fds[i] >= 0)
			close(fds[i]);
	json_decref(m);
}

static void on_init_exit(struct rb_session *s, struct watch *w)
{
	rb_session_kill(s, NULL);
}

static void on_grace(struct rb_session *s, struct watch *w)
{
	rb_session_kill(s, NULL);
}

/* A cancel with sig; several (or a second one, or SIGKILL) kills the sandbox at once. */
static void cancel(struct rb_session *s, int sig, bool several)
{
	bool first = s->cancel_sig == 0;
	if (first)
		s->cancel_sig = sig;
	for (unsigned i = 0; i < s->n_procs; i++)
		if (!s->procs[i]->done)
			rb_proc_cancel(s->procs[i], s->cancel_sig);
	if (!first || several) {
		rb_session_kill(s, NULL);
		return;
	}
	/* First SIGINT/SIGTERM: passed to the processes through init, with a grace period to
	 * clean up; a second one, or the grace running out, kills. */
	rb_session_send_signal(s, 0, sig);
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	struct itimerspec grace = {.it_value = {.tv_sec = RB_CANCEL_GRACE_S}};
	if (tfd < 0 || timerfd_settime(tfd, 0, &grace, NULL) < 0 || rb_session_watch(s, &s->grace, tfd) < 0) {
		if (tfd >= 0)
			close(tfd);
		rb_session_kill(s, NULL); /* no cancel waits without its bound */
	}
}

/* Each signal number written to the eventfd is one cancel; a count that is no single signal
 * number is several at once, as a second is: kill. */
static void on_cancel(struct rb_session *s, struct watch *w)
{
	uint64_t v = 0;
	if (read(w->fd, &v, sizeof v) != (ssize_t)sizeof v || v == 0)
		return;
	bool several = v >= 65;
	cancel(s, several ? SIGTERM : (int)v, several);
}

/* `runbox kill RUN`: the same cancel as the caller's own, and the run's end says why. */
static void on_control(struct rb_session *s, struct watch *w)
{
	struct rb_control_req req;
	struct rb_error err;
	int r = rb_control_handle(s->run->control, &req, &err);
	if (r < 0) {
		rb_warn("%s", err.msg);
		return;
	}
	if (r == 0 || s->dead) /* a sandbox already gone: its run ends as it was going to */
		return;
	snprintf(s->run->end_reason, sizeof s->run->end_reason, "killed by runbox kill");
	cancel(s, req.sig, req.sig == SIGKILL);
}

/* The first connection to the gateway's endpoint starts it (the connection waits in the
 * backlog meanwhile). */
static void on_gateway_listen(struct rb_session *s, struct watch *w)
{
	struct rb_run *run = s->run;
	/* Unwatched first: a start that fails closes them. */
	rb_session_watch(s, &s->gw4, -1);
	rb_session_watch(s, &s->gw6, -1);
	rb_session_watch(s, &s->gwdns, -1);
	int lfds[2];
	unsigned n = 0;
	if (run->sb.net.listen_fd4 >= 0)
		lfds[n++] = run->sb.net.listen_fd4;
	if (run->sb.net.listen_fd6 >= 0)
		lfds[n++] = run->sb.net.listen_fd6;
	struct rb_error gerr;
	run->gw.cpus = run->limits.cpus; /* a gateway daemon charges the run's calls against it */
	if (rb_gwproc_start(&run->gw, run->cg, lfds, n, run->sb.net.dns_fd, run->id, run->token_key, run->token_keylen,
	                    &gerr) < 0)
		rb_run_gateway_down(run, &gerr);
}

static void on_gateway_exit(struct rb_session *s, struct watch *w)
{
	struct rb_error gerr;
	rb_session_watch(s, w, -1);
	rb_gwproc_reap(&s->run->gw, &gerr);
	rb_run_gateway_down(s->run, &gerr);
}

/* The gateway's call records, read as it writes them (each before its answer ends). */
static void on_gateway_calls(struct rb_session *s, struct watch *w)
{
	rb_gwproc_drain(&s->run->gw);
	if (rb_gwproc_lost(&s->run->gw)) /* the daemon that served the run is gone */
		on_gateway_exit(s, w);
}

static void on_linger(struct rb_session *s, struct watch *w)
{
	rb_run_drain_linger(s->run, false);
}

/* The slots whose fds come and go with the run's state: the gateway's listeners until it
 * runs, its process while it runs, the first lingering pipe. */
static void sync_watches(struct rb_session *s)
{
	struct rb_run *run = s->run;
	bool watch_gw = !s->dead && run->token[0] && !rb_gwproc_running(&run->gw) && !run->gw.failed;
	rb_session_watch(s, &s->gw4, watch_gw ? run->sb.net.listen_fd4 : -1);
	rb_session_watch(s, &s->gw6, watch_gw ? run->sb.net.listen_fd6 : -1);
	rb_session_watch(s, &s->gwdns, watch_gw ? run->sb.net.dns_fd : -1);
	rb_session_watch(s, &s->gw_proc, rb_gwproc_watch_fd(&run->gw));
	rb_session_watch(s, &s->gw_calls, rb_gwproc_running(&run->gw) ? run->gw.out : -1);
	rb_session_watch(s, &s->linger, run->n_linger ? run->linger[0] : -1);
}

int rb_session_open(struct rb_run *run, struct rb_session **out, struct rb_error *err)
{
	*out = NULL;
	if (run->session)
		return rb_error_set(err, EBUSY, "run %s: a session is open on it already", run->id);
	if (rb_run_begin(run, err) < 0)
		return -1;
	if (run->sb.reaped)
		return rb_error_set(err, 0, "the sandbox is gone");
	struct rb_session *s = calloc(1, sizeof *s);
	if (!s)
		return rb_error_set(err, ENOMEM, "session");
	s->run = run;
	s->next_id = 1;
	struct watch *slots[] = {&s->ctl,   &s->init_exit, &s->cancel,   &s->grace,  &s->gw4,    &s->gw6,
	                         &s->gwdns, &s->gw_proc,   &s->gw_calls, &s->linger, &s->control};
	for (size_t i = 0; i < RB_ARRAY_SIZE(slots); i++)
		slots[i]->fd = -1;
	s->ctl.handler = on_ctl;
	s->init_exit.handler = on_init_exit;
	s->cancel.handler = on_cancel;
	s->grace.handler = on_grace;
	s->gw4.handler = s->gw6.handler = s->gwdns.handler = on_gateway_listen;
	s->gw_proc.handler = on_gateway_exit;
	s->gw_calls.handler = on_gateway_calls;
	s->linger.handler = on_linger;
	s->control.handler = on_control;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0 || rb_session_watch(s, &s->ctl, run->sb.ctl) < 0 ||
	    rb_session_watch(s, &s->init_exit, run->sb.pidfd) < 0 ||
	    rb_session_watch(s, &s->cancel, run->cancel_fd) < 0 ||
	    rb_session_watch(s, &s->control, rb_control_fd(run->control)) < 0) {
		rb_error_set(err, errno, "session: epoll");
		if (s->epfd >= 0)
			close(s->epfd);
		free(s);
		return -1;
	}
	run->session = s;
	*out = s;
	return 0;
}

int rb_session_fd(const struct rb_session *s)
{
	return s->epfd;
}

int rb_session_dispatch(struct rb_session *s, int timeout_ms, struct rb_error *err)
{
	sync_watches(s);
	struct epoll_event ev[16];
	int n = epoll_wait(s->epfd, ev, 16, timeout_ms);
	if (n < 0 && errno == EINTR)
		return 0;
	if (n < 0)
		return rb_error_set(err, errno, "session: epoll_wait");
	/* Output first, then the rest: what a process wrote before it exited is read before its
	 * exit report ends it. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < n; i++) {
			struct watch *w = ev[i].data.ptr;
			bool is_output = w->proc && (w == &w->proc->out || w == &w->proc->err);
			if (w->fd >= 0 && is_output == (pass == 0))
				w->handler(s, w);
		}
	return 0;
}

int rb_session_add(struct rb_session *s, struct rb_proc *p)
{
	if (s->n_procs == s->cap_procs) {
		unsigned cap = s->cap_procs ? s->cap_procs * 2 : 4;
		struct rb_proc **v = realloc(s->procs, cap * sizeof(struct rb_proc *));
		if (!v)
			return -1;
		s->procs = v;
		s->cap_procs = cap;
	}
	s->procs[s->n_procs++] = p;
	p->id = s->next_id++;
	return 0;
}

/* A process handle leaves the session's list when freed (process.c). */
void rb_session_forget(struct rb_session *s, struct rb_proc *p)
{
	for (unsigned i = 0; i < s->n_procs; i++)
		if (s->procs[i] == p) {
			s->procs[i] = s->procs[--s->n_procs];
			return;
		}
}

static void session_free(struct rb_session *s, bool reap)
{
	if (!s)
		return;
	if (!s->dead)
		end_session(s, "the session was closed", reap);
	struct watch *slots[] = {&s->cancel,  &s->gw4,      &s->gw6,    &s->gwdns,
	                         &s->gw_proc, &s->gw_calls, &s->linger, &s->control};
	for (size_t i = 0; i < RB_ARRAY_SIZE(slots); i++)
		rb_session_watch(s, slots[i], -1);
	for (unsigned i = 0; i < s->n_procs; i++)
		s->procs[i]->s = NULL; /* a handle outlives its session: readable, not startable */
	free(s->procs);
	close(s->epfd);
	s->run->session = NULL;
	free(s);
}

int rb_session_bind(struct rb_session *s, const struct rb_session_owner *owner, struct rb_error *err)
{
	if (s->next_id != 1)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "run %s: bound after a process started", s->run->id);
	return rb_run_bind(s->run, owner->tenant, owner->agent, err);
}

int rb_session_ready(struct rb_session *s, struct rb_error *err)
{
	return rb_run_await_ready(s->run, err);
}

void rb_session_close(struct rb_session *s)
{
	session_free(s, true);
}

void rb_session_release(struct rb_session *s)
{
	session_free(s, false);
}

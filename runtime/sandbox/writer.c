/* The sandbox's writer (writer.h): init's child that writes files for the caller, and the
 * caller's side of its socket. */
#define _GNU_SOURCE
#include "runtime/sandbox/writer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/sandbox/channel.h"

struct writer {
	int sock;
	int fd; /* the file of the last FILE, or -1 */
	int errnum;
	uint64_t written;
};

static void writer_reply(const struct writer *w)
{
	struct rb_writer_reply r = {.errnum = w->errnum, .written = w->written};
	ssize_t n;
	do
		n = send(w->sock, &r, sizeof r, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		_exit(0); /* the caller is gone */
}

static void writer_data(struct writer *w, const char *p, size_t len, uint64_t off)
{
	if (w->errnum)
		return;
	if (w->fd < 0) {
		w->errnum = EBADF;
		return;
	}
	while (len) {
		ssize_t n = pwrite(w->fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->errnum = n < 0 ? errno : EIO;
			return;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
		w->written += (uint64_t)n;
	}
}

/* Alone with its socket: no other descriptor (init's control channel least of all), no
 * capability, no blocked signal, and gone with init. */
static void writer_isolate(int sock, pid_t parent)
{
	rb_close_except(3, &sock, 1);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(0);
	prctl(PR_SET_NAME, "runbox-writer", 0, 0, 0);
	cap_t none = cap_init();
	if (!none || cap_set_proc(none) < 0)
		_exit(125);
	cap_free(none);
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
}

void rb_writer_main(int sock, pid_t parent)
{
	writer_isolate(sock, parent);
	struct writer w = {.sock = sock, .fd = -1};
	/* Its own (init is single-threaded: the fork holds no lock of malloc's). */
	const size_t cap = sizeof(struct rb_writer_head) + RB_WRITER_CHUNK;
	char *buf = malloc(cap);
	if (!buf)
		_exit(125);
	for (;;) {
		int got = -1;
		unsigned n_got;
		bool trunc;
		ssize_t n = rb_chan_recvmsg(sock, buf, cap, &got, 1, &n_got, &trunc);
		if (n <= 0)
			_exit(0);
		struct rb_writer_head h;
		bool whole = (size_t)n >= sizeof h && !trunc;
		if (whole)
			memcpy(&h, buf, sizeof h);
		if (whole && h.op == RB_WRITER_FILE) {
			if (w.fd >= 0)
				close(w.fd);
			w = (struct writer){.sock = sock, .fd = got};
			continue;
		}
		if (got >= 0)
			close(got);
		if (!whole || (h.op == RB_WRITER_DATA && h.len != (size_t)n - sizeof h)) {
			if (!w.errnum)
				w.errnum = EPROTO;
		} else if (h.op == RB_WRITER_DATA) {
			writer_data(&w, buf + sizeof h, h.len, h.off);
		} else if (h.op == RB_WRITER_SYNC) {
			writer_reply(&w);
		} else if (!w.errnum) {
			w.errnum = EPROTO;
		}
	}
}

void rb_writer_oom_open(struct rb_writer_oom *o)
{
	o->orig[0] = '\0';
	o->fd = open("/proc/self/oom_score_adj", O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	struct statfs sf;
	ssize_t n = -1;
	if (o->fd >= 0 && fstatfs(o->fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC)
		n = pread(o->fd, o->orig, sizeof o->orig - 1, 0);
	if (n <= 0) {
		if (o->fd >= 0)
			close(o->fd);
		o->fd = -1;
		return;
	}
	o->orig[n] = '\0';
}

/* Writes v to init's oom_score_adj. Back to its own value needs no privilege: never below the
 * lowest it was set to (oom_score_adj_min), which is where it started. */
static void oom_set(const struct rb_writer_oom *o, const char *v)
{
	if (o->fd >= 0)
		(void)!pwrite(o->fd, v, strlen(v), 0);
}

void rb_writer_start(int sock, const struct rb_writer_oom *o)
{
	pid_t self = getpid();
	oom_set(o, "1000");
	pid_t pid = fork();
	if (pid == 0)
		rb_writer_main(sock, self);
	int e = errno;
	oom_set(o, o->orig);
	if (pid > 0)
		return;
	struct rb_writer_reply r = {.errnum = e, .not_started = 1};
	(void)!send(sock, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* The writer ended before it answered: killed, the OOM killer's first choice once what it writes
 * passes the sandbox's memory limit (writer_isolate). */
static int writer_killed(struct rb_error *err)
{
	return rb_error_setk(err, RB_ERR_CONFLICT, ENOMEM,
	                     "the sandbox's writer was killed: the sandbox is out of memory (its memory limit)");
}

/* init's fork failed: at the sandbox's pids limit (EAGAIN), the sandbox's state, as a write past
 * its memory is. */
static int not_started(int errnum, struct rb_error *err)
{
	if (errnum == EAGAIN)
		return rb_error_setk(err, RB_ERR_CONFLICT, errnum,
		                     "the sandbox could not start its writer: at its limit of processes (pids)");
	return rb_error_set(err, errnum, "the sandbox could not start its writer");
}

/* Its socket closed: init's word on why, when it could not start one, else killed. */
static int writer_gone(int sock, struct rb_error *err)
{
	struct rb_writer_reply r;
	if (recv(sock, &r, sizeof r, MSG_DONTWAIT) == (ssize_t)sizeof r && r.not_started)
		return not_started(r.errnum, err);
	return writer_killed(err);
}

static int writer_send(int sock, const struct rb_writer_head *h, const void *data, size_t len, int fd,
                       struct rb_error *err)
{
	struct iovec iov[2] = {{.iov_base = (void *)h, .iov_len = sizeof *h},
	                       {.iov_base = (void *)data, .iov_len = len}};
	if (rb_chan_sendmsg(sock, iov, len ? 2 : 1, &fd, fd >= 0 ? 1 : 0) == 0)
		return 0;
	if (errno == EPIPE || errno == ECONNRESET)
		return writer_gone(sock, err);
	return rb_error_set(err, errno, "the sandbox's writer%s", errno == EAGAIN ? ": no answer in time" : "");
}

int rb_writer_file(int sock, int fd, struct rb_error *err)
{
	struct rb_writer_head h = {.op = RB_WRITER_FILE};
	return writer_send(sock, &h, NULL, 0, fd, err);
}

int rb_writer_release(int sock, struct rb_error *err)
{
	struct rb_writer_head h = {.op = RB_WRITER_FILE};
	return writer_send(sock, &h, NULL, 0, -1, err);
}

int rb_writer_data(int sock, const void *data, size_t len, uint64_t off, struct rb_error *err)
{
	const char *p = data;
	while (len) {
		size_t k = len < RB_WRITER_CHUNK ? len : RB_WRITER_CHUNK;
		struct rb_writer_head h = {.op = RB_WRITER_DATA, .len = (uint32_t)k, .off = off};
		if (writer_send(sock, &h, p, k, -1, err) < 0)
			return -1;
		p += k;
		len -= k;
		off += k;
	}
	return 0;
}

int rb_writer_sync(int sock, uint64_t *written, struct rb_error *err)
{
	struct rb_writer_head h = {.op = RB_WRITER_SYNC};
	if (writer_send(sock, &h, NULL, 0, -1, err) < 0)
		return -1;
	struct rb_writer_reply r;
	ssize_t n;
	do
		n = recv(sock, &r, sizeof r, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno != ECONNRESET)
		return rb_error_set(err, errno, "the sandbox's writer%s", errno == EAGAIN ? ": no answer in time" : "");
	if (n != (ssize_t)sizeof r)
		return writer_killed(err);
	if (r.not_started)
		return not_started(r.errnum, err);
	if (written)
		*written = r.written;
	if (r.errnum)
		return rb_error_set(err, r.errnum, "written in the sandbox");
	return 0;
}

/* runbox serve's exposed ports (docs/serve.md "Exposed ports"): a host listener per port whose
 * connections the daemon forwards to 127.0.0.1:N inside the session's netns, through sockets a
 * helper process made there (it joined the netns the run holds, never the sandbox). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/jsoncheck.h"
#include "common/cleanup.h"
#include "common/util.h"
#include "runtime/run/record.h"
#include "serve/ports.h"

#define PORTS_MAX      16    /* exposed ports of one session */
#define CONNS_MAX      32    /* connections of one port at once */
#define HEADER_MAX     16384 /* the first request's head, checked for the token */
#define HEADER_WAIT_MS 10000 /* for the first request's head */
#define RELAY_BUF      65536

struct conn {
	struct port *p;
	pthread_t th;
	bool busy, ended; /* a thread runs / has ended and awaits its join */
	int cfd, ifd;     /* the client's, the inner one; -1 once closed (under p->lock) */
	json_t *pending;  /* its end event, when it could not be recorded (the session closing) */
};

struct port {
	struct rb_serve *sv;
	char sid[64];
	char token[65];
	unsigned n;
	bool is_unix;
	char path[108];
	uint16_t host_port;
	int lfd, stop[2];
	int helper; /* SOCK_SEQPACKET to the helper, -1 when none */
	pid_t helper_pid;
	pthread_t th;
	pthread_mutex_t lock;
	atomic_bool closing;
	struct conn conns[CONNS_MAX];
	struct port *next;
};

struct rb_serve_ports {
	char token[65];
	struct port *head;
	unsigned n;
};

/* ---- the helper: a forked child in the netns making sockets on request ------------------ */

/* Runs in a fork of a threaded process: system calls only (no allocation, no lock). */
__attribute__((noreturn)) static void helper_main(int userns, int netns, int sock)
{
	/* A copy of the daemon's memory (its keys among it): nothing may read it. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (userns >= 0 && setns(userns, CLONE_NEWUSER) < 0)
		_exit(1);
	if (setns(netns, CLONE_NEWNET) < 0)
		_exit(2);
	if (sock != 3 && dup2(sock, 3) < 0)
		_exit(3);
	/* Nothing else of the daemon's stays open in here (no listener, no other port's socket). */
	close_range(0, 2, 0);
	close_range(4, ~0U, 0);
	for (;;) {
		char c;
		ssize_t r = read(3, &c, 1);
		if (r <= 0)
			_exit(0);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int e = fd < 0 ? errno : 0;
		char cbuf[CMSG_SPACE(sizeof(int))];
		memset(cbuf, 0, sizeof cbuf);
		struct iovec iov = {.iov_base = &e, .iov_len = sizeof e};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		if (fd >= 0) {
			m.msg_control = cbuf;
			m.msg_controllen = sizeof cbuf;
			struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(cm), &fd, sizeof fd);
		}
		if (sendmsg(3, &m, MSG_NOSIGNAL) < 0)
			_exit(4);
		if (fd >= 0)
			close(fd);
	}
}

/* The user namespace that owns netns, when it is not the daemon's own (rootless: the factory's
 * owner namespace, which the daemon's user made, so its child holds every capability there). */
static int owner_userns(int netns, struct rb_error *err)
{
	int u = ioctl(netns, NS_GET_USERNS);
	if (u < 0)
		return rb_error_set(err, errno, "the owner of the session's network namespace"), -2;
	struct stat a, b;
	if (fstat(u, &a) < 0 || stat("/proc/self/ns/user", &b) < 0) {
		rb_error_set(err, errno, "stat the user namespaces");
		close(u);
		return -2;
	}
	if (a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
		close(u);
		return -1;
	}
	return u;
}

static int helper_start(struct port *p, int netns, struct rb_error *err)
{
	int userns = owner_userns(netns, err);
	if (userns == -2)
		return -1;
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		if (userns >= 0)
			close(userns);
		return rb_error_set(err, errno, "port %u: socketpair", p->n);
	}
	pid_t pid = fork();
	if (pid == 0)
		helper_main(userns, netns, sp[1]);
	int e = errno;
	if (userns >= 0)
		close(userns);
	close(sp[1]);
	if (pid < 0) {
		close(sp[0]);
		return rb_error_set(err, e, "port %u: fork its helper", p->n);
	}
	p->helper = sp[0];
	p->helper_pid = pid;
	return 0;
}

static void helper_stop(struct port *p)
{
	if (p->helper >= 0)
		close(p->helper); /* it reads EOF and exits */
	p->helper = -1;
	if (p->helper_pid > 0)
		while (waitpid(p->helper_pid, NULL, 0) < 0 && errno == EINTR)
			;
	p->helper_pid = -1;
}

/* A TCP socket of the session's netns, from the helper (only the port's thread asks). */
static int inner_socket(struct port *p, struct rb_error *err)
{
	char c = 0;
	if (send(p->helper, &c, 1, MSG_NOSIGNAL) != 1)
		return rb_error_set(err, errno, "port %u: its helper", p->n);
	int e = 0, fd = -1;
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = &e, .iov_len = sizeof e};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t r = recvmsg(p->helper, &m, MSG_CMSG_CLOEXEC);
	if (r != (ssize_t)sizeof e)
		return rb_error_set(err, r < 0 ? errno : EPROTO, "port %u: its helper's answer", p->n);
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof fd);
	if (fd < 0)
		return rb_error_set(err, e ? e : EPROTO, "port %u: a socket in the session's netns", p->n);
	return fd;
}

/* ---- one connection ------------------------------------------------------------------------ */

static bool token_eq(const char *a, size_t alen, const char *tok)
{
	size_t n = strlen(tok);
	if (alen != n)
		return false;
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ tok[i]);
	return d == 0;
}

/* Reads the first request's head (through "\r\n\r\n") into buf; returns the bytes read in all
 * (the head and what followed it), *head its length; -1 on EOF, overflow or timeout. */
static ssize_t read_head(int fd, char *buf, size_t cap, size_t *head)
{
	size_t n = 0;
	uint64_t until = (rb_now_us() / 1000u) + HEADER_WAIT_MS;
	while (n < cap) {
		uint64_t now = (rb_now_us() / 1000u);
		if (now >= until)
			return -1;
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int pr = poll(&pf, 1, (int)(until - now));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return -1;
		ssize_t r = recv(fd, buf + n, cap - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n += (size_t)r;
		char *e = memmem(buf, n, "\r\n\r\n", 4);
		if (e) {
			*head = (size_t)(e - buf) + 4;
			return (ssize_t)n;
		}
	}
	return -1;
}

/* Checks the head for the token (the query parameter runbox_token=T or the header
 * Authorization: Bearer T) and writes it into out without what carried it. */
static bool check_head(const char *tok, const char *h, size_t hn, char *out, size_t *on)
{
	bool ok = false;
	size_t o = 0;
	const char *le = memmem(h, hn, "\r\n", 2);
	const char *sp1 = memchr(h, ' ', (size_t)(le - h));
	const char *sp2 = sp1 ? memrchr(sp1 + 1, ' ', (size_t)(le - sp1 - 1)) : NULL;
	if (!sp1 || !sp2)
		return false;
	/* The request line: the target's query without runbox_token=T. */
	memcpy(out, h, (size_t)(sp1 + 1 - h));
	o = (size_t)(sp1 + 1 - h);
	const char *q = memchr(sp1 + 1, '?', (size_t)(sp2 - sp1 - 1));
	const char *pend = q ? q : sp2;
	memcpy(out + o, sp1 + 1, (size_t)(pend - sp1 - 1));
	o += (size_t)(pend - sp1 - 1);
	if (q) {
		bool first = true;
		for (const char *a = q + 1; a <= sp2;) {
			const char *amp = memchr(a, '&', (size_t)(sp2 - a));
			const char *ae = amp ? amp : sp2;
			static const char key[] = "runbox_token=";
			if ((size_t)(ae - a) >= sizeof key - 1 && !memcmp(a, key, sizeof key - 1) &&
			    token_eq(a + sizeof key - 1, (size_t)(ae - a) - (sizeof key - 1), tok)) {
				ok = true;
			} else if (ae > a) {
				out[o++] = first ? '?' : '&';
				first = false;
				memcpy(out + o, a, (size_t)(ae - a));
				o += (size_t)(ae - a);
			}
			a = ae + 1;
		}
	}
	memcpy(out + o, sp2, (size_t)(le + 2 - sp2));
	o += (size_t)(le + 2 - sp2);
	/* The header lines, without Authorization: Bearer T. */
	for (const char *l = le + 2; l < h + hn;) {
		const char *e = memmem(l, (size_t)(h + hn - l), "\r\n", 2);
		size_t ln = (size_t)(e - l) + 2;
		static const char auth[] = "authorization:";
		if (ln > sizeof auth && !strncasecmp(l, auth, sizeof auth - 1)) {
			const char *v = l + sizeof auth - 1, *ve = e;
			while (v < ve && (*v == ' ' || *v == '\t'))
				v++;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if (ve - v > 7 && !strncasecmp(v, "bearer ", 7) && token_eq(v + 7, (size_t)(ve - v - 7), tok)) {
				ok = true;
				l += ln;
				continue;
			}
		}
		memcpy(out + o, l, ln);
		o += ln;
		l += ln;
	}
	*on = o;
	return ok;
}

static void conn_close_fds(struct conn *c)
{
	pthread_mutex_lock(&c->p->lock);
	if (c->cfd >= 0)
		close(c->cfd);
	if (c->ifd >= 0)
		close(c->ifd);
	c->cfd = c->ifd = -1;
	pthread_mutex_unlock(&c->p->lock);
}

/* Both ways until both ended; counts bytes each way. */
static void relay(int cfd, int ifd, uint64_t *in, uint64_t *out)
{
	_cleanup_free_ char *buf = malloc(RELAY_BUF);
	if (!buf)
		return;
	struct pollfd pf[2] = {{.fd = cfd, .events = POLLIN}, {.fd = ifd, .events = POLLIN}};
	int to[2] = {ifd, cfd};
	uint64_t *count[2] = {in, out};
	while (pf[0].fd >= 0 || pf[1].fd >= 0) {
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if (pf[i].fd < 0 || !pf[i].revents)
				continue;
			ssize_t r = recv(pf[i].fd, buf, RELAY_BUF, 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r > 0 && rb_send_all(to[i], buf, (size_t)r) == 0) {
				*count[i] += (uint64_t)r;
				continue;
			}
			if (r < 0 || r > 0)
				return; /* a reset, or the other side gone */
			shutdown(to[i], SHUT_WR);
			pf[i].fd = -1;
		}
	}
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct port *p = c->p;
	uint64_t t0 = (rb_now_us() / 1000u), in = 0, out = 0;
	bool authorized = p->is_unix;
	const char *error = NULL;
	_cleanup_free_ char *buf = NULL, *head = NULL;
	size_t hn = 0, on = 0;
	ssize_t got = 0;
	if (!p->is_unix) {
		buf = malloc(HEADER_MAX);
		head = malloc(HEADER_MAX);
		if (!buf || !head || (got = read_head(c->cfd, buf, HEADER_MAX, &hn)) < 0)
			error = "no HTTP request head";
		else if (!(authorized = check_head(p->token, buf, hn, head, &on))) {
			static const char r401[] = "HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\n"
			                           "Content-Length: 32\r\nConnection: close\r\n\r\n"
			                           "runbox: this port needs a token\n";
			(void)rb_send_all(c->cfd, r401, sizeof r401 - 1);
			error = "no token";
		}
	}
	if (authorized) {
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p->n)};
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (connect(c->ifd, (struct sockaddr *)&a, sizeof a) < 0) {
			error = "nothing listens on the port inside";
			if (!p->is_unix) {
				static const char r502[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n"
				                           "Connection: close\r\n\r\n";
				(void)rb_send_all(c->cfd, r502, sizeof r502 - 1);
			}
		} else if (!p->is_unix &&
		           (rb_send_all(c->ifd, head, on) < 0 || rb_send_all(c->ifd, buf + hn, (size_t)got - hn) < 0)) {
			error = "the inner connection closed";
		} else {
			if (!p->is_unix)
				in = on + ((size_t)got - hn);
			relay(c->cfd, c->ifd, &in, &out);
		}
	}
	conn_close_fds(c);
	json_t *ev = json_pack("{s:I, s:b, s:I, s:I, s:I}", "port", (json_int_t)p->n, "authorized", authorized,
	                       "bytes_in", (json_int_t)in, "bytes_out", (json_int_t)out, "duration_ms",
	                       (json_int_t)((rb_now_us() / 1000u) - t0));
	if (ev && error)
		json_object_set_new(ev, "error", json_string(error));
	struct rb_error err;
	if (ev && !atomic_load(&p->closing)) {
		json_incref(ev);
		if (rb_serve_record(p->sv, p->sid, "port_connection", ev, &err) == 0) {
			json_decref(ev);
			ev = NULL;
		} else
			rb_warn("session %s: port %u: ledger: %s", p->sid, p->n, err.msg);
	}
	pthread_mutex_lock(&p->lock);
	c->pending = ev; /* the closer records it */
	c->ended = true;
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

/* Joins the connections that ended (all, waiting for them, when all). */
static void reap(struct port *p, bool all)
{
	for (unsigned i = 0; i < CONNS_MAX; i++) {
		struct conn *c = &p->conns[i];
		pthread_mutex_lock(&p->lock);
		bool join = c->busy && (all || c->ended);
		pthread_mutex_unlock(&p->lock);
		if (join) {
			pthread_join(c->th, NULL);
			c->busy = false;
		}
	}
}

static void accept_one(struct port *p)
{
	int cfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (cfd < 0)
		return;
	reap(p, false);
	struct conn *c = NULL;
	for (unsigned i = 0; i < CONNS_MAX && !c; i++)
		if (!p->conns[i].busy)
			c = &p->conns[i];
	struct rb_error err;
	int ifd = c ? inner_socket(p, &err) : -1;
	if (!c || ifd < 0) {
		if (!c)
			rb_warn("session %s: port %u: %d connections already, one refused", p->sid, p->n, CONNS_MAX);
		else
			rb_warn("session %s: %s", p->sid, err.msg);
		close(cfd);
		return;
	}
	if (c->pending) { /* an end its thread could not record (a ledger failure, warned of) */
		json_decref(c->pending);
		c->pending = NULL;
	}
	*c = (struct conn){.p = p, .busy = true, .cfd = cfd, .ifd = ifd};
	if (pthread_create(&c->th, NULL, conn_main, c) != 0) {
		close(cfd);
		close(ifd);
		c->busy = false;
	}
}

static void *port_main(void *arg)
{
	struct port *p = arg;
	struct pollfd pf[2] = {{.fd = p->lfd, .events = POLLIN}, {.fd = p->stop[0], .events = POLLIN}};
	for (;;) {
		if (poll(pf, 2, 1000) < 0 && errno != EINTR)
			break;
		if (pf[1].revents)
			break;
		if (pf[0].revents & POLLIN)
			accept_one(p);
		reap(p, false);
	}
	return NULL;
}

/* ---- a port's life ------------------------------------------------------------------------- */

static void port_free(struct port *p)
{
	if (p->lfd >= 0)
		close(p->lfd);
	if (p->is_unix && p->path[0])
		unlink(p->path);
	helper_stop(p);
	if (p->stop[0] >= 0)
		close(p->stop[0]);
	if (p->stop[1] >= 0)
		close(p->stop[1]);
	for (unsigned i = 0; i < CONNS_MAX; i++)
		json_decref(p->conns[i].pending);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Stops the port's thread, closes its listener at once, ends and joins its connections; each
 * end event not recorded yet goes to rec when given, else through rb_serve_record. */
static void port_close(struct port *p, struct rb_record *rec, const char *reason)
{
	atomic_store(&p->closing, rec != NULL);
	char c = 1;
	if (write(p->stop[1], &c, 1) < 0)
		rb_warn("session %s: port %u: stop its thread: %s", p->sid, p->n, strerror(errno));
	pthread_join(p->th, NULL);
	close(p->lfd); /* a connect is refused from now on */
	p->lfd = -1;
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < CONNS_MAX; i++) {
		if (p->conns[i].cfd >= 0 && p->conns[i].busy)
			shutdown(p->conns[i].cfd, SHUT_RDWR);
		if (p->conns[i].ifd >= 0 && p->conns[i].busy)
			shutdown(p->conns[i].ifd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&p->lock);
	reap(p, true);
	struct rb_error err;
	for (unsigned i = 0; i < CONNS_MAX; i++) {
		json_t *ev = p->conns[i].pending;
		p->conns[i].pending = NULL;
		if (!ev)
			continue;
		int r = rec ? rb_record_event(rec, "port_connection", ev, &err)
		            : rb_serve_record(p->sv, p->sid, "port_connection", ev, &err);
		if (r < 0)
			rb_warn("session %s: port %u: ledger: %s", p->sid, p->n, err.msg);
	}
	json_t *ev = json_pack("{s:I, s:s}", "port", (json_int_t)p->n, "reason", reason);
	int r =
	    rec ? rb_record_event(rec, "port_close", ev, &err) : rb_serve_record(p->sv, p->sid, "port_close", ev, &err);
	if (r < 0)
		rb_warn("session %s: port %u: ledger: %s", p->sid, p->n, err.msg);
	port_free(p);
}

static int listen_tcp(struct port *p, struct rb_error *err)
{
	p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0)
		return rb_error_set(err, errno, "port %u: socket", p->n);
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof a;
	if (bind(p->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(p->lfd, 64) < 0 ||
	    getsockname(p->lfd, (struct sockaddr *)&a, &al) < 0)
		return rb_error_set(err, errno, "port %u: listen on 127.0.0.1", p->n);
	p->host_port = ntohs(a.sin_port);
	return 0;
}

static int listen_unix(struct port *p, const char *state_dir, struct rb_error *err)
{
	char dir[4096];
	if ((size_t)snprintf(dir, sizeof dir, "%s/ports", state_dir) >= sizeof dir)
		return rb_error_setk(err, RB_ERR_INPUT, ENAMETOOLONG, "port %u: the state dir's name is too long",
		                     p->n);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return rb_error_set(err, errno, "port %u: mkdir %s", p->n, dir);
	/* The directory, the daemon's and 0700, guards the socket until its own mode is set (no
	 * umask: it is the whole process's, and other threads make files meanwhile). */
	struct stat st;
	if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || chmod(dir, 0700) < 0)
		return rb_error_setk(err, RB_ERR_HOST, errno, "port %u: %s is not the daemon's own directory", p->n,
		                     dir);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if ((size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/%s-%u.sock", dir, p->sid, p->n) >= sizeof a.sun_path)
		return rb_error_setk(err, RB_ERR_HOST, ENAMETOOLONG, "port %u: %s/...: too long for a unix socket",
		                     p->n, dir);
	unlink(a.sun_path); /* one a daemon before this one left */
	p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->lfd < 0)
		return rb_error_set(err, errno, "port %u: socket", p->n);
	if (bind(p->lfd, (struct sockaddr *)&a, sizeof a) < 0 || chmod(a.sun_path, 0600) < 0 || listen(p->lfd, 64) < 0)
		return rb_error_set(err, errno, "port %u: listen on %s", p->n, a.sun_path);
	snprintf(p->path, sizeof p->path, "%s", a.sun_path);
	return 0;
}

static json_t *port_json(const struct port *p)
{
	if (p->is_unix)
		return json_pack("{s:I, s:b, s:s}", "port", (json_int_t)p->n, "unix", 1, "path", p->path);
	char url[64];
	snprintf(url, sizeof url, "http://127.0.0.1:%u/", p->host_port);
	return json_pack("{s:I, s:b, s:s, s:I, s:s}", "port", (json_int_t)p->n, "unix", 0, "host", "127.0.0.1",
	                 "host_port", (json_int_t)p->host_port, "url", url);
}

/* ---- the calls, run under the session table's lock by rb_serve_ports_call ------------------- */

struct open_arg {
	unsigned n;
	bool is_unix;
	struct rb_serve *sv;
	const char *sid;
	json_t *reply;
};

static int open_locked(struct rb_serve_ports **pp, const struct rb_serve_ports_at *at, void *arg, struct rb_error *err)
{
	struct open_arg *oa = arg;
	if (!*pp) {
		struct rb_serve_ports *ps = calloc(1, sizeof *ps);
		if (!ps)
			return rb_error_set(err, ENOMEM, "ports");
		if (rb_random_hex(ps->token, sizeof ps->token) < 0) {
			free(ps);
			return rb_error_set(err, errno, "the session's port token");
		}
		*pp = ps;
	}
	struct rb_serve_ports *ps = *pp;
	for (struct port *q = ps->head; q; q = q->next)
		if (q->n == oa->n)
			return rb_error_setk(err, RB_ERR_CONFLICT, 0, "port %u is exposed already", oa->n);
	if (ps->n >= PORTS_MAX)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "a session exposes at most %d ports", PORTS_MAX);
	if (at->tenant_ports >= RB_SERVE_PORTS_PER_TENANT)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "a tenant's sessions expose at most %d ports in all",
		                     RB_SERVE_PORTS_PER_TENANT);
	int netns = at->netns;
	const char *state_dir = at->state_dir;
	if (netns < 0)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "the session's sandbox is not up");
	struct port *p = calloc(1, sizeof *p);
	if (!p)
		return rb_error_set(err, ENOMEM, "port %u", oa->n);
	*p = (struct port){.sv = oa->sv,
	                   .n = oa->n,
	                   .is_unix = oa->is_unix,
	                   .lfd = -1,
	                   .stop = {-1, -1},
	                   .helper = -1,
	                   .helper_pid = -1};
	pthread_mutex_init(&p->lock, NULL);
	for (unsigned i = 0; i < CONNS_MAX; i++)
		p->conns[i].cfd = p->conns[i].ifd = -1;
	snprintf(p->sid, sizeof p->sid, "%s", oa->sid);
	memcpy(p->token, ps->token, sizeof p->token);
	int r = oa->is_unix ? listen_unix(p, state_dir, err) : listen_tcp(p, err);
	if (r == 0 && pipe2(p->stop, O_CLOEXEC) < 0)
		r = rb_error_set(err, errno, "port %u: pipe", p->n);
	if (r == 0)
		r = helper_start(p, netns, err);
	if (r == 0 && (errno = pthread_create(&p->th, NULL, port_main, p)) != 0)
		r = rb_error_set(err, errno, "port %u: its thread", p->n);
	if (r < 0) {
		port_free(p);
		return -1;
	}
	p->next = ps->head;
	ps->head = p;
	ps->n++;
	oa->reply = port_json(p);
	if (!p->is_unix)
		json_object_set_new(oa->reply, "token", json_string(ps->token));
	return 0;
}

static int list_locked(struct rb_serve_ports **pp, const struct rb_serve_ports_at *at, void *arg, struct rb_error *err)
{
	(void)at, (void)err;
	json_t *a = arg;
	for (struct port *p = *pp ? (*pp)->head : NULL; p; p = p->next)
		json_array_append_new(a, port_json(p));
	return 0;
}

struct del_arg {
	unsigned n;
	struct port *p;
};

static int del_locked(struct rb_serve_ports **pp, const struct rb_serve_ports_at *at, void *arg, struct rb_error *err)
{
	(void)at;
	struct del_arg *da = arg;
	for (struct port **q = *pp ? &(*pp)->head : NULL; q && *q; q = &(*q)->next)
		if ((*q)->n == da->n) {
			da->p = *q;
			*q = da->p->next;
			(*pp)->n--;
			return 0;
		}
	return rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "port %u is not exposed", da->n);
}

int rb_serve_port_number(const char *s, unsigned *n)
{
	char *end;
	errno = 0;
	unsigned long v = s ? strtoul(s, &end, 10) : 0;
	if (!s || !*s || *end || errno || v < RB_SERVE_PORT_MIN || v > RB_SERVE_PORT_MAX)
		return -1;
	*n = (unsigned)v;
	return 0;
}

unsigned rb_serve_port_open(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply)
{
	/* Checked as every body is (sessions.c's check_body): unknown keys and wrong types named
	 * by JSON path. */
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_jsonck ck = {"request", "body", &err};
	const json_t *jp = json_object_get(body, "port"), *ju = json_object_get(body, "unix");
	const char *k;
	const json_t *v;
	int bad = json_is_object(body) ? 0 : rb_jsonck_expected(&ck, "$", "an object", body);
	json_object_foreach((json_t *)body, k, v)
	{
		if (!bad && strcmp(k, "port") != 0 && strcmp(k, "unix") != 0)
			bad = rb_jsonck_bad(&ck, "", "unknown key `$.%s`", k);
	}
	if (!bad && (!json_is_integer(jp) || json_integer_value(jp) < RB_SERVE_PORT_MIN ||
	             json_integer_value(jp) > RB_SERVE_PORT_MAX))
		bad = rb_jsonck_expected(&ck, "$.port", "an integer from 3000 to 9999", jp);
	if (!bad && ju && !json_is_boolean(ju))
		bad = rb_jsonck_expected(&ck, "$.unix", "a boolean", ju);
	if (bad)
		return rb_serve_error(&err, reply); /* errno 0: bad input, a 400 */
	struct open_arg oa = {.n = (unsigned)json_integer_value(jp), .is_unix = json_is_true(ju), .sv = sv, .sid = sid};
	if (rb_serve_ports_call(sv, sid, open_locked, &oa, &err) < 0)
		return rb_serve_error(&err, reply);
	json_t *ev = json_deep_copy(oa.reply);
	json_object_del(ev, "token"); /* the ledger never holds the token */
	if (rb_serve_record(sv, sid, "port_open", ev, &err) < 0) {
		struct del_arg da = {.n = oa.n};
		struct rb_error e2;
		if (rb_serve_ports_call(sv, sid, del_locked, &da, &e2) == 0)
			port_close(da.p, NULL, "not recorded");
		json_decref(oa.reply);
		return rb_serve_error(&err, reply);
	}
	*reply = oa.reply;
	return 200;
}

unsigned rb_serve_port_list(struct rb_serve *sv, const char *sid, json_t **reply)
{
	json_t *a = json_array();
	struct rb_error err;
	if (rb_serve_ports_call(sv, sid, list_locked, a, &err) < 0) {
		json_decref(a);
		return rb_serve_error(&err, reply);
	}
	*reply = json_pack("{s:o}", "ports", a);
	return 200;
}

unsigned rb_serve_port_close(struct rb_serve *sv, const char *sid, unsigned n, json_t **reply)
{
	struct del_arg da = {.n = n};
	struct rb_error err;
	if (rb_serve_ports_call(sv, sid, del_locked, &da, &err) < 0)
		return rb_serve_error(&err, reply);
	port_close(da.p, NULL, "deleted");
	*reply = json_pack("{s:I, s:b}", "port", (json_int_t)n, "closed", 1);
	return 200;
}

unsigned rb_serve_ports_count(const struct rb_serve_ports *ps)
{
	return ps ? ps->n : 0;
}

void rb_serve_ports_free(struct rb_serve_ports *ps, struct rb_record *rec)
{
	if (!ps)
		return;
	while (ps->head) {
		struct port *p = ps->head;
		ps->head = p->next;
		port_close(p, rec, "session closed");
	}
	free(ps);
}

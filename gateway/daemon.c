/* The gateway daemon (daemon.h): one accepting loop; a thread per registered run that holds the
 * run's endpoint (struct rb_gateway) for as long as the registering connection stays open. */
#define _GNU_SOURCE
#include "gateway/daemon.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/gwsock.h"
#include "common/paths.h"
#include "common/util.h"
#include "gateway/config.h"
#include "gateway/endpoint.h"
#include "gateway/grant.h"

#define REGISTER_TIMEOUT_S 5 /* a peer that does not send its grant within this is dropped */

/* The config the daemon serves with: replaced whole on SIGHUP, kept by each run that started
 * with it until that run ends (its routes are read on every call). */
struct conf_ref {
	struct rb_gwconf conf;
	unsigned refs; /* under the daemon's lock */
};

struct gwd {
	const char *conf_path; /* --config, NULL: the default places */
	const char *socket;
	struct rb_paths paths;
	struct rb_host host;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	struct conf_ref *conf; /* the current one (a reference of its own) */
	unsigned n_conns;      /* connection threads running */
	int stop_fd;           /* an eventfd, readable once the daemon stops */
	uid_t uid;
};

struct conn {
	struct gwd *d;
	int fd;
	struct ucred peer;
};

/* One line on stderr: the daemon's log (one write, so threads' lines do not mix). */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char line[1024];
	int n = snprintf(line, sizeof line, "runbox gateway: ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
	va_end(ap);
	size_t len = strlen(line);
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

static struct conf_ref *conf_get(struct gwd *d)
{
	pthread_mutex_lock(&d->lock);
	struct conf_ref *c = d->conf;
	c->refs++;
	pthread_mutex_unlock(&d->lock);
	return c;
}

static void conf_put(struct gwd *d, struct conf_ref *c)
{
	pthread_mutex_lock(&d->lock);
	bool last = --c->refs == 0;
	pthread_mutex_unlock(&d->lock);
	if (last)
		free(c);
}

static int conf_load(struct gwd *d, struct rb_error *err)
{
	struct conf_ref *c = calloc(1, sizeof *c);
	if (!c)
		return rb_error_set(err, ENOMEM, "gateway config");
	if (rb_gwconf_load(d->conf_path, &d->paths, &c->conf, err) < 0) {
		free(c);
		return -1;
	}
	c->refs = 1;
	pthread_mutex_lock(&d->lock);
	struct conf_ref *old = d->conf;
	d->conf = c;
	pthread_mutex_unlock(&d->lock);
	if (old)
		conf_put(d, old);
	say("config %s (%u connectors)", c->conf.origin[0] ? c->conf.origin : "(none: no connectors)",
	    c->conf.n_connectors);
	return 0;
}

/* A JSON line to the runner; -1 when it could not be written whole. */
static int send_line(int fd, json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!text)
		return -1;
	size_t n = strlen(text);
	text[n] = '\n';
	int r = rb_send_all(fd, text, n + 1);
	free(text);
	return r;
}

/* The grant line, with the descriptors sent with its first byte (SCM_RIGHTS). */
static json_t *read_grant(int fd, int *fds, unsigned *n_fds, struct rb_error *err)
{
	*n_fds = 0;
	char *buf = malloc(RB_GWSOCK_LINE_MAX);
	if (!buf) {
		rb_error_set(err, ENOMEM, "registration");
		return NULL;
	}
	size_t len = 0;
	union {
		char buf[CMSG_SPACE(sizeof(int) * RB_GWSOCK_MAX_FDS)];
		struct cmsghdr align;
	} u;
	bool first = true;
	for (;;) {
		if (len == RB_GWSOCK_LINE_MAX) {
			rb_error_set(err, E2BIG, "registration: grant over %zu bytes", RB_GWSOCK_LINE_MAX);
			break;
		}
		struct iovec iov = {.iov_base = buf + len, .iov_len = first ? 1 : RB_GWSOCK_LINE_MAX - len};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		if (first) {
			m.msg_control = u.buf;
			m.msg_controllen = sizeof u.buf;
		}
		ssize_t r = recvmsg(fd, &m, first ? MSG_CMSG_CLOEXEC : 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rb_error_set(err, r < 0 ? errno : 0, "registration: %s",
			             r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? "no grant within the timeout"
			             : r < 0                                            ? "read the grant"
			                     : "connection closed before the grant");
			break;
		}
		if (first) {
			for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
				if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
					unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
					for (unsigned i = 0; i < k; i++) {
						int f;
						memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
						if (*n_fds < RB_GWSOCK_MAX_FDS)
							fds[(*n_fds)++] = f;
						else
							close(f);
					}
				}
			if (m.msg_flags & MSG_CTRUNC) {
				rb_error_set(err, E2BIG, "registration: over %d descriptors", RB_GWSOCK_MAX_FDS);
				break;
			}
			first = false;
		}
		char *nl = memchr(buf + len, '\n', (size_t)r);
		len += (size_t)r;
		if (nl) {
			json_error_t jerr;
			json_t *j = json_loadb(buf, (size_t)(nl - buf), 0, &jerr);
			if (!json_is_object(j)) {
				json_decref(j);
				rb_error_set(err, EINVAL, "registration: the grant is not a JSON object: %s",
				             jerr.text);
				break;
			}
			free(buf);
			return j;
		}
	}
	free(buf);
	return NULL;
}

/* Serves one registered run until its connection closes or the daemon stops. */
static void serve_run(struct conn *c)
{
	struct gwd *d = c->d;
	struct rb_error err;
	int fds[RB_GWSOCK_MAX_FDS];
	unsigned n_fds = 0;
	struct timeval tv = {.tv_sec = REGISTER_TIMEOUT_S};
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	json_t *cfg = read_grant(c->fd, fds, &n_fds, &err);
	struct rb_gw_grant *g = cfg ? calloc(1, sizeof *g) : NULL;
	if (!cfg || !g || rb_gw_grant_parse(cfg, fds, n_fds, g, &err) < 0) {
		if (cfg && !g)
			rb_error_set(&err, ENOMEM, "registration");
		say("pid %d (uid %u): refused: %s", (int)c->peer.pid, (unsigned)c->peer.uid, err.msg);
		send_line(c->fd, json_pack("{s:s}", "error", err.msg));
		for (unsigned i = 0; i < n_fds; i++)
			close(fds[i]);
		free(g);
		json_decref(cfg);
		return;
	}
	json_decref(cfg); /* g holds it */
	/* The DNS socket is the gateway's to close: it gets a dup; every received fd is closed. */
	if (g->gc.serve_dns)
		g->gc.dns_fd = fcntl(g->gc.dns_fd, F_DUPFD_CLOEXEC, 3);
	struct conf_ref *conf = conf_get(d);
	struct rb_gateway_config gc = g->gc;
	gc.conf = &conf->conf;
	gc.event_fd = c->fd; /* each call's record goes back to the runner, as a per-run gateway's stdout */
	struct rb_gateway *gw = NULL;
	int r = gc.serve_dns && gc.dns_fd < 0 ? rb_error_set(&err, errno, "dup the DNS socket")
	                                      : rb_gateway_start(&gc, &gw, &err);
	for (unsigned i = 0; i < n_fds; i++)
		close(fds[i]);
	OPENSSL_cleanse(g->key, sizeof g->key);
	char run_id[RB_TOKEN_FIELD_MAX];
	snprintf(run_id, sizeof run_id, "%s", gc.run_id);
	if (r < 0) {
		say("run %s (pid %d, uid %u): refused: %s", run_id, (int)c->peer.pid, (unsigned)c->peer.uid, err.msg);
		send_line(c->fd, json_pack("{s:s}", "error", err.msg));
		conf_put(d, conf);
		rb_gw_grant_free(g);
		free(g);
		return;
	}
	say("run %s (pid %d, uid %u): serving %u listener(s)%s, %u connector(s) granted, cpu share %g", run_id,
	    (int)c->peer.pid, (unsigned)c->peer.uid, gc.n_listen_fds, gc.serve_dns ? " and the DNS stub" : "",
	    gc.n_grants, gc.cpus);
	send_line(c->fd, json_pack("{s:{s:s, s:i}}", "ready", "run_id", run_id, "pid", (int)getpid()));
	/* Served while the runner holds the connection: its EOF (or reset) ends the run here. */
	for (;;) {
		struct pollfd p[2] = {{.fd = c->fd, .events = POLLIN | POLLRDHUP},
		                      {.fd = d->stop_fd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		char junk[256];
		ssize_t n = recv(c->fd, junk, sizeof junk, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			break;
	}
	struct rb_gateway_stats st;
	rb_gateway_stop(gw, &st);
	say("run %s: ended, %llu request(s), %llu unauthorized, %llu refused, %llu rate limited", run_id,
	    (unsigned long long)st.requests, (unsigned long long)st.unauthorized, (unsigned long long)st.refused,
	    (unsigned long long)st.rate_limited);
	send_line(c->fd, json_pack("{s:o}", "stats", rb_gateway_stats_json(&st)));
	conf_put(d, conf);
	rb_gw_grant_free(g);
	free(g);
}

static void *conn_thread(void *arg)
{
	struct conn *c = arg;
	struct gwd *d = c->d;
	/* Only the daemon's own uid or root may register: a registration names connectors to be
	 * served with the operator's secrets, so whoever registers spends them. */
	if (c->peer.uid != d->uid && c->peer.uid != 0) {
		char msg[160];
		snprintf(msg, sizeof msg, "peer uid %u may not register runs (only uid %u or root)",
		         (unsigned)c->peer.uid, (unsigned)d->uid);
		say("pid %d: refused: %s", (int)c->peer.pid, msg);
		send_line(c->fd, json_pack("{s:s}", "error", msg));
	} else {
		serve_run(c);
	}
	close(c->fd);
	free(c);
	pthread_mutex_lock(&d->lock);
	if (--d->n_conns == 0)
		pthread_cond_broadcast(&d->idle);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* A socket at path that answers is another daemon's: refused. One that does not is stale. */
static int bind_socket(const char *path, struct rb_error *err)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof a.sun_path)
		return rb_error_set(err, ENAMETOOLONG, "gateway socket %s", path);
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return rb_error_set(err, errno, "gateway socket's directory %s", dir);
	}
	int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&a, sizeof a) == 0) {
		close(probe);
		return rb_error_set(err, EADDRINUSE, "gateway socket %s: another daemon answers there", path);
	}
	if (probe >= 0)
		close(probe);
	if (unlink(path) < 0 && errno != ENOENT)
		return rb_error_set(err, errno, "gateway socket %s: remove the stale one", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rb_error_set(err, errno, "gateway socket");
	mode_t old = umask(0177); /* 0600 from its creation: no window where another uid connects */
	int r = bind(fd, (struct sockaddr *)&a, sizeof a);
	umask(old);
	if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
		int e = errno;
		close(fd);
		return rb_error_set(err, e, "gateway socket %s", path);
	}
	return fd;
}

static int usage(FILE *f, int code)
{
	fprintf(f, "usage: runbox gateway serve [--config FILE] [--socket PATH]\n");
	return code;
}

int rb_gwd_main(int argc, char **argv, const struct rb_host *host)
{
	struct gwd d = {.uid = geteuid(), .host = *host, .stop_fd = -1};
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			d.conf_path = argv[++i];
		else if (!strcmp(argv[i], "--socket") && i + 1 < argc)
			d.socket = argv[++i];
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return usage(stdout, 0);
		else
			return usage(stderr, 125);
	}
	char sockbuf[PATH_MAX];
	if (!d.socket && !(d.socket = rb_gwsock_path(&d.host, sockbuf, sizeof sockbuf))) {
		fprintf(stderr, "runbox gateway: no socket path (set XDG_RUNTIME_DIR or give --socket)\n");
		return 125;
	}
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN); /* a runner gone mid-record is an EPIPE on its connection */
	struct rb_error err;
	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.idle, NULL);
	if (rb_paths_init(&d.paths, &d.host, NULL, &err) < 0 || conf_load(&d, &err) < 0) {
		fprintf(stderr, "runbox gateway: %s\n", err.msg);
		return 125;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "runbox gateway: curl_global_init failed\n");
		return 125;
	}
	int sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	d.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int lfd = sig_fd >= 0 && d.stop_fd >= 0 ? bind_socket(d.socket, &err)
	                                        : rb_error_set(&err, errno, "signalfd or eventfd");
	if (lfd < 0) {
		fprintf(stderr, "runbox gateway: %s\n", err.msg);
		return 125;
	}
	say("serving on %s (pid %d, uid %u)", d.socket, (int)getpid(), (unsigned)d.uid);
	for (;;) {
		struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sig_fd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			say("poll: %s", strerror(errno));
			break;
		}
		if (p[1].revents) {
			struct signalfd_siginfo si;
			if (read(sig_fd, &si, sizeof si) != (ssize_t)sizeof si)
				continue;
			if (si.ssi_signo != SIGHUP)
				break;
			/* New runs get the new config; running ones keep theirs. A bad file keeps the old. */
			if (conf_load(&d, &err) < 0)
				say("SIGHUP: config not reloaded, the old one stays: %s", err.msg);
			continue;
		}
		if (!p[0].revents)
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct conn *c = calloc(1, sizeof *c);
		socklen_t cl = sizeof c->peer;
		if (!c || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c->peer, &cl) < 0) {
			close(fd);
			free(c);
			continue;
		}
		int big = 1 << 20; /* room for a burst of records while the runner is busy, as its pipe has */
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
		c->d = &d;
		c->fd = fd;
		pthread_mutex_lock(&d.lock);
		d.n_conns++;
		pthread_mutex_unlock(&d.lock);
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, conn_thread, c) != 0) {
			close(fd);
			free(c);
			pthread_mutex_lock(&d.lock);
			d.n_conns--;
			pthread_mutex_unlock(&d.lock);
		}
		pthread_attr_destroy(&attr);
	}
	/* Stop: no new runs; each served run's endpoint stops and its counts go to its runner. */
	close(lfd);
	unlink(d.socket);
	uint64_t one = 1;
	ssize_t w = write(d.stop_fd, &one, sizeof one);
	(void)w;
	pthread_mutex_lock(&d.lock);
	while (d.n_conns)
		pthread_cond_wait(&d.idle, &d.lock);
	pthread_mutex_unlock(&d.lock);
	say("stopped");
	conf_put(&d, d.conf);
	close(d.stop_fd);
	close(sig_fd);
	curl_global_cleanup();
	return 0;
}

/* A run's control socket: the owner's listener and handler, and the `runbox kill` client
 * (see control.h). */
#define _GNU_SOURCE
#include "runtime/run/control.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

struct rb_control {
	int fd;  /* listening */
	int dfd; /* the run directory (O_PATH): the socket is bound and removed through it */
	char id[72];
	char name[80]; /* <id>.ctl */
	char path[4200];
};

/* The socket's address through the run directory's fd: sun_path holds 108 bytes, a run
 * directory's path (a --state-dir deep in a tree) may be longer. */
static int address(int dfd, const char *name, struct sockaddr_un *sa, socklen_t *len)
{
	memset(sa, 0, sizeof *sa);
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path, sizeof sa->sun_path, "/proc/self/fd/%d/%s", dfd, name);
	if (n < 0 || (size_t)n >= sizeof sa->sun_path)
		return -1;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + (size_t)n + 1);
	return 0;
}

/* A run id as the state files have them: it names a file in the run directory. */
static int socket_name(const char *run_id, char *out, size_t n, struct rb_error *err)
{
	size_t len = strlen(run_id);
	if (!len || len > 64 ||
	    strspn(run_id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len ||
	    !strcmp(run_id, ".") || !strcmp(run_id, ".."))
		return rb_error_setk(err, RB_ERR_INPUT, 0, "run id `%.80s`: not a run id", run_id);
	snprintf(out, n, "%s" RB_CONTROL_SUFFIX, run_id);
	return 0;
}

void rb_control_close(struct rb_control *c)
{
	if (!c)
		return;
	if (c->fd >= 0) {
		/* Only the socket this owner bound: the name is the run's, claimed by its state file. */
		unlinkat(c->dfd, c->name, 0);
		close(c->fd);
	}
	if (c->dfd >= 0)
		close(c->dfd);
	free(c);
}

int rb_control_open(const char *run_dir, const char *run_id, struct rb_control **out, struct rb_error *err)
{
	*out = NULL;
	struct rb_control *c = calloc(1, sizeof *c);
	if (!c)
		return rb_error_set(err, ENOMEM, "control socket");
	c->fd = -1;
	snprintf(c->id, sizeof c->id, "%s", run_id);
	snprintf(c->path, sizeof c->path, "%s/%s" RB_CONTROL_SUFFIX, run_dir, run_id);
	struct sockaddr_un sa;
	socklen_t salen;
	int fd = -1;
	if (socket_name(run_id, c->name, sizeof c->name, err) < 0)
		goto fail;
	c->dfd = open(run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c->dfd < 0) {
		rb_error_set(err, errno, "open `%s`", run_dir);
		goto fail;
	}
	if (address(c->dfd, c->name, &sa, &salen) < 0) {
		rb_error_set(err, ENAMETOOLONG, "control socket `%s`", c->path);
		goto fail;
	}
	/* What a dead owner of this run id left: the state file this run holds claims the id. */
	struct stat st;
	if (fstatat(c->dfd, c->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
		unlinkat(c->dfd, c->name, 0);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		rb_error_set(err, errno, "control socket `%s`: socket", c->path);
		goto fail;
	}
	if (bind(fd, (struct sockaddr *)&sa, salen) < 0) {
		rb_error_set(err, errno, "bind control socket `%s`", c->path);
		goto fail;
	}
	c->fd = fd; /* from here rb_control_close removes the name */
	/* 0600 before it listens: until listen(2) every connect is refused, so no peer ever meets
	 * the mode the umask gave at bind. The peer check below is the second line. */
	if (fchmodat(c->dfd, c->name, 0600, 0) < 0) {
		rb_error_set(err, errno, "chmod control socket `%s`", c->path);
		goto fail;
	}
	if (listen(fd, 8) < 0) {
		rb_error_set(err, errno, "listen on control socket `%s`", c->path);
		goto fail;
	}
	*out = c;
	return 0;
fail:
	if (fd >= 0 && c->fd < 0)
		close(fd);
	if (c->fd < 0 && c->dfd >= 0) {
		close(c->dfd);
		c->dfd = -1;
	}
	if (c->fd >= 0)
		rb_control_close(c);
	else
		free(c);
	return -1;
}

int rb_control_fd(const struct rb_control *c)
{
	return c ? c->fd : -1;
}

/* Reads one message (up to a newline, EOF or RB_CONTROL_MSG_MAX bytes) within ms. */
static json_t *read_msg(int fd, int ms, const char **why)
{
	char buf[RB_CONTROL_MSG_MAX + 1];
	size_t have = 0;
	uint64_t until = rb_now_us() + (uint64_t)ms * 1000;
	*why = NULL;
	while (have < RB_CONTROL_MSG_MAX && (have == 0 || !memchr(buf, '\n', have))) {
		uint64_t now = rb_now_us();
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = now < until ? (int)((until - now + 999) / 1000) : 0;
		int r = left > 0 ? poll(&pf, 1, left) : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			*why = r == 0 ? "no message in time" : strerror(errno);
			return NULL;
		}
		ssize_t n = recv(fd, buf + have, RB_CONTROL_MSG_MAX - have, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*why = strerror(errno);
			return NULL;
		}
		if (n == 0)
			break;
		have += (size_t)n;
	}
	json_error_t jerr;
	json_t *m = json_loadb(buf, have, JSON_DISABLE_EOF_CHECK, &jerr);
	if (!json_is_object(m)) {
		json_decref(m);
		*why = "not a JSON object";
		return NULL;
	}
	return m;
}

static void send_msg(int fd, json_t *m)
{
	_cleanup_free_ char *text = json_dumps(m, JSON_COMPACT);
	json_decref(m);
	if (!text)
		return;
	size_t n = strlen(text);
	/* The peer may be gone: its loss, never a SIGPIPE of the owner's. */
	if (send(fd, text, n, MSG_NOSIGNAL) == (ssize_t)n)
		(void)!send(fd, "\n", 1, MSG_NOSIGNAL);
}

static void refuse(int fd, const char *msg)
{
	send_msg(fd, json_pack("{s:s}", "error", msg));
}

int rb_control_handle(struct rb_control *c, struct rb_control_req *req, struct rb_error *err)
{
	memset(req, 0, sizeof *req);
	_cleanup_close_ int fd = accept4(c->fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED
		           ? 0
		           : rb_error_set(err, errno, "accept on control socket `%s`", c->path);
	struct ucred cr;
	socklen_t crlen = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
		rb_warn("control socket `%s`: SO_PEERCRED: %s; the peer is refused", c->path, strerror(errno));
		return 0;
	}
	/* Who may stop a run: its owner's user, or root. The socket is 0600 already; this holds
	 * even where its mode was changed or a connected fd was handed on. */
	uid_t owner = geteuid();
	if (cr.uid != owner && cr.uid != 0) {
		char msg[96];
		snprintf(msg, sizeof msg, "refused: uid %u is neither the run's owner nor root", (unsigned)cr.uid);
		rb_warn("run %s: a control request from uid %u (pid %d) is refused: only %s%u%s may stop it", c->id,
		        (unsigned)cr.uid, (int)cr.pid, owner ? "uid " : "root (uid ", (unsigned)owner,
		        owner ? " or root" : ")");
		refuse(fd, msg);
		return 0;
	}
	const char *why;
	json_t *m = read_msg(fd, RB_CONTROL_READ_MS, &why);
	char msg[160];
	if (!m) {
		snprintf(msg, sizeof msg, "bad request: %s", why);
		refuse(fd, msg);
		return 0;
	}
	const char *op = json_string_value(json_object_get(m, "op"));
	const char *id = json_string_value(json_object_get(m, "run_id"));
	json_t *sigv = json_object_get(m, "signal");
	int sig = json_is_integer(sigv) ? (int)json_integer_value(sigv) : -1;
	int r = 0;
	if (!op || strcmp(op, "kill") != 0)
		snprintf(msg, sizeof msg, "bad request: op `%.40s` (only \"kill\")", op ? op : "(none)");
	else if (!id || strcmp(id, c->id) != 0)
		snprintf(msg, sizeof msg, "bad request: this socket is run %s's", c->id);
	else if (sig < 1 || sig > 64)
		snprintf(msg, sizeof msg, "bad request: signal %s (1 to 64)",
		         json_is_integer(sigv) ? "out of range" : "missing");
	else
		r = 1;
	if (r == 0)
		refuse(fd, msg);
	json_decref(m);
	if (r == 1) {
		*req = (struct rb_control_req){.sig = sig, .uid = cr.uid, .pid = cr.pid};
		send_msg(fd, json_pack("{s:b, s:s, s:i}", "ok", 1, "run_id", c->id, "signal", sig));
		rb_info("run %s: cancelled by `runbox kill` (signal %d, uid %u, pid %d)", c->id, sig, (unsigned)cr.uid,
		        (int)cr.pid);
	}
	return r;
}

void rb_control_remove(const char *run_dir, const char *run_id)
{
	char name[80];
	if (socket_name(run_id, name, sizeof name, NULL) < 0)
		return;
	_cleanup_close_ int dfd = open(run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (dfd >= 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISSOCK(st.st_mode))
		unlinkat(dfd, name, 0);
}

int rb_control_request_kill(const char *run_dir, const char *run_id, int sig, struct rb_error *err)
{
	char name[80], path[4200];
	if (socket_name(run_id, name, sizeof name, err) < 0)
		return -1;
	snprintf(path, sizeof path, "%s/%s", run_dir, name);
	_cleanup_close_ int dfd = open(run_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return rb_error_set(err, errno, "open `%s`", run_dir);
	struct sockaddr_un sa;
	socklen_t salen;
	if (address(dfd, name, &sa, &salen) < 0)
		return rb_error_set(err, ENAMETOOLONG, "control socket `%s`", path);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rb_error_set(err, errno, "control socket `%s`: socket", path);
	if (connect(fd, (struct sockaddr *)&sa, salen) < 0) {
		int e = errno;
		if (e == ENOENT || e == ECONNREFUSED)
			return rb_error_setk(err, RB_ERR_CONFLICT, e,
			                     "run %s: its owner takes no requests (control socket `%s`)", run_id, path);
		return rb_error_set(err, e, "run %s: connect to its control socket `%s`", run_id, path);
	}
	json_t *req = json_pack("{s:s, s:s, s:i}", "op", "kill", "run_id", run_id, "signal", sig);
	send_msg(fd, req);
	shutdown(fd, SHUT_WR);
	const char *why;
	json_t *ans = read_msg(fd, RB_CONTROL_ANSWER_MS, &why);
	if (!ans)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "run %s: its owner did not answer (%s)", run_id,
		                     why && !strcmp(why, "not a JSON object") ? "its connection closed" : why);
	int r = 0;
	if (!json_is_true(json_object_get(ans, "ok"))) {
		const char *e = json_string_value(json_object_get(ans, "error"));
		r = rb_error_setk(err, RB_ERR_FORBIDDEN, 0, "run %s: its owner said: %s", run_id, e ? e : "no");
	}
	json_decref(ans);
	return r;
}

/* Registering a run with the gateway daemon (gwreg.h). */
#define _GNU_SOURCE
#include "runtime/run/gwreg.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/gwsock.h"
#include "common/util.h"

/* One line from fd, a byte at a time (nothing past its newline is consumed), by deadline_us.
 * 1: a line; 0: EOF; -1: error or timeout (errno ETIMEDOUT). */
static int read_line(int fd, char *buf, size_t cap, uint64_t deadline_us, size_t *len)
{
	*len = 0;
	for (;;) {
		uint64_t now = rb_now_us();
		if (now >= deadline_us) {
			errno = ETIMEDOUT;
			return -1;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)((deadline_us - now + 999) / 1000));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			continue;
		char c;
		ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		if (c == '\n')
			return 1;
		if (*len + 1 >= cap) {
			errno = E2BIG;
			return -1;
		}
		buf[(*len)++] = c;
	}
}

static int grant_unsent(struct rb_error *err, int e, const char *path)
{
	return rb_error_set(err, e, "gateway daemon %s: send the run's grant", path);
}

int rb_gwreg_register(const char *path, const char *grant, const int *fds, unsigned n_fds, int timeout_ms, int *conn,
                      json_t **early, struct rb_error *err)
{
	*conn = -1;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof a.sun_path)
		return rb_error_set(err, ENAMETOOLONG, "gateway daemon socket %s", path);
	if (n_fds > RB_GWSOCK_MAX_FDS)
		return rb_error_set(err, E2BIG, "gateway daemon: %u descriptors", n_fds);
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return rb_error_set(err, errno, "gateway daemon: socket");
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		rb_error_set(err, errno, "no gateway daemon at %s", path);
		return 0;
	}
	/* The descriptors ride on the line's first byte; the rest follows as a stream. */
	union {
		char buf[CMSG_SPACE(sizeof(int) * RB_GWSOCK_MAX_FDS)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	size_t len = strlen(grant);
	if (len == 0 || len + 1 > RB_GWSOCK_LINE_MAX)
		return rb_error_set(err, E2BIG, "gateway daemon %s: grant of %zu bytes", path, len);
	struct iovec iov = {.iov_base = (void *)grant, .iov_len = 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n_fds) {
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	ssize_t w;
	while ((w = sendmsg(fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	int sent_errno = 0;
	if (w != 1 || rb_send_all(fd, grant + 1, len - 1) < 0 || rb_send_all(fd, "\n", 1) < 0) {
		/* A daemon that refuses the peer answers and closes without reading the grant, so the
		 * send may fail first: its refusal is still in the socket, and is the error to report. */
		sent_errno = errno;
		if (sent_errno != EPIPE && sent_errno != ECONNRESET)
			return grant_unsent(err, sent_errno, path);
	}
	/* Its answer; a call it served before the answer was written comes first, and is kept. */
	uint64_t deadline = rb_now_us() + (uint64_t)timeout_ms * 1000;
	char *line = malloc(RB_GWSOCK_LINE_MAX);
	if (!line)
		return rb_error_set(err, ENOMEM, "gateway daemon: answer");
	for (;;) {
		size_t n;
		int r = read_line(fd, line, RB_GWSOCK_LINE_MAX, deadline, &n);
		if (r <= 0) {
			int e = errno;
			free(line);
			if (sent_errno)
				return grant_unsent(err, sent_errno, path);
			if (r == 0)
				return rb_error_set(
				    err, 0, "gateway daemon %s closed the registration without an answer", path);
			return rb_error_set(err, e, "gateway daemon %s: %s", path,
			                    e == ETIMEDOUT ? "no answer to the registration in time"
			                                   : "read its answer");
		}
		json_error_t jerr;
		json_t *j = json_loadb(line, n, 0, &jerr);
		json_t *call = json_object_get(j, "call"), *error = json_object_get(j, "error");
		if (sent_errno && !json_is_string(error)) {
			json_decref(j);
			free(line);
			return grant_unsent(err, sent_errno, path);
		}
		if (json_is_object(call)) {
			if (!*early)
				*early = json_array();
			json_array_append(*early, call);
		} else if (json_is_object(json_object_get(j, "ready"))) {
			json_decref(j);
			free(line);
			*conn = rb_steal_fd(&fd);
			return 1;
		} else {
			rb_error_set(err, 0, "gateway daemon %s refused the run: %s", path,
			             json_is_string(error) ? json_string_value(error) : "an answer that is not JSON");
			json_decref(j);
			free(line);
			return -1;
		}
		json_decref(j);
	}
}

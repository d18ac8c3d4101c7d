/* JSON messages with descriptors over a SOCK_SEQPACKET socket (SCM_RIGHTS). */
#define _GNU_SOURCE
#include "runtime/sandbox/channel.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"

int rb_chan_sendmsg(int sock, const struct iovec *iov, unsigned n_iov, const int *fds, unsigned n_fds)
{
	if (n_fds > RB_CHAN_MAX_FDS) {
		errno = E2BIG;
		return -1;
	}
	union {
		char buf[CMSG_SPACE(sizeof(int) * RB_CHAN_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = n_iov};
	if (n_fds) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	ssize_t n;
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : 0;
}

ssize_t rb_chan_recvmsg(int sock, void *buf, size_t len, int *fds, unsigned max_fds, unsigned *n_fds, bool *truncated)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	union {
		char b[CMSG_SPACE(sizeof(int) * RB_CHAN_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	*n_fds = 0;
	*truncated = false;
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned cnt = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int got[RB_CHAN_MAX_FDS];
		memcpy(got, CMSG_DATA(c), sizeof(int) * (cnt > RB_CHAN_MAX_FDS ? RB_CHAN_MAX_FDS : cnt));
		for (unsigned i = 0; i < cnt && i < RB_CHAN_MAX_FDS; i++) {
			if (fds && *n_fds < max_fds)
				fds[(*n_fds)++] = got[i];
			else
				close(got[i]);
		}
	}
	*truncated = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	return n;
}

static int send_text(int sock, const char *text, size_t len, const int *fds, unsigned n_fds, struct rb_error *err)
{
	struct iovec iov = {.iov_base = (char *)text, .iov_len = len};
	if (rb_chan_sendmsg(sock, &iov, 1, fds, n_fds) < 0)
		return rb_error_set(err, errno, "control message: send");
	return 0;
}

int rb_chan_send(int sock, json_t *msg, const int *fds, unsigned n_fds, struct rb_error *err)
{
	if (n_fds > RB_CHAN_MAX_FDS)
		return rb_error_set(err, E2BIG, "control message: too many descriptors");
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return rb_error_set(err, ENOMEM, "control message: encode");
	size_t len = strlen(text);
	if (len <= RB_CHAN_MAX_MSG)
		return send_text(sock, text, len, fds, n_fds, err);
	if (len > RB_CHAN_MAX_BODY)
		return rb_error_set(err, EMSGSIZE, "control message: %zu bytes, more than %u", len, RB_CHAN_MAX_BODY);
	if (n_fds == RB_CHAN_MAX_FDS)
		return rb_error_set(err, E2BIG, "control message: %zu bytes and %u descriptors", len, n_fds);
	int all[RB_CHAN_MAX_FDS];
	if (n_fds)
		memcpy(all, fds, n_fds * sizeof *fds);
	_cleanup_close_ int body = rb_sealed_memfd("runbox-message", text, len, err);
	if (body < 0)
		return rb_error_prefix(err, "control message");
	all[n_fds] = body;
	char head[48];
	int hl = snprintf(head, sizeof head, "{\"rb_body\":%zu}", len);
	return send_text(sock, head, (size_t)hl, all, n_fds + 1, err);
}

int rb_chan_recv(int sock, json_t **msg, int *fds, unsigned *n_fds, struct rb_error *err)
{
	_cleanup_free_ char *buf = malloc(RB_CHAN_MAX_MSG + 1);
	if (!buf)
		return rb_error_set(err, ENOMEM, "control message");
	/* A peer that closed with our messages unread resets the connection, and the kernel
	 * reports that (once) before the datagrams the peer sent first: init's last words, an
	 * error naming what failed, would be lost. Read on; the end comes as 0. */
	unsigned got = 0, max = fds && n_fds ? RB_CHAN_MAX_FDS : 0; /* the rest are closed */
	bool truncated;
	ssize_t n = rb_chan_recvmsg(sock, buf, RB_CHAN_MAX_MSG, fds, max, &got, &truncated);
	if (n < 0 && errno == ECONNRESET)
		n = rb_chan_recvmsg(sock, buf, RB_CHAN_MAX_MSG, fds, max, &got, &truncated);
	if (n_fds)
		*n_fds = got;
	if (n < 0)
		return rb_error_set(err, errno, "control message: receive");
	if (n == 0)
		return 0;
	if (truncated)
		return rb_error_set(err, EMSGSIZE, "control message: truncated");
	buf[n] = '\0';
	json_error_t jerr;
	*msg = json_loadb(buf, (size_t)n, 0, &jerr);
	if (!*msg || !json_is_object(*msg)) {
		if (*msg)
			json_decref(*msg);
		return rb_error_set(err, EPROTO, "control message: not a JSON object");
	}
	return 1;
}

/* Reads a body: a memfd sealed against writes, growth and shrinking (so what is read is what
 * was announced, and nothing can change it meanwhile, nor a FIFO stall the reader), of the
 * announced length. */
static char *read_body(int fd, size_t len, struct rb_error *err)
{
	const int want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
	int seals = fcntl(fd, F_GET_SEALS);
	struct stat st;
	if (seals < 0 || (seals & want) != want || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != len) {
		rb_error_set(err, EPROTO, "control message: the body is not a sealed memfd of %zu bytes", len);
		return NULL;
	}
	char *text = malloc(len + 1);
	if (!text) {
		rb_error_set(err, ENOMEM, "control message: body");
		return NULL;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = pread(fd, text + off, len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rb_error_set(err, n < 0 ? errno : EIO, "control message: read the body");
			free(text);
			return NULL;
		}
		off += (size_t)n;
	}
	text[len] = '\0';
	return text;
}

/* Closes what a refused message brought. */
static void drop_fds(int *fds, unsigned *n_fds)
{
	for (unsigned i = 0; fds && n_fds && i < *n_fds; i++)
		close(fds[i]);
	if (n_fds)
		*n_fds = 0;
}

int rb_chan_recv_body(int sock, json_t **msg, int *fds, unsigned *n_fds, struct rb_error *err)
{
	int r = rb_chan_recv(sock, msg, fds, n_fds, err);
	if (r <= 0)
		return r;
	json_t *announced = json_object_get(*msg, "rb_body");
	if (!announced)
		return r;
	json_int_t len = json_is_integer(announced) ? json_integer_value(announced) : -1;
	json_decref(*msg); /* and announced with it */
	*msg = NULL;
	if (len <= RB_CHAN_MAX_MSG || len > RB_CHAN_MAX_BODY || !fds || !n_fds || *n_fds == 0) {
		drop_fds(fds, n_fds);
		return rb_error_set(err, EPROTO, "control message: a malformed body");
	}
	_cleanup_close_ int body = fds[--*n_fds];
	_cleanup_free_ char *text = read_body(body, (size_t)len, err);
	json_error_t jerr;
	*msg = text ? json_loadb(text, (size_t)len, 0, &jerr) : NULL;
	if (!*msg || !json_is_object(*msg)) {
		if (*msg)
			json_decref(*msg);
		*msg = NULL;
		drop_fds(fds, n_fds);
		return text ? rb_error_set(err, EPROTO, "control message: the body is not a JSON object") : -1;
	}
	return 1;
}

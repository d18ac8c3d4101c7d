/* JSON messages with descriptors over a SOCK_SEQPACKET socket (SCM_RIGHTS). */
#define _GNU_SOURCE
#include "runtime/channel.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"

int rb_chan_send(int sock, json_t *msg, const int *fds, unsigned n_fds, struct rb_error *err)
{
	if (n_fds > RB_CHAN_MAX_FDS)
		return rb_error_set(err, E2BIG, "control message: too many descriptors");
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return rb_error_set(err, ENOMEM, "control message: encode");
	size_t len = strlen(text);
	if (len > RB_CHAN_MAX_MSG)
		return rb_error_set(err, EMSGSIZE, "control message: %zu bytes", len);
	struct iovec iov = {.iov_base = text, .iov_len = len};
	union {
		char buf[CMSG_SPACE(sizeof(int) * RB_CHAN_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
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
	if (n < 0)
		return rb_error_set(err, errno, "control message: send");
	return 0;
}

int rb_chan_recv(int sock, json_t **msg, int *fds, unsigned *n_fds, struct rb_error *err)
{
	_cleanup_free_ char *buf = malloc(RB_CHAN_MAX_MSG + 1);
	if (!buf)
		return rb_error_set(err, ENOMEM, "control message");
	struct iovec iov = {.iov_base = buf, .iov_len = RB_CHAN_MAX_MSG};
	union {
		char b[CMSG_SPACE(sizeof(int) * RB_CHAN_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n_fds)
		*n_fds = 0;
	if (n < 0)
		return rb_error_set(err, errno, "control message: receive");
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned cnt = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int got[RB_CHAN_MAX_FDS];
		memcpy(got, CMSG_DATA(c), sizeof(int) * (cnt > RB_CHAN_MAX_FDS ? RB_CHAN_MAX_FDS : cnt));
		for (unsigned i = 0; i < cnt && i < RB_CHAN_MAX_FDS; i++) {
			if (fds && n_fds && *n_fds < RB_CHAN_MAX_FDS)
				fds[(*n_fds)++] = got[i];
			else
				close(got[i]);
		}
	}
	if (n == 0)
		return 0;
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
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

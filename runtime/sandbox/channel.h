/* The control channel between runbox and the sandbox's init (and the spawner): one JSON
 * object per SOCK_SEQPACKET message, with up to RB_CHAN_MAX_FDS descriptors attached. */
#ifndef RB_CHANNEL_H
#define RB_CHANNEL_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/error.h"

#define RB_CHAN_MAX_FDS 10
#define RB_CHAN_MAX_MSG 65536
/* A longer message (a step's long command line or environment) travels as its body: a sealed
 * memfd attached after its descriptors, announced by {"rb_body": LENGTH}. Only receivers that
 * ask for it (rb_chan_recv_body) accept one. Linux limits a command line and environment to
 * 2 MiB of strings (ARG_MAX); JSON escaping may double that. */
#define RB_CHAN_MAX_BODY (8u << 20)

/* The raw messages under both: one SOCK_SEQPACKET message of iov[0..n_iov) with n_fds (at most
 * RB_CHAN_MAX_FDS) descriptors attached; 0, or -1 with errno (EPIPE: the peer is gone; no
 * SIGPIPE). */
int rb_chan_sendmsg(int sock, const struct iovec *iov, unsigned n_iov, const int *fds, unsigned n_fds);
/* One message into buf[0..len): its length (0: end of file), or -1 with errno; EINTR is
 * retried. The first max_fds descriptors it carried go to fds (O_CLOEXEC), *n_fds their count,
 * the rest are closed. *truncated: the message or its descriptors did not fit. */
ssize_t rb_chan_recvmsg(int sock, void *buf, size_t len, int *fds, unsigned max_fds, unsigned *n_fds, bool *truncated);

/* Sends msg (not consumed) with fds; as a body when it is longer than RB_CHAN_MAX_MSG (then
 * at most RB_CHAN_MAX_FDS - 1 fds). Returns 0 or -1 with err. */
int rb_chan_send(int sock, json_t *msg, const int *fds, unsigned n_fds, struct rb_error *err);
/* Receives one message. *msg is new (caller decrefs). fds receives up to RB_CHAN_MAX_FDS
 * descriptors (O_CLOEXEC), *n_fds their count; fds may be NULL when none are expected
 * (any that arrive are closed). Returns 1 on a message, 0 on EOF, -1 on error. */
int rb_chan_recv(int sock, json_t **msg, int *fds, unsigned *n_fds, struct rb_error *err);
/* The same, and a message sent as a body is read from it (its memfd is checked to be sealed,
 * of the announced length, and closed). */
int rb_chan_recv_body(int sock, json_t **msg, int *fds, unsigned *n_fds, struct rb_error *err);

#endif

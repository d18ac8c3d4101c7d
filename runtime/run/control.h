/* A run's control socket: <run_dir>/<id>.ctl, 0600, listened on by the run's owner (the
 * `runbox run` process, or `runbox serve` for its sessions), so `runbox kill RUN` asks the
 * owner to cancel the run instead of signalling a process that may hold many runs. */
#ifndef RB_CONTROL_H
#define RB_CONTROL_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

struct rb_control;

/* The most a request or an answer holds; a peer is given this long to send its request. */
#define RB_CONTROL_MSG_MAX   4096
#define RB_CONTROL_READ_MS   250
#define RB_CONTROL_ANSWER_MS 5000
#define RB_CONTROL_SUFFIX    ".ctl"

/* What a peer asked for, once it passed the checks. */
struct rb_control_req {
	int sig;   /* the signal the run's processes get first (SIGKILL: the sandbox goes at once) */
	uid_t uid; /* the peer's (SO_PEERCRED) */
	pid_t pid;
};

/* Makes the run's socket in run_dir (a stale one of the same run id is replaced: the run's
 * state file claims the id) and listens on it. *out is freed by rb_control_close. */
int rb_control_open(const char *run_dir, const char *run_id, struct rb_control **out, struct rb_error *err);
/* The listening fd (non-blocking, O_CLOEXEC) for the owner's poll or epoll: readable when a
 * peer connected. -1 for NULL. */
int rb_control_fd(const struct rb_control *c);
/* The handler of that fd: accepts one peer, checks it (SO_PEERCRED: the owner's uid or root),
 * reads its request ({"op": "kill", "run_id", "signal"}) for at most RB_CONTROL_READ_MS and
 * answers it. 1 with *req when the run is to be cancelled (the owner then does so), 0 when
 * there was nothing to do or the peer was refused (told so, and warned), -1 with err on an
 * error of the socket itself. */
int rb_control_handle(struct rb_control *c, struct rb_control_req *req, struct rb_error *err);
/* Closes and removes the socket. NULL is fine. */
void rb_control_close(struct rb_control *c);
/* Removes a socket a dead owner left (runbox gc). */
void rb_control_remove(const char *run_dir, const char *run_id);

/* The client (`runbox kill`): asks the owner of run_id in run_dir to cancel it with sig, and
 * waits up to RB_CONTROL_ANSWER_MS for its answer. 0 once the owner took it; -1 with err
 * naming why not (no socket, refused, no answer). */
int rb_control_request_kill(const char *run_dir, const char *run_id, int sig, struct rb_error *err);

#endif

/* The factory: a single-threaded process that holds no secrets and makes every sandbox. It is
 * forked before the runner loads any key or starts any thread; each sandbox's init is a copy of
 * it, never of the runner. A request travels over a SOCK_SEQPACKET socket (runtime/sandbox/
 * channel.h), the answer's descriptors (init's pidfd, user namespace, network) by SCM_RIGHTS. */
#ifndef RB_FACTORY_H
#define RB_FACTORY_H

#include <sys/types.h>

#include "common/error.h"
#include "runtime/sandbox/sandbox.h"

struct rb_factory {
	pid_t pid;
	int sock; /* requests; each one brings its own reply socket, so threads may share it */
};

#define RB_FACTORY_INIT                                                                                                \
	{                                                                                                              \
		.pid = -1, .sock = -1                                                                                  \
	}

/* Forks the factory. Call it first, before any secret is in memory and before any thread
 * exists: the factory (and so every init) is a copy of the caller at this moment. The factory
 * dies with the thread that called this (PR_SET_PDEATHSIG) and when the socket closes; the
 * sandboxes it made die with it. */
int rb_factory_start(struct rb_factory *f, struct rb_error *err);
/* Closes the socket and reaps the factory. Idempotent. */
void rb_factory_stop(struct rb_factory *f);

/* The runner's side of one request: sends req (its spec, by value, and its descriptors) and
 * returns what the factory made, in the runner's own descriptors (out->pidfd is the runner's
 * handle on init, which the factory reaps). Safe from several threads at once. */
int rb_factory_make(const struct rb_factory *f, const struct rb_spawn_req *req, struct rb_spawned *out,
                    struct rb_error *err);

#endif

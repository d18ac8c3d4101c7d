/* The runner's side of a run's gateway endpoint: the runbox-gateway process, started on the
 * first connection to the listener (so a run that never calls the gateway pays nothing for
 * the HTTP library), confirmed started and ready, watched, stopped at the run's end. */
#ifndef RB_GWPROC_H
#define RB_GWPROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* How long a started gateway may take to say it serves; past it, it is killed. */
#define RB_GWPROC_READY_MS 5000

struct rb_gwproc {
	pid_t pid;       /* 0: not running (never started, or reaped) */
	int pidfd;       /* valid while pid > 0: readable once the gateway has exited */
	int out;         /* its stdout: the counts at exit */
	json_t *stats;   /* {"requests": n, "unauthorized": n} once stopped */
	bool failed;     /* it could not start, or died: the run's calls are refused */
	char error[256]; /* why it failed, for the result */
};

/* Starts runbox-gateway (rb_parts_find: beside the binary, or PREFIX/libexec/runbox) serving fds for run_id with key,
 * and returns once it has said it serves. A failed exec (the errno comes back over a CLOEXEC pipe), an exit before the
 * readiness byte, or no byte within RB_GWPROC_READY_MS is an error naming the binary; nothing is left running then. */
int rb_gwproc_start(struct rb_gwproc *gw, const int *fds, unsigned n_fds, const char *run_id, const uint8_t *key,
                    size_t keylen, struct rb_error *err);
/* The fd to poll for the gateway's death (POLLIN), or -1 when it is not running. */
int rb_gwproc_watch_fd(const struct rb_gwproc *gw);
/* After its watch fd was readable: reaps the gateway and says how it ended in err. */
void rb_gwproc_reap(struct rb_gwproc *gw, struct rb_error *err);
/* SIGTERM, collect the counts, reap. Safe when never started or already reaped. */
void rb_gwproc_stop(struct rb_gwproc *gw);

#endif

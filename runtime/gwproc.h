/* The runner's side of a run's gateway endpoint: the runbox-gateway process, started on the
 * first connection to the listener (so a run that never calls the gateway pays nothing for
 * the HTTP library), stopped at the run's end with its counts. */
#ifndef RB_GWPROC_H
#define RB_GWPROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct rb_gwproc {
	pid_t pid;     /* 0: not started */
	int out;       /* its stdout: the counts at exit */
	json_t *stats; /* {"requests": n, "unauthorized": n} once stopped */
	bool failed;
};

/* Starts runbox-gateway (beside the running binary) serving fds for run_id with key. */
int rb_gwproc_start(struct rb_gwproc *gw, const int *fds, unsigned n_fds, const char *run_id, const uint8_t *key,
                    size_t keylen, struct rb_error *err);
/* SIGTERM, collect the counts, reap. Safe when never started. */
void rb_gwproc_stop(struct rb_gwproc *gw);

#endif

/* A recipe's commands (images/build.h, rb_build_opts.run_commands): each a runbox run whose root is
 * the build's tree itself, writable, recorded in the ledger as every run is. */
#ifndef RB_BUILDCMD_H
#define RB_BUILDCMD_H

#include <stdbool.h>

#include "common/error.h"
#include "common/host.h"
#include "runtime/sandbox/factory.h"

struct rb_build_runner {
	const struct rb_factory *factory; /* started by the caller before any thread or key */
	const struct rb_host *host;
	const char *policy;    /* the operator's policy the commands run under; NULL: "default" */
	const char *state_dir; /* NULL: the default location */
	int cancel_fd;         /* an eventfd the caller writes a signal number to, or -1 */
	int log_fd;            /* the commands' stdout and stderr, escaped when it is a terminal */
};

/* ctx is a struct rb_build_runner. Each command runs as /bin/sh -c COMMAND in / with env added,
 * network none (gateway: the policy's gateway, which the policy must allow); the first that
 * does not exit 0 fails the build, naming it. */
int rb_build_run_commands(void *ctx, const char *tree, char *const *commands, unsigned n, bool gateway,
                          char *const *env, struct rb_error *err);

#endif

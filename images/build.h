/* `runbox image build`: a recipe (images/recipe.h) made into a tree by mmdebstrap in the store's
 * own temporary space, made neutral (no device nodes, no host resolv.conf or hostname), given the
 * recipe's files, and imported into the store (images/import.h); any failure or cancellation
 * leaves nothing under a name. */
#ifndef RB_IMAGE_BUILD_H
#define RB_IMAGE_BUILD_H

#include <stdbool.h>

#include "common/error.h"
#include "common/paths.h"
#include "common/progress.h"
#include "policy/policy.h"

struct rb_build_opts {
	const char *name; /* the reference to set, or NULL */
	int cancel_fd;    /* readable: stop the build (the caller wires SIGINT/SIGTERM to it); -1 none */
	int log_fd;       /* mmdebstrap's output goes here (stderr) when progress.fn is NULL */
	/* Set: mmdebstrap runs --verbose into a pipe and nothing is written to log_fd; apt's and
	 * dpkg's lines become counts ("fetched N", "unpacked N of M", images/buildlog.h), its own
	 * I:/W:/E: lines come as report lines, and the last lines it said are reported too if it
	 * fails. NULL fn: its output is log_fd's, unchanged. */
	struct rb_progress progress;
	/* Runs a recipe's commands (in order, each /bin/sh -c) with tree as the root of a runbox
	 * sandbox, writable, its network none unless gateway: the layer that makes sandboxes
	 * supplies it (runtime/run/buildcmd.h); env is added to the policy's. NULL: a recipe with commands fails. */
	int (*run_commands)(void *ctx, const char *tree, char *const *commands, unsigned n, bool gateway,
	                    char *const *env, struct rb_error *err);
	void *commands_ctx;
	/* The operator's policy (the commands' too): what of setuid bits and file capabilities the
	 * tree may keep, when keep_setuid or keep_file_caps asks (images/import.h). */
	const struct rb_policy *pol;
	bool keep_setuid, keep_file_caps;
};

/* out is the image's digest. */
int rb_image_build(const struct rb_paths *paths, const char *recipe, const struct rb_build_opts *opts, char out[72],
                   struct rb_error *err);

#endif

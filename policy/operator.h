/* The operator's own settings (<config>/config.json): what the operator allows beyond the safe
 * defaults, for the documents agents write. Schema: docs/manifest.md ("Operator settings"). */
#ifndef RB_OPERATOR_H
#define RB_OPERATOR_H

#include <stdbool.h>

#include "common/error.h"

#define RB_OPERATOR_POOL_MAX 16
#define RB_OPERATOR_POOL_LEN 272 /* an image and a policy name of < 128 bytes each, `:`, `=N` */

struct rb_operator_config {
	bool manifest_policy_paths; /* a manifest may name its policy by path, not only by name */
	/* runbox serve's warm pool: "IMAGE:POLICY=N" pairs, as its --pool takes them (checked there). */
	char serve_pool[RB_OPERATOR_POOL_MAX][RB_OPERATOR_POOL_LEN];
	unsigned n_serve_pool;
};

/* Reads <config_dir>/config.json, strictly (unknown keys and wrong types are errors naming
 * the key). A missing file (or no config_dir) gives the defaults: everything false. */
int rb_operator_config_load(const char *config_dir, struct rb_operator_config *out, struct rb_error *err);

#endif

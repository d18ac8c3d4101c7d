/* The operator's own settings (<config>/config.json): what the operator allows beyond the safe
 * defaults, for the documents agents write. Schema: docs/manifest.md ("Operator settings"). */
#ifndef RB_OPERATOR_H
#define RB_OPERATOR_H

#include <stdbool.h>

#include "common/error.h"

struct rb_operator_config {
	bool manifest_policy_paths; /* a manifest may name its policy by path, not only by name */
};

/* Reads <config_dir>/config.json, strictly (unknown keys and wrong types are errors naming
 * the key). A missing file (or no config_dir) gives the defaults: everything false. */
int rb_operator_config_load(const char *config_dir, struct rb_operator_config *out, struct rb_error *err);

#endif

/* Retention of the artifact store: `runbox gc` removes the objects that no ledger artifact
 * event within the retention time names, and that were not written or reused within it; and
 * the runs' result directories older than it. */
#ifndef RB_STOREGC_H
#define RB_STOREGC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/paths.h"

#define RB_STORE_RETENTION_S ((uint64_t)30 * 24 * 3600) /* the default: 30 days */

/* The ledger time (`2026-11-24T18:03:00.000Z`) retention_s ago. */
void rb_store_cutoff(uint64_t retention_s, char out[32]);

/* Collects (or, dry_run, only lists) the unneeded objects of paths' store. *report gets
 * {"retention_s", "cutoff", "kept", "removed": [{"digest"|"temporary", "size"} | {"results"}], "removed_bytes",
 * "dry_run"}. Returns 0, or -1 with err (the ledger or the store could not be read: nothing
 * is removed then). */
int rb_store_gc(const struct rb_paths *paths, uint64_t retention_s, bool dry_run, json_t **report,
                struct rb_error *err);

#endif

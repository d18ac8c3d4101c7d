/* runbox serve after a restart: the sessions of a daemon that died (serve/restart.c). */
#ifndef RB_SERVE_RESTART_H
#define RB_SERVE_RESTART_H

#include <jansson.h>

#include "common/error.h"
#include "common/host.h"
#include "ledger/ledger.h"

/* At start, before any session: every run of a dead daemon's session (or warm member) in this
 * state directory is cleaned up as runbox gc does and recorded lost (run_end "lost" after a
 * cleanup "daemon lost"); a live daemon's runs are never touched. */
int rb_serve_restart_reclaim(const struct rb_host *host, const char *state_dir, struct rb_error *err);
/* The 404 for a session id this daemon does not hold: for a session recorded lost (of tenant,
 * when not NULL), {error: "... lost ...", lost: true, run_id, snapshot?: its last ref}. */
unsigned rb_serve_lost(const struct rb_host *host, const char *state_dir, const char *sid, const char *tenant,
                       json_t **reply);

/* The last event of type of run_id (a reference the caller drops), or NULL. */
json_t *rb_serve_last_event(struct rb_ledger *l, const char *run_id, const char *type);
/* The snapshot ref (in out, "" for none) the run's /workspace last came to be: its last taken
 * snapshot, or the snapshot it was last hydrated from when that came after it (a session made
 * or resumed from one and not snapshotted since). None when it took and was hydrated from none,
 * or an uploaded archive's hydrate came last. Refused snapshots and hydrates are not counted. */
void rb_serve_workspace_ref(struct rb_ledger *l, const char *run_id, char *out, size_t n);

#endif

/* The session ids and snapshot refs a runbox serve daemon answers for (serve/known.c): every
 * session and snapshot the ledger recorded before the daemon started, and those it made since.
 * A call naming any other id or ref is a 404 from these tables alone: a probe of made-up ids or
 * refs never reaches the ledger or the disk. */
#ifndef RB_SERVE_KNOWN_H
#define RB_SERVE_KNOWN_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/error.h"

struct rb_serve_known;

/* The sessions (their run_start names a `session`) and the snapshots (`snapshot` events, by
 * their digest and tenant) of the ledger of state_dir, read once. */
int rb_serve_known_load(const char *state_dir, struct rb_serve_known **out, struct rb_error *err);
void rb_serve_known_free(struct rb_serve_known *k);
/* A session this daemon made, once its run_start is in the ledger. */
int rb_serve_known_add(struct rb_serve_known *k, const char *sid, const char *tenant, struct rb_error *err);
/* Whether sid was a session of tenant (NULL: of any). */
bool rb_serve_known_has(struct rb_serve_known *k, const char *sid, const char *tenant);

/* Each tenant's snapshots count against a bound of bytes in the store (the sum of the sizes of
 * the distinct objects its sessions' snapshots are, while the store holds them):
 * RB_SERVE_SNAPSHOT_BYTES_PER_TENANT until this sets another (0: none). */
void rb_serve_known_snapshot_bound(struct rb_serve_known *k, uint64_t max_bytes);
/* Before a snapshot of tenant's session (the object ref of size bytes) goes into the store (the
 * artifact store's directory): 0 when it fits within the tenant's bound, counting it as being
 * taken until settled; else 507 with err naming the bound. A ref the tenant holds takes nothing. */
unsigned rb_serve_known_snapshot_reserve(struct rb_serve_known *k, const char *store, const char *ref,
                                         const char *tenant, uint64_t size, struct rb_error *err);
/* The end of a reserved snapshot: recorded (its `snapshot` event in the ledger), it is known
 * from now on (answered for, and counted while its object is in the store); else its bytes are
 * given back. */
int rb_serve_known_snapshot_settle(struct rb_serve_known *k, const char *ref, const char *tenant, uint64_t size,
                                   bool recorded, struct rb_error *err);
/* Each tenant's snapshots as counted against its bound: {tenant: {"snapshots": n, "bytes": b}}
 * (those in store, and those being taken), and the bound itself in *max_bytes. */
json_t *rb_serve_known_snapshot_usage(struct rb_serve_known *k, const char *store, uint64_t *max_bytes);
/* Whether a session of tenant (NULL: of any) took the snapshot ref. */
bool rb_serve_known_snapshot(struct rb_serve_known *k, const char *ref, const char *tenant);

#endif

/* What a session create may ask for beyond image and policy (limits at or below the policy's,
 * labels, a maximum lifetime) and how many sessions a tenant and the daemon may hold (quota.c). */
#ifndef RB_SERVE_QUOTA_H
#define RB_SERVE_QUOTA_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct rb_serve_ask {
	uint64_t memory_bytes, pids, timeout_ms; /* 0: the policy's */
	double cpus;                             /* 0: the policy's */
	uint64_t lifetime_ms;                    /* 0: none */
	json_t *labels;                          /* {"K": "V"}, or NULL; owned */
	const char *agent_version;               /* the body's, or NULL */
};

/* $.limits {memory, cpus, pids, timeout}, $.labels, $.agent_version, $.max_lifetime, checked
 * strictly (400 naming the path). The policy's bounds are checked when the run opens. */
int rb_serve_ask_parse(const json_t *body, struct rb_serve_ask *ask, struct rb_error *err);
void rb_serve_ask_free(struct rb_serve_ask *ask);
/* A warm pool member has the policy's own limits: only a create that asks for none may take one. */
bool rb_serve_ask_poolable(const struct rb_serve_ask *ask);

/* 0 when one more session of tenant fits (max 0: no bound), else 429 with err saying which
 * bound and its value. */
unsigned rb_serve_quota_check(unsigned total, unsigned max_total, unsigned of_tenant, unsigned max_per_tenant,
                              const char *tenant, struct rb_error *err);

/* 0 when a snapshot of size bytes fits with tenant's used bytes of snapshots in the store
 * within max (0: no bound), else 507 with err naming the bound (--max-snapshot-bytes-per-tenant),
 * its value and the bytes held. */
unsigned rb_serve_snapshot_quota_check(uint64_t used, uint64_t size, uint64_t max, const char *tenant,
                                       struct rb_error *err);

#define RB_SERVE_MAX_LABELS                32
#define RB_SERVE_SNAPSHOT_BYTES_PER_TENANT (10ULL << 30) /* --max-snapshot-bytes-per-tenant's default */

#endif

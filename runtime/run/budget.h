/* A run's storage budget: what its harvests may still store, from the policy's output limits
 * (bytes, objects and ledger events per run, the tenant's quota, the store's free-space floor)
 * and what was stored so far. It narrows each harvest's caps; the harvest itself is unchanged. */
#ifndef RB_BUDGET_H
#define RB_BUDGET_H

#include <jansson.h>
#include <stdint.h>

#include "policy/policy.h"
#include "runtime/run/harvest.h"
#include "ledger/ledger.h"

struct rb_budget {
	uint64_t run_bytes, run_files, run_events, tenant_bytes, min_free; /* the policy's limits */
	uint64_t stored_bytes, stored_files; /* taken by the run's harvests so far (deduplicated or not) */
	uint64_t tenant_used;                /* the tenant's bytes in the store when the run began */
	uint64_t free_bytes;                 /* the store's filesystem at the last harvest */
	/* The limits that bound the last harvest's caps below its own (NULL: its own bound). */
	const char *bind_bytes, *bind_files;
	const char *stopped; /* the first budget limit that left something unstored, or NULL */
	unsigned stopped_step;
};

void rb_budget_init(struct rb_budget *b, const struct rb_policy *pol);
/* The tenant's use of the store: its artifact events within the store's retention. */
int rb_budget_load_tenant(struct rb_budget *b, struct rb_ledger *l, const char *tenant, struct rb_error *err);
/* Narrows caps to what is left: of the run's bytes and objects, of its ledger events (events:
 * the run's so far; each stored object adds one, the harvest's skip list one more), of the
 * tenant's quota, and of the free space above the floor (statvfs of store_dir). Nothing at
 * all is stored when the free space is below the floor. */
void rb_budget_caps(struct rb_budget *b, const char *store_dir, uint64_t events, struct rb_harvest_caps *caps);
/* Counts the harvest, and returns the budget limit that cut it ("run_bytes", "run_files",
 * "run_events", "tenant_bytes", "min_free"), or NULL when it took all it met or its own caps
 * cut it. */
const char *rb_budget_account(struct rb_budget *b, unsigned step, const struct rb_harvest_result *h);
/* {"limits": {...}, "stored_bytes", "stored_files", "tenant_bytes_used", "free_bytes",
 * "stopped": name or null, "stopped_step"} for the run's result. */
json_t *rb_budget_json(const struct rb_budget *b);

#endif

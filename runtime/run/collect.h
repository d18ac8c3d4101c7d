/* A run's harvest of /workspace/out after a step, the same for `runbox run -- CMD` and manifest
 * steps: the run's scrubber, the harvest caps narrowed by its storage budget, the ledger's records. */
#ifndef RB_COLLECT_H
#define RB_COLLECT_H

#include <jansson.h>
#include <stdbool.h>

#include "common/progress.h"
#include "runtime/run/budget.h"
#include "runtime/run/record.h"
#include "runtime/run/result_spill.h"
#include "runtime/run/run.h"
#include "runtime/sandbox/nsopen.h"
#include "scrub/scrub.h"

struct rb_collect {
	/* The run's scrubber, not owned; NULL: one knowing the run's token is made at the first
	 * file or name to scrub, owned (own): a run whose out/ is empty, as most are, builds none. */
	struct rb_scrubber *scrubber;
	struct rb_scrubber *own;
	const char *token;
	char store[4200]; /* <state_dir>/artifacts */
	/* Rootless: opens for the harvest what only the sandbox's own ids may read. */
	struct rb_nsopener ns;
	bool ns_prepared;
	struct rb_budget budget;     /* what the run's harvests may still store */
	bool budget_loaded;          /* the tenant's use of the store is read (first harvest) */
	struct rb_progress progress; /* the harvests' progress (runtime/run/harvest.h); zero: none */
};

/* Before the first harvest: the store of run's state directory, the budget of its policy. */
void rb_collect_init(struct rb_collect *c, const struct rb_run *run);

/* Harvests the run's /workspace/out after step: each file scrubbed and stored, the artifacts and
 * skips queued in rec, out_json's "harvest" set to the harvest's JSON (docs/harvest.md), spill
 * (may be NULL) given every artifact. *h (may be NULL) keeps the harvest's result, which the
 * caller then frees. An out/ that is missing or a link is said in out_json, not an error. */
int rb_collect_step(struct rb_collect *c, struct rb_run *run, struct rb_record *rec, unsigned step,
                    struct rb_result_spill *spill, json_t *out_json, struct rb_harvest_result *h, struct rb_error *err);

void rb_collect_close(struct rb_collect *c);

#endif

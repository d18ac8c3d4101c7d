/* What a run writes to the ledger, in one place for `runbox run` and manifests: run start,
 * each step's start (the exact text, its size and digest) and end, artifacts, blocked egress,
 * cleanup, run end with its cost terms. */
#ifndef RB_RECORD_H
#define RB_RECORD_H

#include <jansson.h>
#include <stddef.h>

#include "runtime/harvest.h"
#include "runtime/ledger.h"
#include "runtime/run.h"

struct rb_record {
	struct rb_ledger *ledger;
	const struct rb_run *run;
	double cpu_seconds;         /* summed over steps */
	double memory_gib_seconds;  /* peak memory x wall time, summed over steps */
	uint64_t stored_bytes;      /* bytes the run added to the artifact store */
	unsigned steps;
};

int rb_record_open(struct rb_record *rec, const struct rb_run *run, struct rb_error *err);
int rb_record_run_start(struct rb_record *rec, const char *agent_version, const char *manifest_hash,
			struct rb_error *err);
int rb_record_step_start(struct rb_record *rec, unsigned step, const char *name, const char *kind, const char *text,
			 size_t len, json_t *inputs, struct rb_error *err);
int rb_record_step_end(struct rb_record *rec, unsigned step, const struct rb_step_result *res, struct rb_error *err);
int rb_record_harvest(struct rb_record *rec, unsigned step, const struct rb_harvest_result *h, struct rb_error *err);
int rb_record_run_end(struct rb_record *rec, const char *result, struct rb_error *err);
void rb_record_close(struct rb_record *rec);

/* The ledger's name for a step's outcome: "success", "failure", "cancelled", "timed_out". */
const char *rb_record_outcome(const struct rb_step_result *res);

#endif

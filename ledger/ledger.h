/* The run ledger: an append-only, hash-chained SQLite table of events under the state
 * directory (<state_dir>/ledger.db, plus <state_dir>/ledger.head), safe for concurrent
 * appenders in separate processes. Schema, chain and event types: docs/ledger.md. */
#ifndef RB_LEDGER_H
#define RB_LEDGER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"

struct rb_ledger;

/* Opens (creating when missing: directory 0700, files 0600, WAL, schema, head file) the ledger
 * of state_dir. One handle per process and thread; never carry one across fork(). */
int rb_ledger_open(const char *state_dir, struct rb_ledger **out, struct rb_error *err);
void rb_ledger_close(struct rb_ledger *l);

/* Durable (the default): each commit is fsync'd before it returns (synchronous=FULL). Not
 * durable: a commit is in the WAL, safe from a crash of the process but not of the host,
 * until the next durable commit syncs the WAL, and it with it (synchronous=NORMAL). */
int rb_ledger_set_durable(struct rb_ledger *l, bool durable, struct rb_error *err);
/* After a commit that was not durable: starts the WAL's writeback to the disk and returns, so
 * the caller's other work overlaps it; rb_ledger_sync then waits for it. */
void rb_ledger_start_sync(struct rb_ledger *l);
/* Makes every commit so far durable: the WAL fsync'd, then the head file moved to the last
 * event (as a durable commit's does). */
int rb_ledger_sync(struct rb_ledger *l, struct rb_error *err);
/* Waiting (the default): an append that finds another process's commit holding the ledger
 * waits for it, up to 10 s. Not waiting: it gives up after RB_LEDGER_TRY_MS, writes nothing and
 * returns RB_LEDGER_BUSY, for a caller that has something more urgent to do meanwhile. */
#define RB_LEDGER_BUSY   1
#define RB_LEDGER_TRY_MS 5
void rb_ledger_set_wait(struct rb_ledger *l, bool wait);

/* Checkpoints the WAL when it has grown (without waiting for anyone): it keeps the next
 * connection's open cheap. For a moment when nobody waits. */
void rb_ledger_tidy(struct rb_ledger *l);

/* Appends one event in its own transaction, chained to the last one. tenant and agent may be
 * NULL (stored as ""); data (an object, or NULL for {}) is not consumed and is stored as
 * canonical JSON (sorted keys, compact). *seq_out (when not NULL) gets the new event's seq. */
int rb_ledger_append(struct rb_ledger *l, const char *run_id, const char *tenant, const char *agent, const char *type,
                     json_t *data, struct rb_error *err);
int rb_ledger_append_seq(struct rb_ledger *l, const char *run_id, const char *tenant, const char *agent,
                         const char *type, json_t *data, uint64_t *seq_out, struct rb_error *err);

/* Appends n events of one run in one transaction, consecutive in the chain, all or none: one
 * commit and one head update instead of n (a step's artifacts). *last_seq (when not NULL) gets
 * the last new seq. Returns 0, -1 (err says why), or RB_LEDGER_BUSY (see rb_ledger_set_wait). */
struct rb_ledger_event {
	const char *type;
	json_t *data; /* an object or NULL; not consumed */
};
int rb_ledger_append_batch(struct rb_ledger *l, const char *run_id, const char *tenant, const char *agent,
                           const struct rb_ledger_event *events, size_t n, uint64_t *last_seq, struct rb_error *err);
/* The same for one run instance: in the same transaction, before anything is written, the
 * ledger must have no event of run_id yet, or its run_start's data must carry "instance":
 * instance (the run's own random nonce, which the runner puts in its run_start). Else nothing
 * is written and RB_LEDGER_TAKEN is returned (err names the run id): the id is another run's,
 * and two runs started at once with one id cannot both get in. */
#define RB_LEDGER_TAKEN 2
int rb_ledger_append_run(struct rb_ledger *l, const char *run_id, const char *instance, const char *tenant,
                         const char *agent, const struct rb_ledger_event *events, size_t n, uint64_t *last_seq,
                         struct rb_error *err);
/* Several runs' batches in one transaction: one commit (one fsync when durable) and one head
 * update for all of them, as a daemon's group commit makes them (ledger/group.h). Each batch is
 * checked as rb_ledger_append_run checks its events (instance may be NULL); one that fails its
 * checks or whose run id is another instance's (RB_LEDGER_TAKEN) gets that in its result and
 * err, and the others still go in. If the transaction itself fails, every batch not refused
 * gets -1 and err, and nothing is written. Returns 0 or -1. */
struct rb_ledger_run_batch {
	const char *run_id, *instance, *tenant, *agent;
	const struct rb_ledger_event *events;
	size_t n;
	int result;        /* out: 0, -1 or RB_LEDGER_TAKEN */
	uint64_t last_seq; /* out: the seq of its last event */
	struct rb_error err;
};
int rb_ledger_append_runs(struct rb_ledger *l, struct rb_ledger_run_batch *b, size_t n, struct rb_error *err);
/* How many events run_id has (of type, when not NULL). */
int rb_ledger_count_run(struct rb_ledger *l, const char *run_id, const char *type, int64_t *n, struct rb_error *err);
/* What the store holds for tenant: the artifact events of its runs since `since` (a ledger
 * time, "2026-11-24T18:03:00.000Z"), each distinct digest once at its recorded size. */
int rb_ledger_tenant_bytes(struct rb_ledger *l, const char *tenant, const char *since, uint64_t *bytes,
                           struct rb_error *err);
/* Every digest an artifact or snapshot event since `since` names, as the keys of a new JSON object:
 * what the store must keep (runtime/run/storegc.h). */
int rb_ledger_live_digests(struct rb_ledger *l, const char *since, json_t **set, struct rb_error *err);

/* *found: an `artifact` event of tenant records digest ("sha256:<hex>"), i.e. a run of that
 * tenant stored the object. The artifact store answers any digest; this is its tenant boundary. */
int rb_ledger_tenant_has_artifact(struct rb_ledger *l, const char *tenant, const char *digest, bool *found,
                                  struct rb_error *err);

/* The artifacts of run_id's last state, when it is a run of tenant (else none, whether the run
 * exists or not): the artifact events of the run's highest step that stored any (each harvest
 * walks all of /workspace/out, so earlier steps' lists are older states of the same folder).
 * *arts gets a new array of their data objects (path, size, digest, redactions, step, ...),
 * sorted by path. */
int rb_ledger_run_artifacts(struct rb_ledger *l, const char *run_id, const char *tenant, json_t **arts,
                            struct rb_error *err);
/* Who stored digest within tenant: *rows gets one object per artifact event of that tenant
 * naming it, {"seq", "ts", "run_id", "tenant", "agent", "step", "path", "size"}, in seq order. */
int rb_ledger_artifact_events(struct rb_ledger *l, const char *digest, const char *tenant, json_t **rows,
                              struct rb_error *err);

/* One row per run, for people (`runbox ledger runs`). tenant is exact; agent and run_id are
 * prefixes (a name cut in a table still finds it); since/until (as in rb_ledger_filter) bound
 * the run's first event. last > 0 keeps the last that many runs. */
struct rb_ledger_runs_filter {
	const char *tenant;
	const char *agent_prefix;
	const char *run_prefix;
	const char *since;
	const char *until;
	unsigned last;
};
/* *runs gets an array, oldest first, of {"run_id", "ts" (first event), "end_ts" (last), "tenant",
 * "agent", "result" (run_end's, or null while it runs or when it died), "steps", "artifacts"
 * (distinct digests)}. */
int rb_ledger_runs(struct rb_ledger *l, const struct rb_ledger_runs_filter *f, json_t **runs, struct rb_error *err);

/* *types gets a new array of the distinct event types the ledger holds, sorted. */
int rb_ledger_types(struct rb_ledger *l, json_t **types, struct rb_error *err);

/* Walks the whole chain: seq continuity from 1, each prev_hash, each recomputed hash, and the
 * head file (which catches events deleted from the end). Returns 0 when intact, 1 when broken,
 * -1 when it could not read the ledger. *report (when not NULL) gets {"intact", "events",
 * "head": {"seq", "hash"}} and, when broken, "first_bad_seq" and "reason". */
int rb_ledger_verify(struct rb_ledger *l, json_t **report, struct rb_error *err);

/* Every set field narrows the result (AND). since and until take RFC 3339 ("2026-11-24T18:03:05Z",
 * "...+02:00", fractions) or a shorter prefix ("2026-11-24T18:03", "2026-11-24"); a time
 * without an offset is UTC. since is inclusive from the start of what it names, until is
 * inclusive to the end of what it names ("18:03" covers 18:03:00.000 to 18:03:59.999). grep is
 * a case-sensitive substring of the event's data text. limit 0 means no limit. */
struct rb_ledger_filter {
	const char *run_id;
	const char *tenant;
	const char *agent;
	const char *type;
	const char *since;
	const char *until;
	const char *grep;
	/* Events of runs whose run_start has labels.<label_key> == label_value (both or neither; the
	 * key an id, [A-Za-z0-9._-]{1,64}). */
	const char *label_key, *label_value;
	unsigned limit;
	unsigned last; /* > 0: only the last that many (newest) events, still in seq order */
	bool prefixes; /* agent and run_id match as prefixes (a name cut in a table still finds it) */
};

/* *events gets an array of event objects in seq order: {"seq", "ts", "run_id", "tenant",
 * "agent", "type", "data" (the object; a string if the stored text is not JSON), "prev_hash",
 * "hash"}. A bad since/until is an error naming it. */
int rb_ledger_query(struct rb_ledger *l, const struct rb_ledger_filter *f, json_t **events, struct rb_error *err);

/* Writes every event, in seq order, as one compact JSON object per line. */
int rb_ledger_export_jsonl(struct rb_ledger *l, FILE *out, struct rb_error *err);

/* Normalises a since/until argument to the stored form "YYYY-MM-DDTHH:MM:SS.mmmZ". With upper,
 * the result is the exclusive end of the span the argument names (see the filter above). */
int rb_ledger_parse_time(const char *s, int upper, char out[32], struct rb_error *err);

#endif

/* What a run writes to the ledger, in one place for `runbox run` and manifests: run start,
 * each step's start (the exact text, its size and digest) and end, artifacts, blocked egress,
 * cleanup, run end with its cost terms. */
#ifndef RB_RECORD_H
#define RB_RECORD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "runtime/run/harvest.h"
#include "ledger/group.h"
#include "ledger/ledger.h"
#include "runtime/run/run.h"

#define RB_RECORD_PENDING_MAX 64

/* Events are queued and committed together by rb_record_flush, one transaction: while a step
 * starts (what is about to run; skipped if another process holds the ledger), and after it
 * ends (waiting for the ledger as long as it must).
 *
 * What is about to run is first written ahead into the run's state file, before the exec
 * request; the commit follows beside the step's start (struct rb_run_ledger), so its
 * milliseconds are not the step's. If runbox dies in between, `runbox gc` commits the
 * written-ahead events. Only the commit after a step is fsync'd. The one beside it is in the
 * WAL: a crash or kill of runbox cannot lose it, a crash of the host can, together with
 * everything the step did, which lived in the sandbox's memory and died with it. The next
 * fsync'd commit (after the step) makes it durable too: the WAL is synced in order.
 * docs/ledger.md has the reasoning. */
enum rb_record_commit {
	RB_RECORD_BEFORE_STEP, /* in the WAL, not synced; the WAL is then checkpointed if long */
	RB_RECORD_DURABLE,     /* fsync'd before it returns */
	RB_RECORD_DEFERRED,    /* in the WAL, its writeback started: durable once rb_record_sync
	                        * returns, which the caller does after work that overlaps it */
};

struct rb_record {
	struct rb_ledger *ledger;
	struct rb_ledger_event pending[RB_RECORD_PENDING_MAX];
	size_t n_pending;
	const struct rb_run *run;
	double cpu_seconds;        /* summed over steps */
	double memory_gib_seconds; /* peak memory x wall time, summed over steps */
	uint64_t stored_bytes;     /* bytes the run added to the artifact store */
	uint64_t host_cpu_us0;     /* the runner's own CPU (getrusage RUSAGE_SELF) at rb_record_open */
	double host_cpu_seconds;   /* at run_end: the runner's since then, and the gateway's */
	unsigned steps;
	int64_t committed;     /* the run's events in the ledger so far */
	struct rb_run *keeper; /* rb_record_attach's run: it keeps what could not be committed */
	bool taken;            /* the ledger refused the run id: another run has it */
	bool sync_pending;     /* a RB_RECORD_DEFERRED commit awaits rb_record_sync */
	json_t *labels;        /* --label's {"K": "V"} for run_start, or NULL; not owned */
	/* A daemon's group commit (ledger/group.h), or NULL: the record then opens no ledger of
	 * its own, and its commits go through the group's one connection. Not owned. */
	struct rb_ledger_group *group;
	bool pooled; /* the sandbox came from a warm pool (runbox serve): run_start says so */
	/* runbox serve's session id, for run_start (a later daemon finds a lost session by it), or
	 * NULL; not owned. */
	const char *session;
};

/* Prepares the record; the ledger itself is opened at the first commit. */
int rb_record_open(struct rb_record *rec, const struct rb_run *run, struct rb_error *err);
/* Makes each of run's steps write ahead and commit what is pending (struct rb_run_ledger). */
void rb_record_attach(struct rb_record *rec, struct rb_run *run);
int rb_record_run_start(struct rb_record *rec, const char *agent_version, const char *manifest_hash,
                        struct rb_error *err);
/* bundle_digest: a skill step's bundle as sealed for the run (runtime/run/seal.h), else NULL; the
 * text alone (the entry's path) would not tell one bundle's code from another's. */
int rb_record_step_start(struct rb_record *rec, unsigned step, const char *name, const char *kind, const char *text,
                         size_t len, json_t *inputs, const char *bundle_digest, struct rb_error *err);
int rb_record_step_end(struct rb_record *rec, unsigned step, const struct rb_step_result *res, struct rb_error *err);
int rb_record_harvest(struct rb_record *rec, unsigned step, const struct rb_harvest_result *h, struct rb_error *err);
/* The run's storage budget stopped storing at step: limit names it (runtime/run/budget.h). */
int rb_record_storage_stopped(struct rb_record *rec, unsigned step, const char *limit, struct rb_error *err);
int rb_record_cleanup(struct rb_record *rec, const char *what, bool ok, struct rb_error *err);
/* A file call of a session (runbox serve): "file_write" with path, size and sha256, or
 * "file_read" with path and size (sha256 NULL). */
int rb_record_file(struct rb_record *rec, const char *type, const char *path, uint64_t size, const char *sha256,
                   struct rb_error *err);
/* Another call of a session (runbox serve's fs_mkdir, fs_remove, snapshot, ...): data is taken
 * (decref'd whatever happens). */
int rb_record_event(struct rb_record *rec, const char *type, json_t *data, struct rb_error *err);
/* A warm pool member was claimed for the run (runbox serve): its pair and how long it waited. */
int rb_record_pool_claim(struct rb_record *rec, const char *image, const char *policy, uint64_t age_ms,
                         struct rb_error *err);
int rb_record_run_end(struct rb_record *rec, const char *result, struct rb_error *err);
/* With a group, RB_RECORD_DURABLE waits for the group's commit; the others queue the events
 * without waiting (rb_ledger_group_detach). */
int rb_record_flush(struct rb_record *rec, enum rb_record_commit how, struct rb_error *err);
/* With a group: moves what is pending into a ticket of the group, for the caller to wait for
 * (rb_ledger_group_wait) once it let go of its own locks; *t is NULL when nothing is pending.
 * The events count as committed from here: a failed wait is the caller's to report. */
int rb_record_submit(struct rb_record *rec, struct rb_ledger_ticket **t, struct rb_error *err);
/* Makes a RB_RECORD_DEFERRED commit durable (waits for the disk); 0 when none is pending. */
int rb_record_sync(struct rb_record *rec, struct rb_error *err);
/* Flushes what is pending (and syncs a deferred commit) and closes. If that commit fails,
 * the events stay written ahead in the attached run's state file, which rb_run_close then
 * leaves for `runbox gc` (logged). */
void rb_record_close(struct rb_record *rec);

/* The ledger's name for a step's outcome: "success", "failure", "cancelled", "timed_out". */
const char *rb_record_outcome(const struct rb_step_result *res);

#endif

/* Group commit for a daemon: one ledger connection and one writer thread that commits the
 * events its callers queue, many runs' at once, in one transaction and one fsync. A caller
 * waits for its own events to be durable before it answers the call that made them. */
#ifndef RB_LEDGER_GROUP_H
#define RB_LEDGER_GROUP_H

#include <stdint.h>

#include "common/error.h"
#include "ledger/ledger.h"

struct rb_ledger_group;
struct rb_ledger_ticket;

/* Opens the ledger of state_dir (rb_ledger_open) and starts the writer thread. */
int rb_ledger_group_open(const char *state_dir, struct rb_ledger_group **out, struct rb_error *err);
/* Commits what is queued, stops the writer, closes the ledger. */
void rb_ledger_group_close(struct rb_ledger_group *g);

/* Queues n events of one run (instance as for rb_ledger_append_run, or NULL); the strings are
 * copied and each event's data is held (json_incref), so the caller may free its own at once.
 * *t is the caller's to wait for (rb_ledger_group_wait) or to let go (rb_ledger_group_detach). */
int rb_ledger_group_submit(struct rb_ledger_group *g, const char *run_id, const char *instance, const char *tenant,
                           const char *agent, const struct rb_ledger_event *events, size_t n,
                           struct rb_ledger_ticket **t, struct rb_error *err);
/* Waits until the ticket's events are committed and fsync'd, and frees it. Returns 0, -1 (err
 * says why) or RB_LEDGER_TAKEN (the run id is another run's: nothing of it was written). */
int rb_ledger_group_wait(struct rb_ledger_ticket *t, struct rb_error *err);
/* Waits until the ticket's events are committed (in the WAL: safe from a crash of this
 * process, not yet of the host), not for their fsync; the ticket stays the caller's, for
 * rb_ledger_group_wait (which then waits for the fsync) or rb_ledger_group_detach. Returns as
 * rb_ledger_group_wait; a failure here is the ticket's final result. */
int rb_ledger_group_wait_written(struct rb_ledger_ticket *t, struct rb_error *err);
/* Lets the writer free the ticket once committed: nobody waits for it; a failure is logged. */
void rb_ledger_group_detach(struct rb_ledger_ticket *t);

/* What the writer did so far: transactions committed, batches (tickets) and events in them,
 * and tickets that failed. commits < batches is the grouping. */
struct rb_ledger_group_stats {
	uint64_t commits, batches, events, failed;
};
void rb_ledger_group_stats(struct rb_ledger_group *g, struct rb_ledger_group_stats *st);

#endif

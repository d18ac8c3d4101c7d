/* Group commit (group.h): callers queue tickets under a mutex; the writer thread takes every
 * ticket queued so far and commits them in one rb_ledger_append_runs, wakes the waiters for
 * the commit, fsyncs it (rb_ledger_sync) and wakes the waiters for that. */
#include "ledger/group.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* The most tickets one transaction takes: bounds its size, never its latency (the rest go in
 * the next transaction at once). */
#define GROUP_MAX 256

struct rb_ledger_ticket {
	struct rb_ledger_group *g;
	char *run_id, *instance, *tenant, *agent;
	struct rb_ledger_event *events;
	size_t n;
	bool written, done, detached; /* written: committed, not yet fsync'd; done: both, or failed */
	int result;
	struct rb_error err;
	struct rb_ledger_ticket *next;
};

struct rb_ledger_group {
	struct rb_ledger *l;
	pthread_mutex_t lock;
	pthread_cond_t queued; /* a ticket came, or stop */
	pthread_cond_t done;   /* a transaction ended */
	struct rb_ledger_ticket *head, **tail;
	bool stop;
	pthread_t writer;
	const struct rb_logger *logger;
	struct rb_ledger_group_stats st;
};

static void ticket_free(struct rb_ledger_ticket *t)
{
	if (!t)
		return;
	for (size_t i = 0; t->events && i < t->n; i++) {
		free((char *)t->events[i].type);
		json_decref(t->events[i].data);
	}
	free(t->events);
	free(t->run_id);
	free(t->instance);
	free(t->tenant);
	free(t->agent);
	free(t);
}

/* One transaction for the tickets in list (at most GROUP_MAX), their results set. */
static void commit_group(struct rb_ledger_group *g, struct rb_ledger_ticket *list, size_t n)
{
	struct rb_ledger_run_batch b[GROUP_MAX];
	struct rb_ledger_ticket *t = list;
	for (size_t i = 0; i < n; i++, t = t->next)
		b[i] = (struct rb_ledger_run_batch){.run_id = t->run_id,
		                                    .instance = t->instance,
		                                    .tenant = t->tenant,
		                                    .agent = t->agent,
		                                    .events = t->events,
		                                    .n = t->n};
	struct rb_error err;
	rb_error_clear(&err);
	int r = rb_ledger_append_runs(g->l, b, n, &err);
	/* Written: a waiter for that (rb_ledger_group_wait_written) goes on while the fsync runs. */
	pthread_mutex_lock(&g->lock);
	bool any = false;
	t = list;
	for (size_t i = 0; i < n; i++, t = t->next) {
		t->result = b[i].result;
		t->err = b[i].err;
		t->written = true;
		any = any || t->result == 0;
	}
	pthread_cond_broadcast(&g->done);
	pthread_mutex_unlock(&g->lock);
	struct rb_error serr;
	int sr = any ? rb_ledger_sync(g->l, &serr) : 0;
	pthread_mutex_lock(&g->lock);
	if (r == 0 && sr == 0)
		g->st.commits++;
	/* Done and freed under the lock: a waiter frees its own ticket once it sees done, and a
	 * detached one is the writer's. */
	t = list;
	for (size_t i = 0; i < n; i++) {
		struct rb_ledger_ticket *nx = t->next;
		if (sr < 0 && t->result == 0) {
			t->result = -1;
			t->err = serr;
		}
		g->st.batches++;
		if (t->result == 0)
			g->st.events += t->n;
		else
			g->st.failed++;
		t->done = true;
		if (t->detached) {
			if (t->result != 0)
				rb_warn("ledger: run %s: %s", t->run_id, t->err.msg);
			ticket_free(t);
		}
		t = nx;
	}
	pthread_cond_broadcast(&g->done);
	pthread_mutex_unlock(&g->lock);
}

static void *writer(void *arg)
{
	struct rb_ledger_group *g = arg;
	rb_log_use(g->logger);
	pthread_mutex_lock(&g->lock);
	for (;;) {
		while (!g->head && !g->stop)
			pthread_cond_wait(&g->queued, &g->lock);
		if (!g->head)
			break; /* stopping, and nothing is left */
		/* Everything queued so far, up to GROUP_MAX, is taken out: what comes meanwhile
		 * waits for the next transaction. */
		struct rb_ledger_ticket *list = g->head, *last = list;
		size_t n = 1;
		while (last->next && n < GROUP_MAX)
			last = last->next, n++;
		g->head = last->next;
		if (!g->head)
			g->tail = &g->head;
		last->next = NULL;
		pthread_mutex_unlock(&g->lock);
		commit_group(g, list, n);
		pthread_mutex_lock(&g->lock);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

int rb_ledger_group_open(const char *state_dir, struct rb_ledger_group **out, struct rb_error *err)
{
	*out = NULL;
	struct rb_ledger_group *g = calloc(1, sizeof *g);
	if (!g)
		return rb_error_set(err, ENOMEM, "ledger group");
	if (rb_ledger_open(state_dir, &g->l, err) < 0) {
		free(g);
		return -1;
	}
	/* Every transaction is fsync'd apart from its commit (rb_ledger_sync): that one fsync is
	 * what the group shares, and a waiter for the commit alone need not wait for it. */
	if (rb_ledger_set_durable(g->l, false, err) < 0) {
		rb_ledger_close(g->l);
		free(g);
		return -1;
	}
	g->tail = &g->head;
	g->logger = rb_log_use(NULL); /* the opener's, for the writer thread */
	rb_log_use(g->logger);
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->queued, NULL);
	pthread_cond_init(&g->done, NULL);
	int e = pthread_create(&g->writer, NULL, writer, g);
	if (e) {
		rb_ledger_close(g->l);
		pthread_cond_destroy(&g->queued);
		pthread_cond_destroy(&g->done);
		pthread_mutex_destroy(&g->lock);
		free(g);
		return rb_error_set(err, e, "ledger group: the writer thread");
	}
	*out = g;
	return 0;
}

void rb_ledger_group_close(struct rb_ledger_group *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->lock);
	g->stop = true;
	pthread_cond_broadcast(&g->queued);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->writer, NULL);
	rb_ledger_close(g->l);
	pthread_cond_destroy(&g->queued);
	pthread_cond_destroy(&g->done);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

static char *dup_or_null(const char *s, bool *failed)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	*failed = *failed || !d;
	return d;
}

int rb_ledger_group_submit(struct rb_ledger_group *g, const char *run_id, const char *instance, const char *tenant,
                           const char *agent, const struct rb_ledger_event *events, size_t n,
                           struct rb_ledger_ticket **out, struct rb_error *err)
{
	*out = NULL;
	struct rb_ledger_ticket *t = calloc(1, sizeof *t);
	if (!t)
		return rb_error_set(err, ENOMEM, "ledger ticket");
	bool failed = false;
	t->g = g;
	t->run_id = dup_or_null(run_id, &failed);
	t->instance = dup_or_null(instance, &failed);
	t->tenant = dup_or_null(tenant, &failed);
	t->agent = dup_or_null(agent, &failed);
	t->events = calloc(n + 1, sizeof *t->events);
	failed = failed || !t->events;
	for (size_t i = 0; !failed && i < n; i++) {
		t->events[i].type = dup_or_null(events[i].type, &failed);
		t->events[i].data = json_incref(events[i].data);
		t->n = i + 1;
	}
	if (failed) {
		ticket_free(t);
		return rb_error_set(err, ENOMEM, "ledger ticket");
	}
	pthread_mutex_lock(&g->lock);
	if (g->stop) {
		pthread_mutex_unlock(&g->lock);
		ticket_free(t);
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "ledger: the writer is stopping");
	}
	*g->tail = t;
	g->tail = &t->next;
	pthread_cond_signal(&g->queued);
	pthread_mutex_unlock(&g->lock);
	*out = t;
	return 0;
}

int rb_ledger_group_wait(struct rb_ledger_ticket *t, struct rb_error *err)
{
	struct rb_ledger_group *g = t->g;
	pthread_mutex_lock(&g->lock);
	while (!t->done)
		pthread_cond_wait(&g->done, &g->lock);
	pthread_mutex_unlock(&g->lock);
	int r = t->result;
	if (r != 0 && err)
		*err = t->err;
	ticket_free(t);
	return r;
}

int rb_ledger_group_wait_written(struct rb_ledger_ticket *t, struct rb_error *err)
{
	struct rb_ledger_group *g = t->g;
	pthread_mutex_lock(&g->lock);
	while (!t->written && !t->done)
		pthread_cond_wait(&g->done, &g->lock);
	int r = t->result;
	if (r != 0 && err)
		*err = t->err;
	pthread_mutex_unlock(&g->lock);
	return r;
}

void rb_ledger_group_detach(struct rb_ledger_ticket *t)
{
	struct rb_ledger_group *g = t->g;
	pthread_mutex_lock(&g->lock);
	bool done = t->done;
	t->detached = true;
	pthread_mutex_unlock(&g->lock);
	if (done) { /* the writer already passed it by */
		if (t->result != 0)
			rb_warn("ledger: run %s: %s", t->run_id, t->err.msg);
		ticket_free(t);
	}
}

void rb_ledger_group_stats(struct rb_ledger_group *g, struct rb_ledger_group_stats *st)
{
	pthread_mutex_lock(&g->lock);
	*st = g->st;
	pthread_mutex_unlock(&g->lock);
}

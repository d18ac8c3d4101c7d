/* ledger/group.c: events queued by concurrent callers while the ledger is busy go in together,
 * in fewer transactions than callers (the control: one caller at a time gets one each); every
 * waiter returns only once its event is in; a batch whose run id is another instance's is
 * refused alone; a detached ticket is still committed; a caller may wait for the commit apart
 * from its fsync, which alone moves the head; the chain verifies. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "ledger/group.h"
#include "ledger/ledger.h"

#define N 8

struct fx {
	char top[64], dir[96], db[128];
	struct rb_ledger_group *g;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	strcpy(f->top, "/tmp/rbx-group-ut.XXXXXX");
	if (!mkdtemp(f->top))
		return -1;
	snprintf(f->dir, sizeof f->dir, "%s/state", f->top);
	snprintf(f->db, sizeof f->db, "%s/ledger.db", f->dir);
	struct rb_error err = {0};
	if (rb_ledger_group_open(f->dir, &f->g, &err) < 0) {
		fprintf(stderr, "open: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	rb_ledger_group_close(f->g);
	struct rb_error err;
	rb_rm_rf(f->top, &err);
	free(f);
	return 0;
}

/* Another process's writer, as far as SQLite is concerned: holds the write lock until released. */
static sqlite3 *hold_lock(const char *db)
{
	sqlite3 *h = NULL;
	assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
	assert_int_equal(sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	return h;
}

static void release_lock(sqlite3 *h)
{
	assert_int_equal(sqlite3_exec(h, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(h);
}

struct caller {
	struct rb_ledger_group *g;
	char run[32];
	atomic_int *submitted;
	int result;
};

static void *one_call(void *arg)
{
	struct caller *c = arg;
	struct rb_error err = {0};
	json_t *d = json_pack("{s:s}", "run", c->run);
	struct rb_ledger_event ev = {"step_start", d};
	struct rb_ledger_ticket *t = NULL;
	c->result = rb_ledger_group_submit(c->g, c->run, NULL, "t", "a", &ev, 1, &t, &err);
	json_decref(d); /* the ticket holds its own reference */
	atomic_fetch_add(c->submitted, 1);
	if (c->result == 0)
		c->result = rb_ledger_group_wait(t, &err);
	return NULL;
}

static int64_t count(const char *dir, const char *run)
{
	struct rb_ledger *l = NULL;
	struct rb_error err = {0};
	int64_t n = -1;
	assert_int_equal(rb_ledger_open(dir, &l, &err), 0);
	assert_int_equal(rb_ledger_count_run(l, run, NULL, &n, &err), 0);
	rb_ledger_close(l);
	return n;
}

static void assert_intact(const char *dir)
{
	struct rb_ledger *l = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_ledger_open(dir, &l, &err), 0);
	assert_int_equal(rb_ledger_verify(l, NULL, &err), 0);
	rb_ledger_close(l);
}

static void test_concurrent_calls_share_commits(void **state)
{
	struct fx *f = *state;
	struct rb_ledger_group_stats before, after;
	rb_ledger_group_stats(f->g, &before);
	/* While the ledger is held, every caller queues; the writer holds at most the first. */
	sqlite3 *h = hold_lock(f->db);
	atomic_int submitted = 0;
	struct caller c[N];
	pthread_t th[N];
	for (int i = 0; i < N; i++) {
		c[i] = (struct caller){.g = f->g, .submitted = &submitted, .result = -9};
		snprintf(c[i].run, sizeof c[i].run, "run-%d", i);
		assert_int_equal(pthread_create(&th[i], NULL, one_call, &c[i]), 0);
	}
	while (atomic_load(&submitted) < N)
		usleep(1000);
	usleep(20000);
	/* None of them is answered while its event cannot be in. */
	rb_ledger_group_stats(f->g, &after);
	assert_int_equal(after.batches - before.batches, 0);
	release_lock(h);
	for (int i = 0; i < N; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(c[i].result, 0);
		assert_int_equal(count(f->dir, c[i].run), 1); /* in once waited for */
	}
	rb_ledger_group_stats(f->g, &after);
	assert_int_equal(after.batches - before.batches, N);
	assert_int_equal(after.events - before.events, N);
	/* The first ticket alone, at most, then the rest together. */
	assert_true(after.commits - before.commits <= 2);
	assert_true(after.commits - before.commits < N);
	assert_intact(f->dir);
}

/* The control: a caller at a time, each waiting for its own, gets a transaction each. */
static void test_one_caller_at_a_time_gets_one_commit_each(void **state)
{
	struct fx *f = *state;
	struct rb_ledger_group_stats before, after;
	rb_ledger_group_stats(f->g, &before);
	atomic_int submitted = 0;
	for (int i = 0; i < N; i++) {
		struct caller c = {.g = f->g, .submitted = &submitted, .result = -9};
		snprintf(c.run, sizeof c.run, "seq-%d", i);
		one_call(&c);
		assert_int_equal(c.result, 0);
	}
	rb_ledger_group_stats(f->g, &after);
	assert_int_equal(after.commits - before.commits, N);
	assert_int_equal(after.events - before.events, N);
	assert_intact(f->dir);
}

static void test_taken_run_is_refused_alone(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	struct rb_ledger *l = NULL;
	assert_int_equal(rb_ledger_open(f->dir, &l, &err), 0);
	json_t *d = json_pack("{s:s}", "instance", "first");
	struct rb_ledger_event start = {"run_start", d};
	assert_int_equal(rb_ledger_append_run(l, "owned", "first", "t", "a", &start, 1, NULL, &err), 0);
	rb_ledger_close(l);
	json_decref(d);

	sqlite3 *h = hold_lock(f->db);
	json_t *d2 = json_pack("{s:s}", "instance", "second");
	struct rb_ledger_event ev = {"run_start", d2};
	struct rb_ledger_ticket *t1 = NULL, *t2 = NULL;
	assert_int_equal(rb_ledger_group_submit(f->g, "owned", "second", "t", "a", &ev, 1, &t1, &err), 0);
	assert_int_equal(rb_ledger_group_submit(f->g, "free", "third", "t", "a", &ev, 1, &t2, &err), 0);
	json_decref(d2);
	release_lock(h);
	assert_int_equal(rb_ledger_group_wait(t1, &err), RB_LEDGER_TAKEN);
	assert_non_null(strstr(err.msg, "owned"));
	assert_int_equal(rb_ledger_group_wait(t2, &err), 0);
	assert_int_equal(count(f->dir, "owned"), 1); /* its first run's only */
	assert_int_equal(count(f->dir, "free"), 1);
	assert_intact(f->dir);
}

static void test_detached_ticket_is_committed(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	struct rb_ledger_event ev = {"step_end", NULL};
	struct rb_ledger_ticket *t = NULL;
	assert_int_equal(rb_ledger_group_submit(f->g, "detached", NULL, "t", "a", &ev, 1, &t, &err), 0);
	rb_ledger_group_detach(t);
	/* Closing commits what is queued: nothing is dropped. */
	rb_ledger_group_close(f->g);
	f->g = NULL;
	assert_int_equal(count(f->dir, "detached"), 1);
	assert_int_equal(rb_ledger_group_open(f->dir, &f->g, &err), 0);
	assert_intact(f->dir);
}

/* The seq the head file records (the tamper-evident head moved by each fsync'd commit). */
static long long head_seq(const char *dir)
{
	char path[160], text[128] = "";
	snprintf(path, sizeof path, "%s/ledger.head", dir);
	FILE *fp = fopen(path, "r");
	assert_non_null(fp);
	assert_non_null(fgets(text, sizeof text, fp));
	fclose(fp);
	return atoll(text);
}

/* A caller may go on once its events are committed (a process starts once its step_start is
 * in the WAL) and answer once they are fsync'd: the second wait is what moves the head. */
static void test_written_then_durable(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	struct rb_ledger_event ev = {"step_start", NULL};
	struct rb_ledger_ticket *t = NULL;
	assert_int_equal(head_seq(f->dir), 0);
	assert_int_equal(rb_ledger_group_submit(f->g, "w", NULL, "t", "a", &ev, 1, &t, &err), 0);
	assert_int_equal(rb_ledger_group_wait_written(t, &err), 0);
	assert_int_equal(rb_ledger_group_wait(t, &err), 0);
	assert_int_equal(head_seq(f->dir), 1);
	assert_int_equal(count(f->dir, "w"), 1);
	/* A refused batch is final at the first wait, and the second says the same. */
	json_t *d = json_pack("{s:s}", "instance", "other");
	struct rb_ledger_event start = {"run_start", d};
	assert_int_equal(rb_ledger_group_submit(f->g, "w", "other", "t", "a", &start, 1, &t, &err), 0);
	json_decref(d);
	assert_int_equal(rb_ledger_group_wait_written(t, &err), RB_LEDGER_TAKEN);
	assert_int_equal(rb_ledger_group_wait(t, &err), RB_LEDGER_TAKEN);
	assert_int_equal(count(f->dir, "w"), 1);
	assert_intact(f->dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_concurrent_calls_share_commits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_caller_at_a_time_gets_one_commit_each, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_taken_run_is_refused_alone, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_detached_ticket_is_committed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_written_then_durable, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

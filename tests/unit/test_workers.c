/* gateway/workers.c: jobs that block run side by side, each on its own thread (none waits
 * behind a busy one); once they are done their threads are idle and the next jobs run on
 * them, not on new ones; free ends them all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "gateway/workers.h"

#define JOBS 4

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned running;
	bool open;
	pthread_t seen[2 * JOBS];
	unsigned n_seen;
};

/* Records its thread, then blocks until the gate opens. */
static void *job(void *arg)
{
	struct gate *g = arg;
	pthread_mutex_lock(&g->lock);
	g->seen[g->n_seen++] = pthread_self();
	g->running++;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	g->running--;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

static void wait_for(struct gate *g, unsigned running)
{
	pthread_mutex_lock(&g->lock);
	while (g->running != running)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void test_jobs_run_side_by_side_then_reuse_threads(void **state)
{
	(void)state;
	static struct gate g = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
	struct rb_gw_workers *w = rb_gw_workers_new(NULL);
	assert_non_null(w);
	for (unsigned i = 0; i < JOBS; i++)
		assert_int_equal(rb_gw_workers_run(w, job, &g), 0);
	wait_for(&g, JOBS); /* all four blocked at once: none was queued behind another */
	for (unsigned i = 0; i < JOBS; i++)
		for (unsigned j = 0; j < i; j++)
			assert_false(pthread_equal(g.seen[i], g.seen[j]));
	assert_int_equal(rb_gw_workers_idle(w), 0);

	pthread_mutex_lock(&g.lock);
	g.open = true;
	pthread_cond_broadcast(&g.cond);
	pthread_mutex_unlock(&g.lock);
	wait_for(&g, 0);
	while (rb_gw_workers_idle(w) < JOBS) /* each goes idle once its job returned */
		usleep(1000);

	/* The next jobs run on those same threads. */
	for (unsigned i = 0; i < JOBS; i++)
		assert_int_equal(rb_gw_workers_run(w, job, &g), 0);
	wait_for(&g, 0);
	while (rb_gw_workers_idle(w) < JOBS)
		usleep(1000);
	for (unsigned i = JOBS; i < 2 * JOBS; i++) {
		bool kept = false;
		for (unsigned j = 0; j < JOBS; j++)
			kept = kept || pthread_equal(g.seen[i], g.seen[j]);
		assert_true(kept);
	}
	assert_int_equal(g.n_seen, 2 * JOBS);
	rb_gw_workers_free(w); /* ends the idle threads and waits for them */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_jobs_run_side_by_side_then_reuse_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The run's kept producer threads (workers.h): each idle thread waits on its own condition
 * for the next job; the pool's lock guards the idle list and the thread count. */
#define _GNU_SOURCE
#include "gateway/workers.h"

#include "common/util.h"
#include "gateway/cpushare.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

struct worker {
	struct rb_gw_workers *pool;
	pthread_cond_t wake;
	void *(*fn)(void *); /* the next job; NULL while idle */
	void *arg;
	bool stop;
	struct worker *next; /* on the idle list */
};

struct rb_gw_workers {
	pthread_mutex_t lock;
	pthread_cond_t ended; /* a thread ended */
	struct worker *idle;
	unsigned n_idle, n_threads;
	bool stopping;
	struct rb_gw_cpu *cpu; /* the run's: each job's CPU is charged there */
};

struct rb_gw_workers *rb_gw_workers_new(struct rb_gw_cpu *cpu)
{
	struct rb_gw_workers *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->cpu = cpu;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->ended, NULL);
	return w;
}

static void unlink_idle(struct rb_gw_workers *w, struct worker *me)
{
	for (struct worker **p = &w->idle; *p; p = &(*p)->next)
		if (*p == me) {
			*p = me->next;
			w->n_idle--;
			return;
		}
}

/* Waits (locked) for the next job; false when the thread is to end instead. */
static bool next_job(struct worker *me)
{
	struct rb_gw_workers *w = me->pool;
	if (w->stopping || w->n_idle >= RB_GW_WORKERS_IDLE)
		return false;
	me->fn = NULL;
	me->next = w->idle;
	w->idle = me;
	w->n_idle++;
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += RB_GW_WORKERS_IDLE_S;
	while (!me->fn && !me->stop)
		if (pthread_cond_timedwait(&me->wake, &w->lock, &until) == ETIMEDOUT && !me->fn) {
			unlink_idle(w, me);
			return false;
		}
	return me->fn != NULL; /* taken off the list by whoever set fn or stop */
}

static void *worker_main(void *arg)
{
	struct worker *me = arg;
	struct rb_gw_workers *w = me->pool;
	for (;;) {
		uint64_t cpu0 = w->cpu ? rb_gw_thread_cpu_ns() : 0;
		me->fn(me->arg);
		if (w->cpu)
			rb_gw_cpu_charge(w->cpu, cpu0, rb_now_us());
		pthread_mutex_lock(&w->lock);
		bool more = next_job(me);
		if (!more) {
			w->n_threads--;
			pthread_cond_broadcast(&w->ended);
		}
		pthread_mutex_unlock(&w->lock);
		if (!more)
			break;
	}
	pthread_cond_destroy(&me->wake);
	free(me);
	return NULL;
}

int rb_gw_workers_run(struct rb_gw_workers *w, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	pthread_t t;
	if (w) {
		pthread_mutex_lock(&w->lock);
		struct worker *k = w->idle;
		if (k) {
			w->idle = k->next;
			w->n_idle--;
			k->fn = fn, k->arg = arg;
			pthread_cond_signal(&k->wake);
		}
		pthread_mutex_unlock(&w->lock);
		if (k)
			return 0;
	}
	struct worker *k = w ? calloc(1, sizeof *k) : NULL;
	if (w && !k)
		return -1;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int r;
	if (k) {
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&k->wake, &ca);
		pthread_condattr_destroy(&ca);
		k->pool = w, k->fn = fn, k->arg = arg;
		pthread_mutex_lock(&w->lock);
		w->n_threads++;
		pthread_mutex_unlock(&w->lock);
		r = pthread_create(&t, &attr, worker_main, k);
		if (r != 0) {
			pthread_mutex_lock(&w->lock);
			w->n_threads--;
			pthread_cond_broadcast(&w->ended);
			pthread_mutex_unlock(&w->lock);
			pthread_cond_destroy(&k->wake);
			free(k);
		}
	} else {
		r = pthread_create(&t, &attr, fn, arg);
	}
	pthread_attr_destroy(&attr);
	return r == 0 ? 0 : -1;
}

unsigned rb_gw_workers_idle(struct rb_gw_workers *w)
{
	pthread_mutex_lock(&w->lock);
	unsigned n = w->n_idle;
	pthread_mutex_unlock(&w->lock);
	return n;
}

void rb_gw_workers_free(struct rb_gw_workers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	for (struct worker *k = w->idle; k; k = k->next) {
		k->stop = true;
		pthread_cond_signal(&k->wake);
	}
	w->idle = NULL;
	w->n_idle = 0;
	while (w->n_threads)
		pthread_cond_wait(&w->ended, &w->lock);
	pthread_mutex_unlock(&w->lock);
	pthread_cond_destroy(&w->ended);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

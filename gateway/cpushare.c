/* A run's gateway CPU and its share of a core (see cpushare.h). */
#define _GNU_SOURCE
#include "gateway/cpushare.h"

#include <time.h>

#define BUCKET_S 1.0 /* the bucket holds one second of the share */

void rb_gw_cpu_init(struct rb_gw_cpu *c, double cores, uint64_t now_us)
{
	pthread_mutex_init(&c->lock, NULL);
	c->spent_ns = 0;
	c->cores = cores > 0 ? cores : 0;
	c->credit_ns = c->cores * BUCKET_S * 1e9;
	c->last_us = now_us;
	c->limited = 0;
}

uint64_t rb_gw_thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Locked: the credit grown by the share since last_us, capped at the bucket. */
static void refill(struct rb_gw_cpu *c, uint64_t now_us)
{
	if (now_us <= c->last_us)
		return;
	double full = c->cores * BUCKET_S * 1e9;
	c->credit_ns += c->cores * (double)(now_us - c->last_us) * 1e3;
	if (c->credit_ns > full)
		c->credit_ns = full;
	c->last_us = now_us;
}

void rb_gw_cpu_charge(struct rb_gw_cpu *c, uint64_t since_ns, uint64_t now_us)
{
	uint64_t now_ns = rb_gw_thread_cpu_ns();
	uint64_t d = now_ns > since_ns ? now_ns - since_ns : 0;
	pthread_mutex_lock(&c->lock);
	__atomic_add_fetch(&c->spent_ns, d, __ATOMIC_RELAXED);
	if (c->cores > 0) {
		refill(c, now_us);
		c->credit_ns -= (double)d;
	}
	pthread_mutex_unlock(&c->lock);
}

bool rb_gw_cpu_admit(struct rb_gw_cpu *c, uint64_t now_us)
{
	if (c->cores <= 0)
		return true;
	pthread_mutex_lock(&c->lock);
	refill(c, now_us);
	bool ok = c->credit_ns >= 0;
	if (!ok)
		__atomic_add_fetch(&c->limited, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->lock);
	return ok;
}

json_t *rb_gw_cpu_refusal(void)
{
	return json_pack("{s:s, s:s}", "error", "over the run's gateway CPU share", "hint",
	                 "the run's calls spent more gateway CPU than its share of a core (its cpu limit); retry "
	                 "after a second");
}

void rb_gw_cpu_read(const struct rb_gw_cpu *c, uint64_t *spent_ns, uint64_t *limited)
{
	*spent_ns = __atomic_load_n(&c->spent_ns, __ATOMIC_RELAXED);
	*limited = __atomic_load_n(&c->limited, __ATOMIC_RELAXED);
}

void rb_gw_cpu_destroy(struct rb_gw_cpu *c)
{
	pthread_mutex_destroy(&c->lock);
}

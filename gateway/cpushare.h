/* A run's gateway CPU: what the threads serving it spent (each thread's own CPU clock, added
 * when its piece of work ends), and the share of a core it may spend, as a bucket of CPU
 * nanoseconds that refills at `cores` per second up to one second's worth. A gateway daemon
 * serves many runs from one cgroup, so the kernel cannot charge a run for its calls: this does,
 * the run's result carries what it spent, and a run over its share is answered 429 until the
 * bucket refills. Thread-safe; times are passed in, so tests need no clock. */
#ifndef RB_GATEWAY_CPUSHARE_H
#define RB_GATEWAY_CPUSHARE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct rb_gw_cpu {
	pthread_mutex_t lock;
	uint64_t spent_ns; /* all the run's gateway threads spent (__atomic: read unlocked) */
	double cores;      /* the share; 0: not limited */
	double credit_ns;  /* the bucket; below zero: over the share */
	uint64_t last_us;  /* when credit_ns was last refilled */
	uint64_t limited;  /* calls answered 429 for the share (__atomic) */
};

void rb_gw_cpu_init(struct rb_gw_cpu *c, double cores, uint64_t now_us);
/* The calling thread's CPU time so far (CLOCK_THREAD_CPUTIME_ID), in nanoseconds. */
uint64_t rb_gw_thread_cpu_ns(void);
/* Charges the calling thread's CPU since since_ns (a rb_gw_thread_cpu_ns of this thread). */
void rb_gw_cpu_charge(struct rb_gw_cpu *c, uint64_t since_ns, uint64_t now_us);
/* Whether a new call may start at now_us: true under the share (or with none); false counts
 * it in limited. */
bool rb_gw_cpu_admit(struct rb_gw_cpu *c, uint64_t now_us);
/* The 429 answer's body for a call over the share: {error, hint}. */
json_t *rb_gw_cpu_refusal(void);
/* What the run's threads spent so far, and how many calls were refused for the share. */
void rb_gw_cpu_read(const struct rb_gw_cpu *c, uint64_t *spent_ns, uint64_t *limited);
void rb_gw_cpu_destroy(struct rb_gw_cpu *c);

#endif

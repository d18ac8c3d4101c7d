/* One run's producer threads (gateway/connector.c), kept between calls: a call's transfer runs
 * on an idle one, or on a new one when none is idle, never queued behind a busy one (a producer
 * blocks on its client for as long as its answer streams). Thread-safe. */
#ifndef RB_GATEWAY_WORKERS_H
#define RB_GATEWAY_WORKERS_H

#define RB_GW_WORKERS_IDLE   16 /* idle threads kept at most */
#define RB_GW_WORKERS_IDLE_S 30 /* an idle thread ends after this long without a job */

struct rb_gw_workers;
struct rb_gw_cpu;

/* Each job's CPU is charged to cpu (NULL: not counted). NULL: out of memory. */
struct rb_gw_workers *rb_gw_workers_new(struct rb_gw_cpu *cpu);
/* Ends the idle threads and waits until every thread has ended: no job may be running. */
void rb_gw_workers_free(struct rb_gw_workers *w);

/* Runs fn(arg) on a kept thread or a new one (w NULL: always a new one, detached). fn tells its
 * caller itself when it is done: there is no join. -1 when no thread could be made. */
int rb_gw_workers_run(struct rb_gw_workers *w, void *(*fn)(void *), void *arg);

/* The threads idle now (for tests). */
unsigned rb_gw_workers_idle(struct rb_gw_workers *w);

#endif

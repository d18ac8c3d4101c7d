/* A token bucket: the gateway's per-run request rate. Thread-safe (the endpoint serves each
 * listening socket from its own thread); times are passed in, so tests need no clock. */
#ifndef RB_GATEWAY_RATELIMIT_H
#define RB_GATEWAY_RATELIMIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct rb_ratelimit {
	pthread_mutex_t lock;
	uint64_t rate;    /* tokens per second; 0: unlimited */
	uint64_t burst;   /* the bucket's size, in tokens */
	uint64_t micro;   /* tokens held, in millionths */
	uint64_t last_us; /* when micro was last refilled */
};

/* A full bucket at now_us. */
void rb_ratelimit_init(struct rb_ratelimit *rl, uint64_t rate, uint64_t burst, uint64_t now_us);
/* Takes one token if there is one at now_us. */
bool rb_ratelimit_take(struct rb_ratelimit *rl, uint64_t now_us);
void rb_ratelimit_destroy(struct rb_ratelimit *rl);

#endif

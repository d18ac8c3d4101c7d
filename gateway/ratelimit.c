/* The gateway's token bucket (see ratelimit.h). */
#include "gateway/ratelimit.h"

void rb_ratelimit_init(struct rb_ratelimit *rl, uint64_t rate, uint64_t burst, uint64_t now_us)
{
	pthread_mutex_init(&rl->lock, NULL);
	rl->rate = rate;
	rl->burst = burst ? burst : 1;
	rl->micro = rl->burst * 1000000u;
	rl->last_us = now_us;
}

bool rb_ratelimit_take(struct rb_ratelimit *rl, uint64_t now_us)
{
	if (!rl->rate)
		return true;
	pthread_mutex_lock(&rl->lock);
	uint64_t full = rl->burst * 1000000u;
	if (now_us > rl->last_us) {
		/* rate tokens per second = rate millionths per microsecond; capped before the
		 * product can overflow. */
		uint64_t dt = now_us - rl->last_us;
		uint64_t add = dt >= full / rl->rate + 1 ? full : dt * rl->rate;
		rl->micro = rl->micro + add > full ? full : rl->micro + add;
		rl->last_us = now_us;
	}
	bool ok = rl->micro >= 1000000u;
	if (ok)
		rl->micro -= 1000000u;
	pthread_mutex_unlock(&rl->lock);
	return ok;
}

void rb_ratelimit_destroy(struct rb_ratelimit *rl)
{
	pthread_mutex_destroy(&rl->lock);
}

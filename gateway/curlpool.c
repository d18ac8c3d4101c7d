/* The run's idle curl easy handles (curlpool.h): a small array searched by key under one lock;
 * the oldest idle handle makes room for a new one. */
#include "gateway/curlpool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

struct idle {
	CURL *curl; /* NULL: a free slot */
	char key[RB_GW_CURLPOOL_KEY];
	uint64_t since; /* seconds, CLOCK_MONOTONIC: when it came back */
};

struct rb_gw_curlpool {
	pthread_mutex_t lock;
	struct idle idle[RB_GW_CURLPOOL_IDLE];
};

struct rb_gw_curlpool *rb_gw_curlpool_new(void)
{
	struct rb_gw_curlpool *p = calloc(1, sizeof *p);
	if (p)
		pthread_mutex_init(&p->lock, NULL);
	return p;
}

void rb_gw_curlpool_free(struct rb_gw_curlpool *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE; i++)
		if (p->idle[i].curl)
			curl_easy_cleanup(p->idle[i].curl);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Moves the handles idle too long out of p into stale (cleaned up by the caller, unlocked). */
static unsigned expire(struct rb_gw_curlpool *p, uint64_t now, CURL **stale)
{
	unsigned n = 0;
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE; i++)
		if (p->idle[i].curl && now - p->idle[i].since > RB_GW_CURLPOOL_IDLE_S) {
			stale[n++] = p->idle[i].curl;
			p->idle[i].curl = NULL;
		}
	return n;
}

CURL *rb_gw_curlpool_take(struct rb_gw_curlpool *p, const char *key)
{
	if (!p)
		return curl_easy_init();
	CURL *c = NULL, *stale[RB_GW_CURLPOOL_IDLE];
	uint64_t now = (rb_now_us() / 1000000u);
	pthread_mutex_lock(&p->lock);
	unsigned n = expire(p, now, stale);
	struct idle *best = NULL; /* the newest of key's: the likeliest to be still open */
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE; i++) {
		struct idle *s = &p->idle[i];
		if (s->curl && !strcmp(s->key, key) && (!best || s->since > best->since))
			best = s;
	}
	if (best) {
		c = best->curl;
		best->curl = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < n; i++)
		curl_easy_cleanup(stale[i]);
	return c ? c : curl_easy_init();
}

void rb_gw_curlpool_give(struct rb_gw_curlpool *p, const char *key, CURL *c, bool reusable)
{
	if (!c)
		return;
	if (!p || !reusable || strlen(key) >= RB_GW_CURLPOOL_KEY) {
		curl_easy_cleanup(c);
		return;
	}
	/* Reset before it waits: none of its pointers (the call's callbacks, their data, its error
	 * buffer) outlives the call, whatever curl does when the handle is closed later. */
	curl_easy_reset(c);
	CURL *stale[RB_GW_CURLPOOL_IDLE + 1];
	uint64_t now = (rb_now_us() / 1000000u);
	pthread_mutex_lock(&p->lock);
	unsigned n = expire(p, now, stale);
	struct idle *slot = NULL;
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE && (!slot || slot->curl); i++)
		if (!slot || !p->idle[i].curl || p->idle[i].since < slot->since)
			slot = &p->idle[i];
	if (slot->curl)
		stale[n++] = slot->curl; /* full: the oldest idle handle makes room */
	slot->curl = c;
	slot->since = now;
	snprintf(slot->key, sizeof slot->key, "%s", key);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < n; i++)
		curl_easy_cleanup(stale[i]);
}

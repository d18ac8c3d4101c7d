/* The run's idle curl handles (curlpool.h): a small array searched by key under one lock;
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
	struct rb_gw_handle h; /* easy NULL: a free slot */
	char key[RB_GW_CURLPOOL_KEY];
	uint64_t since; /* seconds, CLOCK_MONOTONIC: when it came back */
};

struct rb_gw_curlpool {
	pthread_mutex_t lock;
	struct idle idle[RB_GW_CURLPOOL_IDLE];
};

/* The easy handle is out of the multi: closing the multi closes the connection it cached. */
static void handle_close(struct rb_gw_handle *h)
{
	if (h->multi)
		curl_multi_cleanup(h->multi);
	if (h->easy)
		curl_easy_cleanup(h->easy);
	*h = (struct rb_gw_handle){0};
}

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
		handle_close(&p->idle[i].h);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* Moves the handles idle too long out of p into stale (closed by the caller, unlocked). */
static unsigned expire(struct rb_gw_curlpool *p, uint64_t now, struct rb_gw_handle *stale)
{
	unsigned n = 0;
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE; i++)
		if (p->idle[i].h.easy && now - p->idle[i].since > RB_GW_CURLPOOL_IDLE_S) {
			stale[n++] = p->idle[i].h;
			p->idle[i].h = (struct rb_gw_handle){0};
		}
	return n;
}

static bool handle_new(struct rb_gw_handle *h)
{
	h->easy = curl_easy_init();
	h->multi = curl_multi_init();
	if (h->multi)
		curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, 1L); /* its last connection, no more */
	if (h->easy && h->multi)
		return true;
	handle_close(h);
	return false;
}

bool rb_gw_curlpool_take(struct rb_gw_curlpool *p, const char *key, struct rb_gw_handle *h)
{
	*h = (struct rb_gw_handle){0};
	if (!p)
		return handle_new(h);
	struct rb_gw_handle stale[RB_GW_CURLPOOL_IDLE];
	uint64_t now = (rb_now_us() / 1000000u);
	pthread_mutex_lock(&p->lock);
	unsigned n = expire(p, now, stale);
	struct idle *best = NULL; /* the newest of key's: the likeliest to be still open */
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE; i++) {
		struct idle *s = &p->idle[i];
		if (s->h.easy && !strcmp(s->key, key) && (!best || s->since > best->since))
			best = s;
	}
	if (best) {
		*h = best->h;
		best->h = (struct rb_gw_handle){0};
	}
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < n; i++)
		handle_close(&stale[i]);
	return h->easy ? true : handle_new(h);
}

void rb_gw_curlpool_give(struct rb_gw_curlpool *p, const char *key, struct rb_gw_handle *h, bool reusable)
{
	if (!h->easy) {
		handle_close(h);
		return;
	}
	if (!p || !reusable || strlen(key) >= RB_GW_CURLPOOL_KEY) {
		handle_close(h);
		return;
	}
	/* Reset before it waits: none of its pointers (the call's callbacks, their data, its error
	 * buffer) outlives the call, whatever curl does when the handle is closed later. */
	curl_easy_reset(h->easy);
	struct rb_gw_handle stale[RB_GW_CURLPOOL_IDLE + 1];
	uint64_t now = (rb_now_us() / 1000000u);
	pthread_mutex_lock(&p->lock);
	unsigned n = expire(p, now, stale);
	struct idle *slot = NULL;
	for (unsigned i = 0; i < RB_GW_CURLPOOL_IDLE && (!slot || slot->h.easy); i++)
		if (!slot || !p->idle[i].h.easy || p->idle[i].since < slot->since)
			slot = &p->idle[i];
	if (slot->h.easy)
		stale[n++] = slot->h; /* full: the oldest idle handle makes room */
	slot->h = *h;
	slot->since = now;
	snprintf(slot->key, sizeof slot->key, "%s", key);
	pthread_mutex_unlock(&p->lock);
	*h = (struct rb_gw_handle){0};
	for (unsigned i = 0; i < n; i++)
		handle_close(&stale[i]);
}

CURLcode rb_gw_handle_perform(struct rb_gw_handle *h)
{
	if (curl_multi_add_handle(h->multi, h->easy) != CURLM_OK)
		return CURLE_FAILED_INIT;
	CURLcode rc = CURLE_OK;
	for (int running = 1; running;) {
		if (curl_multi_perform(h->multi, &running) != CURLM_OK ||
		    (running && curl_multi_poll(h->multi, NULL, 0, 1000, NULL) != CURLM_OK)) {
			rc = CURLE_RECV_ERROR;
			break;
		}
	}
	int q;
	for (CURLMsg *m; rc == CURLE_OK && (m = curl_multi_info_read(h->multi, &q));)
		if (m->msg == CURLMSG_DONE && m->easy_handle == h->easy)
			rc = m->data.result;
	curl_multi_remove_handle(h->multi, h->easy);
	return rc;
}

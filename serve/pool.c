/* The warm pool (pool.h): per pair a FIFO of ready members under the pool's own lock, and one
 * refill thread that makes and destroys members with no lock held. */
#define _GNU_SOURCE
#include "serve/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"

struct member {
	struct sv_session *m;
	uint64_t born_ms;
};

struct pair_state {
	struct rb_serve_pool_pair pair;
	struct member *ready; /* size of them at most, oldest first */
	unsigned n_ready;
	uint64_t made, claimed, failed, expired;
	uint64_t retry_at_ms;  /* after a failed make: not before then */
	uint64_t refill_at_ms; /* after a claim: not before then (RB_SERVE_POOL_REFILL_DELAY_MS) */
	unsigned failing;      /* makes failed in a row */
};

struct rb_serve_pool {
	struct rb_serve *sv;
	pthread_mutex_t lock;
	pthread_cond_t wake; /* a claim, or stop */
	struct pair_state *pairs;
	unsigned n_pairs;
	uint64_t max_age_ms;
	bool stop;
	bool running; /* the thread was started */
	pthread_t thread;
};

int rb_serve_pool_parse(const char *arg, struct rb_serve_pool_pair *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	const char *eq = strrchr(arg, '=');
	const char *colon = eq ? memrchr(arg, ':', (size_t)(eq - arg)) : NULL;
	char *end = NULL;
	unsigned long n = eq ? strtoul(eq + 1, &end, 10) : 0;
	if (!eq || !colon || colon == arg || colon + 1 == eq || !eq[1] || *end || n == 0 || n > RB_SERVE_POOL_MAX ||
	    (size_t)(colon - arg) >= sizeof out->image || (size_t)(eq - colon - 1) >= sizeof out->policy)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "--pool `%s`: expected IMAGE:POLICY=N with N from 1 to %u",
		                     arg, RB_SERVE_POOL_MAX);
	memcpy(out->image, arg, (size_t)(colon - arg));
	memcpy(out->policy, colon + 1, (size_t)(eq - colon - 1));
	out->size = (unsigned)n;
	return 0;
}

static uint64_t make_at(const struct pair_state *ps)
{
	return ps->retry_at_ms > ps->refill_at_ms ? ps->retry_at_ms : ps->refill_at_ms;
}

/* A pair short of its size that may be made now, or NULL; *next: the earliest time a pair
 * short of its size may be made later (unchanged when none). */
static struct pair_state *wanting(struct rb_serve_pool *p, uint64_t t, uint64_t *next)
{
	for (unsigned i = 0; i < p->n_pairs; i++) {
		struct pair_state *ps = &p->pairs[i];
		if (ps->n_ready >= ps->pair.size)
			continue;
		if (t >= make_at(ps))
			return ps;
		if (make_at(ps) < *next)
			*next = make_at(ps);
	}
	return NULL;
}

/* Members past the age limit, taken out (the caller destroys them unlocked). */
static unsigned take_expired(struct rb_serve_pool *p, uint64_t t, struct sv_session **out, unsigned max)
{
	unsigned n = 0;
	for (unsigned i = 0; i < p->n_pairs; i++) {
		struct pair_state *ps = &p->pairs[i];
		while (ps->n_ready && n < max && t - ps->ready[0].born_ms > p->max_age_ms) {
			out[n++] = ps->ready[0].m;
			memmove(ps->ready, ps->ready + 1, --ps->n_ready * sizeof *ps->ready);
			ps->expired++;
		}
	}
	return n;
}

static void *refill(void *arg)
{
	struct rb_serve_pool *p = arg;
	rb_log_use(rb_serve_logger(p->sv));
	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		uint64_t t = (rb_now_us() / 1000u);
		struct sv_session *old[16];
		unsigned n_old = take_expired(p, t, old, 16);
		if (n_old) {
			pthread_mutex_unlock(&p->lock);
			for (unsigned i = 0; i < n_old; i++)
				rb_serve_member_destroy(old[i]);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		/* The age limit is checked each second at least; a deferred make at its time. */
		uint64_t next = t + 1000;
		struct pair_state *ps = wanting(p, t, &next);
		if (!ps) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			uint64_t ns = (uint64_t)until.tv_nsec + (next - t) * 1000000u;
			until.tv_sec += (time_t)(ns / 1000000000u);
			until.tv_nsec = (long)(ns % 1000000000u);
			pthread_cond_timedwait(&p->wake, &p->lock, &until);
			continue;
		}
		struct rb_serve_pool_pair pair = ps->pair;
		pthread_mutex_unlock(&p->lock);
		struct rb_error err;
		rb_error_clear(&err);
		struct sv_session *m = rb_serve_member_make(p->sv, pair.image, pair.policy, &err);
		pthread_mutex_lock(&p->lock);
		if (!m) {
			/* Not repaired, not retried at once: the pair waits 1 s, doubled after each
			 * failure in a row up to a minute (a policy that cannot start would otherwise
			 * spin, and fill the log). */
			ps->failed++;
			unsigned shift = ps->failing < 6 ? ps->failing : 6;
			ps->failing++;
			ps->retry_at_ms = (rb_now_us() / 1000u) + (1000u << shift > 60000u ? 60000u : 1000u << shift);
			rb_warn("serve: pool %s:%s: %s (retried in %u s)", pair.image, pair.policy, err.msg,
			        (1000u << shift > 60000u ? 60000u : 1000u << shift) / 1000u);
			continue;
		}
		if (p->stop || ps->n_ready >= ps->pair.size) {
			pthread_mutex_unlock(&p->lock);
			rb_serve_member_destroy(m);
			pthread_mutex_lock(&p->lock);
			continue;
		}
		ps->ready[ps->n_ready++] = (struct member){m, (rb_now_us() / 1000u)};
		ps->made++;
		ps->failing = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int rb_serve_pool_start(struct rb_serve *sv, const struct rb_serve_pool_pair *pairs, unsigned n, uint64_t max_age_ms,
                        struct rb_serve_pool **out, struct rb_error *err)
{
	*out = NULL;
	struct rb_serve_pool *p = calloc(1, sizeof *p);
	if (!p || !(p->pairs = calloc(n ? n : 1, sizeof *p->pairs))) {
		free(p);
		return rb_error_set(err, ENOMEM, "serve: pool");
	}
	p->sv = sv;
	p->n_pairs = n;
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->wake, &ca);
	pthread_condattr_destroy(&ca);
	p->max_age_ms = max_age_ms ? max_age_ms : RB_SERVE_POOL_MAX_AGE_MS;
	for (unsigned i = 0; i < n; i++) {
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(pairs[i].image, pairs[j].image) && !strcmp(pairs[i].policy, pairs[j].policy)) {
				rb_serve_pool_stop(p);
				return rb_error_setk(err, RB_ERR_INPUT, 0, "--pool %s:%s: given twice", pairs[i].image,
				                     pairs[i].policy);
			}
		p->pairs[i].pair = pairs[i];
		p->pairs[i].ready = calloc(pairs[i].size, sizeof *p->pairs[i].ready);
		if (!p->pairs[i].ready) {
			rb_serve_pool_stop(p);
			return rb_error_set(err, ENOMEM, "serve: pool");
		}
	}
	int e = pthread_create(&p->thread, NULL, refill, p);
	if (e) {
		rb_serve_pool_stop(p);
		return rb_error_set(err, e, "serve: the pool's refill thread");
	}
	p->running = true;
	*out = p;
	return 0;
}

void rb_serve_pool_stop(struct rb_serve_pool *p)
{
	if (!p)
		return;
	if (p->running) {
		pthread_mutex_lock(&p->lock);
		p->stop = true;
		pthread_cond_broadcast(&p->wake);
		pthread_mutex_unlock(&p->lock);
		pthread_join(p->thread, NULL);
	}
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->lock);
	for (unsigned i = 0; i < p->n_pairs; i++) {
		for (unsigned j = 0; j < p->pairs[i].n_ready; j++)
			rb_serve_member_destroy(p->pairs[i].ready[j].m);
		free(p->pairs[i].ready);
	}
	free(p->pairs);
	free(p);
}

struct sv_session *rb_serve_pool_claim(struct rb_serve_pool *p, const char *image, const char *policy, uint64_t *age_ms)
{
	if (!p)
		return NULL;
	struct sv_session *dead[8], *got = NULL;
	unsigned n_dead = 0;
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->n_pairs && !got; i++) {
		struct pair_state *ps = &p->pairs[i];
		if (strcmp(ps->pair.image, image) != 0 || strcmp(ps->pair.policy, policy) != 0)
			continue;
		/* Oldest first: every member is handed out once and leaves the pool here. */
		while (ps->n_ready && !got) {
			struct member mb = ps->ready[0];
			memmove(ps->ready, ps->ready + 1, --ps->n_ready * sizeof *ps->ready);
			if (!rb_serve_member_alive(mb.m)) {
				ps->failed++;
				if (n_dead < 8)
					dead[n_dead++] = mb.m;
				else
					ps->ready[ps->n_ready++] = mb; /* destroyed at a later claim */
				continue;
			}
			got = mb.m;
			uint64_t t = (rb_now_us() / 1000u);
			*age_ms = t - mb.born_ms;
			ps->claimed++;
			/* Its refill waits until the claimed session has started its first command
			 * (a make is ~2 cores' worth of work for tens of ms, beside it). Set by the
			 * first claim of a burst only, so claims at any rate never push it further. */
			if (ps->refill_at_ms <= t)
				ps->refill_at_ms = t + RB_SERVE_POOL_REFILL_DELAY_MS;
		}
	}
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->lock);
	for (unsigned i = 0; i < n_dead; i++)
		rb_serve_member_destroy(dead[i]);
	return got;
}

json_t *rb_serve_pool_json(struct rb_serve_pool *p)
{
	json_t *a = json_array();
	if (!p)
		return a;
	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->n_pairs; i++) {
		const struct pair_state *ps = &p->pairs[i];
		json_array_append_new(a, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "image", ps->pair.image,
		                                   "policy", ps->pair.policy, "size", (json_int_t)ps->pair.size,
		                                   "ready", (json_int_t)ps->n_ready, "made", (json_int_t)ps->made,
		                                   "claimed", (json_int_t)ps->claimed, "failed", (json_int_t)ps->failed,
		                                   "expired", (json_int_t)ps->expired));
	}
	pthread_mutex_unlock(&p->lock);
	return a;
}

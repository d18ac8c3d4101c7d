/* How many calls each tenant has in flight on the daemon's TCP listeners, bounded per tenant
 * (--max-calls-per-tenant), so one tenant's open streams and slow bodies cannot take every
 * connection the daemon serves (libmicrohttpd's limit is the daemon's, not a tenant's). */
#ifndef RB_SERVE_INFLIGHT_H
#define RB_SERVE_INFLIGHT_H

#include "common/error.h"

/* The default bound: a quarter of the listener's 512 connections. */
#define RB_SERVE_MAX_CALLS_PER_TENANT 128u

struct rb_serve_inflight;

/* max 0: RB_SERVE_MAX_CALLS_PER_TENANT. NULL when out of memory. */
struct rb_serve_inflight *rb_serve_inflight_new(unsigned max);
void rb_serve_inflight_free(struct rb_serve_inflight *t);
/* 0 when tenant may have one more call in flight (it then holds it until rb_serve_inflight_put),
 * else 429 (or 500 out of memory) with err saying the bound. */
unsigned rb_serve_inflight_take(struct rb_serve_inflight *t, const char *tenant, struct rb_error *err);
void rb_serve_inflight_put(struct rb_serve_inflight *t, const char *tenant);

#endif

/* runbox serve's warm pool (pool.c): sandboxes made ahead per (image, policy) pair the operator
 * named, each holding nothing of an owner until a create claims it (SPEC "runbox serve"). */
#ifndef RB_SERVE_POOL_H
#define RB_SERVE_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "serve/serve.h"

struct sv_session;
struct rb_serve_pool;

/* Starts the refill thread, which makes members until each pair holds its size, outside every
 * lock of the session table; after a claim, not before RB_SERVE_POOL_REFILL_DELAY_MS. A member older than max_age_ms
 * (0: RB_SERVE_POOL_MAX_AGE_MS) is destroyed and replaced, never reused. */
int rb_serve_pool_start(struct rb_serve *sv, const struct rb_serve_pool_pair *pairs, unsigned n, uint64_t max_age_ms,
                        struct rb_serve_pool **out, struct rb_error *err);
/* Stops the thread and destroys every member not claimed. */
void rb_serve_pool_stop(struct rb_serve_pool *p);
/* A ready member of (image, policy), taken out of the pool for good (its pair is refilled), or
 * NULL when the pair is not pooled or none is ready; *age_ms: how long it waited. A member
 * whose sandbox died meanwhile is destroyed, not handed out. */
struct sv_session *rb_serve_pool_claim(struct rb_serve_pool *p, const char *image, const char *policy,
                                       uint64_t *age_ms);
/* [{image, policy, size, ready, made, claimed, failed, expired}] */
json_t *rb_serve_pool_json(struct rb_serve_pool *p);

/* The members themselves, made and destroyed by sessions.c: an unbound run with its session
 * open and its sandbox ready, no session id, no record, no env. */
struct sv_session *rb_serve_member_make(struct rb_serve *sv, const char *image, const char *policy,
                                        struct rb_error *err);
void rb_serve_member_destroy(struct sv_session *m);
/* Its init still runs. */
bool rb_serve_member_alive(const struct sv_session *m);

#define RB_SERVE_POOL_MAX_AGE_MS (10ull * 60 * 1000)
/* How long a claim's refill waits: the claimed session's create and first command run
 * without a member being made beside them, competing for the same cores. */
#define RB_SERVE_POOL_REFILL_DELAY_MS 100u

#endif

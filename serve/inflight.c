/* The tenants' calls in flight (inflight.h): a small table under a lock, a row per tenant
 * with a call open, gone when its last call ends. */
#include "serve/inflight.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct row {
	char *tenant;
	unsigned n;
};

struct rb_serve_inflight {
	pthread_mutex_t lock;
	unsigned max;
	struct row *rows;
	size_t n_rows, cap;
};

struct rb_serve_inflight *rb_serve_inflight_new(unsigned max)
{
	struct rb_serve_inflight *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	pthread_mutex_init(&t->lock, NULL);
	t->max = max ? max : RB_SERVE_MAX_CALLS_PER_TENANT;
	return t;
}

void rb_serve_inflight_free(struct rb_serve_inflight *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n_rows; i++)
		free(t->rows[i].tenant);
	free(t->rows);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static struct row *find(struct rb_serve_inflight *t, const char *tenant)
{
	for (size_t i = 0; i < t->n_rows; i++)
		if (!strcmp(t->rows[i].tenant, tenant))
			return &t->rows[i];
	return NULL;
}

unsigned rb_serve_inflight_take(struct rb_serve_inflight *t, const char *tenant, struct rb_error *err)
{
	unsigned st = 0;
	pthread_mutex_lock(&t->lock);
	struct row *r = find(t, tenant);
	if (!r) {
		if (t->n_rows == t->cap) {
			size_t cap = t->cap ? 2 * t->cap : 8;
			struct row *nr = realloc(t->rows, cap * sizeof *nr);
			if (!nr)
				goto oom;
			t->rows = nr;
			t->cap = cap;
		}
		char *name = strdup(tenant);
		if (!name)
			goto oom;
		r = &t->rows[t->n_rows++];
		*r = (struct row){name, 0};
	}
	if (r->n >= t->max) {
		rb_error_set(err, 0, "tenant `%s` has %u calls in flight already (--max-calls-per-tenant %u)", tenant,
		             r->n, t->max);
		st = 429;
	} else {
		r->n++;
	}
	pthread_mutex_unlock(&t->lock);
	return st;
oom:
	pthread_mutex_unlock(&t->lock);
	rb_error_set(err, ENOMEM, "calls in flight");
	return 500;
}

void rb_serve_inflight_put(struct rb_serve_inflight *t, const char *tenant)
{
	pthread_mutex_lock(&t->lock);
	struct row *r = find(t, tenant);
	if (r && r->n > 0 && --r->n == 0) {
		free(r->tenant);
		*r = t->rows[--t->n_rows];
	}
	pthread_mutex_unlock(&t->lock);
}

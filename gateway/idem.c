/* The run's idempotency table (see idem.h): claims, states, and the request digests. */
#define OPENSSL_SUPPRESS_DEPRECATED /* SHA256_*: no provider lookup (tests/integration/build.sh) */
#include "gateway/idem.h"

#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rb_idem_init(struct rb_idem *t)
{
	memset(t, 0, sizeof *t);
	pthread_mutex_init(&t->lock, NULL);
}

void rb_idem_destroy(struct rb_idem *t)
{
	for (unsigned i = 0; i < t->n; i++) {
		json_decref(t->e[i]->headers);
		free(t->e[i]->body);
		free(t->e[i]);
	}
	pthread_mutex_destroy(&t->lock);
}

void rb_idem_hash(const char *const *parts, const size_t *lens, unsigned n, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256_CTX c;
	SHA256_Init(&c);
	for (unsigned i = 0; i < n; i++) {
		SHA256_Update(&c, parts[i], lens[i]);
		SHA256_Update(&c, "", 1); /* a separator no part can fake: lengths are not in the data */
		char l[24];
		int ll = snprintf(l, sizeof l, "%zu", lens[i]);
		SHA256_Update(&c, l, (size_t)ll + 1);
	}
	SHA256_Final(md, &c);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + (size_t)2 * i, 3, "%02x", md[i]);
}

enum rb_idem_claim rb_idem_claim(struct rb_idem *t, const char *key, const char *digest, enum rb_idem_state state,
                                 struct rb_idem_entry **out)
{
	enum rb_idem_claim r;
	*out = NULL;
	pthread_mutex_lock(&t->lock);
	struct rb_idem_entry *e = NULL;
	for (unsigned i = 0; i < t->n && !e; i++)
		if (!strcmp(t->e[i]->key, key))
			e = t->e[i];
	if (e && !e->key[0])
		e = NULL;
	if (!e) {
		/* a forgotten entry's slot first */
		for (unsigned i = 0; i < t->n && !e; i++)
			if (!t->e[i]->key[0])
				e = t->e[i];
		if (!e && t->n < RB_IDEM_MAX && (e = calloc(1, sizeof *e)))
			t->e[t->n++] = e;
		if (!e) {
			pthread_mutex_unlock(&t->lock);
			return RB_IDEM_FULL;
		}
		snprintf(e->key, sizeof e->key, "%s", key);
		snprintf(e->digest, sizeof e->digest, "%s", digest);
		e->state = state;
		*out = e;
		pthread_mutex_unlock(&t->lock);
		return RB_IDEM_NEW;
	}
	*out = e;
	if (strcmp(e->digest, digest) != 0)
		r = RB_IDEM_MISMATCH;
	else if (e->state == RB_IDEM_IN_FLIGHT || e->state == RB_IDEM_PENDING)
		r = RB_IDEM_BUSY;
	else if (e->state == RB_IDEM_DENIED)
		r = RB_IDEM_REFUSED;
	else if (e->state == RB_IDEM_UNKNOWN || e->too_big)
		r = RB_IDEM_LOST;
	else
		r = RB_IDEM_REPLAY;
	pthread_mutex_unlock(&t->lock);
	return r;
}

void rb_idem_set(struct rb_idem *t, struct rb_idem_entry *e, enum rb_idem_state state)
{
	pthread_mutex_lock(&t->lock);
	e->state = state;
	pthread_mutex_unlock(&t->lock);
}

/* Caller holds t->lock. */
static void drop_body(struct rb_idem *t, struct rb_idem_entry *e)
{
	t->bytes -= e->len;
	free(e->body);
	e->body = NULL;
	e->len = 0;
}

void rb_idem_keep(struct rb_idem *t, struct rb_idem_entry *e, const char *p, size_t n)
{
	pthread_mutex_lock(&t->lock);
	char *b = NULL;
	if (!e->too_big && n && e->len + n <= RB_IDEM_BODY_MAX && t->bytes + n <= RB_IDEM_BYTES_MAX &&
	    (b = realloc(e->body, e->len + n))) {
		memcpy(b + e->len, p, n);
		e->body = b;
		e->len += n;
		t->bytes += n;
	} else if (n && !e->too_big) {
		e->too_big = true;
		drop_body(t, e);
	}
	pthread_mutex_unlock(&t->lock);
}

void rb_idem_forget(struct rb_idem *t, struct rb_idem_entry *e)
{
	pthread_mutex_lock(&t->lock);
	e->key[0] = '\0';
	json_decref(e->headers);
	e->headers = NULL;
	drop_body(t, e);
	e->too_big = false;
	pthread_mutex_unlock(&t->lock);
}

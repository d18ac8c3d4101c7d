/* Idempotent retries and held calls, one table per run: a connector call with an
 * Idempotency-Key (or, when the policy holds it for approval, a key derived from its digest)
 * claims its key; a retry with the same key and payload gets the recorded answer without a
 * second upstream call, another payload 422, a retry while the first is in flight or held 409,
 * one whose first was denied 403, one whose first was sent and lost (outcome unknown) 409. */
#ifndef RB_GATEWAY_IDEM_H
#define RB_GATEWAY_IDEM_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define RB_IDEM_MAX       256                     /* keys per run */
#define RB_IDEM_BODY_MAX  ((size_t)1024 * 1024)   /* an answer kept for replay, at most */
#define RB_IDEM_BYTES_MAX (16 * RB_IDEM_BODY_MAX) /* the answers kept for one run, in all */

enum rb_idem_state {
	RB_IDEM_IN_FLIGHT, /* sent (or about to be); its answer not complete */
	RB_IDEM_PENDING,   /* held for approval */
	RB_IDEM_DENIED,    /* its approval was denied or timed out */
	RB_IDEM_DONE,      /* answered: the recorded answer replays */
	RB_IDEM_UNKNOWN,   /* sent, and the answer was lost: never sent again */
};

struct rb_idem_entry {
	char key[65];    /* sha256 hex of connector NUL key */
	char digest[65]; /* sha256 hex of the normalized request */
	enum rb_idem_state state;
	char approval[40]; /* the approval's id, when held */
	/* DONE: the answer as the client got it (headers scrubbed, body scrubbed), immutable */
	unsigned status;
	json_t *headers; /* [[name, value], ...] */
	char *body;
	size_t len;
	bool too_big; /* the answer was over RB_IDEM_BODY_MAX, or the run's kept answers over
	               * RB_IDEM_BYTES_MAX: not kept, a retry gets 409 */
};

struct rb_idem {
	pthread_mutex_t lock;
	struct rb_idem_entry *e[RB_IDEM_MAX];
	unsigned n;
	size_t bytes; /* of the entries' bodies */
};

enum rb_idem_claim {
	RB_IDEM_NEW,      /* the caller owns the new entry (*out) and makes the call */
	RB_IDEM_REPLAY,   /* *out is DONE: answer with it */
	RB_IDEM_MISMATCH, /* 422 */
	RB_IDEM_BUSY,     /* 409: in flight or held (*out's approval says which) */
	RB_IDEM_REFUSED,  /* 403: its approval was denied */
	RB_IDEM_LOST,     /* 409: sent, outcome unknown, or its answer was too big to keep */
	RB_IDEM_FULL,     /* 429: no room for another key */
};

void rb_idem_init(struct rb_idem *t);
void rb_idem_destroy(struct rb_idem *t);
/* key: sha256 hex of connector and the client's key; digest of the request. A new entry starts
 * in state (IN_FLIGHT or PENDING). *out is valid until rb_idem_destroy (entries are never freed
 * before, only reset by rb_idem_forget, which only the owner calls). */
enum rb_idem_claim rb_idem_claim(struct rb_idem *t, const char *key, const char *digest, enum rb_idem_state state,
                                 struct rb_idem_entry **out);
void rb_idem_set(struct rb_idem *t, struct rb_idem_entry *e, enum rb_idem_state state);
/* n more bytes of e's answer, kept for a replay within both bounds; past either, the answer is
 * not kept at all (too_big). Only e's owner calls it. */
void rb_idem_keep(struct rb_idem *t, struct rb_idem_entry *e, const char *p, size_t n);
/* The call never left (no connection): the key is free again for a retry to send. */
void rb_idem_forget(struct rb_idem *t, struct rb_idem_entry *e);
/* sha256 hex of the NUL-separated parts. */
void rb_idem_hash(const char *const *parts, const size_t *lens, unsigned n, char out[65]);

#endif

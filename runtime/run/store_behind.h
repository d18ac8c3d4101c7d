/* A file stored behind the harvest's walk, on a thread of its own: scrubbed there too when the
 * scrubber may run on two threads at once, then rb_artifact_store (SHA-256 and the write), so
 * that the walk reads and scrubs the next file meanwhile. One file at a time. */
#ifndef RB_STORE_BEHIND_H
#define RB_STORE_BEHIND_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "runtime/run/artifacts.h"
#include "runtime/run/harvest.h"

struct rb_store_behind {
	bool running; /* a thread works; rb_store_behind_wait joins it */
	pthread_t thread;
	const char *store_dir;
	rb_harvest_scrub_fn scrub; /* NULL: the bytes are stored as given */
	void *scrub_ctx;
	char *bytes; /* owned: as given, or once scrubbed with a redaction, the scrubbed copy */
	size_t len;
	char *read; /* owned: the bytes as given, when bytes is their scrubbed copy */
	/* once waited for */
	json_t *redactions; /* owned: what scrub returned */
	bool scrub_failed;  /* then nothing was stored; err says why */
	int r;              /* 0, or -1 with err: not scrubbed, or not stored */
	char digest[RB_ARTIFACT_DIGEST_LEN];
	bool created;
	struct rb_error err;
};

/* Takes bytes (malloc'd, len of them), scrubs them with scrub (when not NULL: it must allow
 * calls from two threads at once) and stores the result into store_dir, on a new thread with
 * every signal blocked. Where no thread can be made, does it here and now. sb must not be
 * running; it is the caller's again once waited for. */
void rb_store_behind_start(struct rb_store_behind *sb, const char *store_dir, rb_harvest_scrub_fn scrub,
                           void *scrub_ctx, char *bytes, size_t len);

/* True while the thread still works (never blocks). */
bool rb_store_behind_busy(struct rb_store_behind *sb);

/* Joins the thread if one runs; then the outcome fields hold. */
void rb_store_behind_wait(struct rb_store_behind *sb);

/* Frees what sb still owns (waiting first); sb may be started again. */
void rb_store_behind_clear(struct rb_store_behind *sb);

#endif

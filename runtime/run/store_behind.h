/* An object stored behind the caller: rb_artifact_store (SHA-256 and the write) on a thread of
 * its own, so that the harvest reads and scrubs the next file meanwhile. One object at a time. */
#ifndef RB_STORE_BEHIND_H
#define RB_STORE_BEHIND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "runtime/run/artifacts.h"

struct rb_store_behind {
	bool running; /* a thread is storing; rb_store_behind_wait joins it */
	pthread_t thread;
	const char *store_dir;
	char *bytes; /* owned from start to rb_store_behind_clear: the object's content */
	size_t len;
	/* once waited for: rb_artifact_store's return, and what it filled */
	int r;
	char digest[RB_ARTIFACT_DIGEST_LEN];
	bool created;
	struct rb_error err;
};

/* Takes bytes (malloc'd, len of them: freed by rb_store_behind_clear) and stores them into
 * store_dir on a new thread, every signal blocked there. Where no thread can be made, stores
 * them here and now. sb must not be running; it is the caller's until waited for. */
void rb_store_behind_start(struct rb_store_behind *sb, const char *store_dir, char *bytes, size_t len);

/* Joins the thread if one runs; then r, digest, created and err hold the outcome. */
void rb_store_behind_wait(struct rb_store_behind *sb);

/* Frees the bytes (waiting first); sb may be started again. */
void rb_store_behind_clear(struct rb_store_behind *sb);

#endif

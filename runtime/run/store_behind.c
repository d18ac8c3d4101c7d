/* A file scrubbed and stored on a thread of its own (store_behind.h). The bytes are the
 * caller's private copy, never a mapping of the sandbox's file: what is scrubbed is what is
 * hashed and written, whatever the sandbox does to the file meanwhile. */
#define _GNU_SOURCE
#include "runtime/run/store_behind.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg)
{
	struct rb_store_behind *sb = arg;
	if (sb->scrub) {
		char *out = NULL;
		size_t out_len = 0;
		if (sb->scrub(sb->scrub_ctx, sb->bytes, sb->len, &out, &out_len, &sb->redactions, &sb->err) < 0) {
			free(out);
			sb->scrub_failed = true;
			sb->r = -1;
			return NULL;
		}
		if (out) {
			sb->read = sb->bytes;
			sb->bytes = out;
			sb->len = out_len;
		}
	}
	sb->r = rb_artifact_store(sb->store_dir, sb->bytes, sb->len, sb->digest, &sb->created, &sb->err);
	return NULL;
}

void rb_store_behind_start(struct rb_store_behind *sb, const char *store_dir, rb_harvest_scrub_fn scrub,
                           void *scrub_ctx, char *bytes, size_t len)
{
	*sb = (struct rb_store_behind){
	    .store_dir = store_dir, .scrub = scrub, .scrub_ctx = scrub_ctx, .bytes = bytes, .len = len};
	/* Signals stay the caller's: the thread starts with all of them blocked. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	sb->running = pthread_create(&sb->thread, NULL, work, sb) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!sb->running)
		work(sb);
}

bool rb_store_behind_busy(struct rb_store_behind *sb)
{
	if (sb->running && pthread_tryjoin_np(sb->thread, NULL) == 0)
		sb->running = false;
	return sb->running;
}

void rb_store_behind_wait(struct rb_store_behind *sb)
{
	if (!sb->running)
		return;
	pthread_join(sb->thread, NULL);
	sb->running = false;
}

void rb_store_behind_clear(struct rb_store_behind *sb)
{
	rb_store_behind_wait(sb);
	free(sb->bytes);
	free(sb->read);
	json_decref(sb->redactions);
	sb->bytes = sb->read = NULL;
	sb->redactions = NULL;
}

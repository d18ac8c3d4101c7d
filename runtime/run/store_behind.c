/* rb_artifact_store on a thread of its own (store_behind.h). The bytes are the caller's
 * private copy, never a mapping of the sandbox's file: what is hashed is what is written. */
#include "runtime/run/store_behind.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static void *store(void *arg)
{
	struct rb_store_behind *sb = arg;
	sb->r = rb_artifact_store(sb->store_dir, sb->bytes, sb->len, sb->digest, &sb->created, &sb->err);
	return NULL;
}

void rb_store_behind_start(struct rb_store_behind *sb, const char *store_dir, char *bytes, size_t len)
{
	*sb = (struct rb_store_behind){.store_dir = store_dir, .bytes = bytes, .len = len};
	/* Signals stay the caller's: the thread starts with all of them blocked. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	sb->running = pthread_create(&sb->thread, NULL, store, sb) == 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!sb->running)
		store(sb);
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
	sb->bytes = NULL;
}

/* scrub/scrub.c builds its exact-secret automaton at the first input that may hold a pattern,
 * not when the scrubber is made: a scrubber used first by several threads at once gives each
 * the same redactions, and a stream whose first chunks hold nothing of a secret still catches
 * one split across its later chunks at every cut (a run token; a secret with spaces, whose start
 * only the automaton holds back). Controls: a scrubber without the secret
 * leaves it in, so the checks see a miss. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrub/scrub.h"

/* A run token's shape: long, base64url between dots. */
static const char TOKEN[] = "rbx1.eyJhZ2VudCI6ImFnZW50LTEiLCJleHAiOjE3OTk5OTk5OTksIm5vbmNlIjoiMDEyMzQ1Njc4OWFiY2RlZj"
                            "AxMjM0NTY3ODlhYmNkZWYiLCJydW4iOiIwMWEyMzdjZWU1ZmVlZjY0M2I5ZiIsInRlbmFudCI6ImRlZmF1bHQifQ"
                            ".Qm9ndXNNQUNmb3JUaGVUZXN0T25seV9fX19fX19fX19fX19fX18";

/* A policy secret with spaces: the stream's hold of a trailing token (no match spans a
 * space) does not cover its start, only the automaton's pending bytes do. */
static const char PASSPHRASE[] = "correct horse battery staple 1729";

static struct rb_scrubber *with_token(bool token)
{
	struct rb_scrub_secret sec[] = {{"run-token", TOKEN, strlen(TOKEN)},
	                                {"policy.PASSPHRASE", PASSPHRASE, strlen(PASSPHRASE)}};
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new_labeled(sec, token ? 2 : 0, &s, &err), 0);
	return s;
}

/* The token raw and hex-encoded (upper case) amid prose. */
static char *text_with_token(void)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(TOKEN);
	char *t = malloc(4 * n + 256);
	int k = sprintf(t, "build ok\nexport T=%s\nbody: ", TOKEN);
	for (size_t i = 0; i < n; i++) {
		t[k++] = hex[(unsigned char)TOKEN[i] >> 4];
		t[k++] = hex[(unsigned char)TOKEN[i] & 15];
	}
	memcpy(t + k, " done\n", sizeof " done\n");
	return t;
}

struct job {
	struct rb_scrubber *s;
	const char *in;
	struct rb_buf_out out;
	struct rb_scrub_counts c;
	int rc;
};

static void *scrub_job(void *arg)
{
	struct job *j = arg;
	struct rb_error err = {0};
	j->rc = rb_scrub_buffer(j->s, j->in, strlen(j->in), &j->out, &j->c, &err);
	return NULL;
}

#define THREADS 4

static void test_concurrent_first_use(void **state)
{
	char *text = text_with_token();
	struct rb_scrubber *ref_s = with_token(true);
	struct job ref = {.s = ref_s, .in = text};
	scrub_job(&ref);
	assert_int_equal(ref.rc, 0);
	assert_int_equal(ref.c.total, 2);
	assert_null(strstr(ref.out.data, TOKEN));
	assert_non_null(strstr(ref.out.data, "[REDACTED:exact:run-token:raw]"));
	assert_non_null(strstr(ref.out.data, "[REDACTED:exact:run-token:hex]"));
	/* control: without the secret, the token stays */
	struct rb_scrubber *none = with_token(false);
	struct job ctl = {.s = none, .in = text};
	scrub_job(&ctl);
	assert_int_equal(ctl.rc, 0);
	assert_non_null(strstr(ctl.out.data, TOKEN));
	free(ctl.out.data);
	rb_scrub_free(none);

	for (int round = 0; round < 20; round++) {
		struct rb_scrubber *s = with_token(true); /* fresh: its automaton not built yet */
		struct job jobs[THREADS];
		pthread_t th[THREADS];
		for (int i = 0; i < THREADS; i++) {
			jobs[i] = (struct job){.s = s, .in = text};
			assert_int_equal(pthread_create(&th[i], NULL, scrub_job, &jobs[i]), 0);
		}
		for (int i = 0; i < THREADS; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(jobs[i].rc, 0);
			assert_int_equal(jobs[i].out.len, ref.out.len);
			assert_memory_equal(jobs[i].out.data, ref.out.data, ref.out.len);
			assert_int_equal(jobs[i].c.total, 2);
			free(jobs[i].out.data);
		}
		rb_scrub_free(s);
	}
	free(ref.out.data);
	rb_scrub_free(ref_s);
	free(text);
}

/* Feeds "quiet" chunks first, then head and tail of secret: the whole output. */
static char *stream_split(struct rb_scrubber *s, const char *secret, size_t cut)
{
	static const char *const quiet[] = {"hi\n", "ok ", "\n"};
	struct rb_scrub_stream *st = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_stream_new(s, &st, &err), 0);
	size_t n = strlen(secret), al = 0;
	char *acc = malloc(2 * n + 256);
	struct rb_buf_out o;
	const char *parts[] = {quiet[0], quiet[1], quiet[2], secret, secret + cut, " end\n"};
	const size_t lens[] = {3, 3, 1, cut, n - cut, 5};
	for (size_t k = 0; k < 6; k++) {
		assert_int_equal(rb_scrub_stream_feed(st, parts[k], lens[k], &o, &err), 0);
		memcpy(acc + al, o.data ? o.data : "", o.len);
		al += o.len;
		free(o.data);
	}
	assert_int_equal(rb_scrub_stream_finish(st, &o, &err), 0);
	memcpy(acc + al, o.data ? o.data : "", o.len);
	al += o.len;
	free(o.data);
	acc[al] = '\0';
	rb_scrub_stream_free(st);
	return acc;
}

static void test_stream_quiet_start(void **state)
{
	static const struct {
		const char *secret, *out;
	} cases[] = {{TOKEN, "hi\nok \n[REDACTED:exact:run-token:raw] end\n"},
	             {PASSPHRASE, "hi\nok \n[REDACTED:exact:policy.PASSPHRASE:raw] end\n"}};
	for (size_t k = 0; k < 2; k++) {
		for (size_t cut = 1; cut < strlen(cases[k].secret); cut++) {
			struct rb_scrubber *s = with_token(true); /* fresh for each cut */
			char *out = stream_split(s, cases[k].secret, cut);
			assert_string_equal(out, cases[k].out);
			free(out);
			rb_scrub_free(s);
		}
		/* control: without the secrets, the secret comes out whole */
		struct rb_scrubber *none = with_token(false);
		char *out = stream_split(none, cases[k].secret, 10);
		assert_non_null(strstr(out, cases[k].secret));
		free(out);
		rb_scrub_free(none);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_concurrent_first_use),
	    cmocka_unit_test(test_stream_quiet_start),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

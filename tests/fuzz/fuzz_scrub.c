/* Fuzz target: the scrubber (rb_scrub_new_labeled, rb_scrub_buffer). The input holds up to
 * three exact secrets, then the text: scrubbing any bytes never reads out of bounds (ASan),
 * the output is NUL-terminated, and no registered secret is left in it outside a redaction
 * marker. Layout: byte 0 % 4 secrets, each one length byte (8 + b % 40) and its bytes. */
#define _GNU_SOURCE
#include "common/error.h"
#include "scrub/scrub.h"
#include "tests/fuzz/fuzz.h"

#define MARK "[REDACTED:"

/* Does out[at..at+len) overlap a "[REDACTED:...]" marker? Text that only looks like a marker
 * counts too: a conservative property, never a false alarm. */
static int in_marker(const char *out, size_t out_len, size_t at, size_t len)
{
	const char *p = out, *end = out + out_len;
	while ((p = memmem(p, (size_t)(end - p), MARK, strlen(MARK)))) {
		const char *close = memchr(p, ']', (size_t)(end - p));
		size_t s = (size_t)(p - out), e = close ? (size_t)(close - out) + 1 : out_len;
		if (s < at + len && at < e)
			return 1;
		if (s >= at + len)
			return 0;
		p++;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	struct rb_scrub_secret secrets[3];
	size_t n = data[0] % 4, at = 1;
	for (size_t i = 0; i < n; i++) {
		if (at >= size)
			return 0;
		size_t len = 8 + data[at++] % 40;
		if (len > size - at)
			return 0;
		secrets[i] = (struct rb_scrub_secret){.label = "fuzz", .value = data + at, .len = len};
		at += len;
	}
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	if (rb_scrub_new_labeled(secrets, n, &s, &err) != 0)
		FUZZ_FAIL("rb_scrub_new_labeled refused %zu secrets of 8+ bytes: %s", n, err.msg);
	/* The text in an exact-size buffer of its own, so a read past it is caught. */
	size_t tlen = size - at;
	char *text = malloc(tlen ? tlen : 1);
	if (!text) {
		rb_scrub_free(s);
		return 0;
	}
	memcpy(text, data + at, tlen);
	struct rb_buf_out out = {0};
	struct rb_scrub_counts counts;
	if (rb_scrub_buffer(s, text, tlen, &out, &counts, &err) != 0)
		FUZZ_FAIL("rb_scrub_buffer failed: %s", err.msg);
	if (!out.data || out.data[out.len] != '\0')
		FUZZ_FAIL("the scrubbed copy is not NUL-terminated");
	for (size_t i = 0; i < n; i++) {
		const char *p = out.data, *end = out.data + out.len;
		while ((p = memmem(p, (size_t)(end - p), secrets[i].value, secrets[i].len))) {
			if (!in_marker(out.data, out.len, (size_t)(p - out.data), secrets[i].len))
				FUZZ_FAIL("secret %zu (%zu bytes) left in the output at %zu", i, secrets[i].len,
				          (size_t)(p - out.data));
			p++;
		}
	}
	if (counts.total < counts.overflow)
		FUZZ_FAIL("counts: total %llu below overflow %llu", (unsigned long long)counts.total,
		          (unsigned long long)counts.overflow);
	free(out.data);
	free(text);
	rb_scrub_free(s);
	return 0;
}

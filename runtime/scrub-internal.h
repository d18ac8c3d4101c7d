/* What runtime/scrub.c (exact pass, merging, output), runtime/scrub_rules.c (format and
 * keyword passes) and runtime/scrub_stream.c (streams) share: the span list every pass
 * appends to, rule ids, byte classes, the passes and the output. */
#ifndef RB_SCRUB_INTERNAL_H
#define RB_SCRUB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runtime/scrub.h"

/* Rule ids: the format rules, then generic-secret, then the exact rules of a scrubber. */
enum rb_scrub_rule_id {
	RB_SR_AWS_KEY_ID,
	RB_SR_GITHUB_PAT,
	RB_SR_GITHUB_OAUTH,
	RB_SR_GITHUB_APP,
	RB_SR_GITHUB_REFRESH,
	RB_SR_GITHUB_FINE_GRAINED,
	RB_SR_GITLAB_PAT,
	RB_SR_GITLAB_DEPLOY,
	RB_SR_GITLAB_RUNNER,
	RB_SR_GITLAB_CI_BUILD,
	RB_SR_SLACK_TOKEN,
	RB_SR_SLACK_APP,
	RB_SR_SLACK_WEBHOOK,
	RB_SR_STRIPE,
	RB_SR_GCP_API_KEY,
	RB_SR_PRIVATE_KEY,
	RB_SR_JWT,
	RB_SR_ANTHROPIC,
	RB_SR_ANTHROPIC_ADMIN,
	RB_SR_OPENAI,
	RB_SR_NPM,
	RB_SR_PYPI,
	RB_SR_HUGGINGFACE,
	RB_SR_GENERIC,
	RB_SR_FIRST_EXACT
};

extern const char *const rb_scrub_rule_names[RB_SR_FIRST_EXACT];

/* Pass numbers: on a tie in length, the earlier pass names the merged redaction. */
enum { RB_SCRUB_PASS_EXACT, RB_SCRUB_PASS_FORMAT, RB_SCRUB_PASS_KEYWORD };

struct rb_scrub_span {
	size_t start, end; /* [start, end) in the input */
	uint32_t rule;
	uint32_t pass;
};

struct rb_scrub_spans {
	struct rb_scrub_span *v;
	size_t n, cap;
	bool oom; /* a push failed: the call fails rather than store a buffer half scrubbed */
};

/* Appends a span, skipping one that lies inside the previous span of the same pass. */
void rb_scrub_spans_push(struct rb_scrub_spans *sp, size_t start, size_t end, uint32_t rule, uint32_t pass);

/* The first position p >= i with p + 1 < len whose two bytes are set in the bigram bitmap
 * bm, or len. Both scanning passes spend most of their time here: eight positions per step
 * with one branch, so the loads and tests of a step run in parallel. */
static inline size_t rb_scrub_next_bigram(const uint64_t *bm, const unsigned char *in, size_t i, size_t len)
{
#define RB_BG_(k)                                                                                                      \
	((unsigned)(bm[(in[i + (k)] | (unsigned)in[i + (k) + 1] << 8) >> 6] >>                                         \
	            ((in[i + (k)] | (unsigned)in[i + (k) + 1] << 8) & 63)) &                                           \
	 1U) << (k)
	while (i + 9 <= len) {
		unsigned hit =
		    RB_BG_(0) | RB_BG_(1) | RB_BG_(2) | RB_BG_(3) | RB_BG_(4) | RB_BG_(5) | RB_BG_(6) | RB_BG_(7);
		if (hit)
			return i + (size_t)__builtin_ctz(hit);
		i += 8;
	}
#undef RB_BG_
	for (; i + 1 < len; i++) {
		unsigned b = in[i] | (unsigned)in[i + 1] << 8;
		if (bm[b >> 6] & (1ULL << (b & 63)))
			return i;
	}
	return len;
}

/* Tables of the format pass, built once per scrubber (no mutable globals). */
struct rb_scrub_rule_tables {
	uint64_t bigram[65536 / 64]; /* first two bytes of some prefix */
	uint8_t first[256][16];      /* prefixes (index + 1) starting with this byte, 0-terminated */
};

void rb_scrub_rules_init(struct rb_scrub_rule_tables *t);
/* Pass 2: prefix-anchored format rules. */
void rb_scrub_rules_scan(const struct rb_scrub_rule_tables *t, const unsigned char *in, size_t len,
                         struct rb_scrub_spans *sp);
/* Pass 3: keyword-anchored values of high entropy. */
void rb_scrub_keywords_scan(const unsigned char *in, size_t len, struct rb_scrub_spans *sp);
/* Shannon entropy in bits per byte. */
double rb_scrub_entropy(const unsigned char *s, size_t n);

/* The three passes over in[0..len): the merged redactions, sorted and disjoint, in
 * sp->v[0..*n). Returns 0, or -1 with err (out of memory). */
int rb_scrub_find_spans(const struct rb_scrubber *s, const unsigned char *in, size_t len, struct rb_scrub_spans *sp,
                        size_t *n, struct rb_error *err);
/* in[0..len) with the redactions v[0..n) (sorted, disjoint, within len) written in. */
int rb_scrub_render(const struct rb_scrubber *s, const unsigned char *in, size_t len, const struct rb_scrub_span *v,
                    size_t n, struct rb_buf_out *out, struct rb_scrub_counts *counts, struct rb_error *err);
/* How many bytes at the end of in[0..len) are the start of some exact pattern: what more
 * input could still complete into a match. */
size_t rb_scrub_exact_pending(const struct rb_scrubber *s, const unsigned char *in, size_t len);

#endif

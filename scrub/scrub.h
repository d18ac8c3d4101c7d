/* The secret scrubber: exact secrets in every encoding (one Aho-Corasick automaton), then
 * anchored format rules, then values after a key that names a secret; each match is
 * replaced by "[REDACTED:<rule>]". Whole-buffer API; docs/scrub.md lists every rule. */
#ifndef RB_SCRUB_H
#define RB_SCRUB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* Shorter exact secrets are refused: an 7-byte string occurs in ordinary text too often. */
#define RB_SCRUB_MIN_SECRET 8
/* Longest label of an exact secret ("run-token", "policy.GITHUB_TOKEN"). */
#define RB_SCRUB_LABEL_MAX 40
/* "exact:" + label + ":" + encoding + NUL fits. */
#define RB_SCRUB_RULE_MAX 64
/* Distinct rules one rb_scrub_counts can name; more land in `overflow`. */
#define RB_SCRUB_COUNTS_MAX 64

struct rb_scrubber;

/* An exact secret with the label its rule names carry: rule "exact:<label>:<encoding>".
 * label: [A-Za-z0-9_.-]{1,40}. value: any bytes (len of them). */
struct rb_scrub_secret {
	const char *label;
	const void *value;
	size_t len;
};

/* The scrubbed copy: malloc'd, NUL-terminated (data[len] == 0), freed by the caller with free(). */
struct rb_buf_out {
	char *data;
	size_t len;
};

struct rb_scrub_count {
	char rule[RB_SCRUB_RULE_MAX];
	uint64_t count;
};

/* Redactions of one rb_scrub_buffer call, by rule, in rule order (exact rules first). */
struct rb_scrub_counts {
	uint64_t total;    /* every redaction, overflow included */
	uint64_t overflow; /* redactions of rules past the first RB_SCRUB_COUNTS_MAX */
	size_t n;
	struct rb_scrub_count by_rule[RB_SCRUB_COUNTS_MAX];
};

/* Builds the matcher once per run. Each secret (NUL-terminated strings here) gets rule
 * label "secret". Secrets shorter than RB_SCRUB_MIN_SECRET bytes are refused. n_secrets may
 * be 0: then only the format and keyword rules apply. Returns 0, or -1 with err. */
int rb_scrub_new(const char *const *secrets, size_t n_secrets, struct rb_scrubber **out, struct rb_error *err);

/* The same with a label per secret (the run token as "run-token", policy values by name). */
int rb_scrub_new_labeled(const struct rb_scrub_secret *secrets, size_t n_secrets, struct rb_scrubber **out,
                         struct rb_error *err);

/* Scrubs in[0..len) (any bytes: binary input is scrubbed too, never read out of bounds)
 * into a new buffer *out. Overlapping matches merge into one redaction named after an
 * exact secret in it, else a format rule, else the longest match (docs/scrub.md). counts
 * (may be NULL) is reset, then filled. Returns 0, or -1 with err (out of memory); *out is
 * then {NULL, 0}. Thread-safe for concurrent calls on one scrubber. */
int rb_scrub_buffer(struct rb_scrubber *s, const char *in, size_t len, struct rb_buf_out *out,
                    struct rb_scrub_counts *counts, struct rb_error *err);

void rb_scrub_free(struct rb_scrubber *s);

/* Adds src's counts into dst (a run's totals over its artifacts). */
void rb_scrub_counts_add(struct rb_scrub_counts *dst, const struct rb_scrub_counts *src);

/* {"<rule>": count, ...} plus "other" for overflow; NULL when out of memory. */
json_t *rb_scrub_counts_json(const struct rb_scrub_counts *c);

/* A stream scrubbed as it comes (scrub/stream.c), for a step's stdout and stderr:
 * what is fed comes out scrubbed as soon as no match can still begin in it. Held back at the
 * end of what was fed: the start of an exact secret, the trailing run of printable bytes other
 * than the space (no match spans a space), an unclosed "-----BEGIN " block, trailing indented lines of
 * such bytes (a YAML block's value may go on); at most RB_SCRUB_STREAM_HOLD bytes
 * (past that the oldest are let out, so a single token longer than that may be split). The
 * output equals rb_scrub_buffer of the whole stream, but for such splits. */
#define RB_SCRUB_STREAM_HOLD (68U << 10) /* a PEM block's search window and a margin */
struct rb_scrub_stream;

/* s must outlive the stream. Returns 0, or -1 with err (out of memory). */
int rb_scrub_stream_new(const struct rb_scrubber *s, struct rb_scrub_stream **out, struct rb_error *err);
/* Feeds in[0..len); *out gets what may be let out now (malloc'd, possibly {NULL, 0}). On -1
 * (out of memory), *out is {NULL, 0} and the stream is unusable: nothing unscrubbed leaves. */
int rb_scrub_stream_feed(struct rb_scrub_stream *st, const char *in, size_t len, struct rb_buf_out *out,
                         struct rb_error *err);
/* The end of the stream: everything held back, scrubbed. The stream may be fed again after. */
int rb_scrub_stream_finish(struct rb_scrub_stream *st, struct rb_buf_out *out, struct rb_error *err);
void rb_scrub_stream_free(struct rb_scrub_stream *st);

/* Scrubs every string of j in place, object keys included (scrub/json.c): a parsed
 * value whose escapes (\u0041KIA...) hid a secret from the scrub of its text. Adds the
 * redactions to *count (may be NULL). Returns 0, or -1 with err; j is then partly scrubbed. */
int rb_scrub_json(struct rb_scrubber *s, json_t *j, uint64_t *count, struct rb_error *err);

/* Adapter with runtime/run/harvest.h's rb_harvest_scrub_fn signature (ctx is the scrubber):
 * *out = NULL when nothing was redacted, *redactions = the counts as JSON (or NULL if none). */
int rb_scrub_harvest_cb(void *ctx, const char *in, size_t len, char **out, size_t *out_len, json_t **redactions,
                        struct rb_error *err);

#endif

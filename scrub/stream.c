/* Streaming scrub (rb_scrub_stream_*, see scrub.h): a step's output is let out as it comes,
 * scrubbed, holding back at each chunk's end only what could still become part of a match.
 * Each scan covers the held bytes plus the last bytes let out, kept as lookbehind. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scrub/internal.h"
#include "scrub/scrub.h"

/* Bytes already let out that stay as lookbehind: a keyword rule's key (64 bytes) with its
 * separator and quotes before a value, a token's left boundary (%XX, \n). */
#define LOOKBEHIND 256
/* While this little is held, every feed scans; above it, a scan waits until a quarter more
 * has come, so a writer of one byte at a time costs a bounded number of scans per byte. */
#define SCAN_ALWAYS 512

struct rb_scrub_stream {
	const struct rb_scrubber *s;
	unsigned char *buf; /* buf[0..ctx): let out already (lookbehind); buf[ctx..len): held */
	size_t ctx, len, cap;
	size_t held_at_scan; /* held bytes after the last scan */
};

/* The bytes a format or keyword match (PEM blocks aside) is made of, its context included
 * (user:password@host, digits:AA..., "value"): every printable byte but the space. A match
 * never spans a space, so what ends in one is decided. */
static bool token_byte(unsigned char c)
{
	return c > ' ' && c < 0x7f;
}

int rb_scrub_stream_new(const struct rb_scrubber *s, struct rb_scrub_stream **out, struct rb_error *err)
{
	*out = calloc(1, sizeof **out);
	if (!*out)
		return rb_error_set(err, ENOMEM, "scrub: allocate a stream");
	(*out)->s = s;
	return 0;
}

void rb_scrub_stream_free(struct rb_scrub_stream *st)
{
	if (!st)
		return;
	free(st->buf);
	free(st);
}

/* Where the last "-----BEGIN " block in b[0..len) starts, when its END line is not complete
 * yet; len otherwise. */
static size_t open_pem(const unsigned char *b, size_t len)
{
	const unsigned char *last = NULL, *p = b;
	while ((p = memmem(p, len - (size_t)(p - b), "-----BEGIN ", 11)) != NULL)
		last = p++;
	if (!last)
		return len;
	size_t at = (size_t)(last - b);
	const unsigned char *e = memmem(last, len - at, "-----END ", 9);
	if (e) {
		size_t after = (size_t)(e - b) + 9;
		/* the END line's closing dashes, after its label (the rule allows 48 bytes) */
		if (memmem(b + after, len - after < 64 ? len - after : 64, "-----", 5))
			return len;
	}
	return at;
}

/* Where the indented lines of token bytes that end at k begin (a YAML block scalar's value,
 * which the keyword pass redacts whole, may go on in the next line): k when the line of k
 * is not one of them. Each line: a line break, one space or more, token bytes. Reads the
 * lookbehind too (the first lines may be let out already); the result may lie in it. */
static size_t indented_block(const unsigned char *b, size_t len, size_t k)
{
	size_t j = k;
	for (bool first = true;; first = false) {
		size_t sp = j;
		while (sp > 0 && b[sp - 1] == ' ')
			sp--;
		/* the line at j: indented, or (the stream's end) just begun */
		if (sp == 0 || b[sp - 1] != '\n' || (sp == j && !(first && j == len)))
			break;
		if (sp < j)
			k = j;
		size_t e = sp - 1; /* the line break; the line before ends here */
		if (e > 0 && b[e - 1] == '\r')
			e--;
		size_t t = e;
		while (t > 0 && token_byte(b[t - 1]))
			t--;
		if (t == e)
			break;
		size_t s2 = t;
		while (s2 > 0 && b[s2 - 1] == ' ')
			s2--;
		if (s2 == t || s2 == 0 || b[s2 - 1] != '\n')
			break; /* the line before is no indented token line: the key's */
		k = j = t;
	}
	return k;
}

/* The first byte that must stay held: a match may still grow out of what follows it. */
static size_t hold_from(const struct rb_scrub_stream *st)
{
	const unsigned char *b = st->buf;
	size_t len = st->len, h = len - rb_scrub_exact_pending(st->s, b, len);
	size_t k = len;
	while (k > st->ctx && token_byte(b[k - 1]))
		k--;
	k = indented_block(b, len, k); /* may reach into the lookbehind: clamped below */
	if (k < h)
		h = k;
	size_t pem = open_pem(b, len);
	if (pem < h)
		h = pem;
	return h < st->ctx ? st->ctx : h;
}

/* Lets out buf[ctx..cut) with the redactions of sp (over buf[0..len)) clipped to it, then
 * keeps LOOKBEHIND bytes before cut as the new lookbehind. */
static int let_out(struct rb_scrub_stream *st, size_t cut, const struct rb_scrub_span *v, size_t n,
                   struct rb_buf_out *out, struct rb_error *err)
{
	struct rb_scrub_span *w = n ? malloc(n * sizeof *w) : NULL;
	if (n && !w)
		return rb_error_set(err, ENOMEM, "scrub: stream redactions");
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].end <= st->ctx || v[i].start >= cut)
			continue;
		w[m] = v[i];
		/* A redaction begun in the lookbehind covers what is let out now. */
		w[m].start = (v[i].start < st->ctx ? st->ctx : v[i].start) - st->ctx;
		w[m].end = (v[i].end > cut ? cut : v[i].end) - st->ctx;
		m++;
	}
	int r = rb_scrub_render(st->s, st->buf + st->ctx, cut - st->ctx, w, m, out, NULL, err);
	free(w);
	if (r < 0)
		return -1;
	size_t keep = cut < LOOKBEHIND ? cut : LOOKBEHIND;
	memmove(st->buf, st->buf + cut - keep, st->len - (cut - keep));
	st->len -= cut - keep;
	st->ctx = keep;
	st->held_at_scan = st->len - st->ctx;
	return 0;
}

/* Scans and lets out what is settled; everything when final. */
static int scan(struct rb_scrub_stream *st, bool final, struct rb_buf_out *out, struct rb_error *err)
{
	struct rb_scrub_spans sp = {0};
	size_t n;
	if (rb_scrub_find_spans(st->s, st->buf, st->len, &sp, &n, err) < 0) {
		free(sp.v);
		return -1;
	}
	size_t cut = final ? st->len : hold_from(st);
	bool forced = false;
	if (st->len - cut > RB_SCRUB_STREAM_HOLD) {
		cut = st->len - RB_SCRUB_STREAM_HOLD / 2; /* half: the next forced cut waits for more */
		forced = true;
	}
	/* Never cut through a redaction: hold all of it, or (forced, or begun in the lookbehind)
	 * let all of it out. Merged spans are disjoint, so one at most straddles the cut. */
	for (size_t i = 0; i < n; i++) {
		if (sp.v[i].start < cut && sp.v[i].end > cut) {
			cut = forced || sp.v[i].start <= st->ctx ? sp.v[i].end : sp.v[i].start;
			break;
		}
	}
	int r = 0;
	if (cut > st->ctx || final)
		r = let_out(st, cut, sp.v, n, out, err);
	else
		st->held_at_scan = st->len - st->ctx;
	free(sp.v);
	return r;
}

int rb_scrub_stream_feed(struct rb_scrub_stream *st, const char *in, size_t len, struct rb_buf_out *out,
                         struct rb_error *err)
{
	*out = (struct rb_buf_out){NULL, 0};
	if (st->len + len + 1 > st->cap) {
		size_t cap = (st->len + len + 1) * 2;
		unsigned char *b = realloc(st->buf, cap);
		if (!b)
			return rb_error_set(err, ENOMEM, "scrub: stream buffer of %zu bytes", cap);
		st->buf = b;
		st->cap = cap;
	}
	memcpy(st->buf + st->len, in, len);
	st->len += len;
	size_t held = st->len - st->ctx;
	if (held > SCAN_ALWAYS && held - st->held_at_scan < st->held_at_scan / 4 && held <= RB_SCRUB_STREAM_HOLD)
		return 0;
	return scan(st, false, out, err);
}

int rb_scrub_stream_finish(struct rb_scrub_stream *st, struct rb_buf_out *out, struct rb_error *err)
{
	*out = (struct rb_buf_out){NULL, 0};
	if (st->len == st->ctx)
		return 0;
	return scan(st, true, out, err);
}

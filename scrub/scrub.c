/* The scrubber's frame: every encoding of each exact secret in one Aho-Corasick automaton
 * (pass 1), the three passes' spans merged (longest wins), the redacted copy and the counts.
 * The format and keyword passes live in scrub/rules.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/cleanup.h"
#include "scrub/internal.h"
#include "scrub/scrub.h"

/* The automaton is a dense DFA over byte classes: one load per input byte. Bound its size so
 * a policy with many long secrets fails clearly instead of eating the host's memory. */
#define DFA_MAX_CELLS (1U << 24) /* 64 MiB of uint32 */
/* A transition's high bit: the target state ends a pattern. */
#define OUT_BIT 0x80000000U

struct pat {
	unsigned char *s;
	size_t len;
	uint32_t rule;
};

struct pats {
	struct pat *v;
	size_t n, cap;
	size_t total; /* sum of lengths: bounds the automaton's states */
};

static void pats_free(struct pats *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].s);
	free(p->v);
}

/* Pass 1's automaton, built at the first input that may hold a pattern (automaton()): a run
 * token's 20-odd encodings make ~1 MiB of it, ~0.7 ms of CPU, which a step whose output holds
 * none of their trigrams never pays. */
struct dfa {
	pthread_mutex_t lock; /* held while it is built: calls on one scrubber may be concurrent */
	atomic_bool built;
	uint32_t *delta;    /* [state * n_cls + cls] = target * n_cls | OUT_BIT if it ends a pattern */
	uint32_t *out_len;  /* per state: length of the longest pattern ending there, 0: none */
	uint32_t *out_rule; /* its rule id */
	uint32_t *depth;    /* per state: bytes of a pattern's start it stands for */
};

struct rb_scrubber {
	const struct rb_scrub_rule_tables *rules; /* rb_scrub_tables[AVX2 at hand] */
	char (*exact)[RB_SCRUB_RULE_MAX];         /* rule id RB_SR_FIRST_EXACT + i -> exact[i] */
	size_t n_names;                           /* rule ids: the format and keyword rules', then exact ones */
	/* pass 1: the patterns (every encoding of every secret), kept for the automaton */
	struct pats pats;
	struct dfa *dfa;
	uint32_t n_cls;
	uint8_t cls[256];
	size_t max_pat; /* the longest pattern */
	/* every three bytes at any offset of some pattern, by rb_scrub_tri; a
	 * pattern of n bytes holds one of the positions step apart, step = the shortest - 2 */
	uint64_t tri[1U << 10];
	size_t step;
	/* the patterns' first three bytes (rb_scrub_tri) and first bytes: where none is, no
	 * pattern starts (rb_scrub_exact_pending without the automaton) */
	uint64_t first_tri[1U << 10];
	uint64_t first_byte[4];
};

/* ---- spans -------------------------------------------------------------------------- */

void rb_scrub_spans_push(struct rb_scrub_spans *sp, size_t start, size_t end, uint32_t rule, uint32_t pass)
{
	if (sp->n) {
		const struct rb_scrub_span *last = &sp->v[sp->n - 1];
		if (last->pass == pass && last->rule == rule && start >= last->start && end <= last->end)
			return;
	}
	if (sp->n == sp->cap) {
		size_t cap = sp->cap ? sp->cap * 2 : 64;
		struct rb_scrub_span *v = realloc(sp->v, cap * sizeof *v);
		if (!v) {
			sp->oom = true;
			return;
		}
		sp->v = v;
		sp->cap = cap;
	}
	sp->v[sp->n++] = (struct rb_scrub_span){start, end, rule, pass};
}

/* ---- encodings of a secret ------------------------------------------------------------- */

/* An encoded form: malloc'd bytes (NULL when out of memory) and their length. */
struct enc {
	unsigned char *s;
	size_t len;
};

/* Takes ownership of e.s. A pattern already present keeps its first rule (raw before json). */
static int pats_add(struct pats *p, struct enc e, uint32_t rule)
{
	unsigned char *s = e.s;
	size_t len = e.len;
	if (!s)
		return -1;
	for (size_t i = 0; i < p->n; i++) {
		if (p->v[i].len == len && memcmp(p->v[i].s, s, len) == 0) {
			free(s);
			return 0;
		}
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 32;
		struct pat *v = realloc(p->v, cap * sizeof *v);
		if (!v) {
			free(s);
			return -1;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = (struct pat){s, len, rule};
	p->total += len;
	return 0;
}

static const char B64_STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char B64_URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* base64 of k zero bytes followed by in, keeping only the characters whose six bits all come
 * from in (k = 1, 2: the secret sits at that offset of a 3-byte group inside a longer
 * encoded string), or the whole encoding (k = 0, pad or not). */
static struct enc b64(const unsigned char *in, size_t n, const char *alpha, unsigned k, bool whole, bool pad)
{
	size_t bits = 8 * (k + n);
	size_t chars = (bits + 5) / 6;
	unsigned char *o = malloc(chars + 3);
	if (!o)
		return (struct enc){NULL, 0};
	/* three bytes of k zeros, in, and zeros past its end at a time: four characters */
	for (size_t j = 0, g = 0; j < chars; g += 3) {
		uint32_t x = 0;
		for (size_t b = g; b < g + 3; b++)
			x = x << 8 | (b >= k && b < k + n ? in[b - k] : 0U);
		for (int q = 18; q >= 0 && j < chars; q -= 6)
			o[j++] = (unsigned char)alpha[(x >> q) & 63];
	}
	size_t first = 0, last = chars;
	if (whole) {
		while (pad && last % 4)
			o[last++] = '=';
	} else {
		first = (8 * k + 5) / 6;  /* chars that hold bits of the bytes before */
		last = (8 * (k + n)) / 6; /* chars complete within the secret */
		memmove(o, o + first, last - first);
		last -= first;
	}
	return (struct enc){o, last};
}

static struct enc hex(const unsigned char *in, size_t n, bool upper)
{
	const char *d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	unsigned char *o = malloc(2 * n + 1);
	if (!o)
		return (struct enc){NULL, 0};
	for (size_t i = 0; i < n; i++) {
		o[2 * i] = (unsigned char)d[in[i] >> 4];
		o[2 * i + 1] = (unsigned char)d[in[i] & 15];
	}
	return (struct enc){o, 2 * n};
}

/* Percent-encoding of everything but RFC 3986's unreserved bytes; form: space as '+'. */
static struct enc urlenc(const unsigned char *in, size_t n, bool upper, bool form)
{
	const char *d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	unsigned char *o = malloc(3 * n + 1);
	if (!o)
		return (struct enc){NULL, 0};
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = in[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    (c && strchr("-._~", c))) {
			o[j++] = c;
		} else if (form && c == ' ') {
			o[j++] = '+';
		} else {
			o[j++] = '%';
			o[j++] = (unsigned char)d[c >> 4];
			o[j++] = (unsigned char)d[c & 15];
		}
	}
	return (struct enc){o, j};
}

enum { J_SLASH = 1, J_ASCII = 2, J_HTML = 4, J_UPPER = 8 };

/* Decodes one UTF-8 sequence at in[i]; returns its length, 0 when invalid. */
static size_t utf8_decode(const unsigned char *in, size_t n, size_t i, unsigned *cp)
{
	unsigned c = in[i];
	size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
	if (c >= 0xf8 || len == 0 || i + len > n)
		return 0;
	unsigned v = c & (0x3f >> (len - 1));
	for (size_t k = 1; k < len; k++) {
		if ((in[i + k] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (in[i + k] & 0x3f);
	}
	*cp = v;
	return len;
}

/* Writes the six bytes \uXXXX and a NUL at buf. */
static void uesc(char *buf, unsigned v, bool upper)
{
	const char *d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
	buf[0] = '\\';
	buf[1] = 'u';
	for (int k = 0; k < 4; k++)
		buf[2 + k] = d[(v >> (12 - 4 * k)) & 15];
	buf[6] = '\0';
}

/* JSON string escaping: always '"', '\\' and control bytes; J_SLASH: "\/" (PHP); J_ASCII:
 * non-ASCII as \uxxxx (Python's default, PHP); J_HTML: < > & as \u003c... (Go); J_UPPER:
 * \uXXXX in upper case (jansson, Java). */
static struct enc jsonenc(const unsigned char *in, size_t n, unsigned flags)
{
	unsigned char *o = malloc(12 * n + 1);
	if (!o)
		return (struct enc){NULL, 0};
	size_t j = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = in[i];
		const char *esc = NULL;
		char buf[16];
		unsigned cp;
		size_t ul;
		switch (c) {
		case '"': esc = "\\\""; break;
		case '\\': esc = "\\\\"; break;
		case '\b': esc = "\\b"; break;
		case '\f': esc = "\\f"; break;
		case '\n': esc = "\\n"; break;
		case '\r': esc = "\\r"; break;
		case '\t': esc = "\\t"; break;
		case '/':
			if (flags & J_SLASH)
				esc = "\\/";
			break;
		case '<':
		case '>':
		case '&':
			if (flags & J_HTML) {
				uesc(buf, c, flags & J_UPPER);
				esc = buf;
			}
			break;
		default:
			if (c < 0x20) {
				uesc(buf, c, flags & J_UPPER);
				esc = buf;
			} else if (c >= 0x80 && (flags & J_ASCII) && (ul = utf8_decode(in, n, i, &cp)) != 0) {
				if (cp >= 0x10000) {
					cp -= 0x10000;
					uesc(buf, 0xd800 + (cp >> 10), flags & J_UPPER);
					uesc(buf + 6, 0xdc00 + (cp & 0x3ff), flags & J_UPPER);
				} else {
					uesc(buf, cp, flags & J_UPPER);
				}
				esc = buf;
				i += ul - 1;
			}
		}
		if (esc) {
			size_t el = strlen(esc);
			memcpy(o + j, esc, el);
			j += el;
		} else {
			o[j++] = c;
		}
	}
	return (struct enc){o, j};
}

/* ---- rule names -------------------------------------------------------------------------- */

static const char *rule_name(const struct rb_scrubber *s, size_t id)
{
	return id < RB_SR_FIRST_EXACT ? rb_scrub_rule_names[id] : s->exact[id - RB_SR_FIRST_EXACT];
}

static int rule_id(struct rb_scrubber *s, const char *label, const char *enc, uint32_t *id)
{
	char name[RB_SCRUB_RULE_MAX];
	snprintf(name, sizeof name, "exact:%s:%s", label, enc);
	for (size_t i = RB_SR_FIRST_EXACT; i < s->n_names; i++) {
		if (strcmp(rule_name(s, i), name) == 0) {
			*id = (uint32_t)i;
			return 0;
		}
	}
	void *v = realloc(s->exact, (s->n_names - RB_SR_FIRST_EXACT + 1) * sizeof *s->exact);
	if (!v)
		return -1;
	s->exact = v;
	memcpy(s->exact[s->n_names - RB_SR_FIRST_EXACT], name, sizeof name);
	*id = (uint32_t)s->n_names++;
	return 0;
}

/* Every form of one secret, raw first so that a form equal to the raw bytes is named raw. */
static int add_secret(struct rb_scrubber *s, struct pats *p, const struct rb_scrub_secret *sec)
{
	const unsigned char *v = sec->value;
	size_t n = sec->len;
	uint32_t r;
	static const struct {
		const char *alpha, *name;
	} b64s[] = {{B64_STD, "base64"}, {B64_URL, "base64url"}};

	if (rule_id(s, sec->label, "raw", &r) < 0)
		return -1;
	unsigned char *raw = malloc(n);
	if (!raw)
		return -1;
	memcpy(raw, v, n);
	if (pats_add(p, (struct enc){raw, n}, r) < 0)
		// cppcheck-suppress memleak ; pats_add takes raw, freeing it on failure too
		return -1;
	for (size_t a = 0; a < 2; a++) {
		if (rule_id(s, sec->label, b64s[a].name, &r) < 0)
			return -1;
		if (pats_add(p, b64(v, n, b64s[a].alpha, 0, true, true), r) < 0 ||
		    pats_add(p, b64(v, n, b64s[a].alpha, 0, true, false), r) < 0)
			return -1;
		for (unsigned k = 0; k < 3; k++)
			if (pats_add(p, b64(v, n, b64s[a].alpha, k, false, false), r) < 0)
				return -1;
	}
	if (rule_id(s, sec->label, "hex", &r) < 0 || pats_add(p, hex(v, n, false), r) < 0 ||
	    pats_add(p, hex(v, n, true), r) < 0)
		return -1;
	if (rule_id(s, sec->label, "url", &r) < 0 || pats_add(p, urlenc(v, n, false, false), r) < 0 ||
	    pats_add(p, urlenc(v, n, true, false), r) < 0 || pats_add(p, urlenc(v, n, true, true), r) < 0)
		return -1;
	if (rule_id(s, sec->label, "json", &r) < 0)
		return -1;
	static const unsigned jflags[] = {
	    0,      J_SLASH,          J_ASCII,          J_SLASH | J_ASCII,         J_ASCII | J_UPPER,
	    J_HTML, J_HTML | J_ASCII, J_HTML | J_UPPER, J_HTML | J_ASCII | J_UPPER};
	for (size_t k = 0; k < sizeof jflags / sizeof jflags[0]; k++)
		if (pats_add(p, jsonenc(v, n, jflags[k]), r) < 0)
			return -1;
	return 0;
}

/* ---- the automaton ---------------------------------------------------------------------- */

/* What pass 1 needs before its automaton: the byte classes, the automaton's bound (checked
 * here, so that a scrubber too large fails when it is made), the trigram filters, the step. */
static int plan_dfa(struct rb_scrubber *s, struct rb_error *err)
{
	const struct pats *p = &s->pats;
	uint32_t ncls = 1;
	memset(s->cls, 0, sizeof s->cls);
	for (size_t i = 0; i < p->n; i++)
		for (size_t j = 0; j < p->v[i].len; j++)
			if (!s->cls[p->v[i].s[j]])
				s->cls[p->v[i].s[j]] = (uint8_t)ncls++; /* at most 256 distinct bytes: 255 + class 0 */
	size_t max_states = p->total + 1;
	if (ncls > 256 || max_states > DFA_MAX_CELLS / ncls)
		return rb_error_set(
		    err, 0,
		    "scrub: the exact secrets make %zu patterns of %zu bytes in all, over the matcher's "
		    "limit of %u table cells: use fewer or shorter secrets",
		    p->n, p->total, DFA_MAX_CELLS);
	s->n_cls = ncls;
	size_t min_pat = SIZE_MAX;
	for (size_t i = 0; i < p->n; i++) { /* every pattern is 8 bytes or more */
		const unsigned char *v = p->v[i].s;
		for (size_t j = 0; j + 3 <= p->v[i].len; j++) {
			unsigned h = rb_scrub_tri(v[j], v[j + 1], v[j + 2]);
			s->tri[h >> 6] |= 1ULL << (h & 63);
		}
		unsigned h = rb_scrub_tri(v[0], v[1], v[2]);
		s->first_tri[h >> 6] |= 1ULL << (h & 63);
		s->first_byte[v[0] >> 6] |= 1ULL << (v[0] & 63);
		if (p->v[i].len < min_pat)
			min_pat = p->v[i].len;
		if (p->v[i].len > s->max_pat)
			s->max_pat = p->v[i].len;
	}
	s->step = min_pat >= 3 ? min_pat - 2 : 1;
	s->dfa = calloc(1, sizeof *s->dfa);
	if (!s->dfa)
		return rb_error_set(err, ENOMEM, "scrub: allocate the matcher");
	pthread_mutex_init(&s->dfa->lock, NULL);
	return 0;
}

/* The automaton of s's patterns (plan_dfa's classes) into a. Returns 0, or -1 (out of memory;
 * a is then as calloc left it, and a later call tries again). */
static int fill_dfa(const struct rb_scrubber *s, struct dfa *a)
{
	const struct pats *p = &s->pats;
	const uint32_t ncls = s->n_cls;
	size_t max_states = p->total + 1;
	uint32_t *d = calloc(max_states * ncls, sizeof *d);
	_cleanup_free_ uint32_t *term = calloc(max_states, sizeof *term); /* pattern index + 1 */
	_cleanup_free_ uint32_t *fail = calloc(max_states, sizeof *fail);
	_cleanup_free_ uint32_t *queue = calloc(max_states, sizeof *queue);
	uint32_t *out_len = calloc(max_states, sizeof *out_len);
	uint32_t *out_rule = calloc(max_states, sizeof *out_rule);
	uint32_t *depth = calloc(max_states, sizeof *depth);
	if (!d || !term || !fail || !queue || !out_len || !out_rule || !depth) {
		free(d);
		free(out_len);
		free(out_rule);
		free(depth);
		return -1;
	}

	/* The trie: 0 in a cell means "no edge" while building (no edge leads back to the root). */
	size_t n_states = 1;
	for (size_t i = 0; i < p->n; i++) {
		size_t st = 0;
		for (size_t j = 0; j < p->v[i].len; j++) {
			uint32_t *cell = &d[st * ncls + s->cls[p->v[i].s[j]]];
			if (!*cell) {
				depth[n_states] = (uint32_t)j + 1;
				*cell = (uint32_t)n_states++;
			}
			st = *cell;
		}
		term[st] = (uint32_t)i + 1;
	}

	/* Breadth first: a state's failure row is complete before the state is filled in. */
	size_t qh = 0, qt = 0;
	for (uint32_t c = 0; c < ncls; c++)
		if (d[c])
			queue[qt++] = d[c];
	while (qh < qt) {
		uint32_t st = queue[qh++];
		if (term[st]) {
			out_len[st] = (uint32_t)p->v[term[st] - 1].len;
			out_rule[st] = p->v[term[st] - 1].rule;
		} else {
			out_len[st] = out_len[fail[st]];
			out_rule[st] = out_rule[fail[st]];
		}
		for (uint32_t c = 0; c < ncls; c++) {
			uint32_t *cell = &d[(size_t)st * ncls + c];
			uint32_t via_fail = d[(size_t)fail[st] * ncls + c];
			if (*cell) {
				fail[*cell] = via_fail;
				queue[qt++] = *cell;
			} else {
				*cell = via_fail;
			}
		}
	}
	/* Depth-one states fail to the root (fail[] is 0 from calloc) and the root's row needs no
	 * filling: a missing edge there is 0, the root itself. Now states become row offsets. */
	for (size_t i = 0; i < n_states * ncls; i++) {
		uint32_t t = d[i];
		d[i] = t * ncls | (out_len[t] ? OUT_BIT : 0);
	}
	a->delta = d;
	a->out_len = out_len;
	a->out_rule = out_rule;
	a->depth = depth;
	return 0;
}

/* s's automaton, built by the first call that needs it; NULL when out of memory. */
static const struct dfa *automaton(const struct rb_scrubber *s)
{
	struct dfa *a = s->dfa;
	if (atomic_load_explicit(&a->built, memory_order_acquire))
		return a;
	pthread_mutex_lock(&a->lock);
	bool ok = atomic_load_explicit(&a->built, memory_order_relaxed) || fill_dfa(s, a) == 0;
	if (ok)
		atomic_store_explicit(&a->built, true, memory_order_release);
	pthread_mutex_unlock(&a->lock);
	return ok ? a : NULL;
}

/* Pass 1, sampled: only every step-th position is looked at, and only where its three bytes
 * occur in some pattern does the automaton run, from the root, over the bytes a pattern
 * holding that position may span (max_pat - 3 before it, max_pat from it), going on where
 * such windows meet. Every occurrence holds a sampled position whose three bytes lie inside
 * it, and its window holds the whole occurrence: the matches are those of one run of the
 * automaton over all of in (each the longest ending at its byte), at one test per step bytes
 * where no secret is (step is 26 for a 28-byte run token) instead of a prefilter per byte. */
static void exact_scan(const struct rb_scrubber *s, const unsigned char *in, size_t len, struct rb_scrub_spans *sp)
{
	const struct dfa *a = NULL; /* built at the first position that needs it */
	const uint32_t *d = NULL, *out_len = NULL, *out_rule = NULL;
	const uint8_t *cls = s->cls;
	const uint32_t ncls = s->n_cls;
	if (ncls == 0) /* none: plan_dfa makes class 0 at least (said for the analyzer) */
		return;
	const size_t step = s->step, back = s->max_pat - 3, fwd = s->max_pat;
	uint32_t off = 0;
	size_t done = 0; /* the automaton has read up to here; off is its state there */
	for (size_t p = 0; p + 3 <= len; p += step) {
		unsigned h = rb_scrub_tri(in[p], in[p + 1], in[p + 2]);
		if (!((s->tri[h >> 6] >> (h & 63)) & 1))
			continue;
		if (!a) {
			if (!(a = automaton(s))) {
				sp->oom = true;
				return;
			}
			d = a->delta, out_len = a->out_len, out_rule = a->out_rule;
		}
		size_t i = p > back ? p - back : 0;
		if (i > done) /* no window reaches here: from the root */
			off = 0;
		else
			i = done;
		size_t end = len - p > fwd ? p + fwd : len;
		while (i < end) {
			uint32_t v = d[off + cls[in[i++]]];
			if (v & OUT_BIT) {
				v &= ~OUT_BIT;
				size_t st = v / ncls;
				rb_scrub_spans_push(sp, i - out_len[st], i, out_rule[st], RB_SCRUB_PASS_EXACT);
			}
			off = v;
		}
		if (end > done)
			done = end;
	}
}

/* May a pattern begin at in[i] (of len)? Its first three bytes, or (fewer left) its first. */
static bool may_begin(const struct rb_scrubber *s, const unsigned char *in, size_t i, size_t len)
{
	if (len - i >= 3) {
		unsigned h = rb_scrub_tri(in[i], in[i + 1], in[i + 2]);
		return (s->first_tri[h >> 6] >> (h & 63)) & 1;
	}
	return (s->first_byte[in[i] >> 6] >> (in[i] & 63)) & 1;
}

/* The automaton's state after in, found from the root over the last max_pat bytes (the
 * state is the longest suffix that begins some pattern, never longer): its depth is how many
 * bytes at the end of in a pattern may still grow out of. Where no pattern may begin in those
 * bytes, that is 0, and the automaton is not needed. Out of memory: all of in (held). */
size_t rb_scrub_exact_pending(const struct rb_scrubber *s, const unsigned char *in, size_t len)
{
	if (!s->dfa)
		return 0;
	size_t from = len > s->max_pat ? len - s->max_pat : 0, i = from;
	while (i < len && !may_begin(s, in, i, len))
		i++;
	if (i == len)
		return 0;
	const struct dfa *a = automaton(s);
	if (!a)
		return len;
	uint32_t off = 0;
	for (i = from; i < len; i++)
		off = a->delta[off + s->cls[in[i]]] & ~OUT_BIT;
	return a->depth[off / s->n_cls];
}

/* ---- public ------------------------------------------------------------------------------ */

static bool label_ok(const char *l)
{
	size_t n = l ? strlen(l) : 0;
	if (n == 0 || n > RB_SCRUB_LABEL_MAX)
		return false;
	return strspn(l, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

int rb_scrub_new_labeled(const struct rb_scrub_secret *secrets, size_t n_secrets, struct rb_scrubber **out,
                         struct rb_error *err)
{
	*out = NULL;
	for (size_t i = 0; i < n_secrets; i++) {
		if (!label_ok(secrets[i].label))
			return rb_error_set(err, 0, "scrub: secret %zu: label `%s` is not 1-%d bytes of [A-Za-z0-9_.-]",
			                    i, secrets[i].label ? secrets[i].label : "(null)", RB_SCRUB_LABEL_MAX);
		if (!secrets[i].value || secrets[i].len < RB_SCRUB_MIN_SECRET)
			return rb_error_set(err, 0,
			                    "scrub: secret %zu (`%s`) is %zu bytes: secrets shorter than %d bytes are "
			                    "refused, they would match ordinary text",
			                    i, secrets[i].label, secrets[i].value ? secrets[i].len : 0,
			                    RB_SCRUB_MIN_SECRET);
	}
	struct rb_scrubber *s = calloc(1, sizeof *s);
	if (!s)
		return rb_error_set(err, ENOMEM, "scrub: allocate the scrubber");
	s->rules = &rb_scrub_tables[rb_scrub_have_avx2()];
	s->n_names = RB_SR_FIRST_EXACT;

	for (size_t i = 0; i < n_secrets; i++) {
		if (add_secret(s, &s->pats, &secrets[i]) < 0) {
			rb_scrub_free(s);
			return rb_error_set(err, ENOMEM, "scrub: encode secret %zu (`%s`)", i, secrets[i].label);
		}
	}
	if (s->pats.n && plan_dfa(s, err) < 0) {
		rb_scrub_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

int rb_scrub_new(const char *const *secrets, size_t n_secrets, struct rb_scrubber **out, struct rb_error *err)
{
	_cleanup_free_ struct rb_scrub_secret *v = calloc(n_secrets ? n_secrets : 1, sizeof *v);
	if (!v)
		return rb_error_set(err, ENOMEM, "scrub: allocate %zu secrets", n_secrets);
	for (size_t i = 0; i < n_secrets; i++)
		v[i] = (struct rb_scrub_secret){"secret", secrets[i], secrets[i] ? strlen(secrets[i]) : 0};
	return rb_scrub_new_labeled(v, n_secrets, out, err);
}

void rb_scrub_free(struct rb_scrubber *s)
{
	if (!s)
		return;
	free(s->exact);
	if (s->dfa) {
		pthread_mutex_destroy(&s->dfa->lock);
		free(s->dfa->delta);
		free(s->dfa->out_len);
		free(s->dfa->out_rule);
		free(s->dfa->depth);
		free(s->dfa);
	}
	pats_free(&s->pats);
	free(s);
}

static inline int span_order(const struct rb_scrub_span *x, const struct rb_scrub_span *y)
{
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1;
	if (x->pass != y->pass)
		return x->pass < y->pass ? -1 : 1;
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

static int span_cmp(const void *a, const void *b)
{
	return span_order(a, b);
}

/* The end of the run in order that starts at v[i]. */
static size_t run_end(const struct rb_scrub_span *v, size_t i, size_t n)
{
	while (i + 1 < n && span_order(&v[i], &v[i + 1]) <= 0)
		i++;
	return i + 1;
}

/* Sorts v[0..n) by span_order. Each pass finds its spans left to right, so v is a few runs
 * already in order (one per pass, or a little more): they are merged, pairs of neighbouring
 * runs at a time, until one is left, in O(n log runs) with the comparison inlined. In text
 * dense with secrets, qsort of them was 22 % of the scrub. Without memory for the merge, qsort. */
static void sort_spans(struct rb_scrub_span *v, size_t n)
{
	if (n < 2 || run_end(v, 0, n) == n)
		return;
	struct rb_scrub_span *t = malloc(n * sizeof *t);
	if (!t) {
		qsort(v, n, sizeof *v, span_cmp);
		return;
	}
	while (run_end(v, 0, n) < n) {
		for (size_t i = 0; i < n;) {
			size_t m = run_end(v, i, n);
			if (m == n)
				break;
			size_t e = run_end(v, m, n), a = i, b = m, k = 0;
			while (a < m && b < e)
				t[k++] = span_order(&v[b], &v[a]) < 0 ? v[b++] : v[a++];
			memcpy(t + k, v + a, (m - a) * sizeof *t);
			k += m - a;
			memcpy(v + i, t, k * sizeof *t); /* v[b..e) is in place already */
			i = e;
		}
	}
	free(t);
}

/* Overlapping spans become one redaction of their union, named after the span of the
 * earliest pass in it (exact, then format, then keyword), the longest of that pass, the
 * first rule on a tie. Spans that only touch stay apart. Returns the number of groups. */
static size_t merge(struct rb_scrub_spans *sp)
{
	if (sp->n == 0)
		return 0;
	sort_spans(sp->v, sp->n);
	size_t g = 0;
	struct rb_scrub_span cur = sp->v[0];
	size_t best_len = cur.end - cur.start;
	for (size_t i = 1; i < sp->n; i++) {
		const struct rb_scrub_span *x = &sp->v[i];
		if (x->start < cur.end) {
			size_t l = x->end - x->start;
			/* an exact secret names the redaction it is part of (it is the run's own), a
			 * format the keyword match it overlaps (it says more); else the longest */
			if (x->pass < cur.pass || (x->pass == cur.pass && l > best_len)) {
				best_len = l;
				cur.rule = x->rule;
				cur.pass = x->pass;
			}
			if (x->end > cur.end)
				cur.end = x->end;
		} else {
			sp->v[g++] = cur;
			cur = *x;
			best_len = cur.end - cur.start;
		}
	}
	sp->v[g++] = cur;
	return g;
}

/* The three passes over in; leaves the merged redactions in sp->v[0..*n). */
int rb_scrub_find_spans(const struct rb_scrubber *s, const unsigned char *in, size_t len, struct rb_scrub_spans *sp,
                        size_t *n, struct rb_error *err)
{
	if (s->dfa)
		exact_scan(s, in, len, sp);
	rb_scrub_rules_scan(s->rules, in, len, sp);
	rb_scrub_keywords_scan(s->rules, in, len, sp);
	if (sp->oom)
		return rb_error_set(err, ENOMEM, "scrub: list the matches in %zu bytes", len);
	*n = merge(sp);
	return 0;
}

/* Large outputs: a fresh mapping costs a page fault per 4 KiB, which measured more than the
 * copy and the scan together (under a hypervisor, each fault is an exit: 200 MB/s for
 * malloc + memcpy of 100 MB, against 4 GB/s with the pages populated first). The pages are
 * populated in one call (MADV_POPULATE_WRITE, Linux 5.14), as 2 MiB pages where the host
 * offers them. Advice only: on an older kernel the copy faults them in. Still free()d. */
#define HUGE_OUTPUT (1U << 20)
#define HUGE_PAGE   (2U << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static char *alloc_output(size_t n)
{
	if (n < HUGE_OUTPUT)
		return malloc(n);
	size_t rounded = (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
	char *p = aligned_alloc(HUGE_PAGE, rounded);
	if (p) {
		(void)madvise(p, rounded, MADV_HUGEPAGE);
		(void)madvise(p, rounded, MADV_POPULATE_WRITE);
	}
	return p;
}

/* "[REDACTED:name]" at o, as sprintf would write it (without the NUL); its length. Copied, not
 * formatted: in text dense with secrets sprintf was 3.5 % of the scrub. */
static size_t put_placeholder(char *o, const char *name)
{
	static const char head[] = "[REDACTED:";
	size_t n = strlen(name);
	memcpy(o, head, sizeof head - 1);
	memcpy(o + sizeof head - 1, name, n);
	o[sizeof head - 1 + n] = ']';
	return sizeof head + n;
}

int rb_scrub_render(const struct rb_scrubber *s, const unsigned char *in, size_t len, const struct rb_scrub_span *v,
                    size_t n, struct rb_buf_out *out, struct rb_scrub_counts *counts, struct rb_error *err)
{
	static const unsigned char nothing[1];
	if (!in) {
		if (len || n)
			return rb_error_set(err, EINVAL, "scrub: no input for %zu bytes", len);
		in = nothing;
	}
	size_t out_len = len;
	for (size_t i = 0; i < n; i++)
		out_len = out_len - (v[i].end - v[i].start) + strlen("[REDACTED:]") + strlen(rule_name(s, v[i].rule));
	char *o = alloc_output(out_len + 1);
	_cleanup_free_ uint64_t *by_id = calloc(s->n_names, sizeof *by_id);
	if (!o || !by_id) {
		free(o);
		return rb_error_set(err, ENOMEM, "scrub: output of %zu bytes", out_len);
	}
	size_t at = 0, j = 0;
	for (size_t i = 0; i < n; i++) {
		memcpy(o + j, in + at, v[i].start - at);
		j += v[i].start - at;
		j += put_placeholder(o + j, rule_name(s, v[i].rule));
		at = v[i].end;
		by_id[v[i].rule]++;
	}
	if (len > at)
		memcpy(o + j, in + at, len - at);
	j += len - at;
	o[j] = '\0';
	*out = (struct rb_buf_out){o, j};

	if (counts) {
		/* exact rules first: they are the run's own secrets */
		for (int pass = 0; pass < 2; pass++) {
			size_t lo = pass == 0 ? RB_SR_FIRST_EXACT : 0, hi = pass == 0 ? s->n_names : RB_SR_FIRST_EXACT;
			for (size_t id = lo; id < hi; id++) {
				if (!by_id[id])
					continue;
				counts->total += by_id[id];
				if (counts->n < RB_SCRUB_COUNTS_MAX) {
					struct rb_scrub_count *c = &counts->by_rule[counts->n++];
					snprintf(c->rule, sizeof c->rule, "%s", rule_name(s, id));
					c->count = by_id[id];
				} else {
					counts->overflow += by_id[id];
				}
			}
		}
	}
	return 0;
}

int rb_scrub_buffer(struct rb_scrubber *s, const char *in_, size_t len, struct rb_buf_out *out,
                    struct rb_scrub_counts *counts, struct rb_error *err)
{
	const unsigned char *in = (const unsigned char *)in_;
	*out = (struct rb_buf_out){NULL, 0};
	if (counts)
		memset(counts, 0, sizeof *counts);
	if (!in && len)
		return rb_error_set(err, EINVAL, "scrub: NULL buffer of %zu bytes", len);
	struct rb_scrub_spans sp = {0};
	size_t n = 0;
	int r = rb_scrub_find_spans(s, in, len, &sp, &n, err);
	if (r == 0)
		r = rb_scrub_render(s, in, len, sp.v, n, out, counts, err);
	free(sp.v);
	return r;
}

void rb_scrub_counts_add(struct rb_scrub_counts *dst, const struct rb_scrub_counts *src)
{
	dst->total += src->total;
	dst->overflow += src->overflow;
	for (size_t i = 0; i < src->n; i++) {
		size_t k = 0;
		while (k < dst->n && strcmp(dst->by_rule[k].rule, src->by_rule[i].rule) != 0)
			k++;
		if (k < dst->n) {
			dst->by_rule[k].count += src->by_rule[i].count;
		} else if (dst->n < RB_SCRUB_COUNTS_MAX) {
			dst->by_rule[dst->n++] = src->by_rule[i];
		} else {
			dst->overflow += src->by_rule[i].count;
		}
	}
}

json_t *rb_scrub_counts_json(const struct rb_scrub_counts *c)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	for (size_t i = 0; i < c->n; i++) {
		if (json_object_set_new(o, c->by_rule[i].rule, json_integer((json_int_t)c->by_rule[i].count)) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	if (c->overflow && json_object_set_new(o, "other", json_integer((json_int_t)c->overflow)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int rb_scrub_harvest_cb(void *ctx, const char *in, size_t len, char **out, size_t *out_len, json_t **redactions,
                        struct rb_error *err)
{
	struct rb_scrub_counts c = {0};
	struct rb_buf_out b = {0};
	struct rb_scrub_spans sp = {0};
	size_t n = 0;
	*out = NULL;
	*out_len = 0;
	*redactions = NULL;
	if (!in && len)
		return rb_error_set(err, EINVAL, "scrub: NULL buffer of %zu bytes", len);
	/* Most files hold no secret: those are never copied. */
	int r = rb_scrub_find_spans(ctx, (const unsigned char *)in, len, &sp, &n, err);
	if (r == 0 && n > 0)
		r = rb_scrub_render(ctx, (const unsigned char *)in, len, sp.v, n, &b, &c, err);
	free(sp.v);
	if (r < 0 || n == 0)
		return r;
	*redactions = rb_scrub_counts_json(&c);
	if (!*redactions) {
		free(b.data);
		return rb_error_set(err, ENOMEM, "scrub: redaction counts");
	}
	*out = b.data;
	*out_len = b.len;
	return 0;
}

/* The scrubber's format rules (pass 2: vendor prefixes, PEM blocks, JWTs) and keyword-anchored
 * entropy (pass 3), as hand-written scanners: a two-byte prefix filter or memchr finds the
 * few candidate positions, then a check of charset and length decides. No regex. */
#define _GNU_SOURCE
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/scrub-internal.h"

const char *const rb_scrub_rule_names[RB_SR_FIRST_EXACT] = {
    [RB_SR_AWS_KEY_ID] = "aws-access-key-id",
    [RB_SR_GITHUB_PAT] = "github-pat",
    [RB_SR_GITHUB_OAUTH] = "github-oauth",
    [RB_SR_GITHUB_APP] = "github-app-token",
    [RB_SR_GITHUB_REFRESH] = "github-refresh-token",
    [RB_SR_GITHUB_FINE_GRAINED] = "github-fine-grained-pat",
    [RB_SR_GITLAB_PAT] = "gitlab-pat",
    [RB_SR_GITLAB_DEPLOY] = "gitlab-deploy-token",
    [RB_SR_GITLAB_RUNNER] = "gitlab-runner-token",
    [RB_SR_GITLAB_CI_BUILD] = "gitlab-ci-build-token",
    [RB_SR_SLACK_TOKEN] = "slack-token",
    [RB_SR_SLACK_APP] = "slack-app-token",
    [RB_SR_SLACK_WEBHOOK] = "slack-webhook",
    [RB_SR_STRIPE] = "stripe-key",
    [RB_SR_GCP_API_KEY] = "gcp-api-key",
    [RB_SR_PRIVATE_KEY] = "private-key",
    [RB_SR_JWT] = "jwt",
    [RB_SR_ANTHROPIC] = "anthropic-api-key",
    [RB_SR_ANTHROPIC_ADMIN] = "anthropic-admin-key",
    [RB_SR_OPENAI] = "openai-api-key",
    [RB_SR_NPM] = "npm-token",
    [RB_SR_PYPI] = "pypi-token",
    [RB_SR_HUGGINGFACE] = "huggingface-token",
    [RB_SR_GENERIC] = "generic-secret",
};

/* Byte classes. */
enum { C_UP = 1, C_LO = 2, C_DIG = 4, C_US = 8, C_DASH = 16, C_B64 = 32, C_HEX = 64 };
#define C_ALNUM (C_UP | C_LO | C_DIG)

static const uint8_t cls[256] = {
    ['A' ... 'F'] = C_UP | C_HEX,
    ['G' ... 'Z'] = C_UP,
    ['a' ... 'f'] = C_LO | C_HEX,
    ['g' ... 'z'] = C_LO,
    ['0' ... '9'] = C_DIG | C_HEX,
    ['_'] = C_US,
    ['-'] = C_DASH,
    ['+'] = C_B64,
    ['/'] = C_B64,
    ['='] = C_B64,
};

/* Charsets of token bodies. */
enum {
	CS_UPNUM = C_UP | C_DIG,
	CS_ALNUM = C_ALNUM,
	CS_ALNUM_U = C_ALNUM | C_US,
	CS_ALNUM_D = C_ALNUM | C_DASH,
	CS_ALNUM_UD = C_ALNUM | C_US | C_DASH,
	CS_HOOK = C_ALNUM | C_US | C_DASH | C_B64,  /* T.../B.../xxx paths */
	CS_VALUE = C_ALNUM | C_US | C_DASH | C_B64, /* keyword values: [A-Za-z0-9+/=_-] */
};

enum kind { K_RUN, K_OPENAI, K_PEM, K_JWT, K_HOOK };

/* prefix + body of [min, max] bytes of charset cs; max 0: unbounded. A fixed length (min ==
 * max) also needs a non-alphanumeric byte (or the end) right after the body. */
struct prefix_rule {
	const char *prefix;
	uint8_t plen;
	uint8_t rule;
	uint8_t cs;
	uint8_t kind;
	uint16_t min, max;
};

#define P(s, r, c, k, lo, hi)                                                                                          \
	{                                                                                                              \
		s, sizeof(s) - 1, r, c, k, lo, hi                                                                      \
	}
/* Longer prefixes of one first byte come first: the first rule that matches wins. */
static const struct prefix_rule prefixes[] = {
    P("AKIA", RB_SR_AWS_KEY_ID, CS_UPNUM, K_RUN, 16, 16),
    P("ASIA", RB_SR_AWS_KEY_ID, CS_UPNUM, K_RUN, 16, 16),
    P("ABIA", RB_SR_AWS_KEY_ID, CS_UPNUM, K_RUN, 16, 16),
    P("ACCA", RB_SR_AWS_KEY_ID, CS_UPNUM, K_RUN, 16, 16),
    P("AIza", RB_SR_GCP_API_KEY, CS_ALNUM_UD, K_RUN, 35, 35),
    P("github_pat_", RB_SR_GITHUB_FINE_GRAINED, CS_ALNUM_U, K_RUN, 82, 82),
    P("ghp_", RB_SR_GITHUB_PAT, CS_ALNUM, K_RUN, 36, 36),
    P("gho_", RB_SR_GITHUB_OAUTH, CS_ALNUM, K_RUN, 36, 36),
    P("ghu_", RB_SR_GITHUB_APP, CS_ALNUM, K_RUN, 36, 36),
    P("ghs_", RB_SR_GITHUB_APP, CS_ALNUM, K_RUN, 36, 36),
    P("ghr_", RB_SR_GITHUB_REFRESH, CS_ALNUM, K_RUN, 36, 36),
    P("glpat-", RB_SR_GITLAB_PAT, CS_ALNUM_UD, K_RUN, 20, 0),
    P("gldt-", RB_SR_GITLAB_DEPLOY, CS_ALNUM_UD, K_RUN, 20, 0),
    P("glrt-", RB_SR_GITLAB_RUNNER, CS_ALNUM_UD, K_RUN, 20, 0),
    P("glcbt-", RB_SR_GITLAB_CI_BUILD, CS_ALNUM_UD, K_RUN, 20, 0),
    P("xoxb-", RB_SR_SLACK_TOKEN, CS_ALNUM_D, K_RUN, 10, 0),
    P("xoxp-", RB_SR_SLACK_TOKEN, CS_ALNUM_D, K_RUN, 10, 0),
    P("xoxe-", RB_SR_SLACK_TOKEN, CS_ALNUM_D, K_RUN, 10, 0),
    P("xoxa-", RB_SR_SLACK_TOKEN, CS_ALNUM_D, K_RUN, 10, 0),
    P("xoxr-", RB_SR_SLACK_TOKEN, CS_ALNUM_D, K_RUN, 10, 0),
    P("xoxs-", RB_SR_SLACK_TOKEN, CS_ALNUM_D, K_RUN, 10, 0),
    P("xoxo-", RB_SR_SLACK_TOKEN, CS_ALNUM_D, K_RUN, 10, 0),
    P("xapp-", RB_SR_SLACK_APP, CS_ALNUM_D, K_RUN, 10, 0),
    P("hooks.slack.com/", RB_SR_SLACK_WEBHOOK, CS_HOOK, K_HOOK, 20, 0),
    P("sk-ant-api03-", RB_SR_ANTHROPIC, CS_ALNUM_UD, K_RUN, 20, 0),
    P("sk-ant-admin01-", RB_SR_ANTHROPIC_ADMIN, CS_ALNUM_UD, K_RUN, 20, 0),
    P("sk-proj-", RB_SR_OPENAI, CS_ALNUM_UD, K_RUN, 20, 0),
    P("sk-", RB_SR_OPENAI, CS_ALNUM_UD, K_OPENAI, 20, 0),
    P("sk_live_", RB_SR_STRIPE, CS_ALNUM, K_RUN, 16, 0),
    P("sk_test_", RB_SR_STRIPE, CS_ALNUM, K_RUN, 16, 0),
    P("sk_prod_", RB_SR_STRIPE, CS_ALNUM, K_RUN, 16, 0),
    P("rk_live_", RB_SR_STRIPE, CS_ALNUM, K_RUN, 16, 0),
    P("rk_test_", RB_SR_STRIPE, CS_ALNUM, K_RUN, 16, 0),
    P("rk_prod_", RB_SR_STRIPE, CS_ALNUM, K_RUN, 16, 0),
    P("-----BEGIN ", RB_SR_PRIVATE_KEY, 0, K_PEM, 0, 0),
    P("eyJ", RB_SR_JWT, CS_ALNUM_UD, K_JWT, 0, 0),
    P("npm_", RB_SR_NPM, CS_ALNUM, K_RUN, 36, 36),
    P("pypi-AgEIcHlwaS5vcmc", RB_SR_PYPI, CS_ALNUM_UD, K_RUN, 50, 0),
    P("hf_", RB_SR_HUGGINGFACE, CS_ALNUM, K_RUN, 34, 34),
};
#undef P

/* Slack webhook paths, after "hooks.slack.com/". */
static const char *const hook_kinds[] = {"services/", "workflows/", "triggers/"};

/* A PEM block whose END line is missing is redacted through its body: these bytes. */
#define PEM_LABEL_MAX  48
#define PEM_SEARCH_MAX (64U << 10) /* a 4096-bit RSA key is 3.2 KiB of PEM */
#define PEM_END_TRIES  8

void rb_scrub_rules_init(struct rb_scrub_rule_tables *t)
{
	memset(t, 0, sizeof *t);
	for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
		const unsigned char *p = (const unsigned char *)prefixes[i].prefix;
		unsigned b = p[0] | (unsigned)p[1] << 8;
		t->bigram[b >> 6] |= 1ULL << (b & 63);
		uint8_t *slot = t->first[p[0]];
		size_t k = 0;
		while (k < sizeof t->first[0] - 1 && slot[k])
			k++;
		slot[k] = (uint8_t)(i + 1); /* the table has room: at most 10 prefixes share a first byte */
	}
}

static inline bool is_hex(unsigned char c)
{
	return cls[c] & C_HEX;
}

/* A token starts at i only after a non-alphanumeric byte, the start, a %XX escape or a
 * backslash escape (\n in JSON): inside a longer word it is most likely not a token. */
static bool left_ok(const unsigned char *in, size_t i)
{
	if (i == 0 || !(cls[in[i - 1]] & C_ALNUM))
		return true;
	if (i >= 3 && in[i - 3] == '%' && is_hex(in[i - 2]) && is_hex(in[i - 1]))
		return true;
	return i >= 2 && in[i - 2] == '\\';
}

static size_t run_of(const unsigned char *in, size_t i, size_t len, uint8_t cs)
{
	size_t j = i;
	while (j < len && (cls[in[j]] & cs))
		j++;
	return j - i;
}

/* Positions of "-----END " lines, found lazily and once per scan: many BEGIN lines without
 * their END then cost one search of the buffer, not one each. */
struct pem_ends {
	size_t *v;
	size_t n, cap;
	size_t scanned; /* searched up to here */
	size_t next;    /* first index that may still be at or after a BEGIN */
};

/* State of one format scan. Candidates can start every few bytes inside one long run of
 * token bytes ("sk-sk-sk-..."): the last run seen per charset, and the next OpenAI marker,
 * are remembered so that each byte is scanned a bounded number of times. */
struct scan {
	const unsigned char *in;
	size_t len;
	struct {
		uint8_t cs;
		size_t start, end;
	} runs[8];
	size_t openai_mark; /* position of the next "T3BlbkFJ" at or after the last query, or len */
	bool openai_known;
	struct pem_ends pe;
	bool oom;
};

/* Length of the run of charset cs bytes at i. */
static size_t run(struct scan *sc, size_t i, uint8_t cs)
{
	size_t k = 0;
	while (k < 8 && sc->runs[k].cs && sc->runs[k].cs != cs)
		k++;
	if (k == 8)
		k = 7; /* more charsets than slots: never happens with the rules below */
	if (sc->runs[k].cs == cs && i >= sc->runs[k].start && i <= sc->runs[k].end)
		return sc->runs[k].end - i;
	size_t n = run_of(sc->in, i, sc->len, cs);
	sc->runs[k].cs = cs;
	sc->runs[k].start = i;
	sc->runs[k].end = i + n;
	return n;
}

/* Does [i, i + n) hold "T3BlbkFJ"? */
static bool openai_marker(struct scan *sc, size_t i, size_t n)
{
	if (!sc->openai_known || sc->openai_mark < i) {
		const unsigned char *m = memmem(sc->in + i, sc->len - i, "T3BlbkFJ", 8);
		sc->openai_mark = m ? (size_t)(m - sc->in) : sc->len;
		sc->openai_known = true;
	}
	return sc->openai_mark + 8 <= i + n;
}

/* Finds the END lines that start before upto (searching only there: a BEGIN costs at most
 * its window, and the windows of successive BEGINs never overlap in what they search). */
static bool pem_ends_upto(struct pem_ends *pe, const unsigned char *in, size_t len, size_t upto)
{
	if (upto > len)
		upto = len;
	while (pe->scanned < upto) {
		size_t stop = upto + 8 < len ? upto + 8 : len; /* an END starting before upto fits */
		const unsigned char *e = memmem(in + pe->scanned, stop - pe->scanned, "-----END ", 9);
		if (!e) {
			pe->scanned = upto;
			break;
		}
		size_t at = (size_t)(e - in);
		if (pe->n == pe->cap) {
			size_t cap = pe->cap ? pe->cap * 2 : 64;
			size_t *v = realloc(pe->v, cap * sizeof *v);
			if (!v)
				return false;
			pe->v = v;
			pe->cap = cap;
		}
		pe->v[pe->n++] = at;
		pe->scanned = at + 1;
	}
	return true;
}

/* "-----BEGIN <LABEL>PRIVATE KEY[ BLOCK]-----" ... "-----END <same>-----". Returns the end
 * of the block, or 0 when this is no private key. */
static size_t pem_block(const unsigned char *in, size_t i, size_t len, struct pem_ends *pe, bool *oom)
{
	size_t l = i + 11, lab = l; /* after "-----BEGIN " */
	while (l < len && l - lab < PEM_LABEL_MAX && ((cls[in[l]] & (C_UP | C_DIG)) || in[l] == ' '))
		l++;
	if (len - l < 5 || memcmp(in + l, "-----", 5) != 0)
		return 0;
	size_t label_len = l - lab;
	bool key = false;
	static const char *const tails[] = {"PRIVATE KEY", "PRIVATE KEY BLOCK"};
	for (size_t k = 0; k < 2; k++) {
		size_t tl = strlen(tails[k]);
		if (label_len >= tl && memcmp(in + l - tl, tails[k], tl) == 0)
			key = true;
	}
	if (!key)
		return 0;
	size_t body = l + 5;
	/* The matching END line: one of the next PEM_END_TRIES within PEM_SEARCH_MAX. */
	if (pe->scanned < body) /* END lines before this body matter to no later BEGIN either */
		pe->scanned = body;
	if (!pem_ends_upto(pe, in, len, body + PEM_SEARCH_MAX)) {
		*oom = true;
		return 0;
	}
	while (pe->next < pe->n && pe->v[pe->next] < body)
		pe->next++;
	for (size_t k = pe->next; k < pe->n && k - pe->next < PEM_END_TRIES && pe->v[k] - body <= PEM_SEARCH_MAX; k++) {
		size_t after = pe->v[k] + 9;
		if (len - after >= label_len + 5 && memcmp(in + after, in + lab, label_len) == 0 &&
		    memcmp(in + after + label_len, "-----", 5) == 0)
			return after + label_len + 5;
	}
	/* No END: redact the body, base64 lines with their headers and escaped newlines. */
	size_t j = body;
	while (j < len && ((cls[in[j]] & (C_ALNUM | C_B64 | C_DASH)) || (in[j] && strchr(" \t\r\n:,\\", in[j]))))
		j++;
	return j;
}

/* eyJ<hdr>.eyJ<payload>.<signature> */
static size_t jwt(struct scan *sc, size_t i)
{
	const unsigned char *in = sc->in;
	size_t len = sc->len;
	size_t n = run(sc, i + 3, CS_ALNUM_UD), j = i + 3 + n;
	if (n == 0 || j + 4 > len || in[j] != '.' || memcmp(in + j + 1, "eyJ", 3) != 0)
		return 0;
	j += 4;
	n = run(sc, j, CS_ALNUM_UD);
	j += n;
	if (n == 0 || j >= len || in[j] != '.')
		return 0;
	j++;
	return j + run(sc, j, CS_ALNUM_UD);
}

/* The end of the token that rule r matches at i (its prefix already compared), or 0. */
static size_t match_rule(struct scan *sc, const struct prefix_rule *r, size_t i)
{
	const unsigned char *in = sc->in;
	size_t len = sc->len, b = i + r->plen, n;
	switch (r->kind) {
	case K_PEM: return pem_block(in, i, len, &sc->pe, &sc->oom);
	case K_JWT: return jwt(sc, i);
	case K_HOOK:
		for (size_t k = 0; k < sizeof hook_kinds / sizeof hook_kinds[0]; k++) {
			size_t kl = strlen(hook_kinds[k]);
			if (len - b > kl && memcmp(in + b, hook_kinds[k], kl) == 0) {
				n = run(sc, b + kl, r->cs);
				return n >= r->min ? b + kl + n : 0;
			}
		}
		return 0;
	case K_OPENAI:
		n = run(sc, b, r->cs);
		if (n < r->min || !openai_marker(sc, b, n))
			return 0;
		return b + n;
	default:
		n = run(sc, b, r->cs);
		if (n < r->min || (r->max && n > r->max))
			return 0;
		if (r->min == r->max && b + n < len && (cls[in[b + n]] & C_ALNUM))
			return 0;
		return b + n;
	}
}

void rb_scrub_rules_scan(const struct rb_scrub_rule_tables *t, const unsigned char *in, size_t len,
                         struct rb_scrub_spans *sp)
{
	struct scan sc = {.in = in, .len = len};
	size_t i = 0;
	while ((i = rb_scrub_next_bigram(t->bigram, in, i, len)) < len) {
		size_t end = 0;
		uint8_t rule = 0;
		if (left_ok(in, i)) {
			for (const uint8_t *k = t->first[in[i]]; *k && !end; k++) {
				const struct prefix_rule *r = &prefixes[*k - 1];
				if (len - i > r->plen && memcmp(in + i, r->prefix, r->plen) == 0) {
					end = match_rule(&sc, r, i);
					rule = r->rule;
				}
			}
		}
		if (end) {
			rb_scrub_spans_push(sp, i, end, rule, RB_SCRUB_PASS_FORMAT);
			i = end; /* what lies inside is redacted already */
		} else {
			i++;
		}
	}
	free(sc.pe.v);
	if (sc.oom)
		sp->oom = true;
}

/* ---- pass 3: keyword = value ---------------------------------------------------------- */

static const char *const keywords[] = {
    "password", "passwd", "secret", "token", "api_key", "apikey", "access_key", "auth", "credential", "private_key",
};

/* Values that are words, not secrets; matched case-insensitively anywhere in the value. */
static const char *const stopwords[] = {
    "example",  "changeme", "change_me", "placeholder", "xxxxxxxx",   "your_", "dummy",
    "redacted", "sample",   "insert",    "replace",     "notasecret", "lorem",
};

#define VALUE_MIN     16
#define VALUE_MAX     512 /* longer runs are blobs (certificates, data URIs), not secrets */
#define KEY_MAX       64
#define KEYWORD_SLACK 16 /* bytes allowed between the keyword and the end of the key */
#define ENTROPY_MIN   3.5

double rb_scrub_entropy(const unsigned char *s, size_t n)
{
	if (n == 0)
		return 0;
	unsigned cnt[256] = {0};
	for (size_t i = 0; i < n; i++)
		cnt[s[i]]++;
	double h = 0;
	for (unsigned c = 0; c < 256; c++) {
		if (cnt[c]) {
			double p = (double)cnt[c] / (double)n;
			h -= p * log2(p);
		}
	}
	return h;
}

static bool ci_contains(const char *hay, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	for (size_t i = 0; i + m <= n; i++)
		if (strncasecmp(hay + i, needle, m) == 0)
			return true;
	return false;
}

/* Looks like words or an identifier, not a random string: only lower case (with _ and -),
 * only upper case (CONSTANT_NAME), CamelCaseWords without digits (at most one capital
 * followed by another: "IsARealKey"), or a path. */
static bool wordlike(const unsigned char *v, size_t n)
{
	unsigned have = 0, upup = 0;
	for (size_t i = 0; i < n; i++) {
		have |= cls[v[i]];
		if ((cls[v[i]] & C_UP) && i + 1 < n && (cls[v[i + 1]] & C_UP))
			upup++;
	}
	if (!(have & (C_UP | C_DIG)) || !(have & (C_LO | C_DIG)))
		return true;
	if (!(have & (C_DIG | C_B64)) && upup <= 1)
		return true;
	if (v[0] == '/' && memchr(v + 1, '/', n - 1))
		return true;
	return false;
}

/* Bytes between a key and its separator, and between the separator and the value. */
static const bool key_tail[256] = {
    [' '] = 1, ['\t'] = 1, ['"'] = 1, ['\''] = 1, ['`'] = 1, [']'] = 1, ['\\'] = 1, [':'] = 1, ['='] = 1};
static const bool value_head[256] = {[' '] = 1, ['\t'] = 1, ['"'] = 1, ['\''] = 1, ['`'] = 1, ['\\'] = 1};

/* Is there a keyword near the end of the key that ends just before position k? */
static bool keyed(const unsigned char *in, size_t k)
{
	/* skip the quotes, brackets and spaces between key and separator */
	for (int skip = 0; skip < 4 && k > 0 && key_tail[in[k - 1]]; skip++)
		k--;
	size_t s = k;
	while (s > 0 && k - s < KEY_MAX && (cls[in[s - 1]] & (C_ALNUM | C_US | C_DASH) || in[s - 1] == '.'))
		s--;
	size_t n = k - s;
	if (n < 4)
		return false;
	char key[KEY_MAX + 1];
	for (size_t i = 0; i < n; i++) {
		unsigned char c = in[s + i];
		key[i] = c == '-' ? '_' : (char)((cls[c] & C_UP) ? c + 32 : c);
	}
	key[n] = '\0';
	for (size_t w = 0; w < sizeof keywords / sizeof keywords[0]; w++) {
		const char *hit = key, *last = NULL;
		while ((hit = strstr(hit, keywords[w])) != NULL)
			last = hit++;
		if (last && (size_t)(key + n - (last + strlen(keywords[w]))) <= KEYWORD_SLACK)
			return true;
	}
	return false;
}

/* The separator at q: returns the value's span in *vs, *ve when it qualifies. */
static bool keyword_value(const unsigned char *in, size_t len, size_t q, size_t *vs, size_t *ve)
{
	size_t v = q + 1;
	for (int skip = 0; skip < 2 && v < len && (in[v] == '=' || in[v] == '>'); skip++)
		v++;
	for (int skip = 0; skip < 6 && v < len && value_head[in[v]]; skip++)
		v++;
	/* Authorization: Bearer <token> */
	static const char *const schemes[] = {"bearer ", "basic ", "token "};
	for (size_t k = 0; k < 3 && v < len; k++) {
		size_t sl = strlen(schemes[k]);
		if ((in[v] | 0x20) == schemes[k][0] && len - v > sl &&
		    strncasecmp((const char *)in + v, schemes[k], sl) == 0) {
			v += sl;
			break;
		}
	}
	size_t e = v;
	while (e < len && e - v <= VALUE_MAX && (cls[in[e]] & CS_VALUE))
		e++;
	size_t n = e - v;
	if (n < VALUE_MIN || n > VALUE_MAX)
		return false;
	if (e < len && in[e] == '(') /* token = getTokenFromEnvironment() */
		return false;
	if (!keyed(in, q))
		return false;
	if (wordlike(in + v, n) || rb_scrub_entropy(in + v, n) < ENTROPY_MIN)
		return false;
	for (size_t k = 0; k < sizeof stopwords / sizeof stopwords[0]; k++)
		if (ci_contains((const char *)in + v, n, stopwords[k]))
			return false;
	*vs = v;
	*ve = e;
	return true;
}

void rb_scrub_keywords_scan(const unsigned char *in, size_t len, struct rb_scrub_spans *sp)
{
	const unsigned char *end = in + len;
	const unsigned char *colon = memchr(in, ':', len), *eq = memchr(in, '=', len);
	while (colon || eq) {
		const unsigned char *q = !eq || (colon && colon < eq) ? colon : eq;
		size_t vs, ve;
		if (keyword_value(in, len, (size_t)(q - in), &vs, &ve))
			rb_scrub_spans_push(sp, vs, ve, RB_SR_GENERIC, RB_SCRUB_PASS_KEYWORD);
		if (q == colon)
			colon = memchr(q + 1, ':', (size_t)(end - q - 1));
		else
			eq = memchr(q + 1, '=', (size_t)(end - q - 1));
	}
}

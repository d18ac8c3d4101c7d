/* The scrubber's keyword pass (pass 3): a value after a key that names a secret, in the shapes
 * config and code take (KEY=v, key: v, "key": "v", key := v, <key>v</key>, a name and its
 * value a line apart, Password=...; in a connection string), when the value looks random. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "scrub/internal.h"

#define cls rb_scrub_cls

enum strength { KEY_NONE, KEY_WEAK, KEY_STRONG };

/* Words in a key that name a secret; strong ones (a password, a token) allow shorter values. */
#define KEYWORD(word, strength)                                                                                        \
	{                                                                                                              \
		word, sizeof(word) - 1, strength                                                                       \
	}
static const struct {
	const char *w;
	size_t n; /* strlen(w) */
	enum strength s;
} keywords[] = {
    KEYWORD("pass", KEY_STRONG),  KEYWORD("pwd", KEY_STRONG),     KEYWORD("secret", KEY_STRONG),
    KEYWORD("token", KEY_STRONG), KEYWORD("key", KEY_WEAK),       KEYWORD("auth", KEY_WEAK),
    KEYWORD("cred", KEY_WEAK),    KEYWORD("signature", KEY_WEAK),
};
#define N_WORDS (sizeof keywords / sizeof keywords[0])

/* What follows the keyword in a key that names something else: the secret's URL, file, id,
 * length, ... ("token_url", "password_file", "key_id", "auth_type"). */
static const char *const not_secret_tails[] = {
    "url",   "uri",    "path",   "file",     "dir",     "name",  "type",   "_id",   "count",   "len",   "size",
    "ttl",   "expir",  "header", "endpoint", "host",    "env",   "format", "algo",  "method",  "mode",  "field",
    "label", "hint",   "prompt", "policy",   "pattern", "regex", "usage",  "limit", "version", "store", "cache",
    "kind",  "prefix", "length", "timeout",  "number",  "index", "column", "hash",  "words",
};
/* Keys that name something public or a form, not a secret. */
static const char *const not_secret_keys[] = {"public", "pubkey",  "pub_key", "keyboard", "keyword", "keystroke",
                                              "monkey", "turkey",  "hockey",  "donkey",   "forgot",  "tokeniz",
                                              "bypass", "passage", "compass", "passenger"};

#define KEY_MAX      64
#define VALUE_MAX    4096  /* an element's text, a connection string's password */
#define LONG_MAX_    65536 /* a value after a key: 1Password tokens and others pass 4096 */
#define LOOKBACK_MAX 150   /* a "name" before its "value": within the stream's lookbehind */

/* s[0..m) equals the lower-case word w in any case (ASCII). */
static inline bool eq_lower(const unsigned char *s, const char *w, size_t m)
{
	for (size_t k = 0; k < m; k++)
		if ((unsigned char)((cls[s[k]] & RB_C_UP) ? s[k] + 32 : s[k]) != (unsigned char)w[k])
			return false;
	return true;
}

/* hay holds the lower-case needle in any case. */
static bool ci_has(const unsigned char *hay, size_t n, const char *needle)
{
	size_t m = strlen(needle);
	for (size_t i = 0; i + m <= n; i++)
		if (eq_lower(hay + i, needle, m))
			return true;
	return false;
}

/* Whether what follows a keyword in a key names something other than a secret. */
static bool names_else(const char *tail)
{
	for (size_t t = 0; *tail && t < sizeof not_secret_tails / sizeof not_secret_tails[0]; t++)
		if (strstr(tail, not_secret_tails[t]))
			return true;
	return false;
}

/* How strongly key k[0..n) (lower case, '-' as '_') names a secret. */
static enum strength key_strength(const char *k)
{
	enum strength best = KEY_NONE;
	for (size_t w = 0; w < N_WORDS; w++) {
		const char *hit = k, *last = NULL;
		while ((hit = strstr(hit, keywords[w].w)) != NULL)
			last = hit++;
		if (!last)
			continue;
		const char *tail = last + keywords[w].n;
		if (strlen(tail) > 16)
			continue;
		if (!names_else(tail) && keywords[w].s > best)
			best = keywords[w].s;
	}
	for (size_t i = 0; best != KEY_NONE && i < sizeof not_secret_keys / sizeof not_secret_keys[0]; i++)
		if (strstr(k, not_secret_keys[i]))
			return KEY_NONE;
	return best;
}

static bool key_byte(unsigned char c)
{
	return (cls[c] & (RB_C_ALNUM | RB_C_US | RB_C_DASH | RB_C_DOT)) != 0;
}

/* The key [ks, ke) in lower case, '-' as '_', as key_before makes it. */
static void key_lower(const unsigned char *in, size_t ks, size_t ke, char *key)
{
	for (size_t i = ks; i < ke; i++)
		*key++ = in[i] == '-' ? '_' : (char)((cls[in[i]] & RB_C_UP) ? in[i] + 32 : in[i]);
	*key = '\0';
}

/* The key that ends before position k (after the quotes, brackets and spaces between it and
 * its separator): [*ks, *ke). Returns its strength. */
static enum strength key_before(const unsigned char *in, size_t k, size_t *ks, char *lower, size_t *n_out)
{
	for (int skip = 0; skip < 6 && k > 0 && strchr(" \t\"'`]\\?:+)", in[k - 1]) && in[k - 1]; skip++)
		k--;
	size_t s = k;
	while (s > 0 && k - s < KEY_MAX && key_byte(in[s - 1]))
		s--;
	size_t n = k - s;
	*ks = s;
	*n_out = n;
	if (n < 3)
		return KEY_NONE;
	key_lower(in, s, k, lower);
	return key_strength(lower);
}

/* A key such as "value" whose name came before it: {"name": "api_key", "value": "..."},
 * <add key="Password" value="..."/>, or a YAML "- name: TOKEN" with "value:" below. */
static bool value_key(const char *k)
{
	static const char *const v[] = {"value", "val", "default", "defaultvalue", "secretvalue", "data", "content"};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
		if (strcmp(k, v[i]) == 0)
			return true;
	return false;
}

static enum strength named_before(const unsigned char *in, size_t ks)
{
	size_t lo = ks > LOOKBACK_MAX ? ks - LOOKBACK_MAX : 0, s = ks;
	int newlines = 0;
	while (s > lo && !strchr("{}<>[", in[s - 1]) && in[s - 1]) {
		if (in[s - 1] == '\n' && ++newlines == 2)
			break;
		s--;
	}
	enum strength best = KEY_NONE;
	char word[KEY_MAX + 1];
	for (size_t i = s; i < ks;) {
		if (!key_byte(in[i])) {
			i++;
			continue;
		}
		size_t j = i;
		while (j < ks && key_byte(in[j]) && j - i < KEY_MAX)
			j++;
		size_t n = j - i;
		for (size_t c = 0; c < n; c++)
			word[c] =
			    in[i + c] == '-' ? '_' : (char)((cls[in[i + c]] & RB_C_UP) ? in[i + c] + 32 : in[i + c]);
		word[n] = '\0';
		static const char *const fields[] = {"name", "key", "id", "type", "label", "value"};
		bool field = false;
		for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
			field |= strcmp(word, fields[f]) == 0;
		if (!field) {
			enum strength st = key_strength(word);
			if (st > best)
				best = st;
		}
		i = j;
	}
	return best;
}

/* Looks like words or an identifier, not a random string: only lower case (with _ and -),
 * only upper case (CONSTANT_NAME), CamelCaseWords without digits (at most one capital
 * followed by another: "IsARealKey"). */
static bool wordlike(const unsigned char *v, size_t n)
{
	unsigned have = 0, upup = 0;
	for (size_t i = 0; i < n; i++) {
		have |= cls[v[i]];
		if ((cls[v[i]] & RB_C_UP) && i + 1 < n && (cls[v[i + 1]] & RB_C_UP))
			upup++;
	}
	if (!(have & (RB_C_UP | RB_C_DIG)) || !(have & (RB_C_LO | RB_C_DIG)))
		return true;
	return !(have & (RB_C_DIG | RB_C_PLUS | RB_C_SLASH | RB_C_EQ | RB_C_SYM | RB_C_TILDE | RB_C_AT | RB_C_PCT)) &&
	       upup <= 1;
}

/* Base64 that happens to start with '/' (an Azure Redis key), not a path: 20 bytes or more
 * of the base64 alphabet with a '+' or '=' padding, which paths seldom hold. */
static bool base64_value(const unsigned char *v, size_t n)
{
	bool plus = false;
	for (size_t i = 0; i < n; i++) {
		if (!(cls[v[i]] & (RB_C_ALNUM | RB_C_PLUS | RB_C_SLASH | RB_C_EQ)))
			return false;
		plus |= v[i] == '+';
	}
	return n >= 20 && (plus || v[n - 1] == '=');
}

/* A reference in code or a name, not a value: settings.SECRET_KEY, os.environ, a path, a URL,
 * an e-mail address, a number or a date. */
static bool not_a_value(const unsigned char *v, size_t n, bool uuid_secret)
{
	if (memmem(v, n, "://", 3))
		return true;
	if ((v[0] == '/' && !base64_value(v, n)) || (n > 1 && v[0] == '.' && v[1] == '/') ||
	    (n > 1 && v[0] == '~' && v[1] == '/'))
		return true;
	if (strchr("$%{<@&*", v[0]) || (n > 2 && v[1] == ':' && v[2] == '\\'))
		return true;
	bool numeric = true;
	for (size_t i = 0; i < n && numeric; i++)
		numeric = (cls[v[i]] & RB_C_DIG) || strchr(".-:/", v[i]);
	if (numeric && n < 16)
		return true;
	/* a UUID names a thing (a request, a tenant, a client), it is no key; but under a
	 * password, a token or an API key it is one (Heroku API keys, legacy npm tokens) */
	if (n == 36 && !uuid_secret && v[8] == '-' && v[13] == '-' && v[18] == '-' && v[23] == '-') {
		bool uuid = true;
		for (size_t i = 0; i < n && uuid; i++)
			uuid = (i == 8 || i == 13 || i == 18 || i == 23) ||
			       (cls[v[i]] & (RB_C_DIG | RB_C_HEXLO | RB_C_HEXUP));
		if (uuid)
			return true;
	}
	/* dotted identifiers: every part a word (self.token_value, process.env.API_KEY) */
	size_t parts = 0, words = 0, at = 0;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || v[i] == '.') {
			if (i > at) {
				parts++;
				words += wordlike(v + at, i - at) && !(cls[v[at]] & RB_C_DIG);
			}
			at = i + 1;
		}
	}
	if (parts == words)
		return true;
	/* user@host.tld */
	const unsigned char *a = memchr(v, '@', n);
	if (a && memchr(a, '.', n - (size_t)(a - v)) && !memchr(v, ':', n)) {
		bool mail = true;
		for (size_t i = 0; i < n && mail; i++)
			mail = (cls[v[i]] & (RB_C_ALNUM | RB_C_DOT | RB_C_US | RB_C_DASH | RB_C_AT | RB_C_PLUS));
		if (mail)
			return true;
	}
	return ci_has(v, n, "password") && n < 40;
}

/* Does a key (lower case, '_' for '-') make a UUID under it a secret? A strong keyword or
 * an API key does (HEROKU_API_KEY, _authToken); request_id, trace_id, key_id do not. */
static bool uuid_key(const char *key, enum strength st)
{
	return st == KEY_STRONG || strstr(key, "api_key") || strstr(key, "apikey");
}

/* Bytes of an unquoted value. */
static bool bare_byte(unsigned char c)
{
	return (cls[c] & (RB_C_ALNUM | RB_C_US | RB_C_DASH | RB_C_PLUS | RB_C_SLASH | RB_C_EQ | RB_C_DOT | RB_C_TILDE |
	                  RB_C_AT | RB_C_PCT)) ||
	       (c && strchr("!#$*^|?:", c));
}

static unsigned char_classes(const unsigned char *v, size_t n)
{
	unsigned have = 0;
	for (size_t i = 0; i < n; i++)
		have |= cls[v[i]];
	return !!(have & RB_C_UP) + !!(have & RB_C_LO) + !!(have & RB_C_DIG) + !!(have & ~RB_C_ALNUM);
}

/* Is v[0..n) a secret's value, for a key of strength st? */
static bool secret_value(const unsigned char *v, size_t n, enum strength st, bool connstr, bool uuid_secret)
{
	if (n == 0 || n > LONG_MAX_)
		return false;
	if (n < (st == KEY_STRONG ? 8U : 16U) && !(connstr && n >= 6))
		return false;
	if (not_a_value(v, n, uuid_secret) || rb_scrub_placeholder(v, n))
		return false;
	if (wordlike(v, n) && !(n >= 32 && rb_scrub_entropy(v, n) >= 4.0))
		return false;
	double h = rb_scrub_entropy(v, n);
	if (n >= 16)
		return h >= 3.0;
	return connstr ? h >= 2.3 : char_classes(v, n) >= 3 && h >= 2.5;
}

/* The value after a separator that ends at q (exclusive: the value's search starts at q):
 * *vs, *ve; false when there is none on this line or the next. */
/* What one scan remembers so that no byte is looked at more than a bounded number of times
 * when separators follow each other inside one long run ("a:a:a:...", "k=k=k=..."): the
 * last run of bare value bytes, and the end of the last value judged. */
struct kw_scan {
	size_t run_start, run_end;
	size_t judged_end;
	size_t word_end; /* the end of the key at_word looked at last */
	bool have_run, have_judged;
};

/* A YAML block scalar's lines after its first (which ends at e, a line break): the lines
 * indented at least as far as the first (ind bytes), each one run of value bytes; the end
 * of the last, or e when there are none. */
static size_t block_end(const unsigned char *in, size_t len, size_t e, size_t ind, size_t first)
{
	size_t end = e, at = e;
	while (at < len && at - first <= LONG_MAX_) {
		if (in[at] == '\r')
			at++;
		if (at >= len || in[at] != '\n')
			break;
		size_t l = at + 1, c = l;
		while (c < len && c - l < ind && in[c] == ' ')
			c++;
		if (c - l < ind || c >= len || !bare_byte(in[c]))
			break; /* less indented: the next key; or not a value's line */
		size_t r = c;
		while (r < len && bare_byte(in[r]))
			r++;
		if (r < len && in[r] != '\n' && in[r] != '\r')
			break; /* words with spaces: text, not a secret's lines */
		end = at = r;
	}
	return end;
}

static bool value_at(struct kw_scan *ks_, const unsigned char *in, size_t len, size_t q, bool may_wrap, size_t *vs,
                     size_t *ve, bool *quoted, size_t *blk)
{
	size_t v = q;
	bool block = false;
	*blk = 0;
	while (v < len && (in[v] == ' ' || in[v] == '\t') && v - q < 16)
		v++;
	if (may_wrap && v < len && (in[v] == '|' || in[v] == '>')) { /* a YAML block scalar */
		v++;
		if (v < len && (in[v] == '-' || in[v] == '+'))
			v++;
		block = true;
	}
	if (may_wrap && v < len && (in[v] == '\n' || in[v] == '\r')) { /* the value on the next line */
		size_t w = v;
		while (w < len && w - v < 40 && (in[w] == '\r' || in[w] == '\n' || in[w] == ' ' || in[w] == '\t'))
			w++;
		if (w - v < 2) /* an indented line only: a name at the line's start is the next key */
			return false;
		v = w;
	} else {
		block = false; /* "key: |text" is no block */
	}
	for (int skip = 0; skip < 2 && v < len && in[v] == '\\'; skip++)
		v++;
	unsigned char qc = 0;
	if (v < len && (in[v] == '"' || in[v] == '\'' || in[v] == '`'))
		qc = in[v++];
	/* Authorization: Bearer <token> */
	static const char *const schemes[] = {"bearer ", "basic ", "token ", "ssws ", "apikey ", "key ", "digest "};
	for (size_t k = 0; k < sizeof schemes / sizeof schemes[0] && v < len; k++) {
		size_t sl = strlen(schemes[k]);
		if ((in[v] | 0x20) == schemes[k][0] && len - v > sl &&
		    strncasecmp((const char *)in + v, schemes[k], sl) == 0) {
			v += sl;
			break;
		}
	}
	size_t e = v;
	if (qc) {
		while (e < len && e - v <= LONG_MAX_ && in[e] != qc && in[e] > ' ' && in[e] < 0x7f &&
		       !(in[e] == '\\' && e + 1 < len && in[e + 1] == qc))
			e++;
		if (e >= len || (in[e] != qc && in[e] != '\\')) /* a phrase, or no end */
			return false;
	} else {
		if (!ks_->have_run || v < ks_->run_start || v > ks_->run_end) {
			size_t r = v;
			while (r < len && bare_byte(in[r]))
				r++;
			ks_->run_start = v;
			ks_->run_end = r;
			ks_->have_run = true;
		}
		e = ks_->run_end - v > LONG_MAX_ ? v + LONG_MAX_ + 1 : ks_->run_end;
		if (e < len && in[e] == '(') /* token = getTokenFromEnvironment() */
			return false;
		if (block && e == ks_->run_end && (e == len || in[e] == '\n' || in[e] == '\r')) {
			size_t ls = v;
			while (ls > q && in[ls - 1] != '\n')
				ls--;
			if (ls > q) /* the first line's indentation, which the others keep */
				*blk = block_end(in, len, e, v - ls, v);
		}
		while (e > v && strchr(".:,?!", in[e - 1])) /* the sentence's punctuation */
			e--;
	}
	*vs = v;
	*ve = e;
	*quoted = qc != 0;
	return e > v;
}

/* One separator: '=' or ':' at q, or " - " with '-' at q. */
static void at_separator(struct kw_scan *kw, const unsigned char *in, size_t len, size_t q, struct rb_scrub_spans *sp)
{
	size_t after = q + 1;
	unsigned char c = in[q];
	if (c == '=') {
		if (after < len && (in[after] == '=' || in[after] == '>'))
			after++;
		if (q > 0 && (in[q - 1] == '=' || in[q - 1] == '!' || in[q - 1] == '<' || in[q - 1] == '>'))
			return; /* the second byte of ==, !=, <=, >= */
	} else if (c == ':') {
		if (after < len && in[after] == '=')
			after++;
		else if ((after < len && (in[after] == ':' || in[after] == '/')) || (q > 0 && in[q - 1] == ':'))
			return; /* a::b (either colon), scheme:// */
	} else {                /* " - " */
		if (q == 0 || in[q - 1] != ' ' || after >= len || in[after] != ' ')
			return;
	}
	size_t vs, ve, blk;
	bool quoted;
	if (!value_at(kw, in, len, after, c == ':' || c == '=', &vs, &ve, &quoted, &blk))
		return;
	size_t n = ve - vs;
	if (n < 6 || n > LONG_MAX_)
		return;
	size_t ks, kn;
	char key[KEY_MAX + 1];
	enum strength st = key_before(in, q, &ks, key, &kn);
	if (ks >= 2 && in[ks - 1] == '/' && in[ks - 2] == '/')
		return; /* scheme://user:password@host: the URL rule's */
	if (st == KEY_NONE && kn >= 3 && value_key(key))
		st = named_before(in, ks);
	if (st == KEY_NONE && c == '=' && ks >= 2 && in[ks - 1] == ' ' && in[ks - 2] == ':') {
		size_t ks2, kn2; /* a typed name: API_KEY: str = "...", apiKey: string = "..." */
		st = key_before(in, ks - 2, &ks2, key, &kn2);
	}
	if (st == KEY_NONE)
		return;
	/* Password=...; in a connection string: the value ends at ';' or the key follows one */
	bool connstr = c == '=' && !quoted &&
	               (strcmp(key, "password") == 0 || strcmp(key, "pwd") == 0 || strcmp(key, "pass") == 0 ||
	                strcmp(key, "user_password") == 0) &&
	               ((ve < len && in[ve] == ';') || (ks > 0 && in[ks - 1] == ';') ||
	                (ks > 1 && in[ks - 1] == ' ' && in[ks - 2] == ';'));
	if (connstr) {
		/* the value runs to the ';': a password may hold what ends a bare value elsewhere */
		size_t e = vs;
		while (e < len && e - vs <= VALUE_MAX && in[e] != ';' && in[e] > ' ' && in[e] < 0x7f && in[e] != '"' &&
		       in[e] != '\'')
			e++;
		ve = e;
		n = ve - vs;
	}
	/* a suffix of a bare value judged already (k=k=k=...) is not judged again */
	if (!quoted && !connstr && kw->have_judged && ve == kw->judged_end)
		return;
	if (!quoted && !connstr) {
		kw->judged_end = ve;
		kw->have_judged = true;
	}
	if (!secret_value(in + vs, n, st, connstr, uuid_key(key, st)))
		return;
	if (!connstr && blk > ve) /* key: | and a secret's lines: all of them */
		ve = blk;
	rb_scrub_spans_push(sp, vs, ve, connstr ? RB_SR_CONNSTR : RB_SR_GENERIC, RB_SCRUB_PASS_KEYWORD);
}

static bool blank(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Shapes with no separator the pass scans for, found from a keyword at w inside the key:
 * - a quoted key, a comma, a quoted value: define('DB_PASSWORD', '...'), getenv("API_KEY",
 *   "..."), ["token", "..."];
 * - a key and its value one space apart: a long option (--api-key VALUE, --password 'VALUE'),
 *   a Dockerfile's ENV KEY VALUE at a line's start, a .netrc's password VALUE after its login. */
static void at_word(struct kw_scan *kw, const unsigned char *in, size_t len, size_t w, struct rb_scrub_spans *sp)
{
	size_t ke = w;
	while (ke < len && ke - w < KEY_MAX && key_byte(in[ke]))
		ke++;
	if (ke + 3 >= len || ke == kw->word_end)
		return;
	bool pair = (in[ke] == '"' || in[ke] == '\'') && in[ke + 1] == ',';
	if (!pair && (in[ke] != ' ' || in[ke + 1] == '-' || in[ke + 1] == ' '))
		return; /* no shape; the next option, or a space that is no separator */
	size_t ks = w;
	while (ks > 0 && ke - ks < KEY_MAX && key_byte(in[ks - 1]))
		ks--;
	kw->word_end = ke; /* a key holding two keywords (SECRET_TOKEN) is looked at once */
	size_t v = ke + 1;
	if (pair) {
		if (ks == 0 || in[ks - 1] != in[ke])
			return; /* the key itself is what the quotes hold */
		for (v = ke + 2; v < len && in[v] == ' ' && v - ke < 6;)
			v++;
		if (v >= len || (in[v] != '"' && in[v] != '\''))
			return;
	} else {
		if (ks > 0 && !blank(in[ks - 1]))
			return;
		bool flag = ke - ks > 4 && in[ks] == '-' && in[ks + 1] == '-' && in[ks + 2] != '-';
		bool env = !flag && ks >= 4 && memcmp(in + ks - 4, "ENV ", 4) == 0 && (ks == 4 || in[ks - 5] == '\n');
		size_t lo = ks > LOOKBACK_MAX ? ks - LOOKBACK_MAX : 0;
		bool netrc = !flag && !env &&
		             ((ke - ks == 8 && memcmp(in + ks, "password", 8) == 0) ||
		              (ke - ks == 6 && memcmp(in + ks, "passwd", 6) == 0)) &&
		             ks - lo >= 6 && memmem(in + lo, ks - lo, "login ", 6);
		if (!flag && !env && !netrc)
			return;
		if (flag)
			ks += 2;
	}
	char key[KEY_MAX + 1];
	key_lower(in, ks, ke, key);
	enum strength st = key_strength(key);
	if (st == KEY_NONE)
		return;
	size_t vs, ve, blk;
	bool quoted;
	if (!value_at(kw, in, len, v, false, &vs, &ve, &quoted, &blk) || (pair && !quoted))
		return;
	if (!quoted && ve < len && !blank(in[ve]))
		return; /* a bare value ends where its word does */
	if (secret_value(in + vs, ve - vs, st, false, uuid_key(key, st)))
		rb_scrub_spans_push(sp, vs, ve, RB_SR_GENERIC, RB_SCRUB_PASS_KEYWORD);
}

/* <password>value</password>, <string name="api_key">value</string>: '>' at q. */
static void at_element(const unsigned char *in, size_t len, size_t q, struct rb_scrub_spans *sp)
{
	if (q == 0 || in[q - 1] == '/' || in[q - 1] == '-' || in[q - 1] == '?')
		return;
	size_t lt = q;
	while (lt > 0 && q - lt < 160 && in[lt - 1] != '<' && in[lt - 1] != '>')
		lt--;
	if (lt == 0 || in[lt - 1] != '<' || lt >= q || !(cls[in[lt]] & (RB_C_UP | RB_C_LO)))
		return;
	size_t v = q + 1;
	while (v < len && v - q < 40 && (in[v] == ' ' || in[v] == '\t' || in[v] == '\r' || in[v] == '\n'))
		v++;
	size_t e = v;
	if (len - v >= 9 && memcmp(in + v, "<![CDATA[", 9) == 0) {
		/* <password><![CDATA[...]]></password>: the section's bytes, up to "]]>" */
		v += 9;
		size_t lim = len - v < VALUE_MAX ? len - v : VALUE_MAX;
		const unsigned char *end = memmem(in + v, lim, "]]>", 3);
		if (!end)
			return;
		e = (size_t)(end - in);
		for (size_t k = v; k < e; k++)
			if (in[k] <= ' ' || in[k] >= 0x7f)
				return; /* a phrase or a blob, not a value */
		if (e - v < 8)
			return;
	} else {
		while (e < len && e - v <= VALUE_MAX && in[e] > ' ' && in[e] < 0x7f && in[e] != '<')
			e++;
		if (e - v < 8 || (e < len && in[e] != '<' && in[e] > ' '))
			return;
	}
	/* the element's name, or a name="..." / key="..." attribute */
	size_t ne = lt;
	while (ne < q && key_byte(in[ne]))
		ne++;
	char key[KEY_MAX + 1];
	size_t kn, ks;
	enum strength st = key_before(in, ne, &ks, key, &kn);
	if (st == KEY_NONE && ne < q)
		st = named_before(in, q); /* the attributes, within the tag (the window stops at '<') */
	if (st == KEY_NONE || !secret_value(in + v, e - v, st, false, uuid_key(key, st)))
		return;
	rb_scrub_spans_push(sp, v, e, RB_SR_GENERIC, RB_SCRUB_PASS_KEYWORD);
}

/* Every key, typed name, "name" before a "value" and element tag the pass reads for a
 * separator lies within this many bytes before it (key_before: 6 + KEY_MAX, twice for a
 * typed name; named_before: LOOKBACK_MAX more; at_element: its tag's 160): separators with
 * no keyword in reach name nothing, and are never looked at. */
#define KW_REACH 256
_Static_assert(N_WORDS <= 8, "a prefilter bucket per keyword");

void rb_scrub_keywords_init(struct rb_scrub_rule_tables *t)
{
	for (size_t w = 0; w < N_WORDS; w++) {
		const unsigned char *k = (const unsigned char *)keywords[w].w;
		for (unsigned v = 0; v < 8; v++) /* every case of the first three letters */
			rb_scrub_prefilter_add(&t->keywords, (v & 1) ? k[0] - 32 : k[0], (v & 2) ? k[1] - 32 : k[1],
			                       (v & 4) ? k[2] - 32 : k[2], (unsigned)w);
	}
	rb_scrub_prefilter_done(&t->keywords);
}

/* The first keyword (any case) starting at or after i, or len. */
static size_t next_word(const struct rb_scrub_rule_tables *t, struct rb_scrub_pf_cursor *cur, const unsigned char *in,
                        size_t i, size_t len)
{
	while ((i = rb_scrub_prefilter_next_at(&t->keywords, cur, in, i, len)) < len) {
		for (size_t w = 0; w < N_WORDS; w++)
			if ((in[i] | 0x20) == keywords[w].w[0] && len - i >= keywords[w].n &&
			    eq_lower(in + i, keywords[w].w, keywords[w].n))
				return i;
		i++;
	}
	return len;
}

/* The separators in [lo, hi), in order. */
static void separators(struct kw_scan *kw, const unsigned char *in, size_t len, size_t lo, size_t hi,
                       struct rb_scrub_spans *sp)
{
	static const unsigned char seps[4] = {':', '=', '>', '-'};
	const unsigned char *next[4];
	for (int k = 0; k < 4; k++)
		next[k] = memchr(in + lo, seps[k], hi - lo);
	for (;;) {
		int m = -1;
		for (int k = 0; k < 4; k++)
			if (next[k] && (m < 0 || next[k] < next[m]))
				m = k;
		if (m < 0)
			break;
		size_t q = (size_t)(next[m] - in);
		if (seps[m] == '>')
			at_element(in, len, q, sp);
		else
			at_separator(kw, in, len, q, sp);
		next[m] = q + 1 < hi ? memchr(in + q + 1, seps[m], hi - q - 1) : NULL;
	}
}

void rb_scrub_keywords_scan(const struct rb_scrub_rule_tables *t, const unsigned char *in, size_t len,
                            struct rb_scrub_spans *sp)
{
	struct kw_scan kw = {.word_end = SIZE_MAX};
	struct rb_scrub_pf_cursor cur = {0};
	size_t w = next_word(t, &cur, in, 0, len);
	while (w < len) {
		at_word(&kw, in, len, w, sp);
		/* the separators after this keyword and the ones within its reach */
		size_t lo = w + 1, hi = len - w > KW_REACH ? w + KW_REACH + 1 : len;
		size_t nw = next_word(t, &cur, in, w + 1, len);
		while (nw < hi) {
			at_word(&kw, in, len, nw, sp);
			hi = len - nw > KW_REACH ? nw + KW_REACH + 1 : len;
			nw = next_word(t, &cur, in, nw + 1, len);
		}
		separators(&kw, in, len, lo, hi, sp);
		w = nw;
	}
}

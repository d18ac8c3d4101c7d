/* scrub/scrub.c: every planted secret (each format, the run token and a policy secret in
 * each encoding) is gone from the output with the right count by rule, while ordinary text
 * comes out byte for byte; near misses stay; binary and hostile input neither crash nor hang.
 * Tokens are synthesised from templates in tests/unit/fixtures/scrub (see its README). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "scrub/internal.h"
#include "scrub/scrub.h"

/* ---- deterministic synthesis ---------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next_rand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static const char UPNUM[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
static const char ALNUM[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
static const char ALNUM_UD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
static const char LETTERS[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
static const char DIGITS[] = "0123456789";
static const char B64CH[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Appends n random bytes of set to s. */
static void rnd(char *s, const char *set, size_t n)
{
	size_t l = strlen(s), m = strlen(set);
	for (size_t i = 0; i < n; i++)
		s[l + i] = set[next_rand() % m];
	s[l + n] = '\0';
}

/* A random alphanumeric string with at least one digit, upper and lower case letter, so it
 * is not mistaken for words. */
static void rnd_mixed(char *s, size_t n)
{
	size_t l = strlen(s);
	rnd(s, ALNUM, n - 3);
	strcat(s, "7q");
	s[l + n - 1] = 'Z';
	s[l + n] = '\0';
}

/* Independent encoders (OpenSSL's base64, jansson's JSON), so the test does not check the
 * scrubber's encoders against themselves. */
static char *b64_of(const void *in, size_t n, bool url, bool pad)
{
	char *o = malloc(4 * (n / 3 + 2) + 1);
	EVP_EncodeBlock((unsigned char *)o, in, (int)n);
	size_t l = strlen(o);
	if (!pad)
		while (l && o[l - 1] == '=')
			o[--l] = '\0';
	if (url)
		for (char *c = o; *c; c++)
			*c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
	return o;
}

static char *hex_of(const char *s, bool upper)
{
	size_t n = strlen(s);
	char *o = malloc(2 * n + 1);
	for (size_t i = 0; i < n; i++)
		sprintf(o + 2 * i, upper ? "%02X" : "%02x", (unsigned char)s[i]);
	return o;
}

static char *url_of(const char *s, bool upper, bool form)
{
	char *o = malloc(3 * strlen(s) + 1), *w = o;
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", *c))
			*w++ = (char)*c;
		else if (form && *c == ' ')
			*w++ = '+';
		else
			w += sprintf(w, upper ? "%%%02X" : "%%%02x", *c);
	}
	*w = '\0';
	return o;
}

static char *json_of(const char *s, size_t flags)
{
	json_t *j = json_string(s);
	char *d = json_dumps(j, JSON_ENCODE_ANY | flags);
	json_decref(j);
	size_t l = strlen(d);
	memmove(d, d + 1, l - 2); /* strip the quotes */
	d[l - 2] = '\0';
	return d;
}

/* ---- the secrets the scrubber is told about --------------------------------------------- */

static char run_token[200];
static const char dbpass[] = "Tr0ub4dor&3 \"horse\\stap/le+\xc3\xa9?~>"; /* '"', '\\', '/', '+', ' ', é; '?' makes
                                                                            base64 differ from base64url */

static void make_token(void)
{
	unsigned char raw[48];
	for (size_t i = 0; i < sizeof raw; i++)
		raw[i] = (unsigned char)next_rand();
	char *a = b64_of(raw, 36, true, false), *b = b64_of(raw + 36, 12, true, false);
	snprintf(run_token, sizeof run_token, "rbx1.%s.%s", a, b);
	free(a);
	free(b);
}

static struct rb_scrubber *new_scrubber(void)
{
	struct rb_scrub_secret sec[] = {
	    {"run-token", run_token, strlen(run_token)},
	    {"db-password", dbpass, strlen(dbpass)},
	};
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	if (rb_scrub_new_labeled(sec, 2, &s, &err) != 0)
		fail_msg("rb_scrub_new_labeled: %s", err.msg);
	return s;
}

/* ---- planted items ------------------------------------------------------------------------ */

struct planted {
	char text[4096];   /* what replaces the placeholder */
	char probe[512];   /* what must be absent from the output */
	char expect[4096]; /* what the output must hold in its place */
	char rule[RB_SCRUB_RULE_MAX];
};

/* The encoding name the scrubber gives a form: the first of raw, base64, base64url, hex, url,
 * json whose form of the secret equals text (the scrubber keeps one name per distinct form). */
static const char *encoding_of(const char *secret, const char *text)
{
	size_t n = strlen(secret);
	char *forms[][9] = {
	    {strdup(secret)},
	    {b64_of(secret, n, false, true), b64_of(secret, n, false, false)},
	    {b64_of(secret, n, true, true), b64_of(secret, n, true, false)},
	    {hex_of(secret, false), hex_of(secret, true)},
	    {url_of(secret, false, false), url_of(secret, true, false), url_of(secret, true, true)},
	    {json_of(secret, 0), json_of(secret, JSON_ENSURE_ASCII), json_of(secret, JSON_ESCAPE_SLASH)},
	};
	static const char *names[] = {"raw", "base64", "base64url", "hex", "url", "json"};
	const char *found = NULL;
	for (size_t i = 0; i < 6; i++)
		for (size_t k = 0; k < 9 && forms[i][k]; k++) {
			if (!found && strcmp(forms[i][k], text) == 0)
				found = names[i];
			free(forms[i][k]);
		}
	return found;
}

/* base64 of pre + secret + post: the characters that hold only the secret's bits are the
 * probe; the expected output keeps the characters around them. */
static void embed_b64(struct planted *p, const char *label, const char *secret, const char *pre, const char *post)
{
	size_t a = strlen(pre), n = strlen(secret);
	char buf[512];
	snprintf(buf, sizeof buf, "%s%s%s", pre, secret, post);
	char *e = b64_of(buf, strlen(buf), false, true);
	size_t first = (8 * a + 5) / 6, last = 8 * (a + n) / 6;
	if (a % 3 == 0) { /* aligned: the secret's own encoding may match one or three more chars */
		char *alone[] = {b64_of(secret, n, false, true), b64_of(secret, n, false, false)};
		for (int k = 0; k < 2; k++) {
			size_t al = strlen(alone[k]);
			if (last < first + al && strncmp(e + first, alone[k], al) == 0)
				last = first + al;
			free(alone[k]);
		}
	}
	snprintf(p->text, sizeof p->text, "%s", e);
	snprintf(p->probe, sizeof p->probe, "%.*s", (int)(last - first), e + first);
	snprintf(p->rule, sizeof p->rule, "exact:%s:base64", label);
	snprintf(p->expect, sizeof p->expect, "%.*s[REDACTED:%s]%s", (int)first, e, p->rule, e + last);
	free(e);
}

static int exact_item(struct planted *p, const char *label, const char *secret, const char *enc)
{
	size_t n = strlen(secret);
	char *t = NULL;
	if (strcmp(enc, "raw") == 0)
		t = strdup(secret);
	else if (strcmp(enc, "base64") == 0)
		t = b64_of(secret, n, false, true);
	else if (strcmp(enc, "base64-nopad") == 0)
		t = b64_of(secret, n, false, false);
	else if (strcmp(enc, "base64url") == 0)
		t = b64_of(secret, n, true, false);
	else if (strcmp(enc, "hex") == 0)
		t = hex_of(secret, false);
	else if (strcmp(enc, "HEX") == 0)
		t = hex_of(secret, true);
	else if (strcmp(enc, "url") == 0)
		t = url_of(secret, false, false);
	else if (strcmp(enc, "URL") == 0)
		t = url_of(secret, true, false);
	else if (strcmp(enc, "form") == 0)
		t = url_of(secret, true, true);
	else if (strcmp(enc, "json") == 0)
		t = json_of(secret, 0);
	else if (strcmp(enc, "json-ascii") == 0)
		t = json_of(secret, JSON_ENSURE_ASCII);
	if (t) {
		snprintf(p->text, sizeof p->text, "%s", t);
		snprintf(p->probe, sizeof p->probe, "%s", t);
		const char *e = encoding_of(secret, t);
		free(t);
		if (!e)
			return -1;
		snprintf(p->rule, sizeof p->rule, "exact:%s:%s", label, e);
		snprintf(p->expect, sizeof p->expect, "[REDACTED:%s]", p->rule);
		return 0;
	}
	if (strncmp(enc, "b64-in-", 7) == 0) { /* 1, 2, 3 bytes before: the three alignments */
		static const char *pres[] = {"x", "xy", "xyz"};
		int k = enc[7] - '1';
		if (k < 0 || k > 2)
			return -1;
		embed_b64(p, label, secret, pres[k], "!?");
		return 0;
	}
	if (strcmp(enc, "echo-b64") == 0) {
		embed_b64(p, label, secret, "token=", "\n");
		return 0;
	}
	return -1;
}

static void pem(char *out, const char *label, const char *nl, const char *first)
{
	sprintf(out, "-----BEGIN %s-----%s%s", label, nl, first);
	for (int line = 0; line < 12; line++) {
		if (line)
			rnd(out, B64CH, 64);
		else
			rnd(out, B64CH, 64 - strlen(first));
		strcat(out, nl);
	}
	rnd(out, B64CH, 24);
	strcat(out, "==");
	strcat(out, nl);
	sprintf(out + strlen(out), "-----END %s-----", label);
}

/* Fills p for placeholder name; returns -1 for an unknown name. */
static int gen(const char *name, struct planted *p)
{
	char *t = p->text;
	const char *rule = NULL;
	t[0] = '\0';
	if (strncmp(name, "token:", 6) == 0)
		return exact_item(p, "run-token", run_token, name + 6);
	if (strncmp(name, "dbpass:", 7) == 0)
		return exact_item(p, "db-password", dbpass, name + 7);

	if (strcmp(name, "aws") == 0) {
		strcpy(t, "AKIA"), rnd(t, UPNUM, 16), rule = "aws-access-key-id";
	} else if (strcmp(name, "aws-sts") == 0) {
		strcpy(t, "ASIA"), rnd(t, UPNUM, 16), rule = "aws-access-key-id";
	} else if (strcmp(name, "github-pat") == 0) {
		strcpy(t, "ghp_"), rnd(t, ALNUM, 36), rule = "github-pat";
	} else if (strcmp(name, "github-oauth") == 0) {
		strcpy(t, "gho_"), rnd(t, ALNUM, 36), rule = "github-oauth";
	} else if (strcmp(name, "github-app") == 0) {
		strcpy(t, next_rand() & 1 ? "ghs_" : "ghu_"), rnd(t, ALNUM, 36), rule = "github-app-token";
	} else if (strcmp(name, "github-refresh") == 0) {
		strcpy(t, "ghr_"), rnd(t, ALNUM, 36), rule = "github-refresh-token";
	} else if (strcmp(name, "github-fine") == 0) {
		strcpy(t, "github_pat_"), rnd(t, ALNUM, 22), strcat(t, "_"), rnd(t, ALNUM, 59);
		rule = "github-fine-grained-pat";
	} else if (strcmp(name, "gitlab-pat") == 0) {
		strcpy(t, "glpat-"), rnd(t, ALNUM_UD, 20), rule = "gitlab-pat";
	} else if (strcmp(name, "gitlab-deploy") == 0) {
		strcpy(t, "gldt-"), rnd(t, ALNUM_UD, 20), rule = "gitlab-deploy-token";
	} else if (strcmp(name, "gitlab-runner") == 0) {
		strcpy(t, "glrt-"), rnd(t, ALNUM_UD, 20), rule = "gitlab-runner-token";
	} else if (strcmp(name, "gitlab-ci") == 0) {
		strcpy(t, "glcbt-64_"), rnd(t, ALNUM_UD, 20), rule = "gitlab-ci-build-token";
	} else if (strcmp(name, "slack-bot") == 0) {
		strcpy(t, "xoxb-"), rnd(t, DIGITS, 11), strcat(t, "-"), rnd(t, DIGITS, 13), strcat(t, "-");
		rnd(t, ALNUM, 24), rule = "slack-token";
	} else if (strcmp(name, "slack-user") == 0) {
		strcpy(t, "xoxp-"), rnd(t, DIGITS, 11), strcat(t, "-"), rnd(t, DIGITS, 12), strcat(t, "-");
		rnd(t, ALNUM, 32), rule = "slack-token";
	} else if (strcmp(name, "slack-app") == 0) {
		strcpy(t, "xapp-1-A"), rnd(t, UPNUM, 10), strcat(t, "-"), rnd(t, DIGITS, 13), strcat(t, "-");
		rnd(t, "0123456789abcdef", 64), rule = "slack-app-token";
	} else if (strcmp(name, "slack-webhook") == 0) {
		strcpy(t, "hooks.slack.com/services/T"), rnd(t, UPNUM, 8), strcat(t, "/B"), rnd(t, UPNUM, 10);
		strcat(t, "/"), rnd(t, ALNUM, 24), rule = "slack-webhook";
	} else if (strcmp(name, "stripe-live") == 0) {
		strcpy(t, "sk_live_"), rnd(t, ALNUM, 24), rule = "stripe-key";
	} else if (strcmp(name, "stripe-restricted") == 0) {
		strcpy(t, "rk_test_"), rnd(t, ALNUM, 24), rule = "stripe-key";
	} else if (strcmp(name, "gcp") == 0) {
		strcpy(t, "AIza"), rnd(t, ALNUM_UD, 35), rule = "gcp-api-key";
	} else if (strcmp(name, "pem-rsa") == 0) {
		pem(t, "RSA PRIVATE KEY", "\n", "MIIEpAIBAAKCAQEA"), rule = "private-key";
	} else if (strcmp(name, "pem-openssh") == 0) {
		pem(t, "OPENSSH PRIVATE KEY", "\n", "b3BlbnNzaC1rZXktdjEAAAAA"), rule = "private-key";
	} else if (strcmp(name, "pem-pkcs8") == 0 || strcmp(name, "pem-json") == 0) {
		pem(t, "PRIVATE KEY", "\\n", "MIIEvgIBADANBgkqhkiG9w0BAQEFAASC"), rule = "private-key";
	} else if (strcmp(name, "jwt") == 0) {
		char payload[128], sub[16] = "";
		rnd(sub, ALNUM, 12);
		snprintf(payload, sizeof payload, "{\"sub\":\"%s\",\"iat\":1715709791}", sub);
		char *h = b64_of("{\"alg\":\"HS256\",\"typ\":\"JWT\"}", 27, true, false);
		char *b = b64_of(payload, strlen(payload), true, false);
		sprintf(t, "%s.%s.", h, b);
		rnd(t, ALNUM_UD, 43), rule = "jwt";
		free(h);
		free(b);
	} else if (strcmp(name, "anthropic") == 0) {
		strcpy(t, "sk-ant-api03-"), rnd(t, ALNUM_UD, 93), strcat(t, "AA"), rule = "anthropic-api-key";
	} else if (strcmp(name, "anthropic-admin") == 0) {
		strcpy(t, "sk-ant-admin01-"), rnd(t, ALNUM_UD, 93), strcat(t, "AA"), rule = "anthropic-admin-key";
	} else if (strcmp(name, "openai-proj") == 0) {
		strcpy(t, "sk-proj-"), rnd(t, ALNUM_UD, 58), strcat(t, "T3BlbkFJ"), rnd(t, ALNUM_UD, 58);
		rule = "openai-api-key";
	} else if (strcmp(name, "openai-legacy") == 0) {
		strcpy(t, "sk-"), rnd(t, ALNUM, 20), strcat(t, "T3BlbkFJ"), rnd(t, ALNUM, 20), rule = "openai-api-key";
	} else if (strcmp(name, "npm") == 0) {
		strcpy(t, "npm_"), rnd(t, ALNUM, 36), rule = "npm-token";
	} else if (strcmp(name, "pypi") == 0) {
		strcpy(t, "pypi-AgEIcHlwaS5vcmc"), rnd(t, ALNUM_UD, 70), rule = "pypi-token";
	} else if (strcmp(name, "hf") == 0) {
		strcpy(t, "hf_"), rnd(t, LETTERS, 34), rule = "huggingface-token";
	} else if (strcmp(name, "generic") == 0) {
		rnd_mixed(t, 32), rule = "generic-secret";
	} else {
		return -1;
	}
	snprintf(p->rule, sizeof p->rule, "%s", rule);
	snprintf(p->expect, sizeof p->expect, "[REDACTED:%s]", rule);
	/* a PEM block's probe is one line of its body; other tokens are probed whole */
	const char *body = strstr(t, "-----BEGIN") ? strchr(t + 11, '-') : NULL;
	if (body)
		snprintf(p->probe, sizeof p->probe, "%.40s", body + 6 + (strncmp(body + 5, "\\n", 2) == 0 ? 1 : 0));
	else
		snprintf(p->probe, sizeof p->probe, "%s", t);
	return 0;
}

/* ---- fixtures -------------------------------------------------------------------------------- */

static const char *fixture_dir(void)
{
	static char p[PATH_MAX];
	const char *src = getenv("RB_SRCDIR");
	if (src) {
		snprintf(p, sizeof p, "%s/tests/unit/fixtures/scrub", src);
		return p;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n > 0) { /* build/unit/test_scrub -> ../../tests/unit/fixtures/scrub */
		exe[n] = '\0';
		snprintf(p, sizeof p, "%s/../../tests/unit/fixtures/scrub", dirname(exe));
		if (access(p, R_OK) == 0)
			return p;
	}
	snprintf(p, sizeof p, "tests/unit/fixtures/scrub");
	return p;
}

static char *read_fixture(const char *rel, size_t *len)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", fixture_dir(), rel);
	char *d = NULL;
	struct rb_error err = {0};
	if (rb_read_file(path, 1 << 20, &d, len, &err) != 0)
		fail_msg("read %s: %s", path, err.msg);
	return d;
}

/* Sorted names of the files in a fixture folder. */
static size_t list_dir(const char *rel, char names[][256], size_t max)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s/%s", fixture_dir(), rel);
	DIR *d = opendir(path);
	if (!d)
		fail_msg("opendir %s", path);
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max)
		if (e->d_name[0] != '.')
			snprintf(names[n++], 256, "%s", e->d_name);
	closedir(d);
	qsort(names, n, 256, (int (*)(const void *, const void *))strcmp);
	return n;
}

static uint64_t count_of(const struct rb_scrub_counts *c, const char *rule)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->by_rule[i].rule, rule) == 0)
			return c->by_rule[i].count;
	return 0;
}

static struct rb_buf_out scrub(struct rb_scrubber *s, const char *in, size_t len, struct rb_scrub_counts *c)
{
	struct rb_buf_out o;
	struct rb_error err = {0};
	if (rb_scrub_buffer(s, in, len, &o, c, &err) != 0)
		fail_msg("rb_scrub_buffer: %s", err.msg);
	return o;
}

/* ---- tests ---------------------------------------------------------------------------------- */

#define MAX_PLANTED 64

/* Each template: fill, scrub, then the output must equal the template with each placeholder
 * replaced by its expected redaction (so the text around is untouched and each span exact),
 * no probe may remain, and the counts by rule must be those planted. */
static void test_planted(void **state)
{
	rng = 0x5eed5eed12345678ULL;
	make_token();
	struct rb_scrubber *s = new_scrubber();
	char names[32][256];
	size_t nf = list_dir("planted", names, 32);
	assert_true(nf >= 5);
	size_t planted_total = 0, found_total = 0;
	char seen_rules[64][RB_SCRUB_RULE_MAX];
	size_t n_seen = 0;

	for (size_t f = 0; f < nf; f++) {
		char rel[300];
		snprintf(rel, sizeof rel, "planted/%s", names[f]);
		size_t tl;
		char *tmpl = read_fixture(rel, &tl);
		static struct planted items[MAX_PLANTED];
		size_t ni = 0;
		size_t cap = tl + MAX_PLANTED * 4096 + 1;
		char *input = calloc(1, cap), *expect = calloc(1, cap);
		size_t il = 0, el = 0;
		const char *p = tmpl;
		for (const char *o; (o = strstr(p, "{{")) != NULL;) {
			const char *c = strstr(o, "}}");
			assert_non_null(c);
			memcpy(input + il, p, (size_t)(o - p)), il += (size_t)(o - p);
			memcpy(expect + el, p, (size_t)(o - p)), el += (size_t)(o - p);
			char name[64];
			snprintf(name, sizeof name, "%.*s", (int)(c - o - 2), o + 2);
			assert_true(ni < MAX_PLANTED);
			if (gen(name, &items[ni]) != 0)
				fail_msg("%s: unknown placeholder {{%s}}", rel, name);
			il += (size_t)sprintf(input + il, "%s", items[ni].text);
			el += (size_t)sprintf(expect + el, "%s", items[ni].expect);
			ni++;
			p = c + 2;
		}
		il += (size_t)sprintf(input + il, "%s", p);
		el += (size_t)sprintf(expect + el, "%s", p);

		struct rb_scrub_counts cnt;
		struct rb_buf_out o = scrub(s, input, il, &cnt);
		size_t found = 0;
		for (size_t i = 0; i < ni; i++) {
			if (!memmem(o.data, o.len, items[i].probe, strlen(items[i].probe)))
				found++;
			else
				print_message("MISSED in %s: %s (%s)\n", rel, items[i].probe, items[i].rule);
		}
		print_message("%-28s planted %2zu, redacted %2zu, redactions %2" PRIu64 "\n", names[f], ni, found,
		              cnt.total);
		planted_total += ni;
		found_total += found;
		if (o.len != el || memcmp(o.data, expect, el) != 0) {
			size_t d = 0;
			while (d < o.len && d < el && o.data[d] == expect[d])
				d++;
			size_t from = d > 80 ? d - 80 : 0;
			fail_msg("%s: output differs at byte %zu\n--- got\n%.240s\n--- want\n%.240s", rel, d,
			         o.data + from, expect + from);
		}
		/* counts by rule: exactly the planted ones */
		uint64_t want_total = 0;
		for (size_t i = 0; i < ni; i++) {
			uint64_t want = 0;
			for (size_t k = 0; k < ni; k++)
				want += strcmp(items[k].rule, items[i].rule) == 0;
			if (count_of(&cnt, items[i].rule) != want)
				fail_msg("%s: rule %s counted %" PRIu64 ", planted %" PRIu64, rel, items[i].rule,
				         count_of(&cnt, items[i].rule), want);
			want_total++;
			size_t k = 0;
			while (k < n_seen && strcmp(seen_rules[k], items[i].rule) != 0)
				k++;
			if (k == n_seen && n_seen < 64)
				snprintf(seen_rules[n_seen++], RB_SCRUB_RULE_MAX, "%s", items[i].rule);
		}
		assert_int_equal(cnt.total, want_total);
		assert_int_equal(cnt.overflow, 0);
		free(o.data);
		free(input);
		free(expect);
		free(tmpl);
	}
	print_message("recall on the planted set: %zu/%zu = %.3f, %zu distinct rules\n", found_total, planted_total,
	              planted_total ? (double)found_total / (double)planted_total : 0.0, n_seen);
	assert_int_equal(found_total, planted_total);
	/* every format rule and every encoding name was planted at least once (the run token is
	 * base64url text: its base64 holds no '+' or '/', so its base64url form is named base64) */
	static const char *must[] = {
	    "aws-access-key-id",
	    "github-pat",
	    "github-oauth",
	    "github-app-token",
	    "github-refresh-token",
	    "github-fine-grained-pat",
	    "gitlab-pat",
	    "gitlab-deploy-token",
	    "gitlab-runner-token",
	    "gitlab-ci-build-token",
	    "slack-token",
	    "slack-app-token",
	    "slack-webhook",
	    "stripe-key",
	    "gcp-api-key",
	    "private-key",
	    "jwt",
	    "anthropic-api-key",
	    "anthropic-admin-key",
	    "openai-api-key",
	    "npm-token",
	    "pypi-token",
	    "huggingface-token",
	    "generic-secret",
	    "exact:run-token:raw",
	    "exact:run-token:base64",
	    "exact:run-token:hex",
	    "exact:db-password:raw",
	    "exact:db-password:base64",
	    "exact:db-password:base64url",
	    "exact:db-password:hex",
	    "exact:db-password:url",
	    "exact:db-password:json",
	};
	for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
		size_t k = 0;
		while (k < n_seen && strcmp(seen_rules[k], must[i]) != 0)
			k++;
		if (k == n_seen)
			fail_msg("rule %s was never planted", must[i]);
	}
	rb_scrub_free(s);
}

/* Appends a generated control corpus: UUIDs, sha256 digests, base64 of plain data, URLs. */
static size_t generated_control(char *buf, size_t cap)
{
	size_t l = 0;
	for (int i = 0; i < 2000 && l + 1024 < cap; i++) {
		char data[64], hexd[65];
		for (size_t k = 0; k < sizeof data; k++)
			data[k] = (char)next_rand();
		rb_sha256_hex(data, sizeof data, hexd);
		uint64_t a = next_rand(), b = next_rand();
		char *b64 = b64_of(data, 48, i & 1, true);
		l += (size_t)snprintf(buf + l, cap - l,
		                      "%08x-%04x-4%03x-a%03x-%012llx sha256:%s blob=%s "
		                      "https://example.com/items/%d?page=%d&sort=asc token_count = %d\n",
		                      (unsigned)a, (unsigned)(a >> 32) & 0xffff, (unsigned)(a >> 48) & 0xfff,
		                      (unsigned)b & 0xfff, (unsigned long long)(b >> 16), hexd, b64, i, i % 7, i % 11);
		free(b64);
	}
	return l;
}

/* Ordinary text comes out byte for byte, with the run's secrets loaded. */
static void test_control_untouched(void **state)
{
	rng = 0x5eed5eed12345678ULL;
	make_token();
	struct rb_scrubber *s = new_scrubber();
	char names[32][256];
	size_t nf = list_dir("control", names, 32);
	assert_true(nf >= 4);
	uint64_t fp = 0;
	size_t bytes = 0;
	for (size_t f = 0; f < nf; f++) {
		char rel[300];
		snprintf(rel, sizeof rel, "control/%s", names[f]);
		size_t len;
		char *in = read_fixture(rel, &len);
		struct rb_scrub_counts c;
		struct rb_buf_out o = scrub(s, in, len, &c);
		if (c.total)
			for (size_t i = 0; i < c.n; i++)
				print_message("false positive in %s: %s x%" PRIu64 "\n", rel, c.by_rule[i].rule,
				              c.by_rule[i].count);
		fp += c.total;
		bytes += len;
		assert_int_equal(o.len, len);
		assert_memory_equal(o.data, in, len);
		free(o.data);
		free(in);
	}
	size_t cap = 1 << 20;
	char *gen_buf = malloc(cap);
	size_t gl = generated_control(gen_buf, cap);
	struct rb_scrub_counts c;
	struct rb_buf_out o = scrub(s, gen_buf, gl, &c);
	for (size_t i = 0; i < c.n; i++)
		print_message("false positive in generated control: %s x%" PRIu64 "\n", c.by_rule[i].rule,
		              c.by_rule[i].count);
	fp += c.total;
	bytes += gl;
	print_message("false positives on the control corpus (%zu bytes, %zu files + generated): %" PRIu64 "\n", bytes,
	              nf, fp);
	assert_int_equal(o.len, gl);
	assert_memory_equal(o.data, gen_buf, gl);
	assert_int_equal(fp, 0);
	free(o.data);
	free(gen_buf);
	rb_scrub_free(s);
}

/* Near misses of each rule stay as they are (negative controls of the format rules). */
static void test_near_misses(void **state)
{
	rng = 42;
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new(NULL, 0, &s, &err), 0);
	char t[512];
	struct {
		const char *pre;
		const char *set;
		size_t n;
		const char *post;
		bool hit; /* the positive twin of each near miss */
	} cases[] = {
	    {"AKIA", UPNUM, 16, "", true},
	    {"AKIA", UPNUM, 15, "", false},
	    {"xAKIA", UPNUM, 16, "", false},
	    {"AKIA", UPNUM, 16, "b", false},
	    {"AKIA", UPNUM, 17, "", false},
	    {"ghp_", ALNUM, 36, "", true},
	    {"ghp_", ALNUM, 35, "", false},
	    {"myghp_", ALNUM, 36, "", false},
	    {"github_pat_", ALNUM, 82, "", true},
	    {"github_pat_", ALNUM, 59, "", false},
	    {"glpat-", ALNUM_UD, 20, "", true},
	    {"glpat-", ALNUM_UD, 19, "", false},
	    {"xoxb-", ALNUM, 10, "", true},
	    {"xoxb-", ALNUM, 9, "", false},
	    {"sk_live_", ALNUM, 16, "", true},
	    {"sk_live_", ALNUM, 15, "", false},
	    {"sk_demo_", ALNUM, 24, "", false},
	    {"AIza", ALNUM, 35, "", true},
	    {"AIza", ALNUM, 34, "", false},
	    {"npm_", ALNUM, 36, "", true},
	    {"npm_", ALNUM, 35, "", false},
	    {"hf_", LETTERS, 34, "", true},
	    {"hf_", LETTERS, 29, "", false},
	    {"sk-", ALNUM, 48, "", true}, /* legacy OpenAI, DeepSeek, ...: sk-api-key */
	    {"sk-", LETTERS, 48, "", false},
	    {"sk-ant-api03-", ALNUM, 20, "", true},
	    {"sk-ant-api03-", ALNUM, 19, "", false},
	    {"pypi-AgEIcHlwaS5vcmc", ALNUM, 60, "", true},
	    {"pypi-AgEIcHlwaS5vcmc", ALNUM, 40, "", false},
	    {"eyJ", ALNUM, 20, ".eyJabc.sig", true},
	    {"eyJ", ALNUM, 20, ".abc.sig", false},
	    {"https://hooks.slack.com/services/", ALNUM, 30, "", true},
	    {"https://hooks.slack.com/", ALNUM, 30, "", false},
	    {"password = ", ALNUM, 0, "aB3xY9kLmN2pQ7rS", true},
	    {"password = ", ALNUM, 0, "aaaaaaaaaaaaaaaa1A", false},   /* low entropy */
	    {"password = ", ALNUM, 0, "Ex4mpleExampleKey123", false}, /* stopword */
	    {"password = ", ALNUM, 0, "aB3xY9kLmN2pQ7r", true},       /* 15 chars: a password may be short */
	    {"password = ", ALNUM, 0, "aB3xY9k", false},              /* 7 chars */
	    {"api_key = ", ALNUM, 0, "aB3xY9kLmN2pQ7r", false},       /* 15 chars after a weak keyword */
	    {"username = ", ALNUM, 0, "aB3xY9kLmN2pQ7rS", false},     /* no keyword */
	    {"-----BEGIN PUBLIC KEY-----\n", B64CH, 64, "\n-----END PUBLIC KEY-----", false},
	    {"sk-or-v1-", "0123456789abcdef", 64, "", true},
	    {"sk-or-v1-", "0123456789abcdef", 63, "", false},
	    {"p8e-", "abcdefghijklmnopqrstuvwxyz0123456789", 32, "", true},
	    {"p8e-", "abcdefghijklmnopqrstuvwxyz0123456789", 31, "", false},
	    {"AAAAAAAAAAAAAAAAAAAAAA", ALNUM, 90, "", true},
	    {"AAAAAAAAAAAAAAAAAAAAAA", ALNUM, 40, "", false},
	    {"123456789012345|", "0123456789abcdef", 32, "", true},
	    {"123456789012|", "0123456789abcdef", 32, "", false},
	    {"API_KEY", UPNUM, 32, "", true},
	    {"API_KEY", UPNUM, 31, "", false},
	    {"test_", "0123456789abcdef", 35, "", true},
	    {"test_", "0123456789abcdef", 34, "", false},
	    {"mytest_", "0123456789abcdef", 35, "", false},
	    {"pk.", "0123456789abcdef", 32, "", true},
	    {"pk.", LETTERS, 32, "", false},
	    {"nvapi-", ALNUM_UD, 64, "", true},
	    {"nvapi-", ALNUM_UD, 63, "", false},
	    {"_gitlab_session=", "abcdefghijklmnopqrstuvwxyz0123456789", 32, "", true},
	    {"_gitlab_session=", "abcdefghijklmnopqrstuvwxyz0123456789", 31, "", false},
	    {"aio_", "abcdefghijklmnopqrstuvwxyz", 28, "", false}, /* not mixed: an identifier */
	    {"ZXlKaGJHY2lPaU", B64CH, 60, "", true},
	    {"ZXlKaGJHY2lPaU", B64CH, 20, "", false},
	    {"EAA", ALNUM, 100, "", true},
	    {"+EAA", ALNUM, 100, "/", false}, /* a piece of a longer base64 string */
	    {"/EAA", ALNUM, 100, "+", false},
	    {"/EAA", ALNUM, 100, "?x=1", true}, /* a path segment, a query after it */
	    {"+AAAAAAAAAAAAAAAAAAAAAA", ALNUM, 90, "+", false},
	    {"-----BEGIN EC PRIVATE KEY-----\n", B64CH, 64, "\n-----END EC PRIVATE KEY-----", true},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		snprintf(t, sizeof t, "say %s", cases[i].pre);
		rnd(t, cases[i].set, cases[i].n);
		strcat(t, cases[i].post);
		strcat(t, " done");
		struct rb_scrub_counts c;
		struct rb_buf_out o = scrub(s, t, strlen(t), &c);
		bool hit = c.total != 0;
		if (hit != cases[i].hit)
			fail_msg("case %zu `%s`: %s, output `%s`", i, t, hit ? "redacted" : "not redacted", o.data);
		if (!hit)
			assert_string_equal(o.data, t);
		free(o.data);
	}
	rb_scrub_free(s);
}

static void test_refusals(void **state)
{
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	const char *short_one[] = {"1234567"};
	assert_int_equal(rb_scrub_new(short_one, 1, &s, &err), -1);
	assert_null(s);
	assert_non_null(strstr(err.msg, "shorter than 8 bytes"));
	assert_null(strstr(err.msg, "1234567")); /* the error never shows the secret */
	const char *ok[] = {"12345678"};
	assert_int_equal(rb_scrub_new(ok, 1, &s, &err), 0);
	rb_scrub_free(s);
	struct rb_scrub_secret bad_label = {"has space", "0123456789", 10};
	assert_int_equal(rb_scrub_new_labeled(&bad_label, 1, &s, &err), -1);
	assert_non_null(strstr(err.msg, "label"));
	rb_scrub_free(NULL);
}

/* A secret that overlaps a format match: one redaction over the union, named after the longer. */
static void test_merge(void **state)
{
	rng = 7;
	char tok[64] = "ghp_";
	rnd(tok, ALNUM, 36);
	char secret[64];
	snprintf(secret, sizeof secret, "%s-tail", tok + 10); /* last 30 chars + 5 */
	const char *secs[] = {secret};
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new(secs, 1, &s, &err), 0);
	char in[256];
	snprintf(in, sizeof in, "x %s-tail y %s z", tok, tok);
	struct rb_scrub_counts c;
	struct rb_buf_out o = scrub(s, in, strlen(in), &c);
	/* the exact secret names the redaction it overlaps, though the token is longer */
	assert_string_equal(o.data, "x [REDACTED:exact:secret:raw] y [REDACTED:github-pat] z");
	assert_int_equal(c.total, 2);
	assert_int_equal(count_of(&c, "github-pat"), 1);
	assert_int_equal(count_of(&c, "exact:secret:raw"), 1);
	free(o.data);
	/* a longer secret wins over the token it contains */
	char longer[128];
	snprintf(longer, sizeof longer, "prefix-%s-and-more", tok);
	const char *secs2[] = {longer};
	rb_scrub_free(s);
	assert_int_equal(rb_scrub_new(secs2, 1, &s, &err), 0);
	snprintf(in, sizeof in, "[%s]", longer);
	o = scrub(s, in, strlen(in), &c);
	assert_string_equal(o.data, "[[REDACTED:exact:secret:raw]]");
	assert_int_equal(c.total, 1);
	free(o.data);
	/* touching spans stay two redactions */
	snprintf(in, sizeof in, "%s%s", longer, longer);
	o = scrub(s, in, strlen(in), &c);
	assert_string_equal(o.data, "[REDACTED:exact:secret:raw][REDACTED:exact:secret:raw]");
	assert_int_equal(c.total, 2);
	free(o.data);
	rb_scrub_free(s);
}

/* Random bytes, with and without planted secrets, and inputs built to make scanners slow or
 * read past the end: all scrubbed under ASan, secrets gone. */
static void test_binary_and_hostile(void **state)
{
	rng = 0xb1a5ed;
	make_token();
	struct rb_scrubber *s = new_scrubber();
	size_t n = 1 << 20;
	char *buf = malloc(n);
	for (size_t i = 0; i < n; i++)
		buf[i] = (char)next_rand();
	struct rb_scrub_counts c;
	struct rb_buf_out o = scrub(s, buf, n, &c);
	print_message("1 MiB of random bytes: %" PRIu64 " redactions\n", c.total);
	free(o.data);
	/* plant the token 100 times at random offsets */
	size_t tl = strlen(run_token);
	for (int k = 0; k < 100; k++)
		memcpy(buf + next_rand() % (n - tl), run_token, tl);
	o = scrub(s, buf, n, &c);
	assert_null(memmem(o.data, o.len, run_token, tl));
	assert_true(count_of(&c, "exact:run-token:raw") >= 90); /* some plants overwrite others */
	free(o.data);
	/* every suffix of a token at the very end of the buffer: no read past it */
	for (size_t cut = 1; cut <= tl; cut++) {
		char *tail = malloc(cut);
		memcpy(tail, run_token, cut);
		o = scrub(s, tail, cut, &c);
		assert_int_equal(c.total, cut == tl ? 1 : 0);
		free(o.data);
		free(tail);
	}
	static const char *const units[] = {
	    "-----BEGIN RSA PRIVATE KEY-----!",
	    "-----END X-----",
	    "=:",
	    "eyJ.",
	    "AKIA",
	    "ghp_",
	    "password=",
	    "sk-",
	    "xoxb-",
	    "%41",
	    "\\nAKIA",
	    "hooks.slack.com/services/",
	    "a:",
	    "token=",
	    "+ASt",
	    "1:AA",
	    "pg://u:p@",
	    "<password>",
	    "MTaaaa.",
	    "7Q~",
	    "-us1",
	    "\"value\": ",
	};
	for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
		size_t ul = strlen(units[u]);
		for (size_t i = 0; i + ul <= n; i += ul)
			memcpy(buf + i, units[u], ul);
		o = scrub(s, buf, n - n % ul, &c);
		free(o.data);
	}
	o = scrub(s, "", 0, &c);
	assert_int_equal(o.len, 0);
	assert_int_equal(o.data[0], '\0');
	free(o.data);
	free(buf);
	rb_scrub_free(s);
}

static void test_counts_json_and_harvest_cb(void **state)
{
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new(NULL, 0, &s, &err), 0);
	char *out = (char *)1;
	size_t ol = 1;
	json_t *r = (json_t *)1;
	assert_int_equal(rb_scrub_harvest_cb(s, "nothing here", 12, &out, &ol, &r, &err), 0);
	assert_null(out);
	assert_null(r);
	char in[128] = "key AKIA";
	rnd(in, UPNUM, 16);
	strcat(in, " and AKIA");
	rnd(in, UPNUM, 16);
	assert_int_equal(rb_scrub_harvest_cb(s, in, strlen(in), &out, &ol, &r, &err), 0);
	assert_string_equal(out, "key [REDACTED:aws-access-key-id] and [REDACTED:aws-access-key-id]");
	assert_int_equal(ol, strlen(out));
	assert_int_equal(json_integer_value(json_object_get(r, "aws-access-key-id")), 2);
	assert_int_equal(json_object_size(r), 1);
	json_decref(r);
	free(out);
	struct rb_scrub_counts a = {0}, b = {0};
	snprintf(b.by_rule[0].rule, RB_SCRUB_RULE_MAX, "jwt");
	b.by_rule[0].count = 3;
	b.n = 1;
	b.total = 3;
	rb_scrub_counts_add(&a, &b);
	rb_scrub_counts_add(&a, &b);
	assert_int_equal(a.n, 1);
	assert_int_equal(a.total, 6);
	assert_int_equal(a.by_rule[0].count, 6);
	rb_scrub_free(s);
}

/* ---- streams ------------------------------------------------------------------------------ */

/* A text of every kind of match, plus ordinary lines, joined as a step's output would be. */
static char *stream_text(size_t *len)
{
	size_t cap = 1 << 16;
	char *t = calloc(1, cap);
	char line[1024];
	for (int k = 0; k < 12; k++) {
		snprintf(line, sizeof line, "line %d: token %s and ", k, run_token);
		strcat(t, line);
		line[0] = '\0';
		strcat(line, "AKIA");
		rnd(line, UPNUM, 16);
		strcat(line, " ghp_");
		rnd(line, ALNUM, 36);
		strcat(line, "\nDB_PASSWORD=");
		rnd_mixed(line, 40);
		strcat(line, "\n{\"auth\": \"Bearer ");
		rnd_mixed(line, 30);
		strcat(line, "\"}\neyJ");
		rnd(line, ALNUM_UD, 20);
		strcat(line, ".eyJ");
		rnd(line, ALNUM_UD, 30);
		strcat(line, ".");
		rnd(line, ALNUM_UD, 20);
		strcat(line, " ordinary words, a path /usr/lib/x86_64 and 3.5% done\r\n");
		strcat(t, line);
		char *pw = json_of(dbpass, 0);
		snprintf(line, sizeof line, "{\"db\": \"%s\"}\n-----BEGIN RSA PRIVATE KEY-----\n", pw);
		free(pw);
		strcat(t, line);
		line[0] = '\0';
		rnd(line, B64CH, 64);
		strcat(t, line);
		strcat(t, "\n-----END RSA PRIVATE KEY-----\nplain tail ");
	}
	*len = strlen(t);
	return t;
}

/* Feeds in[0..len) in chunks of the sizes sizes[] cycles through; the whole output. */
static char *stream_all(struct rb_scrubber *s, const char *in, size_t len, const size_t *sizes, size_t n_sizes,
                        size_t *out_len)
{
	struct rb_scrub_stream *st = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_stream_new(s, &st, &err), 0);
	char *acc = malloc(2 * len + 4096);
	size_t al = 0, at = 0;
	struct rb_buf_out o;
	for (size_t k = 0; at < len; k++) {
		size_t n = sizes[k % n_sizes];
		if (n > len - at)
			n = len - at;
		assert_int_equal(rb_scrub_stream_feed(st, in + at, n, &o, &err), 0);
		memcpy(acc + al, o.data ? o.data : "", o.len);
		al += o.len;
		free(o.data);
		at += n;
	}
	assert_int_equal(rb_scrub_stream_finish(st, &o, &err), 0);
	memcpy(acc + al, o.data ? o.data : "", o.len);
	al += o.len;
	free(o.data);
	rb_scrub_stream_free(st);
	*out_len = al;
	return acc;
}

/* However the stream is cut into chunks, it comes out as the whole buffer scrubbed at once. */
static void test_stream_equals_buffer(void **state)
{
	rng = 0x57e4a;
	make_token();
	struct rb_scrubber *s = new_scrubber();
	size_t len;
	char *text = stream_text(&len);
	struct rb_scrub_counts c;
	struct rb_buf_out whole = scrub(s, text, len, &c);
	assert_true(c.total >= 12 * 8);
	static const size_t one[] = {1}, two[] = {2}, odd[] = {3, 7, 1, 64, 5}, big[] = {16384}, words[] = {11, 13};
	const struct {
		const size_t *v;
		size_t n;
	} plans[] = {{one, 1}, {two, 1}, {odd, 5}, {big, 1}, {words, 2}};
	for (size_t p = 0; p < sizeof plans / sizeof plans[0]; p++) {
		size_t ol;
		char *o = stream_all(s, text, len, plans[p].v, plans[p].n, &ol);
		if (ol != whole.len || memcmp(o, whole.data, ol) != 0)
			fail_msg("plan %zu: the stream differs from the buffer (%zu vs %zu bytes)", p, ol, whole.len);
		assert_null(memmem(o, ol, run_token, strlen(run_token)));
		free(o);
	}
	/* control: a secret split across two whole-buffer scrubs survives, in halves */
	size_t tl = strlen(run_token);
	const char *tok = memmem(text, len, run_token, tl);
	size_t cut = (size_t)(tok - text) + tl / 2;
	struct rb_buf_out a = scrub(s, text, cut, &c), b = scrub(s, text + cut, len - cut, &c);
	assert_non_null(memmem(a.data, a.len, run_token, tl / 2));
	free(a.data);
	free(b.data);
	free(whole.data);
	free(text);
	rb_scrub_free(s);
}

/* What cannot begin a match comes out at once; the start of one is held until it is decided. */
static void test_stream_holds_only_what_may_match(void **state)
{
	rng = 0x401d;
	make_token();
	struct rb_scrubber *s = new_scrubber();
	struct rb_scrub_stream *st = NULL;
	struct rb_error err = {0};
	struct rb_buf_out o;
	assert_int_equal(rb_scrub_stream_new(s, &st, &err), 0);
	assert_int_equal(rb_scrub_stream_feed(st, "hello world\n", 12, &o, &err), 0);
	assert_int_equal(o.len, 12);
	assert_memory_equal(o.data, "hello world\n", 12);
	free(o.data);
	assert_int_equal(rb_scrub_stream_feed(st, "key: AKIAIOSF", 13, &o, &err), 0);
	assert_int_equal(o.len, 5); /* "key: ": the key itself may still be one */
	assert_memory_equal(o.data, "key: ", 5);
	free(o.data);
	assert_int_equal(rb_scrub_stream_feed(st, "ODNN7EXAMPLQ\n", 13, &o, &err), 0);
	assert_string_equal(o.data, "[REDACTED:aws-access-key-id]\n");
	free(o.data);
	/* half of the run token, after a space: nothing of it comes out */
	size_t tl = strlen(run_token);
	assert_int_equal(rb_scrub_stream_feed(st, "t ", 2, &o, &err), 0);
	free(o.data);
	assert_int_equal(rb_scrub_stream_feed(st, run_token, tl / 2, &o, &err), 0);
	assert_int_equal(o.len, 0);
	free(o.data);
	assert_int_equal(rb_scrub_stream_feed(st, run_token + tl / 2, tl - tl / 2, &o, &err), 0);
	free(o.data);
	assert_int_equal(rb_scrub_stream_finish(st, &o, &err), 0);
	assert_string_equal(o.data, "[REDACTED:exact:run-token:raw]");
	free(o.data);
	/* a lone word at the end comes out at the end of the stream */
	assert_int_equal(rb_scrub_stream_feed(st, "done", 4, &o, &err), 0);
	assert_int_equal(o.len, 0);
	free(o.data);
	assert_int_equal(rb_scrub_stream_finish(st, &o, &err), 0);
	assert_string_equal(o.data, "done");
	free(o.data);
	/* an open PEM block is held (its lines hold no token byte run at the end) */
	const char *pem = "\n-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5\n";
	assert_int_equal(rb_scrub_stream_feed(st, pem, strlen(pem), &o, &err), 0);
	assert_int_equal(o.len, 1); /* the newline before the block */
	free(o.data);
	const char *end = "-----END EC PRIVATE KEY-----\nafter\n";
	assert_int_equal(rb_scrub_stream_feed(st, end, strlen(end), &o, &err), 0);
	assert_string_equal(o.data, "[REDACTED:private-key]\nafter\n");
	free(o.data);
	rb_scrub_stream_free(st);

	/* a run of token bytes longer than the hold is let out in pieces: never more held */
	assert_int_equal(rb_scrub_stream_new(s, &st, &err), 0);
	char chunk[16384];
	memset(chunk, 'a', sizeof chunk);
	size_t fed = 0, out = 0;
	for (int k = 0; k < 32; k++) {
		assert_int_equal(rb_scrub_stream_feed(st, chunk, sizeof chunk, &o, &err), 0);
		fed += sizeof chunk;
		out += o.len;
		free(o.data);
		assert_true(fed - out <= RB_SCRUB_STREAM_HOLD + sizeof chunk);
	}
	assert_int_equal(rb_scrub_stream_finish(st, &o, &err), 0);
	out += o.len;
	free(o.data);
	assert_int_equal(out, fed);
	rb_scrub_stream_free(st);
	rb_scrub_free(s);
}

/* Strings of a parsed value, keys too, scrubbed after decoding. */
static void test_scrub_json(void **state)
{
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new(NULL, 0, &s, &err), 0);
	json_error_t je;
	/* \u0041 is 'A': the text holds no AKIA, the decoded string does */
	json_t *j = json_loads("{\"k\": \"\\u0041KIAIOSFODNN7EXAMPLQ\", \"AKIAIOSFODNN7EXAMPLZ\": [1, \"ok\", "
	                       "{\"x\": \"ghp_Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye2Ub\"}], \"plain\": \"words\"}",
	                       0, &je);
	assert_non_null(j);
	char *before = json_dumps(j, JSON_SORT_KEYS);
	assert_non_null(strstr(before, "AKIAIOSFODNN7EXAMPLQ")); /* control: decoded, it is there */
	free(before);
	uint64_t n = 0;
	assert_int_equal(rb_scrub_json(s, j, &n, &err), 0);
	assert_int_equal(n, 3);
	char *d = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	assert_string_equal(d, "{\"[REDACTED:aws-access-key-id]\":[1,\"ok\",{\"x\":\"[REDACTED:github-pat]\"}],"
	                       "\"k\":\"[REDACTED:aws-access-key-id]\",\"plain\":\"words\"}");
	free(d);
	json_decref(j);
	rb_scrub_free(s);
}

/* ---- every format rule: positives in context and bare, whole, and negatives ---------------- */

/* Expands a template: "%<class><n>" is n random bytes of the class, "%%" a '%'. The classes
 * follow the vendors' documented charsets, written here independently of the rules. */
static void expand(char *out, size_t cap, const char *t)
{
	static const struct {
		char c;
		const char *set;
	} classes[] = {
	    {'a', ALNUM},
	    {'u', ALNUM_UD},
	    {'h', "0123456789abcdef"},
	    {'U', UPNUM},
	    {'L', "abcdefghijklmnopqrstuvwxyz0123456789"},
	    {'d', DIGITS},
	    {'l', LETTERS},
	    {'b', B64CH},
	    {'e', "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.~"},
	    {'Z', "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"}, /* bech32, upper case */
	};
	out[0] = '\0';
	for (const char *p = t; *p;) {
		size_t l = strlen(out);
		assert_true(l + 1 < cap);
		if (*p != '%') {
			out[l] = *p++, out[l + 1] = '\0';
			continue;
		}
		if (p[1] == '%') {
			strcat(out, "%"), p += 2;
			continue;
		}
		const char *set = NULL;
		for (size_t k = 0; k < sizeof classes / sizeof classes[0]; k++)
			if (classes[k].c == p[1])
				set = classes[k].set;
		assert_non_null(set);
		char *q;
		size_t n = strtoul(p + 2, &q, 10);
		assert_true(l + n + 1 < cap);
		rnd(out, set, n);
		p = q;
	}
}

struct positive {
	const char *before, *secret, *after, *rule;
};

/* before/after: the secret's own context (a URL, a connection string), when it needs one. */
static const struct positive positives[] = {
    {"", "AKIA%U16", "", "aws-access-key-id"},
    {"", "ASIA%U16", "", "aws-access-key-id"},
    {"", "IQoJb3JpZ2luX2VjE%b300==", "", "aws-session-token"},
    {"", "FwoGZXIvYXdzE%b250", "", "aws-session-token"},
    {"", "da2-%L26", "", "aws-appsync-key"},
    {"", "ghp_%a36", "", "github-pat"},
    {"", "ghp_%a40", "", "github-pat"},
    {"", "gho_%a36", "", "github-oauth"},
    {"", "ghs_%a36", "", "github-app-token"},
    {"", "ghu_%a36", "", "github-app-token"},
    {"", "ghr_%a36", "", "github-refresh-token"},
    {"", "github_pat_%a22_%a59", "", "github-fine-grained-pat"},
    {"", "glpat-%u20", "", "gitlab-pat"},
    {"", "gldt-%u20", "", "gitlab-deploy-token"},
    {"", "glrt-%u24", "", "gitlab-runner-token"},
    {"", "glptt-%h40", "", "gitlab-token"},
    {"", "xoxb-%d11-%d13-%a24", "", "slack-token"},
    {"", "xapp-1-A%U10-%d13-%h64", "", "slack-app-token"},
    {"https://", "hooks.slack.com/services/T%U8/B%U10/%a24", "", "slack-webhook"},
    {"", "sk_live_%a24", "", "stripe-key"},
    {"", "rk_test_%a24", "", "stripe-key"},
    {"", "whsec_%a32", "", "stripe-webhook-secret"},
    {"", "AIza%u35", "", "gcp-api-key"},
    {"", "ya29.%u120", "", "google-oauth-token"},
    {"", "1//0%u60", "", "google-refresh-token"},
    {"", "GOCSPX-%u28", "", "google-client-secret"},
    {"", "00D%a12!%a40.%a60", "", "salesforce-access-token"},
    {"", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ%u40.%u43", "", "jwt"},
    {"", "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ%u40", "", "jwt"},
    {"", "sk-ant-api03-%u93AA", "", "anthropic-api-key"},
    {"", "sk-ant-admin01-%u93AA", "", "anthropic-admin-key"},
    {"", "sk-proj-%u58T3BlbkFJ%u58", "", "openai-api-key"},
    {"", "sk-%h32", "", "sk-api-key"},
    {"", "npm_%a36", "", "npm-token"},
    {"", "pypi-AgEIcHlwaS5vcmc%u150", "", "pypi-token"},
    {"", "pypi-AgENdGVzdC5weXBpLm9yZw%u150", "", "pypi-token"},
    {"", "hf_%l34", "", "huggingface-token"},
    {"", "api_org_%l34", "", "huggingface-token"},
    {"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=", "%b86==", ";EndpointSuffix=core.windows.net",
     "azure-storage-key"},
    {"Endpoint=sb://x.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=", "%b43=", "",
     "azure-shared-access-key"},
    {"https://acct.blob.core.windows.net/c?sv=2022-11-02&ss=b&sig=", "%a30%%2B%a12%%3D", "&se=x",
     "azure-sas-signature"},
    {"", "%b76+ASt%b5A==", "", "azure-storage-key"},
    {"", "%u44AzFu%u5D==", "", "azure-identifiable-key"},
    {"", "%a52JQQJ99%a18AZDO%a4", "", "azure-devops-pat"},
    {"", "%a52JQQJ9D%a26", "", "azure-identifiable-key"},
    {"", "%a3%d1Q~%e33x", "", "azure-client-secret"},
    {"", "SG.%u22.%u43", "", "sendgrid-api-key"},
    {"", "SK%h32", "", "twilio-api-key"},
    {"", "%d10:AA%u33", "", "telegram-bot-token"},
    {"", "MT%u22.%u6.%u38", "", "discord-bot-token"},
    {"", "OD%u24.%u6.%u27", "", "discord-bot-token"},
    {"https://", "discord.com/api/webhooks/%d18/%u68", "", "discord-webhook"},
    {"https://acme", ".webhook.office.com/webhookb2/%h8-%h4-%h4-%h4-%h12@%h8-%h4/IncomingWebhook/%h32/%h8", "",
     "teams-webhook"},
    {"https://", "hooks.zapier.com/hooks/catch/%d7/%L6", "/", "zapier-webhook"},
    {"", "key-%h32", "", "mailgun-api-key"},
    {"", "%h32-us%d2", "", "mailchimp-api-key"},
    {"", "xkeysib-%h64-%a16", "", "brevo-api-key"},
    {"", "hvs.%u90", "", "vault-token"},
    {"", "hvb.%u140", "", "vault-token"},
    {"", "s.%a24", "", "vault-token"},
    {"", "%a14.atlasv1.%u67", "", "terraform-cloud-token"},
    {"", "NRAK-%U27", "", "newrelic-key"},
    {"", "NRJS-%h19", "", "newrelic-key"},
    {"", "%h36NRAL", "", "newrelic-key"},
    {"", "ATATT3xFfGF0%u180=%h8", "", "atlassian-api-token"},
    {"", "ATBB%a32", "", "bitbucket-app-password"},
    {"", "lsv2_pt_%h32_%h10", "", "langsmith-api-key"},
    {"", "lsv2_sk_%h32_%h10", "", "langsmith-api-key"},
    {"", "ops_eyJ%b800", "", "1password-service-token"},
    {"", "A3-%U6-%U11-%U5-%U5-%U5", "", "1password-secret-key"},
    {"", "dp.pt.%a43", "", "doppler-token"},
    {"", "dp.st.%a40", "", "doppler-token"},
    {"", "dop_v1_%h64", "", "digitalocean-token"},
    {"", "doo_v1_%h64", "", "digitalocean-token"},
    {"", "shpat_%h32", "", "shopify-token"},
    {"", "shpss_%h32", "", "shopify-token"},
    {"", "dapi%h32", "", "databricks-token"},
    {"", "secret_%a43", "", "notion-token"},
    {"", "ntn_%d11%a35", "", "notion-token"},
    {"", "lin_api_%a40", "", "linear-api-key"},
    {"", "AGE-SECRET-KEY-1%Z58", "", "age-secret-key"},
    {"", "sk.eyJ1Ijoi%u40.%u22", "", "mapbox-secret-token"},
    {"", "dt0c01.%U24.%U64", "", "dynatrace-token"},
    {"", "PMAK-%h24-%h34", "", "postman-api-key"},
    {"", "glc_%b40", "", "grafana-token"},
    {"", "glsa_%a32_%h8", "", "grafana-token"},
    {"", "eyJrIjoi%a70", "", "grafana-token"},
    {"", "sntryu_%h64", "", "sentry-token"},
    {"", "sq0atp-%u22", "", "square-token"},
    {"", "sq0csp-%u43", "", "square-token"},
    {"", "EAAA%u60", "", "square-token"},
    {"", "HRKU-%u60", "", "heroku-api-key"},
    {"", "v1.0-%h24-%h146", "", "cloudflare-origin-ca-key"},
    {"", "dckr_pat_%u27", "", "docker-hub-token"},
    {"", "sbp_%h40", "", "supabase-token"},
    {"", "pscale_tkn_%u43", "", "planetscale-token"},
    {"", "AKCp%a69", "", "artifactory-token"},
    {"", "gsk_%a52", "", "groq-api-key"},
    {"", "r8_%a37", "", "replicate-api-token"},
    {"", "xai-%a80", "", "xai-api-key"},
    {"", "pplx-%a48", "", "perplexity-api-key"},
    {"", "pul-%h40", "", "pulumi-token"},
    {"", "figd_%u40", "", "figma-token"},
    {"", "pat%a14.%h64", "", "airtable-pat"},
    {"", "CFPAT-%u43", "", "contentful-token"},
    {"", "rubygems_%h48", "", "rubygems-token"},
    {"", "oy2%L43", "", "nuget-api-key"},
    {"", "bkua_%h40", "", "buildkite-token"},
    {"", "EZAK%a54", "", "easypost-api-key"},
    {"", "FLWSECK-%h32-X", "", "flutterwave-secret-key"},
    {"", "shippo_live_%h40", "", "shippo-token"},
    {"", "tfp_%a44", "", "typeform-token"},
    {"", "LTAIq3T7ZK2M9XW4B8PLc5Dx", "", "alibaba-access-key-id"},
    {"", "CLOJARS_%L60", "", "clojars-token"},
    {"", "dnkey-%u26-%u52", "", "defined-networking-key"},
    {"", "duffel_live_%a43", "", "duffel-token"},
    {"", "fio-u-%a64", "", "frameio-token"},
    {"", "pat.%a22.%h24.%a20", "", "harness-pat"},
    {"", "ico-%a32", "", "infracost-key"},
    {"", "s-s4t2ud-%h64", "", "intra42-secret"},
    {"", "%a6_%a29_mmk", "", "maxmind-license-key"},
    {"", "API-Q3T7ZK2M9XW4B8PLC5DXA1B2C3", "", "octopus-deploy-key"},
    {"", "sha256~%a43", "", "openshift-token"},
    {"", "pnu_%a36", "", "prefect-token"},
    {"", "rdme_%L70", "", "readme-api-key"},
    {"", "tk-us-%a48", "", "scalingo-token"},
    {"", "sm_pat_Q3t7ZK2m9XW4b8PL", "", "settlemint-token"},
    {"", "sgp_%h16_%h40", "", "sourcegraph-token"},
    {"", "sgp_%h40", "", "sourcegraph-token"},
    {"", "AQVNq3T7ZK2M9XW4B8PLc5Dx1a2b3c4d5e6f7g8", "", "yandex-api-key"},
    {"", "rnd_Q3t7ZK2m9XW4b8PLc5Dxa1B2c3D4e5F6", "", "render-api-key"},
    {"", "tskey-auth-%a12-%a30", "", "tailscale-key"},
    {"", "nfp_%a36", "", "netlify-token"},
    {"", "sdk-%h8-%h4-%h4-%h4-%h12", "", "launchdarkly-key"},
    {"", "access-sandbox-%h8-%h4-%h4-%h4-%h12", "", "plaid-token"},
    {"", "rzp_live_%a14", "", "razorpay-key"},
    {"", "ABSK%b140==", "", "aws-bedrock-api-key"},
    {"", "bedrock-api-key-YmVkcm9jay5hbWF6b25hd3MuY29t%b120", "", "aws-bedrock-api-key"},
    {"", "4b1dQ3t7ZK2m9XW4b8PLc5Dxa1B2c3D4e5F6g7H8i9", "", "clickhouse-api-secret"},
    {"", "squ_%h40", "", "sonarqube-token"},
    {"", "glpat-%u27.01%L7", "", "gitlab-pat"},
    {"", "sk-lf-%h8-%h4-%h4-%h4-%h12", "", "langfuse-secret-key"},
    /* formats cross-checked against gitleaks' and trufflehog's rule sets */
    {"", "A3TX%U16", "", "aws-access-key-id"},
    {"", "glpat-%u36.01.%L9", "", "gitlab-pat"},
    {"", "glrt-t1_%u30.01%L7", "", "gitlab-runner-token"},
    {"Cookie: _gitlab_session=", "%L32", "; path=/", "gitlab-session-cookie"},
    {"", "pi_%a24_secret_%a25", "", "stripe-client-secret"},
    {"", "sk_test_2x2_%h64", "", "recharge-api-key"},
    {"", "sk_pr_%L8_%h40", "", "photoroom-api-key"},
    {"", "sk_%d4_%d6_%h32", "", "tickettailor-api-key"},
    {"", "sk_%h48", "", "elevenlabs-api-key"},
    {"", "ewogICJhbGciOiAiSFMyNTYiCn0.eyJ%u40.%u43", "", "jwt"},
    {"", "ZXlKaGJHY2lPaUpTVXpJMU5pSjku%b120", "", "jwt-base64"},
    {"", "sk-or-v1-%h64", "", "openrouter-api-key"},
    {"", "0.A%u60.Ag%u300", "", "azure-entra-refresh-token"},
    {"", "1.A%u60.1.Ag%u300.A%u220", "", "azure-entra-refresh-token"},
    {"", "eu01xx%h26FFFFNRAL", "", "newrelic-key"},
    {"", "AA%h40-NRMA", "", "newrelic-key"},
    {"", "NRBR-%h19", "", "newrelic-key"},
    {"", "ATCTT3xFfG%u180=%h8", "", "atlassian-api-token"},
    {"", "sq0csp-%u47", "", "square-token"},
    {"", "fm1r_%b200", "", "flyio-token"},
    {"", "FLWSECK_TEST%h12", "", "flutterwave-secret-key"},
    {"", "u-s4t2ud-%h64", "", "intra42-secret"},
    {"", "tskey-oauth-k%a10-%a30", "", "tailscale-key"},
    {"", "sqco_%a59", "", "sonarqube-token"},
    {"", "p8e-%L32", "", "adobe-client-secret"},
    {"", "authress_%L12.%L5.acc_%L20.%u60", "", "authress-key"},
    {"", "AAAAAAAAAAAAAAAAAAAAAA%a12%%3D%a70", "", "twitter-bearer-token"},
    {"", "t1.%a40.%u86", "", "yandex-iam-token"},
    {"", "%d15|%h32", "", "facebook-access-token"},
    {"", "%d16%%7C%h32", "", "facebook-access-token"},
    {"", "aio_Qx7%a25", "", "adafruit-io-key"},
    {"", "apify_api_%a36", "", "apify-token"},
    {"", "BBDC-%a44", "", "bitbucket-access-token"},
    {"", "bb_pr_%h30", "", "bannerbear-api-key"},
    {"", "cfut_%a40%h8", "", "cloudflare-api-token"},
    {"", "cfk_%a40%h8", "", "cloudflare-api-token"},
    {"", "ddp_%a36", "", "deno-deploy-token"},
    {"", "endr+%a16", "", "endorlabs-key"},
    {"", "figp_%u48", "", "figma-token"},
    {"", "API_KEY%U32", "", "finage-api-key"},
    {"", "flb_live_%a20", "", "fleetbase-key"},
    {"", "shltm_%u40", "", "flexport-key"},
    {"", "na1.%b100", "", "fullstory-api-key"},
    {"", "master-Qx7%a17", "", "gemini-exchange-key"},
    {"", "pat-na1-%h8-%h4-%h4-%h4-%h12", "", "hubspot-pat"},
    {"", "pk_%h34", "", "klaviyo-api-key"},
    {"", "pk_%d8_%U32", "", "clickup-token"},
    {"", "test_%h35", "", "lob-api-key"},
    {"", "live_Qx7%u37", "", "gocardless-token"},
    {"", "pk.%h32", "", "locationiq-token"},
    {"", "NF-%a32", "", "nightfall-api-key"},
    {"", "nvapi-%u64", "", "nvidia-api-key"},
    {"", "ak_live_%a30", "", "pagarme-api-key"},
    {"", "pcsk_%a6_%a63", "", "pinecone-api-key"},
    {"", "phx_%a45", "", "posthog-personal-key"},
    {"", "pub-c-%h8-%h4-%h4-%h4-%h12", "", "pubnub-key"},
    {"", "ramp_sec_%a48", "", "ramp-client-secret"},
    {"", "rh-api-%h8-%h4-%h4-%h4-%h12", "", "robinhood-crypto-key"},
    {"", "rootly_%h64", "", "rootly-api-key"},
    {"", "salad_cloud_%a5_%a40", "", "saladcloud-api-key"},
    {"", "slk_%h64", "", "sourcegraph-cody-token"},
    {"", "spu-%L32", "", "spectralops-token"},
    {"", "pgar_%a27", "", "pganalyze-key"},
    {"https://acme", ".tines.com/webhook/%L32/%L32", "", "tines-webhook"},
    {"", "thog-secret-%h32", "", "trufflehog-enterprise-key"},
    {"", "BBFF-%a30", "", "ubidots-token"},
    {"", "VF.DM.%h24.%a16", "", "voiceflow-api-key"},
    {"", "1000.%h32.%h32", "", "zoho-token"},
    {"", "tkn.v1_%a71=", "", "teamwork-token"},
    {"", "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA%b48\n%b64\n-----END RSA PRIVATE KEY-----", "",
     "private-key"},
    {"", "-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADANBgkqhkiG9w0BAQEFAASC%b32\\n%b64\\n-----END PRIVATE KEY-----\\n", "",
     "private-key"},
    /* URLs with a password, connection strings */
    {"DATABASE_URL=postgres://app:", "%a20", "@db.internal:5432/app", "postgres-url"},
    {"url = \"postgresql+psycopg2://app:", "%a8.%a4~%a6@%a4", "@db/app\"", "postgres-url"},
    {"mysql://root:", "%a16", "@127.0.0.1:3306/shop", "mysql-url"},
    {"MONGO=mongodb+srv://svc:", "%a12:%a6", "@cluster0.abcde.mongodb.net/?retryWrites=true", "mongodb-url"},
    {"REDIS_URL=redis://:", "%a24", "@cache:6379/0", "redis-url"},
    {"amqps://worker:", "%a18", "@mq.example.net/vhost", "amqp-url"},
    {"ftp://deploy:", "%a14", "@files.example.net/", "ftp-url"},
    {"git clone https://oauth2:", "%a20", "@git.example.net/x.git", "url-credentials"},
    {"Server=tcp:db.example.net,1433;Database=app;User ID=app;Password=", "%a8!%a4", ";Encrypt=True;",
     "connection-string-password"},
    {"Driver={ODBC Driver 18};Server=db;Uid=app;Pwd=", "%a6#%a6", ";", "connection-string-password"},
    /* the keyword rule, in the shapes config and code take */
    {"API_TOKEN=", "%a12.%a8~%a6", "\n", "generic-secret"},
    {"api_token: ", "%a10:%a10@%a4", "\n", "generic-secret"},
    {"{\"client_secret\": \"", "%a32", "\"}", "generic-secret"},
    {"api_key = '", "%h40", "'", "generic-secret"},
    {"API_SECRET ?= ", "%a24", "\n", "generic-secret"},
    {"apiToken := \"", "%a24", "\"", "generic-secret"},
    {"token - '", "%a24", "'", "generic-secret"},
    {"<password>", "%a20", "</password>", "generic-secret"},
    {"<add key=\"ApiSecret\" value=\"", "%a28", "\" />", "generic-secret"},
    {"<user name=\"ci\" password=\"", "%a18", "\"/>", "generic-secret"},
    {"{\"name\": \"api_key\", \"value\": \"", "%a30", "\"}", "generic-secret"},
    {"env:\n  - name: DB_PASSWORD\n    value: ", "%a22", "\n", "generic-secret"},
    {"client_secret:\n  ", "%a40", "\n", "generic-secret"},
    {"Authorization: Bearer ", "%a40", "\n", "generic-secret"},
    {"SECRET=\"", "%a700", "\"", "generic-secret"},
    {"DB_PASSWORD=", "Q%l4!%d3q", "\n", "generic-secret"},
    {"smtp_password: \"", "%a8@%a6", "\"", "generic-secret"},
    {"API_KEY: str = \"", "%a32", "\"", "generic-secret"},
    {"const apiToken: string = '", "%a32", "';", "generic-secret"},
    {"db.password=", "%a20", "\n", "generic-secret"},
    /* a YAML block scalar: every line of the value; a PEM block under a key */
    {"password: |\n  ", "%a40\n  %a40\n  %a12", "\nnext: 1\n", "generic-secret"},
    {"auth:\n  token: >-\n    ", "%u30\n    %u30", "\n  user: ci\n", "generic-secret"},
    {"tls_key: |\n  ",
     "-----BEGIN RSA PRIVATE KEY-----\n  MIIEpAIBAAKCAQEA%b40\n  %b64\n  -----END RSA PRIVATE KEY-----", "\n",
     "private-key"},
    /* an XML CDATA section */
    {"<password><![CDATA[", "%a24", "]]></password>", "generic-secret"},
    {"<apiToken>\n  <![CDATA[", "%a20!%a8", "]]>\n</apiToken>", "generic-secret"},
    /* curl's user:password */
    {"curl -u deploy:", "%a20", " https://api.example.net/v1", "curl-user-password"},
    {"curl -s --user 'ci:", "%a16", "' https://x.example.net", "curl-user-password"},
    {"curl --proxy-user=bob:", "%a12", " -x proxy:3128 https://x.example.net", "curl-user-password"},
    /* values longer than 4096 bytes */
    {"API_TOKEN=", "%a5000", "\n", "generic-secret"},
    {"{\"secret\": \"", "%b6000", "\"}", "generic-secret"},
    /* shapes of the public scanners' fixtures */
    {"curl -H \"Authorization: Bearer ", "%a40", "\" https://api.example.net", "generic-secret"},
    {"<add key=\"ClearTextPassword\" value=\"", "%a20", "\" />", "generic-secret"},
    {"acct.redis.cache.windows.net:6380,password=/", "%b42=", ",ssl=True,abortConnect=False", "generic-secret"},
    {"jdbc:sqlserver://db:1433;databaseName=app;user=sa;password=", "%a18", ";", "connection-string-password"},
    /* a quoted key, a comma, a quoted value; a key and its value a space apart */
    {"define('DB_PASSWORD', '", "%a20", "');", "generic-secret"},
    {"api_key = os.getenv(\"API_KEY\", \"", "%a32", "\")", "generic-secret"},
    {"[\"token\", \"", "%a24", "\"]", "generic-secret"},
    {"deploy --api-key ", "%a32", " --region eu\n", "generic-secret"},
    {"  --password '", "%a20", "' \\\n", "generic-secret"},
    {"ENV SECRET_TOKEN ", "%a32", "\n", "generic-secret"},
    {"machine api.example.net login ci password ", "%a20", "\n", "generic-secret"},
    {"machine api.example.net\n  login ci\n  password ", "%a20", "\n", "generic-secret"},
    /* a UUID under a password, a token or an API key */
    {"HEROKU_API_KEY=", "%h8-%h4-%h4-%h4-%h12", "\n", "generic-secret"},
    {"//registry.npmjs.org/:_authToken=", "%h8-%h4-%h4-%h4-%h12", "\n", "generic-secret"},
};

/* The secret's contexts when it has none of its own: alone on a line, inside prose, after a
 * keyword, quoted in JSON. */
static const char *const contexts[][2] = {
    {"", "\n"},
    {"see ", " here\n"},
    {"TOKEN=", "\n"},
    {"{\"key\": \"", "\"}\n"},
    {"export X='", "'\n"},
    /* embedded in a URL: a query value, a path segment after a word (Telegram's
     * https://api.telegram.org/bot<token>/METHOD) and a path segment followed by another,
     * the last only where the token's charset has no '/' */
    {"GET https://api.example.com/v1/send?access_token=", "&lang=en\n"},
    {"curl -s https://api.example.com/bot", "?chat_id=1\n"},
    {"curl -s https://api.example.com/hooks/", "/sendMessage\n"},
};
#define CONTEXT_URL_PATH 7

/* Can a token of this spec or rule hold a '/' (a base64 charset, Bitbucket's)? Then a path's
 * next '/' is its own. */
static bool spec_has_slash(const char *spec, const char *rule)
{
	static const char *const slashy[] = {"bitbucket-access-token"};
	for (size_t i = 0; i < sizeof slashy / sizeof slashy[0]; i++)
		if (strcmp(rule, slashy[i]) == 0)
			return true;
	for (const char *q = spec; (q = strchr(q, '%')) != NULL; q++)
		if (q[1] && strchr("bBxpwq", q[1]))
			return true;
	return strchr(spec, '/') != NULL;
}

/* No 16-byte piece of secret is left in out. */
static void assert_whole(const char *what, const char *secret, const char *out, size_t ol)
{
	size_t sl = strlen(secret);
	for (size_t i = 0; i + 16 <= sl; i++)
		if (memmem(out, ol, secret + i, 16))
			fail_msg("%s: a piece of the secret survives at %zu: `%.16s` in `%.300s`", what, i, secret + i,
			         out);
}

static char *stream_all(struct rb_scrubber *s, const char *in, size_t len, const size_t *sizes, size_t n_sizes,
                        size_t *out_len);

static void test_formats(void **state)
{
	rng = 0xf0f0;
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new(NULL, 0, &s, &err), 0);
	static char secret[8192], text[16384];
	size_t checked = 0;
	for (size_t i = 0; i < sizeof positives / sizeof positives[0]; i++) {
		const struct positive *p = &positives[i];
		bool own = p->before[0] || p->after[0];
		for (size_t c = 0; c < (own ? 1 : sizeof contexts / sizeof contexts[0]); c++) {
			if (c == CONTEXT_URL_PATH && spec_has_slash(p->secret, p->rule))
				continue;
			expand(secret, sizeof secret, p->secret);
			if (own)
				snprintf(text, sizeof text, "%s%s%s\n", p->before, secret, p->after);
			else
				snprintf(text, sizeof text, "%s%s%s", contexts[c][0], secret, contexts[c][1]);
			struct rb_scrub_counts cnt;
			struct rb_buf_out o = scrub(s, text, strlen(text), &cnt);
			char what[64];
			snprintf(what, sizeof what, "positive %zu (%s), context %zu", i, p->rule, c);
			if (count_of(&cnt, p->rule) != 1 || cnt.total != 1)
				fail_msg("%s: want one %s redaction (%" PRIu64 " in all) in `%s`, got `%s`", what,
				         p->rule, cnt.total, text, o.data);
			assert_whole(what, secret, o.data, o.len);
			/* the stream agrees, byte by byte and cut anywhere */
			static const size_t one[] = {1}, odd[] = {3, 7, 1, 64, 5};
			for (int plan = 0; plan < 2; plan++) {
				size_t sl;
				char *so = stream_all(s, text, strlen(text), plan ? odd : one, plan ? 5 : 1, &sl);
				if (sl != o.len || memcmp(so, o.data, sl) != 0)
					fail_msg("%s: the stream gives `%.*s`, the buffer `%s`", what, (int)sl, so,
					         o.data);
				free(so);
			}
			free(o.data);
			checked++;
		}
	}
	print_message("%zu positives checked whole, in buffer and stream\n", checked);
	rb_scrub_free(s);
}

/* The exact pass looks at one position in (shortest encoding - 2) only: an exact secret at
 * every offset of the text, at its start and its end, twice in a row and beside a near copy,
 * is found each time, and the text around stays (control: a copy one byte short is left). */
static void test_exact_every_offset(void **state)
{
	static const struct rb_scrub_secret secs[] = {{"short", "Zk4Wq8Pe", 8},
	                                              {"run-token", "rbx_run_Q3b9Tz7Lm2Kp8Rw4Nv6H", 28}};
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new_labeled(secs, 2, &s, &err), 0);
	for (size_t k = 0; k < 2; k++) {
		const char *v = secs[k].value;
		char want_name[64];
		snprintf(want_name, sizeof want_name, "exact:%s:raw", secs[k].label);
		for (size_t off = 0; off < 64; off++) {
			for (int twice = 0; twice < 2; twice++) {
				char text[256], want[256];
				memset(text, '.', off);
				snprintf(text + off, sizeof text - off, "%s%s%s", v, twice ? v : "",
				         off % 3 ? " tail" : "");
				memset(want, '.', off);
				snprintf(want + off, sizeof want - off, "[REDACTED:%s]%s%s%s%s", want_name,
				         twice ? "[REDACTED:" : "", twice ? want_name : "", twice ? "]" : "",
				         off % 3 ? " tail" : "");
				struct rb_scrub_counts cnt;
				struct rb_buf_out o = scrub(s, text, strlen(text), &cnt);
				if (count_of(&cnt, want_name) != (twice ? 2U : 1U) || strcmp(o.data, want) != 0)
					fail_msg("secret %zu at %zu (twice %d): `%s` -> `%s`", k, off, twice, text,
					         o.data);
				free(o.data);
			}
			/* one byte short: no secret */
			char near[256];
			memset(near, '.', off);
			snprintf(near + off, sizeof near - off, "%.*s tail", (int)secs[k].len - 1, v + 1);
			struct rb_scrub_counts cnt;
			struct rb_buf_out o = scrub(s, near, strlen(near), &cnt);
			if (cnt.total != 0)
				fail_msg("near copy %zu at %zu altered: `%s` -> `%s`", k, off, near, o.data);
			free(o.data);
		}
	}
	rb_scrub_free(s);
}

/* Placeholders, templates, identifiers, hashes, public keys and ordinary base64 stay. */
static void test_precision(void **state)
{
	static const char *const negatives[] = {
	    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	    "GITHUB_TOKEN=ghp_XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX",
	    "AKIAXXXXXXXXXXXXXXXX",
	    "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
	    "sk_live_xxxxxxxxxxxxxxxxxxxxxxxx",
	    "xoxb-000000000000-000000000000-xxxxxxxxxxxxxxxxxxxxxxxx",
	    "API_KEY=your-key-here",
	    "API_KEY=your_api_key_here_1234",
	    "api_key: <token>",
	    "api_key: \"<YOUR_API_KEY>\"",
	    "TOKEN=${GITHUB_TOKEN}",
	    "password: \"{{ .Values.db.password }}\"",
	    "password: '{{ secret_password }}'",
	    "SECRET=changeme",
	    "SECRET_KEY=changeme-in-production-1234",
	    "password=aaaaaaaaaaaaaaaa",
	    "token: 1234567890abcdef1234",
	    "request_id = \"3f2b8c1e-9d4a-4b7e-8f21-6c5d3e2a1b0f\"",
	    "trace_id: 3f2b8c1e-9d4a-4b7e-8f21-6c5d3e2a1b0f",
	    "idempotency_key: 3f2b8c1e-9d4a-4b7e-8f21-6c5d3e2a1b0f",
	    "HEROKU_API_KEY=00000000-0000-0000-0000-000000000000",
	    "curl -u $USER:$PASS https://api.example.net",
	    "curl -u \"ci:${TOKEN}\" https://api.example.net",
	    "curl -u admin:password https://api.example.net",
	    "docker run -u 1000:1000 curl-image",
	    "git push -u origin:Xq3bT9wLm2Kp7Rz4",
	    "<description><![CDATA[Xq3bT9wLm2Kp7Rz4Nv8H]]></description>",
	    "<password><![CDATA[changeme]]></password>",
	    "<password><![CDATA[the one on the card]]></password>",
	    "description: |\n  Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0\n  Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0",
	    "password_hint: |\n  the name of the first cat\n  and the year",
	    "request id 3f2b8c1e-9d4a-4b7e-8f21-6c5d3e2a1b0f",
	    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
	    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
	    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQC7vbqajDhA8tk0Zs9Kq0R3n5rB2M3X1fLwQ user@host",
	    "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8tk0Zs9Kq0R3n5rB2M3X1fLwQ\n-----END "
	    "PUBLIC KEY-----",
	    "public_key = \"MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE8tk0Zs9Kq0R3n5rB2M3X1fLwQ\"",
	    "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==",
	    "DATABASE_URL=postgres://user:password@localhost:5432/db",
	    "postgres://app:${DB_PASS}@db/app",
	    "mysql://root@localhost/db",
	    "https://example.com/path?x=1&y=2",
	    "token = self.token_value",
	    "secret = settings.SECRET_KEY",
	    "api_key = os.environ.get(\"API_KEY\")",
	    "password = get_password()",
	    "auth_url: https://login.example.com/oauth2/v2.0/token",
	    "token_uri: https://oauth2.googleapis.com/token",
	    "Password=myPassword;",
	    "Password=<password>;",
	    "token_count = 12345",
	    "\"key\": \"value\"",
	    "password: Enter your password here",
	    "\"password\": \"correct horse battery staple\"",
	    "the key-value store and the secret_sauce",
	    "time 12:30:45 and 2024-05-01T10:00:00Z",
	    "TOKEN_LENGTH=32 AUTH_TYPE=oauth2 PASSWORD_FILE=/run/secrets/db",
	    "email: alice.smith@example.com",
	    "name: str = \"Xq3bT9wLm2Kp7Rz4Nv8H\"",
	    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	    "AAAAAA",
	    "| 123456789012345 | 0123456789abcdef0123456789abcdef |",
	    "pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJjbGV4YW1wbGUifQ.Xq3bT9wLm2Kp7Rz4Nv8Hc1",
	    "master-branchprotectionrule",
	    "version 1.A and 0.A.Ag",
	    "cache_dir=/var/lib/app/cache-data/xq3bT9wLm2Kp7Rz4",
	    /* a pair, a flag or a word a space before a value, that names no secret's value */
	    "api_key = os.environ.get(\"API_KEY\", \"default\")",
	    "log.info(\"token\", token)",
	    "define('AUTH_KEY', 'put your unique phrase here');",
	    "print(\"Xq3bT9wLm2Kp7Rz4\", \"token\")",
	    "--token-file /run/secrets/Xq3bT9wLm2Kp7Rz4",
	    "--auth-type Xq3bT9wLm2Kp7Rz4",
	    "--password \"$DB_PASSWORD\" --api-key ${API_KEY}",
	    "the password is Xq3bT9wLm2Kp7Rz4 for now",
	    "keyring set password Xq3bT9wLm2Kp7Rz4",
	    "RUN ENV API_TOKEN Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd",
	    "tkn.v1_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx=",
	    "sk_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	    /* a word before a token outside a URL's path: a longer word, not a token */
	    "see bot123456789:AAHq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye for the bot",
	    "/opt/bots/bot123456789:AAHq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye/run",
	    "https://example.com/q?s=myghp_Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye2Ub",
	    "https://botghp_Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye2Ub.example.com/",
	    /* placeholders in a Telegram URL */
	    "https://api.telegram.org/bot<token>/sendMessage",
	    "https://api.telegram.org/bot${TELEGRAM_BOT_TOKEN}/getMe",
	    "https://api.telegram.org/bot123456789:AAxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx/getMe",
	};
	struct rb_scrubber *s = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_scrub_new(NULL, 0, &s, &err), 0);
	for (size_t i = 0; i < sizeof negatives / sizeof negatives[0]; i++) {
		char text[1024];
		snprintf(text, sizeof text, "%s\n", negatives[i]);
		struct rb_scrub_counts cnt;
		struct rb_buf_out o = scrub(s, text, strlen(text), &cnt);
		if (cnt.total != 0)
			fail_msg("negative %zu altered: `%s` -> `%s`", i, text, o.data);
		assert_string_equal(o.data, text);
		free(o.data);
	}
	/* control: the same shapes with a random value are redacted */
	static const char *const twins[] = {
	    "ghp_Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye2Ub", "AKIAQ3T7ZK2M9XW4B8PL", "API_KEY=Xq3bT9wLm2Kp7Rz4Nv8H",
	    "DATABASE_URL=postgres://user:Xq3bT9wLm2Kp@localhost:5432/db", "Password=Xq3b!T9wLm2;",
	    "api_key = \"Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0\"", "api_key = \"3f2b8c1e-9d4a-4b7e-8f21-6c5d3e2a1b0f\"",
	    "HEROKU_API_KEY=3f2b8c1e-9d4a-4b7e-8f21-6c5d3e2a1b0f", "curl -u admin:Xq3bT9wLm2Kp https://api.example.net",
	    "<password><![CDATA[Xq3bT9wLm2Kp7Rz4Nv8H]]></password>",
	    "password: |\n  Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0\n  Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0",
	    /* the word-before-a-token negatives' twins: in a URL's path segment */
	    "see https://api.telegram.org/bot123456789:AAHq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye for the bot",
	    "https://api.telegram.org/file/bot123456789:AAHq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye/run",
	    "https://example.com/q/myghp_Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye2Ub",
	    "https://example.com/botghp_Xq3bT9wLm2Kp7Rz4Nv8Hc1Jd6Fs0Ga5Ye2Ub.example.com/"};
	for (size_t i = 0; i < sizeof twins / sizeof twins[0]; i++) {
		struct rb_scrub_counts cnt;
		struct rb_buf_out o = scrub(s, twins[i], strlen(twins[i]), &cnt);
		if (cnt.total != 1)
			fail_msg("twin %zu not redacted: `%s` -> `%s`", i, twins[i], o.data);
		free(o.data);
	}
	rb_scrub_free(s);
}

/* The prefilter: the scalar path returns exactly the positions whose bigram is some prefix's
 * and whose trigram hash is one's; the AVX2 path a subset of those (its nibble tables test
 * the three bytes themselves, not their hash) that still holds every position where a
 * prefix starts, so a host without AVX2 scrubs the same. */
static size_t brute_next(const struct rb_scrub_prefilter *p, const unsigned char *in, size_t i, size_t len)
{
	for (; i + 1 < len; i++) {
		unsigned g = in[i] | (unsigned)in[i + 1] << 8;
		if (!((p->bigram[g >> 6] >> (g & 63)) & 1))
			continue;
		if (i + 2 >= len)
			return i;
		unsigned h = rb_scrub_tri(in[i], in[i + 1], in[i + 2]);
		if ((p->trigram[h >> 6] >> (h & 63)) & 1)
			return i;
	}
	return len;
}

/* Where the prefilter finds anchor text w planted at 0: at its key, that of the longest anchor
 * w starts with (in any case: the plants of an anchor of any case are in mixed case). */
static size_t planted_key(const struct rb_scrub_rule_tables *t, const char *w)
{
	size_t best = 0, key = 0;
	for (size_t k = 0; k < t->n_anchors; k++) {
		const struct rb_scrub_anchor *a = &t->anchor[k];
		if (a->len > best && strncasecmp(w, a->s, a->len) == 0)
			best = a->len, key = a->key;
	}
	assert_true(best > 0);
	return key;
}

static void test_prefilter_paths(void **state)
{
	static struct rb_scrub_rule_tables t;
	rb_scrub_rules_init(&t);
	/* format anchors (set 0, found at their key) and prefixes of keywords (set 1), in the case
	 * they are matched in */
	static const struct {
		const char *w;
		int set;
	} plants[] = {{"ghp_", 0},        {"sk-", 0},         {"MTk", 0},         {"AKIA", 0},     {"xoxb-", 0},
	              {"-----BEGIN ", 0}, {"://", 0},         {"SK0", 0},         {"s.A", 0},      {"eyJh", 0},
	              {"hvs.", 0},        {"AccountKey=", 0}, {"aCCountkey=", 0}, {"password", 1}, {"Token", 1},
	              {"SECRET", 1},      {"aUtH", 1},        {"pwd", 1}};
	static unsigned char text[70000];
	static bool planted[2][sizeof text], vec_hit[sizeof text];
	rng = 0x5eed;
	size_t n = 0;
	while (n + 16 < sizeof text) {
		if (next_rand() % 8 == 0) {
			size_t w = next_rand() % (sizeof plants / sizeof plants[0]);
			planted[plants[w].set][n + (plants[w].set == 0 ? planted_key(&t, plants[w].w) : 0)] = true;
			memcpy(text + n, plants[w].w, strlen(plants[w].w));
			n += strlen(plants[w].w);
		} else {
			text[n++] = (unsigned char)" eatonisrhldcumfpgwybvkxjqz_-.:=\n"[next_rand() % 34];
		}
	}
	const struct rb_scrub_prefilter *sets[] = {&t.anchors, &t.keywords};
	for (size_t k = 0; k < 2; k++) {
		struct rb_scrub_prefilter vec = *sets[k], scalar = *sets[k];
		scalar.simd = false;
		for (size_t len = n; len + 40 > n; len -= 13) { /* tails of every length mod 32 */
			memset(vec_hit, 0, sizeof vec_hit);
			size_t found = 0;
			for (size_t i = 0; (i = rb_scrub_prefilter_next(&vec, text, i, len)) < len; i++) {
				if (brute_next(sets[k], text, i, len) != i)
					fail_msg("prefilter %zu, length %zu: the vector path returns %zu, no candidate",
					         k, len, i);
				vec_hit[i] = true;
			}
			for (size_t i = 0; i < len;) {
				size_t b = rb_scrub_prefilter_next(&scalar, text, i, len),
				       c = brute_next(sets[k], text, i, len);
				if (b != c)
					fail_msg("prefilter %zu at %zu of %zu: scalar %zu, exact %zu", k, i, len, b, c);
				i = c + 1;
			}
			for (size_t i = 0; i + 3 <= len; i++) {
				if (!planted[k][i])
					continue;
				found++;
				if (!vec_hit[i] || brute_next(sets[k], text, i, len) != i)
					fail_msg("prefilter %zu, length %zu: the key planted at %zu is not returned", k,
					         len, i);
			}
			assert_true(found > 100); /* the comparison is not of empty sets */
		}
		/* a text of bytes no prefix starts with gives none */
		static const unsigned char none[] = "################################################################";
		assert_int_equal(rb_scrub_prefilter_next(&vec, none, 0, sizeof none - 1), sizeof none - 1);
		assert_int_equal(rb_scrub_prefilter_next(&scalar, none, 0, sizeof none - 1), sizeof none - 1);
	}
}

/* The per-candidate tests against plain restatements of what they decide: entropy as
 * -sum(p log2 p) over all 256 bytes, and the placeholder test word by word with strncasecmp and
 * its runs counted as written, on values of every length to 600 over alphabets that make words,
 * runs, counting-up bytes and few distinct bytes likely, and over all bytes. */
static double entropy_reference(const unsigned char *v, size_t n)
{
	size_t cnt[256] = {0};
	for (size_t i = 0; i < n; i++)
		cnt[v[i]]++;
	double h = 0;
	for (int c = 0; c < 256; c++)
		if (cnt[c])
			h -= (double)cnt[c] / (double)n * log2((double)cnt[c] / (double)n);
	return h;
}

static const char *const placeholder_words[] = {
    "example",   "xxxx",  "your_",    "your-",   "yourkey",  "yourtoken",  "placeholder", "changeme",
    "change_me", "dummy", "redacted", "notreal", "not_real", "notasecret", "replace_me",  "insert_",
    "lorem",     "...",   "${",       "{{",      "<",        ">",
};

static bool placeholder_reference(const unsigned char *v, size_t n)
{
	const char *const *words = placeholder_words;
	if (n == 0)
		return true;
	for (size_t i = 0; i < n; i++)
		for (size_t w = 0; w < RB_ARRAY_SIZE(placeholder_words); w++) {
			size_t wl = strlen(words[w]);
			if (wl <= n - i && strncasecmp((const char *)v + i, words[w], wl) == 0 &&
			    (words[w][0] != 'x' || (v[i] == v[i + 1] && v[i + 1] == v[i + 2] && v[i + 2] == v[i + 3])))
				return true;
		}
	size_t longest = 1, up_max = 1;
	bool seen[256] = {false};
	size_t distinct = 0;
	for (size_t i = 0; i < n; i++) {
		distinct += !seen[v[i]];
		seen[v[i]] = true;
		size_t run = 1, up = 1;
		while (run <= i && v[i - run] == v[i])
			run++;
		while (up <= i && v[i - up] + up == v[i])
			up++;
		longest = run > longest ? run : longest;
		up_max = up > up_max ? up : up_max;
	}
	size_t run_min = n / 4 > 5 ? n / 4 : 5;
	return longest >= run_min || (longest == n && n >= 3) || (n >= 16 && distinct <= 4) || up_max >= 8;
}

static void test_candidate_checks(void **state)
{
	(void)state;
	static const char *const alphabets[] = {
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
	    "exampleXxYyourOoPplaceholderchangeMEdummyredactednotrealinsertlorem_-.${<>",
	    "aab",
	    "0123456789abcdef",
	    "xX",
	    "._{$<>",
	    NULL /* every byte */};
	unsigned seed = 18;
	unsigned char v[600];
	unsigned agree_true = 0;
	for (size_t a = 0; a < RB_ARRAY_SIZE(alphabets); a++)
		for (size_t n = 0; n <= sizeof v; n += n < 40 ? 1 : 7)
			for (int rep = 0; rep < 20; rep++) {
				size_t k = alphabets[a] ? strlen(alphabets[a]) : 256;
				for (size_t i = 0; i < n; i++) {
					unsigned r = (unsigned)rand_r(&seed);
					/* now and then a step up or a repeat of the byte before */
					if (i && r % 9 == 0)
						v[i] = (unsigned char)(v[i - 1] + (r / 9) % 2);
					else
						v[i] = alphabets[a] ? (unsigned char)alphabets[a][r % k]
						                    : (unsigned char)r;
				}
				/* half the values carry a placeholder word (or the most of it) in random case */
				if (rep % 2 && n) {
					unsigned r = (unsigned)rand_r(&seed);
					const char *w = placeholder_words[r % RB_ARRAY_SIZE(placeholder_words)];
					size_t wl = strlen(w) - (r / 64 % 3 == 0 && strlen(w) > 1), at = r / 256 % n;
					for (size_t i = 0; i < wl && at + i < n; i++)
						v[at + i] =
						    (unsigned char)(r / 4 % 2 && w[i] >= 'a' && w[i] <= 'z' ? w[i] - 32
						                                                            : w[i]);
				}
				bool want = placeholder_reference(v, n);
				if (rb_scrub_placeholder(v, n) != want)
					fail_msg("placeholder: alphabet %zu, %zu bytes, rep %d: %d, want %d", a, n, rep,
					         !want, want);
				agree_true += want;
				if (n && fabs(rb_scrub_entropy(v, n) - entropy_reference(v, n)) > 1e-9)
					fail_msg("entropy: alphabet %zu, %zu bytes: %.12f, want %.12f", a, n,
					         rb_scrub_entropy(v, n), entropy_reference(v, n));
			}
	/* both answers were tested, many times each */
	assert_true(agree_true > 100);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_planted),
	    cmocka_unit_test(test_control_untouched),
	    cmocka_unit_test(test_near_misses),
	    cmocka_unit_test(test_refusals),
	    cmocka_unit_test(test_merge),
	    cmocka_unit_test(test_binary_and_hostile),
	    cmocka_unit_test(test_counts_json_and_harvest_cb),
	    cmocka_unit_test(test_stream_equals_buffer),
	    cmocka_unit_test(test_stream_holds_only_what_may_match),
	    cmocka_unit_test(test_scrub_json),
	    cmocka_unit_test(test_formats),
	    cmocka_unit_test(test_precision),
	    cmocka_unit_test(test_exact_every_offset),
	    cmocka_unit_test(test_prefilter_paths),
	    cmocka_unit_test(test_candidate_checks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Fuzz target: the run token parser (rb_token_verify). The first byte picks the input's shape:
 * a raw token; a payload the harness signs with the run key (so the payload parser is reached
 * past the MAC); or claims for rb_token_issue. Properties: an accepted token names the
 * expected run, has not expired, and has well-formed claims; a flipped byte of a signed token
 * is refused; what rb_token_issue makes, rb_token_verify accepts with the same claims. */
#define _GNU_SOURCE
#include "common/error.h"
#include "common/util.h"
#include "common/token.h"
#include "tests/fuzz/fuzz.h"

#define RUN   "run-1"
#define NONCE "0123456789abcdef0123456789abcdef"
#define NOW   1700000000

static const uint8_t key[RB_TOKEN_KEY_LEN] = "0123456789abcdef0123456789abcde";

/* base64url without padding (RFC 4648 section 5), written here so the check does not share
 * token.c's encoder. */
static size_t b64url(const uint8_t *in, size_t n, char *out)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v =
		    (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) | (i + 2 < n ? in[i + 2] : 0);
		out[o++] = a[v >> 18 & 63];
		out[o++] = a[v >> 12 & 63];
		if (i + 1 < n)
			out[o++] = a[v >> 6 & 63];
		if (i + 2 < n)
			out[o++] = a[v & 63];
	}
	out[o] = '\0';
	return o;
}

static int field_ok(const char *s)
{
	size_t n = strnlen(s, RB_TOKEN_FIELD_MAX);
	if (n == 0 || n >= RB_TOKEN_FIELD_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return 0;
	return 1;
}

static void check_accepted(const struct rb_token_claims *c, const char *tok)
{
	if (strcmp(c->run, RUN) != 0)
		FUZZ_FAIL("accepted a token for run '%s', expected " RUN ": %s", c->run, tok);
	if (c->expires <= NOW)
		FUZZ_FAIL("accepted an expired token (exp %lld): %s", (long long)c->expires, tok);
	if (!field_ok(c->tenant) || !field_ok(c->agent) || !field_ok(c->run))
		FUZZ_FAIL("accepted a token with an empty, long or control-character field: %s", tok);
	if (strlen(c->nonce) != RB_TOKEN_NONCE_LEN || strspn(c->nonce, "0123456789abcdef") != RB_TOKEN_NONCE_LEN)
		FUZZ_FAIL("accepted a token whose nonce is not %d hex digits: %s", RB_TOKEN_NONCE_LEN, tok);
}

static int verify(const char *tok, struct rb_token_claims *c)
{
	struct rb_error err = {0};
	int r = rb_token_verify(key, sizeof key, tok, RUN, NOW, c, &err);
	if (r == 0)
		check_accepted(c, tok);
	else if (!err.msg[0])
		FUZZ_FAIL("a refused token comes with no message");
	return r;
}

/* "rbx1.<payload64>.<mac64>" with the MAC the key makes; then each byte flipped is refused. */
static void signed_payload(const uint8_t *p, size_t n)
{
	if (n > 700)
		n = 700;
	char tok[RB_TOKEN_MAX * 2];
	memcpy(tok, "rbx1.", 5);
	size_t len = 5 + b64url(p, n, tok + 5);
	uint8_t mac[32];
	rb_hmac_sha256(key, sizeof key, tok, len, mac);
	tok[len++] = '.';
	len += b64url(mac, sizeof mac, tok + len);
	struct rb_token_claims c;
	if (verify(tok, &c) != 0)
		return;
	for (size_t i = 0; i < len; i++) {
		char save = tok[i];
		tok[i] = (char)(save ^ 0x01);
		struct rb_token_claims c2;
		struct rb_error err = {0};
		if (rb_token_verify(key, sizeof key, tok, RUN, NOW, &c2, &err) == 0)
			FUZZ_FAIL("a token with byte %zu changed is still accepted: %s", i, tok);
		tok[i] = save;
	}
}

/* tenant NUL agent NUL expiry-offset (4 bytes): issue, then verify must agree. */
static void issue_roundtrip(const uint8_t *p, size_t n)
{
	char buf[600];
	if (n < 4)
		return;
	int32_t off;
	memcpy(&off, p, 4);
	size_t m = n - 4;
	if (m + 2 > sizeof buf)
		return;
	memcpy(buf, p + 4, m);
	buf[m] = buf[m + 1] = '\0';
	const char *tenant = buf;
	const char *agent = buf + strlen(buf) + 1; /* at worst the second NUL */
	char tok[RB_TOKEN_MAX];
	struct rb_error err = {0};
	int64_t exp = (int64_t)NOW + off;
	if (rb_token_issue(key, sizeof key, tenant, agent, RUN, NONCE, exp, tok, sizeof tok, &err) != 0)
		return;
	struct rb_token_claims c;
	struct rb_error err2 = {0};
	int r = rb_token_verify(key, sizeof key, tok, RUN, NOW, &c, &err2);
	if (exp <= NOW) {
		if (r == 0)
			FUZZ_FAIL("an issued token that expired is accepted");
		return;
	}
	if (r != 0)
		FUZZ_FAIL("an issued token is refused: %s (%s)", err2.msg, tok);
	check_accepted(&c, tok);
	if (strcmp(c.tenant, tenant) || strcmp(c.agent, agent) || strcmp(c.nonce, NONCE) || c.expires != exp)
		FUZZ_FAIL("issued and verified claims differ: %s", tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	switch (data[0] % 3) {
	case 0: {
		char *tok = fuzz_cstr(data + 1, size - 1);
		struct rb_token_claims c;
		if (tok)
			verify(tok, &c);
		free(tok);
		break;
	}
	case 1: signed_payload(data + 1, size - 1); break;
	case 2: issue_roundtrip(data + 1, size - 1); break;
	}
	return 0;
}

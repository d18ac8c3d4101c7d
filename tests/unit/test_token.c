/* common/token.c: run tokens round-trip, and every kind of bad token is refused; the key file
 * is created private and refused once it is not. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "common/token.h"

static const uint8_t key[RB_TOKEN_KEY_LEN] = "0123456789abcdef0123456789abcde";
static const uint8_t other_key[RB_TOKEN_KEY_LEN] = "0123456789abcdef0123456789abcdX";
#define NOW    1700000000
#define EXP    (NOW + 600)
#define NONCE  "0123456789abcdef0123456789abcdef"
#define NONCE2 "fedcba9876543210fedcba9876543210"

static void issue(char *tok)
{
	struct rb_error err = {0};
	int r = rb_token_issue(key, sizeof key, "acme", "agent-7", "run-1", NONCE, EXP, tok, RB_TOKEN_MAX, &err);
	if (r != 0)
		fail_msg("issue: %s", err.msg);
}

/* Asserts the token is refused, with a message containing why. */
static void refused(const char *tok, const uint8_t *k, const char *run, int64_t now, const char *why)
{
	struct rb_error err = {0};
	struct rb_token_claims c;
	assert_int_equal(rb_token_verify(k, RB_TOKEN_KEY_LEN, tok, run, now, &c, &err), -1);
	if (!strstr(err.msg, why))
		fail_msg("expected \"%s\", got \"%s\"", why, err.msg);
}

static void test_round_trip(void **state)
{
	char tok[RB_TOKEN_MAX];
	issue(tok);
	assert_true(strncmp(tok, "rbx1.", 5) == 0);
	assert_null(strpbrk(tok, "+/= \n"));
	struct rb_error err = {0};
	struct rb_token_claims c;
	assert_int_equal(rb_token_verify(key, sizeof key, tok, "run-1", NOW, &c, &err), 0);
	assert_string_equal(c.tenant, "acme");
	assert_string_equal(c.agent, "agent-7");
	assert_string_equal(c.run, "run-1");
	assert_int_equal(c.expires, EXP);
	/* valid up to the second before expiry */
	assert_int_equal(rb_token_verify(key, sizeof key, tok, "run-1", EXP - 1, &c, &err), 0);
}

static void test_expired(void **state)
{
	char tok[RB_TOKEN_MAX];
	issue(tok);
	refused(tok, key, "run-1", EXP, "expired");
	refused(tok, key, "run-1", EXP + 3600, "expired");
}

static void test_wrong_run(void **state)
{
	char tok[RB_TOKEN_MAX];
	issue(tok);
	refused(tok, key, "run-2", NOW, "another run");
	refused(tok, key, "run-", NOW, "another run");
}

static void test_wrong_key(void **state)
{
	char tok[RB_TOKEN_MAX];
	issue(tok);
	refused(tok, other_key, "run-1", NOW, "signature");
}

/* A payload for another run, re-encoded, with the original MAC: the MAC must catch it. */
static void test_tampered_payload(void **state)
{
	char tok[RB_TOKEN_MAX], forged[RB_TOKEN_MAX], other[RB_TOKEN_MAX];
	issue(tok);
	struct rb_error err = {0};
	assert_int_equal(
	    rb_token_issue(key, sizeof key, "acme", "agent-7", "run-2", NONCE, EXP + 999999, other, sizeof other, &err),
	    0);
	const char *mac = strrchr(tok, '.');
	const char *other_mac = strrchr(other, '.');
	snprintf(forged, sizeof forged, "%.*s%s", (int)(other_mac - other), other, mac);
	refused(forged, key, "run-2", NOW, "signature");
	/* one flipped character in the payload */
	snprintf(forged, sizeof forged, "%s", tok);
	forged[8] = forged[8] == 'A' ? 'B' : 'A';
	refused(forged, key, "run-1", NOW, "signature");
}

static void test_tampered_mac(void **state)
{
	char tok[RB_TOKEN_MAX];
	issue(tok);
	size_t n = strlen(tok);
	tok[n - 5] = tok[n - 5] == 'A' ? 'B' : 'A';
	refused(tok, key, "run-1", NOW, "signature");
}

/* The last character of a 32-byte MAC carries 2 unused bits: another spelling of the same MAC
 * must not verify (one token, one form). */
static void test_non_canonical(void **state)
{
	char tok[RB_TOKEN_MAX];
	issue(tok);
	size_t n = strlen(tok);
	static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	int v = (int)(strchr(alpha, tok[n - 1]) - alpha);
	tok[n - 1] = alpha[v ^ 1];
	refused(tok, key, "run-1", NOW, "malformed");
}

static void test_truncated(void **state)
{
	char tok[RB_TOKEN_MAX];
	issue(tok);
	size_t n = strlen(tok);
	for (size_t cut = 0; cut < n; cut++) {
		char t[RB_TOKEN_MAX];
		memcpy(t, tok, cut);
		t[cut] = '\0';
		struct rb_error err = {0};
		if (rb_token_verify(key, sizeof key, t, "run-1", NOW, NULL, &err) == 0)
			fail_msg("a token cut to %zu of %zu bytes verified", cut, n);
	}
}

static void test_garbage(void **state)
{
	static const char *bad[] = {
	    "",
	    "rbx1.",
	    "rbx1..",
	    "rbx1.e30.",
	    "Bearer rbx1.e30.AAAA",
	    "rbx2.eyJhIjoxfQ.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	    "rbx1.eyJhIjoxfQ.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	    "rbx1.eyJhIjoxfQ.AAAA+AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	    "rbx1.eyJhIjoxfQ.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
	    "rbx1.eyJhIjoxfQ.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.x",
	    "\xff\xfe\x01",
	    "rbx1.\n.\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		struct rb_error err = {0};
		if (rb_token_verify(key, sizeof key, bad[i], "run-1", NOW, NULL, &err) == 0)
			fail_msg("garbage #%zu verified", i);
	}
	struct rb_error err = {0};
	assert_int_equal(rb_token_verify(key, sizeof key, NULL, "run-1", NOW, NULL, &err), -1);
	/* far too long */
	char *big = malloc(100000);
	assert_non_null(big);
	memset(big, 'A', 99999);
	memcpy(big, "rbx1.", 5);
	big[99999] = '\0';
	assert_int_equal(rb_token_verify(key, sizeof key, big, "run-1", NOW, NULL, &err), -1);
	free(big);
}

/* Signs an arbitrary payload with the real key, as a forger holding the key would: the MAC
 * passes, so only the payload checks stand between it and acceptance. */
static void sign(const char *payload, char *out)
{
	char b64[RB_TOKEN_MAX];
	int n = EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)payload, (int)strlen(payload));
	while (n > 0 && b64[n - 1] == '=')
		n--;
	b64[n] = '\0';
	for (char *p = b64; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	int len = snprintf(out, RB_TOKEN_MAX, "rbx1.%s", b64);
	unsigned char m[32];
	unsigned ml = 0;
	HMAC(EVP_sha256(), key, sizeof key, (const unsigned char *)out, (size_t)len, m, &ml);
	n = EVP_EncodeBlock((unsigned char *)b64, m, (int)ml);
	while (n > 0 && b64[n - 1] == '=')
		n--;
	b64[n] = '\0';
	for (char *p = b64; *p; p++)
		*p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
	snprintf(out + len, (size_t)(RB_TOKEN_MAX - len), ".%s", b64);
}

static void hex(const unsigned char *m, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", m[i]);
}

/* rb_hmac_sha256 against RFC 4231's test cases 1, 2 and 6 (a key longer than a block), and
 * against OpenSSL's HMAC() for keys and messages of every length around the block size. */
static void test_hmac_sha256(void **state)
{
	(void)state;
	unsigned char m[32];
	char h[65];
	unsigned char k1[20];
	memset(k1, 0x0b, sizeof k1);
	rb_hmac_sha256(k1, sizeof k1, "Hi There", 8, m);
	hex(m, h);
	assert_string_equal(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	rb_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, m);
	hex(m, h);
	assert_string_equal(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	unsigned char k6[131];
	memset(k6, 0xaa, sizeof k6);
	const char *d6 = "Test Using Larger Than Block-Size Key - Hash Key First";
	rb_hmac_sha256(k6, sizeof k6, d6, strlen(d6), m);
	hex(m, h);
	assert_string_equal(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");

	unsigned char buf[200];
	for (size_t i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)(i * 7 + 3);
	for (size_t kl = 0; kl <= 130; kl += 13)
		for (size_t dl = 0; dl <= sizeof buf; dl += 25) {
			unsigned char want[32];
			unsigned wl = 0;
			assert_non_null(HMAC(EVP_sha256(), buf, (int)kl, buf, dl, want, &wl));
			rb_hmac_sha256(buf, kl, buf, dl, m);
			assert_int_equal(wl, 32);
			assert_memory_equal(m, want, 32);
		}
}

/* A run id can come back (a manifest may name one); a token of the earlier run instance must
 * not be valid at the later one's endpoint: each instance has its own key, derived from the
 * master key, the run id and the instance's nonce. */
static void test_run_instance_key(void **state)
{
	uint8_t k1[RB_TOKEN_KEY_LEN], k1b[RB_TOKEN_KEY_LEN], k2[RB_TOKEN_KEY_LEN], k3[RB_TOKEN_KEY_LEN];
	struct rb_error err = {0};
	assert_int_equal(rb_token_run_key(key, sizeof key, "run-1", NONCE, k1, &err), 0);
	assert_int_equal(rb_token_run_key(key, sizeof key, "run-1", NONCE, k1b, &err), 0);
	assert_int_equal(rb_token_run_key(key, sizeof key, "run-1", NONCE2, k2, &err), 0);
	assert_int_equal(rb_token_run_key(key, sizeof key, "run-2", NONCE, k3, &err), 0);
	assert_memory_equal(k1, k1b, sizeof k1);
	assert_memory_not_equal(k1, k2, sizeof k1);
	assert_memory_not_equal(k1, k3, sizeof k1);
	assert_memory_not_equal(k1, key, sizeof k1);
	char tok[RB_TOKEN_MAX];
	assert_int_equal(rb_token_issue(k1, sizeof k1, "acme", "agent-7", "run-1", NONCE, EXP, tok, sizeof tok, &err),
	                 0);
	/* control: the instance's own endpoint accepts it, and sees its nonce */
	struct rb_token_claims c;
	assert_int_equal(rb_token_verify(k1, sizeof k1, tok, "run-1", NOW, &c, &err), 0);
	assert_string_equal(c.nonce, NONCE);
	/* a later run with the same id (another nonce) refuses it, unexpired */
	refused(tok, k2, "run-1", NOW, "signature does not match");
	/* nor is the master key itself an instance's key */
	refused(tok, key, "run-1", NOW, "signature does not match");
	assert_int_equal(rb_token_run_key(key, sizeof key, "run-1", "xyz", k2, &err), -1);
	assert_int_equal(rb_token_run_key(key, 8, "run-1", NONCE, k2, &err), -1);
}

static void test_signed_bad_payload(void **state)
{
	char tok[RB_TOKEN_MAX];
	/* control: a well-formed payload signed this way verifies */
	sign("{\"agent\":\"a\",\"exp\":1700000600,\"nonce\":\"" NONCE "\",\"run\":\"run-1\",\"tenant\":\"t\"}", tok);
	struct rb_error err = {0};
	if (rb_token_verify(key, sizeof key, tok, "run-1", NOW, NULL, &err) != 0)
		fail_msg("control: %s", err.msg);
	static const char *bad[] = {
	    "{\"agent\":\"a\",\"exp\":\"1700000600\",\"run\":\"run-1\",\"tenant\":\"t\"}",
	    "{\"agent\":\"a\",\"exp\":1700000600,\"run\":\"run-1\"}",
	    "{\"agent\":\"a\",\"exp\":1700000600,\"run\":\"run-1\",\"tenant\":\"t\",\"admin\":true}",
	    "{\"agent\":\"\",\"exp\":1700000600,\"run\":\"run-1\",\"tenant\":\"t\"}",
	    "{\"agent\":\"a\",\"exp\":1700000600,\"run\":\"run-1\",\"run\":\"run-1\",\"tenant\":\"t\"}",
	    "[1,2,3]",
	    "not json",
	    /* the old four-key form, without the run instance */
	    "{\"agent\":\"a\",\"exp\":1700000600,\"run\":\"run-1\",\"tenant\":\"t\"}",
	    "{\"agent\":\"a\",\"exp\":1700000600,\"nonce\":\"0123\",\"run\":\"run-1\",\"tenant\":\"t\"}",
	    "{\"agent\":\"a\",\"exp\":1700000600,\"nonce\":\"0123456789ABCDEF0123456789ABCDEF\",\"run\":\"run-1\","
	    "\"tenant\":\"t\"}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		sign(bad[i], tok);
		refused(tok, key, "run-1", NOW, "malformed token payload");
	}
	/* Issue refuses bad fields itself. */
	assert_int_equal(rb_token_issue(key, sizeof key, "", "a", "r", NONCE, EXP, tok, sizeof tok, &err), -1);
	assert_int_equal(rb_token_issue(key, sizeof key, "t\n", "a", "r", NONCE, EXP, tok, sizeof tok, &err), -1);
	assert_int_equal(rb_token_issue(key, sizeof key, "t", "a", "r", "abc", EXP, tok, sizeof tok, &err), -1);
	assert_int_equal(rb_token_issue(key, sizeof key, "t", "a", "r", NULL, EXP, tok, sizeof tok, &err), -1);
	assert_int_equal(rb_token_issue(key, 8, "t", "a", "r", NONCE, EXP, tok, sizeof tok, &err), -1);
	assert_int_equal(rb_token_issue(key, sizeof key, "t", "a", "r", NONCE, EXP, tok, 20, &err), -1);
}

/* ---- the key file ---- */

static char *tmpdir(void)
{
	char tmpl[] = "/tmp/rbxt-token-XXXXXX";
	char *d = mkdtemp(tmpl);
	assert_non_null(d);
	return strdup(d);
}

static void test_key_file(void **state)
{
	char *dir = tmpdir();
	char state_dir[512], path[600];
	snprintf(state_dir, sizeof state_dir, "%s/state", dir);
	snprintf(path, sizeof path, "%s/keys/token.key", state_dir);
	mode_t old = umask(0);
	struct rb_error err = {0};
	uint8_t k1[64], k2[64];
	size_t l1 = sizeof k1, l2 = sizeof k2;
	int r = rb_token_key_load_or_create(state_dir, k1, &l1, &err);
	umask(old);
	if (r != 0)
		fail_msg("create: %s", err.msg);
	assert_int_equal(l1, RB_TOKEN_KEY_LEN);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600); /* even with umask 0 */
	assert_int_equal(st.st_size, RB_TOKEN_KEY_LEN);
	char keys[560];
	snprintf(keys, sizeof keys, "%s/keys", state_dir);
	assert_int_equal(stat(keys, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);

	/* Loaded again: the same key. */
	assert_int_equal(rb_token_key_load_or_create(state_dir, k2, &l2, &err), 0);
	assert_memory_equal(k1, k2, RB_TOKEN_KEY_LEN);

	/* Control passed; now group/world readable: refused, naming the file. */
	assert_int_equal(chmod(path, 0644), 0);
	l2 = sizeof k2;
	assert_int_equal(rb_token_key_load_or_create(state_dir, k2, &l2, &err), -1);
	assert_non_null(strstr(err.msg, "token.key"));
	assert_non_null(strstr(err.msg, "0644"));
	assert_int_equal(chmod(path, 0600), 0);

	/* Not owned by the euid: refused. */
	assert_int_equal(chown(path, 65534, 65534), 0);
	l2 = sizeof k2;
	assert_int_equal(rb_token_key_load_or_create(state_dir, k2, &l2, &err), -1);
	assert_non_null(strstr(err.msg, "owned by uid 65534"));
	assert_int_equal(chown(path, geteuid(), getegid()), 0);

	/* A symlink in its place: refused (O_NOFOLLOW). */
	char moved[620];
	snprintf(moved, sizeof moved, "%s.real", path);
	assert_int_equal(rename(path, moved), 0);
	assert_int_equal(symlink(moved, path), 0);
	l2 = sizeof k2;
	assert_int_equal(rb_token_key_load_or_create(state_dir, k2, &l2, &err), -1);
	unlink(path);
	assert_int_equal(rename(moved, path), 0);

	/* A keys directory others can read: refused. */
	assert_int_equal(chmod(keys, 0755), 0);
	l2 = sizeof k2;
	assert_int_equal(rb_token_key_load_or_create(state_dir, k2, &l2, &err), -1);
	assert_non_null(strstr(err.msg, "keys"));
	assert_int_equal(chmod(keys, 0700), 0);

	/* Wrong size: refused. */
	assert_int_equal(truncate(path, 16), 0);
	l2 = sizeof k2;
	assert_int_equal(rb_token_key_load_or_create(state_dir, k2, &l2, &err), -1);

	/* A key made from a fresh directory differs (random). */
	char state2[600];
	snprintf(state2, sizeof state2, "%s/state2", dir);
	l2 = sizeof k2;
	assert_int_equal(rb_token_key_load_or_create(state2, k2, &l2, &err), 0);
	assert_memory_not_equal(k1, k2, RB_TOKEN_KEY_LEN);

	assert_int_equal(rb_rm_rf(dir, &err), 0);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_expired),
	    cmocka_unit_test(test_wrong_run),        cmocka_unit_test(test_wrong_key),
	    cmocka_unit_test(test_tampered_payload), cmocka_unit_test(test_tampered_mac),
	    cmocka_unit_test(test_non_canonical),    cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_garbage),          cmocka_unit_test(test_signed_bad_payload),
	    cmocka_unit_test(test_run_instance_key), cmocka_unit_test(test_key_file),
	    cmocka_unit_test(test_hmac_sha256),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Run tokens: issue and verify "rbx1.<payload>.<mac>" (HMAC-SHA256, OpenSSL), and the host-only
 * key file they are made with. base64url is OpenSSL's base64 with the alphabet swapped. */
#define _GNU_SOURCE
#include "common/token.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/paths.h"
#include "common/util.h"

#define PREFIX      "rbx1."
#define MAC_LEN     32
#define MIN_KEY_LEN 16

/* ---- base64url (RFC 4648 section 5, no padding) -------------------------------------------- */

static int b64url_encode(const uint8_t *in, size_t n, char *out, size_t outlen)
{
	if (n > INT_MAX / 2 || 4 * ((n + 2) / 3) + 1 > outlen)
		return -1;
	int m = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	while (m > 0 && out[m - 1] == '=')
		m--;
	out[m] = '\0';
	for (int i = 0; i < m; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	return m;
}

static bool b64url_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Decodes exactly the canonical encoding: any other spelling of the same bytes is refused, so a
 * token has one form (the MAC covers the encoded text). */
static int b64url_decode(const char *in, size_t n, uint8_t *out, size_t outcap, size_t *outlen)
{
	char tmp[RB_TOKEN_MAX + 4], re[RB_TOKEN_MAX + 4];
	if (n == 0 || n % 4 == 1 || n > RB_TOKEN_MAX)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!b64url_char(in[i]))
			return -1;
		tmp[i] = in[i] == '-' ? '+' : in[i] == '_' ? '/' : in[i];
	}
	size_t padded = (n + 3) / 4 * 4;
	memset(tmp + n, '=', padded - n);
	if (padded / 4 * 3 > outcap)
		return -1;
	int m = EVP_DecodeBlock(out, (const unsigned char *)tmp, (int)padded);
	if (m < 0 || (size_t)m < padded - n)
		return -1;
	m -= (int)(padded - n); /* EVP_DecodeBlock counts the padding as zero bytes */
	if (b64url_encode(out, (size_t)m, re, sizeof re) != (int)n || memcmp(re, in, n) != 0)
		return -1;
	*outlen = (size_t)m;
	return 0;
}

/* ---- tokens -------------------------------------------------------------------------------- */

static bool valid_field(const char *s)
{
	size_t n = s ? strnlen(s, RB_TOKEN_FIELD_MAX) : 0;
	if (n == 0 || n >= RB_TOKEN_FIELD_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

static bool valid_nonce(const char *s)
{
	if (!s || strlen(s) != RB_TOKEN_NONCE_LEN)
		return false;
	for (size_t i = 0; i < RB_TOKEN_NONCE_LEN; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return false;
	return true;
}

static int mac(const uint8_t *key, size_t keylen, const char *data, size_t n, uint8_t out[MAC_LEN])
{
	rb_hmac_sha256(key, keylen, data, n, out);
	return 0;
}

int rb_token_run_key(const uint8_t *master, size_t masterlen, const char *run, const char *nonce,
                     uint8_t out[RB_TOKEN_KEY_LEN], struct rb_error *err)
{
	if (!master || masterlen < MIN_KEY_LEN || masterlen > INT_MAX)
		return rb_error_set(err, EINVAL, "run token: key too short");
	if (!valid_field(run) || !valid_nonce(nonce))
		return rb_error_set(err, EINVAL, "run token: bad run id or run nonce");
	char label[RB_TOKEN_FIELD_MAX + RB_TOKEN_NONCE_LEN + 32];
	int n = snprintf(label, sizeof label, "rbx1-run-key\n%s\n%s", run, nonce);
	rb_hmac_sha256(master, masterlen, label, (size_t)n, out);
	return 0;
}

int rb_token_issue(const uint8_t *key, size_t keylen, const char *tenant, const char *agent, const char *run,
                   const char *nonce, int64_t expires_unix, char *out, size_t outlen, struct rb_error *err)
{
	if (!key || keylen < MIN_KEY_LEN || keylen > INT_MAX)
		return rb_error_set(err, EINVAL, "run token: key too short");
	if (!valid_field(tenant) || !valid_field(agent) || !valid_field(run))
		return rb_error_set(err, EINVAL, "run token: tenant, agent and run must be 1..%d printable bytes",
		                    RB_TOKEN_FIELD_MAX - 1);
	if (!valid_nonce(nonce))
		return rb_error_set(err, EINVAL, "run token: the run nonce must be %d lowercase hex digits",
		                    RB_TOKEN_NONCE_LEN);
	_cleanup_json_ json_t *payload = json_pack("{s:s, s:s, s:s, s:s, s:I}", "tenant", tenant, "agent", agent, "run",
	                                           run, "nonce", nonce, "exp", (json_int_t)expires_unix);
	_cleanup_free_ char *text = payload ? json_dumps(payload, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	if (!text)
		return rb_error_set(err, ENOMEM, "run token: payload");
	char buf[RB_TOKEN_MAX];
	size_t pre = strlen(PREFIX);
	memcpy(buf, PREFIX, pre);
	int p = b64url_encode((const uint8_t *)text, strlen(text), buf + pre, sizeof buf - pre);
	if (p < 0 || pre + (size_t)p + 1 >= sizeof buf)
		return rb_error_set(err, ENAMETOOLONG, "run token: payload too long");
	size_t signed_len = pre + (size_t)p;
	uint8_t m[MAC_LEN];
	if (mac(key, keylen, buf, signed_len, m) < 0)
		return rb_error_set(err, EIO, "run token: HMAC-SHA256");
	buf[signed_len] = '.';
	if (b64url_encode(m, sizeof m, buf + signed_len + 1, sizeof buf - signed_len - 1) < 0)
		return rb_error_set(err, ENAMETOOLONG, "run token: too long");
	OPENSSL_cleanse(m, sizeof m);
	if (strlen(buf) + 1 > outlen)
		return rb_error_set(err, ENOSPC, "run token: buffer of %zu bytes too small", outlen);
	memcpy(out, buf, strlen(buf) + 1);
	return 0;
}

static int copy_field(json_t *payload, const char *name, char *out)
{
	const char *s = json_string_value(json_object_get(payload, name));
	if (!valid_field(s))
		return -1;
	snprintf(out, RB_TOKEN_FIELD_MAX, "%s", s);
	return 0;
}

int rb_token_verify(const uint8_t *key, size_t keylen, const char *token, const char *expected_run, int64_t now,
                    struct rb_token_claims *out, struct rb_error *err)
{
	if (!key || keylen < MIN_KEY_LEN || keylen > INT_MAX)
		return rb_error_set(err, EINVAL, "run token: key too short");
	size_t n = token ? strnlen(token, RB_TOKEN_MAX) : 0;
	size_t pre = strlen(PREFIX);
	if (n == 0 || n >= RB_TOKEN_MAX || strncmp(token, PREFIX, pre) != 0)
		return rb_error_set(err, 0, "malformed token");
	const char *dot = memchr(token + pre, '.', n - pre);
	if (!dot || dot == token + pre)
		return rb_error_set(err, 0, "malformed token");
	size_t signed_len = (size_t)(dot - token);

	/* Authenticate before reading anything the token says. */
	uint8_t want[MAC_LEN], got[RB_TOKEN_MAX];
	size_t got_len = 0;
	if (b64url_decode(dot + 1, n - signed_len - 1, got, sizeof got, &got_len) < 0 || got_len != MAC_LEN)
		return rb_error_set(err, 0, "malformed token");
	if (mac(key, keylen, token, signed_len, want) < 0)
		return rb_error_set(err, EIO, "run token: HMAC-SHA256");
	int differ = CRYPTO_memcmp(want, got, MAC_LEN);
	OPENSSL_cleanse(want, sizeof want);
	if (differ)
		return rb_error_set(err, 0, "token signature does not match");

	uint8_t text[RB_TOKEN_MAX];
	size_t text_len = 0;
	if (b64url_decode(token + pre, signed_len - pre, text, sizeof text, &text_len) < 0)
		return rb_error_set(err, 0, "malformed token payload");
	_cleanup_json_ json_t *payload = json_loadb((const char *)text, text_len, JSON_REJECT_DUPLICATES, NULL);
	json_t *exp = json_object_get(payload, "exp");
	struct rb_token_claims c = {0};
	const char *nonce = json_string_value(json_object_get(payload, "nonce"));
	if (!json_is_object(payload) || json_object_size(payload) != 5 || !json_is_integer(exp) ||
	    copy_field(payload, "tenant", c.tenant) < 0 || copy_field(payload, "agent", c.agent) < 0 ||
	    copy_field(payload, "run", c.run) < 0 || !valid_nonce(nonce))
		return rb_error_set(err, 0, "malformed token payload");
	snprintf(c.nonce, sizeof c.nonce, "%s", nonce);
	c.expires = json_integer_value(exp);
	if (!expected_run || strcmp(c.run, expected_run) != 0)
		return rb_error_set(err, 0, "token is for another run");
	if (now >= c.expires)
		return rb_error_set(err, 0, "token expired");
	if (out)
		*out = c;
	return 0;
}

/* ---- the key file ---------------------------------------------------------------------------- */

/* Owned by us, no group or other bits, of the expected type. */
static int check_private(const char *path, const struct stat *st, mode_t type, struct rb_error *err)
{
	if ((st->st_mode & S_IFMT) != type)
		return rb_error_set(err, 0, "`%s` is not a %s", path, type == S_IFDIR ? "directory" : "regular file");
	if (st->st_uid != geteuid())
		return rb_error_set(err, 0, "`%s` is owned by uid %u, not by uid %u", path, (unsigned)st->st_uid,
		                    (unsigned)geteuid());
	if (st->st_mode & 077)
		return rb_error_set(err, 0, "`%s` has mode %04o: group and others must have no access (chmod %s it)",
		                    path, (unsigned)(st->st_mode & 07777), type == S_IFDIR ? "700" : "600");
	return 0;
}

static int create_key(const char *dir, const char *path, struct rb_error *err)
{
	char tmp[PATH_MAX];
	uint32_t salt;
	if (getrandom(&salt, sizeof salt, 0) != sizeof salt)
		return rb_error_set(err, errno, "getrandom");
	if (snprintf(tmp, sizeof tmp, "%s/.token.key.%d.%08" PRIx32, dir, (int)getpid(), salt) >= (int)sizeof tmp)
		return rb_error_set(err, ENAMETOOLONG, "token key `%s`", path);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return rb_error_set(err, errno, "create `%s`", tmp);
	uint8_t key[RB_TOKEN_KEY_LEN];
	int r = 0;
	if (fchmod(fd, 0600) < 0) /* whatever the umask */
		r = rb_error_set(err, errno, "chmod `%s`", tmp);
	else if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
		r = rb_error_set(err, errno, "getrandom");
	else if ((errno = 0, write(fd, key, sizeof key)) != (ssize_t)sizeof key || fsync(fd) < 0)
		r = rb_error_set(err, errno ? errno : EIO, "write `%s`", tmp);
	OPENSSL_cleanse(key, sizeof key);
	/* link() never replaces: if another runner won the race, its key stays and we load it. */
	if (r == 0 && link(tmp, path) < 0 && errno != EEXIST)
		r = rb_error_set(err, errno, "link `%s` to `%s`", tmp, path);
	unlink(tmp);
	if (r == 0) {
		_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0)
			fsync(dfd);
	}
	return r;
}

int rb_token_key_load_or_create(const char *state_dir, uint8_t *key, size_t *len, struct rb_error *err)
{
	if (*len < RB_TOKEN_KEY_LEN)
		return rb_error_set(err, EINVAL, "token key buffer too small");
	char dir[PATH_MAX], path[PATH_MAX];
	if (snprintf(dir, sizeof dir, "%s/keys", state_dir) >= (int)sizeof dir ||
	    snprintf(path, sizeof path, "%s/token.key", dir) >= (int)sizeof path)
		return rb_error_set(err, ENAMETOOLONG, "state directory `%s`", state_dir);
	if (rb_state_dir_make(state_dir, err) < 0)
		return -1;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return rb_error_set(err, errno, "mkdir `%s`", dir);
	struct stat st;
	if (lstat(dir, &st) < 0)
		return rb_error_set(err, errno, "stat `%s`", dir);
	if (check_private(dir, &st, S_IFDIR, err) < 0)
		return -1;

	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (create_key(dir, path, err) < 0)
			return -1;
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return rb_error_set(err, errno, "open `%s`", path);
	if (fstat(fd, &st) < 0)
		return rb_error_set(err, errno, "stat `%s`", path);
	if (check_private(path, &st, S_IFREG, err) < 0)
		return -1;
	if (st.st_size != RB_TOKEN_KEY_LEN)
		return rb_error_set(err, 0, "token key `%s` has %jd bytes, not %d", path, (intmax_t)st.st_size,
		                    RB_TOKEN_KEY_LEN);
	size_t got = 0;
	while (got < RB_TOKEN_KEY_LEN) {
		ssize_t r = read(fd, key + got, RB_TOKEN_KEY_LEN - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return rb_error_set(err, r < 0 ? errno : EIO, "read `%s`", path);
		got += (size_t)r;
	}
	*len = RB_TOKEN_KEY_LEN;
	return 0;
}

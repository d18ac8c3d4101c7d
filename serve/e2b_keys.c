/* The E2B front end's API keys: a 0600 JSON file {"e2b_<hex>": {"tenant": T, "policy"?: P}} read
 * at start, each key mapped to a tenant; a key is looked up in constant time. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "policy/manifest.h"
#include "serve/e2b_internal.h"

#define KEYS_MAX_BYTES (1u << 20)
#define KEY_HEX        40

static bool key_ok(const char *k)
{
	size_t n = strlen(k);
	if (strncmp(k, "e2b_", 4) != 0 || n < 4 + 16 || n >= sizeof(((struct e2b_key *)0)->key))
		return false;
	for (const char *c = k + 4; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/* The keys file, read only when it is a regular file of ours that nobody else may read. */
static int read_keys(const char *path, json_t **out, bool missing_ok, struct rb_error *err)
{
	*out = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT && missing_ok) {
		*out = json_object();
		return 0;
	}
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rb_error_set(err, errno, "e2b keys %s", path);
	if (!S_ISREG(st.st_mode))
		return rb_error_setk(err, RB_ERR_INPUT, 0, "e2b keys %s: not a regular file", path);
	if (st.st_mode & 077)
		return rb_error_setk(err, RB_ERR_FORBIDDEN, 0, "e2b keys %s: mode %04o, must be 0600 (chmod 600 %s)",
		                     path, (unsigned)(st.st_mode & 07777), path);
	if (st.st_uid != geteuid())
		return rb_error_setk(err, RB_ERR_FORBIDDEN, 0, "e2b keys %s: owned by uid %u, not by this user", path,
		                     (unsigned)st.st_uid);
	if (st.st_size > KEYS_MAX_BYTES)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "e2b keys %s: over 1 MiB", path);
	_cleanup_free_ char *text = calloc(1, (size_t)st.st_size + 1);
	if (!text)
		return rb_error_set(err, ENOMEM, "e2b keys %s", path);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return rb_error_set(err, r < 0 ? errno : EIO, "e2b keys %s: read", path);
		got += (size_t)r;
	}
	json_error_t je;
	json_t *v = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	if (!v || !json_is_object(v)) {
		json_decref(v);
		return rb_error_setk(err, RB_ERR_INPUT, 0, "e2b keys %s: not a JSON object (line %d: %s)", path,
		                     je.line, v ? "expected an object" : je.text);
	}
	*out = v;
	return 0;
}

int e2b_keys_load(struct rb_e2b *e, const char *path, struct rb_error *err)
{
	_cleanup_json_ json_t *v = NULL;
	if (read_keys(path, &v, false, err) < 0)
		return -1;
	e->keys = calloc(json_object_size(v) + 1, sizeof *e->keys);
	if (!e->keys)
		return rb_error_set(err, ENOMEM, "e2b keys");
	const char *k;
	json_t *o;
	json_object_foreach(v, k, o)
	{
		if (!key_ok(k))
			return rb_error_setk(
			    err, RB_ERR_INPUT, 0,
			    "e2b keys %s: key `%.12s...`: expected e2b_ and at least 16 lowercase hex digits", path, k);
		const char *tenant = json_string_value(json_object_get(o, "tenant"));
		json_t *pol = json_object_get(o, "policy");
		if (!json_is_object(o) || !tenant || !rb_manifest_id_ok(tenant) || (pol && !json_is_string(pol)) ||
		    json_object_size(o) != 1u + (pol != NULL))
			return rb_error_setk(err, RB_ERR_INPUT, 0,
			                     "e2b keys %s: key `%.8s...`: expected {\"tenant\": ID, \"policy\"?: NAME}",
			                     path, k);
		struct e2b_key *ek = &e->keys[e->n_keys++];
		snprintf(ek->key, sizeof ek->key, "%s", k);
		snprintf(ek->tenant, sizeof ek->tenant, "%s", tenant);
		snprintf(ek->policy, sizeof ek->policy, "%s", pol ? json_string_value(pol) : "");
	}
	if (!e->n_keys)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "e2b keys %s: no key (runbox serve --e2b-new-key TENANT)",
		                     path);
	return 0;
}

const struct e2b_key *e2b_key_find(const struct rb_e2b *e, const char *key)
{
	if (!key)
		return NULL;
	char given[sizeof(((struct e2b_key *)0)->key)] = {0};
	size_t n = strlen(key);
	if (n >= sizeof given)
		return NULL;
	memcpy(given, key, n);
	/* Every key compared in full, so the time says nothing of how much of one matched. */
	const struct e2b_key *found = NULL;
	for (size_t i = 0; i < e->n_keys; i++)
		if (CRYPTO_memcmp(given, e->keys[i].key, sizeof given) == 0)
			found = &e->keys[i];
	return found;
}

int rb_e2b_issue_key(const char *keys_path, const char *tenant, char *key, size_t len, struct rb_error *err)
{
	if (!rb_manifest_id_ok(tenant))
		return rb_error_setk(err, RB_ERR_INPUT, 0, "tenant `%s`: expected an id ([A-Za-z0-9._-]{1,64})",
		                     tenant);
	_cleanup_json_ json_t *v = NULL;
	if (read_keys(keys_path, &v, true, err) < 0)
		return -1;
	char hex[KEY_HEX + 1];
	if (rb_random_hex(hex, sizeof hex) < 0)
		return rb_error_set(err, errno, "getrandom");
	if (len < 4 + sizeof hex)
		return rb_error_setk(err, RB_ERR_INTERNAL, 0, "key buffer too small");
	snprintf(key, len, "e2b_%s", hex);
	json_object_set_new(v, key, json_pack("{s:s}", "tenant", tenant));
	/* Written under a temporary name, 0600 from the start, then renamed over the file. */
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.%s.tmp", keys_path, hex) >= (int)sizeof tmp)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "e2b keys %s: path too long", keys_path);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return rb_error_set(err, errno, "e2b keys %s", tmp);
	_cleanup_free_ char *text = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text || rb_write_all(fd, text, strlen(text)) < 0 || rb_write_all(fd, "\n", 1) < 0 || fsync(fd) < 0 ||
	    rename(tmp, keys_path) < 0) {
		int e = text ? errno : ENOMEM;
		unlink(tmp);
		return rb_error_set(err, e, "e2b keys %s", keys_path);
	}
	return 0;
}

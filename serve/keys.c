/* Bearer keys (keys.h): each stored as its SHA-256, looked up by digest in constant time. */
#define _GNU_SOURCE
#include "serve/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/util.h"
#include "policy/manifest.h"

struct key {
	char digest[65];
	char tenant[65];
};

struct rb_serve_keys {
	struct key *keys;
	size_t n;
};

void rb_serve_keys_free(struct rb_serve_keys *k)
{
	if (!k)
		return;
	explicit_bzero(k->keys, k->n * sizeof *k->keys);
	free(k->keys);
	free(k);
}

int rb_serve_keys_load(const char *path, struct rb_serve_keys **out, struct rb_error *err)
{
	*out = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return rb_error_setk(err, RB_ERR_INPUT, errno, "--keys `%s`", path);
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
		return rb_error_setk(
		    err, RB_ERR_FORBIDDEN, 0,
		    "--keys `%s`: must be a regular file of uid %u with mode 0600 (it is uid %u, mode %04o)", path,
		    (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
	char *text = NULL;
	if (rb_read_file(path, 1u << 20, &text, NULL, err) < 0)
		return -1;
	struct rb_jsonck ck = {"keys", path, err};
	json_t *doc = rb_jsonck_load(&ck, text);
	explicit_bzero(text, strlen(text));
	free(text);
	if (!doc)
		return -1;
	struct rb_serve_keys *k = calloc(1, sizeof *k);
	if (!k || !(k->keys = calloc(json_object_size(doc) + 1, sizeof *k->keys))) {
		free(k);
		json_decref(doc);
		return rb_error_set(err, ENOMEM, "keys");
	}
	const char *key;
	json_t *v;
	int r = 0;
	json_object_foreach(doc, key, v)
	{
		static const char *const known[] = {"tenant", NULL};
		char p[64];
		snprintf(p, sizeof p, "$[key %zu]", k->n + 1); /* never the key itself in a message */
		const char *tenant = json_string_value(json_object_get(v, "tenant"));
		if (!json_is_object(v))
			r = rb_jsonck_expected(&ck, p, "an object {\"tenant\": ID}", v);
		else if (rb_jsonck_keys(&ck, p, v, known) < 0)
			r = -1;
		else if (!tenant || !rb_manifest_id_ok(tenant))
			r = rb_jsonck_bad(&ck, p, "`tenant`: an id ([A-Za-z0-9._-]{1,64})");
		else if (strlen(key) < RB_SERVE_KEY_MIN || strlen(key) > 512 || strpbrk(key, " \t\r\n"))
			r = rb_jsonck_bad(&ck, p, "a key is %d to 512 bytes without spaces", RB_SERVE_KEY_MIN);
		if (r < 0)
			break;
		rb_sha256_hex(key, strlen(key), k->keys[k->n].digest);
		snprintf(k->keys[k->n].tenant, sizeof k->keys[k->n].tenant, "%s", tenant);
		k->n++;
	}
	json_decref(doc);
	if (r == 0 && k->n == 0)
		r = rb_error_setk(err, RB_ERR_INPUT, 0, "--keys `%s`: no key", path);
	if (r < 0) {
		rb_serve_keys_free(k);
		return -1;
	}
	*out = k;
	return 0;
}

const char *rb_serve_keys_tenant(const struct rb_serve_keys *k, const char *authorization)
{
	if (!k || !authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	const char *key = authorization + 7;
	while (*key == ' ')
		key++;
	char digest[65];
	rb_sha256_hex(key, strlen(key), digest);
	const char *found = NULL;
	for (size_t i = 0; i < k->n; i++) /* every key compared: the time says nothing of which */
		if (CRYPTO_memcmp(digest, k->keys[i].digest, 64) == 0)
			found = k->keys[i].tenant;
	return found;
}

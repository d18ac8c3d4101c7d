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

#define KEY_NAMES_MAX 16
#define KEY_NAME_MAX  200

struct key {
	char digest[65];
	char tenant[65];
	/* The policies and images (as a session request names them) the key may use; none listed
	 * (n_x == -1): any the operator's store and policies hold, as over the unix socket. */
	int n_policies, n_images;
	char policies[KEY_NAMES_MAX][KEY_NAME_MAX], images[KEY_NAMES_MAX][KEY_NAME_MAX];
};

/* A key's list of names (`what` of the key p) into out; -1 when absent. */
static int names(struct rb_jsonck *ck, const char *p, json_t *v, const char *what, char (*out)[KEY_NAME_MAX], int *n)
{
	json_t *a = json_object_get(v, what);
	*n = -1;
	if (!a)
		return 0;
	char at[96];
	snprintf(at, sizeof at, "%s.%s", p, what);
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > KEY_NAMES_MAX)
		return rb_jsonck_bad(ck, at, "a list of 1 to %d names", KEY_NAMES_MAX);
	size_t i;
	json_t *e;
	json_array_foreach(a, i, e)
	{
		const char *s = json_string_value(e);
		if (!s || !*s || strlen(s) >= KEY_NAME_MAX)
			return rb_jsonck_bad(ck, at, "names of 1 to %d bytes", KEY_NAME_MAX - 1);
		snprintf(out[i], KEY_NAME_MAX, "%s", s);
	}
	*n = (int)json_array_size(a);
	return 0;
}

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
		static const char *const known[] = {"tenant", "policies", "images", NULL};
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
		struct key *ke = &k->keys[k->n];
		if (r == 0 && (names(&ck, p, v, "policies", ke->policies, &ke->n_policies) < 0 ||
		               names(&ck, p, v, "images", ke->images, &ke->n_images) < 0))
			r = -1;
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

const struct rb_serve_key *rb_serve_keys_find(const struct rb_serve_keys *k, const char *authorization)
{
	if (!k || !authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
		return NULL;
	const char *key = authorization + 7;
	while (*key == ' ')
		key++;
	char digest[65];
	rb_sha256_hex(key, strlen(key), digest);
	const struct key *found = NULL;
	for (size_t i = 0; i < k->n; i++) /* every key compared: the time says nothing of which */
		if (CRYPTO_memcmp(digest, k->keys[i].digest, 64) == 0)
			found = &k->keys[i];
	return (const struct rb_serve_key *)found;
}

const char *rb_serve_key_tenant(const struct rb_serve_key *key)
{
	return key ? ((const struct key *)key)->tenant : NULL;
}

static bool listed(int n, const char (*list)[KEY_NAME_MAX], const char *name)
{
	if (n < 0)
		return true;
	for (int i = 0; i < n; i++)
		if (!strcmp(list[i], name))
			return true;
	return false;
}

bool rb_serve_key_allows(const struct rb_serve_key *key, const char *policy, const char *image, char *why, size_t n)
{
	const struct key *ke = (const struct key *)key;
	if (!ke)
		return true;
	if (!listed(ke->n_policies, ke->policies, policy)) {
		snprintf(why, n,
		         "$.policy: this key may not use policy `%.64s` (its keys file entry lists its policies)",
		         policy);
		return false;
	}
	if (!listed(ke->n_images, ke->images, image)) {
		snprintf(why, n, "$.image: this key may not use image `%.100s` (its keys file entry lists its images)",
		         image);
		return false;
	}
	return true;
}

bool rb_serve_key_may_create(const struct rb_serve_key *key, json_t *body, char *why, size_t n)
{
	const char *tenant = rb_serve_key_tenant(key);
	if (!tenant || !json_is_object(body))
		return true;
	const char *asked = json_string_value(json_object_get(body, "tenant"));
	if (asked && strcmp(asked, tenant) != 0) {
		snprintf(why, n, "$.tenant: this key is another tenant's");
		return false;
	}
	if (!json_object_get(body, "tenant"))
		json_object_set_new(body, "tenant", json_string(tenant));
	/* The defaults as the create fills them in. */
	const char *policy = json_string_value(json_object_get(body, "policy"));
	const char *image = json_string_value(json_object_get(body, "image"));
	return rb_serve_key_allows(key, policy ? policy : "default", image ? image : "host", why, n);
}

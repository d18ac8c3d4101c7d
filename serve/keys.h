/* runbox serve's bearer keys for its TCP listener (keys.c): a 0600 JSON file of the daemon's
 * user, {"KEY": {"tenant": "T", "policies": [...], "images": [...]}}; a key sees its tenant's
 * sessions only, and makes sessions of its listed policies and images only. */
#ifndef RB_SERVE_KEYS_H
#define RB_SERVE_KEYS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

struct rb_serve_keys;

/* Loads path: refused unless a regular file owned by the daemon's user, mode 0600 (or
 * stricter), of keys of at least RB_SERVE_KEY_MIN bytes each mapped to {"tenant": ID}. */
int rb_serve_keys_load(const char *path, struct rb_serve_keys **out, struct rb_error *err);
void rb_serve_keys_free(struct rb_serve_keys *k);
struct rb_serve_key;

/* The key of an Authorization header's "Bearer KEY", or NULL (no header, another scheme, an
 * unknown key). Compares in constant time over every key. */
const struct rb_serve_key *rb_serve_keys_find(const struct rb_serve_keys *k, const char *authorization);
/* Its tenant: it sees only that tenant's sessions. NULL for a NULL key. */
const char *rb_serve_key_tenant(const struct rb_serve_key *key);
/* Whether a session of policy and image (as the request names them, defaults filled in) is
 * the key's to make: an entry's "policies" and "images" lists, when given, are all it may use
 * (an operator's policies are the most a run may do; a key may be held to fewer); a NULL key
 * (the unix socket) may use any. false, with why, when not. */
bool rb_serve_key_allows(const struct rb_serve_key *key, const char *policy, const char *image, char *why, size_t n);
/* The one check of a create's body against the caller's key, for every way a session is made
 * (a POST /v1/sessions, and the create a resume makes from the closed session's record):
 * another tenant named is refused, none is filled in with the key's, and the policy and image,
 * defaults filled in, must be the key's to use (rb_serve_key_allows). false, with why, when
 * not; a body that is not an object is left to the create's own checks. */
bool rb_serve_key_may_create(const struct rb_serve_key *key, json_t *body, char *why, size_t n);

#define RB_SERVE_KEY_MIN 16

#endif

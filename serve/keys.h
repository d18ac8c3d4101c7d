/* runbox serve's bearer keys for its TCP listener (keys.c): a 0600 JSON file of the daemon's
 * user, {"KEY": {"tenant": "T"}}; a key sees its tenant's sessions only. */
#ifndef RB_SERVE_KEYS_H
#define RB_SERVE_KEYS_H

#include "common/error.h"

struct rb_serve_keys;

/* Loads path: refused unless a regular file owned by the daemon's user, mode 0600 (or
 * stricter), of keys of at least RB_SERVE_KEY_MIN bytes each mapped to {"tenant": ID}. */
int rb_serve_keys_load(const char *path, struct rb_serve_keys **out, struct rb_error *err);
void rb_serve_keys_free(struct rb_serve_keys *k);
/* The tenant of an Authorization header's "Bearer KEY", or NULL (no header, another scheme,
 * an unknown key). Compares in constant time over every key. */
const char *rb_serve_keys_tenant(const struct rb_serve_keys *k, const char *authorization);

#define RB_SERVE_KEY_MIN 16

#endif

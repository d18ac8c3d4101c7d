/* Run tokens: the one credential that enters a sandbox. HMAC-SHA256 (OpenSSL) over tenant,
 * agent, run and expiry with a key that never leaves the host; and that key's file. */
#ifndef RB_TOKEN_H
#define RB_TOKEN_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/error.h"

#define RB_TOKEN_KEY_LEN   32
#define RB_TOKEN_MAX       1024 /* longest token issued or accepted, with its NUL */
#define RB_TOKEN_FIELD_MAX 128  /* longest tenant, agent or run id, with its NUL */

struct rb_token_claims {
	char tenant[RB_TOKEN_FIELD_MAX];
	char agent[RB_TOKEN_FIELD_MAX];
	char run[RB_TOKEN_FIELD_MAX];
	int64_t expires; /* unix seconds; the token is valid while now < expires */
};

/* Writes "rbx1.<base64url(payload)>.<base64url(HMAC-SHA256(key, "rbx1.<payload64>"))>" where
 * payload is the compact JSON {"agent","exp","run","tenant"}. Fields must be non-empty, shorter
 * than RB_TOKEN_FIELD_MAX and free of control characters. */
int rb_token_issue(const uint8_t *key, size_t keylen, const char *tenant, const char *agent, const char *run,
                   int64_t expires_unix, char *out, size_t outlen, struct rb_error *err);

/* Checks the MAC (constant time) before looking at the payload, then the payload's shape, then
 * that it names expected_run and has not expired at now. Fills out on success. The error
 * message is safe to return to the client (it says why, never anything about the key). */
int rb_token_verify(const uint8_t *key, size_t keylen, const char *token, const char *expected_run, int64_t now,
                    struct rb_token_claims *out, struct rb_error *err);

/* Loads <state_dir>/keys/token.key, or creates it: 32 random bytes, mode 0600, in a 0700
 * directory, published atomically (written under a temporary name, then linked) so that two
 * runners starting at once agree on one key. Refuses a key file or directory that is not owned
 * by the effective uid, is group or world accessible, or is not a regular file of 32 bytes.
 * *len: in, the size of key (>= RB_TOKEN_KEY_LEN); out, RB_TOKEN_KEY_LEN. */
int rb_token_key_load_or_create(const char *state_dir, uint8_t *key, size_t *len, struct rb_error *err);

#endif

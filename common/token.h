/* Run tokens: the one credential that enters a sandbox. HMAC-SHA256 (OpenSSL) over tenant,
 * agent, run, run instance and expiry with a key of that run instance, derived from a key that
 * never leaves the host; and that key's file. */
#ifndef RB_TOKEN_H
#define RB_TOKEN_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "common/error.h"

#define RB_TOKEN_KEY_LEN   32
#define RB_TOKEN_MAX       1024 /* longest token issued or accepted, with its NUL */
#define RB_TOKEN_FIELD_MAX 128  /* longest tenant, agent or run id, with its NUL */
#define RB_TOKEN_NONCE_LEN 32   /* a run instance's nonce: 32 lowercase hex digits (16 random bytes) */

struct rb_token_claims {
	char tenant[RB_TOKEN_FIELD_MAX];
	char agent[RB_TOKEN_FIELD_MAX];
	char run[RB_TOKEN_FIELD_MAX];
	char nonce[RB_TOKEN_NONCE_LEN + 1];
	int64_t expires; /* unix seconds; the token is valid while now < expires */
};

/* The key of one run instance: HMAC-SHA256(master, "rbx1-run-key\n" run "\n" nonce), where nonce
 * is the instance's random nonce (RB_TOKEN_NONCE_LEN hex digits), kept by its runner. The run's
 * tokens are made and checked with it, and its endpoint gets only it, never the master key: a
 * token of an earlier run with the same run id fails the MAC at a later run's endpoint. */
int rb_token_run_key(const uint8_t *master, size_t masterlen, const char *run, const char *nonce,
                     uint8_t out[RB_TOKEN_KEY_LEN], struct rb_error *err);

/* Writes "rbx1.<base64url(payload)>.<base64url(HMAC-SHA256(key, "rbx1.<payload64>"))>" where
 * payload is the compact JSON {"agent","exp","nonce","run","tenant"} and key is the run
 * instance's (rb_token_run_key). Fields must be non-empty, shorter than RB_TOKEN_FIELD_MAX and
 * free of control characters; nonce is RB_TOKEN_NONCE_LEN lowercase hex digits. */
int rb_token_issue(const uint8_t *key, size_t keylen, const char *tenant, const char *agent, const char *run,
                   const char *nonce, int64_t expires_unix, char *out, size_t outlen, struct rb_error *err);

/* Checks the MAC (constant time) with key, the run instance's key, before looking at the
 * payload, then the payload's shape, then that it names expected_run and has not expired at
 * now. Fills out on success. The error
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

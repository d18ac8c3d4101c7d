/* runbox serve's E2B-compatible front end (docs/e2b.md): the control plane and envd on one
 * loopback TCP listener, over the same sessions as the native API (serve/serve.h). */
#ifndef RB_SERVE_E2B_H
#define RB_SERVE_E2B_H

#include <stddef.h>
#include <stdio.h>

#include "common/error.h"
#include "serve/serve.h"

struct rb_e2b;

/* Loads the API keys of keys_path (0600, {"e2b_<hex>": {"tenant": T, "policy"?: P}}), binds
 * listen (a loopback "HOST:PORT"; port 0 picks one, logged) and starts serving sv on it. A
 * tenant has at most max_calls (0: RB_SERVE_MAX_CALLS_PER_TENANT) calls in flight there, by
 * API key or by a sandbox's access token alike (serve/inflight.h). */
int rb_e2b_start(struct rb_serve *sv, const char *listen, const char *keys_path, unsigned max_calls,
                 struct rb_e2b **out, struct rb_error *err);
/* Where it listens: "http://127.0.0.1:PORT" (or [::1]), the port the kernel picked for port 0. */
const char *rb_e2b_url(const struct rb_e2b *e);
/* Stops answering (joins every connection) and the timeout reaper; sessions stay sv's. */
void rb_e2b_stop(struct rb_e2b *e);

/* The daemon's E2B options (serve/e2b_main.c). */
struct rb_e2b_opts {
	const char *listen, *keys, *new_key;
};
/* Takes --e2b-listen, --e2b-keys and --e2b-new-key (VALUE or =VALUE) out of argv, before the
 * daemon's own getopt. 0: go on (listen set when asked); 1: --e2b-new-key added and printed a
 * key, exit 0; -1: said why, exit 125. */
int rb_e2b_options(int *argc, char **argv, struct rb_e2b_opts *o);
void rb_e2b_usage(FILE *f);

/* Adds a fresh key for tenant to keys_path (made 0600 when missing) and writes it to key. */
int rb_e2b_issue_key(const char *keys_path, const char *tenant, char *key, size_t len, struct rb_error *err);

#endif

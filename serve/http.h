/* runbox serve's HTTP side: a unix socket (0600) and libmicrohttpd's threads over it. */
#ifndef RB_SERVE_HTTP_H
#define RB_SERVE_HTTP_H

#include "common/error.h"
#include "serve/serve.h"

struct rb_serve_http;

/* Binds path (replacing a stale socket, refusing a live one) and starts serving sv on it. */
int rb_serve_http_start(struct rb_serve *sv, const char *path, struct rb_serve_http **out, struct rb_error *err);
/* Makes the unix socket of h group-accessible: owned by group, mode 0660 (--group). */
int rb_serve_http_share(struct rb_serve_http *h, const char *group, struct rb_error *err);
struct rb_serve_keys;
/* Listens on addr ("127.0.0.1:PORT", "[::1]:PORT", "localhost:PORT": loopback only), every call
 * needing a bearer key of keys (401 without one); a key sees only its tenant's sessions (another
 * tenant's id is a 404, as one that does not exist). */
/* A tenant has at most max_calls (0: RB_SERVE_MAX_CALLS_PER_TENANT) calls in flight, streams
 * and bodies coming included; one more is a 429 (serve/inflight.h). */
int rb_serve_http_start_tcp(struct rb_serve *sv, const char *addr, const struct rb_serve_keys *keys, unsigned max_calls,
                            struct rb_serve_http **out, struct rb_error *err);
/* Stops answering (joins every connection's thread) and removes the socket. */
void rb_serve_http_stop(struct rb_serve_http *h);

#endif

/* runbox serve's HTTP side: a unix socket (0600) and libmicrohttpd's threads over it. */
#ifndef RB_SERVE_HTTP_H
#define RB_SERVE_HTTP_H

#include "common/error.h"
#include "serve/serve.h"

struct rb_serve_http;

/* Binds path (replacing a stale socket, refusing a live one) and starts serving sv on it. */
int rb_serve_http_start(struct rb_serve *sv, const char *path, struct rb_serve_http **out, struct rb_error *err);
/* Stops answering (joins every connection's thread) and removes the socket. */
void rb_serve_http_stop(struct rb_serve_http *h);

#endif

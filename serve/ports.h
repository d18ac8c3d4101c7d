/* runbox serve's exposed ports (serve/ports.c, docs/serve.md "Exposed ports"): per session, host
 * listeners forwarding into the sandbox's netns, guarded by the session's token. */
#ifndef RB_SERVE_PORTS_H
#define RB_SERVE_PORTS_H

#include <jansson.h>

#include "serve/serve.h"

#define RB_SERVE_PORT_MIN 3000
#define RB_SERVE_PORT_MAX 9999

struct rb_serve_ports; /* a session's ports: NULL until its first */
struct rb_record;

/* POST /v1/sessions/ID/ports {port, unix}: -> {port, unix, host, host_port, url, token} (TCP)
 * or {port, unix: true, path}; a port_open event. */
unsigned rb_serve_port_open(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply);
/* GET /v1/sessions/ID/ports: -> {ports: [...]} (no token). */
unsigned rb_serve_port_list(struct rb_serve *sv, const char *sid, json_t **reply);
/* DELETE /v1/sessions/ID/ports/N: the listener closed, its connections ended; a port_close event. */
unsigned rb_serve_port_close(struct rb_serve *sv, const char *sid, unsigned n, json_t **reply);
/* N of the path, 0 with *n when within RB_SERVE_PORT_MIN..MAX, else -1. */
int rb_serve_port_number(const char *s, unsigned *n);

/* A tenant's sessions expose at most this many ports in all (each a listener and a helper). */
#define RB_SERVE_PORTS_PER_TENANT 64

/* What a ports call gets under the session table's lock (serve/sessions.c). */
struct rb_serve_ports_at {
	int netns;             /* the netns the session's run holds; -1 when its sandbox is not up */
	const char *state_dir; /* its state dir */
	unsigned tenant_ports; /* the ports its tenant's sessions expose now, this one's included */
};
/* Runs fn under the session table's lock with the session's ports. */
typedef int (*rb_serve_ports_fn)(struct rb_serve_ports **ports, const struct rb_serve_ports_at *at, void *arg,
                                 struct rb_error *err);
int rb_serve_ports_call(struct rb_serve *sv, const char *sid, rb_serve_ports_fn fn, void *arg, struct rb_error *err);
/* The session's close: every port closed, the events not recorded yet into rec. */
void rb_serve_ports_free(struct rb_serve_ports *ps, struct rb_record *rec);
/* How many ports ps exposes (NULL: none). */
unsigned rb_serve_ports_count(const struct rb_serve_ports *ps);

#endif

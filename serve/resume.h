/* Resuming a session by its id (serve/resume.c, docs/serve.md "Resume"). */
#ifndef RB_SERVE_RESUME_H
#define RB_SERVE_RESUME_H

#include <jansson.h>

#include "serve/keys.h"
#include "serve/serve.h"

/* A session this daemon holds (of key's tenant, when key is not NULL): 200, itself, resumed
 * "live". One that closed: 201, a new session of its tenant from its run's last snapshot,
 * resumed "snapshot", resumed_from {session, run_id, snapshot, closed}, a `resume` event in the
 * new run. 409 when it took no snapshot or is not closed; 404 when there was no such session (or
 * another tenant's); 403 when its policy or image is not key's to use (rb_serve_key_may_create,
 * the check a create makes: a narrower key of the tenant never gets a broader sandbox back).
 * body: {manifest?, idle_timeout?, max_lifetime?} as a create takes them. */
unsigned rb_serve_session_resume(struct rb_serve *sv, const char *sid, const json_t *body,
                                 const struct rb_serve_key *key, json_t **reply);

#endif

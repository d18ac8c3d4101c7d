/* Resuming a session by its id (serve/resume.c, docs/serve.md "Resume"). */
#ifndef RB_SERVE_RESUME_H
#define RB_SERVE_RESUME_H

#include <jansson.h>

#include "serve/serve.h"

/* A session this daemon holds (of tenant, when not NULL): 200, itself, resumed "live". One that
 * closed: 201, a new session of its tenant from its run's last snapshot, resumed "snapshot",
 * resumed_from {session, run_id, snapshot, closed}, a `resume` event in the new run. 409 when it
 * took no snapshot or is not closed; 404 when there was no such session (or another tenant's).
 * body: {manifest?, idle_timeout?, max_lifetime?} as a create takes them. */
unsigned rb_serve_session_resume(struct rb_serve *sv, const char *sid, const json_t *body, const char *tenant,
                                 json_t **reply);

#endif

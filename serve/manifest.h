/* A session's manifest (`manifest` of POST /v1/sessions, POST /v1/sessions/ID/manifest): files,
 * directories, environment values, and at create the policy's read-only inputs and skills;
 * entries marked ephemeral are recorded by name only and never snapshotted (manifest.c). */
#ifndef RB_SERVE_MANIFEST_H
#define RB_SERVE_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "policy/skill.h"
#include "runtime/sandbox/mounts.h"
#include "serve/serve.h"

struct rb_serve_manifest {
	json_t *src;                 /* the checked manifest object (held: the entries point into it) */
	struct rb_input_req *inputs; /* n_inputs: mounted read-only when the run opens */
	char **input_what;
	unsigned n_inputs;
	struct rb_skill *skills; /* n_skills bundles, loaded; their dirs and names for the run */
	const char **skill_dirs, **skill_names;
	unsigned n_skills;
	char **env; /* "K=V", NULL-terminated */
	size_t n_env;
	json_t *record;    /* the `manifest` event's data: content by size and sha256, ephemeral by name */
	json_t *ephemeral; /* {"rel/path": true} of ephemeral files, relative to /workspace */
};

/* Checks m strictly (400 naming the JSON path, prefixed `$.manifest` when at_create); inputs
 * and skills only at create (409 otherwise: they are mounts made with the sandbox). */
int rb_serve_manifest_parse(const json_t *src, bool at_create, struct rb_serve_manifest *m, struct rb_error *err);
/* Records the `manifest` event, then makes its directories and files and adds its environment
 * to the session's (its ephemeral files to what a snapshot leaves out). 200 with *reply. */
unsigned rb_serve_manifest_apply(struct rb_serve *sv, const char *sid, const struct rb_serve_manifest *m,
                                 json_t **reply);
void rb_serve_manifest_free(struct rb_serve_manifest *m);
#define _cleanup_serve_manifest_ __attribute__((cleanup(rb_serve_manifest_free)))
/* POST /v1/sessions/ID/manifest {files, directories, env}. */
unsigned rb_serve_manifest_post(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply);

/* sessions.c: env ("K=V", taken) joins the session's, a name given again replacing its value;
 * eph's paths join the ones a snapshot leaves out. */
int rb_serve_session_add(struct rb_serve *sv, const char *sid, char **env, size_t n_env, const json_t *eph,
                         struct rb_error *err);
/* A copy of the session's ephemeral paths ({"rel": true}), or NULL when it has none. */
json_t *rb_serve_session_ephemeral(struct rb_serve *sv, const char *sid);

#endif

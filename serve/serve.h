/* runbox serve: live sessions (runs whose sandbox stays up) driven over HTTP on a unix socket.
 * sessions.c holds the table and the one dispatcher thread; http.c the API (docs/serve.md). */
#ifndef RB_SERVE_H
#define RB_SERVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/log.h"
#include "runtime/sandbox/factory.h"

struct rb_serve;

/* A warm pool's pair (--pool IMAGE:POLICY=N): members kept ready, serve/pool.h. */
struct rb_serve_pool_pair {
	char image[128], policy[128];
	unsigned size;
};
#define RB_SERVE_POOL_MAX 64 /* members of one pair */
/* "IMAGE:POLICY=N", split at the last `:` before the `=`. */
int rb_serve_pool_parse(const char *arg, struct rb_serve_pool_pair *out, struct rb_error *err);

struct rb_serve_config {
	const struct rb_factory *factory;      /* started before any thread (runtime/sandbox/factory.h) */
	const char *state_dir;                 /* NULL: the default location */
	const struct rb_logger *logger;        /* the daemon's: each of its threads logs through it */
	const struct rb_serve_pool_pair *pool; /* n_pool pairs, or none */
	unsigned n_pool;
	uint64_t pool_max_age_ms; /* 0: RB_SERVE_POOL_MAX_AGE_MS (serve/pool.h) */
	unsigned max_sessions;    /* 0: RB_SERVE_MAX_SESSIONS */
	unsigned max_per_tenant;  /* 0: no bound per tenant */
};

/* Starts the dispatcher thread. */
int rb_serve_new(const struct rb_serve_config *cfg, struct rb_serve **out, struct rb_error *err);
/* The config's logger, for the HTTP threads to take up (rb_log_use). */
const struct rb_logger *rb_serve_logger(const struct rb_serve *sv);
/* No new sessions from now on; every live one is closed and recorded. */
void rb_serve_drain(struct rb_serve *sv);
/* Drains, stops the dispatcher, frees. */
void rb_serve_free(struct rb_serve *sv);

/* The calls of the API. Each returns an HTTP status and sets *reply to its JSON body (an
 * object; {"error": ...} for a status >= 400). body is the request's parsed JSON. */
unsigned rb_serve_session_create(struct rb_serve *sv, const json_t *body, json_t **reply);
unsigned rb_serve_session_list(struct rb_serve *sv, json_t **reply);
/* The sessions of tenant only (NULL: all). */
unsigned rb_serve_session_list_tenant(struct rb_serve *sv, const char *tenant, json_t **reply);
/* The tenant of session sid into out (len bytes); -1 when there is no such session. */
int rb_serve_session_tenant(struct rb_serve *sv, const char *sid, char *out, size_t len);
/* GET /v1/stats: sessions, the warm pool, the ledger's group commits (the operator's view). */
unsigned rb_serve_stats(struct rb_serve *sv, json_t **reply);
unsigned rb_serve_session_get(struct rb_serve *sv, const char *sid, json_t **reply);
unsigned rb_serve_session_delete(struct rb_serve *sv, const char *sid, json_t **reply);
unsigned rb_serve_proc_start(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply);
unsigned rb_serve_proc_get(struct rb_serve *sv, const char *sid, const char *pid, json_t **reply);
/* Chunks with seq > after_seq; waits up to wait_ms for one (or the end). */
unsigned rb_serve_proc_output(struct rb_serve *sv, const char *sid, const char *pid, uint64_t after_seq,
                              unsigned wait_ms, json_t **reply);
unsigned rb_serve_proc_stdin(struct rb_serve *sv, const char *sid, const char *pid, const char *data, size_t len,
                             bool close_after, json_t **reply);
unsigned rb_serve_proc_signal(struct rb_serve *sv, const char *sid, const char *pid, const json_t *body,
                              json_t **reply);

/* A descriptor (O_PATH, the caller closes it) of the session's /workspace, a mount root the
 * sandbox cannot replace, and whether files made in it go to the sandbox root's host ids. */
int rb_serve_workspace(struct rb_serve *sv, const char *sid, int *fd, uid_t *uid, gid_t *gid, bool *chown_to,
                       struct rb_error *err);

/* Records a file call in the session's run (rb_record_file), durably, before its reply. */
int rb_serve_record_file(struct rb_serve *sv, const char *sid, const char *type, const char *path, uint64_t size,
                         const char *sha256, struct rb_error *err);
/* PUT and GET /v1/sessions/ID/files?path=/workspace/...: raw bytes, at most
 * RB_SERVE_FILE_CAP, resolved inside the sandbox's /workspace (serve/files.c). */
#define RB_SERVE_FILE_CAP (8u << 20)
unsigned rb_serve_file_put(struct rb_serve *sv, const char *sid, const char *path, const char *data, size_t len,
                           json_t **reply);
/* 200 with *out (the caller frees it) and *len; else *reply. */
unsigned rb_serve_file_get(struct rb_serve *sv, const char *sid, const char *path, char **out, size_t *len,
                           json_t **reply);

/* {"error": msg} with the status err's kind maps to (rb_error_http_status). */
unsigned rb_serve_error(const struct rb_error *err, json_t **reply);

#define RB_SERVE_MAX_SESSIONS 256
#define RB_SERVE_MAX_WAIT_MS  60000u

#endif

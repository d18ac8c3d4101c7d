/* runbox serve: live sessions (runs whose sandbox stays up) driven over HTTP on a unix socket.
 * sessions.c holds the table and the one dispatcher thread; http.c the API (docs/serve.md). */
#ifndef RB_SERVE_H
#define RB_SERVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/host.h"
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
	const struct rb_host *host;            /* the environment its runs' places and env.pass read */
	const struct rb_serve_pool_pair *pool; /* n_pool pairs, or none */
	unsigned n_pool;
	uint64_t pool_max_age_ms; /* 0: RB_SERVE_POOL_MAX_AGE_MS (serve/pool.h) */
	unsigned max_sessions;    /* 0: RB_SERVE_MAX_SESSIONS */
	unsigned max_per_tenant;  /* 0: half of max_sessions */
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
/* The same, its cleanup event naming reason (a front end's own: "e2b timeout"). */
unsigned rb_serve_session_close(struct rb_serve *sv, const char *sid, const char *reason, json_t **reply);
unsigned rb_serve_proc_start(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply);
unsigned rb_serve_proc_get(struct rb_serve *sv, const char *sid, const char *pid, json_t **reply);
/* Chunks with seq > after_seq; waits up to wait_ms for one (or the end). */
unsigned rb_serve_proc_output(struct rb_serve *sv, const char *sid, const char *pid, uint64_t after_seq,
                              unsigned wait_ms, json_t **reply);
/* POST .../resize {rows, cols}: a terminal's new size (409 without a terminal or once ended). */
unsigned rb_serve_proc_resize(struct rb_serve *sv, const char *sid, const char *pid, const json_t *body,
                              json_t **reply);
/* One step of the NDJSON stream of a process's output: *text (malloc'd, *len bytes, NULL when
 * nothing came within wait_ms) holds one JSON line per chunk after *after_seq (moved on past
 * them), or the last line, {exited: true, result} or {error, status}, with *end set. The
 * status is 200, or the lookup's failure (then the text is its error line). */
unsigned rb_serve_proc_stream_step(struct rb_serve *sv, const char *sid, const char *pid, uint64_t *after_seq,
                                   unsigned wait_ms, char **text, size_t *len, bool *end);
unsigned rb_serve_proc_stdin(struct rb_serve *sv, const char *sid, const char *pid, const char *data, size_t len,
                             bool close_after, json_t **reply);
unsigned rb_serve_proc_signal(struct rb_serve *sv, const char *sid, const char *pid, const json_t *body,
                              json_t **reply);

/* What a file call needs of a session's sandbox: descriptors the caller releases
 * (rb_serve_fs_release). Taken under the session's lock, used outside it. */
struct rb_serve_fs {
	int root;  /* O_PATH of the sandbox's root (from init), resolved in with RESOLVE_IN_ROOT */
	int ws;    /* O_PATH of its /workspace mount */
	uid_t uid; /* the host ids acted as when as_ids (as root): /workspace's owner's (sandbox_file_ids) */
	gid_t gid;
	bool as_ids;
	char state_dir[4096]; /* runbox's state (the artifact store) */
	char tenant[128];     /* the session's tenant: a snapshot it hydrates must be its tenant's */
};
int rb_serve_sandbox(struct rb_serve *sv, const char *sid, struct rb_serve_fs *fs, struct rb_error *err);
void rb_serve_fs_release(struct rb_serve_fs *fs);
/* A writer in the session's sandbox (runtime/sandbox/writer.h): what a file call writes into
 * /workspace goes through it, so the tmpfs pages count against the session's memory, not the
 * daemon's. Returns its socket, the session's idle one or a new one, or -1 with err; the caller
 * closes it, or hands it back with _done once its last sync succeeded: _done makes it let its
 * file go (rb_writer_release) and the session keeps one for its next call. */
int rb_serve_sandbox_writer(struct rb_serve *sv, const char *sid, struct rb_error *err);
void rb_serve_sandbox_writer_done(struct rb_serve *sv, const char *sid, int writer);
/* Records an event of the session's run durably, before the call's reply; data is taken. */
int rb_serve_record(struct rb_serve *sv, const char *sid, const char *type, json_t *data, struct rb_error *err);

/* Records a file call in the session's run (rb_record_file), durably, before its reply. */
int rb_serve_record_file(struct rb_serve *sv, const char *sid, const char *type, const char *path, uint64_t size,
                         const char *sha256, struct rb_error *err);
/* A file a session's manifest gives inline is at most this (serve/manifest.c). */
#define RB_SERVE_FILE_CAP (8u << 20)

/* The streamed forms: at most RB_SERVE_STREAM_CAP bytes a file. A PUT goes into a temporary
 * file beside the target, hashed as it comes; finish records file_write and renames it into
 * place; abort removes it. Either one frees put. */
#define RB_SERVE_STREAM_CAP (1ULL << 30)
struct rb_serve_put;
unsigned rb_serve_put_begin(struct rb_serve *sv, const char *sid, const char *path, mode_t mode, bool parents,
                            uint64_t cap, struct rb_serve_put **put, json_t **reply);
/* -1 with err (a conflict, EFBIG) past the cap. */
int rb_serve_put_write(struct rb_serve_put *put, const void *data, size_t len, struct rb_error *err);
unsigned rb_serve_put_finish(struct rb_serve *sv, struct rb_serve_put *put, json_t **reply);
void rb_serve_put_abort(struct rb_serve_put *put);
/* The file is a manifest's ephemeral one: file_write records its path and size, no digest. */
void rb_serve_put_ephemeral(struct rb_serve_put *put);
/* A regular file of at most max_bytes opened for reading (*fd, the caller closes it; *size its
 * bytes), file_read recorded. */
unsigned rb_serve_get_open(struct rb_serve *sv, const char *sid, const char *path, uint64_t max_bytes, int *fd,
                           uint64_t *size, json_t **reply);

/* Records a file call that failed, refused ones too: type (the event its success records) with
 * data (taken; NULL: {}) and its outcome, error (err's message), errno (its name, when one) and
 * status (the reply's, returned), durably before the reply as a success's record is. */
unsigned rb_serve_fs_record_failed(struct rb_serve *sv, const char *sid, const char *type, json_t *data,
                                   const struct rb_error *err, unsigned status);
/* File system calls (serve/fsops.c), any path of the sandbox (docs/serve.md). */
unsigned rb_serve_fs_stat(struct rb_serve *sv, const char *sid, const char *path, json_t **reply);
unsigned rb_serve_fs_list(struct rb_serve *sv, const char *sid, const char *path, unsigned depth, json_t **reply);
unsigned rb_serve_fs_mkdir(struct rb_serve *sv, const char *sid, const char *path, bool parents, json_t **reply);
unsigned rb_serve_fs_mkdir_mode(struct rb_serve *sv, const char *sid, const char *path, bool parents, mode_t mode,
                                json_t **reply);
unsigned rb_serve_fs_remove(struct rb_serve *sv, const char *sid, const char *path, bool recursive, json_t **reply);
unsigned rb_serve_fs_rename(struct rb_serve *sv, const char *sid, const char *from, const char *to, bool overwrite,
                            json_t **reply);
/* The same from the HTTP calls' JSON bodies, checked strictly. */
unsigned rb_serve_fs_mkdir_json(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply);
unsigned rb_serve_fs_remove_json(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply);
unsigned rb_serve_fs_rename_json(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply);

/* Snapshots (serve/snapshot.c): /workspace as tar+zstd in the artifact store, its own mount
 * only (no input, no skill), and hydration back into a session's /workspace. */
#define RB_SERVE_SNAPSHOT_MAX_MEMBERS 100000u
#define RB_SERVE_SNAPSHOT_MAX_BYTES   (4ULL << 30)
/* -> {ref: "sha256:<hex>", size, members, bytes, skipped_links}; a `snapshot` event. A link
 * whose target leaves /workspace is not kept (a hydrate refuses one): skipped_links names them. */
unsigned rb_serve_snapshot(struct rb_serve *sv, const char *sid, json_t **reply);
/* The object of a snapshot (one a `snapshot` event names; with tenant, one of that tenant's
 * sessions took) opened for reading. */
unsigned rb_serve_snapshot_open(struct rb_serve *sv, const char *ref, const char *tenant, int *fd, uint64_t *size,
                                json_t **reply);
/* What a hydrate takes at most; 0 (or more than the defaults above) is the default. */
struct rb_serve_hydrate_bounds {
	uint64_t members, bytes_out, bytes_in;
};
/* -> {members, bytes}; a `hydrate` event whatever came of it. Every member is checked before
 * any is written (no absolute name, no `..`, no link leaving /workspace, files, directories
 * and links only, the bounds). */
unsigned rb_serve_hydrate_ref(struct rb_serve *sv, const char *sid, const char *ref,
                              const struct rb_serve_hydrate_bounds *b, json_t **reply);
/* An uploaded archive (plain tar, gzip or zstd), spooled to an unnamed file as it comes. */
struct rb_serve_hydrate;
unsigned rb_serve_hydrate_begin(struct rb_serve *sv, const char *sid, const struct rb_serve_hydrate_bounds *b,
                                struct rb_serve_hydrate **h, json_t **reply);
int rb_serve_hydrate_write(struct rb_serve_hydrate *h, const void *data, size_t len, struct rb_error *err);
/* Both free h. */
unsigned rb_serve_hydrate_finish(struct rb_serve *sv, struct rb_serve_hydrate *h, json_t **reply);
void rb_serve_hydrate_abort(struct rb_serve_hydrate *h);
/* The session ids the daemon answers for (serve/known.h). */
struct rb_serve_known *rb_serve_known(struct rb_serve *sv);
/* The --state-dir the daemon was given (NULL: the default). */
const char *rb_serve_state_dir(const struct rb_serve *sv);
/* The environment the daemon was started with (its runs' places and env.pass read it). */
const struct rb_host *rb_serve_host(const struct rb_serve *sv);

/* GET /v1/approvals (id NULL) or POST /v1/approvals/ID/approve|deny (what "approved" or
 * "denied"); tenant NULL: the operator, every tenant's held calls (serve/approvals.c). */
unsigned rb_serve_approvals(struct rb_serve *sv, const char *id, const char *what, const char *tenant, json_t **reply);

/* {"error": msg} with the status err's kind maps to (rb_error_http_status). */
unsigned rb_serve_error(const struct rb_error *err, json_t **reply);

#define RB_SERVE_MAX_SESSIONS 256
#define RB_SERVE_MAX_WAIT_MS  60000u

#endif

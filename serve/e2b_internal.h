/* What the E2B front end's files share: its sandbox table (each entry an ordinary serve session
 * with the E2B facts beside it), the request and reply of one call, and the Connect framing. */
#ifndef RB_SERVE_E2B_INTERNAL_H
#define RB_SERVE_E2B_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <microhttpd.h>

#include "serve/e2b.h"

/* The envd version reported: the newest whose feature set (as the SDK gates it) runbox serves:
 * stdin close (0.5.2) and octet-stream uploads (0.5.7); not file metadata (0.6.2). */
#define E2B_ENVD_VERSION "0.5.7"
/* E2B's user home, as runbox maps it. */
#define E2B_HOME        "/workspace"
#define E2B_TIMEOUT_DEF 300u   /* seconds, E2B's default */
#define E2B_TIMEOUT_MAX 86400u /* seconds */
#define E2B_ID_HEX      33

struct e2b_key {
	char key[72]; /* "e2b_" and 40 hex */
	char tenant[65];
	char policy[128]; /* "" for the default */
};

/* A process started through envd: its E2B pid and the session's process id. */
struct e2b_proc {
	uint32_t pid;
	char id[E2B_ID_HEX];
	char *tag;
	char *config; /* for List: the ProcessConfig's cmd, args, envs and cwd as given (JSON text) */
	size_t config_len;
};

struct e2b_sandbox {
	char id[E2B_ID_HEX]; /* the session's id */
	char tenant[65];
	char token[65]; /* envdAccessToken: 32 random bytes as hex */
	char template_id[128];
	json_t *metadata;
	int64_t started_ms, end_ms; /* wall clock */
	int has_bash;               /* -1 unknown, 0, 1 */
	struct e2b_proc *procs;     /* started, not yet known to have ended (e2b_proc_add) */
	size_t n_procs, cap_procs;
	size_t config_bytes; /* of the procs' configs */
	struct e2b_sandbox *next;
};

struct e2b_http;

struct rb_e2b {
	struct rb_serve *sv;
	pthread_mutex_t lock; /* the table; never held across a call into sv */
	pthread_cond_t stop_cv;
	struct e2b_key *keys;
	size_t n_keys;
	struct e2b_sandbox *sandboxes;
	pthread_t reaper;
	bool reaper_started, stop;
	struct e2b_http *http;
	char url[80];
};

/* One call as the handlers see it. */
struct e2b_req {
	struct MHD_Connection *conn;
	const char *method, *url;
	const char *body;
	size_t len;
};

/* One streamed reply (a server-streaming RPC): next() fills buf with the next envelopes,
 * blocking until there are some; returns their length, 0 at the end. */
struct e2b_stream {
	size_t (*next)(struct e2b_stream *st, char *buf, size_t max);
	void (*free)(struct e2b_stream *st);
};

struct e2b_reply {
	unsigned status;
	json_t *json; /* a JSON body */
	char *raw;    /* or raw bytes (raw_type) */
	size_t raw_len;
	const char *raw_type;
	struct e2b_stream *stream; /* or a stream (application/connect+json) */
	int fd;                    /* or an open file of fd_len bytes (raw_type); -1: none */
	uint64_t fd_len;
};
#define E2B_REPLY_INIT                                                                                                 \
	{                                                                                                              \
		.fd = -1                                                                                               \
	}

/* Keys (e2b_keys.c). */
int e2b_keys_load(struct rb_e2b *e, const char *path, struct rb_error *err);
const struct e2b_key *e2b_key_find(const struct rb_e2b *e, const char *key);

/* The control plane (e2b_control.c): /sandboxes... */
void e2b_control(struct rb_e2b *e, const struct e2b_req *rq, struct e2b_reply *rp);
int e2b_reaper_start(struct rb_e2b *e, struct rb_error *err);
void e2b_reaper_stop(struct rb_e2b *e);
void e2b_table_free(struct rb_e2b *e);
/* The sandbox of the call (E2b-Sandbox-Id) if its X-Access-Token is that sandbox's: 0 with its
 * id in sid; else the HTTP status of the refusal (401 bad token, 502 no such sandbox). */
/* 0 when the call's E2b-Sandbox-Id and X-Access-Token name a sandbox: its id into sid, its
 * tenant into tenant (NULL: not wanted). */
unsigned e2b_authorize(struct rb_e2b *e, struct MHD_Connection *conn, char sid[E2B_ID_HEX], char tenant[65],
                       const char **why);
/* Whether the session of an entry is still open; an entry whose session is gone (closed
 * natively, idle, drained) is forgotten. */
bool e2b_session_alive(struct rb_e2b *e, const char *id);
/* Table helpers for envd (under e->lock inside). A process started: its pid, tag (at most
 * E2B_TAG_MAX bytes) and what List shows of its config, E2B_CONFIGS_MAX bytes of them per
 * sandbox (past that, its cmd alone). Ended processes are dropped once the table holds
 * E2B_PROCS_PRUNE: a sandbox's table never holds more than it runs at once, and that many. */
#define E2B_TAG_MAX     256
#define E2B_CONFIGS_MAX (1u << 20)
#define E2B_PROCS_PRUNE 64
int e2b_proc_add(struct rb_e2b *e, const char *sid, uint32_t pid, const char *id, const char *tag,
                 const json_t *config);
/* The session's process id of E2B pid (or tag); 0, or -1 when none. */
int e2b_proc_find(struct rb_e2b *e, const char *sid, uint32_t pid, const char *tag, char id[E2B_ID_HEX],
                  uint32_t *pid_out);
/* A copy of every process's (pid, id, tag, config) for List; the caller json_decrefs. */
json_t *e2b_proc_list(struct rb_e2b *e, const char *sid);
/* Whether the sandbox's image has /bin/bash: cached per sandbox (-1 unknown). */
int e2b_bash_get(struct rb_e2b *e, const char *sid);
void e2b_bash_set(struct rb_e2b *e, const char *sid, bool has);

/* envd (e2b_envd.c): /files, /health, process.Process and filesystem.Filesystem RPCs. */
bool e2b_is_envd_path(const char *url);
void e2b_envd(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, struct e2b_reply *rp);
/* POST /files as its body comes: each file (a multipart part, or an octet-stream body) written
 * into its file as its bytes come, never held whole. The first refusal is the reply; what comes
 * after it is dropped. */
struct e2b_files;
/* The upload of a caller known to hold sandbox sid; NULL when out of memory. */
struct e2b_files *e2b_files_begin(struct rb_e2b *e, struct MHD_Connection *conn, const char *sid);
/* The next file begins (the one before it ends): at ?path=, else at name (a part's filename). */
void e2b_files_next(struct e2b_files *f, const char *name);
void e2b_files_write(struct e2b_files *f, const char *data, size_t len);
/* The bytes of the file being written so far. */
uint64_t e2b_files_len(const struct e2b_files *f);
/* The body cannot be taken (a malformed multipart body): status with why. */
void e2b_files_refuse(struct e2b_files *f, unsigned status, const char *why);
bool e2b_files_refused(const struct e2b_files *f);
/* The body has ended: the last file ends, the reply is the files written or the refusal. */
void e2b_files_end(struct e2b_files *f, struct e2b_reply *rp);
/* Frees f; a file it was writing is removed (a client gone mid-body). */
void e2b_files_free(struct e2b_files *f);

/* envd's filesystem RPCs and the writes of POST /files (e2b_fs.c). */
void e2b_fs_rpc(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, const char *method, struct e2b_reply *rp);
/* rb_serve_put_begin of a file of mode 0644, making missing parents first as E2B does. */
unsigned e2b_file_put_begin(struct rb_e2b *e, const char *sid, const char *path, struct rb_serve_put **put,
                            json_t **reply);
/* An E2B path inside the sandbox: "~", "~/x" and relative paths from the user's home. */
char *e2b_path(const char *p);

/* Connect framing and codes (e2b_connect.c). */
#define E2B_ENV_MSG 0x00u
#define E2B_ENV_END 0x02u
/* Appends one envelope (flags, 4-byte big-endian length, the JSON) to *buf. */
int e2b_envelope(char **buf, size_t *len, size_t *cap, unsigned flags, const json_t *msg);
/* The JSON message of a request body: enveloped (streaming RPCs) or bare (unary). */
json_t *e2b_rpc_body(const char *body, size_t len, bool enveloped, const char **why);
/* A Connect error {code, message} and its HTTP status for a unary reply. */
void e2b_rpc_error(struct e2b_reply *rp, const char *code, const char *msg);
/* The Connect code of a native HTTP status (404 not_found, 403 permission_denied, ...). */
const char *e2b_code_of_status(unsigned status);
/* base64 of len bytes (standard alphabet, padded); the caller frees. */
char *e2b_b64(const void *data, size_t len);
/* Decodes base64 (padded or not) into a new buffer; NULL when malformed. */
char *e2b_unb64(const char *s, size_t *len);
/* An E2B control-plane error {code, message}. */
void e2b_api_error(struct e2b_reply *rp, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The native reply's {"error"} text, or a fallback. */
const char *e2b_native_msg(const json_t *reply);
/* RFC 3339 UTC with milliseconds of a wall-clock ms time. */
void e2b_time(int64_t ms, char *out, size_t len);
int64_t e2b_now_ms(void);

#endif

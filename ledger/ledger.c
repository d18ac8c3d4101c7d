/* The run ledger: schema, hash-chained appends under SQLite's write lock, the head file,
 * verification, filtered queries and JSONL export. Format and guarantees: docs/ledger.md. */
#define _GNU_SOURCE
#include "ledger/ledger.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/paths.h"
#include "common/jsonout.h"
#include "common/log.h"
#include "common/util.h"

#define SCHEMA_VERSION  "1"
#define BUSY_TIMEOUT_MS 10000
static const char ZERO_HASH[65] = "0000000000000000000000000000000000000000000000000000000000000000";

struct rb_ledger {
	sqlite3 *db;
	char db_path[PATH_MAX];
	char head_path[PATH_MAX];
	int wal_frames; /* the WAL's length after this connection's last commit */
	int wal_fd;     /* the WAL, opened by rb_ledger_start_sync for rb_ledger_sync, or -1 */
	int head_fd;    /* the head file, held by its writer (head_writer), or -1 */
	dev_t head_dev; /* and its identity when it was opened */
	ino_t head_ino;
	bool durable;         /* see rb_ledger_set_durable */
	bool no_wait;         /* see rb_ledger_set_wait */
	sqlite3_stmt *hot[7]; /* see enum hot */
};

/* A new connection reads and checksums the whole WAL, so it is kept short: rb_ledger_tidy
 * checkpoints it past WAL_TIDY_FRAMES, off the run's critical path; a commit checkpoints it
 * itself only past WAL_MAX_FRAMES (SQLite's own default), for writers that never tidy. */
#define WAL_TIDY_FRAMES 64
#define WAL_MAX_FRAMES  1000

static void stmt_finalizep(sqlite3_stmt **s)
{
	if (*s)
		sqlite3_finalize(*s);
}
#define _cleanup_stmt_ __attribute__((cleanup(stmt_finalizep)))

/* The statements every commit runs (two transactions, the last event read in each), prepared
 * once per connection rather than parsed again each time, and reset after each use so none
 * holds a read open. */
enum hot { HOT_BEGIN, HOT_COMMIT, HOT_LAST, HOT_INSERT, HOT_OWNER, HOT_N };
static const char *const HOT_SQL[HOT_N] = {
    [HOT_BEGIN] = "BEGIN IMMEDIATE",
    [HOT_COMMIT] = "COMMIT",
    [HOT_LAST] = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
    [HOT_INSERT] = "INSERT INTO events (seq, ts, run_id, tenant, agent, type, data, prev_hash, hash)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    /* "+type": the run's own events through events_run. Left to itself, SQLite takes
     * events_type for the subquery and walks every run's run_start: 53 ms and 512 page
     * faults per commit on a ledger of 43,000 events, growing with the ledger. */
    [HOT_OWNER] = "SELECT COUNT(*), (SELECT data FROM events WHERE run_id = ?1 AND +type = 'run_start'"
                  " ORDER BY seq LIMIT 1) FROM events WHERE run_id = ?1",
};

/* The connection's prepared h, or NULL (the reason in the connection's error). */
static sqlite3_stmt *hot(struct rb_ledger *l, enum hot h)
{
	_Static_assert(HOT_N <= RB_ARRAY_SIZE(((struct rb_ledger *)0)->hot), "rb_ledger.hot holds every hot statement");
	if (!l->hot[h] &&
	    sqlite3_prepare_v3(l->db, HOT_SQL[h], -1, SQLITE_PREPARE_PERSISTENT, &l->hot[h], NULL) != SQLITE_OK)
		return NULL;
	return l->hot[h];
}

static void stmt_resetp(sqlite3_stmt **s)
{
	if (*s) {
		sqlite3_reset(*s);
		sqlite3_clear_bindings(*s);
	}
}
/* A hot statement, reset (not finalized) when it goes out of scope. */
#define _cleanup_reset_ __attribute__((cleanup(stmt_resetp)))

static int db_error(struct rb_ledger *l, struct rb_error *err, const char *what)
{
	rb_error_set(err, 0, "ledger `%s`: %s: %s", l->db_path, what, sqlite3_errmsg(l->db));
	return -1;
}

static void rollback_stmt(struct rb_ledger *l, sqlite3_stmt *s);
#define rollback(l) rollback_stmt(l, NULL)

static int exec(struct rb_ledger *l, const char *sql, struct rb_error *err)
{
	if (sqlite3_exec(l->db, sql, NULL, NULL, NULL) != SQLITE_OK)
		return db_error(l, err, sql);
	return 0;
}

/* BEGIN IMMEDIATE or COMMIT, as exec() runs them; the connection's error code stays the
 * step's (SQLITE_BUSY for a lock not had). */
static int exec_hot(struct rb_ledger *l, enum hot h, struct rb_error *err)
{
	_cleanup_reset_ sqlite3_stmt *s = hot(l, h);
	if (!s || sqlite3_step(s) != SQLITE_DONE)
		return db_error(l, err, HOT_SQL[h]);
	return 0;
}

/* Ends the current transaction without changes; s (when given) is reset first so no read
 * is pending. */
static void rollback_stmt(struct rb_ledger *l, sqlite3_stmt *s)
{
	if (s)
		sqlite3_reset(s);
	if (!sqlite3_get_autocommit(l->db))
		sqlite3_exec(l->db, "ROLLBACK", NULL, NULL, NULL);
}

/* The schema. The triggers are defence in depth only: whoever can write the file can drop
 * them, which is why verify recomputes the chain rather than trusting them. The insert trigger
 * keeps even hand-made inserts linear (seq = last + 1, prev_hash = last hash). */
static const char SCHEMA[] = "CREATE TABLE IF NOT EXISTS events ("
                             " seq INTEGER PRIMARY KEY,"
                             " ts TEXT NOT NULL,"
                             " run_id TEXT NOT NULL,"
                             " tenant TEXT NOT NULL,"
                             " agent TEXT NOT NULL,"
                             " type TEXT NOT NULL,"
                             " data TEXT NOT NULL,"
                             " prev_hash TEXT NOT NULL,"
                             " hash TEXT NOT NULL);"
                             "CREATE INDEX IF NOT EXISTS events_run ON events(run_id);"
                             "CREATE INDEX IF NOT EXISTS events_who ON events(tenant, agent, ts);"
                             "CREATE INDEX IF NOT EXISTS events_type ON events(type);"
                             "CREATE INDEX IF NOT EXISTS events_ts ON events(ts);"
                             "CREATE TRIGGER IF NOT EXISTS events_no_update BEFORE UPDATE ON events"
                             " BEGIN SELECT RAISE(ABORT, 'ledger events are append-only'); END;"
                             "CREATE TRIGGER IF NOT EXISTS events_no_delete BEFORE DELETE ON events"
                             " BEGIN SELECT RAISE(ABORT, 'ledger events are append-only'); END;"
                             "CREATE TRIGGER IF NOT EXISTS events_linear BEFORE INSERT ON events"
                             " WHEN NEW.seq IS NOT (SELECT COALESCE(MAX(seq), 0) + 1 FROM events)"
                             "   OR NEW.prev_hash IS NOT COALESCE((SELECT hash FROM events ORDER BY seq DESC LIMIT 1),"
                             "     '0000000000000000000000000000000000000000000000000000000000000000')"
                             " BEGIN SELECT RAISE(ABORT, 'ledger events must extend the chain'); END;";

/* hash = sha256(prev_hash \n seq \n ts \n run_id \n tenant \n agent \n type \n data) */
static int event_hash(const char *prev, int64_t seq, const char *ts, const char *run_id, const char *tenant,
                      const char *agent, const char *type, const char *data, char out[65])
{
	char seqs[24];
	snprintf(seqs, sizeof seqs, "%" PRId64, seq);
	const char *parts[] = {prev, seqs, ts, run_id, tenant, agent, type, data};
	size_t len = 0;
	for (size_t i = 0; i < RB_ARRAY_SIZE(parts); i++)
		len += strlen(parts[i]) + 1;
	_cleanup_free_ char *buf = malloc(len);
	if (!buf)
		return -1;
	char *p = buf;
	for (size_t i = 0; i < RB_ARRAY_SIZE(parts); i++) {
		if (i)
			*p++ = '\n';
		size_t n = strlen(parts[i]);
		memcpy(p, parts[i], n);
		p += n;
	}
	rb_sha256_hex(buf, (size_t)(p - buf), out);
	return 0;
}

static const char *col_text(sqlite3_stmt *s, int i)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	return t ? (const char *)t : "";
}

/* The last event's (seq, hash), or (0, zeros) on an empty ledger. */
static int last_event(struct rb_ledger *l, int64_t *seq, char hash[65], struct rb_error *err)
{
	_cleanup_reset_ sqlite3_stmt *s = hot(l, HOT_LAST);
	if (!s)
		return db_error(l, err, "read the last event");
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE) {
		*seq = 0;
		memcpy(hash, ZERO_HASH, 65);
		return 0;
	}
	if (rc != SQLITE_ROW)
		return db_error(l, err, "read the last event");
	*seq = sqlite3_column_int64(s, 0);
	snprintf(hash, 65, "%s", col_text(s, 1));
	return 0;
}

int rb_ledger_count_run(struct rb_ledger *l, const char *run_id, const char *type, int64_t *n, struct rb_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db, "SELECT COUNT(*) FROM events WHERE run_id = ?1 AND (?2 IS NULL OR type = ?2)", -1,
	                       &s, NULL) != SQLITE_OK)
		return db_error(l, err, "count a run's events");
	sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
	if (type)
		sqlite3_bind_text(s, 2, type, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_ROW)
		return db_error(l, err, "count a run's events");
	*n = sqlite3_column_int64(s, 0);
	return 0;
}

int rb_ledger_tenant_has_artifact(struct rb_ledger *l, const char *tenant, const char *digest, bool *found,
                                  struct rb_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	/* instr() first: a cheap test of the text before json_extract parses it. */
	if (sqlite3_prepare_v2(l->db,
	                       "SELECT 1 FROM events WHERE type = 'artifact' AND tenant = ?1 AND instr(data, ?2) > 0"
	                       " AND json_extract(data, '$.digest') = ?2 LIMIT 1",
	                       -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "look up an artifact");
	sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, digest, -1, SQLITE_STATIC);
	int rc = sqlite3_step(s);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return db_error(l, err, "look up an artifact");
	*found = rc == SQLITE_ROW;
	return 0;
}

int rb_ledger_tenant_bytes(struct rb_ledger *l, const char *tenant, const char *since, uint64_t *bytes,
                           struct rb_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db,
	                       "SELECT COALESCE(SUM(sz), 0) FROM (SELECT MAX(json_extract(data, '$.size')) AS sz"
	                       " FROM events WHERE type = 'artifact' AND tenant = ?1 AND ts >= ?2"
	                       " GROUP BY json_extract(data, '$.digest'))",
	                       -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "sum a tenant's stored bytes");
	sqlite3_bind_text(s, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, since, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_ROW)
		return db_error(l, err, "sum a tenant's stored bytes");
	int64_t n = sqlite3_column_int64(s, 0);
	*bytes = n > 0 ? (uint64_t)n : 0;
	return 0;
}

int rb_ledger_live_digests(struct rb_ledger *l, const char *since, json_t **set, struct rb_error *err)
{
	*set = NULL;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db,
	                       "SELECT DISTINCT json_extract(data, '$.digest') FROM events"
	                       " WHERE type IN ('artifact', 'snapshot') AND ts >= ?1",
	                       -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "list the digests artifact events name");
	sqlite3_bind_text(s, 1, since, -1, SQLITE_STATIC);
	json_t *out = json_object();
	int r;
	while ((r = sqlite3_step(s)) == SQLITE_ROW) {
		const char *d = (const char *)sqlite3_column_text(s, 0);
		if (d)
			json_object_set_new(out, d, json_true());
	}
	if (r != SQLITE_DONE) {
		json_decref(out);
		return db_error(l, err, "list the digests artifact events name");
	}
	*set = out;
	return 0;
}

static int schema_version(struct rb_ledger *l)
{
	sqlite3_stmt *st = NULL;
	int v = -1;
	if (sqlite3_prepare_v2(l->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return v;
}

/* The head file holds "SEQ HASH\n" of the last event: SEQ zero-padded to 20 digits, so the
 * line always has HEAD_LEN bytes and is rewritten in place, under an exclusive flock (readers
 * take a shared one, so none sees half a line). It is only written under the database's write
 * lock, so it never goes backwards. In place rather than tmp + rename: the rename cost ~0.3 ms
 * of ext4 journalling per run, and 86 bytes at offset 0 lie in one sector, which a crash
 * leaves old or new. It is not fsync'd per commit: after a power loss it may lag the table
 * (verify tolerates a head behind, never ahead), and the ledger's own commits stay
 * synchronous=FULL. Only a write that changes its size (a new head file, or one of the older,
 * unpadded form, converted at its next write) is synced, once: a crash must not leave an
 * empty or missing head beside durable events. A writer keeps the file open (head_writer). */
#define HEAD_LEN (20 + 1 + 64 + 1)

/* (seq, hash) of the n bytes of a head file in text (of n + 1 bytes at least); -1 (err) when
 * they are not a head line. */
static int parse_head(const struct rb_ledger *l, char *text, ssize_t n, int64_t *seq, char hash[65],
                      struct rb_error *err)
{
	if (n > 256) /* a line is HEAD_LEN; more than 256 bytes is not a head file */
		return rb_error_set(err, 0, "the head file `%s` is malformed", l->head_path);
	text[n] = '\0';
	long long s;
	char h[65];
	int used = 0;
	if (sscanf(text, "%lld %64[0-9a-f]%n", &s, h, &used) != 2 || strlen(h) != 64 || s < 0 ||
	    strspn(text + used, "\n") != strlen(text + used))
		return rb_error_set(err, 0, "the head file `%s` is malformed", l->head_path);
	*seq = s;
	memcpy(hash, h, 65);
	return 0;
}

/* 1 and (seq, hash) when the head file exists and parses; 0 when it is missing; -1 when it is
 * malformed (why in err). */
static int read_head(struct rb_ledger *l, int64_t *seq, char hash[65], struct rb_error *err)
{
	_cleanup_close_ int fd = open(l->head_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		return rb_error_set(err, errno, "open `%s`", l->head_path);
	}
	char text[258];
	ssize_t n = flock(fd, LOCK_SH) < 0 ? -1 : pread(fd, text, sizeof text - 1, 0);
	if (n < 0)
		return rb_error_set(err, errno, "read `%s`", l->head_path);
	return parse_head(l, text, n, seq, hash, err) < 0 ? -1 : 1;
}

/* The head file opened for writing, kept open across commits (an open and a close fewer per
 * commit) while its path still names that file: a head file removed or replaced on disk is
 * the one verify reads, so it is the one checked and written. A held file's inode number
 * cannot be reused while it is held. *fd is -1 when the file is missing and create is false;
 * *created says this call made it (empty). */
static int head_writer(struct rb_ledger *l, bool create, int *fd, bool *created, struct rb_error *err)
{
	struct stat st;
	*fd = -1;
	*created = false;
	if (l->head_fd >= 0) {
		if (lstat(l->head_path, &st) == 0 && st.st_dev == l->head_dev && st.st_ino == l->head_ino) {
			*fd = l->head_fd;
			return 0;
		}
		close(l->head_fd);
		l->head_fd = -1;
	}
	int f = open(l->head_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (f < 0 && errno == ENOENT && create) {
		f = open(l->head_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		*created = f >= 0;
	}
	if (f < 0 && errno == ENOENT && !create)
		return 0;
	if (f < 0 || fstat(f, &st) < 0) {
		int e = errno;
		if (f >= 0)
			close(f);
		return rb_error_set(err, e, "open `%s`", l->head_path);
	}
	l->head_fd = f;
	l->head_dev = st.st_dev;
	l->head_ino = st.st_ino;
	*fd = f;
	return 0;
}

/* Writes (seq, hash) over a head file of old_len bytes, under its exclusive lock; a change of
 * its size is synced (see HEAD_LEN), with the directory's entry when the file is new. */
static int put_head(struct rb_ledger *l, int fd, ssize_t old_len, bool created, int64_t seq, const char *hash,
                    struct rb_error *err)
{
	char line[HEAD_LEN + 1];
	if (snprintf(line, sizeof line, "%020" PRId64 " %s\n", seq, hash) != HEAD_LEN)
		return rb_error_set(err, EINVAL, "head line for seq %" PRId64, seq);
	if (pwrite(fd, line, HEAD_LEN, 0) != HEAD_LEN || (old_len > HEAD_LEN && ftruncate(fd, HEAD_LEN) < 0))
		return rb_error_set(err, errno, "write `%s`", l->head_path);
	if (old_len == HEAD_LEN)
		return 0;
	if (fdatasync(fd) < 0)
		return rb_error_set(err, errno, "sync `%s`", l->head_path);
	if (created) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s", l->head_path);
		*strrchr(dir, '/') = '\0';
		_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fsync(dfd) < 0)
			return rb_error_set(err, errno, "sync `%s`", dir);
	}
	return 0;
}

/* The hash stored at seq, or "" when there is no such event. */
static int hash_at(struct rb_ledger *l, int64_t seq, char hash[65], struct rb_error *err)
{
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	hash[0] = '\0';
	if (seq == 0) {
		memcpy(hash, ZERO_HASH, 65);
		return 0;
	}
	if (sqlite3_prepare_v2(l->db, "SELECT hash FROM events WHERE seq = ?", -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "read an event");
	sqlite3_bind_int64(s, 1, seq);
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		snprintf(hash, 65, "%s", col_text(s, 0));
	else if (rc != SQLITE_DONE)
		return db_error(l, err, "read an event");
	return 0;
}

/* The head file moved to (last, last_hash), under its exclusive lock, unless it disagrees
 * with the table (see update_head). fd is empty only when created. */
static int move_head(struct rb_ledger *l, int fd, bool created, int64_t last, const char *last_hash,
                     struct rb_error *err)
{
	char text[258];
	ssize_t n = pread(fd, text, sizeof text - 1, 0);
	if (n < 0)
		return rb_error_set(err, errno, "read `%s`", l->head_path);
	if (n > 0 || !created) {
		int64_t head_seq = 0;
		char head_hash[65] = "", stored[65] = "";
		if (parse_head(l, text, n, &head_seq, head_hash, err) < 0)
			return -1;
		if (head_seq > last)
			return rb_error_set(err, 0,
			                    "the head file names seq %" PRId64 " beyond the last event %" PRId64
			                    " (events deleted?); run `runbox ledger verify`",
			                    head_seq, last);
		if (hash_at(l, head_seq, stored, err) < 0)
			return -1;
		if (strcmp(stored, head_hash) != 0)
			return rb_error_set(err, 0,
			                    "the head file disagrees with event %" PRId64
			                    " (events deleted or replaced?); run `runbox ledger verify`",
			                    head_seq);
	}
	return put_head(l, fd, n, created, last, last_hash, err);
}

/* Moves the head file to the last event, under the write lock. A head file that disagrees with
 * the table (it names an event that is gone or has another hash) is evidence of tampering: it
 * is left as it is, so the next append cannot paper over a truncation and verify keeps
 * reporting it. A missing one is made again only while the table has one event at most. */
static int update_head(struct rb_ledger *l, struct rb_error *err)
{
	int64_t last = 0;
	char last_hash[65] = "";
	if (last_event(l, &last, last_hash, err) < 0)
		return -1;
	int fd;
	bool created;
	if (head_writer(l, last <= 1, &fd, &created, err) < 0)
		return -1;
	if (fd < 0)
		return rb_error_set(err, 0, "the head file `%s` is missing; run `runbox ledger verify`", l->head_path);
	if (flock(fd, LOCK_EX) < 0)
		return rb_error_set(err, errno, "lock `%s`", l->head_path);
	int r = move_head(l, fd, created, last, last_hash, err);
	flock(fd, LOCK_UN);
	return r;
}

/* A new ledger's head file, seq 0, made now (and synced), so a missing head file later means
 * removal; one that exists is left as it is. */
static int init_head(struct rb_ledger *l, struct rb_error *err)
{
	int fd;
	bool created;
	if (head_writer(l, true, &fd, &created, err) < 0)
		return -1;
	if (!created)
		return 0;
	if (flock(fd, LOCK_EX) < 0)
		return rb_error_set(err, errno, "lock `%s`", l->head_path);
	int r = put_head(l, fd, 0, true, 0, ZERO_HASH, err);
	flock(fd, LOCK_UN);
	return r;
}

static int set_wal(struct rb_ledger *l, struct rb_error *err)
{
	/* Switching to WAL needs an exclusive lock; concurrent first opens may see SQLITE_BUSY
	 * despite the busy timeout, so retry a bounded number of times. */
	for (int attempt = 0;; attempt++) {
		_cleanup_stmt_ sqlite3_stmt *s = NULL;
		if (sqlite3_prepare_v2(l->db, "PRAGMA journal_mode=WAL", -1, &s, NULL) != SQLITE_OK)
			return db_error(l, err, "PRAGMA journal_mode=WAL");
		int rc = sqlite3_step(s);
		if (rc == SQLITE_ROW) {
			if (strcmp(col_text(s, 0), "wal") != 0)
				return rb_error_set(err, 0, "ledger `%s`: cannot use WAL mode (got %s)", l->db_path,
				                    col_text(s, 0));
			return 0;
		}
		if ((rc != SQLITE_BUSY && rc != SQLITE_LOCKED) || attempt >= 100)
			return db_error(l, err, "PRAGMA journal_mode=WAL");
		usleep(10000);
	}
}

/* SQLite's unix VFS, with one change: opening a WAL that exists already does not ask for
 * O_CREAT. SQLite marks a WAL it opened with SQLITE_OPEN_CREATE as new and fsyncs its
 * directory at the first commit, 0.75 ms on every run here; the WAL is persistent
 * (SQLITE_FCNTL_PERSIST_WAL), so its directory entry was made durable by the run that created
 * it. A WAL that vanishes in between is opened the usual way. */
static sqlite3_vfs ledger_vfs;

static int ledger_vfs_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags, int *out_flags)
{
	sqlite3_vfs *real = vfs->pAppData;
	if ((flags & SQLITE_OPEN_WAL) && (flags & SQLITE_OPEN_CREATE) && name && access(name, F_OK) == 0 &&
	    real->xOpen(real, name, file, flags & ~SQLITE_OPEN_CREATE, out_flags) == SQLITE_OK)
		return SQLITE_OK;
	return real->xOpen(real, name, file, flags, out_flags);
}

static bool ledger_vfs_ok;

static void ledger_vfs_register(void)
{
	sqlite3_vfs *real = sqlite3_vfs_find(NULL);
	if (!real)
		return;
	ledger_vfs = *real;
	ledger_vfs.zName = "runbox-ledger";
	ledger_vfs.pAppData = real;
	ledger_vfs.xOpen = ledger_vfs_open;
	ledger_vfs_ok = sqlite3_vfs_register(&ledger_vfs, 0) == SQLITE_OK;
}

/* NULL (SQLite's default) if the wrapper could not be registered. */
static const char *ledger_vfs_name(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, ledger_vfs_register);
	return ledger_vfs_ok ? ledger_vfs.zName : NULL;
}

static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct rb_ledger *l = arg;
	l->wal_frames = frames;
	if (frames >= WAL_MAX_FRAMES)
		sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	return SQLITE_OK;
}

int rb_ledger_set_durable(struct rb_ledger *l, bool durable, struct rb_error *err)
{
	if (l->durable == durable)
		return 0;
	if (exec(l, durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", err) < 0)
		return -1;
	l->durable = durable;
	return 0;
}

void rb_ledger_set_wait(struct rb_ledger *l, bool wait)
{
	if (l->no_wait == !wait)
		return;
	sqlite3_busy_timeout(l->db, wait ? BUSY_TIMEOUT_MS : RB_LEDGER_TRY_MS);
	l->no_wait = !wait;
}

/* The WAL's fd, opened at the first call; -1 (errno set) if it cannot be. */
static int wal_fd(struct rb_ledger *l)
{
	if (l->wal_fd < 0) {
		char wal[PATH_MAX + 8];
		snprintf(wal, sizeof wal, "%s-wal", l->db_path);
		l->wal_fd = open(wal, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	}
	return l->wal_fd;
}

void rb_ledger_start_sync(struct rb_ledger *l)
{
	/* Only starts the writes: rb_ledger_sync's fdatasync waits for them and flushes the
	 * disk's cache. A failure here is met again there. */
	if (wal_fd(l) >= 0)
		sync_file_range(l->wal_fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

int rb_ledger_sync(struct rb_ledger *l, struct rb_error *err)
{
	if (wal_fd(l) < 0)
		return rb_error_set(err, errno, "ledger `%s-wal`: open", l->db_path);
	if (fdatasync(l->wal_fd) < 0)
		return rb_error_set(err, errno, "ledger `%s-wal`: fdatasync", l->db_path);
	/* What is synced may move the head (see rb_ledger_append_run). */
	struct rb_error herr;
	if (exec_hot(l, HOT_BEGIN, &herr) < 0 || update_head(l, &herr) < 0 || exec_hot(l, HOT_COMMIT, &herr) < 0) {
		rollback(l);
		rb_warn("ledger: the events are recorded, but the head file was not updated: %s", herr.msg);
	}
	return 0;
}

void rb_ledger_tidy(struct rb_ledger *l)
{
	if (l->wal_frames < WAL_TIDY_FRAMES)
		return;
	/* PASSIVE: never waits for a reader or another writer; what it cannot copy now, a later
	 * run will. */
	if (sqlite3_wal_checkpoint_v2(l->db, "main", SQLITE_CHECKPOINT_PASSIVE, NULL, NULL) == SQLITE_OK)
		l->wal_frames = 0;
}

/* Makes `path` an empty file of mode 0600 if it does not exist, so SQLite (which copies the
 * database's mode to its -wal and -shm files) never makes a world-readable ledger whatever
 * the umask. It never opens `path` itself: closing any descriptor of the database drops every
 * POSIX lock this process holds on it, those of another connection open in the process (a
 * daemon's) included, and SQLite's locking then lets a second writer in. The file is made
 * under a private name and linked into place (rb_put_private_file), never over one there. */
static int create_private(const char *path, struct rb_error *err)
{
	struct stat st;
	if (lstat(path, &st) == 0)
		return 0;
	return rb_put_private_file(path, "", 0, RB_PUT_NEW, err) < 0 ? -1 : 0; /* 1: another made it meanwhile */
}

int rb_ledger_open(const char *state_dir, struct rb_ledger **out, struct rb_error *err)
{
	*out = NULL;
	if (rb_state_dir_make(state_dir, err) < 0)
		return -1;
	struct rb_ledger *l = calloc(1, sizeof *l);
	if (!l)
		return rb_error_set(err, ENOMEM, "ledger");
	l->wal_fd = -1;
	l->head_fd = -1;
	if (snprintf(l->db_path, sizeof l->db_path, "%s/ledger.db", state_dir) >= (int)sizeof l->db_path ||
	    snprintf(l->head_path, sizeof l->head_path, "%s/ledger.head", state_dir) >= (int)sizeof l->head_path) {
		free(l);
		return rb_error_set(err, ENAMETOOLONG, "ledger in `%s`", state_dir);
	}
	if (create_private(l->db_path, err) < 0) {
		free(l);
		return -1;
	}
	if (sqlite3_open_v2(l->db_path, &l->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW, ledger_vfs_name()) !=
	    SQLITE_OK) {
		rb_error_set(err, 0, "open `%s`: %s", l->db_path, l->db ? sqlite3_errmsg(l->db) : "out of memory");
		rb_ledger_close(l);
		return -1;
	}
	sqlite3_busy_timeout(l->db, BUSY_TIMEOUT_MS);
	/* Every runbox is a short-lived connection: without these, each close checkpoints and
	 * deletes the WAL and the next run re-creates it, three extra fsyncs per run. The WAL
	 * is checkpointed as it grows (SQLite's auto-checkpoint) instead. */
	int one = 1;
	sqlite3_db_config(l->db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_file_control(l->db, "main", SQLITE_FCNTL_PERSIST_WAL, &one);
	sqlite3_wal_hook(l->db, on_wal_commit, l);
	int64_t seq = 0;
	char hash[65] = "";
	if (set_wal(l, err) < 0 || exec(l, "PRAGMA synchronous=FULL", err) < 0)
		goto fail;
	l->durable = true;
	/* An existing ledger of this schema needs no write to open: a write transaction here
	 * would cost an fsync on every run. */
	if (schema_version(l) == atoi(SCHEMA_VERSION)) {
		*out = l;
		return 0;
	}
	if (exec_hot(l, HOT_BEGIN, err) < 0)
		goto fail;
	if (exec(l, SCHEMA, err) < 0 || exec(l, "PRAGMA user_version=" SCHEMA_VERSION, err) < 0 ||
	    last_event(l, &seq, hash, err) < 0)
		goto fail;
	if (seq == 0 && init_head(l, err) < 0)
		goto fail;
	if (exec_hot(l, HOT_COMMIT, err) < 0)
		goto fail;
	*out = l;
	return 0;
fail:
	rollback(l);
	rb_ledger_close(l);
	return -1;
}

void rb_ledger_close(struct rb_ledger *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < RB_ARRAY_SIZE(l->hot); i++)
		sqlite3_finalize(l->hot[i]); /* a no-op on NULL */
	if (l->db)
		sqlite3_close_v2(l->db);
	if (l->wal_fd >= 0)
		close(l->wal_fd);
	if (l->head_fd >= 0)
		close(l->head_fd);
	free(l);
}

/* RFC 3339 UTC with milliseconds: 2026-11-24T18:03:05.123Z */
static void now_ts(char out[32])
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	struct tm tm;
	gmtime_r(&t.tv_sec, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03ldZ", t.tv_nsec / 1000000);
}

/* Inserts one event after (*seq - 1, prev), inside the caller's transaction; advances *seq and
 * prev. */
static int insert_event(struct rb_ledger *l, sqlite3_stmt *s, int64_t seq, char prev[65], const char *run_id,
                        const char *tenant, const char *agent, const struct rb_ledger_event *ev, struct rb_error *err)
{
	_cleanup_json_ json_t *empty = ev->data ? NULL : json_object();
	_cleanup_free_ char *text = json_dumps(ev->data ? ev->data : empty, JSON_SORT_KEYS | JSON_COMPACT);
	if (!text)
		return rb_error_set(err, ENOMEM, "ledger event `%s`: encode data", ev->type);
	char ts[32], hash[65];
	now_ts(ts);
	if (event_hash(prev, seq, ts, run_id, tenant, agent, ev->type, text, hash) < 0)
		return rb_error_set(err, ENOMEM, "ledger event `%s`", ev->type);
	sqlite3_reset(s);
	sqlite3_bind_int64(s, 1, seq);
	const char *vals[] = {ts, run_id, tenant, agent, ev->type, text, prev, hash};
	for (int i = 0; i < (int)RB_ARRAY_SIZE(vals); i++)
		sqlite3_bind_text(s, i + 2, vals[i], -1, SQLITE_TRANSIENT);
	if (sqlite3_step(s) != SQLITE_DONE)
		return db_error(l, err, "append event");
	memcpy(prev, hash, 65);
	return 0;
}

/* Is run_id free for the run instance `instance`, inside the caller's write transaction? Yes
 * when the ledger has no event of run_id, or when its run_start carries this instance. Read
 * under the write lock, so two runs with one id cannot both find it free. 0, RB_LEDGER_TAKEN
 * or -1. */
static int check_owner(struct rb_ledger *l, const char *run_id, const char *instance, struct rb_error *err)
{
	_cleanup_reset_ sqlite3_stmt *s = hot(l, HOT_OWNER);
	if (!s)
		return db_error(l, err, "look up run id");
	sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_ROW)
		return db_error(l, err, "look up run id");
	if (sqlite3_column_int64(s, 0) == 0)
		return 0;
	const char *data = (const char *)sqlite3_column_text(s, 1);
	_cleanup_json_ json_t *d = data ? json_loads(data, 0, NULL) : NULL;
	const char *theirs = json_string_value(json_object_get(d, "instance"));
	if (theirs && !strcmp(theirs, instance))
		return 0;
	rb_error_set(err, EEXIST, "run id `%s` is already in the ledger, for another run: run ids must be unique",
	             run_id);
	return RB_LEDGER_TAKEN;
}

int rb_ledger_append_batch(struct rb_ledger *l, const char *run_id, const char *tenant, const char *agent,
                           const struct rb_ledger_event *events, size_t n, uint64_t *last_seq, struct rb_error *err)
{
	return rb_ledger_append_run(l, run_id, NULL, tenant, agent, events, n, last_seq, err);
}

int rb_ledger_append_run(struct rb_ledger *l, const char *run_id, const char *instance, const char *tenant,
                         const char *agent, const struct rb_ledger_event *events, size_t n, uint64_t *last_seq,
                         struct rb_error *err)
{
	if (!run_id || !*run_id)
		return rb_error_set(err, EINVAL, "ledger event without a run id");
	for (size_t i = 0; i < n; i++) {
		if (!events[i].type || !*events[i].type)
			return rb_error_set(err, EINVAL, "ledger event without a type");
		if (events[i].data && !json_is_object(events[i].data))
			return rb_error_set(err, EINVAL, "ledger event `%s`: data must be a JSON object",
			                    events[i].type);
	}
	if (n == 0)
		return 0;
	tenant = tenant ? tenant : "";
	agent = agent ? agent : "";

	/* BEGIN IMMEDIATE takes the write lock before reading the last hash, so concurrent
	 * appenders (other processes) queue on the busy timeout and the chain stays linear. */
	if (exec_hot(l, HOT_BEGIN, err) < 0)
		return l->no_wait && (sqlite3_errcode(l->db) & 0xff) == SQLITE_BUSY ? RB_LEDGER_BUSY : -1;
	int64_t last = 0;
	char prev[65] = "";
	if (instance) {
		int owner = check_owner(l, run_id, instance, err);
		if (owner != 0) {
			rollback(l);
			return owner;
		}
	}
	if (last_event(l, &last, prev, err) < 0)
		goto fail;
	{
		_cleanup_reset_ sqlite3_stmt *s = hot(l, HOT_INSERT);
		if (!s) {
			db_error(l, err, "prepare insert");
			goto fail;
		}
		for (size_t i = 0; i < n; i++)
			if (insert_event(l, s, last + 1 + (int64_t)i, prev, run_id, tenant, agent, &events[i], err) < 0)
				goto fail;
	}
	if (exec_hot(l, HOT_COMMIT, err) < 0)
		goto fail;
	int64_t seq = last + (int64_t)n;
	if (last_seq)
		*last_seq = (uint64_t)seq;

	/* The head file is written after the commit, in a second transaction that holds the write
	 * lock again and records whatever is last by then. A crash in between leaves the head
	 * behind, never ahead: verify then misses a deletion of those last events but never
	 * reports a false break. A commit that is not durable leaves the head to the next one
	 * that is: a head ahead of what a host crash kept would be a false break. */
	if (!l->durable)
		return 0;
	struct rb_error herr;
	if (exec_hot(l, HOT_BEGIN, &herr) < 0 || update_head(l, &herr) < 0 || exec_hot(l, HOT_COMMIT, &herr) < 0) {
		rollback(l);
		rb_warn("ledger: event %" PRId64 " recorded, but the head file was not updated: %s", seq, herr.msg);
	}
	return 0;
fail:
	rollback(l);
	return -1;
}

static int check_batch(const struct rb_ledger_run_batch *b, struct rb_error *err)
{
	if (!b->run_id || !*b->run_id)
		return rb_error_set(err, EINVAL, "ledger event without a run id");
	for (size_t i = 0; i < b->n; i++) {
		if (!b->events[i].type || !*b->events[i].type)
			return rb_error_set(err, EINVAL, "ledger event without a type");
		if (b->events[i].data && !json_is_object(b->events[i].data))
			return rb_error_set(err, EINVAL, "ledger event `%s`: data must be a JSON object",
			                    b->events[i].type);
	}
	return 0;
}

int rb_ledger_append_runs(struct rb_ledger *l, struct rb_ledger_run_batch *b, size_t n, struct rb_error *err)
{
	_cleanup_reset_ sqlite3_stmt *s = NULL;
	int64_t last = 0;
	char prev[65] = "";
	for (size_t i = 0; i < n; i++) {
		rb_error_clear(&b[i].err);
		b[i].result = check_batch(&b[i], &b[i].err);
		b[i].last_seq = 0;
	}
	if (exec_hot(l, HOT_BEGIN, err) < 0)
		goto fail_all;
	if (last_event(l, &last, prev, err) < 0)
		goto fail;
	if (!(s = hot(l, HOT_INSERT))) {
		db_error(l, err, "prepare insert");
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		if (b[i].result != 0 || b[i].n == 0)
			continue;
		/* A run id another instance holds refuses that batch only: its events are written
		 * nowhere, the others go in. */
		if (b[i].instance && (b[i].result = check_owner(l, b[i].run_id, b[i].instance, &b[i].err)) < 0)
			goto fail;
		if (b[i].result != 0)
			continue;
		for (size_t j = 0; j < b[i].n; j++)
			if (insert_event(l, s, ++last, prev, b[i].run_id, b[i].tenant ? b[i].tenant : "",
			                 b[i].agent ? b[i].agent : "", &b[i].events[j], err) < 0)
				goto fail;
		b[i].last_seq = (uint64_t)last;
	}
	if (exec_hot(l, HOT_COMMIT, err) < 0)
		goto fail;
	/* The head follows in its own transaction, as for rb_ledger_append_run. */
	if (l->durable) {
		struct rb_error herr;
		if (exec_hot(l, HOT_BEGIN, &herr) < 0 || update_head(l, &herr) < 0 ||
		    exec_hot(l, HOT_COMMIT, &herr) < 0) {
			rollback(l);
			rb_warn("ledger: events up to %" PRId64 " recorded, but the head file was not updated: %s",
			        last, herr.msg);
		}
	}
	return 0;
fail:
	rollback_stmt(l, s);
fail_all:
	for (size_t i = 0; i < n; i++)
		if (b[i].result == 0) {
			b[i].result = -1;
			b[i].err = *err;
		}
	return -1;
}

int rb_ledger_append_seq(struct rb_ledger *l, const char *run_id, const char *tenant, const char *agent,
                         const char *type, json_t *data, uint64_t *seq_out, struct rb_error *err)
{
	struct rb_ledger_event ev = {.type = type, .data = data};
	return rb_ledger_append_batch(l, run_id, tenant, agent, &ev, 1, seq_out, err);
}

int rb_ledger_append(struct rb_ledger *l, const char *run_id, const char *tenant, const char *agent, const char *type,
                     json_t *data, struct rb_error *err)
{
	return rb_ledger_append_seq(l, run_id, tenant, agent, type, data, NULL, err);
}

static json_t *broken(json_t *rep, int64_t bad_seq, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static json_t *broken(json_t *rep, int64_t bad_seq, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	json_object_set_new(rep, "intact", json_false());
	if (bad_seq > 0)
		json_object_set_new(rep, "first_bad_seq", json_integer(bad_seq));
	json_object_set_new(rep, "reason", json_string(why));
	return rep;
}

int rb_ledger_verify(struct rb_ledger *l, json_t **report, struct rb_error *err)
{
	if (report)
		*report = NULL;
	/* The head file first, then the snapshot: the head is only written after its event
	 * committed, so an honest head can never be ahead of a snapshot taken after it. */
	int64_t head_seq = 0;
	char head_hash[65] = "";
	struct rb_error herr = {0};
	int head = read_head(l, &head_seq, head_hash, &herr);

	_cleanup_json_ json_t *rep = json_object();
	json_object_set_new(rep, "intact", json_true());
	if (exec(l, "BEGIN", err) < 0)
		return -1;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(
	        l->db, "SELECT seq, ts, run_id, tenant, agent, type, data, prev_hash, hash FROM events ORDER BY seq",
	        -1, &s, NULL) != SQLITE_OK) {
		db_error(l, err, "read events");
		rollback(l);
		return -1;
	}
	int64_t expect = 1, count = 0, last_seq = 0;
	char prev[65], hash[65], at_head[65] = "";
	memcpy(prev, ZERO_HASH, 65);
	bool bad = false;
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		count++;
		int64_t seq = sqlite3_column_int64(s, 0);
		const char *stored = col_text(s, 8), *stored_prev = col_text(s, 7);
		if (!bad) {
			if (seq != expect) {
				bad = true;
				if (seq == 2 && expect == 1)
					broken(rep, 1, "the ledger starts at seq 2: event 1 is missing");
				else if (seq > expect && expect == 1)
					broken(rep, 1,
					       "the ledger starts at seq %" PRId64 ": events 1 to %" PRId64
					       " are missing",
					       seq, seq - 1);
				else if (seq > expect)
					broken(rep, expect,
					       "seq %" PRId64 " follows seq %" PRId64 ": event%s %" PRId64 "%s missing",
					       seq, expect - 1, seq - expect > 1 ? "s" : "", expect,
					       seq - expect > 1 ? " and later are" : " is");
				else
					broken(rep, seq, "unexpected seq %" PRId64 " after seq %" PRId64, seq,
					       expect - 1);
			} else if (strcmp(stored_prev, prev) != 0) {
				bad = true;
				if (seq == 1)
					broken(rep, seq, "its prev_hash is not the genesis value (64 zeros)");
				else
					broken(rep, seq,
					       "its prev_hash does not match the hash of seq %" PRId64
					       " (an earlier event was rewritten or replaced)",
					       seq - 1);
			} else if (event_hash(prev, seq, col_text(s, 1), col_text(s, 2), col_text(s, 3), col_text(s, 4),
			                      col_text(s, 5), col_text(s, 6), hash) < 0) {
				rollback_stmt(l, s);
				return rb_error_set(err, ENOMEM, "ledger verify");
			} else if (strcmp(hash, stored) != 0) {
				bad = true;
				broken(rep, seq, "its content does not match its hash (the event was edited)");
			}
		}
		if (head == 1 && seq == head_seq)
			snprintf(at_head, sizeof at_head, "%s", stored);
		snprintf(prev, sizeof prev, "%s", stored);
		last_seq = seq;
		expect = seq + 1;
	}
	if (rc != SQLITE_DONE) {
		db_error(l, err, "read events");
		rollback_stmt(l, s);
		return -1;
	}
	rollback_stmt(l, s);

	if (!bad) {
		if (head < 0) {
			bad = true;
			broken(rep, 0, "%s", herr.msg);
		} else if (head == 0 && count > 0) {
			bad = true;
			broken(rep, 0,
			       "the head file `%s` is missing (it records the last event, to detect truncation)",
			       l->head_path);
		} else if (head == 1 && head_seq > last_seq) {
			bad = true;
			broken(rep, last_seq + 1,
			       "the head file records seq %" PRId64 " but the ledger ends at seq %" PRId64
			       ": events were deleted from the end",
			       head_seq, last_seq);
		} else if (head == 1 && head_seq == 0 && strcmp(head_hash, ZERO_HASH) != 0) {
			bad = true;
			broken(rep, 0, "the head file `%s` is malformed (seq 0 with a non-zero hash)", l->head_path);
		} else if (head == 1 && head_seq > 0 && strcmp(at_head, head_hash) != 0) {
			bad = true;
			broken(rep, head_seq,
			       "its hash differs from the one the head file recorded (the event was replaced)");
		}
	}
	json_object_set_new(rep, "events", json_integer(count));
	json_t *h = json_object();
	json_object_set_new(h, "seq", json_integer(last_seq));
	json_object_set_new(h, "hash", json_string(prev));
	json_object_set_new(rep, "head", h);
	if (report)
		*report = rb_steal_ptr(&rep);
	return bad ? 1 : 0;
}

/* Reads n digits at *p into *v; false when they are not all there. */
static bool digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (!isdigit((unsigned char)**p))
			return false;
		*v = *v * 10 + (**p - '0');
	}
	return true;
}

int rb_ledger_parse_time(const char *s, int upper, char out[32], struct rb_error *err)
{
	const char *p = s;
	int Y, M, D, h = 0, m = 0, sec = 0, ms = 0, oh = 0, om = 0, sign = 0;
	int64_t span = 86400000; /* what the argument names: a day, minute, second or ms */
	if (!digits(&p, 4, &Y) || *p++ != '-' || !digits(&p, 2, &M) || *p++ != '-' || !digits(&p, 2, &D))
		goto bad;
	if (*p == 'T' || *p == 't' || *p == ' ') {
		p++;
		if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &m))
			goto bad;
		span = 60000;
		if (*p == ':') {
			p++;
			if (!digits(&p, 2, &sec))
				goto bad;
			span = 1000;
			if (*p == '.' || *p == ',') {
				p++;
				int nd = 0, scale = 100;
				for (; isdigit((unsigned char)*p); p++, nd++) {
					ms += (*p - '0') * scale;
					scale /= 10;
				}
				if (!nd)
					goto bad;
				span = 1;
			}
		}
		if (*p == 'Z' || *p == 'z') {
			p++;
		} else if (*p == '+' || *p == '-') {
			sign = *p++ == '+' ? 1 : -1;
			if (!digits(&p, 2, &oh))
				goto bad;
			if (*p == ':')
				p++;
			if (!digits(&p, 2, &om) || oh > 23 || om > 59)
				goto bad;
		}
	} else if (*p == 'Z' || *p == 'z') {
		p++;
	}
	if (*p || M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
		goto bad;
	struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = sec};
	time_t t = timegm(&tm);
	if (tm.tm_mday != D || tm.tm_mon != M - 1) /* 2026-02-30 */
		goto bad;
	int64_t ms_total = (int64_t)t * 1000 + ms - (int64_t)sign * (oh * 3600 + om * 60) * 1000;
	if (upper)
		ms_total += span;
	time_t secs = (time_t)(ms_total / 1000);
	struct tm g;
	if (ms_total < 0 || !gmtime_r(&secs, &g))
		goto bad;
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &g);
	snprintf(out + n, 32 - n, ".%03dZ", (int)(ms_total % 1000));
	return 0;
bad:
	return rb_error_set(
	    err, 0, "bad time `%s`: expected RFC 3339 like 2026-11-24T18:03:05Z or a prefix like 2026-11-24T18:03", s);
}

int rb_ledger_run_artifacts(struct rb_ledger *l, const char *run_id, const char *tenant, json_t **arts,
                            struct rb_error *err)
{
	*arts = NULL;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db,
	                       "WITH a AS (SELECT data, json_extract(data, '$.step') AS step FROM events"
	                       " WHERE run_id = ?1 AND tenant = ?2 AND type = 'artifact')"
	                       " SELECT data FROM a WHERE step = (SELECT MAX(step) FROM a)"
	                       " ORDER BY json_extract(data, '$.path')",
	                       -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "list a run's artifacts");
	sqlite3_bind_text(s, 1, run_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, tenant, -1, SQLITE_STATIC);
	_cleanup_json_ json_t *out = json_array();
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		json_t *d = json_loads(col_text(s, 0), 0, NULL);
		if (json_is_object(d))
			json_array_append_new(out, d);
		else
			json_decref(d);
	}
	if (rc != SQLITE_DONE)
		return db_error(l, err, "list a run's artifacts");
	*arts = rb_steal_ptr(&out);
	return 0;
}

int rb_ledger_artifact_events(struct rb_ledger *l, const char *digest, const char *tenant, json_t **rows,
                              struct rb_error *err)
{
	*rows = NULL;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db,
	                       "SELECT seq, ts, run_id, tenant, agent, json_extract(data, '$.step'),"
	                       " json_extract(data, '$.path'), json_extract(data, '$.size') FROM events"
	                       " WHERE type = 'artifact' AND tenant = ?2 AND instr(data, ?1) > 0"
	                       " AND json_extract(data, '$.digest') = ?1 ORDER BY seq",
	                       -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "look up an artifact's runs");
	sqlite3_bind_text(s, 1, digest, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, tenant, -1, SQLITE_STATIC);
	_cleanup_json_ json_t *out = json_array();
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		json_array_append_new(out,
		                      json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:s, s:I}", "seq",
		                                (json_int_t)sqlite3_column_int64(s, 0), "ts", col_text(s, 1), "run_id",
		                                col_text(s, 2), "tenant", col_text(s, 3), "agent", col_text(s, 4),
		                                "step", (json_int_t)sqlite3_column_int64(s, 5), "path", col_text(s, 6),
		                                "size", (json_int_t)sqlite3_column_int64(s, 7)));
	if (rc != SQLITE_DONE)
		return db_error(l, err, "look up an artifact's runs");
	*rows = rb_steal_ptr(&out);
	return 0;
}

int rb_ledger_runs(struct rb_ledger *l, const struct rb_ledger_runs_filter *f, json_t **runs, struct rb_error *err)
{
	*runs = NULL;
	char since[32], until[32];
	if (f->since && rb_ledger_parse_time(f->since, 0, since, err) < 0)
		return rb_error_prefix(err, "--since");
	if (f->until && rb_ledger_parse_time(f->until, 1, until, err) < 0)
		return rb_error_prefix(err, "--until");
	/* Prefixes by substr, not LIKE: a `_` or `%` in a name is that character. */
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(
	        l->db,
	        "SELECT * FROM (SELECT run_id, MIN(ts) AS t0, MAX(ts), tenant, agent,"
	        " (SELECT json_extract(data, '$.result') FROM events r WHERE r.run_id = e.run_id AND r.type = 'run_end'"
	        "  ORDER BY seq DESC LIMIT 1),"
	        " SUM(type = 'step_start'),"
	        " COUNT(DISTINCT CASE WHEN type = 'artifact' THEN json_extract(data, '$.digest') END), MIN(seq) AS s0"
	        " FROM events e WHERE (?1 IS NULL OR tenant = ?1)"
	        " AND (?2 IS NULL OR substr(agent, 1, length(?2)) = ?2)"
	        " AND (?3 IS NULL OR substr(run_id, 1, length(?3)) = ?3)"
	        " GROUP BY run_id HAVING (?4 IS NULL OR t0 >= ?4) AND (?5 IS NULL OR t0 < ?5)"
	        " ORDER BY s0 DESC LIMIT ?6) ORDER BY s0",
	        -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "list runs");
	const char *v[5] = {f->tenant, f->agent_prefix, f->run_prefix, f->since ? since : NULL,
	                    f->until ? until : NULL};
	for (int i = 0; i < 5; i++)
		if (v[i])
			sqlite3_bind_text(s, i + 1, v[i], -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 6, f->last ? (int64_t)f->last : -1);
	_cleanup_json_ json_t *out = json_array();
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I}", "run_id", col_text(s, 0), "ts",
		                        col_text(s, 1), "end_ts", col_text(s, 2), "tenant", col_text(s, 3), "agent",
		                        col_text(s, 4), "steps", (json_int_t)sqlite3_column_int64(s, 6), "artifacts",
		                        (json_int_t)sqlite3_column_int64(s, 7));
		json_object_set_new(row, "result",
		                    sqlite3_column_type(s, 5) == SQLITE_NULL ? json_null()
		                                                             : json_string(col_text(s, 5)));
		json_array_append_new(out, row);
	}
	if (rc != SQLITE_DONE)
		return db_error(l, err, "list runs");
	*runs = rb_steal_ptr(&out);
	return 0;
}

int rb_ledger_types(struct rb_ledger *l, json_t **types, struct rb_error *err)
{
	*types = NULL;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db, "SELECT DISTINCT type FROM events ORDER BY type", -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "list event types");
	_cleanup_json_ json_t *out = json_array();
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		json_array_append_new(out, json_string(col_text(s, 0)));
	if (rc != SQLITE_DONE)
		return db_error(l, err, "list event types");
	*types = rb_steal_ptr(&out);
	return 0;
}

static json_t *row_json(sqlite3_stmt *s)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "seq", json_integer(sqlite3_column_int64(s, 0)));
	static const char *const names[] = {"ts", "run_id", "tenant", "agent", "type"};
	for (int i = 0; i < (int)RB_ARRAY_SIZE(names); i++)
		json_object_set_new(ev, names[i], json_string(col_text(s, i + 1)));
	json_t *data = json_loads(col_text(s, 6), 0, NULL);
	json_object_set_new(ev, "data", data ? data : json_string(col_text(s, 6)));
	json_object_set_new(ev, "prev_hash", json_string(col_text(s, 7)));
	json_object_set_new(ev, "hash", json_string(col_text(s, 8)));
	return ev;
}

#define COLUMNS "SELECT seq, ts, run_id, tenant, agent, type, data, prev_hash, hash FROM events"

int rb_ledger_query(struct rb_ledger *l, const struct rb_ledger_filter *f, json_t **events, struct rb_error *err)
{
	*events = NULL;
	char since[32], until[32];
	if (f->since && rb_ledger_parse_time(f->since, 0, since, err) < 0)
		return rb_error_prefix(err, "--since");
	if (f->until && rb_ledger_parse_time(f->until, 1, until, err) < 0)
		return rb_error_prefix(err, "--until");
	if (!f->label_key != !f->label_value)
		return rb_error_set(err, EINVAL, "a label filter takes a name and a value");
	if (f->label_key) {
		size_t kl = strspn(f->label_key, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");
		if (!kl || kl > 64 || f->label_key[kl])
			return rb_error_set(err, EINVAL, "label `%s`: a name is [A-Za-z0-9._-]{1,64}", f->label_key);
	}
	/* Only fixed fragments go into the SQL text; every value is a bound parameter. */
	struct {
		const char *value, *clause;
	} conds[] = {
	    {f->run_id, f->prefixes ? " AND instr(run_id, ?) = 1" : " AND run_id = ?"},
	    {f->tenant, " AND tenant = ?"},
	    {f->agent, f->prefixes ? " AND instr(agent, ?) = 1" : " AND agent = ?"},
	    {f->type, " AND type = ?"},
	    {f->since ? since : NULL, " AND ts >= ?"},
	    {f->until ? until : NULL, " AND ts < ?"},
	    {f->grep, " AND instr(data, ?) > 0"},
	    /* Two parameters of one clause: the label's name (quoted into the JSON path), its value. */
	    {f->label_key, " AND run_id IN (SELECT run_id FROM events WHERE type = 'run_start'"
	                   " AND json_extract(data, '$.labels.\"' || ? || '\"')"},
	    {f->label_value, " = ?)"},
	};
	char sql[768];
	size_t n = (size_t)snprintf(sql, sizeof sql, "%s%s", f->last ? "SELECT * FROM (" : "", COLUMNS " WHERE 1");
	for (size_t i = 0; i < RB_ARRAY_SIZE(conds); i++)
		if (conds[i].value)
			n += (size_t)snprintf(sql + n, sizeof sql - n, "%s", conds[i].clause);
	/* --last: the newest N, shown oldest first like everything else. */
	if (f->last)
		n += (size_t)snprintf(sql + n, sizeof sql - n, " ORDER BY seq DESC LIMIT %u)", f->last);
	snprintf(sql + n, sizeof sql - n, "%s", f->limit ? " ORDER BY seq LIMIT ?" : " ORDER BY seq");
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db, sql, -1, &s, NULL) != SQLITE_OK)
		return db_error(l, err, "prepare query");
	int k = 1;
	for (size_t i = 0; i < RB_ARRAY_SIZE(conds); i++)
		if (conds[i].value)
			sqlite3_bind_text(s, k++, conds[i].value, -1, SQLITE_TRANSIENT);
	if (f->limit)
		sqlite3_bind_int64(s, k, f->limit);
	_cleanup_json_ json_t *arr = json_array();
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		json_array_append_new(arr, row_json(s));
	if (rc != SQLITE_DONE)
		return db_error(l, err, "query events");
	*events = rb_steal_ptr(&arr);
	return 0;
}

int rb_ledger_export_jsonl(struct rb_ledger *l, FILE *out, struct rb_error *err)
{
	/* One read transaction: the export is one consistent snapshot even while runs append. */
	if (exec(l, "BEGIN", err) < 0)
		return -1;
	_cleanup_stmt_ sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(l->db, COLUMNS " ORDER BY seq", -1, &s, NULL) != SQLITE_OK) {
		db_error(l, err, "prepare export");
		rollback(l);
		return -1;
	}
	int rc;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		_cleanup_json_ json_t *ev = row_json(s);
		if (rb_json_print(out, ev, JSON_COMPACT) < 0) {
			rollback_stmt(l, s);
			return rb_error_set(err, errno, "export: write");
		}
	}
	if (rc != SQLITE_DONE) {
		db_error(l, err, "export events");
		rollback_stmt(l, s);
		return -1;
	}
	rollback_stmt(l, s);
	if (fflush(out) == EOF || ferror(out))
		return rb_error_set(err, errno, "export: write");
	return 0;
}

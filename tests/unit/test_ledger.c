/* ledger/ledger.c: appends chain and verify; edits, middle deletions and truncations made
 * behind the library's back (sqlite3 directly, triggers dropped) are detected; queries filter
 * exactly; grep is literal; 50 processes appending at once keep one intact chain. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "ledger/ledger.h"

struct fx {
	char dir[64];
	char db[128];
	char head[128];
	struct rb_ledger *l;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	strcpy(f->dir, "/tmp/rbx-ledger-ut.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	/* the ledger creates its state directory itself, private */
	strcat(f->dir, "/state");
	snprintf(f->db, sizeof f->db, "%s/ledger.db", f->dir);
	snprintf(f->head, sizeof f->head, "%s/ledger.head", f->dir);
	struct rb_error err = {0};
	if (rb_ledger_open(f->dir, &f->l, &err) < 0) {
		fprintf(stderr, "open: %s\n", err.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	rb_ledger_close(f->l);
	char top[64];
	snprintf(top, sizeof top, "%.*s", (int)(strlen(f->dir) - strlen("/state")), f->dir);
	struct rb_error err;
	rb_rm_rf(top, &err);
	free(f);
	return 0;
}

static void append(struct fx *f, const char *run, const char *tenant, const char *agent, const char *type,
                   const char *data_json)
{
	struct rb_error err = {0};
	json_t *d = data_json ? json_loads(data_json, 0, NULL) : NULL;
	if (data_json && !d)
		fail_msg("bad test JSON %s", data_json);
	if (rb_ledger_append(f->l, run, tenant, agent, type, d, &err) != 0)
		fail_msg("append: %s", err.msg);
	json_decref(d);
}

/* verify, expecting want (0 intact, 1 broken); when broken, the first bad seq (or 0 for none)
 * and a word of the reason. */
static void expect_verify(struct fx *f, int want, long long bad_seq, const char *why)
{
	struct rb_error err = {0};
	json_t *rep = NULL;
	int r = rb_ledger_verify(f->l, &rep, &err);
	if (r < 0)
		fail_msg("verify: %s", err.msg);
	char *text = json_dumps(rep, JSON_COMPACT);
	if (r != want)
		fail_msg("verify returned %d, want %d: %s", r, want, text);
	if (want == 1) {
		json_t *b = json_object_get(rep, "first_bad_seq");
		long long got = b ? json_integer_value(b) : 0;
		if (got != bad_seq)
			fail_msg("first_bad_seq %lld, want %lld: %s", got, bad_seq, text);
		const char *reason = json_string_value(json_object_get(rep, "reason"));
		if (!reason || !strstr(reason, why))
			fail_msg("reason lacks \"%s\": %s", why, text);
	}
	free(text);
	json_decref(rep);
}

/* Runs SQL on the database directly, as an attacker (or the sqlite3 tool) would. */
static int raw_sql(struct fx *f, const char *sql)
{
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

static json_t *query(struct fx *f, struct rb_ledger_filter flt)
{
	struct rb_error err = {0};
	json_t *ev = NULL;
	if (rb_ledger_query(f->l, &flt, &ev, &err) != 0)
		fail_msg("query: %s", err.msg);
	return ev;
}

/* The seqs of an event array as "1,3,4". */
static void seqs(json_t *events, char *out, size_t n)
{
	size_t i, used = 0;
	json_t *e;
	out[0] = '\0';
	json_array_foreach(events, i, e) used += (size_t)snprintf(
	    out + used, n - used, "%s%lld", i ? "," : "", (long long)json_integer_value(json_object_get(e, "seq")));
}

static void expect_seqs(struct fx *f, struct rb_ledger_filter flt, const char *want)
{
	json_t *ev = query(f, flt);
	char got[512];
	seqs(ev, got, sizeof got);
	json_decref(ev);
	if (strcmp(got, want) != 0)
		fail_msg("query gave seqs [%s], want [%s]", got, want);
}

static void three_events(struct fx *f)
{
	append(f, "run-1", "acme", "agent-7", "run_start", "{\"image\":\"minimal\",\"agent_version\":\"3\"}");
	append(f, "run-1", "acme", "agent-7", "step_start",
	       "{\"step\":1,\"kind\":\"script\",\"text\":\"echo hi > /workspace/out/x\",\"size\":26}");
	append(f, "run-1", "acme", "agent-7", "run_end", "{\"result\":\"success\",\"steps\":1}");
}

static void test_round_trip(void **state)
{
	struct fx *f = *state;
	expect_verify(f, 0, 0, "");
	three_events(f);
	expect_verify(f, 0, 0, "");

	json_t *all = query(f, (struct rb_ledger_filter){0});
	assert_int_equal(json_array_size(all), 3);
	json_t *e1 = json_array_get(all, 0), *e2 = json_array_get(all, 1);
	assert_int_equal(json_integer_value(json_object_get(e1, "seq")), 1);
	assert_string_equal(json_string_value(json_object_get(e1, "tenant")), "acme");
	assert_string_equal(json_string_value(json_object_get(e1, "type")), "run_start");
	assert_string_equal(json_string_value(json_object_get(json_object_get(e1, "data"), "image")), "minimal");
	const char *ts = json_string_value(json_object_get(e1, "ts"));
	assert_int_equal(strlen(ts), 24); /* 2026-11-24T18:03:05.123Z */
	assert_true(ts[10] == 'T' && ts[19] == '.' && ts[23] == 'Z');
	assert_string_equal(json_string_value(json_object_get(e1, "prev_hash")),
	                    "0000000000000000000000000000000000000000000000000000000000000000");
	assert_string_equal(json_string_value(json_object_get(e2, "prev_hash")),
	                    json_string_value(json_object_get(e1, "hash")));

	/* The documented hash: sha256 over the fields joined by newlines, data as canonical JSON. */
	char buf[512], want[65];
	int n = snprintf(buf, sizeof buf, "%s\n1\n%s\nrun-1\nacme\nagent-7\nrun_start\n%s",
	                 "0000000000000000000000000000000000000000000000000000000000000000", ts,
	                 "{\"agent_version\":\"3\",\"image\":\"minimal\"}");
	rb_sha256_hex(buf, (size_t)n, want);
	assert_string_equal(json_string_value(json_object_get(e1, "hash")), want);

	/* The head file names the last event, in one line of fixed width (rewritten in place). */
	char *head = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_read_file(f->head, 256, &head, NULL, &err), 0);
	char expect_head[100];
	snprintf(expect_head, sizeof expect_head, "00000000000000000003 %s\n",
	         json_string_value(json_object_get(json_array_get(all, 2), "hash")));
	assert_string_equal(head, expect_head);
	free(head);
	json_decref(all);

	/* Private files, in a directory others may search but not list. */
	struct stat st;
	assert_int_equal(stat(f->dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0711);
	assert_int_equal(stat(f->db, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(stat(f->head, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* NULL tenant/agent/data are stored as "" and {}. */
	assert_int_equal(rb_ledger_append(f->l, "run-2", NULL, NULL, "cleanup", NULL, &err), 0);
	json_t *r2 = query(f, (struct rb_ledger_filter){.run_id = "run-2"});
	assert_int_equal(json_array_size(r2), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(r2, 0), "tenant")), "");
	assert_int_equal(json_object_size(json_object_get(json_array_get(r2, 0), "data")), 0);
	json_decref(r2);
	/* a run id and a type are required, data must be an object */
	assert_int_equal(rb_ledger_append(f->l, "", "t", "a", "x", NULL, &err), -1);
	json_t *arr = json_array();
	assert_int_equal(rb_ledger_append(f->l, "r", "t", "a", "x", arr, &err), -1);
	json_decref(arr);
	expect_verify(f, 0, 0, "");

	/* Reopening an existing ledger keeps it intact. */
	rb_ledger_close(f->l);
	assert_int_equal(rb_ledger_open(f->dir, &f->l, &err), 0);
	expect_verify(f, 0, 0, "");
}

static void test_triggers_refuse_changes(void **state)
{
	struct fx *f = *state;
	three_events(f);
	assert_int_not_equal(raw_sql(f, "UPDATE events SET data='{}' WHERE seq=2"), SQLITE_OK);
	assert_int_not_equal(raw_sql(f, "DELETE FROM events WHERE seq=3"), SQLITE_OK);
	/* an insert that does not extend the chain */
	assert_int_not_equal(raw_sql(f, "INSERT INTO events VALUES (9, 'ts', 'r', 't', 'a', 'x', '{}', 'p', 'h')"),
	                     SQLITE_OK);
	expect_verify(f, 0, 0, "");
}

static void test_edit_detected(void **state)
{
	struct fx *f = *state;
	three_events(f);
	expect_verify(f, 0, 0, ""); /* control */
	assert_int_equal(raw_sql(f, "DROP TRIGGER events_no_update;"
	                            "UPDATE events SET data='{\"step\":1,\"text\":\"true\"}' WHERE seq=2"),
	                 SQLITE_OK);
	expect_verify(f, 1, 2, "edited");
}

static void test_edit_of_other_columns_detected(void **state)
{
	struct fx *f = *state;
	three_events(f);
	assert_int_equal(raw_sql(f, "DROP TRIGGER events_no_update;"
	                            "UPDATE events SET ts='2020-01-01T00:00:00.000Z' WHERE seq=1"),
	                 SQLITE_OK);
	expect_verify(f, 1, 1, "edited");
}

/* An attacker who recomputes the edited event's hash still breaks the next event's link. */
static void test_rehashed_edit_detected(void **state)
{
	struct fx *f = *state;
	three_events(f);
	json_t *all = query(f, (struct rb_ledger_filter){0});
	json_t *e2 = json_array_get(all, 1);
	const char *data = "{\"step\":1,\"text\":\"true\"}";
	char buf[1024], h[65], sql[512];
	int n = snprintf(buf, sizeof buf, "%s\n2\n%s\nrun-1\nacme\nagent-7\nstep_start\n%s",
	                 json_string_value(json_object_get(e2, "prev_hash")),
	                 json_string_value(json_object_get(e2, "ts")), data);
	rb_sha256_hex(buf, (size_t)n, h);
	snprintf(sql, sizeof sql, "DROP TRIGGER events_no_update; UPDATE events SET data='%s', hash='%s' WHERE seq=2",
	         data, h);
	json_decref(all);
	assert_int_equal(raw_sql(f, sql), SQLITE_OK);
	expect_verify(f, 1, 3, "prev_hash");
}

static void test_middle_delete_detected(void **state)
{
	struct fx *f = *state;
	three_events(f);
	append(f, "run-1", "acme", "agent-7", "cleanup", "{\"what\":\"sandbox\",\"ok\":true}");
	assert_int_equal(raw_sql(f, "DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq=2"), SQLITE_OK);
	expect_verify(f, 1, 2, "missing");
}

static void test_first_delete_detected(void **state)
{
	struct fx *f = *state;
	three_events(f);
	assert_int_equal(raw_sql(f, "DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq=1"), SQLITE_OK);
	expect_verify(f, 1, 1, "missing");
}

/* The chain alone cannot see a deletion of the last event (what is left is a valid shorter
 * chain); the head file can. */
static void test_truncation_detected_by_head(void **state)
{
	struct fx *f = *state;
	three_events(f);
	/* save the head file as it was after seq 2 */
	assert_int_equal(raw_sql(f, "DROP TRIGGER events_no_delete; DELETE FROM events WHERE seq=3"), SQLITE_OK);
	expect_verify(f, 1, 3, "deleted from the end");

	/* the next append must not paper over it: the head file stays, verify still fails */
	append(f, "run-9", "acme", "agent-7", "run_start", "{}");
	expect_verify(f, 1, 3, "replaced");

	/* what verify cannot detect: a truncation whose author also rewrites the head file */
	json_t *all = query(f, (struct rb_ledger_filter){0});
	char line[100];
	snprintf(line, sizeof line, "3 %s\n", json_string_value(json_object_get(json_array_get(all, 2), "hash")));
	json_decref(all);
	int fd = open(f->head, O_WRONLY | O_TRUNC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	close(fd);
	expect_verify(f, 0, 0, "");
}

static void test_missing_head_detected(void **state)
{
	struct fx *f = *state;
	three_events(f);
	assert_int_equal(unlink(f->head), 0);
	expect_verify(f, 1, 0, "missing");
	/* and an append does not recreate it */
	append(f, "run-1", "acme", "agent-7", "cleanup", "{}");
	expect_verify(f, 1, 0, "missing");
}

static int64_t head_seq_on_disk(struct fx *f)
{
	struct rb_error err = {0};
	char *head = NULL;
	assert_int_equal(rb_read_file(f->head, 256, &head, NULL, &err), 0);
	long long seq = atoll(head);
	free(head);
	return seq;
}

static int64_t event_count(struct fx *f)
{
	json_t *all = query(f, (struct rb_ledger_filter){0});
	int64_t n = (int64_t)json_array_size(all);
	json_decref(all);
	return n;
}

/* A writer killed at any point of its commits (SIGKILL: nothing of it runs after) never leaves
 * a head file that verify rejects for an honest ledger: at worst the head is behind the table,
 * never ahead of it, never half-written. Control: the same ledger with its database rolled
 * back to an earlier copy is reported, the head naming events the copy does not have. */
static void test_killed_writer_leaves_verifiable_head(void **state)
{
	struct fx *f = *state;
	three_events(f);
	char old[192], sql[256];
	snprintf(old, sizeof old, "%s/rolled-back.db", f->dir);
	snprintf(sql, sizeof sql, "VACUUM INTO '%s'", old);
	assert_int_equal(raw_sql(f, sql), SQLITE_OK);
	int64_t before = event_count(f);
	for (int round = 0; round < 8; round++) {
		int ready[2];
		assert_int_equal(pipe(ready), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			struct rb_ledger *l;
			struct rb_error err = {0};
			if (rb_ledger_open(f->dir, &l, &err) < 0)
				_exit(1);
			for (int i = 0;; i++) {
				json_t *d = json_pack("{s:i}", "i", i);
				if (rb_ledger_append(l, "run-k", "acme", "agent-7", "step_start", d, &err) < 0)
					_exit(2);
				json_decref(d);
				if (i == 0 && write(ready[1], "x", 1) != 1)
					_exit(3);
			}
		}
		close(ready[1]);
		char c;
		assert_int_equal(read(ready[0], &c, 1), 1); /* it has appended once */
		close(ready[0]);
		usleep(300 + 700 * (useconds_t)round); /* killed at a different point of its loop each time */
		assert_int_equal(kill(pid, SIGKILL), 0);
		int ws;
		assert_int_equal(waitpid(pid, &ws, 0), pid);
		assert_true(WIFSIGNALED(ws));
		expect_verify(f, 0, 0, "");
		assert_true(head_seq_on_disk(f) <= event_count(f));
	}
	int64_t after = event_count(f);
	assert_true(after > before + 8);
	/* and this process's own writer (its head file held open) carries on from there */
	append(f, "run-1", "acme", "agent-7", "cleanup", "{}");
	assert_int_equal(head_seq_on_disk(f), after + 1);
	expect_verify(f, 0, 0, "");

	/* control: the database rolled back to its copy of 3 events; the head names seq after + 1 */
	rb_ledger_close(f->l);
	f->l = NULL;
	char wal[192], shm[192];
	snprintf(wal, sizeof wal, "%s-wal", f->db);
	snprintf(shm, sizeof shm, "%s-shm", f->db);
	assert_int_equal(rename(old, f->db), 0);
	unlink(wal);
	unlink(shm);
	struct rb_error err = {0};
	assert_int_equal(rb_ledger_open(f->dir, &f->l, &err), 0);
	assert_int_equal(event_count(f), before);
	expect_verify(f, 1, before + 1, "ends at");
}

/* The head file replaced by rename with one holding text (a new inode, as an operator's
 * re-anchoring makes). */
static void replace_head(const struct fx *f, const char *text)
{
	char tmp[160];
	snprintf(tmp, sizeof tmp, "%s.new", f->head);
	FILE *h = fopen(tmp, "w");
	assert_non_null(h);
	fputs(text, h);
	fclose(h);
	assert_int_equal(rename(tmp, f->head), 0);
}

/* A head file replaced on disk (an operator re-anchoring it by rename) is the one the writer
 * checks and moves, not the file it held open before. Control: the replaced head, made to
 * disagree with the table, stops the writer from moving it. */
static void test_replaced_head_is_the_one_written(void **state)
{
	struct fx *f = *state;
	three_events(f); /* the writer now holds the head file open */
	char line[100];
	char *cur = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_read_file(f->head, 256, &cur, NULL, &err), 0);
	replace_head(f, cur);
	append(f, "run-1", "acme", "agent-7", "cleanup", "{}");
	assert_int_equal(head_seq_on_disk(f), 4);
	expect_verify(f, 0, 0, "");

	/* control: a replaced head naming seq 4 with another hash is left as it is */
	snprintf(line, sizeof line, "%020d %064d\n", 4, 1);
	replace_head(f, line);
	append(f, "run-1", "acme", "agent-7", "cleanup", "{}");
	assert_int_equal(head_seq_on_disk(f), 4);
	expect_verify(f, 1, 4, "replaced");
	free(cur);
}

/* Inserts an event with a chosen time, chained correctly (as the library would). */
static void insert_at(struct fx *f, const char *ts, const char *run, const char *tenant, const char *agent,
                      const char *type, const char *data)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	long long seq = 0;
	char prev[65] = "0000000000000000000000000000000000000000000000000000000000000000", hash[65];
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1", -1, &s, NULL),
	                 SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW) {
		seq = sqlite3_column_int64(s, 0);
		snprintf(prev, sizeof prev, "%s", (const char *)sqlite3_column_text(s, 1));
	}
	sqlite3_finalize(s);
	seq++;
	char buf[2048];
	int n = snprintf(buf, sizeof buf, "%s\n%lld\n%s\n%s\n%s\n%s\n%s\n%s", prev, seq, ts, run, tenant, agent, type,
	                 data);
	rb_sha256_hex(buf, (size_t)n, hash);
	assert_int_equal(sqlite3_prepare_v2(db, "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &s, NULL),
	                 SQLITE_OK);
	sqlite3_bind_int64(s, 1, seq);
	const char *v[] = {ts, run, tenant, agent, type, data, prev, hash};
	for (int i = 0; i < 8; i++)
		sqlite3_bind_text(s, i + 2, v[i], -1, SQLITE_STATIC);
	assert_int_equal(sqlite3_step(s), SQLITE_DONE);
	sqlite3_finalize(s);
	assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	FILE *h = fopen(f->head, "w");
	fprintf(h, "%lld %s\n", seq, hash);
	fclose(h);
}

static void history(struct fx *f)
{
	/* Tuesday 2026-11-24 */
	insert_at(f, "2026-11-24T18:02:59.999Z", "r1", "acme", "agent-7", "step_start", "{\"text\":\"make\"}");
	insert_at(f, "2026-11-24T18:03:00.000Z", "r1", "acme", "agent-7", "step_start", "{\"text\":\"ls -la\"}");
	insert_at(f, "2026-11-24T18:03:59.999Z", "r1", "acme", "agent-7", "artifact", "{\"path\":\"out/r.pdf\"}");
	insert_at(f, "2026-11-24T18:04:00.000Z", "r1", "acme", "agent-7", "run_end", "{\"result\":\"success\"}");
	insert_at(f, "2026-11-24T18:03:30.000Z", "r2", "acme", "agent-8", "step_start", "{\"text\":\"pandoc\"}");
	insert_at(f, "2026-11-24T18:03:30.000Z", "r3", "globex", "agent-7", "step_start", "{\"text\":\"ls\"}");
	insert_at(f, "2026-11-25T09:00:00.000Z", "r4", "acme", "agent-7", "step_start", "{\"text\":\"rm -rf x\"}");
	expect_verify(f, 0, 0, "");
}

static void test_query_filters(void **state)
{
	struct fx *f = *state;
	history(f);
	expect_seqs(f, (struct rb_ledger_filter){0}, "1,2,3,4,5,6,7");
	expect_seqs(f, (struct rb_ledger_filter){.tenant = "acme"}, "1,2,3,4,5,7");
	expect_seqs(f, (struct rb_ledger_filter){.tenant = "acme", .agent = "agent-7"}, "1,2,3,4,7");
	expect_seqs(f, (struct rb_ledger_filter){.agent = "agent-7"}, "1,2,3,4,6,7");
	expect_seqs(f, (struct rb_ledger_filter){.run_id = "r1", .type = "step_start"}, "1,2");
	/* "at 18:03": the whole minute, both ends inclusive */
	expect_seqs(f,
	            (struct rb_ledger_filter){
	                .tenant = "acme", .agent = "agent-7", .since = "2026-11-24T18:03", .until = "2026-11-24T18:03"},
	            "2,3");
	expect_seqs(f, (struct rb_ledger_filter){.since = "2026-11-24T18:03:30Z", .until = "2026-11-24T18:03:30Z"},
	            "5,6");
	/* an offset: 19:03+01:00 is 18:03Z */
	expect_seqs(f,
	            (struct rb_ledger_filter){.since = "2026-11-24T19:03+01:00", .until = "2026-11-24T19:03:59+01:00"},
	            "2,3,5,6");
	/* a day */
	expect_seqs(f, (struct rb_ledger_filter){.since = "2026-11-25"}, "7");
	expect_seqs(f, (struct rb_ledger_filter){.until = "2026-11-24"}, "1,2,3,4,5,6");
	expect_seqs(f, (struct rb_ledger_filter){.since = "2026-11-24T18:04:00.000Z"}, "4,7");
	/* grep on data, with the others */
	expect_seqs(f, (struct rb_ledger_filter){.grep = "ls"}, "2,6");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "ls", .tenant = "acme"}, "2");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "LS"}, ""); /* case-sensitive */
	expect_seqs(f, (struct rb_ledger_filter){.tenant = "nobody"}, "");
	expect_seqs(f, (struct rb_ledger_filter){.tenant = "acme", .limit = 2}, "1,2");

	/* a bad time is an error naming it */
	struct rb_error err = {0};
	json_t *ev = NULL;
	struct rb_ledger_filter bad = {.since = "Tuesday"};
	assert_int_equal(rb_ledger_query(f->l, &bad, &ev, &err), -1);
	assert_non_null(strstr(err.msg, "Tuesday"));
	assert_null(ev);
}

static void test_grep_is_literal(void **state)
{
	struct fx *f = *state;
	append(f, "r", "t", "a", "step_start", "{\"text\":\"echo 100% done\"}");
	append(f, "r", "t", "a", "step_start", "{\"text\":\"echo 100x done\"}");
	append(f, "r", "t", "a", "step_start", "{\"text\":\"echo O'Brien\"}");
	append(f, "r", "t", "a", "step_start", "{\"text\":\"cat a_b\"}");
	append(f, "r", "t", "a", "step_start", "{\"text\":\"cat aXb\"}");
	append(f, "r", "t", "a", "step_start", "{\"text\":\"x'; DROP TABLE events; --\"}");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "%"}, "1");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "100%"}, "1");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "'"}, "3,6");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "O'Brien"}, "3");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "a_b"}, "4");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "_"}, "4");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "'; DROP TABLE events; --"}, "6");
	expect_seqs(f, (struct rb_ledger_filter){.tenant = "t' OR '1'='1"}, "");
	expect_verify(f, 0, 0, "");
}

static void test_parse_time(void **state)
{
	char out[32];
	struct rb_error err = {0};
	struct {
		const char *in;
		int upper;
		const char *want;
	} ok[] = {
	    {"2026-11-24T18:03", 0, "2026-11-24T18:03:00.000Z"},
	    {"2026-11-24T18:03", 1, "2026-11-24T18:04:00.000Z"},
	    {"2026-11-24 18:03:05", 1, "2026-11-24T18:03:06.000Z"},
	    {"2026-11-24T18:03:05.123Z", 0, "2026-11-24T18:03:05.123Z"},
	    {"2026-11-24T18:03:05.123456Z", 1, "2026-11-24T18:03:05.124Z"},
	    {"2026-11-24", 1, "2026-11-25T00:00:00.000Z"},
	    {"2026-12-31T23:59", 1, "2027-01-01T00:00:00.000Z"},
	    {"2026-11-24T18:03:05-05:30", 0, "2026-11-24T23:33:05.000Z"},
	    {"2026-11-24T01:00+02:00", 0, "2026-11-23T23:00:00.000Z"},
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		if (rb_ledger_parse_time(ok[i].in, ok[i].upper, out, &err) != 0)
			fail_msg("%s: %s", ok[i].in, err.msg);
		if (strcmp(out, ok[i].want) != 0)
			fail_msg("%s (upper %d): got %s, want %s", ok[i].in, ok[i].upper, out, ok[i].want);
	}
	const char *bad[] = {"",
	                     "Tuesday",
	                     "2026-11-24T",
	                     "2026-13-01",
	                     "2026-02-30",
	                     "2026-11-24T24:00",
	                     "2026-11-24T18:3",
	                     "2026-11-24T18:03:05.",
	                     "2026-11-24T18:03+2",
	                     "2026-11-24x",
	                     "18:03"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (rb_ledger_parse_time(bad[i], 0, out, &err) == 0)
			fail_msg("`%s` was accepted as %s", bad[i], out);
}

static void test_export_jsonl(void **state)
{
	struct fx *f = *state;
	three_events(f);
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	struct rb_error err = {0};
	assert_int_equal(rb_ledger_export_jsonl(f->l, m, &err), 0);
	fclose(m);
	int lines = 0;
	long long prev_seq = 0;
	for (char *save, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *e = json_loads(line, 0, NULL);
		assert_non_null(e);
		long long seq = json_integer_value(json_object_get(e, "seq"));
		assert_int_equal(seq, prev_seq + 1);
		prev_seq = seq;
		assert_int_equal(strlen(json_string_value(json_object_get(e, "hash"))), 64);
		assert_true(json_is_object(json_object_get(e, "data")));
		json_decref(e);
		lines++;
	}
	assert_int_equal(lines, 3);
	free(buf);
}

#define WRITERS 50
#define EACH    10

static void test_concurrent_appenders(void **state)
{
	struct fx *f = *state;
	/* each child opens its own connection: a handle never crosses fork */
	rb_ledger_close(f->l);
	f->l = NULL;
	pid_t pids[WRITERS];
	for (int i = 0; i < WRITERS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			struct rb_error err = {0};
			struct rb_ledger *l;
			char run[32];
			snprintf(run, sizeof run, "run-%d", i);
			if (rb_ledger_open(f->dir, &l, &err) < 0) {
				fprintf(stderr, "child %d: open: %s\n", i, err.msg);
				_exit(1);
			}
			for (int k = 0; k < EACH; k++) {
				json_t *d = json_pack("{s:i, s:i}", "writer", i, "k", k);
				if (rb_ledger_append(l, run, "acme", "agent-7", "step_start", d, &err) < 0) {
					fprintf(stderr, "child %d: append: %s\n", i, err.msg);
					_exit(1);
				}
				json_decref(d);
			}
			rb_ledger_close(l);
			_exit(0);
		}
	}
	int failed = 0;
	for (int i = 0; i < WRITERS; i++) {
		int st;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	assert_int_equal(failed, 0);
	struct rb_error err = {0};
	assert_int_equal(rb_ledger_open(f->dir, &f->l, &err), 0);
	expect_verify(f, 0, 0, "");
	json_t *all = query(f, (struct rb_ledger_filter){0});
	assert_int_equal(json_array_size(all), WRITERS * EACH);
	json_decref(all);
	for (int i = 0; i < WRITERS; i++) {
		char run[32];
		snprintf(run, sizeof run, "run-%d", i);
		json_t *mine = query(f, (struct rb_ledger_filter){.run_id = run});
		assert_int_equal(json_array_size(mine), EACH);
		/* each writer's own events are in its order */
		for (int k = 0; k < EACH; k++)
			assert_int_equal(json_integer_value(json_object_get(
			                     json_object_get(json_array_get(mine, (size_t)k), "data"), "k")),
			                 k);
		json_decref(mine);
	}
	/* the head file names the last of the 500 */
	char *head = NULL;
	assert_int_equal(rb_read_file(f->head, 256, &head, NULL, &err), 0);
	assert_int_equal(strncmp(head, "00000000000000000500 ", 21), 0);
	free(head);
}

static void test_batch_append(void **state)
{
	struct fx *f = *state;
	append(f, "run-0", "acme", "agent-7", "run_start", "{}");
	json_t *a = json_pack("{s:s}", "path", "a.txt"), *b = json_pack("{s:s}", "path", "b.txt");
	struct rb_ledger_event evs[] = {{"artifact", a}, {"artifact", b}, {"step_end", NULL}};
	struct rb_error err = {0};
	uint64_t last = 0;
	assert_int_equal(rb_ledger_append_batch(f->l, "run-1", "acme", "agent-7", evs, 3, &last, &err), 0);
	assert_int_equal(last, 4);
	expect_seqs(f, (struct rb_ledger_filter){.run_id = "run-1"}, "2,3,4");
	expect_seqs(f, (struct rb_ledger_filter){.grep = "b.txt"}, "3");
	expect_verify(f, 0, 0, "");
	/* all or none: a bad event refuses the whole batch */
	json_t *arr = json_array();
	struct rb_ledger_event bad[] = {{"artifact", a}, {"artifact", arr}};
	assert_int_equal(rb_ledger_append_batch(f->l, "run-2", "acme", "agent-7", bad, 2, NULL, &err), -1);
	expect_seqs(f, (struct rb_ledger_filter){.run_id = "run-2"}, "");
	json_decref(a);
	json_decref(b);
	json_decref(arr);
	char *head = NULL;
	assert_int_equal(rb_read_file(f->head, 256, &head, NULL, &err), 0);
	assert_int_equal(strncmp(head, "00000000000000000004 ", 21), 0);
	free(head);
}

/* A run id belongs to the run instance whose run_start first carried it: another instance's
 * append under that id writes nothing (RB_LEDGER_TAKEN), the owner's goes on. Control: an
 * unchecked batch and the owner's own appends go in. Then 8 processes race for one fresh id,
 * each with its own instance: exactly one gets in. */
static void test_run_id_taken(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	json_t *s1 = json_pack("{s:s}", "instance", "aaaa"), *s2 = json_pack("{s:s}", "instance", "bbbb");
	struct rb_ledger_event first[] = {{"run_start", s1}, {"step_start", NULL}};
	struct rb_ledger_event intruder[] = {{"run_start", s2}, {"step_start", NULL}};
	assert_int_equal(rb_ledger_append_run(f->l, "run-1", "aaaa", "acme", "a", first, 2, NULL, &err), 0);
	assert_int_equal(rb_ledger_append_run(f->l, "run-1", "aaaa", "acme", "a", first + 1, 1, NULL, &err), 0);
	assert_int_equal(rb_ledger_append_run(f->l, "run-1", "bbbb", "evil", "b", intruder, 2, NULL, &err),
	                 RB_LEDGER_TAKEN);
	assert_non_null(strstr(err.msg, "run-1"));
	assert_int_equal(rb_ledger_append_run(f->l, "run-1", "bbbb", "evil", "b", intruder + 1, 1, NULL, &err),
	                 RB_LEDGER_TAKEN);
	expect_seqs(f, (struct rb_ledger_filter){.run_id = "run-1"}, "1,2,3");
	expect_seqs(f, (struct rb_ledger_filter){.tenant = "evil"}, "");
	/* events of a run_id without a run_start (an old ledger, or gc's record of a run that
	 * never committed) take the id too */
	append(f, "run-2", "acme", "a", "cleanup", "{}");
	assert_int_equal(rb_ledger_append_run(f->l, "run-2", "aaaa", "acme", "a", first, 2, NULL, &err),
	                 RB_LEDGER_TAKEN);
	expect_verify(f, 0, 0, "");
	json_decref(s1);
	json_decref(s2);

	rb_ledger_close(f->l);
	f->l = NULL;
	enum { RACERS = 8 };
	pid_t pids[RACERS];
	for (int i = 0; i < RACERS; i++) {
		pids[i] = fork();
		assert_true(pids[i] >= 0);
		if (pids[i] == 0) {
			struct rb_ledger *l;
			char inst[16];
			snprintf(inst, sizeof inst, "inst-%d", i);
			json_t *d = json_pack("{s:s}", "instance", inst);
			struct rb_ledger_event ev[] = {{"run_start", d}};
			if (rb_ledger_open(f->dir, &l, &err) < 0)
				_exit(2);
			int r = rb_ledger_append_run(l, "race", inst, "t", inst, ev, 1, NULL, &err);
			rb_ledger_close(l);
			_exit(r == 0 ? 0 : r == RB_LEDGER_TAKEN ? 1 : 2);
		}
	}
	int won = 0, lost = 0;
	for (int i = 0; i < RACERS; i++) {
		int st;
		assert_int_equal(waitpid(pids[i], &st, 0), pids[i]);
		assert_true(WIFEXITED(st));
		won += WEXITSTATUS(st) == 0;
		lost += WEXITSTATUS(st) == 1;
	}
	assert_int_equal(won, 1);
	assert_int_equal(lost, RACERS - 1);
	assert_int_equal(rb_ledger_open(f->dir, &f->l, &err), 0);
	json_t *race = query(f, (struct rb_ledger_filter){.run_id = "race"});
	assert_int_equal(json_array_size(race), 1);
	json_decref(race);
	expect_verify(f, 0, 0, "");
}

/* Not waiting: while another connection holds the write lock, an append gives up with
 * RB_LEDGER_BUSY and writes nothing (waiting, it would block the busy timeout, then fail with
 * -1). The control: once the lock is released, the same append goes in. */
static void test_busy_without_wait(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	assert_int_equal(rb_ledger_append(f->l, "r1", "t", "a", "run_start", NULL, &err), 0);
	sqlite3 *other = NULL;
	assert_int_equal(sqlite3_open(f->db, &other), SQLITE_OK);
	assert_int_equal(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);

	json_t *d = json_pack("{s:i}", "step", 1);
	struct rb_ledger_event ev[1] = {{"step_start", d}};
	rb_ledger_set_wait(f->l, false);
	assert_int_equal(rb_ledger_append_batch(f->l, "r1", "t", "a", ev, 1, NULL, &err), RB_LEDGER_BUSY);

	assert_int_equal(sqlite3_exec(other, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(other);
	int64_t n = 0;
	assert_int_equal(rb_ledger_count_run(f->l, "r1", NULL, &n, &err), 0);
	assert_int_equal(n, 1); /* nothing of the busy attempt */
	assert_int_equal(rb_ledger_append_batch(f->l, "r1", "t", "a", ev, 1, NULL, &err), 0);
	rb_ledger_set_wait(f->l, true);
	assert_int_equal(rb_ledger_count_run(f->l, "r1", NULL, &n, &err), 0);
	assert_int_equal(n, 2);
	json_decref(d);
	json_t *report = NULL;
	assert_int_equal(rb_ledger_verify(f->l, &report, &err), 0);
	json_decref(report);
}

/* Whether another process sees a POSIX lock of ours on SQLite's shared-lock bytes of `db`. */
static bool child_sees_shared_lock(const char *db)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(db, O_RDONLY | O_CLOEXEC);
		struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0x40000002, .l_len = 510};
		_exit(fd >= 0 && fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* A second ledger opened and closed in a process that holds one (a daemon's lookups) must not
 * drop the first one's POSIX locks: closing any descriptor of the database drops them all,
 * and SQLite's locking then lets another process's writer or checkpointer in beside it. */
static void test_second_open_keeps_locks(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	assert_int_equal(rb_ledger_append(f->l, "r1", "t", "a", "run_start", NULL, &err), 0);
	int64_t n = 0;
	assert_int_equal(rb_ledger_count_run(f->l, "r1", NULL, &n, &err), 0);
	/* the control: the daemon's connection holds its lock, and another process sees it */
	assert_true(child_sees_shared_lock(f->db));
	struct rb_ledger *second = NULL;
	assert_int_equal(rb_ledger_open(f->dir, &second, &err), 0);
	rb_ledger_close(second);
	assert_true(child_sees_shared_lock(f->db));
	/* the file was made 0600 without opening it in place */
	struct stat st;
	assert_int_equal(stat(f->db, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
}

/* The store's tenant boundary: only an `artifact` event of that tenant with that digest counts;
 * the digest in another tenant's artifact event or in another event type's data does not. */
static void test_tenant_has_artifact(void **state)
{
	struct fx *f = *state;
	const char *d1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
	const char *d2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
	append(f, "r1", "acme", "a", "artifact",
	       "{\"step\": 1, \"path\": \"a.txt\", \"size\": 1, "
	       "\"digest\": \"sha256:1111111111111111111111111111111111111111111111111111111111111111\"}");
	append(f, "r2", "other", "a", "step_start",
	       "{\"text\": \"cat sha256:2222222222222222222222222222222222222222222222222222222222222222\"}");
	append(f, "r3", "acme", "a", "step_start",
	       "{\"digest\": \"sha256:2222222222222222222222222222222222222222222222222222222222222222\"}");
	struct rb_error err = {0};
	bool found = false;
	assert_int_equal(rb_ledger_tenant_has_artifact(f->l, "acme", d1, &found, &err), 0);
	assert_true(found);
	found = true;
	assert_int_equal(rb_ledger_tenant_has_artifact(f->l, "other", d1, &found, &err), 0);
	assert_false(found);
	found = true;
	assert_int_equal(rb_ledger_tenant_has_artifact(f->l, "acme", d2, &found, &err), 0);
	assert_false(found);
	/* A prefix of a stored digest is not that digest. */
	found = true;
	assert_int_equal(rb_ledger_tenant_has_artifact(f->l, "acme", "sha256:1111", &found, &err), 0);
	assert_false(found);
}

/* The run's last state: the highest step's artifacts, sorted, only for the run's tenant. */
static void test_run_artifacts(void **state)
{
	struct fx *f = *state;
	append(f, "r1", "acme", "a", "artifact",
	       "{\"step\": 1, \"path\": \"b.txt\", \"size\": 1, \"digest\": \"sha256:11\"}");
	append(f, "r1", "acme", "a", "artifact",
	       "{\"step\": 2, \"path\": \"b.txt\", \"size\": 2, \"digest\": \"sha256:22\"}");
	append(f, "r1", "acme", "a", "artifact",
	       "{\"step\": 2, \"path\": \"a.txt\", \"size\": 3, \"digest\": \"sha256:33\"}");
	append(f, "r2", "acme", "a", "artifact",
	       "{\"step\": 1, \"path\": \"c.txt\", \"size\": 4, \"digest\": \"sha256:44\"}");
	struct rb_error err = {0};
	json_t *arts = NULL;
	assert_int_equal(rb_ledger_run_artifacts(f->l, "r1", "acme", &arts, &err), 0);
	assert_int_equal(json_array_size(arts), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(arts, 0), "path")), "a.txt");
	assert_string_equal(json_string_value(json_object_get(json_array_get(arts, 1), "digest")), "sha256:22");
	json_decref(arts);
	/* Another tenant: nothing, as for a run that does not exist. */
	assert_int_equal(rb_ledger_run_artifacts(f->l, "r1", "other", &arts, &err), 0);
	assert_int_equal(json_array_size(arts), 0);
	json_decref(arts);
	assert_int_equal(rb_ledger_artifact_events(f->l, "sha256:22", "acme", &arts, &err), 0);
	assert_int_equal(json_array_size(arts), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(arts, 0), "run_id")), "r1");
	json_decref(arts);
	assert_int_equal(rb_ledger_artifact_events(f->l, "sha256:22", "other", &arts, &err), 0);
	assert_int_equal(json_array_size(arts), 0);
	json_decref(arts);
}

/* One row per run; agent and run as prefixes (an underscore is itself); --last the newest. */
static void test_runs(void **state)
{
	struct fx *f = *state;
	append(f, "r1", "acme", "weekly_report", "run_start", "{}");
	append(f, "r1", "acme", "weekly_report", "step_start", "{\"step\": 1}");
	append(f, "r1", "acme", "weekly_report", "artifact", "{\"step\": 1, \"digest\": \"sha256:11\"}");
	append(f, "r1", "acme", "weekly_report", "artifact", "{\"step\": 1, \"digest\": \"sha256:11\"}");
	append(f, "r1", "acme", "weekly_report", "run_end", "{\"result\": \"success\"}");
	append(f, "r2", "acme", "weeklyXreport", "run_start", "{}");
	append(f, "s3", "globex", "weekly_report", "run_start", "{}");
	struct rb_error err = {0};
	json_t *runs = NULL;
	struct rb_ledger_runs_filter all = {0};
	assert_int_equal(rb_ledger_runs(f->l, &all, &runs, &err), 0);
	assert_int_equal(json_array_size(runs), 3);
	json_t *r1 = json_array_get(runs, 0);
	assert_string_equal(json_string_value(json_object_get(r1, "result")), "success");
	assert_int_equal(json_integer_value(json_object_get(r1, "steps")), 1);
	assert_int_equal(json_integer_value(json_object_get(r1, "artifacts")), 1);
	assert_true(json_is_null(json_object_get(json_array_get(runs, 1), "result")));
	json_decref(runs);
	struct rb_ledger_runs_filter pre = {.agent_prefix = "weekly_"};
	assert_int_equal(rb_ledger_runs(f->l, &pre, &runs, &err), 0);
	assert_int_equal(json_array_size(runs), 2); /* not weeklyXreport: `_` is no wildcard */
	json_decref(runs);
	struct rb_ledger_runs_filter t = {.tenant = "acme", .run_prefix = "r"};
	assert_int_equal(rb_ledger_runs(f->l, &t, &runs, &err), 0);
	assert_int_equal(json_array_size(runs), 2);
	json_decref(runs);
	struct rb_ledger_runs_filter last = {.last = 1};
	assert_int_equal(rb_ledger_runs(f->l, &last, &runs, &err), 0);
	assert_int_equal(json_array_size(runs), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(runs, 0), "run_id")), "s3");
	json_decref(runs);
	/* query: prefixes when asked, exact otherwise; last keeps the newest, in seq order. */
	json_t *ev = NULL;
	struct rb_ledger_filter q = {.agent = "weekly", .prefixes = true};
	assert_int_equal(rb_ledger_query(f->l, &q, &ev, &err), 0);
	assert_int_equal(json_array_size(ev), 7);
	json_decref(ev);
	q.prefixes = false;
	assert_int_equal(rb_ledger_query(f->l, &q, &ev, &err), 0);
	assert_int_equal(json_array_size(ev), 0);
	json_decref(ev);
	struct rb_ledger_filter ql = {.last = 2};
	assert_int_equal(rb_ledger_query(f->l, &ql, &ev, &err), 0);
	assert_int_equal(json_array_size(ev), 2);
	assert_true(json_integer_value(json_object_get(json_array_get(ev, 0), "seq")) <
	            json_integer_value(json_object_get(json_array_get(ev, 1), "seq")));
	assert_int_equal(json_integer_value(json_object_get(json_array_get(ev, 1), "seq")), 7);
	json_decref(ev);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_triggers_refuse_changes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_edit_detected, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_edit_of_other_columns_detected, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rehashed_edit_detected, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_middle_delete_detected, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_first_delete_detected, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_truncation_detected_by_head, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_head_detected, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_killed_writer_leaves_verifiable_head, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replaced_head_is_the_one_written, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_query_filters, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_grep_is_literal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_batch_append, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_id_taken, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_busy_without_wait, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_open_keeps_locks, setup, teardown),
	    cmocka_unit_test(test_parse_time),
	    cmocka_unit_test_setup_teardown(test_tenant_has_artifact, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_run_artifacts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_runs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_export_jsonl, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent_appenders, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

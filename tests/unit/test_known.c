/* serve/known.c: the session ids runbox serve answers for without the ledger: those the ledger
 * recorded before the daemon started (data.session of a run_start, a label with the same text
 * is not one), and those added since, each of its own tenant; the snapshot refs likewise, and
 * each tenant's snapshot bytes held to its bound. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "ledger/ledger.h"
#include "serve/known.h"

#define SA "0123456789abcdef0123456789abcdef"
#define SB "fedcba9876543210fedcba9876543210"

static void ledger_sessions_are_known_to_their_tenant(void **state)
{
	char top[] = "/tmp/rbx-known-ut.XXXXXX";
	assert_non_null(mkdtemp(top));
	char dir[64];
	snprintf(dir, sizeof dir, "%s/state", top);
	struct rb_ledger *l = NULL;
	struct rb_error err;
	assert_int_equal(rb_ledger_open(dir, &l, &err), 0);
	json_t *d = json_pack("{s:s}", "session", SA);
	assert_int_equal(rb_ledger_append(l, "run-a", "ta", "ag", "run_start", d, &err), 0);
	json_decref(d);
	/* Not a session: the id only in a label. */
	d = json_pack("{s:{s:s}}", "labels", "x", "\"session\":\"" SB "\"");
	assert_int_equal(rb_ledger_append(l, "run-b", "ta", "ag", "run_start", d, &err), 0);
	json_decref(d);
	rb_ledger_close(l);

	struct rb_serve_known *k = NULL;
	assert_int_equal(rb_serve_known_load(dir, &k, &err), 0);
	assert_true(rb_serve_known_has(k, SA, "ta"));
	assert_true(rb_serve_known_has(k, SA, NULL));
	assert_false(rb_serve_known_has(k, SA, "tb")); /* another tenant's is unknown to it */
	assert_false(rb_serve_known_has(k, SB, NULL));
	assert_false(rb_serve_known_has(k, "nope", NULL));
	/* One made since. */
	assert_int_equal(rb_serve_known_add(k, SB, "tb", &err), 0);
	assert_true(rb_serve_known_has(k, SB, "tb"));
	assert_false(rb_serve_known_has(k, SB, "ta"));
	rb_serve_known_free(k);
	rb_rm_rf(top, &err);
}

#define RA "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define RB "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define RC "sha256:cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"

/* An object of the store below top/state/artifacts, for ref. */
static void store_object(const char *top, const char *ref)
{
	char path[512];
	snprintf(path, sizeof path, "%s/state/artifacts/sha256/%.2s", top, ref + 7);
	struct rb_error err;
	assert_int_equal(rb_mkdir_p(path, 0755, &err), 0);
	snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", ref + 7);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

static void snapshots_are_known_and_counted_to_their_tenant(void **state)
{
	char top[] = "/tmp/rbx-known-ut.XXXXXX";
	assert_non_null(mkdtemp(top));
	char dir[64], store[96];
	snprintf(dir, sizeof dir, "%s/state", top);
	snprintf(store, sizeof store, "%s/artifacts", dir);
	struct rb_ledger *l = NULL;
	struct rb_error err;
	assert_int_equal(rb_ledger_open(dir, &l, &err), 0);
	json_t *d = json_pack("{s:s, s:s, s:i}", "ref", RA, "digest", RA, "size", 600);
	assert_int_equal(rb_ledger_append(l, "run-a", "ta", "ag", "snapshot", d, &err), 0);
	json_decref(d);
	/* A refused snapshot names no digest: nothing known, nothing counted. */
	d = json_pack("{s:i, s:s, s:i}", "size", 5000, "error", "over", "status", 507);
	assert_int_equal(rb_ledger_append(l, "run-a", "ta", "ag", "snapshot", d, &err), 0);
	json_decref(d);
	rb_ledger_close(l);
	store_object(top, RA);

	struct rb_serve_known *k = NULL;
	assert_int_equal(rb_serve_known_load(dir, &k, &err), 0);
	assert_true(rb_serve_known_snapshot(k, RA, "ta"));
	assert_true(rb_serve_known_snapshot(k, RA, NULL));
	assert_false(rb_serve_known_snapshot(k, RA, "tb"));
	assert_false(rb_serve_known_snapshot(k, RB, NULL));

	rb_serve_known_snapshot_bound(k, 1000);
	/* 600 held from the ledger: 500 more is over, 400 fits; tb's bytes are its own. */
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RB, "ta", 500, &err), 507);
	assert_non_null(strstr(err.msg, "--max-snapshot-bytes-per-tenant"));
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RB, "tb", 500, &err), 0);
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RC, "ta", 400, &err), 0);
	/* Being taken, it counts: another 100 is over; not yet known. */
	assert_false(rb_serve_known_snapshot(k, RC, "ta"));
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RB, "ta", 100, &err), 507);
	/* The same ref again takes nothing more. */
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RA, "ta", 600, &err), 0);
	assert_int_equal(rb_serve_known_snapshot_settle(k, RA, "ta", 600, true, &err), 0);
	/* Given back when not recorded: 400 fits again; recorded, it is known. */
	assert_int_equal(rb_serve_known_snapshot_settle(k, RC, "ta", 400, false, &err), 0);
	assert_false(rb_serve_known_snapshot(k, RC, "ta"));
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RC, "ta", 400, &err), 0);
	store_object(top, RC);
	assert_int_equal(rb_serve_known_snapshot_settle(k, RC, "ta", 400, true, &err), 0);
	assert_true(rb_serve_known_snapshot(k, RC, "ta"));
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RB, "ta", 100, &err), 507);
	/* RA's object gone from the store (gc): its 600 bytes are back. */
	char path[512];
	snprintf(path, sizeof path, "%s/sha256/aa/%s", store, RA + 7);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rb_serve_known_snapshot_reserve(k, store, RB, "ta", 500, &err), 0);
	/* What /v1/stats shows: RC held and RB being taken (RA gone counts nothing); tb's RB. */
	uint64_t max = 0;
	json_t *u = rb_serve_known_snapshot_usage(k, store, &max);
	assert_int_equal(max, 1000);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(u, "ta"), "snapshots")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(u, "ta"), "bytes")), 900);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(u, "tb"), "snapshots")), 1);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(u, "tb"), "bytes")), 500);
	assert_int_equal(json_object_size(u), 2);
	json_decref(u);
	rb_serve_known_free(k);
	rb_rm_rf(top, &err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(ledger_sessions_are_known_to_their_tenant),
	    cmocka_unit_test(snapshots_are_known_and_counted_to_their_tenant),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

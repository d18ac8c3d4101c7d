/* gateway/idem.c and gateway/approval.c: a key's claim in each state (new, replay, mismatch,
 * busy, refused, lost, full, forgotten), the digest's separation of its parts, and the
 * decision files (first decision wins; the timeout denies). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateway/approval.h"
#include "gateway/idem.h"

static void test_claims(void **state)
{
	struct rb_idem t;
	rb_idem_init(&t);
	struct rb_idem_entry *e, *e2;
	assert_int_equal(rb_idem_claim(&t, "k1", "d1", RB_IDEM_IN_FLIGHT, &e), RB_IDEM_NEW);
	assert_int_equal(rb_idem_claim(&t, "k1", "d1", RB_IDEM_IN_FLIGHT, &e2), RB_IDEM_BUSY);
	assert_int_equal(rb_idem_claim(&t, "k1", "d2", RB_IDEM_IN_FLIGHT, &e2), RB_IDEM_MISMATCH);
	rb_idem_set(&t, e, RB_IDEM_DONE);
	assert_int_equal(rb_idem_claim(&t, "k1", "d1", RB_IDEM_IN_FLIGHT, &e2), RB_IDEM_REPLAY);
	assert_ptr_equal(e, e2);
	rb_idem_set(&t, e, RB_IDEM_UNKNOWN);
	assert_int_equal(rb_idem_claim(&t, "k1", "d1", RB_IDEM_IN_FLIGHT, &e2), RB_IDEM_LOST);
	rb_idem_set(&t, e, RB_IDEM_DENIED);
	assert_int_equal(rb_idem_claim(&t, "k1", "d1", RB_IDEM_IN_FLIGHT, &e2), RB_IDEM_REFUSED);
	/* a held one is busy too; a forgotten key is new again */
	assert_int_equal(rb_idem_claim(&t, "k2", "d", RB_IDEM_PENDING, &e), RB_IDEM_NEW);
	assert_int_equal(rb_idem_claim(&t, "k2", "d", RB_IDEM_IN_FLIGHT, &e2), RB_IDEM_BUSY);
	rb_idem_forget(&t, e);
	assert_int_equal(rb_idem_claim(&t, "k2", "d", RB_IDEM_IN_FLIGHT, &e2), RB_IDEM_NEW);
	/* the table's bound */
	char k[16];
	for (unsigned i = t.n; i < RB_IDEM_MAX; i++) {
		snprintf(k, sizeof k, "x%u", i);
		assert_int_equal(rb_idem_claim(&t, k, "d", RB_IDEM_IN_FLIGHT, &e), RB_IDEM_NEW);
	}
	assert_int_equal(rb_idem_claim(&t, "one-more", "d", RB_IDEM_IN_FLIGHT, &e), RB_IDEM_FULL);
	rb_idem_destroy(&t);
}

/* Answers kept for replay: each up to RB_IDEM_BODY_MAX, the run's up to RB_IDEM_BYTES_MAX in all;
 * one past either is not kept (a retry gets 409), and a forgotten one gives its bytes back. */
static void test_kept_bytes(void **state)
{
	struct rb_idem t;
	rb_idem_init(&t);
	static char mib[RB_IDEM_BODY_MAX];
	memset(mib, 'a', sizeof mib);
	struct rb_idem_entry *e;
	char k[16];
	unsigned n = (unsigned)(RB_IDEM_BYTES_MAX / RB_IDEM_BODY_MAX);
	for (unsigned i = 0; i < n; i++) {
		snprintf(k, sizeof k, "k%u", i);
		assert_int_equal(rb_idem_claim(&t, k, "d", RB_IDEM_IN_FLIGHT, &e), RB_IDEM_NEW);
		rb_idem_keep(&t, e, mib, sizeof mib);
		rb_idem_set(&t, e, RB_IDEM_DONE);
		assert_false(e->too_big);
	}
	assert_int_equal(t.bytes, RB_IDEM_BYTES_MAX);
	/* the run's bound: one more byte is not kept, and nothing of that answer is */
	struct rb_idem_entry *over;
	assert_int_equal(rb_idem_claim(&t, "over", "d", RB_IDEM_IN_FLIGHT, &over), RB_IDEM_NEW);
	rb_idem_keep(&t, over, "x", 1);
	rb_idem_set(&t, over, RB_IDEM_DONE);
	assert_true(over->too_big);
	assert_null(over->body);
	assert_int_equal(rb_idem_claim(&t, "over", "d", RB_IDEM_IN_FLIGHT, &e), RB_IDEM_LOST);
	/* a forgotten answer's bytes come back; one answer's bound holds on its own */
	assert_int_equal(rb_idem_claim(&t, "k0", "d", RB_IDEM_IN_FLIGHT, &e), RB_IDEM_REPLAY);
	rb_idem_forget(&t, e);
	assert_int_equal(t.bytes, RB_IDEM_BYTES_MAX - RB_IDEM_BODY_MAX);
	struct rb_idem_entry *big;
	assert_int_equal(rb_idem_claim(&t, "big", "d", RB_IDEM_IN_FLIGHT, &big), RB_IDEM_NEW);
	rb_idem_keep(&t, big, mib, sizeof mib);
	assert_false(big->too_big);
	rb_idem_keep(&t, big, "x", 1);
	assert_true(big->too_big);
	assert_int_equal(t.bytes, RB_IDEM_BYTES_MAX - RB_IDEM_BODY_MAX);
	rb_idem_destroy(&t);
}

static void test_digest(void **state)
{
	char a[65], b[65];
	const char *p1[2] = {"ab", "c"}, *p2[2] = {"a", "bc"};
	size_t l[2] = {2, 1}, l2[2] = {1, 2};
	rb_idem_hash(p1, l, 2, a);
	rb_idem_hash(p2, l2, 2, b);
	assert_string_not_equal(a, b); /* a part's bytes cannot move into the next */
	rb_idem_hash(p1, l, 2, b);
	assert_string_equal(a, b);
	assert_int_equal(strlen(a), 64);
}

static void test_decisions(void **state)
{
	char dir[] = "/tmp/rbx-approval-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char sub[64];
	snprintf(sub, sizeof sub, "%s/a", dir);
	int stop = eventfd(0, EFD_CLOEXEC);
	char id[24], why[200], path[128];
	rb_gw_approval_id(id);
	assert_int_equal(strlen(id), 20);
	/* no decision: the timeout denies, and writes "expired" */
	json_t *req = json_pack("{s:s}", "id", id);
	assert_int_equal(rb_gw_approval_wait(sub, id, req, 1, stop, why, sizeof why), -1);
	assert_non_null(strstr(why, "no decision within 1 s"));
	snprintf(path, sizeof path, "%s/%s.decision", sub, id);
	char buf[32] = "";
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0 && read(fd, buf, sizeof buf - 1) == 7);
	close(fd);
	assert_string_equal(buf, "expired");
	/* a decision already there is taken at once */
	rb_gw_approval_id(id);
	snprintf(path, sizeof path, "%s/%s.decision", sub, id);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_int_equal(write(fd, "approved", 8), 8);
	close(fd);
	json_object_set_new(req, "id", json_string(id));
	assert_int_equal(rb_gw_approval_wait(sub, id, req, 60, stop, why, sizeof why), 1);
	rb_gw_approval_id(id);
	snprintf(path, sizeof path, "%s/%s.decision", sub, id);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_int_equal(write(fd, "denied", 6), 6);
	close(fd);
	assert_int_equal(rb_gw_approval_wait(sub, id, req, 60, stop, why, sizeof why), 0);
	/* a stop ends the wait */
	rb_gw_approval_id(id);
	uint64_t one = 1;
	assert_int_equal(write(stop, &one, sizeof one), (ssize_t)sizeof one);
	assert_int_equal(rb_gw_approval_wait(sub, id, req, 60, stop, why, sizeof why), -1);
	assert_non_null(strstr(why, "stopped"));
	json_decref(req);
	close(stop);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_claims),
	    cmocka_unit_test(test_kept_bytes),
	    cmocka_unit_test(test_digest),
	    cmocka_unit_test(test_decisions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

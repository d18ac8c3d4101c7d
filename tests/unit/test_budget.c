/* runtime/run/budget.c: each limit narrows a harvest's caps to what is left, the one that bound
 * is named when it cut something, the floor stores nothing, and a harvest within every limit
 * (control) keeps its own caps and names nothing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "runtime/run/budget.h"
#include "runtime/run/storegc.h"

#include <time.h>

static struct rb_budget fresh(void)
{
	struct rb_policy pol;
	memset(&pol, 0, sizeof pol);
	pol.run_bytes = 1000;
	pol.run_files = 3;
	pol.run_events = 100;
	pol.tenant_bytes = 5000;
	pol.min_free = 0;
	struct rb_budget b;
	rb_budget_init(&b, &pol);
	return b;
}

static struct rb_harvest_result harvested(uint64_t files, uint64_t bytes, uint64_t over_count, uint64_t over_total)
{
	struct rb_harvest_result h;
	memset(&h, 0, sizeof h);
	h.n_artifacts = files;
	h.bytes_stored = bytes;
	h.skipped_by_reason[RB_HARVEST_OVER_COUNT_CAP] = over_count;
	h.skipped_by_reason[RB_HARVEST_OVER_TOTAL_CAP] = over_total;
	return h;
}

static void test_within_keeps_caps(void **state)
{
	(void)state;
	struct rb_budget b = fresh();
	b.run_bytes = b.tenant_bytes = 1ull << 40;
	b.run_files = b.run_events = 1u << 30;
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	rb_budget_caps(&b, "/", 3, &caps);
	assert_int_equal(caps.max_files, RB_HARVEST_DEFAULT_FILES);
	assert_int_equal(caps.max_total_bytes, RB_HARVEST_DEFAULT_TOTAL_BYTES);
	/* The harvest's own cap cut it: not the budget's doing. */
	struct rb_harvest_result h = harvested(10, 100, 5, 0);
	assert_null(rb_budget_account(&b, 1, &h));
	assert_null(b.stopped);
}

static void test_run_limits_narrow(void **state)
{
	(void)state;
	struct rb_budget b = fresh();
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	rb_budget_caps(&b, "/", 3, &caps);
	assert_int_equal(caps.max_files, 3);
	assert_int_equal(caps.max_total_bytes, 1000);
	struct rb_harvest_result h = harvested(2, 600, 0, 0);
	assert_null(rb_budget_account(&b, 1, &h));
	rb_harvest_caps_default(&caps);
	rb_budget_caps(&b, "/", 10, &caps);
	assert_int_equal(caps.max_files, 1);
	assert_int_equal(caps.max_total_bytes, 400);
	h = harvested(1, 300, 2, 0);
	assert_string_equal(rb_budget_account(&b, 2, &h), "run_files");
	assert_string_equal(b.stopped, "run_files");
	assert_int_equal(b.stopped_step, 2);
	/* Later cuts do not move where it stopped first. */
	rb_harvest_caps_default(&caps);
	rb_budget_caps(&b, "/", 20, &caps);
	assert_int_equal(caps.max_files, 0);
	h = harvested(0, 0, 0, 1);
	assert_non_null(rb_budget_account(&b, 3, &h));
	assert_int_equal(b.stopped_step, 2);
}

static void test_events_and_tenant(void **state)
{
	(void)state;
	struct rb_budget b = fresh();
	b.run_files = 1000;
	b.run_bytes = 1u << 30;
	b.tenant_used = 4800;
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	rb_budget_caps(&b, "/", 95, &caps); /* 100 events, 95 so far, one for the skip list */
	assert_int_equal(caps.max_files, 4);
	assert_string_equal(b.bind_files, "run_events");
	assert_int_equal(caps.max_total_bytes, 200);
	assert_string_equal(b.bind_bytes, "tenant_bytes");
	struct rb_harvest_result h = harvested(0, 0, 0, 1);
	assert_string_equal(rb_budget_account(&b, 1, &h), "tenant_bytes");
}

static void test_floor_stores_nothing(void **state)
{
	(void)state;
	struct rb_budget b = fresh();
	b.min_free = UINT64_MAX; /* more than any filesystem has free */
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	rb_budget_caps(&b, "/", 0, &caps);
	assert_int_equal(caps.max_files, 0);
	assert_int_equal(caps.max_total_bytes, 0);
	assert_string_equal(b.bind_files, "min_free");
	/* Control: no floor leaves the run's own limits binding. */
	b.min_free = 0;
	rb_harvest_caps_default(&caps);
	rb_budget_caps(&b, "/", 0, &caps);
	assert_int_equal(caps.max_files, 3);
	assert_string_equal(b.bind_files, "run_files");
}

/* The retention cutoff is to the millisecond, as ledger timestamps are: a row written a moment
 * before it, in the same second, is older than the cutoff (gc --retention 0s collects it). */
static void test_cutoff_milliseconds(void **state)
{
	char before[32], cutoff[32];
	struct timespec now, pause = {0, 3 * 1000 * 1000};
	clock_gettime(CLOCK_REALTIME, &now);
	struct tm tm;
	gmtime_r(&now.tv_sec, &tm);
	char sec[24];
	strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(before, sizeof before, "%s.%03ldZ", sec, now.tv_nsec / 1000000);
	nanosleep(&pause, NULL);
	rb_store_cutoff(0, cutoff);
	assert_int_equal(strlen(cutoff), strlen(before));
	assert_true(strcmp(before, cutoff) < 0);
	rb_store_cutoff(3600, cutoff); /* control: an hour's retention keeps that row */
	assert_true(strcmp(before, cutoff) > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cutoff_milliseconds),  cmocka_unit_test(test_within_keeps_caps),
	    cmocka_unit_test(test_run_limits_narrow),    cmocka_unit_test(test_events_and_tenant),
	    cmocka_unit_test(test_floor_stores_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

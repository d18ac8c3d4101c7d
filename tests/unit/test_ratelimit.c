/* gateway/ratelimit.c: a full bucket gives its burst at once, then the rate; nothing more, and
 * a long idle time refills to the burst, never beyond. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gateway/ratelimit.h"

static unsigned takes(struct rb_ratelimit *rl, unsigned n, uint64_t now)
{
	unsigned got = 0;
	for (unsigned i = 0; i < n; i++)
		got += rb_ratelimit_take(rl, now);
	return got;
}

static void test_burst_then_rate(void **state)
{
	(void)state;
	struct rb_ratelimit rl;
	rb_ratelimit_init(&rl, 50, 100, 1000);
	assert_int_equal(takes(&rl, 150, 1000), 100); /* the burst, then refusals */
	assert_false(rb_ratelimit_take(&rl, 1000));
	assert_int_equal(takes(&rl, 100, 1000 + 1000000), 50);       /* a second later: the rate */
	assert_int_equal(takes(&rl, 10, 1000 + 1000000 + 20000), 1); /* 20 ms: one token */
	rb_ratelimit_destroy(&rl);
}

static void test_refill_is_capped(void **state)
{
	(void)state;
	struct rb_ratelimit rl;
	rb_ratelimit_init(&rl, 50, 100, 0);
	assert_int_equal(takes(&rl, 100, 0), 100);
	/* An hour idle (and a clock far on): the bucket holds its burst, not 3600 * 50. */
	assert_int_equal(takes(&rl, 1000, 3600ull * 1000000), 100);
	assert_int_equal(takes(&rl, 1000, UINT64_MAX / 2), 100);
	rb_ratelimit_destroy(&rl);
}

static void test_unlimited(void **state)
{
	(void)state;
	struct rb_ratelimit rl;
	rb_ratelimit_init(&rl, 0, 1, 0);
	assert_int_equal(takes(&rl, 10000, 0), 10000);
	rb_ratelimit_destroy(&rl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_burst_then_rate),
	    cmocka_unit_test(test_refill_is_capped),
	    cmocka_unit_test(test_unlimited),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

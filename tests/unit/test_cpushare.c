/* gateway/cpushare.c: a thread's CPU is charged to the run; a run over its share of a core is
 * not admitted until the share refills its bucket (one second's worth, never more); with no
 * share every call is admitted and the CPU is still counted. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "gateway/cpushare.h"

/* Spends about ms of this thread's CPU. */
static void burn(unsigned ms)
{
	uint64_t until = rb_gw_thread_cpu_ns() + (uint64_t)ms * 1000000u;
	volatile uint64_t x = 0;
	while (rb_gw_thread_cpu_ns() < until)
		for (int i = 0; i < 10000; i++)
			x += (uint64_t)i;
}

static void test_over_the_share_is_refused_until_it_refills(void **state)
{
	struct rb_gw_cpu c;
	rb_gw_cpu_init(&c, 0.01, 0); /* a hundredth of a core: a bucket of 10 ms */
	assert_true(rb_gw_cpu_admit(&c, 0));
	uint64_t t0 = rb_gw_thread_cpu_ns();
	burn(30);
	rb_gw_cpu_charge(&c, t0, 1000); /* 30 ms spent 1 ms after the start: 20 ms over */
	uint64_t spent, limited;
	rb_gw_cpu_read(&c, &spent, &limited);
	assert_true(spent >= 30000000u);
	assert_false(rb_gw_cpu_admit(&c, 2000));
	assert_false(rb_gw_cpu_admit(&c, 1000000)); /* a second later: 10 ms of share back, still under 0 */
	rb_gw_cpu_read(&c, &spent, &limited);
	assert_int_equal(limited, 2);
	assert_true(rb_gw_cpu_admit(&c, 3000000)); /* three seconds: the debt is paid */
	/* A long idle time refills to the bucket, not beyond: 30 ms more is over again. */
	t0 = rb_gw_thread_cpu_ns();
	burn(30);
	rb_gw_cpu_charge(&c, t0, 1000000000u);
	assert_false(rb_gw_cpu_admit(&c, 1000000000u));
	rb_gw_cpu_destroy(&c);
}

static void test_no_share_admits_and_counts(void **state)
{
	struct rb_gw_cpu c;
	rb_gw_cpu_init(&c, 0, 0);
	uint64_t t0 = rb_gw_thread_cpu_ns();
	burn(30);
	rb_gw_cpu_charge(&c, t0, 1000);
	assert_true(rb_gw_cpu_admit(&c, 2000));
	uint64_t spent, limited;
	rb_gw_cpu_read(&c, &spent, &limited);
	assert_true(spent >= 30000000u);
	assert_int_equal(limited, 0);
	rb_gw_cpu_destroy(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_over_the_share_is_refused_until_it_refills),
	    cmocka_unit_test(test_no_share_admits_and_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

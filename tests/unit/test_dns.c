/* gateway/dns.c: the stub's answer to a query: REFUSED with the id, opcode, RD and question
 * echoed; FORMERR for a question that does not parse; nothing for a response or a runt. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "gateway/dns.h"

static const uint8_t query[] = {0xbe, 0xef, 0x01, 0x00, 0,   1, 0,   0,   0,   0, 0, 0,  7, 'E', 'x',
                                'a',  'm',  'p',  'l',  'e', 3, 'C', 'O', 'M', 0, 0, 28, 0, 1};

static void test_refused(void **state)
{
	uint8_t a[512];
	char name[300];
	unsigned type;
	size_t n = rb_gw_dns_refuse(query, sizeof query, a, sizeof a, name, sizeof name, &type);
	assert_int_equal(n, sizeof query);
	assert_int_equal(a[0], 0xbe);
	assert_int_equal(a[1], 0xef);
	assert_int_equal(a[2], 0x81); /* QR and RD */
	assert_int_equal(a[3], 5);    /* REFUSED, no RA */
	assert_int_equal(a[5], 1);    /* one question */
	assert_int_equal(a[7] | a[9] | a[11], 0);
	assert_memory_equal(a + 12, query + 12, sizeof query - 12);
	assert_string_equal(name, "example.com");
	assert_int_equal(type, 28);
}

static void test_malformed(void **state)
{
	uint8_t a[512], q[sizeof query];
	char name[300];
	unsigned type;
	/* a label running past the end: FORMERR, header only, no name */
	memcpy(q, query, sizeof q);
	q[12] = 60;
	assert_int_equal(rb_gw_dns_refuse(q, sizeof q, a, sizeof a, name, sizeof name, &type), 12);
	assert_int_equal(a[3], 1);
	assert_string_equal(name, "");
	/* a compression pointer in the question */
	memcpy(q, query, sizeof q);
	q[12] = 0xc0;
	assert_int_equal(rb_gw_dns_refuse(q, sizeof q, a, sizeof a, name, sizeof name, &type), 12);
	/* two questions */
	memcpy(q, query, sizeof q);
	q[5] = 2;
	assert_int_equal(rb_gw_dns_refuse(q, sizeof q, a, sizeof a, name, sizeof name, &type), 12);
	/* a response is not answered (no loops between two stubs), nor a runt */
	memcpy(q, query, sizeof q);
	q[2] |= 0x80;
	assert_int_equal(rb_gw_dns_refuse(q, sizeof q, a, sizeof a, name, sizeof name, &type), 0);
	assert_int_equal(rb_gw_dns_refuse(query, 11, a, sizeof a, name, sizeof name, &type), 0);
	/* odd bytes in a label are escaped, never passed into the record raw */
	memcpy(q, query, sizeof q);
	q[13] = '\n';
	q[14] = '"';
	assert_int_equal(rb_gw_dns_refuse(q, sizeof q, a, sizeof a, name, sizeof name, &type), sizeof query);
	assert_string_equal(name, "\\010\\034ample.com");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

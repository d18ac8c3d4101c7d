/* gateway/dns.c: the stub's answer to a query: REFUSED with the id, opcode, RD and question
 * echoed; FORMERR for a question that does not parse; nothing for a response or a runt. And
 * the serving thread's records: each new name once, and past the table's bound every lookup
 * still answered and counted (a "table full" record at once, the count at each power of two
 * and at stop, so a killed gateway leaves at least half of it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* What the stub serving with bound max_names records for n_names distinct names, each asked
 * twice: the records' JSON lines into buf, and every answer's rcode checked (REFUSED). live: the
 * records there before the stub stops (what a gateway killed then leaves), not after. */
static char *serve_names(unsigned max_names, unsigned n_names, bool live, char *buf, size_t max)
{
	int ev[2], stop = eventfd(0, EFD_CLOEXEC);
	assert_int_equal(pipe(ev), 0);
	assert_true(stop >= 0);
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	uint64_t refused = 0;
	struct rb_gw_ctx ctx = {.event_fd = ev[1], .event_lock = &lock, .refused = &refused};
	int srv = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), cli = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	assert_int_equal(bind(srv, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(srv, (struct sockaddr *)&a, &al), 0);
	assert_int_equal(connect(cli, (struct sockaddr *)&a, sizeof a), 0);
	struct rb_gw_dns *d;
	assert_int_equal(rb_gw_dns_start(&ctx, srv, stop, max_names, &d), 0);
	for (unsigned round = 0; round < 2; round++)
		for (unsigned i = 0; i < n_names; i++) {
			uint8_t q[sizeof query], ans[512];
			memcpy(q, query, sizeof q);
			q[13] = (uint8_t)('a' + i); /* "Axample.com", "bxample.com", ... */
			assert_int_equal(send(cli, q, sizeof q, 0), (ssize_t)sizeof q);
			assert_int_equal(recv(cli, ans, sizeof ans, 0), (ssize_t)sizeof q); /* answered, in order */
			assert_int_equal(ans[3], 5);
		}
	size_t n = 0;
	ssize_t r;
	if (live) {
		fcntl(ev[0], F_SETFL, O_NONBLOCK);
		while ((r = read(ev[0], buf + n, max - 1 - n)) > 0)
			n += (size_t)r;
		fcntl(ev[0], F_SETFL, 0);
	}
	assert_int_equal(eventfd_write(stop, 1), 0);
	rb_gw_dns_stop(d);
	close(ev[1]);
	while (!live && (r = read(ev[0], buf + n, max - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	close(ev[0]);
	close(cli);
	close(stop);
	return buf;
}

static void count_records(const char *lines, unsigned *named, unsigned *full, json_int_t *unnamed)
{
	*named = *full = 0;
	*unnamed = -1;
	for (const char *l = lines; *l;) {
		const char *nl = strchr(l, '\n');
		assert_non_null(nl);
		json_t *j = json_loadb(l, (size_t)(nl - l), 0, NULL);
		json_t *c = json_object_get(j, "call");
		assert_string_equal(json_string_value(json_object_get(c, "door")), "dns");
		const char *rule = json_string_value(json_object_get(c, "rule"));
		if (!strcmp(rule, "dns"))
			(*named)++;
		else if (!strcmp(rule, "dns.table") && json_object_get(c, "unnamed"))
			*unnamed = json_integer_value(json_object_get(c, "unnamed"));
		else if (!strcmp(rule, "dns.table"))
			(*full)++;
		json_decref(j);
		l = nl + 1;
	}
}

static void test_bound_counted(void **state)
{
	unsigned named, full;
	json_int_t unnamed;
	char buf[65536];
	/* 5 names, room for 3: 3 named, the table's "full" once, and the 2 others' 4 lookups counted */
	count_records(serve_names(3, 5, false, buf, sizeof buf), &named, &full, &unnamed);
	assert_int_equal(named, 3);
	assert_int_equal(full, 1);
	assert_int_equal(unnamed, 4);
	/* before the stop (a gateway killed then): the count so far is there too, at its power of two */
	count_records(serve_names(3, 5, true, buf, sizeof buf), &named, &full, &unnamed);
	assert_int_equal(named, 3);
	assert_int_equal(full, 1);
	assert_int_equal(unnamed, 4);
	count_records(serve_names(3, 6, true, buf, sizeof buf), &named, &full, &unnamed);
	assert_int_equal(unnamed, 4); /* 6 lookups unnamed: at least half is said before the stop */
	/* control: below the bound each name is recorded once, no count record */
	count_records(serve_names(8, 5, false, buf, sizeof buf), &named, &full, &unnamed);
	assert_int_equal(named, 5);
	assert_int_equal(full, 0);
	assert_int_equal(unnamed, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_bound_counted),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

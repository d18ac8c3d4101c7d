/* runtime/sandbox/idslice.c: each live holder gets a slice no other holds, the lowest free one; a
 * closed lock frees its slice; all taken is an error; a lock dir others may write is refused. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/sandbox/idslice.h"

static char dir[64];

static int take(unsigned n, unsigned *slot, struct rb_error *err)
{
	return rb_idslice_acquire(dir, n, slot, err);
}

static void test_disjoint_and_released(void **state)
{
	struct rb_error err = {0};
	unsigned a = 99, b = 99, c = 99, d = 99;
	/* flock locks belong to open file descriptions, so one process stands in for three runs. */
	int fa = take(3, &a, &err), fb = take(3, &b, &err), fc = take(3, &c, &err);
	assert_true(fa >= 0 && fb >= 0 && fc >= 0);
	assert_int_equal(a, 0);
	assert_int_equal(b, 1);
	assert_int_equal(c, 2);
	assert_int_equal(take(3, &d, &err), -1);
	assert_non_null(strstr(err.msg, "all 3 slices"));
	close(fb); /* a run's end */
	int fd = take(3, &d, &err);
	assert_true(fd >= 0);
	assert_int_equal(d, 1); /* the freed slice, not a new one */
	close(fa), close(fc), close(fd);
	/* control: with every lock closed, the lowest slice is free again */
	fd = take(3, &d, &err);
	assert_true(fd >= 0);
	assert_int_equal(d, 0);
	close(fd);
}

static void test_writable_dir_refused(void **state)
{
	struct rb_error err = {0};
	unsigned s;
	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(take(2, &s, &err), -1);
	assert_non_null(strstr(err.msg, "writable"));
	assert_int_equal(chmod(dir, 0700), 0); /* control: the same dir, private, works */
	int fd = take(2, &s, &err);
	assert_true(fd >= 0);
	close(fd);
}

/* The slices' directory sits in /run/runbox, the root run directory: made here, that parent
 * stays searchable (0711), and only the slices' own directory is private. */
static void test_parent_stays_searchable(void **state)
{
	struct rb_error err = {0};
	char nested[128], parent[96];
	snprintf(parent, sizeof parent, "%s/run", dir);
	snprintf(nested, sizeof nested, "%s/id-slices", parent);
	unsigned s;
	int fd = rb_idslice_acquire(nested, 2, &s, &err);
	assert_true(fd >= 0);
	close(fd);
	struct stat st;
	assert_int_equal(stat(parent, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0711);
	assert_int_equal(stat(nested, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700); /* control: the slices' own is private */
}

static int setup(void **state)
{
	snprintf(dir, sizeof dir, "/tmp/rbx-idslice-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_disjoint_and_released),
	    cmocka_unit_test(test_writable_dir_refused),
	    cmocka_unit_test(test_parent_stays_searchable),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* common/mountinfo.c: fields as proc(5) gives them, optional fields skipped up to the lone "-",
 * octal escapes undone (a mount point with a space), a malformed line passed over; and this
 * process's own mountinfo has "/" (the control that the reader reads the real file). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "common/mountinfo.h"

static const char sample[] =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n"
    "garbage without the separator\n"
    "35 24 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:9 master:2 - cgroup cgroup rw,cpu,cpuacct\n"
    "40 22 0:41 /srv/my\\040dir /mnt/with\\040space rw - tmpfs tmpfs rw,size=4k\n";

struct seen {
	unsigned n;
	struct rb_mount last[4];
};

static int collect(const struct rb_mount *m, void *ctx)
{
	struct seen *s = ctx;
	if (s->n < 4)
		s->last[s->n] = *m;
	s->n++;
	return 0;
}

static void fields_and_escapes(void **state)
{
	(void)state;
	static struct seen s;
	assert_int_equal(rb_mountinfo_each_in(sample, collect, &s), 0);
	assert_int_equal(s.n, 3);
	assert_string_equal(s.last[0].mount_point, "/");
	assert_string_equal(s.last[0].fstype, "ext4");
	assert_string_equal(s.last[0].source, "/dev/sda1");
	assert_string_equal(s.last[1].mount_point, "/sys/fs/cgroup/cpu,cpuacct");
	assert_string_equal(s.last[1].fstype, "cgroup");
	assert_string_equal(s.last[1].super_opts, "rw,cpu,cpuacct");
	assert_string_equal(s.last[2].root, "/srv/my dir");
	assert_string_equal(s.last[2].mount_point, "/mnt/with space");
}

static int stop_at_cgroup(const struct rb_mount *m, void *ctx)
{
	(void)ctx;
	return strcmp(m->fstype, "cgroup") == 0 ? 7 : 0;
}

static int is_root(const struct rb_mount *m, void *ctx)
{
	(void)ctx;
	return strcmp(m->mount_point, "/") == 0;
}

static void stops_where_asked_and_reads_the_real_file(void **state)
{
	(void)state;
	assert_int_equal(rb_mountinfo_each_in(sample, stop_at_cgroup, NULL), 7);
	assert_int_equal(rb_mountinfo_each_in("22 1 8:1 / / rw - ext4 x rw\n", stop_at_cgroup, NULL), 0);
	struct rb_error err = {0};
	assert_int_equal(rb_mountinfo_each(is_root, NULL, &err), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(fields_and_escapes),
	    cmocka_unit_test(stops_where_asked_and_reads_the_real_file),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

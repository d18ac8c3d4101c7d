/* common/copyfd.c: a whole copy with its SHA-256 (the digest of "abc" known), a cap that holds
 * at the exact size (control) and refuses one byte less before writing past it, and which side
 * failed named. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/copyfd.h"

static int memfd_with(const char *data, size_t len)
{
	int fd = memfd_create("copyfd-in", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static size_t size_of(int fd)
{
	off_t end = lseek(fd, 0, SEEK_END);
	return end < 0 ? 0 : (size_t)end;
}

static void copies_and_hashes(void **state)
{
	(void)state;
	int in = memfd_with("abc", 3), out = memfd_create("copyfd-out", MFD_CLOEXEC);
	uint64_t n;
	enum rb_copy_fail why;
	char hex[65];
	assert_int_equal(rb_copy_fd(in, out, UINT64_MAX, &n, hex, &why), 0);
	assert_int_equal(n, 3);
	assert_int_equal(why, RB_COPY_OK);
	assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	char back[8] = {0};
	assert_int_equal(pread(out, back, sizeof back, 0), 3);
	assert_string_equal(back, "abc");
	close(in);
	close(out);
	/* Larger than one buffer, without a hash. */
	static char big[200000];
	memset(big, 'x', sizeof big);
	in = memfd_with(big, sizeof big);
	out = memfd_create("copyfd-out", MFD_CLOEXEC);
	assert_int_equal(rb_copy_fd(in, out, UINT64_MAX, &n, NULL, &why), 0);
	assert_int_equal(n, sizeof big);
	assert_int_equal(size_of(out), sizeof big);
	close(in);
	close(out);
}

static void cap_holds(void **state)
{
	(void)state;
	uint64_t n;
	enum rb_copy_fail why;
	/* Control: exactly the cap is copied. */
	int in = memfd_with("0123456789", 10), out = memfd_create("copyfd-out", MFD_CLOEXEC);
	assert_int_equal(rb_copy_fd(in, out, 10, &n, NULL, &why), 0);
	assert_int_equal(n, 10);
	close(out);
	/* One byte less: refused, nothing past it written. */
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	out = memfd_create("copyfd-out", MFD_CLOEXEC);
	errno = 0;
	assert_int_equal(rb_copy_fd(in, out, 9, &n, NULL, &why), -1);
	assert_int_equal(why, RB_COPY_CAP);
	assert_int_equal(errno, EFBIG);
	assert_true(n <= 9);
	assert_true(size_of(out) <= 9);
	close(in);
	close(out);
}

static void names_the_failing_side(void **state)
{
	(void)state;
	uint64_t n;
	enum rb_copy_fail why;
	int in = memfd_with("abc", 3);
	int ro = open("/dev/null", O_RDONLY | O_CLOEXEC); /* not writable */
	assert_int_equal(rb_copy_fd(in, ro, UINT64_MAX, &n, NULL, &why), -1);
	assert_int_equal(why, RB_COPY_WRITE);
	int wo = open("/dev/null", O_WRONLY | O_CLOEXEC); /* not readable */
	assert_int_equal(rb_copy_fd(wo, wo, UINT64_MAX, &n, NULL, &why), -1);
	assert_int_equal(why, RB_COPY_READ);
	close(in);
	close(ro);
	close(wo);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(copies_and_hashes),
	    cmocka_unit_test(cap_holds),
	    cmocka_unit_test(names_the_failing_side),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

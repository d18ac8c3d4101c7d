/* Unit tests for images/store.c and images/import.c: reference names, import and lookup by
 * name and digest, tag and rm keeping or dropping the tree, and a hostile tarball's member
 * refused with nothing left in the store (a benign one as the control). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/paths.h"
#include "common/util.h"
#include "images/import.h"
#include "images/store.h"

#include "fs_fixture.h"

static char tmpdir[PATH_MAX];
static struct rb_paths paths;
static char slash[] = "/";
static struct rb_policy allow_all = {.name = "test", .image_allow = {slash}, .n_image_allow = 1};
static const struct rb_import_opts opts = {.pol = &allow_all, .max_members = 1000, .max_bytes = 1u << 20};

static int setup(void **state)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rb-test-store.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	memset(&paths, 0, sizeof paths);
	snprintf(paths.state_dir, sizeof paths.state_dir, "%s/state", tmpdir);
	snprintf(paths.run_dir, sizeof paths.run_dir, "%s/state/run", tmpdir);
	snprintf(paths.config_dir, sizeof paths.config_dir, "%s/config", tmpdir);
	snprintf(paths.data_dir, sizeof paths.data_dir, "%s/data", tmpdir);
	char src[PATH_MAX + 8];
	snprintf(src, sizeof src, "%s/src", tmpdir);
	put_file(src, "bin/tool", "#!/bin/sh\necho tool\n", 0755);
	put_file(src, "etc/conf", "key=value\n", 0644);
	return 0;
}

static int teardown(void **state)
{
	struct rb_error err;
	return rb_store_rm_tree(tmpdir, &err);
}

/* Entries of the store's tree directory (temporary ones included). */
static unsigned store_entries(void)
{
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof dir, "%s/images/store", paths.state_dir);
	DIR *d = opendir(dir);
	unsigned n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static void test_names(void **state)
{
	assert_true(rb_store_name_valid("agent"));
	assert_true(rb_store_name_valid("debian:12.5_x-y"));
	assert_false(rb_store_name_valid(""));
	assert_false(rb_store_name_valid("minimal"));
	assert_false(rb_store_name_valid("host"));
	assert_false(rb_store_name_valid("sha256:abc"));
	assert_false(rb_store_name_valid("../evil"));
	assert_false(rb_store_name_valid("a/b"));
	assert_false(rb_store_name_valid(".hidden"));
	assert_false(rb_store_name_valid("-x"));
}

static void test_import_tag_rm(void **state)
{
	char src[PATH_MAX + 8], digest[72];
	snprintf(src, sizeof src, "%s/src", tmpdir);
	struct rb_error err = {0};
	struct rb_import_opts o = opts;
	o.name = "one";
	if (rb_image_import(&paths, src, &o, digest, &err) != 0)
		fail_msg("import: %s", err.msg);
	struct rb_store_image a, b;
	assert_int_equal(rb_store_lookup(&paths, "one", &a, &err), 0);
	assert_string_equal(a.digest, digest);
	assert_int_equal(rb_store_lookup(&paths, digest, &b, &err), 0);
	assert_string_equal(a.rootfs, b.rootfs);
	assert_true(a.size == strlen("#!/bin/sh\necho tool\n") + strlen("key=value\n"));
	assert_int_equal(rb_store_lookup(&paths, "two", &b, &err), 1);
	assert_int_equal(rb_store_tag(&paths, "two", digest, &err), 0);
	assert_int_equal(rb_store_lookup(&paths, "two", &b, &err), 0);
	/* rm of one name keeps the tree for the other; rm of the last takes the tree. */
	assert_int_equal(rb_store_remove(&paths, "one", NULL, &err), 0);
	assert_int_equal(rb_store_lookup(&paths, "one", &b, &err), 1);
	assert_int_equal(rb_store_lookup(&paths, digest, &b, &err), 0);
	assert_int_equal(rb_store_remove(&paths, "two", NULL, &err), 0);
	assert_int_equal(rb_store_lookup(&paths, digest, &b, &err), 1);
	assert_int_equal(store_entries(), 0);
}

/* A tarball (ustar, written by hand: libarchive's writers pull in every format) of one
 * regular file named name holding "hi\n". */
static void write_tar(const char *path, const char *name)
{
	unsigned char h[512] = {0};
	snprintf((char *)h, 100, "%s", name);
	snprintf((char *)h + 100, 8, "%07o", 0644);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011o", 3);
	snprintf((char *)h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257,
	       "ustar\0"
	       "00",
	       8);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (unsigned i = 0; i < sizeof h; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	unsigned char data[512] = "hi\n", end[1024] = {0};
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(h, 1, sizeof h, f), sizeof h);
	assert_int_equal(fwrite(data, 1, sizeof data, f), sizeof data);
	assert_int_equal(fwrite(end, 1, sizeof end, f), sizeof end);
	assert_int_equal(fclose(f), 0);
}

static void test_hostile_tar(void **state)
{
	char good[PATH_MAX + 16], bad[PATH_MAX + 16], digest[72];
	snprintf(good, sizeof good, "%s/good.tar", tmpdir);
	snprintf(bad, sizeof bad, "%s/bad.tar", tmpdir);
	write_tar(good, "dir/file");
	write_tar(bad, "dir/../../escaped");
	struct rb_error err = {0};
	if (rb_image_import(&paths, good, &opts, digest, &err) != 0)
		fail_msg("benign tarball: %s", err.msg);
	assert_int_equal(store_entries(), 1);
	assert_int_equal(rb_image_import(&paths, bad, &opts, digest, &err), -1);
	assert_non_null(strstr(err.msg, "`..` component"));
	assert_int_equal(store_entries(), 1);
	char escaped[PATH_MAX + 16];
	snprintf(escaped, sizeof escaped, "%s/state/images/escaped", tmpdir);
	assert_int_equal(access(escaped, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names),
	    cmocka_unit_test_setup_teardown(test_import_tag_rm, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hostile_tar, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Unit tests for images/digest.c: the digest follows content, the walk passes FIFOs and link
 * loops without opening them, its bounds are errors naming the policy key, and its cache
 * skips reading unchanged files yet sees a change that keeps a file's size and mtime. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "images/digest.h"

#include "fs_fixture.h"

static char tmpdir[PATH_MAX];
static char tree[PATH_MAX + 16];
static char cache[PATH_MAX + 16];
static const struct rb_digest_limits roomy = {.max_entries = 1000, .max_bytes = 1u << 20};

static int setup(void **state)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rb-test-digest.XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	snprintf(tree, sizeof tree, "%s/tree", tmpdir);
	snprintf(cache, sizeof cache, "%s/cache", tmpdir);
	put_file(tree, "bin/tool", "#!/bin/sh\necho tool\n", 0755);
	put_file(tree, "etc/conf", "key=value\n", 0644);
	return 0;
}

static int teardown(void **state)
{
	struct rb_error err;
	return rb_rm_rf(tmpdir, &err);
}

static void digest_ok(const char *cache_path, const struct rb_digest_limits *lim, char out[72],
                      struct rb_digest_stats *st)
{
	struct rb_error err = {0};
	if (rb_tree_digest(tree, cache_path, lim, out, st, &err) != 0)
		fail_msg("digest of %s: %s", tree, err.msg);
	assert_int_equal(strncmp(out, "sha256:", 7), 0);
	assert_int_equal(strlen(out), 71);
}

static void test_follows_content(void **state)
{
	char a[72], b[72], c[72], d[72];
	digest_ok(NULL, &roomy, a, NULL);
	digest_ok(NULL, &roomy, b, NULL);
	assert_string_equal(a, b);
	put_file(tree, "etc/conf", "key=valuE\n", 0644);
	digest_ok(NULL, &roomy, c, NULL);
	assert_string_not_equal(a, c);
	/* The mode is named too, not only the bytes. */
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/etc/conf", tree);
	assert_int_equal(chmod(path, 0600), 0);
	digest_ok(NULL, &roomy, d, NULL);
	assert_string_not_equal(c, d);
}

/* A FIFO opened for reading blocks until a writer comes: the walk lists it and moves on. A
 * link loop is never followed. The alarm turns a blocked walk into a failed test. */
static void test_fifo_and_link_loop(void **state)
{
	char path[PATH_MAX + 32], a[72], b[72];
	digest_ok(NULL, &roomy, a, NULL);
	snprintf(path, sizeof path, "%s/fifo", tree);
	assert_int_equal(mkfifo(path, 0644), 0);
	snprintf(path, sizeof path, "%s/loop1", tree);
	assert_int_equal(symlink("loop2", path), 0);
	snprintf(path, sizeof path, "%s/loop2", tree);
	assert_int_equal(symlink("loop1", path), 0);
	snprintf(path, sizeof path, "%s/root", tree);
	assert_int_equal(symlink("/", path), 0);
	alarm(30);
	struct rb_digest_stats st;
	digest_ok(NULL, &roomy, b, &st);
	alarm(0);
	assert_string_not_equal(a, b);
	assert_int_equal(st.files_read, 2); /* tool and conf: nothing else was opened for reading */
	assert_int_equal(st.entries, 9);    /* /, bin, tool, etc, conf, fifo, loop1, loop2, root */
}

static void test_bounds(void **state)
{
	char out[72];
	struct rb_error err = {0};
	/* 5 entries: /, bin, bin/tool, etc, etc/conf. */
	struct rb_digest_limits five = {.max_entries = 5, .max_bytes = 1u << 20};
	digest_ok(NULL, &five, out, NULL);
	struct rb_digest_limits four = {.max_entries = 4, .max_bytes = 1u << 20};
	assert_int_equal(rb_tree_digest(tree, NULL, &four, out, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "more than 4 entries"));
	assert_non_null(strstr(err.msg, "images.max_entries"));

	size_t bytes = strlen("#!/bin/sh\necho tool\n") + strlen("key=value\n");
	struct rb_digest_limits exact = {.max_entries = 100, .max_bytes = bytes};
	digest_ok(NULL, &exact, out, NULL);
	struct rb_digest_limits less = {.max_entries = 100, .max_bytes = bytes - 1};
	assert_int_equal(rb_tree_digest(tree, NULL, &less, out, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "images.max_bytes"));
}

/* The cache holds only files older than the walk by a margin (a second), so the tree is aged
 * first. Then: the second walk reads nothing, and a change that puts size and mtime back is
 * still seen (ctime moved), which a cache keyed by size and mtime alone would miss. */
static void test_cache(void **state)
{
	sleep(2);
	char a[72], b[72], c[72], nocache[72];
	struct rb_digest_stats st;
	digest_ok(cache, &roomy, a, &st);
	assert_int_equal(st.files_read, 2);
	assert_int_equal(st.files_cached, 0);
	struct stat cs;
	assert_int_equal(stat(cache, &cs), 0);
	assert_int_equal(cs.st_mode & 07777, 0600);

	digest_ok(cache, &roomy, b, &st);
	assert_string_equal(a, b);
	assert_int_equal(st.files_read, 0);
	assert_int_equal(st.files_cached, 2);

	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/etc/conf", tree);
	struct stat before;
	assert_int_equal(stat(path, &before), 0);
	put_file(tree, "etc/conf", "key=VALUE\n", 0644); /* same size */
	struct timespec times[2] = {before.st_atim, before.st_mtim};
	assert_int_equal(utimensat(AT_FDCWD, path, times, 0), 0);
	digest_ok(cache, &roomy, c, &st);
	assert_string_not_equal(a, c);
	assert_int_equal(st.files_read, 1);
	assert_int_equal(st.files_cached, 1);
	digest_ok(NULL, &roomy, nocache, NULL);
	assert_string_equal(c, nocache);

	/* A cache file that is not one is ignored: the digest is the same, read afresh. */
	FILE *f = fopen(cache, "w");
	assert_non_null(f);
	fputs("runbox-digest-cache 1\nnot a line\n", f);
	fclose(f);
	digest_ok(cache, &roomy, b, &st);
	assert_string_equal(b, c);
	assert_int_equal(st.files_cached, 0);
}

/* A walk that finds what its cache holds leaves the cache file as it is (no rewrite per walk);
 * control: a changed file changes the digest and the cache file is written again. */
static void test_cache_kept_when_unchanged(void **state)
{
	sleep(2);
	char a[72], b[72], c[72];
	struct rb_digest_stats st;
	digest_ok(cache, &roomy, a, &st);
	struct stat first, again;
	assert_int_equal(stat(cache, &first), 0);
	digest_ok(cache, &roomy, b, &st);
	assert_string_equal(a, b);
	assert_int_equal(st.files_cached, 2);
	assert_int_equal(stat(cache, &again), 0);
	assert_int_equal(again.st_ino, first.st_ino); /* not replaced by a rename */

	put_file(tree, "etc/conf", "key=other value\n", 0644);
	digest_ok(cache, &roomy, c, &st);
	assert_string_not_equal(a, c);
	assert_int_equal(st.files_read, 1);
	assert_int_equal(stat(cache, &again), 0);
	assert_int_not_equal(again.st_ino, first.st_ino);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_follows_content, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fifo_and_link_loop, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bounds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cache_kept_when_unchanged, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

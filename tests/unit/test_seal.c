/* runtime/run/seal.c: a sealed copy equals its source (contents, modes & 0555, links as links);
 * the digest is stable and changes with any file's content, name or mode; fifos, budgets and
 * depth are refused with errors naming them. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/run/seal.h"
#include "tests/unit/fs_fixture.h"

struct fx {
	char top[64];
	char src[96];
	char dst[96];
	int dst_fd;
	int copies;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	strcpy(f->top, "/tmp/rbx-seal-ut.XXXXXX");
	if (!f || !mkdtemp(f->top))
		return -1;
	snprintf(f->src, sizeof f->src, "%s/src", f->top);
	snprintf(f->dst, sizeof f->dst, "%s/dst", f->top);
	if (mkdir(f->src, 0755) < 0 || mkdir(f->dst, 0700) < 0)
		return -1;
	f->dst_fd = open(f->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	*state = f;
	return f->dst_fd < 0 ? -1 : 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->dst_fd);
	struct rb_error err;
	rb_rm_rf(f->top, &err);
	free(f);
	return 0;
}

static void bundle(struct fx *f)
{
	put_file(f->src, "SKILL.md", "---\nname: t\n---\n", 0644);
	put_file(f->src, "run.sh", "#!/bin/sh\necho hi\n", 0755);
	put_file(f->src, "lib/data.txt", "data\n", 0640);
	char link[160];
	snprintf(link, sizeof link, "%s/lib/link", f->src);
	assert_int_equal(symlink("../run.sh", link), 0);
}

/* Seals f->src as a fresh copy; returns rb_seal_tree's result, the digest in digest. */
static int seal(struct fx *f, struct rb_seal_budget *b, char digest[RB_SEAL_DIGEST_LEN], struct rb_error *err)
{
	char name[32];
	snprintf(name, sizeof name, "c%d", f->copies++);
	int src = open(f->src, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(src >= 0);
	int r = rb_seal_tree(src, f->dst_fd, name, b, digest, err);
	close(src);
	return r;
}

static void digest_of(struct fx *f, char digest[RB_SEAL_DIGEST_LEN])
{
	struct rb_seal_budget b = RB_SEAL_BUNDLE_BUDGET;
	struct rb_error err = {0};
	if (seal(f, &b, digest, &err) != 0)
		fail_msg("seal: %s", err.msg);
}

static void test_copy_is_the_source(void **state)
{
	struct fx *f = *state;
	bundle(f);
	char d[RB_SEAL_DIGEST_LEN], p[256], target[64] = "";
	digest_of(f, d);
	assert_int_equal(strncmp(d, "sha256:", 7), 0);
	assert_int_equal(strlen(d), 71);
	struct stat st;
	snprintf(p, sizeof p, "%s/c0/run.sh", f->dst);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0555);
	char *text = NULL;
	struct rb_error err;
	assert_int_equal(rb_read_file(p, 1024, &text, NULL, &err), 0);
	assert_string_equal(text, "#!/bin/sh\necho hi\n");
	free(text);
	snprintf(p, sizeof p, "%s/c0/lib/data.txt", f->dst);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0440);
	snprintf(p, sizeof p, "%s/c0/lib/link", f->dst);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_true(readlink(p, target, sizeof target - 1) > 0);
	assert_string_equal(target, "../run.sh");
}

static void test_digest_stable_and_total(void **state)
{
	struct fx *f = *state;
	bundle(f);
	char a[RB_SEAL_DIGEST_LEN], b[RB_SEAL_DIGEST_LEN], c[RB_SEAL_DIGEST_LEN], d[RB_SEAL_DIGEST_LEN],
	    e[RB_SEAL_DIGEST_LEN];
	digest_of(f, a);
	digest_of(f, b);
	assert_string_equal(a, b); /* the same bundle twice */
	put_file(f->src, "lib/data.txt", "DATA\n", 0640);
	digest_of(f, c);
	assert_string_not_equal(a, c); /* a file that is not the entry */
	char p[160];
	snprintf(p, sizeof p, "%s/lib/data.txt", f->src);
	assert_int_equal(chmod(p, 0644), 0);
	digest_of(f, d);
	assert_string_not_equal(c, d); /* a mode */
	char q[160];
	snprintf(q, sizeof q, "%s/lib/data2.txt", f->src);
	assert_int_equal(rename(p, q), 0);
	digest_of(f, e);
	assert_string_not_equal(d, e); /* a name */
}

static void test_refusals(void **state)
{
	struct fx *f = *state;
	bundle(f);
	char d[RB_SEAL_DIGEST_LEN], p[160];
	struct rb_error err = {0};
	/* Budgets: entries, then bytes; the control is the default budget, which takes it. */
	struct rb_seal_budget few = {3, 1 << 20, 0, 0};
	assert_int_not_equal(seal(f, &few, d, &err), 0);
	assert_non_null(strstr(err.msg, "over the 3 files"));
	struct rb_seal_budget small = {100, 8, 0, 0};
	assert_int_not_equal(seal(f, &small, d, &err), 0);
	assert_non_null(strstr(err.msg, "MiB a run may copy"));
	digest_of(f, d);
	/* A budget is the run's: two bundles together may not pass it. */
	struct rb_seal_budget run = {6, 1 << 20, 0, 0};
	assert_int_equal(seal(f, &run, d, &err), 0);
	assert_int_not_equal(seal(f, &run, d, &err), 0);
	/* A fifo is not copied, nor opened. */
	snprintf(p, sizeof p, "%s/lib/pipe", f->src);
	assert_int_equal(mkfifo(p, 0644), 0);
	struct rb_seal_budget b = RB_SEAL_BUNDLE_BUDGET;
	assert_int_not_equal(seal(f, &b, d, &err), 0);
	assert_non_null(strstr(err.msg, "lib/pipe` is a fifo"));
	unlink(p);
	/* Deeper than the cap. */
	char deep[PATH_MAX];
	int n = snprintf(deep, sizeof deep, "%s", f->src);
	for (int i = 0; i < RB_SEAL_MAX_DEPTH + 1; i++) {
		n += snprintf(deep + n, sizeof deep - (size_t)n, "/d");
		assert_int_equal(mkdir(deep, 0755), 0);
	}
	b = RB_SEAL_BUNDLE_BUDGET;
	assert_int_not_equal(seal(f, &b, d, &err), 0);
	assert_non_null(strstr(err.msg, "deeper than"));
}

static void test_seal_file(void **state)
{
	struct fx *f = *state;
	put_file(f->src, "obj", "object bytes", 0600);
	char p[160];
	snprintf(p, sizeof p, "%s/obj", f->src);
	int src = open(p, O_PATH | O_CLOEXEC);
	assert_true(src >= 0);
	struct rb_seal_budget b = RB_SEAL_ARTIFACT_BUDGET;
	struct rb_error err = {0};
	assert_int_equal(rb_seal_file(src, p, f->dst_fd, "in-0", &b, &err), 0);
	struct stat st;
	char q[160];
	snprintf(q, sizeof q, "%s/in-0", f->dst);
	assert_int_equal(stat(q, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0444);
	assert_int_equal(st.st_size, 12);
	assert_int_equal(b.bytes, 12);
	close(src);
	/* A directory is not a file to seal. */
	src = open(f->src, O_PATH | O_CLOEXEC);
	assert_int_not_equal(rb_seal_file(src, f->src, f->dst_fd, "in-1", &b, &err), 0);
	close(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_copy_is_the_source, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_digest_stable_and_total, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_seal_file, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

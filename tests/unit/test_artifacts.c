/* runtime/run/artifacts.c: of writers storing one object at once, exactly one is told it made it
 * (a harvest's objects_new counts each once); a file under the digest name that is not the object
 * is replaced. Reading back: rb_artifact_read returns the stored bytes and refuses an object whose
 * bytes no longer have its digest; rb_artifact_export writes below a directory under a relative
 * name, never through a link, never over a file without force. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "runtime/run/artifacts.h"

struct fx {
	char top[64], store[96], out[96], elsewhere[96];
	int out_fd;
	char digest[RB_ARTIFACT_DIGEST_LEN];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	strcpy(f->top, "/tmp/rbx-artifacts-ut.XXXXXX");
	if (!mkdtemp(f->top))
		return -1;
	snprintf(f->store, sizeof f->store, "%s/store", f->top);
	snprintf(f->out, sizeof f->out, "%s/out", f->top);
	snprintf(f->elsewhere, sizeof f->elsewhere, "%s/elsewhere", f->top);
	if (mkdir(f->store, 0700) < 0 || mkdir(f->out, 0700) < 0 || mkdir(f->elsewhere, 0700) < 0)
		return -1;
	f->out_fd = open(f->out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct rb_error err = {0};
	if (f->out_fd < 0 || rb_artifact_store(f->store, "a,b\n", 4, f->digest, NULL, &err) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	close(f->out_fd);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->top);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static char *slurp(const char *path)
{
	char *data = NULL;
	size_t len;
	struct rb_error err = {0};
	return rb_read_file(path, 1 << 20, &data, &len, &err) == 0 ? data : NULL;
}

#define RACERS  4
#define OBJECTS 300

struct racer {
	const char *store;
	pthread_barrier_t *start;
	unsigned created;
	int failed;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	pthread_barrier_wait(r->start);
	for (unsigned i = 0; i < OBJECTS; i++) {
		char data[32], digest[RB_ARTIFACT_DIGEST_LEN];
		int n = snprintf(data, sizeof data, "object %u\n", i);
		bool created;
		struct rb_error err = {0};
		if (rb_artifact_store(r->store, data, (size_t)n, digest, &created, &err) < 0)
			r->failed++;
		else
			r->created += created;
	}
	return NULL;
}

static void test_store_counts_each_object_once(void **state)
{
	struct fx *f = *state;
	pthread_barrier_t start;
	pthread_barrier_init(&start, NULL, RACERS);
	struct racer rs[RACERS];
	pthread_t t[RACERS];
	for (int i = 0; i < RACERS; i++) {
		rs[i] = (struct racer){.store = f->store, .start = &start};
		assert_int_equal(pthread_create(&t[i], NULL, race, &rs[i]), 0);
	}
	unsigned created = 0;
	for (int i = 0; i < RACERS; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(rs[i].failed, 0);
		created += rs[i].created;
	}
	pthread_barrier_destroy(&start);
	assert_int_equal(created, OBJECTS);
	/* Stored again, nothing is new. */
	char digest[RB_ARTIFACT_DIGEST_LEN];
	bool again = true;
	struct rb_error err = {0};
	assert_int_equal(rb_artifact_store(f->store, "object 7\n", 9, digest, &again, &err), 0);
	assert_false(again);
}

static void test_store_replaces_what_is_not_the_object(void **state)
{
	struct fx *f = *state;
	char path[PATH_MAX];
	struct rb_error err = {0};
	assert_int_equal(rb_artifact_path(f->store, f->digest, path, &err), 0);
	/* A truncated object under the digest name: stored again, it is whole and counts as new. */
	assert_int_equal(truncate(path, 1), 0);
	char digest[RB_ARTIFACT_DIGEST_LEN];
	bool created = false;
	assert_int_equal(rb_artifact_store(f->store, "a,b\n", 4, digest, &created, &err), 0);
	assert_true(created);
	char *v = slurp(path);
	assert_string_equal(v, "a,b\n");
	free(v);
}

static void test_read_checks_digest(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	char *data = NULL;
	size_t len = 0;
	assert_int_equal(rb_artifact_read(f->store, f->digest, &data, &len, &err), 0);
	assert_int_equal(len, 4);
	assert_memory_equal(data, "a,b\n", 4);
	free(data);
	/* The object changed behind the store's back: an error naming it, not its new bytes. */
	char path[PATH_MAX];
	assert_int_equal(rb_artifact_path(f->store, f->digest, path, &err), 0);
	chmod(path, 0600);
	FILE *w = fopen(path, "w");
	assert_non_null(w);
	fputs("evil", w);
	fclose(w);
	data = NULL;
	assert_int_equal(rb_artifact_read(f->store, f->digest, &data, &len, &err), -1);
	assert_null(data);
	assert_non_null(strstr(err.msg, "damaged"));
	/* A digest that is no digest is refused before any path is made. */
	assert_int_equal(rb_artifact_read(f->store, "sha256:../../etc/passwd", &data, &len, &err), -1);
}

static void test_export(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	char p[256];
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "sub/dir/x.csv", false, &err), 0);
	snprintf(p, sizeof p, "%s/sub/dir/x.csv", f->out);
	char *got = slurp(p);
	assert_non_null(got);
	assert_string_equal(got, "a,b\n");
	free(got);
	/* Not over a file without force; with force, replaced. */
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "sub/dir/x.csv", false, &err), -1);
	assert_non_null(strstr(err.msg, "exists"));
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "sub/dir/x.csv", true, &err), 0);
	/* Names that leave the directory are refused. */
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "/etc/x", true, &err), -1);
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "../x", true, &err), -1);
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "a/../../x", true, &err), -1);
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "a//x", true, &err), -1);
	snprintf(p, sizeof p, "%s/x", f->top);
	assert_int_equal(access(p, F_OK), -1);
}

static void test_export_never_follows_links(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	char link[256], victim[256], p[256];
	/* A link where a folder goes: refused, nothing written where it points. */
	snprintf(link, sizeof link, "%s/d", f->out);
	assert_int_equal(symlink(f->elsewhere, link), 0);
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "d/x.csv", true, &err), -1);
	snprintf(p, sizeof p, "%s/x.csv", f->elsewhere);
	assert_int_equal(access(p, F_OK), -1);
	/* A link at the file's name: kept without force; with force replaced by the file, its
	 * target untouched. */
	snprintf(victim, sizeof victim, "%s/victim", f->elsewhere);
	FILE *w = fopen(victim, "w");
	assert_non_null(w);
	fputs("target", w);
	fclose(w);
	snprintf(link, sizeof link, "%s/t.csv", f->out);
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "t.csv", false, &err), -1);
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "t.csv", true, &err), 0);
	char *v = slurp(victim);
	assert_string_equal(v, "target");
	free(v);
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	/* The control: the same export to a plain name works. */
	assert_int_equal(rb_artifact_export(f->store, f->digest, f->out_fd, "plain/x.csv", false, &err), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_store_counts_each_object_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_replaces_what_is_not_the_object, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_checks_digest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_export, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_export_never_follows_links, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

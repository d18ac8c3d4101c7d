/* common/util.c rb_read_document, the one reader of documents someone wrote (policies,
 * manifests, the operator config, seccomp profiles): a regular file is read whole; a FIFO is
 * refused at once (it would block the reader, or feed it without end), as are a directory, a
 * NUL byte and a file over the bound. Each loader goes through it: a FIFO manifest is refused. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "policy/manifest.h"
#include "policy/operator.h"

static char dir[] = "/tmp/rbx-doc.XXXXXX";

static void put(const char *name, const char *text, size_t len)
{
	char p[128];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	fclose(f);
}

static const char *at(const char *name)
{
	static char p[128];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	return p;
}

static void regular_file_read_whole(void **state)
{
	(void)state;
	put("doc.json", "{\"a\": 1}\n", 9);
	char *text = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_read_document(at("doc.json"), 1024, &text, &err), 0);
	assert_string_equal(text, "{\"a\": 1}\n");
	free(text);
}

static void fifo_refused_without_blocking(void **state)
{
	(void)state;
	assert_int_equal(mkfifo(at("fifo"), 0600), 0);
	char *text = NULL;
	struct rb_error err = {0};
	/* No writer: a reader that opened it blocking would hang here for ever. */
	assert_int_equal(rb_read_document(at("fifo"), 1024, &text, &err), -1);
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_null(text);
	assert_int_equal(rb_read_document(dir, 1024, &text, &err), -1);
	assert_non_null(strstr(err.msg, "not a regular file"));
}

static void nul_and_size_refused(void **state)
{
	(void)state;
	put("nul.json", "{}\0{}", 5);
	char *text = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_read_document(at("nul.json"), 1024, &text, &err), -1);
	assert_non_null(strstr(err.msg, "NUL byte"));
	char big[5000];
	memset(big, ' ', sizeof big);
	put("big.json", big, sizeof big);
	assert_int_equal(rb_read_document(at("big.json"), 4096, &text, &err), -1);
	assert_int_equal(err.errnum, EFBIG);
	assert_int_equal(rb_read_document(at("big.json"), 8192, &text, &err), 0);
	free(text);
	assert_int_equal(rb_read_document(at("missing.json"), 1024, &text, &err), -1);
	assert_int_equal(err.errnum, ENOENT);
}

/* The loaders use it: a manifest and an operator config that are FIFOs are refused at once;
 * an operator config directory without config.json is every default (control). */
static void loaders_refuse_a_fifo(void **state)
{
	(void)state;
	struct rb_error err = {0};
	struct rb_manifest m;
	assert_int_equal(rb_manifest_load(at("fifo"), &m, &err), -1);
	assert_non_null(strstr(err.msg, "not a regular file"));
	char cfg[128];
	snprintf(cfg, sizeof cfg, "%s/cfg", dir);
	assert_int_equal(mkdir(cfg, 0700), 0);
	struct rb_operator_config oc;
	assert_int_equal(rb_operator_config_load(cfg, &oc, &err), 0);
	char p[160];
	snprintf(p, sizeof p, "%s/config.json", cfg);
	assert_int_equal(mkfifo(p, 0600), 0);
	assert_int_equal(rb_operator_config_load(cfg, &oc, &err), -1);
	assert_non_null(strstr(err.msg, "not a regular file"));
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(regular_file_read_whole),
	    cmocka_unit_test(fifo_refused_without_blocking),
	    cmocka_unit_test(nul_and_size_refused),
	    cmocka_unit_test(loaders_refuse_a_fifo),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

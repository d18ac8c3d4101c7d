/* common/host.c and its readers: what a policy's env.pass passes, and where runbox's places are,
 * come from the host context a run is given, never from the process's own environment: a
 * variable set in the process and not in the host context is not passed and moves nothing; the
 * same variable in the host context is (the control). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/host.h"
#include "common/paths.h"
#include "runtime/run/run.h"
#include "runtime/run/session-internal.h"

static void getenv_reads_only_its_env(void **state)
{
	(void)state;
	char *env[] = {"FOOBAR=long", "FOO=short", "FOO=second", "EMPTY=", NULL};
	struct rb_host h = {.env = env};
	assert_string_equal(rb_host_getenv(&h, "FOO"), "short"); /* the first, as getenv */
	assert_string_equal(rb_host_getenv(&h, "FOOBAR"), "long");
	assert_string_equal(rb_host_getenv(&h, "EMPTY"), "");
	assert_null(rb_host_getenv(&h, "FO"));
	assert_null(rb_host_getenv(&h, "FOO=short"));
	assert_null(rb_host_getenv(&h, ""));
	assert_null(rb_host_getenv(NULL, "FOO"));
	struct rb_host empty = {0};
	setenv("FOO", "from-process", 1);
	assert_null(rb_host_getenv(&empty, "FOO"));
	unsetenv("FOO");
}

/* The step's environment of a run whose policy passes PASSED and PROCESS_ONLY, with host h. */
static json_t *step_env(const struct rb_host *h)
{
	static struct rb_run run; /* large: not on the stack */
	memset(&run, 0, sizeof run);
	static char passed[] = "PASSED", process_only[] = "PROCESS_ONLY";
	run.policy.env_pass[0] = passed;
	run.policy.env_pass[1] = process_only;
	run.policy.n_env_pass = 2;
	run.paths.host = h;
	return rb_run_step_env(&run);
}

static bool has(json_t *env, const char *kv)
{
	size_t i;
	json_t *v;
	json_array_foreach(env, i, v) if (!strcmp(json_string_value(v), kv)) return true;
	return false;
}

static void env_pass_draws_from_the_host(void **state)
{
	(void)state;
	setenv("PROCESS_ONLY", "from-process", 1);
	setenv("PASSED", "from-process", 1);
	char *env[] = {"PASSED=from-host", "OTHER=not-passed", NULL};
	struct rb_host h = {.env = env};
	json_t *e = step_env(&h);
	assert_true(has(e, "PASSED=from-host"));
	assert_false(has(e, "PASSED=from-process"));
	/* In the process's environment only: not passed. */
	assert_false(has(e, "PROCESS_ONLY=from-process"));
	assert_int_equal(json_array_size(e), 1);
	json_decref(e);
	/* Control: the same policy passes PROCESS_ONLY once the host context holds it. */
	char *env2[] = {"PASSED=from-host", "PROCESS_ONLY=from-host", NULL};
	struct rb_host h2 = {.env = env2};
	e = step_env(&h2);
	assert_true(has(e, "PROCESS_ONLY=from-host"));
	assert_int_equal(json_array_size(e), 2);
	json_decref(e);
	/* No host context: nothing passes, whatever the process holds. */
	e = step_env(NULL);
	assert_int_equal(json_array_size(e), 0);
	json_decref(e);
	unsetenv("PROCESS_ONLY");
	unsetenv("PASSED");
}

static bool own_has(const struct rb_own_dirs *o, const char *d)
{
	for (unsigned i = 0; i < o->n; i++)
		if (!strcmp(o->dir[i], d))
			return true;
	return false;
}

static void paths_come_from_the_host(void **state)
{
	(void)state;
	char cwd[4096], data[4200];
	assert_non_null(getcwd(cwd, sizeof cwd));
	snprintf(data, sizeof data, "RUNBOX_DATA_DIR=%s", cwd); /* the shipped data of this tree */
	setenv("RUNBOX_CONFIG_DIR", "/process/config", 1);
	setenv("RUNBOX_STATE_DIR", "/process/state", 1);
	setenv("XDG_STATE_HOME", "/process/xdg-state", 1);
	char *env[] = {data, "RUNBOX_CONFIG_DIR=/host/config", "RUNBOX_STATE_DIR=/host/state",
	               "XDG_STATE_HOME=/host/xdg-state", NULL};
	struct rb_host h = {.env = env};
	struct rb_paths p;
	struct rb_error err;
	assert_int_equal(rb_paths_init(&p, &h, NULL, &err), 0);
	assert_string_equal(p.config_dir, "/host/config");
	assert_string_equal(p.state_dir, "/host/state");
	assert_string_equal(p.run_dir, "/host/state/run");
	assert_string_equal(p.data_dir, cwd);
	struct rb_own_dirs own;
	rb_paths_own_dirs(&p, &own);
	assert_true(own_has(&own, "/host/xdg-state/runbox"));
	assert_false(own_has(&own, "/process/xdg-state/runbox"));
	assert_false(own_has(&own, "/process/state"));
	/* Control: without them in the host context, the process's values still move nothing. */
	char *env2[] = {data, NULL};
	struct rb_host h2 = {.env = env2};
	assert_int_equal(rb_paths_init(&p, &h2, "/given/state", &err), 0);
	assert_string_equal(p.state_dir, "/given/state");
	assert_string_not_equal(p.config_dir, "/process/config");
	assert_string_not_equal(p.run_dir, "/process/state/run");
	unsetenv("RUNBOX_CONFIG_DIR");
	unsetenv("RUNBOX_STATE_DIR");
	unsetenv("XDG_STATE_HOME");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(getenv_reads_only_its_env),
	    cmocka_unit_test(env_pass_draws_from_the_host),
	    cmocka_unit_test(paths_come_from_the_host),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

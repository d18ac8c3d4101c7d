/* Unit tests for policy/skill.c: loading bundles (front matter, an entry that cannot escape by
 * "..", a symlink or a missing execute bit), inputs checks, the entry's environment, and
 * result parsing. Fixtures in tests/unit/fixtures/skills; run from the repo root. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "policy/skill.h"

#include "fs_fixture.h"

static char repo[PATH_MAX];
static char tmpdir[PATH_MAX];

static int setup(void **state)
{
	if (repo_root(repo, sizeof repo, "tests/unit/fixtures/skills", __FILE__, "tests/unit/test_skill.c") < 0)
		return -1;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rb-test-skill.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	struct rb_error err;
	return rb_rm_rf(tmpdir, &err);
}

static const char *fixture(const char *name)
{
	static char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/tests/unit/fixtures/skills/%s", repo, name);
	return path;
}

/* A fresh bundle folder under tmpdir named name, with SKILL.md text (no entry file). */
static const char *bundle(const char *name, const char *skill_md)
{
	static char dir[PATH_MAX + 64];
	snprintf(dir, sizeof dir, "%s/%s", tmpdir, name);
	put_file(dir, "SKILL.md", skill_md, 0644);
	return dir;
}

static void load_fails(const char *dir, const char *want)
{
	struct rb_skill s;
	struct rb_error err = {0};
	int r = rb_skill_load(dir, &s, &err);
	if (r == 0 || !strstr(err.msg, want))
		fail_msg("load of %s: r=%d, message \"%s\" lacks \"%s\"", dir, r, err.msg, want);
	/* A failed load leaves nothing to free. */
	assert_null(s.description);
	assert_null(s.entry);
	assert_int_equal(s.n_inputs, 0);
}

static void load_ok(const char *dir, struct rb_skill *s)
{
	struct rb_error err = {0};
	if (rb_skill_load(dir, s, &err) != 0)
		fail_msg("load of %s failed: %s", dir, err.msg);
}

/* ---- loading ---------------------------------------------------------------------------- */

static void test_valid_bundle(void **state)
{
	struct rb_skill s;
	load_ok(fixture("valid"), &s);
	assert_string_equal(s.name, "echo-json");
	assert_string_equal(s.description, "Echoes its inputs back as one JSON object: used by the unit tests.");
	assert_string_equal(s.entry, "bin/run.sh");
	assert_int_equal(s.n_inputs, 3);
	assert_string_equal(s.inputs[0], "greeting");
	assert_string_equal(s.inputs[1], "count");
	assert_string_equal(s.inputs[2], "loud");
	assert_int_equal(s.timeout_ms, 10000);
	assert_true(s.dir[0] == '/');
	assert_non_null(strstr(s.dir, "tests/unit/fixtures/skills/valid"));
	char p[PATH_MAX];
	assert_int_equal(rb_skill_entry_path(&s, p, sizeof p), 0);
	assert_string_equal(p, "/workspace/skills/echo-json/bin/run.sh");
	rb_skill_free(&s);
	rb_skill_free(&s); /* idempotent */
}

static void test_missing_skill_md(void **state)
{
	load_fails(fixture("no-skill-md"), "no SKILL.md");
	load_fails(fixture("does-not-exist"), "No such file or directory");
}

static void test_bad_name(void **state)
{
	load_fails(fixture("bad-name"), "SKILL.md line 2: name: \"Bad_Name\" is not a skill name ([a-z0-9-]{1,64})");
}

static void test_entry_escapes_by_dotdot(void **state)
{
	/* Control: the file the entry climbs to is real and executable, so only the escape can
	 * be the reason for the refusal. */
	char target[PATH_MAX + 64];
	snprintf(target, sizeof target, "%s/bin/run.sh", fixture("valid"));
	assert_int_equal(access(target, X_OK), 0);
	load_fails(fixture("escape-dotdot"), "entry `../valid/bin/run.sh`: escapes the bundle");
}

static void test_entry_escapes_by_symlink(void **state)
{
	char link[PATH_MAX + 64];
	snprintf(link, sizeof link, "%s/run.sh", fixture("escape-symlink"));
	struct stat st;
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(access(link, X_OK), 0); /* control: it leads to an executable file */
	load_fails(fixture("escape-symlink"), "entry `run.sh`: is or passes through a symlink");
}

static void test_symlinks_inside_bundle(void **state)
{
	/* Even a link that stays inside is refused: a link is a decision made at read time. */
	const char *md = "---\nname: inner\ndescription: d\nentry: link.sh\n---\n";
	const char *dir = bundle("inner-link", md);
	put_file(dir, "real.sh", "#!/bin/sh\necho '{}'\n", 0755);
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/link.sh", dir);
	assert_int_equal(symlink("real.sh", p), 0);
	load_fails(dir, "is or passes through a symlink");

	/* A linked folder on the way is refused as well. */
	dir = bundle("dir-link", "---\nname: dir-link\ndescription: d\nentry: bin/run.sh\n---\n");
	snprintf(p, sizeof p, "%s/bin", dir);
	char target[PATH_MAX + 64];
	snprintf(target, sizeof target, "%s/bin", fixture("valid"));
	assert_int_equal(symlink(target, p), 0);
	load_fails(dir, "is or passes through a symlink");

	/* SKILL.md itself as a symlink. */
	snprintf(p, sizeof p, "%s/md-link", tmpdir);
	assert_int_equal(mkdir(p, 0755), 0);
	char md_link[PATH_MAX + 80];
	snprintf(md_link, sizeof md_link, "%s/SKILL.md", p);
	snprintf(target, sizeof target, "%s/SKILL.md", fixture("valid"));
	assert_int_equal(symlink(target, md_link), 0);
	load_fails(p, "SKILL.md is a symlink");

	/* Control: the same bundle with a regular file as entry loads. */
	dir = bundle("inner-real", "---\nname: inner\ndescription: d\nentry: real.sh\n---\n");
	put_file(dir, "real.sh", "#!/bin/sh\necho '{}'\n", 0755);
	struct rb_skill s;
	load_ok(dir, &s);
	rb_skill_free(&s);
}

static void test_entry_not_executable(void **state)
{
	char p[PATH_MAX + 64];
	snprintf(p, sizeof p, "%s/run.sh", fixture("not-executable"));
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	if (st.st_mode & 0111)
		fail_msg("fixture %s must have no execute bit (mode %o): check out with file modes", p,
		         (unsigned)st.st_mode);
	load_fails(fixture("not-executable"), "entry `run.sh`: not executable (mode 0644; chmod +x it)");

	/* Control: the same files with the execute bit load. */
	const char *dir = bundle("now-executable", "---\nname: not-executable\ndescription: d\nentry: run.sh\n---\n");
	put_file(dir, "run.sh", "#!/bin/sh\necho '{}'\n", 0755);
	struct rb_skill s;
	load_ok(dir, &s);
	rb_skill_free(&s);
}

static void test_front_matter_errors(void **state)
{
	static const struct {
		const char *md, *want;
	} cases[] = {
	    {"name: x\n", "must start with front matter"},
	    {"", "must start with front matter"},
	    {"---\nname: x\ndescription: d\nentry: run.sh\n", "front matter is not closed by a `---` line"},
	    {"---\nname: x\ndescription: d\n---\n", "front matter lacks `entry`"},
	    {"---\ndescription: d\nentry: run.sh\n---\n", "front matter lacks `name`"},
	    {"---\nname: x\nentry: run.sh\n---\n", "front matter lacks `description`"},
	    {"---\nname: x\ndescription: d\nentry: run.sh\nlicense: MIT\n---\n",
	     "SKILL.md line 5: unknown key `license`"},
	    {"---\nname: x\nname: y\ndescription: d\nentry: run.sh\n---\n", "line 3: `name` is given twice"},
	    {"---\nname: x\ndescription:\n  folded text\nentry: run.sh\n---\n",
	     "line 3: `description` has no value on its line"},
	    {"---\nname: x\n  description: d\nentry: run.sh\n---\n", "line 3: indented line"},
	    {"---\nname: x\ndescription: d\nentry: /bin/sh\n---\n", "entry `/bin/sh`: must be a path relative"},
	    {"---\nname: x\ndescription: d\nentry: run.sh\ninputs: a,,b\n---\n",
	     "line 5: inputs: \"\" is not an input name"},
	    {"---\nname: x\ndescription: d\nentry: run.sh\ninputs: a, B\n---\n",
	     "line 5: inputs: \"B\" is not an input name"},
	    {"---\nname: x\ndescription: d\nentry: run.sh\ninputs: a, a\n---\n", "inputs: `a` is declared twice"},
	    {"---\nname: x\ndescription: d\nentry: run.sh\ninputs: [a, b]\n---\n", "YAML structures are not supported"},
	    {"---\nname: x\ndescription: d\nentry: run.sh\ntimeout: soon\n---\n",
	     "line 5: timeout: expected a duration like \"30s\" (a number, then us, ms, s, m or h), got \"soon\""},
	    {"---\nname: x\ndescription: \"d\nentry: run.sh\n---\n", "unterminated double quote"},
	    {"---\nname:x\ndescription: d\nentry: run.sh\n---\n", "expected a space after `name:`"},
	    {"---\nname x\ndescription: d\nentry: run.sh\n---\n", "line 2: expected `key: value`"},
	    {"---\nname: x\ndescription: d\nentry: missing.sh\n---\n", "entry `missing.sh`: does not exist"},
	    {"---\nname: x\ndescription: d\nentry: sub\n---\n", "entry `sub`: not a regular file"},
	};
	for (size_t i = 0; i < RB_ARRAY_SIZE(cases); i++) {
		char name[32];
		snprintf(name, sizeof name, "fm-%zu", i);
		const char *dir = bundle(name, cases[i].md);
		put_file(dir, "run.sh", "#!/bin/sh\necho '{}'\n", 0755);
		put_file(dir, "sub/file", "", 0644);
		load_fails(dir, cases[i].want);
	}
}

static void test_front_matter_forms(void **state)
{
	/* CRLF lines, quotes, a trailing comment, a colon inside a value, and a body after. */
	const char *dir = bundle("forms", "---\r\nname: 'forms'\r\ndescription: Turns a: b into c # why\r\n"
	                                  "entry: \"run.sh\"\r\ninputs: one , two_2\r\n---\r\nbody: ignored\r\n");
	put_file(dir, "run.sh", "#!/bin/sh\n", 0755);
	struct rb_skill s;
	load_ok(dir, &s);
	assert_string_equal(s.name, "forms");
	assert_string_equal(s.description, "Turns a: b into c");
	assert_string_equal(s.entry, "run.sh");
	assert_int_equal(s.n_inputs, 2);
	assert_string_equal(s.inputs[1], "two_2");
	assert_int_equal(s.timeout_ms, 0);
	rb_skill_free(&s);
}

/* ---- inputs, environment, result -------------------------------------------------------- */

static void check_inputs(const char *json, int want_r, const char *want)
{
	struct rb_skill s;
	load_ok(fixture("valid"), &s);
	json_error_t jerr;
	_cleanup_json_ json_t *in = json ? json_loads(json, 0, &jerr) : NULL;
	assert_true(!json || in);
	struct rb_error err = {0};
	int r = rb_skill_check_inputs(&s, in, &err);
	rb_skill_free(&s);
	if (r != want_r || (want && strcmp(err.msg, want)))
		fail_msg("inputs %s: r=%d, message \"%s\", wanted \"%s\"", json, r, err.msg, want ? want : "");
}

static void test_check_inputs(void **state)
{
	check_inputs("{\"greeting\":\"hi\",\"count\":3,\"loud\":true}", 0, NULL);
	check_inputs("{\"greeting\":\"hi\",\"count\":3,\"loud\":true,\"extra\":1,\"more\":2}", -1,
	             "skill `echo-json`: unknown input `extra`, `more` (declared: `greeting`, `count`, `loud`)");
	check_inputs("{\"greeting\":\"hi\"}", -1,
	             "skill `echo-json`: missing input `count`, `loud` (declared: `greeting`, `count`, `loud`)");
	check_inputs("{\"greeting\":\"hi\",\"count\":3,\"x\":false}", -1,
	             "skill `echo-json`: unknown input `x`; missing input `loud` (declared: `greeting`, `count`, "
	             "`loud`)");
	check_inputs(NULL, -1,
	             "skill `echo-json`: missing input `greeting`, `count`, `loud` (declared: "
	             "`greeting`, `count`, `loud`)");
	check_inputs("{\"greeting\":{\"a\":1},\"count\":3,\"loud\":true}", -1,
	             "skill `echo-json`: input `greeting`: expected a string, number or bool, got an object");
}

static void test_env(void **state)
{
	struct rb_skill s;
	load_ok(fixture("valid"), &s);
	_cleanup_json_ json_t *in = json_pack("{s:s, s:i, s:b, s:f, s:f, s:b}", "greeting", "hi there", "count", 3,
	                                      "loud", 1, "ratio", 2.5, "tenth", 0.1, "quiet", 0);
	char **env = NULL;
	assert_int_equal(rb_skill_env(&s, in, &env), 0);
	static const char *const want[] = {
	    "RUNBOX_INPUT_COUNT=3",
	    "RUNBOX_INPUT_GREETING=hi there",
	    "RUNBOX_INPUT_LOUD=true",
	    "RUNBOX_INPUT_QUIET=false",
	    "RUNBOX_INPUT_RATIO=2.5",
	    "RUNBOX_INPUT_TENTH=0.1",
	    "RUNBOX_INPUTS_FILE=/proc/self/fd/3",
	    "RUNBOX_SKILL_DIR=/workspace/skills/echo-json",
	};
	size_t n = 0;
	while (env[n])
		n++;
	assert_int_equal(n, RB_ARRAY_SIZE(want));
	for (size_t i = 0; i < n; i++)
		assert_string_equal(env[i], want[i]);
	rb_skill_env_free(env);

	/* No inputs at all: just the two fixed names. */
	assert_int_equal(rb_skill_env(&s, NULL, &env), 0);
	assert_string_equal(env[0], "RUNBOX_INPUTS_FILE=/proc/self/fd/3");
	assert_null(env[2]);
	rb_skill_env_free(env);

	/* Values execve cannot carry, and names that would not survive upper-casing, refused. */
	_cleanup_json_ json_t *obj = json_pack("{s:{}}", "greeting");
	assert_int_equal(rb_skill_env(&s, obj, &env), -1);
	assert_int_equal(errno, EINVAL);
	assert_null(env);
	_cleanup_json_ json_t *upper = json_pack("{s:s}", "Greeting", "x");
	assert_int_equal(rb_skill_env(&s, upper, &env), -1);
	_cleanup_json_ json_t *nul = json_object();
	json_object_set_new(nul, "greeting", json_stringn("a\0b", 3));
	assert_int_equal(rb_skill_env(&s, nul, &env), -1);
	rb_skill_free(&s);
}

static void result_fails(const char *text, size_t len, const char *want)
{
	json_t *out = (json_t *)1;
	struct rb_error err = {0};
	int r = rb_skill_parse_result(text, len, &out, &err);
	if (r == 0 || strcmp(err.msg, want))
		fail_msg("result \"%.*s\": r=%d, message \"%s\", wanted \"%s\"", (int)len, text, r, err.msg, want);
	assert_null(out);
}

static void test_parse_result(void **state)
{
	const char *ok = "\n  {\"a\": 1, \"b\": [true]}\n\n";
	json_t *out = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_skill_parse_result(ok, strlen(ok), &out, &err), 0);
	assert_true(json_is_object(out));
	assert_int_equal(json_integer_value(json_object_get(out, "a")), 1);
	json_decref(out);

	result_fails("{\"a\": 1} done\n", 14,
	             "stdout is not one JSON object: end of file expected near 'done' at line 1 col 13");
	result_fails("{\"a\": 1}\n{\"b\": 2}\n", 18,
	             "stdout is not one JSON object: end of file expected near '{' at line 2 col 1");
	result_fails("", 0, "stdout is not one JSON object: it is empty");
	result_fails(" \n\t", 3, "stdout is not one JSON object: it is empty");
	result_fails("[1, 2]", 6, "stdout is not one JSON object: got an array");
	result_fails("42\n", 3, "stdout is not one JSON object: got 42");
	result_fails("{\"a\": 1, \"a\": 2}", 16,
	             "stdout is not one JSON object: duplicate object key near '\"a\"' at line 1 col 12");
	result_fails("{\"a\":", 5, "stdout is not one JSON object: unexpected token near end of file at line 1 col 5");
	/* len, not the NUL, bounds the text: a NUL inside is garbage after the document. */
	result_fails("{}\0{}", 5,
	             "stdout is not one JSON object: end of file expected near end of file at line 1 "
	             "col 3");
}

/* The fixture's entry, run for real with rb_skill_env's environment, prints a result that
 * rb_skill_parse_result accepts: the contract end to end, on the host's /bin/sh. */
static void run_entry(const char *entry, char **env, char *out, size_t cap, size_t *len)
{
	int pipefd[2];
	assert_int_equal(pipe(pipefd), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addclose(&fa, pipefd[0]);
	char *argv[] = {(char *)"busybox", (char *)"sh", (char *)entry, NULL};
	pid_t pid;
	assert_int_equal(posix_spawn(&pid, "/bin/busybox", &fa, NULL, argv, env), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	*len = 0;
	ssize_t n;
	while ((n = read(pipefd[0], out + *len, cap - 1 - *len)) > 0)
		*len += (size_t)n;
	out[*len] = '\0';
	close(pipefd[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Checks in against the skill, runs its entry point with the environment the skill gets, and
 * returns its one JSON object (the test fails otherwise). */
static json_t *run_skill(struct rb_skill *s, json_t *in)
{
	struct rb_error err = {0};
	assert_int_equal(rb_skill_check_inputs(s, in, &err), 0);
	char **env = NULL;
	assert_int_equal(rb_skill_env(s, in, &env), 0);
	char entry[PATH_MAX + 64], out[8192];
	snprintf(entry, sizeof entry, "%s/%s", s->dir, s->entry);
	size_t len;
	run_entry(entry, env, out, sizeof out, &len);
	rb_skill_env_free(env);
	json_t *res = NULL;
	if (rb_skill_parse_result(out, len, &res, &err) != 0)
		fail_msg("%s (stdout: %s)", err.msg, out);
	return res;
}

static void test_entry_end_to_end(void **state)
{
	if (access("/bin/busybox", X_OK) != 0)
		skip();
	struct rb_skill s;
	load_ok(fixture("valid"), &s);
	_cleanup_json_ json_t *in = json_pack("{s:s, s:i, s:b}", "greeting", "hello", "count", 7, "loud", 0);
	json_t *res = run_skill(&s, in);
	assert_string_equal(json_string_value(json_object_get(res, "greeting")), "hello");
	assert_int_equal(json_integer_value(json_object_get(res, "count")), 7);
	assert_true(json_is_false(json_object_get(res, "loud")));
	json_decref(res);
	rb_skill_free(&s);
}

/* docs/examples' skill must load and, under busybox sh, print one JSON object. */
static void test_docs_example_skill(void **state)
{
	char dir[PATH_MAX + 64];
	snprintf(dir, sizeof dir, "%s/docs/examples/skills/word-count", repo);
	struct rb_skill s;
	load_ok(dir, &s);
	assert_string_equal(s.name, "word-count");
	if (access("/bin/busybox", X_OK) != 0) {
		rb_skill_free(&s);
		skip();
	}
	char notes[PATH_MAX + 64];
	snprintf(notes, sizeof notes, "%s/docs/examples/data/notes.txt", repo);
	_cleanup_json_ json_t *in = json_pack("{s:s, s:s, s:i}", "file", notes, "label", "say \"hi\" \\ o/", "top", 2);
	json_t *res = run_skill(&s, in);
	assert_string_equal(json_string_value(json_object_get(res, "label")), "say \"hi\" \\ o/");
	assert_int_equal(json_integer_value(json_object_get(res, "lines")), 5);
	json_t *top = json_object_get(res, "top");
	assert_int_equal(json_array_size(top), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(top, 0), "word")), "the");
	json_decref(res);
	rb_skill_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_valid_bundle),
	    cmocka_unit_test(test_missing_skill_md),
	    cmocka_unit_test(test_bad_name),
	    cmocka_unit_test(test_entry_escapes_by_dotdot),
	    cmocka_unit_test(test_entry_escapes_by_symlink),
	    cmocka_unit_test(test_symlinks_inside_bundle),
	    cmocka_unit_test(test_entry_not_executable),
	    cmocka_unit_test(test_front_matter_errors),
	    cmocka_unit_test(test_front_matter_forms),
	    cmocka_unit_test(test_check_inputs),
	    cmocka_unit_test(test_env),
	    cmocka_unit_test(test_parse_result),
	    cmocka_unit_test(test_entry_end_to_end),
	    cmocka_unit_test(test_docs_example_skill),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* Unit tests for policy/manifest.c: a manifest with every field, each kind of error naming
 * its JSON path, relative paths anchored at the manifest's folder, limits against a policy,
 * the canonical hash, skills tied to their steps, and docs/examples/manifest.json. */
#define _GNU_SOURCE
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

#include "common/cleanup.h"
#include "common/util.h"
#include "policy/manifest.h"

#include "fs_fixture.h"

static char repo[PATH_MAX];
static char tmpdir[PATH_MAX];

static int setup(void **state)
{
	if (repo_root(repo, sizeof repo, "tests/unit/fixtures/skills", __FILE__, "tests/unit/test_manifest.c") < 0)
		return -1;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rb-test-manifest.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	struct rb_error err;
	return rb_rm_rf(tmpdir, &err);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void parse_ok(const char *text, const char *base, struct rb_manifest *m)
{
	struct rb_error err = {0};
	if (rb_manifest_parse(text, "run.json", base, m, &err) != 0)
		fail_msg("parse failed: %s\n%s", err.msg, text);
}

/* Expects failure with exactly want as the message (want_sub: a substring of it instead). */
static void fails_with(const char *text, const char *want, int exact)
{
	struct rb_manifest m;
	struct rb_error err = {0};
	int r = rb_manifest_parse(text, "run.json", "/srv/runs", &m, &err);
	if (r == 0 || (exact ? strcmp(err.msg, want) != 0 : !strstr(err.msg, want)))
		fail_msg("parse of %s: r=%d, message \"%s\", wanted %s \"%s\"", text, r, err.msg,
		         exact ? "exactly" : "a message holding", want);
	/* A failed parse leaves nothing behind. */
	assert_null(m.steps);
	assert_null(m.image);
	assert_null(m.origin);
}

#define FAILS(text, want)     fails_with(text, want, 1)
#define FAILS_SUB(text, want) fails_with(text, want, 0)

/* A minimal valid head that the error cases below build on. */
#define HEAD     "\"tenant\": \"acme\", \"agent\": \"bot\", "
#define ONE_STEP "\"steps\": [{\"script\": \"true\"}]"

static const char *full_manifest =
    "{\n"
    "  \"tenant\": \"acme-corp\",\n"
    "  \"agent\": \"report.bot_2\",\n"
    "  \"agent_version\": \"1.4.0\",\n"
    "  \"run_id\": \"0190a1b2c3d4-e5f6a7b8\",\n"
    "  \"image\": \"minimal\",\n"
    "  \"policy\": \"strict\",\n"
    "  \"inputs\": [\n"
    "    {\"from\": \"data/notes.txt\", \"to\": \"/workspace/in/notes.txt\"},\n"
    "    {\"from\": \"/srv/shared/./x/../model.bin\"},\n"
    "    {\"artifact\": \"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\",\n"
    "     \"to\": \"/workspace/in/prev/out.json\"}\n"
    "  ],\n"
    "  \"skills\": [\"skills/echo\", \"/opt/skills/pdf\"],\n"
    "  \"env\": {\"LANG\": \"C.UTF-8\", \"_X1\": \"\"},\n"
    "  \"limits\": {\"timeout\": \"90s\", \"memory\": \"512M\", \"pids\": 64, \"cpus\": 1.5},\n"
    "  \"steps\": [\n"
    "    {\"name\": \"prepare\", \"script\": \"set -e\\nmkdir -p /workspace/out\\n\", \"timeout\": \"10s\",\n"
    "     \"env\": {\"STAGE\": \"one\"}},\n"
    "    {\"skill\": \"echo\", \"inputs\": {\"greeting\": \"hi\", \"count\": 3, \"ratio\": 0.5, \"loud\": true}},\n"
    "    {\"skill\": \"pdf\"}\n"
    "  ]\n"
    "}\n";

static void test_full_manifest(void **state)
{
	struct rb_manifest m;
	parse_ok(full_manifest, "/srv/runs/r1", &m);
	assert_string_equal(m.origin, "run.json");
	assert_string_equal(m.base_dir, "/srv/runs/r1");
	assert_string_equal(m.tenant, "acme-corp");
	assert_string_equal(m.agent, "report.bot_2");
	assert_string_equal(m.agent_version, "1.4.0");
	assert_string_equal(m.run_id, "0190a1b2c3d4-e5f6a7b8");
	assert_string_equal(m.image, "minimal");
	assert_string_equal(m.policy, "strict");

	assert_int_equal(m.n_inputs, 3);
	assert_int_equal(m.inputs[0].kind, RB_MANIFEST_INPUT_HOST);
	assert_string_equal(m.inputs[0].from, "/srv/runs/r1/data/notes.txt");
	assert_string_equal(m.inputs[0].to, "/workspace/in/notes.txt");
	assert_string_equal(m.inputs[1].from, "/srv/shared/model.bin");
	assert_string_equal(m.inputs[1].to, "/workspace/in/model.bin"); /* default: the source's name */
	assert_int_equal(m.inputs[2].kind, RB_MANIFEST_INPUT_ARTIFACT);
	assert_null(m.inputs[2].from);
	assert_string_equal(m.inputs[2].artifact, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	assert_string_equal(m.inputs[2].to, "/workspace/in/prev/out.json");

	assert_int_equal(m.n_skills, 2);
	assert_string_equal(m.skills[0], "/srv/runs/r1/skills/echo");
	assert_string_equal(m.skills[1], "/opt/skills/pdf");

	assert_int_equal(m.n_env, 2);
	assert_string_equal(m.env[0], "LANG=C.UTF-8");
	assert_string_equal(m.env[1], "_X1=");
	assert_null(m.env[2]);

	assert_int_equal(m.limits.timeout_ms, 90000);
	assert_int_equal(m.limits.memory_bytes, 512ull << 20);
	assert_int_equal(m.limits.pids, 64);
	assert_true(m.limits.cpus == 1.5);

	assert_int_equal(m.n_steps, 3);
	struct rb_manifest_step *s = m.steps;
	assert_int_equal(s[0].kind, RB_MANIFEST_STEP_SCRIPT);
	assert_string_equal(s[0].name, "prepare");
	assert_string_equal(s[0].script, "set -e\nmkdir -p /workspace/out\n");
	assert_null(s[0].skill);
	assert_null(s[0].inputs);
	assert_int_equal(s[0].timeout_ms, 10000);
	assert_int_equal(s[0].n_env, 1);
	assert_string_equal(s[0].env[0], "STAGE=one");
	assert_null(s[0].env[1]);

	assert_int_equal(s[1].kind, RB_MANIFEST_STEP_SKILL);
	assert_null(s[1].name);
	assert_null(s[1].script);
	assert_string_equal(s[1].skill, "echo");
	assert_int_equal(json_object_size(s[1].inputs), 4);
	assert_int_equal(json_integer_value(json_object_get(s[1].inputs, "count")), 3);
	assert_true(json_is_true(json_object_get(s[1].inputs, "loud")));
	assert_int_equal(s[1].timeout_ms, 0);
	assert_int_equal(s[1].n_env, 0);
	assert_null(s[1].env[0]);

	assert_string_equal(s[2].skill, "pdf");
	assert_true(json_is_object(s[2].inputs) && json_object_size(s[2].inputs) == 0);

	assert_int_equal(strlen(m.hash), 64);
	rb_manifest_free(&m);
	rb_manifest_free(&m); /* idempotent */
}

static void test_defaults(void **state)
{
	struct rb_manifest m;
	parse_ok("{" HEAD ONE_STEP "}", "/srv", &m);
	assert_string_equal(m.image, "host");
	assert_string_equal(m.policy, "default");
	assert_string_equal(m.run_id, "");
	assert_null(m.agent_version);
	assert_int_equal(m.n_inputs, 0);
	assert_int_equal(m.n_skills, 0);
	assert_non_null(m.env);
	assert_null(m.env[0]);
	assert_int_equal(m.limits.timeout_ms, 0);
	assert_int_equal(m.limits.memory_bytes, 0);
	assert_int_equal(m.n_steps, 1);
	rb_manifest_free(&m);
}

static void test_error_paths(void **state)
{
	/* The brief's own example, word for word. */
	FAILS("{" HEAD "\"steps\": [{\"script\": \"a\"}, {\"script\": \"b\"}, {\"script\": \"c\", \"timeout\": true}]}",
	      "manifest run.json: steps[2].timeout: expected a duration like \"30s\" (a number, then us, ms, s, m or "
	      "h), got true");
	FAILS("{" HEAD
	      "\"steps\": [{\"script\": \"a\"}, {\"script\": \"b\"}, {\"script\": \"c\", \"timeout\": \"30s\"}, "
	      "{\"script\": \"d\", \"timeout\": \"soon\"}]}",
	      "manifest run.json: steps[3].timeout: expected a duration like \"30s\" (a number, then us, ms, s, m or "
	      "h), got \"soon\"");

	/* A number in a string has no unit: refused, the message saying which units there are. */
	FAILS(
	    "{" HEAD "\"steps\": [{\"script\": \"c\", \"timeout\": \"30\"}]}",
	    "manifest run.json: steps[0].timeout: expected a duration like \"30s\" (a number, then us, ms, s, m or h), "
	    "got \"30\"");

	/* Unknown keys, at the top and inside a step. */
	FAILS("{" HEAD ONE_STEP ", \"tenent\": \"x\"}",
	      "manifest run.json: tenent: unknown key (known keys: tenant, agent, agent_version, run_id, image, "
	      "policy, inputs, skills, env, limits, steps)");
	FAILS("{" HEAD "\"steps\": [{\"script\": \"a\"}, {\"script\": \"b\", \"cwd\": \"/\"}]}",
	      "manifest run.json: steps[1].cwd: unknown key (known keys: name, script, skill, inputs, timeout, env)");
	FAILS_SUB("{" HEAD ONE_STEP ", \"limits\": {\"disk\": \"1G\"}}", "manifest run.json: limits.disk: unknown key");
	FAILS_SUB("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"mode\": \"rw\"}]}",
	          "manifest run.json: inputs[0].mode: unknown key");

	/* Wrong types. */
	FAILS("{\"tenant\": 5, \"agent\": \"bot\", " ONE_STEP "}",
	      "manifest run.json: tenant: expected a string, got 5");
	FAILS("{" HEAD "\"steps\": {\"script\": \"a\"}}",
	      "manifest run.json: steps: expected an array of steps, got an object");
	FAILS("{" HEAD ONE_STEP ", \"env\": {\"A\": 1}}", "manifest run.json: env.A: expected a string, got 1");
	FAILS("{" HEAD ONE_STEP ", \"limits\": {\"memory\": \"lots\"}}",
	      "manifest run.json: limits.memory: expected a size like \"512M\" or a number of bytes, got \"lots\"");
	FAILS("{" HEAD ONE_STEP ", \"limits\": {\"pids\": 0}}",
	      "manifest run.json: limits.pids: expected an integer from 1 to 4294967295, got 0");
	FAILS("{" HEAD ONE_STEP ", \"limits\": {\"cpus\": \"2\"}}",
	      "manifest run.json: limits.cpus: expected a number of cores greater than 0, got \"2\"");
	FAILS("{" HEAD "\"steps\": [{\"skill\": \"echo\", \"inputs\": {\"list\": [1]}}]}",
	      "manifest run.json: steps[0].inputs.list: expected a string, number or bool, got an array");
	FAILS("{" HEAD "\"steps\": [{\"skill\": \"echo\", \"inputs\": {\"Big\": 1}}]}",
	      "manifest run.json: steps[0].inputs: \"Big\" is not an input name ([a-z0-9_]{1,64})");
	FAILS("{" HEAD "\"steps\": [{\"skill\": \"Echo\"}]}",
	      "manifest run.json: steps[0].skill: \"Echo\" is not a skill name ([a-z0-9-]{1,64})");
	FAILS("[1]", "manifest run.json: (top level): expected an object, got an array");
	FAILS_SUB("{\"tenant\": ", "manifest run.json: line 1 column");
	FAILS_SUB("{" HEAD ONE_STEP ", \"tenant\": \"b\"}", "manifest run.json: line 1 column");

	/* Ids. */
	FAILS("{\"tenant\": \"a b\", \"agent\": \"bot\", " ONE_STEP "}",
	      "manifest run.json: tenant: \"a b\" is not an id ([A-Za-z0-9._-]{1,64}, not \".\" or \"..\")");
	FAILS_SUB("{" HEAD ONE_STEP ", \"run_id\": \"..\"}", "manifest run.json: run_id: \"..\" is not an id");
	FAILS("{\"agent\": \"bot\", " ONE_STEP "}", "manifest run.json: tenant: required key is missing");
	FAILS("{" HEAD "\"image\": \"host\"}", "manifest run.json: steps: required key is missing");

	/* Steps: exactly one kind, never empty. */
	FAILS("{" HEAD "\"steps\": [{\"script\": \"a\", \"skill\": \"b\"}]}",
	      "manifest run.json: steps[0]: has both `script` and `skill`; a step is one or the other");
	FAILS("{" HEAD "\"steps\": [{\"name\": \"nothing\"}]}",
	      "manifest run.json: steps[0]: needs `script` (a shell script) or `skill` (a skill's name)");
	FAILS("{" HEAD "\"steps\": []}", "manifest run.json: steps: must hold at least one step");
	FAILS("{" HEAD "\"steps\": [{\"script\": \"\"}]}", "manifest run.json: steps[0].script: must not be empty");
	FAILS("{" HEAD "\"steps\": [{\"script\": \"a\", \"inputs\": {}}]}",
	      "manifest run.json: steps[0].inputs: only a skill step takes inputs");

	/* Environment: valid names, RUNBOX_ reserved (top level and per step), no NUL. */
	FAILS("{" HEAD ONE_STEP ", \"env\": {\"RUNBOX_TOKEN\": \"x\"}}",
	      "manifest run.json: env.RUNBOX_TOKEN: names starting with RUNBOX_ are reserved for runbox");
	FAILS("{" HEAD "\"steps\": [{\"script\": \"a\", \"env\": {\"RUNBOX_INPUT_X\": \"1\"}}]}",
	      "manifest run.json: steps[0].env.RUNBOX_INPUT_X: names starting with RUNBOX_ are reserved for runbox");
	FAILS("{" HEAD ONE_STEP ", \"env\": {\"1X\": \"x\"}}",
	      "manifest run.json: env: \"1X\" is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
	FAILS_SUB("{" HEAD ONE_STEP ", \"env\": {\"A-B\": \"x\"}}", "\"A-B\" is not a valid environment variable name");
	/* jansson itself refuses "\u0000" (no JSON_ALLOW_NUL), so no NUL reaches a C string. */
	FAILS_SUB("{" HEAD ONE_STEP ", \"env\": {\"A\": \"x\\u0000y\"}}",
	          "manifest run.json: line 1 column 89: \\u0000 is not allowed");
}

/* "cow": a boolean, for a host folder; its `to` anywhere under /workspace/ but in, out, skills. */
static void test_input_cow(void **state)
{
	struct rb_manifest m;
	parse_ok("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"to\": \"/workspace/src\", \"cow\": true}, "
	         "{\"from\": \"/b\", \"cow\": false}]}",
	         "/", &m);
	assert_true(m.inputs[0].cow);
	assert_string_equal(m.inputs[0].to, "/workspace/src");
	assert_false(m.inputs[1].cow);
	assert_string_equal(m.inputs[1].to, "/workspace/in/b");
	rb_manifest_free(&m);
	/* Control: without cow, /workspace/src is refused. */
	FAILS("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"to\": \"/workspace/src\"}]}",
	      "manifest run.json: inputs[0].to: \"/workspace/src\" must start with \"/workspace/in/\"");
	FAILS("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"cow\": \"yes\"}]}",
	      "manifest run.json: inputs[0].cow: expected true or false, got \"yes\"");
	FAILS_SUB(
	    "{" HEAD ONE_STEP ", \"inputs\": [{\"artifact\": "
	    "\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\", \"to\": \"/workspace/in/x\", "
	    "\"cow\": true}]}",
	    "inputs[0].cow: applies to a host folder (`from`), not to an artifact");
	static const char *const places[] = {"/workspace/out/a", "/workspace/out", "/workspace/in",
	                                     "/workspace/skills/x"};
	for (size_t i = 0; i < RB_ARRAY_SIZE(places); i++) {
		char text[512];
		snprintf(text, sizeof text,
		         "{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"to\": \"%s\", \"cow\": true}]}",
		         places[i]);
		FAILS_SUB(text, "is not a place for a cow input");
	}
	FAILS_SUB("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"to\": \"/etc/x\", \"cow\": true}]}",
	          "must start with \"/workspace/\" (a cow input)");
	(void)state;
}

static void test_input_destinations(void **state)
{
	static const struct {
		const char *to, *why;
	} bad[] = {
	    {"/workspace/in/../../etc/passwd", "must not contain \".\" or \"..\" components"},
	    {"/workspace/in/a/..", "must not contain \".\" or \"..\" components"},
	    {"/workspace/in/./a", "must not contain \".\" or \"..\" components"},
	    {"/workspace/in//a", "must not contain \"//\""},
	    {"/workspace/in/a/", "must not end with '/'"},
	    {"/workspace/in/", "must name a file or folder under /workspace/in/"},
	    {"/workspace/in", "must start with \"/workspace/in/\""},
	    {"/workspace/out/a", "must start with \"/workspace/in/\""},
	    {"/etc/cron.d/x", "must start with \"/workspace/in/\""},
	    {"workspace/in/a", "must start with \"/workspace/in/\""},
	};
	for (size_t i = 0; i < RB_ARRAY_SIZE(bad); i++) {
		char text[512], want[512];
		snprintf(text, sizeof text, "{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"to\": \"%s\"}]}",
		         bad[i].to);
		snprintf(want, sizeof want, "manifest run.json: inputs[0].to: \"%s\" %s", bad[i].to, bad[i].why);
		FAILS(text, want);
	}
	/* The default destination is checked too: a source named ".." cannot yield one. */
	FAILS_SUB("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/\"}]}", "inputs[0].from: the host's root cannot be");
	/* Two inputs at one place, or one inside another. */
	FAILS("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"to\": \"/workspace/in/d\"}, "
	      "{\"from\": \"/b\", \"to\": \"/workspace/in/d/x\"}]}",
	      "manifest run.json: inputs[1].to: \"/workspace/in/d/x\" overlaps inputs[0].to \"/workspace/in/d\"");
	FAILS_SUB("{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/x/a\"}, {\"from\": \"/y/a\"}]}",
	          "inputs[1].to: \"/workspace/in/a\" overlaps inputs[0].to");
	/* Control: siblings sharing a prefix of characters do not overlap. */
	struct rb_manifest m;
	parse_ok(
	    "{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"/a\", \"to\": \"/workspace/in/d\"}, "
	    "{\"from\": \"/b\", \"to\": \"/workspace/in/dd\"}, {\"from\": \"/c\", \"to\": \"/workspace/in/.hidden\"}]}",
	    "/", &m);
	assert_int_equal(m.n_inputs, 3);
	rb_manifest_free(&m);

	/* from and artifact. */
	FAILS("{" HEAD ONE_STEP
	      ", \"inputs\": [{\"from\": \"/a\", \"artifact\": \"sha256:00\", \"to\": \"/workspace/in/a\"}]}",
	      "manifest run.json: inputs[0]: has both `from` and `artifact`; an input is one or the other");
	FAILS("{" HEAD ONE_STEP ", \"inputs\": [{\"to\": \"/workspace/in/a\"}]}",
	      "manifest run.json: inputs[0]: needs `from` (a host path) or `artifact` (\"sha256:<digest>\")");
	FAILS("{" HEAD ONE_STEP ", \"inputs\": [{\"artifact\": \"sha256:ABC\", \"to\": \"/workspace/in/a\"}]}",
	      "manifest run.json: inputs[0].artifact: expected \"sha256:\" and 64 lowercase hex digits, got "
	      "\"sha256:ABC\"");
	FAILS("{" HEAD ONE_STEP ", \"inputs\": [{\"artifact\": \"sha256:"
	      "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\"}]}",
	      "manifest run.json: inputs[0]: an artifact input needs `to`");
}

static void test_relative_paths(void **state)
{
	struct rb_manifest m;
	parse_ok("{" HEAD ONE_STEP ", \"policy\": \"./ci.json\", \"skills\": [\"../shared/skills/pdf\", \"s\"], "
	         "\"inputs\": [{\"from\": \"data/x.csv\"}, {\"from\": \"../../../../up\"}, {\"from\": \"/a//b/./c\"}]}",
	         "/srv/runs/r1/", &m);
	assert_string_equal(m.base_dir, "/srv/runs/r1");
	assert_string_equal(m.policy, "/srv/runs/r1/ci.json");
	assert_string_equal(m.skills[0], "/srv/runs/shared/skills/pdf");
	assert_string_equal(m.skills[1], "/srv/runs/r1/s");
	assert_string_equal(m.inputs[0].from, "/srv/runs/r1/data/x.csv");
	assert_string_equal(m.inputs[0].to, "/workspace/in/x.csv");
	assert_string_equal(m.inputs[1].from, "/up"); /* ".." stops at the root */
	assert_string_equal(m.inputs[2].from, "/a/b/c");
	rb_manifest_free(&m);

	/* A policy given as a file name only is a path too (rb_policy_load's rule). */
	parse_ok("{" HEAD ONE_STEP ", \"policy\": \"ci.json\"}", "/srv", &m);
	assert_string_equal(m.policy, "/srv/ci.json");
	/* ... flagged, so the runner refuses it unless the operator's config allows paths. */
	assert_true(m.policy_given);
	assert_true(m.policy_is_path);
	rb_manifest_free(&m);
	parse_ok("{" HEAD ONE_STEP ", \"policy\": \"ci\"}", "/srv", &m);
	assert_true(m.policy_given);
	assert_false(m.policy_is_path);
	rb_manifest_free(&m);
	FAILS_SUB("{" HEAD ONE_STEP ", \"skills\": [\"s\", \"./s\"]}",
	          "skills[1]: \"/srv/runs/s\" is already skills[0]");

	/* rb_manifest_load anchors at the file's folder, not at the cwd: load it by a relative
	 * name from another directory. */
	char dir[PATH_MAX + 32], path[PATH_MAX + 64], cwd[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/proj", tmpdir);
	assert_int_equal(mkdir(dir, 0755), 0);
	snprintf(path, sizeof path, "%s/run.json", dir);
	write_file(path, "{" HEAD ONE_STEP ", \"inputs\": [{\"from\": \"data/in.txt\", \"to\": \"/workspace/in/t\"}]}");
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(tmpdir), 0);
	struct rb_error err = {0};
	int r = rb_manifest_load("proj/run.json", &m, &err);
	assert_int_equal(chdir(cwd), 0);
	if (r != 0)
		fail_msg("%s", err.msg);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof want, "%s/proj/data/in.txt", tmpdir);
	assert_string_equal(m.inputs[0].from, want);
	assert_string_equal(m.origin, "proj/run.json");
	rb_manifest_free(&m);

	/* Messages from a loaded file name the file as the user named it. */
	snprintf(path, sizeof path, "%s/bad.json", dir);
	write_file(path, "{" HEAD "\"steps\": [{\"script\": \"a\", \"timeout\": 30}]}");
	assert_int_not_equal(rb_manifest_load(path, &m, &err), 0);
	char want_msg[PATH_MAX + 200];
	snprintf(want_msg, sizeof want_msg,
	         "manifest %s: steps[0].timeout: expected a duration like \"30s\" (a number, then us, ms, s, m or h), "
	         "got 30",
	         path);
	assert_string_equal(err.msg, want_msg);
	snprintf(path, sizeof path, "%s/missing.json", dir);
	assert_int_not_equal(rb_manifest_load(path, &m, &err), 0);
	assert_non_null(strstr(err.msg, "No such file or directory"));
	assert_non_null(strstr(err.msg, "missing.json"));
}

static struct rb_policy test_policy(void)
{
	struct rb_policy p;
	memset(&p, 0, sizeof p);
	snprintf(p.name, sizeof p.name, "default");
	p.timeout_ms = 30 * 60 * 1000;
	p.memory_bytes = 1ull << 30;
	p.pids = 1024;
	p.cpus = 2;
	return p;
}

static void limits_fail(const char *limits_and_steps, const struct rb_policy *p, const char *want)
{
	char text[1024];
	snprintf(text, sizeof text, "{" HEAD "%s}", limits_and_steps);
	struct rb_manifest m;
	parse_ok(text, "/", &m);
	struct rb_error err = {0};
	int r = rb_manifest_check_limits(&m, p, &err);
	rb_manifest_free(&m);
	if (r == 0 || strcmp(err.msg, want))
		fail_msg("limits %s: r=%d, message \"%s\", wanted \"%s\"", limits_and_steps, r, err.msg, want);
}

static void test_limits_within_policy(void **state)
{
	struct rb_policy p = test_policy();
	limits_fail("\"limits\": {\"memory\": \"2G\"}, " ONE_STEP, &p,
	            "manifest run.json: limits.memory: 2G is above policy `default`'s limits.memory (1G)");
	limits_fail("\"limits\": {\"memory\": 1073741825}, " ONE_STEP, &p,
	            "manifest run.json: limits.memory: 1073741825 is above policy `default`'s limits.memory (1G)");
	limits_fail("\"limits\": {\"pids\": 1025}, " ONE_STEP, &p,
	            "manifest run.json: limits.pids: 1025 is above policy `default`'s limits.pids (1024)");
	limits_fail("\"limits\": {\"cpus\": 2.5}, " ONE_STEP, &p,
	            "manifest run.json: limits.cpus: 2.5 is above policy `default`'s limits.cpus (2)");
	limits_fail("\"limits\": {\"timeout\": \"1h\"}, " ONE_STEP, &p,
	            "manifest run.json: limits.timeout: 1h is above policy `default`'s limits.timeout (30m)");
	limits_fail("\"steps\": [{\"script\": \"a\"}, {\"script\": \"b\", \"timeout\": \"1801s\"}]", &p,
	            "manifest run.json: steps[1].timeout: 1801s is above policy `default`'s limits.timeout (30m)");

	/* Controls: equal to the policy, below it, and anything where the policy sets nothing. */
	struct rb_manifest m;
	struct rb_error err = {0};
	parse_ok("{" HEAD "\"limits\": {\"memory\": \"1G\", \"pids\": 1024, \"cpus\": 2, \"timeout\": \"30m\"}, "
	         "\"steps\": [{\"script\": \"a\", \"timeout\": \"1800s\"}]}",
	         "/", &m);
	if (rb_manifest_check_limits(&m, &p, &err) != 0)
		fail_msg("%s", err.msg);
	rb_manifest_free(&m);
	parse_ok("{" HEAD
	         "\"limits\": {\"memory\": \"64G\", \"pids\": 100000, \"cpus\": 64, \"timeout\": \"24h\"}, " ONE_STEP
	         "}",
	         "/", &m);
	struct rb_policy unset;
	memset(&unset, 0, sizeof unset);
	snprintf(unset.name, sizeof unset.name, "open");
	if (rb_manifest_check_limits(&m, &unset, &err) != 0)
		fail_msg("%s", err.msg);
	/* ... and the same manifest against the real limits fails: the control has teeth. */
	assert_int_not_equal(rb_manifest_check_limits(&m, &p, &err), 0);
	rb_manifest_free(&m);
}

static void ceiling_fails(const char *body, const struct rb_manifest_ceilings *cl, const char *want)
{
	char text[1024];
	snprintf(text, sizeof text, "{" HEAD "%s}", body);
	struct rb_manifest m;
	parse_ok(text, "/", &m);
	struct rb_error err = {0};
	int r = rb_manifest_check_ceilings(&m, cl, &err);
	rb_manifest_free(&m);
	if (r == 0 || strcmp(err.msg, want))
		fail_msg("ceilings for %s: r=%d, message \"%s\", wanted \"%s\"", body, r, err.msg, want);
}

static void ceiling_ok(const char *body, const struct rb_manifest_ceilings *cl)
{
	char text[1024];
	snprintf(text, sizeof text, "{" HEAD "%s}", body);
	struct rb_manifest m;
	parse_ok(text, "/", &m);
	struct rb_error err = {0};
	int r = rb_manifest_check_ceilings(&m, cl, &err);
	rb_manifest_free(&m);
	if (r != 0)
		fail_msg("ceilings for %s: %s", body, err.msg);
}

/* Command-line options beside a manifest are ceilings: above one is an error naming both. */
static void test_ceilings(void **state)
{
	struct rb_manifest_ceilings cl = {.policy = "strict", .limits = {1000, 64ull << 20, 32, 1}};
	ceiling_fails("\"policy\": \"default\", " ONE_STEP, &cl,
	              "manifest run.json: policy: `default` is not --policy `strict`; the command line's policy "
	              "applies (name the same one, or leave `policy` out)");
	ceiling_fails("\"limits\": {\"timeout\": \"10s\"}, " ONE_STEP, &cl,
	              "manifest run.json: limits.timeout: 10s is above --timeout 1s");
	ceiling_fails("\"limits\": {\"memory\": \"256M\"}, " ONE_STEP, &cl,
	              "manifest run.json: limits.memory: 256M is above --memory 64M");
	ceiling_fails("\"limits\": {\"pids\": 33}, " ONE_STEP, &cl,
	              "manifest run.json: limits.pids: 33 is above --pids 32");
	ceiling_fails("\"limits\": {\"cpus\": 1.5}, " ONE_STEP, &cl,
	              "manifest run.json: limits.cpus: 1.5 is above --cpus 1");
	ceiling_fails("\"steps\": [{\"script\": \"a\", \"timeout\": \"2s\"}]", &cl,
	              "manifest run.json: steps[0].timeout: 2s is above --timeout 1s");
	struct rb_manifest_ceilings img = {.image = "minimal"};
	ceiling_fails("\"image\": \"host\", " ONE_STEP, &img,
	              "manifest run.json: image: `host` is not --image `minimal`; the command line's image applies "
	              "(name the same one, or leave `image` out)");

	/* Controls: at or below every ceiling, the same policy, none named, no ceilings at all. */
	ceiling_ok("\"policy\": \"strict\", \"limits\": {\"timeout\": \"1s\", \"memory\": \"32M\", \"pids\": 32, "
	           "\"cpus\": 0.5}, \"steps\": [{\"script\": \"a\", \"timeout\": \"500ms\"}]",
	           &cl);
	ceiling_ok(ONE_STEP, &cl);
	ceiling_ok("\"image\": \"minimal\", " ONE_STEP, &img);
	struct rb_manifest_ceilings none = {0};
	ceiling_ok("\"policy\": \"default\", \"image\": \"host\", \"limits\": {\"timeout\": \"10s\", \"memory\": "
	           "\"256M\"}, " ONE_STEP,
	           &none);
}

static void test_hash(void **state)
{
	const char *a = "{\"tenant\":\"acme\",\"agent\":\"bot\",\"steps\":[{\"script\":\"echo hi\",\"name\":\"s\"}],"
	                "\"env\":{\"A\":\"1\",\"B\":\"2\"}}";
	const char *b = "{\n  \"env\": { \"B\": \"2\", \"A\": \"1\" },\n  \"steps\": [ { \"name\": \"s\", "
	                "\"script\": \"echo hi\" } ],\n  \"agent\": \"bot\",\n  \"tenant\": \"acme\"\n}\n";
	const char *c = "{\"tenant\":\"acme\",\"agent\":\"bot\",\"steps\":[{\"script\":\"echo hi!\",\"name\":\"s\"}],"
	                "\"env\":{\"A\":\"1\",\"B\":\"2\"}}";
	struct rb_manifest ma, mb, mc;
	parse_ok(a, "/", &ma);
	parse_ok(b, "/elsewhere", &mb);
	parse_ok(c, "/", &mc);
	assert_int_equal(strspn(ma.hash, "0123456789abcdef"), 64);
	assert_string_equal(ma.hash, mb.hash);
	assert_string_not_equal(ma.hash, mc.hash);
	/* The hash is of the canonical text: sorted keys, compact. */
	const char *canon = "{\"agent\":\"bot\",\"env\":{\"A\":\"1\",\"B\":\"2\"},\"steps\":[{\"name\":\"s\","
	                    "\"script\":\"echo hi\"}],\"tenant\":\"acme\"}";
	char want[65];
	rb_sha256_hex(canon, strlen(canon), want);
	assert_string_equal(ma.hash, want);
	rb_manifest_free(&ma);
	rb_manifest_free(&mb);
	rb_manifest_free(&mc);
}

static void skills_result(const char *steps, const char *want)
{
	char text[2048];
	snprintf(text, sizeof text, "{" HEAD "\"skills\": [\"tests/unit/fixtures/skills/valid\"], %s}", steps);
	struct rb_manifest m;
	parse_ok(text, repo, &m);
	struct rb_skill *sk = NULL;
	size_t n = 0;
	struct rb_error err = {0};
	int r = rb_manifest_load_skills(&m, &sk, &n, &err);
	rb_manifest_free(&m);
	if (!want) {
		if (r != 0)
			fail_msg("%s", err.msg);
		assert_int_equal(n, 1);
		assert_string_equal(sk[0].name, "echo-json");
		rb_manifest_free_skills(sk, n);
		return;
	}
	if (r == 0 || strcmp(err.msg, want))
		fail_msg("skills for %s: r=%d, message \"%s\", wanted \"%s\"", steps, r, err.msg, want);
	assert_null(sk);
}

static void test_load_skills(void **state)
{
	skills_result("\"steps\": [{\"skill\": \"echo-json\", \"inputs\": {\"greeting\": \"hi\", \"count\": 2, "
	              "\"loud\": false}}, {\"script\": \"true\"}]",
	              NULL);
	skills_result("\"steps\": [{\"script\": \"true\"}, {\"skill\": \"echo\"}]",
	              "manifest run.json: steps[1].skill: no skill named `echo` among `skills` (`echo-json`)");
	skills_result("\"steps\": [{\"skill\": \"echo-json\", \"inputs\": {\"greeting\": \"hi\", \"count\": 2}}]",
	              "manifest run.json: steps[0].inputs: skill `echo-json`: missing input `loud` (declared: "
	              "`greeting`, `count`, `loud`)");

	/* A broken bundle is reported with its place in `skills`. */
	struct rb_manifest m;
	parse_ok("{" HEAD "\"skills\": [\"tests/unit/fixtures/skills/valid\", "
	         "\"tests/unit/fixtures/skills/not-executable\"], " ONE_STEP "}",
	         repo, &m);
	struct rb_skill *sk = NULL;
	size_t n = 0;
	struct rb_error err = {0};
	assert_int_not_equal(rb_manifest_load_skills(&m, &sk, &n, &err), 0);
	rb_manifest_free(&m);
	assert_true(strncmp(err.msg, "manifest run.json: skills[1]: skill bundle `", 44) == 0);
	assert_non_null(strstr(err.msg, "entry `run.sh`: not executable"));

	/* Two bundles (two folders) with one name. */
	char twin[PATH_MAX + 64], text[PATH_MAX * 2];
	snprintf(twin, sizeof twin, "%s/twin", tmpdir);
	assert_int_equal(mkdir(twin, 0755), 0);
	snprintf(text, sizeof text, "%s/SKILL.md", twin);
	write_file(text, "---\nname: echo-json\ndescription: twin\nentry: run.sh\n---\n");
	snprintf(text, sizeof text, "%s/run.sh", twin);
	write_file(text, "#!/bin/sh\n");
	assert_int_equal(chmod(text, 0755), 0);
	snprintf(text, sizeof text,
	         "{" HEAD "\"skills\": [\"tests/unit/fixtures/skills/valid\", \"%s\"], " ONE_STEP "}", twin);
	parse_ok(text, repo, &m);
	assert_int_not_equal(rb_manifest_load_skills(&m, &sk, &n, &err), 0);
	rb_manifest_free(&m);
	assert_string_equal(err.msg,
	                    "manifest run.json: skills[1]: a second skill named `echo-json` (skills[0] is one)");
}

/* docs/examples/manifest.json must parse, fit the shipped default policy's limits, and find
 * its skill with the inputs it gives. */
static void test_docs_example(void **state)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/docs/examples/manifest.json", repo);
	struct rb_manifest m;
	struct rb_error err = {0};
	if (rb_manifest_load(path, &m, &err) != 0)
		fail_msg("%s", err.msg);
	assert_int_equal(m.n_steps, 3);
	assert_int_equal(m.steps[2].kind, RB_MANIFEST_STEP_SKILL);
	struct stat st;
	assert_int_equal(stat(m.inputs[0].from, &st), 0);
	struct rb_policy p = test_policy(); /* the numbers of policy/profiles/default.json */
	if (rb_manifest_check_limits(&m, &p, &err) != 0)
		fail_msg("%s", err.msg);
	struct rb_skill *sk = NULL;
	size_t n = 0;
	if (rb_manifest_load_skills(&m, &sk, &n, &err) != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(sk[0].name, "word-count");
	rb_manifest_free_skills(sk, n);
	rb_manifest_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_full_manifest),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_error_paths),
	    cmocka_unit_test(test_input_destinations),
	    cmocka_unit_test(test_input_cow),
	    cmocka_unit_test(test_relative_paths),
	    cmocka_unit_test(test_limits_within_policy),
	    cmocka_unit_test(test_ceilings),
	    cmocka_unit_test(test_hash),
	    cmocka_unit_test(test_load_skills),
	    cmocka_unit_test(test_docs_example),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

/* Unit tests for policy/policy.c: the shipped profiles, strict validation with JSON paths in
 * errors, sizes and durations, the hash, and lookup by name and path. Run from the repo root. */
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

#include "common/util.h"
#include "policy/operator.h"
#include "policy/policy.h"

#include "fs_fixture.h"

static char repo[PATH_MAX];

/* The repo root holds policy/profiles; tests run from it, else __FILE__ locates it. */
static int find_repo(void **state)
{
	return repo_root(repo, sizeof repo, "policy/profiles/default.json", __FILE__, "tests/unit/test_policy.c");
}

static char tmpdir[PATH_MAX];

static int make_tmp(void **state)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/rb-test-policy.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int remove_tmp(void **state)
{
	struct rb_error err;
	return rb_rm_rf(tmpdir, &err);
}

/* Parses text expecting failure, and checks the message holds want. */
static void parse_fails(const char *text, const char *want)
{
	struct rb_policy p;
	struct rb_error err = {0};
	int r = rb_policy_parse(text, "x.json", NULL, &p, &err);
	if (r == 0 || !strstr(err.msg, want))
		fail_msg("parse of %s: r=%d, message \"%s\" lacks \"%s\"", text, r, err.msg, want);
}

static void parse_ok(const char *text, struct rb_policy *p)
{
	struct rb_error err = {0};
	if (rb_policy_parse(text, "x.json", NULL, p, &err) != 0)
		fail_msg("parse of %s failed: %s", text, err.msg);
}

static bool has_env(const struct rb_policy *p, const char *entry)
{
	for (unsigned i = 0; i < p->n_env_set; i++)
		if (!strcmp(p->env_set[i], entry))
			return true;
	return false;
}

static void test_default_profile(void **state)
{
	struct rb_policy p;
	struct rb_error err = {0};
	if (rb_policy_load("default", repo, NULL, &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(p.name, "default");
	assert_int_equal(p.uid, 0);
	assert_int_equal(p.gid, 0);
	assert_int_equal(p.id_range, RB_ID_RANGE_AUTO);
	assert_int_equal(__builtin_popcountll(p.caps), 14);
	assert_true(p.caps & (1ull << rb_cap_from_name("CAP_AUDIT_WRITE")));
	assert_false(p.caps & (1ull << rb_cap_from_name("CAP_SYS_ADMIN")));
	assert_int_equal(p.timeout_ms, 30 * 60 * 1000);
	assert_int_equal(p.memory_bytes, 1ull << 30);
	assert_int_equal(p.pids, 1024);
	assert_true(p.cpus == 2.0);
	assert_int_equal(p.tmp_bytes, 256ull << 20);
	assert_int_equal(p.rlimit_nofile, 1024);
	assert_int_equal(p.rlimit_core, 0);
	assert_int_equal(p.rlimit_fsize, 1ull << 30);
	assert_string_equal(p.seccomp_profile, "default");
	assert_int_equal(p.net_mode, RB_NET_GATEWAY);
	assert_int_equal(p.n_input_allow, 1);
	assert_string_equal(p.input_allow[0], "/");
	assert_int_equal(p.n_env_pass, 4);
	assert_int_equal(p.n_env_set, 2);
	assert_true(has_env(&p, "HOME=/root"));
	assert_true(has_env(&p, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
	assert_int_equal(p.max_stdout, 1u << 20);
	assert_string_equal(p.shell, "/bin/sh");
	assert_string_equal(p.hostname, "runbox");
	assert_int_equal(strlen(p.hash), 64);
	rb_policy_free(&p);
}

static void test_strict_profile(void **state)
{
	struct rb_policy p, d;
	struct rb_error err = {0};
	if (rb_policy_load("strict", repo, NULL, &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(p.name, "strict");
	assert_int_equal(p.uid, 1000);
	assert_int_equal(p.caps, 0);
	assert_int_equal(p.timeout_ms, 5 * 60 * 1000);
	assert_int_equal(p.memory_bytes, 512ull << 20);
	assert_int_equal(p.pids, 256);
	assert_int_equal(p.net_mode, RB_NET_NONE);
	assert_int_equal(p.n_env_pass, 0);
	assert_true(has_env(&p, "HOME=/workspace"));
	assert_int_equal(p.max_stdout, 256u << 10);
	assert_int_equal(p.max_stderr, 256u << 10);
	/* Negative control: the two profiles are different documents, so different hashes. */
	assert_int_equal(rb_policy_load("default", repo, NULL, &d, &err), 0);
	assert_string_not_equal(p.hash, d.hash);
	rb_policy_free(&p);
	rb_policy_free(&d);
}

static void test_unknown_keys(void **state)
{
	parse_fails("{\"name\":\"x\",\"identity\":{\"uid\":0,\"capz\":[]}}",
	            "policy x.json: identity.capz: unknown key");
	parse_fails("{\"name\":\"x\",\"limitz\":{}}", "policy x.json: limitz: unknown key");
	parse_fails("{\"name\":\"x\",\"env\":{\"pass\":[],\"sett\":{}}}", "env.sett: unknown key");
	/* Positive control: the same documents without the stray key parse. */
	struct rb_policy p;
	parse_ok("{\"name\":\"x\",\"identity\":{\"uid\":0,\"capabilities\":[]}}", &p);
	rb_policy_free(&p);
}

static void test_wrong_types(void **state)
{
	struct rb_policy p;
	struct rb_error err = {0};
	assert_int_equal(
	    rb_policy_parse("{\"name\":\"s\",\"limits\":{\"memory\":true}}", "strict.json", NULL, &p, &err), -1);
	assert_non_null(strstr(err.msg, "policy strict.json: limits.memory: expected a size like \"256M\""));
	assert_non_null(strstr(err.msg, "got true"));

	parse_fails("{\"name\":\"x\",\"limits\":[]}", "limits: expected an object, got an array");
	parse_fails("{\"name\":\"x\",\"identity\":{\"uid\":\"0\"}}", "identity.uid: expected an integer, got \"0\"");
	parse_fails("{\"name\":\"x\",\"identity\":{\"uid\":-1}}", "identity.uid: -1 is out of range");
	parse_fails("{\"name\":\"x\",\"limits\":{\"pids\":1.5}}",
	            "limits.pids: expected an integer or \"unlimited\", got 1.5");
	parse_fails("{\"name\":\"x\",\"limits\":{\"cpus\":0}}", "limits.cpus: expected a number of cores");
	parse_fails("{\"name\":\"x\",\"limits\":{\"cpu_weight\":10001}}", "limits.cpu_weight: 10001 is out of range");
	parse_fails("{\"name\":\"x\",\"network\":{\"mode\":\"host\"}}", "network.mode: expected one of");
	parse_fails("{\"name\":\"x\",\"identity\":{\"id_range\":\"many\"}}", "identity.id_range: expected one of");
	parse_fails("{\"name\":\"x\",\"shell\":\"sh\"}", "shell: \"sh\": must be an absolute path");
	parse_fails("{\"name\":\"x\",\"hostname\":\"a b\"}", "hostname: \"a b\"");
	parse_fails("{\"name\":\"x\",\"description\":7}", "description: expected a string, got 7");
	parse_fails("{\"name\":\"x\",\"inputs\":{\"allow\":[\"/ok\",null]}}",
	            "inputs.allow[1]: expected a string, got null");
}

static void test_structure_errors(void **state)
{
	parse_fails("{\"description\":\"no name\"}", "name: required key is missing");
	parse_fails("{\"name\":\"\"}", "name: \"\"");
	parse_fails("[]", "expected an object, got an array");
	parse_fails("{\"name\":\"x\",", "policy x.json: line 1");
	parse_fails("{\"name\":\"x\",\"name\":\"y\"}", "duplicate");
	parse_fails("", "policy x.json: line");
}

static void test_capabilities(void **state)
{
	parse_fails("{\"name\":\"x\",\"identity\":{\"capabilities\":[\"CAP_CHOWN\",\"CAP_FLY\"]}}",
	            "identity.capabilities[1]: unknown capability \"CAP_FLY\"");
	parse_fails("{\"name\":\"x\",\"identity\":{\"capabilities\":[1]}}", "identity.capabilities[0]: expected");
	struct rb_policy p;
	parse_ok("{\"name\":\"x\",\"identity\":{\"capabilities\":[\"CAP_CHOWN\",\"kill\",\"cap_bpf\"]}}", &p);
	assert_int_equal(p.caps, (1ull << 0) | (1ull << 5) | (1ull << 39));
	rb_policy_free(&p);
}

static void test_cap_table(void **state)
{
	assert_string_equal(rb_cap_name(0), "CAP_CHOWN");
	assert_string_equal(rb_cap_name(21), "CAP_SYS_ADMIN");
	assert_string_equal(rb_cap_name(40), "CAP_CHECKPOINT_RESTORE");
	assert_null(rb_cap_name(41));
	for (unsigned i = 0; i <= 40; i++)
		assert_int_equal(rb_cap_from_name(rb_cap_name(i)), (int)i);
	assert_int_equal(rb_cap_from_name("net_admin"), 12);
	assert_int_equal(rb_cap_from_name("CAP_"), -1);
	assert_int_equal(rb_cap_from_name("CAP_NOPE"), -1);
	assert_int_equal(rb_cap_from_name(""), -1);
	assert_int_equal(rb_cap_from_name(NULL), -1);
}

static void test_sizes(void **state)
{
	struct rb_policy p;
	parse_ok("{\"name\":\"x\",\"limits\":{\"memory\":\"0.5G\",\"tmp_size\":4096,\"rootfs_size\":\"256k\","
	         "\"workspace_size\":\"1.5MiB\"},\"rlimits\":{\"core\":0,\"fsize\":\"2g\"}}",
	         &p);
	assert_int_equal(p.memory_bytes, 512ull << 20);
	assert_int_equal(p.tmp_bytes, 4096);
	assert_int_equal(p.rootfs_bytes, 256ull << 10);
	assert_int_equal(p.workspace_bytes, 3ull << 19);
	assert_int_equal(p.rlimit_core, 0);
	assert_int_equal(p.rlimit_fsize, 2ull << 30);
	rb_policy_free(&p);

	parse_fails("{\"name\":\"x\",\"limits\":{\"memory\":\"-1M\"}}", "limits.memory: expected a size");
	parse_fails("{\"name\":\"x\",\"limits\":{\"memory\":\"12Q\"}}", "got \"12Q\"");
	parse_fails("{\"name\":\"x\",\"limits\":{\"memory\":\"\"}}", "limits.memory: expected a size");
	parse_fails("{\"name\":\"x\",\"limits\":{\"memory\":-5}}", "got -5");
	parse_fails("{\"name\":\"x\",\"limits\":{\"memory\":1.5}}", "got 1.5");
	parse_fails("{\"name\":\"x\",\"limits\":{\"memory\":0}}", "limits.memory: must be at least 1 bytes");
	parse_fails("{\"name\":\"x\",\"output\":{\"max_stdout\":\"99999999T\"}}", "output.max_stdout: expected a size");
}

static void test_durations(void **state)
{
	struct rb_policy p;
	parse_ok("{\"name\":\"x\",\"limits\":{\"timeout\":\"300ms\"}}", &p);
	assert_int_equal(p.timeout_ms, 300);
	rb_policy_free(&p);
	parse_ok("{\"name\":\"x\",\"limits\":{\"timeout\":\"2.5s\"}}", &p);
	assert_int_equal(p.timeout_ms, 2500);
	rb_policy_free(&p);
	parse_ok("{\"name\":\"x\",\"limits\":{\"timeout\":\"1h\"}}", &p);
	assert_int_equal(p.timeout_ms, 3600000);
	rb_policy_free(&p);

	/* A bare number is ambiguous (seconds? milliseconds?) and refused. */
	parse_fails("{\"name\":\"x\",\"limits\":{\"timeout\":30}}", "limits.timeout: expected a duration like \"30s\"");
	parse_fails("{\"name\":\"x\",\"limits\":{\"timeout\":\"30x\"}}", "got \"30x\"");
	parse_fails("{\"name\":\"x\",\"limits\":{\"timeout\":\"0s\"}}", "limits.timeout: must be at least 1ms");
	/* A number in a string is as ambiguous as a bare one: the message says which units exist. */
	parse_fails("{\"name\":\"x\",\"limits\":{\"timeout\":\"10\"}}",
	            "limits.timeout: expected a duration like \"30s\" (a number, then us, ms, s, m or h), got \"10\"");
	parse_fails("{\"name\":\"x\",\"limits\":{\"timeout\":\" 10s\"}}", "limits.timeout: expected a duration");
	parse_fails("{\"name\":\"x\",\"limits\":{\"timeout\":\"-1s\"}}", "limits.timeout: expected a duration");
	parse_fails("{\"name\":\"x\",\"limits\":{\"timeout\":\"1e3s\"}}", "limits.timeout: expected a duration");
	/* Controls: the same digits with a unit are fine. */
	parse_ok("{\"name\":\"x\",\"limits\":{\"timeout\":\"10s\"}}", &p);
	assert_int_equal(p.timeout_ms, 10000);
	rb_policy_free(&p);
	uint64_t ms = 0;
	assert_int_equal(rb_parse_duration_ms("10", &ms), -1);
	assert_int_equal(rb_parse_duration_ms("10m", &ms), 0);
	assert_int_equal(ms, 600000);
}

static void test_defaults(void **state)
{
	struct rb_policy p;
	parse_ok("{\"name\":\"bare\"}", &p);
	assert_string_equal(p.name, "bare");
	assert_int_equal(p.uid, 0);
	assert_int_equal(p.caps, 0);
	assert_int_equal(p.id_range, RB_ID_RANGE_AUTO);
	/* Absent is safe: no limit named means the shipped default profile's, not none. */
	assert_int_equal(p.timeout_ms, 30 * 60 * 1000);
	assert_int_equal(p.memory_bytes, 1ull << 30);
	assert_int_equal(p.pids, 1024);
	assert_true(p.cpus == 2.0);
	assert_int_equal(p.rootfs_bytes, 1ull << 30);
	assert_int_equal(p.workspace_bytes, 1ull << 30);
	assert_int_equal(p.tmp_bytes, 256ull << 20);
	assert_int_equal(p.rlimit_nofile, 1024);
	assert_int_equal(p.rlimit_nproc, 4096);
	assert_int_equal(p.rlimit_core, 0);
	assert_int_equal(p.rlimit_fsize, 1ull << 30);
	assert_string_equal(p.seccomp_profile, "default");
	assert_int_equal(p.net_mode, RB_NET_NONE);
	assert_int_equal(p.n_input_allow, 0);
	assert_int_equal(p.n_env_pass, 0);
	assert_int_equal(p.n_env_set, 1);
	assert_string_equal(p.env_set[0], "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	assert_int_equal(p.max_stdout, 1u << 20);
	assert_int_equal(p.max_stderr, 1u << 20);
	/* A run's storage budget is never absent: safe defaults (docs/policy.md). */
	assert_int_equal(p.run_bytes, 1ull << 30);
	assert_int_equal(p.run_files, 100000);
	assert_int_equal(p.run_events, 100000);
	assert_int_equal(p.tenant_bytes, 50ull << 30);
	assert_int_equal(p.min_free, 1ull << 30);
	assert_string_equal(p.shell, "/bin/sh");
	assert_string_equal(p.hostname, "runbox");
	rb_policy_free(&p);

	parse_ok("{\"name\":\"x\",\"output\":{\"run_bytes\":\"2M\",\"run_files\":7,\"run_events\":0,"
	         "\"tenant_bytes\":\"1G\",\"min_free\":0}}",
	         &p);
	assert_int_equal(p.run_bytes, 2u << 20);
	assert_int_equal(p.run_files, 7);
	assert_int_equal(p.run_events, 0);
	assert_int_equal(p.tenant_bytes, 1u << 30);
	assert_int_equal(p.min_free, 0);
	rb_policy_free(&p);
	parse_fails("{\"name\":\"x\",\"output\":{\"run_files\":\"many\"}}", "output.run_files: expected an integer");
	parse_fails("{\"name\":\"x\",\"output\":{\"min_free\":-1}}", "output.min_free: expected a size");

	/* An explicit PATH (even empty) replaces the default rather than adding a second one. */
	parse_ok("{\"name\":\"x\",\"env\":{\"set\":{\"PATH\":\"\"}}}", &p);
	assert_int_equal(p.n_env_set, 1);
	assert_string_equal(p.env_set[0], "PATH=");
	rb_policy_free(&p);
}

static void count_line(void *ctx, const char *text)
{
	char *buf = ctx;
	size_t n = strlen(buf);
	snprintf(buf + n, 4096 - n, "%s\n", text);
}

/* "unlimited" must be written to get no limit, and validate's report says so, line by line. */
static void test_unlimited(void **state)
{
	struct rb_policy p;
	parse_ok(
	    "{\"name\":\"u\",\"limits\":{\"timeout\":\"unlimited\",\"memory\":\"unlimited\",\"pids\":"
	    "\"unlimited\",\"cpus\":\"unlimited\"},\"rlimits\":{\"nofile\":\"unlimited\",\"fsize\":\"unlimited\"}}",
	    &p);
	assert_int_equal(p.timeout_ms, 0);
	assert_int_equal(p.memory_bytes, 0);
	assert_int_equal(p.pids, 0);
	assert_true(p.cpus == 0);
	assert_int_equal(p.rlimit_nofile, UINT64_MAX);
	assert_int_equal(p.rlimit_fsize, UINT64_MAX);
	assert_int_equal(p.rlimit_nproc, 4096); /* not written: the default */
	char buf[4096] = "";
	assert_int_equal(rb_policy_open_settings(&p, count_line, buf), 6);
	assert_non_null(strstr(buf, "limits.timeout: unlimited"));
	assert_non_null(strstr(buf, "limits.memory: unlimited"));
	assert_non_null(strstr(buf, "limits.pids: unlimited"));
	assert_non_null(strstr(buf, "limits.cpus: unlimited"));
	assert_non_null(strstr(buf, "rlimits.nofile: unlimited"));
	assert_non_null(strstr(buf, "rlimits.fsize: unlimited"));
	rb_policy_free(&p);

	/* Control: a bare policy leaves nothing unlimited and nothing permissive open. */
	parse_ok("{\"name\":\"bare\"}", &p);
	buf[0] = '\0';
	assert_int_equal(rb_policy_open_settings(&p, count_line, buf), 0);
	rb_policy_free(&p);
	/* ... and what widens is named: capabilities, allowed syscalls, gateway, inputs, env.pass. */
	parse_ok("{\"name\":\"w\",\"identity\":{\"capabilities\":[\"CAP_SYS_ADMIN\"]},\"seccomp\":{\"allow\":"
	         "[\"ptrace\"]},\"network\":{\"mode\":\"gateway\"},\"inputs\":{\"allow\":[\"/\"]},\"env\":{\"pass\":"
	         "[\"HOME\"]}}",
	         &p);
	assert_int_equal(rb_policy_open_settings(&p, count_line, buf), 5);
	assert_non_null(strstr(buf, "identity.capabilities: CAP_SYS_ADMIN"));
	assert_non_null(strstr(buf, "seccomp.allow: ptrace"));
	assert_non_null(strstr(buf, "network.mode: gateway"));
	assert_non_null(strstr(buf, "inputs.allow: /"));
	assert_non_null(strstr(buf, "env.pass: HOME"));
	rb_policy_free(&p);

	/* "unlimited" is a word, not any string; and a size limit of the tmpfs has no such value. */
	parse_fails("{\"name\":\"x\",\"limits\":{\"memory\":\"Unlimited\"}}", "limits.memory: expected a size");
	parse_fails("{\"name\":\"x\",\"limits\":{\"tmp_size\":\"unlimited\"}}", "limits.tmp_size: expected a size");
}

static void test_env_seccomp_inputs(void **state)
{
	parse_fails("{\"name\":\"x\",\"env\":{\"pass\":[\"OK\",\"1BAD\"]}}", "env.pass[1]: \"1BAD\"");
	parse_fails("{\"name\":\"x\",\"env\":{\"set\":{\"A=B\":\"v\"}}}", "env.set.A=B: not a valid");
	parse_fails("{\"name\":\"x\",\"env\":{\"set\":{\"A\":1}}}", "env.set.A: expected a string, got 1");
	parse_fails("{\"name\":\"x\",\"env\":{\"pass\":[\"HOME\"],\"set\":{\"HOME\":\"/\"}}}", "also in env.pass");
	parse_fails("{\"name\":\"x\",\"seccomp\":{\"profile\":\"../etc\"}}", "seccomp.profile: \"../etc\"");
	parse_fails("{\"name\":\"x\",\"seccomp\":{\"deny\":[\"Open\"]}}", "seccomp.deny[0]: \"Open\"");
	parse_fails("{\"name\":\"x\",\"seccomp\":{\"allow\":[\"\"]}}", "seccomp.allow[0]");
	parse_fails("{\"name\":\"x\",\"seccomp\":{\"deny\":[\"ptrace\"],\"allow\":[\"ptrace\"]}}",
	            "\"ptrace\" is also in seccomp.deny");
	parse_fails("{\"name\":\"x\",\"inputs\":{\"allow\":[\"data\"]}}",
	            "inputs.allow[0]: \"data\": a prefix must be an absolute path");
	parse_fails("{\"name\":\"x\",\"inputs\":{\"allow\":[\"/srv/../etc\"]}}", "inputs.allow[0]");

	struct rb_policy p;
	parse_ok(
	    "{\"name\":\"x\",\"seccomp\":{\"profile\":\"my-prof_2\",\"deny\":[\"ptrace\",\"io_uring_setup\"]},"
	    "\"inputs\":{\"allow\":[\"/srv/data//\",\"/\"]},\"env\":{\"pass\":[\"_X1\"],\"set\":{\"a_b\":\"c=d\"}}}",
	    &p);
	assert_string_equal(p.seccomp_profile, "my-prof_2");
	assert_int_equal(p.n_seccomp_deny, 2);
	assert_string_equal(p.seccomp_deny[1], "io_uring_setup");
	assert_string_equal(p.input_allow[0], "/srv/data");
	assert_string_equal(p.input_allow[1], "/");
	assert_true(has_env(&p, "a_b=c=d"));
	rb_policy_free(&p);
}

static void test_list_cap(void **state)
{
	char text[8192];
	int n = snprintf(text, sizeof text, "{\"name\":\"x\",\"env\":{\"pass\":[");
	for (int i = 0; i <= RB_POLICY_MAX_LIST; i++)
		n += snprintf(text + n, sizeof text - (size_t)n, "%s\"V%d\"", i ? "," : "", i);
	snprintf(text + n, sizeof text - (size_t)n, "]}}");
	parse_fails(text, "env.pass: at most 128 entries, got 129");
}

static void test_hash(void **state)
{
	struct rb_policy a, b, c;
	parse_ok("{\"name\":\"h\",\"limits\":{\"memory\":\"1G\",\"pids\":10},\"network\":{\"mode\":\"none\"}}", &a);
	parse_ok("{\n  \"network\" : { \"mode\": \"none\" },\n\t\"limits\": {\"pids\": 10, \"memory\": \"1G\"},\n"
	         "  \"name\": \"h\"\n}\n",
	         &b);
	parse_ok("{\"name\":\"h\",\"limits\":{\"memory\":\"1G\",\"pids\":11},\"network\":{\"mode\":\"none\"}}", &c);
	assert_string_equal(a.hash, b.hash);
	assert_string_not_equal(a.hash, c.hash);
	for (int i = 0; i < 64; i++)
		assert_non_null(strchr("0123456789abcdef", a.hash[i]));
	rb_policy_free(&a);
	rb_policy_free(&b);
	rb_policy_free(&c);
}

static void test_hash_covers_seccomp_profile(void **state)
{
	const char *doc = "{\"name\":\"h\",\"seccomp\":{\"profile\":\"p\"}}";
	struct rb_policy alone, with1, with2;
	struct rb_error err = {0};
	assert_int_equal(rb_policy_parse(doc, "h.json", NULL, &alone, &err), 0);
	/* A data dir without the profile file hashes the policy alone. */
	assert_int_equal(rb_policy_parse(doc, "h.json", tmpdir, &with1, &err), 0);
	assert_string_equal(alone.hash, with1.hash);
	rb_policy_free(&with1);
	put_file(tmpdir, "policy/seccomp/p.json", "{\"default_action\":\"allow\"}", 0644);
	assert_int_equal(rb_policy_parse(doc, "h.json", tmpdir, &with1, &err), 0);
	assert_string_not_equal(alone.hash, with1.hash);
	put_file(tmpdir, "policy/seccomp/p.json", "{\"default_action\":\"errno\"}", 0644);
	assert_int_equal(rb_policy_parse(doc, "h.json", tmpdir, &with2, &err), 0);
	assert_string_not_equal(with1.hash, with2.hash);
	/* Expected value: sha256 of the canonical JSON followed by the profile bytes. */
	const char *concat = "{\"name\":\"h\",\"seccomp\":{\"profile\":\"p\"}}{\"default_action\":\"errno\"}";
	char want[65];
	rb_sha256_hex(concat, strlen(concat), want);
	assert_string_equal(with2.hash, want);
	rb_policy_free(&alone);
	rb_policy_free(&with1);
	rb_policy_free(&with2);

	/* A profile that exists but cannot be read is an error, not a silently weaker hash (a
	 * directory stands in for an unreadable file: the tests run as root). */
	put_file(tmpdir, "policy/seccomp/d.json/x", "", 0644);
	assert_int_equal(
	    rb_policy_parse("{\"name\":\"h\",\"seccomp\":{\"profile\":\"d\"}}", "h.json", tmpdir, &alone, &err), -1);
	assert_non_null(strstr(err.msg, "policy h.json: seccomp.profile"));
}

static void test_load_by_path(void **state)
{
	put_file(tmpdir, "mine.json", "{\"name\":\"mine\",\"limits\":{\"pids\":7}}", 0644);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/mine.json", tmpdir);
	struct rb_policy p;
	struct rb_error err = {0};
	if (rb_policy_load(path, repo, NULL, &p, &err) != 0)
		fail_msg("%s", err.msg);
	assert_string_equal(p.name, "mine");
	assert_int_equal(p.pids, 7);
	rb_policy_free(&p);

	/* The shipped file by its path gives the same policy as by its name. */
	struct rb_policy byname, bypath;
	snprintf(path, sizeof path, "%s/policy/profiles/strict.json", repo);
	assert_int_equal(rb_policy_load(path, repo, NULL, &bypath, &err), 0);
	assert_int_equal(rb_policy_load("strict", repo, NULL, &byname, &err), 0);
	assert_string_equal(byname.hash, bypath.hash);
	rb_policy_free(&byname);
	rb_policy_free(&bypath);

	/* Errors in a file name the file. */
	put_file(tmpdir, "bad.json", "{\"name\":\"bad\",\"limits\":{\"memory\":true}}", 0644);
	snprintf(path, sizeof path, "%s/bad.json", tmpdir);
	assert_int_equal(rb_policy_load(path, repo, NULL, &p, &err), -1);
	assert_non_null(strstr(err.msg, "bad.json: limits.memory: expected a size"));

	snprintf(path, sizeof path, "%s/absent.json", tmpdir);
	assert_int_equal(rb_policy_load(path, repo, NULL, &p, &err), -1);
	assert_non_null(strstr(err.msg, "absent.json"));
	assert_int_equal(rb_policy_load(tmpdir, repo, NULL, &p, &err), -1);
	assert_non_null(strstr(err.msg, "not a regular file"));
}

static void test_file_cap(void **state)
{
	char path[PATH_MAX + 32];
	snprintf(path, sizeof path, "%s/huge.json", tmpdir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("{\"name\":\"huge\",\"description\":\"", f);
	for (int i = 0; i < (1 << 20); i++)
		fputc('a', f);
	fputs("\"}", f);
	fclose(f);
	struct rb_policy p;
	struct rb_error err = {0};
	assert_int_equal(rb_policy_load(path, NULL, NULL, &p, &err), -1);
	assert_non_null(strstr(err.msg, "larger than"));
}

static void test_load_by_name_search_order(void **state)
{
	char config[PATH_MAX + 16];
	snprintf(config, sizeof config, "%s/config", tmpdir);
	put_file(config, "policies/default.json", "{\"name\":\"site-default\"}", 0644);
	put_file(config, "policies/team.json", "{\"name\":\"team\",\"network\":{\"mode\":\"gateway\"}}", 0644);

	struct rb_policy p;
	struct rb_error err = {0};
	/* The operator's file shadows the shipped profile of the same name. */
	assert_int_equal(rb_policy_load("default", repo, config, &p, &err), 0);
	assert_string_equal(p.name, "site-default");
	rb_policy_free(&p);
	/* Names only the config dir has, and names only the data dir has, both load. */
	assert_int_equal(rb_policy_load("team", repo, config, &p, &err), 0);
	assert_int_equal(p.net_mode, RB_NET_GATEWAY);
	rb_policy_free(&p);
	assert_int_equal(rb_policy_load("strict", repo, config, &p, &err), 0);
	assert_string_equal(p.name, "strict");
	rb_policy_free(&p);
}

static void test_missing_name_lists_places(void **state)
{
	char config[PATH_MAX + 16], want[2 * PATH_MAX];
	snprintf(config, sizeof config, "%s/config", tmpdir);
	struct rb_policy p;
	struct rb_error err = {0};
	assert_int_equal(rb_policy_load("nosuch", repo, config, &p, &err), -1);
	assert_non_null(strstr(err.msg, "policy \"nosuch\" not found"));
	snprintf(want, sizeof want, "%s/policies/nosuch.json", config);
	assert_non_null(strstr(err.msg, want));
	snprintf(want, sizeof want, "%s/policy/profiles/nosuch.json", repo);
	assert_non_null(strstr(err.msg, want));

	/* Names are not paths: no way out of the two directories. */
	assert_int_equal(rb_policy_load("..", repo, config, &p, &err), -1);
	assert_non_null(strstr(err.msg, "a name is"));
}

/* The operator's config.json: absent is every default; present is strict. */
static void test_operator_config(void **state)
{
	struct rb_operator_config oc;
	struct rb_error err = {0};
	oc.manifest_policy_paths = true;
	assert_int_equal(rb_operator_config_load(tmpdir, &oc, &err), 0);
	assert_false(oc.manifest_policy_paths);
	put_file(tmpdir, "config.json", "{\"manifest_policy_paths\": true}", 0644);
	assert_int_equal(rb_operator_config_load(tmpdir, &oc, &err), 0);
	assert_true(oc.manifest_policy_paths);
	put_file(tmpdir, "config.json", "{\"manifest_policy_paths\": false}", 0644);
	assert_int_equal(rb_operator_config_load(tmpdir, &oc, &err), 0);
	assert_false(oc.manifest_policy_paths);
	/* A misspelt key or a wrong type never leaves the setting silently on or off. */
	put_file(tmpdir, "config.json", "{\"manifest_policy_path\": true}", 0644);
	assert_int_equal(rb_operator_config_load(tmpdir, &oc, &err), -1);
	assert_non_null(strstr(err.msg, "manifest_policy_path: unknown key"));
	put_file(tmpdir, "config.json", "{\"manifest_policy_paths\": \"yes\"}", 0644);
	assert_int_equal(rb_operator_config_load(tmpdir, &oc, &err), -1);
	assert_non_null(strstr(err.msg, "manifest_policy_paths: expected true or false, got \"yes\""));
	put_file(tmpdir, "config.json", "[true]", 0644);
	assert_int_equal(rb_operator_config_load(tmpdir, &oc, &err), -1);
	assert_int_equal(rb_operator_config_load(NULL, &oc, &err), 0);
}

/* images: host directory prefixes for directory images (none by default) and the bounds of
 * their digest walk, validated like inputs.allow. */
static void test_images_section(void **state)
{
	struct rb_policy p;
	parse_ok("{\"name\":\"x\"}", &p);
	assert_int_equal(p.n_image_allow, 0);
	assert_int_equal(p.image_max_entries, 1000000);
	assert_int_equal(p.image_max_bytes, 16ull << 30);
	assert_false(p.image_keep_setuid); /* absent is safe: setuid bits and file caps are dropped */
	assert_false(p.image_keep_file_caps);
	rb_policy_free(&p);
	for (const char *const *name = (const char *const[]){"default", "strict", NULL}; *name; name++) {
		struct rb_error err = {0};
		if (rb_policy_load(*name, repo, NULL, &p, &err) != 0)
			fail_msg("%s", err.msg);
		assert_int_equal(p.n_image_allow, 0); /* a shipped profile allows no directory image */
		assert_false(p.image_keep_setuid || p.image_keep_file_caps);
		rb_policy_free(&p);
	}
	parse_ok("{\"name\":\"x\",\"images\":{\"keep_setuid\":true,\"keep_file_caps\":false}}", &p);
	assert_true(p.image_keep_setuid);
	assert_false(p.image_keep_file_caps);
	rb_policy_free(&p);
	parse_ok("{\"name\":\"x\",\"images\":{\"keep_file_caps\":true}}", &p);
	assert_false(p.image_keep_setuid);
	assert_true(p.image_keep_file_caps);
	rb_policy_free(&p);
	parse_fails("{\"name\":\"x\",\"images\":{\"keep_setuid\":\"yes\"}}",
	            "images.keep_setuid: expected true or false");
	parse_fails("{\"name\":\"x\",\"images\":{\"keep_file_caps\":1}}",
	            "images.keep_file_caps: expected true or false");

	parse_ok("{\"name\":\"x\",\"images\":{\"allow\":[\"/srv/img//\",\"/\"],\"max_entries\":5,"
	         "\"max_bytes\":\"1M\"}}",
	         &p);
	assert_int_equal(p.n_image_allow, 2);
	assert_string_equal(p.image_allow[0], "/srv/img");
	assert_string_equal(p.image_allow[1], "/");
	assert_int_equal(p.image_max_entries, 5);
	assert_int_equal(p.image_max_bytes, 1u << 20);
	rb_policy_free(&p);

	parse_fails("{\"name\":\"x\",\"images\":[]}", "images: expected an object");
	parse_fails("{\"name\":\"x\",\"images\":{\"allowed\":[]}}", "images.allowed: unknown key");
	parse_fails("{\"name\":\"x\",\"images\":{\"allow\":[\"img\"]}}",
	            "images.allow[0]: \"img\": a prefix must be an absolute path");
	parse_fails("{\"name\":\"x\",\"images\":{\"allow\":[\"/srv/./img\"]}}", "images.allow[0]");
	parse_fails("{\"name\":\"x\",\"images\":{\"allow\":\"/srv\"}}", "images.allow: expected an array");
	parse_fails("{\"name\":\"x\",\"images\":{\"max_entries\":0}}", "images.max_entries: 0 is out of range");
	parse_fails("{\"name\":\"x\",\"images\":{\"max_entries\":\"5\"}}", "images.max_entries: expected an integer");
	parse_fails("{\"name\":\"x\",\"images\":{\"max_bytes\":true}}", "images.max_bytes: expected a size");
	parse_fails("{\"name\":\"x\",\"images\":{\"max_bytes\":0}}", "images.max_bytes: must be at least 1");
}

/* network.mcp (names, or {name, tools} narrowing) and network.approval's two rule shapes. */
static void test_network_mcp(void **state)
{
	struct rb_policy p;
	parse_ok("{\"name\":\"m\",\"network\":{\"mode\":\"gateway\",\"mcp\":[\"files\",{\"name\":\"s\",\"tools\":"
	         "[\"q\",\"r_*\"]},{\"name\":\"t\",\"tools\":[]}],\"approval\":[{\"mcp\":\"files\",\"tools\":"
	         "[\"send*\"]},{\"connector\":\"pay\",\"methods\":[\"post\"]}]}}",
	         &p);
	assert_int_equal(p.n_mcp, 3);
	assert_string_equal(p.mcp[0].name, "files");
	assert_false(p.mcp[0].narrowed);
	assert_true(p.mcp[1].narrowed);
	assert_int_equal(p.mcp[1].n_tools, 2);
	assert_string_equal(p.mcp[1].tools[1], "r_*");
	assert_true(p.mcp[2].narrowed); /* narrowed to nothing: no tool */
	assert_int_equal(p.mcp[2].n_tools, 0);
	assert_int_equal(p.n_approvals, 2);
	assert_string_equal(p.approvals[0].mcp, "files");
	assert_string_equal(p.approvals[0].connector, "");
	assert_string_equal(p.approvals[0].tools[0], "send*");
	assert_string_equal(p.approvals[1].connector, "pay");
	assert_string_equal(p.approvals[1].methods[0], "POST");
	rb_policy_free(&p);
	parse_fails("{\"name\":\"m\",\"network\":{\"mcp\":[\"files\"]}}", "network.mcp: needs network.mode");
	parse_fails("{\"name\":\"m\",\"network\":{\"mode\":\"gateway\",\"mcp\":[\"a\",\"a\"]}}", "listed twice");
	parse_fails("{\"name\":\"m\",\"network\":{\"mode\":\"gateway\",\"mcp\":[{\"name\":\"a\",\"x\":1}]}}",
	            "network.mcp[0]");
	parse_fails(
	    "{\"name\":\"m\",\"network\":{\"mode\":\"gateway\",\"mcp\":[{\"name\":\"a\",\"tools\":[\"a b\"]}]}}",
	    "network.mcp[0].tools");
	parse_fails("{\"name\":\"m\",\"network\":{\"mode\":\"gateway\",\"approval\":[{\"mcp\":\"a\",\"connector\":"
	            "\"b\",\"tools\":[\"x\"]}]}}",
	            "exactly one of");
	parse_fails("{\"name\":\"m\",\"network\":{\"mode\":\"gateway\",\"approval\":[{\"mcp\":\"a\"}]}}",
	            "network.approval[0].tools");
	parse_fails("{\"name\":\"m\",\"network\":{\"mode\":\"gateway\",\"approval\":[{\"connector\":\"a\",\"tools\":"
	            "[\"x\"],\"methods\":[\"GET\"]}]}}",
	            "not tools");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_profile),
	    cmocka_unit_test(test_strict_profile),
	    cmocka_unit_test(test_unknown_keys),
	    cmocka_unit_test(test_wrong_types),
	    cmocka_unit_test(test_structure_errors),
	    cmocka_unit_test(test_capabilities),
	    cmocka_unit_test(test_cap_table),
	    cmocka_unit_test(test_sizes),
	    cmocka_unit_test(test_durations),
	    cmocka_unit_test(test_defaults),
	    cmocka_unit_test(test_unlimited),
	    cmocka_unit_test(test_env_seccomp_inputs),
	    cmocka_unit_test(test_images_section),
	    cmocka_unit_test(test_network_mcp),
	    cmocka_unit_test(test_list_cap),
	    cmocka_unit_test(test_hash),
	    cmocka_unit_test_setup_teardown(test_hash_covers_seccomp_profile, make_tmp, remove_tmp),
	    cmocka_unit_test_setup_teardown(test_load_by_path, make_tmp, remove_tmp),
	    cmocka_unit_test_setup_teardown(test_file_cap, make_tmp, remove_tmp),
	    cmocka_unit_test_setup_teardown(test_load_by_name_search_order, make_tmp, remove_tmp),
	    cmocka_unit_test_setup_teardown(test_missing_name_lists_places, make_tmp, remove_tmp),
	    cmocka_unit_test_setup_teardown(test_operator_config, make_tmp, remove_tmp),
	};
	return cmocka_run_group_tests(tests, find_repo, NULL);
}

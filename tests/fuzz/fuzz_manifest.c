/* Fuzz target: the manifest parser (rb_manifest_parse). Any text is refused or parsed; a
 * parsed manifest keeps the shapes manifest.h promises (inputs land under /workspace/in/, host
 * paths are absolute and folded, at least one step, NULL-terminated env lists). */
#define _GNU_SOURCE
#include "common/error.h"
#include "policy/manifest.h"
#include "tests/fuzz/fuzz.h"

/* A path with a ".", ".." or empty component, or a trailing '/'. */
static int path_unfolded(const char *p)
{
	size_t n = strlen(p);
	if (strstr(p, "//") || strstr(p, "/./") || strstr(p, "/../"))
		return 1;
	if (n >= 2 && strcmp(p + n - 2, "/.") == 0)
		return 1;
	if (n >= 3 && strcmp(p + n - 3, "/..") == 0)
		return 1;
	return n > 1 && p[n - 1] == '/';
}

static void check_env(char **env, size_t n, const char *where)
{
	if (!env)
		FUZZ_FAIL("%s env is NULL", where);
	for (size_t i = 0; i < n; i++)
		if (!env[i] || !strchr(env[i], '='))
			FUZZ_FAIL("%s env[%zu] is not NAME=value", where, i);
	if (env[n])
		FUZZ_FAIL("%s env is not NULL-terminated at %zu", where, n);
}

static void check(const struct rb_manifest *m)
{
	if (m->n_steps < 1 || !m->steps)
		FUZZ_FAIL("a parsed manifest has no step");
	if (strlen(m->hash) != 64 || strspn(m->hash, "0123456789abcdef") != 64)
		FUZZ_FAIL("manifest hash '%.80s' is not 64 hex digits", m->hash);
	for (size_t i = 0; i < m->n_inputs; i++) {
		const struct rb_manifest_input *in = &m->inputs[i];
		size_t pre = strlen(RB_MANIFEST_IN_DIR);
		if (!in->to || strncmp(in->to, RB_MANIFEST_IN_DIR, pre) != 0 || !in->to[pre] || path_unfolded(in->to))
			FUZZ_FAIL("input %zu lands at '%s', not a folded path under " RB_MANIFEST_IN_DIR, i,
			          in->to ? in->to : "(null)");
		if (in->kind == RB_MANIFEST_INPUT_HOST && (!in->from || in->from[0] != '/' || path_unfolded(in->from)))
			FUZZ_FAIL("input %zu from '%s' is not absolute and folded", i, in->from ? in->from : "(null)");
		if (in->kind == RB_MANIFEST_INPUT_ARTIFACT &&
		    (!in->artifact || strlen(in->artifact) != 64 || strspn(in->artifact, "0123456789abcdef") != 64))
			FUZZ_FAIL("input %zu artifact '%s' is not 64 hex digits", i,
			          in->artifact ? in->artifact : "(null)");
	}
	check_env(m->env, m->n_env, "manifest");
	for (size_t i = 0; i < m->n_steps; i++) {
		const struct rb_manifest_step *s = &m->steps[i];
		if (s->kind == RB_MANIFEST_STEP_SCRIPT && !s->script)
			FUZZ_FAIL("script step %zu has no script", i);
		if (s->kind == RB_MANIFEST_STEP_SKILL && (!s->skill || !json_is_object(s->inputs)))
			FUZZ_FAIL("skill step %zu has no skill name or no inputs object", i);
		check_env(s->env, s->n_env, "step");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size);
	if (!text)
		return 0;
	struct rb_manifest a = {0}, b = {0};
	struct rb_error err = {0};
	if (rb_manifest_parse(text, "fuzz.json", "/nonexistent/fuzz", &a, &err) == 0) {
		check(&a);
		struct rb_error err2 = {0};
		if (rb_manifest_parse(text, "fuzz.json", "/nonexistent/fuzz", &b, &err2) != 0)
			FUZZ_FAIL("a manifest parsed once is refused the second time: %s", err2.msg);
		if (strcmp(a.hash, b.hash) != 0)
			FUZZ_FAIL("one manifest text, two hashes");
	} else if (err.msg[0] == '\0') {
		FUZZ_FAIL("a refused manifest comes with no message");
	}
	rb_manifest_free(&b);
	rb_manifest_free(&a);
	free(text);
	return 0;
}

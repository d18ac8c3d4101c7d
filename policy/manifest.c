/* The run manifest parser: strict validation of docs/manifest.md's schema (every error names
 * the file and the JSON path), relative paths anchored at the manifest's folder, the canonical
 * hash for the ledger, and the checks that tie a manifest to its policy and its skills. */
#define _GNU_SOURCE
#include "policy/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/util.h"

#define MANIFEST_FILE_MAX (4u << 20)
#define MAX_ITEMS         1024 /* inputs, skills, steps, env entries: bounds the work a file can ask */
#define TEXT_MAX          255  /* image, agent_version, step names */
#define DEST_MAX          1024
#define DURATION_HINT     RB_DURATION_HINT
#define SIZE_HINT         "a size like \"512M\" or a number of bytes"

typedef struct rb_jsonck ctx;

static int oom(const ctx *c, const char *path)
{
	return rb_error_set(c->err, ENOMEM, "manifest %s: %s", c->origin, path);
}

/* ---- value checks ------------------------------------------------------------------------ */

bool rb_manifest_id_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > RB_MANIFEST_ID_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return false; /* ids become folder names: "." and ".." would name other folders */
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static bool env_name_ok(const char *s)
{
	if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
		return false;
	size_t n = strlen(s);
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static bool input_name_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 1 && n <= 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

static bool has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* A JSON string as C text: jansson keeps "\u0000" inside strings, which C would cut short. */
static int get_text(const ctx *c, const char *path, const json_t *v, size_t max, bool allow_ctl, const char **out)
{
	if (!json_is_string(v))
		return rb_jsonck_expected(c, path, "a string", v);
	const char *s = json_string_value(v);
	if (strlen(s) != json_string_length(v))
		return rb_jsonck_bad(c, path, "holds a NUL character");
	if (!*s)
		return rb_jsonck_bad(c, path, "must not be empty");
	if (max && strlen(s) > max)
		return rb_jsonck_bad(c, path, "longer than %zu characters", max);
	if (!allow_ctl && has_ctl(s))
		return rb_jsonck_bad(c, path, "holds a control character");
	*out = s;
	return 0;
}

static int dup_text(const ctx *c, const char *path, const json_t *v, size_t max, char **out)
{
	const char *s;
	if (get_text(c, path, v, max, false, &s) < 0)
		return -1;
	// NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): s is set when get_text returns 0
	if (!(*out = strdup(s)))
		return oom(c, path);
	return 0;
}

static int get_id(const ctx *c, const char *path, const json_t *v, char out[RB_MANIFEST_ID_MAX + 1])
{
	if (!json_is_string(v))
		return rb_jsonck_expected(c, path, "a string", v);
	const char *s = json_string_value(v);
	if (strlen(s) != json_string_length(v) || !rb_manifest_id_ok(s)) {
		char buf[96];
		return rb_jsonck_bad(c, path, "%s is not an id ([A-Za-z0-9._-]{1,64}, not \".\" or \"..\")",
		                     rb_jsonck_describe(v, buf, sizeof buf));
	}
	snprintf(out, RB_MANIFEST_ID_MAX + 1, "%s", s);
	return 0;
}

static int get_duration(const ctx *c, const char *path, const json_t *v, uint64_t *out)
{
	uint64_t ms;
	if (!json_is_string(v) || rb_parse_duration_ms(json_string_value(v), &ms) < 0)
		return rb_jsonck_expected(c, path, DURATION_HINT, v);
	if (ms == 0)
		return rb_jsonck_bad(c, path, "must be at least 1ms");
	*out = ms;
	return 0;
}

static int get_size(const ctx *c, const char *path, const json_t *v, uint64_t *out)
{
	uint64_t b = 0;
	if (json_is_integer(v) && json_integer_value(v) > 0)
		b = (uint64_t)json_integer_value(v);
	else if (!json_is_string(v) || rb_parse_size(json_string_value(v), &b) < 0)
		return rb_jsonck_expected(c, path, SIZE_HINT, v);
	if (b == 0)
		return rb_jsonck_bad(c, path, "must be at least 1 byte");
	*out = b;
	return 0;
}

/* ---- paths --------------------------------------------------------------------------------- */

/* base + p made absolute and folded lexically ("a/./b/../c" -> "a/c"): the manifest's own
 * folder anchors relative paths whatever the cwd of whoever runs it. */
static char *abs_path(const char *base, const char *p)
{
	_cleanup_free_ char *joined = NULL;
	if (p[0] == '/')
		joined = strdup(p);
	else if (asprintf(&joined, "%s/%s", base, p) < 0)
		joined = NULL;
	if (!joined)
		return NULL;
	char *out = malloc(strlen(joined) + 2);
	if (!out)
		return NULL;
	size_t n = 0;
	for (char *s = joined, *comp; (comp = strsep(&s, "/"));) {
		if (!*comp || !strcmp(comp, "."))
			continue;
		if (!strcmp(comp, "..")) {
			while (n > 0 && out[n - 1] != '/')
				n--;
			if (n > 0)
				n--; /* the slash before the dropped component; "/.." stays "/" */
			continue;
		}
		out[n++] = '/';
		memcpy(out + n, comp, strlen(comp));
		n += strlen(comp);
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return out;
}

static const char *dest_problem(const char *to, bool cow)
{
	size_t pre = strlen(RB_MANIFEST_IN_DIR);
	if (cow) {
		/* A writable overlay may go elsewhere in /workspace (a build's source tree), never on
		 * /workspace/in itself, nor where harvest or skills look. */
		pre = strlen("/workspace/");
		if (strncmp(to, "/workspace/", pre) != 0)
			return "must start with \"/workspace/\" (a cow input)";
		const char *r = to + pre;
		if (!strcmp(r, "in") || !strcmp(r, "out") || !strncmp(r, "out/", 4) || !strcmp(r, "skills") ||
		    !strncmp(r, "skills/", 7))
			return "is not a place for a cow input (not /workspace/in itself, /workspace/out or "
			       "/workspace/skills)";
	} else if (strncmp(to, RB_MANIFEST_IN_DIR, pre) != 0) {
		return "must start with \"" RB_MANIFEST_IN_DIR "\"";
	}
	if (!to[pre])
		return cow ? "must name a folder under /workspace/"
		           : "must name a file or folder under " RB_MANIFEST_IN_DIR;
	if (strlen(to) > DEST_MAX)
		return "too long";
	if (strstr(to, "//"))
		return "must not contain \"//\"";
	if (to[strlen(to) - 1] == '/')
		return "must not end with '/'";
	for (const char *p = to + pre; *p;) {
		size_t n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return "must not contain \".\" or \"..\" components";
		p += n;
		if (*p == '/')
			p++;
	}
	return NULL;
}

static bool dest_overlaps(const char *a, const char *b)
{
	// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): `to` is set when parse_input returns 0
	size_t na = strlen(a), nb = strlen(b), n = na < nb ? na : nb;
	return !strncmp(a, b, n) && (na == nb || (na < nb ? b[n] : a[n]) == '/');
}

/* ---- sections ------------------------------------------------------------------------------ */

/* An env object into "NAME=value" strings (NULL-terminated list, never NULL itself). */
static int parse_env(const ctx *c, const char *path, const json_t *v, char ***env, size_t *n_env)
{
	if (!json_is_object(v))
		return rb_jsonck_expected(c, path, "an object of NAME: \"value\"", v);
	size_t n = json_object_size(v);
	if (n > MAX_ITEMS)
		return rb_jsonck_bad(c, path, "at most %d variables", MAX_ITEMS);
	if (!(*env = calloc(n + 1, sizeof **env)))
		return oom(c, path);
	const char *name;
	json_t *val;
	json_object_foreach((json_t *)v, name, val)
	{
		char p[300];
		rb_jsonck_join(p, sizeof p, path, name);
		if (!env_name_ok(name))
			return rb_jsonck_bad(c, path,
			                     "\"%.64s\" is not a valid environment variable name "
			                     "([A-Za-z_][A-Za-z0-9_]*)",
			                     name);
		if (!strncmp(name, "RUNBOX_", 7))
			return rb_jsonck_bad(c, p, "names starting with RUNBOX_ are reserved for runbox");
		if (!json_is_string(val))
			return rb_jsonck_expected(c, p, "a string", val);
		const char *s = json_string_value(val);
		if (strlen(s) != json_string_length(val))
			return rb_jsonck_bad(c, p, "holds a NUL character");
		if (asprintf(&(*env)[*n_env], "%s=%s", name, s) < 0) {
			(*env)[*n_env] = NULL;
			return oom(c, p);
		}
		(*n_env)++;
	}
	return 0;
}

static int parse_limits(const ctx *c, const json_t *v, struct rb_manifest_limits *l)
{
	static const char *const keys[] = {"timeout", "memory", "pids", "cpus", NULL};
	if (!json_is_object(v))
		return rb_jsonck_expected(c, "limits", "an object", v);
	if (rb_jsonck_keys(c, "limits", v, keys) < 0)
		return -1;
	json_t *x;
	if ((x = json_object_get(v, "timeout")) && get_duration(c, "limits.timeout", x, &l->timeout_ms) < 0)
		return -1;
	if ((x = json_object_get(v, "memory")) && get_size(c, "limits.memory", x, &l->memory_bytes) < 0)
		return -1;
	if ((x = json_object_get(v, "pids"))) {
		if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > UINT32_MAX)
			return rb_jsonck_expected(c, "limits.pids", "an integer from 1 to 4294967295", x);
		l->pids = (uint64_t)json_integer_value(x);
	}
	if ((x = json_object_get(v, "cpus"))) {
		if (!json_is_number(x) || !(json_number_value(x) > 0) || !isfinite(json_number_value(x)))
			return rb_jsonck_expected(c, "limits.cpus", "a number of cores greater than 0", x);
		l->cpus = json_number_value(x);
	}
	return 0;
}

static int parse_input(const ctx *c, const char *path, const json_t *v, const char *base, struct rb_manifest_input *in)
{
	static const char *const keys[] = {"from", "artifact", "to", "cow", NULL};
	char p[300];
	if (!json_is_object(v))
		return rb_jsonck_expected(c, path, "an object with `from` or `artifact`, and `to`", v);
	if (rb_jsonck_keys(c, path, v, keys) < 0)
		return -1;
	json_t *from = json_object_get(v, "from"), *art = json_object_get(v, "artifact");
	json_t *to = json_object_get(v, "to");
	if (from && art)
		return rb_jsonck_bad(c, path, "has both `from` and `artifact`; an input is one or the other");
	if (!from && !art)
		return rb_jsonck_bad(c, path, "needs `from` (a host path) or `artifact` (\"sha256:<digest>\")");
	const char *s;
	if (from) {
		in->kind = RB_MANIFEST_INPUT_HOST;
		rb_jsonck_join(p, sizeof p, path, "from");
		if (get_text(c, p, from, PATH_MAX - 1, false, &s) < 0)
			return -1;
		if (!(in->from = abs_path(base, s)))
			return oom(c, p);
		if (!strcmp(in->from, "/"))
			return rb_jsonck_bad(c, p, "the host's root cannot be an input");
	} else {
		in->kind = RB_MANIFEST_INPUT_ARTIFACT;
		rb_jsonck_join(p, sizeof p, path, "artifact");
		if (get_text(c, p, art, 0, false, &s) < 0)
			return -1;
		if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64 || strspn(s + 7, "0123456789abcdef") != 64)
			return rb_jsonck_expected(c, p, "\"sha256:\" and 64 lowercase hex digits", art);
		if (!(in->artifact = strdup(s + 7)))
			return oom(c, p);
	}
	rb_jsonck_join(p, sizeof p, path, "to");
	if (to) {
		if (get_text(c, p, to, 0, false, &s) < 0)
			return -1;
		in->to = strdup(s);
	} else if (in->kind == RB_MANIFEST_INPUT_HOST) {
		/* Like --input SRC: the source's own name under /workspace/in. */
		if (asprintf(&in->to, RB_MANIFEST_IN_DIR "%s", strrchr(in->from, '/') + 1) < 0)
			in->to = NULL;
	} else {
		return rb_jsonck_bad(c, path, "an artifact input needs `to`");
	}
	if (!in->to)
		return oom(c, p);
	json_t *cow = json_object_get(v, "cow");
	if (cow) {
		rb_jsonck_join(p, sizeof p, path, "cow");
		if (!json_is_boolean(cow))
			return rb_jsonck_expected(c, p, "true or false", cow);
		if (json_is_true(cow) && in->kind != RB_MANIFEST_INPUT_HOST)
			return rb_jsonck_bad(c, p, "applies to a host folder (`from`), not to an artifact");
		in->cow = json_is_true(cow);
		rb_jsonck_join(p, sizeof p, path, "to");
	}
	const char *why = dest_problem(in->to, in->cow);
	if (why)
		return rb_jsonck_bad(c, p, "\"%.200s\" %s", in->to, why);
	return 0;
}

static int parse_inputs(const ctx *c, const json_t *v, const char *base, struct rb_manifest *m)
{
	if (!json_is_array(v))
		return rb_jsonck_expected(c, "inputs", "an array", v);
	if (json_array_size(v) > MAX_ITEMS)
		return rb_jsonck_bad(c, "inputs", "at most %d inputs", MAX_ITEMS);
	if (!(m->inputs = calloc(json_array_size(v) + 1, sizeof *m->inputs)))
		return oom(c, "inputs");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		char p[64];
		snprintf(p, sizeof p, "inputs[%zu]", i);
		m->n_inputs = i + 1; /* counted first, so a half-filled entry is freed too */
		if (parse_input(c, p, e, base, &m->inputs[i]) < 0)
			return -1;
		for (size_t j = 0; j < i; j++)
			if (dest_overlaps(m->inputs[j].to, m->inputs[i].to)) {
				snprintf(p, sizeof p, "inputs[%zu].to", i);
				return rb_jsonck_bad(c, p, "\"%.200s\" overlaps inputs[%zu].to \"%.200s\"",
				                     m->inputs[i].to, j, m->inputs[j].to);
			}
	}
	return 0;
}

static int parse_skills(const ctx *c, const json_t *v, const char *base, struct rb_manifest *m)
{
	if (!json_is_array(v))
		return rb_jsonck_expected(c, "skills", "an array of bundle folders", v);
	if (json_array_size(v) > MAX_ITEMS)
		return rb_jsonck_bad(c, "skills", "at most %d skills", MAX_ITEMS);
	if (!(m->skills = calloc(json_array_size(v) + 1, sizeof *m->skills)))
		return oom(c, "skills");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		char p[64];
		const char *s;
		snprintf(p, sizeof p, "skills[%zu]", i);
		if (get_text(c, p, e, PATH_MAX - 1, false, &s) < 0)
			return -1;
		// NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): s is set when get_text returns 0
		if (!(m->skills[i] = abs_path(base, s)))
			return oom(c, p);
		m->n_skills = i + 1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(m->skills[j], m->skills[i]))
				return rb_jsonck_bad(c, p, "\"%.200s\" is already skills[%zu]", m->skills[i], j);
	}
	return 0;
}

static int parse_step_inputs(const ctx *c, const char *path, const json_t *v, json_t **out)
{
	if (!json_is_object(v))
		return rb_jsonck_expected(c, path, "an object of name: string, number or bool", v);
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)v, key, val)
	{
		char p[300];
		rb_jsonck_join(p, sizeof p, path, key);
		/* Each becomes RUNBOX_INPUT_<NAME>: the names must survive upper-casing unchanged
		 * in meaning, so a declared set of [a-z0-9_]+ only. */
		if (!input_name_ok(key))
			return rb_jsonck_bad(c, path, "\"%.64s\" is not an input name ([a-z0-9_]{1,64})", key);
		if (!json_is_string(val) && !json_is_number(val) && !json_is_boolean(val))
			return rb_jsonck_expected(c, p, "a string, number or bool", val);
		if (json_is_string(val) && strlen(json_string_value(val)) != json_string_length(val))
			return rb_jsonck_bad(c, p, "holds a NUL character");
	}
	if (!(*out = json_deep_copy(v)))
		return oom(c, path);
	return 0;
}

static int parse_step(const ctx *c, const char *path, const json_t *v, struct rb_manifest_step *st)
{
	static const char *const keys[] = {"name", "script", "skill", "inputs", "timeout", "env", NULL};
	char p[300];
	if (!json_is_object(v))
		return rb_jsonck_expected(c, path, "an object with `script` or `skill`", v);
	if (rb_jsonck_keys(c, path, v, keys) < 0)
		return -1;
	if (!(st->env = calloc(1, sizeof *st->env)))
		return oom(c, path);
	json_t *script = json_object_get(v, "script"), *skill = json_object_get(v, "skill");
	json_t *inputs = json_object_get(v, "inputs"), *x;
	if (script && skill)
		return rb_jsonck_bad(c, path, "has both `script` and `skill`; a step is one or the other");
	if (!script && !skill)
		return rb_jsonck_bad(c, path, "needs `script` (a shell script) or `skill` (a skill's name)");
	if ((x = json_object_get(v, "name"))) {
		rb_jsonck_join(p, sizeof p, path, "name");
		if (dup_text(c, p, x, TEXT_MAX, &st->name) < 0)
			return -1;
	}
	if (script) {
		st->kind = RB_MANIFEST_STEP_SCRIPT;
		rb_jsonck_join(p, sizeof p, path, "script");
		const char *s;
		if (get_text(c, p, script, 0, true, &s) < 0)
			return -1;
		if (!(st->script = strdup(s)))
			return oom(c, p);
		if (inputs) {
			rb_jsonck_join(p, sizeof p, path, "inputs");
			return rb_jsonck_bad(c, p, "only a skill step takes inputs");
		}
	} else {
		st->kind = RB_MANIFEST_STEP_SKILL;
		rb_jsonck_join(p, sizeof p, path, "skill");
		if (!json_is_string(skill))
			return rb_jsonck_expected(c, p, "a skill's name", skill);
		const char *s = json_string_value(skill);
		size_t n = strlen(s);
		if (n != json_string_length(skill) || n == 0 || n > RB_SKILL_NAME_MAX ||
		    strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
			return rb_jsonck_bad(c, p, "\"%.80s\" is not a skill name ([a-z0-9-]{1,64})", s);
		if (!(st->skill = strdup(s)))
			return oom(c, p);
		rb_jsonck_join(p, sizeof p, path, "inputs");
		if (inputs) {
			if (parse_step_inputs(c, p, inputs, &st->inputs) < 0)
				return -1;
		} else if (!(st->inputs = json_object())) {
			return oom(c, p);
		}
	}
	if ((x = json_object_get(v, "timeout"))) {
		rb_jsonck_join(p, sizeof p, path, "timeout");
		if (get_duration(c, p, x, &st->timeout_ms) < 0)
			return -1;
	}
	if ((x = json_object_get(v, "env"))) {
		free(st->env);
		st->env = NULL;
		rb_jsonck_join(p, sizeof p, path, "env");
		if (parse_env(c, p, x, &st->env, &st->n_env) < 0)
			return -1;
	}
	return 0;
}

static int parse_steps(const ctx *c, const json_t *v, struct rb_manifest *m)
{
	if (!json_is_array(v))
		return rb_jsonck_expected(c, "steps", "an array of steps", v);
	if (json_array_size(v) == 0)
		return rb_jsonck_bad(c, "steps", "must hold at least one step");
	if (json_array_size(v) > MAX_ITEMS)
		return rb_jsonck_bad(c, "steps", "at most %d steps", MAX_ITEMS);
	if (!(m->steps = calloc(json_array_size(v), sizeof *m->steps)))
		return oom(c, "steps");
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		char p[64];
		snprintf(p, sizeof p, "steps[%zu]", i);
		m->n_steps = i + 1;
		if (parse_step(c, p, e, &m->steps[i]) < 0)
			return -1;
	}
	return 0;
}

static int parse_policy_ref(const ctx *c, const json_t *v, const char *base, struct rb_manifest *m)
{
	const char *s;
	if (get_text(c, "policy", v, PATH_MAX - 1, false, &s) < 0)
		return -1;
	// NOLINTNEXTLINE(clang-analyzer-core.CallAndMessage): s is set when get_text returns 0
	size_t n = strlen(s);
	/* The same test as rb_policy_load: a '/' or ".json" makes it a file, else a name. */
	m->policy_given = true;
	if (strchr(s, '/') || (n > 5 && !strcmp(s + n - 5, ".json"))) {
		/* Kept, to be refused by the runner unless the operator's config allows paths. */
		m->policy_is_path = true;
		if (!(m->policy = abs_path(base, s)))
			return oom(c, "policy");
		return 0;
	}
	if (!rb_manifest_id_ok(s))
		return rb_jsonck_bad(c, "policy",
		                     "\"%.80s\" is neither a profile name ([A-Za-z0-9._-]{1,64}) nor a "
		                     "path",
		                     s);
	if (!(m->policy = strdup(s)))
		return oom(c, "policy");
	return 0;
}

static int parse_top(const ctx *c, const json_t *root, const char *base, struct rb_manifest *m)
{
	static const char *const keys[] = {"tenant", "agent",  "agent_version", "run_id", "image", "policy",
	                                   "inputs", "skills", "env",           "limits", "steps", NULL};
	if (rb_jsonck_keys(c, "", root, keys) < 0)
		return -1;
	static const char *const required[] = {"tenant", "agent", "steps"};
	for (size_t i = 0; i < RB_ARRAY_SIZE(required); i++)
		if (!json_object_get(root, required[i]))
			return rb_jsonck_bad(c, required[i], "required key is missing");
	json_t *v;
	if (get_id(c, "tenant", json_object_get(root, "tenant"), m->tenant) < 0 ||
	    get_id(c, "agent", json_object_get(root, "agent"), m->agent) < 0)
		return -1;
	if ((v = json_object_get(root, "agent_version")) &&
	    dup_text(c, "agent_version", v, TEXT_MAX, &m->agent_version) < 0)
		return -1;
	if ((v = json_object_get(root, "run_id")) && get_id(c, "run_id", v, m->run_id) < 0)
		return -1;
	if ((v = json_object_get(root, "image"))) {
		if (dup_text(c, "image", v, TEXT_MAX, &m->image) < 0)
			return -1;
		m->image_given = true;
	} else if (!(m->image = strdup("host"))) {
		return oom(c, "image");
	}
	if ((v = json_object_get(root, "policy"))) {
		if (parse_policy_ref(c, v, base, m) < 0)
			return -1;
	} else if (!(m->policy = strdup("default"))) {
		return oom(c, "policy");
	}
	if ((v = json_object_get(root, "inputs")) && parse_inputs(c, v, base, m) < 0)
		return -1;
	if ((v = json_object_get(root, "skills")) && parse_skills(c, v, base, m) < 0)
		return -1;
	if ((v = json_object_get(root, "env"))) {
		if (parse_env(c, "env", v, &m->env, &m->n_env) < 0)
			return -1;
	} else if (!(m->env = calloc(1, sizeof *m->env))) {
		return oom(c, "env");
	}
	if ((v = json_object_get(root, "limits")) && parse_limits(c, v, &m->limits) < 0)
		return -1;
	return parse_steps(c, json_object_get(root, "steps"), m);
}

/* ---- public ---------------------------------------------------------------------------------- */

static void free_strv(char **v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void rb_manifest_free(struct rb_manifest *m)
{
	if (!m)
		return;
	free(m->origin);
	free(m->base_dir);
	free(m->agent_version);
	free(m->image);
	free(m->policy);
	for (size_t i = 0; m->inputs && i < m->n_inputs; i++) {
		free(m->inputs[i].from);
		free(m->inputs[i].artifact);
		free(m->inputs[i].to);
	}
	free(m->inputs);
	free_strv(m->skills, m->n_skills);
	free_strv(m->env, m->n_env);
	for (size_t i = 0; m->steps && i < m->n_steps; i++) {
		struct rb_manifest_step *st = &m->steps[i];
		free(st->name);
		free(st->script);
		free(st->skill);
		if (st->inputs)
			json_decref(st->inputs);
		free_strv(st->env, st->n_env);
	}
	free(m->steps);
	memset(m, 0, sizeof *m);
}

int rb_manifest_parse(const char *text, const char *origin, const char *base_dir, struct rb_manifest *out,
                      struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	ctx c = {.what = "manifest", .origin = origin && *origin ? origin : "(text)", .err = err};
	if (!text)
		return rb_jsonck_bad(&c, NULL, "no text");

	char cwd[PATH_MAX];
	if ((!base_dir || base_dir[0] != '/') && !getcwd(cwd, sizeof cwd))
		return rb_error_set(err, errno, "manifest %s: getcwd", c.origin);
	const char *anchor = !base_dir || !*base_dir ? cwd : base_dir;
	if (!(out->origin = strdup(c.origin)) ||
	    !(out->base_dir = anchor[0] == '/' ? abs_path("/", anchor) : abs_path(cwd, anchor))) {
		rb_manifest_free(out);
		return oom(&c, "");
	}

	_cleanup_json_ json_t *root = rb_jsonck_load(&c, text);
	if (!root) {
		rb_manifest_free(out);
		return -1;
	}
	if (parse_top(&c, root, out->base_dir, out) < 0) {
		rb_manifest_free(out);
		return -1;
	}
	/* The ledger's manifest hash: the same document with other key order or whitespace
	 * hashes the same, any change of meaning does not. */
	_cleanup_free_ char *canon = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
	if (!canon) {
		rb_manifest_free(out);
		return oom(&c, "(hash)");
	}
	rb_sha256_hex(canon, strlen(canon), out->hash);
	return 0;
}

int rb_manifest_load(const char *path, struct rb_manifest *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	_cleanup_free_ char *text = NULL;
	if (rb_read_document(path, MANIFEST_FILE_MAX, &text, err) < 0)
		return rb_error_prefix(err, "manifest");
	_cleanup_free_ char *dir = strdup(path);
	if (!dir)
		return rb_error_set(err, ENOMEM, "manifest %s", path);
	char *slash = strrchr(dir, '/');
	if (!slash)
		dir[0] = '\0'; /* "" makes rb_manifest_parse anchor at the cwd */
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	return rb_manifest_parse(text, path, dir, out, err);
}

/* ---- against the policy and the skills ---------------------------------------------------- */

int rb_manifest_check_limits(const struct rb_manifest *m, const struct rb_policy *p, struct rb_error *err)
{
	ctx c = {.what = "manifest", .origin = m->origin ? m->origin : "(text)", .err = err};
	const char *pol = p->name[0] ? p->name : "(unnamed)";
	char a[32], b[32];
	const struct rb_manifest_limits *l = &m->limits;
	if (l->timeout_ms && p->timeout_ms && l->timeout_ms > p->timeout_ms)
		return rb_jsonck_bad(&c, "limits.timeout", "%s is above policy `%s`'s limits.timeout (%s)",
		                     rb_fmt_duration(l->timeout_ms, a, sizeof a), pol,
		                     rb_fmt_duration(p->timeout_ms, b, sizeof b));
	if (l->memory_bytes && p->memory_bytes && l->memory_bytes > p->memory_bytes)
		return rb_jsonck_bad(&c, "limits.memory", "%s is above policy `%s`'s limits.memory (%s)",
		                     rb_fmt_size(l->memory_bytes, a, sizeof a), pol,
		                     rb_fmt_size(p->memory_bytes, b, sizeof b));
	if (l->pids && p->pids && l->pids > p->pids)
		return rb_jsonck_bad(&c, "limits.pids", "%" PRIu64 " is above policy `%s`'s limits.pids (%" PRIu64 ")",
		                     l->pids, pol, p->pids);
	if (l->cpus > 0 && p->cpus > 0 && l->cpus > p->cpus)
		return rb_jsonck_bad(&c, "limits.cpus", "%g is above policy `%s`'s limits.cpus (%g)", l->cpus, pol,
		                     p->cpus);
	for (size_t i = 0; i < m->n_steps; i++) {
		uint64_t t = m->steps[i].timeout_ms;
		if (t && p->timeout_ms && t > p->timeout_ms) {
			char path[64];
			snprintf(path, sizeof path, "steps[%zu].timeout", i);
			return rb_jsonck_bad(&c, path, "%s is above policy `%s`'s limits.timeout (%s)",
			                     rb_fmt_duration(t, a, sizeof a), pol,
			                     rb_fmt_duration(p->timeout_ms, b, sizeof b));
		}
	}
	return 0;
}

int rb_manifest_check_ceilings(const struct rb_manifest *m, const struct rb_manifest_ceilings *cl, struct rb_error *err)
{
	ctx c = {.what = "manifest", .origin = m->origin ? m->origin : "(text)", .err = err};
	/* The tenant and agent the caller runs the manifest for: the artifact store's tenant
	 * boundary rests on the tenant, so a manifest (often an agent's) may not pick another. */
	if (cl->tenant && strcmp(cl->tenant, m->tenant) != 0)
		return rb_jsonck_bad(&c, "tenant", "`%s` is not --tenant `%s`; a manifest runs for the caller's tenant",
		                     m->tenant, cl->tenant);
	if (cl->agent && strcmp(cl->agent, m->agent) != 0)
		return rb_jsonck_bad(&c, "agent", "`%s` is not --agent `%s`", m->agent, cl->agent);
	/* The command line's policy and image are the run's: a manifest naming others would have
	 * its author's choice silently replaced, or the caller's. Either way it is said. */
	if (cl->policy && m->policy_given && strcmp(cl->policy, m->policy) != 0)
		return rb_jsonck_bad(&c, "policy",
		                     "`%.200s` is not --policy `%.200s`; the command line's policy applies (name the "
		                     "same one, or leave `policy` out)",
		                     m->policy, cl->policy);
	if (cl->image && m->image_given && strcmp(cl->image, m->image) != 0)
		return rb_jsonck_bad(&c, "image",
		                     "`%.200s` is not --image `%.200s`; the command line's image applies (name the "
		                     "same one, or leave `image` out)",
		                     m->image, cl->image);
	char a[32], b[32];
	const struct rb_manifest_limits *l = &m->limits, *top = &cl->limits;
	if (l->timeout_ms && top->timeout_ms && l->timeout_ms > top->timeout_ms)
		return rb_jsonck_bad(&c, "limits.timeout", "%s is above --timeout %s",
		                     rb_fmt_duration(l->timeout_ms, a, sizeof a),
		                     rb_fmt_duration(top->timeout_ms, b, sizeof b));
	if (l->memory_bytes && top->memory_bytes && l->memory_bytes > top->memory_bytes)
		return rb_jsonck_bad(&c, "limits.memory", "%s is above --memory %s",
		                     rb_fmt_size(l->memory_bytes, a, sizeof a),
		                     rb_fmt_size(top->memory_bytes, b, sizeof b));
	if (l->pids && top->pids && l->pids > top->pids)
		return rb_jsonck_bad(&c, "limits.pids", "%" PRIu64 " is above --pids %" PRIu64, l->pids, top->pids);
	if (l->cpus > 0 && top->cpus > 0 && l->cpus > top->cpus)
		return rb_jsonck_bad(&c, "limits.cpus", "%g is above --cpus %g", l->cpus, top->cpus);
	for (size_t i = 0; i < m->n_steps; i++) {
		uint64_t t = m->steps[i].timeout_ms;
		if (t && top->timeout_ms && t > top->timeout_ms) {
			char path[64];
			snprintf(path, sizeof path, "steps[%zu].timeout", i);
			return rb_jsonck_bad(&c, path, "%s is above --timeout %s", rb_fmt_duration(t, a, sizeof a),
			                     rb_fmt_duration(top->timeout_ms, b, sizeof b));
		}
	}
	return 0;
}

void rb_manifest_free_skills(struct rb_skill *skills, size_t n)
{
	if (!skills)
		return;
	for (size_t i = 0; i < n; i++)
		rb_skill_free(&skills[i]);
	free(skills);
}

int rb_manifest_load_skills(const struct rb_manifest *m, struct rb_skill **out, size_t *n_out, struct rb_error *err)
{
	return rb_manifest_load_skills_from(m, (const char *const *)m->skills, out, n_out, err);
}

int rb_manifest_load_skills_from(const struct rb_manifest *m, const char *const *dirs, struct rb_skill **out,
                                 size_t *n_out, struct rb_error *err)
{
	ctx c = {.what = "manifest", .origin = m->origin ? m->origin : "(text)", .err = err};
	*out = NULL;
	*n_out = 0;
	struct rb_skill *sk = calloc(m->n_skills + 1, sizeof *sk);
	if (!sk)
		return oom(&c, "skills");
	size_t n = 0;
	for (; n < m->n_skills; n++) {
		if (rb_skill_load(dirs[n], &sk[n], err) < 0) {
			if (dirs[n] != m->skills[n])
				rb_error_prefix(err, "manifest %s: skills[%zu] (`%s`, as copied for the run)", c.origin,
				                n, m->skills[n]);
			else
				rb_error_prefix(err, "manifest %s: skills[%zu]", c.origin, n);
			goto fail;
		}
		for (size_t j = 0; j < n; j++)
			if (!strcmp(sk[j].name, sk[n].name)) {
				char p[64];
				snprintf(p, sizeof p, "skills[%zu]", n);
				rb_jsonck_bad(&c, p, "a second skill named `%s` (skills[%zu] is one)", sk[n].name, j);
				n++;
				goto fail;
			}
	}
	for (size_t i = 0; i < m->n_steps; i++) {
		const struct rb_manifest_step *st = &m->steps[i];
		if (st->kind != RB_MANIFEST_STEP_SKILL)
			continue;
		const struct rb_skill *found = NULL;
		for (size_t j = 0; j < n && !found; j++)
			if (!strcmp(sk[j].name, st->skill))
				found = &sk[j];
		char p[64];
		if (!found) {
			char names[256] = "";
			for (size_t j = 0; j < n; j++) {
				size_t u = strlen(names);
				snprintf(names + u, sizeof names - u, "%s`%s`", j ? ", " : "", sk[j].name);
			}
			snprintf(p, sizeof p, "steps[%zu].skill", i);
			rb_jsonck_bad(&c, p, "no skill named `%s` among `skills` (%s)", st->skill,
			              n ? names : "none given");
			goto fail;
		}
		if (rb_skill_check_inputs(found, st->inputs, err) < 0) {
			rb_error_prefix(err, "manifest %s: steps[%zu].inputs", c.origin, i);
			goto fail;
		}
	}
	*out = sk;
	*n_out = n;
	return 0;
fail:
	rb_manifest_free_skills(sk, n);
	return -1;
}

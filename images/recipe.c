/* Image recipes (recipe.h): a strict reader, so that a misspelt key never builds something other
 * than what the operator wrote, and nothing in a recipe reaches mmdebstrap's command line as an
 * option (every value is checked against the shape its field allows). */
#define _GNU_SOURCE
#include "images/recipe.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/util.h"

#define RECIPE_FILE_MAX    (256u << 10)
#define RECIPE_CONTENT_MAX (64u << 10)

static bool all_of(const char *s, const char *extra)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || strchr(extra, *s)))
			return false;
	return true;
}

/* Debian policy 5.6.1: lower case letters, digits, + - . ; at least two, starting alnum. A
 * leading '-' could never reach mmdebstrap as an option. */
static bool package_ok(const char *s)
{
	return strlen(s) >= 2 && strlen(s) < 128 && s[0] != '+' && s[0] != '-' && s[0] != '.' && all_of(s, "+-.");
}

/* A mirror: an http(s) or file-like URI, or a whole sources.list line ("deb [opts] URI suite
 * components"); never starting with '-'; one line, printable. */
static bool mirror_ok(const char *s)
{
	if (!*s || s[0] == '-' || strlen(s) > 1024)
		return false;
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return false;
	return !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8) || !strncmp(s, "copy://", 7) ||
	       !strncmp(s, "file://", 7) || !strncmp(s, "deb ", 4);
}

/* Absolute, no "." or ".." component, no empty component, not "/" itself. */
static bool image_path_ok(const char *p)
{
	if (p[0] != '/' || !p[1] || strlen(p) >= 1024)
		return false;
	for (const char *c = p + 1; *c;) {
		const char *e = strchrnul(c, '/');
		size_t n = (size_t)(e - c);
		if (!n || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c = *e ? e + 1 : e;
		if (*e && !*c)
			return false; /* a trailing slash */
	}
	return true;
}

static int word(const struct rb_jsonck *c, const json_t *root, const char *key, char *out, size_t len,
                const char *extra, const char *dflt)
{
	const json_t *v = json_object_get(root, key);
	if (!v) {
		snprintf(out, len, "%s", dflt);
		return 0;
	}
	const char *s = json_string_value(v);
	if (!s || strlen(s) >= len || !all_of(s, extra))
		return rb_jsonck_expected(c, key, "a word of [a-z0-9] (and the punctuation the field allows)", v);
	snprintf(out, len, "%s", s);
	return 0;
}

static int strings(const struct rb_jsonck *c, const json_t *root, const char *key, char **out, unsigned *n,
                   unsigned max, bool (*ok)(const char *), const char *what)
{
	const json_t *a = json_object_get(root, key);
	if (!a)
		return 0;
	if (!json_is_array(a))
		return rb_jsonck_expected(c, key, "an array", a);
	if (json_array_size(a) > max)
		return rb_jsonck_bad(c, key, "at most %u entries", max);
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v)
	{
		char path[96];
		snprintf(path, sizeof path, "%s[%zu]", key, i);
		const char *s = json_string_value(v);
		if (!s || !ok(s))
			return rb_jsonck_expected(c, path, what, v);
		if (!(out[(*n)++] = strdup(s)))
			return rb_jsonck_bad(c, path, "out of memory");
	}
	return 0;
}

/* A command for /bin/sh -c: one string, no NUL, at most 16 KiB. */
static bool command_ok(const char *s)
{
	return *s && strlen(s) <= (16u << 10);
}

static bool component_ok(const char *s)
{
	return strlen(s) < 64 && all_of(s, "-");
}

static int files(const struct rb_jsonck *c, const json_t *root, struct rb_recipe *r)
{
	const json_t *a = json_object_get(root, "files");
	if (!a)
		return 0;
	if (!json_is_array(a))
		return rb_jsonck_expected(c, "files", "an array", a);
	if (json_array_size(a) > RB_RECIPE_MAX_FILES)
		return rb_jsonck_bad(c, "files", "at most %u entries", RB_RECIPE_MAX_FILES);
	static const char *const keys[] = {"path", "content", "mode", NULL};
	size_t i;
	const json_t *f;
	json_array_foreach(a, i, f)
	{
		char at[48], key[64];
		snprintf(at, sizeof at, "files[%zu]", i);
		if (!json_is_object(f))
			return rb_jsonck_expected(c, at, "an object", f);
		if (rb_jsonck_keys(c, at, f, keys) < 0)
			return -1;
		const char *path = json_string_value(json_object_get(f, "path"));
		rb_jsonck_join(key, sizeof key, at, "path");
		if (!path || !image_path_ok(path))
			return rb_jsonck_expected(c, key, "an absolute path without . or .. components",
			                          json_object_get(f, "path"));
		const json_t *cv = json_object_get(f, "content");
		rb_jsonck_join(key, sizeof key, at, "content");
		if (!json_is_string(cv) || json_string_length(cv) > RECIPE_CONTENT_MAX ||
		    strlen(json_string_value(cv)) != json_string_length(cv))
			return rb_jsonck_expected(c, key, "a string of at most 64 KiB without NUL", cv);
		mode_t mode = 0644;
		const json_t *mv = json_object_get(f, "mode");
		if (mv) {
			rb_jsonck_join(key, sizeof key, at, "mode");
			const char *ms = json_string_value(mv);
			char *end;
			unsigned long m = ms ? strtoul(ms, &end, 8) : 0;
			if (!ms || !*ms || *end || m > 0777)
				return rb_jsonck_expected(
				    c, key, "an octal string of permission bits (\"0644\"; no setuid)", mv);
			mode = (mode_t)m;
		}
		struct rb_recipe_file *rf = &r->files[r->n_files++];
		rf->path = strdup(path);
		rf->content = strdup(json_string_value(cv));
		rf->mode = mode;
		if (!rf->path || !rf->content)
			return rb_jsonck_bad(c, at, "out of memory");
	}
	return 0;
}

int rb_recipe_parse(const char *text, const char *origin, struct rb_recipe *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	struct rb_jsonck c = {.what = "recipe", .origin = origin, .err = err};
	_cleanup_json_ json_t *root = rb_jsonck_load(&c, text);
	if (!root)
		return -1;
	static const char *const keys[] = {"description",       "suite",      "variant",  "architecture",
	                                   "mirrors",           "components", "packages", "files",
	                                   "source_date_epoch", "commands",   "network",  NULL};
	if (rb_jsonck_keys(&c, "", root, keys) < 0)
		return -1;
	const json_t *d = json_object_get(root, "description");
	if (d && !json_is_string(d))
		return rb_jsonck_expected(&c, "description", "a string", d);
	if (!json_object_get(root, "suite"))
		return rb_jsonck_bad(&c, "suite", "required (a Debian suite: bookworm)");
	if (word(&c, root, "suite", out->suite, sizeof out->suite, "-", "") < 0 ||
	    word(&c, root, "variant", out->variant, sizeof out->variant, "", "apt") < 0 ||
	    word(&c, root, "architecture", out->arch, sizeof out->arch, "-", "") < 0)
		return -1;
	static const char *const variants[] = {"extract", "custom", "essential", "apt",      "required",
	                                       "minbase", "buildd", "important", "standard", NULL};
	bool known = false;
	for (unsigned i = 0; variants[i]; i++)
		known |= !strcmp(out->variant, variants[i]);
	if (!known)
		return rb_jsonck_bad(&c, "variant",
		                     "`%s` is not one of mmdebstrap's variants (extract, custom, "
		                     "essential, apt, required, minbase, buildd, important, standard)",
		                     out->variant);
	if (strings(&c, root, "mirrors", out->mirrors, &out->n_mirrors, RB_RECIPE_MAX_MIRRORS, mirror_ok,
	            "an http(s)://, copy:// or file:// URI, or a sources.list `deb ...` line") < 0 ||
	    strings(&c, root, "components", out->components, &out->n_components, RB_RECIPE_MAX_COMPS, component_ok,
	            "a component name (main, contrib, non-free-firmware)") < 0 ||
	    strings(&c, root, "packages", out->packages, &out->n_packages, RB_RECIPE_MAX_PACKAGES, package_ok,
	            "a Debian package name") < 0 ||
	    files(&c, root, out) < 0 ||
	    strings(&c, root, "commands", out->commands, &out->n_commands, RB_RECIPE_MAX_COMMANDS, command_ok,
	            "a shell command (a non-empty string of at most 16 KiB)") < 0)
		return -1;
	const json_t *net = json_object_get(root, "network");
	const char *ns = net ? json_string_value(net) : "none";
	if (!ns || (strcmp(ns, "none") != 0 && strcmp(ns, "gateway") != 0))
		return rb_jsonck_expected(&c, "network", "\"none\" or \"gateway\" (the commands' network)", net);
	out->commands_gateway = !strcmp(ns, "gateway");
	const json_t *e = json_object_get(root, "source_date_epoch");
	if (e && (!json_is_integer(e) || json_integer_value(e) < 0))
		return rb_jsonck_expected(&c, "source_date_epoch", "a non-negative integer (seconds)", e);
	out->source_date_epoch = e ? (int64_t)json_integer_value(e) : 0;
	_cleanup_free_ char *canon = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
	if (!canon)
		return rb_jsonck_bad(&c, NULL, "out of memory");
	rb_sha256_hex(canon, strlen(canon), out->hash);
	return 0;
}

int rb_recipe_load(const char *path, struct rb_recipe *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	_cleanup_free_ char *text = NULL;
	if (rb_read_document(path, RECIPE_FILE_MAX, &text, err) < 0)
		return rb_error_prefix(err, "recipe");
	return rb_recipe_parse(text, path, out, err);
}

void rb_recipe_free(struct rb_recipe *r)
{
	for (unsigned i = 0; i < r->n_mirrors; i++)
		free(r->mirrors[i]);
	for (unsigned i = 0; i < r->n_components; i++)
		free(r->components[i]);
	for (unsigned i = 0; i < r->n_packages; i++)
		free(r->packages[i]);
	for (unsigned i = 0; i < r->n_commands; i++)
		free(r->commands[i]);
	for (unsigned i = 0; i < r->n_files; i++) {
		free(r->files[i].path);
		free(r->files[i].content);
	}
	memset(r, 0, sizeof *r);
}

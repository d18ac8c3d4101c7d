/* Skill inspection: reads a bundle's SKILL.md front matter with a tiny strict parser (flat
 * `key: value` lines, no YAML library), proves the entry stays inside the bundle (openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), and builds and checks what a skill step exchanges. */
#define _GNU_SOURCE
#include "policy/skill.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/util.h"

#define SKILL_MD        "SKILL.md"
#define SKILL_MD_MAX    (256u << 10)
#define DESCRIPTION_MAX 1024
#define ENTRY_MAX       1024

/* ---- small checks --------------------------------------------------------------------- */

static bool chars_ok(const char *s, size_t max, const char *extra)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr(extra, *p)))
			return false;
	return true;
}

static bool name_ok(const char *s)
{
	return chars_ok(s, RB_SKILL_NAME_MAX, "-");
}

static bool input_name_ok(const char *s)
{
	return chars_ok(s, 64, "_");
}

/* The whole bundle tree is the trust boundary: no symlink anywhere on the way (a link inside
 * could point at the host's files) and nothing above the bundle. */
static int open_beneath(int dirfd, const char *rel, int flags)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_CLOEXEC),
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
}

static const char *beneath_reason(int e)
{
	switch (e) {
	case ELOOP: return "is or passes through a symlink";
	case EXDEV: return "escapes the bundle";
	case ENOENT: return "does not exist";
	default: return NULL;
	}
}

/* ---- SKILL.md front matter -------------------------------------------------------------- */

struct fm_ctx {
	const char *dir;
	struct rb_error *err;
};

__attribute__((format(printf, 3, 4))) static int fm_bad(const struct fm_ctx *c, unsigned line, const char *fmt, ...)
{
	char msg[RB_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (line)
		return rb_error_set(c->err, 0, "skill bundle `%s`: " SKILL_MD " line %u: %s", c->dir, line, msg);
	return rb_error_set(c->err, 0, "skill bundle `%s`: %s", c->dir, msg);
}

static char *rtrim(char *s)
{
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
	return s;
}

/* One value, as a YAML reader would see it for the flat subset we accept: quotes are
 * stripped, " #" starts a comment, and anything YAML would read as structure is refused
 * rather than misread. */
static int fm_value(const struct fm_ctx *c, unsigned line, const char *key, char *v, char **out)
{
	while (*v == ' ' || *v == '\t')
		v++;
	if (*v == '"' || *v == '\'') {
		char q = *v;
		char *end = strchr(v + 1, q);
		if (!end)
			return fm_bad(c, line, "`%s`: unterminated %s quote", key, q == '"' ? "double" : "single");
		*end = '\0';
		char *rest = end + 1;
		while (*rest == ' ' || *rest == '\t')
			rest++;
		if (*rest && *rest != '#')
			return fm_bad(c, line, "`%s`: text after the closing quote", key);
		if (q == '"' && strchr(v + 1, '\\'))
			return fm_bad(c, line, "`%s`: escapes in quoted values are not supported", key);
		*out = v + 1;
		return 0;
	}
	for (char *p = v; (p = strchr(p, '#')); p++)
		if (p == v || p[-1] == ' ' || p[-1] == '\t') {
			*p = '\0';
			break;
		}
	rtrim(v);
	if (!*v || !strcmp(v, "|") || !strcmp(v, ">") || !strcmp(v, "|-") || !strcmp(v, ">-"))
		return fm_bad(c, line, "`%s` has no value on its line (multi-line values are not supported)", key);
	if (*v == '[' || *v == '{' || *v == '&' || *v == '*' || *v == '!')
		return fm_bad(c, line, "`%s`: YAML structures are not supported; write a plain value", key);
	*out = v;
	return 0;
}

static int set_inputs(const struct fm_ctx *c, unsigned line, const char *v, struct rb_skill *s)
{
	// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): v is set when fm_value returns 0
	_cleanup_free_ char *copy = strdup(v);
	if (!copy)
		return rb_error_set(c->err, ENOMEM, "skill bundle `%s`", c->dir);
	/* strsep, not strtok: "a,,b" must be an error, not "a,b". */
	for (char *p = copy, *tok; (tok = strsep(&p, ","));) {
		while (*tok == ' ' || *tok == '\t')
			tok++;
		rtrim(tok);
		if (!input_name_ok(tok))
			return fm_bad(c, line,
			              "inputs: \"%.64s\" is not an input name ([a-z0-9_]{1,64}, comma-separated)", tok);
		for (size_t i = 0; i < s->n_inputs; i++)
			if (!strcmp(s->inputs[i], tok))
				return fm_bad(c, line, "inputs: `%s` is declared twice", tok);
		if (s->n_inputs == RB_SKILL_MAX_INPUTS)
			return fm_bad(c, line, "inputs: at most %d inputs", RB_SKILL_MAX_INPUTS);
		if (!(s->inputs[s->n_inputs] = strdup(tok)))
			return rb_error_set(c->err, ENOMEM, "skill bundle `%s`", c->dir);
		s->n_inputs++;
	}
	return 0;
}

static int fm_set(const struct fm_ctx *c, unsigned line, const char *key, const char *v, struct rb_skill *s,
                  unsigned *seen)
{
	static const char *const keys[] = {"name", "description", "entry", "inputs", "timeout"};
	unsigned k = 0;
	while (k < RB_ARRAY_SIZE(keys) && strcmp(keys[k], key) != 0)
		k++;
	if (k == RB_ARRAY_SIZE(keys))
		return fm_bad(c, line, "unknown key `%.64s` (known keys: name, description, entry, inputs, timeout)",
		              key);
	if (*seen & (1u << k))
		return fm_bad(c, line, "`%s` is given twice", key);
	*seen |= 1u << k;
	switch (k) {
	case 0:
		if (!name_ok(v))
			return fm_bad(c, line, "name: \"%.80s\" is not a skill name ([a-z0-9-]{1,64})", v);
		snprintf(s->name, sizeof s->name, "%s", v);
		return 0;
	case 1:
		// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): v is set when fm_value returns 0
		if (strlen(v) > DESCRIPTION_MAX)
			return fm_bad(c, line, "description: longer than %d characters", DESCRIPTION_MAX);
		s->description = strdup(v);
		break;
	case 2:
		// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): v is set when fm_value returns 0
		if (strlen(v) > ENTRY_MAX)
			return fm_bad(c, line, "entry: longer than %d characters", ENTRY_MAX);
		s->entry = strdup(v);
		break;
	case 3: return set_inputs(c, line, v, s);
	case 4:
		if (rb_parse_duration_ms(v, &s->timeout_ms) < 0 || s->timeout_ms == 0)
			return fm_bad(c, line, "timeout: expected " RB_DURATION_HINT ", got \"%.40s\"", v);
		return 0;
	}
	if ((k == 1 && !s->description) || (k == 2 && !s->entry))
		return rb_error_set(c->err, ENOMEM, "skill bundle `%s`", c->dir);
	return 0;
}

static int parse_front_matter(const struct fm_ctx *c, char *text, struct rb_skill *s)
{
	// NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): text is set when read_fd returns 0
	if (!strncmp(text, "\xEF\xBB\xBF", 3))
		text += 3;
	unsigned line = 0, seen = 0;
	bool open = false;
	for (char *p = text, *l; (l = strsep(&p, "\n"));) {
		line++;
		size_t n = strlen(l);
		if (n && l[n - 1] == '\r')
			l[--n] = '\0';
		if (!open) {
			if (strcmp(rtrim(l), "---") != 0)
				return fm_bad(c, 0,
				              SKILL_MD " must start with front matter: a `---` line, `key: value` "
				                       "lines, and a closing `---` line");
			open = true;
			continue;
		}
		if (!strcmp(rtrim(l), "---")) {
			static const char *const required[] = {"name", "description", "entry"};
			for (unsigned k = 0; k < 3; k++)
				if (!(seen & (1u << k)))
					return fm_bad(c, 0, SKILL_MD " front matter lacks `%s`", required[k]);
			return 0;
		}
		if (!*l || l[0] == '#')
			continue;
		if (l[0] == ' ' || l[0] == '\t')
			return fm_bad(c, line, "indented line: nested or multi-line values are not supported");
		char *colon = strchr(l, ':');
		if (!colon)
			return fm_bad(c, line, "expected `key: value`");
		*colon = '\0';
		char *key = l, *v = NULL;
		if (!*key || strspn(key, "abcdefghijklmnopqrstuvwxyz_-") != strlen(key))
			return fm_bad(c, line, "\"%.40s\" is not a key ([a-z_-]+ before the colon)", key);
		if (colon[1] && colon[1] != ' ' && colon[1] != '\t')
			return fm_bad(c, line, "expected a space after `%s:`", key);
		if (fm_value(c, line, key, colon + 1, &v) < 0 || fm_set(c, line, key, v, s, &seen) < 0)
			return -1;
	}
	if (!open)
		return fm_bad(c, 0, SKILL_MD " is empty");
	return fm_bad(c, 0, SKILL_MD " front matter is not closed by a `---` line");
}

static int read_fd(int fd, size_t max, char **out)
{
	size_t cap = 4096, len = 0;
	_cleanup_free_ char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (cap >= max)
				return -EFBIG;
			cap = cap * 2 > max ? max : cap * 2;
			char *nb = realloc(buf, cap + 1);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	if (strlen(buf) != len)
		return -EILSEQ;
	*out = rb_steal_ptr(&buf);
	return 0;
}

/* ---- the entry point -------------------------------------------------------------------- */

static int check_entry(const struct fm_ctx *c, int dirfd, const char *entry)
{
	if (entry[0] == '/')
		return fm_bad(c, 0, "entry `%s`: must be a path relative to the bundle", entry);
	for (const char *p = entry; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return fm_bad(c, 0, "entry `%s`: escapes the bundle (\"..\")", entry);
		p += n;
		p += strspn(p, "/");
	}
	/* No O_NOFOLLOW: with O_PATH it would open a final symlink itself instead of letting
	 * RESOLVE_NO_SYMLINKS refuse it. */
	_cleanup_close_ int fd = open_beneath(dirfd, entry, O_PATH);
	if (fd < 0) {
		int e = errno;
		const char *why = beneath_reason(e);
		if (why)
			return fm_bad(c, 0, "entry `%s`: %s", entry, why);
		return rb_error_set(c->err, e, "skill bundle `%s`: entry `%s`", c->dir, entry);
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return rb_error_set(c->err, errno, "skill bundle `%s`: stat entry `%s`", c->dir, entry);
	if (S_ISLNK(st.st_mode))
		return fm_bad(c, 0, "entry `%s`: %s", entry, beneath_reason(ELOOP));
	if (!S_ISREG(st.st_mode))
		return fm_bad(c, 0, "entry `%s`: not a regular file", entry);
	/* The sandbox's user is seldom the file's owner, so any execute bit is the honest test
	 * here; the step itself reports 126 if the bits do not fit the user it runs as. */
	if (!(st.st_mode & 0111))
		return fm_bad(c, 0, "entry `%s`: not executable (mode %04o; chmod +x it)", entry,
		              (unsigned)(st.st_mode & 07777));
	return 0;
}

/* ---- public ------------------------------------------------------------------------------ */

void rb_skill_free(struct rb_skill *s)
{
	if (!s)
		return;
	free(s->description);
	free(s->dir);
	free(s->entry);
	for (size_t i = 0; i < s->n_inputs; i++)
		free(s->inputs[i]);
	memset(s, 0, sizeof *s);
}

int rb_skill_load(const char *dir, struct rb_skill *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	struct fm_ctx c = {.dir = dir ? dir : "", .err = err};
	if (!dir || !*dir)
		return fm_bad(&c, 0, "no bundle folder given");
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return rb_error_set(err, errno, "skill bundle `%s`", dir);
	_cleanup_close_ int mfd = open_beneath(dfd, SKILL_MD, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
	if (mfd < 0) {
		int e = errno;
		if (e == ENOENT)
			return fm_bad(&c, 0, "no " SKILL_MD " (a skill bundle is a folder with SKILL.md)");
		if (e == ELOOP)
			return fm_bad(&c, 0, SKILL_MD " is a symlink");
		return rb_error_set(err, e, "skill bundle `%s`: open " SKILL_MD, dir);
	}
	struct stat st;
	if (fstat(mfd, &st) < 0)
		return rb_error_set(err, errno, "skill bundle `%s`: stat " SKILL_MD, dir);
	if (!S_ISREG(st.st_mode))
		return fm_bad(&c, 0, SKILL_MD " is not a regular file");
	_cleanup_free_ char *text = NULL;
	int r = read_fd(mfd, SKILL_MD_MAX, &text);
	if (r == -EFBIG)
		return fm_bad(&c, 0, SKILL_MD " is larger than %u bytes", SKILL_MD_MAX);
	if (r == -EILSEQ)
		return fm_bad(&c, 0, SKILL_MD " holds a NUL byte");
	if (r < 0)
		return rb_error_set(err, -r, "skill bundle `%s`: read " SKILL_MD, dir);

	char real[PATH_MAX];
	if (!realpath(dir, real))
		return rb_error_set(err, errno, "skill bundle `%s`: realpath", dir);
	if (parse_front_matter(&c, text, out) < 0 || check_entry(&c, dfd, out->entry) < 0)
		goto fail;
	if (!(out->dir = strdup(real))) {
		rb_error_set(err, ENOMEM, "skill bundle `%s`", dir);
		goto fail;
	}
	return 0;
fail:
	rb_skill_free(out);
	return -1;
}

static void name_list(char *buf, size_t len, const char *const *names, size_t n)
{
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s`%s`", i ? ", " : "", names[i]);
	}
}

int rb_skill_check_inputs(const struct rb_skill *s, json_t *inputs, struct rb_error *err)
{
	if (inputs && !json_is_object(inputs))
		return rb_error_set(err, 0, "skill `%s`: inputs must be an object", s->name);
	const char *unknown[RB_SKILL_MAX_INPUTS] = {0}, *missing[RB_SKILL_MAX_INPUTS] = {0};
	size_t n_unknown = 0, n_missing = 0;
	const char *key;
	json_t *v;
	json_object_foreach(inputs, key, v)
	{
		bool declared = false;
		for (size_t i = 0; i < s->n_inputs && !declared; i++)
			declared = !strcmp(s->inputs[i], key);
		if (!declared) {
			if (n_unknown < RB_SKILL_MAX_INPUTS)
				unknown[n_unknown++] = key;
			continue;
		}
		if (!json_is_string(v) && !json_is_number(v) && !json_is_boolean(v)) {
			char buf[96];
			return rb_error_set(err, 0, "skill `%s`: input `%s`: expected a string, number or bool, got %s",
			                    s->name, key, rb_jsonck_describe(v, buf, sizeof buf));
		}
	}
	for (size_t i = 0; i < s->n_inputs; i++)
		if (!json_object_get(inputs, s->inputs[i]))
			missing[n_missing++] = s->inputs[i];
	if (!n_unknown && !n_missing)
		return 0;
	char u[512], m[512], d[512];
	name_list(u, sizeof u, unknown, n_unknown);
	name_list(m, sizeof m, missing, n_missing);
	name_list(d, sizeof d, (const char *const *)s->inputs, s->n_inputs);
	if (n_unknown && n_missing)
		return rb_error_set(err, 0, "skill `%s`: unknown input %s; missing input %s (declared: %s)", s->name, u,
		                    m, d);
	if (n_unknown)
		return rb_error_set(err, 0, "skill `%s`: unknown input %s (declared: %s)", s->name, u,
		                    s->n_inputs ? d : "none");
	return rb_error_set(err, 0, "skill `%s`: missing input %s (declared: %s)", s->name, m, d);
}

/* The shortest decimal that reads back as the same double: "2.5", not "2.5000000000000000". */
static void format_real(double d, char *buf, size_t len)
{
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			return;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void rb_skill_env_free(char **env)
{
	if (!env)
		return;
	for (char **e = env; *e; e++)
		free(*e);
	free(env);
}

int rb_skill_env(const struct rb_skill *s, json_t *inputs, char ***env_out)
{
	*env_out = NULL;
	if (inputs && !json_is_object(inputs))
		return errno = EINVAL, -1;
	size_t n = json_object_size(inputs), k = 0;
	char **env = calloc(n + 3, sizeof *env);
	if (!env)
		return errno = ENOMEM, -1;
	const char *key;
	json_t *v;
	json_object_foreach(inputs, key, v)
	{
		char num[64];
		const char *val;
		if (!input_name_ok(key))
			goto inval;
		if (json_is_string(v)) {
			val = json_string_value(v);
			if (strlen(val) != json_string_length(v)) /* a NUL cannot cross execve */
				goto inval;
		} else if (json_is_integer(v)) {
			snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
			val = num;
		} else if (json_is_real(v)) {
			format_real(json_real_value(v), num, sizeof num);
			val = num;
		} else if (json_is_boolean(v)) {
			val = json_is_true(v) ? "true" : "false";
		} else {
			goto inval;
		}
		char *e;
		if (asprintf(&e, "RUNBOX_INPUT_%s=%s", key, val) < 0)
			goto nomem;
		for (char *p = e + strlen("RUNBOX_INPUT_"); *p != '='; p++)
			*p = (char)toupper((unsigned char)*p);
		env[k++] = e;
	}
	qsort(env, k, sizeof *env, cmp_str);
	if (!(env[k++] = strdup("RUNBOX_INPUTS_FILE=" RB_SKILL_INPUTS_FILE)))
		goto nomem;
	if (asprintf(&env[k], "RUNBOX_SKILL_DIR=" RB_SKILL_MOUNT_DIR "/%s", s->name) < 0) {
		env[k] = NULL;
		goto nomem;
	}
	*env_out = env;
	return 0;
inval:
	rb_skill_env_free(env);
	return errno = EINVAL, -1;
nomem:
	rb_skill_env_free(env);
	return errno = ENOMEM, -1;
}

int rb_skill_entry_path(const struct rb_skill *s, char *buf, size_t len)
{
	int n = snprintf(buf, len, RB_SKILL_MOUNT_DIR "/%s/%s", s->name, s->entry);
	return n < 0 || (size_t)n >= len ? (errno = ENAMETOOLONG, -1) : 0;
}

int rb_skill_parse_result(const char *stdout_text, size_t len, json_t **out, struct rb_error *err)
{
	*out = NULL;
	if (!stdout_text || len == 0 || strspn(stdout_text, " \t\r\n") >= len)
		return rb_error_set(err, 0, "stdout is not one JSON object: it is empty");
	json_error_t jerr;
	/* Decoding any value lets "got an array" be said plainly instead of a parser message. */
	json_t *v = json_loadb(stdout_text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	if (!v)
		return rb_error_set(err, 0, "stdout is not one JSON object: %s at line %d col %d", jerr.text, jerr.line,
		                    jerr.column);
	if (!json_is_object(v)) {
		char buf[96];
		rb_error_set(err, 0, "stdout is not one JSON object: got %s", rb_jsonck_describe(v, buf, sizeof buf));
		json_decref(v);
		return -1;
	}
	*out = v;
	return 0;
}

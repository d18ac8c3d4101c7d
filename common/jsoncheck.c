/* Strict JSON validation helpers: messages that name the origin and the JSON path, the way
 * a user finds the bad line (`steps[2].timeout: expected a duration like "30s", got true`). */
#include "common/jsoncheck.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

int rb_jsonck_bad(const struct rb_jsonck *c, const char *path, const char *fmt, ...)
{
	char msg[RB_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (path && *path)
		return rb_error_set(c->err, 0, "%s %s: %s: %s", c->what, c->origin, path, msg);
	return rb_error_set(c->err, 0, "%s %s: %s", c->what, c->origin, msg);
}

const char *rb_jsonck_describe(const json_t *v, char *buf, size_t len)
{
	if (!v) /* a missing key or body: json_typeof would read through NULL */
		return "nothing";
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "an object";
	case JSON_ARRAY: return "an array";
	case JSON_TRUE: return "true";
	case JSON_FALSE: return "false";
	case JSON_NULL: return "null";
	case JSON_INTEGER: snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); return buf;
	case JSON_REAL: snprintf(buf, len, "%g", json_real_value(v)); return buf;
	case JSON_STRING: {
		const char *s = json_string_value(v);
		if (strlen(s) > 40)
			snprintf(buf, len, "\"%.40s...\"", s);
		else
			snprintf(buf, len, "\"%s\"", s);
		return buf;
	}
	}
	return "a value";
}

int rb_jsonck_expected(const struct rb_jsonck *c, const char *path, const char *what, const json_t *v)
{
	char buf[96];
	return rb_jsonck_bad(c, path, "expected %s, got %s", what, rb_jsonck_describe(v, buf, sizeof buf));
}

void rb_jsonck_join(char *out, size_t len, const char *parent, const char *key)
{
	if (parent && *parent)
		snprintf(out, len, "%s.%s", parent, key);
	else
		snprintf(out, len, "%s", key);
}

int rb_jsonck_keys(const struct rb_jsonck *c, const char *parent, const json_t *obj, const char *const *known)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v)
	{
		bool ok = false;
		for (const char *const *k = known; *k && !ok; k++)
			ok = strcmp(key, *k) == 0;
		if (ok)
			continue;
		char list[256] = "", path[256];
		for (const char *const *k = known; *k; k++) {
			size_t n = strlen(list);
			snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", *k);
		}
		/* A key is user text: keep the message one readable line whatever it holds. */
		char shown[64];
		snprintf(shown, sizeof shown, "%s", key);
		for (char *p = shown; *p; p++)
			if ((unsigned char)*p < 0x20)
				*p = '?';
		rb_jsonck_join(path, sizeof path, parent, shown);
		return rb_jsonck_bad(c, path, "unknown key (known keys: %s)", list);
	}
	return 0;
}

json_t *rb_jsonck_load(const struct rb_jsonck *c, const char *text)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rb_jsonck_bad(c, NULL, "line %d column %d: %s", jerr.line, jerr.column, jerr.text);
		return NULL;
	}
	if (!json_is_object(root)) {
		rb_jsonck_expected(c, "(top level)", "an object", root);
		json_decref(root);
		return NULL;
	}
	return root;
}

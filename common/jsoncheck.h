/* Strict JSON validation shared by every loader of user-written JSON (manifests, and the
 * policy when its owner moves over): one-line errors "<what> <origin>: <json path>: <reason>". */
#ifndef RB_JSONCHECK_H
#define RB_JSONCHECK_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"

struct rb_jsonck {
	const char *what;   /* "manifest" */
	const char *origin; /* the file, as the user named it */
	struct rb_error *err;
};

/* Fills err with "<what> <origin>: <path>: <fmt...>" (no path part when path is empty); -1. */
int rb_jsonck_bad(const struct rb_jsonck *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "<path>: expected <what>, got <value>"; -1. */
int rb_jsonck_expected(const struct rb_jsonck *c, const char *path, const char *what, const json_t *v);
/* How a value reads in a message: `true`, `"abc"`, `an array`, `12`. */
const char *rb_jsonck_describe(const json_t *v, char *buf, size_t len);
/* Rejects the first key of obj not in known (NULL-terminated), listing the known keys. */
int rb_jsonck_keys(const struct rb_jsonck *c, const char *parent, const json_t *obj, const char *const *known);
/* Parses text as a document's top level: a JSON object, duplicate keys refused. NULL, with
 * "<what> <origin>: line L column C: ..." or "(top level): expected an object" in err. */
json_t *rb_jsonck_load(const struct rb_jsonck *c, const char *text);
/* out = "parent.key" (or "key" at top level). */
void rb_jsonck_join(char *out, size_t len, const char *parent, const char *key);

#endif

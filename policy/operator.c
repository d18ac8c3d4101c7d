/* The operator's settings file (operator.h): absent means every default, anything present is
 * validated strictly, since a misspelt key must never leave a setting silently off or on. */
#define _GNU_SOURCE
#include "policy/operator.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/util.h"

#define OPERATOR_FILE_MAX (64u << 10)

int rb_operator_config_load(const char *config_dir, struct rb_operator_config *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	if (!config_dir || !*config_dir)
		return 0;
	char path[4200];
	if (snprintf(path, sizeof path, "%s/config.json", config_dir) >= (int)sizeof path)
		return rb_error_set(err, ENAMETOOLONG, "operator config in `%s`", config_dir);
	_cleanup_free_ char *text = NULL;
	struct rb_error rerr = {0};
	if (rb_read_document(path, OPERATOR_FILE_MAX, &text, &rerr) < 0) {
		/* No file, or a directory we may not search (another user's): the defaults. */
		if (rerr.errnum == ENOENT || rerr.errnum == ENOTDIR || rerr.errnum == EACCES)
			return 0;
		if (err)
			*err = rerr;
		return rb_error_prefix(err, "operator config");
	}
	struct rb_jsonck c = {.what = "operator config", .origin = path, .err = err};
	_cleanup_json_ json_t *root = rb_jsonck_load(&c, text);
	if (!root)
		return -1;
	static const char *const keys[] = {"manifest_policy_paths", "serve_pool", NULL};
	if (rb_jsonck_keys(&c, "", root, keys) < 0)
		return -1;
	json_t *v = json_object_get(root, "manifest_policy_paths");
	if (v) {
		if (!json_is_boolean(v))
			return rb_jsonck_expected(&c, "manifest_policy_paths", "true or false", v);
		out->manifest_policy_paths = json_is_true(v);
	}
	if ((v = json_object_get(root, "serve_pool"))) {
		if (!json_is_array(v) || json_array_size(v) > RB_OPERATOR_POOL_MAX)
			return rb_jsonck_expected(&c, "serve_pool", "an array of at most 16 \"IMAGE:POLICY=N\" strings",
			                          v);
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e)
		{
			char at[32];
			snprintf(at, sizeof at, "serve_pool[%zu]", i);
			if (!json_is_string(e) || !json_string_length(e) ||
			    json_string_length(e) >= RB_OPERATOR_POOL_LEN ||
			    strlen(json_string_value(e)) != json_string_length(e))
				return rb_jsonck_expected(&c, at, "an \"IMAGE:POLICY=N\" string", e);
			snprintf(out->serve_pool[i], RB_OPERATOR_POOL_LEN, "%s", json_string_value(e));
			out->n_serve_pool = (unsigned)i + 1;
		}
	}
	return 0;
}

/* Scrubbing of a parsed JSON value (rb_scrub_json, see scrub.h): every string and object key,
 * decoded, so that an escape in the text (\u0041KIA...) hides nothing. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scrub/scrub.h"

/* The scrubbed copy of s[0..len) as a new JSON string, or NULL (with err) on failure; *n gets
 * the redactions (0: the caller keeps the original). */
static json_t *scrub_text(struct rb_scrubber *sc, const char *s, size_t len, uint64_t *n, struct rb_error *err)
{
	struct rb_buf_out o;
	struct rb_scrub_counts c;
	if (rb_scrub_buffer(sc, s, len, &o, &c, err) < 0)
		return NULL;
	*n = c.total;
	/* The markers are ASCII and replace whole matches: valid UTF-8 stays valid. */
	json_t *j = json_stringn(o.data, o.len);
	free(o.data);
	if (!j)
		rb_error_set(err, EILSEQ, "scrub: a scrubbed string is not UTF-8");
	return j;
}

int rb_scrub_json(struct rb_scrubber *s, json_t *j, uint64_t *count, struct rb_error *err)
{
	uint64_t n = 0;
	if (json_is_string(j)) {
		json_t *t = scrub_text(s, json_string_value(j), json_string_length(j), &n, err);
		if (!t)
			return -1;
		if (n && json_string_setn(j, json_string_value(t), json_string_length(t)) < 0) {
			json_decref(t);
			return rb_error_set(err, ENOMEM, "scrub: a JSON string");
		}
		json_decref(t);
	} else if (json_is_array(j)) {
		size_t i;
		json_t *v;
		json_array_foreach(j, i, v)
		{
			if (rb_scrub_json(s, v, count, err) < 0)
				return -1;
		}
	} else if (json_is_object(j)) {
		const char *k;
		json_t *v, *tmp;
		json_t *renamed = json_object(); /* scrubbed key -> value, put back after the walk */
		if (!renamed)
			return rb_error_set(err, ENOMEM, "scrub: a JSON object");
		json_object_foreach_safe(j, tmp, k, v)
		{
			uint64_t kn = 0;
			if (rb_scrub_json(s, v, count, err) < 0) {
				json_decref(renamed);
				return -1;
			}
			json_t *nk = scrub_text(s, k, strlen(k), &kn, err);
			if (!nk) {
				json_decref(renamed);
				return -1;
			}
			if (kn) {
				json_object_set(renamed, json_string_value(nk), v);
				json_object_del(j, k);
				n += kn;
			}
			json_decref(nk);
		}
		json_object_update(j, renamed);
		json_decref(renamed);
	}
	if (count)
		*count += n;
	return 0;
}

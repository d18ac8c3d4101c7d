/* The part of a manifest run's result kept beside it (see result_spill.h). */
#define _GNU_SOURCE
#include "runtime/run/result_spill.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/run/result.h"

void rb_result_spill_init(struct rb_result_spill *sp, const char *state_dir, const char *run_id)
{
	*sp = (struct rb_result_spill){.output_left = RB_RESULT_OUTPUT_MAX};
	snprintf(sp->dir, sizeof sp->dir, "%s/results/%s", state_dir, run_id);
}

/* A new file in the result directory (0600: it holds what the result would have). */
static int spill_open(struct rb_result_spill *sp, const char *name, char path[PATH_MAX])
{
	struct rb_error err;
	if (!sp->made && rb_mkdir_p(sp->dir, 0700, &err) < 0) {
		rb_warn("result: %s", err.msg);
		return -1;
	}
	sp->made = true;
	if (snprintf(path, PATH_MAX, "%s/%s", sp->dir, name) >= PATH_MAX)
		return -1;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		rb_warn("result: create `%s`: %s", path, strerror(errno));
	return fd;
}

void rb_result_spill_output(struct rb_result_spill *sp, unsigned step, const char *key, const struct rb_buf *b,
                            json_t *step_json)
{
	const char *data = b->data ? b->data : "";
	if (b->len <= sp->output_left) {
		rb_result_put_output(step_json, key, b); /* as a one-step run's: text, or base64 */
		sp->output_left -= b->len;
		return;
	}
	json_object_set_new(step_json, key, json_string(""));
	char name[64], path[PATH_MAX], file_key[64];
	snprintf(name, sizeof name, "step-%u.%s", step, key);
	snprintf(file_key, sizeof file_key, "%s_file", key);
	_cleanup_close_ int fd = spill_open(sp, name, path);
	if (fd >= 0 && rb_write_all(fd, data, b->len) == 0)
		json_object_set_new(step_json, file_key, json_string(path));
	else
		json_object_set_new(step_json, file_key, json_null()); /* said, not hidden: the result lost it */
}

void rb_result_spill_artifacts(struct rb_result_spill *sp, unsigned step, json_t *harvest)
{
	json_t *arts = json_object_get(harvest, "artifacts");
	size_t n = json_array_size(arts);
	if (n <= RB_RESULT_ARTIFACTS)
		return;
	char name[64], path[PATH_MAX];
	snprintf(name, sizeof name, "step-%u.artifacts.jsonl", step);
	_cleanup_close_ int fd = spill_open(sp, name, path);
	bool ok = fd >= 0;
	size_t i;
	json_t *a;
	json_array_foreach(arts, i, a)
	{
		if (!ok)
			break;
		_cleanup_free_ char *line = json_dumps(a, JSON_COMPACT | JSON_SORT_KEYS);
		ok = line && rb_write_all(fd, line, strlen(line)) == 0 && rb_write_all(fd, "\n", 1) == 0;
	}
	json_t *kept = json_array();
	for (i = 0; i < RB_RESULT_ARTIFACTS; i++)
		json_array_append(kept, json_array_get(arts, i));
	json_object_set_new(harvest, "artifacts", kept);
	json_object_set_new(harvest, "artifacts_total", json_integer((json_int_t)n));
	json_object_set_new(harvest, "artifacts_file", ok ? json_string(path) : json_null());
}

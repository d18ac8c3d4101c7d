/* A create's limits, labels and lifetime, and the session quotas (quota.h). */
#include "serve/quota.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/jsoncheck.h"
#include "common/util.h"
#include "policy/manifest.h"

/* A duration: "30s", "10m", "1500ms", or a number of seconds. */
static int duration(const struct rb_jsonck *ck, const json_t *v, const char *path, uint64_t *out)
{
	if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX) {
		*out = (uint64_t)json_integer_value(v) * 1000u;
		return 0;
	}
	if (json_is_string(v) && rb_parse_duration_ms(json_string_value(v), out) == 0)
		return 0;
	return rb_jsonck_expected(ck, path, "a duration (\"30s\", \"10m\") or a whole number of seconds", v);
}

static int limits(const struct rb_jsonck *ck, const json_t *l, struct rb_serve_ask *ask)
{
	static const char *const known[] = {"memory", "cpus", "pids", "timeout", NULL};
	if (!json_is_object(l))
		return rb_jsonck_expected(ck, "$.limits", "an object", l);
	if (rb_jsonck_keys(ck, "$.limits", l, known) < 0)
		return -1;
	const json_t *v;
	if ((v = json_object_get(l, "memory"))) {
		bool ok = (json_is_integer(v) && json_integer_value(v) > 0 &&
		           (ask->memory_bytes = (uint64_t)json_integer_value(v))) ||
		          (json_is_string(v) && rb_parse_size(json_string_value(v), &ask->memory_bytes) == 0 &&
		           ask->memory_bytes > 0);
		if (!ok)
			return rb_jsonck_expected(ck, "$.limits.memory", "a size (\"512M\") or a number of bytes", v);
	}
	if ((v = json_object_get(l, "cpus"))) {
		if (!json_is_number(v) || json_number_value(v) <= 0 || json_number_value(v) > 4096)
			return rb_jsonck_expected(ck, "$.limits.cpus", "a number of CPUs above 0", v);
		ask->cpus = json_number_value(v);
	}
	if ((v = json_object_get(l, "pids"))) {
		if (!json_is_integer(v) || json_integer_value(v) <= 0)
			return rb_jsonck_expected(ck, "$.limits.pids", "a positive integer", v);
		ask->pids = (uint64_t)json_integer_value(v);
	}
	if ((v = json_object_get(l, "timeout")) && duration(ck, v, "$.limits.timeout", &ask->timeout_ms) < 0)
		return -1;
	return 0;
}

static int labels(const struct rb_jsonck *ck, const json_t *l, struct rb_serve_ask *ask)
{
	if (!json_is_object(l))
		return rb_jsonck_expected(ck, "$.labels", "an object of strings", l);
	if (json_object_size(l) > RB_SERVE_MAX_LABELS)
		return rb_jsonck_bad(ck, "$.labels", "at most %d labels", RB_SERVE_MAX_LABELS);
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)l, k, v)
	{
		char p[128];
		snprintf(p, sizeof p, "$.labels.%.64s", k);
		if (!rb_manifest_id_ok(k))
			return rb_jsonck_bad(ck, p, "a label's name is an id ([A-Za-z0-9._-]{1,64})");
		if (!json_is_string(v) || json_string_length(v) > 256 ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return rb_jsonck_expected(ck, p, "a string of at most 256 bytes without NUL", v);
		/* The caller's own correlation id, never runbox's run id (that one runbox makes). */
		if (!strcmp(k, "run_id") && !rb_manifest_id_ok(json_string_value(v)))
			return rb_jsonck_bad(
			    ck, p, "a caller's run id is an id ([A-Za-z0-9._-]{1,64}, not \".\" or \"..\"), not `%s`",
			    json_string_value(v));
	}
	ask->labels = json_deep_copy(l);
	return ask->labels ? 0 : rb_error_set(ck->err, ENOMEM, "labels");
}

int rb_serve_ask_parse(const json_t *body, struct rb_serve_ask *ask, struct rb_error *err)
{
	memset(ask, 0, sizeof *ask);
	struct rb_jsonck ck = {"request", "body", err};
	const json_t *v;
	if ((v = json_object_get(body, "limits")) && limits(&ck, v, ask) < 0)
		return -1;
	if ((v = json_object_get(body, "labels")) && labels(&ck, v, ask) < 0)
		return -1;
	if ((v = json_object_get(body, "max_lifetime")) && duration(&ck, v, "$.max_lifetime", &ask->lifetime_ms) < 0)
		return -1;
	if ((v = json_object_get(body, "agent_version"))) {
		if (!json_is_string(v) || !json_string_length(v) || json_string_length(v) > 128 ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return rb_jsonck_expected(&ck, "$.agent_version", "a string of 1 to 128 bytes", v);
		ask->agent_version = json_string_value(v);
	}
	return 0;
}

void rb_serve_ask_free(struct rb_serve_ask *ask)
{
	json_decref(ask->labels);
	ask->labels = NULL;
}

bool rb_serve_ask_poolable(const struct rb_serve_ask *ask)
{
	return !ask->memory_bytes && !ask->pids && !ask->timeout_ms && ask->cpus <= 0;
}

unsigned rb_serve_quota_check(unsigned total, unsigned max_total, unsigned of_tenant, unsigned max_per_tenant,
                              const char *tenant, struct rb_error *err)
{
	if (max_total && total >= max_total) {
		rb_error_setk(err, RB_ERR_CONFLICT, 0,
		              "too many sessions: the daemon holds %u, at most %u (--max-sessions)", total, max_total);
		return 429;
	}
	if (max_per_tenant && of_tenant >= max_per_tenant) {
		rb_error_setk(err, RB_ERR_CONFLICT, 0,
		              "too many sessions of tenant `%s`: it holds %u, at most %u (--max-sessions-per-tenant)",
		              tenant, of_tenant, max_per_tenant);
		return 429;
	}
	return 0;
}

unsigned rb_serve_snapshot_quota_check(uint64_t used, uint64_t size, uint64_t max, const char *tenant,
                                       struct rb_error *err)
{
	if (!max || (used <= max && size <= max - used))
		return 0;
	rb_error_setk(err, RB_ERR_CONFLICT, EDQUOT,
	              "snapshot: tenant `%s`'s snapshots hold %" PRIu64 " bytes of the store; this one's %" PRIu64
	              " would put them over %" PRIu64 " (--max-snapshot-bytes-per-tenant)",
	              tenant, used, size, max);
	return 507;
}

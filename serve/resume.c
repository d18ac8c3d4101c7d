/* POST /v1/sessions/ID/resume: a session this daemon holds is reconnected; a closed one (idle
 * timeout, lifetime, deleted, lost in a restart) becomes a new session of its tenant, image and
 * policy, hydrated from the last snapshot its run took, and that is recorded (docs/serve.md). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/jsoncheck.h"
#include "common/paths.h"
#include "common/util.h"
#include "ledger/ledger.h"
#include "serve/known.h"
#include "serve/manifest.h"
#include "serve/restart.h"
#include "serve/resume.h"

/* The run_start of session sid (of tenant, when not NULL), or NULL: a label holding the same
 * text is not it. */
static json_t *session_start(struct rb_ledger *l, const char *sid, const char *tenant)
{
	char needle[64];
	snprintf(needle, sizeof needle, "\"session\":\"%.32s\"", sid);
	struct rb_ledger_filter f = {.type = "run_start", .grep = needle, .limit = 16};
	json_t *starts = NULL, *start = NULL, *e;
	struct rb_error err;
	size_t i;
	if (rb_ledger_query(l, &f, &starts, &err) < 0)
		return NULL;
	json_array_foreach(starts, i, e)
	{
		const char *named = json_string_value(json_object_get(json_object_get(e, "data"), "session"));
		const char *owner = json_string_value(json_object_get(e, "tenant"));
		if (named && !strcmp(named, sid) && owner && (!tenant || !strcmp(owner, tenant)))
			start = json_incref(e);
	}
	json_decref(starts);
	return start;
}

/* The create that makes the new session: the old one's tenant, agent, image, policy, labels and
 * agent version, its last snapshot, and what the resume's body adds. */
static json_t *create_body(const json_t *start, const char *ref, const json_t *body)
{
	const json_t *d = json_object_get(start, "data");
	json_t *c = json_pack("{s:O?, s:O?, s:O?, s:O?, s:s}", "tenant", json_object_get(start, "tenant"), "agent",
	                      json_object_get(start, "agent"), "image", json_object_get(d, "image"), "policy",
	                      json_object_get(d, "policy_name"), "snapshot", ref);
	if (c && json_is_object(json_object_get(d, "labels")))
		json_object_set(c, "labels", json_object_get(d, "labels"));
	if (c && json_is_string(json_object_get(d, "agent_version")))
		json_object_set(c, "agent_version", json_object_get(d, "agent_version"));
	if (c)
		json_object_update(c, (json_t *)body);
	return c;
}

/* The body as strictly as a create checks the same keys, before anything is looked up. */
static int check_body(const struct rb_jsonck *ck, const json_t *body)
{
	static const char *const keys[] = {"manifest", "idle_timeout", "max_lifetime", NULL};
	if (!json_is_object(body))
		return rb_jsonck_expected(ck, "$", "an object", body);
	if (rb_jsonck_keys(ck, "$", body, keys) < 0)
		return -1;
	const char *const durations[] = {"idle_timeout", "max_lifetime"};
	for (size_t i = 0; i < 2; i++) {
		const json_t *v = json_object_get(body, durations[i]);
		uint64_t ms;
		char at[32];
		snprintf(at, sizeof at, "$.%s", durations[i]);
		if (v && !(json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX) &&
		    !(json_is_string(v) && rb_parse_duration_ms(json_string_value(v), &ms) == 0))
			return rb_jsonck_expected(ck, at, "a duration (\"30s\", \"10m\") or a whole number of seconds",
			                          v);
	}
	struct rb_serve_manifest m;
	if (json_object_get(body, "manifest") &&
	    rb_serve_manifest_parse(json_object_get(body, "manifest"), true, &m, ck->err) < 0)
		return -1;
	if (json_object_get(body, "manifest"))
		rb_serve_manifest_free(&m);
	return 0;
}

/* 403 (*reply set) when the key may not make what create asks: the session's own policy and
 * image, refused as a create naming them would be. */
static unsigned refused(const struct rb_serve_key *key, const char *sid, json_t *create, json_t **reply)
{
	char why[256];
	if (rb_serve_key_may_create(key, create, why, sizeof why))
		return 0;
	*reply = json_pack("{s:o}", "error", json_sprintf("session `%s` is not this key's to resume: %s", sid, why));
	return 403;
}

unsigned rb_serve_session_resume(struct rb_serve *sv, const char *sid, const json_t *body,
                                 const struct rb_serve_key *key, json_t **reply)
{
	const char *tenant = rb_serve_key_tenant(key);
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_jsonck ck = {"request", "body", &err};
	if (check_body(&ck, body) < 0)
		return rb_serve_error(&err, reply);
	/* Live here (and the caller's): reconnected, the same session. */
	char owner[128];
	if (rb_serve_session_tenant(sv, sid, owner, sizeof owner) == 0 && (!tenant || !strcmp(owner, tenant))) {
		if (json_object_size(body))
			return rb_error_setk(&err, RB_ERR_CONFLICT, 0,
			                     "session `%s` is live: a resume's manifest and timeouts are for a new "
			                     "session (POST /v1/sessions/ID/manifest lays entries into a live one)",
			                     sid),
			       rb_serve_error(&err, reply);
		unsigned st = rb_serve_session_get(sv, sid, reply);
		if (st != 200)
			return st;
		/* Reconnected only for a key that could have made it. */
		json_t *made = json_pack("{s:O?, s:O?}", "image", json_object_get(*reply, "image"), "policy",
		                         json_object_get(*reply, "policy"));
		json_t *no = NULL;
		st = made ? refused(key, sid, made, &no) : 0;
		json_decref(made);
		if (st) {
			json_decref(*reply);
			*reply = no;
			return st;
		}
		json_object_set_new(*reply, "resumed", json_string("live"));
		return 200;
	}
	/* An id the daemon never knew (of this tenant) is answered without the ledger. */
	if (!rb_serve_known_has(rb_serve_known(sv), sid, tenant)) {
		*reply = json_pack("{s:o}", "error", json_sprintf("no session `%.64s`", sid));
		return 404;
	}
	struct rb_paths paths;
	struct rb_ledger *l = NULL;
	if (rb_paths_init(&paths, rb_serve_host(sv), rb_serve_state_dir(sv), &err) < 0 ||
	    rb_ledger_open(paths.state_dir, &l, &err) < 0)
		return rb_serve_error(&err, reply);
	/* Another tenant's session is answered as one that never was. */
	json_t *start = session_start(l, sid, tenant), *end = NULL, *cleanup = NULL;
	const char *run_id = json_string_value(json_object_get(start, "run_id"));
	char last[128] = "";
	if (run_id) {
		end = rb_serve_last_event(l, run_id, "run_end");
		rb_serve_workspace_ref(l, run_id, last, sizeof last);
		cleanup = rb_serve_last_event(l, run_id, "cleanup");
	}
	rb_ledger_close(l);
	const char *ref = last[0] ? last : NULL;
	const char *why = json_string_value(json_object_get(json_object_get(cleanup, "data"), "what"));
	unsigned st;
	if (!run_id) {
		*reply = json_pack("{s:o}", "error", json_sprintf("no session `%.64s`", sid));
		st = 404;
	} else if (!end) {
		/* Recorded, not ended, not here: another daemon's on this state directory. */
		*reply = json_pack("{s:o, s:s}", "error",
		                   json_sprintf("session `%s` is not closed, and not held by this daemon", sid),
		                   "run_id", run_id);
		st = 409;
	} else if (!ref) {
		*reply = json_pack("{s:o, s:s, s:s?}", "error",
		                   json_sprintf("session `%s` (run %s) closed (%s) without a snapshot: nothing to "
		                                "resume from",
		                                sid, run_id, why ? why : "?"),
		                   "run_id", run_id, "closed", why);
		st = 409;
	} else {
		json_t *c = create_body(start, ref, body);
		st = !c ? rb_serve_error(&err, reply) : refused(key, sid, c, reply);
		if (c && !st)
			st = rb_serve_session_create(sv, c, reply);
		json_decref(c);
		const char *made = st == 201 ? json_string_value(json_object_get(*reply, "id")) : NULL;
		json_t *from = json_pack("{s:s, s:s, s:s, s:s?}", "session", sid, "run_id", run_id, "snapshot", ref,
		                         "closed", why);
		/* The new run says what it was resumed from, durably, before the reply. */
		if (made && rb_serve_record(sv, made, "resume", json_deep_copy(from), &err) < 0) {
			json_t *d = NULL;
			rb_serve_session_delete(sv, made, &d);
			json_decref(d);
			json_decref(*reply);
			st = rb_serve_error(&err, reply);
		} else if (made) {
			json_object_set_new(*reply, "resumed", json_string("snapshot"));
			json_object_set(*reply, "resumed_from", from);
		}
		json_decref(from);
	}
	json_decref(start);
	json_decref(end);
	json_decref(cleanup);
	return st;
}

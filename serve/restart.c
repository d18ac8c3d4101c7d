/* After a daemon restart: the sessions a dead runbox serve held are cleaned up as runbox gc
 * does (runtime/run/lifecycle.h) and recorded lost; a call naming one is told so (404), with
 * the last snapshot it took, so a client can resume from it (docs/serve.md "Restarts"). */
#include <errno.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/paths.h"
#include "ledger/ledger.h"
#include "runtime/run/lifecycle.h"
#include "serve/restart.h"

/* A session's run names its session in run_start; a warm member (unbound) has no tenant yet
 * and nothing in the ledger. Runs of `runbox run` are neither: they stay runbox gc's. */
static bool a_session(json_t *st, void *ctx)
{
	struct rb_ledger *l = ctx;
	const char *tenant = json_string_value(json_object_get(st, "tenant"));
	const char *run_id = json_string_value(json_object_get(st, "run_id"));
	if (tenant && !*tenant)
		return true;
	struct rb_ledger_filter f = {.run_id = run_id, .type = "run_start", .limit = 1};
	json_t *ev = NULL;
	struct rb_error err;
	if (!l || !run_id || rb_ledger_query(l, &f, &ev, &err) < 0)
		return false;
	bool is = json_is_string(json_object_get(json_object_get(json_array_get(ev, 0), "data"), "session"));
	json_decref(ev);
	return is;
}

int rb_serve_restart_reclaim(const struct rb_host *host, const char *state_dir, struct rb_error *err)
{
	struct rb_paths paths;
	if (rb_paths_init(&paths, host, state_dir, err) < 0)
		return -1;
	struct rb_ledger *l = NULL;
	if (rb_ledger_open(paths.state_dir, &l, err) < 0)
		return -1;
	const struct rb_lifecycle_gc_how how = {
	    .take = a_session, .ctx = l, .result = "lost", .what = "daemon lost", .by = "serve"};
	json_t *report = NULL;
	int r = rb_lifecycle_gc_how(&paths, &how, &report, err);
	size_t i;
	json_t *done;
	json_array_foreach(report, i, done)
	{
		const char *id = json_string_value(json_object_get(done, "run_id"));
		const char *refused = json_string_value(json_object_get(done, "refused"));
		if (refused)
			continue; /* runbox gc's to report */
		if (json_is_true(json_object_get(done, "removed")))
			rb_info("serve: run %s of a daemon that died: cleaned up, recorded as lost", id);
		else
			rb_warn("serve: run %s of a daemon that died: not all cleaned up (runbox gc retries): %s", id,
			        json_string_value(json_object_get(done, "cgroup_error"))
			            ? json_string_value(json_object_get(done, "cgroup_error"))
			        : json_string_value(json_object_get(done, "dir_error"))
			            ? json_string_value(json_object_get(done, "dir_error"))
			        : json_string_value(json_object_get(done, "ledger_error"))
			            ? json_string_value(json_object_get(done, "ledger_error"))
			            : "?");
	}
	json_decref(report);
	rb_ledger_close(l);
	return r;
}

static bool hex32(const char *s)
{
	size_t n = s ? strspn(s, "0123456789abcdef") : 0;
	return n == 32 && !s[n];
}

json_t *rb_serve_last_event(struct rb_ledger *l, const char *run_id, const char *type)
{
	struct rb_ledger_filter f = {.run_id = run_id, .type = type, .last = 1};
	json_t *ev = NULL;
	struct rb_error err;
	if (rb_ledger_query(l, &f, &ev, &err) < 0)
		return NULL;
	json_t *e = json_incref(json_array_get(ev, 0));
	json_decref(ev);
	return e;
}

/* The newest event of type in the run that did not fail (no "error", and for a snapshot a
 * ref), and its seq; NULL when none of its last 64 is. */
static const json_t *last_done(struct rb_ledger *l, const char *run_id, const char *type, json_t **all, json_int_t *seq)
{
	struct rb_ledger_filter f = {.run_id = run_id, .type = type, .last = 64};
	struct rb_error err;
	*seq = -1;
	if (rb_ledger_query(l, &f, all, &err) < 0)
		return NULL;
	for (size_t i = json_array_size(*all); i-- > 0;) {
		const json_t *e = json_array_get(*all, i);
		const json_t *d = json_object_get(e, "data");
		if (json_object_get(d, "error") ||
		    (!strcmp(type, "snapshot") && !json_is_string(json_object_get(d, "ref"))))
			continue;
		*seq = json_integer_value(json_object_get(e, "seq"));
		return e;
	}
	return NULL;
}

void rb_serve_workspace_ref(struct rb_ledger *l, const char *run_id, char *out, size_t n)
{
	json_t *snaps = NULL, *hyds = NULL;
	json_int_t ss, hs;
	const json_t *snap = last_done(l, run_id, "snapshot", &snaps, &ss);
	const json_t *hyd = last_done(l, run_id, "hydrate", &hyds, &hs);
	const json_t *last = hs > ss ? hyd : snap;
	const char *ref = last ? json_string_value(json_object_get(json_object_get(last, "data"), "ref")) : NULL;
	snprintf(out, n, "%s", ref ? ref : "");
	json_decref(snaps);
	json_decref(hyds);
}

unsigned rb_serve_lost(const struct rb_host *host, const char *state_dir, const char *sid, const char *tenant,
                       json_t **reply)
{
	char msg[512];
	snprintf(msg, sizeof msg, "no session `%.64s`", sid);
	struct rb_paths paths;
	struct rb_ledger *l = NULL;
	struct rb_error err;
	if (!hex32(sid) || rb_paths_init(&paths, host, state_dir, &err) < 0 ||
	    rb_ledger_open(paths.state_dir, &l, &err) < 0) {
		*reply = json_pack("{s:s}", "error", msg);
		return 404;
	}
	/* The run whose run_start names the session (a label holding the same text is not it). */
	char needle[64];
	snprintf(needle, sizeof needle, "\"session\":\"%s\"", sid);
	struct rb_ledger_filter f = {.type = "run_start", .grep = needle, .limit = 16};
	json_t *starts = NULL, *start = NULL, *e;
	size_t i;
	if (rb_ledger_query(l, &f, &starts, &err) == 0)
		json_array_foreach(starts, i, e)
		{
			const char *named = json_string_value(json_object_get(json_object_get(e, "data"), "session"));
			if (named && !strcmp(named, sid))
				start = e;
		}
	const char *run_id = json_string_value(json_object_get(start, "run_id"));
	const char *owner = json_string_value(json_object_get(start, "tenant"));
	json_t *end = NULL;
	/* Another tenant's session is answered as one that never was. */
	if (run_id && (!tenant || (owner && !strcmp(owner, tenant))))
		end = rb_serve_last_event(l, run_id, "run_end");
	const char *result = json_string_value(json_object_get(json_object_get(end, "data"), "result"));
	if (result && !strcmp(result, "lost")) {
		char last[128];
		rb_serve_workspace_ref(l, run_id, last, sizeof last);
		const char *ref = last[0] ? last : NULL;
		if (ref)
			snprintf(
			    msg, sizeof msg,
			    "session `%s` was lost: the daemon that held it (run %s) died; its last snapshot is %s "
			    "(create a session with \"snapshot\": \"%s\" to resume)",
			    sid, run_id, ref, ref);
		else
			snprintf(msg, sizeof msg,
			         "session `%s` was lost: the daemon that held it (run %s) died; it took no snapshot",
			         sid, run_id);
		*reply = json_pack("{s:s, s:b, s:s, s:s?}", "error", msg, "lost", 1, "run_id", run_id, "snapshot", ref);
	} else {
		*reply = json_pack("{s:s}", "error", msg);
	}
	json_decref(starts);
	json_decref(end);
	rb_ledger_close(l);
	return 404;
}

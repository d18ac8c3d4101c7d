/* The E2B control plane: /sandboxes and /v2/sandboxes (create, get, list, kill, timeout, connect)
 * over serve sessions, the table of E2B facts beside them (access token, template, metadata,
 * end of life) and the reaper that kills a sandbox at its end of life. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "serve/e2b_internal.h"

#define REAP_TICK_MS 200

static void free_sandbox(struct e2b_sandbox *s)
{
	for (size_t i = 0; i < s->n_procs; i++) {
		free(s->procs[i].tag);
		free(s->procs[i].config);
	}
	free(s->procs);
	json_decref(s->metadata);
	free(s);
}

/* Caller holds e->lock. */
static struct e2b_sandbox *find(struct rb_e2b *e, const char *id)
{
	for (struct e2b_sandbox *s = e->sandboxes; s; s = s->next)
		if (!strcmp(s->id, id))
			return s;
	return NULL;
}

/* Caller holds e->lock; the entry is the caller's after. */
static void unlink_sandbox(struct rb_e2b *e, struct e2b_sandbox *s)
{
	for (struct e2b_sandbox **pp = &e->sandboxes; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			return;
		}
}

bool e2b_session_alive(struct rb_e2b *e, const char *id)
{
	json_t *r = NULL;
	unsigned st = rb_serve_session_get(e->sv, id, &r);
	json_decref(r);
	if (st != 404)
		return true;
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, id);
	if (s)
		unlink_sandbox(e, s);
	pthread_mutex_unlock(&e->lock);
	if (s)
		free_sandbox(s);
	return false;
}

static json_t *sandbox_json(const struct e2b_sandbox *s, bool detail)
{
	char started[40], end[40];
	e2b_time(s->started_ms, started, sizeof started);
	e2b_time(s->end_ms, end, sizeof end);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:s}", "templateID", s->template_id, "sandboxID",
	                      s->id, "clientID", "runbox", "startedAt", started, "endAt", end, "envdVersion",
	                      E2B_ENVD_VERSION, "metadata", s->metadata, "state", "running");
	if (detail)
		json_object_set_new(o, "envdAccessToken", json_string(s->token));
	return o;
}

/* The one sandbox of the caller's tenant named id, copied out as JSON (NULL: none). */
static json_t *lookup_json(struct rb_e2b *e, const struct e2b_key *k, const char *id, bool detail)
{
	if (!e2b_session_alive(e, id))
		return NULL;
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, id);
	json_t *o = s && !strcmp(s->tenant, k->tenant) ? sandbox_json(s, detail) : NULL;
	pthread_mutex_unlock(&e->lock);
	return o;
}

/* A JSON object body, or a 400 in rp. */
static json_t *body_object(const struct e2b_req *rq, struct e2b_reply *rp)
{
	if (!rq->len)
		return json_object();
	json_error_t je;
	json_t *v = json_loadb(rq->body, rq->len, JSON_REJECT_DUPLICATES, &je);
	if (!v || !json_is_object(v)) {
		json_decref(v);
		e2b_api_error(rp, 400, "request body: not a JSON object (%s)", v ? "another value" : je.text);
		return NULL;
	}
	return v;
}

/* A timeout in seconds at key (absent: def); -1 with a 400 in rp when not 1..E2B_TIMEOUT_MAX. */
static int64_t timeout_s(const json_t *body, const char *key, int64_t def, struct e2b_reply *rp)
{
	json_t *t = json_object_get(body, key);
	if (!t || json_is_null(t))
		return def;
	if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > E2B_TIMEOUT_MAX) {
		e2b_api_error(rp, 400, "`%s`: expected whole seconds from 0 to %u", key, E2B_TIMEOUT_MAX);
		return -1;
	}
	return json_integer_value(t);
}

static bool string_map(const json_t *v)
{
	const char *k;
	json_t *x;
	if (!json_is_object(v))
		return false;
	json_object_foreach((json_t *)v, k, x)
	{
		if (!json_is_string(x))
			return false;
	}
	return true;
}

/* What the create body asks for, checked: only what runbox serves, the rest refused by name. */
static bool create_body_ok(const json_t *b, struct e2b_reply *rp)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)b, k, v)
	{
		if (json_is_null(v))
			continue;
		if (!strcmp(k, "templateID") && json_is_string(v))
			continue;
		if (!strcmp(k, "timeout") && json_is_integer(v))
			continue;
		if ((!strcmp(k, "envVars") || !strcmp(k, "metadata")) && string_map(v))
			continue;
		if (!strcmp(k, "secure") && json_is_boolean(v))
			continue;
		/* Off is what runbox is; on is a feature it does not have. */
		if ((!strcmp(k, "autoPause") || !strcmp(k, "allow_internet_access")) && json_is_false(v))
			continue;
		if (!strcmp(k, "allow_internet_access"))
			e2b_api_error(
			    rp, 400,
			    "allow_internet_access: a runbox sandbox has no route out; it reaches the network "
			    "only through the gateway its policy names");
		else if (!strcmp(k, "templateID") || !strcmp(k, "timeout") || !strcmp(k, "envVars") ||
		         !strcmp(k, "metadata") || !strcmp(k, "secure"))
			e2b_api_error(rp, 400, "`%s`: wrong type", k);
		else
			e2b_api_error(rp, 400, "`%s`: not supported by runbox serve (docs/e2b.md)", k);
		return false;
	}
	return true;
}

static void create(struct rb_e2b *e, const struct e2b_key *k, const struct e2b_req *rq, struct e2b_reply *rp)
{
	_cleanup_json_ json_t *b = body_object(rq, rp);
	if (!b || !create_body_ok(b, rp))
		return;
	int64_t timeout = timeout_s(b, "timeout", E2B_TIMEOUT_DEF, rp);
	if (timeout < 0)
		return;
	const char *tpl = json_string_value(json_object_get(b, "templateID"));
	if (!tpl || !*tpl)
		tpl = "base";
	/* E2B's default template is the daemon's default image. */
	_cleanup_json_ json_t *nb = json_pack("{s:s, s:s}", "tenant", k->tenant, "agent", "e2b");
	if (strcmp(tpl, "base") != 0)
		json_object_set_new(nb, "image", json_string(tpl));
	if (k->policy[0])
		json_object_set_new(nb, "policy", json_string(k->policy));
	json_t *env = json_object_get(b, "envVars");
	if (json_is_object(env) && json_object_size(env))
		json_object_set(nb, "env", env);
	struct e2b_sandbox *s = calloc(1, sizeof *s);
	if (!s || rb_random_hex(s->token, sizeof s->token) < 0) {
		free(s);
		e2b_api_error(rp, 500, "out of memory");
		return;
	}
	_cleanup_json_ json_t *r = NULL;
	unsigned st = rb_serve_session_create(e->sv, nb, &r);
	if (st != 201) {
		free(s);
		/* An image the store lacks is the caller's bad template; the rest pass as they are. */
		if (st == 404 || st == 400)
			e2b_api_error(rp, 400, "template `%s`: %s", tpl, e2b_native_msg(r));
		else
			e2b_api_error(rp, st, "%s", e2b_native_msg(r));
		return;
	}
	snprintf(s->id, sizeof s->id, "%s", json_string_value(json_object_get(r, "id")));
	snprintf(s->tenant, sizeof s->tenant, "%s", k->tenant);
	snprintf(s->template_id, sizeof s->template_id, "%s", tpl);
	json_t *md = json_object_get(b, "metadata");
	s->metadata = json_is_object(md) ? json_deep_copy(md) : json_object();
	s->started_ms = e2b_now_ms();
	s->end_ms = s->started_ms + timeout * 1000;
	s->has_bash = -1;
	pthread_mutex_lock(&e->lock);
	s->next = e->sandboxes;
	e->sandboxes = s;
	rp->json = json_pack("{s:s, s:s, s:s, s:s, s:s}", "sandboxID", s->id, "templateID", s->template_id, "clientID",
	                     "runbox", "envdVersion", E2B_ENVD_VERSION, "envdAccessToken", s->token);
	pthread_mutex_unlock(&e->lock);
	rp->status = 201;
	rb_info("e2b: sandbox %s (tenant %s, template %s, timeout %llds)", s->id, k->tenant, tpl, (long long)timeout);
}

/* metadata=URL-encoded "k=v&k2=v2", as the SDK sends it: every pair must match. */
static bool metadata_match(const json_t *md, const char *q)
{
	if (!q || !*q)
		return true;
	char *dec = strdup(q);
	if (!dec)
		return false;
	MHD_http_unescape(dec);
	bool ok = true;
	char *save = NULL;
	for (char *p = strtok_r(dec, "&", &save); p && ok; p = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(p, '=');
		if (eq)
			*eq++ = '\0';
		MHD_http_unescape(p);
		if (eq)
			MHD_http_unescape(eq);
		const char *have = json_string_value(json_object_get(md, p));
		ok = have && !strcmp(have, eq ? eq : "");
	}
	free(dec);
	return ok;
}

static void list(struct rb_e2b *e, const struct e2b_key *k, const struct e2b_req *rq, struct e2b_reply *rp)
{
	const char *state = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "state");
	const char *md = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "metadata");
	/* Every sandbox of runbox runs (no pause): a filter without "running" matches none. */
	bool none = state && !strstr(state, "running");
	/* Entries whose session ended are dropped first, outside the table's lock. */
	char(*ids)[E2B_ID_HEX] = NULL;
	size_t n = 0;
	pthread_mutex_lock(&e->lock);
	for (struct e2b_sandbox *s = e->sandboxes; s; s = s->next)
		n++;
	ids = calloc(n + 1, sizeof *ids);
	n = 0;
	for (struct e2b_sandbox *s = e->sandboxes; s && ids; s = s->next)
		if (!strcmp(s->tenant, k->tenant))
			memcpy(ids[n++], s->id, E2B_ID_HEX);
	pthread_mutex_unlock(&e->lock);
	for (size_t i = 0; i < n; i++)
		e2b_session_alive(e, ids[i]);
	free(ids);
	json_t *a = json_array();
	pthread_mutex_lock(&e->lock);
	for (struct e2b_sandbox *s = e->sandboxes; s && !none; s = s->next)
		if (!strcmp(s->tenant, k->tenant) && metadata_match(s->metadata, md))
			json_array_append_new(a, sandbox_json(s, false));
	pthread_mutex_unlock(&e->lock);
	rp->status = 200;
	rp->json = a;
}

static void kill_sandbox(struct rb_e2b *e, const struct e2b_key *k, const char *id, struct e2b_reply *rp)
{
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, id);
	if (s && strcmp(s->tenant, k->tenant) != 0)
		s = NULL;
	if (s)
		unlink_sandbox(e, s);
	pthread_mutex_unlock(&e->lock);
	if (!s) {
		e2b_api_error(rp, 404, "sandbox %s not found", id);
		return;
	}
	free_sandbox(s);
	_cleanup_json_ json_t *r = NULL;
	unsigned st = rb_serve_session_delete(e->sv, id, &r);
	if (st == 200)
		rp->status = 204;
	else
		e2b_api_error(rp, st, "%s", e2b_native_msg(r));
}

/* Sets the end of life to now + the body's timeout (only later when extend_only). */
static void set_timeout(struct rb_e2b *e, const struct e2b_key *k, const char *id, const struct e2b_req *rq,
                        bool extend_only, const char *key, struct e2b_reply *rp)
{
	_cleanup_json_ json_t *b = body_object(rq, rp);
	if (!b)
		return;
	int64_t t = timeout_s(b, key, extend_only ? 0 : -2, rp);
	if (t == -1)
		return;
	if (t == -2) {
		e2b_api_error(rp, 400, "`%s`: missing", key);
		return;
	}
	if (!e2b_session_alive(e, id)) {
		e2b_api_error(rp, 404, "sandbox %s not found", id);
		return;
	}
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, id);
	bool mine = s && !strcmp(s->tenant, k->tenant);
	pthread_mutex_unlock(&e->lock);
	if (!mine) {
		e2b_api_error(rp, 404, "sandbox %s not found", id);
		return;
	}
	/* A change of its life (or a connect, which may lengthen it) is recorded before the reply,
	 * as every call that changes something is. */
	struct rb_error err;
	rb_error_clear(&err);
	if (rb_serve_record(e->sv, id, extend_only ? "e2b_connect" : "e2b_timeout",
	                    json_pack("{s:I}", "timeout_s", (json_int_t)t), &err) < 0) {
		e2b_api_error(rp, (unsigned)rb_error_http_status(rb_error_kind_of(&err)), "%s", err.msg);
		return;
	}
	pthread_mutex_lock(&e->lock);
	s = find(e, id);
	if (s && strcmp(s->tenant, k->tenant) != 0)
		s = NULL;
	if (s) {
		int64_t end = e2b_now_ms() + t * 1000;
		if (!extend_only || end > s->end_ms)
			s->end_ms = end;
		rp->status = extend_only ? 200 : 204;
		if (extend_only)
			rp->json = json_pack("{s:s, s:s, s:s, s:s, s:s}", "sandboxID", s->id, "templateID",
			                     s->template_id, "clientID", "runbox", "envdVersion", E2B_ENVD_VERSION,
			                     "envdAccessToken", s->token);
	}
	pthread_mutex_unlock(&e->lock);
	if (!s)
		e2b_api_error(rp, 404, "sandbox %s not found", id);
}

void e2b_control(struct rb_e2b *e, const struct e2b_req *rq, struct e2b_reply *rp)
{
	const struct e2b_key *k = e2b_key_find(e, MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, "X-API-Key"));
	if (!k) {
		e2b_api_error(rp, 401, "Invalid API key");
		return;
	}
	char buf[256];
	const char *url = rq->url;
	bool v2 = !strncmp(url, "/v2/", 4);
	if (v2)
		url += 3;
	if (strlen(url) >= sizeof buf) {
		e2b_api_error(rp, 404, "no such path");
		return;
	}
	snprintf(buf, sizeof buf, "%s", url);
	char *seg[4] = {0};
	int n = 0;
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
		if (n == 4) {
			e2b_api_error(rp, 404, "no such path");
			return;
		}
		seg[n++] = t;
	}
	bool get = !strcmp(rq->method, "GET"), post = !strcmp(rq->method, "POST"), del = !strcmp(rq->method, "DELETE");
	if (n < 1 || strcmp(seg[0], "sandboxes") != 0) {
		e2b_api_error(rp, 404, "no such path: %s", rq->url);
		return;
	}
	if (n == 1 && post)
		return create(e, k, rq, rp);
	if (n == 1 && get)
		return list(e, k, rq, rp);
	if (n == 1) {
		e2b_api_error(rp, 405, "%s: GET or POST", rq->url);
		return;
	}
	const char *id = seg[1];
	if (n == 2 && get && !v2) {
		rp->json = lookup_json(e, k, id, true);
		if (rp->json)
			rp->status = 200;
		else
			e2b_api_error(rp, 404, "sandbox %s not found", id);
		return;
	}
	if (n == 2 && del && !v2)
		return kill_sandbox(e, k, id, rp);
	if (n == 3 && post && !strcmp(seg[2], "connect"))
		return set_timeout(e, k, id, rq, true, "timeout", rp);
	if (n == 3 && post && !strcmp(seg[2], "timeout") && !v2)
		return set_timeout(e, k, id, rq, false, "timeout", rp);
	if (n == 3 && post && !strcmp(seg[2], "refreshes") && !v2) {
		set_timeout(e, k, id, rq, true, "duration", rp);
		if (rp->status == 200) {
			json_decref(rp->json);
			rp->json = NULL;
			rp->status = 204;
		}
		return;
	}
	e2b_api_error(rp, n >= 3 ? 501 : 404, "%s %s: not supported by runbox serve (docs/e2b.md)", rq->method,
	              rq->url);
}

unsigned e2b_authorize(struct rb_e2b *e, struct MHD_Connection *conn, char sid[E2B_ID_HEX], char tenant[65],
                       const char **why)
{
	const char *id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	const char *tok = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Access-Token");
	if (!id || strlen(id) >= E2B_ID_HEX) {
		*why = "no such sandbox (the E2b-Sandbox-Id header names none)";
		return 502;
	}
	unsigned st = 401;
	*why = "wrong access token for this sandbox (X-Access-Token)";
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, id);
	if (!s) {
		st = 502;
		*why = "sandbox not found or its end of life passed";
	} else if (tok && strlen(tok) == strlen(s->token) && CRYPTO_memcmp(tok, s->token, strlen(tok)) == 0) {
		st = 0;
		memcpy(sid, s->id, E2B_ID_HEX);
		if (tenant)
			memcpy(tenant, s->tenant, sizeof s->tenant);
	}
	pthread_mutex_unlock(&e->lock);
	return st;
}

/* What List shows of a config: its cmd, args, envs and cwd, never a key the start did not read;
 * its cmd alone (cut to 4 KiB) once the sandbox's kept configs would pass E2B_CONFIGS_MAX. */
static char *kept_config(const json_t *config, size_t room, size_t *len)
{
	_cleanup_json_ json_t *k = json_object();
	static const char *const keys[] = {"cmd", "args", "envs", "cwd"};
	for (size_t i = 0; k && i < sizeof keys / sizeof keys[0]; i++)
		if (json_object_get(config, keys[i]))
			json_object_set(k, keys[i], json_object_get(config, keys[i]));
	char *text = k ? json_dumps(k, JSON_COMPACT) : NULL;
	if (text && strlen(text) > room) {
		free(text);
		const char *cmd = json_string_value(json_object_get(config, "cmd"));
		_cleanup_json_ json_t *c = json_pack("{s:s%}", "cmd", cmd ? cmd : "", cmd ? strnlen(cmd, 4096) : 0);
		text = c ? json_dumps(c, JSON_COMPACT) : NULL;
	}
	*len = text ? strlen(text) : 0;
	return text;
}

/* Drops the sandbox's processes that ended (or whose handle the session let go): their ids are
 * looked up without e->lock, which is never held across a call into sv. */
static void prune_ended(struct rb_e2b *e, const char *sid)
{
	char(*ids)[E2B_ID_HEX] = NULL;
	size_t n = 0;
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, sid);
	if (s && s->n_procs >= E2B_PROCS_PRUNE && (ids = calloc(s->n_procs, sizeof *ids)))
		for (; n < s->n_procs; n++)
			memcpy(ids[n], s->procs[n].id, E2B_ID_HEX);
	pthread_mutex_unlock(&e->lock);
	bool *ended = n ? calloc(n, sizeof *ended) : NULL;
	for (size_t i = 0; ended && i < n; i++) {
		_cleanup_json_ json_t *r = NULL;
		ended[i] = rb_serve_proc_get(e->sv, sid, ids[i], &r) != 200 ||
		           strcmp(json_string_value(json_object_get(r, "state")) ?: "", "running") != 0;
	}
	pthread_mutex_lock(&e->lock);
	s = ended ? find(e, sid) : NULL;
	size_t kept = 0;
	for (size_t i = 0; s && i < s->n_procs; i++) {
		struct e2b_proc *p = &s->procs[i];
		bool gone = false;
		for (size_t j = 0; j < n && !gone; j++)
			gone = ended[j] && !strcmp(ids[j], p->id);
		if (gone) {
			s->config_bytes -= p->config_len;
			free(p->tag);
			free(p->config);
		} else {
			s->procs[kept++] = *p;
		}
	}
	if (s)
		s->n_procs = kept;
	pthread_mutex_unlock(&e->lock);
	free(ended);
	free(ids);
}

int e2b_proc_add(struct rb_e2b *e, const char *sid, uint32_t pid, const char *id, const char *tag, const json_t *config)
{
	prune_ended(e, sid);
	int r = -1;
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, sid);
	if (s && s->n_procs == s->cap_procs) {
		size_t nc = s->cap_procs ? s->cap_procs * 2 : 16;
		struct e2b_proc *np = realloc(s->procs, nc * sizeof *np);
		if (np) {
			s->procs = np;
			s->cap_procs = nc;
		}
	}
	if (s && s->n_procs < s->cap_procs) {
		struct e2b_proc *p = &s->procs[s->n_procs];
		p->pid = pid;
		snprintf(p->id, sizeof p->id, "%s", id);
		p->tag = tag ? strndup(tag, E2B_TAG_MAX) : NULL;
		p->config = kept_config(config, E2B_CONFIGS_MAX - s->config_bytes, &p->config_len);
		if ((!tag || p->tag) && p->config) {
			s->config_bytes += p->config_len;
			s->n_procs++;
			r = 0;
		} else {
			free(p->tag);
			free(p->config);
		}
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

int e2b_proc_find(struct rb_e2b *e, const char *sid, uint32_t pid, const char *tag, char id[E2B_ID_HEX],
                  uint32_t *pid_out)
{
	int r = -1;
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, sid);
	/* The newest first: a pid the sandbox reused names its latest process. */
	for (size_t i = s ? s->n_procs : 0; i-- > 0;) {
		struct e2b_proc *p = &s->procs[i];
		if ((tag && *tag) ? (p->tag && !strcmp(p->tag, tag)) : p->pid == pid) {
			memcpy(id, p->id, E2B_ID_HEX);
			if (pid_out)
				*pid_out = p->pid;
			r = 0;
			break;
		}
	}
	pthread_mutex_unlock(&e->lock);
	return r;
}

json_t *e2b_proc_list(struct rb_e2b *e, const char *sid)
{
	json_t *a = json_array();
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, sid);
	for (size_t i = 0; s && i < s->n_procs; i++) {
		struct e2b_proc *p = &s->procs[i];
		json_t *o = json_pack("{s:I, s:s, s:o}", "pid", (json_int_t)p->pid, "id", p->id, "config",
		                      json_loadb(p->config, p->config_len, 0, NULL));
		if (p->tag)
			json_object_set_new(o, "tag", json_string(p->tag));
		json_array_append_new(a, o);
	}
	pthread_mutex_unlock(&e->lock);
	return a;
}

int e2b_bash_get(struct rb_e2b *e, const char *sid)
{
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, sid);
	int v = s ? s->has_bash : -1;
	pthread_mutex_unlock(&e->lock);
	return v;
}

void e2b_bash_set(struct rb_e2b *e, const char *sid, bool has)
{
	pthread_mutex_lock(&e->lock);
	struct e2b_sandbox *s = find(e, sid);
	if (s)
		s->has_bash = has;
	pthread_mutex_unlock(&e->lock);
}

static void *reaper(void *arg)
{
	struct rb_e2b *e = arg;
	rb_log_use(rb_serve_logger(e->sv));
	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += REAP_TICK_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&e->stop_cv, &e->lock, &ts);
		int64_t now = e2b_now_ms();
		struct e2b_sandbox *expired = NULL;
		for (struct e2b_sandbox *s = e->sandboxes, *nx; s; s = nx) {
			nx = s->next;
			if (s->end_ms <= now) {
				unlink_sandbox(e, s);
				s->next = expired;
				expired = s;
			}
		}
		/* Killed outside the table's lock, as a DELETE would. */
		pthread_mutex_unlock(&e->lock);
		while (expired) {
			struct e2b_sandbox *nx = expired->next;
			json_t *r = NULL;
			rb_info("e2b: sandbox %s: its timeout passed, killed", expired->id);
			rb_serve_session_close(e->sv, expired->id, "e2b timeout", &r);
			json_decref(r);
			free_sandbox(expired);
			expired = nx;
		}
		pthread_mutex_lock(&e->lock);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

int e2b_reaper_start(struct rb_e2b *e, struct rb_error *err)
{
	int r = pthread_create(&e->reaper, NULL, reaper, e);
	if (r)
		return rb_error_set(err, r, "e2b: the timeout thread");
	e->reaper_started = true;
	return 0;
}

void e2b_reaper_stop(struct rb_e2b *e)
{
	if (!e->reaper_started)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_signal(&e->stop_cv);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->reaper, NULL);
	e->reaper_started = false;
}

void e2b_table_free(struct rb_e2b *e)
{
	while (e->sandboxes) {
		struct e2b_sandbox *s = e->sandboxes;
		e->sandboxes = s->next;
		free_sandbox(s);
	}
}

/* The tables of known session ids and snapshot refs (known.h): JSON objects under one lock of
 * their own, read by every HTTP thread, added to by the creates and the snapshots; and each
 * tenant's snapshot bytes in the store, held to its bound. */
#include "serve/known.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ledger/ledger.h"
#include "runtime/run/artifacts.h"
#include "serve/quota.h"

struct rb_serve_known {
	pthread_mutex_t lock;
	json_t *tenants; /* session id -> its tenant */
	json_t *held;    /* tenant -> {ref: the object's size}: the snapshots its sessions took */
	json_t *taking;  /* tenant -> {ref: [size, n]}: snapshots being taken (n at once), not recorded yet */
	uint64_t max_snapshot_bytes; /* a tenant's bound; 0: none */
};

void rb_serve_known_free(struct rb_serve_known *k)
{
	if (!k)
		return;
	json_decref(k->tenants);
	json_decref(k->held);
	json_decref(k->taking);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

/* The object key of parent, made when missing; NULL when out of memory. */
static json_t *member(json_t *parent, const char *key)
{
	json_t *o = json_object_get(parent, key);
	if (!o && json_object_set_new(parent, key, o = json_object()) < 0)
		return NULL;
	return o;
}

static int snapshot_add(struct rb_serve_known *k, const char *ref, const char *tenant, uint64_t size)
{
	json_t *held = member(k->held, tenant ? tenant : "");
	return held ? json_object_set_new(held, ref, json_integer((json_int_t)size)) : -1;
}

/* The snapshot events (their data's digest, from a session's run: its tenant) into k. */
static int load_snapshots(struct rb_serve_known *k, struct rb_ledger *l, struct rb_error *err)
{
	json_t *events = NULL, *e;
	struct rb_ledger_filter f = {.type = "snapshot"};
	if (rb_ledger_query(l, &f, &events, err) < 0)
		return -1;
	size_t i;
	int r = 0;
	json_array_foreach(events, i, e)
	{
		json_t *d = json_object_get(e, "data");
		const char *ref = json_string_value(json_object_get(d, "digest"));
		json_int_t size = json_integer_value(json_object_get(d, "size"));
		if (ref && rb_artifact_digest_valid(ref) &&
		    snapshot_add(k, ref, json_string_value(json_object_get(e, "tenant")),
		                 size > 0 ? (uint64_t)size : 0) < 0)
			r = rb_error_set(err, ENOMEM, "serve: the known snapshots");
	}
	json_decref(events);
	return r;
}

int rb_serve_known_load(const char *state_dir, struct rb_serve_known **out, struct rb_error *err)
{
	*out = NULL;
	struct rb_serve_known *k = calloc(1, sizeof *k);
	if (!k)
		return rb_error_set(err, ENOMEM, "serve: the known sessions");
	pthread_mutex_init(&k->lock, NULL);
	k->max_snapshot_bytes = RB_SERVE_SNAPSHOT_BYTES_PER_TENANT;
	if (!(k->tenants = json_object()) || !(k->held = json_object()) || !(k->taking = json_object())) {
		rb_serve_known_free(k);
		return rb_error_set(err, ENOMEM, "serve: the known sessions");
	}
	struct rb_ledger *l = NULL;
	json_t *starts = NULL, *e;
	/* A label holding the same text is not it: only data.session counts. */
	struct rb_ledger_filter f = {.type = "run_start", .grep = "\"session\":"};
	if (rb_ledger_open(state_dir, &l, err) < 0 || rb_ledger_query(l, &f, &starts, err) < 0 ||
	    load_snapshots(k, l, err) < 0) {
		json_decref(starts);
		rb_ledger_close(l);
		rb_serve_known_free(k);
		return rb_error_prefix(err, "serve: the known sessions");
	}
	rb_ledger_close(l);
	size_t i;
	json_array_foreach(starts, i, e)
	{
		const char *sid = json_string_value(json_object_get(json_object_get(e, "data"), "session"));
		json_t *tenant = json_object_get(e, "tenant");
		if (sid && json_is_string(tenant))
			json_object_set(k->tenants, sid, tenant);
	}
	json_decref(starts);
	*out = k;
	return 0;
}

int rb_serve_known_add(struct rb_serve_known *k, const char *sid, const char *tenant, struct rb_error *err)
{
	pthread_mutex_lock(&k->lock);
	int r = json_object_set_new(k->tenants, sid, json_string(tenant ? tenant : ""));
	pthread_mutex_unlock(&k->lock);
	return r < 0 ? rb_error_set(err, ENOMEM, "serve: session `%s` in the known sessions", sid) : 0;
}

bool rb_serve_known_has(struct rb_serve_known *k, const char *sid, const char *tenant)
{
	if (!k || !sid)
		return false;
	pthread_mutex_lock(&k->lock);
	const char *owner = json_string_value(json_object_get(k->tenants, sid));
	bool has = owner && (!tenant || !strcmp(owner, tenant));
	pthread_mutex_unlock(&k->lock);
	return has;
}

void rb_serve_known_snapshot_bound(struct rb_serve_known *k, uint64_t max_bytes)
{
	pthread_mutex_lock(&k->lock);
	k->max_snapshot_bytes = max_bytes;
	pthread_mutex_unlock(&k->lock);
}

/* Whether the store still holds the object ref (`runbox gc` may have removed it). */
static bool in_store(const char *store, const char *ref)
{
	char path[PATH_MAX];
	struct stat st;
	struct rb_error e;
	return rb_artifact_path(store, ref, path, &e) < 0 || stat(path, &st) == 0 || errno != ENOENT;
}

/* The bytes of tenant's snapshots in store: those its sessions took whose object the store still
 * holds (one gone, removed by `runbox gc`, counts nothing: its bytes come back), and those being
 * taken. *has_ref: ref is among them. */
static uint64_t tenant_bytes(struct rb_serve_known *k, const char *store, const char *tenant, const char *ref,
                             bool *has_ref, unsigned *n_refs)
{
	uint64_t sum = 0;
	unsigned n = 0;
	*has_ref = false;
	json_t *held = json_object_get(k->held, tenant), *taking = json_object_get(k->taking, tenant), *v;
	const char *r;
	json_object_foreach(held, r, v)
	{
		if (!in_store(store, r))
			continue;
		sum += (uint64_t)json_integer_value(v);
		n++;
		*has_ref |= !strcmp(r, ref);
	}
	json_object_foreach(taking, r, v)
	{
		if (json_object_get(held, r) && in_store(store, r))
			continue; /* counted above */
		sum += (uint64_t)json_integer_value(json_array_get(v, 0));
		n++;
		*has_ref |= !strcmp(r, ref);
	}
	if (n_refs)
		*n_refs = n;
	return sum;
}

json_t *rb_serve_known_snapshot_usage(struct rb_serve_known *k, const char *store, uint64_t *max_bytes)
{
	json_t *out = json_object();
	pthread_mutex_lock(&k->lock);
	*max_bytes = k->max_snapshot_bytes;
	json_t *tenants = json_object(), *v;
	const char *t;
	/* Every tenant that took a snapshot or is taking one, once. */
	json_object_update(tenants, k->held);
	json_object_update(tenants, k->taking);
	json_object_foreach(tenants, t, v)
	{
		bool has;
		unsigned n;
		uint64_t bytes = tenant_bytes(k, store, t, "", &has, &n);
		if (n)
			json_object_set_new(
			    out, t, json_pack("{s:I, s:I}", "snapshots", (json_int_t)n, "bytes", (json_int_t)bytes));
	}
	pthread_mutex_unlock(&k->lock);
	json_decref(tenants);
	return out;
}

unsigned rb_serve_known_snapshot_reserve(struct rb_serve_known *k, const char *store, const char *ref,
                                         const char *tenant, uint64_t size, struct rb_error *err)
{
	pthread_mutex_lock(&k->lock);
	bool has = false;
	uint64_t used = tenant_bytes(k, store, tenant, ref, &has, NULL);
	/* A ref the tenant holds already takes no more of the store. */
	unsigned st = has ? 0 : rb_serve_snapshot_quota_check(used, size, k->max_snapshot_bytes, tenant, err);
	json_t *taking = st ? NULL : member(k->taking, tenant), *t = taking ? json_object_get(taking, ref) : NULL;
	if (st == 0 && t)
		json_array_set_new(t, 1, json_integer(json_integer_value(json_array_get(t, 1)) + 1));
	else if (st == 0 &&
	         (!taking || json_object_set_new(taking, ref, json_pack("[I, i]", (json_int_t)size, 1)) < 0)) {
		rb_error_set(err, ENOMEM, "snapshot: the tenant's snapshot bytes");
		st = 500;
	}
	pthread_mutex_unlock(&k->lock);
	return st;
}

int rb_serve_known_snapshot_settle(struct rb_serve_known *k, const char *ref, const char *tenant, uint64_t size,
                                   bool recorded, struct rb_error *err)
{
	pthread_mutex_lock(&k->lock);
	json_t *taking = json_object_get(k->taking, tenant), *t = json_object_get(taking, ref);
	json_int_t n = json_integer_value(json_array_get(t, 1)) - 1;
	if (n > 0)
		json_array_set_new(t, 1, json_integer(n));
	else
		json_object_del(taking, ref);
	int r = recorded ? snapshot_add(k, ref, tenant, size) : 0;
	pthread_mutex_unlock(&k->lock);
	return r < 0 ? rb_error_set(err, ENOMEM, "serve: snapshot %s in the known snapshots", ref) : 0;
}

bool rb_serve_known_snapshot(struct rb_serve_known *k, const char *ref, const char *tenant)
{
	if (!k || !ref)
		return false;
	pthread_mutex_lock(&k->lock);
	bool has = false;
	if (tenant) {
		has = json_object_get(json_object_get(k->held, tenant), ref) != NULL;
	} else {
		const char *t;
		json_t *refs;
		json_object_foreach(k->held, t, refs)
		{
			has = has || json_object_get(refs, ref) != NULL;
		}
	}
	pthread_mutex_unlock(&k->lock);
	return has;
}

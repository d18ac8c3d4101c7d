/* The tables of known session ids and snapshot refs (known.h): JSON objects under one lock of
 * their own, read by every HTTP thread, added to by the creates and the snapshots. */
#include "serve/known.h"

#include <errno.h>
#include <stdint.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/ledger.h"
#include "runtime/run/artifacts.h"

struct rb_serve_known {
	pthread_mutex_t lock;
	json_t *tenants;   /* session id -> its tenant */
	json_t *snapshots; /* ref -> {tenant: the object's size}: the tenants whose sessions took it */
};

void rb_serve_known_free(struct rb_serve_known *k)
{
	if (!k)
		return;
	json_decref(k->tenants);
	json_decref(k->snapshots);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

static int snapshot_add(struct rb_serve_known *k, const char *ref, const char *tenant, uint64_t size)
{
	json_t *of = json_object_get(k->snapshots, ref);
	if (!of && json_object_set_new(k->snapshots, ref, of = json_object()) < 0)
		return -1;
	return json_object_set_new(of, tenant ? tenant : "", json_integer((json_int_t)size));
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
	if (!k || !(k->tenants = json_object()) || !(k->snapshots = json_object())) {
		if (k)
			json_decref(k->tenants);
		free(k);
		return rb_error_set(err, ENOMEM, "serve: the known sessions");
	}
	pthread_mutex_init(&k->lock, NULL);
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

int rb_serve_known_snapshot_add(struct rb_serve_known *k, const char *ref, const char *tenant, uint64_t size,
                                struct rb_error *err)
{
	pthread_mutex_lock(&k->lock);
	int r = snapshot_add(k, ref, tenant, size);
	pthread_mutex_unlock(&k->lock);
	return r < 0 ? rb_error_set(err, ENOMEM, "serve: snapshot %s in the known snapshots", ref) : 0;
}

bool rb_serve_known_snapshot(struct rb_serve_known *k, const char *ref, const char *tenant)
{
	if (!k || !ref)
		return false;
	pthread_mutex_lock(&k->lock);
	json_t *of = json_object_get(k->snapshots, ref);
	bool has = of && (!tenant ? json_object_size(of) > 0 : json_object_get(of, tenant) != NULL);
	pthread_mutex_unlock(&k->lock);
	return has;
}

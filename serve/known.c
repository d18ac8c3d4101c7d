/* The table of known session ids (known.h): a JSON object of id -> tenant under its own lock,
 * read by every HTTP thread, added to by the creates. */
#include "serve/known.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ledger/ledger.h"

struct rb_serve_known {
	pthread_mutex_t lock;
	json_t *tenants; /* session id -> its tenant */
};

void rb_serve_known_free(struct rb_serve_known *k)
{
	if (!k)
		return;
	json_decref(k->tenants);
	pthread_mutex_destroy(&k->lock);
	free(k);
}

int rb_serve_known_load(const char *state_dir, struct rb_serve_known **out, struct rb_error *err)
{
	*out = NULL;
	struct rb_serve_known *k = calloc(1, sizeof *k);
	if (!k || !(k->tenants = json_object())) {
		free(k);
		return rb_error_set(err, ENOMEM, "serve: the known sessions");
	}
	pthread_mutex_init(&k->lock, NULL);
	struct rb_ledger *l = NULL;
	json_t *starts = NULL, *e;
	/* A label holding the same text is not it: only data.session counts. */
	struct rb_ledger_filter f = {.type = "run_start", .grep = "\"session\":"};
	if (rb_ledger_open(state_dir, &l, err) < 0 || rb_ledger_query(l, &f, &starts, err) < 0) {
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

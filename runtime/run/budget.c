/* A run's storage budget (see budget.h). */
#include "runtime/run/budget.h"

#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "common/log.h"
#include "runtime/run/storegc.h"

void rb_budget_init(struct rb_budget *b, const struct rb_policy *pol)
{
	*b = (struct rb_budget){
	    .run_bytes = pol->run_bytes,
	    .run_files = pol->run_files,
	    .run_events = pol->run_events,
	    .tenant_bytes = pol->tenant_bytes,
	    .min_free = pol->min_free,
	};
}

int rb_budget_load_tenant(struct rb_budget *b, struct rb_ledger *l, const char *tenant, struct rb_error *err)
{
	char since[32];
	rb_store_cutoff(RB_STORE_RETENTION_S, since);
	return rb_ledger_tenant_bytes(l, tenant, since, &b->tenant_used, err);
}

static uint64_t left(uint64_t limit, uint64_t used)
{
	return limit > used ? limit - used : 0;
}

/* The cap becomes what the limit leaves, when that is less; bind names the limit. */
static void narrow(uint64_t *cap, uint64_t room, const char *name, const char **bind)
{
	if (room < *cap) {
		*cap = room;
		*bind = name;
	}
}

void rb_budget_caps(struct rb_budget *b, const char *store_dir, uint64_t events, struct rb_harvest_caps *caps)
{
	b->bind_bytes = b->bind_files = NULL;
	uint64_t bytes = caps->max_total_bytes, files = caps->max_files;
	narrow(&bytes, left(b->run_bytes, b->stored_bytes), "run_bytes", &b->bind_bytes);
	narrow(&bytes, left(b->tenant_bytes, b->tenant_used + b->stored_bytes), "tenant_bytes", &b->bind_bytes);
	narrow(&files, left(b->run_files, b->stored_files), "run_files", &b->bind_files);
	narrow(&files, left(b->run_events, events + 1), "run_events", &b->bind_files);
	struct statvfs sv;
	if (statvfs(store_dir, &sv) == 0) {
		b->free_bytes = (uint64_t)sv.f_bavail * sv.f_frsize;
		if (b->free_bytes < b->min_free) {
			/* Below the floor nothing is stored, not even an empty file. */
			bytes = files = 0;
			b->bind_bytes = b->bind_files = "min_free";
		} else {
			narrow(&bytes, b->free_bytes - b->min_free, "min_free", &b->bind_bytes);
		}
	} else {
		rb_warn("harvest: statvfs `%s`: %s: the store's free space is not known", store_dir, strerror(errno));
	}
	caps->max_total_bytes = bytes;
	caps->max_files = (uint32_t)files;
}

const char *rb_budget_account(struct rb_budget *b, unsigned step, const struct rb_harvest_result *h)
{
	b->stored_bytes += h->bytes_stored;
	b->stored_files += h->n_artifacts;
	const char *cut = NULL;
	if (h->skipped_by_reason[RB_HARVEST_OVER_COUNT_CAP] && b->bind_files)
		cut = b->bind_files;
	else if (h->skipped_by_reason[RB_HARVEST_OVER_TOTAL_CAP] && b->bind_bytes)
		cut = b->bind_bytes;
	if (cut && !b->stopped) {
		b->stopped = cut;
		b->stopped_step = step;
	}
	return cut;
}

json_t *rb_budget_json(const struct rb_budget *b)
{
	json_t *o = json_pack("{s:{s:I, s:I, s:I, s:I, s:I}, s:I, s:I, s:I, s:I}", "limits", "run_bytes",
	                      (json_int_t)b->run_bytes, "run_files", (json_int_t)b->run_files, "run_events",
	                      (json_int_t)b->run_events, "tenant_bytes", (json_int_t)b->tenant_bytes, "min_free",
	                      (json_int_t)b->min_free, "stored_bytes", (json_int_t)b->stored_bytes, "stored_files",
	                      (json_int_t)b->stored_files, "tenant_bytes_used", (json_int_t)b->tenant_used,
	                      "free_bytes", (json_int_t)b->free_bytes);
	json_object_set_new(o, "stopped", b->stopped ? json_string(b->stopped) : json_null());
	if (b->stopped)
		json_object_set_new(o, "stopped_step", json_integer(b->stopped_step));
	return o;
}

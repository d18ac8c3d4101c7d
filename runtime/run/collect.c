/* The harvest after a step (see collect.h): what runfile.c did for manifest steps, now for
 * every run, so an ad-hoc run's /workspace/out is scrubbed, capped and recorded the same way. */
#define _GNU_SOURCE
#include "runtime/run/collect.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"

void rb_collect_init(struct rb_collect *c, const struct rb_run *run)
{
	memset(c, 0, sizeof *c);
	c->token = run->token;
	snprintf(c->store, sizeof c->store, "%s/artifacts", run->paths.state_dir);
	rb_budget_init(&c->budget, &run->policy);
}

/* The harvest's scrub callback: the run's scrubber, or the collect's own, made before the
 * harvest (scrub_cb is called from two threads at once, which rb_scrub_harvest_cb allows).
 * Without one, every file is refused: scrub_failed, never stored unscrubbed. */
static int scrub_cb(void *ctx, const char *in, size_t len, char **out, size_t *out_len, json_t **redactions,
                    struct rb_error *err)
{
	struct rb_collect *c = ctx;
	struct rb_scrubber *s = c->scrubber ? c->scrubber : c->own;
	if (!s)
		return rb_error_set(err, 0, "no scrubber could be made");
	return rb_scrub_harvest_cb(s, in, len, out, out_len, redactions, err);
}

int rb_collect_step(struct rb_collect *c, struct rb_run *run, struct rb_record *rec, unsigned step,
                    struct rb_result_spill *spill, json_t *out_json, struct rb_harvest_result *keep,
                    struct rb_error *err)
{
	if (keep)
		memset(keep, 0, sizeof *keep);
	if (run->sb.workspace_fd < 0)
		return 0;
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
	                       .resolve =
	                           RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	_cleanup_close_ int out = (int)syscall(SYS_openat2, run->sb.workspace_fd, "out", &how, sizeof how);
	if (out < 0) {
		/* The step removed out/ or put a link there: nothing is followed, and it is said. */
		json_object_set_new(out_json, "harvest",
		                    json_pack("{s:s}", "error", "/workspace/out is missing or not a directory"));
		return 0;
	}
	if (!c->scrubber && !c->own) {
		struct rb_scrub_secret secret = {"run-token", c->token, strlen(c->token)};
		struct rb_error serr;
		if (rb_scrub_new_labeled(&secret, c->token[0] ? 1 : 0, &c->own, &serr) < 0)
			rb_warn("harvest: %s: no file is stored", serr.msg);
	}
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	if (!c->budget_loaded) {
		if ((!rec->ledger && rb_ledger_open(run->paths.state_dir, &rec->ledger, err) < 0) ||
		    rb_budget_load_tenant(&c->budget, rec->ledger, run->tenant, err) < 0)
			return rb_error_prefix(err, "harvest: the tenant's use of the store");
		c->budget_loaded = true;
	}
	rb_budget_caps(&c->budget, run->paths.state_dir, (uint64_t)rec->committed + rec->n_pending, &caps);
	struct rb_harvest_result h;
	memset(&h, 0, sizeof h);
	/* Rootless, files a sandbox user other than its root wrote with a private mode belong to
	 * subordinate ids this process may not read: the reopen hook opens them from inside the
	 * sandbox's user namespace. Root reads everything itself. */
	struct rb_harvest_hooks hooks = {.progress = c->progress, .scrub_concurrent = rb_harvest_cpu_to_spare()};
	if (geteuid() != 0 && !c->ns_prepared) {
		struct rb_error nerr;
		if (rb_nsopener_prepare(&c->ns, run->sb.userns_fd, &nerr) == 0)
			c->ns_prepared = true;
		else
			rb_warn("harvest: %s: private files of other sandbox users will be unreadable", nerr.msg);
	}
	if (c->ns_prepared) {
		hooks.reopen = rb_nsopener_open;
		hooks.reopen_ctx = &c->ns;
	}
	if (rb_harvest_hooked(out, &caps, scrub_cb, c, c->store, &hooks, &h, err) < 0) {
		rb_harvest_result_free(&h);
		return -1;
	}
	json_t *hj = rb_harvest_json(&h);
	if (spill)
		rb_result_spill_artifacts(spill, step, hj); /* the ledger gets every one */
	const char *cut = rb_budget_account(&c->budget, step, &h);
	if (cut)
		json_object_set_new(hj, "budget", json_string(cut)); /* the run's budget, not the harvest's caps */
	json_object_set_new(out_json, "harvest", hj);
	int r = rb_record_harvest(rec, step, &h, err);
	if (r == 0 && cut && c->budget.stopped_step == step)
		r = rb_record_storage_stopped(rec, step, cut, err);
	if (keep)
		*keep = h;
	else
		rb_harvest_result_free(&h);
	return r;
}

void rb_collect_close(struct rb_collect *c)
{
	rb_scrub_free(c->own);
	c->own = NULL;
	if (c->ns_prepared)
		rb_nsopener_close(&c->ns);
	c->ns_prepared = false;
}

/* Ledger events of a run (see record.h). */
#include "runtime/run/record.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "common/log.h"

#include "common/util.h"

const char *rb_record_outcome(const struct rb_step_result *res)
{
	switch (res->status) {
	case RB_STEP_EXITED: return res->exit_code == 0 ? "success" : "failure";
	case RB_STEP_TIMEOUT: return "timed_out";
	case RB_STEP_CANCELLED: return "cancelled";
	default: return "failure";
	}
}

int rb_record_submit(struct rb_record *rec, struct rb_ledger_ticket **t, struct rb_error *err)
{
	*t = NULL;
	if (!rec->group)
		return rb_error_setk(err, RB_ERR_INTERNAL, 0, "run %s: a record without a ledger group", rec->run->id);
	if (!rec->n_pending)
		return 0;
	/* The run's first commit carries the instance check, as rb_record_flush's does. */
	const char *instance = rec->committed > 0 ? NULL : rec->run->instance;
	if (rb_ledger_group_submit(rec->group, rec->run->id, instance, rec->run->tenant, rec->run->agent, rec->pending,
	                           rec->n_pending, t, err) < 0)
		return -1;
	rec->committed += (int64_t)rec->n_pending;
	for (size_t i = 0; i < rec->n_pending; i++)
		json_decref(rec->pending[i].data);
	rec->n_pending = 0;
	return 0;
}

static int flush_group(struct rb_record *rec, enum rb_record_commit how, struct rb_error *err)
{
	struct rb_ledger_ticket *t = NULL;
	if (rb_record_submit(rec, &t, err) < 0)
		return -1;
	if (!t)
		return 0;
	if (how != RB_RECORD_DURABLE) {
		rb_ledger_group_detach(t);
		return 0;
	}
	int r = rb_ledger_group_wait(t, err);
	if (r == RB_LEDGER_TAKEN)
		rec->taken = true;
	return r == 0 ? 0 : -1;
}

int rb_record_flush(struct rb_record *rec, enum rb_record_commit how, struct rb_error *err)
{
	if (!rec->n_pending)
		return 0;
	if (rec->group)
		return flush_group(rec, how == RB_RECORD_DEFERRED ? RB_RECORD_DURABLE : how, err);
	/* Usually opened already, while init built the root (prepare), which hid the
	 * milliseconds it takes; else here, and a failure there is met again here. */
	if (!rec->ledger && rb_ledger_open(rec->run->paths.state_dir, &rec->ledger, err) < 0)
		return -1;
	rb_debug("ledger: opened");
	if (rb_ledger_set_durable(rec->ledger, how == RB_RECORD_DURABLE, err) < 0)
		return -1;
	/* Beside a running step, another run's commit holding the ledger is not waited for: the
	 * step's deadline could pass meanwhile, with nobody to enforce it. The events stay
	 * pending, written ahead in the state file, for the commit after the step. */
	rb_ledger_set_wait(rec->ledger, how != RB_RECORD_BEFORE_STEP);
	/* Checked in the same transaction: the run id is this run's (its run_start carries this
	 * instance's nonce), or free. Once the run's first commit is in, its run_start holds the
	 * id for good (no other instance's commit can pass the check): later ones skip it. */
	const char *instance = rec->committed > 0 ? NULL : rec->run->instance;
	int r = rb_ledger_append_run(rec->ledger, rec->run->id, instance, rec->run->tenant, rec->run->agent,
	                             rec->pending, rec->n_pending, NULL, err);
	rb_ledger_set_wait(rec->ledger, true);
	if (r == RB_LEDGER_TAKEN) {
		rec->taken = true; /* nothing of this run may ever be recorded under that id */
		return -1;
	}
	if (r == RB_LEDGER_BUSY) {
		rb_debug("ledger: busy; the events wait for the commit after the step");
		return 0;
	}
	if (r < 0)
		return -1; /* they stay pending: the caller may keep them written ahead for gc */
	rec->committed += (int64_t)rec->n_pending;
	for (size_t i = 0; i < rec->n_pending; i++)
		json_decref(rec->pending[i].data);
	rec->n_pending = 0;
	rb_debug("ledger: committed");
	if (how == RB_RECORD_BEFORE_STEP)
		rb_ledger_tidy(rec->ledger); /* the step is running: nobody waits */
	if (how == RB_RECORD_DEFERRED) {
		rb_ledger_start_sync(rec->ledger);
		rec->sync_pending = true;
	}
	return 0;
}

int rb_record_sync(struct rb_record *rec, struct rb_error *err)
{
	if (!rec->sync_pending || !rec->ledger)
		return 0;
	rec->sync_pending = false;
	if (rb_ledger_sync(rec->ledger, err) < 0)
		return -1;
	rb_debug("ledger: synced");
	return 0;
}

/* Queues an event (data consumed); a full queue is committed first. */
static int append(struct rb_record *rec, const char *type, json_t *data, struct rb_error *err)
{
	if (!data)
		return rb_error_set(err, ENOMEM, "ledger event `%s`", type);
	if (rec->n_pending == RB_RECORD_PENDING_MAX && rb_record_flush(rec, RB_RECORD_DURABLE, err) < 0) {
		json_decref(data);
		return -1;
	}
	rec->pending[rec->n_pending++] = (struct rb_ledger_event){type, data};
	return 0;
}

/* The runner's own CPU, every thread, user and system. */
static uint64_t runner_cpu_us(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return 0;
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int rb_record_open(struct rb_record *rec, const struct rb_run *run, struct rb_error *err)
{
	(void)err;
	memset(rec, 0, sizeof *rec);
	rec->run = run;
	rec->host_cpu_us0 = runner_cpu_us();
	return 0;
}

static void prepare(void *ctx)
{
	struct rb_record *rec = ctx;
	struct rb_error err;
	if (!rec->ledger && !rec->group)
		rb_ledger_open(rec->run->paths.state_dir, &rec->ledger, &err);
}

static json_t *write_ahead(void *ctx)
{
	const struct rb_record *rec = ctx;
	json_t *events = json_array();
	for (size_t i = 0; i < rec->n_pending; i++)
		json_array_append_new(
		    events, json_pack("{s:s, s:O}", "type", rec->pending[i].type, "data", rec->pending[i].data));
	return json_pack("{s:I, s:o}", "committed", (json_int_t)rec->committed, "events", events);
}

static int commit_beside_step(void *ctx, struct rb_error *err)
{
	if (rb_record_flush(ctx, RB_RECORD_BEFORE_STEP, err) < 0)
		return rb_error_prefix(err, "ledger");
	return 0;
}

void rb_record_attach(struct rb_record *rec, struct rb_run *run)
{
	run->ledger = (struct rb_run_ledger){prepare, write_ahead, commit_beside_step, rec};
	rec->keeper = run;
}

int rb_record_run_start(struct rb_record *rec, const char *agent_version, const char *manifest_hash,
                        struct rb_error *err)
{
	const struct rb_run *run = rec->run;
	json_t *limits = json_pack("{s:I, s:I, s:f, s:I}", "memory_bytes", (json_int_t)run->limits.memory_bytes, "pids",
	                           (json_int_t)run->limits.pids, "cpus", run->limits.cpus, "timeout_ms",
	                           (json_int_t)run->timeout_ms);
	json_t *d = json_pack("{s:s, s:s, s:s?, s:s?, s:s, s:s, s:s, s:s, s:o, s:s, s:s}", "tenant", run->tenant,
	                      "agent", run->agent, "agent_version", agent_version, "manifest_hash", manifest_hash,
	                      "policy_name", run->policy.name, "policy_hash", run->policy.hash, "image",
	                      run->image.name, "image_digest", run->image.digest, "limits", limits, "network",
	                      run->spec.net_mode == RB_NET_GATEWAY ? "gateway" : "none", "instance", run->instance);
	if (d && rec->labels)
		json_object_set(d, "labels", rec->labels);
	if (d && rec->pooled)
		json_object_set_new(d, "pooled", json_true());
	if (d && rec->session)
		json_object_set_new(d, "session", json_string(rec->session));
	return append(rec, "run_start", d, err);
}

int rb_record_step_start(struct rb_record *rec, unsigned step, const char *name, const char *kind, const char *text,
                         size_t len, json_t *inputs, const char *bundle_digest, struct rb_error *err)
{
	char hex[65];
	rb_sha256_hex(text, len, hex);
	json_t *t = json_stringn(text, len);
	if (!t) /* not UTF-8: the digest and size still pin it down */
		t = json_string("(binary)");
	json_t *d = json_pack("{s:i, s:s?, s:s, s:o, s:I, s:s}", "step", (int)step, "name", name, "kind", kind, "text",
	                      t, "size", (json_int_t)len, "sha256", hex);
	if (inputs)
		json_object_set(d, "inputs", inputs);
	if (bundle_digest)
		json_object_set_new(d, "bundle_digest", json_string(bundle_digest));
	rec->steps++;
	return append(rec, "step_start", d, err);
}

/* Each gateway record is its own event: a call's "sent" record (phase "sent", before it left)
 * a gateway_sent event, its completion (door, connector, method, route, status, bytes, times,
 * rule; the same id) a gateway_call event (docs/network.md). Never a credential: the gateway
 * records none. step < 0: recorded after the last step ended. */
static int gateway_events(struct rb_record *rec, const json_t *calls, int step, struct rb_error *err)
{
	size_t i;
	json_t *call;
	json_array_foreach(calls, i, call)
	{
		json_t *e = json_deep_copy(call);
		if (e && step >= 0)
			json_object_set_new(e, "step", json_integer(step));
		const char *phase = json_string_value(json_object_get(call, "phase"));
		if (append(rec, phase && !strcmp(phase, "sent") ? "gateway_sent" : "gateway_call", e, err) < 0)
			return -1;
	}
	return 0;
}

int rb_record_step_end(struct rb_record *rec, unsigned step, const struct rb_step_result *res, struct rb_error *err)
{
	// cppcheck-suppress ctunullpointer ; callers pass a result whenever a step ended
	double wall_s = (double)res->wall_us / 1e6;
	double cpu_s =
	    res->cgroup.have_cpu ? (double)res->cgroup.cpu_usec / 1e6 : (double)(res->user_us + res->sys_us) / 1e6;
	uint64_t peak = res->cgroup.have_memory_peak ? res->cgroup.memory_peak_bytes : res->maxrss_kb * 1024;
	rec->cpu_seconds += cpu_s;
	rec->memory_gib_seconds += (double)peak / (1024.0 * 1024 * 1024) * wall_s;
	json_t *d = json_pack(
	    "{s:i, s:s, s:s, s:i, s:b, s:b, s:b, s:f, s:f, s:I}", "step", (int)step, "status", rb_record_outcome(res),
	    "detail", res->error[0] ? res->error : "", "exit", rb_step_exit_code(res), "timed_out",
	    res->status == RB_STEP_TIMEOUT, "oom_killed", res->oom_killed, "seccomp_killed", res->seccomp_killed,
	    "wall_ms", (double)res->wall_us / 1000, "cpu_ms", cpu_s * 1000, "memory_peak_bytes", (json_int_t)peak);
	if (res->status == RB_STEP_EXITED)
		json_object_set_new(d, "exit_code", json_integer(res->exit_code));
	if (res->status == RB_STEP_SIGNALED)
		json_object_set_new(d, "signal", json_integer(res->signal));
	if (res->cgroup.have_pids_peak)
		json_object_set_new(d, "pids_peak", json_integer((json_int_t)res->cgroup.pids_peak));
	if (res->tty) /* interactive: what was typed is not in the ledger, only the command */
		json_object_set_new(d, "tty", json_true());
	json_object_set_new(d, "host_cpu_ms", json_real((double)(res->host.cpu_user_us + res->host.cpu_sys_us) / 1000));
	json_object_set_new(d, "output_dropped_bytes",
	                    json_integer((json_int_t)res->host.stdout_dropped + (json_int_t)res->host.stderr_dropped));
	if (append(rec, "step_end", d, err) < 0)
		return -1;
	if (gateway_events(rec, res->gateway_calls, (int)step, err) < 0)
		return -1;
	json_t *blocked = res->egress ? json_object_get(res->egress, "blocked_packets") : NULL;
	if (blocked && json_integer_value(blocked) > 0) {
		json_t *e = json_deep_copy(res->egress);
		json_object_set_new(e, "step", json_integer(step));
		return append(rec, "egress_blocked", e, err);
	}
	return 0;
}

int rb_record_harvest(struct rb_record *rec, unsigned step, const struct rb_harvest_result *h, struct rb_error *err)
{
	json_t *all = rb_harvest_json(h);
	json_t *arts = json_object_get(all, "artifacts");
	size_t i;
	json_t *a;
	int r = 0;
	json_array_foreach(arts, i, a)
	{
		json_t *d = json_deep_copy(a);
		json_object_set_new(d, "step", json_integer(step));
		if ((r = append(rec, "artifact", d, err)) < 0)
			break;
	}
	if (r == 0 && h->skipped_total > 0) {
		json_t *d = json_pack("{s:i, s:I, s:O}", "step", (int)step, "skipped_total",
		                      (json_int_t)h->skipped_total, "skipped",
		                      json_object_get(all, "skipped") ? json_object_get(all, "skipped") : json_null());
		r = append(rec, "harvest_skipped", d, err);
	}
	rec->stored_bytes += h->bytes_new;
	json_decref(all);
	return r;
}

int rb_record_storage_stopped(struct rb_record *rec, unsigned step, const char *limit, struct rb_error *err)
{
	return append(rec, "storage_stopped", json_pack("{s:i, s:s}", "step", (int)step, "limit", limit), err);
}

int rb_record_cleanup(struct rb_record *rec, const char *what, bool ok, struct rb_error *err)
{
	return append(rec, "cleanup", json_pack("{s:s, s:b}", "what", what, "ok", ok), err);
}

int rb_record_file(struct rb_record *rec, const char *type, const char *path, uint64_t size, const char *sha256,
                   struct rb_error *err)
{
	json_t *d = json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)size);
	if (d && sha256)
		json_object_set_new(d, "sha256", json_string(sha256));
	return append(rec, type, d, err);
}

int rb_record_event(struct rb_record *rec, const char *type, json_t *data, struct rb_error *err)
{
	return append(rec, type, data, err);
}

int rb_record_pool_claim(struct rb_record *rec, const char *image, const char *policy, uint64_t age_ms,
                         struct rb_error *err)
{
	return append(rec, "pool_claim",
	              json_pack("{s:s, s:s, s:I}", "image", image, "policy", policy, "age_ms", (json_int_t)age_ms),
	              err);
}

int rb_record_run_end(struct rb_record *rec, const char *result, struct rb_error *err)
{
	/* The host's side of the run: the runner's CPU since the record opened (its steps' output,
	 * harvests, the ledger) and the gateway's, once it stopped (rb_gwproc_stop). */
	/* What the gateway recorded after the last step ended: a call answered (or cut off) at its
	 * stop, the DNS stub's count of names past its table. */
	if (gateway_events(rec, rec->run->gw.calls, -1, err) < 0)
		return -1;
	uint64_t now = runner_cpu_us();
	double gw_ms = json_number_value(json_object_get(rec->run->gw.stats, "cpu_ms"));
	rec->host_cpu_seconds = (double)(now > rec->host_cpu_us0 ? now - rec->host_cpu_us0 : 0) / 1e6 + gw_ms / 1000;
	json_t *d = json_pack("{s:s, s:i, s:f, s:f, s:I, s:f}", "result", result, "steps", (int)rec->steps,
	                      "cpu_seconds", rec->cpu_seconds, "memory_gib_seconds", rec->memory_gib_seconds,
	                      "stored_bytes", (json_int_t)rec->stored_bytes, "host_cpu_seconds", rec->host_cpu_seconds);
	if (rec->run->gw.stats)
		json_object_set(d, "gateway", rec->run->gw.stats);
	if (rec->run->end_reason[0]) /* stopped from outside: `runbox kill` */
		json_object_set_new(d, "reason", json_string(rec->run->end_reason));
	return append(rec, "run_end", d, err);
}

void rb_record_close(struct rb_record *rec)
{
	struct rb_error err;
	if (rec->n_pending && rb_record_flush(rec, RB_RECORD_DURABLE, &err) < 0) {
		rb_warn("ledger: %s", err.msg);
		if (rec->taken)
			rb_warn("ledger: the run's %zu events are not recorded: its run id is another run's",
			        rec->n_pending);
		else if (rec->keeper && rb_run_keep_state(rec->keeper, &err) == 0)
			rb_warn("ledger: the run's %zu uncommitted events stay written ahead in its state file; "
			        "`runbox gc` commits them",
			        rec->n_pending);
		else if (rec->keeper)
			rb_warn("ledger: %s", err.msg);
	}
	if (rb_record_sync(rec, &err) < 0)
		rb_warn("ledger: %s", err.msg);
	for (size_t i = 0; i < rec->n_pending; i++)
		json_decref(rec->pending[i].data);
	rec->n_pending = 0;
	if (rec->ledger)
		rb_ledger_close(rec->ledger);
	rec->ledger = NULL;
}

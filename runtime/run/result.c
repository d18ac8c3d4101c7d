/* Result serialisation: status, times, limits with their enforcement, captured output. */
#define _GNU_SOURCE
#include "runtime/run/result.h"

#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static const char *status_name(enum rb_step_status s)
{
	static const char *const names[] = {"exited",    "signaled",     "timeout",
	                                    "cancelled", "setup_failed", "exec_failed"};
	return names[s];
}

void rb_result_put_output(json_t *o, const char *key, const struct rb_buf *b)
{
	const char *data = b->data ? b->data : "";
	json_t *s = json_stringn(data, b->len);
	if (s) {
		json_object_set_new(o, key, s);
		return;
	}
	size_t cap = 4 * ((b->len + 2) / 3) + 1;
	unsigned char *enc = malloc(cap);
	if (!enc)
		return;
	EVP_EncodeBlock(enc, (const unsigned char *)data, (int)b->len);
	char k[64];
	snprintf(k, sizeof k, "%s_base64", key);
	json_object_set_new(o, k, json_string((char *)enc));
	free(enc);
}

static json_t *limit_json(const struct rb_limit_status *ls, json_t *requested)
{
	json_t *o = json_pack("{s:o, s:b}", "requested", requested, "enforced", ls->enforced);
	if (ls->enforced)
		json_object_set_new(o, "mechanism", json_string(ls->mechanism));
	if (ls->enforced && ls->partial)
		json_object_set_new(o, "partly", json_string(ls->reason));
	else if (!ls->enforced)
		json_object_set_new(o, "reason", json_string(ls->reason[0] ? ls->reason : "not requested"));
	return o;
}

void rb_result_step_fields(json_t *o, const struct rb_step_result *res)
{
	json_object_set_new(o, "exit", json_integer(rb_step_exit_code(res)));
	if (res->status == RB_STEP_EXITED)
		json_object_set_new(o, "exit_code", json_integer(res->exit_code));
	if (res->status == RB_STEP_SIGNALED || res->status == RB_STEP_CANCELLED)
		json_object_set_new(o, "signal", json_integer(res->signal));
	json_object_set_new(o, "timed_out", json_boolean(res->status == RB_STEP_TIMEOUT));
	json_object_set_new(o, "oom_killed", json_boolean(res->oom_killed));
	json_object_set_new(o, "seccomp_killed", json_boolean(res->seccomp_killed));
	if (res->error[0])
		json_object_set_new(o, "error", json_string(res->error));
	if (res->tty)
		json_object_set_new(o, "tty", json_true());
	json_object_set_new(o, "wall_ms", json_real((double)res->wall_us / 1000.0));
	json_object_set_new(o, "cpu",
	                    json_pack("{s:f, s:f}", "user_ms", (double)res->user_us / 1000.0, "system_ms",
	                              (double)res->sys_us / 1000.0));
}

json_t *rb_result_json(const struct rb_run *run, char *const argv[], const struct rb_step_result *res)
{
	json_t *o = json_object();
	json_object_set_new(o, "run_id", json_string(run->id));
	json_object_set_new(o, "status", json_string(status_name(res->status)));
	rb_result_step_fields(o, res);
	size_t bad;
	json_object_set_new(o, "command", rb_json_strv(argv, &bad)); /* null if one could not be text */
	json_object_set_new(o, "image", json_pack("{s:s, s:s}", "name", run->image.name, "digest", run->image.digest));
	json_object_set_new(o, "policy", json_pack("{s:s, s:s}", "name", run->policy.name, "hash", run->policy.hash));

	json_t *limits = json_object();
	if (run->cg) {
		json_t *req[RB_LIMIT_COUNT] = {
		    run->limits.memory_bytes ? json_integer((json_int_t)run->limits.memory_bytes) : json_null(),
		    run->limits.pids ? json_integer((json_int_t)run->limits.pids) : json_null(),
		    run->limits.cpus > 0 ? json_real(run->limits.cpus) : json_null(),
		    run->limits.cpu_weight ? json_integer((json_int_t)run->limits.cpu_weight) : json_null(),
		};
		for (int k = 0; k < RB_LIMIT_COUNT; k++) {
			const struct rb_limit_status *ls = rb_cgroup_limit(run->cg, (enum rb_limit_kind)k);
			if (!ls->requested) {
				json_decref(req[k]);
				continue;
			}
			json_object_set_new(limits, rb_limit_name((enum rb_limit_kind)k), limit_json(ls, req[k]));
		}
	}
	if (run->timeout_ms)
		json_object_set_new(limits, "timeout",
		                    json_pack("{s:I, s:b, s:s}", "requested_ms", (json_int_t)run->timeout_ms,
		                              "enforced", 1, "mechanism",
		                              "timerfd in the runner; SIGKILL to the cgroup and the sandbox's init"));
	json_object_set_new(o, "limits", limits);

	json_t *rsrc = json_object();
	json_object_set_new(rsrc, "maxrss_kb", json_integer((json_int_t)res->maxrss_kb));
	if (res->cgroup.have_memory_peak)
		json_object_set_new(rsrc, "memory_peak_bytes", json_integer((json_int_t)res->cgroup.memory_peak_bytes));
	if (res->cgroup.have_oom)
		json_object_set_new(rsrc, "oom_kills", json_integer((json_int_t)res->cgroup.oom_kills));
	if (res->cgroup.have_pids_peak)
		json_object_set_new(rsrc, "pids_peak", json_integer((json_int_t)res->cgroup.pids_peak));
	if (res->cgroup.have_cpu)
		json_object_set_new(rsrc, "cpu_usec", json_integer((json_int_t)res->cgroup.cpu_usec));
	json_object_set_new(o, "resources", rsrc);

	if (res->egress)
		json_object_set(o, "egress", res->egress);
	if (run->token[0]) {
		size_t unanswered, answered = rb_gwproc_answered(res->gateway_calls, &unanswered);
		json_t *gw = json_pack("{s:b, s:I, s:I}", "started", run->gw.stats != NULL, "calls",
		                       (json_int_t)answered, "calls_refused", (json_int_t)res->gateway_refused);
		if (unanswered)
			json_object_set_new(gw, "calls_unanswered", json_integer((json_int_t)unanswered));
		if (res->gateway_hint[0])
			json_object_set_new(gw, "hint", json_string(res->gateway_hint));
		json_t *dns = rb_gwproc_dns_names(res->gateway_calls, RB_GWPROC_DNS_LISTED);
		if (json_array_size(dns))
			json_object_set_new(gw, "dns_refused", dns);
		else
			json_decref(dns);
		if (run->gw.stats)
			json_object_update(gw, run->gw.stats);
		if (run->gw.error[0])
			json_object_set_new(gw, "error", json_string(run->gw.error));
		json_object_set_new(o, "gateway", gw);
	}
	const struct rb_host_cost *h = &res->host;
	json_object_set_new(o, "host_cost",
	                    json_pack("{s:f, s:f, s:I, s:I, s:I, s:I}", "cpu_user_ms", (double)h->cpu_user_us / 1000.0,
	                              "cpu_system_ms", (double)h->cpu_sys_us / 1000.0, "stdout_read_bytes",
	                              (json_int_t)h->stdout_read, "stdout_dropped_bytes", (json_int_t)h->stdout_dropped,
	                              "stderr_read_bytes", (json_int_t)h->stderr_read, "stderr_dropped_bytes",
	                              (json_int_t)h->stderr_dropped));
	rb_result_put_output(o, "stdout", &res->out);
	json_object_set_new(o, "stdout_truncated", json_boolean(res->out.truncated));
	rb_result_put_output(o, "stderr", &res->err);
	json_object_set_new(o, "stderr_truncated", json_boolean(res->err.truncated));

	char um[128], gm[128];
	rb_idmap_format(&run->spec.ids.uid, um, sizeof um);
	rb_idmap_format(&run->spec.ids.gid, gm, sizeof gm);
	json_t *sb =
	    json_pack("{s:b, s:s, s:s, s:s, s:s, s:b}", "rootless", run->spec.ids.outer, "uid_map", um, "gid_map", gm,
	              "id_source", run->spec.ids.source, "cgroup", run->cg ? rb_cgroup_manager_name(run->cg) : "none",
	              "seccomp_cached", run->bpf.from_cache);
	json_object_set_new(sb, "network", json_string(run->spec.net_mode == RB_NET_GATEWAY ? "gateway" : "none"));
	json_object_set_new(sb, "image_idmapped", json_boolean(run->sb.idmapped));
	json_object_set_new(o, "sandbox", sb);
	return o;
}

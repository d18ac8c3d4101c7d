/* Manifest runs (see runfile.h). */
#define _GNU_SOURCE
#include "runtime/run/runfile.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "policy/operator.h"
#include "common/util.h"
#include "policy/skill.h"
#include "runtime/run/artifacts.h"
#include "runtime/run/budget.h"
#include "runtime/run/collect.h"
#include "runtime/run/logs.h"
#include "runtime/run/harvest.h"
#include "runtime/sandbox/nsopen.h"
#include "policy/manifest.h"
#include "runtime/run/record.h"
#include "runtime/run/result.h"
#include "runtime/run/result_spill.h"
#include "runtime/run/result_stream.h"
#include "runtime/run/run.h"
#include "scrub/scrub.h"
#include "runtime/run/seal.h"

struct runfile {
	struct rb_manifest m;
	struct rb_skill *skills;
	size_t n_skills;
	struct rb_run run;
	struct rb_record rec;
	struct rb_scrubber *scrubber;
	char store[4200];
	struct rb_input_req *input_reqs;
	char **input_from, **input_what;
	const char **skill_dirs, **skill_names;
	char (*skill_digest)[RB_SEAL_DIGEST_LEN]; /* each bundle's, as sealed in the run dir */
	char (*sealed_skill)[32];                 /* "skills[<i>]": its placeholder and copy's name */
	struct rb_collect collect;                /* the harvests: scrub, caps, budget */
	const struct rb_runfile_opts *opts;
	struct rb_result_stream out;  /* the result, as it is written */
	struct rb_result_spill spill; /* what the result does not hold */
	char last_status[32];         /* the last step's status in the result */
};

static int harvest(struct runfile *rf, unsigned step, json_t *out_json, struct rb_error *err)
{
	return rb_collect_step(&rf->collect, &rf->run, &rf->rec, step, &rf->spill, out_json, NULL, err);
}

/* One step: its request, its ledger record, its result. Returns 1 to go on, 0 to stop. */
static int run_step(struct runfile *rf, unsigned i, int *exit_code, struct rb_error *err)
{
	const struct rb_manifest_step *st = &rf->m.steps[i];
	struct rb_run *run = &rf->run;
	char name[32], argv0[4200];
	char *argv[3] = {NULL, NULL, NULL};
	struct rb_step_file files[1];
	char **env = NULL;
	_cleanup_free_ char *inputs_text = NULL;
	const struct rb_skill *skill = NULL;
	const char *bundle = NULL;
	const char *text;
	size_t text_len;

	struct rb_step_req req = {.timeout_ms = st->timeout_ms, .files = files, .n_files = 1, .scrubber = rf->scrubber};
	if (st->kind == RB_MANIFEST_STEP_SCRIPT) {
		snprintf(name, sizeof name, "step-%u.sh", i + 1);
		files[0] = (struct rb_step_file){name, st->script, strlen(st->script)};
		snprintf(argv0, sizeof argv0, RB_STEP_FILE_PATH "%d", RB_STEP_FILE_FD);
		argv[0] = run->policy.shell[0] ? run->policy.shell : "/bin/sh";
		argv[1] = argv0;
		text = st->script;
		text_len = strlen(st->script);
		env = calloc(rf->m.n_env + st->n_env + 1, sizeof *env);
	} else {
		for (size_t k = 0; k < rf->n_skills; k++)
			if (!strcmp(rf->skills[k].name, st->skill)) {
				skill = &rf->skills[k];
				bundle = rf->skill_digest[k];
			}
		if (!skill)
			return rb_error_set(err, 0, "steps[%u]: skill `%s` is not loaded", i, st->skill);
		char **senv = NULL;
		if (rb_skill_env(skill, st->inputs, &senv) < 0)
			return rb_error_set(err, errno, "steps[%u]: skill `%s` environment", i, st->skill);
		size_t n_senv = 0;
		while (senv[n_senv])
			n_senv++;
		env = calloc(rf->m.n_env + st->n_env + n_senv + 1, sizeof *env);
		for (size_t k = 0; env && k < n_senv; k++)
			env[rf->m.n_env + st->n_env + k] = senv[k];
		free(senv); /* the strings now belong to env */
		inputs_text = json_dumps(st->inputs, JSON_SORT_KEYS | JSON_COMPACT);
		_Static_assert(RB_SKILL_INPUTS_FD == RB_STEP_FILE_FD, "a skill's inputs are its step's first file");
		files[0] = (struct rb_step_file){"inputs.json", inputs_text, strlen(inputs_text)};
		rb_skill_entry_path(skill, argv0, sizeof argv0);
		argv[0] = argv0;
		text = argv0;
		text_len = strlen(argv0);
	}
	if (!env)
		return rb_error_set(err, ENOMEM, "steps[%u]", i);
	/* The manifest's variables, then the step's: the step wins on a clash (later wins). */
	for (size_t k = 0; k < rf->m.n_env; k++)
		env[k] = strdup(rf->m.env[k]);
	for (size_t k = 0; k < st->n_env; k++)
		env[rf->m.n_env + k] = strdup(st->env[k]);
	req.argv = argv;
	req.env = env;

	int r = rb_record_step_start(&rf->rec, i + 1, st->name, skill ? "skill" : "script", text, text_len,
	                             skill ? st->inputs : NULL, bundle, err);
	struct rb_step_result res = {0};
	if (r == 0)
		r = rb_run_exec(run, &req, &res, err); /* it writes the step ahead, then commits it */
	for (char **e = env; *e; e++)
		free(*e);
	free(env);
	if (r < 0)
		return -1;

	json_t *sj = json_pack("{s:i, s:s?, s:s, s:s?}", "step", (int)(i + 1), "name", st->name, "kind",
	                       skill ? "skill" : "script", "bundle_digest", bundle);
	json_object_set_new(sj, "status", json_string(rb_record_outcome(&res)));
	rb_result_step_fields(sj, &res); /* the same fields as a one-step run's result */
	/* Scrubbed already, as they came (rb_run_exec); within the run's bound for the result. */
	rb_result_spill_output(&rf->spill, i + 1, "stdout", &res.out, sj);
	json_object_set_new(sj, "stdout_truncated", json_boolean(res.out.truncated));
	rb_result_spill_output(&rf->spill, i + 1, "stderr", &res.err, sj);
	json_object_set_new(sj, "stderr_truncated", json_boolean(res.err.truncated));
	if (res.egress)
		json_object_set(sj, "egress", res.egress);
	size_t unanswered;
	if (res.gateway_hint[0])
		json_object_set_new(sj, "gateway",
		                    json_pack("{s:I, s:I, s:s}", "calls",
		                              (json_int_t)rb_gwproc_answered(res.gateway_calls, &unanswered),
		                              "calls_refused", (json_int_t)res.gateway_refused, "hint",
		                              res.gateway_hint));

	bool ok = res.status == RB_STEP_EXITED && res.exit_code == 0;
	if (ok && skill) {
		json_t *value = NULL;
		struct rb_error perr;
		/* res.out is the scrubbed text; its strings are scrubbed again once decoded, since an
		 * escape (\u0041KIA...) hides a secret from the scrub of the text. */
		if (rb_skill_parse_result(res.out.data ? res.out.data : "", res.out.len, &value, &perr) < 0 ||
		    rb_scrub_json(rf->scrubber, value, NULL, &perr) < 0) {
			json_decref(value);
			rb_error_prefix(&perr, "skill `%s`", skill->name);
			json_object_set_new(sj, "status", json_string("failure"));
			json_object_set_new(sj, "error", json_string(perr.msg));
			ok = false;
		} else {
			json_object_set_new(sj, "result", value);
		}
	}
	*exit_code = ok ? 0 : (rb_step_exit_code(&res) ? rb_step_exit_code(&res) : 1);
	r = rb_record_step_end(&rf->rec, i + 1, &res, err);
	if (r == 0)
		r = harvest(rf, i + 1, sj, err);
	const char *status = json_string_value(json_object_get(sj, "status"));
	snprintf(rf->last_status, sizeof rf->last_status, "%s", status ? status : "");
	if (rf->opts->on_step)
		rf->opts->on_step(rf->opts->ctx, sj);
	rb_result_stream_step(&rf->out, sj); /* written now, and freed: the runner holds one step */
	json_decref(sj);
	bool alive = !run->sb.reaped;
	rb_step_result_free(&res);
	if (r < 0)
		return -1;
	return ok && alive;
}

/* The tenant boundary of the artifact store: an artifact input must be one that a run of the
 * manifest's tenant stored, which its ledger says. A digest that no run stored and one that
 * another tenant's run stored get one message, so the store tells no tenant what exists. */
static int check_artifacts(const struct rb_manifest *m, const struct rb_paths *paths, struct rb_error *err)
{
	const char *tenant = m->tenant; /* a manifest names its tenant (required) */
	struct rb_ledger *l = NULL;
	int r = 0;
	for (size_t i = 0; r == 0 && i < m->n_inputs; i++) {
		const struct rb_manifest_input *in = &m->inputs[i];
		if (in->kind != RB_MANIFEST_INPUT_ARTIFACT)
			continue;
		/* The state directory 0711 first, as rb_run_open makes it: opened first, the ledger
		 * would make it 0700, which the sandbox's ids could not search. */
		if (!l &&
		    (rb_state_dir_make(paths->state_dir, err) < 0 || rb_ledger_open(paths->state_dir, &l, err) < 0))
			return rb_error_prefix(err, "manifest inputs[%zu]: the ledger", i);
		char digest[80];
		snprintf(digest, sizeof digest, "sha256:%s", in->artifact);
		bool found = false;
		if ((r = rb_ledger_tenant_has_artifact(l, tenant, digest, &found, err)) < 0)
			rb_error_prefix(err, "manifest inputs[%zu]", i);
		else if (!found)
			r = rb_error_set(err, ENOENT,
			                 "manifest inputs[%zu]: no artifact %s stored by a run of tenant `%s`", i,
			                 digest, tenant);
	}
	if (l)
		rb_ledger_close(l);
	return r;
}

/* Re-points an input at its sealed copy, keeping its dest. */
static int repoint(struct rb_input *in, const char *copy, struct rb_error *err)
{
	char dest[sizeof in->dest + 16];
	snprintf(dest, sizeof dest, "/workspace/in/%s", in->dest);
	struct rb_input_req req = {copy, dest, copy, false}; /* artifacts and bundles: never cow */
	if (in->fd >= 0)
		close(in->fd);
	in->fd = -1;
	return rb_input_open(&req, in, err);
}

/* What the sandbox binds from the host, copied into <run dir>/sealed once the policy has
 * allowed the originals: each skill bundle, digested as it is copied (the step runs those
 * bytes, whatever happens to the host folder after), and each artifact input (the store's
 * objects are private to its owner). The directory is the sandbox's root's, 0700: init opens
 * the copies as that user (runtime/sandbox/mounts.c), nobody else on the host reaches them. */
static int seal(struct runfile *rf, struct rb_error *err)
{
	struct rb_run *run = &rf->run;
	char dir[sizeof run->dir + 16];
	snprintf(dir, sizeof dir, "%s/sealed", run->dir);
	if (mkdir(dir, 0700) < 0)
		return rb_error_set(err, errno, "mkdir `%s`", dir);
	uid_t uid;
	gid_t gid;
	if (rb_run_sandbox_root_ids(run, &uid, &gid) && chown(dir, uid, gid) < 0)
		return rb_error_set(err, errno, "chown `%s`", dir);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return rb_error_set(err, errno, "open `%s`", dir);
	struct rb_seal_budget artifacts = RB_SEAL_ARTIFACT_BUDGET, bundles = RB_SEAL_BUNDLE_BUDGET;
	for (size_t i = 0; i < rf->m.n_inputs && i < run->n_inputs; i++) {
		if (rf->m.inputs[i].kind != RB_MANIFEST_INPUT_ARTIFACT)
			continue;
		char name[32], copy[sizeof dir + 32];
		snprintf(name, sizeof name, "in-%zu", i);
		snprintf(copy, sizeof copy, "%s/%s", dir, name);
		if (rb_seal_file(run->inputs[i].fd, run->inputs[i].host, dfd, name, &artifacts, err) < 0 ||
		    repoint(&run->inputs[i], copy, err) < 0)
			return rb_error_prefix(err, "manifest inputs[%zu] (artifact sha256:%s)", i,
			                       rf->m.inputs[i].artifact);
	}
	char *copies[RB_MAX_INPUTS + 1] = {NULL};
	size_t n = rf->m.n_skills < run->n_skills ? rf->m.n_skills : run->n_skills;
	int r = 0;
	for (size_t k = 0; r == 0 && k < n; k++) {
		const char *name = rf->sealed_skill[k];
		if (asprintf(&copies[k], "%s/%s", dir, name) < 0) {
			copies[k] = NULL;
			r = rb_error_set(err, ENOMEM, "skill copy");
		} else if (rb_seal_tree(run->skills[k].fd, dfd, name, &bundles, rf->skill_digest[k], err) < 0 ||
		           repoint(&run->skills[k], copies[k], err) < 0) {
			r = rb_error_prefix(err, "manifest skills[%zu] (`%s`)", k, rf->m.skills[k]);
		}
	}
	/* What is loaded and checked (SKILL.md, the entry) is the copy, which is what runs. */
	if (r == 0)
		r = rb_manifest_load_skills_from(&rf->m, (const char *const *)copies, &rf->skills, &rf->n_skills, err);
	for (size_t k = 0; r == 0 && k < rf->n_skills; k++)
		snprintf(run->skills[k].dest, sizeof run->skills[k].dest, "%s", rf->skills[k].name);
	for (size_t k = 0; k < n; k++)
		free(copies[k]);
	return r;
}

/* The policy a manifest run gets: the command line's, else the manifest's by name (by path only
 * where the operator's config.json allows it), else "default". */
static int choose_policy(const struct rb_manifest *m, const struct rb_runfile_opts *o, const struct rb_paths *paths,
                         const char **out, struct rb_error *err)
{
	*out = o->ceilings.policy ? o->ceilings.policy : m->policy;
	if (o->ceilings.policy || !m->policy_is_path)
		return 0;
	struct rb_operator_config oc;
	if (rb_operator_config_load(paths->config_dir, &oc, err) < 0)
		return -1;
	if (!oc.manifest_policy_paths)
		return rb_error_set(err, 0,
		                    "manifest %s: policy: `%s` is a path; a manifest names a policy by name (from "
		                    "%s/policies or the shipped profiles), unless the operator's %s/config.json sets "
		                    "\"manifest_policy_paths\": true",
		                    m->origin, m->policy, paths->config_dir, paths->config_dir);
	return 0;
}

/* The manifest at path, or on stdin for "-" (its relative paths then from the cwd). */
static int load(const char *path, struct rb_manifest *m, struct rb_error *err)
{
	if (strcmp(path, "-") != 0)
		return rb_manifest_load(path, m, err);
	memset(m, 0, sizeof *m);
	_cleanup_free_ char *text = NULL;
	size_t len;
	if (rb_read_file("/dev/stdin", 4u << 20, &text, &len, err) < 0)
		return rb_error_prefix(err, "manifest from stdin");
	if (strlen(text) != len)
		return rb_error_set(err, 0, "manifest from stdin: holds a NUL byte");
	return rb_manifest_parse(text, "(stdin)", NULL, m, err);
}

static int prepare(struct runfile *rf, const char *path, const struct rb_runfile_opts *o, struct rb_error *err)
{
	const char *state_dir = o->state_dir;
	if (load(path, &rf->m, err) < 0)
		return -1;
	if (rb_manifest_check_ceilings(&rf->m, &o->ceilings, err) < 0)
		return -1;
	struct rb_manifest *m = &rf->m;
	size_t n_skills = m->n_skills;
	rf->input_reqs = calloc(m->n_inputs + 1, sizeof *rf->input_reqs);
	rf->input_from = calloc(m->n_inputs + 1, sizeof *rf->input_from);
	rf->input_what = calloc(m->n_inputs + 1, sizeof *rf->input_what);
	rf->skill_dirs = calloc(n_skills + 1, sizeof *rf->skill_dirs);
	rf->skill_names = calloc(n_skills + 1, sizeof *rf->skill_names);
	rf->skill_digest = calloc(n_skills + 1, sizeof *rf->skill_digest);
	rf->sealed_skill = calloc(n_skills + 1, sizeof *rf->sealed_skill);
	if (!rf->input_reqs || !rf->input_from || !rf->input_what || !rf->skill_dirs || !rf->skill_names ||
	    !rf->skill_digest || !rf->sealed_skill)
		return rb_error_set(err, ENOMEM, "manifest");
	struct rb_paths paths;
	if (rb_paths_init(&paths, o->host, state_dir, err) < 0)
		return -1;
	if (check_artifacts(m, &paths, err) < 0)
		return -1;
	snprintf(rf->store, sizeof rf->store, "%s/artifacts", paths.state_dir);
	for (size_t i = 0; i < m->n_inputs; i++) {
		const struct rb_manifest_input *in = &m->inputs[i];
		char from[4200];
		if (in->kind == RB_MANIFEST_INPUT_ARTIFACT) {
			char digest[80];
			snprintf(digest, sizeof digest, "sha256:%s", in->artifact);
			if (rb_artifact_path(rf->store, digest, from, err) < 0)
				return rb_error_prefix(err, "manifest inputs[%zu]", i);
		} else {
			snprintf(from, sizeof from, "%s", in->from);
		}
		/* Messages name the manifest's own key, never a --input the user did not type. */
		if (!(rf->input_from[i] = strdup(from)) ||
		    asprintf(&rf->input_what[i], "manifest %s: inputs[%zu].%s", m->origin, i,
		             in->kind == RB_MANIFEST_INPUT_ARTIFACT ? "artifact" : "from") < 0) {
			rf->input_what[i] = NULL;
			return rb_error_set(err, ENOMEM, "manifest");
		}
		rf->input_reqs[i] = (struct rb_input_req){rf->input_from[i], in->to, rf->input_what[i], in->cow};
	}
	/* The bundles are read only once the policy allowed their folders and they are sealed:
	 * until then each is bound under a placeholder name, its skill's name once loaded. */
	for (size_t i = 0; i < n_skills; i++) {
		rf->skill_dirs[i] = m->skills[i];
		snprintf(rf->sealed_skill[i], sizeof rf->sealed_skill[i], "skills[%zu]", i);
		rf->skill_names[i] = rf->sealed_skill[i];
	}
	const char *policy;
	if (choose_policy(m, o, &paths, &policy, err) < 0)
		return -1;
	/* The run opens with the command line's limits (rb_run_open holds them to the policy's),
	 * then the manifest's, checked against both, narrow them further. */
	const struct rb_manifest_limits *top = &o->ceilings.limits;
	struct rb_run_config cfg = {
	    .image = o->ceilings.image ? o->ceilings.image : m->image,
	    .policy = policy,
	    .state_dir = state_dir,
	    .timeout_ms = top->timeout_ms,
	    .memory_bytes = top->memory_bytes,
	    .pids = top->pids,
	    .cpus = top->cpus,
	    .net_mode = o->net_mode,
	    .gateway_config = o->gateway_config,
	    .cancel_fd = o->cancel_fd,
	    .input_reqs = rf->input_reqs,
	    .n_inputs = (unsigned)m->n_inputs,
	    .skill_dirs = rf->skill_dirs,
	    .skill_names = rf->skill_names,
	    .n_skills = (unsigned)n_skills,
	    .tenant = m->tenant,
	    .agent = m->agent,
	    .run_id = m->run_id[0] ? m->run_id : NULL,
	    .factory = o->factory,
	    .host = o->host,
	};
	if (rb_run_open(&cfg, &rf->run, err) < 0)
		return -1;
	rb_collect_init(&rf->collect, &rf->run);
	rf->collect.progress = o->progress;
	if (rb_manifest_check_limits(m, &rf->run.policy, err) < 0)
		return -1;
	const struct rb_manifest_limits *l = &m->limits;
	if (rb_run_narrow(&rf->run, l->timeout_ms, l->memory_bytes, l->pids, l->cpus, err) < 0)
		return rb_error_prefix(err, "manifest %s: limits", m->origin);
	if (seal(rf, err) < 0)
		return -1;
	if (rb_record_open(&rf->rec, &rf->run, err) < 0)
		return -1;
	rf->rec.labels = o->labels;
	if (m->run_id[0]) {
		/* A run id from the manifest must be new: said before any sandbox exists. The run's
		 * first commit checks again under the ledger's write lock (rb_ledger_append_run), so
		 * two runs started at once with one id cannot both get in. */
		int64_t have = 0;
		if (rb_ledger_open(rf->run.paths.state_dir, &rf->rec.ledger, err) < 0 ||
		    rb_ledger_count_run(rf->rec.ledger, m->run_id, NULL, &have, err) < 0)
			return -1;
		if (have > 0)
			return rb_error_set(err, EEXIST,
			                    "manifest run_id `%s` is already in the ledger: run ids must be unique "
			                    "(leave run_id out to get a new one)",
			                    m->run_id);
	}
	rb_record_attach(&rf->rec, &rf->run);
	return 0;
}

/* The sandbox, and with it the run token; then the scrubber, which must know the token. */
static int start(struct runfile *rf, struct rb_error *err)
{
	if (rb_run_start(&rf->run, err) < 0)
		return -1;
	struct rb_scrub_secret secret = {"run-token", rf->run.token, strlen(rf->run.token)};
	if (rb_scrub_new_labeled(&secret, rf->run.token[0] ? 1 : 0, &rf->scrubber, err) < 0)
		return -1;
	rf->collect.scrubber = rf->scrubber;
	return 0;
}

static void release(struct runfile *rf)
{
	rb_collect_close(&rf->collect);
	rb_record_close(&rf->rec);
	rb_run_close(&rf->run);
	rb_scrub_free(rf->scrubber);
	for (size_t i = 0; i < rf->m.n_inputs; i++) {
		free(rf->input_from ? rf->input_from[i] : NULL);
		free(rf->input_what ? rf->input_what[i] : NULL);
	}
	free(rf->input_from);
	free(rf->input_what);
	free(rf->input_reqs);
	free(rf->skill_dirs);
	free(rf->skill_names);
	free(rf->skill_digest);
	free(rf->sealed_skill);
	rb_manifest_free_skills(rf->skills, rf->n_skills);
	rb_manifest_free(&rf->m);
}

int rb_runfile_execute(const char *path, const struct rb_runfile_opts *opts, FILE *out, int *exit_code,
                       struct rb_error *err)
{
	struct runfile *rf = calloc(1, sizeof *rf);
	if (!rf)
		return rb_error_set(err, ENOMEM, "manifest");
	*exit_code = 125;
	rf->opts = opts;
	int r = prepare(rf, path, opts, err);
	if (r == 0)
		r = rb_record_run_start(&rf->rec, rf->m.agent_version, rf->m.hash, err);
	if (r < 0) {
		release(rf);
		free(rf);
		return -1;
	}
	rb_result_spill_init(&rf->spill, rf->run.paths.state_dir, rf->run.id);
	json_t *head = json_pack("{s:s, s:s, s:s, s:s}", "run_id", rf->run.id, "tenant", rf->run.tenant, "agent",
	                         rf->run.agent, "manifest_hash", rf->m.hash);
	if (opts->on_begin)
		opts->on_begin(opts->ctx, rf->run.id);
	rb_result_stream_begin(&rf->out, out, head);
	json_decref(head);
	int code = 0;
	const char *outcome = "success";
	json_t *setup_error = NULL;
	if (start(rf, err) < 0) {
		setup_error = json_string(err->msg);
		code = 125;
		outcome = "failure";
	}
	for (unsigned i = 0; !setup_error && i < rf->m.n_steps; i++) {
		int go = run_step(rf, i, &code, err);
		if (go < 0) {
			rb_warn("%s", err->msg);
			code = 125;
			outcome = "failure";
			break;
		}
		if (!go) {
			outcome = rf->last_status[0] ? rf->last_status : "failure";
			break;
		}
	}
	rb_run_stop(&rf->run);
	struct rb_error kerr;
	if (rb_logs_keep(&rf->run, &kerr) < 0)
		rb_warn("%s", kerr.msg);
	struct rb_error lerr;
	if (rb_record_cleanup(&rf->rec, "sandbox killed, cgroup and run directory removed", true, &lerr) < 0 ||
	    rb_record_run_end(&rf->rec, outcome, &lerr) < 0 ||
	    rb_record_flush(&rf->rec, RB_RECORD_DURABLE, &lerr) < 0) {
		rb_warn("ledger: %s", lerr.msg);
		code = 125;
	}
	json_t *res = json_pack("{s:s, s:i}", "result", outcome, "exit", code);
	if (setup_error)
		json_object_set_new(res, "error", setup_error);
	json_object_set_new(res, "image",
	                    json_pack("{s:s, s:s}", "name", rf->run.image.name, "digest", rf->run.image.digest));
	json_object_set_new(res, "policy",
	                    json_pack("{s:s, s:s}", "name", rf->run.policy.name, "hash", rf->run.policy.hash));
	/* What the run was held to, after the policy, the command line and the manifest had their
	 * say (null: unlimited); each step's own timeout is its own. */
	const struct rb_run *run = &rf->run;
	json_object_set_new(
	    res, "limits",
	    json_pack("{s:o, s:o, s:o, s:o, s:s}", "timeout_ms",
	              run->timeout_ms ? json_integer((json_int_t)run->timeout_ms) : json_null(), "memory_bytes",
	              run->limits.memory_bytes ? json_integer((json_int_t)run->limits.memory_bytes) : json_null(),
	              "pids", run->limits.pids ? json_integer((json_int_t)run->limits.pids) : json_null(), "cpus",
	              run->limits.cpus > 0 ? json_real(run->limits.cpus) : json_null(), "network",
	              run->spec.net_mode == RB_NET_GATEWAY ? "gateway" : "none"));
	json_object_set_new(res, "cost",
	                    json_pack("{s:f, s:f, s:I, s:f}", "cpu_seconds", rf->rec.cpu_seconds, "memory_gib_seconds",
	                              rf->rec.memory_gib_seconds, "stored_bytes", (json_int_t)rf->rec.stored_bytes,
	                              "host_cpu_seconds", rf->rec.host_cpu_seconds));
	if (rf->run.gw.stats)
		json_object_set(res, "gateway", rf->run.gw.stats);
	json_object_set_new(res, "storage", rb_budget_json(&rf->collect.budget));
	if (rf->spill.made)
		json_object_set_new(res, "results_dir", json_string(rf->spill.dir));
	if (opts->on_end) {
		json_object_set_new(res, "run_id", json_string(rf->run.id));
		opts->on_end(opts->ctx, res);
		json_object_del(res, "run_id");
	}
	rb_result_stream_end(&rf->out, res);
	json_decref(res);
	release(rf);
	free(rf);
	*exit_code = code;
	return 0;
}

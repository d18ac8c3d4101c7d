/* A run's life: open (policy, image, inputs, ids, seccomp), start (cgroup, sandbox), steps
 * (exec, output, timeout, cancel, status), close (kill, remove). */
#define _GNU_SOURCE
#include "runtime/run/run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/never_input.h"
#include "common/ttysafe.h"
#include "common/util.h"
#include "runtime/sandbox/channel.h"
#include "runtime/sandbox/idslice.h"
#include "runtime/run/lifecycle.h"
#include "scrub/scrub.h"

extern char **environ;

#define RB_CANCEL_GRACE_S 2

/* One check for every host path bound in, inputs and skill bundles alike (what names which). */
static int check_input(const struct rb_policy *pol, const struct rb_paths *paths, const struct rb_input *in,
                       const char *what, struct rb_error *err)
{
	if (rb_never_input_check(paths, in->host, in->is_dir, what, err) < 0)
		return -1;
	for (unsigned i = 0; i < pol->n_input_allow; i++)
		if (rb_path_under(in->host, pol->input_allow[i]))
			return 0;
	return rb_error_set(err, 0, "%s `%s`: policy `%s` allows no input there", what, in->host, pol->name);
}

/* Two inputs on one place (or one inside the other) would stack a bind on a read-only bind:
 * said here, naming both, rather than as the mount's EACCES inside the sandbox. ins[n] is
 * checked against ins[0..n); tree is where they go (/workspace/in, /workspace/skills). */
static int check_dests(const struct rb_input *ins, unsigned n, const char *const *what, const char *tree,
                       struct rb_error *err)
{
	const struct rb_input *b = &ins[n];
	for (unsigned i = 0; i < n; i++) {
		const struct rb_input *a = &ins[i];
		if (!strcmp(a->dest, b->dest))
			return rb_error_set(err, 0, "%s and %s: both go to %s/%s", what[i], what[n], tree, a->dest);
		if (rb_path_under(a->dest, b->dest) || rb_path_under(b->dest, a->dest))
			return rb_error_set(err, 0, "%s and %s: %s/%s and %s/%s: one lies inside the other", what[i],
			                    what[n], tree, a->dest, tree, b->dest);
	}
	return 0;
}

/* What the caller asked for (the command line's flags, a manifest's ceilings) may only narrow
 * the policy (SPEC "Who may say what"); a policy's 0 is "unlimited". */
static int check_requested(const struct rb_run_config *cfg, const struct rb_policy *pol, struct rb_error *err)
{
	char a[32], b[32];
	if (cfg->timeout_ms && pol->timeout_ms && cfg->timeout_ms > pol->timeout_ms)
		return rb_error_set(err, 0, "--timeout %s is above policy `%s`'s limits.timeout (%s)",
		                    rb_fmt_duration(cfg->timeout_ms, a, sizeof a), pol->name,
		                    rb_fmt_duration(pol->timeout_ms, b, sizeof b));
	if (cfg->memory_bytes && pol->memory_bytes && cfg->memory_bytes > pol->memory_bytes)
		return rb_error_set(err, 0, "--memory %s is above policy `%s`'s limits.memory (%s)",
		                    rb_fmt_size(cfg->memory_bytes, a, sizeof a), pol->name,
		                    rb_fmt_size(pol->memory_bytes, b, sizeof b));
	if (cfg->pids && pol->pids && cfg->pids > pol->pids)
		return rb_error_set(err, 0, "--pids %" PRIu64 " is above policy `%s`'s limits.pids (%" PRIu64 ")",
		                    cfg->pids, pol->name, pol->pids);
	if (cfg->cpus > 0 && pol->cpus > 0 && cfg->cpus > pol->cpus)
		return rb_error_set(err, 0, "--cpus %g is above policy `%s`'s limits.cpus (%g)", cfg->cpus, pol->name,
		                    pol->cpus);
	if (cfg->net_mode == RB_NET_GATEWAY && pol->net_mode == RB_NET_NONE)
		return rb_error_set(err, 0, "--net gateway: policy `%s` has network mode none", pol->name);
	return 0;
}

/* One --input "SRC[:DEST]" (split at the first ':'), or a manifest's input, opened and checked:
 * never-inputs, the policy's inputs.allow, and no two on one place. *what names it. */
static int open_input(const struct rb_run_config *cfg, struct rb_run *run, unsigned i, char **what,
                      struct rb_error *err)
{
	if (cfg->input_reqs) {
		if (!(*what = strdup(cfg->input_reqs[i].what)))
			return rb_error_set(err, ENOMEM, "run");
		return rb_input_open(&cfg->input_reqs[i], &run->inputs[i], err);
	}
	if (asprintf(what, "--input `%s`", cfg->inputs[i]) < 0) {
		*what = NULL;
		return rb_error_set(err, ENOMEM, "run");
	}
	const char *arg = cfg->inputs[i], *colon = strchr(arg, ':');
	char src[PATH_MAX];
	if (snprintf(src, sizeof src, "%.*s", colon ? (int)(colon - arg) : (int)strlen(arg), arg) >= (int)sizeof src)
		return rb_error_set(err, ENAMETOOLONG, "%s", *what);
	struct rb_input_req req = {src, colon ? colon + 1 : NULL, *what};
	return rb_input_open(&req, &run->inputs[i], err);
}

static int open_inputs(const struct rb_run_config *cfg, struct rb_run *run, struct rb_error *err)
{
	char **what = calloc(cfg->n_inputs + 1, sizeof *what);
	if (!what)
		return rb_error_set(err, ENOMEM, "run");
	int r = 0;
	for (unsigned i = 0; r == 0 && i < cfg->n_inputs; i++) {
		r = open_input(cfg, run, i, &what[i], err);
		run->n_inputs = i + 1; /* its fd, if opened, is closed with the run */
		if (r == 0)
			r = check_input(&run->policy, &run->paths, &run->inputs[i], what[i], err);
		if (r == 0)
			r = check_dests(run->inputs, i, (const char *const *)what, "/workspace/in", err);
	}
	for (unsigned i = 0; i < cfg->n_inputs; i++)
		free(what[i]);
	free(what);
	return r;
}

int rb_run_narrow(struct rb_run *run, uint64_t timeout_ms, uint64_t memory_bytes, uint64_t pids, double cpus,
                  struct rb_error *err)
{
	const struct rb_policy *pol = &run->policy;
	if (run->started)
		return rb_error_set(err, EBUSY, "limits can only narrow before the sandbox starts");
	if ((timeout_ms && run->timeout_ms && timeout_ms > run->timeout_ms) ||
	    (memory_bytes && run->limits.memory_bytes && memory_bytes > run->limits.memory_bytes) ||
	    (pids && run->limits.pids && pids > run->limits.pids) ||
	    (cpus > 0 && run->limits.cpus > 0 && cpus > run->limits.cpus))
		return rb_error_set(err, 0, "a limit above the run's own (policy `%s` or the command line)", pol->name);
	if (timeout_ms)
		run->timeout_ms = timeout_ms;
	if (memory_bytes)
		run->limits.memory_bytes = memory_bytes;
	if (pids)
		run->limits.pids = pids;
	if (cpus > 0)
		run->limits.cpus = cpus;
	return 0;
}

/* The host ids of the sandbox's root, when they differ from the caller's: as root, a
 * subordinate range. Rootless, the sandbox's root is the caller (through the owner namespace). */
static bool sandbox_root_ids(const struct rb_idplan *ids, uid_t *uid, gid_t *gid)
{
	if (ids->outer)
		return false;
	bool have_u = false, have_g = false;
	for (unsigned i = 0; i < ids->uid.n; i++)
		if (ids->uid.lines[i].inside == 0)
			*uid = ids->uid.lines[i].outside, have_u = true;
	for (unsigned i = 0; i < ids->gid.n; i++)
		if (ids->gid.lines[i].inside == 0)
			*gid = ids->gid.lines[i].outside, have_g = true;
	return have_u && have_g && (*uid != geteuid() || *gid != getegid());
}

/* Init, in the sandbox's user namespace, mounts on the run directory: where the sandbox's
 * root is another host id than ours, it must be able to search every directory above it. An
 * existing one it cannot search is an error naming it and the fix, never a chmod. */
static int searchable_path(const char *dir, uid_t uid, gid_t gid, struct rb_error *err)
{
	char buf[4096];
	snprintf(buf, sizeof buf, "%s", dir);
	for (char *slash = buf + strlen(buf); slash; slash = slash > buf ? strrchr(buf, '/') : NULL) {
		*slash = '\0';
		const char *d = *buf ? buf : "/";
		struct stat st;
		if (stat(d, &st) < 0)
			return rb_error_set(err, errno, "stat `%s`", d);
		mode_t bit = st.st_uid == uid ? S_IXUSR : st.st_gid == gid ? S_IXGRP : S_IXOTH;
		if (!(st.st_mode & bit))
			return rb_error_set(
			    err, EACCES,
			    "`%s` (mode %04o) is not searchable by the sandbox's host ids (uid %u, gid %u), "
			    "so the run directory `%s` below it cannot be used: make it searchable "
			    "(chmod o+x `%s`), or choose a state directory (--state-dir) or "
			    "RUNBOX_RUN_DIR below searchable directories",
			    d, (unsigned)(st.st_mode & 07777), (unsigned)uid, (unsigned)gid, dir, d);
		if (slash == buf)
			break;
	}
	return 0;
}

bool rb_run_sandbox_root_ids(const struct rb_run *run, uid_t *uid, gid_t *gid)
{
	return sandbox_root_ids(&run->spec.ids, uid, gid);
}

static bool setgroups_denied_here(void)
{
	char *text = NULL;
	bool deny = rb_read_file("/proc/self/setgroups", 64, &text, NULL, NULL) == 0 && !strncmp(text, "deny", 4);
	free(text);
	return deny;
}

static int save_state(struct rb_run *run, struct rb_error *err);

int rb_run_open(const struct rb_run_config *cfg, struct rb_run *run, struct rb_error *err)
{
	memset(run, 0, sizeof *run);
	run->sb.reaped = true;
	run->sb.pidfd = run->sb.ctl = run->sb.userns_fd = -1;
	run->sb.net = (struct rb_net)RB_NET_INIT;

	run->bg_log = -1;
	run->id_slice_fd = -1;
	run->factory = cfg->factory;
	if (cfg->run_id)
		snprintf(run->id, sizeof run->id, "%s", cfg->run_id);
	else
		rb_new_run_id(run->id);
	if (rb_random_hex(run->instance, sizeof run->instance) < 0)
		return rb_error_set(err, errno, "getrandom: run nonce");
	rb_debug("run: open");
	if (rb_paths_init(&run->paths, cfg->state_dir, err) < 0)
		return -1;
	/* Made here, 0711, before the seccomp cache or the ledger would make it 0700 as their
	 * parent: a run directory below it (--state-dir) must be searchable by the sandbox's ids. */
	if (rb_mkdir_p(run->paths.state_dir, 0711, err) < 0)
		return -1;
	if (rb_policy_load(cfg->policy ? cfg->policy : "default", run->paths.data_dir, run->paths.config_dir,
	                   &run->policy, err) < 0)
		return -1;
	struct rb_policy *pol = &run->policy;
	if (rb_image_resolve(cfg->image ? cfg->image : "host", pol, &run->paths, &run->image, err) < 0)
		return -1;

	if (check_requested(cfg, pol, err) < 0)
		return -1;
	run->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : pol->timeout_ms;
	run->limits.memory_bytes = cfg->memory_bytes ? cfg->memory_bytes : pol->memory_bytes;
	run->limits.pids = cfg->pids ? cfg->pids : pol->pids;
	run->limits.cpus = cfg->cpus > 0 ? cfg->cpus : pol->cpus;
	run->limits.cpu_weight = pol->cpu_weight;

	if (cfg->n_inputs > RB_MAX_INPUTS)
		return rb_error_set(err, 0, "at most %d inputs", RB_MAX_INPUTS);
	if (cfg->n_skills > RB_MAX_INPUTS)
		return rb_error_set(err, 0, "at most %d skills", RB_MAX_INPUTS);
	run->inputs = calloc(cfg->n_inputs + 1, sizeof *run->inputs);
	run->skills = calloc(cfg->n_skills + 1, sizeof *run->skills);
	if (!run->inputs || !run->skills)
		return rb_error_set(err, ENOMEM, "run");
	if (open_inputs(cfg, run, err) < 0)
		return -1;

	for (unsigned i = 0; i < cfg->n_skills; i++) {
		char arg[8192];
		snprintf(arg, sizeof arg, "%s:/workspace/in/%s", cfg->skill_dirs[i], cfg->skill_names[i]);
		if (rb_input_parse(arg, &run->skills[i], err) < 0)
			return rb_error_prefix(err, "skill `%s`", cfg->skill_names[i]);
		run->n_skills = i + 1;
		if (check_input(pol, &run->paths, &run->skills[i], "skill", err) < 0 ||
		    check_dests(run->skills, i, cfg->skill_names, "/workspace/skills", err) < 0)
			return -1;
		if (!run->skills[i].is_dir)
			return rb_error_set(err, 0, "skill `%s`: `%s` is not a folder", cfg->skill_names[i],
			                    cfg->skill_dirs[i]);
	}

	struct rb_sandbox_spec *spec = &run->spec;
	if (rb_userns_plan(pol, &spec->ids, err) < 0 ||
	    rb_userns_take_slice(&spec->ids, RB_IDSLICE_DIR, &run->id_slice_fd, err) < 0)
		return -1;
	/* The run directory's parents, before anything else makes them (the seccomp cache would,
	 * 0700): searchable by the sandbox's ids, as init, already in the sandbox's user
	 * namespace, mounts on the run directory. What runbox creates is 0711 (not listable);
	 * what exists already is checked, not changed. */
	if (rb_mkdir_p(run->paths.run_dir, 0711, err) < 0)
		return -1;
	uid_t sb_uid = 0;
	gid_t sb_gid = 0;
	if (sandbox_root_ids(&spec->ids, &sb_uid, &sb_gid) &&
	    searchable_path(run->paths.run_dir, sb_uid, sb_gid, err) < 0)
		return -1;
	char cache[sizeof run->paths.state_dir + 32];
	snprintf(cache, sizeof cache, "%s/cache/seccomp", run->paths.state_dir);
	rb_debug("seccomp: prepare");
	if (rb_seccomp_prepare(pol, run->paths.data_dir, cache, &run->bpf, err) < 0)
		return -1;
	rb_debug("seccomp: ready (%s)", run->bpf.from_cache ? "cached" : "built");

	char dir[sizeof run->dir];
	if (snprintf(dir, sizeof dir, "%s/%s", run->paths.run_dir, run->id) >= (int)sizeof dir)
		return rb_error_set(err, ENAMETOOLONG, "run directory");
	snprintf(run->tenant, sizeof run->tenant, "%s", cfg->tenant ? cfg->tenant : "local");
	snprintf(run->agent, sizeof run->agent, "%s", cfg->agent ? cfg->agent : "cli");
	/* The state file comes before anything of the run exists, and is rewritten as the run
	 * makes more (its cgroup, its sandbox) and removed last: whatever a runbox killed at any
	 * point left, gc finds through it. Made only where none exists, it claims the run id. */
	int claimed = rb_lifecycle_claim(run, err);
	if (claimed != 0)
		return claimed < 0
		           ? -1
		           : rb_error_set(err, EEXIST, "run id `%s` is in use by a live run (`%s.state` exists)",
		                          run->id, dir);
	/* run->dir names it only once this run made it: rb_run_close removes run->dir, and a
	 * directory that was there already is another run's with the same id. */
	if (mkdir(dir, 0711) < 0) {
		int e = errno;
		rb_lifecycle_unregister(run);
		return e == EEXIST ? rb_error_set(err, EEXIST, "run id `%s` is in use (`%s` exists)", run->id, dir)
		                   : rb_error_set(err, e, "mkdir `%s`", dir);
	}
	memcpy(run->dir, dir, sizeof dir);
	chmod(run->dir, 0711);

	spec->net_mode = cfg->net_mode >= 0 ? (enum rb_net_mode)cfg->net_mode : pol->net_mode;

	snprintf(spec->hostname, sizeof spec->hostname, "%s", pol->hostname[0] ? pol->hostname : "runbox");
	spec->rootfs = (struct rb_rootfs_spec){
	    .staging = run->dir,
	    .image = &run->image,
	    .rootfs_bytes = pol->rootfs_bytes,
	    .workspace_bytes = pol->workspace_bytes,
	    .tmp_bytes = pol->tmp_bytes,
	    .uid = pol->uid,
	    .gid = pol->gid,
	    .inputs = run->inputs,
	    .n_inputs = run->n_inputs,
	    .skills = run->skills,
	    .n_skills = run->n_skills,
	    .lower_fd = -1,
	};
	spec->idmap_image = !spec->ids.outer && !spec->ids.single && geteuid() == 0;
	struct rb_exec_spec *ex = &spec->exec;
	ex->uid = pol->uid;
	ex->gid = pol->gid;
	ex->caps = pol->caps;
	ex->bpf = &run->bpf;
	ex->setgroups_denied = spec->ids.single && (setgroups_denied_here() || spec->ids.outer);
	const struct {
		int res;
		uint64_t v;
	} rl[] = {{RLIMIT_NOFILE, pol->rlimit_nofile},
	          {RLIMIT_NPROC, pol->rlimit_nproc},
	          {RLIMIT_CORE, pol->rlimit_core},
	          {RLIMIT_FSIZE, pol->rlimit_fsize}};
	for (size_t i = 0; i < RB_ARRAY_SIZE(rl); i++)
		if (rl[i].v != UINT64_MAX)
			ex->rlimits[ex->n_rlimits++] = (struct rb_rlimit){rl[i].res, rl[i].v};
	return 0;
}

/* The run's state file, with the ledger's write-ahead (struct rb_run_ledger); rewritten only
 * when that changed since the last save. */
static int save_state(struct rb_run *run, struct rb_error *err)
{
	json_t *wa = run->ledger.write_ahead ? run->ledger.write_ahead(run->ledger.ctx) : NULL;
	if (run->state_saved && (wa == run->saved_write_ahead || json_equal(wa, run->saved_write_ahead))) {
		json_decref(wa);
		return 0;
	}
	json_decref(run->saved_write_ahead);
	run->saved_write_ahead = NULL;
	run->state_saved = false;
	if (rb_lifecycle_register(run, wa, err) < 0) {
		json_decref(wa);
		return -1;
	}
	run->saved_write_ahead = wa;
	run->state_saved = true;
	return 0;
}

int rb_run_keep_state(struct rb_run *run, struct rb_error *err)
{
	if (!run->state_saved)
		return rb_error_set(err, 0, "run %s has no state file", run->id);
	if (save_state(run, err) < 0)
		return -1;
	run->keep_state = true;
	return 0;
}

/* limits.require_enforced: a limit the run asked for that the host cannot enforce fails the
 * run before anything runs without it, naming the limit and why. */
static int check_enforced(const struct rb_run *run, struct rb_error *err)
{
	for (int k = 0; k < RB_LIMIT_COUNT; k++) {
		const struct rb_limit_status *ls = rb_cgroup_limit(run->cg, (enum rb_limit_kind)k);
		if (ls->requested && !ls->enforced)
			return rb_error_set(
			    err, 0,
			    "policy `%s` requires enforced limits (limits.require_enforced), and the %s "
			    "limit cannot be enforced here: %s",
			    run->policy.name, rb_limit_name((enum rb_limit_kind)k),
			    ls->reason[0] ? ls->reason : "no cgroup controller for it");
	}
	return 0;
}

/* The sandbox up to init's root build: the cgroup, the spawner (init is cloned and released),
 * the cgroup joined and the network ruled, the ledger opened, the run token, the state file.
 * init builds the root meanwhile; await_ready waits for it. */
static int begin(struct rb_run *run, struct rb_error *err)
{
	rb_debug("cgroup: create");
	if (rb_cgroup_create(run->id, NULL, &run->limits, &run->cg, err) < 0)
		return -1;
	run->state_saved = false; /* it names the cgroup now */
	if (save_state(run, err) < 0)
		return -1;
	if (run->policy.require_enforced && check_enforced(run, err) < 0)
		return -1;
	rb_debug("sandbox: create");
	if (rb_sandbox_create(run->factory, &run->spec, run->cg, &run->sb, err) < 0)
		return -1;
	run->started = true; /* from here on, stopping the run kills this sandbox */
	if (run->ledger.prepare)
		run->ledger.prepare(run->ledger.ctx);
	if (run->spec.net_mode == RB_NET_GATEWAY) {
		/* The token key enters this process's memory only now, and never the factory's:
		 * init is a copy of the factory (forked before any key), and every step is
		 * init's, so no copy of it ever exists in the sandbox. The token dies with
		 * the run: it expires at the run's deadline, and the endpoint that accepts it is
		 * stopped when the run ends. */
		uint8_t master[RB_TOKEN_KEY_LEN];
		size_t master_len = sizeof master;
		int r = rb_token_key_load_or_create(run->paths.state_dir, master, &master_len, err);
		/* The run's tokens, and its endpoint, use this instance's key only: a token of an
		 * earlier run with the same id is worthless here. */
		if (r == 0)
			r = rb_token_run_key(master, master_len, run->id, run->instance, run->token_key, err);
		explicit_bzero(master, sizeof master);
		if (r < 0)
			return -1;
		run->token_keylen = RB_TOKEN_KEY_LEN;
		int64_t expires =
		    (int64_t)time(NULL) + (int64_t)((run->timeout_ms ? run->timeout_ms : 86400000) / 1000) + 60;
		if (rb_token_issue(run->token_key, run->token_keylen, run->tenant, run->agent, run->id, run->instance,
		                   expires, run->token, sizeof run->token, err) < 0)
			return -1;
	}
	run->state_saved = false; /* and init */
	if (save_state(run, err) < 0)
		return -1;
	run->begun = true;
	return 0;
}

static int await_ready(struct rb_run *run, struct rb_error *err)
{
	if (rb_sandbox_wait_ready(&run->sb, RB_SANDBOX_READY_TIMEOUT_MS, err) < 0)
		return -1;
	rb_debug("sandbox: ready");
	run->ready = true;
	return 0;
}

/* One attempt per run: a failed start is remembered and reported again, never retried, so no
 * second cgroup or sandbox is made beside what the first left for rb_run_close. */
static int start_phase(struct rb_run *run, int (*phase)(struct rb_run *, struct rb_error *), struct rb_error *err)
{
	if (run->start_error[0])
		return rb_error_set(err, 0, "%s", run->start_error);
	if (phase(run, err) < 0) {
		snprintf(run->start_error, sizeof run->start_error, "%s", err->msg);
		return -1;
	}
	return 0;
}

int rb_run_start(struct rb_run *run, struct rb_error *err)
{
	if (!run->begun && start_phase(run, begin, err) < 0)
		return -1;
	if (!run->ready && start_phase(run, await_ready, err) < 0)
		return -1;
	return 0;
}

static void buf_append(struct rb_buf *b, const char *data, size_t n)
{
	if (b->len + n > b->limit) {
		b->truncated = true;
		n = b->limit > b->len ? b->limit - b->len : 0;
	}
	if (!n)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = (b->len + n + 1) * 2;
		if (cap > b->limit + 1)
			cap = b->limit + 1;
		char *d = realloc(b->data, cap);
		if (!d) {
			b->truncated = true;
			return;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, data, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* A step's scrubber, made when its first output byte comes: building one (the run token in
 * six encodings, the format rules) is ~1.4 ms and ~1.8 MiB that a step printing nothing, as
 * most do, never needs. given: the run's own (a manifest's), else one is made (own). */
struct step_scrub {
	struct rb_scrubber *given;
	struct rb_scrubber *own;
	const char *token;
};

/* Where a stream's bytes go besides the capped in-memory buffer: our own stdout/stderr
 * (passthrough) and a log file in the run directory, itself capped. A step's streams pass
 * their scrub stream first (made from the step's scrubber at the first byte), so the buffer,
 * the copy and the log only ever see scrubbed bytes, and the buffer's cap cuts scrubbed text;
 * a copy to a terminal shows control bytes instead of obeying them (tty). Background output
 * (drain_linger, no scrubber) goes only to its log. Once the buffer and the log are full and
 * nothing is copied, the rest of the stream is spliced to null_fd, unread and unscrubbed
 * (saturated): a step flooding its output costs the host no more than its caps. A copy whose
 * reader went away (EPIPE: `runbox run ... | head -1`) sets *closed: the step's stream is then
 * closed as the reader's was, so the step meets EPIPE or SIGPIPE as in a pipeline and the run
 * goes on to its end. */
struct sink {
	struct rb_buf *buf;
	int copy_to;
	int log;
	uint64_t *log_bytes;
	uint64_t log_cap;
	struct step_scrub *scrubber;
	struct rb_scrub_stream **scrub;
	struct rb_ttysafe *tty;
	int null_fd;              /* /dev/null, or -1: dropped bytes are then read and discarded */
	uint64_t *read, *dropped; /* counts, or NULL */
	bool *closed;             /* set when the copy's reader is gone, or NULL */
};

/* The reader gone (EPIPE) closes the copy; other failures drop what did not fit, the step's
 * output still goes to buf and log. */
static void copy_out(const struct sink *s, const char *p, size_t n)
{
	if (s->closed && *s->closed)
		return;
	if (rb_write_all(s->copy_to, p, n) < 0 && errno == EPIPE && s->closed)
		*s->closed = true;
}

static void emit(const struct sink *s, const char *data, size_t n)
{
	if (s->buf)
		buf_append(s->buf, data, n);
	if (s->copy_to >= 0 && s->tty) {
		_cleanup_free_ char *safe = malloc(RB_TTYSAFE_ROOM(n));
		if (safe)
			copy_out(s, safe, rb_ttysafe(s->tty, data, n, safe));
	} else if (s->copy_to >= 0) {
		copy_out(s, data, n);
	}
	if (s->log >= 0 && *s->log_bytes < s->log_cap) {
		size_t room = (size_t)(s->log_cap - *s->log_bytes);
		ssize_t w = write(s->log, data, n < room ? n : room);
		if (w > 0)
			*s->log_bytes += (uint64_t)w;
	}
}

static int scrub_stream_start(struct step_scrub *ss, struct rb_scrub_stream **stream, struct rb_error *err)
{
	if (!ss->given && !ss->own) {
		struct rb_scrub_secret secret = {"run-token", ss->token, strlen(ss->token)};
		if (rb_scrub_new_labeled(&secret, ss->token[0] ? 1 : 0, &ss->own, err) < 0)
			return -1;
	}
	return rb_scrub_stream_new(ss->given ? ss->given : ss->own, stream, err);
}

/* Passes a chunk (NULL: the stream's end) through the scrubber to the sink. When the scrubber
 * fails (out of memory), nothing of the chunk leaves, and the buffer says it lost bytes. */
static void scrub_emit(const struct sink *s, const char *chunk, size_t n)
{
	if (!s->scrubber) {
		if (chunk)
			emit(s, chunk, n);
		return;
	}
	struct rb_buf_out o;
	struct rb_error err;
	int r = 0;
	if (!*s->scrub && !chunk)
		return; /* nothing came, nothing is held */
	if (!*s->scrub)
		r = scrub_stream_start(s->scrubber, s->scrub, &err);
	if (r == 0)
		r = chunk ? rb_scrub_stream_feed(*s->scrub, chunk, n, &o, &err)
		          : rb_scrub_stream_finish(*s->scrub, &o, &err);
	if (r < 0) {
		rb_warn("step output: %s: bytes are missing from it", err.msg);
		if (s->buf)
			s->buf->truncated = true;
		return;
	}
	if (o.len)
		emit(s, o.data, o.len);
	free(o.data);
}

/* Nothing more of the stream can reach anyone: the buffer is full (or absent), the log too,
 * and no copy goes out. */
static bool saturated(const struct sink *s)
{
	return s->copy_to < 0 && (!s->buf || s->buf->truncated) && (s->log < 0 || *s->log_bytes >= s->log_cap);
}

static void count(uint64_t *c, ssize_t n)
{
	if (c)
		*c += (uint64_t)n;
}

/* Empties what is there now without bringing it into the runner, so the writer never blocks
 * on a full pipe (a step that prints much and exits still exits). Returns as pump does. */
static bool drop(int fd, const struct sink *s)
{
	char chunk[4096];
	for (;;) {
		ssize_t n = -1;
		if (s->null_fd >= 0)
			n = splice(fd, NULL, s->null_fd, NULL, 1 << 20, SPLICE_F_NONBLOCK);
		if (s->null_fd < 0 || (n < 0 && errno == EINVAL)) /* no splice to /dev/null here */
			n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno == EAGAIN;
		count(s->dropped, n);
	}
}

/* Reads what is there now; returns false at EOF or error, and once the copy's reader is gone. */
static bool pump(int fd, const struct sink *s)
{
	char chunk[16384];
	for (;;) {
		if (s->closed && *s->closed)
			return false;
		if (saturated(s))
			return drop(fd, s);
		ssize_t n = read(fd, chunk, sizeof chunk);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 && errno == EAGAIN;
		count(s->read, n);
		scrub_emit(s, chunk, (size_t)n);
	}
}

/* The step ended: what the scrubber held back, and a lead byte the terminal copy held. */
static void finish(const struct sink *s)
{
	scrub_emit(s, NULL, 0);
	char tail[8];
	if (s->copy_to >= 0 && s->tty)
		copy_out(s, tail, rb_ttysafe_end(s->tty, tail));
}

static int open_log(const struct rb_run *run, const char *name)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", run->dir, name);
	return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
}

/* Drains the pipes that finished steps left to their background processes. */
static void drain_linger(struct rb_run *run, bool close_all)
{
	if (!run->n_linger)
		return;
	if (run->bg_log < 0)
		run->bg_log = open_log(run, "background.log");
	_cleanup_close_ int null_fd = run->bg_log_bytes >= RB_BG_LOG_CAP ? open("/dev/null", O_WRONLY | O_CLOEXEC) : -1;
	struct sink s = {.copy_to = -1,
	                 .log = run->bg_log,
	                 .log_bytes = &run->bg_log_bytes,
	                 .log_cap = RB_BG_LOG_CAP,
	                 .null_fd = null_fd};
	unsigned kept = 0;
	for (unsigned i = 0; i < run->n_linger; i++) {
		if (pump(run->linger[i], &s) && !close_all)
			run->linger[kept++] = run->linger[i];
		else
			close(run->linger[i]);
	}
	run->n_linger = kept;
}

static void linger(struct rb_run *run, int fd)
{
	if (run->n_linger == RB_MAX_LINGER) {
		close(run->linger[0]);
		memmove(run->linger, run->linger + 1, (RB_MAX_LINGER - 1) * sizeof *run->linger);
		run->n_linger--;
	}
	run->linger[run->n_linger++] = fd;
}

/* The environment a step gets: the policy's passed names and fixed values, and in gateway
 * mode the endpoint's URL and the run token; nothing else from the host. */
static json_t *step_env(const struct rb_run *run)
{
	const struct rb_policy *pol = &run->policy;
	json_t *env = json_array();
	if (run->token[0]) {
		char url[64], kv[RB_TOKEN_MAX + 32];
		rb_net_api_url(&run->sb.net, url, sizeof url);
		snprintf(kv, sizeof kv, "RUNBOX_API_URL=%s", url);
		json_array_append_new(env, json_string(kv));
		snprintf(kv, sizeof kv, "RUNBOX_TOKEN=%s", run->token);
		json_array_append_new(env, json_string(kv));
	}
	for (unsigned i = 0; i < pol->n_env_set; i++)
		json_array_append_new(env, json_string(pol->env_set[i]));
	for (unsigned i = 0; i < pol->n_env_pass; i++) {
		const char *v = getenv(pol->env_pass[i]);
		if (!v)
			continue;
		char *kv = NULL;
		if (asprintf(&kv, "%s=%s", pol->env_pass[i], v) < 0)
			continue;
		json_t *s = json_string(kv);
		free(kv);
		if (s)
			json_array_append_new(env, s);
	}
	return env;
}

static void fill_from_status(struct rb_step_result *res, int status)
{
	if (WIFEXITED(status)) {
		res->status = RB_STEP_EXITED;
		res->exit_code = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		res->status = RB_STEP_SIGNALED;
		res->signal = WTERMSIG(status);
		res->seccomp_killed = res->signal == SIGSYS;
	}
}

/* Kills the whole sandbox. SIGKILL to init takes its pid namespace with it, and the kernel
 * has killed and reaped every process in it by the time init is reaped; the cgroup kill that
 * follows is the second line (and costs nothing when the cgroup is already empty, which on
 * v1 spares a freeze-thaw cycle on every run). */
static void kill_sandbox(struct rb_run *run)
{
	struct rb_error err;
	rb_sandbox_destroy(&run->sb);
	if (run->cg && rb_cgroup_kill(run->cg, &err) < 0)
		rb_warn("%s", err.msg);
}

/* The gateway could not start, or died: its listeners close, so the sandbox's calls are
 * refused at once instead of hanging until the step's deadline. Said once: on stderr, and in
 * the result's gateway.error. */
static void gateway_down(struct rb_run *run, const struct rb_error *why)
{
	run->gw.failed = true;
	snprintf(run->gw.error, sizeof run->gw.error, "%s", why->msg);
	rb_net_close_gateway(&run->sb.net);
	rb_warn("%s; the run's gateway calls are refused from now on", why->msg);
}

int rb_run_step(struct rb_run *run, char *const argv[], bool passthrough, struct rb_step_result *res,
                struct rb_error *err)
{
	struct rb_step_req req = {.argv = argv, .passthrough = passthrough};
	return rb_run_exec(run, &req, res, err);
}

static void free_step_scrub(struct step_scrub *s)
{
	rb_scrub_free(s->own);
}

static void free_stream(struct rb_scrub_stream **s)
{
	rb_scrub_stream_free(*s);
}

/* A memfd holding a file the step gets, sealed against every change (writes, growing,
 * shrinking, and new seals or their removal) before it leaves the runner: the step reads the
 * bytes the ledger recorded, and nothing in the sandbox can alter them. */
static int file_fd(const struct rb_step_file *f, struct rb_error *err)
{
	char name[64];
	snprintf(name, sizeof name, "runbox-%s", f->name);
	/* Not executable where the kernel can say so (6.3+): a script is run by the shell. */
	return rb_sealed_memfd(name, f->data, f->len, err);
}

/* Passes a cancel to the step through init. */
static void send_signal(struct rb_run *run, int sig)
{
	json_t *m = json_pack("{s:s, s:i}", "op", "signal", "sig", sig);
	struct rb_error serr;
	rb_chan_send(run->sb.ctl, m, NULL, 0, &serr);
	json_decref(m);
}

/* init's answer to an exec request that is not `started`: why the step could not start. */
static void not_started(struct rb_step_result *res, json_t *ev)
{
	bool is_exec = json_is_true(json_object_get(ev, "is_exec"));
	res->status = is_exec ? RB_STEP_EXEC_FAILED : RB_STEP_SETUP_FAILED;
	res->exec_errno = (int)json_integer_value(json_object_get(ev, "errno"));
	const char *m = json_string_value(json_object_get(ev, "message"));
	snprintf(res->error, sizeof res->error, "%s%s%s", m ? m : "step did not start", res->exec_errno ? ": " : "",
	         res->exec_errno ? strerror(res->exec_errno) : "");
}

static uint64_t tv_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* The runner's own CPU since ru0: every thread of it (the ledger's commit, the scrub). */
static void host_cpu(const struct rusage *ru0, struct rb_host_cost *h)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return;
	h->cpu_user_us = tv_us(&ru.ru_utime) - tv_us(&ru0->ru_utime);
	h->cpu_sys_us = tv_us(&ru.ru_stime) - tv_us(&ru0->ru_stime);
}

static int setup_failed(struct rb_step_result *res, const char *why, uint64_t t0)
{
	res->status = RB_STEP_SETUP_FAILED;
	snprintf(res->error, sizeof res->error, "%s", why);
	res->wall_us = rb_now_us() - t0;
	return 0;
}

int rb_run_exec(struct rb_run *run, const struct rb_step_req *req, struct rb_step_result *res, struct rb_error *err)
{
	char *const *argv = req->argv;
	bool passthrough = req->passthrough;
	uint64_t timeout_ms = req->timeout_ms ? req->timeout_ms : run->timeout_ms;
	memset(res, 0, sizeof *res);
	res->out.limit = run->policy.max_stdout ? run->policy.max_stdout : 1 << 20;
	res->err.limit = run->policy.max_stderr ? run->policy.max_stderr : 1 << 20;
	uint64_t t0 = rb_now_us();
	struct rusage ru0;
	getrusage(RUSAGE_SELF, &ru0);
	/* A run's first step is requested while init still builds the root: the request waits
	 * in the control socket, which init reads only once it said `ready`, and the runner
	 * sends it only after the cgroup is joined and the network ruled (begin). */
	if (!run->begun && start_phase(run, begin, err) < 0)
		return setup_failed(res, err->msg, t0);
	if (run->sb.reaped)
		return rb_error_set(err, 0, "the sandbox is gone");
	/* The step's streams are scrubbed as they come, with the run token known (it exists now);
	 * the scrubber and its streams are made at the first byte (struct step_scrub). */
	__attribute__((cleanup(free_step_scrub))) struct step_scrub scrubber = {req->scrubber, NULL, run->token};
	__attribute__((cleanup(free_stream))) struct rb_scrub_stream *out_scrub = NULL;
	__attribute__((cleanup(free_stream))) struct rb_scrub_stream *err_scrub = NULL;
	struct rb_ttysafe out_tty = {0}, err_tty = {0};

	int out[2], errp[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		return rb_error_set(err, errno, "pipe");
	if (pipe2(errp, O_CLOEXEC) < 0) {
		close(out[0]), close(out[1]);
		return rb_error_set(err, errno, "pipe");
	}
	_cleanup_close_ int out_r = out[0];
	_cleanup_close_ int err_r = errp[0];
	unsigned step_no = ++run->steps_run;
	char logname[64];
	snprintf(logname, sizeof logname, "step-%u.stdout", step_no);
	_cleanup_close_ int out_log = open_log(run, logname);
	snprintf(logname, sizeof logname, "step-%u.stderr", step_no);
	_cleanup_close_ int err_log = open_log(run, logname);
	fcntl(out_r, F_SETFL, O_NONBLOCK);
	fcntl(err_r, F_SETFL, O_NONBLOCK);

	size_t bad = 0;
	json_t *args = rb_json_strv(argv, &bad);
	json_t *env = step_env(run);
	int r = 0;
	if (!args)
		r = rb_error_set(err, EINVAL, "argv[%zu] of the command is not valid UTF-8", bad);
	for (char *const *e = req->env; r == 0 && e && *e; e++) {
		json_t *s = json_string(*e);
		if (!s || json_array_append_new(env, s) < 0)
			r = rb_error_set(err, EINVAL, "environment entry %zu is not valid UTF-8",
			                 (size_t)(e - req->env));
	}
	json_t *files = json_array();
	int fds[RB_CHAN_MAX_FDS] = {out[1], errp[1]};
	unsigned n_fds = 2;
	_Static_assert(2 + RB_STEP_MAX_FILES + 1 + 1 <= RB_CHAN_MAX_FDS,
	               "stdout, stderr, files, cgroup and a long request's body in one message");
	if (req->n_files > RB_STEP_MAX_FILES)
		r = rb_error_set(err, E2BIG, "at most %d files per step", RB_STEP_MAX_FILES);
	for (unsigned i = 0; r == 0 && i < req->n_files; i++) {
		int fd = file_fd(&req->files[i], err);
		if (fd < 0) {
			r = -1;
			break;
		}
		fds[n_fds++] = fd;
		json_array_append_new(files, json_pack("{s:s}", "name", req->files[i].name));
	}
	/* Last: the step's own cgroup, which its process joins before anything else. */
	bool step_cgroup = false;
	if (r == 0 && run->cg) {
		struct rb_error cerr;
		int cgfd = rb_cgroup_step_procs(run->cg, step_no, &cerr);
		if (cgfd >= 0) {
			fds[n_fds++] = cgfd;
			step_cgroup = true;
		} else if (cerr.errnum) {
			rb_warn("step %u runs in the run's cgroup: %s", step_no, cerr.msg);
		}
	}
	json_t *msg = json_pack("{s:s, s:o, s:o, s:s, s:o, s:b}", "op", "exec", "argv", args, "env", env, "cwd",
	                        "/workspace", "files", files, "cgroup", step_cgroup);
	if (r == 0)
		r = save_state(run, err); /* what is about to run, written ahead of the ledger */
	_cleanup_close_ int tfd = r == 0 ? timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC) : -1;
	if (r == 0 && tfd < 0)
		r = rb_error_set(err, errno, "timerfd_create");
	/* Sent even while init still builds the root: it cannot block there (the one queued
	 * message, at most RB_CHAN_MAX_MSG, fits in the socket's buffer), so the wait for
	 * `ready` below keeps its limit. */
	if (r == 0)
		r = rb_chan_send(run->sb.ctl, msg, fds, n_fds, err);
	json_decref(msg);
	for (unsigned i = 0; i < n_fds; i++)
		close(fds[i]);
	/* The first step's request went while init built the root: its `ready` comes first. A
	 * setup that failed ended init, and the request may have met the closed socket: init's
	 * word on why answers for both. */
	struct rb_error serr;
	if (!run->ready && start_phase(run, await_ready, &serr) < 0)
		return setup_failed(res, serr.msg, t0);
	if (r < 0)
		return -1;
	/* The deadline counts from here (the sandbox ready, the request sent), the ledger's
	 * commit and init's `started` included: nothing the sandbox does can make the runner
	 * wait past it. */
	if (timeout_ms) {
		struct itimerspec its = {.it_value = {.tv_sec = (time_t)(timeout_ms / 1000),
		                                      .tv_nsec = (long)(timeout_ms % 1000) * 1000000L}};
		if (timerfd_settime(tfd, 0, &its, NULL) < 0) {
			kill_sandbox(run); /* no step runs without its deadline */
			return rb_error_set(err, errno, "timerfd_settime");
		}
	}

	rb_debug("step %u: exec sent", step_no);
	if (run->ledger.commit && run->ledger.commit(run->ledger.ctx, err) < 0) {
		kill_sandbox(run); /* a step the ledger cannot record does not go on */
		return -1;
	}
	sigset_t mask, old;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, &old);
	_cleanup_close_ int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	/* init answers the request with `started` or why the step could not start; until then
	 * the step's deadline, a cancel and init's death are watched as during the step. */
	bool started = false;
	bool out_open = true, err_open = true, done = false;
	int cancel_sig = 0;
	_cleanup_close_ int null_fd = passthrough ? -1 : open("/dev/null", O_WRONLY | O_CLOEXEC);
	bool out_closed = false, err_closed = false;
	const struct sink out_sink = {.buf = &res->out,
	                              .copy_to = passthrough ? STDOUT_FILENO : -1,
	                              .log = out_log,
	                              .log_bytes = &run->step_log_bytes,
	                              .log_cap = RB_STEP_LOG_CAP,
	                              .scrubber = &scrubber,
	                              .scrub = &out_scrub,
	                              .tty = passthrough && isatty(STDOUT_FILENO) ? &out_tty : NULL,
	                              .null_fd = null_fd,
	                              .read = &res->host.stdout_read,
	                              .dropped = &res->host.stdout_dropped,
	                              .closed = &out_closed};
	const struct sink err_sink = {.buf = &res->err,
	                              .copy_to = passthrough ? STDERR_FILENO : -1,
	                              .log = err_log,
	                              .log_bytes = &run->step_log_bytes,
	                              .log_cap = RB_STEP_LOG_CAP,
	                              .scrubber = &scrubber,
	                              .scrub = &err_scrub,
	                              .tty = passthrough && isatty(STDERR_FILENO) ? &err_tty : NULL,
	                              .null_fd = null_fd,
	                              .read = &res->host.stderr_read,
	                              .dropped = &res->host.stderr_dropped,
	                              .closed = &err_closed};
	while (!done) {
		/* Until the gateway runs, its listeners are watched here: the first connection
		 * starts it (the connection waits in the backlog meanwhile). */
		bool watch_gw = run->token[0] && run->gw.pid == 0 && !run->gw.failed;
		struct pollfd p[10] = {
		    {.fd = run->sb.ctl, .events = POLLIN},
		    {.fd = out_open ? out_r : -1, .events = POLLIN},
		    {.fd = err_open ? err_r : -1, .events = POLLIN},
		    {.fd = tfd, .events = POLLIN},
		    {.fd = sfd, .events = POLLIN},
		    {.fd = run->sb.pidfd, .events = POLLIN},
		    {.fd = watch_gw ? run->sb.net.listen_fd4 : -1, .events = POLLIN},
		    {.fd = watch_gw ? run->sb.net.listen_fd6 : -1, .events = POLLIN},
		    {.fd = run->n_linger ? run->linger[0] : -1, .events = POLLIN},
		    {.fd = rb_gwproc_watch_fd(&run->gw), .events = POLLIN},
		};
		if (poll(p, 10, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if ((p[6].revents | p[7].revents) & POLLIN) {
			int lfds[2];
			unsigned n = 0;
			if (run->sb.net.listen_fd4 >= 0)
				lfds[n++] = run->sb.net.listen_fd4;
			if (run->sb.net.listen_fd6 >= 0)
				lfds[n++] = run->sb.net.listen_fd6;
			struct rb_error gerr;
			if (rb_gwproc_start(&run->gw, lfds, n, run->id, run->token_key, run->token_keylen, &gerr) < 0)
				gateway_down(run, &gerr);
		}
		if (p[9].revents & POLLIN) {
			struct rb_error gerr;
			rb_gwproc_reap(&run->gw, &gerr);
			gateway_down(run, &gerr);
		}
		if (p[1].revents)
			out_open = pump(out_r, &out_sink);
		if (p[2].revents)
			err_open = pump(err_r, &err_sink);
		/* Our reader closed its end: the step's is closed too, so it is not left blocked
		 * on a full pipe nobody reads. */
		if (out_closed && out_r >= 0)
			close(rb_steal_fd(&out_r));
		if (err_closed && err_r >= 0)
			close(rb_steal_fd(&err_r));
		if (p[8].revents)
			drain_linger(run, false);
		if (p[3].revents & POLLIN) {
			if (!cancel_sig)
				res->status = RB_STEP_TIMEOUT;
			kill_sandbox(run);
			break;
		}
		if (p[4].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				/* First SIGINT/SIGTERM: passed to the step through init, with a grace
				 * period to clean up; a second one, or the grace running out, kills. */
				if (cancel_sig) {
					kill_sandbox(run);
					break;
				}
				cancel_sig = (int)si.ssi_signo;
				if (started)
					send_signal(run, cancel_sig);
				struct itimerspec grace = {.it_value = {.tv_sec = RB_CANCEL_GRACE_S}};
				if (tfd >= 0)
					timerfd_settime(tfd, 0, &grace, NULL);
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			json_t *m = NULL;
			if (rb_chan_recv(run->sb.ctl, &m, NULL, NULL, err) <= 0) {
				res->status = RB_STEP_SETUP_FAILED;
				snprintf(res->error, sizeof res->error, "%s",
				         started ? "the sandbox's init died during the step"
				                 : "the sandbox's init ended before the step started");
				kill_sandbox(run);
				break;
			}
			const char *e = json_string_value(json_object_get(m, "ev"));
			if (!started && e && !strcmp(e, "started")) {
				started = true;
				rb_debug("step %u: started", step_no);
				if (cancel_sig) /* the cancel came before the step's process existed */
					send_signal(run, cancel_sig);
			} else if (!started) {
				not_started(res, m);
				done = true;
			} else if (e && !strcmp(e, "exited")) {
				fill_from_status(res, (int)json_integer_value(json_object_get(m, "status")));
				res->user_us = (uint64_t)json_integer_value(json_object_get(m, "utime_us"));
				res->sys_us = (uint64_t)json_integer_value(json_object_get(m, "stime_us"));
				res->maxrss_kb = (uint64_t)json_integer_value(json_object_get(m, "maxrss_kb"));
				done = true;
			}
			json_decref(m);
		} else if (p[5].revents & POLLIN) {
			res->status = RB_STEP_SETUP_FAILED;
			snprintf(res->error, sizeof res->error, "%s",
			         started ? "the sandbox's init died during the step"
			                 : "the sandbox's init ended before the step started");
			kill_sandbox(run);
			break;
		}
	}
	/* What the main process wrote before it exited is in the pipes now; a background process
	 * that still holds them open does not hold the step open. */
	if (cancel_sig) {
		res->status = RB_STEP_CANCELLED;
		res->signal = cancel_sig;
	}
	if (out_open)
		out_open = pump(out_r, &out_sink);
	if (err_open)
		err_open = pump(err_r, &err_sink);
	/* The step is over: what the scrubber held back comes out now. Later output of what it
	 * left running goes to background.log only. */
	finish(&out_sink);
	finish(&err_sink);
	/* A server the step left running keeps its stdout: the pipes stay open, drained into
	 * background.log, until the run ends. */
	if (!run->sb.reaped) {
		if (out_open)
			linger(run, rb_steal_fd(&out_r));
		if (err_open)
			linger(run, rb_steal_fd(&err_r));
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	res->wall_us = rb_now_us() - t0;
	host_cpu(&ru0, &res->host);
	rb_debug("step %u: ended", step_no);
	if (run->sb.net.nft_fd >= 0) {
		struct rb_net_counters c;
		struct rb_error nerr;
		if (rb_net_read_counters(&run->sb.net, &c, &nerr) == 0)
			res->egress = rb_net_counters_json(&c);
		else
			rb_warn("%s", nerr.msg);
	}
	if (run->cg) {
		rb_cgroup_stats(run->cg, &res->cgroup);
		/* The OOM killer killed something during this step: the step's process itself, or
		 * one it waited for (a shell then exits 137 itself). The count is the run's. */
		bool oom = res->cgroup.have_oom && res->cgroup.oom_kills > run->oom_kills_seen;
		if (res->cgroup.have_oom)
			run->oom_kills_seen = res->cgroup.oom_kills;
		/* Where the run's cgroup itself has memory.oom.group (v2 without step leaves), the
		 * OOM killer takes init too: the step still died of the OOM kill, not of runbox. */
		if (started && res->status == RB_STEP_SETUP_FAILED && oom) {
			res->status = RB_STEP_SIGNALED;
			res->signal = SIGKILL;
			res->error[0] = '\0';
		}
		res->oom_killed = oom;
	}
	return 0;
}

void rb_run_stop(struct rb_run *run)
{
	rb_debug("run: stop");
	if (run->started)
		rb_sandbox_kill(&run->sb);
	rb_gwproc_stop(&run->gw);
	drain_linger(run, true);
	if (run->bg_log >= 0)
		close(run->bg_log);
	run->bg_log = -1;
}

void rb_run_close(struct rb_run *run)
{
	struct rb_error err;
	bool own_dir = run->dir[0] != '\0'; /* made after the claim: the state file is ours */
	rb_run_stop(run);
	if (run->started)
		kill_sandbox(run); /* reaps init, and empties the cgroup of anything that got out */
	if (run->id_slice_fd >= 0) /* nothing of the sandbox's runs as the slice's ids now */
		close(run->id_slice_fd);
	run->id_slice_fd = -1;
	rb_debug("run: sandbox gone");
	json_decref(run->gw.stats);
	run->gw.stats = NULL;
	memset(run->token_key, 0, sizeof run->token_key);
	if (run->cg) {
		if (rb_cgroup_destroy(run->cg, &err) < 0) {
			rb_warn("%s (its state file stays: `runbox gc` removes it later)", err.msg);
			run->keep_state = true;
		}
		run->cg = NULL;
	}
	for (unsigned i = 0; i < run->n_inputs; i++)
		if (run->inputs[i].fd >= 0)
			close(run->inputs[i].fd);
	for (unsigned i = 0; i < run->n_skills; i++)
		if (run->skills[i].fd >= 0)
			close(run->skills[i].fd);
	run->n_inputs = run->n_skills = 0;
	free(run->inputs);
	free(run->skills);
	run->inputs = run->skills = NULL;
	json_decref(run->saved_write_ahead);
	run->saved_write_ahead = NULL;
	if (run->dir[0]) {
		/* Mounts live only in the sandbox's namespace, which is gone: this is a plain dir. */
		if (rmdir(run->dir) < 0 && errno != ENOENT && rb_rm_rf(run->dir, &err) < 0) {
			rb_warn("%s", err.msg);
			run->keep_state = true; /* gc finds what is left through it */
		}
		run->dir[0] = '\0';
	}
	/* Last: until everything above is gone, the state file is how gc would find it. */
	if (own_dir && !run->keep_state)
		rb_lifecycle_unregister(run);
	rb_seccomp_free(&run->bpf);
	rb_policy_free(&run->policy);
	run->started = false;
}

int rb_step_exit_code(const struct rb_step_result *res)
{
	switch (res->status) {
	case RB_STEP_EXITED: return res->exit_code;
	case RB_STEP_SIGNALED: return 128 + res->signal;
	case RB_STEP_TIMEOUT: return 124;
	case RB_STEP_CANCELLED: return 128 + res->signal;
	case RB_STEP_EXEC_FAILED: return res->exec_errno == ENOENT ? 127 : 126;
	case RB_STEP_SETUP_FAILED: break;
	}
	return 125;
}

void rb_step_result_free(struct rb_step_result *res)
{
	free(res->out.data);
	free(res->err.data);
	res->out.data = res->err.data = NULL;
	json_decref(res->egress);
	res->egress = NULL;
}

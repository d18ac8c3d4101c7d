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
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/never_input.h"
#include "common/util.h"
#include "runtime/sandbox/channel.h"
#include "runtime/sandbox/idslice.h"
#include "runtime/run/control.h"
#include "runtime/run/lifecycle.h"
#include "runtime/run/session-internal.h"
#include "scrub/scrub.h"

/* One check for every host path bound in, inputs and skill bundles alike (what names which). */
static int check_input(const struct rb_policy *pol, const struct rb_paths *paths, const struct rb_input *in,
                       const char *what, struct rb_error *err)
{
	if (rb_never_input_check(paths, in->host, in->is_dir, what, err) < 0)
		return -1;
	for (unsigned i = 0; i < pol->n_input_allow; i++)
		if (rb_path_under(in->host, pol->input_allow[i]))
			return 0;
	return rb_error_setk(err, RB_ERR_FORBIDDEN, 0, "%s `%s`: policy `%s` allows no input there", what, in->host,
	                     pol->name);
}

/* Two inputs on one place (or one inside the other) would stack a bind on a read-only bind:
 * said here, naming both, rather than as the mount's EACCES inside the sandbox. ins[n] is
 * checked against ins[0..n); tree is where they go (/workspace/in, /workspace/skills). */
static int check_dests(const struct rb_input *ins, unsigned n, const char *const *what, const char *tree,
                       struct rb_error *err)
{
	/* A cow input's dest is relative to /workspace (mounts.h): all are compared as full paths. */
	char bp[PATH_MAX + 32], ap[PATH_MAX + 32];
	snprintf(bp, sizeof bp, "%s/%s", ins[n].cow ? "/workspace" : tree, ins[n].dest);
	for (unsigned i = 0; i < n; i++) {
		snprintf(ap, sizeof ap, "%s/%s", ins[i].cow ? "/workspace" : tree, ins[i].dest);
		if (!strcmp(ap, bp))
			return rb_error_set(err, 0, "%s and %s: both go to %s", what[i], what[n], ap);
		if (rb_path_under(ap, bp) || rb_path_under(bp, ap))
			return rb_error_set(err, 0, "%s and %s: %s and %s: one lies inside the other", what[i], what[n],
			                    ap, bp);
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

/* One input, opened and checked: never-inputs, the policy's inputs.allow, and no two on one
 * place. *what names it. */
static int open_input(const struct rb_run_config *cfg, struct rb_run *run, unsigned i, char **what,
                      struct rb_error *err)
{
	if (!(*what = strdup(cfg->input_reqs[i].what)))
		return rb_error_set(err, ENOMEM, "run");
	return rb_input_open(&cfg->input_reqs[i], &run->inputs[i], err);
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

static bool in_map(const struct rb_idmap *m, uint32_t id)
{
	for (unsigned i = 0; i < m->n; i++)
		if (id >= m->lines[i].outside && id - m->lines[i].outside < m->lines[i].count)
			return true;
	return false;
}

bool rb_run_ids_in_sandbox(const struct rb_run *run, uid_t uid, gid_t gid)
{
	return !run->spec.ids.outer && in_map(&run->spec.ids.uid, uid) && in_map(&run->spec.ids.gid, gid);
}

static bool setgroups_denied_here(void)
{
	char *text = NULL;
	bool deny = rb_read_file("/proc/self/setgroups", 64, &text, NULL, NULL) == 0 && !strncmp(text, "deny", 4);
	free(text);
	return deny;
}

int rb_run_save_state(struct rb_run *run, struct rb_error *err);

/* A recipe build's tree as the run's image: runbox's own (idmapped, so its root's files are the
 * sandbox root's), checked by device and inode when mounted, with no digest yet (the build
 * computes it once the commands are done). */
static int build_root(const char *tree, struct rb_image *out, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	struct stat st;
	if (lstat(tree, &st) < 0 || !S_ISDIR(st.st_mode))
		return rb_error_set(err, errno ? errno : ENOTDIR, "image build: the tree `%s`", tree);
	if (snprintf(out->rootfs, sizeof out->rootfs, "%s", tree) >= (int)sizeof out->rootfs)
		return rb_error_set(err, ENAMETOOLONG, "image build: the tree `%s`", tree);
	snprintf(out->name, sizeof out->name, "build");
	snprintf(out->digest, sizeof out->digest, "unbuilt");
	out->dev = st.st_dev;
	out->ino = st.st_ino;
	out->owned_by_runbox = true;
	return 0;
}

int rb_run_open(const struct rb_run_config *cfg, struct rb_run *run, struct rb_error *err)
{
	memset(run, 0, sizeof *run);
	run->sb.reaped = true;
	run->sb.pidfd = run->sb.ctl = run->sb.userns_fd = run->sb.workspace_fd = run->sb.root_fd = -1;
	run->sb.net = (struct rb_net)RB_NET_INIT;

	run->bg_log = -1;
	run->id_slice_fd = -1;
	run->cancel_fd = cfg->cancel_fd > 0 ? cfg->cancel_fd : -1;
	run->factory = cfg->factory;
	if (cfg->run_id)
		snprintf(run->id, sizeof run->id, "%s", cfg->run_id);
	else
		rb_new_run_id(run->id);
	if (rb_random_hex(run->instance, sizeof run->instance) < 0)
		return rb_error_set(err, errno, "getrandom: run nonce");
	rb_debug("run: open");
	if (rb_paths_init(&run->paths, cfg->host, cfg->state_dir, err) < 0)
		return -1;
	/* Before the seccomp cache would make it 0700 as its parent. */
	if (rb_state_dir_make(run->paths.state_dir, err) < 0)
		return -1;
	if (rb_policy_load(cfg->policy ? cfg->policy : "default", run->paths.data_dir, run->paths.config_dir,
	                   &run->policy, err) < 0)
		return -1;
	struct rb_policy *pol = &run->policy;
	if (cfg->build_root
	        ? build_root(cfg->build_root, &run->image, err) < 0
	        : rb_image_resolve(cfg->image ? cfg->image : "host", pol, &run->paths, &run->image, err) < 0)
		return -1;

	if (check_requested(cfg, pol, err) < 0)
		return -1;
	if (cfg->gateway_config && snprintf(run->gateway_config, sizeof run->gateway_config, "%s",
	                                    cfg->gateway_config) >= (int)sizeof run->gateway_config)
		return rb_error_set(err, ENAMETOOLONG, "--gateway-config `%s`", cfg->gateway_config);
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
	/* An unbound run (a pool member) has no owner yet: its state file names none, and a gc
	 * of it records an abandoned run of nobody. */
	run->unbound = cfg->unbound;
	snprintf(run->tenant, sizeof run->tenant, "%s", cfg->unbound ? "" : cfg->tenant ? cfg->tenant : "local");
	snprintf(run->agent, sizeof run->agent, "%s", cfg->unbound ? "" : cfg->agent ? cfg->agent : "cli");
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
	spec->rootfs.writable_image = cfg->build_root != NULL;
	if (cfg->build_root && !spec->idmap_image)
		return rb_error_set(err, ENOTSUP,
		                    "a recipe's commands run on the build's tree through an idmapped mount, "
		                    "which needs root and subordinate ids (policy `%s` gives this run %s)",
		                    pol->name, spec->ids.outer ? "no root" : "a single id");
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
int rb_run_save_state(struct rb_run *run, struct rb_error *err)
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
	if (rb_run_save_state(run, err) < 0)
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

/* The run token (gateway mode) for run->tenant and run->agent, and the gateway's grants. */
static int issue_token(struct rb_run *run, struct rb_error *err)
{
	if (run->spec.net_mode != RB_NET_GATEWAY)
		return 0;
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
	int64_t expires = (int64_t)time(NULL) + (int64_t)((run->timeout_ms ? run->timeout_ms : 86400000) / 1000) + 60;
	if (rb_token_issue(run->token_key, run->token_keylen, run->tenant, run->agent, run->id, run->instance, expires,
	                   run->token, sizeof run->token, err) < 0)
		return -1;
	run->gw.conf_path = run->gateway_config[0] ? run->gateway_config : NULL;
	run->gw.host = run->paths.host; /* where its binary is found (RUNBOX_DATA_DIR) */
	run->gw.grants = run->policy.connectors;
	run->gw.n_grants = run->policy.n_connectors;
	run->gw.proxy = run->policy.proxy;
	run->gw.n_proxy = run->policy.n_proxy;
	run->gw.mcp = run->policy.mcp;
	run->gw.n_mcp = run->policy.n_mcp;
	run->gw.approvals = run->policy.approvals;
	run->gw.n_approvals = run->policy.n_approvals;
	run->gw.run_dir = run->dir;
	return 0;
}

/* The sandbox up to init's root build: the cgroup, the spawner (init is cloned and released),
 * the cgroup joined and the network ruled, the ledger opened, the run token, the state file.
 * init builds the root meanwhile; await_ready waits for it. */
static int begin(struct rb_run *run, struct rb_error *err)
{
	/* `runbox kill` asks the owner through it (its state file names it from the next save). */
	if (rb_control_open(run->paths.run_dir, run->id, &run->control, err) < 0)
		return -1;
	rb_debug("cgroup: create");
	if (rb_cgroup_create(run->id, rb_host_getenv(run->paths.host, RB_CGROUP_PARENT_VAR), &run->limits, &run->cg,
	                     err) < 0)
		return -1;
	run->state_saved = false; /* it names the cgroup now */
	if (rb_run_save_state(run, err) < 0)
		return -1;
	if (run->policy.require_enforced && check_enforced(run, err) < 0)
		return -1;
	rb_debug("sandbox: create");
	if (rb_sandbox_create(run->factory, &run->spec, run->cg, &run->sb, err) < 0)
		return -1;
	run->started = true; /* from here on, stopping the run kills this sandbox */
	if (run->ledger.prepare)
		run->ledger.prepare(run->ledger.ctx);
	/* A pool member gets its token when it is bound to its owner (rb_run_bind). */
	if (!run->unbound && issue_token(run, err) < 0)
		return -1;
	run->state_saved = false; /* and init */
	if (rb_run_save_state(run, err) < 0)
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

int rb_run_bind(struct rb_run *run, const char *tenant, const char *agent, struct rb_error *err)
{
	if (!run->unbound)
		return rb_error_setk(err, RB_ERR_CONFLICT, 0, "run %s: bound to its owner already", run->id);
	if (!tenant || !*tenant || strlen(tenant) >= sizeof run->tenant || !agent || !*agent ||
	    strlen(agent) >= sizeof run->agent)
		return rb_error_setk(err, RB_ERR_INPUT, 0, "run %s: a tenant and an agent, each at most %zu bytes",
		                     run->id, sizeof run->tenant - 1);
	snprintf(run->tenant, sizeof run->tenant, "%s", tenant);
	snprintf(run->agent, sizeof run->agent, "%s", agent);
	run->unbound = false;
	/* Before the sandbox began, begin() issues the token as for any run. */
	if (run->begun && issue_token(run, err) < 0)
		return -1;
	run->state_saved = false; /* it names the owner now */
	return rb_run_save_state(run, err);
}

int rb_run_begin(struct rb_run *run, struct rb_error *err)
{
	return run->begun ? 0 : start_phase(run, begin, err);
}

int rb_run_await_ready(struct rb_run *run, struct rb_error *err)
{
	return run->ready ? 0 : start_phase(run, await_ready, err);
}

int rb_run_start(struct rb_run *run, struct rb_error *err)
{
	if (!run->begun && start_phase(run, begin, err) < 0)
		return -1;
	if (!run->ready && start_phase(run, await_ready, err) < 0)
		return -1;
	return 0;
}

/* The environment a step gets: the policy's passed names (their values from the run's host
 * context, rb_run_config.host, never the process's own environment) and fixed values, and in
 * gateway mode the endpoint's URL and the run token; nothing else from the host. */
json_t *rb_run_step_env(const struct rb_run *run)
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
		/* The installing proxy is the endpoint; the run token is its password. The endpoint itself
		 * (127.0.0.1, ::1) is reached directly; a name, localhost too, goes through the proxy. */
		static const char *const proxy_vars[] = {"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"};
		for (size_t i = 0; pol->n_proxy && i < RB_ARRAY_SIZE(proxy_vars); i++) {
			snprintf(kv, sizeof kv, "%s=http://runbox:%s@%s", proxy_vars[i], run->token, url + 7);
			json_array_append_new(env, json_string(kv));
		}
		if (pol->n_proxy) {
			json_array_append_new(env, json_string("NO_PROXY=127.0.0.1,::1"));
			json_array_append_new(env, json_string("no_proxy=127.0.0.1,::1"));
			json_array_append_new(env,
			                      json_string("NODE_USE_ENV_PROXY=1")); /* node >= 24 reads them then */
		}
	}
	for (unsigned i = 0; i < pol->n_env_set; i++)
		json_array_append_new(env, json_string(pol->env_set[i]));
	for (unsigned i = 0; i < pol->n_env_pass; i++) {
		const char *v = rb_host_getenv(run->paths.host, pol->env_pass[i]);
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

/* Kills the whole sandbox. SIGKILL to init takes its pid namespace with it, and the kernel
 * has killed and reaped every process in it by the time init is reaped; the cgroup kill that
 * follows is the second line (and costs nothing when the cgroup is already empty, which on
 * v1 spares a freeze-thaw cycle on every run). */
void rb_run_kill_sandbox(struct rb_run *run)
{
	struct rb_error err;
	rb_sandbox_destroy(&run->sb);
	/* The gateway runs in the run's cgroup: stopped first, so its counts are not lost. */
	rb_gwproc_stop(&run->gw);
	if (run->cg && rb_cgroup_kill(run->cg, &err) < 0)
		rb_warn("%s", err.msg);
}

/* The gateway could not start, or died: its listeners close, so the sandbox's calls are
 * refused at once instead of hanging until the step's deadline. Said once: on stderr, and in
 * the result's gateway.error. */
void rb_run_gateway_down(struct rb_run *run, const struct rb_error *why)
{
	run->gw.failed = true;
	snprintf(run->gw.error, sizeof run->gw.error, "%s", why->msg);
	rb_net_close_gateway(&run->sb.net);
	rb_warn("%s; the run's gateway calls are refused from now on", why->msg);
}

/* The step's gateway calls (each recorded before its answer ended, so every call the step
 * saw answered is here), and the first refusal as the step's one-line hint. */
static void gateway_calls(struct rb_run *run, struct rb_step_result *res)
{
	res->gateway_calls = rb_gwproc_take_calls(&run->gw);
	size_t i;
	json_t *c;
	json_array_foreach(res->gateway_calls, i, c)
	{
		if (!json_is_true(json_object_get(c, "refused")))
			continue;
		if (res->gateway_refused++ == 0)
			snprintf(res->gateway_hint, sizeof res->gateway_hint, "gateway refused %s %s (rule %s): %s; %s",
			         json_string_value(json_object_get(c, "method")) ?: "?",
			         json_string_value(json_object_get(c, "connector")) ?: "a call",
			         json_string_value(json_object_get(c, "rule")) ?: "?",
			         json_string_value(json_object_get(c, "error")) ?: "",
			         json_string_value(json_object_get(c, "hint")) ?: "");
	}
	/* Lookups the DNS stub refused are said by name, whatever was refused first. */
	json_t *dns = rb_gwproc_dns_names(res->gateway_calls, 4);
	size_t j;
	json_t *name;
	json_array_foreach(dns, j, name)
	{
		size_t len = strlen(res->gateway_hint);
		snprintf(res->gateway_hint + len, sizeof res->gateway_hint - len, "%s%s",
		         j ? ", " : "; DNS refused: ", json_string_value(name));
	}
	json_decref(dns);
}

int rb_run_step(struct rb_run *run, char *const argv[], int (*sink)(void *ctx, const struct rb_chunk *chunk),
                void *sink_ctx, struct rb_step_result *res, struct rb_error *err)
{
	struct rb_step_req req = {.argv = argv, .sink = sink, .sink_ctx = sink_ctx};
	return rb_run_exec(run, &req, res, err);
}

static int setup_failed(struct rb_step_result *res, const char *why, uint64_t t0)
{
	res->status = RB_STEP_SETUP_FAILED;
	snprintf(res->error, sizeof res->error, "%s", why);
	res->wall_us = rb_now_us() - t0;
	return 0;
}

/* The last size the caller wrote to resize_fd given to the process's terminal; returns the fd,
 * or -1 once it ended. */
static int resize(struct rb_proc *p, int resize_fd)
{
	struct rb_tty_size sz[16], last = {0};
	ssize_t n;
	while ((n = read(resize_fd, sz, sizeof sz)) >= (ssize_t)sizeof *sz)
		last = sz[n / (ssize_t)sizeof *sz - 1];
	struct rb_error rerr;
	if (last.rows && rb_proc_resize(p, last, &rerr) < 0)
		rb_debug("%s", rerr.msg);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ? -1 : resize_fd;
}

/* rb_proc_wait, while from's bytes are copied into the process's stdin as it takes them: one
 * 64 KiB buffer (the step's reading paces runbox's), at most RB_STEP_STDIN_CAP bytes in all.
 * from's EOF, an error reading it, or the cap closes the step's stdin; a step that closed its
 * own (EPIPE) or ended stops the copy, so a step that never reads its stdin never holds the run. */
static int feed_stdin(struct rb_session *s, struct rb_proc *p, int from, int resize_fd, struct rb_error *err)
{
	_cleanup_free_ char *buf = malloc(64u << 10);
	if (!buf)
		return rb_error_set(err, ENOMEM, "stdin");
	size_t have = 0, off = 0;
	uint64_t total = 0;
	bool feeding = from >= 0;
	while (!rb_proc_done(p)) {
		if (feeding && !rb_proc_stdin_open(p))
			feeding = false; /* closed by the session (the process ended) */
		struct pollfd fds[3] = {
		    {.fd = rb_session_fd(s), .events = POLLIN}, {.fd = -1}, {.fd = resize_fd, .events = POLLIN}};
		if (feeding)
			fds[1] = have ? (struct pollfd){.fd = p->stdin_w, .events = POLLOUT}
			              : (struct pollfd){.fd = from, .events = POLLIN};
		if (poll(fds, 3, -1) < 0) {
			if (errno == EINTR)
				continue; /* a cancel: the session's eventfd says it */
			return rb_error_set(err, errno, "poll");
		}
		if (feeding && fds[1].revents && !have) {
			size_t want = 64u << 10;
			if (want > RB_STEP_STDIN_CAP - total)
				want = (size_t)(RB_STEP_STDIN_CAP - total);
			ssize_t n = read(from, buf, want ? want : 1);
			if (n < 0 && (errno == EINTR || errno == EAGAIN))
				n = -2;
			if (n > 0 && !want) {
				rb_warn("stdin: the step took %llu MiB, runbox's cap (RB_STEP_STDIN_CAP); the rest "
				        "was not sent and the step's stdin is closed",
				        (unsigned long long)(RB_STEP_STDIN_CAP >> 20));
				n = 0;
			} else if (n == -1) {
				rb_warn("stdin: read: %s; the step's stdin is closed", strerror(errno));
				n = 0;
			}
			if (n == 0) {
				rb_proc_close_stdin(p);
				feeding = false;
			} else if (n > 0) {
				have = (size_t)n, off = 0, total += (uint64_t)n;
			}
		} else if (feeding && fds[1].revents && have) {
			struct rb_error werr;
			ssize_t w = rb_proc_write(p, buf + off, have, &werr);
			if (w < 0) { /* the step closed its stdin (EPIPE): what is left is not sent */
				rb_proc_close_stdin(p);
				feeding = false;
			} else {
				off += (size_t)w, have -= (size_t)w;
			}
		}
		if (fds[2].revents)
			resize_fd = resize(p, resize_fd);
		if (fds[0].revents && rb_session_dispatch(s, 0, err) < 0)
			return -1;
	}
	return 1;
}

int rb_run_exec(struct rb_run *run, const struct rb_step_req *req, struct rb_step_result *res, struct rb_error *err)
{
	memset(res, 0, sizeof *res);
	uint64_t t0 = rb_now_us();
	/* A run's first step is requested while init still builds the root: the request waits in
	 * the control socket, which init reads only once it said `ready`, and the runner sends it
	 * only after the cgroup is joined and the network ruled (rb_run_begin). */
	struct rb_session *s = run->session;
	if (!s && rb_session_open(run, &s, err) < 0)
		return run->start_error[0] ? setup_failed(res, err->msg, t0) : -1;
	const struct rb_proc_req preq = {.argv = req->argv,
	                                 .env = req->env,
	                                 .files = req->files,
	                                 .n_files = req->n_files,
	                                 .timeout_ms = req->timeout_ms,
	                                 .cwd = req->cwd,
	                                 .timeout_kills_sandbox = true,
	                                 .sink = req->sink,
	                                 .sink_ctx = req->sink_ctx,
	                                 .scrubber = req->scrubber,
	                                 .stdin_pipe = req->stdin_stream,
	                                 .tty = req->tty,
	                                 .tty_size = req->tty_size};
	struct rb_proc *p;
	if (rb_proc_start(s, &preq, &p, err) < 0)
		return -1;
	int r = req->stdin_stream || req->tty
	            ? feed_stdin(s, p, req->stdin_stream ? req->stdin_fd : -1, req->tty ? req->resize_fd : -1, err)
	            : rb_proc_wait(p, -1, err);
	if (r > 0)
		rb_proc_take_result(p, res);
	rb_proc_free(p);
	if (r > 0 && run->token[0])
		gateway_calls(run, res);
	return r > 0 ? 0 : -1;
}

void rb_run_stop(struct rb_run *run)
{
	rb_debug("run: stop");
	rb_session_release(run->session); /* SIGKILL to init, not waited for */
	if (run->started)
		rb_sandbox_kill(&run->sb);
	rb_gwproc_stop(&run->gw);
	rb_run_drain_linger(run, true);
	if (run->bg_log >= 0)
		close(run->bg_log);
	run->bg_log = -1;
}

void rb_run_close(struct rb_run *run)
{
	struct rb_error err;
	bool own_dir = run->dir[0] != '\0'; /* made after the claim: the state file is ours */
	rb_run_stop(run);
	rb_control_close(run->control); /* nobody polls it from here on */
	run->control = NULL;
	if (run->started)
		rb_run_kill_sandbox(run); /* reaps init, and empties the cgroup of anything that got out */
	if (run->id_slice_fd >= 0)        /* nothing of the sandbox's runs as the slice's ids now */
		close(run->id_slice_fd);
	run->id_slice_fd = -1;
	rb_debug("run: sandbox gone");
	/* They hold the sandbox's mounts (its /workspace tmpfs) alive: a daemon closes many runs. */
	if (run->sb.workspace_fd >= 0)
		close(run->sb.workspace_fd);
	if (run->sb.root_fd >= 0)
		close(run->sb.root_fd);
	run->sb.workspace_fd = run->sb.root_fd = -1;
	json_decref(run->gw.stats);
	json_decref(run->gw.calls); /* records of calls made after the last step ended */
	run->gw.calls = NULL;
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
	json_decref(res->gateway_calls);
	res->gateway_calls = NULL;
}

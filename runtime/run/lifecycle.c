/* Run state files, ps, kill and gc (see lifecycle.h). */
#define _GNU_SOURCE
#include "runtime/run/lifecycle.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/sandbox/cgroup.h"
#include "ledger/ledger.h"
#include "runtime/run/control.h"
#include "runtime/run/record.h"

/* A process is named by its pid and its start time (field 22 of /proc/PID/stat), so a reused
 * pid is never mistaken for the process that was registered. */
static unsigned long long start_time(pid_t pid)
{
	char path[64], *text = NULL;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (rb_read_file(path, 4096, &text, NULL, NULL) < 0)
		return 0;
	/* state is field 3 (a zombie counts as gone); starttime is field 22 */
	const char *state = rb_proc_stat_field(text, 3), *start = rb_proc_stat_field(text, 22);
	unsigned long long st = state && *state != 'Z' && *state != 'X' && start ? strtoull(start, NULL, 10) : 0;
	free(text);
	return st;
}

static bool same_process(pid_t pid, unsigned long long start)
{
	return pid > 0 && start && start_time(pid) == start;
}

static void state_path(const char *run_dir, const char *id, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.state", run_dir, id);
}

/* Written whole to a private temporary file, then put in place: by rename, or by link where
 * the file must not exist yet (exclusive: 1 when it does). */
static int write_state(const struct rb_run *run, json_t *write_ahead, bool exclusive, struct rb_error *err)
{
	json_t *cgs = json_array();
	if (run->cg) {
		const char *dirs[8];
		unsigned n = rb_cgroup_dirs(run->cg, dirs, 8);
		for (unsigned i = 0; i < n; i++)
			json_array_append_new(cgs, json_string(dirs[i]));
	}
	json_t *st =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:i, s:I, s:i, s:I, s:o, s:O?}", "run_id", run->id, "instance",
	              run->instance, "tenant", run->tenant, "agent", run->agent, "state_dir", run->paths.state_dir,
	              "started", (json_int_t)time(NULL), "runner_pid", (int)getpid(), "runner_start",
	              (json_int_t)start_time(getpid()), "init_pid", (int)run->sb.init_pid, "init_start",
	              (json_int_t)start_time(run->sb.init_pid), "cgroups", cgs, "write_ahead", write_ahead);
	json_object_set_new(st, "image", json_string(run->image.digest)); /* image rm refuses it */
	/* The owner (runner_pid, runner_start: `runbox run`, or `runbox serve` for its sessions)
	 * takes `runbox kill` on it; its name is the run's, in the run directory. */
	if (run->control)
		json_object_set_new(st, "control", json_string(run->id));
	char path[8192];
	state_path(run->paths.run_dir, run->id, path, sizeof path);
	/* Private, as the ledger is: it holds the commands written ahead of it. One write:
	 * json_dumpfd would make one per token (280 system calls for a one-step run). */
	_cleanup_free_ char *text = json_dumps(st, JSON_COMPACT);
	json_decref(st);
	if (!text)
		return rb_error_set(err, ENOMEM, "write run state `%s`", path);
	return rb_put_private_file(path, text, strlen(text), exclusive ? RB_PUT_NEW : RB_PUT_REPLACE, err);
}

int rb_lifecycle_register(const struct rb_run *run, json_t *write_ahead, struct rb_error *err)
{
	return write_state(run, write_ahead, false, err);
}

int rb_lifecycle_claim(const struct rb_run *run, struct rb_error *err)
{
	return write_state(run, NULL, true, err);
}

void rb_lifecycle_unregister(const struct rb_run *run)
{
	char path[8192];
	state_path(run->paths.run_dir, run->id, path, sizeof path);
	unlink(path);
}

/* Only what we made ourselves is acted on: a file or directory owned by our euid that nobody
 * else may write. Anyone else who could write there could name the processes and cgroups
 * that kill and gc act on. NULL when trusted, else why not. */
static const char *untrusted(const struct stat *st, mode_t type)
{
	if ((st->st_mode & S_IFMT) != type)
		return type == S_IFDIR ? "not a directory" : "not a regular file";
	if (st->st_uid != geteuid())
		return "not owned by runbox's user";
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return "writable by group or others";
	return NULL;
}

/* A run id as runbox makes them and manifests may give them: [A-Za-z0-9._-]{1,64}, not "."
 * or "..": a state file's name must be <id>.state, and <id> is also the run directory. */
static bool id_ok(const char *id, size_t len)
{
	if (!len || len > 64 || (len == 1 && id[0] == '.') || (len == 2 && id[0] == '.' && id[1] == '.'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", id[i]) || !id[i])
			return false;
	return true;
}

/* Calls fn for every state file; stops at the first negative return. The state file's run
 * id is its name's, and it must agree with its content; a file (or run directory) that
 * fails the checks above is passed with st NULL and why, and never acted on. */
static int each_state(const struct rb_paths *paths, int (*fn)(json_t *st, const char *file, const char *why, void *ctx),
                      void *ctx, struct rb_error *err)
{
	_cleanup_close_ int dfd = open(paths->run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : rb_error_set(err, errno, "open `%s`", paths->run_dir);
	struct stat dst;
	if (fstat(dfd, &dst) < 0)
		return rb_error_set(err, errno, "stat `%s`", paths->run_dir);
	const char *why = untrusted(&dst, S_IFDIR);
	if (why)
		return rb_error_set(err, EPERM, "run directory `%s`: %s; not acting on its state files", paths->run_dir,
		                    why);
	int scan = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
	_cleanup_closedir_ DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d) {
		if (scan >= 0)
			close(scan);
		return rb_error_set(err, errno, "open `%s`", paths->run_dir);
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 7 || strcmp(e->d_name + n - 6, ".state") != 0)
			continue;
		char file[8192];
		snprintf(file, sizeof file, "%s/%s", paths->run_dir, e->d_name);
		_cleanup_close_ int fd = -1;
		struct stat fst, rst;
		json_t *st = NULL;
		char whybuf[96];
		why = NULL;
		if (!id_ok(e->d_name, n - 6)) {
			why = "its name is not <run id>.state";
		} else if ((fd = openat(dfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
			why = errno == ELOOP ? "a symbolic link" : strerror(errno);
		} else if (fstat(fd, &fst) < 0 || (why = untrusted(&fst, S_IFREG))) {
			why = why ? why : strerror(errno);
		} else {
			char run[72];
			snprintf(run, sizeof run, "%.*s", (int)(n - 6), e->d_name);
			json_error_t jerr;
			st = json_loadfd(fd, 0, &jerr);
			const char *id = json_string_value(json_object_get(st, "run_id"));
			if (!json_is_object(st)) {
				json_decref(st);
				continue; /* half-written or not ours: nothing to say about it */
			}
			const char *dir_why = NULL;
			if (!id || strcmp(id, run) != 0)
				why = "its run_id is not its name's";
			else if (fstatat(dfd, run, &rst, AT_SYMLINK_NOFOLLOW) == 0 &&
			         (dir_why = untrusted(&rst, S_IFDIR)))
				why = snprintf(whybuf, sizeof whybuf, "its run directory: %s", dir_why) > 0 ? whybuf
				                                                                            : dir_why;
		}
		if (why) {
			json_decref(st);
			st = NULL;
		}
		int r = fn(st, file, why, ctx);
		json_decref(st);
		if (r < 0)
			return -1; /* the caller names why */
	}
	return 0;
}

static bool runner_alive(json_t *st)
{
	return same_process((pid_t)json_integer_value(json_object_get(st, "runner_pid")),
	                    (unsigned long long)json_integer_value(json_object_get(st, "runner_start")));
}

/* A run that ended but whose last commit the ledger refused kept its state file on purpose,
 * with its own run_end written ahead: gc commits that end, not an abandonment. */
static bool wrote_ahead_its_end(json_t *wa)
{
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(wa, "events"), i, e)
	{
		const char *type = json_string_value(json_object_get(e, "type"));
		if (type && !strcmp(type, "run_end"))
			return true;
	}
	return false;
}

static int list_one(json_t *st, const char *file, const char *why, void *ctx)
{
	if (why) {
		rb_warn("ignoring `%s`: %s", file, why);
		return 0;
	}
	json_t *runs = ctx;
	json_t *o = json_pack("{s:O, s:O, s:O, s:O, s:O, s:s}", "run_id", json_object_get(st, "run_id"), "tenant",
	                      json_object_get(st, "tenant"), "agent", json_object_get(st, "agent"), "started",
	                      json_object_get(st, "started"), "runner_pid", json_object_get(st, "runner_pid"), "state",
	                      runner_alive(st)                                          ? "running"
	                      : wrote_ahead_its_end(json_object_get(st, "write_ahead")) ? "unrecorded"
	                                                                                : "abandoned");
	json_object_set(o, "image", json_object_get(st, "image"));
	json_array_append_new(runs, o);
	return 0;
}

int rb_lifecycle_list(const struct rb_paths *paths, json_t **runs, struct rb_error *err)
{
	*runs = json_array();
	return each_state(paths, list_one, *runs, err);
}

struct kill_ctx {
	const struct rb_paths *paths;
	const char *run_id;
	int sig;
	int found;
	struct rb_error err;
};

/* Asks the run's owner to cancel it: a signal to the owner's pid would stop every run a
 * daemon holds (runbox serve), and the daemon with them. */
static int kill_one(json_t *st, const char *file, const char *why, void *ctx)
{
	if (why) {
		rb_warn("ignoring `%s`: %s", file, why);
		return 0;
	}
	struct kill_ctx *k = ctx;
	const char *id = json_string_value(json_object_get(st, "run_id"));
	if (!id || strcmp(id, k->run_id) != 0)
		return 0;
	k->found = 1;
	if (!runner_alive(st))
		return rb_error_setk(&k->err, RB_ERR_CONFLICT, 0,
		                     "run %s: its runbox is gone; `runbox gc` cleans up after it", id);
	if (!json_is_string(json_object_get(st, "control")))
		return rb_error_setk(&k->err, RB_ERR_CONFLICT, 0,
		                     "run %s: its sandbox is not made yet, so its owner takes no requests; try again",
		                     id);
	return rb_control_request_kill(k->paths->run_dir, id, k->sig, &k->err);
}

int rb_lifecycle_kill(const struct rb_paths *paths, const char *run_id, int sig, struct rb_error *err)
{
	struct kill_ctx k = {.paths = paths, .run_id = run_id, .sig = sig};
	if (each_state(paths, kill_one, &k, err) < 0) {
		if (k.found)
			*err = k.err;
		return -1;
	}
	if (!k.found)
		return rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no live run `%s` (see `runbox ps`)", run_id);
	return 0;
}

#define RB_GC_EVENTS_MAX (RB_RECORD_PENDING_MAX + 2) /* a record's pending queue, cleanup, run_end */

/* The events the run's state file wrote ahead of the ledger ({"committed": N, "events": [...]}),
 * if the ledger still holds only the N events committed before them: a runner that died
 * between its exec request and the commit beside the step. They were committed together or
 * not at all, so the count tells. Each gets a reference in ev; returns how many. */
static size_t write_ahead_events(struct rb_ledger *l, const char *run_id, json_t *wa, struct rb_ledger_event *ev,
                                 size_t max)
{
	json_t *events = json_object_get(wa, "events");
	json_int_t committed = json_integer_value(json_object_get(wa, "committed"));
	int64_t have = 0;
	struct rb_error err;
	if (!json_array_size(events) || rb_ledger_count_run(l, run_id, NULL, &have, &err) < 0 || have != committed)
		return 0;
	size_t n = 0, i;
	json_t *e;
	json_array_foreach(events, i, e)
	{
		const char *type = json_string_value(json_object_get(e, "type"));
		json_t *data = json_object_get(e, "data");
		if (n < max && type && json_is_object(data))
			ev[n++] = (struct rb_ledger_event){type, json_incref(data)};
	}
	return n;
}

struct gc_ctx {
	const struct rb_paths *paths;
	const struct rb_lifecycle_gc_how *how;
	json_t *report;
};

/* Do two paths name one directory? */
static bool same_dir(const char *a, const char *b)
{
	struct stat sa, sb;
	return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int gc_one(json_t *st, const char *file, const char *why, void *ctx)
{
	struct gc_ctx *g = ctx;
	if (why) {
		json_array_append_new(g->report, json_pack("{s:s, s:s}", "state_file", file, "refused", why));
		return 0;
	}
	if (runner_alive(st))
		return 0;
	const char *id = json_string_value(json_object_get(st, "run_id")); /* checked: the file's name */
	/* The ledger is the one of the state directory whose run directory holds the file, never
	 * one the file names; a file naming another (a shared RUNBOX_RUN_DIR) is that one's gc's. */
	const char *state_dir = g->paths->state_dir;
	const char *named = json_string_value(json_object_get(st, "state_dir"));
	if (!same_dir(named, state_dir)) {
		json_array_append_new(
		    g->report, json_pack("{s:s, s:s, s:s}", "run_id", id, "state_file", file, "refused",
		                         "it belongs to another state directory (run gc with that --state-dir)"));
		return 0;
	}
	if (g->how->take && !g->how->take(st, g->how->ctx))
		return 0; /* not the caller's to take (runbox gc's) */
	json_t *done = json_pack("{s:s}", "run_id", id);
	/* init dies with its runner (PDEATHSIG); if it somehow lives, it goes now, with its
	 * pid namespace. */
	pid_t init = (pid_t)json_integer_value(json_object_get(st, "init_pid"));
	if (same_process(init, (unsigned long long)json_integer_value(json_object_get(st, "init_start")))) {
		kill(init, SIGKILL);
		json_object_set_new(done, "killed_init", json_true());
	}
	json_t *cgs = json_object_get(st, "cgroups");
	const char *dirs[8];
	unsigned n = 0;
	size_t i;
	json_t *v;
	json_array_foreach(cgs, i, v) if (n < 8 && json_is_string(v)) dirs[n++] = json_string_value(v);
	struct rb_error err;
	bool ok = true;
	if (rb_cgroup_reclaim(id, rb_host_getenv(g->paths->host, RB_CGROUP_PARENT_VAR), dirs, n, &err) < 0) {
		ok = false;
		json_object_set_new(done, "cgroup_error", json_string(err.msg));
	}
	char dir[8192];
	snprintf(dir, sizeof dir, "%s/%s", g->paths->run_dir, id);
	if (rb_rm_rf(dir, &err) < 0) {
		ok = false;
		json_object_set_new(done, "dir_error", json_string(err.msg));
	}
	/* The ledger says what happened to it, once: the state file goes only when the ledger has
	 * the run's end, so a gc that could not finish is repeated, not recorded twice. */
	struct rb_ledger *l = NULL;
	bool recorded = false;
	int64_t ends = 0;
	if (rb_ledger_open(state_dir, &l, &err) < 0 || rb_ledger_count_run(l, id, "run_end", &ends, &err) < 0) {
		json_object_set_new(done, "ledger_error", json_string(err.msg));
	} else if (ends > 0) {
		recorded = true; /* an earlier gc, or the run's own retry, recorded it */
	} else {
		const char *tenant = json_string_value(json_object_get(st, "tenant"));
		const char *agent = json_string_value(json_object_get(st, "agent"));
		json_t *wa = json_object_get(st, "write_ahead");
		struct rb_ledger_event ev[RB_GC_EVENTS_MAX];
		size_t n_ev = write_ahead_events(l, id, wa, ev, RB_GC_EVENTS_MAX - 2);
		bool ended = n_ev && wrote_ahead_its_end(wa); /* its own end goes in with them */
		if (n_ev)
			json_object_set_new(done, "written_ahead", json_integer((json_int_t)n_ev));
		json_object_set_new(done, "recorded_as", json_string(ended ? "its own end" : g->how->result));
		ev[n_ev++] = (struct rb_ledger_event){
		    "cleanup",
		    json_pack("{s:s, s:b, s:s}", "what",
		              ended ? "runbox gc committed what the run's last commit could not" : g->how->what, "ok",
		              ok, "by", g->how->by)};
		if (!ended)
			ev[n_ev++] = (struct rb_ledger_event){"run_end", json_pack("{s:s}", "result", g->how->result)};
		/* Only into this run instance's own record (a state file before instances had
		 * none): a run that lost its id to another never got into the ledger, and gc does
		 * not add to the other's record either. */
		const char *instance = json_string_value(json_object_get(st, "instance"));
		int r = rb_ledger_append_run(l, id, instance, tenant, agent, ev, n_ev, NULL, &err);
		if (r == RB_LEDGER_TAKEN) {
			json_object_set_new(done, "recorded_as", json_string("nothing: its run id is another run's"));
			recorded = true; /* there is nothing it may record */
		} else if (r < 0) {
			json_object_set_new(done, "ledger_error", json_string(err.msg));
		} else {
			recorded = true;
		}
		for (size_t j = 0; j < n_ev; j++)
			json_decref(ev[j].data);
	}
	rb_ledger_close(l);
	if (ok && recorded) {
		rb_control_remove(g->paths->run_dir, id); /* the dead owner's socket */
		unlink(file);
	}
	json_object_set_new(done, "removed", json_boolean(ok && recorded));
	json_array_append_new(g->report, done);
	return 0;
}

int rb_lifecycle_gc_how(const struct rb_paths *paths, const struct rb_lifecycle_gc_how *how, json_t **report,
                        struct rb_error *err)
{
	struct gc_ctx g = {.paths = paths, .how = how, .report = json_array()};
	*report = g.report;
	return each_state(paths, gc_one, &g, err);
}

int rb_lifecycle_gc(const struct rb_paths *paths, json_t **report, struct rb_error *err)
{
	static const struct rb_lifecycle_gc_how gc = {
	    .result = "abandoned", .what = "runbox gc after the runner died", .by = "gc"};
	return rb_lifecycle_gc_how(paths, &gc, report, err);
}

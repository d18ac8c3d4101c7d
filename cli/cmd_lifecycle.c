/* `runbox ps`, `runbox kill RUN`, `runbox gc`: live runs, stopping one, cleaning up after a crash. */
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/ttysafe.h"
#include "common/cleanup.h"
#include "common/jsonout.h"
#include "runtime/run/lifecycle.h"
#include "runtime/run/storegc.h"
#include "common/util.h"

/* What ps, kill and gc take: --state-dir DIR (or --state-dir=DIR), --json where it applies, gc's --dry-run and
 * --retention DUR, and `positional` plain arguments; anything else is refused, naming it. Returns 0, 1 after
 * --help (printed), or -1 after a usage error (printed). */
struct lc_args {
	const char *state_dir;
	bool json;
	bool gc;               /* in: gc's own options are taken too */
	bool dry_run;          /* gc --dry-run */
	const char *retention; /* gc --retention DUR */
	bool kill;             /* in: kill's --signal is taken too */
	const char *signal;    /* kill --signal S */
	const char *pos[1];
	int npos;
};

static int parse(int argc, char **argv, const char *usage, bool takes_json, int positional, struct lc_args *a)
{
	bool options = true;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (options && (!strcmp(arg, "--help") || !strcmp(arg, "-h"))) {
			printf("%s", usage);
			return 1;
		}
		if (options && !strcmp(arg, "--")) {
			options = false;
		} else if (options && !strcmp(arg, "--state-dir")) {
			if (i + 1 >= argc) {
				rb_err("%s: option `--state-dir` needs a value", argv[0]);
				return -1;
			}
			a->state_dir = argv[++i];
		} else if (options && !strncmp(arg, "--state-dir=", 12)) {
			a->state_dir = arg + 12;
		} else if (options && takes_json && !strcmp(arg, "--json")) {
			a->json = true;
		} else if (options && a->gc && !strcmp(arg, "--dry-run")) {
			a->dry_run = true;
		} else if (options && a->gc && !strcmp(arg, "--retention")) {
			if (i + 1 >= argc) {
				rb_err("%s: option `--retention` needs a value", argv[0]);
				return -1;
			}
			a->retention = argv[++i];
		} else if (options && a->kill && !strcmp(arg, "--signal")) {
			if (i + 1 >= argc) {
				rb_err("%s: option `--signal` needs a value", argv[0]);
				return -1;
			}
			a->signal = argv[++i];
		} else if (options && a->kill && !strncmp(arg, "--signal=", 9)) {
			a->signal = arg + 9;
		} else if (options && arg[0] == '-' && arg[1]) {
			rb_err("%s: unknown option `%s` (see `runbox %s --help`)", argv[0], arg, argv[0]);
			return -1;
		} else if (a->npos < positional) {
			a->pos[a->npos++] = arg;
		} else {
			rb_err("%s: unexpected argument `%s` (see `runbox %s --help`)", argv[0], arg, argv[0]);
			return -1;
		}
	}
	if (a->state_dir && !*a->state_dir) {
		rb_err("%s: --state-dir needs a directory", argv[0]);
		return -1;
	}
	if (a->npos < positional) {
		fputs(usage, stderr);
		return -1;
	}
	return 0;
}

/* A field of a state file or of gc's report, for the terminal: a tenant's or agent's name
 * comes from a manifest, an error may name a file the sandbox made. */
struct shown {
	char s[1024];
};
static const char *shown(const char *text, struct shown *b)
{
	rb_ttysafe_line(text ? text : "", b->s, sizeof b->s);
	return b->s;
}

static int paths_or_fail(const struct lc_args *a, struct rb_paths *p)
{
	struct rb_error err;
	if (rb_paths_init(p, rb_cli_host(), a->state_dir, &err) < 0) {
		rb_err("%s", err.msg);
		return -1;
	}
	return 0;
}

int rb_cmd_ps(int argc, char **argv)
{
	struct lc_args a = {0};
	int pr = parse(argc, argv, "usage: runbox ps [--state-dir DIR] [--json]\n", true, 0, &a);
	if (pr)
		return pr > 0 ? 0 : 125;
	bool json = a.json;
	struct rb_paths p;
	struct rb_error err;
	json_t *runs = NULL;
	if (paths_or_fail(&a, &p) < 0)
		return 125;
	if (rb_lifecycle_list(&p, &runs, &err) < 0) {
		rb_err("%s", err.msg);
		json_decref(runs);
		return 125;
	}
	if (json) {
		rb_json_print(stdout, runs, JSON_INDENT(2));
	} else {
		printf("%-22s %-12s %-14s %-8s %-10s %s\n", "RUN", "TENANT", "AGENT", "PID", "STATE", "STARTED (UTC)");
		size_t i;
		json_t *r;
		json_array_foreach(runs, i, r)
		{
			time_t t = (time_t)json_integer_value(json_object_get(r, "started"));
			char when[32];
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", gmtime(&t));
			struct shown id, tenant, agent, state;
			printf("%-22s %-12s %-14s %-8d %-10s %s\n",
			       shown(json_string_value(json_object_get(r, "run_id")), &id),
			       shown(json_string_value(json_object_get(r, "tenant")), &tenant),
			       shown(json_string_value(json_object_get(r, "agent")), &agent),
			       (int)json_integer_value(json_object_get(r, "runner_pid")),
			       shown(json_string_value(json_object_get(r, "state")), &state), when);
		}
	}
	json_decref(runs);
	return 0;
}

/* A signal by name (TERM, SIGTERM) or number (1 to 64). */
static int signal_named(const char *s)
{
	static const struct {
		const char *name;
		int sig;
	} names[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
	             {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"ALRM", SIGALRM}};
	const char *n = strncmp(s, "SIG", 3) == 0 ? s + 3 : s;
	for (size_t i = 0; i < RB_ARRAY_SIZE(names); i++)
		if (!strcmp(n, names[i].name))
			return names[i].sig;
	char *end;
	long v = strtol(s, &end, 10);
	return *s && !*end && v >= 1 && v <= 64 ? (int)v : -1;
}

int rb_cmd_kill(int argc, char **argv)
{
	struct lc_args a = {.kill = true};
	int pr = parse(argc, argv, "usage: runbox kill [--state-dir DIR] [--signal S] RUN_ID\n", false, 1, &a);
	if (pr)
		return pr > 0 ? 0 : 125;
	int sig = a.signal ? signal_named(a.signal) : SIGTERM;
	if (sig < 0) {
		rb_err("kill: --signal `%s`: expected a signal name (TERM, INT, KILL, ...) or number (1 to 64)",
		       a.signal);
		return 125;
	}
	struct rb_paths p;
	struct rb_error err;
	if (paths_or_fail(&a, &p) < 0)
		return 125;
	if (rb_lifecycle_kill(&p, a.pos[0], sig, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	return 0;
}

/* The artifact store's retention: objects no ledger artifact event within it names go. */
static int gc_store(const struct rb_paths *p, uint64_t retention_s, bool dry_run, size_t *acted)
{
	struct rb_error err;
	json_t *report = NULL;
	int r = rb_store_gc(p, retention_s, dry_run, &report, &err);
	size_t i;
	json_t *o;
	json_array_foreach(json_object_get(report, "removed"), i, o)
	{
		const char *d = json_string_value(json_object_get(o, "digest"));
		const char *t = json_string_value(json_object_get(o, "temporary"));
		const char *res = json_string_value(json_object_get(o, "results"));
		(*acted)++;
		if (res) {
			printf("%s run results %s\n", dry_run ? "would remove" : "removed", res);
			continue;
		}
		printf("%s %s%s (%" JSON_INTEGER_FORMAT " bytes)\n", dry_run ? "would remove" : "removed",
		       d ? "artifact " : "unfinished write ", d ? d : t,
		       json_integer_value(json_object_get(o, "size")));
	}
	json_decref(report);
	if (r < 0)
		rb_err("gc: %s", err.msg);
	return r;
}

int rb_cmd_gc(int argc, char **argv)
{
	struct lc_args a = {.gc = true};
	int pr = parse(argc, argv, "usage: runbox gc [--state-dir DIR] [--retention DUR] [--dry-run]\n", false, 0, &a);
	if (pr)
		return pr > 0 ? 0 : 125;
	uint64_t retention_ms = (uint64_t)RB_STORE_RETENTION_S * 1000;
	if (a.retention && rb_parse_duration_ms(a.retention, &retention_ms) < 0) {
		rb_err("gc: --retention `%s`: expected a duration like 720h, 12h or 0s", a.retention);
		return 125;
	}
	bool dry_run = a.dry_run;
	struct rb_paths p;
	struct rb_error err;
	json_t *report = NULL;
	if (paths_or_fail(&a, &p) < 0)
		return 125;
	/* A dry run lists what the store's retention would remove and touches nothing else. */
	if (dry_run) {
		size_t listed = 0;
		int sr = gc_store(&p, retention_ms / 1000, true, &listed);
		if (!listed && sr == 0)
			printf("nothing to remove\n");
		return sr < 0 ? 125 : 0;
	}
	int r = rb_lifecycle_gc(&p, &report, &err);
	size_t i, acted = 0;
	json_t *o;
	json_array_foreach(report, i, o)
	{
		const char *id = json_string_value(json_object_get(o, "run_id"));
		const char *as = json_string_value(json_object_get(o, "recorded_as"));
		const char *refused = json_string_value(json_object_get(o, "refused"));
		if (refused) {
			/* Not runbox's to act on: nothing in it was killed or removed. */
			rb_warn("gc: left `%s` alone: %s", json_string_value(json_object_get(o, "state_file")),
			        refused);
			continue;
		}
		acted++;
		struct shown sid, sas;
		if (json_is_true(json_object_get(o, "removed"))) {
			printf("%s: cleaned up, %s%s\n", shown(id, &sid), as ? "recorded as " : "already recorded",
			       as ? shown(as, &sas) : "");
			continue;
		}
		/* Its state file stays: the next gc tries again. */
		const char *why[] = {"cgroup_error", "dir_error", "ledger_error"};
		printf("%s: not finished, kept for the next gc:", shown(id, &sid));
		for (size_t k = 0; k < RB_ARRAY_SIZE(why); k++)
			if (json_object_get(o, why[k]))
				printf(" %s", shown(json_string_value(json_object_get(o, why[k])), &sas));
		putchar('\n');
	}
	int sr = gc_store(&p, retention_ms / 1000, false, &acted);
	if (!acted)
		printf("nothing to clean up\n");
	json_decref(report);
	if (r < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	return sr < 0 ? 125 : 0;
}

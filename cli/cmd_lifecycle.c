/* `runbox ps`, `runbox kill RUN`, `runbox gc`: live runs, stopping one, cleaning up after a crash. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli/commands.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/cleanup.h"
#include "runtime/lifecycle.h"
#include "runtime/storegc.h"
#include "common/util.h"

static int paths_or_fail(struct rb_paths *p)
{
	struct rb_error err;
	if (rb_paths_init(p, NULL, &err) < 0) {
		rb_err("%s", err.msg);
		return -1;
	}
	return 0;
}

int rb_cmd_ps(int argc, char **argv)
{
	bool json = argc > 1 && !strcmp(argv[1], "--json");
	struct rb_paths p;
	struct rb_error err;
	json_t *runs = NULL;
	if (paths_or_fail(&p) < 0)
		return 125;
	if (rb_lifecycle_list(&p, &runs, &err) < 0) {
		rb_err("%s", err.msg);
		json_decref(runs);
		return 125;
	}
	if (json) {
		json_dumpf(runs, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
	} else {
		printf("%-22s %-12s %-14s %-8s %-10s %s\n", "RUN", "TENANT", "AGENT", "PID", "STATE", "STARTED (UTC)");
		size_t i;
		json_t *r;
		json_array_foreach(runs, i, r)
		{
			time_t t = (time_t)json_integer_value(json_object_get(r, "started"));
			char when[32];
			strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", gmtime(&t));
			printf("%-22s %-12s %-14s %-8d %-10s %s\n", json_string_value(json_object_get(r, "run_id")),
			       json_string_value(json_object_get(r, "tenant")),
			       json_string_value(json_object_get(r, "agent")),
			       (int)json_integer_value(json_object_get(r, "runner_pid")),
			       json_string_value(json_object_get(r, "state")), when);
		}
	}
	json_decref(runs);
	return 0;
}

int rb_cmd_kill(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		fputs("usage: runbox kill RUN_ID\n", stderr);
		return 125;
	}
	struct rb_paths p;
	struct rb_error err;
	if (paths_or_fail(&p) < 0)
		return 125;
	if (rb_lifecycle_kill(&p, argv[1], SIGTERM, &err) < 0) {
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
	uint64_t retention_ms = (uint64_t)RB_STORE_RETENTION_S * 1000;
	bool dry_run = false;
	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--dry-run")) {
			dry_run = true;
		} else if (!strcmp(argv[a], "--retention") && a + 1 < argc) {
			if (rb_parse_duration_ms(argv[++a], &retention_ms) < 0) {
				rb_err("gc: --retention `%s`: expected a duration like 720h, 12h or 0s", argv[a]);
				return 125;
			}
		} else {
			fputs("usage: runbox gc [--retention DUR] [--dry-run]\n", stderr);
			return 125;
		}
	}
	struct rb_paths p;
	struct rb_error err;
	json_t *report = NULL;
	if (paths_or_fail(&p) < 0)
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
		if (json_is_true(json_object_get(o, "removed"))) {
			printf("%s: cleaned up, %s%s\n", id, as ? "recorded as " : "already recorded", as ? as : "");
			continue;
		}
		/* Its state file stays: the next gc tries again. */
		const char *why[] = {"cgroup_error", "dir_error", "ledger_error"};
		printf("%s: not finished, kept for the next gc:", id);
		for (size_t k = 0; k < RB_ARRAY_SIZE(why); k++)
			if (json_object_get(o, why[k]))
				printf(" %s", json_string_value(json_object_get(o, why[k])));
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

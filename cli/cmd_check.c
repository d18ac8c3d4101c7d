/* `runbox check [--json]`: prints rb_hostcheck_run's findings as a table or one JSON object.
 * Exit 0 when runbox can run here (possibly degraded), 125 when a required feature is missing. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/jsonout.h"
#include "runtime/check/hostcheck.h"

static const char usage[] = "usage: runbox check [--json]\n"
                            "\n"
                            "Probes what this host supports for runbox and prints, per feature, ok / degraded /\n"
                            "missing, what was found, and the fix. Probes run in forked children inside fresh\n"
                            "namespaces and leave nothing behind.\n"
                            "\n"
                            "  --json   one JSON object: {runnable, rootless, counts, checks: [{name, state,\n"
                            "           required, detail, fix}]}\n"
                            "  --help   this text\n"
                            "\n"
                            "Exit status: 0 when runbox can run here (possibly degraded), 125 when a required\n"
                            "feature is missing. See docs/check.md.\n";

static int print_json(const struct rb_hostcheck *hc, bool runnable, const size_t counts[3])
{
	_cleanup_json_ json_t *root = json_object();
	json_t *checks = json_array();
	if (!root || !checks) {
		json_decref(checks);
		return -1;
	}
	for (size_t i = 0; i < hc->n; i++) {
		const struct rb_hostcheck_item *it = &hc->items[i];
		json_t *o =
		    json_pack("{s:s, s:s, s:b, s:s}", "name", it->name, "state", rb_hostcheck_state_name(it->state),
		              "required", it->required, "detail", it->detail);
		if (!o)
			continue;
		if (it->fix[0])
			json_object_set_new(o, "fix", json_string(it->fix));
		json_array_append_new(checks, o);
	}
	json_object_set_new(root, "runnable", json_boolean(runnable));
	json_object_set_new(root, "rootless", json_boolean(hc->rootless));
	json_object_set_new(root, "counts",
	                    json_pack("{s:I, s:I, s:I}", "ok", (json_int_t)counts[0], "degraded", (json_int_t)counts[1],
	                              "missing", (json_int_t)counts[2]));
	json_object_set_new(root, "checks", checks);
	return rb_json_print(stdout, root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
}

static void print_table(const struct rb_hostcheck *hc, bool runnable, const size_t counts[3])
{
	int w = 7; /* "FEATURE" */
	for (size_t i = 0; i < hc->n; i++) {
		int l = (int)strlen(hc->items[i].name);
		if (l > w)
			w = l;
	}
	printf("%-*s  %-8s  %s\n", w, "FEATURE", "STATE", "DETAIL");
	for (size_t i = 0; i < hc->n; i++) {
		const struct rb_hostcheck_item *it = &hc->items[i];
		printf("%-*s  %-8s  %s\n", w, it->name, rb_hostcheck_state_name(it->state), it->detail);
		if (it->fix[0])
			printf("%-*s  %-8s  fix: %s\n", w, "", "", it->fix);
	}
	printf("\n");
	if (runnable) {
		printf("runbox can run here (%s): %zu ok, %zu degraded, %zu missing\n",
		       hc->rootless ? "rootless" : "as root", counts[0], counts[1], counts[2]);
		return;
	}
	printf("runbox cannot run here (%s); missing:", hc->rootless ? "rootless" : "as root");
	const char *sep = " ";
	for (size_t i = 0; i < hc->n; i++) {
		if (hc->items[i].required && hc->items[i].state == RB_CHECK_MISSING) {
			printf("%s%s", sep, hc->items[i].name);
			sep = ", ";
		}
	}
	printf("\n");
}

int rb_cmd_check(int argc, char **argv)
{
	bool json = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage, stdout);
			return 0;
		} else {
			fprintf(stderr, "runbox check: unknown argument `%s` (see `runbox check --help`)\n", argv[i]);
			return 125;
		}
	}

	/* About 30 KiB: off the stack. */
	_cleanup_free_ struct rb_hostcheck *hc = calloc(1, sizeof(*hc));
	if (!hc) {
		fprintf(stderr, "runbox check: out of memory\n");
		return 125;
	}
	/* The probes fork: nothing buffered may be written twice. */
	fflush(stdout);
	rb_hostcheck_run(hc, rb_cli_host());
	bool runnable = rb_hostcheck_runnable(hc);
	size_t counts[3] = {0, 0, 0};
	for (size_t i = 0; i < hc->n; i++)
		counts[hc->items[i].state]++;

	if (json) {
		if (print_json(hc, runnable, counts) < 0) {
			fprintf(stderr, "runbox check: cannot write JSON to stdout\n");
			return 125;
		}
	} else {
		print_table(hc, runnable, counts);
	}
	return runnable ? 0 : 125;
}

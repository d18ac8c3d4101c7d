/* `runbox logs RUN [--step N]`: a run's captured output, from its records (runtime/run/logs.h),
 * stdout to stdout and stderr to stderr, for the tenant whose run it was. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "ledger/ledger.h"
#include "policy/manifest.h"
#include "runtime/run/logs.h"

static const char usage[] = "usage: runbox logs [--state-dir DIR] [--tenant ID] RUN [--step N]\n"
                            "  a run's captured output (scrubbed, as the run kept it): each step's stdout to\n"
                            "  stdout and stderr to stderr, in step order; --step N: that step only. Kept with\n"
                            "  the run's results until `runbox gc` removes them (its retention).\n";

/* Copies path to f; a missing file is an empty stream. */
static int cat(const char *path, FILE *f)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return fflush(f) == EOF ? -1 : 0;
		if (fwrite(buf, 1, (size_t)n, f) != (size_t)n)
			return -1;
	}
}

static void ledger_closep(struct rb_ledger **l)
{
	rb_ledger_close(*l);
}

int rb_cmd_logs(int argc, char **argv)
{
	const char *state_dir = NULL, *tenant = "local", *run = NULL;
	long step = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			return 0;
		}
		bool has = i + 1 < argc;
		if (!strcmp(a, "--state-dir") && has)
			state_dir = argv[++i];
		else if (!strcmp(a, "--tenant") && has)
			tenant = argv[++i];
		else if (!strcmp(a, "--step") && has) {
			char *end;
			const char *v = argv[++i];
			errno = 0;
			step = strtol(v, &end, 10);
			if (errno || end == v || *end || step < 1 || step > 1000000) {
				rb_err("logs: --step `%s`: expected a step number from 1", v);
				return 125;
			}
		} else if (a[0] == '-' && a[1]) {
			rb_err("logs: unknown or incomplete option `%s` (see `runbox logs --help`)", a);
			return 125;
		} else if (!run)
			run = a;
		else {
			rb_err("logs: unexpected argument `%s`", a);
			return 125;
		}
	}
	if (!run) {
		rb_err("logs: needs a run id (usage: runbox logs RUN [--step N])");
		return 125;
	}
	if (!rb_manifest_id_ok(tenant)) {
		rb_err("logs: --tenant `%s`: expected an id ([A-Za-z0-9._-]{1,64})", tenant);
		return 125;
	}
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_paths paths;
	struct stat st;
	if (rb_paths_init(&paths, rb_cli_host(), state_dir, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	if (stat(paths.state_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rb_err("logs: no state directory `%s` (no runs recorded there)", paths.state_dir);
		return 125;
	}
	__attribute__((cleanup(ledger_closep))) struct rb_ledger *l = NULL;
	_cleanup_json_ json_t *starts = NULL;
	struct rb_ledger_filter f = {.run_id = run, .tenant = tenant, .type = "step_start"};
	if (rb_ledger_open(paths.state_dir, &l, &err) < 0 || rb_ledger_query(l, &f, &starts, &err) < 0) {
		rb_err("logs: %s", err.msg);
		return 125;
	}
	/* The run's id is a directory name below: only an id the ledger has for this tenant is used. */
	if (!json_array_size(starts)) {
		rb_err("logs: no run `%s` of tenant `%s` in the ledger", run, tenant);
		return 125;
	}
	char dir[PATH_MAX];
	rb_logs_dir(paths.state_dir, run, dir);
	if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rb_err("logs: the output of run `%s` is no longer kept (`runbox gc` removed it)", run);
		return 1;
	}
	bool found = false;
	size_t i;
	json_t *ev;
	json_array_foreach(starts, i, ev)
	{
		json_int_t n = json_integer_value(json_object_get(json_object_get(ev, "data"), "step"));
		if (step && n != step)
			continue;
		found = true;
		char out[PATH_MAX + 64], errp[PATH_MAX + 64];
		snprintf(out, sizeof out, "%s/step-%" JSON_INTEGER_FORMAT ".stdout", dir, n);
		snprintf(errp, sizeof errp, "%s/step-%" JSON_INTEGER_FORMAT ".stderr", dir, n);
		if (cat(out, stdout) < 0 || cat(errp, stderr) < 0) {
			if (errno == EPIPE)
				return 0;
			rb_err("logs: step %" JSON_INTEGER_FORMAT ": %s", n, strerror(errno));
			return 125;
		}
	}
	if (!found) {
		rb_err("logs: run `%s` has no step %ld", run, step);
		return 125;
	}
	return 0;
}

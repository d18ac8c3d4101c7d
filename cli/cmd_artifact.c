/* `runbox artifact ls|get|inspect`: artifacts back out of the store, by run or by digest, only
 * for a caller of the tenant whose run stored them (SPEC "Who may say what": tenants). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/jsonout.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/ttysafe.h"
#include "common/util.h"
#include "ledger/ledger.h"
#include "policy/manifest.h"
#include "runtime/run/artifacts.h"

static const char usage[] =
    "usage: runbox artifact [OPTIONS] COMMAND\n"
    "\n"
    "  ls RUN [--json]                 the run's artifacts (its last harvest): size, redactions,\n"
    "                                  full digest, path; one line each\n"
    "  get DIGEST|RUN:PATH [-o FILE] [--force]\n"
    "                                  the artifact's bytes, to stdout or FILE (never overwritten\n"
    "                                  without --force; a link there is not followed)\n"
    "  inspect DIGEST [--json]         which runs stored it: time, tenant, agent, run, step, path\n"
    "\n"
    "  --tenant ID      whose artifacts (default `local`, as `runbox run`'s): an artifact is reachable\n"
    "                   only by the tenant whose run stored it\n"
    "  --state-dir DIR  the state directory (also RUNBOX_STATE_DIR)\n"
    "See docs/harvest.md.\n";

struct args {
	const char *sub, *pos, *tenant, *state_dir, *out;
	bool json, force;
};

static int parse(int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];
		const char **val = NULL;
		if (!strcmp(s, "--tenant"))
			val = &a->tenant;
		else if (!strcmp(s, "--state-dir"))
			val = &a->state_dir;
		else if (!strcmp(s, "-o") || !strcmp(s, "--output"))
			val = &a->out;
		else if (!strcmp(s, "--json"))
			a->json = true;
		else if (!strcmp(s, "--force"))
			a->force = true;
		else if (s[0] == '-' && s[1]) {
			rb_err("artifact: unknown option `%s` (see `runbox artifact --help`)", s);
			return 125;
		} else if (!a->sub)
			a->sub = s;
		else if (!a->pos)
			a->pos = s;
		else {
			rb_err("artifact: unexpected argument `%s`", s);
			return 125;
		}
		if (val) {
			if (i + 1 >= argc) {
				rb_err("artifact: `%s` needs a value", s);
				return 125;
			}
			*val = argv[++i];
		}
	}
	if (!a->sub || (strcmp(a->sub, "ls") != 0 && strcmp(a->sub, "get") != 0 && strcmp(a->sub, "inspect") != 0)) {
		rb_err("artifact: %s%s%s (expected ls, get or inspect)",
		       a->sub ? "unknown command `" : "missing command", a->sub ? a->sub : "", a->sub ? "`" : "");
		return 125;
	}
	if (!a->pos) {
		rb_err("artifact %s: needs %s", a->sub, !strcmp(a->sub, "ls") ? "a run id" : "a digest");
		return 125;
	}
	if ((a->out || a->force) && strcmp(a->sub, "get") != 0) {
		rb_err("artifact %s: -o and --force apply to `get` only", a->sub);
		return 125;
	}
	if (a->force && !a->out) {
		rb_err("artifact get: --force applies to -o FILE only");
		return 125;
	}
	if (a->tenant && !rb_manifest_id_ok(a->tenant)) {
		rb_err("artifact: --tenant `%s`: expected an id ([A-Za-z0-9._-]{1,64})", a->tenant);
		return 125;
	}
	return 0;
}

static json_int_t redactions(json_t *a)
{
	json_t *r = json_object_get(a, "redaction_count");
	if (json_is_integer(r))
		return json_integer_value(r);
	json_int_t n = 0;
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(a, "redactions"), k, v) n += json_integer_value(v);
	return n;
}

static void ledger_closep(struct rb_ledger **l)
{
	rb_ledger_close(*l);
}

/* The run's artifacts for tenant; a run of another tenant, or none, is "no run". */
static int run_artifacts(struct rb_ledger *l, const char *run, const char *tenant, json_t **arts)
{
	struct rb_error err;
	rb_error_clear(&err);
	_cleanup_json_ json_t *ev = NULL;
	struct rb_ledger_filter f = {.run_id = run, .tenant = tenant, .type = "run_start", .limit = 1};
	if (rb_ledger_query(l, &f, &ev, &err) < 0 || rb_ledger_run_artifacts(l, run, tenant, arts, &err) < 0) {
		rb_err("artifact: %s", err.msg);
		return 125;
	}
	if (!json_array_size(ev)) {
		rb_err("artifact: no run `%s` of tenant `%s` in the ledger", run, tenant);
		return 125;
	}
	return 0;
}

static int write_out(const struct args *a, const char *data, size_t len)
{
	if (!a->out) {
		if (fwrite(data, 1, len, stdout) != len || fflush(stdout) == EOF) {
			if (errno == EPIPE)
				return 0;
			rb_err("artifact get: write to stdout: %s", strerror(errno));
			return 125;
		}
		return 0;
	}
	int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (a->force ? O_TRUNC : O_EXCL);
	_cleanup_close_ int fd = open(a->out, flags, 0644);
	if (fd < 0) {
		rb_err("artifact get: -o `%s`: %s%s", a->out, strerror(errno),
		       errno == EEXIST  ? " (--force replaces it)"
		       : errno == ELOOP ? " (a link is not followed)"
		                        : "");
		return 125;
	}
	if (rb_write_all(fd, data, len) < 0 || close(rb_steal_fd(&fd)) < 0) {
		rb_err("artifact get: write `%s`: %s", a->out, strerror(errno));
		return 125;
	}
	return 0;
}

int rb_cmd_artifact(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage, stdout);
			return 0;
		}
	struct args a = {0};
	int rc = parse(argc, argv, &a);
	if (rc)
		return rc;
	const char *tenant = a.tenant ? a.tenant : "local";
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_paths paths;
	if (rb_paths_init(&paths, rb_cli_host(), a.state_dir, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	/* Reading never creates a state directory (as `runbox ledger`). */
	struct stat st;
	if (stat(paths.state_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rb_err("artifact: no state directory `%s` (no runs recorded there)", paths.state_dir);
		return 125;
	}
	__attribute__((cleanup(ledger_closep))) struct rb_ledger *l = NULL;
	if (rb_ledger_open(paths.state_dir, &l, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	char store[sizeof paths.state_dir + 16];
	snprintf(store, sizeof store, "%s/artifacts", paths.state_dir);

	if (!strcmp(a.sub, "ls")) {
		_cleanup_json_ json_t *arts = NULL;
		if ((rc = run_artifacts(l, a.pos, tenant, &arts)))
			return rc;
		if (a.json)
			return rb_json_print(stdout, arts, JSON_INDENT(2)) < 0 && errno != EPIPE ? 125 : 0;
		printf("%12s  %10s  %-71s  %s\n", "SIZE", "REDACTIONS", "DIGEST", "PATH");
		size_t i;
		json_t *x;
		json_array_foreach(arts, i, x)
		{
			printf("%12" JSON_INTEGER_FORMAT "  %10" JSON_INTEGER_FORMAT "  %-71s  ",
			       json_integer_value(json_object_get(x, "size")), redactions(x),
			       json_string_value(json_object_get(x, "digest")) ?: "");
			rb_ttysafe_fputs(stdout, json_string_value(json_object_get(x, "path")) ?: "");
			fputc('\n', stdout);
		}
		return fflush(stdout) == EOF && errno != EPIPE ? 125 : 0;
	}

	/* get and inspect: a digest, or (get) RUN:PATH. */
	char digest[RB_ARTIFACT_DIGEST_LEN + 8];
	if (rb_artifact_digest_valid(a.pos)) {
		snprintf(digest, sizeof digest, "%s%s", strncmp(a.pos, "sha256:", 7) ? "sha256:" : "", a.pos);
		bool found = false;
		if (rb_ledger_tenant_has_artifact(l, tenant, digest, &found, &err) < 0) {
			rb_err("artifact: %s", err.msg);
			return 125;
		}
		/* One message for a digest nobody stored and one another tenant's run stored: the
		 * store tells no tenant what exists beyond its own. */
		if (!found) {
			rb_err("artifact: no artifact %s stored by a run of tenant `%s`", digest, tenant);
			return 125;
		}
	} else if (!strcmp(a.sub, "get") && strchr(a.pos, ':')) {
		const char *colon = strchr(a.pos, ':');
		char run[128];
		snprintf(run, sizeof run, "%.*s", (int)(colon - a.pos), a.pos);
		_cleanup_json_ json_t *arts = NULL;
		if ((rc = run_artifacts(l, run, tenant, &arts)))
			return rc;
		const char *d = NULL;
		size_t i;
		json_t *x;
		json_array_foreach(arts, i,
		                   x) if (!strcmp(json_string_value(json_object_get(x, "path")) ?: "", colon + 1)) d =
		    json_string_value(json_object_get(x, "digest"));
		if (!d) {
			rb_err("artifact: run `%s` has no artifact `%s` (`runbox artifact ls %s` lists them)", run,
			       colon + 1, run);
			return 125;
		}
		snprintf(digest, sizeof digest, "%s", d);
	} else {
		rb_err("artifact %s: `%s`: expected sha256:<64 lowercase hex>%s", a.sub, a.pos,
		       !strcmp(a.sub, "get") ? " or RUN:PATH" : "");
		return 125;
	}

	if (!strcmp(a.sub, "get")) {
		_cleanup_free_ char *data = NULL;
		size_t len;
		if (rb_artifact_read(store, digest, &data, &len, &err) < 0) {
			rb_err("artifact get: %s", err.msg);
			return 125;
		}
		return write_out(&a, data, len);
	}
	_cleanup_json_ json_t *rows = NULL;
	if (rb_ledger_artifact_events(l, digest, tenant, &rows, &err) < 0) {
		rb_err("artifact: %s", err.msg);
		return 125;
	}
	char path[4200];
	bool present = rb_artifact_path(store, digest, path, &err) == 0 && lstat(path, &st) == 0 && S_ISREG(st.st_mode);
	if (a.json) {
		_cleanup_json_ json_t *o =
		    json_pack("{s:s, s:I, s:b, s:O}", "digest", digest, "size",
		              json_integer_value(json_object_get(json_array_get(rows, 0), "size")), "in_store", present,
		              "stored_by", rows);
		return rb_json_print(stdout, o, JSON_INDENT(2)) < 0 && errno != EPIPE ? 125 : 0;
	}
	printf("digest  %s\nsize    %" JSON_INTEGER_FORMAT "\nstore   %s\n", digest,
	       json_integer_value(json_object_get(json_array_get(rows, 0), "size")),
	       present ? "present" : "removed (runbox gc)");
	printf("%-24s  %-16s  %-16s  %-28s  %4s  %s\n", "TIME (UTC)", "TENANT", "AGENT", "RUN", "STEP", "PATH");
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
	{
		printf("%-24s  %-16s  %-16s  %-28s  %4" JSON_INTEGER_FORMAT "  ",
		       json_string_value(json_object_get(r, "ts")), json_string_value(json_object_get(r, "tenant")),
		       json_string_value(json_object_get(r, "agent")), json_string_value(json_object_get(r, "run_id")),
		       json_integer_value(json_object_get(r, "step")));
		rb_ttysafe_fputs(stdout, json_string_value(json_object_get(r, "path")) ?: "");
		fputc('\n', stdout);
	}
	return fflush(stdout) == EOF && errno != EPIPE ? 125 : 0;
}

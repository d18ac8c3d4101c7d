/* `runbox image import|build|ls|inspect|rm|tag`: the image store (images/store.h, import.h, build.h)
 * from the command line. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "common/cleanup.h"
#include "common/jsonout.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/ttysafe.h"
#include "common/util.h"
#include "images/build.h"
#include "images/import.h"
#include "images/store.h"
#include "policy/policy.h"
#include "runtime/run/buildcmd.h"
#include "runtime/run/lifecycle.h"
#include "runtime/sandbox/factory.h"

static const char usage[] =
    "usage: runbox image import SRC [--name NAME] [--policy NAME|FILE] [--max-members N] [--max-bytes SIZE]\n"
    "                           [--keep-setuid] [--keep-file-caps]\n"
    "       runbox image build RECIPE.json [--name NAME] [--policy NAME|FILE] [--keep-setuid] [--keep-file-caps]\n"
    "       runbox image ls [--digests] [--json]\n"
    "       runbox image gc [--dry-run] [--json]\n"
    "       runbox image inspect NAME|DIGEST\n"
    "       runbox image rm NAME|DIGEST\n"
    "       runbox image tag NAME|DIGEST NEWNAME\n"
    "Every form takes --state-dir DIR. SRC is a directory or a tarball (.tar, .tar.gz, .tar.zst,\n"
    ".tar.xz) or an OCI layout, below the policy's images.allow (--policy, default `default`); the\n"
    "defaults are --max-members 1000000 and --max-bytes 16G.\n";

struct img_args {
	const char *state_dir, *name, *policy;
	const char *pos[3];
	int npos;
	bool json, digests, keep_setuid, keep_file_caps, dry_run;
	uint64_t max_members, max_bytes;
};

static int bad(const char *what, const char *arg)
{
	rb_err("image: %s `%s` (see `runbox image --help`)", what, arg);
	return -1;
}

static int parse(int argc, char **argv, struct img_args *a)
{
	a->max_members = RB_IMPORT_MAX_MEMBERS;
	a->max_bytes = RB_IMPORT_MAX_BYTES;
	bool options = true;
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;
		if (options && (!strcmp(arg, "--help") || !strcmp(arg, "-h"))) {
			fputs(usage, stdout);
			return 1;
		}
		if (!options || arg[0] != '-' || !arg[1]) {
			if (a->npos >= 3)
				return bad("unexpected argument", arg);
			a->pos[a->npos++] = arg;
		} else if (!strcmp(arg, "--")) {
			options = false;
		} else if (!strcmp(arg, "--json")) {
			a->json = true;
		} else if (!strcmp(arg, "--digests")) {
			a->digests = true;
		} else if (!strcmp(arg, "--keep-setuid")) {
			a->keep_setuid = true;
		} else if (!strcmp(arg, "--keep-file-caps")) {
			a->keep_file_caps = true;
		} else if (!strcmp(arg, "--dry-run")) {
			a->dry_run = true;
		} else if (!strcmp(arg, "--state-dir") || !strcmp(arg, "--name") || !strcmp(arg, "--policy") ||
		           !strcmp(arg, "--max-members") || !strcmp(arg, "--max-bytes")) {
			if (!val || !*val)
				return bad("this option needs a value:", arg);
			i++;
			if (!strcmp(arg, "--state-dir")) {
				a->state_dir = val;
			} else if (!strcmp(arg, "--name")) {
				a->name = val;
			} else if (!strcmp(arg, "--policy")) {
				a->policy = val;
			} else if (!strcmp(arg, "--max-bytes")) {
				if (rb_parse_size(val, &a->max_bytes) < 0 || !a->max_bytes)
					return bad("--max-bytes takes a size (4096, 64M, 2G), not", val);
			} else {
				char *end;
				errno = 0;
				unsigned long long n = strtoull(val, &end, 10);
				if (errno || *end || !n || val[0] == '-')
					return bad("--max-members takes a positive count, not", val);
				a->max_members = n;
			}
		} else {
			return bad("unknown option", arg);
		}
	}
	return 0;
}

static const char *human(uint64_t b, char buf[32])
{
	if (b < 1024)
		snprintf(buf, 32, "%" PRIu64 "B", b);
	else if (b < (1u << 20))
		snprintf(buf, 32, "%.1fK", b / 1024.0);
	else if (b < (1u << 30))
		snprintf(buf, 32, "%.1fM", b / 1048576.0);
	else
		snprintf(buf, 32, "%.1fG", b / 1073741824.0);
	return buf;
}

static const char *when(json_int_t t, char buf[32])
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&tt, &tm) || !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, 32, "-");
	return buf;
}

static int ls(const struct rb_paths *p, const struct img_args *a)
{
	struct rb_error err;
	_cleanup_json_ json_t *list = NULL;
	if (rb_store_list(p, &list, &err) < 0) {
		rb_err("image ls: %s", err.msg);
		return 125;
	}
	if (a->json)
		return rb_json_print(stdout, list, JSON_INDENT(2)) < 0 ? 125 : 0;
	printf("%-24s %-*s %9s %s\n", "NAME", a->digests ? 71 : 19, "DIGEST", "SIZE", "CREATED");
	size_t i;
	json_t *img;
	json_array_foreach(list, i, img)
	{
		const char *d = json_string_value(json_object_get(img, "digest"));
		char sz[32], at[32], shown[300];
		json_t *names = json_object_get(img, "names");
		size_t n = json_array_size(names);
		for (size_t j = 0; j < (n ? n : 1); j++) {
			const char *nm = n ? json_string_value(json_array_get(names, j)) : "<none>";
			rb_ttysafe_line(nm, shown, sizeof shown);
			printf("%-24s %-*.*s %9s %s\n", shown, a->digests ? 71 : 19, a->digests ? 71 : 19, d,
			       human((uint64_t)json_integer_value(json_object_get(img, "size")), sz),
			       when(json_integer_value(json_object_get(img, "created")), at));
		}
	}
	return 0;
}

static int inspect(const struct rb_paths *p, const struct img_args *a)
{
	struct rb_error err;
	struct rb_store_image img;
	if (rb_store_lookup(p, a->pos[1], &img, &err) != 0) {
		rb_err("image inspect: %s", err.msg);
		return 125;
	}
	char at[32];
	_cleanup_json_ json_t *o =
	    json_pack("{s:s, s:s, s:I, s:I, s:I, s:s, s:s, s:s}", "ref", a->pos[1], "digest", img.digest, "size",
	              (json_int_t)img.size, "files", (json_int_t)img.files, "created", (json_int_t)img.created,
	              "created_utc", when(img.created, at), "source", img.source, "rootfs", img.rootfs);
	return rb_json_print(stdout, o, JSON_INDENT(2)) < 0 ? 125 : 0;
}

/* Unnamed images no live run uses, and the leftovers of imports and builds that died. */
static int gc(const struct rb_paths *p, const struct img_args *a)
{
	struct rb_error err;
	_cleanup_json_ json_t *runs = NULL, *report = NULL;
	if (rb_lifecycle_list(p, &runs, &err) < 0 || rb_image_gc(p, runs, a->dry_run, &report, &err) < 0) {
		rb_err("image gc: %s", err.msg);
		return 125;
	}
	if (a->json)
		return rb_json_print(stdout, report, JSON_INDENT(2)) < 0 ? 125 : 0;
	size_t i;
	json_t *r;
	json_t *removed = json_object_get(report, "removed");
	json_array_foreach(removed, i, r)
	{
		const char *d = json_string_value(json_object_get(r, "digest"));
		char sz[32];
		if (d)
			printf("%s %s %s\n", a->dry_run ? "would remove" : "removed", d,
			       human((uint64_t)json_integer_value(json_object_get(r, "size")), sz));
		else
			printf("%s temporary %s\n", a->dry_run ? "would remove" : "removed",
			       json_string_value(json_object_get(r, "temporary")));
	}
	printf("%zu removed, %" JSON_INTEGER_FORMAT " kept\n", json_array_size(removed),
	       json_integer_value(json_object_get(report, "kept")));
	return 0;
}

/* SIGINT and SIGTERM become a byte on the build's cancel pipe: the build stops mmdebstrap and
 * removes what it made, rather than dying with a half-made tree in the store. */
static int cancel_pipe[2] = {-1, -1};
static int cancel_event = -1; /* the same for the recipe's commands, runs that read a signal number */

static void on_cancel(int sig)
{
	int saved = errno;
	if (write(cancel_pipe[1], "x", 1) < 0) {
		/* the pipe is full: a cancel is already pending */
	}
	uint64_t v = (uint64_t)sig;
	if (cancel_event >= 0 && write(cancel_event, &v, sizeof v) < 0) {
		/* the counter is full: a cancel is already pending */
	}
	errno = saved;
}

static int build_with(const struct rb_paths *p, const struct img_args *a, const struct rb_factory *factory);

static int build(const struct rb_paths *p, const struct img_args *a)
{
	struct rb_error err;
	/* The recipe's commands run in sandboxes; the factory that makes them is a copy of runbox
	 * as it is here, before any thread or key (as `runbox run` starts it first). */
	struct rb_factory factory;
	if (rb_factory_start(&factory, &err) < 0) {
		rb_err("image build: %s", err.msg);
		return 125;
	}
	int code = build_with(p, a, &factory);
	rb_factory_stop(&factory);
	return code;
}

static int build_with(const struct rb_paths *p, const struct img_args *a, const struct rb_factory *factory)
{
	struct rb_error err;
	cancel_event = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cancel_event < 0 || pipe2(cancel_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		rb_err("image build: pipe: %s", strerror(errno));
		return 125;
	}
	struct sigaction sa = {.sa_handler = on_cancel};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	struct rb_build_runner runner = {.factory = factory,
	                                 .host = rb_cli_host(),
	                                 .policy = a->policy,
	                                 .state_dir = a->state_dir,
	                                 .cancel_fd = cancel_event,
	                                 .log_fd = STDERR_FILENO};
	struct rb_policy pol;
	if (rb_policy_load(a->policy ? a->policy : "default", p->data_dir, p->config_dir, &pol, &err) < 0) {
		rb_err("image build: %s", err.msg);
		rb_policy_free(&pol);
		return 125;
	}
	struct rb_build_opts o = {.name = a->name,
	                          .cancel_fd = cancel_pipe[0],
	                          .log_fd = STDERR_FILENO,
	                          .run_commands = rb_build_run_commands,
	                          .commands_ctx = &runner,
	                          .pol = &pol,
	                          .keep_setuid = a->keep_setuid,
	                          .keep_file_caps = a->keep_file_caps};
	/* On a terminal a bar over mmdebstrap's own I:/W:/E: lines; elsewhere its output as it was. */
	struct rb_cli_progress prog;
	rb_cli_progress_init(&prog, STDERR_FILENO, "build", false);
	if (prog.tty)
		o.progress = rb_cli_progress_sink(&prog);
	char digest[72];
	int r = rb_image_build(p, a->pos[1], &o, digest, &err);
	rb_cli_progress_end(&prog, r == 0);
	rb_policy_free(&pol);
	if (r < 0) {
		rb_err("%s", err.msg);
		return err.errnum == ECANCELED ? 130 : 125;
	}
	printf("%s\n", digest);
	return 0;
}

int rb_cmd_image(int argc, char **argv)
{
	struct img_args a = {0};
	int pr = parse(argc, argv, &a);
	if (pr)
		return pr > 0 ? 0 : 125;
	const char *sub = a.npos ? a.pos[0] : "";
	int want = !strcmp(sub, "ls") || !strcmp(sub, "gc") ? 1 : !strcmp(sub, "tag") ? 3 : 2;
	if (!a.npos || a.npos != want ||
	    (strcmp(sub, "ls") != 0 && strcmp(sub, "gc") != 0 && strcmp(sub, "import") != 0 &&
	     strcmp(sub, "build") != 0 && strcmp(sub, "inspect") != 0 && strcmp(sub, "rm") != 0 &&
	     strcmp(sub, "tag") != 0)) {
		fputs(usage, stderr);
		return 125;
	}
	struct rb_paths p;
	struct rb_error err;
	if (rb_paths_init(&p, rb_cli_host(), a.state_dir, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	if (!strcmp(sub, "ls"))
		return ls(&p, &a);
	if (!strcmp(sub, "inspect"))
		return inspect(&p, &a);
	if (!strcmp(sub, "import")) {
		struct rb_policy pol;
		if (rb_policy_load(a.policy ? a.policy : "default", p.data_dir, p.config_dir, &pol, &err) < 0) {
			rb_err("image import: %s", err.msg);
			rb_policy_free(&pol);
			return 125;
		}
		struct rb_import_opts o = {.pol = &pol,
		                           .name = a.name,
		                           .max_members = a.max_members,
		                           .max_bytes = a.max_bytes,
		                           .keep_setuid = a.keep_setuid,
		                           .keep_file_caps = a.keep_file_caps};
		struct rb_cli_progress prog;
		rb_cli_progress_init(&prog, STDERR_FILENO, "import", a.json);
		o.progress = rb_cli_progress_sink(&prog);
		char digest[72];
		int r = rb_image_import(&p, a.pos[1], &o, digest, &err);
		rb_cli_progress_end(&prog, r == 0);
		rb_policy_free(&pol);
		if (r < 0) {
			rb_err("image import: %s", err.msg);
			return 125;
		}
		printf("%s\n", digest);
		return 0;
	}
	if (!strcmp(sub, "build"))
		return build(&p, &a);
	if (!strcmp(sub, "gc"))
		return gc(&p, &a);
	if (!strcmp(sub, "rm")) {
		_cleanup_json_ json_t *runs = NULL;
		if (rb_lifecycle_list(&p, &runs, &err) < 0 || rb_store_remove(&p, a.pos[1], runs, &err) < 0) {
			rb_err("image rm: %s", err.msg);
			return 125;
		}
		return 0;
	}
	struct rb_store_image img;
	if (rb_store_lookup(&p, a.pos[1], &img, &err) != 0 || rb_store_tag(&p, a.pos[2], img.digest, &err) < 0) {
		rb_err("image tag: %s", err.msg);
		return 125;
	}
	return 0;
}

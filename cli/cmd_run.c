/* `runbox run [OPTIONS] -- CMD ARGS...`: one step, one sandbox, the step's status as ours. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "cli/term.h"
#include "common/cleanup.h"
#include "common/ttysafe.h"
#include "common/jsonout.h"
#include "common/log.h"
#include "common/util.h"
#include "ledger/ledger.h"
#include "runtime/run/artifacts.h"
#include "runtime/run/collect.h"
#include "runtime/run/logs.h"
#include "runtime/run/record.h"
#include "runtime/run/result.h"
#include "runtime/run/runfile.h"
#include "runtime/run/run.h"
#include "runtime/run/session.h"

/* Signals belong to the CLI: SIGINT and SIGTERM become the run's cancel, an eventfd that
 * the handler writes the signal's number to (the session reads it, runtime/run/session.h).
 * Process-wide by nature: a handler has only globals to find its fd. */
static int cancel_efd = -1;

static void on_cancel_signal(int sig)
{
	int saved = errno;
	uint64_t v = (uint64_t)sig;
	if (write(cancel_efd, &v, sizeof v) < 0)
		(void)0; /* the counter is full: a cancel is pending anyway */
	errno = saved;
}

static int wire_cancel(void)
{
	if (cancel_efd < 0)
		cancel_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (cancel_efd < 0)
		return -1;
	struct sigaction sa = {.sa_handler = on_cancel_signal, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	return cancel_efd;
}

/* The terminal is the CLI's too: the step's output copied to ours as it comes, and to a
 * terminal with control bytes shown, never obeyed. A reader gone (`| head -1`, EPIPE) closes
 * that stream of the step. */
struct term_sink {
	struct rb_ttysafe tty[2];
	bool is_tty[2];
	bool raw; /* -t: the step's terminal's bytes, as they are, to ours */
};

static int to_terminal(void *ctx, const struct rb_chunk *c)
{
	struct term_sink *t = ctx;
	int i = c->stream == RB_STREAM_STDERR;
	int fd = i ? STDERR_FILENO : STDOUT_FILENO;
	int r = 0;
	if (t->raw) {
		/* The step has a terminal: its escapes are for a terminal, as under ssh or docker -t. */
		r = c->data ? rb_write_all(fd, c->data, c->len) : 0;
	} else if (!c->data) {
		char tail[8];
		if (t->is_tty[i])
			r = rb_write_all(fd, tail, rb_ttysafe_end(&t->tty[i], tail));
	} else if (t->is_tty[i]) {
		_cleanup_free_ char *safe = malloc(RB_TTYSAFE_ROOM(c->len));
		if (safe)
			r = rb_write_all(fd, safe, rb_ttysafe(&t->tty[i], c->data, c->len, safe));
	} else {
		r = rb_write_all(fd, c->data, c->len);
	}
	return r < 0 && errno == EPIPE ? -1 : 0;
}

/* One --input, as the library takes it: a struct, the string stays here. SRC[:DEST], where
 * DEST lies under /workspace/in/: an argument that names an existing host path is all SRC
 * (a path may hold `:`), else it splits at its last `:/workspace/in/`, else at its first `:`
 * (whose DEST the library then refuses, naming it). */
struct input_arg {
	char what[4200];
	char *from, *to;
	struct rb_input_req req;
};

static int parse_input(const char *arg, struct input_arg *in)
{
	snprintf(in->what, sizeof in->what, "--input `%s`", arg);
	struct stat st;
	const char *split = NULL;
	/* SRC[:DEST]:cow: a writable overlay over it (mounts.h), unless the whole names a path. */
	_cleanup_free_ char *own = NULL;
	size_t len = strlen(arg);
	bool cow = len > 4 && !strcmp(arg + len - 4, ":cow") && lstat(arg, &st) < 0;
	if (cow) {
		if (!(own = strndup(arg, len - 4)))
			return -1;
		arg = own;
	}
	if (lstat(arg, &st) < 0) {
		const char *mark = cow ? ":/workspace/" : ":/workspace/in/";
		for (const char *p = strstr(arg, mark); p; p = strstr(p + 1, mark))
			split = p;
		if (!split)
			split = strchr(arg, ':');
	}
	in->from = split ? strndup(arg, (size_t)(split - arg)) : strdup(arg);
	if (!in->from)
		return -1;
	in->req = (struct rb_input_req){in->from, split ? split + 1 : NULL, in->what, cow};
	if (split && !(in->to = strdup(split + 1)))
		return -1;
	in->req.to = in->to;
	return 0;
}

struct input_list {
	struct input_arg *v;
	unsigned n;
};

static void free_inputs(struct input_list *l)
{
	for (unsigned i = 0; l->v && i < l->n; i++) {
		free(l->v[i].from);
		free(l->v[i].to);
	}
	free(l->v);
}

static void usage(FILE *f)
{
	fputs("usage: runbox run [OPTIONS] -- CMD [ARGS...]\n"
	      "       runbox run [OPTIONS] SPEC.json|- [OPTIONS]   (a manifest, `-` from stdin; the options are\n"
	      "                                                   ceilings for it)\n"
	      "Options may come before or after a manifest, and before `--` (or the first word of a command).\n"
	      "  --image NAME|DIR      minimal | host (default host) | an absolute path to a root filesystem\n"
	      "  --policy NAME|FILE    a shipped profile (default, strict) or a policy file\n"
	      "  --timeout DUR         e.g. 2.5s, 300ms, 1m: at most the policy's (default: the policy's)\n"
	      "  --input SRC[:DEST]    bind SRC read-only at DEST under /workspace/in (repeatable)\n"
	      "  --input SRC[:DEST]:cow  a writable overlay over folder SRC at DEST under /workspace (default\n"
	      "                        /workspace/in/NAME), discarded at the run's end; SRC never changes\n"
	      "  --memory SIZE         memory limit, e.g. 256M (at most the policy's)\n"
	      "  --pids N              process limit (at most the policy's)\n"
	      "  --cpus X              cpu quota in cores, e.g. 0.5 (at most the policy's)\n"
	      "  --net none|gateway    network mode (default: the policy's)\n"
	      "  --gateway-config FILE the gateway's connectors (default: gateway.json in the config dir)\n"
	      "  --tenant ID, --agent ID  whose run this is (ledger); beside a manifest, the manifest's must match\n"
	      "  -e, --env NAME[=VALUE] set a variable the policy's env.pass lets through (repeatable); a name\n"
	      "                        it does not pass is an error\n"
	      "  -w, --workdir DIR     the step's working directory (absolute; default /workspace)\n"
	      "  -i, --interactive     stream runbox's stdin into the step's (at most 256 MiB; EOF closes it);\n"
	      "                        without it the step's stdin is /dev/null\n"
	      "  -t, --tty             a terminal for the step (a pty of the sandbox's own; -it for an\n"
	      "                        interactive shell: ours in raw mode, its size followed); runbox's stdin\n"
	      "                        must be a terminal, -tt forces one without\n"
	      "  --label KEY=VALUE     recorded in the ledger's run_start (repeatable)\n"
	      "  --output DIR          after the run, copy its artifacts (its last harvest) into DIR\n"
	      "  --force               with --output: replace files that exist in DIR\n"
	      "  --json                print the result as one JSON object\n"
	      "  --state-dir DIR       where runbox keeps state (also RUNBOX_STATE_DIR)\n"
	      "  -v, --verbose         log what runbox does\n"
	      "Exit: the step's status; 128+n if signal n killed it; 124 timeout; 125 runbox failed;\n"
	      "126 not executable; 127 not found.\n",
	      f);
}

/* What the command line adds to a run beside its limits. */
struct extras {
	const char *output; /* --output DIR */
	bool force;
	bool json;
	json_t *labels;      /* --label: {"K": "V"} or NULL */
	const char *workdir; /* -w: the step's working directory */
	bool interactive;    /* -i: our stdin streamed into the step's */
	unsigned tty;        /* -t: a terminal for the step; -tt: also when our stdin is none */
	const char *env[RB_POLICY_MAX_LIST];
	unsigned n_env;
};

/* --output DIR: the run's artifacts (its last harvest, as the ledger recorded them) copied out
 * of the store under the names they were stored with. Returns 0 or 125 (reported). */
static int copy_out(const char *state_dir, const char *run_id, const char *tenant, const struct extras *x)
{
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_paths paths;
	if (rb_paths_init(&paths, rb_cli_host(), state_dir, &err) < 0) {
		rb_err("--output: %s", err.msg);
		return 125;
	}
	struct rb_ledger *l = NULL;
	json_t *arts = NULL;
	if (rb_ledger_open(paths.state_dir, &l, &err) < 0 ||
	    rb_ledger_run_artifacts(l, run_id, tenant, &arts, &err) < 0) {
		rb_err("--output: %s", err.msg);
		if (l)
			rb_ledger_close(l);
		return 125;
	}
	rb_ledger_close(l);
	if (mkdir(x->output, 0755) < 0 && errno != EEXIST) {
		rb_err("--output `%s`: mkdir: %s", x->output, strerror(errno));
		json_decref(arts);
		return 125;
	}
	_cleanup_close_ int dfd = open(x->output, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		rb_err("--output `%s`: open: %s", x->output, strerror(errno));
		json_decref(arts);
		return 125;
	}
	char store[sizeof paths.state_dir + 16];
	snprintf(store, sizeof store, "%s/artifacts", paths.state_dir);
	int rc = 0;
	size_t i, copied = 0;
	json_t *a;
	json_array_foreach(arts, i, a)
	{
		const char *path = json_string_value(json_object_get(a, "path"));
		const char *digest = json_string_value(json_object_get(a, "digest"));
		if (!path || !digest)
			continue;
		if (rb_artifact_export(store, digest, dfd, path, x->force, &err) < 0) {
			rb_err("--output `%s`: %s", x->output, err.msg);
			rc = 125;
			continue;
		}
		copied++;
	}
	if (!x->json)
		fprintf(stderr, "runbox: %zu artifact%s copied to %s\n", copied, copied == 1 ? "" : "s", x->output);
	json_decref(arts);
	return rc;
}

/* Text mode of a manifest run: a line per step as it ends, the run id first (stderr) and a
 * summary last. */
struct view {
	bool json;                   /* the id is in the JSON: not said on stderr */
	struct rb_cli_progress prog; /* each step's harvest on stderr (text mode) */
	char run_id[80];
	size_t artifacts;
	uint64_t redactions;
	unsigned steps;
};

static void view_begin(void *ctx, const char *run_id)
{
	struct view *v = ctx;
	snprintf(v->run_id, sizeof v->run_id, "%s", run_id);
	if (!v->json)
		fprintf(stderr, "runbox: run %s\n", run_id);
}

static void view_step(void *ctx, const json_t *st)
{
	struct view *v = ctx;
	json_t *h = json_object_get(st, "harvest");
	size_t arts = json_array_size(json_object_get(h, "artifacts"));
	json_int_t red = json_integer_value(json_object_get(h, "redactions_total"));
	const char *name = json_string_value(json_object_get(st, "name"));
	/* Each harvest walks all of /workspace/out: the last is the run's state, not a sum. */
	if (h) {
		v->artifacts = arts;
		v->redactions = (uint64_t)(red > 0 ? red : 0);
	}
	v->steps++;
	/* The harvest's line is over before the step's own line is said; the next step's begins
	 * with its first report. */
	rb_cli_progress_end(&v->prog, h != NULL);
	rb_cli_progress_init(&v->prog, STDERR_FILENO, "harvest", v->json);
	v->prog.from_first = true;
	char wall[32];
	snprintf(wall, sizeof wall, "%.1f ms", json_number_value(json_object_get(st, "wall_ms")));
	printf("step %" JSON_INTEGER_FORMAT " ", json_integer_value(json_object_get(st, "step")));
	if (name)
		rb_ttysafe_fputs(stdout, name);
	else
		fputs("-", stdout);
	printf(": %s, exit %" JSON_INTEGER_FORMAT ", %s, %zu artifact%s, %" JSON_INTEGER_FORMAT " redaction%s\n",
	       json_string_value(json_object_get(st, "status")), json_integer_value(json_object_get(st, "exit")), wall,
	       arts, arts == 1 ? "" : "s", red, red == 1 ? "" : "s");
	const char *e = json_string_value(json_object_get(st, "error"));
	if (e) {
		fputs("  error: ", stdout);
		rb_ttysafe_fputs(stdout, e);
		fputc('\n', stdout);
	}
	fflush(stdout);
}

static void view_end(void *ctx, const json_t *res)
{
	struct view *v = ctx;
	printf("run %s: %s, %u step%s, %zu artifact%s, %" PRIu64 " redaction%s, exit %" JSON_INTEGER_FORMAT "\n",
	       v->run_id, json_string_value(json_object_get(res, "result")), v->steps, v->steps == 1 ? "" : "s",
	       v->artifacts, v->artifacts == 1 ? "" : "s", v->redactions, v->redactions == 1 ? "" : "s",
	       json_integer_value(json_object_get(res, "exit")));
	const char *e = json_string_value(json_object_get(res, "error"));
	if (e) {
		fputs("  error: ", stdout);
		rb_ttysafe_fputs(stdout, e);
		fputc('\n', stdout);
	}
	fflush(stdout);
}

/* Every option given beside a manifest is a ceiling for it (runfile.h); --input and --env are
 * the manifest's own business, so they are refused rather than dropped. */
static int run_manifest(const char *path, const struct rb_run_config *cfg, const struct extras *x)
{
	if (cfg->n_inputs || x->n_env) {
		rb_err("run %s: --%s does not combine with a manifest (list them in its `%s`)", path,
		       cfg->n_inputs ? "input" : "env", cfg->n_inputs ? "inputs" : "env");
		return 125;
	}
	if (x->interactive) {
		rb_err("run %s: -i does not combine with a manifest (its steps' stdin is /dev/null; a step's input "
		       "goes in its `inputs` or its script)",
		       path);
		return 125;
	}
	if (x->workdir) {
		rb_err("run %s: --workdir does not combine with a manifest (a script says `cd` itself)", path);
		return 125;
	}
	if (x->tty) {
		rb_err("run %s: -t does not combine with a manifest (its steps run without a terminal)", path);
		return 125;
	}
	struct view v = {.json = x->json};
	rb_cli_progress_init(&v.prog, STDERR_FILENO, "harvest", x->json);
	v.prog.from_first = true;
	struct rb_runfile_opts opts = {
	    .state_dir = cfg->state_dir,
	    .ceilings = {.tenant = cfg->tenant,
	                 .agent = cfg->agent,
	                 .policy = cfg->policy,
	                 .image = cfg->image,
	                 .limits = {cfg->timeout_ms, cfg->memory_bytes, cfg->pids, cfg->cpus}},
	    .net_mode = cfg->net_mode,
	    .labels = x->labels,
	    .on_begin = view_begin,
	    .on_step = x->json ? NULL : view_step,
	    .on_end = x->json ? NULL : view_end,
	    .ctx = &v,
	    .gateway_config = cfg->gateway_config,
	    .cancel_fd = cfg->cancel_fd,
	    .factory = cfg->factory,
	    .host = cfg->host,
	    .progress = rb_cli_progress_sink(&v.prog),
	};
	struct rb_error err;
	rb_error_clear(&err);
	int code;
	if (rb_runfile_execute(path, &opts, x->json ? stdout : NULL, &code, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	if (x->output && v.run_id[0]) {
		/* The manifest's tenant, which the ceilings held to --tenant when given. */
		struct rb_ledger *l = NULL;
		struct rb_paths paths;
		const char *tenant = cfg->tenant;
		char t[80] = "";
		if (!tenant && rb_paths_init(&paths, rb_cli_host(), cfg->state_dir, &err) == 0 &&
		    rb_ledger_open(paths.state_dir, &l, &err) == 0) {
			json_t *ev = NULL;
			struct rb_ledger_filter f = {.run_id = v.run_id, .type = "run_start", .limit = 1};
			if (rb_ledger_query(l, &f, &ev, &err) == 0)
				snprintf(t, sizeof t, "%s",
				         json_string_value(json_object_get(json_array_get(ev, 0), "tenant")) ?: "");
			json_decref(ev);
			rb_ledger_close(l);
			tenant = t;
		}
		int rc = copy_out(cfg->state_dir, v.run_id, tenant ? tenant : "local", x);
		if (rc && !code)
			code = rc;
	}
	return code;
}

/* -e NAME[=VALUE]: the policy decides which variables reach a step (env.pass, copied from
 * runbox's own environment); -e may only name one of those, and gives it its value by setting
 * it in runbox's environment, where the policy takes it from. */
static int apply_env(const struct rb_policy *pol, const struct extras *x)
{
	for (unsigned i = 0; i < x->n_env; i++) {
		const char *e = x->env[i], *eq = strchr(e, '=');
		size_t len = eq ? (size_t)(eq - e) : strlen(e);
		bool passed = false;
		for (unsigned k = 0; k < pol->n_env_pass; k++)
			if (strlen(pol->env_pass[k]) == len && !strncmp(pol->env_pass[k], e, len))
				passed = true;
		if (!passed) {
			char list[1024] = "";
			size_t n = 0;
			for (unsigned k = 0; k < pol->n_env_pass && n < sizeof list; k++)
				n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "",
				                      pol->env_pass[k]);
			rb_err("--env `%.*s`: policy `%s` does not pass it (its env.pass: %s); only the operator's "
			       "policy widens the environment",
			       (int)len, e, pol->name, pol->n_env_pass ? list : "none");
			return 125;
		}
		if (eq) {
			char name[256];
			snprintf(name, sizeof name, "%.*s", (int)len, e);
			if (setenv(name, eq + 1, 1) < 0) {
				rb_err("--env `%s`: %s", name, strerror(errno));
				return 125;
			}
		}
	}
	return 0;
}

/* The ledger's record of a one-step run: the command, its end, the run's end. */
static int record_step(struct rb_record *rec, char **cmd, const struct rb_step_result *res, bool started,
                       struct rb_error *err)
{
	if (!started) {
		size_t bad;
		json_t *a = rb_json_strv(cmd, &bad);
		if (!a)
			return rb_error_set(err, EINVAL, "argv[%zu] of the command is not valid UTF-8", bad);
		char *text = json_dumps(a, JSON_COMPACT);
		json_decref(a);
		int r = text ? rb_record_step_start(rec, 1, NULL, "command", text, strlen(text), NULL, NULL, err)
		             : rb_error_set(err, ENOMEM, "the command's record");
		free(text);
		return r;
	}
	return rb_record_step_end(rec, 1, res, err);
}

/* Text mode says on stderr what the JSON result would: each limit that was asked for and not
 * enforced, and a step the OOM killer or seccomp killed, one line each. */
static void report_limits(const struct rb_run *run, const struct rb_step_result *res)
{
	if (!run->cg || res->status == RB_STEP_SETUP_FAILED)
		return;
	for (int k = 0; k < RB_LIMIT_COUNT; k++) {
		const struct rb_limit_status *ls = rb_cgroup_limit(run->cg, (enum rb_limit_kind)k);
		char v[48];
		switch (k) {
		case RB_LIMIT_MEMORY: snprintf(v, sizeof v, "%" PRIu64 " bytes", run->limits.memory_bytes); break;
		case RB_LIMIT_PIDS: snprintf(v, sizeof v, "%" PRIu64, run->limits.pids); break;
		case RB_LIMIT_CPUS: snprintf(v, sizeof v, "%g", run->limits.cpus); break;
		default: snprintf(v, sizeof v, "%" PRIu64, run->limits.cpu_weight); break;
		}
		if (ls->requested && !ls->enforced)
			rb_warn("the %s limit (%s) was not enforced: %s", rb_limit_name((enum rb_limit_kind)k), v,
			        ls->reason[0] ? ls->reason : "no cgroup controller for it");
	}
	if (res->oom_killed)
		rb_err("the OOM killer killed the step (or a process it waited for): it reached the memory limit");
	if (res->seccomp_killed)
		rb_err("seccomp killed the step (SIGSYS): it made a system call the policy does not allow");
}

/* -t: the step's terminal sized as ours (stdin's, else stdout's, else 24x80) and following it;
 * with -i on a terminal, ours in raw mode, so every key reaches the step's terminal as typed
 * (^C there is the step's SIGINT). A hangup is a cancel, as SIGINT and SIGTERM are. */
static int start_terminal(const struct extras *x, struct rb_step_req *req, int *resize_fd)
{
	int src = isatty(STDIN_FILENO) ? STDIN_FILENO : isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
	req->tty = true;
	if (src < 0 || !rb_term_size(src, &req->tty_size))
		req->tty_size = (struct rb_tty_size){24, 80};
	struct sigaction sa;
	if (sigaction(SIGINT, NULL, &sa) == 0)
		sigaction(SIGHUP, &sa, NULL);
	if (src >= 0 && (*resize_fd = rb_term_watch_size(src)) < 0) {
		rb_err("run -t: the terminal's size: %s", strerror(errno));
		return -1;
	}
	req->resize_fd = *resize_fd;
	if (x->interactive && isatty(STDIN_FILENO) && rb_term_raw(STDIN_FILENO) < 0) {
		rb_err("run -it: raw mode on the terminal: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* "-" or a name ending in ".json": a manifest, where a command would be. */
static bool is_manifest(const char *arg)
{
	size_t n = strlen(arg);
	return !strcmp(arg, "-") || (n > 5 && !strcmp(arg + n - 5, ".json"));
}

enum {
	OPT_IMAGE = 256,
	OPT_POLICY,
	OPT_TIMEOUT,
	OPT_INPUT,
	OPT_MEMORY,
	OPT_PIDS,
	OPT_CPUS,
	OPT_NET,
	OPT_JSON,
	OPT_TENANT,
	OPT_AGENT,
	OPT_STATE,
	OPT_OUTPUT,
	OPT_FORCE,
	OPT_LABEL,
	OPT_VERSION,
	OPT_GATEWAY_CONFIG,
};

int rb_cmd_run(int argc, char **argv, const struct rb_factory *factory)
{
	static const struct option opts[] = {
	    {"image", required_argument, NULL, OPT_IMAGE},
	    {"policy", required_argument, NULL, OPT_POLICY},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"input", required_argument, NULL, OPT_INPUT},
	    {"memory", required_argument, NULL, OPT_MEMORY},
	    {"pids", required_argument, NULL, OPT_PIDS},
	    {"cpus", required_argument, NULL, OPT_CPUS},
	    {"net", required_argument, NULL, OPT_NET},
	    {"json", no_argument, NULL, OPT_JSON},
	    {"tenant", required_argument, NULL, OPT_TENANT},
	    {"agent", required_argument, NULL, OPT_AGENT},
	    {"state-dir", required_argument, NULL, OPT_STATE},
	    {"output", required_argument, NULL, OPT_OUTPUT},
	    {"force", no_argument, NULL, OPT_FORCE},
	    {"env", required_argument, NULL, 'e'},
	    {"workdir", required_argument, NULL, 'w'},
	    {"interactive", no_argument, NULL, 'i'},
	    {"tty", no_argument, NULL, 't'},
	    {"label", required_argument, NULL, OPT_LABEL},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {"gateway-config", required_argument, NULL, OPT_GATEWAY_CONFIG},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct rb_run_config cfg = {
	    .net_mode = -1, .cancel_fd = wire_cancel(), .factory = factory, .host = rb_cli_host()};
	const char *inputs[RB_MAX_INPUTS] = {0};
	struct extras x = {0};
	_cleanup_json_ json_t *labels = NULL;
	const char *manifest = NULL;
	char gw_config[PATH_MAX];
	/* --verbose: this command's logger (main installs its own again after it). */
	static const struct rb_logger verbose = {.level = RB_LOG_DEBUG};
	optind = 1;
	opterr = 0;
	int c;
	/* Podman's way: options before and after a manifest are one set; a command's own words
	 * begin at `--` or at its first word, and are never runbox's. */
	for (;;) {
		c = getopt_long(argc, argv, "+vhite:w:", opts, NULL);
		if (c == -1) {
			if (optind < argc && strcmp(argv[optind - 1], "--") != 0 && !manifest &&
			    is_manifest(argv[optind]) && optind > 0) {
				manifest = argv[optind++];
				continue;
			}
			break;
		}
		switch (c) {
		case OPT_IMAGE: cfg.image = optarg; break;
		case OPT_POLICY: cfg.policy = optarg; break;
		case OPT_STATE: cfg.state_dir = optarg; break;
		case OPT_JSON: x.json = true; break;
		case OPT_OUTPUT: x.output = optarg; break;
		case OPT_FORCE: x.force = true; break;
		case OPT_VERSION: return rb_cmd_version(0, NULL);
		case 'i': x.interactive = true; break;
		case 't': x.tty++; break;
		case 'w':
			if (optarg[0] != '/' || strlen(optarg) >= 4096) {
				rb_err(
				    "--workdir `%s`: expected an absolute path inside the sandbox, like /workspace/src",
				    optarg);
				return 125;
			}
			x.workdir = optarg;
			break;
		case 'e':
			if (x.n_env >= RB_ARRAY_SIZE(x.env)) {
				rb_err("--env: at most %zu", RB_ARRAY_SIZE(x.env));
				return 125;
			}
			x.env[x.n_env++] = optarg;
			break;
		case OPT_LABEL: {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || eq - optarg > 128) {
				rb_err("--label `%s`: expected KEY=VALUE with a KEY of 1 to 128 characters", optarg);
				return 125;
			}
			if (!labels)
				labels = json_object();
			char key[129];
			snprintf(key, sizeof key, "%.*s", (int)(eq - optarg), optarg);
			json_t *v = json_string(eq + 1);
			if (!v || json_object_set_new(labels, key, v) < 0) {
				rb_err("--label `%s`: not valid UTF-8", optarg);
				return 125;
			}
			break;
		}
		case OPT_TENANT:
		case OPT_AGENT:
			if (!rb_manifest_id_ok(optarg)) {
				rb_err("--%s `%s`: expected an id ([A-Za-z0-9._-]{1,64}, not \".\" or \"..\")",
				       c == OPT_TENANT ? "tenant" : "agent", optarg);
				return 125;
			}
			*(c == OPT_TENANT ? &cfg.tenant : &cfg.agent) = optarg;
			break;
		case 'v': rb_log_use(&verbose); break;
		case 'h': usage(stdout); return 0;
		case OPT_TIMEOUT:
			if (rb_parse_duration_ms(optarg, &cfg.timeout_ms) < 0 || cfg.timeout_ms == 0) {
				rb_err("--timeout `%s`: expected a duration above 0 with a unit (ms, s, m or h), like "
				       "2.5s or 300ms",
				       optarg);
				return 125;
			}
			break;
		case OPT_MEMORY:
			if (rb_parse_size(optarg, &cfg.memory_bytes) < 0 || cfg.memory_bytes == 0) {
				rb_err("--memory `%s`: expected a size above 0 like 256M (units K, M, G, T)", optarg);
				return 125;
			}
			break;
		case OPT_PIDS: {
			/* Digits only: strtoull takes "-5" as 2^64 - 5, which reached pids.max. The range
			 * is the policy's limits.pids. */
			char *end;
			errno = 0;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (*end || optarg[0] < '0' || optarg[0] > '9' || errno || v == 0 || v > UINT32_MAX) {
				rb_err("--pids `%s`: expected a number from 1 to 4294967295", optarg);
				return 125;
			}
			cfg.pids = v;
			break;
		}
		case OPT_CPUS: {
			char *end;
			errno = 0;
			double v = strtod(optarg, &end);
			if (!isdigit((unsigned char)optarg[0]) || *end || errno || !(v > 0) || v > 4096) {
				rb_err("--cpus `%s`: expected a number of cores above 0 and at most 4096, like 0.5",
				       optarg);
				return 125;
			}
			cfg.cpus = v;
			break;
		}
		case OPT_NET:
			if (!strcmp(optarg, "none"))
				cfg.net_mode = RB_NET_NONE;
			else if (!strcmp(optarg, "gateway"))
				cfg.net_mode = RB_NET_GATEWAY;
			else {
				rb_err("--net `%s`: expected none or gateway", optarg);
				return 125;
			}
			break;
		case OPT_GATEWAY_CONFIG:
			/* Absolute, so the gateway finds it whatever its directory; it must exist now. */
			if (!realpath(optarg, gw_config)) {
				rb_err("--gateway-config `%s`: %s", optarg, strerror(errno));
				return 125;
			}
			cfg.gateway_config = gw_config;
			break;
		case OPT_INPUT:
			if (cfg.n_inputs >= RB_MAX_INPUTS) {
				rb_err("--input: at most %d inputs", RB_MAX_INPUTS);
				return 125;
			}
			inputs[cfg.n_inputs++] = optarg;
			break;
		default:
			rb_err("run: unknown or incomplete option `%s` (try `runbox run --help`)", argv[optind - 1]);
			return 125;
		}
	}
	x.labels = labels;
	if (x.force && !x.output) {
		rb_err("run: --force applies to --output only");
		return 125;
	}
	if (manifest) {
		if (optind < argc) {
			rb_err("run %s: unexpected `%s` after the manifest (a manifest's steps are its own)", manifest,
			       argv[optind]);
			return 125;
		}
		return run_manifest(manifest, &cfg, &x);
	}
	if (optind >= argc) {
		rb_err("run: no command given (usage: runbox run [OPTIONS] -- CMD ARGS... | runbox run SPEC.json)");
		return 125;
	}
	/* As docker: a terminal for the step wants one here to type into and size it by. */
	if (x.tty == 1 && !isatty(STDIN_FILENO)) {
		rb_err("run -t: the input device is not a TTY (runbox's stdin is no terminal; -tt gives the step "
		       "a terminal without one)");
		return 125;
	}
	__attribute__((cleanup(free_inputs))) struct input_list ins = {calloc(cfg.n_inputs + 1, sizeof *ins.v),
	                                                               cfg.n_inputs};
	struct rb_input_req reqs[RB_MAX_INPUTS];
	for (unsigned i = 0; i < cfg.n_inputs; i++) {
		if (!ins.v || parse_input(inputs[i], &ins.v[i]) < 0) {
			rb_err("--input: out of memory");
			return 125;
		}
		reqs[i] = ins.v[i].req;
	}
	cfg.input_reqs = reqs;
	char **cmd = argv + optind;
	/* The command travels as JSON text (to init, into the ledger): bytes that are not UTF-8
	 * cannot be carried exactly, and are refused before anything runs or is recorded. */
	size_t bad;
	json_t *text = rb_json_strv(cmd, &bad);
	if (!text) {
		rb_err("run: command argument %zu (the command itself is 1) is not valid UTF-8: runbox carries "
		       "commands as text; nothing was run",
		       bad + 1);
		return 125;
	}
	json_decref(text);

	struct rb_error err;
	rb_error_clear(&err);
	struct rb_run run;
	if (rb_run_open(&cfg, &run, &err) < 0) {
		rb_err("%s", err.msg);
		rb_run_close(&run);
		return 125;
	}
	if (apply_env(&run.policy, &x) != 0) {
		rb_run_close(&run);
		return 125;
	}
	rb_cli_host(); /* the environment as -e left it, which env.pass draws from */
	if (!x.json)
		fprintf(stderr, "runbox: run %s\n", run.id);
	/* Every command is written ahead into the run's state file before it runs, and committed
	 * to the ledger beside its start; a run that cannot be recorded does not go on. */
	struct rb_record rec;
	rb_debug("ledger: record start");
	int opened = rb_record_open(&rec, &run, &err);
	rec.labels = labels; /* into run_start */
	if (opened < 0 || rb_record_run_start(&rec, NULL, NULL, &err) < 0 ||
	    record_step(&rec, cmd, NULL, false, &err) < 0) {
		rb_err("ledger: %s", err.msg);
		rb_record_close(&rec);
		rb_run_close(&run);
		return 125;
	}
	rb_record_attach(&rec, &run);
	struct rb_step_result res;
	struct term_sink term = {.is_tty = {isatty(STDOUT_FILENO), isatty(STDERR_FILENO)}, .raw = x.tty > 0};
	struct rb_step_req req = {
	    .argv = cmd, .sink = x.json ? NULL : to_terminal, .sink_ctx = &term, .cwd = x.workdir, .resize_fd = -1};
	req.stdin_stream = x.interactive;
	req.stdin_fd = STDIN_FILENO;
	_cleanup_close_ int resize_fd = -1;
	if (x.tty && start_terminal(&x, &req, &resize_fd) < 0) {
		rb_record_close(&rec);
		rb_run_close(&run);
		return 125;
	}
	int exec_r = rb_run_exec(&run, &req, &res, &err);
	rb_term_restore(); /* before anything more is said */
	if (exec_r < 0) {
		rb_err("%s", err.msg);
		rb_record_close(&rec); /* before the run's close: it may keep its state file */
		rb_run_close(&run);
		return 125;
	}
	int code = rb_step_exit_code(&res);
	/* /workspace/out is harvested as a manifest step's is: scrubbed (the run token known),
	 * within the caps and the run's storage budget, recorded. */
	struct rb_collect col;
	rb_collect_init(&col, &run);
	struct rb_cli_progress prog; /* text mode only: --json's stderr stays as it was */
	rb_cli_progress_init(&prog, STDERR_FILENO, "harvest", x.json);
	col.progress = rb_cli_progress_sink(&prog);
	json_t *hj = json_object();
	struct rb_harvest_result h = {0};
	bool harvested = false;
	bool recorded = record_step(&rec, cmd, &res, true, &err) == 0;
	if (recorded && res.status != RB_STEP_SETUP_FAILED) {
		if (rb_collect_step(&col, &run, &rec, 1, NULL, hj, &h, &err) < 0) {
			rb_cli_progress_end(&prog, false);
			rb_err("harvest: %s", err.msg);
			code = 125;
		} else {
			rb_cli_progress_end(&prog, true);
			harvested = true;
		}
	}
	rb_collect_close(&col);
	rb_run_stop(&run);
	struct rb_error kerr;
	if (rb_logs_keep(&run, &kerr) < 0)
		rb_warn("%s", kerr.msg);
	/* The last commit is written, and the disk writes it while the sandbox is taken down;
	 * the result comes only once it is durable (rb_record_sync). */
	recorded = recorded && rb_record_run_end(&rec, code == 125 ? "failure" : rb_record_outcome(&res), &err) == 0 &&
	           rb_record_flush(&rec, RB_RECORD_DEFERRED, &err) == 0;
	if (!recorded) {
		rb_err("ledger: %s", err.msg);
		code = 125;
		rb_record_close(&rec); /* before the run's close: it keeps the state file */
	}
	json_t *result = x.json ? rb_result_json(&run, cmd, &res) : NULL;
	if (result && json_object_get(hj, "harvest"))
		json_object_set(result, "harvest", json_object_get(hj, "harvest"));
	json_decref(hj);
	if (!x.json)
		report_limits(&run, &res);
	if (!x.json && res.gateway_hint[0])
		rb_warn("%s", res.gateway_hint);
	uint64_t timeout_ms = run.timeout_ms;
	char run_id[sizeof run.id], tenant[sizeof run.tenant];
	snprintf(run_id, sizeof run_id, "%s", run.id);
	snprintf(tenant, sizeof tenant, "%s", run.tenant);
	rb_run_close(&run);
	if (recorded) {
		if (rb_record_sync(&rec, &err) < 0) {
			rb_err("ledger: %s", err.msg);
			code = 125;
		}
		rb_record_close(&rec);
	}
	if (result) {
		rb_json_print(stdout, result, JSON_INDENT(2));
		json_decref(result);
	} else if (res.status == RB_STEP_SETUP_FAILED || res.status == RB_STEP_EXEC_FAILED) {
		rb_err("%s", res.error);
	} else if (res.status == RB_STEP_TIMEOUT) {
		rb_err("timed out after %llu ms; the sandbox was killed", (unsigned long long)timeout_ms);
	}
	if (!x.json && harvested && h.n_artifacts)
		fprintf(stderr, "runbox: run %s stored %zu artifact%s (`runbox artifact ls %s`)\n", run_id,
		        h.n_artifacts, h.n_artifacts == 1 ? "" : "s", run_id);
	rb_harvest_result_free(&h);
	rb_step_result_free(&res);
	if (x.output && recorded) {
		int rc = copy_out(cfg.state_dir, run_id, tenant, &x);
		if (rc && !code)
			code = rc;
	}
	return code;
}

/* `runbox run [OPTIONS] -- CMD ARGS...`: one step, one sandbox, the step's status as ours. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/jsonout.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/run/record.h"
#include "runtime/run/result.h"
#include "runtime/run/runfile.h"
#include "runtime/run/run.h"

static void usage(FILE *f)
{
	fputs("usage: runbox run [OPTIONS] -- CMD [ARGS...]\n"
	      "       runbox run [OPTIONS] SPEC.json   (the options are ceilings for the manifest)\n"
	      "  --image NAME|DIR      minimal | host (default host) | an absolute path to a root filesystem\n"
	      "  --policy NAME|FILE    a shipped profile (default, strict) or a policy file\n"
	      "  --timeout DUR         e.g. 2.5s, 300ms, 1m: at most the policy's (default: the policy's)\n"
	      "  --input SRC[:DEST]    bind SRC read-only at DEST under /workspace/in (repeatable)\n"
	      "  --memory SIZE         memory limit, e.g. 256M (at most the policy's)\n"
	      "  --pids N              process limit (at most the policy's)\n"
	      "  --cpus X              cpu quota in cores, e.g. 0.5 (at most the policy's)\n"
	      "  --net none|gateway    network mode (default: the policy's)\n"
	      "  --tenant ID, --agent ID  whose run this is (ledger); beside a manifest, the manifest's must match\n"
	      "  --json                print the result as one JSON object\n"
	      "  --state-dir DIR       where runbox keeps state (also RUNBOX_STATE_DIR)\n"
	      "  -v, --verbose         log what runbox does\n"
	      "Exit: the step's status; 128+n if signal n killed it; 124 timeout; 125 runbox failed;\n"
	      "126 not executable; 127 not found.\n",
	      f);
}

/* Every option given beside a manifest is a ceiling for it (runfile.h); --input is the manifest's
 * own business, so it is refused rather than dropped. */
static int run_manifest(const char *path, const struct rb_run_config *cfg)
{
	if (cfg->n_inputs) {
		rb_err("run %s: --input does not combine with a manifest (list inputs in its `inputs`)", path);
		return 125;
	}
	struct rb_runfile_opts opts = {
	    .state_dir = cfg->state_dir,
	    .ceilings = {.tenant = cfg->tenant,
	                 .agent = cfg->agent,
	                 .policy = cfg->policy,
	                 .image = cfg->image,
	                 .limits = {cfg->timeout_ms, cfg->memory_bytes, cfg->pids, cfg->cpus}},
	    .net_mode = cfg->net_mode,
	    .factory = cfg->factory,
	};
	struct rb_error err;
	rb_error_clear(&err);
	int code;
	if (rb_runfile_execute(path, &opts, stdout, &code, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	return code;
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

int rb_cmd_run(int argc, char **argv, const struct rb_factory *factory)
{
	static const struct option opts[] = {
	    {"image", required_argument, NULL, 'i'},
	    {"policy", required_argument, NULL, 'p'},
	    {"timeout", required_argument, NULL, 't'},
	    {"input", required_argument, NULL, 'I'},
	    {"memory", required_argument, NULL, 'm'},
	    {"pids", required_argument, NULL, 'P'},
	    {"cpus", required_argument, NULL, 'c'},
	    {"net", required_argument, NULL, 'n'},
	    {"json", no_argument, NULL, 'j'},
	    {"tenant", required_argument, NULL, 'T'},
	    {"agent", required_argument, NULL, 'A'},
	    {"state-dir", required_argument, NULL, 's'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct rb_run_config cfg = {.net_mode = -1, .factory = factory};
	/* --verbose: this command's logger (main installs its own again after it). */
	static const struct rb_logger verbose = {.level = RB_LOG_DEBUG};
	const char *inputs[RB_MAX_INPUTS];
	bool json = false;
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (c) {
		case 'i': cfg.image = optarg; break;
		case 'p': cfg.policy = optarg; break;
		case 's': cfg.state_dir = optarg; break;
		case 'j': json = true; break;
		case 'T':
		case 'A':
			if (!rb_manifest_id_ok(optarg)) {
				rb_err("--%s `%s`: expected an id ([A-Za-z0-9._-]{1,64}, not \".\" or \"..\")",
				       c == 'T' ? "tenant" : "agent", optarg);
				return 125;
			}
			*(c == 'T' ? &cfg.tenant : &cfg.agent) = optarg;
			break;
		case 'v': rb_log_use(&verbose); break;
		case 'h': usage(stdout); return 0;
		case 't':
			if (rb_parse_duration_ms(optarg, &cfg.timeout_ms) < 0 || cfg.timeout_ms == 0) {
				rb_err("--timeout `%s`: expected a duration above 0 with a unit (ms, s, m or h), like "
				       "2.5s or 300ms",
				       optarg);
				return 125;
			}
			break;
		case 'm':
			if (rb_parse_size(optarg, &cfg.memory_bytes) < 0 || cfg.memory_bytes == 0) {
				rb_err("--memory `%s`: expected a size above 0 like 256M (units K, M, G, T)", optarg);
				return 125;
			}
			break;
		case 'P': {
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
		case 'c': {
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
		case 'n':
			if (!strcmp(optarg, "none"))
				cfg.net_mode = RB_NET_NONE;
			else if (!strcmp(optarg, "gateway"))
				cfg.net_mode = RB_NET_GATEWAY;
			else {
				rb_err("--net `%s`: expected none or gateway", optarg);
				return 125;
			}
			break;
		case 'I':
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
	if (optind >= argc) {
		rb_err("run: no command given (usage: runbox run [OPTIONS] -- CMD ARGS... | runbox run SPEC.json)");
		return 125;
	}
	/* `runbox run spec.json`: a whole run from a manifest (no `--` before it). */
	size_t alen = strlen(argv[optind]);
	if (optind == argc - 1 && strcmp(argv[optind - 1], "--") != 0 && alen > 5 &&
	    !strcmp(argv[optind] + alen - 5, ".json"))
		return run_manifest(argv[optind], &cfg);
	cfg.inputs = inputs;
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
	/* Every command is written ahead into the run's state file before it runs, and committed
	 * to the ledger beside its start; a run that cannot be recorded does not go on. */
	struct rb_record rec;
	rb_debug("ledger: record start");
	if (rb_record_open(&rec, &run, &err) < 0 || rb_record_run_start(&rec, NULL, NULL, &err) < 0 ||
	    record_step(&rec, cmd, NULL, false, &err) < 0) {
		rb_err("ledger: %s", err.msg);
		rb_record_close(&rec);
		rb_run_close(&run);
		return 125;
	}
	rb_record_attach(&rec, &run);
	struct rb_step_result res;
	if (rb_run_step(&run, cmd, !json, &res, &err) < 0) {
		rb_err("%s", err.msg);
		rb_record_close(&rec); /* before the run's close: it may keep its state file */
		rb_run_close(&run);
		return 125;
	}
	int code = rb_step_exit_code(&res);
	rb_run_stop(&run);
	/* The last commit is written, and the disk writes it while the sandbox is taken down;
	 * the result comes only once it is durable (rb_record_sync). */
	bool recorded = record_step(&rec, cmd, &res, true, &err) == 0 &&
	                rb_record_run_end(&rec, rb_record_outcome(&res), &err) == 0 &&
	                rb_record_flush(&rec, RB_RECORD_DEFERRED, &err) == 0;
	if (!recorded) {
		rb_err("ledger: %s", err.msg);
		code = 125;
		rb_record_close(&rec); /* before the run's close: it keeps the state file */
	}
	json_t *result = json ? rb_result_json(&run, cmd, &res) : NULL;
	if (!json)
		report_limits(&run, &res);
	uint64_t timeout_ms = run.timeout_ms;
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
	rb_step_result_free(&res);
	return code;
}

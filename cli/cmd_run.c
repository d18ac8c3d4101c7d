/* `runbox run [OPTIONS] -- CMD ARGS...`: one step, one sandbox, the step's status as ours. */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/result.h"
#include "runtime/run.h"

static void usage(FILE *f)
{
	fputs("usage: runbox run [OPTIONS] -- CMD [ARGS...]\n"
	      "  --image NAME          minimal | host (default host)\n"
	      "  --policy NAME|FILE    a shipped profile (default, strict) or a policy file\n"
	      "  --timeout DUR         e.g. 2.5s, 300ms, 1m (default: the policy's)\n"
	      "  --input SRC[:DEST]    bind SRC read-only at DEST under /workspace/in (repeatable)\n"
	      "  --memory SIZE         memory limit, e.g. 256M\n"
	      "  --pids N              process limit\n"
	      "  --cpus X              cpu quota in cores, e.g. 0.5\n"
	      "  --net none|gateway    network mode (default: the policy's)\n"
	      "  --json                print the result as one JSON object\n"
	      "  --state-dir DIR       where runbox keeps state (also RUNBOX_STATE_DIR)\n"
	      "  -v, --verbose         log what runbox does\n"
	      "Exit: the step's status; 128+n if signal n killed it; 124 timeout; 125 runbox failed;\n"
	      "126 not executable; 127 not found.\n",
	      f);
}

int rb_cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{"image", required_argument, NULL, 'i'}, {"policy", required_argument, NULL, 'p'},
		{"timeout", required_argument, NULL, 't'}, {"input", required_argument, NULL, 'I'},
		{"memory", required_argument, NULL, 'm'}, {"pids", required_argument, NULL, 'P'},
		{"cpus", required_argument, NULL, 'c'}, {"net", required_argument, NULL, 'n'},
		{"json", no_argument, NULL, 'j'}, {"state-dir", required_argument, NULL, 's'},
		{"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0},
	};
	struct rb_run_config cfg = {.net_mode = -1};
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
		case 'v': rb_log_set_level(RB_LOG_DEBUG); break;
		case 'h': usage(stdout); return 0;
		case 't':
			if (rb_parse_duration_ms(optarg, &cfg.timeout_ms) < 0 || cfg.timeout_ms == 0) {
				rb_err("--timeout `%s`: expected a duration like 2.5s or 300ms", optarg);
				return 125;
			}
			break;
		case 'm':
			if (rb_parse_size(optarg, &cfg.memory_bytes) < 0 || cfg.memory_bytes == 0) {
				rb_err("--memory `%s`: expected a size like 256M", optarg);
				return 125;
			}
			break;
		case 'P': {
			char *end;
			unsigned long long v = strtoull(optarg, &end, 10);
			if (*end || !*optarg || v == 0) {
				rb_err("--pids `%s`: expected a positive number", optarg);
				return 125;
			}
			cfg.pids = v;
			break;
		}
		case 'c': {
			char *end;
			double v = strtod(optarg, &end);
			if (*end || !*optarg || !(v > 0) || v > 4096) {
				rb_err("--cpus `%s`: expected a number of cores like 0.5", optarg);
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
		rb_err("run: no command given (usage: runbox run [OPTIONS] -- CMD ARGS...)");
		return 125;
	}
	cfg.inputs = inputs;
	char **cmd = argv + optind;

	struct rb_error err;
	rb_error_clear(&err);
	struct rb_run run;
	if (rb_run_open(&cfg, &run, &err) < 0) {
		rb_err("%s", err.msg);
		rb_run_close(&run);
		return 125;
	}
	struct rb_step_result res;
	if (rb_run_step(&run, cmd, !json, &res, &err) < 0) {
		rb_err("%s", err.msg);
		rb_run_close(&run);
		return 125;
	}
	int code = rb_step_exit_code(&res);
	rb_run_stop(&run);
	json_t *result = json ? rb_result_json(&run, cmd, &res) : NULL;
	uint64_t timeout_ms = run.timeout_ms;
	rb_run_close(&run);
	if (result) {
		json_dumpf(result, stdout, JSON_INDENT(2));
		fputc('\n', stdout);
		json_decref(result);
	} else if (res.status == RB_STEP_SETUP_FAILED || res.status == RB_STEP_EXEC_FAILED) {
		rb_err("%s", res.error);
	} else if (res.status == RB_STEP_TIMEOUT) {
		rb_err("timed out after %llu ms; the sandbox was killed", (unsigned long long)timeout_ms);
	}
	rb_step_result_free(&res);
	return code;
}

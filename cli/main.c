/* runbox: one binary, subcommands. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "common/log.h"
#include "runtime/sandbox/factory.h"

static void usage(FILE *f)
{
	fputs("usage: runbox COMMAND [ARGS]\n"
	      "\n"
	      "  check                          what this host supports, what is degraded, why\n"
	      "  run [OPTIONS] -- CMD ARGS...   one step in a fresh sandbox\n"
	      "  run SPEC.json                  a whole run from a manifest: inputs, skills, steps\n"
	      "  ledger runs|show|query|verify|export   the tamper-evident record of every run\n"
	      "  ps | kill RUN | gc [--retention DUR] [--dry-run]\n"
	      "                                 live runs, stop one, clean up after a crash, old artifacts\n"
	      "  approve [ID] | deny ID         connector calls held for approval: list, release, refuse\n"
	      "  gateway serve [--config FILE] [--socket PATH]   the gateway daemon runs hand their endpoints to\n"
	      "  policy validate FILE | show NAME\n"
	      "  image import|ls|inspect|rm|tag  the image store: trees by digest, names for them\n"
	      "  artifact ls RUN | get DIGEST|RUN:PATH | inspect DIGEST   a run's files, back out of the store\n"
	      "  logs RUN [--step N]            a run's captured output, from its records\n"
	      "  serve [--socket PATH]          the session API daemon (docs/serve.md)\n"
	      "  session create|ls|rm ID|snapshot ID   live sandboxes, through runbox serve\n"
	      "  exec ID -- CMD ARGS...         a command in a live sandbox, its exit code passed through\n"
	      "  cp SRC ID:PATH | ID:PATH DEST  a file into or out of a live sandbox (`-`: stdin/stdout)\n"
	      "  --version                      runbox's version\n"
	      "\n"
	      "`runbox COMMAND --help` for a command's options.\n",
	      f);
}

/* Caught, not ignored: a write to a closed pipe then fails with EPIPE instead of killing
 * runbox mid-run (`runbox run ... | head -1`), and every program runbox execs (a step, the
 * gateway) starts with SIGPIPE at its default again, which an ignored signal would not. */
static void on_sigpipe(int sig)
{
	(void)sig;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_sigpipe, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
	if (argc < 2) {
		usage(stderr);
		return 125;
	}
	/* The CLI's logger: stderr, debug lines with RUNBOX_DEBUG. */
	struct rb_logger logger = {.level = getenv("RUNBOX_DEBUG") ? RB_LOG_DEBUG : RB_LOG_WARN};
	rb_log_use(&logger);
	const char *cmd = argv[1];
	if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(cmd, "--version") || !strcmp(cmd, "version"))
		return rb_cmd_version(argc - 1, argv + 1);
	if (!strcmp(cmd, "run")) {
		/* The factory first, before any key is read or any thread started: every sandbox's
		 * init is a copy of it, and it is a copy of runbox as it starts. */
		struct rb_factory factory;
		struct rb_error err;
		if (rb_factory_start(&factory, &err) < 0) {
			rb_err("%s", err.msg);
			return 125;
		}
		int code = rb_cmd_run(argc - 1, argv + 1, &factory);
		rb_log_use(&logger);
		rb_factory_stop(&factory);
		return code;
	}
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {{"check", rb_cmd_check},    {"policy", rb_cmd_policy},     {"ledger", rb_cmd_ledger},
	            {"ps", rb_cmd_ps},          {"kill", rb_cmd_kill},         {"gc", rb_cmd_gc},
	            {"image", rb_cmd_image},    {"artifact", rb_cmd_artifact}, {"logs", rb_cmd_logs},
	            {"serve", rb_cmd_serve},    {"session", rb_cmd_session},   {"exec", rb_cmd_exec},
	            {"cp", rb_cmd_cp},          {"approve", rb_cmd_approve},   {"deny", rb_cmd_deny},
	            {"gateway", rb_cmd_gateway}};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
		if (!strcmp(cmd, cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	rb_err("unknown command `%s` (try `runbox --help`)", cmd);
	return 125;
}

/* `runbox approve [ID]` and `runbox deny ID`: the decision on a connector call the run's policy
 * holds for approval (network.approval). The held call's request is <run dir>/approvals/ID.json;
 * a decision is <ID>.decision, made with link() so the first one (or the gateway's "expired")
 * wins (runtime/run/approvals.c). `runbox approve` without an ID lists the requests still pending. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "runtime/run/approvals.h"

static int decide(const struct rb_paths *p, const char *id, const char *what)
{
	struct rb_error err;
	if (rb_approval_decide(p->run_dir, id, NULL, what, &err) < 0) {
		if (err.errnum == ENOENT)
			rb_err("%s (see `runbox approve` for those pending)", err.msg);
		else
			rb_err("%s", err.msg);
		return 125;
	}
	printf("%s %s\n", id, what);
	return 0;
}

static int cmd(int argc, char **argv, const char *what)
{
	const char *state = NULL, *id = NULL;
	for (int i = 1; i < argc; i++) { /* argv[0] is the command's name */
		if (!strcmp(argv[i], "--state-dir") && i + 1 < argc)
			state = argv[++i];
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: runbox %s [--state-dir DIR] %s\n", what[0] == 'a' ? "approve" : "deny",
			       what[0] == 'a' ? "[ID]" : "ID");
			return 0;
		} else if (!id && argv[i][0] != '-')
			id = argv[i];
		else {
			rb_err("runbox %s: unexpected `%s`", what[0] == 'a' ? "approve" : "deny", argv[i]);
			return 125;
		}
	}
	struct rb_paths p;
	struct rb_error err;
	if (rb_paths_init(&p, rb_cli_host(), state, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	if (id)
		return decide(&p, id, what);
	if (what[0] != 'a') {
		rb_err("runbox deny: which held call? (`runbox approve` lists them)");
		return 125;
	}
	json_t *pending = rb_approvals_pending(p.run_dir, NULL);
	char *text = json_dumps(pending, JSON_INDENT(2) | JSON_SORT_KEYS);
	printf("%s\n", text ? text : "[]");
	free(text);
	json_decref(pending);
	return 0;
}

int rb_cmd_approve(int argc, char **argv)
{
	return cmd(argc, argv, "approved");
}

int rb_cmd_deny(int argc, char **argv)
{
	return cmd(argc, argv, "denied");
}

/* `runbox gateway serve [--config FILE] [--socket PATH]`: execs runbox-gateway as the gateway
 * daemon (gateway/daemon.c), so runbox itself never links the HTTP library. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/log.h"
#include "common/paths.h"

int rb_cmd_gateway(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "serve") != 0) {
		fprintf(argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout : stderr,
		        "usage: runbox gateway serve [--config FILE] [--socket PATH]\n"
		        "  the gateway daemon: holds the operator's gateway config and secrets and serves the\n"
		        "  endpoints of the runs that register with it (docs/gateway.md)\n");
		return argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 0 : 125;
	}
	struct rb_parts parts;
	struct rb_error err;
	if (rb_parts_find(&parts, rb_cli_host(), &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	argv[0] = parts.gateway; /* argv[1] is "serve": the daemon's own argument parsing follows */
	execv(parts.gateway, argv);
	rb_err("gateway serve: %s: %s", parts.gateway, strerror(errno));
	return 125;
}

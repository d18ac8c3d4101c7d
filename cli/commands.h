/* The subcommands: thin layers over the library. Each returns the process exit code. */
#ifndef RB_COMMANDS_H
#define RB_COMMANDS_H

#include "common/host.h"

extern char **environ;
/* The host context the commands give the library: runbox's own environment, as it is now
 * (`run -e NAME=VALUE` sets a variable in it). The library reads no environment itself. */
static inline const struct rb_host *rb_cli_host(void)
{
	static struct rb_host host;
	host.env = environ;
	return &host;
}

struct rb_factory;
/* factory: started by main before anything else (runtime/sandbox/factory.h). */
int rb_cmd_run(int argc, char **argv, const struct rb_factory *factory);
int rb_cmd_check(int argc, char **argv);
int rb_cmd_policy(int argc, char **argv);
int rb_cmd_ledger(int argc, char **argv);
int rb_cmd_ps(int argc, char **argv);
int rb_cmd_kill(int argc, char **argv);
int rb_cmd_gc(int argc, char **argv);
int rb_cmd_image(int argc, char **argv);
int rb_cmd_artifact(int argc, char **argv);
int rb_cmd_logs(int argc, char **argv);
/* `runbox approve [ID]`, `runbox deny ID`: held connector calls (cli/cmd_approve.c). */
int rb_cmd_approve(int argc, char **argv);
/* `runbox gateway serve`: execs runbox-gateway as the gateway daemon (cli/cmd_gateway.c). */
int rb_cmd_gateway(int argc, char **argv);
/* runbox serve's socket for the clients (session, exec, cp): given, else RUNBOX_SOCKET, else
 * the daemon's default (/run/runbox/serve.sock as root, $XDG_RUNTIME_DIR/runbox/serve.sock);
 * NULL when none can be named (cli/cmd_serve.c). */
const char *rb_cli_serve_socket(const char *given, char *buf, size_t len);
/* A connection to it, or -1 with a message said. */
int rb_cli_serve_connect(const char *sock);
int rb_cmd_deny(int argc, char **argv);
/* `runbox serve` (execs runbox-serve), and its clients over the socket (cli/cmd_serve.c). */
int rb_cmd_serve(int argc, char **argv);
int rb_cmd_session(int argc, char **argv);
int rb_cmd_exec(int argc, char **argv);
/* `runbox cp`: a file into or out of a live session (cli/cmd_cp.c). */
int rb_cmd_cp(int argc, char **argv);
/* `runbox --version`, `runbox version`, `runbox run --version`. */
int rb_cmd_version(int argc, char **argv);

#endif

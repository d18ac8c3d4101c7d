/* runbox-gateway: serves one run's gateway endpoint on listening sockets it inherits. Kept out
 * of the runbox binary so that libmicrohttpd (and the TLS library it loads) costs nothing on
 * a run that never calls the gateway: the runner starts this on the first connection.
 * fd 3: config JSON {"run_id": ..., "key": hex, "listen_fds": [fd, ...], "ready_fd": fd,
 * "gateway_config": path or null (the default places), "connectors": [granted names],
 * "proxy": [the policy's network.proxy], "dns_fd": fd or null (the DNS stub's socket),
 * "approval": [{"connector", "methods", "timeout_s"}], "mcp": [{"name", "tools"?}] (network.mcp), "approvals_dir": path
 * or null, "rate" and "burst" (requests per second and at once; absent: RB_GATEWAY_RATE, RB_GATEWAY_BURST)}, read to
 * EOF. Once it serves, one byte on ready_fd (then closed): the runner waits for it. Each call's
 * record is a line {"call": {...}} on stdout, as it happens; SIGTERM: stop, print
 * {"stats": {"requests": n, ...}} on stdout, exit 0. The runner's exit ("parent_pid", watched
 * through a pidfd) stops it as SIGTERM does. `runbox-gateway serve ...` is the daemon instead
 * (gateway/daemon.c), serving many runs' grants with this same code. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/paths.h"
#include "gateway/config.h"
#include "gateway/daemon.h"
#include "gateway/endpoint.h"
#include "gateway/grant.h"

extern char **environ;

/* A pidfd of the runner that started this gateway, readable once it exited: the gateway ends
 * with the runner's process, not with the runner's thread that forked it (PR_SET_PDEATHSIG
 * fires at that thread's exit, which in a daemon holding many runs may come long before the
 * run's end). -1 with errno; ESRCH when the runner is gone already. */
static int watch_parent(pid_t parent)
{
	int fd = parent > 0 ? (int)syscall(SYS_pidfd_open, parent, 0) : -1;
	if (parent <= 0)
		errno = EINVAL;
	/* Still our parent once the pidfd is held: then it names the runner, not a reused pid. */
	if (fd >= 0 && getppid() != parent) {
		close(fd);
		errno = ESRCH;
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	/* It holds the connectors' secrets: no core file of it, and no ptrace or /proc/PID/mem by
	 * another process of its uid. It execs nothing, so nothing inherits the flag. */
	struct rlimit no_core = {0, 0};
	if (setrlimit(RLIMIT_CORE, &no_core) < 0 || prctl(PR_SET_DUMPABLE, 0) < 0) {
		fprintf(stderr, "runbox-gateway: cannot make itself undumpable: %s\n", strerror(errno));
		return 125;
	}
	if (argc > 1 && !strcmp(argv[1], "serve"))
		return rb_gwd_main(argc - 1, argv + 1, &(struct rb_host){.env = environ});
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigprocmask(SIG_BLOCK, &mask, NULL);

	json_error_t jerr;
	FILE *cf = fdopen(3, "r");
	json_t *cfg = cf ? json_loadf(cf, 0, &jerr) : NULL;
	if (cf)
		fclose(cf);
	json_t *ready_j = json_object_get(cfg, "ready_fd");
	struct rb_error err;
	struct rb_gw_grant *g = calloc(1, sizeof *g);
	if (!g || !cfg || !json_is_integer(ready_j)) {
		fprintf(stderr, "runbox-gateway: bad config on fd 3\n");
		return 125;
	}
	if (rb_gw_grant_parse(cfg, NULL, 0, g, &err) < 0) {
		fprintf(stderr, "runbox-gateway: bad config on fd 3: %s\n", err.msg);
		return 125;
	}
	int parent_fd = watch_parent((pid_t)json_integer_value(json_object_get(cfg, "parent_pid")));
	int sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (parent_fd < 0 || sig_fd < 0) {
		fprintf(stderr, "runbox-gateway: %s: %s\n", parent_fd < 0 ? "watch the runner (pidfd)" : "signalfd",
		        strerror(errno));
		return 125;
	}
	/* The operator's connectors: the file the runner names, else the default places. */
	json_t *conf_j = json_object_get(cfg, "gateway_config");
	struct rb_gwconf *conf = calloc(1, sizeof *conf);
	struct rb_paths paths;
	struct rb_host host = {.env = environ}; /* a main: the process's environment is its to give */
	if (!conf || rb_paths_init(&paths, &host, NULL, &err) < 0 ||
	    rb_gwconf_load(json_string_value(conf_j), &paths, conf, &err) < 0) {
		fprintf(stderr, "runbox-gateway: %s\n", conf ? err.msg : "out of memory");
		return 125;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		fprintf(stderr, "runbox-gateway: curl_global_init failed\n");
		return 125;
	}
	struct rb_gateway_config gc = g->gc;
	gc.conf = conf;
	gc.event_fd = STDOUT_FILENO;
	struct rb_gateway *gw = NULL;
	if (rb_gateway_start(&gc, &gw, &err) < 0) {
		fprintf(stderr, "runbox-gateway: %s\n", err.msg);
		return 125;
	}
	OPENSSL_cleanse(g->key, sizeof g->key);
	int ready_fd = (int)json_integer_value(ready_j);
	if (write(ready_fd, "R", 1) != 1) {
		fprintf(stderr, "runbox-gateway: readiness fd %d: %s\n", ready_fd, strerror(errno));
		return 125;
	}
	close(ready_fd);
	/* SIGTERM or SIGINT, or the runner's exit: stop. */
	struct pollfd stop[2] = {{.fd = sig_fd, .events = POLLIN}, {.fd = parent_fd, .events = POLLIN}};
	while (poll(stop, 2, -1) < 0 && errno == EINTR)
		;
	close(sig_fd);
	close(parent_fd);
	struct rb_gateway_stats st;
	rb_gateway_stop(gw, &st);
	json_t *out = json_pack("{s:o}", "stats", rb_gateway_stats_json(&st));
	json_dumpf(out, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(out);
	rb_gw_grant_free(g); /* the grants' strings lived in its JSON */
	free(g);
	json_decref(cfg);
	free(conf);
	curl_global_cleanup();
	return 0;
}

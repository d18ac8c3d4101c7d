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
 * through a pidfd) stops it as SIGTERM does. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
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
#include "gateway/endpoint.h"

extern char **environ;

static int hex_decode(const char *hex, uint8_t *out, size_t max, size_t *len)
{
	size_t n = strlen(hex);
	if (n % 2 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	*len = n / 2;
	return 0;
}

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

int main(void)
{
	/* It holds the connectors' secrets: no core file of it, and no ptrace or /proc/PID/mem by
	 * another process of its uid. It execs nothing, so nothing inherits the flag. */
	struct rlimit no_core = {0, 0};
	if (setrlimit(RLIMIT_CORE, &no_core) < 0 || prctl(PR_SET_DUMPABLE, 0) < 0) {
		fprintf(stderr, "runbox-gateway: cannot make itself undumpable: %s\n", strerror(errno));
		return 125;
	}
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
	const char *run_id = json_string_value(json_object_get(cfg, "run_id"));
	const char *key_hex = json_string_value(json_object_get(cfg, "key"));
	json_t *fds_j = json_object_get(cfg, "listen_fds");
	json_t *ready_j = json_object_get(cfg, "ready_fd");
	uint8_t key[RB_GATEWAY_KEY_MAX];
	size_t keylen = 0;
	int fds[RB_GATEWAY_MAX_FDS];
	unsigned n = 0;
	if (!run_id || !key_hex || hex_decode(key_hex, key, sizeof key, &keylen) < 0 || !json_is_array(fds_j) ||
	    !json_is_integer(ready_j)) {
		fprintf(stderr, "runbox-gateway: bad config on fd 3\n");
		return 125;
	}
	int parent_fd = watch_parent((pid_t)json_integer_value(json_object_get(cfg, "parent_pid")));
	int sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
	if (parent_fd < 0 || sig_fd < 0) {
		fprintf(stderr, "runbox-gateway: %s: %s\n", parent_fd < 0 ? "watch the runner (pidfd)" : "signalfd",
		        strerror(errno));
		return 125;
	}
	size_t i;
	json_t *v;
	json_array_foreach(fds_j, i, v)
	{
		if (n < RB_GATEWAY_MAX_FDS && json_is_integer(v))
			fds[n++] = (int)json_integer_value(v);
	}
	struct rb_error err;
	/* The operator's connectors: the file the runner names, else the default places. */
	json_t *conf_j = json_object_get(cfg, "gateway_config");
	json_t *grants_j = json_object_get(cfg, "connectors");
	const char *grants[RB_GWCONF_MAX_CONNECTORS];
	unsigned n_grants = 0;
	json_array_foreach(grants_j, i, v)
	{
		if (n_grants < RB_GWCONF_MAX_CONNECTORS && json_is_string(v))
			grants[n_grants++] = json_string_value(v);
	}
	const char *proxy[RB_GWCONF_MAX_PROXY];
	unsigned n_proxy = 0;
	json_array_foreach(json_object_get(cfg, "proxy"), i, v)
	{
		if (n_proxy < RB_GWCONF_MAX_PROXY && json_is_string(v))
			proxy[n_proxy++] = json_string_value(v);
	}
	struct rb_policy_approval approvals[RB_POLICY_MAX_APPROVALS];
	unsigned n_approvals = 0;
	json_array_foreach(json_object_get(cfg, "approval"), i, v)
	{
		if (n_approvals == RB_POLICY_MAX_APPROVALS)
			break;
		struct rb_policy_approval *a = &approvals[n_approvals++];
		memset(a, 0, sizeof *a);
		snprintf(a->connector, sizeof a->connector, "%s",
		         json_string_value(json_object_get(v, "connector")) ?: "");
		a->timeout_s = (unsigned)json_integer_value(json_object_get(v, "timeout_s"));
		snprintf(a->mcp, sizeof a->mcp, "%s", json_string_value(json_object_get(v, "mcp")) ?: "");
		json_t *tl = json_object_get(v, "tools");
		for (size_t j = 0; j < json_array_size(tl) && a->n_tools < 8; j++)
			if (json_is_string(json_array_get(tl, j)))
				snprintf(a->tools[a->n_tools++], sizeof a->tools[0], "%s",
				         json_string_value(json_array_get(tl, j)));
		size_t j;
		json_t *m;
		json_array_foreach(json_object_get(v, "methods"), j, m)
		{
			if (a->n_methods < 8 && json_is_string(m))
				snprintf(a->methods[a->n_methods++], sizeof a->methods[0], "%s", json_string_value(m));
		}
	}
	/* The policy's network.mcp: [{"name", "tools": [...] (absent: not narrowed)}]. */
	struct rb_gw_mcp_grant mcp[RB_POLICY_MAX_MCP];
	const char *mcp_tools[RB_POLICY_MAX_MCP][RB_POLICY_MCP_TOOLS];
	unsigned n_mcp = 0;
	json_array_foreach(json_object_get(cfg, "mcp"), i, v)
	{
		const char *mname = json_string_value(json_object_get(v, "name"));
		const json_t *ts = json_object_get(v, "tools");
		if (n_mcp == RB_POLICY_MAX_MCP || !mname)
			continue;
		struct rb_gw_mcp_grant *g = &mcp[n_mcp];
		*g = (struct rb_gw_mcp_grant){.name = mname, .tools = json_is_array(ts) ? mcp_tools[n_mcp] : NULL};
		size_t j;
		json_t *t;
		json_array_foreach(ts, j, t)
		{
			if (g->n_tools < RB_POLICY_MCP_TOOLS && json_is_string(t))
				mcp_tools[n_mcp][g->n_tools++] = json_string_value(t);
		}
		n_mcp++;
	}
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
	struct rb_gateway_config gc = {.listen_fds = fds,
	                               .n_listen_fds = n,
	                               .key = key,
	                               .keylen = keylen,
	                               .run_id = run_id,
	                               .conf = conf,
	                               .grants = grants,
	                               .n_grants = n_grants,
	                               .mcp = mcp,
	                               .n_mcp = n_mcp,
	                               .proxy = proxy,
	                               .n_proxy = n_proxy,
	                               .event_fd = STDOUT_FILENO,
	                               .rate = (uint64_t)json_integer_value(json_object_get(cfg, "rate")),
	                               .burst = (uint64_t)json_integer_value(json_object_get(cfg, "burst")),
	                               .approvals = approvals,
	                               .n_approvals = n_approvals,
	                               .approvals_dir = json_string_value(json_object_get(cfg, "approvals_dir")),
	                               .serve_dns = json_is_integer(json_object_get(cfg, "dns_fd")),
	                               .dns_fd = (int)json_integer_value(json_object_get(cfg, "dns_fd"))};
	struct rb_gateway *gw = NULL;
	if (rb_gateway_start(&gc, &gw, &err) < 0) {
		fprintf(stderr, "runbox-gateway: %s\n", err.msg);
		return 125;
	}
	memset(key, 0, sizeof key);
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
	rb_gateway_get_stats(gw, &st);
	rb_gateway_stop(gw);
	json_t *out = json_pack("{s:o}", "stats", rb_gateway_stats_json(&st));
	json_dumpf(out, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(out);
	json_decref(cfg); /* the grants' strings lived in it */
	free(conf);
	curl_global_cleanup();
	return 0;
}

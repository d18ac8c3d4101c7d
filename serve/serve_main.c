/* runbox-serve: the daemon behind `runbox serve`. Its own binary, so runbox's cold start never
 * loads libmicrohttpd. The factory first, then the threads; SIGTERM/SIGINT drain and exit. */
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"
#include "policy/operator.h"
#include "runtime/sandbox/factory.h"
#include "serve/e2b.h"
#include "serve/http.h"
#include "serve/keys.h"
#include "serve/known.h"
#include "serve/restart.h"
#include "serve/serve.h"

extern char **environ;

static void on_sigpipe(int sig)
{
	(void)sig;
}

static void usage(FILE *f)
{
	fputs("usage: runbox serve [--socket PATH] [--group G] [--state-dir DIR] [--listen ADDR --keys FILE]\n"
	      "                    [--pool IMAGE:POLICY=N]... [--pool-max-age D]\n"
	      "                    [--max-sessions N] [--max-sessions-per-tenant N] [--max-calls-per-tenant N]\n"
	      "                    [--max-snapshot-bytes-per-tenant SIZE]\n"
	      "  --socket PATH     the unix socket (default /run/runbox/serve.sock as root,\n"
	      "                    $XDG_RUNTIME_DIR/runbox/serve.sock rootless); made 0600\n"
	      "  --group G         the socket 0660, owned by group G\n"
	      "  --state-dir DIR   runbox's state (ledger, images) as for `runbox run`\n"
	      "  --listen ADDR     also on loopback TCP (127.0.0.1:PORT, [::1]:PORT), bearer keys from --keys\n"
	      "  --keys FILE       0600 JSON {\"KEY\": {\"tenant\": \"T\"}}: a key sees its tenant's sessions\n"
	      "  --pool I:P=N      keep N sandboxes of image I and policy P ready (repeatable;\n"
	      "                    default: the operator config.json's serve_pool pairs)\n"
	      "  --pool-max-age D  a ready member older than D is replaced (default 10m)\n"
	      "  --max-sessions N  sessions in all (default 256); --max-sessions-per-tenant N: of one tenant\n"
	      "                    (default half of --max-sessions)\n"
	      "  --max-calls-per-tenant N  a tenant's calls in flight on --listen, streams included\n"
	      "                    (default 128); one more is a 429\n"
	      "  --max-snapshot-bytes-per-tenant SIZE  a tenant's snapshots in the store (\"10G\", the\n"
	      "                    default; bytes as stored, compressed); one more over it is a 507\n",
	      f);
	rb_e2b_usage(f);
}

/* The default socket, its directory made 0700 when missing. */
static int default_socket(char *out, size_t len, struct rb_error *err)
{
	const char *base = "/run";
	if (geteuid() != 0) {
		base = getenv("XDG_RUNTIME_DIR");
		if (!base || base[0] != '/')
			return rb_error_setk(err, RB_ERR_INPUT, 0,
			                     "no XDG_RUNTIME_DIR for the default socket: give --socket PATH");
	}
	char dir[4096];
	snprintf(dir, sizeof dir, "%s/runbox", base);
	if (rb_mkdir_p(dir, 0700, err) < 0)
		return -1;
	snprintf(out, len, "%s/serve.sock", dir);
	return 0;
}

/* The operator's config's serve_pool pairs (policy/operator.h), each checked as --pool checks
 * its argument; the error names the file's key. */
static int operator_pool(const struct rb_host *host, const char *state, struct rb_serve_pool_pair *pool, unsigned max,
                         unsigned *n, struct rb_error *err)
{
	struct rb_paths paths;
	struct rb_operator_config oc;
	if (rb_paths_init(&paths, host, state, err) < 0 || rb_operator_config_load(paths.config_dir, &oc, err) < 0)
		return -1;
	for (unsigned i = 0; i < oc.n_serve_pool && i < max; i++) {
		if (rb_serve_pool_parse(oc.serve_pool[i], &pool[i], err) < 0)
			return rb_error_prefix(err, "operator config %s/config.json: serve_pool[%u]", paths.config_dir,
			                       i);
		*n = i + 1;
	}
	if (oc.n_serve_pool)
		rb_info("serve: %u warm pool pair%s from %s/config.json", *n, *n == 1 ? "" : "s", paths.config_dir);
	return 0;
}

int main(int argc, char **argv)
{
	/* Before anything else: the factory (and every init) is a copy of this process now, with
	 * no key loaded and no thread started. */
	struct rb_factory factory;
	struct rb_error err;
	if (rb_factory_start(&factory, &err) < 0) {
		fprintf(stderr, "runbox serve: %s\n", err.msg);
		return 125;
	}
	struct rb_logger logger = {.level = getenv("RUNBOX_DEBUG") ? RB_LOG_DEBUG : RB_LOG_INFO};
	rb_log_use(&logger);
	struct sigaction sa = {.sa_handler = on_sigpipe, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPIPE, &sa, NULL);
	/* Every thread inherits the mask; this one takes the signals with sigwait. */
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);

	/* The E2B front end's options (docs/e2b.md), taken out before the daemon's own. */
	struct rb_e2b_opts e2b_opts;
	int e2b_r = rb_e2b_options(&argc, argv, &e2b_opts);
	if (e2b_r != 0) {
		rb_factory_stop(&factory);
		return e2b_r < 0 ? 125 : 0;
	}

	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"state-dir", required_argument, NULL, 'd'},
	    {"group", required_argument, NULL, 'g'},
	    {"listen", required_argument, NULL, 'l'},
	    {"keys", required_argument, NULL, 'k'},
	    {"pool", required_argument, NULL, 'p'},
	    {"pool-max-age", required_argument, NULL, 'A'},
	    {"max-sessions", required_argument, NULL, 'M'},
	    {"max-sessions-per-tenant", required_argument, NULL, 'T'},
	    {"max-calls-per-tenant", required_argument, NULL, 'C'},
	    {"max-snapshot-bytes-per-tenant", required_argument, NULL, 'B'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *sock = getenv("RUNBOX_SOCKET"), *state = NULL, *group = NULL, *listen_addr = NULL,
	           *keys_path = NULL;
	struct rb_serve_pool_pair pool[16];
	unsigned n_pool = 0;
	uint64_t pool_age = 0, max_snapshot_bytes = 0;
	unsigned long max_sessions = 0, max_per_tenant = 0, max_calls = 0;
	int c;
	bool bad = false;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		char *end = NULL;
		switch (c) {
		case 's': sock = optarg; break;
		case 'd': state = optarg; break;
		case 'g': group = optarg; break;
		case 'l': listen_addr = optarg; break;
		case 'k': keys_path = optarg; break;
		case 'p':
			if (n_pool == RB_ARRAY_SIZE(pool)) {
				rb_err("serve: at most %zu --pool pairs", RB_ARRAY_SIZE(pool));
				bad = true;
			} else if (rb_serve_pool_parse(optarg, &pool[n_pool], &err) < 0) {
				rb_err("serve: %s", err.msg);
				bad = true;
			} else {
				n_pool++;
			}
			break;
		case 'A':
			if (rb_parse_duration_ms(optarg, &pool_age) < 0 || pool_age == 0) {
				rb_err("serve: --pool-max-age `%s`: not a duration", optarg);
				bad = true;
			}
			break;
		case 'B':
			if (rb_parse_size(optarg, &max_snapshot_bytes) < 0 || max_snapshot_bytes == 0) {
				rb_err(
				    "serve: --max-snapshot-bytes-per-tenant `%s`: a size above 0 (\"512M\", \"10G\")",
				    optarg);
				bad = true;
			}
			break;
		case 'M':
		case 'T':
		case 'C': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (!*optarg || *end || v == 0 || v > 100000) {
				rb_err("serve: --%s `%s`: a number from 1 to 100000",
				       c == 'M'   ? "max-sessions"
				       : c == 'T' ? "max-sessions-per-tenant"
				                  : "max-calls-per-tenant",
				       optarg);
				bad = true;
			}
			*(c == 'M' ? &max_sessions : c == 'T' ? &max_per_tenant : &max_calls) = v;
			break;
		}
		case 'h':
			usage(stdout);
			rb_factory_stop(&factory);
			return 0;
		default:
			usage(stderr);
			rb_factory_stop(&factory);
			return 125;
		}
	}
	if (optind < argc)
		rb_err("serve: unexpected argument `%s`", argv[optind]);
	if (!!listen_addr != !!keys_path)
		rb_err("serve: --listen and --keys go together");
	if (bad || optind < argc || !!listen_addr != !!keys_path) {
		rb_factory_stop(&factory);
		return 125;
	}
	struct rb_serve_keys *keys = NULL;
	if (keys_path && rb_serve_keys_load(keys_path, &keys, &err) < 0) {
		rb_err("serve: %s", err.msg);
		rb_factory_stop(&factory);
		return 125;
	}
	char path[4096];
	if (!sock || !*sock) {
		if (default_socket(path, sizeof path, &err) < 0) {
			rb_err("serve: %s", err.msg);
			rb_factory_stop(&factory);
			return 125;
		}
		sock = path;
	}
	/* The socket's directory, made 0700 when missing (modes of one that exists are kept). */
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", sock);
	if (rb_mkdir_p(dirname(dir), 0700, &err) < 0) {
		rb_err("serve: %s", err.msg);
		rb_factory_stop(&factory);
		return 125;
	}
	struct rb_host host = {.env = environ};
	/* Without --pool, the pairs the operator's config names (docs/serve.md "Warm pool"). */
	if (!n_pool && operator_pool(&host, state, pool, RB_ARRAY_SIZE(pool), &n_pool, &err) < 0) {
		rb_err("serve: %s", err.msg);
		rb_serve_keys_free(keys);
		rb_factory_stop(&factory);
		return 125;
	}
	struct rb_serve_config cfg = {.factory = &factory,
	                              .state_dir = state,
	                              .logger = &logger,
	                              .pool = pool,
	                              .n_pool = n_pool,
	                              .pool_max_age_ms = pool_age,
	                              .max_sessions = (unsigned)max_sessions,
	                              .max_per_tenant = (unsigned)max_per_tenant,
	                              .host = &host};
	/* The sessions of a daemon that died on this state directory: cleaned up, recorded lost. */
	if (rb_serve_restart_reclaim(&host, state, &err) < 0)
		rb_warn("serve: the sessions of a daemon that died: %s", err.msg);
	struct rb_serve *sv = NULL;
	struct rb_serve_http *h = NULL, *tcp = NULL;
	if (rb_serve_new(&cfg, &sv, &err) < 0 || rb_serve_http_start(sv, sock, &h, &err) < 0 ||
	    (group && rb_serve_http_share(h, group, &err) < 0) ||
	    (listen_addr && rb_serve_http_start_tcp(sv, listen_addr, keys, (unsigned)max_calls, &tcp, &err) < 0)) {
		rb_err("serve: %s", err.msg);
		rb_serve_http_stop(h);
		rb_serve_free(sv);
		rb_serve_keys_free(keys);
		rb_factory_stop(&factory);
		return 125;
	}
	if (max_snapshot_bytes)
		rb_serve_known_snapshot_bound(rb_serve_known(sv), max_snapshot_bytes);
	struct rb_e2b *e2b = NULL;
	if (e2b_opts.listen && rb_e2b_start(sv, e2b_opts.listen, e2b_opts.keys, (unsigned)max_calls, &e2b, &err) < 0) {
		rb_err("serve: %s", err.msg);
		rb_serve_http_stop(h);
		rb_serve_free(sv);
		rb_factory_stop(&factory);
		return 125;
	}
	if (e2b)
		rb_info("serve: e2b API on %s", rb_e2b_url(e2b));
	rb_info("serve: listening on %s%s%s", sock, listen_addr ? " and " : "", listen_addr ? listen_addr : "");
	int sig = 0;
	sigwait(&stop, &sig);
	rb_info("serve: %s: draining", strsignal(sig));
	/* No new sessions, live ones closed and recorded; then the HTTP threads joined. */
	rb_serve_drain(sv);
	rb_serve_http_stop(tcp);
	rb_serve_http_stop(h);
	rb_e2b_stop(e2b);
	rb_serve_free(sv);
	rb_serve_keys_free(keys);
	rb_factory_stop(&factory);
	return 0;
}

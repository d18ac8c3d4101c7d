/* runbox-gateway: serves one run's gateway endpoint on listening sockets it inherits. Kept out
 * of the runbox binary so that libmicrohttpd (and the TLS library it loads) costs nothing on
 * a run that never calls the gateway: the runner starts this on the first connection.
 * fd 3: config JSON {"run_id": ..., "key": hex, "listen_fds": [fd, ...], "ready_fd": fd}, read
 * to EOF. Once it serves, one byte on ready_fd (then closed): the runner waits for it.
 * SIGTERM: stop, print {"requests": n, "unauthorized": n} on stdout, exit 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "gateway/endpoint.h"

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

int main(void)
{
	prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
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
	size_t i;
	json_t *v;
	json_array_foreach(fds_j, i, v)
	{
		if (n < RB_GATEWAY_MAX_FDS && json_is_integer(v))
			fds[n++] = (int)json_integer_value(v);
	}
	struct rb_gateway_config gc = {
	    .listen_fds = fds, .n_listen_fds = n, .key = key, .keylen = keylen, .run_id = run_id};
	struct rb_gateway *gw = NULL;
	struct rb_error err;
	if (rb_gateway_start(&gc, &gw, &err) < 0) {
		fprintf(stderr, "runbox-gateway: %s\n", err.msg);
		return 125;
	}
	memset(key, 0, sizeof key);
	int ready_fd = (int)json_integer_value(ready_j);
	json_decref(cfg);
	if (write(ready_fd, "R", 1) != 1) {
		fprintf(stderr, "runbox-gateway: readiness fd %d: %s\n", ready_fd, strerror(errno));
		return 125;
	}
	close(ready_fd);
	int sig;
	while (sigwait(&mask, &sig) != 0)
		;
	struct rb_gateway_stats st;
	rb_gateway_get_stats(gw, &st);
	rb_gateway_stop(gw);
	json_t *out = rb_gateway_stats_json(&st);
	json_dumpf(out, stdout, JSON_COMPACT);
	fputc('\n', stdout);
	json_decref(out);
	return 0;
}

/* `make bench-serve`'s timer: a keep-alive HTTP/1.1 client of runbox serve's unix socket that
 * times a process round trip in a live session (start `true`, wait for its end) against a host
 * posix_spawn + waitpid of the same static binary, and create-to-first-command. Prints JSON. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct conn {
	int fd;
	const char *path;
	char buf[1 << 16];
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void die(const char *what)
{
	fprintf(stderr, "serve_bench: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void reconnect(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof a.sun_path, "%s", c->path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) < 0)
		die(c->path);
}

/* One call on the kept connection; the reply's body parsed (NULL when empty); *status. */
static json_t *call(struct conn *c, const char *method, const char *path, const char *body, int *status)
{
	char req[4096];
	size_t bl = body ? strlen(body) : 0;
	int n = snprintf(
	    req, sizeof req,
	    "%s %s HTTP/1.1\r\nHost: runbox\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s", method,
	    path, bl, body ? body : "");
	if (write(c->fd, req, (size_t)n) != n)
		die("write");
	size_t have = 0;
	char *hdr_end = NULL;
	while (!hdr_end) {
		ssize_t r = read(c->fd, c->buf + have, sizeof c->buf - 1 - have);
		if (r <= 0)
			die("read");
		have += (size_t)r;
		c->buf[have] = '\0';
		hdr_end = strstr(c->buf, "\r\n\r\n");
	}
	*status = atoi(c->buf + 9);
	const char *cl = strcasestr(c->buf, "Content-Length:");
	size_t len = cl ? strtoul(cl + 15, NULL, 10) : 0;
	size_t off = (size_t)(hdr_end + 4 - c->buf);
	while (have < off + len) {
		ssize_t r = read(c->fd, c->buf + have, sizeof c->buf - 1 - have);
		if (r <= 0)
			die("read");
		have += (size_t)r;
	}
	return len ? json_loadb(c->buf + off, len, 0, NULL) : NULL;
}

static const char *str(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	if (!s) {
		fprintf(stderr, "serve_bench: no `%s` in %s\n", k, json_dumps(o, JSON_COMPACT));
		exit(1);
	}
	return s;
}

/* Start `true` in sid and wait for its end. */
static void round_trip(struct conn *c, const char *sid)
{
	char path[256];
	int st;
	snprintf(path, sizeof path, "/v1/sessions/%s/processes", sid);
	json_t *p = call(c, "POST", path, "{\"argv\": [\"/bin/true\"]}", &st);
	if (st != 201) {
		fprintf(stderr, "serve_bench: start: %d\n", st);
		exit(1);
	}
	snprintf(path, sizeof path, "/v1/sessions/%s/processes/%s/output?wait_ms=10000", sid, str(p, "id"));
	json_decref(p);
	for (;;) {
		json_t *o = call(c, "GET", path, NULL, &st);
		int done = json_is_true(json_object_get(o, "exited"));
		json_decref(o);
		if (done)
			return;
	}
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static json_t *summary(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp);
	return json_pack("{s:f, s:f, s:f, s:i}", "median_ms", v[n / 2], "p95_ms", v[(n * 95) / 100], "min_ms", v[0],
	                 "n", n);
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: serve_bench SOCKET rtt|spawn|create BODY|IMAGE N\n");
		return 2;
	}
	struct conn c = {.fd = -1, .path = argv[1]};
	const char *what = argv[2];
	int n = atoi(argv[argc - 1]);
	double *v = calloc((size_t)n + 1, sizeof *v);
	if (!strcmp(what, "spawn")) {
		/* The host floor: the same static binary, posix_spawn and waitpid. */
		char *args[] = {argv[3], "true", NULL};
		for (int i = 0; i < n + 10; i++) {
			double t0 = now_ms();
			pid_t pid;
			if (posix_spawn(&pid, argv[3], NULL, NULL, args, environ) != 0)
				die("posix_spawn");
			int ws;
			waitpid(pid, &ws, 0);
			if (i >= 10)
				v[i - 10] = now_ms() - t0;
		}
	} else if (!strcmp(what, "rtt")) {
		reconnect(&c);
		int st;
		json_t *s = call(&c, "POST", "/v1/sessions", "{\"image\": \"minimal\", \"policy\": \"default\"}", &st);
		char sid[64];
		snprintf(sid, sizeof sid, "%s", str(s, "id"));
		json_decref(s);
		for (int i = 0; i < n + 10; i++) {
			double t0 = now_ms();
			round_trip(&c, sid);
			if (i >= 10)
				v[i - 10] = now_ms() - t0;
		}
		char path[128];
		snprintf(path, sizeof path, "/v1/sessions/%s", sid);
		json_decref(call(&c, "DELETE", path, NULL, &st));
	} else if (!strcmp(what, "create")) {
		/* Create to the first command's end; the pool's refill is waited for between runs
		 * (untimed), so each pooled create finds a member ready. */
		reconnect(&c);
		int pooled = 0;
		double *reply = calloc((size_t)n + 1, sizeof *reply);
		for (int i = 0; i < n; i++) {
			int st;
			for (int tries = 0; tries < 200; tries++) {
				json_t *stats = call(&c, "GET", "/v1/stats", NULL, &st);
				json_t *p0 = json_array_get(json_object_get(stats, "pool"), 0);
				int ready = !p0 || json_integer_value(json_object_get(p0, "ready")) ==
				                       json_integer_value(json_object_get(p0, "size"));
				json_decref(stats);
				if (ready)
					break;
				usleep(20000);
			}
			double t0 = now_ms();
			json_t *s = call(&c, "POST", "/v1/sessions", argv[3], &st);
			reply[i] = now_ms() - t0;
			if (st != 201) {
				fprintf(stderr, "serve_bench: create: %d\n", st);
				return 1;
			}
			char sid[64];
			snprintf(sid, sizeof sid, "%s", str(s, "id"));
			pooled += json_is_true(json_object_get(s, "pooled"));
			json_decref(s);
			round_trip(&c, sid);
			v[i] = now_ms() - t0;
			char path[128];
			snprintf(path, sizeof path, "/v1/sessions/%s", sid);
			json_decref(call(&c, "DELETE", path, NULL, &st));
		}
		json_t *o = summary(v, n);
		json_object_set_new(o, "pooled", json_integer(pooled));
		json_object_set_new(o, "create_reply", summary(reply, n));
		char *t = json_dumps(o, JSON_COMPACT);
		puts(t);
		return 0;
	} else {
		fprintf(stderr, "serve_bench: unknown `%s`\n", what);
		return 2;
	}
	char *t = json_dumps(summary(v, n), JSON_COMPACT);
	puts(t);
	return 0;
}

/* `runbox serve` (execs the runbox-serve daemon) and its clients: `runbox session
 * create|ls|rm`, `runbox exec ID -- CMD`, over a small HTTP/1.1 client on the unix socket. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cli/commands.h"
#include "common/log.h"
#include "common/paths.h"

#define REPLY_CAP (64u << 20)

int rb_cmd_serve(int argc, char **argv)
{
	struct rb_parts parts;
	struct rb_error err;
	if (rb_parts_find(&parts, rb_cli_host(), &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	/* runbox-serve lives where runbox-gateway does: beside runbox, or in libexec/runbox. */
	char dir[PATH_MAX], bin[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s", parts.gateway);
	snprintf(bin, sizeof bin, "%s/runbox-serve", dirname(dir));
	argv[0] = bin;
	execv(bin, argv);
	rb_err("serve: %s: %s", bin, strerror(errno));
	return 125;
}

static const char *socket_path(const char *given, char *buf, size_t len)
{
	if (given && *given)
		return given;
	const char *env = getenv("RUNBOX_SOCKET");
	if (env && *env)
		return env;
	if (geteuid() == 0) {
		snprintf(buf, len, "/run/runbox/serve.sock");
	} else {
		const char *x = getenv("XDG_RUNTIME_DIR");
		if (!x || !*x)
			return NULL;
		snprintf(buf, len, "%s/runbox/serve.sock", x);
	}
	return buf;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* One call: returns the HTTP status and the reply's JSON in *out, or -1 with a message said. */
static int call(const char *sock, const char *method, const char *path, const json_t *body, json_t **out)
{
	*out = NULL;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	if (strlen(sock) >= sizeof a.sun_path) {
		rb_err("socket %s: too long", sock);
		return -1;
	}
	memcpy(a.sun_path, sock, strlen(sock) + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		rb_err("socket %s: %s (is `runbox serve` running?)", sock, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	size_t blen = text ? strlen(text) : 0;
	char head[1024];
	int hl = snprintf(head, sizeof head,
	                  "%s %s HTTP/1.1\r\nHost: runbox\r\nConnection: close\r\nContent-Type: application/json\r\n"
	                  "Content-Length: %zu\r\n\r\n",
	                  method, path, blen);
	if (write_all(fd, head, (size_t)hl) < 0 || (blen && write_all(fd, text, blen) < 0)) {
		rb_err("socket %s: %s", sock, strerror(errno));
		free(text);
		close(fd);
		return -1;
	}
	free(text);
	size_t len = 0, cap = 8192;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf || len + 1 >= cap) {
			char *nb = cap < REPLY_CAP ? realloc(buf, cap *= 2) : NULL;
			if (!nb) {
				free(buf);
				close(fd);
				rb_err("socket %s: reply too large", sock);
				return -1;
			}
			buf = nb;
		}
		ssize_t r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rb_err("socket %s: %s", sock, strerror(errno));
			free(buf);
			close(fd);
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	int status = 0;
	char *sep = strstr(buf, "\r\n\r\n");
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1 || !sep) {
		rb_err("socket %s: not an HTTP reply", sock);
		free(buf);
		return -1;
	}
	*out = json_loads(sep + 4, 0, NULL);
	free(buf);
	if (!*out) {
		rb_err("socket %s: the reply is not JSON (HTTP %d)", sock, status);
		return -1;
	}
	return status;
}

/* A call whose failure (status >= 400) is said on stderr; returns the reply or NULL. */
static json_t *call_ok(const char *sock, const char *method, const char *path, const json_t *body)
{
	json_t *r;
	int st = call(sock, method, path, body, &r);
	if (st < 0)
		return NULL;
	if (st >= 400) {
		rb_err("%s", json_string_value(json_object_get(r, "error")) ?: "request failed");
		json_decref(r);
		return NULL;
	}
	return r;
}

static void session_usage(FILE *f)
{
	fputs("usage: runbox session create [--image I] [--policy P] [--tenant T] [--agent A] [--idle-timeout D]\n"
	      "                             [--from-snapshot REF]\n"
	      "                             [--agent-version V] [--label K=V]... [--max-lifetime D]\n"
	      "                             [--memory SIZE] [--cpus N] [--pids N]\n"
	      "       runbox session ls\n"
	      "       runbox session rm ID\n"
	      "       runbox session snapshot ID   prints the snapshot's REF (sha256:...) of its /workspace\n"
	      "  --socket PATH   runbox serve's socket (default: RUNBOX_SOCKET, else serve's default)\n",
	      f);
}

int rb_cmd_session(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"image", required_argument, NULL, 'i'},
	    {"policy", required_argument, NULL, 'p'},
	    {"tenant", required_argument, NULL, 't'},
	    {"agent", required_argument, NULL, 'a'},
	    {"idle-timeout", required_argument, NULL, 'I'},
	    {"from-snapshot", required_argument, NULL, 'S'},
	    {"agent-version", required_argument, NULL, 'V'},
	    {"label", required_argument, NULL, 'L'},
	    {"max-lifetime", required_argument, NULL, 'T'},
	    {"memory", required_argument, NULL, 'm'},
	    {"cpus", required_argument, NULL, 'c'},
	    {"pids", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	if (argc < 2) {
		session_usage(stderr);
		return 125;
	}
	const char *verb = argv[1];
	if (!strcmp(verb, "--help") || !strcmp(verb, "-h")) {
		session_usage(stdout);
		return 0;
	}
	const char *sock_opt = NULL;
	json_t *body = json_object();
	int c;
	optind = 1;
	while ((c = getopt_long(argc - 1, argv + 1, "+h", opts, NULL)) != -1) {
		const char *key = c == 'i'   ? "image"
		                  : c == 'p' ? "policy"
		                  : c == 't' ? "tenant"
		                  : c == 'a' ? "agent"
		                  : c == 'I' ? "idle_timeout"
		                  : c == 'S' ? "snapshot"
		                  : c == 'V' ? "agent_version"
		                  : c == 'T' ? "max_lifetime"
		                             : NULL;
		/* Limits and labels go into their objects; the daemon checks every value. */
		const char *limit = c == 'm' ? "memory" : c == 'c' ? "cpus" : c == 'P' ? "pids" : NULL;
		const char *eq = c == 'L' ? strchr(optarg, '=') : NULL;
		if (c == 's') {
			sock_opt = optarg;
		} else if (limit && !strcmp(verb, "create")) {
			if (!json_object_get(body, "limits"))
				json_object_set_new(body, "limits", json_object());
			char *end = NULL;
			double num = strtod(optarg, &end);
			json_t *v = c == 'm'           ? json_string(optarg)
			            : *optarg && !*end ? (c == 'c' ? json_real(num) : json_integer((json_int_t)num))
			                               : json_string(optarg);
			json_object_set_new(json_object_get(body, "limits"), limit, v);
		} else if (eq && eq != optarg && !strcmp(verb, "create")) {
			if (!json_object_get(body, "labels"))
				json_object_set_new(body, "labels", json_object());
			char name[128];
			snprintf(name, sizeof name, "%.*s", (int)(eq - optarg), optarg);
			json_object_set_new(json_object_get(body, "labels"), name, json_string(eq + 1));
		} else if (key && !strcmp(verb, "create")) {
			json_object_set_new(body, key, json_string(optarg));
		} else {
			session_usage(c == 'h' ? stdout : stderr);
			json_decref(body);
			return c == 'h' ? 0 : 125;
		}
	}
	char buf[PATH_MAX];
	const char *sock = socket_path(sock_opt, buf, sizeof buf);
	if (!sock) {
		rb_err("no socket: give --socket PATH or set RUNBOX_SOCKET");
		json_decref(body);
		return 125;
	}
	int rest = argc - 1 - optind; /* operands after the verb */
	char **operand = argv + 1 + optind;
	json_t *r = NULL;
	int code = 0;
	if (!strcmp(verb, "create") && rest == 0) {
		r = call_ok(sock, "POST", "/v1/sessions", body);
		if (r)
			printf("%s\n", json_string_value(json_object_get(r, "id")));
	} else if (!strcmp(verb, "ls") && rest == 0) {
		r = call_ok(sock, "GET", "/v1/sessions", NULL);
		size_t i;
		json_t *s;
		json_array_foreach(json_object_get(r, "sessions"), i, s)
		{
			printf("%s  run %s  image %s  policy %s  tenant %s  processes %lld\n",
			       json_string_value(json_object_get(s, "id")),
			       json_string_value(json_object_get(s, "run_id")),
			       json_string_value(json_object_get(s, "image")),
			       json_string_value(json_object_get(s, "policy")),
			       json_string_value(json_object_get(s, "tenant")),
			       (long long)json_integer_value(json_object_get(s, "processes")));
		}
	} else if (!strcmp(verb, "snapshot") && rest == 1 &&
	           strspn(operand[0], "0123456789abcdef") == strlen(operand[0])) {
		char path[128];
		snprintf(path, sizeof path, "/v1/sessions/%s/snapshots", operand[0]);
		json_t *empty = json_object();
		r = call_ok(sock, "POST", path, empty);
		json_decref(empty);
		if (r)
			printf("%s\n", json_string_value(json_object_get(r, "ref")));
	} else if (!strcmp(verb, "rm") && rest == 1 && strspn(operand[0], "0123456789abcdef") == strlen(operand[0])) {
		char path[128];
		snprintf(path, sizeof path, "/v1/sessions/%s", operand[0]);
		r = call_ok(sock, "DELETE", path, NULL);
	} else {
		session_usage(stderr);
		json_decref(body);
		return 125;
	}
	if (!r)
		code = 125;
	json_decref(r);
	json_decref(body);
	return code;
}

/* A chunk's bytes to fd: its text, or its base64 decoded. */
static void put_chunk(const json_t *ch)
{
	const char *d = json_string_value(json_object_get(ch, "data"));
	size_t n = json_string_length(json_object_get(ch, "data"));
	int fd = !strcmp(json_string_value(json_object_get(ch, "stream")) ?: "", "stderr") ? 2 : 1;
	if (!d)
		return;
	if (json_object_get(ch, "encoding")) {
		unsigned char *b = malloc(n / 4 * 3 + 3);
		int m = b ? EVP_DecodeBlock(b, (const unsigned char *)d, (int)n) : -1;
		if (m >= 0) {
			for (size_t i = n; i > 0 && d[i - 1] == '='; i--)
				m--; /* EVP_DecodeBlock counts the padding's bytes */
			(void)write_all(fd, (const char *)b, (size_t)m);
		}
		free(b);
		return;
	}
	(void)write_all(fd, d, n);
}

static void exec_usage(FILE *f)
{
	fputs("usage: runbox exec [--socket PATH] [--cwd DIR] [--timeout D] ID -- CMD ARGS...\n"
	      "  runs CMD in the live session ID; its output streams here, its exit code is runbox's\n",
	      f);
}

int rb_cmd_exec(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"cwd", required_argument, NULL, 'c'},
	    {"timeout", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *sock_opt = NULL;
	json_t *body = json_object();
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		if (c == 's')
			sock_opt = optarg;
		else if (c == 'c')
			json_object_set_new(body, "cwd", json_string(optarg));
		else if (c == 't')
			json_object_set_new(body, "timeout", json_string(optarg));
		else {
			exec_usage(c == 'h' ? stdout : stderr);
			json_decref(body);
			return c == 'h' ? 0 : 125;
		}
	}
	/* ID, then the command (after `--`, which getopt consumed when it came first). */
	if (optind >= argc) {
		exec_usage(stderr);
		json_decref(body);
		return 125;
	}
	const char *sid = argv[optind++];
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	if (optind >= argc || strspn(sid, "0123456789abcdef") != strlen(sid) || strlen(sid) > 64) {
		exec_usage(stderr);
		json_decref(body);
		return 125;
	}
	json_t *av = json_array();
	for (int i = optind; i < argc; i++) {
		json_t *s = json_string(argv[i]);
		if (!s) {
			rb_err("argument %d is not valid UTF-8", i - optind);
			json_decref(av);
			json_decref(body);
			return 125;
		}
		json_array_append_new(av, s);
	}
	json_object_set_new(body, "argv", av);
	char buf[PATH_MAX];
	const char *sock = socket_path(sock_opt, buf, sizeof buf);
	if (!sock) {
		rb_err("no socket: give --socket PATH or set RUNBOX_SOCKET");
		json_decref(body);
		return 125;
	}
	char path[256];
	snprintf(path, sizeof path, "/v1/sessions/%s/processes", sid);
	json_t *r = call_ok(sock, "POST", path, body);
	json_decref(body);
	if (!r)
		return 125;
	char pid[72];
	snprintf(pid, sizeof pid, "%s", json_string_value(json_object_get(r, "id")) ?: "");
	json_decref(r);
	uint64_t after = 0;
	for (;;) {
		snprintf(path, sizeof path, "/v1/sessions/%s/processes/%s/output?after_seq=%llu&wait_ms=30000", sid,
		         pid, (unsigned long long)after);
		r = call_ok(sock, "GET", path, NULL);
		if (!r)
			return 125;
		size_t i;
		json_t *ch;
		json_array_foreach(json_object_get(r, "chunks"), i, ch)
		{
			put_chunk(ch);
		}
		after = (uint64_t)json_integer_value(json_object_get(r, "next_seq"));
		if (json_is_true(json_object_get(r, "exited"))) {
			json_t *res = json_object_get(r, "result");
			int code = (int)json_integer_value(json_object_get(res, "exit"));
			const char *st = json_string_value(json_object_get(res, "status")) ?: "";
			if (!strcmp(st, "setup_failed") || !strcmp(st, "exec_failed"))
				rb_err("%s", json_string_value(json_object_get(res, "error")) ?: st);
			json_decref(r);
			return code;
		}
		json_decref(r);
	}
}

/* `runbox serve` (execs the runbox-serve daemon) and its clients: `runbox session
 * create|ls|rm`, `runbox exec ID -- CMD`, over a small HTTP/1.1 client on the unix socket. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <poll.h>
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
#include "cli/term.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"

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

const char *rb_cli_serve_socket(const char *given, char *buf, size_t len)
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

int rb_cli_serve_connect(const char *sock)
{
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
	return fd;
}

static int call_bytes(const char *sock, const char *method, const char *path, const char *text, size_t blen,
                      json_t **out);

/* One call: returns the HTTP status and the reply's JSON in *out, or -1 with a message said. */
static int call(const char *sock, const char *method, const char *path, const json_t *body, json_t **out)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	int st = call_bytes(sock, method, path, text, text ? strlen(text) : 0, out);
	free(text);
	return st;
}

/* The same with a raw body (a process's stdin). */
static int call_bytes(const char *sock, const char *method, const char *path, const char *text, size_t blen,
                      json_t **out)
{
	*out = NULL;
	int fd = rb_cli_serve_connect(sock);
	if (fd < 0)
		return -1;
	char head[1024];
	int hl = snprintf(head, sizeof head,
	                  "%s %s HTTP/1.1\r\nHost: runbox\r\nConnection: close\r\nContent-Type: application/json\r\n"
	                  "Content-Length: %zu\r\n\r\n",
	                  method, path, blen);
	if (rb_write_all(fd, head, (size_t)hl) < 0 || (blen && rb_write_all(fd, text, blen) < 0)) {
		rb_err("socket %s: %s", sock, strerror(errno));
		close(fd);
		return -1;
	}
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
	const char *sock = rb_cli_serve_socket(sock_opt, buf, sizeof buf);
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
			(void)rb_write_all(fd, (const char *)b, (size_t)m);
		}
		free(b);
		return;
	}
	(void)rb_write_all(fd, d, n);
}

/* What `runbox exec` moves while its process runs: the output stream in, and with -i its
 * stdin out, with -t its terminal's sizes out. */
struct exec_io {
	const char *sock;
	char proc[256]; /* /v1/sessions/SID/processes/PID */
	int in;         /* runbox's stdin, forwarded to the process's (-i), or -1 */
	int winch;      /* sizes of runbox's terminal from SIGWINCH (-t), or -1 */
};

/* The body of a reply as it comes: chunked (Transfer-Encoding) or not, into out. */
struct dechunk {
	bool chunked, done;
	int state; /* 0: a chunk's size line, 1: its data, 2: the CRLF after it */
	uint64_t left;
	char raw[65536];
	size_t rlen;
};

/* Grows *buf (len bytes, cap) by n bytes of p; -1 when out of memory. */
static int append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
	if (!n)
		return 0;
	if (!*buf || *len + n + 1 > *cap) {
		size_t nc = (*len + n + 1) * 2;
		char *nb = nc < REPLY_CAP ? realloc(*buf, nc) : NULL;
		if (!nb)
			return -1;
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* Moves what dc->raw holds of the body into *out. -1 on a malformed chunk or no memory. */
static int dechunk_feed(struct dechunk *dc, char **out, size_t *len, size_t *cap)
{
	size_t pos = 0;
	int r = 0;
	while (pos < dc->rlen && !dc->done && r == 0) {
		char *p = dc->raw + pos;
		size_t have = dc->rlen - pos;
		if (!dc->chunked) {
			r = append(out, len, cap, p, have);
			pos += have;
		} else if (dc->state == 0) {
			char *nl = memchr(p, '\n', have);
			if (!nl)
				break;
			char *end;
			unsigned long long n = strtoull(p, &end, 16);
			if (end == p)
				return -1;
			pos += (size_t)(nl - p) + 1;
			dc->left = n;
			dc->state = n ? 1 : 0;
			dc->done = n == 0;
		} else if (dc->state == 1) {
			size_t take = have < dc->left ? have : (size_t)dc->left;
			r = append(out, len, cap, p, take);
			pos += take;
			dc->left -= take;
			if (!dc->left)
				dc->state = 2;
		} else {
			char *nl = memchr(p, '\n', have);
			if (!nl)
				break;
			pos += (size_t)(nl - p) + 1;
			dc->state = 0;
		}
	}
	memmove(dc->raw, dc->raw + pos, dc->rlen - pos);
	dc->rlen -= pos;
	return r;
}

/* One NDJSON line of the stream: a chunk is written out; the last line gives the exit code
 * (*code, returns 1); -1 on an error line or one that is not JSON. */
static int exec_line(const char *line, int *code)
{
	json_t *o = json_loads(line, 0, NULL);
	if (!o) {
		rb_err("exec: the output stream holds a line that is not JSON");
		return -1;
	}
	int r = 0;
	if (json_object_get(o, "error")) {
		rb_err("%s", json_string_value(json_object_get(o, "error")) ?: "the output stream failed");
		r = -1;
	} else if (json_is_true(json_object_get(o, "exited"))) {
		json_t *res = json_object_get(o, "result");
		*code = (int)json_integer_value(json_object_get(res, "exit"));
		const char *st = json_string_value(json_object_get(res, "status")) ?: "";
		if (!strcmp(st, "setup_failed") || !strcmp(st, "exec_failed"))
			rb_err("%s", json_string_value(json_object_get(res, "error")) ?: st);
		r = 1;
	} else {
		put_chunk(o);
	}
	json_decref(o);
	return r;
}

/* -i: a read of runbox's stdin goes to the process's (its EOF closes that); a refusal (the
 * process ended or closed its stdin) ends the forwarding, not the exec. */
static void exec_forward_stdin(struct exec_io *io)
{
	char data[65536];
	ssize_t n = read(io->in, data, sizeof data);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	char path[300];
	snprintf(path, sizeof path, "%s/stdin%s", io->proc, n > 0 ? "" : "?close=1");
	json_t *r = NULL;
	int st = call_bytes(io->sock, "POST", path, data, n > 0 ? (size_t)n : 0, &r);
	json_decref(r);
	if (n <= 0 || st < 0 || st >= 400)
		io->in = -1;
}

/* -t: the newest size SIGWINCH gave, to the process's terminal. */
static void exec_forward_size(struct exec_io *io)
{
	struct rb_tty_size sz[16], last = {0, 0};
	ssize_t n;
	while ((n = read(io->winch, sz, sizeof sz)) >= (ssize_t)sizeof sz[0])
		last = sz[n / (ssize_t)sizeof sz[0] - 1];
	if (!last.rows)
		return;
	json_t *body = json_pack("{s:i, s:i}", "rows", last.rows, "cols", last.cols), *r = NULL;
	char path[300];
	snprintf(path, sizeof path, "%s/resize", io->proc);
	(void)call(io->sock, "POST", path, body, &r); /* an ended process is no error of runbox's */
	json_decref(body);
	json_decref(r);
}

/* Reads the process's NDJSON output stream to its last line, forwarding stdin and sizes
 * meanwhile; returns the process's exit code, or 125. */
static int exec_stream(struct exec_io *io)
{
	int fd = rb_cli_serve_connect(io->sock);
	if (fd < 0)
		return 125;
	char head[512];
	int hl = snprintf(head, sizeof head,
	                  "GET %s/output?stream=1 HTTP/1.1\r\nHost: runbox\r\nConnection: close\r\n"
	                  "Accept: application/x-ndjson\r\n\r\n",
	                  io->proc);
	struct dechunk *dc = calloc(1, sizeof *dc);
	char *lines = NULL, *hbuf = NULL;
	size_t llen = 0, lcap = 0, hlen = 0, hcap = 0;
	int code = 125, status = 0;
	bool in_body = false;
	if (!dc || rb_write_all(fd, head, (size_t)hl) < 0) {
		rb_err("socket %s: %s", io->sock, strerror(errno ?: ENOMEM));
		goto out;
	}
	for (;;) {
		struct pollfd pf[3] = {{.fd = fd, .events = POLLIN},
		                       {.fd = io->in, .events = POLLIN},
		                       {.fd = io->winch, .events = POLLIN}};
		if (poll(pf, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			rb_err("exec: poll: %s", strerror(errno));
			goto out;
		}
		if (pf[2].revents & POLLIN)
			exec_forward_size(io);
		if (pf[1].revents & (POLLIN | POLLHUP | POLLERR))
			exec_forward_stdin(io);
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t n = read(fd, dc->raw + dc->rlen, sizeof dc->raw - dc->rlen);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rb_err("exec: the output stream ended before the process did%s%s", n < 0 ? ": " : "",
			       n < 0 ? strerror(errno) : "");
			goto out;
		}
		dc->rlen += (size_t)n;
		if (!in_body) {
			/* The head: its status, and whether the body is chunked. */
			if (append(&hbuf, &hlen, &hcap, dc->raw, dc->rlen) < 0)
				goto out;
			char *sep = strstr(hbuf, "\r\n\r\n");
			if (!sep) {
				dc->rlen = 0;
				continue;
			}
			*sep = '\0';
			size_t body_off = (size_t)(sep + 4 - hbuf);
			size_t rest = hlen - body_off;
			memmove(dc->raw, hbuf + body_off, rest);
			dc->rlen = rest;
			if (sscanf(hbuf, "HTTP/1.%*d %d", &status) != 1) {
				rb_err("socket %s: not an HTTP reply", io->sock);
				goto out;
			}
			dc->chunked = strcasestr(hbuf, "\r\ntransfer-encoding: chunked") != NULL;
			in_body = true;
		}
		if (dechunk_feed(dc, &lines, &llen, &lcap) < 0) {
			rb_err("exec: the output stream is malformed");
			goto out;
		}
		if (status != 200) {
			/* An error reply: one JSON object, the whole body. */
			if (!dc->done && (!lines || !strchr(lines, '\n')))
				continue;
			json_t *e = lines ? json_loads(lines, 0, NULL) : NULL;
			rb_err("%s", json_string_value(json_object_get(e, "error")) ?: "the output stream failed");
			json_decref(e);
			goto out;
		}
		char *nl;
		while (lines && (nl = memchr(lines, '\n', llen))) {
			*nl = '\0';
			int r = exec_line(lines, &code);
			if (r != 0) {
				if (r < 0)
					code = 125;
				goto out;
			}
			size_t used = (size_t)(nl + 1 - lines);
			memmove(lines, nl + 1, llen - used);
			llen -= used;
			lines[llen] = '\0';
		}
	}
out:
	close(fd);
	free(dc);
	free(lines);
	free(hbuf);
	return code;
}

static void exec_usage(FILE *f)
{
	fputs("usage: runbox exec [--socket PATH] [--cwd DIR] [--timeout D] [-i] [-t] ID -- CMD ARGS...\n"
	      "  runs CMD in the live session ID; its output streams here, its exit code is runbox's\n"
	      "  -i, --interactive  runbox's stdin goes to CMD's (its EOF closes CMD's stdin)\n"
	      "  -t, --tty          CMD runs on a terminal sized as runbox's (and resized with it);\n"
	      "                     with -i on a terminal, runbox's is in raw mode meanwhile\n",
	      f);
}

int rb_cmd_exec(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"cwd", required_argument, NULL, 'c'},
	    {"timeout", required_argument, NULL, 'T'},
	    {"interactive", no_argument, NULL, 'i'},
	    {"tty", no_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *sock_opt = NULL;
	json_t *body = json_object();
	int c, tty = 0;
	bool interactive = false;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+hit", opts, NULL)) != -1) {
		if (c == 's')
			sock_opt = optarg;
		else if (c == 'c')
			json_object_set_new(body, "cwd", json_string(optarg));
		else if (c == 'T')
			json_object_set_new(body, "timeout", json_string(optarg));
		else if (c == 'i')
			interactive = true;
		else if (c == 't')
			tty++;
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
	if (tty == 1 && !isatty(STDIN_FILENO)) {
		rb_err("exec -t: the input device is not a TTY (runbox's stdin is no terminal; -tt gives the "
		       "command a terminal without one)");
		json_decref(body);
		return 125;
	}
	int src = isatty(STDIN_FILENO) ? STDIN_FILENO : isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
	if (tty) {
		struct rb_tty_size sz;
		if (src < 0 || !rb_term_size(src, &sz))
			sz = (struct rb_tty_size){24, 80};
		json_object_set_new(body, "tty", json_true());
		json_object_set_new(body, "size", json_pack("{s:i, s:i}", "rows", sz.rows, "cols", sz.cols));
	} else if (interactive) {
		json_object_set_new(body, "stdin", json_true());
	}
	char buf[PATH_MAX];
	const char *sock = rb_cli_serve_socket(sock_opt, buf, sizeof buf);
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
	struct exec_io io = {.sock = sock, .in = interactive ? STDIN_FILENO : -1, .winch = -1};
	snprintf(io.proc, sizeof io.proc, "/v1/sessions/%s/processes/%s", sid, pid);
	if (tty && src >= 0 && (io.winch = rb_term_watch_size(src)) < 0)
		rb_err("exec -t: the terminal's size: %s", strerror(errno));
	if (tty && interactive && isatty(STDIN_FILENO) && rb_term_raw(STDIN_FILENO) < 0)
		rb_err("exec -it: raw mode on the terminal: %s", strerror(errno));
	int code = exec_stream(&io);
	rb_term_restore();
	return code;
}

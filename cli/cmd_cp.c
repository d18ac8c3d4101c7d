/* `runbox cp SRC ID:PATH` and `runbox cp ID:PATH DEST`: one file to or from a live session of
 * runbox serve, streamed both ways (`-` is stdin or stdout), never held whole in memory. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#define CHUNK (64u << 10)

static void cp_usage(FILE *f)
{
	fputs("usage: runbox cp [--socket PATH] [--parents] SRC ID:PATH   a file into a session ('-': stdin)\n"
	      "       runbox cp [--socket PATH] ID:PATH DEST              a file out of one ('-': stdout)\n"
	      "  PATH is absolute inside the sandbox; one ending in `/` (or a DEST directory) takes the\n"
	      "  other side's name. A file put keeps SRC's permission bits (0644 from stdin).\n"
	      "  --parents       make PATH's missing directories\n"
	      "  --socket PATH   runbox serve's socket (default: RUNBOX_SOCKET, else serve's default)\n",
	      f);
}

/* "ID:PATH" with ID 32 hex digits and PATH absolute: the two parts; false for a local path. */
static bool remote(const char *arg, char id[33], const char **path)
{
	const char *colon = strchr(arg, ':');
	if (!colon || colon - arg != 32 || strspn(arg, "0123456789abcdef") != 32 || colon[1] != '/')
		return false;
	memcpy(id, arg, 32);
	id[32] = '\0';
	*path = colon + 1;
	return true;
}

/* s percent-encoded for a query value. */
static void qencode(const char *s, char *out, size_t len)
{
	size_t n = 0;
	for (; *s && n + 4 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c))
			out[n++] = (char)c;
		else
			n += (size_t)snprintf(out + n, len - n, "%%%02X", c);
	}
	out[n] = '\0';
}

/* The reply's status line and headers, read byte by byte up to the blank line (the body stays in
 * the socket for the caller). */
static int read_head(int fd, int *status)
{
	char head[8192];
	size_t n = 0;
	while (n + 1 < sizeof head) {
		ssize_t r = read(fd, head + n, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n++;
		if (n >= 4 && !memcmp(head + n - 4, "\r\n\r\n", 4)) {
			head[n] = '\0';
			return sscanf(head, "HTTP/1.%*d %d", status) == 1 ? 0 : -1;
		}
	}
	return -1;
}

/* An error reply's {"error"} said on stderr. */
static void say_error(int fd, int status)
{
	char buf[4096];
	size_t n = 0;
	for (ssize_t r; n + 1 < sizeof buf && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0;)
		n += (size_t)r;
	buf[n] = '\0';
	json_t *j = json_loads(buf, 0, NULL);
	rb_err("cp: %s (HTTP %d)", json_string_value(json_object_get(j, "error")) ?: "request failed", status);
	json_decref(j);
}

static int get_file(const char *sock, const char *id, const char *path, const char *dest)
{
	char q[PATH_MAX * 3], target[PATH_MAX];
	qencode(path, q, sizeof q);
	struct stat st;
	const char *base = strrchr(path, '/') + 1;
	if (strcmp(dest, "-") != 0 && stat(dest, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(target, sizeof target, "%s/%s", dest, base);
	else
		snprintf(target, sizeof target, "%s", dest);
	_cleanup_close_ int s = rb_cli_serve_connect(sock);
	if (s < 0)
		return 125;
	char head[PATH_MAX * 3 + 256];
	int hl =
	    snprintf(head, sizeof head,
	             "GET /v1/sessions/%s/files?path=%s HTTP/1.1\r\nHost: runbox\r\nConnection: close\r\n\r\n", id, q);
	int status = 0;
	if (rb_write_all(s, head, (size_t)hl) < 0 || read_head(s, &status) < 0) {
		rb_err("socket %s: no HTTP reply", sock);
		return 125;
	}
	if (status != 200) {
		say_error(s, status);
		return 125;
	}
	bool to_stdout = !strcmp(target, "-");
	_cleanup_close_ int out = to_stdout ? -1 : open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!to_stdout && out < 0) {
		rb_err("cp: open `%s`: %s", target, strerror(errno));
		return 125;
	}
	_cleanup_free_ char *buf = malloc(CHUNK);
	if (!buf)
		return 125;
	for (;;) {
		ssize_t r = read(s, buf, CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rb_err("socket %s: %s", sock, strerror(errno));
			return 125;
		}
		if (r == 0)
			break;
		if (rb_write_all(to_stdout ? 1 : out, buf, (size_t)r) < 0) {
			rb_err("cp: write `%s`: %s", target, strerror(errno));
			return 125;
		}
	}
	return 0;
}

static int put_file(const char *sock, const char *src, const char *id, const char *path, bool parents)
{
	bool from_stdin = !strcmp(src, "-");
	_cleanup_close_ int in = from_stdin ? -1 : open(src, O_RDONLY | O_CLOEXEC);
	struct stat st = {.st_mode = S_IFREG | 0644};
	if (!from_stdin && (in < 0 || fstat(in, &st) < 0)) {
		rb_err("cp: `%s`: %s", src, strerror(errno));
		return 125;
	}
	if (!S_ISREG(st.st_mode)) {
		rb_err("cp: `%s`: not a regular file", src);
		return 125;
	}
	char full[PATH_MAX], q[PATH_MAX * 3];
	const char *sb = strrchr(src, '/');
	if (path[strlen(path) - 1] == '/' && !from_stdin)
		snprintf(full, sizeof full, "%s%s", path, sb ? sb + 1 : src);
	else
		snprintf(full, sizeof full, "%s", path);
	qencode(full, q, sizeof q);
	_cleanup_close_ int s = rb_cli_serve_connect(sock);
	if (s < 0)
		return 125;
	/* A file's length is known; stdin's is not, so it goes chunked. */
	char head[PATH_MAX * 3 + 256], len[48];
	if (from_stdin)
		snprintf(len, sizeof len, "Transfer-Encoding: chunked");
	else
		snprintf(len, sizeof len, "Content-Length: %lld", (long long)st.st_size);
	int hl =
	    snprintf(head, sizeof head,
	             "PUT /v1/sessions/%s/files?path=%s&mode=%04o%s HTTP/1.1\r\nHost: runbox\r\nConnection: close\r\n"
	             "Content-Type: application/octet-stream\r\n%s\r\n\r\n",
	             id, q, (unsigned)(st.st_mode & 07777), parents ? "&parents=1" : "", len);
	if (rb_write_all(s, head, (size_t)hl) < 0) {
		rb_err("socket %s: %s", sock, strerror(errno));
		return 125;
	}
	_cleanup_free_ char *buf = malloc(CHUNK);
	if (!buf)
		return 125;
	int werr = 0;
	for (;;) {
		ssize_t r = read(from_stdin ? 0 : in, buf, CHUNK);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rb_err("cp: read `%s`: %s", src, strerror(errno));
			return 125;
		}
		char ch[24];
		int cl = from_stdin ? snprintf(ch, sizeof ch, "%zx\r\n", (size_t)r) : 0;
		/* A write refused midway (the daemon answered early, an error) leaves the reply to read. */
		if ((cl && rb_write_all(s, ch, (size_t)cl) < 0) || (r && rb_write_all(s, buf, (size_t)r) < 0) ||
		    (cl && rb_write_all(s, "\r\n", 2) < 0)) {
			werr = errno;
			break;
		}
		if (r == 0)
			break;
	}
	int status = 0;
	if (read_head(s, &status) < 0) {
		rb_err("socket %s: no HTTP reply%s%s", sock, werr ? ": " : "", werr ? strerror(werr) : "");
		return 125;
	}
	if (status != 200) {
		say_error(s, status);
		return 125;
	}
	return 0;
}

int rb_cmd_cp(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"parents", no_argument, NULL, 'p'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *sock_opt = NULL;
	bool parents = false;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "hp", opts, NULL)) != -1) {
		if (c == 's')
			sock_opt = optarg;
		else if (c == 'p')
			parents = true;
		else {
			cp_usage(c == 'h' ? stdout : stderr);
			return c == 'h' ? 0 : 125;
		}
	}
	if (argc - optind != 2) {
		cp_usage(stderr);
		return 125;
	}
	const char *src = argv[optind], *dst = argv[optind + 1], *rpath;
	char id[33], buf[PATH_MAX];
	const char *sock = rb_cli_serve_socket(sock_opt, buf, sizeof buf);
	if (!sock) {
		rb_err("no socket: give --socket PATH or set RUNBOX_SOCKET");
		return 125;
	}
	bool src_remote = remote(src, id, &rpath);
	if (src_remote && !strchr(dst, ':'))
		return get_file(sock, id, rpath, dst);
	if (!src_remote && remote(dst, id, &rpath))
		return put_file(sock, src, id, rpath, parents);
	rb_err("cp: one side is ID:PATH (a session's id, an absolute path in its sandbox), the other a local "
	       "file or `-`");
	return 125;
}

/* `runbox approve [ID]` and `runbox deny ID`: the decision on a connector call the run's policy
 * holds for approval (network.approval). The held call's request is <run dir>/approvals/ID.json;
 * a decision is <ID>.decision, made with link() so the first one (or the gateway's "expired")
 * wins. `runbox approve` without an ID lists the requests still pending. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/util.h"

static bool id_ok(const char *id)
{
	if (strncmp(id, "apr-", 4) != 0 || strlen(id) != 20)
		return false;
	for (const char *p = id + 4; *p; p++)
		if (!strchr("0123456789abcdef", *p))
			return false;
	return true;
}

/* Calls fn for each request file under run_dir/<run>/approvals; stops when fn returns non-zero. */
static int each_request(const char *run_dir, int (*fn)(const char *dir, const char *id, void *ctx), void *ctx)
{
	DIR *runs = opendir(run_dir);
	if (!runs)
		return 0;
	struct dirent *r;
	int ret = 0;
	while (!ret && (r = readdir(runs))) {
		if (r->d_name[0] == '.')
			continue;
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/%s/approvals", run_dir, r->d_name);
		DIR *d = opendir(dir);
		if (!d)
			continue;
		struct dirent *e;
		while (!ret && (e = readdir(d))) {
			size_t n = strlen(e->d_name);
			if (n != 25 || strcmp(e->d_name + 20, ".json") != 0)
				continue;
			char id[24];
			snprintf(id, sizeof id, "%.20s", e->d_name);
			if (id_ok(id))
				ret = fn(dir, id, ctx);
		}
		closedir(d);
	}
	closedir(runs);
	return ret;
}

static void decision_of(const char *dir, const char *id, char *out, size_t n)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s.decision", dir, id);
	out[0] = '\0';
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t got = fd >= 0 ? read(fd, out, n - 1) : 0;
	out[got > 0 ? got : 0] = '\0';
}

static int list_one(const char *dir, const char *id, void *ctx)
{
	char d[32];
	decision_of(dir, id, d, sizeof d);
	if (d[0])
		return 0;
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s.json", dir, id);
	json_error_t jerr;
	json_t *req = json_load_file(path, 0, &jerr);
	if (req)
		json_array_append_new(ctx, req);
	return 0;
}

struct find {
	const char *id;
	char dir[PATH_MAX];
};

static int find_one(const char *dir, const char *id, void *ctx)
{
	struct find *f = ctx;
	if (strcmp(id, f->id) != 0)
		return 0;
	snprintf(f->dir, sizeof f->dir, "%s", dir);
	return 1;
}

static int decide(const struct rb_paths *p, const char *id, const char *what)
{
	struct find f = {.id = id};
	if (!id_ok(id) || !each_request(p->run_dir, find_one, &f)) {
		rb_err("no held call `%s` in a live run (see `runbox approve` for those pending)", id);
		return 125;
	}
	char tmp[PATH_MAX + 64], path[PATH_MAX + 64], d[32];
	snprintf(tmp, sizeof tmp, "%s/.%s.cli%d.tmp", f.dir, id, (int)getpid());
	snprintf(path, sizeof path, "%s/%s.decision", f.dir, id);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, what, strlen(what)) != (ssize_t)strlen(what)) {
		rb_err("approval `%s`: write `%s`: %s", id, tmp, strerror(errno));
		unlink(tmp);
		return 125;
	}
	int r = link(tmp, path);
	int e = errno;
	unlink(tmp);
	if (r < 0 && e == EEXIST) {
		decision_of(f.dir, id, d, sizeof d);
		rb_err("approval `%s` was already decided: %s", id, d);
		return 125;
	}
	if (r < 0) {
		rb_err("approval `%s`: link `%s`: %s", id, path, strerror(e));
		return 125;
	}
	printf("%s %s\n", id, what);
	return 0;
}

static int cmd(int argc, char **argv, const char *what)
{
	const char *state = NULL, *id = NULL;
	for (int i = 1; i < argc; i++) { /* argv[0] is the command's name */
		if (!strcmp(argv[i], "--state-dir") && i + 1 < argc)
			state = argv[++i];
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: runbox %s [--state-dir DIR] %s\n", what[0] == 'a' ? "approve" : "deny",
			       what[0] == 'a' ? "[ID]" : "ID");
			return 0;
		} else if (!id && argv[i][0] != '-')
			id = argv[i];
		else {
			rb_err("runbox %s: unexpected `%s`", what[0] == 'a' ? "approve" : "deny", argv[i]);
			return 125;
		}
	}
	struct rb_paths p;
	struct rb_error err;
	if (rb_paths_init(&p, rb_cli_host(), state, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	if (id)
		return decide(&p, id, what);
	if (what[0] != 'a') {
		rb_err("runbox deny: which held call? (`runbox approve` lists them)");
		return 125;
	}
	json_t *pending = json_array();
	each_request(p.run_dir, list_one, pending);
	char *text = json_dumps(pending, JSON_INDENT(2) | JSON_SORT_KEYS);
	printf("%s\n", text ? text : "[]");
	free(text);
	json_decref(pending);
	return 0;
}

int rb_cmd_approve(int argc, char **argv)
{
	return cmd(argc, argv, "approved");
}

int rb_cmd_deny(int argc, char **argv)
{
	return cmd(argc, argv, "denied");
}

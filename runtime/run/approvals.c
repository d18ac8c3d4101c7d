/* Held calls' requests and decisions on disk (approvals.h): <ID>.json written by the gateway,
 * <ID>.decision made with link() so the first decision (or the gateway's "expired") wins. */
#define _GNU_SOURCE
#include "runtime/run/approvals.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
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
		if (snprintf(dir, sizeof dir, "%s/%s/approvals", run_dir, r->d_name) >= (int)sizeof dir)
			continue;
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
	out[strcspn(out, "\n")] = '\0';
}

static json_t *load_request(const char *dir, const char *id)
{
	char path[PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/%s.json", dir, id);
	json_error_t jerr;
	return json_load_file(path, 0, &jerr);
}

static bool tenant_is(const json_t *req, const char *tenant)
{
	const char *t = json_string_value(json_object_get(req, "tenant"));
	return !tenant || (t && !strcmp(t, tenant));
}

struct list {
	json_t *out;
	const char *tenant;
};

static int list_one(const char *dir, const char *id, void *ctx)
{
	struct list *l = ctx;
	char d[32];
	decision_of(dir, id, d, sizeof d);
	if (d[0])
		return 0;
	json_t *req = load_request(dir, id);
	if (req && tenant_is(req, l->tenant))
		json_array_append_new(l->out, req);
	else
		json_decref(req);
	return 0;
}

json_t *rb_approvals_pending(const char *run_dir, const char *tenant)
{
	struct list l = {.out = json_array(), .tenant = tenant};
	each_request(run_dir, list_one, &l);
	return l.out;
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

int rb_approval_decide(const char *run_dir, const char *id, const char *tenant, const char *what, struct rb_error *err)
{
	struct find f = {.id = id};
	json_t *req = id_ok(id) && each_request(run_dir, find_one, &f) ? load_request(f.dir, id) : NULL;
	bool mine = req && tenant_is(req, tenant);
	json_decref(req);
	if (!mine)
		return rb_error_set(err, ENOENT, "no held call `%s` in a live run", id);
	char path[PATH_MAX + 64], d[32];
	snprintf(path, sizeof path, "%s/%s.decision", f.dir, id);
	int r = rb_put_private_file(path, what, strlen(what), RB_PUT_NEW, err);
	if (r == 1) {
		decision_of(f.dir, id, d, sizeof d);
		return rb_error_set(err, EEXIST, "approval `%s` was already decided: %s", id, d);
	}
	return r;
}

/* envd's filesystem.Filesystem (Stat, ListDir, MakeDir, Move, Remove) and the writes of POST
 * /files, over the native file calls (rb_serve_fs_*, rb_serve_put_*): the same ledger events. */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "serve/e2b_internal.h"

/* "-rw-r--r--" of a type and permission bits. */
static void permissions(const char *type, unsigned mode, char out[11])
{
	out[0] = !strcmp(type, "dir") ? 'd' : !strcmp(type, "symlink") ? 'l' : '-';
	static const char rwx[] = "rwxrwxrwx";
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (1u << (8 - i)) ? rwx[i] : '-';
	out[10] = '\0';
}

/* EntryInfo of a native stat. */
static json_t *entry(const json_t *st)
{
	const char *type = json_string_value(json_object_get(st, "type"));
	const char *mode = json_string_value(json_object_get(st, "mode"));
	unsigned m = mode ? (unsigned)strtoul(mode, NULL, 8) : 0;
	char perm[11];
	permissions(type ? type : "", m, perm);
	const char *ft = !type                      ? "FILE_TYPE_UNSPECIFIED"
	                 : !strcmp(type, "file")    ? "FILE_TYPE_FILE"
	                 : !strcmp(type, "dir")     ? "FILE_TYPE_DIRECTORY"
	                 : !strcmp(type, "symlink") ? "FILE_TYPE_SYMLINK"
	                                            : "FILE_TYPE_UNSPECIFIED";
	json_t *o =
	    json_pack("{s:O?, s:s, s:O?, s:I, s:I, s:s}", "name", json_object_get(st, "name"), "type", ft, "path",
	              json_object_get(st, "path"), "size", json_integer_value(json_object_get(st, "size")), "mode",
	              (json_int_t)m, "permissions", perm);
	json_t *mt = json_object_get(st, "mtime");
	if (json_is_string(mt))
		json_object_set(o, "modifiedTime", mt);
	json_t *tg = json_object_get(st, "target");
	if (json_is_string(tg))
		json_object_set(o, "symlinkTarget", tg);
	return o;
}

char *e2b_path(const char *p)
{
	char *out = NULL;
	if (!p || !*p || !strcmp(p, "~"))
		return strdup(E2B_HOME);
	if (!strncmp(p, "~/", 2))
		return asprintf(&out, "%s/%s", E2B_HOME, p + 2) < 0 ? NULL : out;
	if (p[0] != '/')
		return asprintf(&out, "%s/%s", E2B_HOME, p) < 0 ? NULL : out;
	return strdup(p);
}

static void fail(struct e2b_reply *rp, unsigned st, const json_t *r)
{
	e2b_rpc_error(rp, e2b_code_of_status(st), e2b_native_msg(r));
}

unsigned e2b_file_put_begin(struct rb_e2b *e, const char *sid, const char *path, struct rb_serve_put **put,
                            json_t **reply)
{
	unsigned st = rb_serve_put_begin(e->sv, sid, path, 0644, false, RB_SERVE_STREAM_CAP, put, reply);
	if (st != 404)
		return st;
	/* E2B makes the parents of a file it writes. */
	char dir[4096];
	if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir)
		return st;
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return st;
	*slash = '\0';
	json_t *r = NULL;
	unsigned ms = rb_serve_fs_mkdir(e->sv, sid, dir, true, &r);
	if (ms != 200 && ms != 201) {
		json_decref(*reply);
		*reply = r;
		return ms;
	}
	json_decref(r);
	json_decref(*reply);
	*reply = NULL;
	return rb_serve_put_begin(e->sv, sid, path, 0644, false, RB_SERVE_STREAM_CAP, put, reply);
}

void e2b_fs_rpc(struct rb_e2b *e, const struct e2b_req *rq, const char *sid, const char *method, struct e2b_reply *rp)
{
	static const char *const served[] = {"Stat", "ListDir", "MakeDir", "Move", "Remove"};
	bool known = false;
	for (size_t i = 0; i < sizeof served / sizeof served[0]; i++)
		known = known || !strcmp(method, served[i]);
	if (!known)
		return e2b_rpc_error(
		    rp, "unimplemented",
		    "filesystem method not supported by runbox serve (no directory watching; docs/e2b.md)");
	const char *why = NULL;
	_cleanup_json_ json_t *m = e2b_rpc_body(rq->body, rq->len, false, &why);
	if (!m)
		return e2b_rpc_error(rp, "invalid_argument", why);
	_cleanup_free_ char *path = e2b_path(json_string_value(json_object_get(m, "path")));
	if (!path)
		return e2b_rpc_error(rp, "internal", "out of memory");
	_cleanup_json_ json_t *r = NULL;
	unsigned st;
	if (!strcmp(method, "Stat")) {
		if ((st = rb_serve_fs_stat(e->sv, sid, path, &r)) != 200)
			return fail(rp, st, r);
		rp->json = json_pack("{s:o}", "entry", entry(r));
	} else if (!strcmp(method, "ListDir")) {
		json_t *d = json_object_get(m, "depth");
		json_int_t depth = json_is_integer(d) ? json_integer_value(d) : 1;
		if (depth < 1)
			depth = 1;
		if ((st = rb_serve_fs_list(e->sv, sid, path, (unsigned)depth, &r)) != 200)
			return fail(rp, st, r);
		json_t *out = json_array();
		size_t i;
		json_t *x;
		json_array_foreach(json_object_get(r, "entries"), i, x)
		{
			json_array_append_new(out, entry(x));
		}
		rp->json = json_pack("{s:o}", "entries", out);
	} else if (!strcmp(method, "MakeDir")) {
		/* envd answers already_exists for a path that exists (the SDK's makeDir then says false). */
		json_t *pre = NULL;
		st = rb_serve_fs_stat(e->sv, sid, path, &pre);
		json_decref(pre);
		if (st == 200)
			return e2b_rpc_error(rp, "already_exists", "the path exists");
		if ((st = rb_serve_fs_mkdir(e->sv, sid, path, true, &r)) != 200 && st != 201)
			return fail(rp, st, r);
		rp->json = json_pack("{s:o}", "entry", entry(r));
	} else if (!strcmp(method, "Move")) {
		_cleanup_free_ char *from = e2b_path(json_string_value(json_object_get(m, "source")));
		_cleanup_free_ char *to = e2b_path(json_string_value(json_object_get(m, "destination")));
		if (!from || !to)
			return e2b_rpc_error(rp, "internal", "out of memory");
		if ((st = rb_serve_fs_rename(e->sv, sid, from, to, true, &r)) != 200)
			return fail(rp, st, r);
		rp->json = json_pack("{s:o}", "entry", entry(r));
	} else { /* Remove */
		if ((st = rb_serve_fs_remove(e->sv, sid, path, true, &r)) != 200)
			return fail(rp, st, r);
		rp->json = json_object();
	}
	rp->status = 200;
}

/* A session's manifest: checked strictly, recorded (content by size and sha256, ephemeral entries
 * by name only), then laid into /workspace through the file calls (manifest.h). Inputs and
 * skills go to the run's config: the policy's inputs.allow decides them when the run opens. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "common/jsoncheck.h"
#include "common/util.h"
#include "serve/fsroot.h"
#include "policy/manifest.h"
#include "serve/manifest.h"

#define MANIFEST_MAX_ENTRIES 256

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

void rb_serve_manifest_free(struct rb_serve_manifest *m)
{
	for (unsigned i = 0; m->input_what && i < m->n_inputs; i++)
		free(m->input_what[i]);
	free(m->input_what);
	free(m->inputs);
	for (unsigned i = 0; m->skills && i < m->n_skills; i++)
		rb_skill_free(&m->skills[i]);
	free(m->skills);
	free(m->skill_dirs);
	free(m->skill_names);
	free_strv(m->env);
	json_decref(m->record);
	json_decref(m->ephemeral);
	json_decref(m->src);
	memset(m, 0, sizeof *m);
}

static void sha256_hex(const void *data, size_t len, char out[72])
{
	unsigned char md[32];
	unsigned n = 0;
	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	snprintf(out, 8, "sha256:");
	for (size_t i = 0; i < 32; i++)
		snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
}

/* A path a file or directory entry names: absolute, below /workspace/, not in the input and
 * skill mounts. rel gets it relative to /workspace. */
static int ws_path(const struct rb_jsonck *ck, const char *at, const json_t *v, char *rel, size_t len)
{
	if (!json_is_string(v))
		return rb_jsonck_expected(ck, at, "a path below /workspace/", v);
	struct rb_fspath p;
	if (rb_fspath_parse(json_string_value(v), at, &p, ck->err) < 0)
		return -1;
	if (strncmp(p.full, "/workspace/", 11) != 0 || !p.full[11])
		return rb_jsonck_bad(ck, at, "`%s` is not below /workspace/", json_string_value(v));
	if (!strcmp(p.full, "/workspace/in") || !strncmp(p.full, "/workspace/in/", 14) ||
	    !strcmp(p.full, "/workspace/skills") || !strncmp(p.full, "/workspace/skills/", 18))
		return rb_jsonck_bad(
		    ck, at, "`%s`: /workspace/in and /workspace/skills are the policy's read-only mounts", p.full);
	snprintf(rel, len, "%s", p.full + 11);
	return 0;
}

static int mode_of(const struct rb_jsonck *ck, const char *at, const json_t *v, mode_t dflt, mode_t *out)
{
	*out = dflt;
	if (!v)
		return 0;
	if (!json_is_string(v))
		return rb_jsonck_expected(ck, at, "an octal mode string (\"0644\")", v);
	return rb_fs_parse_mode(json_string_value(v), at, out, ck->err);
}

static int array_of(const struct rb_jsonck *ck, const char *at, const json_t *v)
{
	if (!json_is_array(v))
		return rb_jsonck_expected(ck, at, "an array", v);
	if (json_array_size(v) > MANIFEST_MAX_ENTRIES)
		return rb_jsonck_bad(ck, at, "at most %d entries", MANIFEST_MAX_ENTRIES);
	return 0;
}

/* The content of a file entry, decoded: *out (malloc'd) of *len bytes. */
static int content_of(const struct rb_jsonck *ck, const char *at, const json_t *f, char **out, size_t *len)
{
	char p[96];
	const json_t *c = json_object_get(f, "content"), *enc = json_object_get(f, "encoding");
	snprintf(p, sizeof p, "%s.content", at);
	if (!c)
		c = json_string("");
	else
		json_incref((json_t *)c);
	if (!c)
		return rb_error_set(ck->err, ENOMEM, "manifest");
	int r = 0;
	const char *e = enc ? json_string_value(enc) : "utf8";
	snprintf(p, sizeof p, "%s.encoding", at);
	if (!e || (strcmp(e, "utf8") != 0 && strcmp(e, "base64") != 0)) {
		json_decref((json_t *)c);
		return rb_jsonck_expected(ck, p, "\"utf8\" or \"base64\"", enc);
	}
	snprintf(p, sizeof p, "%s.content", at);
	if (r == 0 && !json_is_string(c))
		r = rb_jsonck_expected(ck, p, "a string", c);
	if (r == 0 && json_string_length(c) > 3 * (size_t)RB_SERVE_FILE_CAP)
		r = rb_jsonck_bad(ck, p, "over %u bytes", RB_SERVE_FILE_CAP);
	if (r == 0 && !strcmp(e, "utf8")) {
		*len = json_string_length(c);
		*out = malloc(*len + 1);
		if (!*out)
			r = rb_error_set(ck->err, ENOMEM, "manifest");
		else
			memcpy(*out, json_string_value(c), *len);
	} else if (r == 0) {
		/* Base64 without whitespace; EVP_DecodeBlock counts the padding in, so it is taken off. */
		size_t n = json_string_length(c);
		const char *s = json_string_value(c);
		*out = malloc(n / 4 * 3 + 3);
		int got =
		    *out && n % 4 == 0 ? EVP_DecodeBlock((unsigned char *)*out, (const unsigned char *)s, (int)n) : -1;
		if (got < 0) {
			r = rb_jsonck_bad(ck, p, "not base64 (RFC 4648, padded, no whitespace)");
		} else {
			*len = (size_t)got - (n >= 1 && s[n - 1] == '=') - (n >= 2 && s[n - 2] == '=');
		}
	}
	if (r == 0 && *len > RB_SERVE_FILE_CAP)
		r = rb_jsonck_bad(ck, p, "over %u bytes", RB_SERVE_FILE_CAP);
	json_decref((json_t *)c);
	if (r < 0) {
		free(*out);
		*out = NULL;
	}
	return r;
}

static int parse_files(const struct rb_jsonck *ck, const char *top, struct rb_serve_manifest *m)
{
	static const char *const keys[] = {"path", "content", "encoding", "mode", "ephemeral", NULL};
	const json_t *files = json_object_get(m->src, "files");
	char at[96];
	snprintf(at, sizeof at, "%s.files", top);
	if (!files)
		return 0;
	if (array_of(ck, at, files) < 0)
		return -1;
	json_t *rec = json_array();
	json_object_set_new(m->record, "files", rec);
	size_t i;
	const json_t *f;
	json_array_foreach(files, i, f)
	{
		snprintf(at, sizeof at, "%s.files[%zu]", top, i);
		char rel[PATH_MAX], p[128];
		mode_t mode;
		const json_t *eph = json_object_get(f, "ephemeral");
		snprintf(p, sizeof p, "%s.path", at);
		if (!json_is_object(f))
			return rb_jsonck_expected(ck, at, "an object", f);
		if (rb_jsonck_keys(ck, at, f, keys) < 0 ||
		    ws_path(ck, p, json_object_get(f, "path"), rel, sizeof rel) < 0)
			return -1;
		snprintf(p, sizeof p, "%s.mode", at);
		if (mode_of(ck, p, json_object_get(f, "mode"), 0644, &mode) < 0)
			return -1;
		snprintf(p, sizeof p, "%s.ephemeral", at);
		if (eph && !json_is_boolean(eph))
			return rb_jsonck_expected(ck, p, "true or false", eph);
		char *data = NULL;
		size_t len = 0;
		if (content_of(ck, at, f, &data, &len) < 0)
			return -1;
		char mstr[8], digest[72];
		snprintf(mstr, sizeof mstr, "%04o", (unsigned)mode);
		/* An ephemeral file's content is neither kept nor hashed in the ledger: a digest of a
		 * short secret gives it away. */
		if (json_is_true(eph)) {
			json_array_append_new(rec,
			                      json_pack("{s:s+, s:b}", "path", "/workspace/", rel, "ephemeral", 1));
			json_object_set_new(m->ephemeral, rel, json_true());
		} else {
			sha256_hex(data, len, digest);
			json_array_append_new(rec, json_pack("{s:s+, s:I, s:s, s:s}", "path", "/workspace/", rel,
			                                     "size", (json_int_t)len, "sha256", digest, "mode", mstr));
		}
		free(data);
	}
	return 0;
}

static int parse_dirs(const struct rb_jsonck *ck, const char *top, struct rb_serve_manifest *m)
{
	static const char *const keys[] = {"path", "mode", NULL};
	const json_t *dirs = json_object_get(m->src, "directories");
	char at[96];
	snprintf(at, sizeof at, "%s.directories", top);
	if (!dirs)
		return 0;
	if (array_of(ck, at, dirs) < 0)
		return -1;
	json_t *rec = json_array();
	json_object_set_new(m->record, "directories", rec);
	size_t i;
	const json_t *d;
	json_array_foreach(dirs, i, d)
	{
		snprintf(at, sizeof at, "%s.directories[%zu]", top, i);
		char rel[PATH_MAX], p[128], mstr[8];
		mode_t mode;
		if (!json_is_object(d))
			return rb_jsonck_expected(ck, at, "an object", d);
		snprintf(p, sizeof p, "%s.path", at);
		if (rb_jsonck_keys(ck, at, d, keys) < 0 ||
		    ws_path(ck, p, json_object_get(d, "path"), rel, sizeof rel) < 0)
			return -1;
		snprintf(p, sizeof p, "%s.mode", at);
		if (mode_of(ck, p, json_object_get(d, "mode"), 0755, &mode) < 0)
			return -1;
		snprintf(mstr, sizeof mstr, "%04o", (unsigned)mode);
		json_array_append_new(rec, json_pack("{s:s+, s:s}", "path", "/workspace/", rel, "mode", mstr));
	}
	return 0;
}

/* {"NAME": "value" | {"value": "...", "ephemeral": true}}: names recorded, values never. */
static int parse_env(const struct rb_jsonck *ck, const char *top, struct rb_serve_manifest *m)
{
	static const char *const keys[] = {"value", "ephemeral", NULL};
	const json_t *env = json_object_get(m->src, "env");
	char at[160];
	snprintf(at, sizeof at, "%s.env", top);
	if (!env)
		return 0;
	if (!json_is_object(env))
		return rb_jsonck_expected(ck, at, "an object", env);
	if (json_object_size(env) > MANIFEST_MAX_ENTRIES)
		return rb_jsonck_bad(ck, at, "at most %d entries", MANIFEST_MAX_ENTRIES);
	if (!(m->env = calloc(json_object_size(env) + 1, sizeof *m->env)))
		return rb_error_set(ck->err, ENOMEM, "manifest");
	json_t *rec = json_array();
	json_object_set_new(m->record, "env", rec);
	const char *k;
	const json_t *v;
	json_object_foreach((json_t *)env, k, v)
	{
		snprintf(at, sizeof at, "%s.env.%.64s", top, k);
		bool eph = false;
		const json_t *val = v;
		if (json_is_object(v)) {
			char p[192];
			if (rb_jsonck_keys(ck, at, v, keys) < 0)
				return -1;
			val = json_object_get(v, "value");
			const json_t *e = json_object_get(v, "ephemeral");
			snprintf(p, sizeof p, "%s.ephemeral", at);
			if (e && !json_is_boolean(e))
				return rb_jsonck_expected(ck, p, "true or false", e);
			eph = json_is_true(e);
			snprintf(at + strlen(at), sizeof at - strlen(at), ".value");
		}
		if (!json_is_string(val))
			return rb_jsonck_expected(ck, at, "a string (or {value, ephemeral})", val);
		bool name_ok = k[0] && strlen(k) <= 128;
		for (const char *c = k; *c && name_ok; c++)
			name_ok = *c == '_' || (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
			          (c > k && *c >= '0' && *c <= '9');
		if (!name_ok || strlen(json_string_value(val)) != json_string_length(val))
			return rb_jsonck_bad(ck, at,
			                     "a variable's name is [A-Za-z_][A-Za-z0-9_]*, its value holds no NUL");
		if (asprintf(&m->env[m->n_env], "%s=%s", k, json_string_value(val)) < 0) {
			m->env[m->n_env] = NULL;
			return rb_error_set(ck->err, ENOMEM, "manifest");
		}
		m->n_env++;
		json_array_append_new(rec, json_pack("{s:s, s:b}", "name", k, "ephemeral", eph));
	}
	return 0;
}

/* [{"from": "/host/path", "to": "/workspace/in/NAME"?}]: the run's read-only inputs. */
static int parse_inputs(const struct rb_jsonck *ck, const char *top, struct rb_serve_manifest *m)
{
	static const char *const keys[] = {"from", "to", NULL};
	const json_t *ins = json_object_get(m->src, "inputs");
	char at[96];
	snprintf(at, sizeof at, "%s.inputs", top);
	if (!ins)
		return 0;
	if (array_of(ck, at, ins) < 0)
		return -1;
	m->inputs = calloc(json_array_size(ins) + 1, sizeof *m->inputs);
	m->input_what = calloc(json_array_size(ins) + 1, sizeof *m->input_what);
	if (!m->inputs || !m->input_what)
		return rb_error_set(ck->err, ENOMEM, "manifest");
	json_t *rec = json_array();
	json_object_set_new(m->record, "inputs", rec);
	size_t i;
	const json_t *in;
	json_array_foreach(ins, i, in)
	{
		snprintf(at, sizeof at, "%s.inputs[%zu]", top, i);
		char p[128];
		if (!json_is_object(in))
			return rb_jsonck_expected(ck, at, "an object", in);
		if (rb_jsonck_keys(ck, at, in, keys) < 0)
			return -1;
		const char *from = json_string_value(json_object_get(in, "from"));
		const json_t *to = json_object_get(in, "to");
		snprintf(p, sizeof p, "%s.from", at);
		if (!from || from[0] != '/')
			return rb_jsonck_expected(ck, p, "an absolute host path", json_object_get(in, "from"));
		snprintf(p, sizeof p, "%s.to", at);
		if (to && (!json_is_string(to) ||
		           strncmp(json_string_value(to), RB_MANIFEST_IN_DIR, strlen(RB_MANIFEST_IN_DIR)) != 0))
			return rb_jsonck_expected(ck, p, "a path below " RB_MANIFEST_IN_DIR, to);
		if (!(m->input_what[i] = strdup(at)))
			return rb_error_set(ck->err, ENOMEM, "manifest");
		m->inputs[i] =
		    (struct rb_input_req){.from = from, .to = json_string_value(to), .what = m->input_what[i]};
		m->n_inputs = (unsigned)i + 1;
		json_array_append_new(rec, json_pack("{s:s, s:s?}", "from", from, "to", json_string_value(to)));
	}
	return 0;
}

/* ["/host/bundle", ...]: skill bundles (policy/skill.h), mounted read-only as the run's skills. */
static int parse_skills(const struct rb_jsonck *ck, const char *top, struct rb_serve_manifest *m)
{
	const json_t *sk = json_object_get(m->src, "skills");
	char at[96];
	snprintf(at, sizeof at, "%s.skills", top);
	if (!sk)
		return 0;
	if (array_of(ck, at, sk) < 0)
		return -1;
	size_t n = json_array_size(sk);
	m->skills = calloc(n + 1, sizeof *m->skills);
	m->skill_dirs = calloc(n + 1, sizeof *m->skill_dirs);
	m->skill_names = calloc(n + 1, sizeof *m->skill_names);
	if (!m->skills || !m->skill_dirs || !m->skill_names)
		return rb_error_set(ck->err, ENOMEM, "manifest");
	json_t *rec = json_array();
	json_object_set_new(m->record, "skills", rec);
	size_t i;
	const json_t *d;
	json_array_foreach(sk, i, d)
	{
		snprintf(at, sizeof at, "%s.skills[%zu]", top, i);
		if (!json_is_string(d) || json_string_value(d)[0] != '/')
			return rb_jsonck_expected(ck, at, "an absolute host path of a skill bundle", d);
		if (rb_skill_load(json_string_value(d), &m->skills[i], ck->err) < 0)
			return rb_error_prefix(ck->err, "%s", at);
		m->n_skills = (unsigned)i + 1;
		for (size_t k = 0; k < i; k++)
			if (!strcmp(m->skills[k].name, m->skills[i].name))
				return rb_jsonck_bad(ck, at, "a second skill named `%s`", m->skills[i].name);
		m->skill_dirs[i] = m->skills[i].dir;
		m->skill_names[i] = m->skills[i].name;
		json_array_append_new(rec,
		                      json_pack("{s:s, s:s}", "name", m->skills[i].name, "from", m->skills[i].dir));
	}
	return 0;
}

int rb_serve_manifest_parse(const json_t *src, bool at_create, struct rb_serve_manifest *m, struct rb_error *err)
{
	static const char *const create_keys[] = {"files", "directories", "inputs", "skills", "env", NULL};
	static const char *const live_keys[] = {"files", "directories", "env", NULL};
	memset(m, 0, sizeof *m);
	struct rb_jsonck ck = {"request", "body", err};
	const char *top = at_create ? "$.manifest" : "$";
	if (!json_is_object(src))
		return rb_jsonck_expected(&ck, top, "an object", src);
	if (!at_create && (json_object_get(src, "inputs") || json_object_get(src, "skills")))
		return rb_error_setk(err, RB_ERR_CONFLICT, 0,
		                     "request body: $.%s: inputs and skills are mounted when a session is made "
		                     "(POST /v1/sessions with a manifest), not into a live one",
		                     json_object_get(src, "inputs") ? "inputs" : "skills");
	m->src = json_deep_copy(src);
	m->record = json_object();
	m->ephemeral = json_object();
	if (!m->src || !m->record || !m->ephemeral)
		return rb_error_set(err, ENOMEM, "manifest");
	int r = rb_jsonck_keys(&ck, top, m->src, at_create ? create_keys : live_keys);
	if (r == 0)
		r = parse_files(&ck, top, m);
	if (r == 0)
		r = parse_dirs(&ck, top, m);
	if (r == 0)
		r = parse_env(&ck, top, m);
	if (r == 0)
		r = parse_inputs(&ck, top, m);
	if (r == 0)
		r = parse_skills(&ck, top, m);
	if (r < 0)
		rb_serve_manifest_free(m);
	return r;
}

unsigned rb_serve_manifest_apply(struct rb_serve *sv, const char *sid, const struct rb_serve_manifest *m,
                                 json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	/* What the manifest lays is durable in the ledger before any of it is in place. */
	if (rb_serve_record(sv, sid, "manifest", json_deep_copy(m->record), &err) < 0)
		return rb_serve_error(&err, reply);
	size_t i;
	const json_t *d;
	json_array_foreach(json_object_get(m->src, "directories"), i, d)
	{
		mode_t mode = 0755;
		if (json_object_get(d, "mode"))
			rb_fs_parse_mode(json_string_value(json_object_get(d, "mode")), "mode", &mode, &err);
		json_t *r = NULL;
		unsigned st =
		    rb_serve_fs_mkdir_mode(sv, sid, json_string_value(json_object_get(d, "path")), true, mode, &r);
		if (st != 200) {
			*reply = r;
			return st;
		}
		json_decref(r);
	}
	const json_t *f;
	json_array_foreach(json_object_get(m->src, "files"), i, f)
	{
		struct rb_jsonck ck = {"request", "body", &err};
		mode_t mode = 0644;
		if (json_object_get(f, "mode"))
			rb_fs_parse_mode(json_string_value(json_object_get(f, "mode")), "mode", &mode, &err);
		char *data = NULL;
		size_t len = 0;
		if (content_of(&ck, "$.files", f, &data, &len) < 0)
			return rb_serve_error(&err, reply);
		struct rb_serve_put *put = NULL;
		json_t *r = NULL;
		unsigned st = rb_serve_put_begin(sv, sid, json_string_value(json_object_get(f, "path")), mode, true,
		                                 RB_SERVE_FILE_CAP, &put, &r);
		if (st == 200 && json_is_true(json_object_get(f, "ephemeral")))
			rb_serve_put_ephemeral(put);
		if (st == 200 && rb_serve_put_write(put, data, len, &err) < 0) {
			rb_serve_put_abort(put);
			free(data);
			return rb_serve_error(&err, reply);
		}
		free(data);
		if (st == 200)
			st = rb_serve_put_finish(sv, put, &r);
		if (st != 200) {
			*reply = r;
			return st;
		}
		json_decref(r);
	}
	char **env = NULL;
	if (m->n_env) {
		env = calloc(m->n_env + 1, sizeof *env);
		for (size_t k = 0; env && k < m->n_env; k++)
			if (!(env[k] = strdup(m->env[k]))) {
				free_strv(env);
				env = NULL;
			}
		if (!env)
			return rb_error_set(&err, ENOMEM, "manifest"), rb_serve_error(&err, reply);
	}
	if (rb_serve_session_add(sv, sid, env, m->n_env, m->ephemeral, &err) < 0)
		return rb_serve_error(&err, reply);
	*reply = json_deep_copy(m->record);
	return 200;
}

unsigned rb_serve_manifest_post(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_serve_manifest m;
	if (rb_serve_manifest_parse(body, false, &m, &err) < 0)
		return rb_serve_error(&err, reply);
	unsigned st = rb_serve_manifest_apply(sv, sid, &m, reply);
	rb_serve_manifest_free(&m);
	return st;
}

/* serve/e2b_connect.c, e2b_keys.c, e2b_main.c: Connect envelopes both ways, base64, the codes, the
 * API keys file (refused unless 0600 and well formed; a key found only whole), the daemon's options. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/e2b_internal.h"

static void test_envelope_framing(void **state)
{
	(void)state;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	json_t *a = json_pack("{s:i}", "pid", 7), *b = json_object();
	assert_int_equal(e2b_envelope(&buf, &len, &cap, E2B_ENV_MSG, a), 0);
	assert_int_equal(e2b_envelope(&buf, &len, &cap, E2B_ENV_END, b), 0);
	const char *m1 = "{\"pid\":7}";
	assert_int_equal(len, 5 + strlen(m1) + 5 + 2);
	const unsigned char *p = (const unsigned char *)buf;
	assert_int_equal(p[0], 0x00);
	assert_int_equal((p[1] << 24) | (p[2] << 16) | (p[3] << 8) | p[4], (int)strlen(m1));
	assert_memory_equal(buf + 5, m1, strlen(m1));
	p += 5 + strlen(m1);
	assert_int_equal(p[0], 0x02); /* the end of the stream, which the SDK needs */
	assert_int_equal(p[4], 2);
	assert_memory_equal(p + 5, "{}", 2);
	json_decref(a);
	json_decref(b);
	free(buf);
}

static void test_rpc_body(void **state)
{
	(void)state;
	const char *why = NULL;
	const char env[] = "\x00\x00\x00\x00\x0a{\"pid\":12}";
	json_t *v = e2b_rpc_body(env, sizeof env - 1, true, &why);
	assert_non_null(v);
	assert_int_equal(json_integer_value(json_object_get(v, "pid")), 12);
	json_decref(v);
	/* A length that is not the body's, a compressed flag, a short body: refused with a reason. */
	const char longer[] = "\x00\x00\x00\x00\x0b{\"pid\":12}";
	why = NULL;
	assert_null(e2b_rpc_body(longer, sizeof longer - 1, true, &why));
	assert_non_null(strstr(why, "length"));
	const char flagged[] = "\x01\x00\x00\x00\x0a{\"pid\":12}";
	assert_null(e2b_rpc_body(flagged, sizeof flagged - 1, true, &why));
	assert_null(e2b_rpc_body("\x00\x00", 2, true, &why));
	/* Unary bodies are bare JSON objects; an empty one is {}. */
	v = e2b_rpc_body("{\"path\":\"/x\"}", 13, false, &why);
	assert_string_equal(json_string_value(json_object_get(v, "path")), "/x");
	json_decref(v);
	v = e2b_rpc_body("", 0, false, &why);
	assert_true(json_is_object(v) && json_object_size(v) == 0);
	json_decref(v);
	assert_null(e2b_rpc_body("[1]", 3, false, &why));
	assert_null(e2b_rpc_body("{bad", 4, false, &why));
}

static void test_base64(void **state)
{
	(void)state;
	size_t n = 99;
	char *d = e2b_unb64("aGk=", &n);
	assert_int_equal(n, 2);
	assert_memory_equal(d, "hi", 2);
	free(d);
	d = e2b_unb64("aGk", &n); /* the JSON codec may drop the padding */
	assert_int_equal(n, 2);
	assert_memory_equal(d, "hi", 2);
	free(d);
	d = e2b_unb64("", &n);
	assert_int_equal(n, 0);
	free(d);
	assert_null(e2b_unb64("!!!!", &n));
	unsigned char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	char *enc = e2b_b64(all, sizeof all);
	d = e2b_unb64(enc, &n);
	assert_int_equal(n, sizeof all);
	assert_memory_equal(d, all, sizeof all);
	free(d);
	free(enc);
}

static void test_codes(void **state)
{
	(void)state;
	assert_string_equal(e2b_code_of_status(401), "unauthenticated");
	assert_string_equal(e2b_code_of_status(404), "not_found");
	assert_string_equal(e2b_code_of_status(400), "invalid_argument");
	assert_string_equal(e2b_code_of_status(500), "internal");
	struct e2b_reply rp = {0};
	e2b_rpc_error(&rp, "unauthenticated", "no");
	assert_int_equal(rp.status, 401);
	assert_string_equal(json_string_value(json_object_get(rp.json, "code")), "unauthenticated");
	json_decref(rp.json);
	e2b_rpc_error(&rp, "unimplemented", "no");
	assert_int_equal(rp.status, 501);
	json_decref(rp.json);
	e2b_api_error(&rp, 404, "sandbox %s not found", "x");
	assert_int_equal(json_integer_value(json_object_get(rp.json, "code")), 404);
	assert_string_equal(json_string_value(json_object_get(rp.json, "message")), "sandbox x not found");
	json_decref(rp.json);
	char t[40];
	e2b_time(1764633600123, t, sizeof t);
	assert_string_equal(t, "2025-12-02T00:00:00.123Z");
}

#define KEY1 "e2b_0123456789abcdef0123456789abcdef01234567"

static char *keys_file(const char *text, mode_t mode)
{
	char *path = strdup("/tmp/rbx-e2b-keys.XXXXXX");
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

static int load(const char *text, mode_t mode, struct rb_e2b *e, struct rb_error *err)
{
	memset(e, 0, sizeof *e);
	char *path = keys_file(text, mode);
	int r = e2b_keys_load(e, path, err);
	unlink(path);
	free(path);
	return r;
}

static void test_keys_load(void **state)
{
	(void)state;
	struct rb_e2b e;
	struct rb_error err;
	assert_int_equal(load("{\"" KEY1 "\": {\"tenant\": \"acme\", \"policy\": \"strict\"}}", 0600, &e, &err), 0);
	const struct e2b_key *k = e2b_key_find(&e, KEY1);
	assert_non_null(k);
	assert_string_equal(k->tenant, "acme");
	assert_string_equal(k->policy, "strict");
	/* Only the whole key: a prefix, a longer string, another key, none. */
	assert_null(e2b_key_find(&e, "e2b_0123456789abcdef"));
	assert_null(e2b_key_find(&e, KEY1 "0"));
	assert_null(e2b_key_find(&e, "e2b_f123456789abcdef0123456789abcdef01234567"));
	assert_null(e2b_key_find(&e, NULL));
	free(e.keys);

	/* Refused: readable by others, a key not of E2B's form, a bad tenant, unknown fields, none. */
	assert_int_equal(load("{\"" KEY1 "\": {\"tenant\": \"acme\"}}", 0644, &e, &err), -1);
	assert_non_null(strstr(err.msg, "mode 0644"));
	free(e.keys);
	assert_int_equal(load("{\"sk_0123456789abcdef0123\": {\"tenant\": \"acme\"}}", 0600, &e, &err), -1);
	assert_non_null(strstr(err.msg, "e2b_"));
	free(e.keys);
	assert_int_equal(load("{\"" KEY1 "\": {\"tenant\": \"../x\"}}", 0600, &e, &err), -1);
	free(e.keys);
	assert_int_equal(load("{\"" KEY1 "\": {\"tenant\": \"acme\", \"admin\": true}}", 0600, &e, &err), -1);
	free(e.keys);
	assert_int_equal(load("{}", 0600, &e, &err), -1);
	assert_non_null(strstr(err.msg, "no key"));
	free(e.keys);
	assert_int_equal(load("[]", 0600, &e, &err), -1);
	free(e.keys);
}

static void test_issue_key(void **state)
{
	(void)state;
	char dir[] = "/tmp/rbx-e2b-issue.XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof path, "%s/keys.json", dir);
	char k1[96], k2[96];
	struct rb_error err;
	assert_int_equal(rb_e2b_issue_key(path, "acme", k1, sizeof k1, &err), 0);
	assert_int_equal(rb_e2b_issue_key(path, "other", k2, sizeof k2, &err), 0);
	assert_int_equal(strlen(k1), 44);
	assert_memory_equal(k1, "e2b_", 4);
	assert_string_not_equal(k1, k2);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	struct rb_e2b e = {0};
	assert_int_equal(e2b_keys_load(&e, path, &err), 0);
	assert_int_equal(e.n_keys, 2);
	assert_string_equal(e2b_key_find(&e, k1)->tenant, "acme");
	assert_string_equal(e2b_key_find(&e, k2)->tenant, "other");
	free(e.keys);
	assert_int_equal(rb_e2b_issue_key(path, "bad/tenant", k1, sizeof k1, &err), -1);
	/* A file others may read is not added to. */
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(rb_e2b_issue_key(path, "acme", k1, sizeof k1, &err), -1);
	unlink(path);
	rmdir(dir);
}

static void test_options(void **state)
{
	(void)state;
	char *argv[] = {"runbox-serve", "--socket", "/s", "--e2b-listen", "127.0.0.1:0", "--e2b-keys=/k", "-h", NULL};
	int argc = 7;
	struct rb_e2b_opts o;
	assert_int_equal(rb_e2b_options(&argc, argv, &o), 0);
	assert_string_equal(o.listen, "127.0.0.1:0");
	assert_string_equal(o.keys, "/k");
	assert_null(o.new_key);
	/* The daemon's own options stay, in order, for its getopt. */
	assert_int_equal(argc, 4);
	assert_string_equal(argv[1], "--socket");
	assert_string_equal(argv[2], "/s");
	assert_string_equal(argv[3], "-h");
	assert_null(argv[4]);
	/* Without them nothing changes; a listener without keys, or a flag without a value, is refused. */
	char *plain[] = {"runbox-serve", "--socket", "/s", NULL};
	argc = 3;
	assert_int_equal(rb_e2b_options(&argc, plain, &o), 0);
	assert_int_equal(argc, 3);
	assert_null(o.listen);
	char *nokeys[] = {"runbox-serve", "--e2b-listen", "127.0.0.1:0", NULL};
	argc = 3;
	assert_int_equal(rb_e2b_options(&argc, nokeys, &o), -1);
	char *novalue[] = {"runbox-serve", "--e2b-keys", NULL};
	argc = 2;
	assert_int_equal(rb_e2b_options(&argc, novalue, &o), -1);
	/* A longer name is not taken for one of them. */
	char *other[] = {"runbox-serve", "--e2b-listenx", "v", NULL};
	argc = 3;
	assert_int_equal(rb_e2b_options(&argc, other, &o), 0);
	assert_int_equal(argc, 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_envelope_framing), cmocka_unit_test(test_rpc_body),
	    cmocka_unit_test(test_base64),           cmocka_unit_test(test_codes),
	    cmocka_unit_test(test_keys_load),        cmocka_unit_test(test_issue_key),
	    cmocka_unit_test(test_options),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

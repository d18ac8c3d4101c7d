/* serve/keys.c: what a TCP key may make. rb_serve_key_may_create is the one check of a create's
 * body, for a POST /v1/sessions and for the create a resume makes (serve/resume.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve/keys.h"

#define BROAD  "broad-key-0123456789"
#define NARROW "narrow-key-0123456789"

static int load(void **state)
{
	char path[] = "/tmp/rbx-test-keys-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	dprintf(fd, "{\"" BROAD "\": {\"tenant\": \"tk\"}, \"" NARROW
	            "\": {\"tenant\": \"tk\", \"policies\": [\"default\"], \"images\": [\"minimal\"]}}");
	close(fd);
	chmod(path, 0600);
	struct rb_serve_keys *k = NULL;
	struct rb_error err;
	int r = rb_serve_keys_load(path, &k, &err);
	unlink(path);
	assert_int_equal(r, 0);
	*state = k;
	return 0;
}

static int unload(void **state)
{
	rb_serve_keys_free(*state);
	return 0;
}

static void narrow_key_refuses_other_policy_and_image(void **state)
{
	const struct rb_serve_key *n = rb_serve_keys_find(*state, "Bearer " NARROW);
	char why[256];
	json_t *b = json_pack("{s:s, s:s}", "policy", "wide", "image", "minimal");
	assert_false(rb_serve_key_may_create(n, b, why, sizeof why));
	assert_non_null(strstr(why, "policy `wide`"));
	json_decref(b);
	b = json_pack("{s:s, s:s}", "policy", "default", "image", "agent");
	assert_false(rb_serve_key_may_create(n, b, why, sizeof why));
	assert_non_null(strstr(why, "image `agent`"));
	json_decref(b);
	/* Absent is the default as the create fills it in: image `host`, not listed. */
	b = json_pack("{s:s}", "policy", "default");
	assert_false(rb_serve_key_may_create(n, b, why, sizeof why));
	json_decref(b);
}

static void allowed_create_gets_the_key_tenant(void **state)
{
	const struct rb_serve_key *n = rb_serve_keys_find(*state, "Bearer " NARROW);
	const struct rb_serve_key *w = rb_serve_keys_find(*state, "Bearer " BROAD);
	char why[256];
	json_t *b = json_pack("{s:s, s:s}", "policy", "default", "image", "minimal");
	assert_true(rb_serve_key_may_create(n, b, why, sizeof why));
	assert_string_equal(json_string_value(json_object_get(b, "tenant")), "tk");
	json_decref(b);
	/* The broad key of the same tenant may use any; the unix socket (no key) too. */
	b = json_pack("{s:s, s:s}", "policy", "wide", "image", "agent");
	assert_true(rb_serve_key_may_create(w, b, why, sizeof why));
	assert_true(rb_serve_key_may_create(NULL, b, why, sizeof why));
	json_decref(b);
}

static void another_tenant_is_refused(void **state)
{
	const struct rb_serve_key *w = rb_serve_keys_find(*state, "Bearer " BROAD);
	char why[256];
	json_t *b = json_pack("{s:s}", "tenant", "other");
	assert_false(rb_serve_key_may_create(w, b, why, sizeof why));
	assert_non_null(strstr(why, "$.tenant"));
	json_decref(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(narrow_key_refuses_other_policy_and_image, load, unload),
	    cmocka_unit_test_setup_teardown(allowed_create_gets_the_key_tenant, load, unload),
	    cmocka_unit_test_setup_teardown(another_tenant_is_refused, load, unload),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

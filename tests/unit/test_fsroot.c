/* serve/fsroot.c: how runbox serve's file calls read a sandbox path (lexically, before any
 * openat2), whether a hydrated link stays in /workspace, the mode argument. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "serve/fsroot.h"

static void parse_splits_parent_and_name(void **state)
{
	struct rb_fspath p;
	struct rb_error err;
	assert_int_equal(rb_fspath_parse("/workspace/a/b.txt", "path", &p, &err), 0);
	assert_string_equal(p.full, "/workspace/a/b.txt");
	assert_string_equal(p.parent, "workspace/a");
	assert_string_equal(p.name, "b.txt");
	/* `.` and repeated slashes are dropped. */
	assert_int_equal(rb_fspath_parse("//workspace/./x//", "path", &p, &err), 0);
	assert_string_equal(p.full, "/workspace/x");
	assert_string_equal(p.parent, "workspace");
	assert_string_equal(p.name, "x");
	assert_int_equal(rb_fspath_parse("/etc", "path", &p, &err), 0);
	assert_string_equal(p.parent, ".");
	assert_string_equal(p.name, "etc");
	/* The root itself: no name. */
	assert_int_equal(rb_fspath_parse("/", "path", &p, &err), 0);
	assert_string_equal(p.full, "/");
	assert_string_equal(p.name, "");
}

static void parse_refuses_relative_and_dotdot(void **state)
{
	struct rb_fspath p;
	struct rb_error err;
	assert_int_equal(rb_fspath_parse("workspace/a", "query `path`", &p, &err), -1);
	assert_non_null(strstr(err.msg, "query `path`"));
	assert_int_equal(rb_error_http_status(rb_error_kind_of(&err)), 400);
	assert_int_equal(rb_fspath_parse("/workspace/../etc/passwd", "path", &p, &err), -1);
	assert_non_null(strstr(err.msg, "`..`"));
	assert_int_equal(rb_fspath_parse("/a/..", "path", &p, &err), -1);
	assert_int_equal(rb_fspath_parse(NULL, "path", &p, &err), -1);
	assert_int_equal(rb_fspath_parse("", "path", &p, &err), -1);
	/* Control: a name that only starts with dots is a name. */
	assert_int_equal(rb_fspath_parse("/workspace/..x/...", "path", &p, &err), 0);
	assert_string_equal(p.name, "...");
}

static void link_inside_workspace(void **state)
{
	/* Relative, from the link's own directory. */
	assert_true(rb_fspath_link_inside("a/l", "b", NULL, NULL));
	assert_true(rb_fspath_link_inside("a/l", "../b", NULL, NULL));
	assert_true(rb_fspath_link_inside("a/b/l", "../../c/./d", NULL, NULL));
	assert_false(rb_fspath_link_inside("l", "..", NULL, NULL));
	assert_false(rb_fspath_link_inside("a/l", "../../b", NULL, NULL));
	assert_false(rb_fspath_link_inside("a/l", "x/../../../b", NULL, NULL));
	/* Absolute: inside only below /workspace, as the sandbox sees it. */
	assert_true(rb_fspath_link_inside("l", "/workspace/x", NULL, NULL));
	assert_true(rb_fspath_link_inside("l", "/workspace", NULL, NULL));
	assert_false(rb_fspath_link_inside("l", "/etc/passwd", NULL, NULL));
	assert_false(rb_fspath_link_inside("l", "/workspace/../etc", NULL, NULL));
	assert_false(rb_fspath_link_inside("l", "/workspacex", NULL, NULL));
	assert_false(rb_fspath_link_inside("l", "/", NULL, NULL));
	assert_false(rb_fspath_link_inside("l", "", NULL, NULL));
}

/* A tree's links for the resolver: pairs of (path, target). */
static bool table_link(void *ctx, const char *rel, char *target, size_t len)
{
	for (const char *const *t = ctx; t[0]; t += 2)
		if (!strcmp(t[0], rel)) {
			snprintf(target, len, "%s", t[1]);
			return true;
		}
	return false;
}

static void link_inside_through_links(void **state)
{
	/* x/p -> .. is /workspace itself: three of them and three `..` reach the sandbox's /. */
	static const char *const tree[] = {"x/p",   "..",    "up",  "..",           "loop1", "loop2",
	                                   "loop2", "loop1", "abs", "/workspace/x", NULL};
	assert_true(rb_fspath_link_inside("q", "x/p/x/p/x/p/../../../etc", NULL, NULL)); /* as text */
	assert_false(rb_fspath_link_inside("q", "x/p/x/p/x/p/../../../etc", table_link, (void *)tree));
	/* a link on the way that itself leaves: a/l -> ../up/etc, up -> .. */
	assert_false(rb_fspath_link_inside("a/l", "../up/etc", table_link, (void *)tree));
	/* links that lead to each other: past 40 hops, refused */
	assert_false(rb_fspath_link_inside("l", "loop1/f", table_link, (void *)tree));
	/* an absolute link on the way, then a `..` from where it leads */
	assert_true(rb_fspath_link_inside("l", "abs/../y", table_link, (void *)tree));
	assert_false(rb_fspath_link_inside("l", "abs/../../y", table_link, (void *)tree));
	/* Controls: through the same links, staying inside. */
	assert_true(rb_fspath_link_inside("q", "x/p/x/y", table_link, (void *)tree));
	assert_true(rb_fspath_link_inside("a/l", "../x/p/b", table_link, (void *)tree));
}

static void mode_is_octal_permission_bits(void **state)
{
	mode_t m = 0;
	struct rb_error err;
	assert_int_equal(rb_fs_parse_mode("0644", "$.mode", &m, &err), 0);
	assert_int_equal(m, 0644);
	assert_int_equal(rb_fs_parse_mode("1777", "$.mode", &m, &err), 0);
	assert_int_equal(m, 01777);
	assert_int_equal(rb_fs_parse_mode("10000", "$.mode", &m, &err), -1);
	assert_int_equal(rb_fs_parse_mode("0648", "$.mode", &m, &err), -1);
	assert_int_equal(rb_fs_parse_mode("", "$.mode", &m, &err), -1);
	assert_non_null(strstr(err.msg, "$.mode"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(parse_splits_parent_and_name),  cmocka_unit_test(parse_refuses_relative_and_dotdot),
	    cmocka_unit_test(link_inside_workspace),         cmocka_unit_test(link_inside_through_links),
	    cmocka_unit_test(mode_is_octal_permission_bits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* Tests of runtime/check/hostcheck.c: every item is well formed; on the development hosts (root,
 * kernel 6.18, hybrid cgroups) the features runbox needs are found; and the negative
 * controls: a masked /proc and a filter denying unshare and seccomp are reported missing. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <linux/magic.h>

#include "runtime/check/hostcheck.h"

static const struct rb_hostcheck_item *find(const struct rb_hostcheck *hc, const char *name)
{
	for (size_t i = 0; i < hc->n; i++)
		if (strcmp(hc->items[i].name, name) == 0)
			return &hc->items[i];
	return NULL;
}

static enum rb_hostcheck_state state_of(const struct rb_hostcheck *hc, const char *name)
{
	const struct rb_hostcheck_item *it = find(hc, name);
	if (!it)
		fail_msg("no check named `%s`", name);
	return it->state;
}

static int group_setup(void **state)
{
	struct rb_hostcheck *hc = calloc(1, sizeof(*hc));
	if (!hc)
		return -1;
	rb_hostcheck_run(hc, &(struct rb_host){.env = environ});
	*state = hc;
	return 0;
}

static int group_teardown(void **state)
{
	free(*state);
	return 0;
}

static void test_items_well_formed(void **state)
{
	const struct rb_hostcheck *hc = *state;
	assert_true(hc->n >= 20);
	assert_true(hc->n <= RB_HOSTCHECK_MAX);
	for (size_t i = 0; i < hc->n; i++) {
		const struct rb_hostcheck_item *it = &hc->items[i];
		print_message("%-26s %-8s %s%s%s\n", it->name, rb_hostcheck_state_name(it->state), it->detail,
		              it->fix[0] ? " | fix: " : "", it->fix);
		assert_true(it->name[0] != '\0');
		assert_true(it->state == RB_CHECK_OK || it->state == RB_CHECK_DEGRADED ||
		            it->state == RB_CHECK_MISSING);
		assert_true(it->detail[0] != '\0');
		if (it->state != RB_CHECK_OK)
			assert_true(it->fix[0] != '\0');
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(it->name, hc->items[j].name);
	}
	for (const char *const *n =
	         (const char *const[]){"kernel", "user namespaces", "subordinate ids", "overlayfs in userns",
	                               "new mount API", "overlay lowerdir+", "fresh /proc", "seccomp", "cgroup mode",
	                               "cgroup delegation", "nftables", "pidfd_open", "clone3", "close_range",
	                               "openat2", NULL};
	     *n; n++)
		assert_non_null(find(hc, *n));
	assert_string_equal(rb_hostcheck_state_name(RB_CHECK_DEGRADED), "degraded");
}

/* The development machines: root, kernel 6.18, hybrid cgroups. */
static void test_this_host(void **state)
{
	const struct rb_hostcheck *hc = *state;
	if (geteuid() != 0) {
		print_message("host expectations are for root: skipped\n");
		skip();
	}
	assert_false(hc->rootless);
	assert_int_equal(state_of(hc, "user namespaces"), RB_CHECK_OK);
	assert_int_equal(state_of(hc, "seccomp"), RB_CHECK_OK);
	assert_int_equal(state_of(hc, "overlayfs in userns"), RB_CHECK_OK);
	assert_int_equal(state_of(hc, "fresh /proc"), RB_CHECK_OK);
	assert_int_equal(state_of(hc, "clone3"), RB_CHECK_OK);
	assert_true(rb_hostcheck_runnable(hc));

	struct statfs sf;
	if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == TMPFS_MAGIC) {
		struct statfs uf;
		if (statfs("/sys/fs/cgroup/unified", &uf) == 0 && uf.f_type == CGROUP2_SUPER_MAGIC) {
			const struct rb_hostcheck_item *m = find(hc, "cgroup mode");
			assert_non_null(m);
			assert_non_null(strstr(m->detail, "hybrid"));
		}
	} else {
		print_message("/sys/fs/cgroup is not tmpfs: hybrid assertion skipped\n");
	}
}

/* Runs the checks in a child after prepare() and returns what the child saw, coded in its exit
 * status: bit 0 runnable, bits 1..2 the state of name1, bits 3..4 the state of name2,
 * bits 5..6 the state of name3. */
static int in_child(int (*prepare)(void), const char *name1, const char *name2, const char *name3)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (prepare() < 0)
			_exit(255);
		struct rb_hostcheck *hc = calloc(1, sizeof(*hc));
		if (!hc)
			_exit(254);
		rb_hostcheck_run(hc, &(struct rb_host){.env = environ});
		int code = rb_hostcheck_runnable(hc) ? 1 : 0;
		const char *names[] = {name1, name2, name3};
		for (int i = 0; i < 3; i++) {
			const struct rb_hostcheck_item *it = names[i] ? find(hc, names[i]) : NULL;
			int st = it ? (int)it->state : 3;
			code |= st << (1 + 2 * i);
		}
		_exit(code);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	assert_true(WIFEXITED(st));
	assert_int_not_equal(WEXITSTATUS(st), 255);
	assert_int_not_equal(WEXITSTATUS(st), 254);
	return WEXITSTATUS(st);
}

static int nothing(void)
{
	return 0;
}

/* A container runtime's mask: a tmpfs over a directory of /proc, in a mount namespace of the
 * child's own (so the host's /proc is untouched). */
static int mask_proc(void)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	const char *dirs[] = {"/proc/driver", "/proc/fs", "/proc/bus", "/proc/tty"};
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (mount("tmpfs", dirs[i], "tmpfs", MS_RDONLY, "size=4k") == 0)
			return 0;
	return -1;
}

static void test_masked_proc_is_missing(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		print_message("masking /proc needs root: skipped\n");
		skip();
	}
	/* Control: in the same kind of child without the mask, a fresh /proc is fine. */
	int ctl = in_child(nothing, "fresh /proc", NULL, NULL);
	assert_int_equal((ctl >> 1) & 3, RB_CHECK_OK);
	assert_int_equal(ctl & 1, 1);

	int got = in_child(mask_proc, "fresh /proc", "overlayfs in userns", NULL);
	assert_int_equal((got >> 1) & 3, RB_CHECK_MISSING);
	assert_int_equal((got >> 3) & 3, RB_CHECK_OK); /* only /proc is affected */
	assert_int_equal(got & 1, 0);                  /* a required feature is missing */
}

/* What a strict container's seccomp profile does: no unshare, no seccomp of one's own. */
static int deny_unshare_and_seccomp(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -1;
	int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0);
	r = r ?: seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(seccomp), 0);
	r = r ?: seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_SECCOMP));
	r = r ?: seccomp_load(ctx);
	seccomp_release(ctx);
	return r < 0 ? -1 : 0;
}

static void test_denied_namespaces_and_seccomp_are_missing(void **state)
{
	const struct rb_hostcheck *hc = *state;
	/* Control: the unfiltered run (group setup) found them. */
	if (state_of(hc, "user namespaces") != RB_CHECK_OK || state_of(hc, "seccomp") != RB_CHECK_OK) {
		print_message("this host lacks user namespaces or seccomp already: skipped\n");
		skip();
	}
	int got = in_child(deny_unshare_and_seccomp, "user namespaces", "seccomp", "overlayfs in userns");
	assert_int_equal((got >> 1) & 3, RB_CHECK_MISSING);
	assert_int_equal((got >> 3) & 3, RB_CHECK_MISSING);
	assert_int_equal((got >> 5) & 3, RB_CHECK_MISSING);
	assert_int_equal(got & 1, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_items_well_formed),
	    cmocka_unit_test(test_this_host),
	    cmocka_unit_test(test_masked_proc_is_missing),
	    cmocka_unit_test(test_denied_namespaces_and_seccomp_are_missing),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

/* The never-an-input rule: one list and one check, for inputs, skills and directory images. */
#define _GNU_SOURCE
#include "common/never_input.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

static const char *const never_fixed[] = {"/proc",        "/sys",     "/dev",       "/run",    "/etc/shadow",
                                          "/etc/gshadow", "/etc/ssh", "/root/.ssh", "/var/run"};

bool rb_path_under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	while (n > 1 && prefix[n - 1] == '/')
		n--;
	if (n == 1 && prefix[0] == '/')
		return true;
	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Binding `/` (or /proc/self/root, which realpath makes `/`) would hand the sandbox the host's
 * /proc and /run; binding a rootless caller's home, or a directory image of it, would hand it
 * the token key in runbox's state directory, and so would any other state directory of
 * runbox's (the default one while --state-dir points elsewhere). */
int rb_never_input_check(const struct rb_paths *paths, const char *host, bool is_dir, const char *what,
                         struct rb_error *err)
{
	_cleanup_free_ struct rb_own_dirs *own = calloc(1, sizeof *own);
	if (!own)
		return rb_error_set(err, ENOMEM, "%s `%s`", what, host);
	rb_paths_own_dirs(paths, own);
	/* Compared as real paths, as host is: a state directory named through a link. */
	for (unsigned i = 0; i < own->n; i++) {
		char real[PATH_MAX];
		if (realpath(own->dir[i], real))
			snprintf(own->dir[i], sizeof own->dir[i], "%s", real);
	}
	char store[PATH_MAX + 16] = "";
	if (*paths->state_dir) /* then own->dir[0] */
		snprintf(store, sizeof store, "%s/artifacts/", own->dir[0]);
	bool stored_object = *store && !is_dir && !strncmp(host, store, strlen(store));

	for (size_t i = 0; i < RB_ARRAY_SIZE(never_fixed) + own->n; i++) {
		bool is_own = i >= RB_ARRAY_SIZE(never_fixed);
		const char *never = is_own ? own->dir[i - RB_ARRAY_SIZE(never_fixed)] : never_fixed[i];
		/* The one object of the store, whichever of runbox's directories holds the store. */
		if (stored_object && is_own && rb_path_under(store, never))
			continue;
		if (rb_path_under(host, never))
			return rb_error_set(err, 0, "%s `%s`: %s is never an input", what, host, never);
		if (rb_path_under(never, host))
			return rb_error_set(err, 0, "%s `%s`: it holds %s, which is never an input", what, host, never);
	}
	return 0;
}

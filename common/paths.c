/* Resolution of the state, run, config and shipped-data directories. */
#define _GNU_SOURCE
#include "common/paths.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* dst = a followed by b. */
static int set(char *dst, const char *what, struct rb_error *err, const char *unused, const char *a, const char *b)
{
	(void)unused;
	if (snprintf(dst, PATH_MAX, "%s%s", a, b) >= PATH_MAX)
		return rb_error_set(err, ENAMETOOLONG, "%s directory", what);
	return 0;
}

static int is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Shipped data sits beside the binary (a source tree or build dir), else in
 * ../share/runbox relative to it (make install). RUNBOX_DATA_DIR overrides. */
static int find_data_dir(char *out, struct rb_error *err)
{
	const char *env = getenv("RUNBOX_DATA_DIR");
	if (env && *env)
		return set(out, "data", err, "%s%s", env, "");
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n < 0)
		return rb_error_set(err, errno, "readlink `/proc/self/exe`");
	exe[n] = '\0';
	char *dir = dirname(exe);
	char probe[PATH_MAX + 32];
	snprintf(probe, sizeof probe, "%s/policy/profiles", dir);
	if (is_dir(probe))
		return set(out, "data", err, "%s%s", dir, "");
	snprintf(probe, sizeof probe, "%s/../share/runbox/policy/profiles", dir);
	if (is_dir(probe))
		return set(out, "data", err, "%s%s", dir, "/../share/runbox");
	return rb_error_set(err, ENOENT, "shipped data (policy/profiles) not found beside `%s`", exe);
}

int rb_paths_init(struct rb_paths *p, const char *state_override, struct rb_error *err)
{
	memset(p, 0, sizeof *p);
	const char *home = getenv("HOME");
	const char *state_env = getenv("RUNBOX_STATE_DIR");
	const char *run_env = getenv("RUNBOX_RUN_DIR");
	int root = geteuid() == 0;

	if (state_override && *state_override) {
		if (set(p->state_dir, "state", err, "%s%s", state_override, "") < 0)
			return -1;
	} else if (state_env && *state_env) {
		if (set(p->state_dir, "state", err, "%s%s", state_env, "") < 0)
			return -1;
	} else if (root) {
		strcpy(p->state_dir, "/var/lib/runbox");
	} else {
		const char *x = getenv("XDG_STATE_HOME");
		if (x && *x) {
			if (set(p->state_dir, "state", err, "%s%s", x, "/runbox") < 0)
				return -1;
		} else if (home && *home) {
			if (set(p->state_dir, "state", err, "%s%s", home, "/.local/state/runbox") < 0)
				return -1;
		} else {
			return rb_error_set(err, 0, "no state directory: set RUNBOX_STATE_DIR, XDG_STATE_HOME or HOME");
		}
	}

	if (run_env && *run_env) {
		if (set(p->run_dir, "run", err, "%s%s", run_env, "") < 0)
			return -1;
	} else if ((state_override && *state_override) || (state_env && *state_env)) {
		if (set(p->run_dir, "run", err, "%s%s", p->state_dir, "/run") < 0)
			return -1;
	} else if (root) {
		strcpy(p->run_dir, "/run/runbox");
	} else {
		const char *x = getenv("XDG_RUNTIME_DIR");
		if (x && *x) {
			if (set(p->run_dir, "run", err, "%s%s", x, "/runbox") < 0)
				return -1;
		} else if (set(p->run_dir, "run", err, "%s%s", p->state_dir, "/run") < 0) {
			return -1;
		}
	}

	/* RUNBOX_CONFIG_DIR names the operator's directory for whoever starts runbox: the caller
	 * could equally give --policy PATH, so it widens nothing a manifest could not ask for. */
	const char *config_env = getenv("RUNBOX_CONFIG_DIR");
	if (config_env && *config_env) {
		if (set(p->config_dir, "config", err, "%s%s", config_env, "") < 0)
			return -1;
	} else if (root) {
		strcpy(p->config_dir, "/etc/runbox");
	} else {
		const char *x = getenv("XDG_CONFIG_HOME");
		if (x && *x)
			set(p->config_dir, "config", err, "%s%s", x, "/runbox");
		else if (home && *home)
			set(p->config_dir, "config", err, "%s%s", home, "/.config/runbox");
	}
	return find_data_dir(p->data_dir, err);
}

static void add_own(struct rb_own_dirs *o, const char *a, const char *b)
{
	if (!a || !*a || o->n >= RB_PATHS_MAX_OWN)
		return;
	char d[PATH_MAX];
	if (snprintf(d, sizeof d, "%s%s", a, b) >= (int)sizeof d)
		return; /* longer than any path the kernel resolves: nothing can be below it */
	for (unsigned i = 0; i < o->n; i++)
		if (!strcmp(o->dir[i], d))
			return;
	memcpy(o->dir[o->n++], d, sizeof d);
}

void rb_paths_own_dirs(const struct rb_paths *p, struct rb_own_dirs *out)
{
	out->n = 0;
	add_own(out, p->state_dir, "");
	add_own(out, p->run_dir, "");
	add_own(out, p->config_dir, "");
	add_own(out, "/var/lib/runbox", "");
	add_own(out, "/run/runbox", "");
	add_own(out, "/etc/runbox", "");
	const char *home = getenv("HOME");
	add_own(out, getenv("XDG_STATE_HOME"), "/runbox");
	add_own(out, home, "/.local/state/runbox");
	add_own(out, getenv("XDG_RUNTIME_DIR"), "/runbox");
	add_own(out, getenv("XDG_CONFIG_HOME"), "/runbox");
	add_own(out, home, "/.config/runbox");
	add_own(out, getenv("RUNBOX_STATE_DIR"), "");
	add_own(out, getenv("RUNBOX_RUN_DIR"), "");
	add_own(out, getenv("RUNBOX_CONFIG_DIR"), "");
}

/* Resolution of the state, run, config and shipped-data directories. */
#define _GNU_SOURCE
#include "common/paths.h"
#include "common/util.h"

#include <errno.h>
#include <libgen.h>
#include <stdbool.h>
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

/* The three layouts, tried in this order:
 *   RUNBOX_DATA_DIR=D    D/policy/, D/build/images/, the gateway beside the binary;
 *   the build tree       policy/ beside the binary: ./runbox from a checkout (or a copy
 *                        of it with policy/ and build/ beside it, as the tests make);
 *   an installed tree    BIN/../share/runbox/{policy,images}/, BIN/../libexec/runbox/
 *                        (make install PREFIX=P puts runbox in P/bin).
 * The first whose policy/profiles exists wins; the parts are not required to exist yet. */
static int parts_at(struct rb_parts *out, const char *layout, const char *data, const char *images, const char *gwdir,
                    struct rb_error *err)
{
	snprintf(out->layout, sizeof out->layout, "%s", layout);
	if (set(out->data_dir, "data", err, NULL, data, "") < 0 ||
	    set(out->images_dir, "images", err, NULL, images, "") < 0 ||
	    set(out->gateway, "gateway", err, NULL, gwdir, "/runbox-gateway") < 0)
		return -1;
	return 0;
}

int rb_parts_find(struct rb_parts *out, const struct rb_host *host, struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n < 0)
		return rb_error_set(err, errno, "readlink `/proc/self/exe`");
	exe[n] = '\0';
	char copy[PATH_MAX], bindir[PATH_MAX];
	memcpy(copy, exe, (size_t)n + 1);
	snprintf(bindir, sizeof bindir, "%s", dirname(copy));
	char a[PATH_MAX], b[PATH_MAX];

	const char *env = rb_host_getenv(host, "RUNBOX_DATA_DIR");
	if (env && *env) {
		if (snprintf(b, sizeof b, "%s/build/images", env) >= (int)sizeof b)
			return rb_error_set(err, ENAMETOOLONG, "RUNBOX_DATA_DIR `%s`", env);
		return parts_at(out, "RUNBOX_DATA_DIR", env, b, bindir, err);
	}
	if (snprintf(a, sizeof a, "%s/policy/profiles", bindir) < (int)sizeof a && is_dir(a)) {
		snprintf(b, sizeof b, "%s/build/images", bindir);
		return parts_at(out, "build tree", bindir, b, bindir, err);
	}
	/* Installed: the prefix named without "..", so errors show the paths an operator knows.
	 * runbox is PREFIX/bin/runbox; the gateway, which finds its parts the same way, is
	 * PREFIX/libexec/runbox/runbox-gateway. */
	char prefix[PATH_MAX];
	size_t bl = strlen(bindir), ll = strlen("/libexec/runbox");
	bool in_libexec = bl > ll && !strcmp(bindir + bl - ll, "/libexec/runbox");
	snprintf(a, sizeof a, "%s/%s", bindir, in_libexec ? "../.." : "..");
	if (!realpath(a, prefix))
		return rb_error_set(err, errno, "the install prefix `%s`", a);
	char data[PATH_MAX], images[PATH_MAX], gwdir[PATH_MAX];
	if (snprintf(data, sizeof data, "%s/share/runbox", prefix) >= (int)sizeof data ||
	    snprintf(images, sizeof images, "%s/share/runbox/images", prefix) >= (int)sizeof images ||
	    snprintf(gwdir, sizeof gwdir, "%s/libexec/runbox", prefix) >= (int)sizeof gwdir)
		return rb_error_set(err, ENAMETOOLONG, "the install prefix `%s`", prefix);
	snprintf(a, sizeof a, "%s/policy/profiles", data);
	if (is_dir(a))
		return parts_at(out, "installed", data, images, gwdir, err);
	return rb_error_set(err, ENOENT,
	                    "shipped data not found for `%s`: neither `%s/policy/profiles` nor `%s` exists", exe,
	                    bindir, a);
}

int rb_paths_init(struct rb_paths *p, const struct rb_host *host, const char *state_override, struct rb_error *err)
{
	memset(p, 0, sizeof *p);
	p->host = host;
	const char *home = rb_host_getenv(host, "HOME");
	const char *state_env = rb_host_getenv(host, "RUNBOX_STATE_DIR");
	const char *run_env = rb_host_getenv(host, "RUNBOX_RUN_DIR");
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
		const char *x = rb_host_getenv(host, "XDG_STATE_HOME");
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
		const char *x = rb_host_getenv(host, "XDG_RUNTIME_DIR");
		if (x && *x) {
			if (set(p->run_dir, "run", err, "%s%s", x, "/runbox") < 0)
				return -1;
		} else if (set(p->run_dir, "run", err, "%s%s", p->state_dir, "/run") < 0) {
			return -1;
		}
	}

	/* RUNBOX_CONFIG_DIR names the operator's directory for whoever starts runbox: the caller
	 * could equally give --policy PATH, so it widens nothing a manifest could not ask for. */
	const char *config_env = rb_host_getenv(host, "RUNBOX_CONFIG_DIR");
	if (config_env && *config_env) {
		if (set(p->config_dir, "config", err, "%s%s", config_env, "") < 0)
			return -1;
	} else if (root) {
		strcpy(p->config_dir, "/etc/runbox");
	} else {
		const char *x = rb_host_getenv(host, "XDG_CONFIG_HOME");
		if (x && *x)
			set(p->config_dir, "config", err, "%s%s", x, "/runbox");
		else if (home && *home)
			set(p->config_dir, "config", err, "%s%s", home, "/.config/runbox");
	}
	struct rb_parts parts;
	if (rb_parts_find(&parts, host, err) < 0)
		return -1;
	memcpy(p->data_dir, parts.data_dir, sizeof p->data_dir);
	memcpy(p->images_dir, parts.images_dir, sizeof p->images_dir);
	return 0;
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
	const struct rb_host *h = p->host;
	const char *home = rb_host_getenv(h, "HOME");
	add_own(out, rb_host_getenv(h, "XDG_STATE_HOME"), "/runbox");
	add_own(out, home, "/.local/state/runbox");
	add_own(out, rb_host_getenv(h, "XDG_RUNTIME_DIR"), "/runbox");
	add_own(out, rb_host_getenv(h, "XDG_CONFIG_HOME"), "/runbox");
	add_own(out, home, "/.config/runbox");
	add_own(out, rb_host_getenv(h, "RUNBOX_STATE_DIR"), "");
	add_own(out, rb_host_getenv(h, "RUNBOX_RUN_DIR"), "");
	add_own(out, rb_host_getenv(h, "RUNBOX_CONFIG_DIR"), "");
}

int rb_state_dir_make(const char *state_dir, struct rb_error *err)
{
	return rb_mkdir_p(state_dir, RB_STATE_DIR_MODE, err);
}

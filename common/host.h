/* What a library call may know of the host process beyond its arguments: the environment a
 * policy's env.pass draws from, and the variables runbox's places are read from (XDG_*, HOME,
 * RUNBOX_STATE_DIR, RUNBOX_RUN_DIR, RUNBOX_CONFIG_DIR, RUNBOX_DATA_DIR). The library never
 * reads the process's own environment: the CLI fills this from environ, a daemon gives it
 * what its runs may see. */
#ifndef RB_HOST_H
#define RB_HOST_H

struct rb_host {
	char *const *env; /* "NAME=value" strings, NULL-terminated; NULL: an empty environment */
};

/* NAME's value in host's environment (the first entry naming it, as getenv), or NULL: also
 * for a NULL host. The string is host's, valid as long as its env. */
const char *rb_host_getenv(const struct rb_host *host, const char *name);

#endif

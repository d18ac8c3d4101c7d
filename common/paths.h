/* Where runbox keeps things (SPEC "Where runbox keeps things"), and where its shipped data
 * (policies, seccomp profiles, built images) lives: beside the binary or in the source tree. */
#ifndef RB_PATHS_H
#define RB_PATHS_H

#include <limits.h>

#include "common/error.h"
#include "common/host.h"

struct rb_paths {
	char state_dir[PATH_MAX];  /* ledger, artifacts, images, keys, caches */
	char run_dir[PATH_MAX];    /* live runs */
	char config_dir[PATH_MAX]; /* policies and gateway config of the operator */
	char data_dir[PATH_MAX];   /* shipped data: policy/profiles, policy/seccomp */
	char images_dir[PATH_MAX]; /* built-in images: minimal/rootfs and its minimal/.built stamp */
	/* What they were read from (rb_paths_init's; it must outlive p), for rb_paths_own_dirs and
	 * for what a run draws from the host's environment (env.pass). */
	const struct rb_host *host;
};

/* runbox's own parts, found from the running binary (/proc/self/exe), never the cwd: in the
 * build tree beside it (./runbox, runbox-gateway, policy/, build/images/), or installed under
 * its prefix (PREFIX/bin/runbox, PREFIX/libexec/runbox/runbox-gateway,
 * PREFIX/share/runbox/{policy,images}/). RUNBOX_DATA_DIR (of host) names the data directory instead. */
struct rb_parts {
	char layout[24];           /* "build tree", "installed" or "RUNBOX_DATA_DIR" */
	char data_dir[PATH_MAX];   /* as rb_paths.data_dir */
	char images_dir[PATH_MAX]; /* as rb_paths.images_dir */
	char gateway[PATH_MAX];    /* the runbox-gateway binary (may be missing: its exec then fails) */
};
int rb_parts_find(struct rb_parts *out, const struct rb_host *host, struct rb_error *err);

/* Fills paths for the caller: root uses /var/lib, /run, /etc; others the XDG directories.
 * state_override (--state-dir) or RUNBOX_STATE_DIR wins for the state directory; the run
 * directory then lives beneath it unless RUNBOX_RUN_DIR is set. RUNBOX_CONFIG_DIR replaces
 * the config directory (/etc/runbox, or $XDG_CONFIG_HOME/runbox). Every variable is read from
 * host's environment (common/host.h), never the process's; host is kept in p. */
int rb_paths_init(struct rb_paths *p, const struct rb_host *host, const char *state_override, struct rb_error *err);

/* The state directory's mode where runbox makes it: searchable by the sandbox's host ids (a
 * run's directory lies below it), listable by no one else; what is inside is private by its
 * own modes. */
#define RB_STATE_DIR_MODE 0711
/* Makes state_dir (and its missing parents) RB_STATE_DIR_MODE; an existing one keeps its mode.
 * Whatever makes something below the state directory calls this first (a run, an image import
 * or build, the token key, the ledger), so that no order of commands on a fresh host leaves it
 * 0700 as the parent of a private directory. */
int rb_state_dir_make(const char *state_dir, struct rb_error *err);

/* Every directory that is, or by default would be, runbox's state, run or config: p's own,
 * root's defaults (/var/lib/runbox, /run/runbox, /etc/runbox), the caller's XDG ones (from
 * XDG_* and HOME of p->host, whatever overrides this invocation), and those RUNBOX_STATE_DIR
 * and RUNBOX_RUN_DIR name. None of them is ever an input or an image. p->state_dir is first;
 * empty and repeated entries are left out. */
#define RB_PATHS_MAX_OWN 16
struct rb_own_dirs {
	unsigned n;
	char dir[RB_PATHS_MAX_OWN][PATH_MAX];
};
void rb_paths_own_dirs(const struct rb_paths *p, struct rb_own_dirs *out);

#endif

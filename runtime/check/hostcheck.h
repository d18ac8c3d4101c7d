/* `runbox check` as a library: probes what this host supports for runbox (namespaces, id maps,
 * overlay, mount API, seccomp, cgroups, nftables, /proc masks, hardening sysctls, syscalls) and
 * says, per feature, ok / degraded / missing, why, and the fix. Prints nothing. */
#ifndef RB_HOSTCHECK_H
#define RB_HOSTCHECK_H

#include "common/host.h"

#include <stdbool.h>
#include <stddef.h>

enum rb_hostcheck_state { RB_CHECK_OK, RB_CHECK_DEGRADED, RB_CHECK_MISSING };

struct rb_hostcheck_item {
	char name[48];
	enum rb_hostcheck_state state;
	/* A required feature that is missing means runbox cannot run here at all; a missing
	 * optional one (nftables, cgroups) only removes what it provides. */
	bool required;
	char detail[640];
	char fix[512]; /* empty when state is ok */
};

#define RB_HOSTCHECK_MAX 40

struct rb_hostcheck {
	size_t n;
	bool rootless; /* the checks ran for a non-root caller */
	struct rb_hostcheck_item items[RB_HOSTCHECK_MAX];
};

/* Runs every check for the calling user. Probes that could disturb the host run in forked
 * children inside fresh namespaces; the only host-visible traces are a temporary directory and
 * uniquely named test cgroups, both removed before returning. Returns 0 (the findings are in
 * out, including failures of the probes themselves). The environment it reads (TMPDIR, and
 * RUNBOX_CGROUP_PARENT: where runs make their cgroups) is host's, never the process's. */
int rb_hostcheck_run(struct rb_hostcheck *out, const struct rb_host *host);

/* True when no required item is missing: runbox can run here, possibly degraded. */
bool rb_hostcheck_runnable(const struct rb_hostcheck *hc);

const char *rb_hostcheck_state_name(enum rb_hostcheck_state state); /* "ok", "degraded", "missing" */

#endif

/* The runner's side of a run's gateway endpoint: the runbox-gateway process, started on the
 * first connection to the listener (so a run that never calls the gateway pays nothing for
 * the HTTP library) inside the run's cgroup, confirmed started and ready, watched, stopped at
 * the run's end. */
#ifndef RB_GWPROC_H
#define RB_GWPROC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/host.h"
#include "policy/policy.h"
#include "runtime/sandbox/cgroup.h"

/* How long a started gateway may take to say it serves; past it, it is killed. */
#define RB_GWPROC_READY_MS 5000

struct rb_gwproc {
	pid_t pid;        /* 0: not running (never started, or reaped) */
	int pidfd;        /* valid while pid > 0: readable once the gateway has exited */
	int out;          /* its stdout: the counts at exit */
	json_t *stats;    /* {"requests": n, "unauthorized": n} once stopped */
	bool failed;      /* it could not start, or died: the run's calls are refused */
	char error[256];  /* why it failed, for the result */
	bool confined;    /* it runs in the run's cgroup (rb_cgroup_gateway_join) */
	char cgroup[256]; /* confined: what placed it there; else why it is not (the "none" reason) */
	/* Set by the runner before the start: the gateway config (NULL: the default places) and
	 * the connectors the policy grants. */
	const char *conf_path;
	const struct rb_host *host; /* the run's (rb_parts_find: where the gateway's binary is) */
	char *const *grants;
	unsigned n_grants;
	char *const *proxy; /* the policy's network.proxy */
	unsigned n_proxy;
	double cpus; /* the policy's cpu limit: a gateway daemon's share for the run's calls (0: none) */
	const struct rb_policy_mcp *mcp; /* the policy's network.mcp */
	unsigned n_mcp;
	const struct rb_policy_approval *approvals; /* the policy's network.approval */
	unsigned n_approvals;
	const char *run_dir; /* the run's live directory: held calls live in its approvals/ */
	json_t *calls;       /* call records read from the gateway, not yet taken (rb_gwproc_take_calls) */
	/* Served by the gateway daemon (runtime/run/gwreg.h) instead of a process of its own: out
	 * is the registration, and its EOF (lost) is the daemon's end. */
	bool daemon;
	bool lost;
	char daemon_socket[108];
	char *line; /* a record's start, read before its newline */
	size_t line_len;
};

/* Where no gateway config is named (conf_path NULL) and a gateway daemon answers at its socket (common/gwsock.h),
 * hands fds and the grant to it instead (gw->daemon), and returns once it said it serves them; a daemon that refuses
 * or fails is an error naming its socket and its reason (the run's calls are refused: never a fallback to secrets
 * the daemon would not spend). With no daemon: */
/* Starts runbox-gateway (rb_parts_find: beside the binary, or PREFIX/libexec/runbox) serving fds (and the DNS stub on
 * dns_fd, -1: none) for run_id with key,
 * and returns once it has said it serves. It starts in cg's gateway leaf (clone3 into it, or a join before exec): it
 * never runs a request outside the run's cgroup, and if it cannot join it does not start. With the "none" manager (or
 * cg NULL) it runs in the runner's cgroup, and gw->cgroup says why. A failed join or exec (the errno comes back over a
 * CLOEXEC pipe), an exit before the readiness byte, or no byte within RB_GWPROC_READY_MS is an error naming the binary
 * or the cgroup; nothing is left running then. */
int rb_gwproc_start(struct rb_gwproc *gw, struct rb_cgroup *cg, const int *fds, unsigned n_fds, int dns_fd,
                    const char *run_id, const uint8_t *key, size_t keylen, struct rb_error *err);
/* It serves now: a process of its own, or the daemon with the registration open. */
bool rb_gwproc_running(const struct rb_gwproc *gw);
/* Served by the daemon, whose registration ended (EOF) while the run was served: reap it. */
bool rb_gwproc_lost(const struct rb_gwproc *gw);
/* The fd to poll for the gateway's death (POLLIN), or -1 when it is not running. */
int rb_gwproc_watch_fd(const struct rb_gwproc *gw);
/* After its watch fd was readable: reaps the gateway and says how it ended in err. */
void rb_gwproc_reap(struct rb_gwproc *gw, struct rb_error *err);
/* Reads the call records the gateway has written so far, without blocking (its out fd is
 * polled for POLLIN while it runs). */
void rb_gwproc_drain(struct rb_gwproc *gw);
/* The records read so far (a new array, possibly empty); the caller owns it. */
json_t *rb_gwproc_take_calls(struct rb_gwproc *gw);
/* The names the DNS stub refused among calls (records of door "dns"), at most max of them, as a
 * new array of strings ("example.invalid"), each once. */
#define RB_GWPROC_DNS_LISTED 16
json_t *rb_gwproc_dns_names(const json_t *calls, size_t max);
/* How many of calls are answered calls (not a "sent" record, docs/network.md); *unanswered gets
 * how many sent records no completion of the same id follows (a call that went out and never
 * came back: the gateway killed, the upstream silent, the run ended mid-transfer). */
size_t rb_gwproc_answered(const json_t *calls, size_t *unanswered);
/* SIGTERM, collect the counts (the last records, and where it ran: stats' "cgroup"), reap.
 * Safe when never started or already reaped. */
void rb_gwproc_stop(struct rb_gwproc *gw);

#endif

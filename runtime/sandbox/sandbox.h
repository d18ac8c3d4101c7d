/* A sandbox: the spawner, the handshake and the runner's handle on a live sandbox. The parent
 * clones the sandbox's init into a pre-created cgroup, the id maps are written, then init is
 * released over a socketpair; a setup failure comes back as a message, never as an exit code
 * that could be the step's. */
#ifndef RB_SANDBOX_H
#define RB_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "runtime/sandbox/cgroup.h"
#include "runtime/sandbox/mounts.h"
#include "runtime/sandbox/net.h"
#include "runtime/sandbox/seccomp.h"
#include "runtime/sandbox/userns.h"

struct rb_rlimit {
	int resource;
	uint64_t value;
};

/* What every step's process becomes before execve. */
struct rb_exec_spec {
	uid_t uid;
	gid_t gid;
	uint64_t caps;
	bool setgroups_denied;
	struct rb_rlimit rlimits[4];
	unsigned n_rlimits;
	const struct rb_bpf *bpf;
};

struct rb_sandbox_spec {
	struct rb_rootfs_spec rootfs;
	struct rb_exec_spec exec;
	struct rb_idplan ids;
	enum rb_net_mode net_mode;
	char hostname[64];
	bool idmap_image; /* clone the image's mount as the lower layer, idmapped when it is
	                   * runbox's own (root in the initial user namespace) */
};

struct rb_sandbox {
	pid_t init_pid; /* in the runner's pid namespace */
	int pidfd;
	int ctl; /* control socket to init */
	struct rb_net net;
	bool reaped;
	int init_status;
	bool idmapped;    /* the image is idmapped to the sandbox's ids (writable by its root) */
	int userns_fd;    /* the sandbox's user namespace (opened while init was still dumpable) */
	int workspace_fd; /* O_PATH of the sandbox's /workspace (a mount root the sandbox cannot
	                   * replace): harvest opens out/ below it, never following links */
};

/* How long init may take to build the root before the sandbox counts as failed (125): no
 * wait on a sandbox is unbounded. Generous, so that a slow host is never failed: it bounds only
 * an init that never answers. */
#define RB_SANDBOX_READY_TIMEOUT_MS 60000

/* Creates the sandbox and releases init to build its root; rb_sandbox_wait_ready returns once
 * init reports the root ready, or fails (ETIMEDOUT) when it has not within timeout_ms. The
 * runner may work in between (it commits the ledger). On failure either one has already
 * destroyed what there was. */
int rb_sandbox_create(const struct rb_sandbox_spec *spec, struct rb_cgroup *cg, struct rb_sandbox *sb,
                      struct rb_error *err);
int rb_sandbox_wait_ready(struct rb_sandbox *sb, unsigned timeout_ms, struct rb_error *err);
/* Sends init SIGKILL and returns: the kernel tears the namespaces down on init's side while
 * the runner goes on. rb_sandbox_destroy reaps it. */
void rb_sandbox_kill(struct rb_sandbox *sb);
/* Kills init with SIGKILL (its pid namespace dies with it) and reaps it. Idempotent. */
void rb_sandbox_destroy(struct rb_sandbox *sb);

/* The sandbox's PID 1 (runtime/sandbox/init.c). Never returns. */
__attribute__((noreturn)) void rb_init_main(const struct rb_sandbox_spec *spec, int ctl);

#endif

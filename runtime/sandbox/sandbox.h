/* A sandbox: the spawner, the handshake and the runner's handle on a live sandbox. The factory
 * (runtime/sandbox/factory.h) clones the sandbox's init into a pre-created cgroup and writes the
 * id maps; the runner gets init's descriptors and releases it over a socketpair; a setup
 * failure comes back as a message, never as an exit code that could be the step's. */
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
	pid_t init_pid; /* in the runner's pid namespace; the factory's child, which reaps it */
	int pidfd;
	int ctl; /* control socket to init */
	struct rb_net net;
	bool reaped;      /* init is gone (or was never made): nothing in the sandbox runs */
	bool idmapped;    /* the image is idmapped to the sandbox's ids (writable by its root) */
	int userns_fd;    /* the sandbox's user namespace (opened while init was still dumpable) */
	int workspace_fd; /* O_PATH of the sandbox's /workspace (a mount root the sandbox cannot
	                   * replace): harvest opens out/ below it, never following links */
	int root_fd;      /* O_PATH of the sandbox's root, in its mount namespace (runbox serve's
	                   * file calls resolve below it with RESOLVE_IN_ROOT) */
};

/* How long init may take to build the root before the sandbox counts as failed (125): no
 * wait on a sandbox is unbounded. Generous, so that a slow host is never failed: it bounds only
 * an init that never answers. */
#define RB_SANDBOX_READY_TIMEOUT_MS 60000

struct rb_factory;

/* Has factory make the sandbox and releases init to build its root; rb_sandbox_wait_ready
 * returns once init reports the root ready, or fails (ETIMEDOUT) when it has not within
 * timeout_ms. The runner may work in between (it commits the ledger). On failure either one
 * has already destroyed what there was. Safe to call from several threads at once. */
int rb_sandbox_create(const struct rb_factory *factory, const struct rb_sandbox_spec *spec, struct rb_cgroup *cg,
                      struct rb_sandbox *sb, struct rb_error *err);
int rb_sandbox_wait_ready(struct rb_sandbox *sb, unsigned timeout_ms, struct rb_error *err);
/* Sends init SIGKILL and returns: the kernel tears the namespaces down on init's side while
 * the runner goes on. rb_sandbox_destroy reaps it. */
void rb_sandbox_kill(struct rb_sandbox *sb);
/* Kills init with SIGKILL (its pid namespace dies with it) and returns once it is gone (the
 * factory reaps it). Idempotent. */
void rb_sandbox_destroy(struct rb_sandbox *sb);

/* The factory's side (runtime/sandbox/factory.c): what one sandbox is made from, in the
 * factory's own descriptors, and what the runner gets back. */
struct rb_spawn_req {
	const struct rb_sandbox_spec *spec;
	int ctl_init;        /* init's end of the control socket */
	int cg_fd;           /* the run's cgroup for CLONE_INTO_CGROUP, or -1 */
	const int *join_fds; /* files to write "0" into, to join the run's cgroups */
	unsigned n_join;
	const int *close_in_init; /* the factory's own descriptors, which init must not keep */
	unsigned n_close;
};

struct rb_spawned {
	pid_t init_pid;
	int pidfd;     /* the factory's: it reaps init through it */
	int userns_fd; /* init's user namespace */
	int lower;     /* the image's detached clone for init, or -1 */
	bool lower_idmapped;
	struct rb_net net;
};

/* In the factory: enters the owner user namespace (rootless), makes the network namespace and
 * clones init into the run's cgroup with its id maps written. On failure nothing is left (an
 * init already cloned is killed and reaped). */
int rb_sandbox_spawn(const struct rb_spawn_req *req, struct rb_spawned *out, struct rb_error *err);

/* The sandbox's PID 1 (runtime/sandbox/init.c). Never returns. */
__attribute__((noreturn)) void rb_init_main(const struct rb_sandbox_spec *spec, int ctl);

#endif

/* The spawner and the handshake (see sandbox.h). The runner forks a spawner which, for a
 * rootless runner, first makes the owner user namespace; then makes the network namespace
 * and rules it; then clones the sandbox's init with CLONE_PARENT (so init is the runner's
 * child) into the run's cgroup, writes init's id maps, hands the namespace fds to the runner
 * and exits. The sandbox's user namespace is a child of the netns owner, so root inside has no
 * power over the network namespace. */
#define _GNU_SOURCE
#include "runtime/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "runtime/channel.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* The kernel's struct clone_args, as of 5.7. */
struct clone_args_v2 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
	    cgroup;
};

static pid_t clone_init(int cgroup_fd)
{
	struct clone_args_v2 args;
	memset(&args, 0, sizeof args);
	args.flags =
	    CLONE_PARENT | CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
	if (cgroup_fd >= 0) {
		args.flags |= CLONE_INTO_CGROUP;
		args.cgroup = (uint64_t)cgroup_fd;
	}
	return (pid_t)syscall(SYS_clone3, &args, sizeof args);
}

__attribute__((noreturn)) static void spawner_fail(int sp, const struct rb_error *err)
{
	json_t *m = json_pack("{s:s, s:s}", "ev", "error", "message", err->msg);
	struct rb_error ignored;
	rb_chan_send(sp, m, NULL, 0, &ignored);
	json_decref(m);
	_exit(1);
}

/* As root in the initial user namespace: a detached clone of the image, idmapped with the
 * sandbox's user namespace, so files the image's host ids own are the sandbox's own. -1 when
 * not possible (rootless, or the filesystem cannot idmap): the image is then read-only for
 * the sandbox's root, which the result reports. */
static int idmapped_image(const struct rb_sandbox_spec *spec, pid_t init_pid)
{
	if (spec->ids.outer || !spec->idmap_image)
		return -1;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)init_pid);
	_cleanup_close_ int userns = open(path, O_RDONLY | O_CLOEXEC);
	if (userns < 0)
		return -1;
	int tree = open_tree(AT_FDCWD, spec->rootfs.image->rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return -1;
	struct mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY, .userns_fd = (uint64_t)userns};
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) {
		close(tree);
		return -1;
	}
	return tree;
}

__attribute__((noreturn)) static void spawner(const struct rb_sandbox_spec *spec, int cg_fd, int sp, int ctl)
{
	struct rb_error err;
	rb_error_clear(&err);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (spec->ids.outer) {
		if (unshare(CLONE_NEWUSER) < 0) {
			rb_error_set(&err, errno, "unshare(CLONE_NEWUSER) for the owner user namespace");
			spawner_fail(sp, &err);
		}
		json_t *m = json_pack("{s:s}", "ev", "userns");
		if (rb_chan_send(sp, m, NULL, 0, &err) < 0)
			_exit(1);
		json_decref(m);
		json_t *reply = NULL;
		if (rb_chan_recv(sp, &reply, NULL, NULL, &err) <= 0)
			_exit(1);
		json_decref(reply);
	}
	rb_debug("spawner: netns");
	if (unshare(CLONE_NEWNET) < 0) {
		rb_error_set(&err, errno, "unshare(CLONE_NEWNET)");
		spawner_fail(sp, &err);
	}
	struct rb_net net = RB_NET_INIT;
	if (rb_net_setup_inside(spec->net_mode, &net, &err) < 0)
		spawner_fail(sp, &err);

	rb_debug("spawner: clone init");
	pid_t pid = clone_init(cg_fd);
	if (pid < 0) {
		rb_error_set(&err, errno, "clone3 of the sandbox's init");
		spawner_fail(sp, &err);
	}
	if (pid == 0) {
		close(sp);
		/* The netfilter socket and the listeners stay with the runner: a listener in the
		 * sandbox's hands would let it pose as the gateway. */
		rb_net_close(&net);
		rb_init_main(spec, ctl);
	}
	if (rb_userns_write_maps(pid, &spec->ids.uid, &spec->ids.gid, false, &err) < 0) {
		kill(pid, SIGKILL);
		spawner_fail(sp, &err);
	}
	rb_debug("spawner: maps written");
	int fds[RB_NET_NFDS + 1];
	unsigned n_fds = rb_net_fds(&net, fds, RB_NET_NFDS);
	int lower = idmapped_image(spec, pid);
	rb_debug("spawner: image idmapped");
	if (lower >= 0)
		fds[n_fds++] = lower; /* last: the runner passes it on to init */
	json_t *m = json_pack("{s:s, s:i, s:b, s:{s:i, s:i, s:i, s:i, s:i, s:b, s:i, s:i}}", "ev", "spawned", "pid",
	                      (int)pid, "idmapped", lower >= 0, "net", "netns_fd", net.netns_fd, "nft_fd", net.nft_fd,
	                      "listen_fd4", net.listen_fd4, "listen_fd6", net.listen_fd6, "mode", (int)net.mode, "ipv6",
	                      net.ipv6, "port", net.port, "port6", net.port6);
	if (rb_chan_send(sp, m, fds, n_fds, &err) < 0) {
		kill(pid, SIGKILL);
		_exit(1);
	}
	json_decref(m);
	_exit(0);
}

static int expect_event(int sock, const char *want, json_t **out, int *fds, unsigned *n_fds, struct rb_error *err)
{
	json_t *m = NULL;
	int r = rb_chan_recv(sock, &m, fds, n_fds, err);
	if (r < 0)
		return -1;
	if (r == 0)
		return rb_error_set(err, 0, "sandbox setup: the %s ended without a word",
		                    want[0] == 'r' ? "sandbox's init" : "spawner");
	const char *ev = json_string_value(json_object_get(m, "ev"));
	if (!ev || strcmp(ev, want) != 0) {
		const char *msg = json_string_value(json_object_get(m, "message"));
		rb_error_set(err, 0, "sandbox setup: %s", msg ? msg : "unexpected message");
		json_decref(m);
		return -1;
	}
	if (out)
		*out = m;
	else
		json_decref(m);
	return 0;
}

/* The spawner's struct rb_net, as sent: plain values copied, its fds replaced by ours. */
static void adopt_net(struct rb_net *net, json_t *j, const int *fds, unsigned n_fds)
{
#define FIELD(name) ((int)json_integer_value(json_object_get(j, name)))
	struct rb_net sent = {
	    .netns_fd = json_is_object(j) ? FIELD("netns_fd") : -1,
	    .nft_fd = json_is_object(j) ? FIELD("nft_fd") : -1,
	    .listen_fd4 = json_is_object(j) ? FIELD("listen_fd4") : -1,
	    .listen_fd6 = json_is_object(j) ? FIELD("listen_fd6") : -1,
	    .mode = (enum rb_net_mode)FIELD("mode"),
	    .ipv6 = json_is_true(json_object_get(j, "ipv6")),
	    .port = (uint16_t)FIELD("port"),
	    .port6 = (uint16_t)FIELD("port6"),
	};
#undef FIELD
	*net = sent;
	rb_net_adopt_fds(net, fds, n_fds);
}

static void reap_quietly(pid_t pid)
{
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

int rb_sandbox_create(const struct rb_sandbox_spec *spec, struct rb_cgroup *cg, struct rb_sandbox *sb,
                      struct rb_error *err)
{
	memset(sb, 0, sizeof *sb);
	sb->init_pid = -1;
	sb->pidfd = -1;
	sb->ctl = -1;
	sb->workspace_fd = -1;
	sb->net = (struct rb_net)RB_NET_INIT;
	sb->reaped = true;

	int ctl[2], sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		return rb_error_set(err, errno, "socketpair");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		close(ctl[0]);
		close(ctl[1]);
		return rb_error_set(err, errno, "socketpair");
	}
	int cg_fd = rb_cgroup_clone_fd(cg);
	pid_t spawner_pid = fork();
	if (spawner_pid < 0) {
		int e = errno;
		close(ctl[0]), close(ctl[1]), close(sp[0]), close(sp[1]);
		return rb_error_set(err, e, "fork the spawner");
	}
	if (spawner_pid == 0) {
		close(ctl[0]);
		close(sp[0]);
		spawner(spec, cg_fd, sp[1], ctl[1]);
	}
	close(ctl[1]);
	close(sp[1]);
	sb->ctl = ctl[0];
	_cleanup_close_ int sock = sp[0];

	int r = 0;
	if (spec->ids.outer) {
		r = expect_event(sock, "userns", NULL, NULL, NULL, err);
		if (r == 0)
			r = rb_userns_write_outer(spawner_pid, &spec->ids, err);
		if (r == 0) {
			json_t *m = json_pack("{s:s}", "op", "mapped");
			r = rb_chan_send(sock, m, NULL, 0, err);
			json_decref(m);
		}
	}
	json_t *spawned = NULL;
	int fds[RB_CHAN_MAX_FDS];
	unsigned n_fds = 0;
	/* Declared before the first goto: a cleanup variable whose declaration a goto skips
	 * would close whatever its stack slot held. */
	_cleanup_close_ int lower = -1;
	if (r == 0)
		r = expect_event(sock, "spawned", &spawned, fds, &n_fds, err);
	if (r < 0) {
		kill(spawner_pid, SIGKILL);
		reap_quietly(spawner_pid);
		goto fail;
	}
	/* The spawner exits on its own now; it is reaped once init is ready, so its exit does
	 * not stand in the way of the handshake. */
	sb->init_pid = (pid_t)json_integer_value(json_object_get(spawned, "pid"));
	sb->reaped = false;
	if (json_is_true(json_object_get(spawned, "idmapped")) && n_fds > 0)
		lower = fds[--n_fds];
	sb->idmapped = lower >= 0;
	adopt_net(&sb->net, json_object_get(spawned, "net"), fds, n_fds);
	json_decref(spawned);
	if (sb->init_pid <= 0) {
		rb_error_set(err, 0, "sandbox setup: no init pid");
		goto fail;
	}
	/* init is our child and not yet reaped, so its pid cannot have been reused. */
	sb->pidfd = (int)syscall(SYS_pidfd_open, sb->init_pid, 0);
	if (sb->pidfd < 0) {
		rb_error_set(err, errno, "pidfd_open");
		goto fail;
	}
	rb_debug("runner: attach cgroup");
	if (cg_fd < 0 && rb_cgroup_attach(cg, sb->init_pid, err) < 0)
		goto fail;
	rb_debug("runner: attached");
	json_t *go = json_pack("{s:s}", "op", "go");
	r = rb_chan_send(sb->ctl, go, &lower, lower >= 0 ? 1 : 0, err);
	json_decref(go);
	int ws[RB_CHAN_MAX_FDS];
	unsigned n_ws = 0;
	if (r < 0 || expect_event(sb->ctl, "ready", NULL, ws, &n_ws, err) < 0)
		goto fail;
	sb->workspace_fd = n_ws > 0 ? ws[0] : -1;
	for (unsigned i = 1; i < n_ws; i++)
		close(ws[i]);
	reap_quietly(spawner_pid);
	return 0;
fail:
	rb_sandbox_destroy(sb);
	if (spawner_pid > 0)
		waitpid(spawner_pid, NULL, WNOHANG) == 0 ? (void)reap_quietly(spawner_pid) : (void)0;
	return -1;
}

void rb_sandbox_destroy(struct rb_sandbox *sb)
{
	if (!sb->reaped && sb->init_pid > 0) {
		if (sb->pidfd >= 0)
			syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
		else
			kill(sb->init_pid, SIGKILL);
		int status = 0;
		while (waitpid(sb->init_pid, &status, 0) < 0 && errno == EINTR)
			;
		sb->init_status = status;
		sb->reaped = true;
	}
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	if (sb->ctl >= 0)
		close(sb->ctl);
	sb->pidfd = sb->ctl = -1;
	/* workspace_fd outlives init: the harvest after a kill still reads what is there. */
	rb_net_close(&sb->net);
}

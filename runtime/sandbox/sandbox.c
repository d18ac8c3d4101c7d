/* The spawner and the handshake (see sandbox.h). In the factory: a rootless sandbox first gets
 * the owner user namespace (through a holder process), mapped. The spawner, which shares the
 * factory's memory and fds while the factory waits, enters that namespace, makes the network
 * namespace and rules it, clones the sandbox's init with CLONE_PARENT (so init is the factory's
 * child) into the run's cgroup, writes init's id maps and exits. The sandbox's user namespace is a child of the
 * netns owner, so root inside has no power over the network namespace. */
#define _GNU_SOURCE
#include "runtime/sandbox/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/sandbox/channel.h"
#include "runtime/sandbox/factory.h"

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

/* As root in the initial user namespace: a detached, read-only clone of the image's mount
 * (without the mounts below it: the image is one filesystem, as its digest walk is). runbox's
 * own image is idmapped with the sandbox's user namespace, so files the image's host ids own
 * are the sandbox's own. A directory image never is: idmapped, host root's files there would
 * be the sandbox root's. -1 when no clone is made (rootless, or the filesystem cannot idmap):
 * init then mounts the image's path itself, and the image is read-only for the sandbox's
 * root, as it is when not idmapped, which the result reports. -2 when the clone is not the
 * directory image that was checked. */
static int image_lower(const struct rb_sandbox_spec *spec, int userns, bool *idmapped)
{
	*idmapped = false;
	if (spec->ids.outer || !spec->idmap_image)
		return -1;
	const struct rb_image *image = spec->rootfs.image;
	int tree = open_tree(AT_FDCWD, image->rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return -1;
	struct stat st;
	if (image->ino && (fstat(tree, &st) < 0 || st.st_dev != image->dev || st.st_ino != image->ino)) {
		close(tree);
		return -2; /* another directory than the one checked (a path component swapped) */
	}
	bool idmap = image->owned_by_runbox;
	/* A build's tree is written through this clone (rb_rootfs_spec.writable_image); nodev and
	 * nosuid all the same, as every writable mount of a sandbox. */
	struct mount_attr attr = {.attr_set = spec->rootfs.writable_image ? MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID
	                                                                  : MOUNT_ATTR_RDONLY};
	if (idmap) {
		attr.attr_set |= MOUNT_ATTR_IDMAP;
		attr.userns_fd = (uint64_t)userns;
	}
	if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) {
		close(tree);
		return -1;
	}
	*idmapped = idmap;
	return tree;
}

/* As root with a subordinate slice (as image_lower idmaps runbox's image): each cow input's
 * mount, cloned from the runner's own fd of it (the object the policy checked), read-only and
 * idmapped with the sandbox's user namespace, so the files host root owns are the sandbox
 * root's and overlayfs can copy them up into the run's tmpfs; the host's files stay read-only
 * (mounts.c mount_cow). Appended to fds, their input indices in the array returned. A
 * filesystem that cannot idmap gets none: init then finds the input as it is, and refuses a
 * cow over files whose owner it does not map, naming why. */
static json_t *cow_lowers(const struct rb_sandbox_spec *spec, int userns, int *fds, unsigned *n)
{
	json_t *idx = json_array();
	if (!idx || spec->ids.outer || !spec->idmap_image || userns < 0)
		return idx;
	unsigned made = 0;
	for (unsigned i = 0; i < spec->rootfs.n_inputs && made < RB_MAX_COW_IDMAPPED; i++) {
		const struct rb_input *in = &spec->rootfs.inputs[i];
		if (!in->cow || in->fd < 0)
			continue;
		int tree = open_tree(in->fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
		if (tree < 0)
			continue;
		struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
		                                      MOUNT_ATTR_IDMAP,
		                          .userns_fd = (uint64_t)userns};
		if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0) {
			close(tree);
			continue;
		}
		fds[(*n)++] = tree;
		json_array_append_new(idx, json_integer(i));
		made++;
	}
	return idx;
}

/* What the spawner is given, and what it leaves for the factory: it runs in the factory's
 * memory (see rb_sandbox_spawn) and writes its results here before it exits. */
struct spawn {
	const struct rb_spawn_req *req;
	int owner_userns; /* rootless: the user namespace to own the netns, or -1 */
	pid_t init_pid;   /* > 0 once cloned, even if a later step failed */
	struct rb_net net;
	int lower; /* the image's detached clone, or -1 */
	bool lower_idmapped;
	int userns_fd; /* init's user namespace */
	bool failed;
	struct rb_error err;
};

__attribute__((noreturn)) static void spawner_fail(struct spawn *sp, int errnum, const char *what)
{
	rb_error_set(&sp->err, errnum, "%s", what);
	sp->failed = true;
	_exit(1);
}

/* The spawner: cloned with CLONE_VM | CLONE_VFORK | CLONE_FILES, so it shares the factory's
 * memory and fd table while the factory waits, as posix_spawn's child does. Nothing is copied
 * to make it; the fds it opens are the factory's; it ends in _exit, never returning through
 * libc. Its own are the task's namespaces and credentials, which is what it changes: it enters
 * the owner user namespace (rootless), makes the network namespace and rules it, then clones
 * init, which gets a copy of this memory and fd table and drops what is not its own. */
static int spawner(void *arg)
{
	struct spawn *sp = arg;
	const struct rb_spawn_req *req = sp->req;
	const struct rb_sandbox_spec *spec = req->spec;
	/* The run's cgroups first, joined by this task alone (rb_cgroup_self_join_fds): init is
	 * then cloned inside them, and what the network namespace costs is charged there too. */
	for (unsigned i = 0; i < req->n_join; i++)
		if (write(req->join_fds[i], "0", 1) != 1)
			spawner_fail(sp, errno, "join the run's cgroup");
	if (sp->owner_userns >= 0 && setns(sp->owner_userns, CLONE_NEWUSER) < 0)
		spawner_fail(sp, errno, "setns into the owner user namespace");
	rb_debug("spawner: netns");
	if (unshare(CLONE_NEWNET) < 0)
		spawner_fail(sp, errno, "unshare(CLONE_NEWNET)");
	if (rb_net_prepare_inside(spec->net_mode, &sp->net, &sp->err) < 0) {
		sp->failed = true;
		_exit(1);
	}
	rb_debug("spawner: clone init");
	pid_t pid = clone_init(req->cg_fd);
	if (pid < 0)
		spawner_fail(sp, errno, "clone3 of the sandbox's init");
	if (pid == 0) {
		/* init's own copy of the fd table: the netfilter socket and the listeners stay
		 * with the runner (a listener in the sandbox's hands would let it pose as the
		 * gateway), and so do the factory's own (its socket to the runner, the pidfds of
		 * the other sandboxes it made). */
		rb_net_close(&sp->net);
		/* (userns_fd is opened after this clone: never in init's table.) */
		if (sp->owner_userns >= 0)
			close(sp->owner_userns);
		for (unsigned i = 0; i < req->n_close; i++)
			close(req->close_in_init[i]);
		prctl(PR_SET_NAME, "runbox-init", 0, 0, 0); /* not the factory's name */
		rb_init_main(spec, req->ctl_init);
	}
	sp->init_pid = pid;
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)pid);
	sp->userns_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (sp->userns_fd < 0)
		spawner_fail(sp, errno, "open the sandbox's user namespace");
	if (rb_userns_write_maps(pid, &spec->ids.uid, &spec->ids.gid, false, &sp->err) < 0) {
		sp->failed = true;
		_exit(1);
	}
	rb_debug("spawner: maps written");
	sp->lower = image_lower(spec, sp->userns_fd, &sp->lower_idmapped);
	if (sp->lower == -2)
		spawner_fail(sp, 0, "the directory image is not the directory that was checked: it changed since");
	_exit(0);
}

/* Rootless: the user namespace that will own the sandbox's netns, mapped (through newuidmap
 * when present). A holder process makes it and is killed once an fd pins it; the holder
 * shares the factory's memory (nothing to copy), runs on a stack of this call's own, and only
 * ever waits for its signal. */
static int hold(void *arg)
{
	(void)arg;
	for (;;)
		syscall(SYS_pause);
	return 0;
}

#define HOLDER_STACK 16384

static int owner_userns(const struct rb_idplan *ids, struct rb_error *err)
{
	char *stack = rb_stack_alloc(HOLDER_STACK);
	if (!stack)
		return rb_error_set(err, errno, "the holder's stack");
	pid_t h = clone(hold, stack + HOLDER_STACK, CLONE_NEWUSER | CLONE_VM | SIGCHLD, NULL);
	if (h < 0) {
		rb_error_set(err, errno, "clone(CLONE_NEWUSER) for the owner user namespace");
		munmap(stack, HOLDER_STACK);
		return -1;
	}
	int fd = -1;
	if (rb_userns_write_outer(h, ids, err) == 0) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/ns/user", (int)h);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rb_error_set(err, errno, "open `%s`", path);
	}
	kill(h, SIGKILL);
	while (waitpid(h, NULL, 0) < 0 && errno == EINTR)
		;
	munmap(stack, HOLDER_STACK);
	return fd;
}

static int expect_event(int sock, const char *want, json_t **out, int *fds, unsigned *n_fds, struct rb_error *err)
{
	json_t *m = NULL;
	int r = rb_chan_recv(sock, &m, fds, n_fds, err);
	if (r < 0)
		return -1;
	if (r == 0)
		return rb_error_set(err, 0, "sandbox setup: the sandbox's init ended without a word");
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

/* The spawner's stack, which init's copy of the memory keeps as its own: room for init's whole
 * life. Untouched pages cost nothing. */
#define SPAWNER_STACK ((size_t)4 << 20)

int rb_sandbox_spawn(const struct rb_spawn_req *req, struct rb_spawned *out, struct rb_error *err)
{
	*out = (struct rb_spawned){.init_pid = -1, .pidfd = -1, .userns_fd = -1, .lower = -1, .net = RB_NET_INIT};
	_cleanup_close_ int owner = -1;
	if (req->spec->ids.outer && (owner = owner_userns(&req->spec->ids, err)) < 0)
		return -1;
	char *stack = rb_stack_alloc(SPAWNER_STACK);
	if (!stack)
		return rb_error_set(err, errno, "the spawner's stack");
	struct spawn sp = {
	    .req = req,
	    .owner_userns = owner,
	    .init_pid = -1,
	    .net = RB_NET_INIT,
	    .lower = -1,
	    .userns_fd = -1,
	};
	rb_error_clear(&sp.err);
	/* The only handler the factory has (SIGPIPE's, inherited from main) is empty: none that
	 * runs on the spawner's stack touches anything. */
	pid_t spawner_pid = clone(spawner, stack + SPAWNER_STACK, CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, &sp);
	int clone_errno = errno;
	if (spawner_pid > 0) {
		int status = 0;
		while (waitpid(spawner_pid, &status, 0) < 0 && errno == EINTR)
			;
		if (!sp.failed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
			sp.failed = true;
			rb_error_set(&sp.err, 0, "sandbox setup: the spawner died (status %d)", status);
		}
	} else {
		sp.failed = true;
		rb_error_set(&sp.err, clone_errno, "clone the spawner");
	}
	munmap(stack, SPAWNER_STACK);
	/* init is our child (CLONE_PARENT) and not yet reaped, so its pid cannot have been
	 * reused. */
	int pidfd = sp.init_pid > 0 ? (int)syscall(SYS_pidfd_open, sp.init_pid, 0) : -1;
	if (!sp.failed && pidfd < 0) {
		sp.failed = true;
		rb_error_set(&sp.err, errno, "pidfd_open of the sandbox's init");
	}
	if (sp.failed) {
		*err = sp.err;
		if (sp.init_pid > 0) {
			kill(sp.init_pid, SIGKILL);
			while (waitpid(sp.init_pid, NULL, 0) < 0 && errno == EINTR)
				;
		}
		if (pidfd >= 0)
			close(pidfd);
		rb_net_close(&sp.net);
		if (sp.userns_fd >= 0)
			close(sp.userns_fd);
		if (sp.lower >= 0)
			close(sp.lower);
		return -1;
	}
	rb_debug("spawner: done");
	*out = (struct rb_spawned){
	    .init_pid = sp.init_pid,
	    .pidfd = pidfd,
	    .userns_fd = sp.userns_fd,
	    .lower = sp.lower,
	    .lower_idmapped = sp.lower >= 0 && sp.lower_idmapped,
	    .net = sp.net,
	};
	return 0;
}

int rb_sandbox_create(const struct rb_factory *factory, const struct rb_sandbox_spec *spec, struct rb_cgroup *cg,
                      struct rb_sandbox *sb, struct rb_error *err)
{
	memset(sb, 0, sizeof *sb);
	sb->init_pid = -1;
	sb->pidfd = -1;
	sb->ctl = -1;
	sb->workspace_fd = -1;
	sb->root_fd = -1;
	sb->userns_fd = -1;
	sb->net = (struct rb_net)RB_NET_INIT;
	sb->reaped = true;

	int ctl[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) < 0)
		return rb_error_set(err, errno, "socketpair");
	sb->ctl = ctl[0];
	_cleanup_close_ int ctl_init = ctl[1];
	/* Declared before the first goto: a cleanup variable whose declaration a goto skips
	 * would close whatever its stack slot held. */
	_cleanup_close_ int lower = -1;
	int join[RB_CGROUP_MAX_JOIN_FDS];
	int n_join = rb_cgroup_self_join_fds(cg, join, RB_CGROUP_MAX_JOIN_FDS, err);
	if (n_join < 0)
		goto fail;
	struct rb_spawn_req req = {
	    .spec = spec,
	    .ctl_init = ctl_init,
	    .cg_fd = rb_cgroup_clone_fd(cg),
	    .join_fds = join,
	    .n_join = (unsigned)n_join,
	};
	struct rb_spawned made;
	int r = rb_factory_make(factory, &req, &made, err);
	for (int i = 0; i < n_join; i++)
		close(join[i]);
	if (r < 0)
		goto fail;
	lower = made.lower;
	sb->init_pid = made.init_pid;
	sb->pidfd = made.pidfd;
	sb->reaped = false;
	sb->userns_fd = made.userns_fd;
	sb->net = made.net;
	sb->idmapped = made.lower_idmapped;
	int go_fds[1 + RB_MAX_COW_IDMAPPED];
	unsigned n_go = 0;
	if (lower >= 0)
		go_fds[n_go++] = lower;
	json_t *cow = cow_lowers(spec, sb->userns_fd, go_fds, &n_go);
	json_t *go = json_pack("{s:s, s:b, s:o}", "op", "go", "lower", lower >= 0, "cow", cow ? cow : json_array());
	r = rb_chan_send(sb->ctl, go, go_fds, n_go, err);
	json_decref(go);
	for (unsigned i = lower >= 0 ? 1 : 0; i < n_go; i++)
		close(go_fds[i]);
	if (r < 0)
		goto fail;
	/* The table and the routes (and the cgroup, where init could be neither cloned into it
	 * nor started inside it), while init builds the root: no step runs before this
	 * returned, and init itself has nothing to send. Writing init's pid waits for an RCU
	 * grace period (the cgroup_threadgroup_rwsem); what init writes to its tmpfs before it
	 * is attached is charged to the runner's cgroup. */
	if (req.cg_fd < 0 && n_join == 0 && rb_cgroup_attach(cg, sb->init_pid, err) < 0)
		goto fail;
	if (rb_net_finish(&sb->net, err) < 0)
		goto fail;
	rb_debug("runner: network ruled");
	return 0;
fail:
	rb_sandbox_destroy(sb);
	return -1;
}

/* Waits up to timeout_ms for sock to be readable (a message, or init's end). */
static int wait_readable(int sock, unsigned timeout_ms, struct rb_error *err)
{
	uint64_t deadline = rb_now_us() + (uint64_t)timeout_ms * 1000;
	for (;;) {
		uint64_t now = rb_now_us();
		if (now >= deadline)
			return rb_error_set(err, ETIMEDOUT,
			                    "sandbox setup: init did not report its root ready within %u ms",
			                    timeout_ms);
		struct pollfd p = {.fd = sock, .events = POLLIN};
		int n = poll(&p, 1, (int)((deadline - now + 999) / 1000));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return rb_error_set(err, errno, "sandbox setup: poll the control socket");
	}
}

int rb_sandbox_wait_ready(struct rb_sandbox *sb, unsigned timeout_ms, struct rb_error *err)
{
	int ws[RB_CHAN_MAX_FDS];
	unsigned n_ws = 0;
	if (wait_readable(sb->ctl, timeout_ms, err) < 0 || expect_event(sb->ctl, "ready", NULL, ws, &n_ws, err) < 0) {
		rb_sandbox_destroy(sb);
		return -1;
	}
	sb->workspace_fd = n_ws > 0 ? ws[0] : -1;
	sb->root_fd = n_ws > 1 ? ws[1] : -1;
	for (unsigned i = 2; i < n_ws; i++)
		close(ws[i]);
	return 0;
}

void rb_sandbox_kill(struct rb_sandbox *sb)
{
	if (!sb->reaped && sb->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
}

/* Waits for init to be gone: its pidfd turns readable once it has exited, and by then the
 * kernel has killed and reaped every process of its pid namespace. The factory, its parent,
 * reaps init itself. */
static void await_gone(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
}

void rb_sandbox_destroy(struct rb_sandbox *sb)
{
	if (!sb->reaped && sb->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
		await_gone(sb->pidfd);
	}
	sb->reaped = true;
	if (sb->pidfd >= 0)
		close(sb->pidfd);
	if (sb->ctl >= 0)
		close(sb->ctl);
	if (sb->userns_fd >= 0)
		close(sb->userns_fd);
	sb->pidfd = sb->ctl = sb->userns_fd = -1;
	/* workspace_fd outlives init: the harvest after a kill still reads what is there. */
	rb_net_close(&sb->net);
}

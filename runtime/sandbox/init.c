/* The sandbox's PID 1: runbox's own small init. It builds the root, then starts processes on
 * request (several may run at once, each named by the runner's id), reaps every process,
 * forwards SIGINT/SIGTERM/SIGHUP/SIGQUIT to the running ones, reports each one's status on the
 * control channel, and dies with the runner (its exit takes the whole pid namespace with it).
 * It is a copy of runbox in memory, never re-exec'd. On request it forks a writer (writer.h), whose
 * writes into the sandbox's files are charged to the sandbox's memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>

#include "common/cleanup.h"
extern char **environ;
#include "common/log.h"
#include "common/util.h"
#include "runtime/sandbox/caps.h"
#include "runtime/sandbox/channel.h"
#include "runtime/sandbox/sandbox.h"
#include "runtime/sandbox/step.h"
#include "runtime/sandbox/writer.h"

/* More than a command line can hold: Linux's ARG_MAX (2 MiB of strings and their pointers)
 * allows ~230,000 empty arguments. */
#define MAX_ARGS (1 << 18)

/* Processes the runner started and init has not yet reported ended: at most this many at once
 * (a request beyond it is refused, naming the limit). */
#define MAX_PROCS 64

static void send_event(int ctl, json_t *ev);

struct init_proc {
	pid_t pid; /* 0: a free slot */
	json_int_t id;
};

struct init_state {
	const struct rb_sandbox_spec *spec;
	int ctl;
	int pts; /* the sandbox's own devpts (/dev/pts, O_PATH), or -1 */
	struct rb_writer_oom oom;
	struct init_proc procs[MAX_PROCS];
};

static struct init_proc *proc_by_id(struct init_state *st, json_int_t id)
{
	for (unsigned i = 0; i < MAX_PROCS; i++)
		if (st->procs[i].pid > 0 && st->procs[i].id == id)
			return &st->procs[i];
	return NULL;
}

static struct init_proc *proc_by_pid(struct init_state *st, pid_t pid)
{
	for (unsigned i = 0; i < MAX_PROCS; i++)
		if (st->procs[i].pid == pid)
			return &st->procs[i];
	return NULL;
}

/* A signal to one process's group (id given) or to every running process's (none). */
static void signal_procs(struct init_state *st, json_t *id, int sig)
{
	for (unsigned i = 0; i < MAX_PROCS; i++)
		if (st->procs[i].pid > 0 && (!json_is_integer(id) || st->procs[i].id == json_integer_value(id)))
			kill(-st->procs[i].pid, sig);
}

static void exec_failed(struct init_state *st, json_int_t id, const char *why, int errnum, int is_exec)
{
	send_event(st->ctl, json_pack("{s:s, s:I, s:s, s:i, s:b}", "ev", "exec_failed", "id", id, "message", why,
	                              "errno", errnum, "is_exec", is_exec));
}

static void send_event(int ctl, json_t *ev)
{
	struct rb_error err;
	rb_chan_send(ctl, ev, NULL, 0, &err);
	json_decref(ev);
}

__attribute__((noreturn)) static void die_setup(int ctl, const struct rb_error *err)
{
	send_event(ctl, json_pack("{s:s, s:s, s:i}", "ev", "error", "message", err->msg, "errno", err->errnum));
	_exit(125);
}

/* Becomes the sandbox's mapped root (or its single id) while keeping the capabilities of the
 * namespace's creator, so files made during setup belong to an id that exists inside. */
static int become_mapped(const struct rb_sandbox_spec *spec, struct rb_error *err)
{
	uid_t u = spec->ids.single ? spec->ids.uid.lines[0].inside : 0;
	gid_t g = spec->ids.single ? spec->ids.gid.lines[0].inside : 0;
	if (!spec->exec.setgroups_denied && setgroups(0, NULL) < 0)
		return rb_error_set(err, errno, "setgroups");
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return rb_error_set(err, errno, "PR_SET_KEEPCAPS");
	if (setresgid(g, g, g) < 0)
		return rb_error_set(err, errno, "setresgid %u", (unsigned)g);
	if (setresuid(u, u, u) < 0)
		return rb_error_set(err, errno, "setresuid %u", (unsigned)u);
	cap_t caps = cap_get_proc();
	if (!caps)
		return rb_error_set(err, errno, "cap_get_proc");
	cap_value_t last = cap_max_bits();
	for (cap_value_t c = 0; c < last; c++) {
		cap_flag_value_t v;
		if (cap_get_flag(caps, c, CAP_PERMITTED, &v) == 0 && v == CAP_SET)
			cap_set_flag(caps, CAP_EFFECTIVE, 1, &c, CAP_SET);
	}
	int r = cap_set_proc(caps);
	cap_free(caps);
	if (r < 0)
		return rb_error_set(err, errno, "restore capabilities after setresuid");
	prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	return 0;
}

/* Closes everything but the control socket (and init's oom_score_adj, or -1) and points 0..2
 * at the sandbox's /dev/null. */
static int isolate_fds(int ctl, int oom_adj, struct rb_error *err)
{
	/* The sandbox's own /dev/null: its /dev is read-only, but it is checked to be the device
	 * it claims to be, as everything init opens in the sandbox's tree. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (null < 0)
		return rb_error_set(err, errno, "open /dev/null");
	struct stat nst;
	if (fstat(null, &nst) < 0 || !S_ISCHR(nst.st_mode) || nst.st_rdev != makedev(1, 3)) {
		close(null);
		return rb_error_set(err, ENODEV, "/dev/null is not the null device");
	}
	for (int i = 0; i < 3; i++)
		if (null != i && dup2(null, i) < 0)
			return rb_error_set(err, errno, "dup2 /dev/null");
	if (null > 2)
		close(null);
	rb_close_except(3, (int[]){ctl, oom_adj}, 2);
	return 0;
}

static char **string_array(json_t *arr, size_t max)
{
	if (!json_is_array(arr) || json_array_size(arr) > max)
		return NULL;
	size_t n = json_array_size(arr);
	char **v = calloc(n + 1, sizeof *v);
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		const char *s = json_string_value(json_array_get(arr, i));
		if (!s) {
			free(v);
			return NULL;
		}
		v[i] = (char *)s; /* borrowed from the message, which outlives the spawn */
	}
	return v;
}

/* The step's files (script, inputs) are the runner's memfds, passed to the step's process as
 * declared fds. Each must be sealed against every change, so the step runs exactly the bytes
 * the ledger recorded: nothing is written into the sandbox's tree, where a step could swap or
 * replace it, and nothing there is read back. */
static int check_files(json_t *files, const int *fds, unsigned n_fds, struct rb_error *err)
{
	if (!json_is_array(files) || json_array_size(files) != n_fds)
		return rb_error_set(err, EINVAL, "exec request: files and descriptors disagree");
	if (n_fds > RB_STEP_MAX_FILES)
		return rb_error_set(err, E2BIG, "exec request: at most %d files per step", RB_STEP_MAX_FILES);
	const int want = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL;
	for (unsigned i = 0; i < n_fds; i++) {
		int seals = fcntl(fds[i], F_GET_SEALS);
		if (seals < 0 || (seals & want) != want)
			return rb_error_set(err, seals < 0 ? errno : EPERM, "exec request: step file %u is not sealed",
			                    i);
	}
	return 0;
}

/* The sandbox's own devpts, opened once after the root is built: a terminal is made from it
 * alone (never from a path a step could change, never from a host devpts). */
static int open_pts(struct rb_error *err)
{
	int fd = open("/dev/pts", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct statfs sf;
	if (fd < 0)
		return rb_error_set(err, errno, "open /dev/pts");
	if (fstatfs(fd, &sf) < 0 || sf.f_type != DEVPTS_SUPER_MAGIC) {
		close(fd);
		return rb_error_set(err, ENODEV, "/dev/pts is not a devpts instance");
	}
	return fd;
}

/* A pty pair of the sandbox's devpts (mounted newinstance, mounts.c): the master from its own
 * ptmx, the slave through the master (TIOCGPTPEER: no path is looked up), the slave given to
 * the step's ids (as grantpt would), its size set. Neither becomes init's terminal. */
static int make_pty(const struct init_state *st, json_t *jtty, int *master, int *slave, struct rb_error *err)
{
	*master = *slave = -1;
	json_int_t rows = json_integer_value(json_object_get(jtty, "rows"));
	json_int_t cols = json_integer_value(json_object_get(jtty, "cols"));
	if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535)
		return rb_error_set(err, EINVAL, "exec request: a terminal of %lld rows and %lld columns",
		                    (long long)rows, (long long)cols);
	if (st->pts < 0)
		return rb_error_set(err, ENODEV, "no terminal: the sandbox has no devpts of its own");
	_cleanup_close_ int m = openat(st->pts, "ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW);
	if (m < 0)
		return rb_error_set(err, errno, "open /dev/pts/ptmx");
	int unlock = 0;
	if (ioctl(m, TIOCSPTLCK, &unlock) < 0)
		return rb_error_set(err, errno, "unlock the pty");
	_cleanup_close_ int sl = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (sl < 0)
		return rb_error_set(err, errno, "open the pty's slave (TIOCGPTPEER)");
	const struct rb_exec_spec *ex = &st->spec->exec;
	struct stat sst;
	if (fstat(sl, &sst) < 0)
		return rb_error_set(err, errno, "stat the pty's slave");
	if ((sst.st_uid != ex->uid || sst.st_gid != ex->gid) && fchown(sl, ex->uid, ex->gid) < 0)
		return rb_error_set(err, errno, "chown the pty's slave to %u:%u", (unsigned)ex->uid, (unsigned)ex->gid);
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	if (ioctl(m, TIOCSWINSZ, &ws) < 0)
		return rb_error_set(err, errno, "set the terminal's size");
	*master = rb_steal_fd(&m);
	*slave = rb_steal_fd(&sl);
	return 0;
}

/* An exec request: {"op": "exec", "id": N, "argv", "env", "cwd", "files", "cgroup", "stdin"},
 * with descriptors stdin (when "stdin" is true: a pipe from the runner; else the sandbox's own
 * /dev/null, init's fd 0), stdout, stderr, the step's files, then its cgroup.procs (when
 * "cgroup"). With "tty": {"rows", "cols"} no stdio comes: init makes a pty (make_pty) whose
 * slave is the process's fds 0-2 and controlling terminal, and its master goes back with
 * `started`; init keeps neither end, so the master reads EIO once the last holder of the slave
 * is gone. Answered with {"ev": "started", "id", "pid"} or {"ev": "exec_failed", "id", ...};
 * the other processes run on meanwhile. */
static void handle_exec(struct init_state *st, json_t *msg, int *fds, unsigned n_fds)
{
	json_t *jid = json_object_get(msg, "id");
	json_int_t id = json_integer_value(jid);
	bool has_stdin = json_is_true(json_object_get(msg, "stdin"));
	json_t *jtty = json_object_get(msg, "tty");
	bool tty = json_is_object(jtty);
	unsigned n_stdio = tty ? 0 : has_stdin ? 3 : 2;
	if (!json_is_integer(jid) || n_fds < n_stdio) {
		exec_failed(st, id, "bad exec request", EINVAL, 0);
		return;
	}
	if (proc_by_id(st, id)) {
		exec_failed(st, id, "exec request: a process with this id is running", EEXIST, 0);
		return;
	}
	struct init_proc *slot = proc_by_pid(st, 0);
	if (!slot) {
		exec_failed(st, id, "exec request: too many processes at once (at most 64)", EAGAIN, 0);
		return;
	}
	_cleanup_free_ char **argv = string_array(json_object_get(msg, "argv"), MAX_ARGS);
	_cleanup_free_ char **envp = string_array(json_object_get(msg, "env"), MAX_ARGS);
	const char *cwd = json_string_value(json_object_get(msg, "cwd"));
	if (!argv || !argv[0] || !envp || !cwd) {
		exec_failed(st, id, "malformed exec request", EINVAL, 0);
		return;
	}
	struct rb_error ferr;
	/* The step's cgroup.procs, when there is one, comes last (the loop closes it with the
	 * rest). */
	int cgroup_procs = -1;
	if (json_is_true(json_object_get(msg, "cgroup")) && n_fds > n_stdio)
		cgroup_procs = fds[--n_fds];
	json_t *files = json_object_get(msg, "files");
	unsigned n_files = n_fds - n_stdio;
	if ((files || n_files) && check_files(files, fds + n_stdio, n_files, &ferr) < 0) {
		exec_failed(st, id, ferr.msg, ferr.errnum, 0);
		return;
	}
	_cleanup_close_ int master = -1, slave = -1;
	if (tty && make_pty(st, jtty, &master, &slave, &ferr) < 0) {
		exec_failed(st, id, ferr.msg, ferr.errnum, 0);
		return;
	}
	int stdio[3] = {slave, slave, slave};
	if (!tty) {
		stdio[0] = has_stdin ? fds[0] : 0;
		stdio[1] = fds[n_stdio - 2];
		stdio[2] = fds[n_stdio - 1];
	}
	struct rb_step_failure f;
	pid_t pid =
	    rb_step_spawn(&st->spec->exec, argv, envp, cwd, stdio, fds + n_stdio, n_files, cgroup_procs, tty, &f);
	/* The step's process shared this memory until its execve, and its change of ids set the
	 * dumpable flag to fs.suid_dumpable; it reset the flag at once (see step.c), unless it
	 * failed in between. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (pid < 0) {
		exec_failed(st, id, f.msg, f.errnum, f.is_exec);
		return;
	}
	*slot = (struct init_proc){.pid = pid, .id = id};
	json_t *ev = json_pack("{s:s, s:I, s:i}", "ev", "started", "id", id, "pid", (int)pid);
	if (tty)
		json_object_set_new(ev, "tty", json_true());
	struct rb_error serr;
	rb_chan_send(st->ctl, ev, &master, tty ? 1 : 0, &serr);
	json_decref(ev);
}

static void reap(struct init_state *st)
{
	for (;;) {
		int status;
		struct rusage ru;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);
		if (pid <= 0)
			return;
		struct init_proc *p = proc_by_pid(st, pid);
		if (!p)
			continue; /* an orphan or a failed spawn: reaped, nothing to say */
		json_int_t id = p->id;
		*p = (struct init_proc){0};
		send_event(st->ctl,
		           json_pack("{s:s, s:I, s:i, s:I, s:I, s:I}", "ev", "exited", "id", id, "status", status,
		                     "utime_us", (json_int_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec,
		                     "stime_us", (json_int_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec,
		                     "maxrss_kb", (json_int_t)ru.ru_maxrss));
	}
}

__attribute__((noreturn)) static void loop(struct init_state *st, int sfd)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = st->ctl, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			_exit(125);
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
				if (si.ssi_signo == SIGCHLD)
					reap(st);
				else
					signal_procs(st, NULL, (int)si.ssi_signo);
			}
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			json_t *msg = NULL;
			int fds[RB_CHAN_MAX_FDS];
			unsigned n_fds = 0;
			struct rb_error err;
			int r = rb_chan_recv_body(st->ctl, &msg, fds, &n_fds, &err);
			if (r <= 0)
				_exit(0); /* the runner is gone: the pid namespace goes with us */
			const char *op = json_string_value(json_object_get(msg, "op"));
			if (op && !strcmp(op, "exec"))
				handle_exec(st, msg, fds, n_fds);
			else if (op && !strcmp(op, "writer") && n_fds == 1) /* the writer's socket end */
				rb_writer_start(fds[0], &st->oom);
			else if (op && !strcmp(op, "signal")) /* {"sig", "id"}: without an id, to all */
				signal_procs(st, json_object_get(msg, "id"),
				             (int)json_integer_value(json_object_get(msg, "sig")));
			for (unsigned i = 0; i < n_fds; i++)
				close(fds[i]);
			json_decref(msg);
		}
	}
}

/* init is a copy of the runner: its environment (the host's) and the runner's command line are
 * wiped from memory, so neither /proc/1/environ nor /proc/1/cmdline (which anyone in the
 * sandbox may read) holds them. Steps get their environment from the exec request. */
static void wipe_host_strings(void)
{
	for (char **e = environ; e && *e; e++)
		explicit_bzero(*e, strlen(*e));
	clearenv();
	/* The argument area's bounds: fields 48 and 49 of /proc/self/stat. */
	char *stat = NULL;
	if (rb_read_file("/proc/self/stat", 4096, &stat, NULL, NULL) < 0)
		return;
	const char *f48 = rb_proc_stat_field(stat, 48), *f49 = rb_proc_stat_field(stat, 49);
	unsigned long start = f48 ? strtoul(f48, NULL, 10) : 0, end = f49 ? strtoul(f49, NULL, 10) : 0;
	free(stat);
	if (start && end > start && end - start < (1UL << 24)) {
		explicit_bzero((void *)start, end - start);
		/* What `ps` in the sandbox shows for PID 1. */
		snprintf((char *)start, end - start, "runbox-init");
	}
}

void rb_init_main(const struct rb_sandbox_spec *spec, int ctl)
{
	struct rb_error err;
	rb_error_clear(&err);
	struct init_state st = {.spec = spec, .ctl = ctl, .pts = -1};
	wipe_host_strings();
	/* Opened while init still owns its /proc files (the change of ids below makes it
	 * undumpable, and them root's): a writer's fork raises it for the child (writer.h). */
	rb_writer_oom_open(&st.oom);

	/* Wait for the runner: id maps written, cgroup joined; it may send the idmapped image. */
	json_t *go = NULL;
	int go_fds[RB_CHAN_MAX_FDS];
	unsigned n_go_fds = 0;
	if (rb_chan_recv(ctl, &go, go_fds, &n_go_fds, &err) <= 0)
		_exit(125);
	struct rb_rootfs_spec rootfs = spec->rootfs;
	rootfs.resolv_stub = spec->net_mode == RB_NET_GATEWAY;
	/* The image's clone first (when "lower"), then the idmapped cow inputs "cow" names. */
	unsigned k = 0;
	rootfs.lower_fd = json_is_true(json_object_get(go, "lower")) && k < n_go_fds ? go_fds[k++] : -1;
	for (unsigned i = 0; i < RB_MAX_INPUTS; i++)
		rootfs.cow_lower[i] = -1;
	size_t ci;
	json_t *cv;
	json_array_foreach(json_object_get(go, "cow"), ci, cv)
	{
		json_int_t i = json_integer_value(cv);
		if (i >= 0 && i < RB_MAX_INPUTS && k < n_go_fds)
			rootfs.cow_lower[i] = go_fds[k++];
	}
	json_decref(go);

	/* Out of the runner's session: its controlling terminal (a host tty, when runbox runs on
	 * one) would otherwise be init's too, a host terminal held inside the sandbox, and its ^C
	 * and hangup would reach init beside the runner, which passes them on as the cancel. */
	if (setsid() < 0) {
		rb_error_set(&err, errno, "setsid");
		die_setup(ctl, &err);
	}
	if (become_mapped(spec, &err) < 0)
		die_setup(ctl, &err);
	/* Credentials changed above, which clears these two: set them now. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	rb_debug("init: build root");
	if (rb_rootfs_build(&rootfs, &err) < 0)
		die_setup(ctl, &err);
	rb_debug("init: root built");
	if (sethostname(spec->hostname, strlen(spec->hostname)) < 0) {
		rb_error_set(&err, errno, "sethostname `%s`", spec->hostname);
		die_setup(ctl, &err);
	}
	if (setdomainname("", 0) < 0)
		rb_error_set(&err, errno, "setdomainname"); /* cosmetic: not fatal */
	if (isolate_fds(ctl, st.oom.fd, &err) < 0)
		die_setup(ctl, &err);
	/* Nothing in the sandbox may ptrace or read init's memory. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* Done once here for every step: init never execs, so it needs no capability in its
	 * bounding set, and each step's process inherits the reduced set. The same for signal
	 * dispositions: an ignored signal the runner inherited (nohup, a shell's background
	 * job) would otherwise survive into the step's execve. */
	if (rb_caps_drop_bounding(spec->exec.caps, &err) < 0)
		die_setup(ctl, &err);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);

	sigset_t mask;
	sigemptyset(&mask);
	int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT};
	for (size_t i = 0; i < RB_ARRAY_SIZE(sigs); i++)
		sigaddset(&mask, sigs[i]);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		rb_error_set(&err, errno, "signalfd");
		die_setup(ctl, &err);
	}
	/* The runner gets /workspace itself, a mount root nothing inside can swap. */
	int ws = open("/workspace", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat wst;
	if (ws < 0 || fstat(ws, &wst) < 0 || !S_ISDIR(wst.st_mode)) {
		rb_error_set(&err, errno, "open /workspace");
		die_setup(ctl, &err);
	}
	/* A sandbox whose /dev/pts is not a devpts (mounts.c mounts a new instance there) makes no
	 * terminals; every other process still runs. */
	st.pts = open_pts(&err);
	if (st.pts < 0)
		rb_debug("init: %s: no terminals", err.msg);
	/* And its root: runbox serve's file calls resolve any sandbox path from it (in root). */
	int root = open("/", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (root < 0) {
		rb_error_set(&err, errno, "open /");
		die_setup(ctl, &err);
	}
	int fds[2] = {ws, root};
	json_t *ready = json_pack("{s:s}", "ev", "ready");
	rb_chan_send(ctl, ready, fds, 2, &err);
	json_decref(ready);
	loop(&st, sfd);
}

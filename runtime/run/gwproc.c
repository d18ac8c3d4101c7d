/* Starting, watching and stopping runbox-gateway for one run (see gwproc.h). */
#define _GNU_SOURCE
#include "runtime/run/gwproc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/paths.h"
#include "common/gwsock.h"
#include "common/log.h"
#include "common/util.h"
#include "runtime/run/gwreg.h"

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

/* The kernel's struct clone_args, as of 5.7 (the cgroup field). */
struct clone_args_v2 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size,
	    cgroup;
};

/* What the child sends back over the CLOEXEC pipe when it cannot exec. */
struct child_failure {
	int stage; /* STAGE_JOIN or STAGE_EXEC */
	int errnum;
};
enum { STAGE_JOIN = 1, STAGE_EXEC = 2 };

/* The gateway's fds: 0 /dev/null, 1 its counts, 3 the config, then the listeners, then the
 * readiness pipe (named in the config as ready_fd), then the DNS socket (dns_fd) if any. */
#define CONFIG_FD       3
#define FIRST_LISTEN_FD 4
#define MAX_LISTEN_FDS  8

/* "exited with status 3", "was killed by signal 9" */
static void describe(int status, char *buf, size_t n)
{
	if (WIFSIGNALED(status))
		snprintf(buf, n, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(buf, n, "exited with status %d", WEXITSTATUS(status));
}

/* ru (may be NULL) gets the gateway's own CPU time, part of the run's host cost. */
static int reap(pid_t pid, struct rusage *ru)
{
	int status = 0;
	while (wait4(pid, &status, 0, ru) < 0 && errno == EINTR)
		;
	return status;
}

static _Noreturn void child_fail(int efd, int stage)
{
	struct child_failure f = {.stage = stage, .errnum = errno ? errno : EBADF};
	if (efd >= 0) {
		ssize_t w = write(efd, &f, sizeof f);
		(void)w;
	}
	_exit(127);
}

/* In the child between fork and exec: only async-signal-safe calls. The errno of a failure
 * goes to efd (CLOEXEC: an exec that works closes it, which the parent reads as EOF). */
static _Noreturn void child(const char *bin, const struct rb_cgroup_join *join, bool cloned_in, int cfg_fd, int out_fd,
                            int ready_fd, int dns_fd, int efd, const int *fds, unsigned n_fds)
{
	/* First into the run's cgroup, unless clone3 started it there: the gateway execs only
	 * once it is in, so it serves no request outside the run's limits. */
	for (unsigned i = 0; !cloned_in && i < join->n; i++)
		if (write(join->fds[i], "0", 1) != 1)
			child_fail(efd, STAGE_JOIN);
	/* Every source fd first moves above the targets, so no dup2 clobbers another. */
	int moved[MAX_LISTEN_FDS];
	cfg_fd = fcntl(cfg_fd, F_DUPFD, 64);
	out_fd = fcntl(out_fd, F_DUPFD, 64);
	ready_fd = fcntl(ready_fd, F_DUPFD, 64);
	int dns = dns_fd >= 0 ? fcntl(dns_fd, F_DUPFD, 64) : -1;
	efd = fcntl(efd, F_DUPFD_CLOEXEC, 64);
	for (unsigned i = 0; i < n_fds; i++)
		moved[i] = fcntl(fds[i], F_DUPFD, 64);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int target_ready = FIRST_LISTEN_FD + (int)n_fds;
	bool ok = cfg_fd >= 0 && out_fd >= 0 && ready_fd >= 0 && efd >= 0 && null >= 0 && dup2(null, 0) == 0 &&
	          dup2(out_fd, 1) == 1 && dup2(cfg_fd, CONFIG_FD) == CONFIG_FD;
	for (unsigned i = 0; ok && i < n_fds; i++)
		ok = moved[i] >= 0 && dup2(moved[i], FIRST_LISTEN_FD + (int)i) >= 0;
	ok = ok && dup2(ready_fd, target_ready) == target_ready;
	int target_dns = target_ready + 1, next = dns_fd >= 0 ? target_dns + 1 : target_dns;
	ok = ok && (dns_fd < 0 || (dns >= 0 && dup2(dns, target_dns) == target_dns));
	if (ok)
		ok = (efd = dup3(efd, next, O_CLOEXEC)) >= 0;
	if (ok) {
		closefrom(next + 1);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execl(bin, "runbox-gateway", (char *)NULL);
	}
	child_fail(efd, STAGE_EXEC);
}

/* fork(), or with a cgroup directory clone3 straight into it (*cloned_in then, in parent and
 * child). Kernels before 5.7 refuse CLONE_INTO_CGROUP (E2BIG, EINVAL; ENOSYS before clone3):
 * a plain fork then, and the child joins before it execs. */
static pid_t spawn(int cgroup_fd, bool *cloned_in)
{
	*cloned_in = false;
	if (cgroup_fd >= 0) {
		struct clone_args_v2 a;
		memset(&a, 0, sizeof a);
		a.flags = CLONE_INTO_CGROUP;
		a.exit_signal = SIGCHLD;
		a.cgroup = (uint64_t)cgroup_fd;
		*cloned_in = true;
		pid_t pid = (pid_t)syscall(SYS_clone3, &a, sizeof a);
		if (pid >= 0)
			return pid;
		*cloned_in = false;
		if (errno != ENOSYS && errno != E2BIG && errno != EINVAL)
			return -1;
	}
	return fork();
}

/* Where the gateway is to run: the run's gateway leaf (gw->confined), or, with no cgroup for
 * the run, the runner's own, and why (gw->cgroup). */
static int place(struct rb_gwproc *gw, struct rb_cgroup *cg, struct rb_cgroup_join *j, struct rb_error *err)
{
	j->clone_fd = -1;
	j->n = 0;
	int r = cg ? rb_cgroup_gateway_join(cg, j, err) : 0;
	if (r < 0)
		return -1;
	gw->confined = r > 0;
	const char *none = cg ? rb_cgroup_none_reason(cg) : "";
	if (gw->confined)
		snprintf(gw->cgroup, sizeof gw->cgroup, "%s", rb_cgroup_gateway_mechanism(cg));
	else
		snprintf(gw->cgroup, sizeof gw->cgroup, "the run has no cgroup%s%s", none[0] ? ": " : "", none);
	return 0;
}

/* Waits for the readiness byte; the gateway's exit (pidfd) or the deadline ends the wait. */
static int await_ready(int ready_fd, int pidfd, pid_t pid, const char *bin, struct rb_error *err)
{
	uint64_t deadline = rb_now_us() + (uint64_t)RB_GWPROC_READY_MS * 1000;
	for (;;) {
		uint64_t now = rb_now_us();
		if (now >= deadline)
			break;
		struct pollfd p[2] = {{.fd = ready_fd, .events = POLLIN}, {.fd = pidfd, .events = POLLIN}};
		int r = poll(p, 2, (int)((deadline - now + 999) / 1000));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return rb_error_set(err, errno, "gateway `%s`: poll for readiness", bin);
		if (r == 0)
			break;
		if (p[0].revents) {
			char c;
			ssize_t n = read(ready_fd, &c, 1);
			if (n == 1)
				return 0;
			if (n < 0 && errno == EINTR)
				continue;
		}
		/* EOF on the readiness pipe, or the process is gone: it ended before serving. */
		char how[64];
		kill(pid, SIGKILL); /* not reaped yet, so pid is still ours */
		describe(reap(pid, NULL), how, sizeof how);
		return rb_error_set(err, 0, "gateway `%s` %s before it was ready", bin, how);
	}
	kill(pid, SIGKILL);
	reap(pid, NULL);
	return rb_error_set(err, 0, "gateway `%s` did not say it was ready within %d ms; killed", bin,
	                    RB_GWPROC_READY_MS);
}

/* The run's grant, as the gateway's config JSON (gateway/serve_main.c): fds listen_fd0.. and dns_fd (-1: none) name
 * the descriptors as the gateway will have them. */
static json_t *grant_json(const struct rb_gwproc *gw, const char *run_id, const uint8_t *key, size_t keylen,
                          int listen_fd0, unsigned n_fds, int dns_fd)
{
	char hex[2 * 64 + 1] = "";
	for (size_t i = 0; i < keylen && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	json_t *listen = json_array();
	for (unsigned i = 0; i < n_fds; i++)
		json_array_append_new(listen, json_integer(listen_fd0 + (int)i));
	json_t *grants = json_array();
	for (unsigned i = 0; i < gw->n_grants; i++)
		json_array_append_new(grants, json_string(gw->grants[i]));
	json_t *proxy = json_array();
	for (unsigned i = 0; i < gw->n_proxy; i++)
		json_array_append_new(proxy, json_string(gw->proxy[i]));
	json_t *cfg = json_pack("{s:s, s:s, s:o, s:s?, s:o, s:o}", "run_id", run_id, "key", hex, "listen_fds", listen,
	                        "gateway_config", gw->conf_path, "connectors", grants, "proxy", proxy);
	memset(hex, 0, sizeof hex);
	if (!cfg)
		return NULL;
	if (dns_fd >= 0)
		json_object_set_new(cfg, "dns_fd", json_integer(dns_fd));
	json_t *approval = json_array();
	for (unsigned i = 0; i < gw->n_approvals; i++) {
		const struct rb_policy_approval *a = &gw->approvals[i];
		json_t *m = json_array();
		for (unsigned k = 0; k < a->n_methods; k++)
			json_array_append_new(m, json_string(a->methods[k]));
		json_t *rule = json_pack("{s:s, s:o, s:I}", "connector", a->connector, "methods", m, "timeout_s",
		                         (json_int_t)a->timeout_s);
		if (a->mcp[0]) { /* an MCP server's tools */
			json_t *tools = json_array();
			for (unsigned k = 0; k < a->n_tools; k++)
				json_array_append_new(tools, json_string(a->tools[k]));
			json_object_set_new(rule, "mcp", json_string(a->mcp));
			json_object_set_new(rule, "tools", tools);
		}
		json_array_append_new(approval, rule);
	}
	json_object_set_new(cfg, "approval", approval);
	json_t *mcp = json_array();
	for (unsigned i = 0; i < gw->n_mcp; i++) {
		json_t *m = json_pack("{s:s}", "name", gw->mcp[i].name);
		json_t *tools = gw->mcp[i].narrowed ? json_array() : NULL;
		for (unsigned t = 0; tools && t < gw->mcp[i].n_tools; t++)
			json_array_append_new(tools, json_string(gw->mcp[i].tools[t]));
		if (tools)
			json_object_set_new(m, "tools", tools);
		json_array_append_new(mcp, m);
	}
	json_object_set_new(cfg, "mcp", mcp);
	if (gw->run_dir && gw->run_dir[0]) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/approvals", gw->run_dir);
		json_object_set_new(cfg, "approvals_dir", json_string(dir));
	}
	return cfg;
}

/* The daemon's way (gwreg.h): 1 it serves the run, 0 there is none, -1 it refused. */
static int try_daemon(struct rb_gwproc *gw, const int *fds, unsigned n_fds, int dns_fd, const char *run_id,
                      const uint8_t *key, size_t keylen, struct rb_error *err)
{
	char path[sizeof gw->daemon_socket];
	if (gw->conf_path || !rb_gwsock_path(gw->host, path, sizeof path))
		return 0; /* a named config is served by a gateway of the run's own */
	int all[MAX_LISTEN_FDS + 1];
	memcpy(all, fds, sizeof(int) * n_fds);
	if (dns_fd >= 0)
		all[n_fds] = dns_fd;
	json_t *cfg = grant_json(gw, run_id, key, keylen, 0, n_fds, dns_fd >= 0 ? (int)n_fds : -1);
	/* The daemon serves every run from its own cgroup: it charges this run's calls to a share
	 * of a core, the run's cpu limit (a gateway of the run's own is in the run's cgroup). */
	if (cfg && gw->cpus > 0)
		json_object_set_new(cfg, "cpus", json_real(gw->cpus));
	_cleanup_free_ char *text = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
	json_decref(cfg);
	if (!text)
		return rb_error_set(err, ENOMEM, "gateway: grant");
	int conn = -1;
	json_t *early = NULL;
	struct rb_error why;
	int r = rb_gwreg_register(path, text, all, n_fds + (dns_fd >= 0), RB_GWPROC_READY_MS, &conn, &early, &why);
	memset(text, 0, strlen(text));
	if (r == 0) {
		rb_debug("%s: a gateway of the run's own serves it", why.msg);
		return 0;
	}
	if (r < 0) {
		*err = why;
		return -1;
	}
	gw->daemon = true;
	gw->lost = false;
	snprintf(gw->daemon_socket, sizeof gw->daemon_socket, "%s", path);
	gw->confined = false;
	snprintf(gw->cgroup, sizeof gw->cgroup,
	         "served by the gateway daemon at %s: its work is in the daemon's cgroup, measured per run (cpu_ms) "
	         "and bounded by the run's request rate and its cpu limit as a share of a core",
	         path);
	gw->out = conn;
	if (early && gw->calls) {
		json_array_extend(gw->calls, early);
		json_decref(early);
	} else if (early) {
		gw->calls = early;
	}
	fcntl(gw->out, F_SETFL, O_NONBLOCK);
	return 1;
}

int rb_gwproc_start(struct rb_gwproc *gw, struct rb_cgroup *cg, const int *fds, unsigned n_fds, int dns_fd,
                    const char *run_id, const uint8_t *key, size_t keylen, struct rb_error *err)
{
	gw->pid = 0;
	gw->pidfd = gw->out = -1;
	gw->daemon = false;
	if (n_fds > MAX_LISTEN_FDS)
		return rb_error_set(err, E2BIG, "gateway: %u listeners", n_fds);
	int d = try_daemon(gw, fds, n_fds, dns_fd, run_id, key, keylen, err);
	if (d != 0)
		return d < 0 ? -1 : 0;
	struct rb_parts parts;
	if (rb_parts_find(&parts, gw->host, err) < 0)
		return -1;
	const char *bin = parts.gateway;

	/* The config (with the key) goes through a socket, never argv or the environment; a
	 * socket, so a gateway that died early costs an EPIPE (MSG_NOSIGNAL), not a SIGPIPE. */
	json_t *cfg = grant_json(gw, run_id, key, keylen, FIRST_LISTEN_FD, n_fds,
	                         dns_fd >= 0 ? FIRST_LISTEN_FD + (int)n_fds + 1 : -1);
	/* parent_pid: the gateway watches this process (a pidfd), not the thread that forks it. */
	if (cfg) {
		json_object_set_new(cfg, "ready_fd", json_integer(FIRST_LISTEN_FD + (int)n_fds));
		json_object_set_new(cfg, "parent_pid", json_integer((int)getpid()));
	}
	_cleanup_free_ char *text = cfg ? json_dumps(cfg, JSON_COMPACT) : NULL;
	json_decref(cfg);
	if (!text)
		return rb_error_set(err, ENOMEM, "gateway: config");
	int cp[2] = {-1, -1}, op[2] = {-1, -1}, rp[2] = {-1, -1}, ep[2] = {-1, -1};
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cp) < 0 || pipe2(op, O_CLOEXEC) < 0 ||
	    pipe2(rp, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0) {
		int e = errno;
		int all[] = {cp[0], cp[1], op[0], op[1], rp[0], rp[1], ep[0], ep[1]};
		for (size_t i = 0; i < RB_ARRAY_SIZE(all); i++)
			if (all[i] >= 0)
				close(all[i]);
		return rb_error_set(err, e, "gateway: pipe");
	}
	_cleanup_close_ int cfg_w = cp[1];
	_cleanup_close_ int out_r = op[0];
	_cleanup_close_ int ready_r = rp[0];
	_cleanup_close_ int exec_r = ep[0];
	struct rb_cgroup_join join;
	if (place(gw, cg, &join, err) < 0) {
		close(cp[0]), close(op[1]), close(rp[1]), close(ep[1]);
		return -1;
	}
	bool cloned_in;
	pid_t pid = spawn(join.clone_fd, &cloned_in);
	if (pid == 0)
		child(bin, &join, cloned_in, cp[0], op[1], rp[1], dns_fd, ep[1], fds, n_fds);
	int fork_errno = errno;
	bool into_dir = join.clone_fd >= 0;
	rb_cgroup_join_close(&join);
	close(cp[0]), close(op[1]), close(rp[1]), close(ep[1]);
	if (pid < 0)
		return rb_error_set(err, fork_errno, "gateway: %s", into_dir ? "clone3 into its cgroup" : "fork");
	if (cloned_in)
		snprintf(gw->cgroup + strlen(gw->cgroup), sizeof gw->cgroup - strlen(gw->cgroup),
		         ", CLONE_INTO_CGROUP");
	else if (gw->confined)
		snprintf(gw->cgroup + strlen(gw->cgroup), sizeof gw->cgroup - strlen(gw->cgroup),
		         ", joined before exec");

	/* EOF: the exec worked (the CLOEXEC end closed); else the stage and errno it failed at. */
	struct child_failure f = {0};
	ssize_t got;
	while ((got = read(exec_r, &f, sizeof f)) < 0 && errno == EINTR)
		;
	if (got != 0) {
		reap(pid, NULL);
		int e = got == (ssize_t)sizeof f ? f.errnum : EIO;
		if (got == (ssize_t)sizeof f && f.stage == STAGE_JOIN)
			return rb_error_set(err, e, "gateway: join the run's cgroup (%s)", gw->cgroup);
		return rb_error_set(err, e, "gateway: exec `%s`", bin);
	}
	size_t len = strlen(text);
	ssize_t w = send(cfg_w, text, len, MSG_NOSIGNAL);
	int send_errno = errno;
	memset(text, 0, len);
	close(rb_steal_fd(&cfg_w)); /* EOF ends the gateway's read of its config */
	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		reap(pid, NULL);
		return rb_error_set(err, e, "gateway `%s`: pidfd_open", bin);
	}
	/* A gateway that did not get its config ends before it is ready: that says more than
	 * the EPIPE here. */
	if (await_ready(ready_r, pidfd, pid, bin, err) < 0)
		return -1;
	if (w != (ssize_t)len) {
		kill(pid, SIGKILL);
		reap(pid, NULL);
		return rb_error_set(err, w < 0 ? send_errno : EIO, "gateway `%s`: write its config", bin);
	}
	gw->pid = pid;
	gw->pidfd = rb_steal_fd(&pidfd);
	gw->out = rb_steal_fd(&out_r);
	/* Records are drained as they come; room for a burst while the runner is busy. */
	fcntl(gw->out, F_SETPIPE_SZ, 1 << 20);
	fcntl(gw->out, F_SETFL, O_NONBLOCK);
	return 0;
}

/* One line from the gateway: {"call": {...}} is a record, {"stats": {...}} its counts. */
static void take_line(struct rb_gwproc *gw, const char *line, size_t len)
{
	json_error_t jerr;
	json_t *j = json_loadb(line, len, 0, &jerr);
	json_t *call = json_object_get(j, "call"), *stats = json_object_get(j, "stats");
	if (json_is_object(call)) {
		if (!gw->calls)
			gw->calls = json_array();
		json_array_append(gw->calls, call);
	} else if (json_is_object(stats)) {
		json_decref(gw->stats);
		gw->stats = json_incref(stats);
	}
	json_decref(j);
}

/* Reads what fd holds (until EAGAIN or EOF); complete lines are taken, a partial one kept. */
static void read_records(struct rb_gwproc *gw)
{
	char buf[16384];
	for (;;) {
		ssize_t n = read(gw->out, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			gw->lost = gw->daemon; /* the daemon's end, or its registration reset */
		if (n <= 0)
			return;
		char *grown = realloc(gw->line, gw->line_len + (size_t)n);
		if (!grown)
			return;
		gw->line = grown;
		memcpy(gw->line + gw->line_len, buf, (size_t)n);
		gw->line_len += (size_t)n;
		size_t start = 0;
		for (size_t i = 0; i < gw->line_len; i++)
			if (gw->line[i] == '\n') {
				take_line(gw, gw->line + start, i - start);
				start = i + 1;
			}
		memmove(gw->line, gw->line + start, gw->line_len - start);
		gw->line_len -= start;
	}
}

bool rb_gwproc_running(const struct rb_gwproc *gw)
{
	return gw->pid > 0 || (gw->daemon && gw->out >= 0);
}

bool rb_gwproc_lost(const struct rb_gwproc *gw)
{
	return gw->daemon && gw->out >= 0 && gw->lost;
}

void rb_gwproc_drain(struct rb_gwproc *gw)
{
	if (rb_gwproc_running(gw) && gw->out >= 0)
		read_records(gw);
}

json_t *rb_gwproc_take_calls(struct rb_gwproc *gw)
{
	rb_gwproc_drain(gw);
	json_t *c = gw->calls ? gw->calls : json_array();
	gw->calls = NULL;
	return c;
}

json_t *rb_gwproc_dns_names(const json_t *calls, size_t max)
{
	json_t *names = json_array();
	size_t i, j;
	json_t *c, *seen;
	json_array_foreach(calls, i, c)
	{
		const char *door = json_string_value(json_object_get(c, "door"));
		const char *name = json_string_value(json_object_get(c, "connector"));
		if (!door || strcmp(door, "dns") != 0 || !name || json_array_size(names) >= max)
			continue;
		bool dup = false;
		json_array_foreach(names, j, seen)
		{
			dup = dup || !strcmp(json_string_value(seen), name);
		}
		if (!dup)
			json_array_append_new(names, json_string(name));
	}
	return names;
}

static bool sent_record(const json_t *c)
{
	const char *phase = json_string_value(json_object_get(c, "phase"));
	return phase && !strcmp(phase, "sent");
}

size_t rb_gwproc_answered(const json_t *calls, size_t *unanswered)
{
	size_t answered = 0, i, j;
	json_t *c, *d;
	*unanswered = 0;
	json_array_foreach(calls, i, c)
	{
		if (!sent_record(c)) {
			answered++;
			continue;
		}
		const char *id = json_string_value(json_object_get(c, "id"));
		bool done = false;
		json_array_foreach(calls, j, d)
		{
			const char *did = json_string_value(json_object_get(d, "id"));
			done = done || (j > i && !sent_record(d) && id && did && !strcmp(id, did));
		}
		*unanswered += !done;
	}
	return answered;
}

int rb_gwproc_watch_fd(const struct rb_gwproc *gw)
{
	return gw->pid > 0 ? gw->pidfd : -1;
}

void rb_gwproc_reap(struct rb_gwproc *gw, struct rb_error *err)
{
	if (gw->daemon && gw->out >= 0) {
		read_records(gw);
		close(gw->out);
		gw->out = -1;
		gw->failed = true;
		rb_error_set(err, 0, "gateway daemon at %s ended the run's registration during the run",
		             gw->daemon_socket);
		return;
	}
	if (gw->pid <= 0) {
		rb_error_set(err, 0, "gateway is not running");
		return;
	}
	char how[64];
	describe(reap(gw->pid, NULL), how, sizeof how);
	read_records(gw); /* what it recorded before it died */
	gw->pid = 0;
	close(gw->pidfd);
	close(gw->out);
	gw->pidfd = gw->out = -1;
	gw->failed = true;
	rb_error_set(err, 0, "gateway %s during the run", how);
}

/* The daemon's way: the registration's write side closes, the daemon stops the run's endpoint
 * and answers the last records and the counts, then closes. */
/* The records still to come, read to EOF (blocking now), then the channel closed. */
static void drain_records(struct rb_gwproc *gw)
{
	fcntl(gw->out, F_SETFL, 0);
	read_records(gw);
	free(gw->line);
	gw->line = NULL;
	gw->line_len = 0;
	close(gw->out);
	gw->out = -1;
}

static void stop_daemon(struct rb_gwproc *gw)
{
	shutdown(gw->out, SHUT_WR);
	struct timeval tv = {.tv_sec = RB_GWPROC_READY_MS / 1000};
	setsockopt(gw->out, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	drain_records(gw); /* to its EOF: the last records, then the counts */
	/* Its cpu_ms is what the daemon's threads spent on the run's calls, from the counts. */
	if (json_is_object(gw->stats)) {
		json_object_set_new(gw->stats, "daemon", json_string(gw->daemon_socket));
		json_object_set_new(gw->stats, "cgroup", json_pack("{s:b, s:s}", "enforced", 0, "reason", gw->cgroup));
	}
	gw->failed = !gw->stats;
}

void rb_gwproc_stop(struct rb_gwproc *gw)
{
	if (gw->daemon) {
		if (gw->out >= 0)
			stop_daemon(gw);
		return;
	}
	if (gw->pid <= 0)
		return;
	/* Through the pidfd: never a signal to a pid someone else may have reused. */
	syscall(SYS_pidfd_send_signal, gw->pidfd, SIGTERM, NULL, 0);
	drain_records(gw); /* to its EOF: the last records, then the counts */
	struct rusage ru = {0};
	int status = reap(gw->pid, &ru);
	close(gw->pidfd);
	gw->pidfd = -1;
	gw->pid = 0;
	/* The gateway's CPU is the host's work for the run: it goes into the run's cost. */
	double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
	if (json_is_object(gw->stats)) {
		json_object_set_new(gw->stats, "cpu_ms", json_real(cpu_ms));
		/* Said as the run's limits are: enforced, by what; or not, and why. */
		json_object_set_new(gw->stats, "cgroup",
		                    json_pack("{s:b, s:s}", "enforced", gw->confined,
		                              gw->confined ? "mechanism" : "reason", gw->cgroup));
	}
	gw->failed = !gw->stats || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

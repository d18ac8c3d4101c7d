/* The factory (see factory.h): forked early, single-threaded, it serves one request at a time:
 * the spec arrives as a flat copy in a sealed memfd (runner and factory are one binary, so the
 * structs' layout is the same; only the pointers are rebuilt), the descriptors after it; it
 * answers with init's. It reaps every init it made through its pidfd. */
#define _GNU_SOURCE
#include "runtime/sandbox/factory.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

#define BLOB_MAGIC 0x72626631u /* "rbf1" */
/* Every descriptor one request carries: the spec, init's control socket, the cgroup's, the
 * cgroup joins, the inputs and the skills. */
#define MAX_REQ_FDS (3 + RB_CGROUP_MAX_JOIN_FDS + 2 * RB_MAX_INPUTS)

/* The head of the spec's memfd; the staging path, the inputs, the skills and the filter's
 * instructions follow it in this order. */
struct blob_head {
	uint32_t magic;
	uint32_t staging_len; /* with its NUL; 0: none */
	uint32_t n_inputs, n_skills, bpf_len;
	bool has_image, has_bpf;
	struct rb_sandbox_spec spec;
	struct rb_image image;
	struct rb_bpf bpf;
};

/* --- the runner's side ------------------------------------------------------------------- */

static int blob_append(char **buf, size_t *len, const void *data, size_t n)
{
	if (!n)
		return 0;
	char *p = realloc(*buf, *len + n);
	if (!p)
		return -1;
	memcpy(p + *len, data, n);
	*buf = p;
	*len += n;
	return 0;
}

static int spec_blob(const struct rb_sandbox_spec *spec, struct rb_error *err)
{
	const struct rb_rootfs_spec *rs = &spec->rootfs;
	if (rs->n_inputs > RB_MAX_INPUTS || rs->n_skills > RB_MAX_INPUTS)
		return rb_error_set(err, E2BIG, "sandbox setup: more than %d inputs or skills", RB_MAX_INPUTS);
	struct blob_head h = {
	    .magic = BLOB_MAGIC,
	    .staging_len = rs->staging ? (uint32_t)strlen(rs->staging) + 1 : 0,
	    .n_inputs = rs->n_inputs,
	    .n_skills = rs->n_skills,
	    .has_image = rs->image != NULL,
	    .has_bpf = spec->exec.bpf != NULL,
	    .spec = *spec,
	};
	if (rs->image)
		h.image = *rs->image;
	if (spec->exec.bpf) {
		h.bpf = *spec->exec.bpf;
		h.bpf_len = spec->exec.bpf->insns ? spec->exec.bpf->len : 0;
	}
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	if (blob_append(&buf, &len, &h, sizeof h) < 0 || blob_append(&buf, &len, rs->staging, h.staging_len) < 0 ||
	    blob_append(&buf, &len, rs->inputs, h.n_inputs * sizeof *rs->inputs) < 0 ||
	    blob_append(&buf, &len, rs->skills, h.n_skills * sizeof *rs->skills) < 0 ||
	    blob_append(&buf, &len, h.bpf_len ? spec->exec.bpf->insns : NULL, h.bpf_len * sizeof(struct sock_filter)) <
	        0)
		return rb_error_set(err, ENOMEM, "sandbox setup: the spec for the factory");
	int fd = rb_sealed_memfd("runbox-spec", buf, len, err);
	return fd < 0 ? rb_error_prefix(err, "sandbox setup: the spec for the factory") : fd;
}

/* Sends fds over sock in messages of RB_CHAN_MAX_FDS; the first is head. */
static int send_fds(int sock, json_t *head, const int *fds, unsigned n, struct rb_error *err)
{
	unsigned first = n < RB_CHAN_MAX_FDS ? n : RB_CHAN_MAX_FDS;
	if (rb_chan_send(sock, head, fds, first, err) < 0)
		return -1;
	for (unsigned i = first; i < n; i += RB_CHAN_MAX_FDS) {
		unsigned k = n - i < RB_CHAN_MAX_FDS ? n - i : RB_CHAN_MAX_FDS;
		json_t *more = json_pack("{s:s}", "op", "fds");
		int r = rb_chan_send(sock, more, fds + i, k, err);
		json_decref(more);
		if (r < 0)
			return -1;
	}
	return 0;
}

static void close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* The fd fields of struct rb_net, in rb_net_fds order. */
static json_t *net_json(const struct rb_net *net)
{
	return json_pack("{s:[i,i,i,i,i,i], s:i, s:b, s:i, s:i}", "fds", net->netns_fd, net->nft_fd, net->listen_fd4,
	                 net->listen_fd6, net->rtnl_fd, net->dns_fd, "mode", (int)net->mode, "ipv6", net->ipv6, "port",
	                 (int)net->port, "port6", (int)net->port6);
}

static void net_from_json(json_t *j, struct rb_net *net)
{
	*net = (struct rb_net)RB_NET_INIT;
	json_t *fds = json_object_get(j, "fds");
	int *fields[] = {&net->netns_fd, &net->nft_fd, &net->listen_fd4, &net->listen_fd6, &net->rtnl_fd, &net->dns_fd};
	for (size_t i = 0; i < RB_ARRAY_SIZE(fields); i++) {
		json_t *v = json_array_get(fds, i);
		*fields[i] = json_is_integer(v) ? (int)json_integer_value(v) : -1;
	}
	net->mode = (enum rb_net_mode)json_integer_value(json_object_get(j, "mode"));
	net->ipv6 = json_is_true(json_object_get(j, "ipv6"));
	net->port = (uint16_t)json_integer_value(json_object_get(j, "port"));
	net->port6 = (uint16_t)json_integer_value(json_object_get(j, "port6"));
}

int rb_factory_make(const struct rb_factory *f, const struct rb_spawn_req *req, struct rb_spawned *out,
                    struct rb_error *err)
{
	*out = (struct rb_spawned){.init_pid = -1, .pidfd = -1, .userns_fd = -1, .lower = -1, .net = RB_NET_INIT};
	if (!f || f->sock < 0)
		return rb_error_set(err, EINVAL, "sandbox setup: no factory (rb_factory_start was not called)");
	_cleanup_close_ int blob = spec_blob(req->spec, err);
	if (blob < 0)
		return -1;
	int link[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, link) < 0)
		return rb_error_set(err, errno, "sandbox setup: socketpair for the factory");
	_cleanup_close_ int mine = link[0];
	json_t *ask = json_pack("{s:s}", "op", "make");
	int r = rb_chan_send(f->sock, ask, &link[1], 1, err);
	json_decref(ask);
	close(link[1]);
	if (r < 0)
		return rb_error_prefix(err, "sandbox setup: the factory");

	int fds[MAX_REQ_FDS];
	unsigned n = 0;
	fds[n++] = blob;
	fds[n++] = req->ctl_init;
	if (req->cg_fd >= 0)
		fds[n++] = req->cg_fd;
	for (unsigned i = 0; i < req->n_join && i < RB_CGROUP_MAX_JOIN_FDS; i++)
		fds[n++] = req->join_fds[i];
	const struct rb_rootfs_spec *rs = &req->spec->rootfs;
	for (unsigned i = 0; i < rs->n_inputs; i++)
		if (rs->inputs[i].fd >= 0)
			fds[n++] = rs->inputs[i].fd;
	for (unsigned i = 0; i < rs->n_skills; i++)
		if (rs->skills[i].fd >= 0)
			fds[n++] = rs->skills[i].fd;
	/* The runner's log level, for what the factory, the spawner and init say of this one. */
	json_t *head = json_pack("{s:s, s:b, s:i, s:i, s:i}", "op", "spec", "cg", req->cg_fd >= 0, "join",
	                         (int)(req->n_join < RB_CGROUP_MAX_JOIN_FDS ? req->n_join : RB_CGROUP_MAX_JOIN_FDS),
	                         "n_fds", (int)n, "log_level", (int)rb_log_level());
	r = send_fds(mine, head, fds, n, err);
	json_decref(head);
	if (r < 0)
		return rb_error_prefix(err, "sandbox setup: the factory");

	json_t *m = NULL;
	int got[RB_CHAN_MAX_FDS];
	unsigned n_got = 0;
	r = rb_chan_recv(mine, &m, got, &n_got, err);
	if (r < 0)
		return rb_error_prefix(err, "sandbox setup: the factory's answer");
	if (r == 0)
		return rb_error_set(err, 0, "sandbox setup: the factory ended without a word");
	const char *ev = json_string_value(json_object_get(m, "ev"));
	if (!ev || strcmp(ev, "made") != 0) {
		const char *msg = json_string_value(json_object_get(m, "message"));
		rb_error_set(err, (int)json_integer_value(json_object_get(m, "errnum")), "%s",
		             msg ? msg : "sandbox setup: the factory's answer is not one");
		close_fds(got, n_got);
		json_decref(m);
		return -1;
	}
	bool has_lower = json_is_true(json_object_get(m, "lower"));
	unsigned need = 2 + (has_lower ? 1 : 0);
	if (n_got < need) {
		close_fds(got, n_got);
		json_decref(m);
		return rb_error_set(err, EPROTO, "sandbox setup: the factory's answer lacks descriptors");
	}
	out->init_pid = (pid_t)json_integer_value(json_object_get(m, "init_pid"));
	out->pidfd = got[0];
	out->userns_fd = got[1];
	out->lower = has_lower ? got[2] : -1;
	out->lower_idmapped = json_is_true(json_object_get(m, "lower_idmapped"));
	net_from_json(json_object_get(m, "net"), &out->net);
	rb_net_adopt_fds(&out->net, got + need, n_got - need);
	json_decref(m);
	return 0;
}

/* --- the factory's side ------------------------------------------------------------------ */

/* The inits it made and has not reaped yet, by pidfd. */
struct live {
	int *fds;
	unsigned n, cap;
};

/* Reads the spec's memfd into *buf and rebuilds its pointers into it. */
static int read_blob(int fd, char **buf, struct blob_head **head, struct rb_error *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return rb_error_set(err, errno, "sandbox setup: the spec's memfd");
	size_t len = (size_t)st.st_size;
	if (len < sizeof(struct blob_head) || len > (64u << 20))
		return rb_error_set(err, EPROTO, "sandbox setup: a spec of %zu bytes", len);
	*buf = malloc(len);
	if (!*buf)
		return rb_error_set(err, ENOMEM, "sandbox setup: the spec");
	size_t off = 0;
	while (off < len) {
		ssize_t r = pread(fd, *buf + off, len - off, (off_t)off);
		if (r <= 0)
			return rb_error_set(err, r < 0 ? errno : EPROTO, "sandbox setup: read the spec");
		off += (size_t)r;
	}
	struct blob_head *h = (struct blob_head *)*buf;
	size_t want = sizeof *h + h->staging_len + ((size_t)h->n_inputs + h->n_skills) * sizeof(struct rb_input) +
	              (size_t)h->bpf_len * sizeof(struct sock_filter);
	if (h->magic != BLOB_MAGIC || h->n_inputs > RB_MAX_INPUTS || h->n_skills > RB_MAX_INPUTS || want != len ||
	    (h->staging_len && (*buf)[sizeof *h + h->staging_len - 1] != '\0'))
		return rb_error_set(err, EPROTO, "sandbox setup: the spec is not one");
	char *p = *buf + sizeof *h;
	struct rb_rootfs_spec *rs = &h->spec.rootfs;
	rs->staging = h->staging_len ? p : NULL;
	p += h->staging_len;
	rs->image = h->has_image ? &h->image : NULL;
	rs->inputs = (const struct rb_input *)p;
	p += h->n_inputs * sizeof(struct rb_input);
	rs->skills = (const struct rb_input *)p;
	p += h->n_skills * sizeof(struct rb_input);
	h->bpf.insns = h->bpf_len ? (struct sock_filter *)p : NULL;
	h->bpf.len = (unsigned short)h->bpf_len;
	h->spec.exec.bpf = h->has_bpf ? &h->bpf : NULL;
	*head = h;
	return 0;
}

static int reply_error(int link, const struct rb_error *e)
{
	struct rb_error ignored;
	json_t *m = json_pack("{s:s, s:i, s:s}", "ev", "error", "errnum", e->errnum, "message", e->msg);
	int r = m ? rb_chan_send(link, m, NULL, 0, &ignored) : -1;
	json_decref(m);
	return r;
}

/* One request on its own socket: returns init's pidfd (to reap it by), or -1. */
static int serve_one(int sock, int link, const struct live *live, struct rb_logger *logger, struct rb_error *err)
{
	json_t *head = NULL;
	int fds[MAX_REQ_FDS];
	unsigned n = 0;
	_cleanup_free_ char *buf = NULL;
	int *close_list = NULL;
	int pidfd = -1;
	struct blob_head *h = NULL;
	/* The first message says how many descriptors follow it. */
	int r0 = rb_chan_recv(link, &head, fds, &n, err);
	if (r0 <= 0) {
		if (r0 == 0)
			rb_error_set(err, 0, "sandbox setup: the runner's request ended early");
		goto out;
	}
	unsigned want = (unsigned)json_integer_value(json_object_get(head, "n_fds"));
	if (want > MAX_REQ_FDS || want < 2) {
		rb_error_set(err, EPROTO, "sandbox setup: a request of %u descriptors", want);
		goto out;
	}
	while (n < want) {
		json_t *more = NULL;
		unsigned k = 0;
		int r = rb_chan_recv(link, &more, fds + n, &k, err);
		json_decref(more);
		if (r <= 0 || k == 0 || n + k > want) {
			if (r > 0)
				rb_error_set(err, EPROTO,
				             "sandbox setup: a request's descriptors are not as announced");
			else if (r == 0)
				rb_error_set(err, 0, "sandbox setup: the runner's request ended early");
			n += k;
			goto out;
		}
		n += k;
	}
	if (n != want) {
		rb_error_set(err, EPROTO, "sandbox setup: a request's descriptors are not as announced");
		goto out;
	}
	json_int_t level = json_integer_value(json_object_get(head, "log_level"));
	logger->level = level >= RB_LOG_ERROR && level <= RB_LOG_DEBUG ? (enum rb_log_level)level : RB_LOG_WARN;
	if (read_blob(fds[0], &buf, &h, err) < 0)
		goto out;
	unsigned at = 2;
	bool has_cg = json_is_true(json_object_get(head, "cg"));
	unsigned n_join = (unsigned)json_integer_value(json_object_get(head, "join"));
	struct rb_rootfs_spec *rs = &h->spec.rootfs;
	struct rb_input *in = (struct rb_input *)rs->inputs, *sk = (struct rb_input *)rs->skills;
	unsigned n_in = 0;
	for (unsigned i = 0; i < h->n_inputs; i++)
		n_in += in[i].fd >= 0;
	for (unsigned i = 0; i < h->n_skills; i++)
		n_in += sk[i].fd >= 0;
	if (n_join > RB_CGROUP_MAX_JOIN_FDS || at + (has_cg ? 1 : 0) + n_join + n_in != n) {
		rb_error_set(err, EPROTO, "sandbox setup: a request's descriptors are not as announced");
		goto out;
	}
	struct rb_spawn_req req = {.spec = &h->spec, .ctl_init = fds[1], .cg_fd = has_cg ? fds[at++] : -1};
	req.join_fds = fds + at;
	req.n_join = n_join;
	at += n_join;
	for (unsigned i = 0; i < h->n_inputs; i++)
		if (in[i].fd >= 0)
			in[i].fd = fds[at++];
	for (unsigned i = 0; i < h->n_skills; i++)
		if (sk[i].fd >= 0)
			sk[i].fd = fds[at++];
	/* What init must not keep of the factory's: its socket to the runner, this request's
	 * socket and memfd, the cgroup's descriptors, the other sandboxes' pidfds. */
	close_list = malloc((live->n + 4 + RB_CGROUP_MAX_JOIN_FDS) * sizeof *close_list);
	if (!close_list) {
		rb_error_set(err, ENOMEM, "sandbox setup");
		goto out;
	}
	unsigned nc = 0;
	close_list[nc++] = sock;
	close_list[nc++] = link;
	close_list[nc++] = fds[0];
	if (req.cg_fd >= 0)
		close_list[nc++] = req.cg_fd;
	for (unsigned i = 0; i < n_join; i++)
		close_list[nc++] = req.join_fds[i];
	for (unsigned i = 0; i < live->n; i++)
		close_list[nc++] = live->fds[i];
	req.close_in_init = close_list;
	req.n_close = nc;

	struct rb_spawned made;
	if (rb_sandbox_spawn(&req, &made, err) < 0)
		goto out;
	int out_fds[RB_CHAN_MAX_FDS];
	unsigned n_out = 0;
	out_fds[n_out++] = made.pidfd;
	out_fds[n_out++] = made.userns_fd;
	if (made.lower >= 0)
		out_fds[n_out++] = made.lower;
	n_out += rb_net_fds(&made.net, out_fds + n_out, RB_CHAN_MAX_FDS - n_out);
	json_t *m = json_pack("{s:s, s:i, s:b, s:b, s:o}", "ev", "made", "init_pid", (int)made.init_pid, "lower",
	                      made.lower >= 0, "lower_idmapped", made.lower_idmapped, "net", net_json(&made.net));
	int r = m ? rb_chan_send(link, m, out_fds, n_out, err) : rb_error_set(err, ENOMEM, "sandbox setup");
	json_decref(m);
	/* The runner holds them now; init stays the factory's child, reaped by its pidfd. */
	if (made.userns_fd >= 0)
		close(made.userns_fd);
	if (made.lower >= 0)
		close(made.lower);
	rb_net_close(&made.net);
	if (r < 0) {
		syscall(SYS_pidfd_send_signal, made.pidfd, SIGKILL, NULL, 0);
		siginfo_t si;
		while (waitid(P_PIDFD, (id_t)made.pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
		close(made.pidfd);
		goto out;
	}
	pidfd = made.pidfd;
out:
	json_decref(head);
	close_fds(fds, n);
	free(close_list);
	return pidfd;
}

static void live_reap(struct live *l, unsigned i)
{
	siginfo_t si;
	while (waitid(P_PIDFD, (id_t)l->fds[i], &si, WEXITED) < 0 && errno == EINTR)
		;
	close(l->fds[i]);
	l->fds[i] = l->fds[--l->n];
}

__attribute__((noreturn)) static void factory_main(int sock)
{
	struct live live = {0};
	_cleanup_free_ struct pollfd *p = NULL;
	/* Set per request to the runner's level; init keeps its copy (this frame never ends). */
	struct rb_logger logger = {.level = RB_LOG_WARN};
	rb_log_use(&logger);
	for (;;) {
		struct pollfd *np = realloc(p, (live.n + 1) * sizeof *p);
		if (!np)
			break;
		p = np;
		p[0] = (struct pollfd){.fd = sock, .events = POLLIN};
		for (unsigned i = 0; i < live.n; i++)
			p[i + 1] = (struct pollfd){.fd = live.fds[i], .events = POLLIN};
		unsigned n_live = live.n;
		if (poll(p, n_live + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* From the end: live_reap moves the last entry into the freed slot. */
		for (unsigned i = n_live; i > 0; i--)
			if (p[i].revents)
				live_reap(&live, i - 1);
		if (!p[0].revents)
			continue;
		struct rb_error err;
		rb_error_clear(&err);
		json_t *m = NULL;
		int link = -1;
		unsigned k = 0;
		int r = rb_chan_recv(sock, &m, &link, &k, &err);
		json_decref(m);
		if (r <= 0)
			break; /* the runner is gone */
		if (k != 1)
			continue;
		if (live.n == live.cap) {
			unsigned cap = live.cap ? live.cap * 2 : 8;
			int *nf = realloc(live.fds, cap * sizeof *nf);
			if (!nf) {
				rb_error_set(&err, ENOMEM, "sandbox setup: the factory");
				reply_error(link, &err);
				close(link);
				continue;
			}
			live.fds = nf;
			live.cap = cap;
		}
		int pidfd = serve_one(sock, link, &live, &logger, &err);
		if (pidfd >= 0)
			live.fds[live.n++] = pidfd;
		else
			reply_error(link, &err);
		close(link);
	}
	/* The runner is gone: so are its sandboxes. */
	for (unsigned i = 0; i < live.n; i++)
		syscall(SYS_pidfd_send_signal, live.fds[i], SIGKILL, NULL, 0);
	while (live.n)
		live_reap(&live, live.n - 1);
	_exit(0);
}

int rb_factory_start(struct rb_factory *f, struct rb_error *err)
{
	*f = (struct rb_factory)RB_FACTORY_INIT;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return rb_error_set(err, errno, "the factory's socket");
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		return rb_error_set(err, e, "fork the factory");
	}
	if (pid == 0) {
		close(sv[0]);
		/* It dies with the thread that made it; the inits it made die with it (theirs). */
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(0);
		/* The terminal's signals are the runner's to act on: it cancels its runs and
		 * tears its sandboxes down, then closes this socket. */
		signal(SIGINT, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		prctl(PR_SET_NAME, "runbox-factory", 0, 0, 0);
		factory_main(sv[1]);
	}
	close(sv[1]);
	f->pid = pid;
	f->sock = sv[0];
	return 0;
}

void rb_factory_stop(struct rb_factory *f)
{
	if (f->sock >= 0)
		close(f->sock);
	f->sock = -1;
	if (f->pid > 0)
		while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
			;
	f->pid = -1;
}

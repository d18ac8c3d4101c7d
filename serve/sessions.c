/* The session table of runbox serve and its one dispatcher thread: every session's epoll fd in
 * one set, each dispatched under the table's lock, so one thread at a time drives a session.
 * HTTP threads take the lock for each call and never hold a pointer across an unlock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "common/jsoncheck.h"
#include "common/log.h"
#include "common/util.h"
#include "ledger/group.h"
#include "policy/manifest.h"
#include "runtime/run/artifacts.h"
#include "runtime/run/record.h"
#include "runtime/run/result.h"
#include "runtime/run/run.h"
#include "runtime/run/session.h"
#include "runtime/sandbox/writer.h"
#include "serve/manifest.h"
#include "serve/known.h"
#include "serve/pool.h"
#include "serve/ports.h"
#include "serve/quota.h"
#include "serve/serve.h"

#define ID_HEX 33 /* 16 random bytes as hex */
/* Processes in a session's life; of those ended, the newest KEEP_DONE keep their handle (output
 * and result), older ones are freed and answer 404. */
#define MAX_PROCS 1024
#define KEEP_DONE 32
#define READ_MAX  256
/* A process's step_end waits this long for its session's next commit (the next process's
 * start, usually at once) before it is committed alone: that start then pays one commit, not
 * one queued behind another. */
#define END_COMMIT_DELAY_US 20000u

struct sv_proc {
	char id[ID_HEX];
	struct rb_proc *p; /* NULL once freed (KEEP_DONE) */
	unsigned step;
	bool end_recorded;
};

struct sv_session {
	char id[ID_HEX];
	struct rb_run run;
	struct rb_record rec;
	struct rb_session *s;
	char **env; /* "K=V", NULL-terminated, for every process */
	size_t n_env;
	uint64_t idle_ms, last_us, created_us;
	uint64_t ends_at_us;  /* when step_ends not yet committed were queued, or 0 */
	uint64_t lifetime_ms; /* max_lifetime, or 0 */
	bool pooled;          /* its sandbox came from the warm pool */
	json_t *labels;       /* the create's labels, or NULL */
	json_t *ephemeral;    /* a manifest's ephemeral files {"rel": true}, or NULL: no snapshot holds them */
	char agent_version[129];
	const char *why; /* why the dispatcher closes it (idle timeout, max lifetime) */
	/* Its exposed ports (serve/ports.c), or NULL. */
	struct rb_serve_ports *ports;
	/* A writer of its sandbox's (rb_serve_sandbox_writer) between file calls, when has_writer. */
	bool has_writer;
	int writer;
	struct sv_proc procs[MAX_PROCS];
	unsigned n_procs;
	/* In the dispatcher's set (taken out after a dispatch failed, back at the next start). */
	bool watched;
	struct sv_session *next;
};

/* A create between its quota check and its listing, counted against its tenant's quota. */
struct opening {
	const char *tenant;
	struct opening *next;
};

struct rb_serve {
	pthread_mutex_t lock;
	pthread_cond_t changed; /* broadcast after each dispatch round */
	struct rb_serve_config cfg;
	char store[PATH_MAX + 16]; /* the artifact store, where snapshots are */
	struct sv_session *sessions;
	unsigned n_sessions;
	unsigned opening; /* sessions being made outside the lock */
	struct opening *openings;
	struct rb_ledger_group *ledger; /* the daemon's one ledger connection */
	struct rb_serve_pool *pool;     /* NULL: no --pool */
	struct rb_serve_known *known;   /* every session id it answers for (serve/known.h) */
	int epfd, wake;
	bool draining, stop;
	pthread_t loop;
	bool loop_started;
};

/* The bounds of sessions: in all (default RB_SERVE_MAX_SESSIONS) and of one tenant (default
 * half of that, so no one tenant holds every slot). */
static unsigned max_total(const struct rb_serve *sv)
{
	return sv->cfg.max_sessions ? sv->cfg.max_sessions : RB_SERVE_MAX_SESSIONS;
}

static unsigned max_of_tenant(const struct rb_serve *sv)
{
	unsigned half = max_total(sv) / 2;
	return sv->cfg.max_per_tenant ? sv->cfg.max_per_tenant : half ? half : 1;
}

unsigned rb_serve_error(const struct rb_error *err, json_t **reply)
{
	*reply = json_pack("{s:s}", "error", err->msg);
	return (unsigned)rb_error_http_status(rb_error_kind_of(err));
}

static unsigned fail(json_t **reply, enum rb_error_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static unsigned fail(json_t **reply, enum rb_error_kind kind, const char *fmt, ...)
{
	char msg[RB_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	struct rb_error e;
	rb_error_clear(&e);
	rb_error_setk(&e, kind, 0, "%s", msg);
	return rb_serve_error(&e, reply);
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* {"K": "V"} at path into a new "K=V" vector (n entries); -1 with err naming the key. */
static int env_vector(const json_t *obj, const char *path, char ***out, size_t *n, struct rb_error *err)
{
	struct rb_jsonck ck = {"request", "body", err};
	*out = calloc(json_object_size(obj) + 1, sizeof **out);
	*n = 0;
	if (!*out)
		return rb_error_set(err, ENOMEM, "env");
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)obj, k, v)
	{
		char p[256];
		snprintf(p, sizeof p, "%s.%s", path, k);
		if (!json_is_string(v)) {
			free_strv(*out);
			*out = NULL;
			return rb_jsonck_expected(&ck, p, "a string", v);
		}
		if (!k[0] || strchr(k, '=') || strlen(json_string_value(v)) != json_string_length(v)) {
			free_strv(*out);
			*out = NULL;
			return rb_jsonck_bad(&ck, p,
			                     "a variable's name is not empty and holds no `=`, its value no NUL");
		}
		if (asprintf(&(*out)[(*n)++], "%s=%s", k, json_string_value(v)) < 0) {
			(*out)[--(*n)] = NULL;
			free_strv(*out);
			*out = NULL;
			return rb_error_set(err, ENOMEM, "env");
		}
	}
	return 0;
}

/* Checks body against known keys and their types ("s" string, "i" integer, "b" bool, "o"
 * object, "a" array, "d" duration: a string or a number of seconds); required when marked. */
struct field {
	const char *key;
	char type;
	bool required;
};
static int check_body(const json_t *body, const struct field *f, struct rb_error *err)
{
	struct rb_jsonck ck = {"request", "body", err};
	if (!json_is_object(body))
		return rb_jsonck_expected(&ck, "$", "an object", body);
	const char *known[16];
	size_t n = 0;
	for (; f[n].key; n++)
		known[n] = f[n].key;
	known[n] = NULL;
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)body, k, v)
	{
		bool found = false;
		for (size_t i = 0; i < n; i++)
			if (!strcmp(k, known[i]))
				found = true;
		if (!found)
			return rb_jsonck_bad(&ck, "", "unknown key `$.%s`", k);
	}
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_object_get(body, f[i].key);
		char p[64];
		snprintf(p, sizeof p, "$.%s", f[i].key);
		if (!x) {
			if (f[i].required)
				return rb_jsonck_bad(&ck, p, "missing");
			continue;
		}
		bool okt = false;
		const char *what = "";
		switch (f[i].type) {
		case 's': okt = json_is_string(x), what = "a string"; break;
		case 'i':
			okt = json_is_integer(x) && json_integer_value(x) >= 0, what = "a non-negative integer";
			break;
		case 'b': okt = json_is_boolean(x), what = "true or false"; break;
		case 'o': okt = json_is_object(x), what = "an object"; break;
		case 'a': okt = json_is_array(x), what = "an array"; break;
		case '*': okt = true; break;
		case 'd':
			okt = json_is_string(x) || (json_is_integer(x) && json_integer_value(x) >= 0);
			what = "a duration (\"30s\", \"10m\") or a number of seconds";
			break;
		}
		if (!okt)
			return rb_jsonck_expected(&ck, p, what, x);
	}
	return 0;
}

static int duration_ms(const json_t *v, const char *path, uint64_t *out, struct rb_error *err)
{
	*out = 0;
	if (!v)
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX) {
		*out = (uint64_t)json_integer_value(v) * 1000u;
		return 0;
	}
	if (json_is_integer(v) || rb_parse_duration_ms(json_string_value(v), out) < 0) {
		struct rb_jsonck ck = {"request", "body", err};
		return rb_jsonck_expected(&ck, path, "a duration (\"30s\", \"10m\") or a whole number of seconds", v);
	}
	return 0;
}

/* A name the caller may give for an image or a policy: a name, never a path. */
static int plain_name(const json_t *v, const char *path, struct rb_error *err)
{
	const char *s = json_string_value(v);
	if (!s)
		return 0;
	bool ok = s[0] && s[0] != '.' && strlen(s) < 128;
	for (const char *c = s; *c && ok; c++)
		ok = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		     strchr("._-:", *c);
	if (!ok) {
		struct rb_jsonck ck = {"request", "body", err};
		return rb_jsonck_bad(&ck, path, "a name of letters, digits, `.`, `_`, `-`, `:`, not a path: `%s`", s);
	}
	return 0;
}

/* A tenant or agent: an id as `runbox run --tenant` takes it. */
static int id_field(const json_t *v, const char *path, struct rb_error *err)
{
	const char *s = json_string_value(v);
	if (!s || rb_manifest_id_ok(s))
		return 0;
	struct rb_jsonck ck = {"request", "body", err};
	return rb_jsonck_bad(&ck, path, "expected an id ([A-Za-z0-9._-]{1,64}, not \".\" or \"..\"), got `%s`", s);
}

/* Caller holds the lock. */
static struct sv_session *find(struct rb_serve *sv, const char *sid)
{
	for (struct sv_session *s = sv->sessions; s; s = s->next)
		if (!strcmp(s->id, sid))
			return s;
	return NULL;
}

static struct sv_proc *find_proc(struct sv_session *s, const char *pid)
{
	for (unsigned i = 0; i < s->n_procs; i++)
		if (s->procs[i].p && !strcmp(s->procs[i].id, pid))
			return &s->procs[i];
	return NULL;
}

/* Queues the step_end of each process that ended; commit_ends commits them. */
static void record_ends(struct sv_session *s)
{
	for (unsigned i = 0; i < s->n_procs; i++) {
		struct sv_proc *p = &s->procs[i];
		if (!p->p || p->end_recorded || !rb_proc_done(p->p))
			continue;
		p->end_recorded = true;
		struct rb_error err;
		/* A full queue is committed without a wait here, not durably inside the next add. */
		if (s->rec.n_pending >= RB_RECORD_PENDING_MAX / 2 &&
		    rb_record_flush(&s->rec, RB_RECORD_BEFORE_STEP, &err) < 0)
			rb_warn("session %s: ledger: %s", s->id, err.msg);
		if (rb_record_step_end(&s->rec, p->step, rb_proc_result(p->p), &err) < 0)
			rb_warn("session %s: ledger: %s", s->id, err.msg);
		else if (!s->ends_at_us)
			s->ends_at_us = rb_now_us();
	}
}

/* The queued step_ends, once END_COMMIT_DELAY_US passed without another commit taking them. */
static void commit_ends(struct sv_session *s, uint64_t t)
{
	if (!s->ends_at_us || t - s->ends_at_us < END_COMMIT_DELAY_US)
		return;
	s->ends_at_us = 0;
	struct rb_error err;
	if (rb_record_flush(&s->rec, RB_RECORD_BEFORE_STEP, &err) < 0)
		rb_warn("session %s: ledger: %s", s->id, err.msg);
}

static void unlink_session(struct rb_serve *sv, struct sv_session *s)
{
	for (struct sv_session **pp = &sv->sessions; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	sv->n_sessions--;
	if (s->watched)
		epoll_ctl(sv->epfd, EPOLL_CTL_DEL, rb_session_fd(s->s), NULL);
}

/* Closes an unlinked session (no other thread can reach it): the sandbox killed, every
 * process's end and the run's end recorded. */
static void close_session(struct sv_session *s, const char *reason)
{
	rb_serve_ports_free(s->ports, &s->rec); /* listeners first: a connect is refused from now on */
	if (s->has_writer)
		close(s->writer);
	rb_session_close(s->s);
	record_ends(s);
	for (unsigned i = 0; i < s->n_procs; i++)
		if (s->procs[i].p)
			rb_proc_free(s->procs[i].p);
	rb_run_stop(&s->run);
	struct rb_error err;
	if (rb_record_cleanup(&s->rec, reason, true, &err) < 0 ||
	    rb_record_run_end(&s->rec, !strcmp(reason, "deleted") ? "success" : "cancelled", &err) < 0 ||
	    rb_record_flush(&s->rec, RB_RECORD_DURABLE, &err) < 0)
		rb_warn("session %s: ledger: %s", s->id, err.msg);
	rb_record_close(&s->rec);
	rb_run_close(&s->run);
	free_strv(s->env);
	json_decref(s->labels);
	json_decref(s->ephemeral);
	rb_info("session %s closed (%s)", s->id, reason);
	free(s);
}

static void *dispatch_loop(void *arg)
{
	struct rb_serve *sv = arg;
	rb_log_use(sv->cfg.logger);
	struct epoll_event evs[32];
	int timeout_ms = 1000;
	for (;;) {
		int n = epoll_wait(sv->epfd, evs, 32, timeout_ms);
		pthread_mutex_lock(&sv->lock);
		if (sv->stop) {
			pthread_mutex_unlock(&sv->lock);
			return NULL;
		}
		for (int i = 0; i < n; i++) {
			if (!evs[i].data.ptr) {
				uint64_t v;
				(void)!read(sv->wake, &v, sizeof v);
				continue;
			}
			struct sv_session *s = sv->sessions;
			while (s && s != evs[i].data.ptr)
				s = s->next;
			if (!s)
				continue; /* closed meanwhile */
			struct rb_error err;
			if (rb_session_dispatch(s->s, 0, &err) < 0) {
				/* Not retried at once (a level-triggered fd would spin): watched again at
				 * the next process's start. */
				rb_warn("session %s: %s", s->id, err.msg);
				epoll_ctl(sv->epfd, EPOLL_CTL_DEL, rb_session_fd(s->s), NULL);
				s->watched = false;
			}
			record_ends(s);
		}
		/* Idle sessions: closed outside the lock, once unlinked. */
		struct sv_session *expired = NULL;
		uint64_t t = rb_now_us();
		timeout_ms = 1000;
		for (struct sv_session *s = sv->sessions, *nx; s; s = nx) {
			nx = s->next;
			commit_ends(s, t);
			if (s->ends_at_us)
				timeout_ms = END_COMMIT_DELAY_US / 1000u;
			bool busy = false;
			for (unsigned i = 0; i < s->n_procs; i++)
				busy = busy || (s->procs[i].p && !rb_proc_done(s->procs[i].p));
			/* `runbox kill RUN` (its run's control socket, handled in the dispatch): this one only. */
			if (s->run.end_reason[0])
				s->why = s->run.end_reason;
			else if (s->lifetime_ms && t - s->created_us > s->lifetime_ms * 1000u)
				s->why = "max lifetime";
			else if (s->idle_ms && !busy && t - s->last_us > s->idle_ms * 1000u)
				s->why = "idle timeout";
			if (s->why) {
				unlink_session(sv, s);
				s->next = expired;
				expired = s;
			}
		}
		pthread_cond_broadcast(&sv->changed);
		pthread_mutex_unlock(&sv->lock);
		while (expired) {
			struct sv_session *nx = expired->next;
			char why[sizeof expired->run.end_reason];
			snprintf(why, sizeof why, "%s", expired->why);
			close_session(expired, why);
			expired = nx;
		}
	}
}

int rb_serve_new(const struct rb_serve_config *cfg, struct rb_serve **out, struct rb_error *err)
{
	struct rb_serve *sv = calloc(1, sizeof *sv);
	if (!sv)
		return rb_error_set(err, ENOMEM, "serve");
	sv->cfg = *cfg;
	pthread_mutex_init(&sv->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sv->changed, &ca);
	pthread_condattr_destroy(&ca);
	sv->epfd = epoll_create1(EPOLL_CLOEXEC);
	sv->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
	if (sv->epfd < 0 || sv->wake < 0 || epoll_ctl(sv->epfd, EPOLL_CTL_ADD, sv->wake, &ev) < 0) {
		rb_error_set(err, errno, "serve: epoll");
		rb_serve_free(sv);
		return -1;
	}
	struct rb_paths paths;
	if (rb_paths_init(&paths, cfg->host, cfg->state_dir, err) < 0 ||
	    /* The known ids first: a connection opened and closed in this process while the
	     * daemon's own is open (rb_ledger_open's open and close of ledger.db) drops that one's
	     * POSIX locks, and the ledger lost the daemon's last commits when it did. */
	    rb_serve_known_load(paths.state_dir, &sv->known, err) < 0 ||
	    rb_ledger_group_open(paths.state_dir, &sv->ledger, err) < 0) {
		rb_serve_free(sv);
		return -1;
	}
	snprintf(sv->store, sizeof sv->store, "%s/artifacts", paths.state_dir);
	int e = pthread_create(&sv->loop, NULL, dispatch_loop, sv);
	if (e) {
		rb_error_set(err, e, "serve: the dispatcher thread");
		rb_serve_free(sv);
		return -1;
	}
	sv->loop_started = true;
	if (cfg->n_pool && rb_serve_pool_start(sv, cfg->pool, cfg->n_pool, cfg->pool_max_age_ms, &sv->pool, err) < 0) {
		rb_serve_free(sv);
		return -1;
	}
	*out = sv;
	return 0;
}

struct rb_serve_known *rb_serve_known(struct rb_serve *sv)
{
	return sv->known;
}

const struct rb_logger *rb_serve_logger(const struct rb_serve *sv)
{
	return sv->cfg.logger;
}

const struct rb_host *rb_serve_host(const struct rb_serve *sv)
{
	return sv->cfg.host;
}

const char *rb_serve_state_dir(const struct rb_serve *sv)
{
	return sv->cfg.state_dir;
}

static void wake(struct rb_serve *sv)
{
	uint64_t one = 1;
	(void)!write(sv->wake, &one, sizeof one);
}

void rb_serve_drain(struct rb_serve *sv)
{
	pthread_mutex_lock(&sv->lock);
	sv->draining = true;
	/* Wait for sessions being made to be listed, so none is left behind (and no claim from
	 * the pool is under way). */
	while (sv->opening) {
		pthread_mutex_unlock(&sv->lock);
		usleep(10000);
		pthread_mutex_lock(&sv->lock);
	}
	/* The pool's members are destroyed, never claimed from now on. */
	struct rb_serve_pool *pool = sv->pool;
	sv->pool = NULL;
	pthread_mutex_unlock(&sv->lock);
	rb_serve_pool_stop(pool);
	pthread_mutex_lock(&sv->lock);
	struct sv_session *all = NULL;
	while (sv->sessions) {
		struct sv_session *s = sv->sessions;
		unlink_session(sv, s);
		s->next = all;
		all = s;
	}
	pthread_cond_broadcast(&sv->changed);
	pthread_mutex_unlock(&sv->lock);
	while (all) {
		struct sv_session *nx = all->next;
		close_session(all, "daemon stopped");
		all = nx;
	}
}

void rb_serve_free(struct rb_serve *sv)
{
	if (!sv)
		return;
	if (sv->loop_started) {
		rb_serve_drain(sv);
		pthread_mutex_lock(&sv->lock);
		sv->stop = true;
		pthread_mutex_unlock(&sv->lock);
		wake(sv);
		pthread_join(sv->loop, NULL);
	}
	rb_serve_pool_stop(sv->pool);      /* when rb_serve_new failed before a drain */
	rb_ledger_group_close(sv->ledger); /* every session's end is committed by now */
	rb_serve_known_free(sv->known);
	if (sv->epfd >= 0)
		close(sv->epfd);
	if (sv->wake >= 0)
		close(sv->wake);
	pthread_cond_destroy(&sv->changed);
	pthread_mutex_destroy(&sv->lock);
	free(sv);
}

static json_t *session_json(const struct sv_session *s)
{
	unsigned running = 0;
	for (unsigned i = 0; i < s->n_procs; i++)
		running += s->procs[i].p && !rb_proc_done(s->procs[i].p);
	json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "id", s->id, "run_id", s->run.id,
	                      "image", s->run.image.name, "policy", s->run.policy.name, "tenant", s->run.tenant,
	                      "agent", s->run.agent, "processes", (json_int_t)s->n_procs, "running",
	                      (json_int_t)running, "idle_timeout_ms", (json_int_t)s->idle_ms);
	json_object_set_new(o, "max_lifetime_ms", json_integer((json_int_t)s->lifetime_ms));
	json_object_set_new(o, "pooled", json_boolean(s->pooled));
	json_object_set_new(o, "labels", s->labels ? json_incref(s->labels) : json_object());
	if (s->agent_version[0])
		json_object_set_new(o, "agent_version", json_string(s->agent_version));
	json_object_set_new(o, "limits",
	                    json_pack("{s:I, s:I, s:f, s:I}", "memory_bytes", (json_int_t)s->run.limits.memory_bytes,
	                              "pids", (json_int_t)s->run.limits.pids, "cpus", s->run.limits.cpus, "timeout_ms",
	                              (json_int_t)s->run.timeout_ms));
	return o;
}

/* Caller holds the lock: sessions listed and being made, in all and of tenant. */
static void count_sessions(const struct rb_serve *sv, const char *tenant, unsigned *total, unsigned *of_tenant)
{
	*total = sv->n_sessions + sv->opening;
	*of_tenant = 0;
	for (const struct sv_session *s = sv->sessions; s; s = s->next)
		*of_tenant += !strcmp(s->run.tenant, tenant);
	for (const struct opening *o = sv->openings; o; o = o->next)
		*of_tenant += !strcmp(o->tenant, tenant);
}

/* A cold session: its run opened with what the create asked for, recorded, its sandbox made. */
static int open_cold(struct rb_serve *sv, struct sv_session *s, const json_t *body, const struct rb_serve_ask *ask,
                     const struct rb_serve_manifest *man, const char *tenant, const char *agent, struct rb_error *err)
{
	struct rb_run_config cfg = {.image = json_string_value(json_object_get(body, "image")),
	                            .policy = json_string_value(json_object_get(body, "policy")),
	                            .state_dir = sv->cfg.state_dir,
	                            .tenant = tenant,
	                            .agent = agent,
	                            .timeout_ms = ask->timeout_ms,
	                            .memory_bytes = ask->memory_bytes,
	                            .pids = ask->pids,
	                            .cpus = ask->cpus,
	                            .net_mode = -1,
	                            .cancel_fd = -1,
	                            .factory = sv->cfg.factory,
	                            .host = sv->cfg.host,
	                            /* The manifest's inputs and skills: the policy's inputs.allow
	                             * decides them here (403 naming the path), as for `runbox run`. */
	                            .input_reqs = man->inputs,
	                            .n_inputs = man->n_inputs,
	                            .skill_dirs = man->skill_dirs,
	                            .skill_names = man->skill_names,
	                            .n_skills = man->n_skills};
	/* Limits above the policy's are refused here, naming both (SPEC "Who may say what"). */
	if (rb_run_open(&cfg, &s->run, err) < 0)
		return rb_error_kind_of(err) != RB_ERR_FORBIDDEN &&
		               (ask->memory_bytes || ask->pids || ask->timeout_ms || ask->cpus > 0)
		           ? rb_error_prefix(err, "$.limits")
		           : -1;
	return 0;
}

static void drop_session(struct sv_session *s, bool opened, bool recording)
{
	if (opened)
		rb_session_close(s->s);
	if (recording) {
		struct rb_error e2;
		if (rb_record_run_end(&s->rec, "failure", &e2) < 0 ||
		    rb_record_flush(&s->rec, RB_RECORD_DURABLE, &e2) < 0)
			rb_warn("ledger: %s", e2.msg);
		rb_record_close(&s->rec);
	}
	rb_run_close(&s->run);
	free_strv(s->env);
	json_decref(s->labels);
	json_decref(s->ephemeral);
	free(s);
}

/* A new session's /workspace from the snapshot asked for, before its 201: when that fails, the
 * session is closed and the hydrate's error is the answer. */
static unsigned hydrate_new(struct rb_serve *sv, const char *sid, const char *ref, const struct rb_serve_manifest *man,
                            json_t **reply)
{
	json_t *h = NULL;
	unsigned st = ref ? rb_serve_hydrate_ref(sv, sid, ref, NULL, &h) : 200;
	if (st == 200 && ref)
		json_object_set_new(*reply, "hydrated", h);
	/* The manifest after the snapshot: its entries are what the create asked for now. */
	if (st == 200 && man->src && (st = rb_serve_manifest_apply(sv, sid, man, &h)) == 200)
		json_object_set_new(*reply, "manifest", h);
	if (st == 200)
		return 201;
	json_t *d = NULL;
	rb_serve_session_delete(sv, sid, &d);
	json_decref(d);
	json_decref(*reply);
	*reply = h;
	return st;
}

unsigned rb_serve_session_create(struct rb_serve *sv, const json_t *body, json_t **reply)
{
	static const struct field f[] = {{"image", 's', false},
	                                 {"policy", 's', false},
	                                 {"tenant", 's', false},
	                                 {"agent", 's', false},
	                                 {"idle_timeout", 'd', false},
	                                 {"env", 'o', false},
	                                 {"labels", '*', false},
	                                 {"agent_version", '*', false},
	                                 {"limits", '*', false},
	                                 {"max_lifetime", '*', false},
	                                 {"snapshot", 's', false},
	                                 {"manifest", 'o', false},
	                                 {NULL, 0, false}};
	struct rb_error err;
	rb_error_clear(&err);
	uint64_t idle = 0;
	struct rb_serve_ask ask = {0};
	if (check_body(body, f, &err) < 0 || plain_name(json_object_get(body, "image"), "$.image", &err) < 0 ||
	    plain_name(json_object_get(body, "policy"), "$.policy", &err) < 0 ||
	    id_field(json_object_get(body, "tenant"), "$.tenant", &err) < 0 ||
	    id_field(json_object_get(body, "agent"), "$.agent", &err) < 0 ||
	    duration_ms(json_object_get(body, "idle_timeout"), "$.idle_timeout", &idle, &err) < 0 ||
	    rb_serve_ask_parse(body, &ask, &err) < 0) {
		rb_serve_ask_free(&ask);
		return rb_serve_error(&err, reply);
	}
	const char *snap = json_string_value(json_object_get(body, "snapshot"));
	if (snap && (strncmp(snap, "sha256:", 7) != 0 || !rb_artifact_digest_valid(snap))) {
		rb_serve_ask_free(&ask);
		return fail(reply, RB_ERR_INPUT, "request body: $.snapshot: a reference \"sha256:<64 hex>\", not `%s`",
		            snap);
	}
	char **env = NULL;
	size_t n_env = 0;
	if (json_object_get(body, "env") && env_vector(json_object_get(body, "env"), "$.env", &env, &n_env, &err) < 0) {
		rb_serve_ask_free(&ask);
		return rb_serve_error(&err, reply);
	}
	_cleanup_serve_manifest_ struct rb_serve_manifest man = {0};
	if (json_object_get(body, "manifest") &&
	    rb_serve_manifest_parse(json_object_get(body, "manifest"), true, &man, &err) < 0) {
		free_strv(env);
		rb_serve_ask_free(&ask);
		return rb_serve_error(&err, reply);
	}
	const char *tenant = json_string_value(json_object_get(body, "tenant"));
	const char *agent = json_string_value(json_object_get(body, "agent"));
	const char *image = json_string_value(json_object_get(body, "image"));
	const char *policy = json_string_value(json_object_get(body, "policy"));
	tenant = tenant ? tenant : "local";
	agent = agent ? agent : "serve";
	image = image ? image : "host";
	policy = policy ? policy : "default";

	struct opening me = {.tenant = tenant};
	pthread_mutex_lock(&sv->lock);
	unsigned total, of_tenant, st = 0;
	count_sessions(sv, tenant, &total, &of_tenant);
	bool draining = sv->draining;
	if (!draining)
		st = rb_serve_quota_check(total, max_total(sv), of_tenant, max_of_tenant(sv), tenant, &err);
	if (!draining && !st) {
		sv->opening++;
		me.next = sv->openings;
		// cppcheck-suppress autoVariables ; unlinked below, before this call returns
		sv->openings = &me;
	}
	pthread_mutex_unlock(&sv->lock);
	if (draining || st) {
		free_strv(env);
		rb_serve_ask_free(&ask);
		if (draining)
			return fail(reply, RB_ERR_HOST, "runbox serve is stopping: no new sessions");
		rb_serve_error(&err, reply);
		return st;
	}

	/* Made outside the lock: nobody else can see it before it is listed. A create that asks
	 * for the policy's own limits takes a warm member of its pair when one is ready; it is
	 * bound to its owner now, and only now holds anything of one. */
	uint64_t age_ms = 0;
	/* A member has no input or skill mounted: a manifest naming one makes its sandbox cold. */
	bool mounts = man.n_inputs || man.n_skills;
	struct sv_session *s =
	    rb_serve_ask_poolable(&ask) && !mounts ? rb_serve_pool_claim(sv->pool, image, policy, &age_ms) : NULL;
	bool pooled = s != NULL, opened = pooled, recording = false;
	int r = 0;
	if (pooled)
		r = rb_session_bind(s->s, &(struct rb_session_owner){.tenant = tenant, .agent = agent}, &err);
	else if (!(s = calloc(1, sizeof *s))) {
		rb_error_set(&err, ENOMEM, "session");
		r = -1;
	} else
		r = open_cold(sv, s, body, &ask, &man, tenant, agent, &err);
	if (s) {
		s->env = env;
		s->n_env = n_env;
		s->labels = ask.labels;
		ask.labels = NULL;
		s->pooled = pooled;
		s->lifetime_ms = ask.lifetime_ms;
		snprintf(s->agent_version, sizeof s->agent_version, "%s", ask.agent_version ? ask.agent_version : "");
	} else {
		free_strv(env);
	}
	rb_serve_ask_free(&ask);
	if (r == 0 && rb_random_hex(s->id, sizeof s->id) < 0)
		r = rb_error_set(&err, errno, "getrandom: session id");
	if (r == 0) {
		r = rb_record_open(&s->rec, &s->run, &err);
		recording = r == 0;
		s->rec.group = sv->ledger;
		s->rec.labels = s->labels;
		s->rec.pooled = pooled;
		s->rec.session = s->id;
	}
	if (r == 0)
		r = rb_record_run_start(&s->rec, s->agent_version[0] ? s->agent_version : NULL, NULL, &err);
	if (r == 0 && pooled)
		r = rb_record_pool_claim(&s->rec, image, policy, age_ms, &err);
	if (r == 0)
		r = rb_record_flush(&s->rec, RB_RECORD_DURABLE, &err);
	if (r == 0)
		r = rb_serve_known_add(sv->known, s->id, tenant, &err);
	if (r == 0 && !pooled) {
		r = rb_session_open(&s->run, &s->s, &err);
		opened = r == 0;
	}
	/* Ready before it is listed: file calls need the sandbox's /workspace, and a dispatch
	 * must not meet init's `ready` as a report. */
	if (r == 0 && !pooled)
		r = rb_session_ready(s->s, &err);
	pthread_mutex_lock(&sv->lock);
	sv->opening--;
	for (struct opening **pp = &sv->openings; *pp; pp = &(*pp)->next)
		if (*pp == &me) {
			*pp = me.next;
			break;
		}
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
	if (r == 0 && epoll_ctl(sv->epfd, EPOLL_CTL_ADD, rb_session_fd(s->s), &ev) < 0)
		r = rb_error_set(&err, errno, "serve: epoll");
	if (r == 0) {
		s->watched = true;
		s->idle_ms = idle;
		s->created_us = s->last_us = rb_now_us();
		s->next = sv->sessions;
		sv->sessions = s;
		sv->n_sessions++;
		*reply = session_json(s);
		rb_info("session %s opened: run %s, init pid %d%s", s->id, s->run.id, (int)s->run.sb.init_pid,
		        pooled ? ", from the warm pool" : "");
	}
	char made[ID_HEX] = "";
	if (r == 0)
		memcpy(made, s->id, sizeof made); /* s is another thread's to close once listed */
	pthread_mutex_unlock(&sv->lock);
	if (r == 0) {
		wake(sv);
		return hydrate_new(sv, made, snap, &man, reply);
	}
	st = rb_serve_error(&err, reply);
	if (s)
		drop_session(s, opened, recording);
	return st;
}

struct sv_session *rb_serve_member_make(struct rb_serve *sv, const char *image, const char *policy,
                                        struct rb_error *err)
{
	struct sv_session *m = calloc(1, sizeof *m);
	if (!m) {
		rb_error_set(err, ENOMEM, "pool member");
		return NULL;
	}
	/* No tenant, agent, token, env, input or label: an unbound run (rb_session_bind). */
	struct rb_run_config cfg = {.image = image,
	                            .policy = policy,
	                            .state_dir = sv->cfg.state_dir,
	                            .unbound = true,
	                            .net_mode = -1,
	                            .cancel_fd = -1,
	                            .factory = sv->cfg.factory,
	                            .host = sv->cfg.host};
	bool opened = false;
	int r = rb_run_open(&cfg, &m->run, err);
	if (r == 0) {
		r = rb_session_open(&m->run, &m->s, err);
		opened = r == 0;
	}
	if (r == 0)
		r = rb_session_ready(m->s, err);
	if (r == 0)
		return m;
	if (opened)
		rb_session_close(m->s);
	rb_run_close(&m->run);
	free(m);
	return NULL;
}

void rb_serve_member_destroy(struct sv_session *m)
{
	rb_session_close(m->s);
	rb_run_close(&m->run);
	free(m);
}

bool rb_serve_member_alive(const struct sv_session *m)
{
	struct pollfd pfd = {.fd = m->run.sb.pidfd, .events = POLLIN};
	return !m->run.sb.reaped && m->run.sb.pidfd >= 0 && poll(&pfd, 1, 0) == 0;
}

unsigned rb_serve_session_list_tenant(struct rb_serve *sv, const char *tenant, json_t **reply)
{
	json_t *a = json_array();
	pthread_mutex_lock(&sv->lock);
	for (struct sv_session *s = sv->sessions; s; s = s->next)
		if (!tenant || !strcmp(s->run.tenant, tenant))
			json_array_append_new(a, session_json(s));
	pthread_mutex_unlock(&sv->lock);
	*reply = json_pack("{s:o}", "sessions", a);
	return 200;
}

unsigned rb_serve_session_list(struct rb_serve *sv, json_t **reply)
{
	return rb_serve_session_list_tenant(sv, NULL, reply);
}

int rb_serve_session_tenant(struct rb_serve *sv, const char *sid, char *out, size_t len)
{
	pthread_mutex_lock(&sv->lock);
	const struct sv_session *s = find(sv, sid);
	if (s)
		snprintf(out, len, "%s", s->run.tenant);
	pthread_mutex_unlock(&sv->lock);
	return s ? 0 : -1;
}

unsigned rb_serve_stats(struct rb_serve *sv, json_t **reply)
{
	struct rb_ledger_group_stats ls;
	rb_ledger_group_stats(sv->ledger, &ls);
	pthread_mutex_lock(&sv->lock);
	json_t *tenants = json_object();
	for (const struct sv_session *s = sv->sessions; s; s = s->next) {
		json_t *n = json_object_get(tenants, s->run.tenant);
		json_object_set_new(tenants, s->run.tenant, json_integer(n ? json_integer_value(n) + 1 : 1));
	}
	json_t *pool = rb_serve_pool_json(sv->pool);
	uint64_t snap_max = 0;
	json_t *snaps = rb_serve_known_snapshot_usage(sv->known, sv->store, &snap_max);
	*reply = json_pack("{s:I, s:I, s:o, s:o, s:{s:I, s:I, s:I, s:I}, s:{s:I, s:I}}", "sessions",
	                   (json_int_t)sv->n_sessions, "opening", (json_int_t)sv->opening, "tenants", tenants, "pool",
	                   pool, "ledger", "commits", (json_int_t)ls.commits, "batches", (json_int_t)ls.batches,
	                   "events", (json_int_t)ls.events, "failed", (json_int_t)ls.failed, "limits", "max_sessions",
	                   (json_int_t)max_total(sv), "max_sessions_per_tenant", (json_int_t)max_of_tenant(sv));
	json_object_set_new(*reply, "snapshots", snaps);
	json_object_set_new(json_object_get(*reply, "limits"), "max_snapshot_bytes_per_tenant",
	                    json_integer((json_int_t)snap_max));
	pthread_mutex_unlock(&sv->lock);
	return 200;
}

unsigned rb_serve_session_get(struct rb_serve *sv, const char *sid, json_t **reply)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	unsigned st = s ? 200 : fail(reply, RB_ERR_NOT_FOUND, "no session `%s`", sid);
	if (s) {
		*reply = session_json(s);
		json_t *procs = json_array();
		for (unsigned i = 0; i < s->n_procs; i++)
			if (s->procs[i].p)
				json_array_append_new(procs, json_pack("{s:s, s:b}", "id", s->procs[i].id, "exited",
				                                       rb_proc_done(s->procs[i].p)));
		json_object_set_new(*reply, "process_list", procs);
	}
	pthread_mutex_unlock(&sv->lock);
	return st;
}

unsigned rb_serve_session_delete(struct rb_serve *sv, const char *sid, json_t **reply)
{
	return rb_serve_session_close(sv, sid, "deleted", reply);
}

unsigned rb_serve_session_close(struct rb_serve *sv, const char *sid, const char *reason, json_t **reply)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	if (s)
		unlink_session(sv, s);
	pthread_cond_broadcast(&sv->changed);
	pthread_mutex_unlock(&sv->lock);
	if (!s)
		return fail(reply, RB_ERR_NOT_FOUND, "no session `%s`", sid);
	char id[ID_HEX];
	memcpy(id, s->id, sizeof id);
	close_session(s, reason);
	*reply = json_pack("{s:s, s:b}", "id", id, "closed", 1);
	return 200;
}

/* The host ids the daemon acts as on the sandbox's files (as root, where they are not its own):
 * those of /workspace's owner, the policy's user (the sandbox's root for `default`, its uid
 * 1000 for `strict`), so a file call may do what the session's processes may and what it makes
 * is theirs; the sandbox's root when /workspace's ids are none of the sandbox's. */
static bool sandbox_file_ids(const struct rb_run *run, int ws, uid_t *uid, gid_t *gid)
{
	if (!rb_run_sandbox_root_ids(run, uid, gid))
		return false;
	struct stat st;
	if (fstat(ws, &st) == 0 && rb_run_ids_in_sandbox(run, st.st_uid, st.st_gid))
		*uid = st.st_uid, *gid = st.st_gid;
	return true;
}

int rb_serve_sandbox(struct rb_serve *sv, const char *sid, struct rb_serve_fs *fs, struct rb_error *err)
{
	memset(fs, 0, sizeof *fs);
	fs->root = fs->ws = -1;
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	if (!s) {
		pthread_mutex_unlock(&sv->lock);
		return rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no session `%s`", sid);
	}
	int r = 0;
	if (s->run.sb.root_fd < 0 || s->run.sb.workspace_fd < 0 || s->run.sb.reaped)
		r = rb_error_setk(err, RB_ERR_CONFLICT, 0, "session %s: its sandbox is not up", sid);
	else if ((fs->root = fcntl(s->run.sb.root_fd, F_DUPFD_CLOEXEC, 3)) < 0 ||
	         (fs->ws = fcntl(s->run.sb.workspace_fd, F_DUPFD_CLOEXEC, 3)) < 0)
		r = rb_error_set(err, errno, "session %s: dup its root", sid);
	if (r == 0) {
		fs->as_ids = sandbox_file_ids(&s->run, fs->ws, &fs->uid, &fs->gid);
		snprintf(fs->state_dir, sizeof fs->state_dir, "%s", s->run.paths.state_dir);
		snprintf(fs->tenant, sizeof fs->tenant, "%s", s->run.tenant);
		s->last_us = rb_now_us();
	}
	pthread_mutex_unlock(&sv->lock);
	if (r < 0)
		rb_serve_fs_release(fs);
	return r;
}

int rb_serve_sandbox_writer(struct rb_serve *sv, const char *sid, struct rb_error *err)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	int r;
	if (!s) {
		r = rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no session `%s`", sid);
	} else {
		r = s->has_writer ? s->writer : -1;
		s->has_writer = false;
		/* The idle one, unless it ended meanwhile (killed from inside the sandbox): an idle
		 * writer's socket has nothing to read and no hangup. */
		struct pollfd pf = {.fd = r, .events = POLLIN};
		if (r >= 0 && poll(&pf, 1, 0) != 0) {
			close(r);
			r = -1;
		}
		if (r < 0)
			r = rb_session_writer(s->s, err);
	}
	pthread_mutex_unlock(&sv->lock);
	return r;
}

void rb_serve_sandbox_writer_done(struct rb_serve *sv, const char *sid, int writer)
{
	/* It lets its last file go first: nothing of the sandbox's stays open in an idle one. */
	struct rb_error err;
	if (rb_writer_release(writer, &err) < 0) {
		close(writer);
		return;
	}
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	if (s && !s->has_writer) {
		s->writer = writer;
		s->has_writer = true;
		writer = -1;
	}
	pthread_mutex_unlock(&sv->lock);
	if (writer >= 0)
		close(writer);
}

void rb_serve_fs_release(struct rb_serve_fs *fs)
{
	if (fs->root >= 0)
		close(fs->root);
	if (fs->ws >= 0)
		close(fs->ws);
	fs->root = fs->ws = -1;
}

int rb_serve_ports_call(struct rb_serve *sv, const char *sid, rb_serve_ports_fn fn, void *arg, struct rb_error *err)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	int r = s ? 0 : rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no session `%s`", sid);
	if (s) {
		bool up = !s->run.sb.reaped && s->run.sb.net.netns_fd >= 0;
		struct rb_serve_ports_at at = {up ? s->run.sb.net.netns_fd : -1, s->run.paths.state_dir, 0};
		for (struct sv_session *o = sv->sessions; o; o = o->next)
			if (!strcmp(o->run.tenant, s->run.tenant))
				at.tenant_ports += rb_serve_ports_count(o->ports);
		r = fn(&s->ports, &at, arg, err);
		s->last_us = rb_now_us();
	}
	pthread_mutex_unlock(&sv->lock);
	return r;
}

int rb_serve_record(struct rb_serve *sv, const char *sid, const char *type, json_t *data, struct rb_error *err)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	int r = s ? 0 : rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no session `%s`", sid);
	if (!s)
		json_decref(data);
	struct rb_ledger_ticket *t = NULL;
	if (s && (rb_record_event(&s->rec, type, data, err) < 0 || rb_record_submit(&s->rec, &t, err) < 0))
		r = rb_error_prefix(err, "ledger");
	pthread_mutex_unlock(&sv->lock);
	/* Durable before the reply, waited for with no lock held (as rb_serve_record_file). */
	if (r == 0 && t && rb_ledger_group_wait(t, err) != 0)
		r = rb_error_prefix(err, "ledger");
	return r;
}

int rb_serve_record_file(struct rb_serve *sv, const char *sid, const char *type, const char *path, uint64_t size,
                         const char *sha256, struct rb_error *err)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	struct rb_ledger_ticket *t = NULL;
	int r = s ? 0 : rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no session `%s`", sid);
	if (s && (rb_record_file(&s->rec, type, path, size, sha256, err) < 0 || rb_record_submit(&s->rec, &t, err) < 0))
		r = rb_error_prefix(err, "ledger");
	pthread_mutex_unlock(&sv->lock);
	/* Durable before the reply, waited for with no lock held: other calls' events share the
	 * commit. */
	if (r == 0 && t && rb_ledger_group_wait(t, err) != 0)
		r = rb_error_prefix(err, "ledger");
	return r;
}

/* Frees the oldest ended processes beyond KEEP_DONE (their end recorded already). */
static void trim_done(struct sv_session *s)
{
	unsigned done = 0;
	for (unsigned i = s->n_procs; i-- > 0;) {
		struct sv_proc *p = &s->procs[i];
		if (!p->p || !rb_proc_done(p->p) || !p->end_recorded)
			continue;
		if (++done > KEEP_DONE) {
			rb_proc_free(p->p);
			p->p = NULL;
		}
	}
}

/* The argv or script of body, checked: argv a non-empty array of strings. */
static int proc_argv(const json_t *body, char ***argv, struct rb_error *err)
{
	struct rb_jsonck ck = {"request", "body", err};
	json_t *a = json_object_get(body, "argv");
	json_t *sc = json_object_get(body, "script");
	*argv = NULL;
	if (!a == !sc)
		return rb_jsonck_bad(&ck, "$", "exactly one of `argv` and `script`");
	if (sc)
		return 0;
	if (!json_array_size(a))
		return rb_jsonck_bad(&ck, "$.argv", "an empty command");
	*argv = calloc(json_array_size(a) + 1, sizeof **argv);
	if (!*argv)
		return rb_error_set(err, ENOMEM, "argv");
	size_t i;
	json_t *v;
	json_array_foreach(a, i, v)
	{
		char p[48];
		snprintf(p, sizeof p, "$.argv[%zu]", i);
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
			free_strv(*argv);
			*argv = NULL;
			return rb_jsonck_expected(&ck, p, "a string without NUL", v);
		}
		(*argv)[i] = strdup(json_string_value(v));
	}
	return 0;
}

/* A terminal's size {rows, cols} at path: exactly those keys, each an integer 1-65535. */
static int tty_size_json(const json_t *v, const char *path, struct rb_tty_size *out, struct rb_error *err)
{
	struct rb_jsonck ck = {"request", "body", err};
	if (!json_is_object(v))
		return rb_jsonck_expected(&ck, path, "an object {rows, cols}", v);
	const char *k;
	json_t *x;
	json_object_foreach((json_t *)v, k, x)
	{
		if (strcmp(k, "rows") != 0 && strcmp(k, "cols") != 0)
			return rb_jsonck_bad(&ck, "", "unknown key `%s.%s`", path, k);
	}
	static const char *const keys[] = {"rows", "cols"};
	uint16_t got[2];
	for (int i = 0; i < 2; i++) {
		char p[64];
		snprintf(p, sizeof p, "%s.%s", path, keys[i]);
		x = json_object_get(v, keys[i]);
		if (!x)
			return rb_jsonck_bad(&ck, p, "missing");
		if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 65535)
			return rb_jsonck_expected(&ck, p, "an integer from 1 to 65535", x);
		got[i] = (uint16_t)json_integer_value(x);
	}
	*out = (struct rb_tty_size){got[0], got[1]};
	return 0;
}

/* A start's `size`: only with `tty: true`. */
static int proc_tty_size(const json_t *body, bool tty, struct rb_tty_size *out, struct rb_error *err)
{
	json_t *v = json_object_get(body, "size");
	if (!v)
		return 0;
	if (!tty) {
		struct rb_jsonck ck = {"request", "body", err};
		return rb_jsonck_bad(&ck, "$.size", "a terminal's size needs `tty: true`");
	}
	return tty_size_json(v, "$.size", out, err);
}

unsigned rb_serve_proc_start(struct rb_serve *sv, const char *sid, const json_t *body, json_t **reply)
{
	static const struct field f[] = {{"argv", 'a', false}, {"script", 's', false},  {"cwd", 's', false},
	                                 {"env", 'o', false},  {"timeout", 'd', false}, {"stdin", 'b', false},
	                                 {"tty", 'b', false},  {"size", 'o', false},    {NULL, 0, false}};
	struct rb_error err;
	rb_error_clear(&err);
	char **argv = NULL, **penv = NULL;
	size_t n_penv = 0;
	uint64_t timeout = 0;
	const char *cwd = json_string_value(json_object_get(body, "cwd"));
	if (check_body(body, f, &err) < 0 || proc_argv(body, &argv, &err) < 0 ||
	    duration_ms(json_object_get(body, "timeout"), "$.timeout", &timeout, &err) < 0 ||
	    (json_object_get(body, "env") &&
	     env_vector(json_object_get(body, "env"), "$.env", &penv, &n_penv, &err) < 0))
		goto bad;
	struct rb_tty_size tty_size = {0, 0};
	bool tty = json_is_true(json_object_get(body, "tty"));
	if (proc_tty_size(body, tty, &tty_size, &err) < 0)
		goto bad;
	if (cwd && cwd[0] != '/') {
		struct rb_jsonck ck = {"request", "body", &err};
		rb_jsonck_bad(&ck, "$.cwd", "an absolute path inside the sandbox, not `%s`", cwd);
		goto bad;
	}
	/* The recorded text: the argv as JSON, or the script exactly. */
	const char *script = json_string_value(json_object_get(body, "script"));
	char *text = script ? strdup(script) : json_dumps(json_object_get(body, "argv"), JSON_COMPACT);
	if (!text) {
		rb_error_set(&err, ENOMEM, "the command's record");
		goto bad;
	}
	/* Under the lock: a slot and the step_start, queued for the ledger. Without it: the wait
	 * for its commit. Under the lock again: the start, while the commit's fsync (which
	 * concurrent calls share) runs; the reply waits for that. */
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	struct rb_ledger_ticket *t = NULL;
	unsigned st = 0, slot = 0;
	char proc_id[ID_HEX] = "";
	if (!s) {
		st = fail(reply, RB_ERR_NOT_FOUND, "no session `%s`", sid);
	} else if (record_ends(s), trim_done(s), s->n_procs >= MAX_PROCS) {
		st = fail(reply, RB_ERR_CONFLICT, "session %s: at most %d processes in a session's life", s->id,
		          MAX_PROCS);
	} else {
		slot = s->n_procs;
		struct sv_proc *p = &s->procs[slot];
		memset(p, 0, sizeof *p);
		p->step = slot + 1;
		/* Written before it starts, so what ran is never missing from the ledger after a
		 * crash of the daemon; durable (fsync'd) before the reply, the same fsync overlapping
		 * the start. A host crash in between loses the process and its record together:
		 * whatever it sent out went through the gateway, which records durably before a
		 * byte leaves. */
		int r = rb_random_hex(proc_id, sizeof proc_id) == 0 ? 0 : rb_error_set(&err, errno, "getrandom");
		if (r == 0)
			r = rb_record_step_start(&s->rec, p->step, NULL, script ? "script" : "command", text,
			                         strlen(text), NULL, NULL, &err);
		if (r == 0)
			r = rb_record_submit(&s->rec, &t, &err);
		if (r < 0)
			st = rb_serve_error(&err, reply);
		else
			s->n_procs++; /* the slot is this call's; no handle in it yet, so no other call sees it */
	}
	pthread_mutex_unlock(&sv->lock);
	if (!st && t && rb_ledger_group_wait_written(t, &err) != 0)
		st = rb_serve_error(&err, reply);
	pthread_mutex_lock(&sv->lock);
	s = st ? NULL : find(sv, sid); /* it may have closed meanwhile */
	if (!st && !s)
		st = fail(reply, RB_ERR_NOT_FOUND, "session `%s` closed while its process was recorded", sid);
	if (s) {
		size_t ne = 0;
		char **env = calloc(s->n_env + n_penv + 1, sizeof *env);
		for (size_t i = 0; env && i < s->n_env; i++)
			env[ne++] = s->env[i];
		for (size_t i = 0; env && i < n_penv; i++)
			env[ne++] = penv[i];
		struct sv_proc *p = &s->procs[slot];
		memcpy(p->id, proc_id, sizeof p->id);
		struct rb_proc_req req = {.argv = argv,
		                          .script = script,
		                          .cwd = cwd,
		                          .env = ne ? env : NULL,
		                          .timeout_ms = timeout,
		                          .stdin_pipe = json_is_true(json_object_get(body, "stdin")),
		                          .tty = tty,
		                          .tty_size = tty_size,
		                          .keep_chunks = true};
		int r = env ? 0 : rb_error_set(&err, ENOMEM, "process");
		if (r == 0)
			r = rb_proc_start(s->s, &req, &p->p, &err);
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
		if (r == 0 && !s->watched) {
			if (epoll_ctl(sv->epfd, EPOLL_CTL_ADD, rb_session_fd(s->s), &ev) < 0)
				rb_warn("session %s: epoll: %s", s->id, strerror(errno));
			else
				s->watched = true;
		}
		free(env);
		if (r < 0) {
			st = rb_serve_error(&err, reply);
		} else {
			s->last_us = rb_now_us();
			*reply = json_pack("{s:s, s:s}", "id", p->id, "session", s->id);
			st = 201;
		}
	}
	pthread_mutex_unlock(&sv->lock);
	wake(sv);
	/* The fsync of the step_start. Should it fail, the process is killed and the call fails:
	 * nothing is said to have started that the ledger may not keep. */
	if (t && rb_ledger_group_wait(t, st == 201 ? &err : NULL) != 0 && st == 201) {
		pthread_mutex_lock(&sv->lock);
		struct sv_session *ks = find(sv, sid);
		struct sv_proc *kp = ks ? find_proc(ks, proc_id) : NULL;
		if (kp)
			rb_proc_signal(kp->p, SIGKILL, NULL);
		pthread_mutex_unlock(&sv->lock);
		json_decref(*reply);
		st = rb_serve_error(&err, reply);
	}
	free(text);
	free_strv(argv);
	free_strv(penv);
	return st;
bad:
	free_strv(argv);
	free_strv(penv);
	return rb_serve_error(&err, reply);
}

static json_t *result_json(struct rb_proc *p)
{
	const struct rb_step_result *res = rb_proc_result(p);
	json_t *o = json_object();
	static const char *const names[] = {"exited",    "signaled",     "timeout",
	                                    "cancelled", "setup_failed", "exec_failed"};
	json_object_set_new(o, "status", json_string(names[res->status]));
	rb_result_step_fields(o, res);
	json_object_set_new(o, "exit", json_integer(rb_step_exit_code(res)));
	return o;
}

static json_t *proc_json(const struct sv_proc *p)
{
	bool done = rb_proc_done(p->p);
	json_t *o = json_pack("{s:s, s:s, s:I}", "id", p->id, "state", done ? "exited" : "running", "pid",
	                      (json_int_t)rb_proc_pid(p->p));
	if (done)
		json_object_set_new(o, "result", result_json(p->p));
	return o;
}

/* Looks up sid/pid under the lock (held by the caller); a 404 into reply when either is gone. */
static struct sv_proc *lookup(struct rb_serve *sv, const char *sid, const char *pid, struct sv_session **sp,
                              json_t **reply, unsigned *st)
{
	struct sv_session *s = find(sv, sid);
	struct sv_proc *p = s ? find_proc(s, pid) : NULL;
	if (!s)
		*st = fail(reply, RB_ERR_NOT_FOUND, "no session `%s`", sid);
	else if (!p)
		*st = fail(reply, RB_ERR_NOT_FOUND, "no process `%s` in the session", pid);
	else
		s->last_us = rb_now_us();
	*sp = s;
	return p;
}

/* A call on a live process recorded, durably, before it acts: the step it is for, what it
 * does (data, consumed). Looked up under the lock, waited for without it; 0, or the reply's
 * status with *reply set. */
static unsigned record_proc_call(struct rb_serve *sv, const char *sid, const char *pid, const char *type, json_t *data,
                                 json_t **reply)
{
	unsigned st = 0;
	struct sv_session *s;
	struct rb_ledger_ticket *t = NULL;
	struct rb_error err;
	rb_error_clear(&err);
	pthread_mutex_lock(&sv->lock);
	struct sv_proc *p = lookup(sv, sid, pid, &s, reply, &st);
	if (p) {
		json_object_set_new(data, "step", json_integer(p->step));
		json_object_set_new(data, "process", json_string(p->id));
		if (rb_record_event(&s->rec, type, data, &err) < 0 || rb_record_submit(&s->rec, &t, &err) < 0)
			st = rb_serve_error(&err, reply);
		data = NULL;
	}
	pthread_mutex_unlock(&sv->lock);
	json_decref(data);
	if (t && rb_ledger_group_wait(t, &err) != 0 && !st)
		st = rb_serve_error(&err, reply);
	return st;
}

unsigned rb_serve_proc_get(struct rb_serve *sv, const char *sid, const char *pid, json_t **reply)
{
	unsigned st = 200;
	struct sv_session *s;
	pthread_mutex_lock(&sv->lock);
	struct sv_proc *p = lookup(sv, sid, pid, &s, reply, &st);
	if (p)
		*reply = proc_json(p);
	pthread_mutex_unlock(&sv->lock);
	return st;
}

static json_t *chunk_json(const struct rb_chunk *c)
{
	json_t *o = json_pack("{s:I, s:s}", "seq", (json_int_t)c->seq, "stream",
	                      c->stream == RB_STREAM_STDERR ? "stderr" : "stdout");
	json_t *text = json_stringn(c->data ? c->data : "", c->len); /* NULL when not UTF-8 */
	if (text) {
		json_object_set_new(o, "data", text);
		return o;
	}
	size_t cap = 4 * ((c->len + 2) / 3) + 1;
	unsigned char *b = malloc(cap);
	if (b) {
		int n = EVP_EncodeBlock(b, (const unsigned char *)c->data, (int)c->len);
		json_object_set_new(o, "data", json_stringn((const char *)b, (size_t)n));
		json_object_set_new(o, "encoding", json_string("base64"));
		free(b);
	}
	return o;
}

static void deadline_at(struct timespec *ts, unsigned ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

unsigned rb_serve_proc_output(struct rb_serve *sv, const char *sid, const char *pid, uint64_t after_seq,
                              unsigned wait_ms, json_t **reply)
{
	if (wait_ms > RB_SERVE_MAX_WAIT_MS)
		wait_ms = RB_SERVE_MAX_WAIT_MS;
	struct timespec until;
	deadline_at(&until, wait_ms);
	unsigned st = 200;
	struct sv_session *s;
	pthread_mutex_lock(&sv->lock);
	for (;;) {
		/* Looked up again after each wait: the session may have closed meanwhile. */
		struct sv_proc *p = lookup(sv, sid, pid, &s, reply, &st);
		if (!p)
			break;
		struct rb_chunk ch[READ_MAX];
		size_t n = rb_proc_read(p->p, after_seq, ch, READ_MAX);
		bool done = rb_proc_done(p->p);
		if (n || done || pthread_cond_timedwait(&sv->changed, &sv->lock, &until) == ETIMEDOUT) {
			if (!n && !done)
				n = rb_proc_read(p->p, after_seq, ch, READ_MAX);
			done = rb_proc_done(p->p);
			json_t *a = json_array();
			uint64_t next = after_seq;
			for (size_t i = 0; i < n; i++) {
				json_array_append_new(a, chunk_json(&ch[i]));
				next = ch[i].seq;
			}
			bool exited = done && n < READ_MAX;
			*reply =
			    json_pack("{s:o, s:I, s:b}", "chunks", a, "next_seq", (json_int_t)next, "exited", exited);
			if (exited)
				json_object_set_new(*reply, "result", result_json(p->p));
			break;
		}
	}
	pthread_mutex_unlock(&sv->lock);
	return st;
}

unsigned rb_serve_proc_stdin(struct rb_serve *sv, const char *sid, const char *pid, const char *data, size_t len,
                             bool close_after, json_t **reply)
{
	/* What goes in is the process's input: its size and sha256 are recorded, not its bytes;
	 * for a terminal (what is typed, passwords too) the size alone. */
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s;
	unsigned st = 200;
	struct sv_proc *p0 = lookup(sv, sid, pid, &s, reply, &st);
	bool tty = p0 && rb_proc_tty(p0->p);
	pthread_mutex_unlock(&sv->lock);
	if (!p0)
		return st;
	json_t *ev = json_pack("{s:I, s:b}", "size", (json_int_t)len, "close", close_after);
	if (!tty) {
		char sha[65];
		rb_sha256_hex(data, len, sha);
		json_object_set_new(ev, "sha256", json_string(sha));
	}
	if ((st = record_proc_call(sv, sid, pid, "process_stdin", ev, reply)) != 0)
		return st;
	st = 200;
	struct timespec until;
	deadline_at(&until, 30000);
	size_t done = 0;
	struct rb_error err;
	rb_error_clear(&err);
	pthread_mutex_lock(&sv->lock);
	for (;;) {
		struct sv_proc *p = lookup(sv, sid, pid, &s, reply, &st);
		if (!p)
			break;
		ssize_t w = done < len ? rb_proc_write(p->p, data + done, len - done, &err) : 0;
		if (w < 0) {
			st = rb_serve_error(&err, reply);
			break;
		}
		done += (size_t)w;
		if (done == len) {
			if (close_after)
				rb_proc_close_stdin(p->p);
			*reply = json_pack("{s:I, s:b}", "written", (json_int_t)done, "closed", close_after);
			break;
		}
		/* The pipe is full: wait for the process to read (the dispatcher runs meanwhile). */
		struct timespec tick;
		deadline_at(&tick, 10);
		pthread_cond_timedwait(&sv->changed, &sv->lock, &tick);
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > until.tv_sec) {
			rb_error_setk(&err, RB_ERR_CONFLICT, 0, "stdin: the process read %zu of %zu bytes in 30 s",
			              done, len);
			st = rb_serve_error(&err, reply);
			json_object_set_new(*reply, "written", json_integer((json_int_t)done));
			break;
		}
	}
	pthread_mutex_unlock(&sv->lock);
	wake(sv);
	return st;
}

static int signal_number(const json_t *v)
{
	static const struct {
		const char *name;
		int sig;
	} t[] = {{"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},   {"HUP", SIGHUP},   {"QUIT", SIGQUIT},
	         {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"STOP", SIGSTOP}, {"CONT", SIGCONT}, {"ALRM", SIGALRM}};
	if (json_is_integer(v))
		return json_integer_value(v) > 0 && json_integer_value(v) < 65 ? (int)json_integer_value(v) : -1;
	const char *s = json_string_value(v);
	if (!s)
		return -1;
	if (!strncmp(s, "SIG", 3))
		s += 3;
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (!strcmp(s, t[i].name))
			return t[i].sig;
	return -1;
}

unsigned rb_serve_proc_signal(struct rb_serve *sv, const char *sid, const char *pid, const json_t *body, json_t **reply)
{
	static const struct field f[] = {{"signal", '*', true}, {NULL, 0, false}};
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_jsonck ck = {"request", "body", &err};
	int sig = -1;
	if (check_body(body, f, &err) < 0 ||
	    ((sig = signal_number(json_object_get(body, "signal"))) < 0 &&
	     rb_jsonck_expected(&ck, "$.signal", "a signal's name (\"TERM\") or number (1-64)",
	                        json_object_get(body, "signal")) < 0))
		return rb_serve_error(&err, reply);
	unsigned st = record_proc_call(sv, sid, pid, "process_signal", json_pack("{s:i}", "signal", sig), reply);
	if (st)
		return st;
	st = 200;
	struct sv_session *s;
	pthread_mutex_lock(&sv->lock);
	struct sv_proc *p = lookup(sv, sid, pid, &s, reply, &st);
	if (p) {
		if (rb_proc_signal(p->p, sig, &err) < 0)
			st = rb_serve_error(&err, reply);
		else
			*reply = json_pack("{s:s, s:i}", "id", p->id, "signal", sig);
	}
	pthread_mutex_unlock(&sv->lock);
	wake(sv);
	return st;
}

unsigned rb_serve_proc_resize(struct rb_serve *sv, const char *sid, const char *pid, const json_t *body, json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	struct rb_tty_size size = {0, 0};
	if (tty_size_json(body, "$", &size, &err) < 0)
		return rb_serve_error(&err, reply);
	unsigned st = 200;
	struct sv_session *s;
	pthread_mutex_lock(&sv->lock);
	struct sv_proc *p = lookup(sv, sid, pid, &s, reply, &st);
	if (p && rb_proc_resize(p->p, size, &err) < 0) {
		/* No terminal, or the process ended: the process's state, not the request, is wrong. */
		if (err.errnum == ENOTTY)
			st = fail(reply, RB_ERR_CONFLICT, "process %s: no terminal (started without `tty: true`)",
			          p->id);
		else if (err.errnum == ESRCH)
			st = fail(reply, RB_ERR_CONFLICT, "process %s: it has ended", p->id);
		else
			st = rb_serve_error(&err, reply);
	} else if (p) {
		*reply = json_pack("{s:s, s:{s:i, s:i}}", "id", p->id, "size", "rows", size.rows, "cols", size.cols);
	}
	pthread_mutex_unlock(&sv->lock);
	return st;
}

/* The NDJSON stream of a process's output: each step gives the lines of the chunks after
 * *after_seq, or its final line once it ended, waiting for either up to wait_ms with the lock
 * released (the dispatcher's broadcast after each round wakes it). */
unsigned rb_serve_proc_stream_step(struct rb_serve *sv, const char *sid, const char *pid, uint64_t *after_seq,
                                   unsigned wait_ms, char **text, size_t *len, bool *end)
{
	struct timespec until;
	deadline_at(&until, wait_ms);
	*text = NULL;
	*len = 0;
	*end = false;
	unsigned st = 200;
	json_t *reply = NULL;
	struct sv_session *s;
	pthread_mutex_lock(&sv->lock);
	for (;;) {
		struct sv_proc *p = lookup(sv, sid, pid, &s, &reply, &st);
		if (!p) {
			/* Gone meanwhile (the session closed): its error is the stream's last line. */
			*end = true;
			break;
		}
		struct rb_chunk ch[READ_MAX];
		size_t n = rb_proc_read(p->p, *after_seq, ch, READ_MAX);
		bool done = rb_proc_done(p->p);
		if (!n && done) {
			reply = json_pack("{s:b, s:I}", "exited", true, "next_seq", (json_int_t)*after_seq);
			json_object_set_new(reply, "result", result_json(p->p));
			*end = true;
			break;
		}
		if (n) {
			FILE *f = open_memstream(text, len);
			for (size_t i = 0; f && i < n; i++) {
				json_t *o = chunk_json(&ch[i]);
				if (o)
					json_dumpf(o, f, JSON_COMPACT);
				json_decref(o);
				fputc('\n', f);
				*after_seq = ch[i].seq;
			}
			if (!f || fclose(f) != 0) {
				free(*text);
				*text = NULL;
				*len = 0;
				st = fail(&reply, RB_ERR_HOST, "output: out of memory");
				*end = true;
			}
			break;
		}
		if (pthread_cond_timedwait(&sv->changed, &sv->lock, &until) == ETIMEDOUT)
			break; /* nothing yet: the caller checks its client and comes back */
	}
	pthread_mutex_unlock(&sv->lock);
	if (reply) {
		if (st >= 400)
			json_object_set_new(reply, "status", json_integer(st));
		char *line = json_dumps(reply, JSON_COMPACT);
		json_decref(reply);
		if (line && asprintf(text, "%s\n", line) >= 0)
			*len = strlen(*text);
		free(line);
	}
	return st;
}

int rb_serve_session_add(struct rb_serve *sv, const char *sid, char **env, size_t n_env, const json_t *eph,
                         struct rb_error *err)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	if (!s) {
		pthread_mutex_unlock(&sv->lock);
		free_strv(env);
		return rb_error_setk(err, RB_ERR_NOT_FOUND, 0, "no session `%s`", sid);
	}
	int r = 0;
	char **v = NULL;
	if (n_env && !(v = realloc(s->env, (s->n_env + n_env + 1) * sizeof *v)))
		r = rb_error_set(err, ENOMEM, "session env");
	if (v)
		s->env = v;
	for (size_t i = 0; v && i < n_env; i++) {
		size_t klen = strcspn(env[i], "=") + 1, k = 0;
		while (k < s->n_env && strncmp(v[k], env[i], klen) != 0)
			k++;
		if (k < s->n_env)
			free(v[k]); /* given again: the new value */
		else
			s->n_env++;
		v[k] = env[i];
		env[i] = NULL;
		v[s->n_env] = NULL;
	}
	if (r == 0 && eph && json_object_size(eph)) {
		if (!s->ephemeral)
			s->ephemeral = json_object();
		json_object_update(s->ephemeral, (json_t *)eph);
	}
	pthread_mutex_unlock(&sv->lock);
	free_strv(env);
	return r;
}

json_t *rb_serve_session_ephemeral(struct rb_serve *sv, const char *sid)
{
	pthread_mutex_lock(&sv->lock);
	struct sv_session *s = find(sv, sid);
	json_t *o = s && s->ephemeral ? json_deep_copy(s->ephemeral) : NULL;
	pthread_mutex_unlock(&sv->lock);
	return o;
}

/* A recipe's commands in runbox sandboxes (buildcmd.h): never on the host, each its own run, on
 * the build's tree through an idmapped, writable mount. */
#define _GNU_SOURCE
#include "runtime/run/buildcmd.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/ttysafe.h"
#include "common/util.h"
#include "runtime/run/record.h"
#include "runtime/run/run.h"
#include "runtime/run/session.h"

struct log_sink {
	int fd;
	bool tty;
	struct rb_ttysafe st[2];
};

static int to_log(void *ctx, const struct rb_chunk *c)
{
	struct log_sink *s = ctx;
	int i = c->stream == RB_STREAM_STDERR;
	if (!s->tty)
		return c->data && rb_write_all(s->fd, c->data, c->len) < 0 && errno == EPIPE ? -1 : 0;
	char tail[8];
	if (!c->data)
		return rb_write_all(s->fd, tail, rb_ttysafe_end(&s->st[i], tail)) < 0 && errno == EPIPE ? -1 : 0;
	_cleanup_free_ char *safe = malloc(RB_TTYSAFE_ROOM(c->len));
	if (safe && rb_write_all(s->fd, safe, rb_ttysafe(&s->st[i], c->data, c->len, safe)) < 0 && errno == EPIPE)
		return -1;
	return 0;
}

/* Why a command failed, or 0 when it exited 0. */
static int outcome(unsigned i, const char *cmd, const struct rb_step_result *res, struct rb_error *err)
{
	switch (res->status) {
	case RB_STEP_EXITED:
		return res->exit_code == 0 ? 0
		                           : rb_error_set(err, 0, "image build: commands[%u] `%.200s` exited %d", i,
		                                          cmd, res->exit_code);
	case RB_STEP_SIGNALED:
		return rb_error_set(err, 0, "image build: commands[%u] `%.200s` killed by signal %d", i, cmd,
		                    res->signal);
	case RB_STEP_TIMEOUT:
		return rb_error_set(err, ETIMEDOUT, "image build: commands[%u] `%.200s` timed out (the policy's limit)",
		                    i, cmd);
	case RB_STEP_CANCELLED: return rb_error_set(err, ECANCELED, "image build: cancelled in commands[%u]", i);
	default:
		return rb_error_set(err, 0, "image build: commands[%u] `%.200s` did not start: %s", i, cmd,
		                    res->error[0] ? res->error : "setup failed");
	}
}

static int one(const struct rb_build_runner *b, const char *tree, unsigned i, const char *cmd, bool gateway,
               char *const *env, struct rb_error *err)
{
	struct rb_run_config cfg = {.policy = b->policy,
	                            .state_dir = b->state_dir,
	                            .net_mode = gateway ? RB_NET_GATEWAY : RB_NET_NONE,
	                            .cancel_fd = b->cancel_fd,
	                            .factory = b->factory,
	                            .host = b->host,
	                            .agent = "image-build",
	                            .build_root = tree};
	struct rb_run run;
	if (rb_run_open(&cfg, &run, err) < 0) {
		rb_run_close(&run);
		return rb_error_prefix(err, "image build: commands[%u]", i);
	}
	char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
	struct rb_record rec;
	int rc = rb_record_open(&rec, &run, err);
	size_t bad;
	json_t *a = rc == 0 ? rb_json_strv(argv, &bad) : NULL;
	_cleanup_free_ char *text = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	if (rc == 0 && !text)
		rc = rb_error_set(err, EINVAL, "image build: commands[%u] is not valid UTF-8", i);
	if (rc == 0 && (rb_record_run_start(&rec, NULL, NULL, err) < 0 ||
	                rb_record_step_start(&rec, 1, NULL, "command", text, strlen(text), NULL, NULL, err) < 0))
		rc = -1;
	if (rc < 0) {
		rb_record_close(&rec);
		rb_run_close(&run);
		return rb_error_prefix(err, "image build: commands[%u]: ledger", i);
	}
	rb_record_attach(&rec, &run);
	struct log_sink sink = {.fd = b->log_fd, .tty = isatty(b->log_fd) == 1};
	struct rb_step_req req = {
	    .argv = argv, .env = env, .cwd = "/", .sink = to_log, .sink_ctx = &sink, .resize_fd = -1};
	struct rb_step_result res;
	if (rb_run_exec(&run, &req, &res, err) < 0) {
		rb_record_close(&rec);
		rb_run_close(&run);
		return rb_error_prefix(err, "image build: commands[%u]", i);
	}
	rc = outcome(i, cmd, &res, err);
	struct rb_error lerr;
	bool recorded = rb_record_step_end(&rec, 1, &res, &lerr) == 0;
	rb_run_stop(&run);
	recorded = recorded && rb_record_run_end(&rec, rb_record_outcome(&res), &lerr) == 0 &&
	           rb_record_flush(&rec, RB_RECORD_DEFERRED, &lerr) == 0;
	rb_step_result_free(&res);
	if (!recorded)
		rb_record_close(&rec); /* before the run's close: it keeps the state file for gc */
	rb_run_close(&run);
	if (recorded) {
		recorded = rb_record_sync(&rec, &lerr) == 0;
		rb_record_close(&rec);
	}
	if (rc == 0 && !recorded)
		return rb_error_set(err, lerr.errnum, "image build: commands[%u]: ledger: %s", i, lerr.msg);
	return rc;
}

int rb_build_run_commands(void *ctx, const char *tree, char *const *commands, unsigned n, bool gateway,
                          char *const *env, struct rb_error *err)
{
	const struct rb_build_runner *b = ctx;
	for (unsigned i = 0; i < n; i++)
		if (one(b, tree, i, commands[i], gateway, env, err) < 0)
			return -1;
	return 0;
}

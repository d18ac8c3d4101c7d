/* runtime/run/session.c and process.c: processes of one sandbox at once, their output as
 * sequence-numbered chunks, stdin, signals, a timeout that kills only its process, and a close
 * that kills what is left. Real sandboxes (the host image, the default policy). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "runtime/run/run.h"
#include "runtime/run/session.h"
#include "runtime/sandbox/factory.h"

/* Made before any run loads a key (group setup), as main makes runbox's. */
static struct rb_factory factory;
static struct rb_host host; /* the process environment, given to the runs (common/host.h) */
extern char **environ;

struct fixture {
	char dir[64];
	struct rb_run run;
	struct rb_session *s;
};

/* The fixture's run, bound (as runbox run's) or unbound (as runbox serve's warm pool makes its
 * members: tenant is then ignored until rb_session_bind). */
static int open_fixture(void **state, bool unbound)
{
	struct fixture *f = calloc(1, sizeof *f);
	assert_non_null(f);
	snprintf(f->dir, sizeof f->dir, "/tmp/rb-test-session-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(chmod(f->dir, 0711), 0); /* the sandbox's ids reach its run directory */
	/* The shipped policies of the source tree (the tests run from its top). */
	char cwd[4096];
	assert_non_null(getcwd(cwd, sizeof cwd));
	setenv("RUNBOX_DATA_DIR", cwd, 0);
	host.env = environ; /* the library reads the environment it is given, no other */
	struct rb_run_config cfg = {.state_dir = f->dir,
	                            .net_mode = -1,
	                            .factory = &factory,
	                            .host = &host,
	                            .tenant = unbound ? "ignored" : NULL,
	                            .unbound = unbound};
	struct rb_error err = {0};
	if (rb_run_open(&cfg, &f->run, &err) < 0)
		fail_msg("rb_run_open: %s", err.msg);
	if (rb_session_open(&f->run, &f->s, &err) < 0)
		fail_msg("rb_session_open: %s", err.msg);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return open_fixture(state, false);
}

static int setup_unbound(void **state)
{
	return open_fixture(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	rb_session_close(f->run.session);
	rb_run_close(&f->run);
	struct rb_error err;
	rb_rm_rf(f->dir, &err);
	free(f);
	return 0;
}

static struct rb_proc *start(struct fixture *f, const char *script, uint64_t timeout_ms, bool stdin_pipe)
{
	struct rb_proc_req req = {
	    .script = script, .timeout_ms = timeout_ms, .stdin_pipe = stdin_pipe, .keep_chunks = true};
	struct rb_proc *p = NULL;
	struct rb_error err = {0};
	if (rb_proc_start(f->s, &req, &p, &err) < 0)
		fail_msg("rb_proc_start: %s", err.msg);
	assert_non_null(p);
	return p;
}

static void wait_done(struct rb_proc *p, int ms)
{
	struct rb_error err = {0};
	int r = rb_proc_wait(p, ms, &err);
	if (r < 0)
		fail_msg("rb_proc_wait: %s", err.msg);
	assert_int_equal(r, 1);
}

/* Both streams' kept chunks, checking that sequence numbers only grow. */
static void collect(struct rb_proc *p, char *out, size_t out_len, char *err_text, size_t err_len)
{
	struct rb_chunk c[64];
	size_t n = rb_proc_read(p, 0, c, 64);
	uint64_t last = 0;
	out[0] = err_text[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		assert_true(c[i].seq > last);
		last = c[i].seq;
		char *dst = c[i].stream == RB_STREAM_STDOUT ? out : err_text;
		size_t cap = c[i].stream == RB_STREAM_STDOUT ? out_len : err_len;
		strncat(dst, c[i].data, c[i].len < cap - strlen(dst) - 1 ? c[i].len : cap - strlen(dst) - 1);
	}
}

/* The kept bytes of p's output and its first kept chunk's sequence number. */
static size_t kept(struct rb_proc *p, uint64_t *first_seq)
{
	struct rb_chunk c[256];
	size_t total = 0, n;
	uint64_t after = 0;
	*first_seq = 0;
	while ((n = rb_proc_read(p, after, c, 256)) > 0) {
		if (!*first_seq)
			*first_seq = c[0].seq;
		for (size_t i = 0; i < n; i++)
			total += c[i].len;
		after = c[n - 1].seq;
	}
	return total;
}

/* Five processes printing 15 MB each, one after the other (75 MB, each under the 16 MiB a
 * process keeps): the session keeps at most RB_SESSION_KEEP_CAP of them, dropping the oldest
 * chunks of the ended ones first; the newest output is there whole. */
static void output_kept_per_session(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *p[5];
	for (int i = 0; i < 5; i++) {
		p[i] = start(f, "yes aaaaaaaaaaaaaaa | head -c 15000000", 0, false);
		wait_done(p[i], 60000);
	}
	size_t total = 0, each[5];
	uint64_t first[5];
	for (int i = 0; i < 5; i++)
		total += each[i] = kept(p[i], &first[i]);
	assert_true(total <= RB_SESSION_KEEP_CAP);
	assert_true(total > RB_SESSION_KEEP_CAP - (1u << 20)); /* dropped only what it had to */
	assert_int_equal(each[4], 15000000);                   /* the newest whole */
	assert_true(first[0] > 1);                             /* the oldest lost its first chunks */
	for (int i = 0; i < 5; i++)
		rb_proc_free(p[i]);
}

/* One process blocked on its stdin, another printing, at once in one sandbox: the printer ends
 * while the reader still waits (control: the reader has printed nothing and is not done), then
 * the reader echoes what is written to its stdin. */
static void two_processes_at_once(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *reader = start(f, "cat; echo done", 0, true);
	struct rb_proc *printer = start(f, "echo one; echo two >&2; echo three", 0, false);
	wait_done(printer, 20000);
	const struct rb_step_result *pr = rb_proc_result(printer);
	assert_int_equal(pr->status, RB_STEP_EXITED);
	assert_int_equal(pr->exit_code, 0);
	char out[256], err_text[256];
	collect(printer, out, sizeof out, err_text, sizeof err_text);
	assert_string_equal(out, "one\nthree\n");
	assert_string_equal(err_text, "two\n");
	assert_true(rb_proc_id(reader) != rb_proc_id(printer));

	/* The reader runs on, has said nothing, and takes no process of the printer's. */
	struct rb_error err = {0};
	assert_int_equal(rb_proc_wait(reader, 200, &err), 0);
	assert_false(rb_proc_done(reader));
	struct rb_chunk c[4];
	assert_int_equal(rb_proc_read(reader, 0, c, 4), 0);

	assert_int_equal(rb_proc_write(reader, "hello\n", 6, &err), 6);
	rb_proc_close_stdin(reader);
	wait_done(reader, 20000);
	collect(reader, out, sizeof out, err_text, sizeof err_text);
	assert_string_equal(out, "hello\ndone\n");
	assert_int_equal(rb_proc_result(reader)->status, RB_STEP_EXITED);
	assert_int_equal(rb_proc_result(reader)->exit_code, 0);
	/* Written after the close: refused, named. */
	assert_int_equal(rb_proc_write(reader, "x", 1, &err), -1);
	assert_non_null(strstr(err.msg, "no stdin"));
	rb_proc_free(reader);
	rb_proc_free(printer);
}

static struct rb_proc *start_tty(struct fixture *f, const char *script, uint16_t rows, uint16_t cols)
{
	struct rb_proc_req req = {.script = script, .tty = true, .tty_size = {rows, cols}, .keep_chunks = true};
	struct rb_proc *p = NULL;
	struct rb_error err = {0};
	if (rb_proc_start(f->s, &req, &p, &err) < 0)
		fail_msg("rb_proc_start: %s", err.msg);
	assert_non_null(p);
	return p;
}

/* The kept output so far (one stream: a terminal's is stdout), carriage returns dropped. */
static void tty_text(struct rb_proc *p, char *out, size_t len)
{
	struct rb_chunk c[256];
	size_t n = rb_proc_read(p, 0, c, 256), k = 0;
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(c[i].stream, RB_STREAM_STDOUT);
		for (size_t j = 0; j < c[i].len && k + 1 < len; j++)
			if (c[i].data[j] != '\r')
				out[k++] = c[i].data[j];
	}
	out[k] = '\0';
}

/* Dispatches until the process's terminal showed text (bounded). */
static void await_text(struct fixture *f, struct rb_proc *p, const char *text)
{
	char out[4096];
	struct rb_error err = {0};
	for (int i = 0; i < 200; i++) {
		tty_text(p, out, sizeof out);
		if (strstr(out, text))
			return;
		assert_int_equal(rb_session_dispatch(f->s, 100, &err), 0);
	}
	fail_msg("the terminal never showed `%s`: `%s`", text, out);
}

/* Typed bytes are taken once the terminal exists (0 before: the caller writes again). */
static void type(struct fixture *f, struct rb_proc *p, const char *text)
{
	struct rb_error err = {0};
	for (int i = 0; i < 200; i++) {
		ssize_t w = rb_proc_write(p, text, strlen(text), &err);
		assert_true(w >= 0);
		if (w == (ssize_t)strlen(text))
			return;
		assert_int_equal(w, 0);
		assert_int_equal(rb_session_dispatch(f->s, 100, &err), 0);
	}
	fail_msg("the terminal never took `%s`", text);
}

/* A process on a terminal: the sandbox's pty (two at once get two), sized as asked, typed into,
 * resized (SIGWINCH reaches it), its output one stream, its result saying tty. The control: a
 * process without one beside them has no terminal, and resizing it is an error. */
static void tty_process(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *p = start_tty(f,
	                              "trap 'echo \"winch $(stty size)\"' WINCH; tty; echo \"size $(stty size)\"; "
	                              "read -r x; echo \"got:$x\"; sleep 0.3; echo bye",
	                              20, 60);
	struct rb_proc *q = start_tty(f, "tty; sleep 30", 0, 0);
	struct rb_proc *plain = start(f, "tty; exit 0", 0, false);
	await_text(f, p, "size 20 60");
	await_text(f, q, "/dev/pts/");
	type(f, p, "hi\n");
	await_text(f, p, "got:hi");
	struct rb_error err = {0};
	assert_int_equal(rb_proc_resize(p, (struct rb_tty_size){33, 77}, &err), 0);
	wait_done(p, 20000);
	char out[4096], other[256];
	tty_text(p, out, sizeof out);
	tty_text(q, other, sizeof other);
	assert_non_null(strstr(out, "/dev/pts/"));
	assert_non_null(strstr(out, "winch 33 77"));
	assert_non_null(strstr(out, "bye"));
	/* Two terminals, two names. */
	char *nl = strchr(other, '\n');
	assert_non_null(nl);
	*nl = '\0';
	assert_null(strstr(out, other));
	const struct rb_step_result *r = rb_proc_result(p);
	assert_int_equal(r->status, RB_STEP_EXITED);
	assert_int_equal(r->exit_code, 0);
	assert_true(r->tty);
	assert_int_equal(r->err.len, 0);
	assert_non_null(strstr(r->out.data, "got:hi"));
	wait_done(plain, 20000);
	assert_false(rb_proc_result(plain)->tty);
	assert_non_null(strstr(rb_proc_result(plain)->out.data, "not a tty"));
	assert_int_equal(rb_proc_resize(plain, (struct rb_tty_size){33, 77}, &err), -1);
	assert_int_equal(err.errnum, ENOTTY);
	rb_proc_free(p);
	rb_proc_free(q);
	rb_proc_free(plain);
}

/* Closing a terminal's stdin types its EOF: cat ends. The control: until then it runs. */
static void tty_close_stdin_is_eof(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *p = start_tty(f, "cat; echo end:$?", 0, 0);
	type(f, p, "abc\n");
	await_text(f, p, "abc\nabc\n"); /* the echo, then cat's copy */
	struct rb_error err = {0};
	assert_int_equal(rb_proc_wait(p, 300, &err), 0);
	assert_false(rb_proc_done(p));
	rb_proc_close_stdin(p);
	wait_done(p, 20000);
	char out[1024];
	tty_text(p, out, sizeof out);
	assert_non_null(strstr(out, "end:0"));
	assert_int_equal(rb_proc_write(p, "x", 1, &err), -1);
	rb_proc_free(p);
}

/* Chunks read after a sequence number are only the later ones. */
static void read_after_seq(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *p = start(f, "echo a; sleep 0.2; echo b; sleep 0.2; echo c", 0, false);
	wait_done(p, 20000);
	struct rb_chunk all[16];
	size_t n = rb_proc_read(p, 0, all, 16);
	assert_true(n >= 2);
	uint64_t first = all[0].seq;
	struct rb_chunk later[16];
	size_t m = rb_proc_read(p, first, later, 16);
	assert_int_equal(m, n - 1);
	for (size_t i = 0; i < m; i++)
		assert_true(later[i].seq > first);
	rb_proc_free(p);
}

/* A signal to one process is in its result; the other, not signalled (control), exits 0. */
static void signal_one(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *target = start(f, "exec sleep 30", 0, false);
	struct rb_proc *other = start(f, "sleep 0.5", 0, false);
	struct rb_error err = {0};
	/* Started (init said so) before the signal goes. */
	while (rb_proc_pid(target) == 0)
		assert_int_equal(rb_session_dispatch(f->s, 1000, &err), 0);
	assert_int_equal(rb_proc_signal(target, SIGTERM, &err), 0);
	wait_done(target, 20000);
	wait_done(other, 20000);
	assert_int_equal(rb_proc_result(target)->status, RB_STEP_SIGNALED);
	assert_int_equal(rb_proc_result(target)->signal, SIGTERM);
	assert_int_equal(rb_proc_result(other)->status, RB_STEP_EXITED);
	assert_int_equal(rb_proc_result(other)->exit_code, 0);
	/* A signal to what has ended is an error, not a silent no-op. */
	assert_int_equal(rb_proc_signal(target, SIGTERM, &err), -1);
	rb_proc_free(target);
	rb_proc_free(other);
}

/* A timeout kills its own process only: the one beside it (no timeout: control) finishes and
 * prints, and the sandbox takes a new process after. */
static void timeout_kills_only_its_process(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *slow = start(f, "sleep 30", 300, false);
	struct rb_proc *other = start(f, "sleep 1; echo alive", 0, false);
	wait_done(slow, 20000);
	assert_int_equal(rb_proc_result(slow)->status, RB_STEP_TIMEOUT);
	assert_false(rb_proc_done(other));
	wait_done(other, 20000);
	assert_int_equal(rb_proc_result(other)->status, RB_STEP_EXITED);
	assert_int_equal(rb_proc_result(other)->exit_code, 0);
	char out[64], err_text[64];
	collect(other, out, sizeof out, err_text, sizeof err_text);
	assert_string_equal(out, "alive\n");
	struct rb_proc *after = start(f, "true", 0, false);
	wait_done(after, 20000);
	assert_int_equal(rb_proc_result(after)->status, RB_STEP_EXITED);
	rb_proc_free(after);
	rb_proc_free(slow);
	rb_proc_free(other);
}

/* Host processes in the pid namespace whose /proc/PID/ns/pid is ns. */
static unsigned procs_in_ns(ino_t ns)
{
	unsigned n = 0;
	DIR *d = opendir("/proc");
	assert_non_null(d);
	for (struct dirent *e; (e = readdir(d));) {
		char path[300];
		struct stat st;
		snprintf(path, sizeof path, "/proc/%s/ns/pid", e->d_name);
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && stat(path, &st) == 0 && st.st_ino == ns)
			n++;
	}
	closedir(d);
	return n;
}

/* Closing the session kills what is left: before it, the sandbox's pid namespace holds init
 * and the running process (control); after it, nothing. */
static void close_kills_what_is_left(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *p = start(f, "sleep 30", 0, false);
	struct rb_error err = {0};
	while (rb_proc_pid(p) == 0)
		assert_int_equal(rb_session_dispatch(f->s, 1000, &err), 0);
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)f->run.sb.init_pid);
	assert_int_equal(stat(path, &st), 0);
	assert_true(procs_in_ns(st.st_ino) >= 2);
	assert_false(rb_proc_done(p));
	rb_session_close(f->s);
	assert_true(rb_proc_done(p));
	assert_int_not_equal(rb_proc_result(p)->status, RB_STEP_EXITED);
	/* SIGKILL is sent at close, not waited for (the run's end overlaps the teardown): the
	 * namespace empties as the kernel reaps, within a bound, not a timing. */
	int left = procs_in_ns(st.st_ino);
	for (int i = 0; i < 500 && left != 0; i++) {
		usleep(10000);
		left = procs_in_ns(st.st_ino);
	}
	assert_int_equal(left, 0);
	rb_proc_free(p);
}

/* A handle freed before init said `started` leaves nothing running: the late start is killed.
 * Control: a process kept alongside it is still there. */
static void freed_before_start_is_killed(void **state)
{
	struct fixture *f = *state;
	struct rb_proc *kept = start(f, "exec sleep 30", 0, false);
	struct rb_error err = {0};
	while (rb_proc_pid(kept) == 0)
		assert_int_equal(rb_session_dispatch(f->s, 1000, &err), 0);
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%d/ns/pid", (int)f->run.sb.init_pid);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(procs_in_ns(st.st_ino), 2); /* init and the kept one */
	struct rb_proc *gone = start(f, "exec sleep 30", 0, false);
	rb_proc_free(gone); /* before any dispatch: init has not said `started` yet */
	unsigned n = 0;
	for (int i = 0; i < 40; i++) {
		assert_int_equal(rb_session_dispatch(f->s, 50, &err), 0);
		n = procs_in_ns(st.st_ino);
	}
	assert_int_equal(n, 2);
	assert_false(rb_proc_done(kept));
	rb_proc_free(kept);
}

static int start_factory(void **state)
{
	(void)state;
	struct rb_error err = {0};
	if (rb_factory_start(&factory, &err) < 0) {
		fprintf(stderr, "rb_factory_start: %s\n", err.msg);
		return -1;
	}
	return 0;
}

/* rb_session_ready: once the root is built, the session may be dispatched before any process
 * (runbox serve's dispatcher watches it from its opening), and the first process then starts
 * and runs as always. */
static void ready_then_dispatch_before_a_process(void **state)
{
	struct fixture *f = *state;
	struct rb_error err = {0};
	if (rb_session_ready(f->s, &err) < 0)
		fail_msg("rb_session_ready: %s", err.msg);
	assert_true(f->run.ready);
	assert_true(f->run.sb.workspace_fd >= 0);
	if (rb_session_dispatch(f->s, 100, &err) < 0)
		fail_msg("rb_session_dispatch: %s", err.msg);
	struct rb_proc *p = start(f, "echo after-ready", 0, false);
	wait_done(p, 20000);
	assert_int_equal(rb_proc_result(p)->status, RB_STEP_EXITED);
	assert_int_equal(rb_proc_result(p)->exit_code, 0);
	char out[256], err_text[256];
	collect(p, out, sizeof out, err_text, sizeof err_text);
	assert_string_equal(out, "after-ready\n");
	rb_proc_free(p);
}

/* An unbound session's sandbox comes up with no owner and no token, and runs nothing; bound,
 * it has its owner, its token (gateway mode: the default policy's) issued for them, and runs
 * a process that sees it. A second bind is refused (the control: the first was taken). */
static void unbound_until_bound(void **state)
{
	struct fixture *f = *state;
	struct rb_error err = {0};
	if (rb_session_ready(f->s, &err) < 0)
		fail_msg("rb_session_ready: %s", err.msg);
	assert_string_equal(f->run.tenant, "");
	assert_string_equal(f->run.agent, "");
	assert_string_equal(f->run.token, "");
	struct rb_proc_req req = {.script = "echo ran", .keep_chunks = true};
	struct rb_proc *p = NULL;
	assert_int_equal(rb_proc_start(f->s, &req, &p, &err), -1);
	assert_null(p);
	assert_int_equal(rb_error_kind_of(&err), RB_ERR_CONFLICT);

	struct rb_session_owner owner = {.tenant = "tenant-x", .agent = "agent-y"};
	if (rb_session_bind(f->s, &owner, &err) < 0)
		fail_msg("rb_session_bind: %s", err.msg);
	assert_string_equal(f->run.tenant, "tenant-x");
	assert_string_equal(f->run.agent, "agent-y");
	bool gateway = f->run.spec.net_mode == RB_NET_GATEWAY;
	assert_true(gateway == (f->run.token[0] != '\0'));
	struct rb_session_owner other = {.tenant = "tenant-z", .agent = "agent-z"};
	assert_int_equal(rb_session_bind(f->s, &other, &err), -1);
	assert_non_null(strstr(err.msg, "bound to its owner already"));
	assert_string_equal(f->run.tenant, "tenant-x");
	p = start(f, "printf '%s' \"$RUNBOX_TOKEN\" | wc -c", 0, false);
	wait_done(p, 20000);
	char out[256], err_text[256];
	collect(p, out, sizeof out, err_text, sizeof err_text);
	assert_int_equal(atoi(out), gateway ? (int)strlen(f->run.token) : 0);
	rb_proc_free(p);
}

static int stop_factory(void **state)
{
	(void)state;
	rb_factory_stop(&factory);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(two_processes_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(read_after_seq, setup, teardown),
	    cmocka_unit_test_setup_teardown(output_kept_per_session, setup, teardown),
	    cmocka_unit_test_setup_teardown(tty_process, setup, teardown),
	    cmocka_unit_test_setup_teardown(tty_close_stdin_is_eof, setup, teardown),
	    cmocka_unit_test_setup_teardown(signal_one, setup, teardown),
	    cmocka_unit_test_setup_teardown(timeout_kills_only_its_process, setup, teardown),
	    cmocka_unit_test_setup_teardown(close_kills_what_is_left, setup, teardown),
	    cmocka_unit_test_setup_teardown(freed_before_start_is_killed, setup, teardown),
	    cmocka_unit_test_setup_teardown(ready_then_dispatch_before_a_process, setup, teardown),
	    cmocka_unit_test_setup_teardown(unbound_until_bound, setup_unbound, teardown),
	};
	return cmocka_run_group_tests(tests, start_factory, stop_factory);
}

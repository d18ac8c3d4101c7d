/* runtime/sandbox/factory.c: two runs opened from two threads of one process, through one
 * factory, run steps at the same time; no init's memory (read host side through /proc/PID/mem)
 * holds either run's token key, while a copy of the key holder (the control) holds both, and
 * so does an init made by a factory forked after a key was loaded. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/util.h"
#include "runtime/run/run.h"
#include "runtime/sandbox/factory.h"

#define N_RUNS 2

static struct rb_host host; /* the process environment, given to the runs (common/host.h) */
extern char **environ;

struct runner {
	const struct rb_factory *factory;
	const char *state_dir;
	pthread_barrier_t *started, *scanned;
	struct rb_run run;
	int open_rc, start_rc, step_rc;
	struct rb_step_result res;
	struct rb_error err;
};

/* One run, opened and started on its own thread; its step runs while the other's does. */
static void *run_thread(void *arg)
{
	struct runner *r = arg;
	struct rb_run_config cfg = {
	    .image = "minimal",
	    .state_dir = r->state_dir,
	    .net_mode = RB_NET_GATEWAY,
	    .factory = r->factory,
	    .host = &host,
	};
	r->open_rc = rb_run_open(&cfg, &r->run, &r->err);
	if (r->open_rc == 0)
		r->start_rc = rb_run_start(&r->run, &r->err);
	pthread_barrier_wait(r->started);
	if (r->open_rc == 0 && r->start_rc == 0) {
		/* Still running when the other thread's step has started and the scan is done. */
		char *argv[] = {"/bin/sh", "-c", "sleep 3; echo done", NULL};
		r->step_rc = rb_run_step(&r->run, argv, NULL, NULL, &r->res, &r->err);
	}
	pthread_barrier_wait(r->scanned);
	return NULL;
}

/* Whether pid's readable memory holds needle; *read_bytes says how much was read. Mappings of
 * more than 1 GiB are the sanitizer's shadow (reserved, never data) and are skipped. */
static bool memory_holds(pid_t pid, const void *needle, size_t nlen, size_t *read_bytes)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	FILE *maps = fopen(path, "re");
	assert_non_null(maps);
	snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
	int mem = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(mem >= 0);
	size_t bufsz = 1 << 20;
	char *buf = malloc(bufsz + nlen);
	assert_non_null(buf);
	bool found = false;
	*read_bytes = 0;
	char line[512];
	while (!found && fgets(line, sizeof line, maps)) {
		unsigned long lo, hi;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' || strstr(line, "[vvar") ||
		    strstr(line, "[vsyscall]") || hi - lo > (1ul << 30))
			continue;
		size_t carry = 0;
		for (unsigned long at = lo; at < hi && !found;) {
			size_t want = hi - at < bufsz ? hi - at : bufsz;
			ssize_t n = pread(mem, buf + carry, want, (off_t)at);
			if (n <= 0)
				break; /* an unreadable page (a guard): the rest of this mapping */
			*read_bytes += (size_t)n;
			size_t have = carry + (size_t)n;
			found = memmem(buf, have, needle, nlen) != NULL;
			carry = have < nlen - 1 ? have : nlen - 1;
			memmove(buf, buf + have - carry, carry);
			at += (unsigned long)n;
		}
	}
	free(buf);
	close(mem);
	fclose(maps);
	return found;
}

/* A process of the sandbox runs now: init has a child (the step's process). */
static bool init_has_child(pid_t init)
{
	char path[64], *text = NULL;
	snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)init, (int)init);
	bool yes = rb_read_file(path, 4096, &text, NULL, NULL) == 0 && text[0] >= '0' && text[0] <= '9';
	free(text);
	return yes;
}

static void two_runs_no_key_in_any_init(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip(); /* making sandboxes and reading another process's memory need root */
	/* Before any key and any thread, as main does. */
	struct rb_factory factory;
	struct rb_error err;
	assert_int_equal(rb_factory_start(&factory, &err), 0);

	char state_dir[] = "/tmp/rb-factory-test.XXXXXX";
	assert_non_null(mkdtemp(state_dir));
	chmod(state_dir, 0711);
	pthread_barrier_t started, scanned;
	pthread_barrier_init(&started, NULL, N_RUNS + 1);
	pthread_barrier_init(&scanned, NULL, N_RUNS + 1);
	struct runner *r = calloc(N_RUNS, sizeof *r);
	assert_non_null(r);
	pthread_t th[N_RUNS];
	for (int i = 0; i < N_RUNS; i++) {
		r[i] = (struct runner){
		    .factory = &factory, .state_dir = state_dir, .started = &started, .scanned = &scanned};
		assert_int_equal(pthread_create(&th[i], NULL, run_thread, &r[i]), 0);
	}
	pthread_barrier_wait(&started);
	for (int i = 0; i < N_RUNS; i++) {
		if (r[i].open_rc || r[i].start_rc)
			print_error("run %d: %s\n", i, r[i].err.msg);
		assert_int_equal(r[i].open_rc, 0);
		assert_int_equal(r[i].start_rc, 0);
		assert_int_equal(r[i].run.token_keylen, RB_TOKEN_KEY_LEN);
	}
	assert_memory_not_equal(r[0].run.token_key, r[1].run.token_key, RB_TOKEN_KEY_LEN);

	/* Both steps running at once. */
	uint64_t deadline = rb_now_us() + 10000000;
	while (!(init_has_child(r[0].run.sb.init_pid) && init_has_child(r[1].run.sb.init_pid)) &&
	       rb_now_us() < deadline)
		usleep(10000);
	assert_true(init_has_child(r[0].run.sb.init_pid));
	assert_true(init_has_child(r[1].run.sb.init_pid));

	/* The control: a copy of the process that holds the keys has both. */
	int ready[2];
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	pid_t copy = fork();
	assert_true(copy >= 0);
	if (copy == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		char c = 1;
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	size_t n;
	for (int i = 0; i < N_RUNS; i++) {
		assert_true(memory_holds(copy, r[i].run.token_key, RB_TOKEN_KEY_LEN, &n));
		assert_true(memory_holds(getpid(), r[i].run.token_key, RB_TOKEN_KEY_LEN, &n));
	}
	kill(copy, SIGKILL);
	waitpid(copy, NULL, 0);

	/* Neither init holds the other run's key, nor its own; the reader did read each one
	 * (its run's id, in the spec init was made from, is found there). Nor does the
	 * factory hold any. */
	for (int i = 0; i < N_RUNS; i++) {
		pid_t init = r[i].run.sb.init_pid;
		assert_true(memory_holds(init, r[i].run.id, strlen(r[i].run.id), &n));
		assert_true(n > 0);
		assert_false(memory_holds(init, r[1 - i].run.token_key, RB_TOKEN_KEY_LEN, &n));
		assert_false(memory_holds(init, r[i].run.token_key, RB_TOKEN_KEY_LEN, &n));
		assert_false(memory_holds(factory.pid, r[i].run.token_key, RB_TOKEN_KEY_LEN, &n));
	}
	pthread_barrier_wait(&scanned);
	for (int i = 0; i < N_RUNS; i++) {
		pthread_join(th[i], NULL);
		if (r[i].step_rc)
			print_error("run %d: %s\n", i, r[i].err.msg);
		assert_int_equal(r[i].step_rc, 0);
		assert_int_equal(r[i].res.status, RB_STEP_EXITED);
		assert_int_equal(r[i].res.exit_code, 0);
		assert_non_null(r[i].res.out.data);
		assert_string_equal(r[i].res.out.data, "done\n");
		rb_step_result_free(&r[i].res);
		rb_run_close(&r[i].run);
	}
	free(r);
	pthread_barrier_destroy(&started);
	pthread_barrier_destroy(&scanned);
	rb_factory_stop(&factory);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf --one-file-system %s", state_dir);
	assert_int_equal(system(cmd), 0);
}

static void open_run(struct rb_run *run, const struct rb_factory *f, const char *state_dir)
{
	struct rb_run_config cfg = {
	    .image = "minimal", .state_dir = state_dir, .net_mode = RB_NET_GATEWAY, .factory = f, .host = &host};
	struct rb_error err;
	if (rb_run_open(&cfg, run, &err) < 0 || rb_run_start(run, &err) < 0)
		fail_msg("run: %s", err.msg);
}

/* The negative control of the design: a factory forked after a run loaded its key (a copy of
 * the key holder, as init was of the runner) hands that key to the next init, and the scan
 * finds it there. */
static void late_factory_leaks_the_key(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char state_dir[] = "/tmp/rb-factory-test.XXXXXX";
	assert_non_null(mkdtemp(state_dir));
	chmod(state_dir, 0711);
	struct rb_factory early, late;
	struct rb_error err;
	assert_int_equal(rb_factory_start(&early, &err), 0);
	struct rb_run *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
	assert_non_null(a);
	assert_non_null(b);
	open_run(a, &early, state_dir);
	assert_int_equal(a->token_keylen, RB_TOKEN_KEY_LEN);
	assert_int_equal(rb_factory_start(&late, &err), 0); /* now, with a's key in memory */
	open_run(b, &late, state_dir);
	size_t n;
	assert_true(memory_holds(b->sb.init_pid, a->token_key, RB_TOKEN_KEY_LEN, &n));
	assert_false(memory_holds(a->sb.init_pid, a->token_key, RB_TOKEN_KEY_LEN, &n));
	assert_false(memory_holds(b->sb.init_pid, b->token_key, RB_TOKEN_KEY_LEN, &n));
	rb_run_close(b);
	rb_run_close(a);
	free(a);
	free(b);
	rb_factory_stop(&late);
	rb_factory_stop(&early);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf --one-file-system %s", state_dir);
	assert_int_equal(system(cmd), 0);
}

/* A request to a factory that is gone is an error naming it, not a hang. */
static void gone_factory_is_an_error(void **state)
{
	(void)state;
	struct rb_factory factory = RB_FACTORY_INIT;
	struct rb_sandbox_spec spec;
	memset(&spec, 0, sizeof spec);
	struct rb_spawn_req req = {.spec = &spec, .ctl_init = -1, .cg_fd = -1};
	struct rb_spawned out;
	struct rb_error err;
	assert_int_equal(rb_factory_make(&factory, &req, &out, &err), -1);
	assert_non_null(strstr(err.msg, "no factory"));
	assert_int_equal(rb_factory_start(&factory, &err), 0);
	rb_factory_stop(&factory);
	assert_int_equal(factory.sock, -1);
	assert_int_equal(rb_factory_make(&factory, &req, &out, &err), -1);
}

int main(void)
{
	/* The shipped data (policies, the minimal image) of this tree. */
	char cwd[4096];
	if (getcwd(cwd, sizeof cwd))
		setenv("RUNBOX_DATA_DIR", cwd, 0);
	host.env = environ; /* the library reads the environment it is given, no other */
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(two_runs_no_key_in_any_init),
	    cmocka_unit_test(late_factory_leaks_the_key),
	    cmocka_unit_test(gone_factory_is_an_error),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

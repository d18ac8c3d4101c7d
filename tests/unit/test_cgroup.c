/* Tests of runtime/sandbox/cgroup.c on the host's real hierarchy (v1 on hybrid hosts, v2 elsewhere):
 * limits land in the files, a memory hog is OOM-killed, a fork bomb stops, a cpu quota holds,
 * a daemon dies with the cgroup and nothing is left behind. Each has a control. Root only. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <dirent.h>
#include <fcntl.h>

#include "common/util.h"
#include "runtime/sandbox/cgroup.h"

static char parent[64]; /* relative: lies under this process's own cgroup in each hierarchy */
static int run_seq;

static void next_id(char *id, size_t n)
{
	snprintf(id, n, "t%d-%d", (int)getpid(), run_seq++);
}

static bool usable(void)
{
	if (geteuid() != 0)
		return false;
	char id[64];
	next_id(id, sizeof id);
	struct rb_cgroup *cg;
	struct rb_error err = {0};
	if (rb_cgroup_create(id, parent, NULL, &cg, &err) < 0)
		return false;
	bool ok = strcmp(rb_cgroup_manager_name(cg), "none") != 0;
	rb_cgroup_destroy(cg, &err);
	return ok;
}

#define REQUIRE_CGROUPS()                                                                                              \
	do {                                                                                                           \
		if (!usable()) {                                                                                       \
			print_message("cgroup tests need root and a writable hierarchy: skipped\n");                   \
			skip();                                                                                        \
		}                                                                                                      \
	} while (0)

static int read_u64(const char *dir, const char *file, uint64_t *v)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, file);
	FILE *f = fopen(p, "re");
	if (!f)
		return -1;
	unsigned long long x = 0;
	int n = fscanf(f, "%llu", &x);
	fclose(f);
	*v = x;
	return n == 1 ? 0 : -1;
}

static void read_str(const char *dir, const char *file, char *buf, size_t n)
{
	char p[4096];
	snprintf(p, sizeof p, "%s/%s", dir, file);
	FILE *f = fopen(p, "re");
	buf[0] = '\0';
	if (f) {
		if (!fgets(buf, (int)n, f))
			buf[0] = '\0';
		fclose(f);
	}
	buf[strcspn(buf, "\n")] = '\0';
}

/* The v1 directory of another controller for the same run: swap the hierarchy's name. */
static void v1_dir(const struct rb_cgroup *cg, const char *ctrl, char *out, size_t n)
{
	const char *mem = rb_cgroup_path(cg); /* /sys/fs/cgroup/memory/<self>/<parent>/<id> */
	const char *rest = mem + strlen("/sys/fs/cgroup/memory");
	/* Our own cgroup differs per hierarchy: rebuild from the parent and the run id. */
	const char *id = strrchr(rest, '/') + 1;
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024], self[1024] = "/";
	while (f && fgets(line, sizeof line, f)) {
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = '\0';
		char *list = a + 1;
		for (char *t = strtok(list, ","); t; t = strtok(NULL, ","))
			if (!strcmp(t, ctrl)) {
				snprintf(self, sizeof self, "%s", b + 1);
				self[strcspn(self, "\n")] = '\0';
			}
	}
	if (f)
		fclose(f);
	snprintf(out, n, "/sys/fs/cgroup/%s%s/%s/%s", ctrl, strcmp(self, "/") ? self : "", parent, id);
}

/* Forks a child that waits until it is in the cgroup, then runs fn (which returns its exit
 * code). Results travel on *resfd. */
static pid_t spawn_in(struct rb_cgroup *cg, int (*fn)(int wfd, void *arg), void *arg, int *resfd)
{
	int go[2], res[2];
	assert_int_equal(pipe2(go, O_CLOEXEC), 0);
	assert_int_equal(pipe2(res, O_CLOEXEC), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		close(res[0]);
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(99);
		_exit(fn(res[1], arg));
	}
	close(go[0]);
	close(res[1]);
	struct rb_error err = {0};
	int r = rb_cgroup_attach(cg, pid, &err);
	if (r < 0)
		print_message("attach: %s\n", err.msg);
	assert_int_equal(r, 0);
	assert_int_equal(write(go[1], "x", 1), 1);
	close(go[1]);
	*resfd = res[0];
	return pid;
}

static struct rb_cgroup *make(const struct rb_limits *lim)
{
	char id[64];
	next_id(id, sizeof id);
	struct rb_cgroup *cg = NULL;
	struct rb_error err = {0};
	int r = rb_cgroup_create(id, parent, lim, &cg, &err);
	if (r < 0)
		print_message("create: %s\n", err.msg);
	assert_int_equal(r, 0);
	return cg;
}

static void finish(struct rb_cgroup *cg)
{
	struct rb_error err = {0};
	assert_int_equal(rb_cgroup_kill(cg, &err), 0);
	while (waitpid(-1, NULL, WNOHANG) > 0) /* we are the subreaper of what the tests left */
		;
	int r = rb_cgroup_destroy(cg, &err);
	if (r < 0)
		print_message("destroy: %s\n", err.msg);
	assert_int_equal(r, 0);
}

/* ---- limits land in the files ---- */

static void test_limits_written(void **state)
{
	REQUIRE_CGROUPS();
	struct rb_limits lim = {.memory_bytes = 64u << 20, .pids = 32, .cpus = 0.5, .cpu_weight = 200};
	struct rb_cgroup *cg = make(&lim);
	for (int k = 0; k < RB_LIMIT_COUNT; k++) {
		const struct rb_limit_status *s = rb_cgroup_limit(cg, (enum rb_limit_kind)k);
		assert_true(s->requested);
		assert_true(s->enforced);
		assert_true(strlen(s->mechanism) > 0);
	}
	const char *p = rb_cgroup_path(cg);
	uint64_t v;
	char buf[128], d[4096];
	if (!strcmp(rb_cgroup_manager_name(cg), "v2")) {
		assert_int_equal(read_u64(p, "memory.max", &v), 0);
		assert_int_equal(v, 64u << 20);
		assert_int_equal(read_u64(p, "pids.max", &v), 0);
		assert_int_equal(v, 32);
		read_str(p, "cpu.max", buf, sizeof buf);
		assert_string_equal(buf, "50000 100000");
		assert_int_equal(read_u64(p, "cpu.weight", &v), 0);
		assert_int_equal(v, 200);
		assert_true(rb_cgroup_clone_fd(cg) >= 0);
	} else {
		assert_string_equal(rb_cgroup_manager_name(cg), "v1");
		assert_int_equal(rb_cgroup_clone_fd(cg), -1);
		assert_int_equal(read_u64(p, "memory.limit_in_bytes", &v), 0);
		assert_int_equal(v, 64u << 20);
		if (read_u64(p, "memory.memsw.limit_in_bytes", &v) == 0)
			assert_int_equal(v, 64u << 20);
		/* Socket buffers are charged only under a TCP limit: set to the memory limit where
		 * the kernel has the file, else the limit says it is partial. */
		const struct rb_limit_status *mem = rb_cgroup_limit(cg, RB_LIMIT_MEMORY);
		if (read_u64(p, "memory.kmem.tcp.limit_in_bytes", &v) == 0) {
			assert_int_equal(v, 64u << 20);
			assert_non_null(strstr(mem->mechanism, "kmem.tcp"));
			assert_false(mem->partial);
		} else {
			assert_true(mem->partial);
			assert_non_null(strstr(mem->reason, "socket buffers"));
		}
		v1_dir(cg, "pids", d, sizeof d);
		assert_int_equal(read_u64(d, "pids.max", &v), 0);
		assert_int_equal(v, 32);
		v1_dir(cg, "cpu", d, sizeof d);
		assert_int_equal(read_u64(d, "cpu.cfs_quota_us", &v), 0);
		assert_int_equal(v, 50000);
		assert_int_equal(read_u64(d, "cpu.cfs_period_us", &v), 0);
		assert_int_equal(v, 100000);
		assert_int_equal(read_u64(d, "cpu.shares", &v), 0);
		assert_int_equal(v, 2048);
	}
	/* Control: a cgroup made without limits keeps the kernel's defaults. */
	struct rb_cgroup *free_cg = make(NULL);
	for (int k = 0; k < RB_LIMIT_COUNT; k++)
		assert_false(rb_cgroup_limit(free_cg, (enum rb_limit_kind)k)->requested);
	const char *fp = rb_cgroup_path(free_cg);
	if (!strcmp(rb_cgroup_manager_name(free_cg), "v2")) {
		read_str(fp, "memory.max", buf, sizeof buf);
		assert_string_equal(buf, "max");
	} else {
		assert_int_equal(read_u64(fp, "memory.limit_in_bytes", &v), 0);
		assert_true(v > (64u << 20));
		if (read_u64(fp, "memory.kmem.tcp.limit_in_bytes", &v) == 0)
			assert_true(v > (64u << 20));
	}
	finish(free_cg);
	finish(cg);
}

/* ---- memory ---- */

static int hog(int wfd, void *arg)
{
	size_t mb = *(size_t *)arg;
	for (size_t i = 0; i < mb; i++) {
		volatile char *p = mmap(NULL, 1u << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 2;
		for (size_t off = 0; off < (1u << 20); off += 4096)
			p[off] = 1;
	}
	return 0;
}

static void test_memory_hog_oom_killed(void **state)
{
	REQUIRE_CGROUPS();
	const uint64_t limit = 64u << 20;
	struct rb_limits lim = {.memory_bytes = limit};
	struct rb_cgroup *cg = make(&lim);
	size_t mb = 512;
	int rfd;
	pid_t pid = spawn_in(cg, hog, &mb, &rfd);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(rfd);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGKILL);
	struct rb_cgroup_stats s;
	rb_cgroup_stats(cg, &s);
	assert_true(s.have_oom);
	assert_true(s.oom_kills >= 1);
	assert_true(s.have_memory_peak);
	print_message("hog: oom_kills=%" PRIu64 " peak=%" PRIu64 " limit=%" PRIu64 "\n", s.oom_kills,
	              s.memory_peak_bytes, limit);
	assert_true(s.memory_peak_bytes >= limit * 8 / 10);
	assert_true(s.memory_peak_bytes <= limit + (4u << 20));
	finish(cg);

	/* Control: a bigger limit and a smaller appetite: no kill, no OOM counted. */
	lim.memory_bytes = 256u << 20;
	cg = make(&lim);
	mb = 32;
	pid = spawn_in(cg, hog, &mb, &rfd);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(rfd);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	rb_cgroup_stats(cg, &s);
	assert_true(s.have_oom);
	assert_int_equal(s.oom_kills, 0);
	assert_true(s.memory_peak_bytes >= (32u << 20));
	finish(cg);
}

/* ---- pids ---- */

struct bomb {
	int forks; /* how many to try */
};

static int bomb(int wfd, void *arg)
{
	struct bomb *b = arg;
	int n = 0, e = 0;
	for (int i = 0; i < b->forks; i++) {
		pid_t p = fork();
		if (p == 0) {
			pause();
			_exit(0);
		}
		if (p < 0) {
			e = errno;
			break;
		}
		n++;
	}
	int out[2] = {n, e};
	if (write(wfd, out, sizeof out) != sizeof out)
		return 3;
	pause();
	return 0;
}

static void run_bomb(uint64_t max, int forks, int *n, int *e, uint64_t *peak)
{
	struct rb_limits lim = {.pids = max};
	struct rb_cgroup *cg = make(&lim);
	struct bomb b = {.forks = forks};
	int rfd;
	pid_t pid = spawn_in(cg, bomb, &b, &rfd);
	int out[2];
	assert_int_equal(read(rfd, out, sizeof out), sizeof out);
	close(rfd);
	*n = out[0];
	*e = out[1];
	struct rb_cgroup_stats s;
	rb_cgroup_stats(cg, &s);
	assert_true(s.have_pids_peak);
	*peak = s.pids_peak;
	struct rb_error err = {0};
	assert_int_equal(rb_cgroup_kill(cg, &err), 0);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	finish(cg);
}

static void test_fork_bomb_stops_at_pids_max(void **state)
{
	REQUIRE_CGROUPS();
	int n, e;
	uint64_t peak;
	run_bomb(16, 1000, &n, &e, &peak);
	print_message("bomb: %d forks before %s, pids peak %" PRIu64 "\n", n, strerror(e), peak);
	assert_int_equal(e, EAGAIN);
	assert_true(n < 16);
	assert_true(peak <= 16);
	/* Control: under the limit every fork succeeds. */
	run_bomb(64, 20, &n, &e, &peak);
	assert_int_equal(e, 0);
	assert_int_equal(n, 20);
	assert_true(peak >= 21);
}

/* ---- kill ---- */

static int daemonize(int wfd, void *arg)
{
	pid_t a = fork();
	if (a < 0)
		return 1;
	if (a == 0) {
		setsid();
		pid_t b = fork();
		if (b == 0) {
			pid_t me = getpid();
			if (write(wfd, &me, sizeof me) != sizeof me)
				_exit(1);
			close(wfd);
			for (;;)
				pause();
		}
		_exit(b < 0);
	}
	int st;
	waitpid(a, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static bool listed(const char *dir, pid_t pid)
{
	char p[4200], line[64];
	snprintf(p, sizeof p, "%s/cgroup.procs", dir);
	FILE *f = fopen(p, "re");
	bool found = false;
	while (f && fgets(line, sizeof line, f))
		if (atoi(line) == pid)
			found = true;
	if (f)
		fclose(f);
	return found;
}

static void test_double_forked_daemon_killed(void **state)
{
	REQUIRE_CGROUPS();
	struct rb_cgroup *cg = make(NULL);
	char path[4096];
	snprintf(path, sizeof path, "%s", rb_cgroup_path(cg));
	int rfd;
	pid_t pid = spawn_in(cg, daemonize, NULL, &rfd);
	pid_t daemon = 0;
	assert_int_equal(read(rfd, &daemon, sizeof daemon), sizeof daemon);
	close(rfd);
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Control: the daemon outlived its parents and sits in the cgroup. */
	assert_int_equal(kill(daemon, 0), 0);
	assert_true(listed(path, daemon));
	struct rb_error err = {0};
	assert_int_equal(rb_cgroup_kill(cg, &err), 0);
	/* We are the subreaper: reap it, then it is gone. */
	assert_int_equal(waitpid(daemon, &st, 0), daemon);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_equal(kill(daemon, 0), -1);
	assert_int_equal(errno, ESRCH);
	assert_int_equal(rb_cgroup_destroy(cg, &err), 0);
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(errno, ENOENT);
}

/* ---- cpu ---- */

static int spin(int wfd, void *arg)
{
	if (fork() < 0)
		return 1;
	for (;;)
		__asm__ volatile("" ::: "memory");
}

static double cpu_per_wall(double cpus)
{
	struct rb_limits lim = {.cpus = cpus};
	struct rb_cgroup *cg = make(&lim);
	int rfd;
	pid_t pid = spawn_in(cg, spin, NULL, &rfd);
	struct rb_cgroup_stats a, b;
	rb_cgroup_stats(cg, &a);
	uint64_t t0 = rb_now_us();
	struct timespec ts = {1, 500000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	rb_cgroup_stats(cg, &b);
	uint64_t t1 = rb_now_us();
	assert_true(a.have_cpu && b.have_cpu);
	struct rb_error err = {0};
	assert_int_equal(rb_cgroup_kill(cg, &err), 0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	close(rfd);
	finish(cg);
	return (double)(b.cpu_usec - a.cpu_usec) / (double)(t1 - t0);
}

static void test_cpu_quota_bound(void **state)
{
	REQUIRE_CGROUPS();
	/* Two spinning processes: without a quota they would use up to two cpus. */
	double limited = cpu_per_wall(0.5);
	/* The control competes with whatever else the host runs: a busy host can hold two
	 * unlimited spinners under 0.6 for one sample, so it gets three (the bound gets one). */
	double control = 0;
	for (int attempt = 0; attempt < 3 && control <= 0.6; attempt++)
		control = cpu_per_wall(0);
	print_message("cpu: %.3f cpu-s per wall-s under cpus=0.5, %.3f without\n", limited, control);
	assert_true(limited <= 0.6);
	assert_true(control > 0.6);
}

/* ---- nothing left behind ---- */

static int count_dirs(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_create_destroy_200(void **state)
{
	REQUIRE_CGROUPS();
	struct rb_limits lim = {.memory_bytes = 32u << 20, .pids = 8, .cpus = 1, .cpu_weight = 50};
	char parent_dirs[5][4096];
	int np = 0;
	for (int i = 0; i < 200; i++) {
		struct rb_cgroup *cg = make(&lim);
		if (i == 0) {
			char d[4096];
			snprintf(d, sizeof d, "%s", rb_cgroup_path(cg));
			*strrchr(d, '/') = '\0';
			snprintf(parent_dirs[np++], sizeof parent_dirs[0], "%s", d);
			if (!strcmp(rb_cgroup_manager_name(cg), "v1")) {
				static const char *const others[] = {"pids", "cpu", "cpuacct", "freezer"};
				for (int c = 0; c < 4; c++) {
					v1_dir(cg, others[c], d, sizeof d);
					*strrchr(d, '/') = '\0';
					snprintf(parent_dirs[np++], sizeof parent_dirs[0], "%s", d);
				}
			}
			/* Control: while it exists, the parent shows it. */
			for (int p = 0; p < np; p++)
				assert_true(count_dirs(parent_dirs[p]) >= 1);
		}
		struct rb_error err = {0};
		assert_int_equal(rb_cgroup_destroy(cg, &err), 0);
	}
	for (int p = 0; p < np; p++)
		assert_int_equal(count_dirs(parent_dirs[p]), 0);
}

/* ---- the parent ---- */

/* The parent is the caller's to name (a run takes it from its rb_host); the process's own
 * RUNBOX_CGROUP_PARENT is never read by the library. */
static void test_parent_named_by_caller(void **state)
{
	REQUIRE_CGROUPS();
	char want[80];
	snprintf(want, sizeof want, "%s/envparent", parent);
	char id[64];
	next_id(id, sizeof id);
	struct rb_cgroup *cg;
	struct rb_error err = {0};
	assert_int_equal(rb_cgroup_create(id, want, NULL, &cg, &err), 0);
	assert_non_null(strstr(rb_cgroup_path(cg), "/envparent/"));
	assert_int_equal(rb_cgroup_destroy(cg, &err), 0);
	/* Control: the same name in the process's environment, none passed: runbox's default. */
	setenv(RB_CGROUP_PARENT_VAR, want, 1);
	next_id(id, sizeof id);
	int r = rb_cgroup_create(id, NULL, NULL, &cg, &err);
	unsetenv(RB_CGROUP_PARENT_VAR);
	assert_int_equal(r, 0);
	assert_null(strstr(rb_cgroup_path(cg), "/envparent/"));
	assert_non_null(strstr(rb_cgroup_path(cg), "/runbox/"));
	assert_int_equal(rb_cgroup_destroy(cg, &err), 0);
	/* The envparent directories themselves go in the group teardown. */
}

static void test_bad_input(void **state)
{
	struct rb_cgroup *cg = NULL;
	struct rb_error err = {0};
	assert_int_equal(rb_cgroup_create("a/b", parent, NULL, &cg, &err), -1);
	assert_non_null(strstr(err.msg, "run id"));
	assert_int_equal(rb_cgroup_create("..", parent, NULL, &cg, &err), -1);
	assert_null(cg);
	assert_string_equal(rb_limit_name(RB_LIMIT_MEMORY), "memory");
	assert_string_equal(rb_limit_name(RB_LIMIT_CPU_WEIGHT), "cpu_weight");
}

/* gc's reclaim takes its directories from a state file: only <cgroup mount>/.../runbox/<id>
 * (or RUNBOX_CGROUP_PARENT's last component for "runbox"), canonical and ours, is touched. */
static void test_reclaim_only_runbox_cgroups(void **state)
{
	char tmp[] = "/tmp/rbx-reclaim-XXXXXX", fake[256];
	assert_non_null(mkdtemp(tmp));
	snprintf(fake, sizeof fake, "%s/runbox", tmp);
	assert_int_equal(mkdir(fake, 0755), 0);
	snprintf(fake, sizeof fake, "%s/runbox/r1", tmp);
	assert_int_equal(mkdir(fake, 0755), 0);
	struct rb_error err = {0};
	const char *dirs[2] = {fake};
	assert_int_equal(rb_cgroup_reclaim("r1", NULL, dirs, 1, &err), -1);
	assert_non_null(strstr(err.msg, "not under a cgroup mount"));
	assert_int_equal(access(fake, F_OK), 0);
	rmdir(fake);
	snprintf(fake, sizeof fake, "%s/runbox", tmp);
	rmdir(fake);
	rmdir(tmp);

	REQUIRE_CGROUPS();
	char id[64];
	next_id(id, sizeof id);
	struct rb_cgroup *cg;
	assert_int_equal(rb_cgroup_create(id, parent, NULL, &cg, &err), 0);
	unsigned n = rb_cgroup_dirs(cg, dirs, 1);
	assert_int_equal(n, 1);
	char real[4096], dotted[4200];
	snprintf(real, sizeof real, "%s", dirs[0]);
	/* Under "runbox-test-PID", not "runbox": refused unless the caller names that parent. */
	assert_int_equal(rb_cgroup_reclaim(id, NULL, dirs, 1, &err), -1);
	assert_non_null(strstr(err.msg, "runbox cgroup parent"));
	/* Nor when only the process's environment names it: the caller must. */
	setenv(RB_CGROUP_PARENT_VAR, parent, 1);
	assert_int_equal(rb_cgroup_reclaim(id, NULL, dirs, 1, &err), -1);
	unsetenv(RB_CGROUP_PARENT_VAR);
	assert_non_null(strstr(err.msg, "runbox cgroup parent"));
	assert_int_equal(rb_cgroup_reclaim("t-other", parent, dirs, 1, &err), -1);
	assert_non_null(strstr(err.msg, "not the cgroup of run"));
	/* <parent dir>/../<parent>/<id>: the same directory, spelled with ".." */
	snprintf(dotted, sizeof dotted, "%s", real);
	*strrchr(dotted, '/') = '\0';
	snprintf(dotted + strlen(dotted), sizeof dotted - strlen(dotted), "/../%s/%s", parent, id);
	dirs[1] = dotted;
	assert_int_equal(rb_cgroup_reclaim(id, parent, dirs + 1, 1, &err), -1);
	assert_non_null(strstr(err.msg, "canonical"));
	assert_int_equal(access(real, F_OK), 0);
	/* Control: the run's own cgroup, spelled as runbox made it, is reclaimed. */
	assert_int_equal(rb_cgroup_reclaim(id, parent, dirs, 1, &err), 0);
	assert_int_equal(access(real, F_OK), -1);
	rb_cgroup_destroy(cg, &err);
}

/* Rootless without delegation: "none", each requested limit says why and how to fix it. */
static void test_unprivileged_gets_none(void **state)
{
	REQUIRE_CGROUPS();
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
			_exit(10);
		struct rb_limits lim = {.memory_bytes = 64u << 20, .pids = 10};
		struct rb_cgroup *cg;
		struct rb_error err = {0};
		if (rb_cgroup_create("rootless", parent, &lim, &cg, &err) < 0)
			_exit(11);
		if (strcmp(rb_cgroup_manager_name(cg), "none"))
			_exit(12);
		const struct rb_limit_status *m = rb_cgroup_limit(cg, RB_LIMIT_MEMORY);
		if (!m->requested || m->enforced || !strstr(m->reason, "systemd-run"))
			_exit(13);
		if (rb_cgroup_limit(cg, RB_LIMIT_CPUS)->requested || rb_cgroup_limit(cg, RB_LIMIT_CPUS)->reason[0])
			_exit(14);
		/* No leaf for the gateway either: it runs unbounded, as the limits say. */
		struct rb_cgroup_join j;
		if (rb_cgroup_gateway_join(cg, &j, &err) != 0 || j.n != 0 || j.clone_fd != -1 ||
		    rb_cgroup_gateway_mechanism(cg)[0])
			_exit(16);
		if (rb_cgroup_clone_fd(cg) != -1 || rb_cgroup_attach(cg, getpid(), &err) != 0 ||
		    rb_cgroup_kill(cg, &err) != 0 || rb_cgroup_destroy(cg, &err) != 0)
			_exit(15);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- the parent rule, shared by runs, gc and `runbox check` ---- */

static void test_parent_rule(void **state)
{
	char out[256];
	/* The default (none named, or "") lies under the caller's own cgroup. */
	assert_int_equal(rb_cgroup_parent(NULL, "/", out, sizeof out), 0);
	assert_string_equal(out, "/runbox");
	assert_int_equal(rb_cgroup_parent("", "/user.slice/x.scope", out, sizeof out), 0);
	assert_string_equal(out, "/user.slice/x.scope/runbox");
	/* A named one: relative (under self) or absolute (from the root), trailing slashes gone. */
	assert_int_equal(rb_cgroup_parent("ci/", "/me", out, sizeof out), 0);
	assert_string_equal(out, "/me/ci");
	assert_int_equal(rb_cgroup_parent("/a/b//", "/me", out, sizeof out), 0);
	assert_string_equal(out, "/a/b");
	/* ".." is refused, wherever it is; control: a name that only starts with dots is not. */
	assert_int_equal(rb_cgroup_parent("/a/../b", "/", out, sizeof out), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(rb_cgroup_parent("x/..", "/me", out, sizeof out), -1);
	assert_int_equal(rb_cgroup_parent("/a/..b", "/", out, sizeof out), 0);
	assert_string_equal(out, "/a/..b");
	assert_int_equal(rb_cgroup_parent("/a/..b", "/", out, 4), -1);
	assert_int_equal(errno, ENAMETOOLONG);
}

/* ---- the gateway's leaf ---- */

/* Starts a child in cg's gateway leaf as gwproc does without clone3 (a fork that writes "0"
 * to each join fd before anything else), which then spins. */
static pid_t spin_in_gateway(struct rb_cgroup *cg)
{
	struct rb_cgroup_join j;
	struct rb_error err = {0};
	int r = rb_cgroup_gateway_join(cg, &j, &err);
	if (r < 0)
		print_message("gateway join: %s\n", err.msg);
	assert_int_equal(r, 1);
	assert_true(j.n > 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (unsigned i = 0; i < j.n; i++)
			if (write(j.fds[i], "0", 1) != 1)
				_exit(20);
		for (;;)
			__asm__ volatile("" ::: "memory");
	}
	rb_cgroup_join_close(&j);
	assert_int_equal(j.n, 0);
	assert_int_equal(j.clone_fd, -1);
	return pid;
}

static bool has_token(const char *list, const char *word)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", list);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (!strcmp(t, word))
			return true;
	return false;
}

/* Does every memory, cpu and pids line of pid's cgroups (the v2 line on a v2 host) end in
 * <parent>/<id>/gateway? */
static bool in_gateway_leaf(pid_t pid, const char *id)
{
	char p[64], line[1024], want[128];
	snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
	snprintf(want, sizeof want, "/%s/%s/gateway", parent, id);
	bool unified = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
	FILE *f = fopen(p, "re");
	int seen = 0, bad = 0;
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = '\0';
		const char *ctrls = a + 1, *path = b + 1;
		bool limited = *ctrls
		                   ? has_token(ctrls, "memory") || has_token(ctrls, "pids") || has_token(ctrls, "cpu")
		                   : unified;
		if (!limited)
			continue;
		size_t wl = strlen(want), pl = strlen(path);
		if (pl >= wl && !strcmp(path + pl - wl, want))
			seen++;
		else
			bad++;
	}
	if (f)
		fclose(f);
	return seen > 0 && bad == 0;
}

/* The gateway's leaf: a process that joined it is in the run's cgroup in every limited
 * hierarchy, held to the run's cpu quota, outside the run's reported cpu_usec, killed with
 * the run, and the leaf goes with the run's cgroup. */
static void test_gateway_leaf(void **state)
{
	REQUIRE_CGROUPS();
	struct rb_limits lim = {.cpus = 0.2, .pids = 64, .memory_bytes = 256u << 20};
	struct rb_cgroup *cg = make(&lim);
	char path[4096], id[64];
	snprintf(path, sizeof path, "%s", rb_cgroup_path(cg));
	snprintf(id, sizeof id, "%s", strrchr(path, '/') + 1);
	assert_non_null(strstr(rb_cgroup_gateway_mechanism(cg), "leaf `gateway`"));
	pid_t gw = spin_in_gateway(cg);
	/* Wait (bounded) until the child has joined: it writes before it spins. */
	for (int i = 0; i < 200 && !in_gateway_leaf(gw, id); i++)
		usleep(10000);
	assert_true(in_gateway_leaf(gw, id));
	/* Control: this process, which made the leaf, is not in it. */
	assert_false(in_gateway_leaf(getpid(), id));
	char leaf[4200];
	snprintf(leaf, sizeof leaf, "%s/gateway", path);
	assert_int_equal(access(leaf, F_OK), 0);

	struct rb_cgroup_stats a, b;
	rb_cgroup_stats(cg, &a);
	uint64_t t0 = rb_now_us();
	struct timespec ts = {1, 0};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	rb_cgroup_stats(cg, &b);
	uint64_t t1 = rb_now_us();
	/* The spinner is the only process: the run's own cpu_usec (the gateway's taken out)
	 * barely moves, while the leaf's usage is held to the run's quota. */
	assert_true(b.have_cpu);
	assert_true(b.cpu_usec - a.cpu_usec < 50000);
	uint64_t used = 0;
	char v1acct[4096];
	if (read_u64(leaf, "cpuacct.usage", &used) == 0) {
		used /= 1000;
	} else {
		v1_dir(cg, "cpuacct", v1acct, sizeof v1acct);
		char l2[4200];
		snprintf(l2, sizeof l2, "%s/gateway", v1acct);
		if (read_u64(l2, "cpuacct.usage", &used) == 0) {
			used /= 1000;
		} else {
			char stat[512];
			read_str(leaf, "cpu.stat", stat, sizeof stat); /* "usage_usec N" first */
			assert_int_equal(sscanf(stat, "usage_usec %" SCNu64, &used), 1);
		}
	}
	double rate = (double)used / (double)(t1 - t0);
	print_message("gateway leaf: %.3f cpus under a 0.2 quota since it started\n", rate);
	assert_true(rate < 0.2 * 1.5 + 0.05);

	struct rb_error err = {0};
	assert_int_equal(rb_cgroup_kill(cg, &err), 0);
	int st;
	assert_int_equal(waitpid(gw, &st, 0), gw);
	assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	assert_int_equal(rb_cgroup_destroy(cg, &err), 0);
	assert_int_equal(access(leaf, F_OK), -1);
	assert_int_equal(access(path, F_OK), -1);
}

/* gc after a killed runner: reclaim kills what the leaf holds and removes it with the run's. */
static void test_reclaim_takes_gateway_leaf(void **state)
{
	REQUIRE_CGROUPS();
	struct rb_cgroup *cg = make(NULL);
	char path[4096], id[64], leaf[4200];
	snprintf(path, sizeof path, "%s", rb_cgroup_path(cg));
	snprintf(id, sizeof id, "%s", strrchr(path, '/') + 1);
	snprintf(leaf, sizeof leaf, "%s/gateway", path);
	pid_t gw = spin_in_gateway(cg);
	for (int i = 0; i < 200 && !in_gateway_leaf(gw, id); i++)
		usleep(10000);
	assert_true(in_gateway_leaf(gw, id));
	const char *dirs[8];
	unsigned n = rb_cgroup_dirs(cg, dirs, 8);
	assert_true(n > 0);
	char copies[8][4096];
	const char *list[8];
	for (unsigned i = 0; i < n; i++) {
		snprintf(copies[i], sizeof copies[i], "%s", dirs[i]);
		list[i] = copies[i];
	}
	struct rb_error err = {0};
	int r = rb_cgroup_reclaim(id, parent, list, n, &err);
	if (r < 0)
		print_message("reclaim: %s\n", err.msg);
	assert_int_equal(r, 0);
	int st;
	assert_int_equal(waitpid(gw, &st, 0), gw);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(access(leaf, F_OK), -1);
	assert_int_equal(access(path, F_OK), -1);
	rb_cgroup_destroy(cg, &err); /* only frees: the directories are gone */
}

/* ---- setup ---- */

static void remove_parent(void)
{
	static const char *const v1[] = {"memory", "pids", "cpu", "cpuacct", "freezer"};
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	while (f && fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = '\0';
		char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
		if (!b)
			continue;
		*b = '\0';
		const char *self = strcmp(b + 1, "/") ? b + 1 : "";
		char dir[4096];
		if (!a[1]) { /* v2 */
			const char *mounts[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
			for (int m = 0; m < 2; m++) {
				snprintf(dir, sizeof dir, "%s%s/%s/envparent", mounts[m], self, parent);
				rmdir(dir);
				snprintf(dir, sizeof dir, "%s%s/%s", mounts[m], self, parent);
				rmdir(dir);
			}
			continue;
		}
		for (char *t = strtok(a + 1, ","); t; t = strtok(NULL, ","))
			for (int c = 0; c < 5; c++)
				if (!strcmp(t, v1[c])) {
					snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s%s/%s/envparent", v1[c], self,
					         parent);
					rmdir(dir);
					snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s%s/%s", v1[c], self, parent);
					if (rmdir(dir) < 0 && errno != ENOENT)
						fprintf(stderr, "test_cgroup: could not remove %s: %s\n", dir,
						        strerror(errno));
				}
	}
	if (f)
		fclose(f);
}

static int group_setup(void **state)
{
	snprintf(parent, sizeof parent, "runbox-test-%d", (int)getpid());
	/* Double-forked test processes reparent to us, so the tests can reap and check them. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	return 0;
}

static int group_teardown(void **state)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	remove_parent();
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_input),
	    cmocka_unit_test(test_limits_written),
	    cmocka_unit_test(test_memory_hog_oom_killed),
	    cmocka_unit_test(test_fork_bomb_stops_at_pids_max),
	    cmocka_unit_test(test_double_forked_daemon_killed),
	    cmocka_unit_test(test_cpu_quota_bound),
	    cmocka_unit_test(test_create_destroy_200),
	    cmocka_unit_test(test_parent_named_by_caller),
	    cmocka_unit_test(test_reclaim_only_runbox_cgroups),
	    cmocka_unit_test(test_unprivileged_gets_none),
	    cmocka_unit_test(test_parent_rule),
	    cmocka_unit_test(test_gateway_leaf),
	    cmocka_unit_test(test_reclaim_takes_gateway_leaf),
	};
	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

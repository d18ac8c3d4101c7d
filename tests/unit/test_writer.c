/* runtime/sandbox/writer.c: the sandbox's writer writes what it is sent where it is sent (holes
 * kept), answers a sync with the bytes written, keeps the first failure until the next file and
 * writes nothing after it, refuses a malformed message, holds no descriptor but its socket and
 * no capability; a writer killed, or one init could not start, fails the caller's next call
 * with why. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "runtime/sandbox/writer.h"

struct w {
	int sock;
	pid_t pid;
};

/* A writer forked from this process, told its parent is parent. */
static struct w start_told(pid_t parent)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sv[0]);
		rb_writer_main(sv[1], parent);
	}
	close(sv[1]);
	return (struct w){sv[0], pid};
}

static struct w start(void)
{
	return start_told(getpid());
}

static int stop(struct w *w)
{
	close(w->sock);
	int st = 0;
	assert_int_equal(waitpid(w->pid, &st, 0), w->pid);
	return st;
}

static int memfile(void)
{
	int fd = memfd_create("writer-test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* The descriptors above stdio the process holds. */
static unsigned fds_above_stdio(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	assert_non_null(d);
	unsigned n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.' && atoi(e->d_name) > 2)
			n++;
	closedir(d);
	return n;
}

static void test_writes_at_offsets(void **state)
{
	struct w w = start();
	struct rb_error err = {0};
	int fd = memfile();
	assert_int_equal(rb_writer_file(w.sock, fd, &err), 0);
	assert_int_equal(rb_writer_data(w.sock, "hello", 5, 0, &err), 0);
	assert_int_equal(rb_writer_data(w.sock, "world", 5, 10, &err), 0);
	uint64_t n = 0;
	assert_int_equal(rb_writer_sync(w.sock, &n, &err), 0);
	assert_int_equal(n, 10);
	char buf[32] = {0};
	assert_int_equal(pread(fd, buf, sizeof buf, 0), 15);
	assert_memory_equal(buf, "hello\0\0\0\0\0world", 15);

	/* More than one message's worth: split by the caller, whole in the file. */
	size_t big = 3 * RB_WRITER_CHUNK + 17;
	char *data = malloc(big);
	assert_non_null(data);
	for (size_t i = 0; i < big; i++)
		data[i] = (char)(i * 7);
	int fd2 = memfile();
	assert_int_equal(rb_writer_file(w.sock, fd2, &err), 0);
	assert_int_equal(rb_writer_data(w.sock, data, big, 0, &err), 0);
	assert_int_equal(rb_writer_sync(w.sock, &n, &err), 0);
	assert_int_equal(n, big); /* counted from the new file */
	char *back = malloc(big);
	assert_non_null(back);
	assert_int_equal(pread(fd2, back, big, 0), (ssize_t)big);
	assert_memory_equal(back, data, big);
	free(data);
	free(back);
	/* Released, it holds nothing of the sandbox's (a removed file's pages would stay). */
	assert_int_equal(fds_above_stdio(w.pid), 2);
	assert_int_equal(rb_writer_release(w.sock, &err), 0);
	assert_int_equal(rb_writer_sync(w.sock, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(fds_above_stdio(w.pid), 1);
	close(fd);
	close(fd2);
	int st = stop(&w);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_failure_kept_until_next_file(void **state)
{
	struct w w = start();
	struct rb_error err = {0};
	int ro = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	assert_true(ro >= 0);
	int fd = memfile();
	assert_int_equal(rb_writer_file(w.sock, ro, &err), 0);
	assert_int_equal(rb_writer_data(w.sock, "x", 1, 0, &err), 0);
	assert_int_equal(rb_writer_sync(w.sock, NULL, &err), -1);
	assert_int_equal(err.errnum, EBADF);
	/* The next file starts clean; the failed one had nothing written after its failure. */
	assert_int_equal(rb_writer_file(w.sock, fd, &err), 0);
	assert_int_equal(rb_writer_data(w.sock, "ok", 2, 0, &err), 0);
	uint64_t n = 0;
	assert_int_equal(rb_writer_sync(w.sock, &n, &err), 0);
	assert_int_equal(n, 2);
	/* Data with no file before it fails at the sync. */
	close(ro);
	close(fd);
	stop(&w);
	w = start();
	assert_int_equal(rb_writer_data(w.sock, "x", 1, 0, &err), 0);
	assert_int_equal(rb_writer_sync(w.sock, NULL, &err), -1);
	assert_int_equal(err.errnum, EBADF);
	stop(&w);
}

static void test_malformed_refused(void **state)
{
	struct w w = start();
	struct rb_error err = {0};
	int fd = memfile();
	assert_int_equal(rb_writer_file(w.sock, fd, &err), 0);
	/* A DATA whose length is not what follows its head, and an unknown op. */
	struct rb_writer_head h = {.op = RB_WRITER_DATA, .len = 100};
	char msg[sizeof h + 4];
	memcpy(msg, &h, sizeof h);
	memcpy(msg + sizeof h, "abcd", 4);
	assert_int_equal(send(w.sock, msg, sizeof msg, 0), (ssize_t)sizeof msg);
	assert_int_equal(rb_writer_sync(w.sock, NULL, &err), -1);
	assert_int_equal(err.errnum, EPROTO);
	struct stat st;
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(rb_writer_file(w.sock, fd, &err), 0);
	h = (struct rb_writer_head){.op = 99};
	assert_int_equal(send(w.sock, &h, sizeof h, 0), (ssize_t)sizeof h);
	assert_int_equal(rb_writer_sync(w.sock, NULL, &err), -1);
	assert_int_equal(err.errnum, EPROTO);
	close(fd);
	stop(&w);
}

/* What the writer holds: its socket and stdio, no capability (the test runs as root), its name. */
static void test_isolated(void **state)
{
	int keep = open("/proc/self/exe", O_RDONLY); /* inherited over fork: must be closed */
	assert_true(keep >= 0);
	struct w w = start();
	struct rb_error err = {0};
	/* Once it answers, it is past its isolation (nothing sent yet: the answer is 0). */
	assert_int_equal(rb_writer_sync(w.sock, NULL, &err), 0);
	assert_int_equal(fds_above_stdio(w.pid), 1); /* the socket alone */
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/status", (int)w.pid);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	char line[256];
	bool cap_seen = false, name_seen = false;
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "CapEff:", 7)) {
			cap_seen = true;
			assert_int_equal(strtoull(line + 7, NULL, 16), 0);
		}
		if (!strncmp(line, "CapPrm:", 7))
			assert_int_equal(strtoull(line + 7, NULL, 16), 0);
		if (!strncmp(line, "Name:", 5)) {
			name_seen = true;
			assert_non_null(strstr(line, "runbox-writer"));
		}
	}
	fclose(f);
	assert_true(cap_seen && name_seen);
	close(keep);
	stop(&w);
}

/* Killed (the OOM killer's choice): the next call says so; then every call does. */
static void test_killed(void **state)
{
	struct w w = start();
	struct rb_error err = {0};
	int fd = memfile();
	assert_int_equal(rb_writer_file(w.sock, fd, &err), 0);
	kill(w.pid, SIGKILL);
	int st;
	waitpid(w.pid, &st, 0);
	int r = rb_writer_data(w.sock, "x", 1, 0, &err);
	if (r == 0)
		r = rb_writer_sync(w.sock, NULL, &err);
	assert_int_equal(r, -1);
	assert_int_equal(err.errnum, ENOMEM);
	assert_int_equal(err.kind, RB_ERR_CONFLICT);
	assert_non_null(strstr(err.msg, "killed"));
	close(fd);
	close(w.sock);
}

/* init could not fork one: its answer (not_started, the errno) is what the caller hears, both
 * when its next send meets the closed socket and at a sync. */
static void test_not_started(void **state)
{
	for (int at_sync = 0; at_sync < 2; at_sync++) {
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
		struct rb_writer_reply r = {.errnum = EAGAIN, .not_started = 1};
		assert_int_equal(send(sv[1], &r, sizeof r, 0), (ssize_t)sizeof r);
		if (!at_sync)
			close(sv[1]);
		struct rb_error err = {0};
		int fd = memfile();
		int got = rb_writer_file(sv[0], fd, &err);
		if (at_sync) {
			assert_int_equal(got, 0);
			got = rb_writer_sync(sv[0], NULL, &err);
			close(sv[1]);
		}
		assert_int_equal(got, -1);
		assert_int_equal(err.errnum, EAGAIN);
		assert_int_equal(err.kind, RB_ERR_CONFLICT); /* the sandbox's pids limit: 409 */
		assert_non_null(strstr(err.msg, "could not start"));
		close(fd);
		close(sv[0]);
	}
}

/* Its parent gone before it began: it exits rather than serve a sandbox whose init is gone. */
static void test_orphan_exits(void **state)
{
	struct w w = start_told(getpid() + 1); /* not its parent */
	int st;
	assert_int_equal(waitpid(w.pid, &st, 0), w.pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	struct rb_error err = {0};
	assert_int_equal(rb_writer_sync(w.sock, NULL, &err), -1);
	close(w.sock);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_writes_at_offsets),
	    cmocka_unit_test(test_failure_kept_until_next_file),
	    cmocka_unit_test(test_malformed_refused),
	    cmocka_unit_test(test_isolated),
	    cmocka_unit_test(test_killed),
	    cmocka_unit_test(test_not_started),
	    cmocka_unit_test(test_orphan_exits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

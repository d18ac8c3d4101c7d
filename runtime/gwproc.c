/* Starting and stopping runbox-gateway for one run (see gwproc.h). */
#define _GNU_SOURCE
#include "runtime/gwproc.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"

#define FIRST_LISTEN_FD 4

int rb_gwproc_start(struct rb_gwproc *gw, const int *fds, unsigned n_fds, const char *run_id, const uint8_t *key,
                    size_t keylen, struct rb_error *err)
{
	char exe[PATH_MAX], bin[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n < 0)
		return rb_error_set(err, errno, "readlink `/proc/self/exe`");
	exe[n] = '\0';
	snprintf(bin, sizeof bin, "%s/runbox-gateway", dirname(exe));

	/* The config (with the key) goes through a pipe, never argv or the environment. */
	char hex[2 * 64 + 1] = "";
	for (size_t i = 0; i < keylen && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	json_t *listen = json_array();
	for (unsigned i = 0; i < n_fds; i++)
		json_array_append_new(listen, json_integer(FIRST_LISTEN_FD + (int)i));
	json_t *cfg = json_pack("{s:s, s:s, s:o}", "run_id", run_id, "key", hex, "listen_fds", listen);
	_cleanup_free_ char *text = json_dumps(cfg, JSON_COMPACT);
	json_decref(cfg);
	memset(hex, 0, sizeof hex);
	int cp[2], op[2];
	if (!text || pipe2(cp, O_CLOEXEC) < 0)
		return rb_error_set(err, errno, "gateway: pipe");
	if (pipe2(op, O_CLOEXEC) < 0) {
		close(cp[0]), close(cp[1]);
		return rb_error_set(err, errno, "gateway: pipe");
	}
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(cp[0]), close(cp[1]), close(op[0]), close(op[1]);
		return rb_error_set(err, e, "gateway: fork");
	}
	if (pid == 0) {
		/* Every source fd first moves above the targets, so no dup2 clobbers another. */
		int moved[8], cfg_fd = fcntl(cp[0], F_DUPFD, 64), out_fd = fcntl(op[1], F_DUPFD, 64);
		for (unsigned i = 0; i < n_fds && i < 8; i++)
			moved[i] = fcntl(fds[i], F_DUPFD, 64);
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(cfg_fd, 3) < 0)
			_exit(125);
		for (unsigned i = 0; i < n_fds && i < 8; i++)
			if (dup2(moved[i], FIRST_LISTEN_FD + (int)i) < 0)
				_exit(125);
		closefrom(FIRST_LISTEN_FD + (int)n_fds);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execl(bin, "runbox-gateway", (char *)NULL);
		_exit(127);
	}
	close(cp[0]);
	close(op[1]);
	size_t len = strlen(text);
	ssize_t w = write(cp[1], text, len);
	close(cp[1]);
	memset(text, 0, len);
	gw->pid = pid;
	gw->out = op[0];
	if (w != (ssize_t)len)
		return rb_error_set(err, EIO, "gateway: write config");
	return 0;
}

void rb_gwproc_stop(struct rb_gwproc *gw)
{
	if (gw->pid <= 0)
		return;
	kill(gw->pid, SIGTERM);
	char buf[512];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(gw->out, buf + len, sizeof buf - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (len += (size_t)n) >= sizeof buf - 1)
			break;
	}
	buf[len] = '\0';
	close(gw->out);
	gw->out = -1;
	int status = 0;
	struct rusage ru = {0};
	while (wait4(gw->pid, &status, 0, &ru) < 0 && errno == EINTR)
		;
	gw->pid = 0;
	json_error_t jerr;
	gw->stats = json_loads(buf, 0, &jerr);
	/* The gateway's CPU is the host's work for the run: it goes into the run's cost. */
	double cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	                (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
	if (json_is_object(gw->stats))
		json_object_set_new(gw->stats, "cpu_ms", json_real(cpu_ms));
	gw->failed = !gw->stats || !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

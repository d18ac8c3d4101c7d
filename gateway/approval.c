/* Held calls' files and the wait for their decision (see approval.h). */
#define _GNU_SOURCE
#include "gateway/approval.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"

const struct rb_policy_approval *rb_gw_approval_rule(const struct rb_policy_approval *rules, unsigned n,
                                                     const char *connector, const char *method)
{
	for (unsigned i = 0; i < n; i++) {
		if (strcmp(rules[i].connector, connector) != 0)
			continue;
		for (unsigned m = 0; m < rules[i].n_methods; m++)
			if (!strcmp(rules[i].methods[m], method))
				return &rules[i];
	}
	return NULL;
}

const struct rb_policy_approval *rb_gw_approval_mcp_rule(const struct rb_policy_approval *rules, unsigned n,
                                                         const char *server, const char *tool)
{
	for (unsigned i = 0; i < n; i++) {
		if (!rules[i].mcp[0] || strcmp(rules[i].mcp, server) != 0)
			continue;
		for (unsigned t = 0; t < rules[i].n_tools; t++) {
			size_t l = strlen(rules[i].tools[t]);
			if (l && rules[i].tools[t][l - 1] == '*' ? !strncmp(rules[i].tools[t], tool, l - 1)
			                                         : !strcmp(rules[i].tools[t], tool))
				return &rules[i];
		}
	}
	return NULL;
}

void rb_gw_approval_id(char out[24])
{
	unsigned char r[8] = {0};
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		memcpy(r, &ts.tv_nsec, sizeof r < sizeof ts.tv_nsec ? sizeof r : sizeof ts.tv_nsec);
	}
	snprintf(out, 24, "apr-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

/* "approved", "denied", "expired", or "" while undecided. */
static void read_decision(const char *dir, const char *id, char *out, size_t n)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s.decision", dir, id);
	out[0] = '\0';
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	ssize_t got = read(fd, out, n - 1);
	out[got > 0 ? got : 0] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

/* The decision, first come: a temporary file linked to <id>.decision (EEXIST: decided). */
static int decide(const char *dir, const char *id, const char *what)
{
	char tmp[4200], path[4200];
	snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", dir, id, (int)getpid());
	snprintf(path, sizeof path, "%s/%s.decision", dir, id);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	bool ok = write(fd, what, strlen(what)) == (ssize_t)strlen(what);
	int r = ok ? link(tmp, path) : -1;
	unlink(tmp);
	return r;
}

int rb_gw_approval_wait(const char *dir, const char *id, json_t *request, unsigned timeout_s, int stop_fd, char *why,
                        size_t n)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(why, n, "approvals directory `%s`: %s", dir, strerror(errno));
		return -2;
	}
	char tmp[4200], path[4200];
	snprintf(tmp, sizeof tmp, "%s/.%s.json.tmp", dir, id);
	snprintf(path, sizeof path, "%s/%s.json", dir, id);
	_cleanup_free_ char *text = json_dumps(request, JSON_COMPACT | JSON_SORT_KEYS);
	_cleanup_close_ int fd = text ? open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || rename(tmp, path) < 0) {
		snprintf(why, n, "approval request `%s`: %s", path, strerror(errno));
		unlink(tmp);
		return -2;
	}
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	char d[32];
	for (;;) {
		read_decision(dir, id, d, sizeof d);
		if (d[0])
			break;
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= (time_t)timeout_s) {
			if (decide(dir, id, "expired") == 0 || errno != EEXIST) {
				snprintf(why, n, "no decision within %u s: denied", timeout_s);
				return -1;
			}
			continue; /* a decision came in the same instant: it counts */
		}
		/* A decision is a file another process writes: looked at every 50 ms while held. */
		struct pollfd p = {.fd = stop_fd, .events = POLLIN};
		if (poll(&p, 1, 50) > 0) {
			snprintf(why, n, "the gateway stopped while the call was held");
			return -1;
		}
	}
	if (!strcmp(d, "approved"))
		return 1;
	snprintf(why, n, "%s", !strcmp(d, "denied") ? "denied by `runbox deny`" : "no decision in time: denied");
	return !strcmp(d, "denied") ? 0 : -1;
}

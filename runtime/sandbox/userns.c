/* User namespace id maps: planning the ranges, writing the maps, newuidmap for rootless. */
#define _GNU_SOURCE
#include "runtime/sandbox/userns.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "runtime/sandbox/idslice.h"

int rb_subid_lookup(const char *file, const char *name, uint32_t id, uint32_t *start, uint32_t *count)
{
	_cleanup_fclose_ FILE *f = fopen(file, "re");
	if (!f)
		return -1;
	char line[512], idstr[16];
	snprintf(idstr, sizeof idstr, "%" PRIu32, id);
	while (fgets(line, sizeof line, f)) {
		char *save = NULL;
		char *who = strtok_r(line, ":\n", &save);
		char *s = strtok_r(NULL, ":\n", &save);
		char *c = strtok_r(NULL, ":\n", &save);
		if (!who || !s || !c)
			continue;
		if ((name && !strcmp(who, name)) || !strcmp(who, idstr)) {
			char *e1, *e2;
			unsigned long vs = strtoul(s, &e1, 10), vc = strtoul(c, &e2, 10);
			if (*e1 || *e2 || vc == 0 || vs > UINT32_MAX || vc > UINT32_MAX - vs)
				continue;
			*start = (uint32_t)vs;
			*count = (uint32_t)vc;
			return 0;
		}
	}
	return -1;
}

/* True when /proc/self/uid_map is the initial namespace's identity map. */
static bool in_initial_userns(void)
{
	char *text = NULL;
	if (rb_read_file("/proc/self/uid_map", 4096, &text, NULL, NULL) < 0)
		return false;
	unsigned long a, b, c;
	bool init = sscanf(text, "%lu %lu %lu", &a, &b, &c) == 3 && a == 0 && b == 0 && c == 4294967295UL;
	free(text);
	return init;
}

/* The count of ids mapped from 0 upwards contiguously in our own namespace. */
static uint32_t own_contiguous_ids(const char *file)
{
	_cleanup_fclose_ FILE *f = fopen(file, "re");
	if (!f)
		return 1;
	unsigned long in, out, cnt;
	while (fscanf(f, "%lu %lu %lu", &in, &out, &cnt) == 3)
		if (in == 0)
			return cnt > UINT32_MAX ? UINT32_MAX : (uint32_t)cnt;
	return 1;
}

static bool on_path(const char *prog)
{
	char p[PATH_MAX];
	return rb_find_in_path(prog, p, sizeof p);
}

static void line(struct rb_idmap *m, uint32_t inside, uint32_t outside, uint32_t count)
{
	m->lines[m->n++] = (struct rb_idmap_line){inside, outside, count};
}

int rb_userns_plan(const struct rb_policy *pol, struct rb_idplan *plan, struct rb_error *err)
{
	memset(plan, 0, sizeof *plan);
	uid_t euid = geteuid();
	gid_t egid = getegid();
	bool want_single = pol->id_range == RB_ID_RANGE_SINGLE;
	bool required = pol->id_range == RB_ID_RANGE_REQUIRED;
	uint32_t u = (uint32_t)pol->uid, g = (uint32_t)pol->gid;

	if (euid == 0 && in_initial_userns()) {
		uint32_t us = RB_DEFAULT_SUBID_START, uc = RB_SANDBOX_IDS * RB_DEFAULT_SUBID_SLICES;
		uint32_t gs = RB_DEFAULT_SUBID_START, gc = RB_SANDBOX_IDS * RB_DEFAULT_SUBID_SLICES;
		bool have_u = rb_subid_lookup("/etc/subuid", "runbox", UINT32_MAX, &us, &uc) == 0;
		bool have_g = rb_subid_lookup("/etc/subgid", "runbox", UINT32_MAX, &gs, &gc) == 0;
		plan->slices = (uc < gc ? uc : gc) / RB_SANDBOX_IDS;
		if (uc > RB_SANDBOX_IDS)
			uc = RB_SANDBOX_IDS;
		if (gc > RB_SANDBOX_IDS)
			gc = RB_SANDBOX_IDS;
		if (us == 0 || gs == 0)
			return rb_error_set(err, 0, "/etc/subuid or /etc/subgid: the runbox range must not start at 0");
		if (want_single) {
			line(&plan->uid, u, us, 1);
			line(&plan->gid, g, gs, 1);
			plan->single = true;
		} else {
			if (u >= uc || g >= gc)
				return rb_error_set(
				    err, 0, "policy uid %u / gid %u is outside the %" PRIu32 " ids of the runbox range",
				    (unsigned)u, (unsigned)g, uc);
			line(&plan->uid, 0, us, uc);
			line(&plan->gid, 0, gs, gc);
		}
		snprintf(plan->source, sizeof plan->source, "%s",
		         have_u && have_g ? "/etc/subuid and /etc/subgid entry `runbox`" : "runbox default range");
		return 0;
	}

	if (euid == 0) {
		/* Root in a user namespace of someone else's making (unshare -r): use what is mapped. */
		uint32_t uc = own_contiguous_ids("/proc/self/uid_map"), gc = own_contiguous_ids("/proc/self/gid_map");
		if (!want_single && uc >= RB_SANDBOX_IDS && gc >= RB_SANDBOX_IDS) {
			line(&plan->uid, 0, 0, RB_SANDBOX_IDS);
			line(&plan->gid, 0, 0, RB_SANDBOX_IDS);
		} else if (required) {
			return rb_error_set(
			    err, 0, "policy requires an id range, but this user namespace maps only %" PRIu32 " uid(s)",
			    uc);
		} else {
			line(&plan->uid, u, 0, 1);
			line(&plan->gid, g, 0, 1);
			plan->single = true;
		}
		snprintf(plan->source, sizeof plan->source, "the ids of the caller's user namespace");
		return 0;
	}

	/* Rootless: an owner namespace first. */
	plan->outer = true;
	struct passwd *pw = getpwuid(euid);
	const char *name = pw ? pw->pw_name : NULL;
	uint32_t us, uc, gs, gc;
	bool have_ranges = !want_single && rb_subid_lookup("/etc/subuid", name, euid, &us, &uc) == 0 &&
	                   rb_subid_lookup("/etc/subgid", name, euid, &gs, &gc) == 0;
	bool helpers = on_path("newuidmap") && on_path("newgidmap");
	line(&plan->outer_uid, 0, euid, 1);
	line(&plan->outer_gid, 0, egid, 1);
	if (have_ranges && helpers) {
		if (uc > RB_SANDBOX_IDS - 1)
			uc = RB_SANDBOX_IDS - 1;
		if (gc > RB_SANDBOX_IDS - 1)
			gc = RB_SANDBOX_IDS - 1;
		line(&plan->outer_uid, 1, us, uc);
		line(&plan->outer_gid, 1, gs, gc);
		plan->outer_helpers = true;
		if (u > uc || g > gc)
			return rb_error_set(err, 0,
			                    "policy uid %u / gid %u is outside your %" PRIu32 " subordinate ids",
			                    (unsigned)u, (unsigned)g, uc);
		/* Sandbox root is the caller (podman's rootless model); others are subordinate ids.
		 * One line per line of the owner's map: the kernel maps each line of a child's map
		 * into a single line of its parent's, so "0 0 uc+1" across the owner's two lines is
		 * refused (EPERM). */
		line(&plan->uid, 0, 0, 1);
		line(&plan->uid, 1, 1, uc);
		line(&plan->gid, 0, 0, 1);
		line(&plan->gid, 1, 1, gc);
		snprintf(plan->source, sizeof plan->source, "newuidmap with the /etc/subuid entry of `%s`",
		         name ? name : "?");
		return 0;
	}
	if (required)
		return rb_error_set(err, 0,
		                    "policy requires an id range: %s; add one (usermod --add-subuids 100000-165535 "
		                    "--add-subgids 100000-165535 %s) and install uidmap",
		                    !have_ranges ? "no /etc/subuid and /etc/subgid entry for this user"
		                                 : "newuidmap/newgidmap not found in /usr/bin or /bin",
		                    name ? name : "USER");
	line(&plan->uid, u, 0, 1);
	line(&plan->gid, g, 0, 1);
	plan->single = true;
	snprintf(plan->source, sizeof plan->source, "the caller's own id only (%s)",
	         want_single    ? "policy asks for one id"
	         : !have_ranges ? "no /etc/subuid entry"
	                        : "no newuidmap");
	return 0;
}

void rb_idmap_format(const struct rb_idmap *m, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < m->n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%" PRIu32 " %" PRIu32 " %" PRIu32, i ? "," : "",
		                        m->lines[i].inside, m->lines[i].outside, m->lines[i].count);
}

static int write_map(pid_t pid, const char *which, const struct rb_idmap *m, struct rb_error *err)
{
	char path[64], text[256];
	size_t off = 0;
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, which);
	for (unsigned i = 0; i < m->n; i++)
		off += (size_t)snprintf(text + off, sizeof text - off, "%" PRIu32 " %" PRIu32 " %" PRIu32 "\n",
		                        m->lines[i].inside, m->lines[i].outside, m->lines[i].count);
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, text, off) != (ssize_t)off)
		return rb_error_set(err, errno, "write `%s` (%.*s)", path, (int)(off ? off - 1 : 0), text);
	return 0;
}

int rb_userns_write_maps(pid_t pid, const struct rb_idmap *uid, const struct rb_idmap *gid, bool deny_setgroups,
                         struct rb_error *err)
{
	if (write_map(pid, "uid_map", uid, err) < 0)
		return -1;
	if (deny_setgroups) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/setgroups", (int)pid);
		if (rb_write_file(path, "deny", err) < 0)
			return -1;
	}
	return write_map(pid, "gid_map", gid, err);
}

/* prog from the system's directories (rb_find_in_path), with an empty environment: a setuid
 * helper gets nothing of the runner's PATH or variables. */
static int run_helper(const char *prog, pid_t pid, const struct rb_idmap *m, struct rb_error *err)
{
	char path[PATH_MAX];
	if (!rb_find_in_path(prog, path, sizeof path))
		return rb_error_set(err, ENOENT, "`%s` is not installed in the system's directories (Debian: uidmap)",
		                    prog);
	char args[10][16];
	char *argv[12];
	char *envp[] = {NULL};
	int a = 0;
	argv[a++] = (char *)prog;
	snprintf(args[0], sizeof args[0], "%d", (int)pid);
	argv[a++] = args[0];
	for (unsigned i = 0; i < m->n && i < 3; i++) {
		snprintf(args[1 + 3 * i], 16, "%" PRIu32, m->lines[i].inside);
		snprintf(args[2 + 3 * i], 16, "%" PRIu32, m->lines[i].outside);
		snprintf(args[3 + 3 * i], 16, "%" PRIu32, m->lines[i].count);
		argv[a++] = args[1 + 3 * i];
		argv[a++] = args[2 + 3 * i];
		argv[a++] = args[3 + 3 * i];
	}
	argv[a] = NULL;
	pid_t child;
	int r = posix_spawn(&child, path, NULL, NULL, argv, envp);
	if (r != 0)
		return rb_error_set(err, r, "run `%s`", prog);
	int status;
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			return rb_error_set(err, errno, "wait for `%s`", prog);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return rb_error_set(err, 0, "`%s %d ...` failed (status %d): check /etc/subuid and /etc/subgid", prog,
		                    (int)pid, status);
	return 0;
}

int rb_userns_write_outer(pid_t pid, const struct rb_idplan *plan, struct rb_error *err)
{
	if (plan->outer_helpers)
		return run_helper("newuidmap", pid, &plan->outer_uid, err) < 0
		           ? -1
		           : run_helper("newgidmap", pid, &plan->outer_gid, err);
	return rb_userns_write_maps(pid, &plan->outer_uid, &plan->outer_gid, true, err);
}

int rb_userns_take_slice(struct rb_idplan *plan, const char *lock_dir, int *lock_fd, struct rb_error *err)
{
	*lock_fd = -1;
	if (plan->outer || plan->slices < 2)
		return 0;
	unsigned slot = 0;
	int fd = rb_idslice_acquire(lock_dir, plan->slices, &slot, err);
	if (fd < 0)
		return -1;
	uint32_t shift = slot * RB_SANDBOX_IDS; /* < the range's count, so no overflow */
	for (unsigned i = 0; i < plan->uid.n; i++)
		plan->uid.lines[i].outside += shift;
	for (unsigned i = 0; i < plan->gid.n; i++)
		plan->gid.lines[i].outside += shift;
	size_t len = strlen(plan->source);
	snprintf(plan->source + len, sizeof plan->source - len, ", slice %u of %" PRIu32, slot, plan->slices);
	*lock_fd = fd;
	return 0;
}

/* The policy loader: finds a policy by name or path, validates it strictly against the schema
 * in docs/policy.md (every error names the origin and the JSON path), fills struct rb_policy
 * with defaults for what is absent, and hashes it with its seccomp profile for the ledger. */
#define _GNU_SOURCE
#include "policy/policy.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/jsoncheck.h"
#include "common/util.h"

#define POLICY_FILE_MAX  (1u << 20)
#define SECCOMP_FILE_MAX (1u << 20)

/* Defaults for absent keys; docs/policy.md lists them and must change with them. */
#define DEFAULT_PATH       "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define DEFAULT_OUTPUT_MAX (1ull << 20)
#define DEFAULT_SHELL      "/bin/sh"
#define DEFAULT_HOSTNAME   "runbox"
#define DEFAULT_SECCOMP    "default"
#define RLIMIT_KEEP        UINT64_MAX
/* Absent is safe (SPEC "Who may say what"): a policy that names no limit gets the shipped
 * `default` profile's value for it; no limit at all is written out as "unlimited". */
#define DEFAULT_TIMEOUT_MS        (30ull * 60 * 1000)
#define DEFAULT_MEMORY            (1ull << 30)
#define DEFAULT_PIDS              1024
#define DEFAULT_CPUS              2.0
#define DEFAULT_ROOTFS_SIZE       (1ull << 30)
#define DEFAULT_WORKSPACE_SIZE    (1ull << 30)
#define DEFAULT_TMP_SIZE          (256ull << 20)
#define DEFAULT_NOFILE            1024
#define DEFAULT_NPROC             4096
#define DEFAULT_CORE              0
#define DEFAULT_FSIZE             (1ull << 30)
#define UNLIMITED                 "unlimited"
#define DEFAULT_IMAGE_MAX_ENTRIES 1000000u
#define DEFAULT_IMAGE_MAX_BYTES   (16ull << 30)
/* A run's storage budget when the policy names none (docs/policy.md, "output"). */
#define DEFAULT_RUN_BYTES    (1ull << 30)
#define DEFAULT_RUN_FILES    100000u
#define DEFAULT_RUN_EVENTS   100000u
#define DEFAULT_TENANT_BYTES (50ull << 30)
#define DEFAULT_MIN_FREE     (1ull << 30)

static const char *const cap_names[] = {
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
};
_Static_assert(RB_ARRAY_SIZE(cap_names) == 41, "capability table must cover 0..40");
_Static_assert(RB_ARRAY_SIZE(cap_names) <= 64, "caps is a 64-bit mask");

const char *rb_cap_name(unsigned n)
{
	return n < RB_ARRAY_SIZE(cap_names) ? cap_names[n] : NULL;
}

int rb_cap_from_name(const char *name)
{
	if (!name || !*name)
		return -1;
	/* "CAP_CHOWN", "cap_chown" and "chown" all name bit 0; case never changes meaning. */
	const char *bare = strncasecmp(name, "CAP_", 4) == 0 ? name + 4 : name;
	for (unsigned i = 0; i < RB_ARRAY_SIZE(cap_names); i++)
		if (strcasecmp(bare, cap_names[i] + 4) == 0)
			return (int)i;
	return -1;
}

/* ---- error reporting ---------------------------------------------------------------- */

/* Messages read "policy <origin>: <json path>: <what is wrong>" (common/jsoncheck.c). */

/* ---- typed readers: each validates one value and names its path on failure ---------- */

static int get_section(const struct rb_jsonck *c, const json_t *root, const char *key, json_t **out)
{
	json_t *v = json_object_get(root, key);
	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return rb_jsonck_expected(c, key, "an object", v);
	*out = v;
	return 0;
}

static int get_string(const struct rb_jsonck *c, const char *path, const json_t *v, char *out, size_t len)
{
	if (!json_is_string(v))
		return rb_jsonck_expected(c, path, "a string", v);
	const char *s = json_string_value(v);
	if (strlen(s) >= len)
		return rb_jsonck_bad(c, path, "longer than %zu characters", len - 1);
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

static int get_uint(const struct rb_jsonck *c, const char *path, const json_t *v, uint64_t min, uint64_t max,
                    uint64_t *out)
{
	if (!json_is_integer(v))
		return rb_jsonck_expected(c, path, "an integer", v);
	json_int_t n = json_integer_value(v);
	if (n < 0 || (uint64_t)n < min || (uint64_t)n > max)
		return rb_jsonck_bad(c, path, "%" JSON_INTEGER_FORMAT " is out of range %" PRIu64 "..%" PRIu64, n, min,
		                     max);
	*out = (uint64_t)n;
	return 0;
}

/* A size: a string like "256M" / "0.5G" (binary units) or an integer count of bytes. */
static int get_size(const struct rb_jsonck *c, const char *path, const json_t *v, uint64_t min, uint64_t *out)
{
	uint64_t b;
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		b = (uint64_t)json_integer_value(v);
	} else if (json_is_string(v) && rb_parse_size(json_string_value(v), &b) == 0) {
		/* parsed */
	} else {
		return rb_jsonck_expected(c, path, "a size like \"256M\" or a number of bytes", v);
	}
	if (b < min)
		return rb_jsonck_bad(c, path, "must be at least %" PRIu64 " bytes", min);
	*out = b;
	return 0;
}

/* A duration: a string like "30s" / "300ms" / "5m". Bare numbers are refused because
 * seconds-or-milliseconds is exactly the ambiguity that makes a limit silently wrong. */
static int get_duration(const struct rb_jsonck *c, const char *path, const json_t *v, uint64_t *out)
{
	uint64_t ms;
	if (!json_is_string(v) || rb_parse_duration_ms(json_string_value(v), &ms) < 0)
		return rb_jsonck_expected(c, path, RB_DURATION_HINT, v);
	if (ms == 0)
		return rb_jsonck_bad(c, path, "must be at least 1ms (write \"unlimited\" for no limit)");
	*out = ms;
	return 0;
}

static bool is_unlimited(const json_t *v)
{
	return json_is_string(v) && !strcmp(json_string_value(v), UNLIMITED);
}

/* A limit: what its reader takes, or "unlimited" (stored as `none`). */
static int get_limit_duration(const struct rb_jsonck *c, const char *path, const json_t *v, uint64_t *out)
{
	if (is_unlimited(v)) {
		*out = 0;
		return 0;
	}
	return get_duration(c, path, v, out);
}

static int get_limit_size(const struct rb_jsonck *c, const char *path, const json_t *v, uint64_t min, uint64_t none,
                          uint64_t *out)
{
	if (is_unlimited(v)) {
		*out = none;
		return 0;
	}
	return get_size(c, path, v, min, out);
}

static int get_limit_uint(const struct rb_jsonck *c, const char *path, const json_t *v, uint64_t min, uint64_t max,
                          uint64_t none, uint64_t *out)
{
	if (is_unlimited(v)) {
		*out = none;
		return 0;
	}
	if (!json_is_integer(v))
		return rb_jsonck_expected(c, path, "an integer or \"unlimited\"", v);
	return get_uint(c, path, v, min, max, out);
}

static bool all_chars(const char *s, const char *extra, bool upper, bool digits_first)
{
	if (!*s)
		return false;
	for (const char *p = s; *p; p++) {
		char ch = *p;
		bool ok = (ch >= 'a' && ch <= 'z') || (upper && ch >= 'A' && ch <= 'Z') ||
		          (ch >= '0' && ch <= '9' && (digits_first || p != s)) || (ch && strchr(extra, ch));
		if (!ok)
			return false;
	}
	return true;
}

static bool env_name_ok(const char *s)
{
	return all_chars(s, "_", true, false);
}

/* Array of strings into a strdup'd list; check returns a reason for a bad entry, or NULL. */
static int get_list(const struct rb_jsonck *c, const char *path, const json_t *v, char **list, unsigned *n,
                    const char *(*check)(const char *))
{
	if (!json_is_array(v))
		return rb_jsonck_expected(c, path, "an array of strings", v);
	if (json_array_size(v) > RB_POLICY_MAX_LIST)
		return rb_jsonck_bad(c, path, "at most %d entries, got %zu", RB_POLICY_MAX_LIST, json_array_size(v));
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		char ipath[300];
		snprintf(ipath, sizeof ipath, "%s[%zu]", path, i);
		if (!json_is_string(e))
			return rb_jsonck_expected(c, ipath, "a string", e);
		const char *s = json_string_value(e);
		const char *why = check ? check(s) : NULL;
		if (why)
			return rb_jsonck_bad(c, ipath, "\"%.80s\": %s", s, why);
		list[*n] = strdup(s);
		if (!list[*n])
			return rb_error_set(c->err, ENOMEM, "policy %s: %s", c->origin, ipath);
		(*n)++;
	}
	return 0;
}

static bool in_list(char *const *list, unsigned n, const char *s, size_t len)
{
	for (unsigned i = 0; i < n; i++)
		if (strncmp(list[i], s, len) == 0 && (list[i][len] == '\0' || list[i][len] == '='))
			return true;
	return false;
}

/* ---- sections ------------------------------------------------------------------------ */

static const char *check_syscall(const char *s)
{
	/* Whether the name exists is the seccomp module's call (it knows the arch tables). */
	if (strlen(s) >= RB_NAME_MAX)
		return "too long for a syscall name";
	return all_chars(s, "_", false, true) ? NULL : "a syscall name is [a-z0-9_]+";
}

static const char *check_env_name(const char *s)
{
	return env_name_ok(s) ? NULL : "not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)";
}

static const char *check_prefix(const char *s)
{
	if (s[0] != '/')
		return "a prefix must be an absolute path";
	if (strlen(s) >= 4096)
		return "longer than PATH_MAX";
	/* Prefixes are compared textually against canonical paths, so "." and ".." would never
	 * match what they seem to say. */
	for (const char *p = s; (p = strchr(p, '/')); p++) {
		const char *q = p + 1;
		size_t n = strcspn(q, "/");
		if ((n == 1 && q[0] == '.') || (n == 2 && q[0] == '.' && q[1] == '.'))
			return "\".\" and \"..\" are not allowed in a prefix";
	}
	return NULL;
}

static int parse_identity(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"uid", "gid", "id_range", "capabilities", NULL};
	if (rb_jsonck_keys(c, "identity", sec, keys) < 0)
		return -1;
	json_t *v;
	uint64_t n;
	/* (uid_t)-1 means "no change" to setresuid, so it is never a valid identity. */
	if ((v = json_object_get(sec, "uid"))) {
		if (get_uint(c, "identity.uid", v, 0, UINT32_MAX - 1, &n) < 0)
			return -1;
		p->uid = (uid_t)n;
	}
	if ((v = json_object_get(sec, "gid"))) {
		if (get_uint(c, "identity.gid", v, 0, UINT32_MAX - 1, &n) < 0)
			return -1;
		p->gid = (gid_t)n;
	}
	if ((v = json_object_get(sec, "id_range"))) {
		const char *s = json_string_value(v);
		if (s && !strcmp(s, "auto"))
			p->id_range = RB_ID_RANGE_AUTO;
		else if (s && !strcmp(s, "required"))
			p->id_range = RB_ID_RANGE_REQUIRED;
		else if (s && !strcmp(s, "single"))
			p->id_range = RB_ID_RANGE_SINGLE;
		else
			return rb_jsonck_expected(c, "identity.id_range", "one of \"auto\", \"required\", \"single\"",
			                          v);
	}
	if ((v = json_object_get(sec, "capabilities"))) {
		if (!json_is_array(v))
			return rb_jsonck_expected(c, "identity.capabilities", "an array of capability names", v);
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e)
		{
			char ipath[64];
			snprintf(ipath, sizeof ipath, "identity.capabilities[%zu]", i);
			if (!json_is_string(e))
				return rb_jsonck_expected(c, ipath, "a capability name like \"CAP_CHOWN\"", e);
			int bit = rb_cap_from_name(json_string_value(e));
			if (bit < 0)
				return rb_jsonck_bad(c, ipath, "unknown capability \"%.80s\"", json_string_value(e));
			p->caps |= 1ull << bit;
		}
	}
	return 0;
}

static int parse_limits(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"timeout",          "memory",      "pids",           "cpus",
	                                   "cpu_weight",       "rootfs_size", "workspace_size", "tmp_size",
	                                   "require_enforced", NULL};
	if (rb_jsonck_keys(c, "limits", sec, keys) < 0)
		return -1;
	json_t *v;
	/* Zero is "unlimited" in struct rb_policy, so a number that is present must be real. */
	if ((v = json_object_get(sec, "timeout")) && get_limit_duration(c, "limits.timeout", v, &p->timeout_ms) < 0)
		return -1;
	if ((v = json_object_get(sec, "memory")) && get_limit_size(c, "limits.memory", v, 1, 0, &p->memory_bytes) < 0)
		return -1;
	if ((v = json_object_get(sec, "pids")) && get_limit_uint(c, "limits.pids", v, 1, UINT32_MAX, 0, &p->pids) < 0)
		return -1;
	if ((v = json_object_get(sec, "cpus"))) {
		if (is_unlimited(v))
			p->cpus = 0;
		else if (!json_is_number(v) || !(json_number_value(v) > 0) || !isfinite(json_number_value(v)))
			return rb_jsonck_expected(c, "limits.cpus", "a number of cores greater than 0 or \"unlimited\"",
			                          v);
		else
			p->cpus = json_number_value(v);
	}
	if ((v = json_object_get(sec, "cpu_weight")) &&
	    get_uint(c, "limits.cpu_weight", v, 1, 10000, &p->cpu_weight) < 0)
		return -1;
	if ((v = json_object_get(sec, "rootfs_size")) && get_size(c, "limits.rootfs_size", v, 1, &p->rootfs_bytes) < 0)
		return -1;
	if ((v = json_object_get(sec, "workspace_size")) &&
	    get_size(c, "limits.workspace_size", v, 1, &p->workspace_bytes) < 0)
		return -1;
	if ((v = json_object_get(sec, "tmp_size")) && get_size(c, "limits.tmp_size", v, 1, &p->tmp_bytes) < 0)
		return -1;
	if ((v = json_object_get(sec, "require_enforced"))) {
		if (!json_is_boolean(v))
			return rb_jsonck_expected(c, "limits.require_enforced", "true or false", v);
		p->require_enforced = json_is_true(v);
	}
	return 0;
}

static int parse_rlimits(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"nofile", "nproc", "core", "fsize", NULL};
	if (rb_jsonck_keys(c, "rlimits", sec, keys) < 0)
		return -1;
	json_t *v;
	/* UINT64_MAX is "unlimited": runbox sets none, the step keeps the runner's own. */
	if ((v = json_object_get(sec, "nofile")) &&
	    get_limit_uint(c, "rlimits.nofile", v, 0, UINT32_MAX, RLIMIT_KEEP, &p->rlimit_nofile) < 0)
		return -1;
	if ((v = json_object_get(sec, "nproc")) &&
	    get_limit_uint(c, "rlimits.nproc", v, 0, UINT32_MAX, RLIMIT_KEEP, &p->rlimit_nproc) < 0)
		return -1;
	if ((v = json_object_get(sec, "core")) &&
	    get_limit_size(c, "rlimits.core", v, 0, RLIMIT_KEEP, &p->rlimit_core) < 0)
		return -1;
	if ((v = json_object_get(sec, "fsize")) &&
	    get_limit_size(c, "rlimits.fsize", v, 0, RLIMIT_KEEP, &p->rlimit_fsize) < 0)
		return -1;
	return 0;
}

static int parse_seccomp(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"profile", "deny", "allow", NULL};
	if (rb_jsonck_keys(c, "seccomp", sec, keys) < 0)
		return -1;
	json_t *v;
	if ((v = json_object_get(sec, "profile"))) {
		if (get_string(c, "seccomp.profile", v, p->seccomp_profile, sizeof p->seccomp_profile) < 0)
			return -1;
		/* The name becomes a file name under policy/seccomp/: no separators, no dots. */
		if (!all_chars(p->seccomp_profile, "_-", false, true))
			return rb_jsonck_bad(c, "seccomp.profile", "\"%s\": a profile name is [a-z0-9_-]+",
			                     p->seccomp_profile);
	}
	if ((v = json_object_get(sec, "deny")) &&
	    get_list(c, "seccomp.deny", v, p->seccomp_deny, &p->n_seccomp_deny, check_syscall) < 0)
		return -1;
	if ((v = json_object_get(sec, "allow")) &&
	    get_list(c, "seccomp.allow", v, p->seccomp_allow, &p->n_seccomp_allow, check_syscall) < 0)
		return -1;
	for (unsigned i = 0; i < p->n_seccomp_allow; i++) {
		const char *s = p->seccomp_allow[i];
		if (in_list(p->seccomp_deny, p->n_seccomp_deny, s, strlen(s)))
			return rb_jsonck_bad(c, "seccomp.allow", "\"%s\" is also in seccomp.deny", s);
	}
	return 0;
}

/* A connector's name becomes a URL segment and a key of the gateway's config. */
static const char *check_connector(const char *s)
{
	return *s && strlen(s) < 64 && all_chars(s, "_-", false, true) ? NULL : "a connector name is [a-z0-9_-]{1,63}";
}

/* "host:port" or "*.suffix:port": a lower-case name or an IP literal ([v6]), a port 1..65535. */
static const char *check_proxy(const char *s)
{
	const char *colon = strrchr(s, ':');
	if (!colon || colon == s)
		return "a proxy entry is host:port";
	char *end;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port == 0 || port > 65535)
		return "the port is 1..65535";
	const char *h = s, *he = colon;
	if (*h == '[')
		return he[-1] == ']' && he - h > 2 ? NULL : "an IPv6 literal is [addr]:port";
	if (!strncmp(h, "*.", 2))
		h += 2;
	if (h == he)
		return "a name after *.";
	for (const char *q = h; q < he; q++)
		if (!islower((unsigned char)*q) && !isdigit((unsigned char)*q) && *q != '-' && *q != '.')
			return "a host is lower-case letters, digits, '-' and '.' ('*.' only in front)";
	return NULL;
}

/* network.approval: [{"connector": NAME, "methods": ["POST"], "timeout_s": N}] or
 * [{"mcp": NAME, "tools": ["tool", "prefix*"], "timeout_s": N}] */
static int parse_approvals(const struct rb_jsonck *c, const json_t *v, struct rb_policy *p)
{
	if (!json_is_array(v) || json_array_size(v) > RB_POLICY_MAX_APPROVALS)
		return rb_jsonck_expected(c, "network.approval",
		                          "an array of at most 8 {connector, methods} or {mcp, tools}", v);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		static const char *const keys[] = {"connector", "methods", "mcp", "tools", "timeout_s", NULL};
		char path[64], q[96];
		snprintf(path, sizeof path, "network.approval[%zu]", i);
		struct rb_policy_approval *a = &p->approvals[i];
		if (!json_is_object(e))
			return rb_jsonck_expected(c, path, "an object {connector, methods} or {mcp, tools}", e);
		if (rb_jsonck_keys(c, path, e, keys) < 0)
			return -1;
		bool mcp = json_object_get(e, "mcp") != NULL;
		if (mcp == (json_object_get(e, "connector") != NULL))
			return rb_jsonck_bad(c, path, "exactly one of \"connector\" and \"mcp\"");
		if (json_object_get(e, mcp ? "methods" : "tools"))
			return rb_jsonck_bad(c, path, "%s",
			                     mcp ? "an mcp rule names tools, not methods"
			                         : "a connector rule names methods, not tools");
		const char *name = json_string_value(json_object_get(e, mcp ? "mcp" : "connector"));
		snprintf(q, sizeof q, "%s.%s", path, mcp ? "mcp" : "connector");
		if (!name || check_connector(name))
			return rb_jsonck_bad(c, q, "a %s name is [a-z0-9_-]{1,63}", mcp ? "server" : "connector");
		snprintf(mcp ? a->mcp : a->connector, sizeof a->connector, "%s", name);
		const json_t *ms = json_object_get(e, mcp ? "tools" : "methods");
		snprintf(q, sizeof q, "%s.%s", path, mcp ? "tools" : "methods");
		if (!json_is_array(ms) || json_array_size(ms) == 0 || json_array_size(ms) > 8)
			return rb_jsonck_expected(c, q,
			                          mcp ? "an array of 1..8 tools" : "an array of 1..8 HTTP methods", ms);
		size_t j;
		json_t *m;
		json_array_foreach(ms, j, m)
		{
			const char *ms_ = json_string_value(m);
			if (mcp) {
				const char *star = ms_ ? strchr(ms_, '*') : NULL;
				bool bad = !ms_ || !*ms_ || strlen(ms_) >= sizeof a->tools[0] || (star && star[1]);
				for (const char *x = ms_; !bad && *x; x++)
					bad = (unsigned char)*x < 0x21 || (unsigned char)*x > 0x7e;
				if (bad)
					return rb_jsonck_bad(
					    c, q, "a tool is 1..63 visible ASCII bytes, '*' only at the end");
				snprintf(a->tools[j], sizeof a->tools[j], "%s", ms_);
				continue;
			}
			if (!ms_ || !*ms_ || strlen(ms_) >= sizeof a->methods[0] || !all_chars(ms_, "", true, false))
				return rb_jsonck_bad(c, q, "an HTTP method is 1..15 letters");
			for (size_t k = 0; ms_[k]; k++)
				a->methods[j][k] = (char)toupper((unsigned char)ms_[k]);
		}
		if (mcp)
			a->n_tools = (unsigned)json_array_size(ms);
		else
			a->n_methods = (unsigned)json_array_size(ms);
		a->timeout_s = RB_POLICY_APPROVAL_TIMEOUT_S;
		const json_t *t = json_object_get(e, "timeout_s");
		snprintf(q, sizeof q, "%s.timeout_s", path);
		if (t && (!json_is_integer(t) || json_integer_value(t) < 1 || json_integer_value(t) > 86400))
			return rb_jsonck_bad(c, q, "seconds, 1..86400");
		if (t)
			a->timeout_s = (unsigned)json_integer_value(t);
	}
	p->n_approvals = (unsigned)json_array_size(v);
	return 0;
}

/* network.mcp: ["NAME", {"name": NAME, "tools": ["tool", "prefix*"]}] */
static int parse_mcp(const struct rb_jsonck *c, const json_t *v, struct rb_policy *p)
{
	if (!json_is_array(v) || json_array_size(v) > RB_POLICY_MAX_MCP)
		return rb_jsonck_expected(c, "network.mcp", "an array of at most 8 names or {name, tools}", v);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		static const char *const keys[] = {"name", "tools", NULL};
		char path[64], q[96];
		snprintf(path, sizeof path, "network.mcp[%zu]", i);
		struct rb_policy_mcp *m = &p->mcp[i];
		if (!json_is_string(e) && !json_is_object(e))
			return rb_jsonck_expected(c, path, "a server name or {name, tools}", e);
		if (json_is_object(e) && rb_jsonck_keys(c, path, e, keys) < 0)
			return -1;
		const char *name =
		    json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "name"));
		snprintf(q, sizeof q, json_is_string(e) ? "%s" : "%s.name", path);
		if (!name || check_connector(name))
			return rb_jsonck_bad(c, q, "an MCP server name is [a-z0-9_-]{1,63}");
		for (size_t k = 0; k < i; k++)
			if (!strcmp(p->mcp[k].name, name))
				return rb_jsonck_bad(c, q, "\"%s\" is listed twice", name);
		snprintf(m->name, sizeof m->name, "%s", name);
		const json_t *ts = json_is_object(e) ? json_object_get(e, "tools") : NULL;
		if (!ts)
			continue;
		snprintf(q, sizeof q, "%s.tools", path);
		if (!json_is_array(ts) || json_array_size(ts) > RB_POLICY_MCP_TOOLS)
			return rb_jsonck_expected(c, q, "an array of at most 32 tool names", ts);
		m->narrowed = true;
		size_t j;
		json_t *t;
		json_array_foreach(ts, j, t)
		{
			const char *tn = json_string_value(t), *star = tn ? strchr(tn, '*') : NULL;
			bool bad = !tn || !*tn || strlen(tn) >= sizeof m->tools[0] || (star && star[1]);
			for (const char *x = tn; !bad && *x; x++)
				bad = (unsigned char)*x < 0x21 || (unsigned char)*x > 0x7e;
			if (bad)
				return rb_jsonck_bad(c, q, "a tool is 1..63 visible ASCII bytes, '*' only at the end");
			snprintf(m->tools[j], sizeof m->tools[j], "%s", tn);
		}
		m->n_tools = (unsigned)json_array_size(ts);
	}
	p->n_mcp = (unsigned)json_array_size(v);
	return 0;
}

static int parse_network(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"mode", "connectors", "mcp", "proxy", "approval", NULL};
	if (rb_jsonck_keys(c, "network", sec, keys) < 0)
		return -1;
	json_t *v = json_object_get(sec, "mode");
	if (v) {
		const char *s = json_string_value(v);
		if (s && !strcmp(s, "none"))
			p->net_mode = RB_NET_NONE;
		else if (s && !strcmp(s, "gateway"))
			p->net_mode = RB_NET_GATEWAY;
		else
			return rb_jsonck_expected(c, "network.mode", "one of \"none\", \"gateway\"", v);
	}
	if ((v = json_object_get(sec, "connectors")) &&
	    get_list(c, "network.connectors", v, p->connectors, &p->n_connectors, check_connector) < 0)
		return -1;
	if (p->n_connectors && p->net_mode != RB_NET_GATEWAY)
		return rb_jsonck_bad(c, "network.connectors", "needs network.mode \"gateway\"");
	if ((v = json_object_get(sec, "mcp")) && parse_mcp(c, v, p) < 0)
		return -1;
	if (p->n_mcp && p->net_mode != RB_NET_GATEWAY)
		return rb_jsonck_bad(c, "network.mcp", "needs network.mode \"gateway\"");
	if ((v = json_object_get(sec, "proxy")) &&
	    get_list(c, "network.proxy", v, p->proxy, &p->n_proxy, check_proxy) < 0)
		return -1;
	if (p->n_proxy && p->net_mode != RB_NET_GATEWAY)
		return rb_jsonck_bad(c, "network.proxy", "needs network.mode \"gateway\"");
	if ((v = json_object_get(sec, "approval")) && parse_approvals(c, v, p) < 0)
		return -1;
	if (p->n_approvals && p->net_mode != RB_NET_GATEWAY)
		return rb_jsonck_bad(c, "network.approval", "needs network.mode \"gateway\"");
	return 0;
}

/* "/usr/" and "/usr" mean the same prefix; keep one spelling for the matcher. */
static void trim_slashes(char **list, unsigned n_list)
{
	for (unsigned i = 0; i < n_list; i++) {
		char *s = list[i];
		size_t n = strlen(s);
		while (n > 1 && s[n - 1] == '/')
			s[--n] = '\0';
	}
}

static int parse_inputs(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"allow", NULL};
	if (rb_jsonck_keys(c, "inputs", sec, keys) < 0)
		return -1;
	json_t *v = json_object_get(sec, "allow");
	if (v && get_list(c, "inputs.allow", v, p->input_allow, &p->n_input_allow, check_prefix) < 0)
		return -1;
	trim_slashes(p->input_allow, p->n_input_allow);
	return 0;
}

static int parse_images(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"allow", "max_entries", "max_bytes", "keep_setuid", "keep_file_caps", NULL};
	if (rb_jsonck_keys(c, "images", sec, keys) < 0)
		return -1;
	static const char *const flags[] = {"keep_setuid", "keep_file_caps"};
	bool *const dest[] = {&p->image_keep_setuid, &p->image_keep_file_caps};
	for (unsigned i = 0; i < 2; i++) {
		const json_t *b = json_object_get(sec, flags[i]);
		char at[40];
		snprintf(at, sizeof at, "images.%s", flags[i]);
		if (b && !json_is_boolean(b))
			return rb_jsonck_expected(c, at, "true or false", b);
		*dest[i] = b && json_is_true(b);
	}
	json_t *v;
	if ((v = json_object_get(sec, "allow")) &&
	    get_list(c, "images.allow", v, p->image_allow, &p->n_image_allow, check_prefix) < 0)
		return -1;
	trim_slashes(p->image_allow, p->n_image_allow);
	if ((v = json_object_get(sec, "max_entries")) &&
	    get_uint(c, "images.max_entries", v, 1, UINT32_MAX, &p->image_max_entries) < 0)
		return -1;
	if ((v = json_object_get(sec, "max_bytes")) && get_size(c, "images.max_bytes", v, 1, &p->image_max_bytes) < 0)
		return -1;
	return 0;
}

static int add_env(const struct rb_jsonck *c, struct rb_policy *p, const char *name, const char *value)
{
	if (p->n_env_set >= RB_POLICY_MAX_LIST)
		return rb_jsonck_bad(c, "env.set", "at most %d entries", RB_POLICY_MAX_LIST);
	if (asprintf(&p->env_set[p->n_env_set], "%s=%s", name, value) < 0) {
		p->env_set[p->n_env_set] = NULL;
		return rb_error_set(c->err, ENOMEM, "policy %s: env.set", c->origin);
	}
	p->n_env_set++;
	return 0;
}

static int parse_env(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"pass", "set", NULL};
	if (sec && rb_jsonck_keys(c, "env", sec, keys) < 0)
		return -1;
	json_t *v;
	if (sec && (v = json_object_get(sec, "pass")) &&
	    get_list(c, "env.pass", v, p->env_pass, &p->n_env_pass, check_env_name) < 0)
		return -1;
	if (sec && (v = json_object_get(sec, "set"))) {
		if (!json_is_object(v))
			return rb_jsonck_expected(c, "env.set", "an object of NAME: \"value\"", v);
		const char *name;
		json_t *val;
		json_object_foreach(v, name, val)
		{
			char path[300];
			snprintf(path, sizeof path, "env.set.%s", name);
			if (!env_name_ok(name))
				return rb_jsonck_bad(c, path,
				                     "not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
			if (!json_is_string(val))
				return rb_jsonck_expected(c, path, "a string", val);
			if (in_list(p->env_pass, p->n_env_pass, name, strlen(name)))
				return rb_jsonck_bad(c, path, "\"%s\" is also in env.pass; name it in one place", name);
			if (add_env(c, p, name, json_string_value(val)) < 0)
				return -1;
		}
	}
	/* A step without PATH finds nothing by name; a policy that wants that sets PATH to "". */
	if (!in_list(p->env_set, p->n_env_set, "PATH", 4) && !in_list(p->env_pass, p->n_env_pass, "PATH", 4))
		return add_env(c, p, "PATH", DEFAULT_PATH);
	return 0;
}

static int parse_output(const struct rb_jsonck *c, const json_t *sec, struct rb_policy *p)
{
	static const char *const keys[] = {"max_stdout", "max_stderr", "run_bytes",    "run_files",
	                                   "run_events", "min_free",   "tenant_bytes", NULL};
	if (rb_jsonck_keys(c, "output", sec, keys) < 0)
		return -1;
	json_t *v;
	if ((v = json_object_get(sec, "run_bytes")) && get_size(c, "output.run_bytes", v, 0, &p->run_bytes) < 0)
		return -1;
	if ((v = json_object_get(sec, "run_files")) &&
	    get_uint(c, "output.run_files", v, 0, UINT32_MAX, &p->run_files) < 0)
		return -1;
	if ((v = json_object_get(sec, "run_events")) &&
	    get_uint(c, "output.run_events", v, 0, UINT32_MAX, &p->run_events) < 0)
		return -1;
	if ((v = json_object_get(sec, "tenant_bytes")) &&
	    get_size(c, "output.tenant_bytes", v, 0, &p->tenant_bytes) < 0)
		return -1;
	if ((v = json_object_get(sec, "min_free")) && get_size(c, "output.min_free", v, 0, &p->min_free) < 0)
		return -1;
	if ((v = json_object_get(sec, "max_stdout")) && get_size(c, "output.max_stdout", v, 1, &p->max_stdout) < 0)
		return -1;
	if ((v = json_object_get(sec, "max_stderr")) && get_size(c, "output.max_stderr", v, 1, &p->max_stderr) < 0)
		return -1;
	return 0;
}

static bool hostname_ok(const char *s)
{
	/* One DNS label: what sethostname accepts and what a tool in the sandbox can print. */
	if (!*s || *s == '-' || s[strlen(s) - 1] == '-')
		return false;
	return all_chars(s, "-", true, true);
}

static int parse_top(const struct rb_jsonck *c, const json_t *root, struct rb_policy *p)
{
	static const char *const keys[] = {"name",    "description", "identity", "limits", "rlimits",
	                                   "seccomp", "network",     "inputs",   "images", "env",
	                                   "output",  "shell",       "hostname", NULL};
	if (rb_jsonck_keys(c, "", root, keys) < 0)
		return -1;

	json_t *v = json_object_get(root, "name");
	if (!v)
		return rb_jsonck_bad(c, "name", "required key is missing");
	if (get_string(c, "name", v, p->name, sizeof p->name) < 0)
		return -1;
	if (!all_chars(p->name, "_.-", true, true) || p->name[0] == '.')
		return rb_jsonck_bad(c, "name", "\"%s\": a policy name is [A-Za-z0-9_.-]+, not starting with '.'",
		                     p->name);
	if ((v = json_object_get(root, "description")) && !json_is_string(v))
		return rb_jsonck_expected(c, "description", "a string", v);

	json_t *sec;
	if (get_section(c, root, "identity", &sec) < 0 || (sec && parse_identity(c, sec, p) < 0))
		return -1;
	if (get_section(c, root, "limits", &sec) < 0 || (sec && parse_limits(c, sec, p) < 0))
		return -1;
	if (get_section(c, root, "rlimits", &sec) < 0 || (sec && parse_rlimits(c, sec, p) < 0))
		return -1;
	if (get_section(c, root, "seccomp", &sec) < 0 || (sec && parse_seccomp(c, sec, p) < 0))
		return -1;
	if (get_section(c, root, "network", &sec) < 0 || (sec && parse_network(c, sec, p) < 0))
		return -1;
	if (get_section(c, root, "inputs", &sec) < 0 || (sec && parse_inputs(c, sec, p) < 0))
		return -1;
	if (get_section(c, root, "images", &sec) < 0 || (sec && parse_images(c, sec, p) < 0))
		return -1;
	if (get_section(c, root, "env", &sec) < 0 || parse_env(c, sec, p) < 0)
		return -1;
	if (get_section(c, root, "output", &sec) < 0 || (sec && parse_output(c, sec, p) < 0))
		return -1;

	if ((v = json_object_get(root, "shell"))) {
		if (get_string(c, "shell", v, p->shell, sizeof p->shell) < 0)
			return -1;
		if (p->shell[0] != '/')
			return rb_jsonck_bad(c, "shell", "\"%s\": must be an absolute path", p->shell);
	}
	if ((v = json_object_get(root, "hostname"))) {
		if (get_string(c, "hostname", v, p->hostname, sizeof p->hostname) < 0)
			return -1;
		if (!hostname_ok(p->hostname))
			return rb_jsonck_bad(c, "hostname", "\"%s\": a hostname is letters, digits and inner '-'",
			                     p->hostname);
	}
	return 0;
}

static void set_defaults(struct rb_policy *p)
{
	memset(p, 0, sizeof *p);
	p->id_range = RB_ID_RANGE_AUTO;
	p->net_mode = RB_NET_NONE;
	p->timeout_ms = DEFAULT_TIMEOUT_MS;
	p->memory_bytes = DEFAULT_MEMORY;
	p->pids = DEFAULT_PIDS;
	p->cpus = DEFAULT_CPUS;
	p->rootfs_bytes = DEFAULT_ROOTFS_SIZE;
	p->workspace_bytes = DEFAULT_WORKSPACE_SIZE;
	p->tmp_bytes = DEFAULT_TMP_SIZE;
	p->rlimit_nofile = DEFAULT_NOFILE;
	p->rlimit_nproc = DEFAULT_NPROC;
	p->rlimit_core = DEFAULT_CORE;
	p->rlimit_fsize = DEFAULT_FSIZE;
	strcpy(p->seccomp_profile, DEFAULT_SECCOMP);
	p->max_stdout = p->max_stderr = DEFAULT_OUTPUT_MAX;
	p->image_max_entries = DEFAULT_IMAGE_MAX_ENTRIES;
	p->image_max_bytes = DEFAULT_IMAGE_MAX_BYTES;
	p->run_bytes = DEFAULT_RUN_BYTES;
	p->run_files = DEFAULT_RUN_FILES;
	p->run_events = DEFAULT_RUN_EVENTS;
	p->tenant_bytes = DEFAULT_TENANT_BYTES;
	p->min_free = DEFAULT_MIN_FREE;
	strcpy(p->shell, DEFAULT_SHELL);
	strcpy(p->hostname, DEFAULT_HOSTNAME);
}

/* sha256 over the canonical JSON (sorted keys, compact) followed by the seccomp profile's
 * bytes, so that editing either the policy or the profile it names changes the hash. */
static int policy_hash(const struct rb_jsonck *c, const json_t *root, const char *data_dir, struct rb_policy *p)
{
	_cleanup_free_ char *canon = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
	if (!canon)
		return rb_error_set(c->err, ENOMEM, "policy %s: canonical form", c->origin);
	size_t clen = strlen(canon);
	_cleanup_free_ char *prof = NULL;
	size_t plen = 0;
	if (data_dir && *data_dir) {
		char path[4096];
		if (snprintf(path, sizeof path, "%s/policy/seccomp/%s.json", data_dir, p->seccomp_profile) >=
		    (int)sizeof path)
			return rb_error_set(c->err, ENAMETOOLONG, "policy %s: seccomp profile path", c->origin);
		struct rb_error rerr;
		if (rb_read_document(path, SECCOMP_FILE_MAX, &prof, &rerr) < 0) {
			/* A missing profile is reported by the seccomp module, with its own context. */
			if (rerr.errnum != ENOENT) {
				if (c->err)
					*c->err = rerr;
				return rb_error_prefix(c->err, "policy %s: seccomp.profile", c->origin);
			}
			prof = NULL;
		}
		plen = prof ? strlen(prof) : 0;
	}
	_cleanup_free_ char *buf = malloc(clen + plen + 1);
	if (!buf)
		return rb_error_set(c->err, ENOMEM, "policy %s: hash", c->origin);
	memcpy(buf, canon, clen);
	if (plen)
		memcpy(buf + clen, prof, plen);
	rb_sha256_hex(buf, clen + plen, p->hash);
	return 0;
}

int rb_policy_parse(const char *text, const char *origin, const char *data_dir, struct rb_policy *out,
                    struct rb_error *err)
{
	struct rb_jsonck c = {.what = "policy", .origin = origin && *origin ? origin : "(text)", .err = err};
	set_defaults(out);
	if (!text)
		return rb_jsonck_bad(&c, NULL, "no text");
	_cleanup_json_ json_t *root = rb_jsonck_load(&c, text);
	if (!root)
		return -1;
	if (parse_top(&c, root, out) < 0 || policy_hash(&c, root, data_dir, out) < 0) {
		rb_policy_free(out);
		return -1;
	}
	return 0;
}

static int load_file(const char *path, const char *data_dir, struct rb_policy *out, struct rb_error *err)
{
	_cleanup_free_ char *text = NULL;
	if (rb_read_document(path, POLICY_FILE_MAX, &text, err) < 0)
		return rb_error_prefix(err, "policy");
	if (rb_policy_parse(text, path, data_dir, out, err) < 0)
		return -1;
	snprintf(out->source, sizeof out->source, "%s", path);
	return 0;
}

static bool name_ok(const char *s)
{
	return all_chars(s, "_.-", true, true) && s[0] != '.' && strlen(s) < RB_NAME_MAX;
}

int rb_policy_load(const char *name_or_path, const char *data_dir, const char *config_dir, struct rb_policy *out,
                   struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	if (!name_or_path || !*name_or_path)
		return rb_error_set(err, 0, "policy: empty name");
	size_t n = strlen(name_or_path);
	if (strchr(name_or_path, '/') || (n > 5 && !strcmp(name_or_path + n - 5, ".json")))
		return load_file(name_or_path, data_dir, out, err);
	if (!name_ok(name_or_path))
		return rb_error_set(err, 0, "policy \"%.80s\": a name is [A-Za-z0-9_.-]+ (or give a path)",
		                    name_or_path);

	/* The operator's policies shadow the shipped ones, so a site can redefine "default". */
	char tried[2][4096];
	unsigned ntried = 0;
	const char *bases[2][2] = {{config_dir, "policies"}, {data_dir, "policy/profiles"}};
	for (unsigned i = 0; i < 2; i++) {
		if (!bases[i][0] || !*bases[i][0])
			continue;
		char *path = tried[ntried++];
		if (snprintf(path, 4096, "%s/%s/%s.json", bases[i][0], bases[i][1], name_or_path) >= 4096)
			return rb_error_set(err, ENAMETOOLONG, "policy \"%s\"", name_or_path);
		if (access(path, F_OK) == 0)
			return load_file(path, data_dir, out, err);
		/* A directory we may not search (another user's HOME) holds nothing for us. */
		if (errno != ENOENT && errno != EACCES)
			return rb_error_set(err, errno, "policy `%s`", path);
	}
	if (ntried == 0)
		return rb_error_set(err, 0, "policy \"%s\" not found: no config or data directory to look in",
		                    name_or_path);
	return rb_error_set(err, 0, "policy \"%s\" not found (looked for %s%s%s)", name_or_path, tried[0],
	                    ntried > 1 ? " and " : "", ntried > 1 ? tried[1] : "");
}

static void free_list(char **list, unsigned *n)
{
	for (unsigned i = 0; i < *n; i++) {
		free(list[i]);
		list[i] = NULL;
	}
	*n = 0;
}

void rb_policy_free(struct rb_policy *p)
{
	if (!p)
		return;
	free_list(p->seccomp_deny, &p->n_seccomp_deny);
	free_list(p->seccomp_allow, &p->n_seccomp_allow);
	free_list(p->input_allow, &p->n_input_allow);
	free_list(p->connectors, &p->n_connectors);
	free_list(p->proxy, &p->n_proxy);
	free_list(p->image_allow, &p->n_image_allow);
	free_list(p->env_pass, &p->n_env_pass);
	free_list(p->env_set, &p->n_env_set);
}

/* One line per setting a policy leaves open, for `runbox policy validate`. */
static void say(void (*line)(void *, const char *), void *ctx, unsigned *n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void say(void (*line)(void *, const char *), void *ctx, unsigned *n, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	line(ctx, buf);
	(*n)++;
}

static void join(char *buf, size_t len, char *const *list, unsigned n)
{
	buf[0] = '\0';
	for (unsigned i = 0; i < n; i++) {
		size_t u = strlen(buf);
		snprintf(buf + u, len - u, "%s%s", i ? ", " : "", list[i]);
	}
}

unsigned rb_policy_open_settings(const struct rb_policy *p, void (*line)(void *ctx, const char *text), void *ctx)
{
	unsigned n = 0;
	char buf[700];
	if (!p->timeout_ms)
		say(line, ctx, &n, "limits.timeout: unlimited (a step may run for ever)");
	if (!p->memory_bytes)
		say(line, ctx, &n, "limits.memory: unlimited (no memory limit on the sandbox)");
	if (!p->pids)
		say(line, ctx, &n, "limits.pids: unlimited (no bound on the sandbox's tasks)");
	if (!(p->cpus > 0))
		say(line, ctx, &n, "limits.cpus: unlimited (no cpu quota)");
	const struct {
		const char *key;
		uint64_t v;
	} rl[] = {{"nofile", p->rlimit_nofile},
	          {"nproc", p->rlimit_nproc},
	          {"core", p->rlimit_core},
	          {"fsize", p->rlimit_fsize}};
	for (size_t i = 0; i < RB_ARRAY_SIZE(rl); i++)
		if (rl[i].v == RLIMIT_KEEP)
			say(line, ctx, &n, "rlimits.%s: unlimited (the step keeps runbox's own limit)", rl[i].key);
	if (p->caps) {
		buf[0] = '\0';
		for (unsigned b = 0; b < RB_ARRAY_SIZE(cap_names); b++)
			if (p->caps & (1ull << b)) {
				size_t u = strlen(buf);
				snprintf(buf + u, sizeof buf - u, "%s%s", u ? ", " : "", cap_names[b]);
			}
		say(line, ctx, &n, "identity.capabilities: %s (kept, in the sandbox's user namespace)", buf);
	}
	if (p->n_seccomp_allow) {
		join(buf, sizeof buf, p->seccomp_allow, p->n_seccomp_allow);
		say(line, ctx, &n, "seccomp.allow: %s (allowed on top of profile `%s`)", buf, p->seccomp_profile);
	}
	if (p->net_mode == RB_NET_GATEWAY)
		say(line, ctx, &n, "network.mode: gateway (the run token and the gateway's URL enter the sandbox)");
	if (p->n_connectors) {
		join(buf, sizeof buf, p->connectors, p->n_connectors);
		say(line, ctx, &n,
		    "network.connectors: %s (called through the gateway with the operator's credentials)", buf);
	}
	for (unsigned i = 0; i < p->n_mcp; i++) {
		buf[0] = '\0';
		for (unsigned t = 0; t < p->mcp[i].n_tools; t++) {
			size_t u = strlen(buf);
			snprintf(buf + u, sizeof buf - u, "%s%s", u ? ", " : "", p->mcp[i].tools[t]);
		}
		say(line, ctx, &n, "network.mcp: %s (an MCP server through the gateway, tools %s%s%s)", p->mcp[i].name,
		    p->mcp[i].narrowed ? "narrowed to " : "as the gateway config allows", buf,
		    p->mcp[i].narrowed && !p->mcp[i].n_tools ? "none" : "");
	}
	bool any_path = false;
	for (unsigned i = 0; i < p->n_input_allow; i++)
		any_path = any_path || !strcmp(p->input_allow[i], "/");
	if (any_path) {
		say(line, ctx, &n, "inputs.allow: / (any host path may be an input, but those that never are)");
	} else if (p->n_input_allow) {
		join(buf, sizeof buf, p->input_allow, p->n_input_allow);
		say(line, ctx, &n, "inputs.allow: %s (host paths that may be inputs)", buf);
	}
	if (p->n_env_pass) {
		join(buf, sizeof buf, p->env_pass, p->n_env_pass);
		say(line, ctx, &n, "env.pass: %s (copied from runbox's own environment)", buf);
	}
	return n;
}

/* Seccomp: reads and validates a seccomp profile (policy/seccomp/<name>.json), adds runbox's
 * argument filters (clone, ioctl, personality, socket family and type, socketpair), compiles the filter with
 * libseccomp for native x86_64, caches the raw BPF by key, and installs it in the step child. */
#define _GNU_SOURCE
#include "runtime/sandbox/seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

/* Bump when the C rules below change: the cache key must change with them. */
#define RULES_VERSION "runbox-seccomp-rules-2"
#define ARCH_NAME     "x86_64"
#define NR_LIMIT      1024 /* x86_64 numbers are < 512; x32 ones carry bit 30 and are killed */
#define NEWER_LAST    511  /* "newer_errno" covers known-max+1 .. this */
#define PROFILE_MAX   (1 << 20)
#define BPF_MAX_INSNS 4096 /* BPF_MAXINSNS */

/* clone(2) namespace flags (CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET): Docker's
 * mask. clone3 hides its flags in memory, so it answers ENOSYS and libc falls back to clone. */
#define CLONE_NS_MASK 0x7E020000ULL
#define LOW32         0xffffffffULL
/* socket(2)'s type: the kernel takes type & SOCK_TYPE_MASK (0xf); the bits above are
 * SOCK_NONBLOCK | SOCK_CLOEXEC (anything else is EINVAL), so they decide nothing. */
#define SOCK_TYPE_BITS 0xfULL
#ifndef SOCK_PACKET
#define SOCK_PACKET 10
#endif

/* What the filter does for one syscall number. */
enum { ACT_DEFAULT = 0, ACT_ALLOW = 1, ACT_FILTERED = 2, ACT_ERRNO = 0x10000 /* | errno */ };

struct plan {
	bool net_raw; /* the policy grants CAP_NET_RAW: SOCK_RAW passes for AF_INET and AF_INET6 */
	int default_errno;
	int newer_errno; /* 0: numbers libseccomp does not know get the default */
	int act[NR_LIMIT];
	const char *where[NR_LIMIT]; /* the profile section that named it, for duplicate errors */
};

/* The syscalls whose arguments runbox filters; a profile enables them under "filtered". */
static const char *const filtered_names[] = {"clone", "ioctl", "personality", "socket", "socketpair"};

static bool is_filtered_name(const char *name)
{
	for (size_t i = 0; i < RB_ARRAY_SIZE(filtered_names); i++)
		if (strcmp(name, filtered_names[i]) == 0)
			return true;
	return false;
}

/* "EPERM" -> 1, using libc's own names so no table is copied here. */
static int errno_from_name(const char *name)
{
	for (int e = 1; e < 4096; e++) {
		const char *n = strerrorname_np(e);
		if (n && strcmp(n, name) == 0)
			return e;
	}
	return -1;
}

static int native_nr(const char *name)
{
	return seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);
}

/* ---------------------------------------------------------------- profile parsing -- */

static int errno_value(json_t *v, const char *origin, const char *key, int *out, struct rb_error *err)
{
	if (!json_is_string(v))
		return rb_error_set(err, 0, "seccomp profile `%s`: `%s` must be an errno name string", origin, key);
	int e = errno_from_name(json_string_value(v));
	if (e <= 0)
		return rb_error_set(err, 0, "seccomp profile `%s`: `%s`: unknown errno `%s`", origin, key,
		                    json_string_value(v));
	*out = e;
	return 0;
}

/* Marks every name of a JSON array with act; names must be x86_64 syscalls, each once. */
static int mark_names(struct plan *p, json_t *arr, int act, const char *origin, const char *section,
                      struct rb_error *err)
{
	if (!json_is_array(arr))
		return rb_error_set(err, 0, "seccomp profile `%s`: `%s` must be an array of names", origin, section);
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		if (!json_is_string(v))
			return rb_error_set(err, 0, "seccomp profile `%s`: `%s[%zu]` must be a string", origin, section,
			                    i);
		const char *name = json_string_value(v);
		int nr = native_nr(name);
		if (nr == __NR_SCMP_ERROR)
			return rb_error_set(err, 0, "seccomp profile `%s`: unknown syscall `%s` in `%s`", origin, name,
			                    section);
		if (nr < 0)
			return rb_error_set(err, 0,
			                    "seccomp profile `%s`: `%s` in `%s` is not an " ARCH_NAME " syscall",
			                    origin, name, section);
		if (nr >= NR_LIMIT)
			return rb_error_set(err, 0, "seccomp profile `%s`: `%s` has number %d", origin, name, nr);
		if (act == ACT_FILTERED && !is_filtered_name(name))
			return rb_error_set(err, 0,
			                    "seccomp profile `%s`: runbox has no argument filter for `%s` "
			                    "(filtered: clone, ioctl, personality, socket, socketpair)",
			                    origin, name);
		if (act == ACT_ALLOW && is_filtered_name(name))
			return rb_error_set(err, 0,
			                    "seccomp profile `%s`: `%s` is filtered by argument; list it "
			                    "under `filtered`, not `%s`",
			                    origin, name, section);
		if (p->where[nr])
			return rb_error_set(err, 0, "seccomp profile `%s`: `%s` appears in both `%s` and `%s`", origin,
			                    name, p->where[nr], section);
		p->act[nr] = act;
		p->where[nr] = section;
	}
	return 0;
}

/* Profile format (docs/seccomp.md): {"description", "default_errno", "allow", "filtered",
 * "deny", "errno": {"ENOSYS": [...]}, "newer_errno"}. Unknown keys are errors. */
static int parse_profile(const char *text, size_t len, const char *origin, struct plan *p, json_t **keep,
                         struct rb_error *err)
{
	json_error_t jerr;
	json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return rb_error_set(err, 0, "seccomp profile `%s`: line %d: %s", origin, jerr.line, jerr.text);
	*keep = root; /* names in p->where point into it */
	if (!json_is_object(root))
		return rb_error_set(err, 0, "seccomp profile `%s`: not a JSON object", origin);

	const char *key;
	json_t *v;
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "description") == 0) {
			if (!json_is_string(v))
				return rb_error_set(err, 0,
				                    "seccomp profile `%s`: `description` must "
				                    "be a string",
				                    origin);
		} else if (strcmp(key, "default_errno") != 0 && strcmp(key, "allow") != 0 &&
		           strcmp(key, "filtered") != 0 && strcmp(key, "deny") != 0 && strcmp(key, "errno") != 0 &&
		           strcmp(key, "newer_errno") != 0) {
			return rb_error_set(err, 0, "seccomp profile `%s`: unknown key `%s`", origin, key);
		}
	}

	json_t *d = json_object_get(root, "default_errno");
	if (!d)
		return rb_error_set(err, 0, "seccomp profile `%s`: `default_errno` is required", origin);
	if (errno_value(d, origin, "default_errno", &p->default_errno, err) < 0)
		return -1;
	if ((v = json_object_get(root, "newer_errno")) &&
	    errno_value(v, origin, "newer_errno", &p->newer_errno, err) < 0)
		return -1;

	json_t *allow = json_object_get(root, "allow");
	if (!allow)
		return rb_error_set(err, 0, "seccomp profile `%s`: `allow` is required", origin);
	if (mark_names(p, allow, ACT_ALLOW, origin, "allow", err) < 0)
		return -1;
	if ((v = json_object_get(root, "filtered")) && mark_names(p, v, ACT_FILTERED, origin, "filtered", err) < 0)
		return -1;
	if ((v = json_object_get(root, "deny")) && mark_names(p, v, ACT_ERRNO | EPERM, origin, "deny", err) < 0)
		return -1;

	json_t *errs = json_object_get(root, "errno");
	if (errs) {
		if (!json_is_object(errs))
			return rb_error_set(err, 0,
			                    "seccomp profile `%s`: `errno` must be an object "
			                    "of errno name -> names",
			                    origin);
		json_object_foreach(errs, key, v)
		{
			int e = errno_from_name(key);
			if (e <= 0)
				return rb_error_set(err, 0,
				                    "seccomp profile `%s`: `errno`: unknown "
				                    "errno `%s`",
				                    origin, key);
			if (mark_names(p, v, ACT_ERRNO | e, origin, key, err) < 0)
				return -1;
		}
	}
	return 0;
}

/* Policy extras: deny overrides everything (EPERM); allow adds names. */
static int apply_policy_lists(struct plan *p, const struct rb_policy *pol, struct rb_error *err)
{
	for (unsigned i = 0; i < pol->n_seccomp_allow; i++) {
		const char *name = pol->seccomp_allow[i];
		int nr = native_nr(name);
		if (nr == __NR_SCMP_ERROR)
			return rb_error_set(err, 0, "seccomp: unknown syscall `%s` in policy allow list", name);
		if (nr < 0 || nr >= NR_LIMIT)
			return rb_error_set(err, 0,
			                    "seccomp: `%s` in policy allow list is not an " ARCH_NAME " syscall", name);
		/* Allowing ioctl or socket wholesale would reopen TIOCSTI and AF_PACKET. */
		if (is_filtered_name(name))
			return rb_error_set(err, 0,
			                    "seccomp: `%s` in policy allow list is filtered by "
			                    "argument and cannot be allowed wholesale",
			                    name);
		p->act[nr] = ACT_ALLOW;
	}
	for (unsigned i = 0; i < pol->n_seccomp_deny; i++) {
		const char *name = pol->seccomp_deny[i];
		int nr = native_nr(name);
		if (nr == __NR_SCMP_ERROR)
			return rb_error_set(err, 0, "seccomp: unknown syscall `%s` in policy deny list", name);
		/* A name libseccomp knows that x86_64 lacks ("stime") is denied already. */
		if (nr < 0)
			continue;
		if (nr >= NR_LIMIT)
			return rb_error_set(err, 0, "seccomp: `%s` has number %d", name, nr);
		p->act[nr] = ACT_ERRNO | EPERM;
	}
	return 0;
}

/* ------------------------------------------------------------------ rule building -- */

static int add(scmp_filter_ctx ctx, int nr, unsigned n, const struct scmp_arg_cmp *cmp, struct rb_error *err)
{
	int r = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, n, cmp);
	if (r < 0)
		return rb_error_set(err, -r, "seccomp: add argument rule for syscall %d", nr);
	return 0;
}

/* Allows nr when the low 32 bits of argument arg hold one of vals (the kernel reads these
 * arguments as int, so higher bits must not decide anything). */
static int allow_low32_in(scmp_filter_ctx ctx, int nr, unsigned arg, const uint32_t *vals, size_t n,
                          struct rb_error *err)
{
	for (size_t i = 0; i < n; i++) {
		struct scmp_arg_cmp c = {arg, SCMP_CMP_MASKED_EQ, LOW32, vals[i]};
		if (add(ctx, nr, 1, &c, err) < 0)
			return -1;
	}
	return 0;
}

/* Allows nr for every low-32-bit value of argument arg except those in excl. libseccomp
 * 2.5 refuses a conditional rule whose action equals the default (EPERM) and has no masked
 * "not equal", so the complement is covered by prefixes: walking the 32-bit value as a
 * binary trie, every maximal subtree that holds no excluded value becomes one ALLOW rule
 * "(arg & prefix_mask) == prefix". At most 32 rules per excluded value; the high 32 bits
 * are never compared, so (0x123 << 32) | TIOCSTI still lands on a denied leaf. */
static int allow_low32_except(scmp_filter_ctx ctx, int nr, unsigned arg, const uint32_t *excl, size_t n,
                              uint32_t prefix, unsigned depth, struct rb_error *err)
{
	uint32_t mask = depth ? (uint32_t)(0xffffffffu << (32 - depth)) : 0;
	bool hit = false;
	for (size_t i = 0; i < n; i++)
		if ((excl[i] & mask) == prefix)
			hit = true;
	if (!hit) {
		struct scmp_arg_cmp c = {arg, SCMP_CMP_MASKED_EQ, mask, prefix};
		return add(ctx, nr, 1, &c, err);
	}
	if (depth == 32)
		return 0; /* an excluded value: left to the default action */
	uint32_t bit = 1u << (31 - depth);
	if (allow_low32_except(ctx, nr, arg, excl, n, prefix, depth + 1, err) < 0)
		return -1;
	return allow_low32_except(ctx, nr, arg, excl, n, prefix | bit, depth + 1, err);
}

/* socket(fam, type) for an IP family: every one of the 16 type values gets its own rule
 * (disjoint, so libseccomp never has to rank overlapping ones). Stream and datagram pass
 * (TCP, UDP, ICMP ping sockets); SOCK_RAW passes only with CAP_NET_RAW granted; the rest
 * answer ESOCKTNOSUPPORT: SOCK_PACKET, which the kernel turns into an AF_PACKET socket, and
 * SOCK_SEQPACKET and SOCK_DCCP, whose first use loads the SCTP and DCCP modules. The errno
 * is not EPERM, so a probe can tell this rule from the kernel's own refusal. */
static int inet_types(scmp_filter_ctx ctx, int nr, uint32_t fam, bool net_raw, struct rb_error *err)
{
	for (uint32_t type = 0; type <= SOCK_TYPE_BITS; type++) {
		bool ok = type == SOCK_STREAM || type == SOCK_DGRAM || (type == SOCK_RAW && net_raw);
		struct scmp_arg_cmp c[2] = {{0, SCMP_CMP_MASKED_EQ, LOW32, fam},
		                            {1, SCMP_CMP_MASKED_EQ, SOCK_TYPE_BITS, type}};
		uint32_t action = ok ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(ESOCKTNOSUPPORT);
		int r = seccomp_rule_add_array(ctx, action, nr, 2, c);
		if (r < 0)
			return rb_error_set(err, -r, "seccomp: add socket type rule (family %u, type %u)", fam, type);
	}
	return 0;
}

static int add_filtered(scmp_filter_ctx ctx, const struct plan *p, const char *name, int nr, struct rb_error *err)
{
	if (strcmp(name, "clone") == 0) {
		/* Threads and fork pass; any namespace flag falls to EPERM. */
		struct scmp_arg_cmp c = {0, SCMP_CMP_MASKED_EQ, CLONE_NS_MASK, 0};
		return add(ctx, nr, 1, &c, err);
	}
	if (strcmp(name, "personality") == 0) {
		/* PER_LINUX, PER_LINUX32, UNAME26 variants, and the 0xffffffff query (Docker). */
		static const uint32_t ok[] = {0x0, 0x8, 0x20000, 0x20008, 0xffffffff};
		return allow_low32_in(ctx, nr, 0, ok, RB_ARRAY_SIZE(ok), err);
	}
	if (strcmp(name, "socket") == 0) {
		/* No AF_PACKET (raw frames), AF_ALG (kernel crypto attack surface), AF_VSOCK
		 * (host channel), nor netlink beyond NETLINK_ROUTE (getifaddrs needs it). */
		static const uint32_t fam[] = {AF_UNIX};
		if (allow_low32_in(ctx, nr, 0, fam, RB_ARRAY_SIZE(fam), err) < 0)
			return -1;
		if (inet_types(ctx, nr, AF_INET, p->net_raw, err) < 0 ||
		    inet_types(ctx, nr, AF_INET6, p->net_raw, err) < 0)
			return -1;
		struct scmp_arg_cmp nl[2] = {{0, SCMP_CMP_MASKED_EQ, LOW32, AF_NETLINK},
		                             {2, SCMP_CMP_MASKED_EQ, LOW32, NETLINK_ROUTE}};
		return add(ctx, nr, 2, nl, err);
	}
	if (strcmp(name, "socketpair") == 0) {
		static const uint32_t fam[] = {AF_UNIX};
		return allow_low32_in(ctx, nr, 0, fam, 1, err);
	}
	if (strcmp(name, "ioctl") == 0) {
		/* TIOCSTI pushes input into a tty (CVE-2017-5226), TIOCLINUX selects and pastes
		 * console text; the kernel reads cmd as unsigned int (CVE-2019-10063). */
		static const uint32_t bad[] = {TIOCSTI, TIOCLINUX};
		return allow_low32_except(ctx, nr, 1, bad, RB_ARRAY_SIZE(bad), 0, 0, err);
	}
	return rb_error_set(err, 0, "seccomp: no argument filter for `%s`", name);
}

/* The highest number libseccomp names on x86_64 (456 for Debian's 2.5.4). */
static int highest_known_nr(void)
{
	for (int nr = NEWER_LAST; nr >= 0; nr--) {
		char *n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
		if (n) {
			free(n);
			return nr;
		}
	}
	return -1;
}

static void release_ctx(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

static int compile(const struct plan *p, struct rb_bpf *out, struct rb_error *err)
{
	__attribute__((cleanup(release_ctx))) scmp_filter_ctx ctx =
	    seccomp_init(SCMP_ACT_ERRNO((uint32_t)p->default_errno));
	if (!ctx)
		return rb_error_set(err, ENOMEM, "seccomp_init");
	int r;
	/* Native arch only: i386 (int 0x80) and x32 (nr | 0x40000000) calls kill the process,
	 * so socketcall(2)'s hidden family and x32 aliases never reach the rules. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0)
		return rb_error_set(err, -r, "seccomp: set bad-arch action");
	/* The child sets no_new_privs itself, and we never call seccomp_load. */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
		return rb_error_set(err, -r, "seccomp: clear NNP attribute");
	/* Binary tree of syscall numbers: ~300 linear compares cost 6x more (libseccomp#116). */
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		rb_debug("seccomp: binary-tree optimization unavailable: %s", strerror(-r));

	for (int nr = 0; nr < NR_LIMIT; nr++) {
		int act = p->act[nr];
		if (act == ACT_DEFAULT)
			continue;
		if (act == ACT_FILTERED) {
			_cleanup_free_ char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
			if (!name || add_filtered(ctx, p, name, nr, err) < 0)
				return name ? -1 : rb_error_set(err, 0, "seccomp: syscall %d has no name", nr);
			continue;
		}
		uint32_t action = act == ACT_ALLOW ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO((uint32_t)(act & 0xffff));
		/* libseccomp rejects a rule equal to the default action; it is implied. */
		if (act != ACT_ALLOW && (act & 0xffff) == p->default_errno)
			continue;
		if ((r = seccomp_rule_add(ctx, action, nr, 0)) < 0)
			return rb_error_set(err, -r, "seccomp: add rule for syscall %d", nr);
	}
	/* Numbers newer than libseccomp's table: a libc that probes them must see ENOSYS and
	 * fall back, not EPERM (runc does the same). They stay denied. */
	if (p->newer_errno && p->newer_errno != p->default_errno) {
		for (int nr = highest_known_nr() + 1; nr > 0 && nr <= NEWER_LAST; nr++)
			if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((uint32_t)p->newer_errno), nr, 0)) < 0)
				return rb_error_set(err, -r, "seccomp: add rule for syscall %d", nr);
	}

	/* Export to memory: libseccomp 2.5 only writes to an fd. */
	_cleanup_close_ int fd = memfd_create("runbox-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return rb_error_set(err, errno, "seccomp: memfd_create");
	if ((r = seccomp_export_bpf(ctx, fd)) < 0)
		return rb_error_set(err, -r, "seccomp_export_bpf");
	struct stat st;
	if (fstat(fd, &st) < 0)
		return rb_error_set(err, errno, "seccomp: fstat memfd");
	if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	    st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAX_INSNS)
		return rb_error_set(err, 0, "seccomp: compiled filter has bad size %lld bytes", (long long)st.st_size);
	struct sock_filter *insns = malloc((size_t)st.st_size);
	if (!insns)
		return rb_error_set(err, ENOMEM, "seccomp: filter buffer");
	ssize_t n = pread(fd, insns, (size_t)st.st_size, 0);
	if (n != st.st_size) {
		free(insns);
		return rb_error_set(err, n < 0 ? errno : EIO, "seccomp: read back filter");
	}
	out->insns = insns;
	out->len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
	out->from_cache = false;
	return 0;
}

/* -------------------------------------------------------------------------- cache -- */

/* Everything the BPF depends on, hashed: a change to any of them is a different file. */
static int cache_key(const struct rb_policy *pol, const char *profile, size_t profile_len, char key[65],
                     struct rb_error *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return rb_error_set(err, errno, "seccomp: open_memstream");
	const struct scmp_version *v = seccomp_version();
	fprintf(f, "%s%c%s%clibseccomp %u.%u.%u%c%s%c%zu%c", RULES_VERSION, 0, pol->hash, 0, v->major, v->minor,
	        v->micro, 0, ARCH_NAME, 0, profile_len, 0);
	fwrite(profile, 1, profile_len, f);
	for (unsigned i = 0; i < pol->n_seccomp_deny; i++)
		fprintf(f, "%cdeny:%s", 0, pol->seccomp_deny[i]);
	for (unsigned i = 0; i < pol->n_seccomp_allow; i++)
		fprintf(f, "%callow:%s", 0, pol->seccomp_allow[i]);
	fprintf(f, "%cnet_raw:%d", 0, (pol->caps & (1ULL << CAP_NET_RAW)) ? 1 : 0);
	if (fclose(f) != 0) {
		free(buf);
		return rb_error_set(err, ENOMEM, "seccomp: cache key");
	}
	rb_sha256_hex(buf, len, key);
	free(buf);
	return 0;
}

/* Reads a cache file only when it is ours, private, and shaped like a filter; anything else
 * is ignored (and then replaced). Returns 1 on a hit, 0 on a miss. */
static int cache_read(const char *path, struct rb_bpf *out)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			rb_warn("seccomp cache `%s` ignored: %s", path, strerror(errno));
		return 0;
	}
	struct stat st;
	const char *why = NULL;
	if (fstat(fd, &st) < 0)
		why = "cannot stat";
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (st.st_uid != geteuid())
		why = "not owned by us";
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		why = "group or world writable";
	else if (st.st_size <= 0 || st.st_size % (off_t)sizeof(struct sock_filter) != 0 ||
	         st.st_size / (off_t)sizeof(struct sock_filter) > BPF_MAX_INSNS)
		why = "size is not a filter's";
	if (why) {
		rb_warn("seccomp cache `%s` ignored: %s", path, why);
		return 0;
	}
	struct sock_filter *insns = malloc((size_t)st.st_size);
	if (!insns)
		return 0;
	ssize_t n = pread(fd, insns, (size_t)st.st_size, 0);
	size_t cnt = (size_t)st.st_size / sizeof(struct sock_filter);
	/* A filter libseccomp wrote starts by loading the arch and ends in a return. */
	if (n != st.st_size || insns[0].code != (BPF_LD | BPF_W | BPF_ABS) || insns[0].k != 4 ||
	    BPF_CLASS(insns[cnt - 1].code) != BPF_RET) {
		rb_warn("seccomp cache `%s` ignored: not a runbox filter", path);
		free(insns);
		return 0;
	}
	out->insns = insns;
	out->len = (unsigned short)cnt;
	out->from_cache = true;
	return 1;
}

/* Best effort: a cache that cannot be written only costs the next run a compile. */
static void cache_store(const char *dir, const char *path, const struct rb_bpf *bpf)
{
	struct rb_error e = {0};
	if (rb_mkdir_p(dir, 0700, &e) < 0) {
		rb_warn("seccomp cache not written: %s", e.msg);
		return;
	}
	char tmp[4096];
	if (snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof tmp)
		return;
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rb_warn("seccomp cache not written: open `%s`: %s", tmp, strerror(errno));
		return;
	}
	size_t len = (size_t)bpf->len * sizeof(struct sock_filter);
	const char *p = (const char *)bpf->insns;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			goto fail;
		p += n;
		len -= (size_t)n;
	}
	/* Durable before it becomes visible, so a crash never leaves a torn filter. */
	if (fdatasync(fd) < 0 || rename(tmp, path) < 0)
		goto fail;
	return;
fail:
	rb_warn("seccomp cache not written: `%s`: %s", path, strerror(errno));
	unlink(tmp);
}

/* ------------------------------------------------------------------------- public -- */

static bool valid_profile_name(const char *s)
{
	if (!s[0] || s[0] == '.')
		return false;
	for (; *s; s++)
		if (*s == '/')
			return false;
	return true;
}

int rb_seccomp_prepare(const struct rb_policy *pol, const char *data_dir, const char *cache_dir, struct rb_bpf *out,
                       struct rb_error *err)
{
	memset(out, 0, sizeof *out);
	const char *name = pol->seccomp_profile[0] ? pol->seccomp_profile : "default";
	if (!valid_profile_name(name))
		return rb_error_set(err, 0, "seccomp: bad profile name `%s`", name);
	char path[4096];
	if (snprintf(path, sizeof path, "%s/policy/seccomp/%s.json", data_dir, name) >= (int)sizeof path)
		return rb_error_set(err, ENAMETOOLONG, "seccomp profile `%s`", name);
	_cleanup_free_ char *text = NULL;
	if (rb_read_document(path, PROFILE_MAX, &text, err) < 0)
		return rb_error_prefix(err, "seccomp profile `%s`", name);
	size_t len = strlen(text);

	char key[65];
	char cpath[4096] = "";
	if (cache_dir) {
		if (cache_key(pol, text, len, key, err) < 0)
			return -1;
		if (snprintf(cpath, sizeof cpath, "%s/%s.bpf", cache_dir, key) >= (int)sizeof cpath)
			return rb_error_set(err, ENAMETOOLONG, "seccomp cache `%s`", cache_dir);
		if (cache_read(cpath, out) == 1)
			return 0;
	}

	struct plan *p = calloc(1, sizeof *p);
	if (!p)
		return rb_error_set(err, ENOMEM, "seccomp: plan");
	p->net_raw = pol->caps & (1ULL << CAP_NET_RAW);
	json_t *root = NULL;
	int r = parse_profile(text, len, path, p, &root, err);
	if (r == 0)
		r = apply_policy_lists(p, pol, err);
	if (r == 0)
		r = compile(p, out, err);
	json_decref(root);
	free(p);
	if (r < 0)
		return -1;
	if (cache_dir)
		cache_store(cache_dir, cpath, out);
	return 0;
}

int rb_seccomp_apply(const struct rb_bpf *bpf)
{
	if (!bpf || !bpf->insns || bpf->len == 0)
		return -EINVAL;
	struct sock_fprog prog = {.len = bpf->len, .filter = bpf->insns};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}

void rb_seccomp_free(struct rb_bpf *bpf)
{
	if (!bpf)
		return;
	free(bpf->insns);
	bpf->insns = NULL;
	bpf->len = 0;
}

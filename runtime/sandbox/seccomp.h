/* Seccomp: the policy's profile compiled with libseccomp (native arch; i386 and x32 denied
 * by SCMP_FLTATR_ACT_BADARCH), cached as raw BPF by policy hash, loaded last in the child. */
#ifndef RB_SECCOMP_H
#define RB_SECCOMP_H

#include <stdbool.h>
#include <linux/filter.h>

#include "common/error.h"
#include "policy/policy.h"

struct rb_bpf {
	struct sock_filter *insns; /* malloc'd; owned by the struct */
	unsigned short len;        /* instruction count */
	bool from_cache;
};

/* Builds the filter for pol (profile from <data_dir>/policy/seccomp/<name>.json plus the
 * policy's extra allow/deny names), or reads it from <cache_dir>/<key>.bpf when present.
 * Unknown syscall names are an error naming them. cache_dir may be NULL (no cache). */
int rb_seccomp_prepare(const struct rb_policy *pol, const char *data_dir, const char *cache_dir, struct rb_bpf *out,
                       struct rb_error *err);

/* Installs the filter on the calling thread. Async-signal-safe, allocates nothing: it runs
 * in the step's child just before execve. Returns 0 or -errno. no_new_privs must be set. */
int rb_seccomp_apply(const struct rb_bpf *bpf);

void rb_seccomp_free(struct rb_bpf *bpf);

#endif

/* The policy: what a run may do. Loaded from JSON (jansson), validated strictly (unknown
 * keys and wrong types are errors naming the JSON path), hashed for the ledger. */
#ifndef RB_POLICY_H
#define RB_POLICY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

#define RB_POLICY_MAX_LIST 128
#define RB_NAME_MAX        64

enum rb_net_mode { RB_NET_NONE = 0, RB_NET_GATEWAY = 1 };
enum rb_id_range { RB_ID_RANGE_AUTO = 0, RB_ID_RANGE_REQUIRED, RB_ID_RANGE_SINGLE };

/* network.approval[i]: a connector's calls with one of these methods are held until
 * `runbox approve` (or denied: `runbox deny`, or timeout_s passing). */
#define RB_POLICY_MAX_APPROVALS      8
#define RB_POLICY_APPROVAL_TIMEOUT_S 300u
struct rb_policy_approval {
	char connector[64];
	char methods[8][16]; /* upper case */
	unsigned n_methods;
	unsigned timeout_s;
	/* {"mcp": NAME, "tools": [...]}: the MCP server's tools/call of these tools (names, or
	 * "x*" prefixes) are held; connector is "" then. */
	char mcp[64];
	char tools[8][64];
	unsigned n_tools;
};

/* network.mcp[i]: an MCP server the run may call through the gateway, by name; tools (when
 * narrowed) the most of the gateway config's allowlist it may use (names, or "x*" prefixes). */
#define RB_POLICY_MAX_MCP   8
#define RB_POLICY_MCP_TOOLS 32
struct rb_policy_mcp {
	char name[64];
	bool narrowed; /* "tools" given: only these, within the config's */
	char tools[RB_POLICY_MCP_TOOLS][64];
	unsigned n_tools;
};

struct rb_policy {
	char name[RB_NAME_MAX];
	char hash[65];     /* sha256 of the canonical policy JSON plus its seccomp profile */
	char source[4096]; /* the file it was loaded from ("" when parsed from text) */

	/* identity */
	uid_t uid;
	gid_t gid;
	enum rb_id_range id_range;
	uint64_t caps; /* bit n = capability n (linux/capability.h numbering) */

	/* limits; an absent key takes the shipped default profile's value, 0 means "unlimited" */
	uint64_t timeout_ms;
	uint64_t memory_bytes;
	uint64_t pids;
	double cpus;              /* cpu quota in cores */
	uint64_t cpu_weight;      /* 1..10000 */
	uint64_t rootfs_bytes;    /* size cap of the overlay upper tmpfs */
	uint64_t workspace_bytes; /* size cap of the /workspace tmpfs */
	uint64_t tmp_bytes;       /* size cap of /tmp */
	bool require_enforced;    /* a requested limit the host cannot enforce fails the run */

	/* rlimits; absent: the default profile's; UINT64_MAX ("unlimited"): leave as inherited */
	uint64_t rlimit_nofile;
	uint64_t rlimit_nproc;
	uint64_t rlimit_core;
	uint64_t rlimit_fsize;

	/* seccomp */
	char seccomp_profile[RB_NAME_MAX];      /* a file under policy/seccomp/, without .json */
	char *seccomp_deny[RB_POLICY_MAX_LIST]; /* extra names answered EPERM */
	unsigned n_seccomp_deny;
	char *seccomp_allow[RB_POLICY_MAX_LIST]; /* extra names allowed */
	unsigned n_seccomp_allow;

	/* network */
	enum rb_net_mode net_mode;
	char *connectors[RB_POLICY_MAX_LIST]; /* gateway connectors the run may call, by name */
	unsigned n_connectors;
	char *proxy[RB_POLICY_MAX_LIST]; /* "host:port", "*.suffix:port": the installing proxy's allowlist */
	unsigned n_proxy;
	struct rb_policy_mcp mcp[RB_POLICY_MAX_MCP]; /* network.mcp */
	unsigned n_mcp;
	struct rb_policy_approval approvals[RB_POLICY_MAX_APPROVALS]; /* network.approval: calls held */
	unsigned n_approvals;

	/* inputs: host path prefixes that may be bound into /workspace/in */
	char *input_allow[RB_POLICY_MAX_LIST];
	unsigned n_input_allow;

	/* images: host directory prefixes a directory image may come from, and the most the digest
	 * walk of one may visit (entries) and read (bytes of regular files) */
	char *image_allow[RB_POLICY_MAX_LIST];
	unsigned n_image_allow;
	uint64_t image_max_entries;
	uint64_t image_max_bytes;
	/* What an import or build into the store may keep of a file's privileges, when its caller
	 * asks (--keep-setuid, --keep-file-caps): setuid and setgid bits, and the
	 * security.capability xattr. Both false (stripped) unless the operator's policy says true. */
	bool image_keep_setuid;
	bool image_keep_file_caps;

	/* environment: names passed from the host, and fixed values */
	char *env_pass[RB_POLICY_MAX_LIST];
	unsigned n_env_pass;
	char *env_set[RB_POLICY_MAX_LIST]; /* "NAME=value" */
	unsigned n_env_set;

	/* output caps for captured stdout/stderr */
	uint64_t max_stdout;
	uint64_t max_stderr;
	/* what a run may store (runtime/run/budget.h): bytes and objects over all its harvests, the
	 * ledger events its harvests add, the tenant's store quota, the store's free-space floor */
	uint64_t run_bytes, run_files, run_events, tenant_bytes, min_free;

	char shell[256]; /* runs batched scripts: "/bin/sh" */
	char hostname[RB_NAME_MAX];
};

/* Loads a policy by name (a shipped profile, or one under the config dir) or by path (when
 * the argument contains a '/' or ends in .json). data_dir and config_dir come from rb_paths. */
int rb_policy_load(const char *name_or_path, const char *data_dir, const char *config_dir, struct rb_policy *out,
                   struct rb_error *err);
/* Parses and validates a JSON text (the path for messages); fills out and its hash. */
int rb_policy_parse(const char *text, const char *origin, const char *data_dir, struct rb_policy *out,
                    struct rb_error *err);
void rb_policy_free(struct rb_policy *p);

/* Calls line once for each setting p leaves unlimited or permissive ("limits.memory: unlimited
 * (...)"), in the order of docs/policy.md; returns how many. */
unsigned rb_policy_open_settings(const struct rb_policy *p, void (*line)(void *ctx, const char *text), void *ctx);

/* The capability name for bit n ("CAP_CHOWN"), or NULL. */
const char *rb_cap_name(unsigned n);
/* The capability bit for a name ("CAP_CHOWN" or "chown"), or -1. */
int rb_cap_from_name(const char *name);

#endif

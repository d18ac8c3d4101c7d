/* The run manifest (`runbox run spec.json`): who runs what (tenant, agent), in which image and
 * policy, with which inputs, skills, environment, limit overrides and steps. Parsed strictly
 * (errors name the JSON path) and hashed for the ledger. Schema: docs/manifest.md. */
#ifndef RB_MANIFEST_H
#define RB_MANIFEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "policy/policy.h"
#include "policy/skill.h"

#define RB_MANIFEST_ID_MAX 64 /* tenant, agent, run_id: [A-Za-z0-9._-]{1,64} */
#define RB_MANIFEST_IN_DIR "/workspace/in/"

enum rb_manifest_input_kind { RB_MANIFEST_INPUT_HOST = 1, RB_MANIFEST_INPUT_ARTIFACT = 2 };

struct rb_manifest_input {
	enum rb_manifest_input_kind kind;
	char *from;     /* HOST: absolute and lexically normalised (".", ".." folded, relative
	                 * paths joined to the manifest's folder); symlinks are NOT resolved here:
	                 * the runner realpath()s it before checking the policy's inputs.allow */
	char *artifact; /* ARTIFACT: the digest's 64 lowercase hex digits (no "sha256:") */
	char *to;       /* "/workspace/in/<rel>": no "..", no ".", no "//", no trailing '/'; with
	                 * cow anywhere under "/workspace/" but in itself, out/ and skills/ */
	bool cow;       /* HOST folder: a writable overlay over it, discarded with the run */
};

/* Limit overrides; 0 means "not overridden" (the policy's value applies). */
struct rb_manifest_limits {
	uint64_t timeout_ms; /* per step, as the policy's limits.timeout */
	uint64_t memory_bytes;
	uint64_t pids;
	double cpus;
};

enum rb_manifest_step_kind { RB_MANIFEST_STEP_SCRIPT = 1, RB_MANIFEST_STEP_SKILL = 2 };

struct rb_manifest_step {
	enum rb_manifest_step_kind kind;
	char *name;          /* NULL when absent */
	char *script;        /* SCRIPT: the batched shell script, run by the policy's shell */
	char *skill;         /* SKILL: the skill's name ([a-z0-9-]{1,64}) */
	json_t *inputs;      /* SKILL: object of string/number/bool (owned; {} when absent);
	                      * NULL for SCRIPT */
	uint64_t timeout_ms; /* 0 when absent */
	char **env;          /* "NAME=value", manifest order, NULL-terminated (never NULL) */
	size_t n_env;
};

struct rb_manifest {
	char *origin;   /* the file as named (for messages) */
	char *base_dir; /* absolute folder relative paths were resolved against */
	char tenant[RB_MANIFEST_ID_MAX + 1];
	char agent[RB_MANIFEST_ID_MAX + 1];
	char *agent_version;                 /* NULL when absent */
	char run_id[RB_MANIFEST_ID_MAX + 1]; /* "" when absent: the runner makes one */
	char *image;                         /* default "host" */
	bool image_given;                    /* `image` was written (else "host") */
	char *policy;                        /* a profile name, or an absolute path when it names a file
	                                      * (contains '/' or ends in ".json"); default "default" */
	bool policy_given;                   /* `policy` was written */
	bool policy_is_path;                 /* ... as a file: only where the operator allows it */
	struct rb_manifest_input *inputs;
	size_t n_inputs;
	char **skills; /* bundle folders, absolute (resolved like inputs' `from`) */
	size_t n_skills;
	char **env; /* "NAME=value", NULL-terminated (never NULL) */
	size_t n_env;
	struct rb_manifest_limits limits;
	struct rb_manifest_step *steps; /* at least one */
	size_t n_steps;
	char hash[65]; /* sha256 of the canonical JSON (sorted keys, compact) */
};

/* Reads path (at most 4 MiB) and parses it with base_dir = the file's folder. */
int rb_manifest_load(const char *path, struct rb_manifest *out, struct rb_error *err);
/* Parses text; origin names it in messages; base_dir (NULL: the cwd) anchors relative paths.
 * On failure out is left empty (safe to rb_manifest_free). */
int rb_manifest_parse(const char *text, const char *origin, const char *base_dir, struct rb_manifest *out,
                      struct rb_error *err);
void rb_manifest_free(struct rb_manifest *m);

/* Fails when an override (limits.* or a step's timeout) is above the policy's value, naming
 * both; a limit the policy leaves unlimited may be set to anything. */
int rb_manifest_check_limits(const struct rb_manifest *m, const struct rb_policy *p, struct rb_error *err);

/* What the command line said beside a manifest: each value is a ceiling for it. */
struct rb_manifest_ceilings {
	const char *tenant;               /* --tenant: the manifest's must be this one; NULL: any */
	const char *agent;                /* --agent: likewise */
	const char *policy;               /* --policy: the run's policy; NULL: the manifest's */
	const char *image;                /* --image: the run's image; NULL: the manifest's */
	struct rb_manifest_limits limits; /* --timeout, --memory, --pids, --cpus; 0: none given */
};

/* An id as manifests and the command line name tenants, agents and run ids:
 * [A-Za-z0-9._-]{1,64}, not "." or "..". */
bool rb_manifest_id_ok(const char *s);

/* Fails, naming both values, when the manifest names another tenant, agent, policy or image than the command
 * line, or asks for a limit (or a step timeout) above a command-line ceiling. */
int rb_manifest_check_ceilings(const struct rb_manifest *m, const struct rb_manifest_ceilings *cl,
                               struct rb_error *err);

/* Loads every bundle in m->skills (rb_skill_load), refuses two bundles with one name, and
 * checks that each skill step names a loaded skill and gives exactly its declared inputs.
 * *out is an array of *n_out skills; free it with rb_manifest_free_skills. */
int rb_manifest_load_skills(const struct rb_manifest *m, struct rb_skill **out, size_t *n_out, struct rb_error *err);
/* The same from dirs[i] in place of m->skills[i] (a run's sealed copies of them): what is
 * loaded and checked is what runs. Errors name m->skills[i]. */
int rb_manifest_load_skills_from(const struct rb_manifest *m, const char *const *dirs, struct rb_skill **out,
                                 size_t *n_out, struct rb_error *err);
void rb_manifest_free_skills(struct rb_skill *skills, size_t n);

#endif

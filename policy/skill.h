/* Skill inspection: a bundle is a folder with SKILL.md (front matter: name, description, entry,
 * optional inputs and timeout) and its scripts. Loading checks the entry cannot escape the
 * bundle; the helpers check a step's inputs, build its environment and parse its result. */
#ifndef RB_SKILL_H
#define RB_SKILL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define RB_SKILL_NAME_MAX   64
#define RB_SKILL_MAX_INPUTS 64
/* The step's inputs as one JSON object: a sealed memfd the entry point holds at fd
 * RB_SKILL_INPUTS_FD (the step's first file, runtime/sandbox/step.h), read through its own /proc
 * link, so nothing in the sandbox can swap it. Its children inherit the fd, and the path. */
#define RB_SKILL_INPUTS_FD   3
#define RB_SKILL_INPUTS_FILE "/proc/self/fd/3"
/* Where a bundle is mounted read-only inside the sandbox: RB_SKILL_MOUNT_DIR "/<name>". */
#define RB_SKILL_MOUNT_DIR "/workspace/skills"

struct rb_skill {
	char name[RB_SKILL_NAME_MAX + 1]; /* [a-z0-9-]{1,64}; the name steps call it by */
	char *description;
	char *dir;                         /* the bundle on the host, absolute (realpath) */
	char *entry;                       /* relative to the bundle, e.g. "run.sh" or "bin/run.sh" */
	char *inputs[RB_SKILL_MAX_INPUTS]; /* declared input names, [a-z0-9_]+, all required */
	size_t n_inputs;
	uint64_t timeout_ms; /* the front matter's timeout; 0 when absent */
};

/* Loads and checks the bundle at dir: SKILL.md's front matter, and an entry that exists, is a
 * regular executable file, and is reached without "..", absolute paths or any symlink. On
 * failure out is left empty (safe to rb_skill_free). */
int rb_skill_load(const char *dir, struct rb_skill *out, struct rb_error *err);
void rb_skill_free(struct rb_skill *s);

/* inputs (a JSON object, NULL = none) must give every declared input and nothing else, each a
 * string, number or bool; the error names the unknown and the missing ones. */
int rb_skill_check_inputs(const struct rb_skill *s, json_t *inputs, struct rb_error *err);

/* A NULL-terminated, malloc'd environment for the entry: RUNBOX_INPUT_<NAME>=value for each
 * input (sorted; numbers and bools as JSON writes them), RUNBOX_INPUTS_FILE and
 * RUNBOX_SKILL_DIR. Returns 0, or -1 with errno (EINVAL for an input that is not a string,
 * number or bool, or whose name is not [a-z0-9_]+; ENOMEM). Free with rb_skill_env_free. */
int rb_skill_env(const struct rb_skill *s, json_t *inputs, char ***env_out);
void rb_skill_env_free(char **env);

/* The entry's command inside the sandbox: "/workspace/skills/<name>/<entry>". */
int rb_skill_entry_path(const struct rb_skill *s, char *buf, size_t len);

/* stdout must be exactly one JSON object with only whitespace around it. On failure the
 * message reads "stdout is not one JSON object: <reason> at line L col C"; callers prefix it
 * with rb_error_prefix(err, "skill `%s`", name). */
int rb_skill_parse_result(const char *stdout_text, size_t len, json_t **out, struct rb_error *err);

#endif

/* Host paths that are never an input, a skill's folder or a directory image, whatever a policy
 * allows: the host's kernel interfaces and secrets, and runbox's own directories. */
#ifndef RB_NEVER_INPUT_H
#define RB_NEVER_INPUT_H

#include <stdbool.h>

#include "common/error.h"
#include "common/paths.h"

/* path equals prefix or lies below it (both canonical; "/" covers every path). */
bool rb_path_under(const char *path, const char *prefix);

/* host is a real path. Refuses it when it is, or is below, or holds a path that is never an
 * input; what names it in the message ("--input", "skill", "image"). One thing in paths' state
 * directory may be an input: a single object (!is_dir) of its artifact store. */
int rb_never_input_check(const struct rb_paths *paths, const char *host, bool is_dir, const char *what,
                         struct rb_error *err);

#endif

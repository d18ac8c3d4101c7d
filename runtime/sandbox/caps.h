/* Capabilities: every capability outside the policy's set dropped from every set (bounding,
 * inheritable, permitted, effective, ambient) with libcap. */
#ifndef RB_CAPS_H
#define RB_CAPS_H

#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* Drops the bounding set to keep. Needs CAP_SETPCAP: call before changing uid. */
int rb_caps_drop_bounding(uint64_t keep, struct rb_error *err);
/* After the uid change: permitted, effective and inheritable become keep; for a non-root uid
 * keep is also raised as ambient so it survives execve. */
int rb_caps_set(uint64_t keep, uid_t uid, struct rb_error *err);

#endif

/* A directory tree's digest: a bounded walk that stays on one filesystem, opens nothing but
 * directories and regular files (never following a link, never blocking), and reuses the
 * content hash of files that have not changed since the last walk (a cache file). */
#ifndef RB_IMAGE_DIGEST_H
#define RB_IMAGE_DIGEST_H

#include <stdint.h>

#include "common/error.h"

struct rb_digest_limits {
	uint64_t max_entries; /* directory entries visited, the root included */
	uint64_t max_bytes;   /* sum of the sizes of the regular files */
};

struct rb_digest_stats {
	uint64_t entries;
	uint64_t bytes;
	uint64_t files_read;   /* regular files whose content was read and hashed */
	uint64_t files_cached; /* regular files whose hash came from the cache */
};

/* "sha256:<hex>" over a sorted listing of every entry below root (path, type and mode, owner,
 * size, and the hash of a file's content or a link's target). cache is a file path (in
 * runbox's state directory) read before and rewritten atomically (0600) after a walk that
 * found other entries than it holds, or NULL. Over a limit, or on a file that changes while
 * it is hashed, the walk fails naming it. stats may be NULL. */
int rb_tree_digest(const char *root, const char *cache, const struct rb_digest_limits *lim, char out[72],
                   struct rb_digest_stats *stats, struct rb_error *err);

#endif

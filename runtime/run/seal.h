/* Sealed copies of host files a run binds in: a skill bundle is copied and digested in one walk
 * (the bytes hashed are the bytes run, whatever happens to the host folder later), an artifact
 * store object is copied so that the store's objects stay private to the store's owner. */
#ifndef RB_SEAL_H
#define RB_SEAL_H

#include <stdint.h>

#include "common/error.h"

#define RB_SEAL_DIGEST_LEN 72 /* "sha256:" + 64 hex + NUL */
#define RB_SEAL_MAX_DEPTH  32

/* What a run may still copy. Each copy takes from it; running out is an error naming the cap. */
struct rb_seal_budget {
	uint64_t max_entries, max_bytes; /* the caps */
	uint64_t entries;                /* files, directories and links copied so far */
	uint64_t bytes;                  /* file contents copied so far */
};
/* A run's skill bundles together: a bundle is scripts and their data, not a data set. */
#define RB_SEAL_BUNDLE_BUDGET ((struct rb_seal_budget){4096, 64ULL << 20, 0, 0})
/* A run's artifact inputs together: the harvest's total cap for one step (runtime/run/harvest.h). */
#define RB_SEAL_ARTIFACT_BUDGET ((struct rb_seal_budget){64, 256ULL << 20, 0, 0})

/* Copies the directory src (an fd, O_PATH is enough) to a new directory `name` below dst, and
 * fills digest ("sha256:<hex>"). Nothing is followed: a symlink is copied as a link, a device,
 * fifo or socket is an error, and so is a directory on another filesystem than src (a mount
 * inside the bundle). Copies keep mode & 0555 (no write or set-id bits; a directory stays
 * writable by its owner, so the run directory can be removed: the sandbox binds it read-only,
 * and the caller keeps the copies where only it reaches them). The digest is
 * sha256 over the entries in a sorted walk (bytewise names, depth first), each as
 * "<type>\0<mode octal>\0<path>\0" plus, for a file, "<size>\0<sha256 hex of contents>\0",
 * for a link, "<target>\0"; type is d, f or l, path is relative ("." for the top), mode is the
 * original's & 0555 (0777 for a link). On failure the partial copy is left for the caller to remove with dst. */
int rb_seal_tree(int src, int dst, const char *name, struct rb_seal_budget *budget, char digest[RB_SEAL_DIGEST_LEN],
                 struct rb_error *err);

/* Copies the regular file src (an fd, O_PATH is enough) to a new file `name` below dst, mode
 * 0444. what names src in errors. */
int rb_seal_file(int src, const char *what, int dst, const char *name, struct rb_seal_budget *budget,
                 struct rb_error *err);

#endif

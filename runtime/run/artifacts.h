/* The content-addressed artifact store: <store_dir>/sha256/<2 hex>/<64 hex>, written
 * atomically, deduplicated, read back by digest ("sha256:<64 hex>"). */
#ifndef RB_ARTIFACTS_H
#define RB_ARTIFACTS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* "sha256:" + 64 hex + NUL */
#define RB_ARTIFACT_DIGEST_LEN 72

/* Stores data under its sha256 and writes "sha256:<hex>" to digest_out. An object that is
 * already there (a regular file of the same size) is not written again. The object appears
 * under its final name only once complete (temporary file + rename), mode 0644; the
 * directories are created 0755. Not fsync'd: call rb_artifact_sync once after a batch.
 * *created (when not NULL) tells whether this call wrote a new object. Returns 0, or -1. */
int rb_artifact_store(const char *store_dir, const char *data, size_t len, char digest_out[RB_ARTIFACT_DIGEST_LEN],
                      bool *created, struct rb_error *err);

/* Flushes the store's filesystem (one syncfs), so that what the ledger records survives a
 * crash of the host. */
int rb_artifact_sync(const char *store_dir, struct rb_error *err);

/* True for "sha256:<64 lowercase hex>" or a bare 64 lowercase hex. Anything else (upper
 * case, "../", short) is refused: digests come from manifests and become paths. */
bool rb_artifact_digest_valid(const char *digest);

/* The object's path for a digest (either form above) into out. Does not check existence.
 * Returns 0, or -1 with err for an invalid digest or a path that does not fit. */
int rb_artifact_path(const char *store_dir, const char *digest, char out[PATH_MAX], struct rb_error *err);

/* Largest object read back whole (rb_artifact_read): a harvest stores nothing above its
 * per-file cap, 64 MiB by default; the bound leaves room for an operator's larger cap. */
#define RB_ARTIFACT_READ_MAX (1ULL << 30)

/* Reads the object of digest into a new buffer (*data, *len), checking that its bytes still
 * have that digest: a damaged store is an error naming the object, never wrong content. */
int rb_artifact_read(const char *store_dir, const char *digest, char **data, size_t *len, struct rb_error *err);

/* Writes the object of digest at relpath below the directory dirfd, as a harvest recorded it:
 * relpath's folders made as needed (0755), no link followed anywhere on the way (openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), an absolute path or a ".." refused. An existing entry
 * is an error (EEXIST) unless force, which replaces it by rename (a link there is replaced,
 * never followed). The file is 0644. Returns 0, or -1 with err naming relpath. */
int rb_artifact_export(const char *store_dir, const char *digest, int dirfd, const char *relpath, bool force,
                       struct rb_error *err);

#endif

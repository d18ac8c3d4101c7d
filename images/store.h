/* The image store: unpacked trees under <state>/images/store/<hex>/rootfs, each named by the
 * digest of its tree (computed once, at import), and names as references to digests
 * (<state>/images/refs/<name>, one file each, written atomically). */
#ifndef RB_IMAGE_STORE_H
#define RB_IMAGE_STORE_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/paths.h"

/* One store image, as its meta.json says. */
struct rb_store_image {
	char digest[72]; /* "sha256:<hex>" */
	char rootfs[PATH_MAX];
	uint64_t size;  /* bytes of its regular files */
	uint64_t files; /* entries of its tree, the root included */
	int64_t created;
	char source[PATH_MAX];
};

/* A reference name: 1-128 of [A-Za-z0-9._:-], starting with a letter or digit, neither a
 * built-in's name (`minimal`, `host`) nor starting with `sha256:`. */
bool rb_store_name_valid(const char *name);

/* ref is a name or "sha256:<hex>" (the full 64 digits). 0 with out filled, 1 when the store
 * has no such image (err says which), -1 on another failure. */
int rb_store_lookup(const struct rb_paths *paths, const char *ref, struct rb_store_image *out, struct rb_error *err);

/* The store's directories, made if missing (0700): <state>/images/store and .../refs. */
int rb_store_dirs(const struct rb_paths *paths, char store[PATH_MAX], char refs[PATH_MAX], struct rb_error *err);

/* Puts the finished tree tmpdir (holding rootfs/ and meta.json) in the store as digest; when
 * the store already has it, tmpdir is removed and the stored one kept. */
int rb_store_commit(const struct rb_paths *paths, const char *tmpdir, const char *digest, struct rb_error *err);

/* Removes a tree of the store (an image, a failed import): its directories made writable
 * first, since a rootless caller cannot unlink in a 0555 directory it owns. */
int rb_store_rm_tree(const char *path, struct rb_error *err);

/* name -> digest (which must be in the store), replacing what name referred to. */
int rb_store_tag(const struct rb_paths *paths, const char *name, const char *digest, struct rb_error *err);

/* [{name: [..], digest, size, files, created, source}], by created, then digest. */
int rb_store_list(const struct rb_paths *paths, json_t **out, struct rb_error *err);

/* A name: the reference goes, and the tree too when no other name refers to it. A digest: the
 * tree and every name referring to it. Refused while one of live_runs (rb_lifecycle_list's
 * array, NULL for none) runs on the tree that would go. */
int rb_store_remove(const struct rb_paths *paths, const char *ref, const json_t *live_runs, struct rb_error *err);

/* Opens and locks (flock, exclusive) a temporary tree of the store while its maker works in
 * it, so rb_image_gc leaves it alone. The descriptor, which holds the lock; -1 on failure. */
int rb_store_hold_temp(const char *dir, struct rb_error *err);

/* Removes store trees that no name refers to and none of live_runs runs on, and temporary
 * trees whose maker is gone (their lock free, older than a minute). report: {removed:
 * [{digest, size} | {temporary}], kept, removed_bytes, dry_run}. dry_run removes nothing. */
int rb_image_gc(const struct rb_paths *paths, const json_t *live_runs, bool dry_run, json_t **report,
                struct rb_error *err);

#endif

/* Import into the image store (images/store.h): a directory or a tarball (tar, gzip, zstd,
 * xz) unpacked into a temporary tree of the store, checked, digested once and renamed into
 * place; any failure leaves nothing behind. */
#ifndef RB_IMAGE_IMPORT_H
#define RB_IMAGE_IMPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/paths.h"
#include "common/progress.h"
#include "policy/policy.h"

#define RB_IMPORT_MAX_MEMBERS 1000000ull
#define RB_IMPORT_MAX_BYTES   (16ull << 30)

struct rb_import_opts {
	/* The source must lie below one of its images.allow, as a directory image must: an
	 * import reads host files as a directory image does. */
	const struct rb_policy *pol;
	const char *name;     /* the reference to set, or NULL */
	uint64_t max_members; /* entries of the source: more is a failure (an archive bomb) */
	uint64_t max_bytes;   /* bytes unpacked: more is a failure (a decompression bomb) */
	/* Keep setuid and setgid bits of files, and their security.capability xattrs (file
	 * capabilities): both dropped by default, and asked for only where pol allows it
	 * (images.keep_setuid, images.keep_file_caps), else the import fails naming the key. */
	bool keep_setuid;
	bool keep_file_caps;
	/* "read": bytes of a tarball read of its size, members applied as items; a directory or
	 * layout: bytes unpacked, total unknown. fn NULL: none. */
	struct rb_progress progress;
};

/* 0 when what opts asks to keep (keep_setuid, keep_file_caps) its policy allows; else an error
 * naming the policy's key. rb_image_import and rb_image_import_built check it first. */
int rb_import_privileges_allowed(const struct rb_import_opts *opts, struct rb_error *err);

/* src is a directory or a tarball. out is the image's digest, its id in the store. */
int rb_image_import(const struct rb_paths *paths, const char *src, const struct rb_import_opts *opts, char out[72],
                    struct rb_error *err);

/* A tree runbox built itself (images/build.h), in the store's own temporary space: imported as
 * a directory is (the same checks of every entry), without the images.allow rule, which is
 * about host paths. label is what meta.json records as its source (the recipe). */
int rb_image_import_built(const struct rb_paths *paths, const char *tree, const char *label,
                          const struct rb_import_opts *opts, char out[72], struct rb_error *err);

#endif

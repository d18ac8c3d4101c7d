/* Images: a read-only root filesystem with a digest. For now two built-in images behind one
 * small interface that the image store will take over: `minimal` (busybox and the probe,
 * built by make) and `host` (the host's /usr and a minimal /etc, read-only). */
#ifndef RB_IMAGE_H
#define RB_IMAGE_H

#include <limits.h>
#include <stdbool.h>

#include "common/error.h"
#include "common/paths.h"

#define RB_IMAGE_MAX_BINDS 8

/* A host path bound read-only (nosuid, nodev) over a path that exists in the rootfs. */
/* The host image's fixed binds (/usr, /etc/ld.so.cache, ...): short host paths by
 * construction, kept small so a struct rb_image is not 64 KiB of mostly untouched pages. */
struct rb_image_bind {
	char src[256];
	char dest[64]; /* relative to the rootfs, no leading '/' */
};

struct rb_image {
	char name[64];
	char rootfs[PATH_MAX]; /* the overlay's read-only lower layer */
	char digest[72];       /* "sha256:<hex>" */
	struct rb_image_bind binds[RB_IMAGE_MAX_BINDS];
	unsigned n_binds;
};

int rb_image_resolve(const char *name, const struct rb_paths *paths, struct rb_image *out, struct rb_error *err);

#endif

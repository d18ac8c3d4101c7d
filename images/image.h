/* Images: a read-only root filesystem with a digest. Two built-in images behind one small
 * interface that the image store will take over, `minimal` (busybox and the probe, built by
 * make) and `host` (the host's /usr and a minimal /etc, read-only), and directory images. */
#ifndef RB_IMAGE_H
#define RB_IMAGE_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/paths.h"
#include "policy/policy.h"

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
	/* runbox's own image (a built-in; the image store's later): only such an image is
	 * idmapped to the sandbox's ids. A directory image keeps its host owners inside. */
	bool owned_by_runbox;
	/* A directory image's root as it was checked and digested (0 for the built-ins): what is
	 * mounted must still be it. */
	dev_t dev;
	ino_t ino;
};

/* name is `minimal`, `host` or the absolute path of a directory, which pol's images.allow must
 * cover and which must hold nothing that is never an input (common/never_input.h). */
int rb_image_resolve(const char *name, const struct rb_policy *pol, const struct rb_paths *paths, struct rb_image *out,
                     struct rb_error *err);

#endif

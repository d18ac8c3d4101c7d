/* The sandbox's root filesystem, built inside its mount namespace by init: overlayfs over the
 * image on a size-capped tmpfs, /workspace, inputs, /tmp, a minimal /dev, a masked /proc, an
 * empty read-only /sys, then pivot_root with the old root detached. Targets are resolved with
 * openat2(RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS) and mounts attached by fd, so a symlink in the
 * image can never redirect a mount to the host. */
#ifndef RB_MOUNTS_H
#define RB_MOUNTS_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "images/image.h"

#define RB_MAX_INPUTS 32

struct rb_input {
	int fd;              /* O_PATH of the host source, opened by the runner */
	char host[PATH_MAX]; /* the source, resolved */
	bool is_dir;
	/* A writable overlay over the read-only folder, its upper and work layers on the run's
	 * scratch tmpfs (limits.rootfs_size), gone with the run: the host's files never change. */
	bool cow;
	char dest[PATH_MAX]; /* relative to /workspace/in; with cow, relative to /workspace */
};

struct rb_rootfs_spec {
	const char *staging; /* an existing host directory to mount the scratch tmpfs on */
	const struct rb_image *image;
	uint64_t rootfs_bytes, workspace_bytes, tmp_bytes;
	uid_t uid; /* owner of /workspace inside */
	gid_t gid;
	const struct rb_input *inputs;
	unsigned n_inputs;
	const struct rb_input *skills; /* bundles: dest is the name under /workspace/skills */
	unsigned n_skills;
	/* The image is the root itself, writable, with no overlay (a recipe build's tree, whose
	 * commands change it): lower_fd must then be the runner's idmapped, writable clone. */
	bool writable_image;
	int lower_fd; /* the image's mount, read-only and detached, made by the runner
	               * (idmapped to the sandbox's ids when runbox's own), or -1: use
	               * image->rootfs */
	/* As root with a subordinate slice: cow input i's mount, read-only, detached and idmapped
	 * to the sandbox's ids by the runner (so host root's files are the sandbox root's, and
	 * overlayfs can copy them up), or -1: init clones the input as it finds it. Set by init. */
	int cow_lower[RB_MAX_INPUTS];
	/* The network's DNS stub is on 127.0.0.1:53 (gateway mode): /etc/resolv.conf inside names
	 * it, whatever the image ships. Set by init from the sandbox's net mode. */
	bool resolv_stub;
};

/* The most cow inputs the runner idmaps (they travel in one message with the image's clone). */
#define RB_MAX_COW_IDMAPPED 8

/* Builds the root and pivots into it; on return the cwd is the new "/". */
int rb_rootfs_build(const struct rb_rootfs_spec *spec, struct rb_error *err);

/* One input as asked for: a source, where it goes, and how messages name it. */
struct rb_input_req {
	const char *from; /* the host path */
	const char *to;   /* under /workspace/in/; NULL: /workspace/in/<basename of from> */
	const char *what; /* "--input `a:b`", "manifest run.json: inputs[2]" */
	bool cow;         /* a folder only; to may then be anywhere under /workspace/ but out/,
	                   * skills/ and in itself */
};

/* Opens req->from (O_PATH, resolved once, no trailing symlink) and checks req->to. */
int rb_input_open(const struct rb_input_req *req, struct rb_input *out, struct rb_error *err);
/* rb_input_open of a command line's "SRC[:DEST]" (split at the first ':'). */
int rb_input_parse(const char *arg, struct rb_input *out, struct rb_error *err);

#endif

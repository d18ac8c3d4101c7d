/* Harvest of a sandbox's /workspace/out from the host side: a walk that never follows a
 * link, caps on size, bytes, count and depth, every skipped entry recorded with its reason,
 * each file scrubbed (through a callback) and stored content-addressed (runtime/run/artifacts.h). */
#ifndef RB_HARVEST_H
#define RB_HARVEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/progress.h"
#include "runtime/run/artifacts.h"

#define RB_HARVEST_DEFAULT_FILE_BYTES   (64ULL << 20)
#define RB_HARVEST_DEFAULT_TOTAL_BYTES  (256ULL << 20)
#define RB_HARVEST_DEFAULT_FILES        10000U
#define RB_HARVEST_DEFAULT_DEPTH        32U
#define RB_HARVEST_DEFAULT_SKIP_RECORDS 1000U
/* One open directory per level: the walk holds at most this many descriptors. */
#define RB_HARVEST_DEPTH_LIMIT 256U

struct rb_harvest_caps {
	uint64_t max_file_bytes;   /* a larger file is recorded over_file_cap, never read */
	uint64_t max_total_bytes;  /* sum of bytes read from harvested files */
	uint32_t max_files;        /* regular files stored */
	uint32_t max_depth;        /* directory levels below out that are entered (0: only out itself) */
	uint32_t max_skip_records; /* skipped entries listed; the rest are only counted */
};

/* Fills the documented defaults: 64 MiB, 256 MiB, 10000 files, depth 32, 1000 records. */
void rb_harvest_caps_default(struct rb_harvest_caps *caps);

enum rb_harvest_reason {
	RB_HARVEST_SYMLINK,
	RB_HARVEST_FIFO,
	RB_HARVEST_SOCKET,
	RB_HARVEST_DEVICE,
	RB_HARVEST_OVER_FILE_CAP,
	RB_HARVEST_OVER_TOTAL_CAP,
	RB_HARVEST_OVER_COUNT_CAP,
	RB_HARVEST_OVER_DEPTH,
	RB_HARVEST_CHANGED,      /* swapped, vanished or grown past the cap while harvested */
	RB_HARVEST_HARDLINK,     /* another name of a file already harvested; other = its path */
	RB_HARVEST_MOUNT_POINT,  /* a mount below out: not crossed */
	RB_HARVEST_SCRUB_FAILED, /* the scrubber refused or failed: never stored unscrubbed */
	RB_HARVEST_UNREADABLE,   /* open or read failed (permissions, I/O); detail = errno text */
	RB_HARVEST_REASON_COUNT
};

/* "symlink", "fifo", ..., "hardlink_of", "unreadable". */
const char *rb_harvest_reason_name(enum rb_harvest_reason r);

struct rb_harvest_artifact {
	char *path;             /* relative to out, never starting with '/' */
	uint64_t size;          /* stored bytes, after scrubbing */
	uint64_t original_size; /* bytes read */
	char digest[RB_ARTIFACT_DIGEST_LEN];
	json_t *redactions;       /* what the scrubber returned (e.g. {"aws_key": 2}), or NULL */
	uint64_t redaction_count; /* sum of the integer values in redactions */
	bool path_redacted;       /* path is the scrubbed name: the file's own name held a secret */
};

struct rb_harvest_skip {
	char *path;
	enum rb_harvest_reason reason;
	char *other;  /* hardlink_of: the first path; changed/unreadable: a detail; or NULL */
	int64_t size; /* st_size for regular files, -1 when not known or not a file */
	/* path, other: scrubbed, as artifact paths are */
	bool path_redacted, other_redacted;
};

struct rb_harvest_result {
	struct rb_harvest_artifact *artifacts; /* sorted by path */
	size_t n_artifacts;
	struct rb_harvest_skip *skipped; /* the first caps.max_skip_records, sorted by path */
	size_t n_skipped;
	uint64_t skipped_total; /* every skip, listed or not */
	uint64_t skipped_by_reason[RB_HARVEST_REASON_COUNT];
	uint64_t entries_seen; /* every directory entry met (except . and ..) */
	uint64_t dirs_seen;    /* directories entered, out included */
	uint64_t files_seen;   /* regular files met, stored or not */
	uint64_t bytes_read;   /* read from out: shows that capped files were not read */
	uint64_t bytes_stored; /* sum of artifact sizes (after scrubbing) */
	uint64_t objects_new;  /* objects the store did not hold before */
	uint64_t bytes_new;    /* their bytes: what this harvest added to the store */
	uint64_t redactions_total;
	struct rb_harvest_caps caps;         /* the caps applied */
	bool complete;                       /* false when rb_harvest failed part-way */
	size_t cap_artifacts_, cap_skipped_; /* private: allocated lengths */
};

/* The scrubber: reads in[0..len), on success sets *out to a malloc'd buffer (the harvest
 * frees it) of *out_len bytes, or *out = NULL to mean "unchanged"; *redactions to a new
 * reference (a JSON object rule -> count) or NULL. Returns 0, or -1 with err: the file is then
 * recorded scrub_failed and not stored. */
typedef int (*rb_harvest_scrub_fn)(void *ctx, const char *in, size_t len, char **out, size_t *out_len,
                                   json_t **redactions, struct rb_error *err);

/* Walks the directory out_dirfd (an O_PATH or O_RDONLY directory fd; not consumed) and
 * stores every regular file within the caps, scrubbed by scrub (NULL: stored as read, for
 * tests only) in store_dir. The recorded paths (and hardlink_of, detail) pass scrub too: a
 * redacted one is flagged path_redacted (other_redacted); one it fails on is recorded as
 * "[REDACTED:scrub-failed]". caps NULL means the defaults. res is filled (and must be freed
 * with rb_harvest_result_free) whatever the return value. Returns 0, or -1 with err when the
 * harvest itself failed (out unusable, store not writable, openat2 missing, no memory): res
 * then holds what was done, complete = false. A skipped entry is not a failure. */
int rb_harvest(int out_dirfd, const struct rb_harvest_caps *caps, rb_harvest_scrub_fn scrub, void *scrub_ctx,
               const char *store_dir, struct rb_harvest_result *res, struct rb_error *err);

/* For tests: race(race_ctx, parent_dirfd, name) runs after an entry was classified and
 * before it is opened for reading, so a test can swap it exactly there. */
typedef void (*rb_harvest_race_fn)(void *ctx, int parent_dirfd, const char *name);
/* A second try at an open the walk was refused (EACCES, EPERM): the same openat2(dirfd, name,
 * flags, resolve) where more may be read (rb_nsopener_open). Returns an fd, or -1 and errno. */
typedef int (*rb_harvest_reopen_fn)(void *ctx, int dirfd, const char *name, uint64_t flags, uint64_t resolve);
struct rb_harvest_hooks {
	rb_harvest_race_fn race;
	void *race_ctx;
	rb_harvest_reopen_fn reopen;
	void *reopen_ctx;
	/* "harvested": bytes read of out, files stored as items, total unknown; after each file and
	 * each MiB read, and once final. fn NULL: none. */
	struct rb_progress progress;
	/* scrub may be called from two threads at once (rb_scrub_harvest_cb may): two large files
	 * (1 MiB or more) are then scrubbed at a time, one on a thread of the harvest's own. */
	bool scrub_concurrent;
};
/* Whether a second scrubbing thread (scrub_concurrent) would have a CPU of its own: more than
 * one online, and the load average below all of them but one. On a busy host two threads cost
 * more CPU time per byte than one, for no shorter harvest. */
bool rb_harvest_cpu_to_spare(void);

/* rb_harvest with hooks (NULL: none). */
int rb_harvest_hooked(int out_dirfd, const struct rb_harvest_caps *caps, rb_harvest_scrub_fn scrub, void *scrub_ctx,
                      const char *store_dir, const struct rb_harvest_hooks *hooks, struct rb_harvest_result *res,
                      struct rb_error *err);
int rb_harvest_with_race(int out_dirfd, const struct rb_harvest_caps *caps, rb_harvest_scrub_fn scrub, void *scrub_ctx,
                         const char *store_dir, rb_harvest_race_fn race, void *race_ctx, struct rb_harvest_result *res,
                         struct rb_error *err);

/* The result as JSON: {"artifacts": [...], "skipped": [...], "skipped_total", "skipped_listed",
 * "skipped_by_reason", "entries_seen", "dirs_seen", "files_seen", "bytes_read", "bytes_stored", "objects_new",
 * "bytes_new", "redactions_total", "caps", "complete"} (docs/harvest.md). NULL only when out of memory. */
json_t *rb_harvest_json(const struct rb_harvest_result *res);

void rb_harvest_result_free(struct rb_harvest_result *res);

#endif

/* A writer inside the sandbox: a child of its init that writes the bytes it is sent into files
 * the caller opened in the sandbox's tree. The kernel charges a tmpfs page (the sandbox's
 * /workspace) to the memory cgroup of the process that writes it: a file runbox serve writes
 * through here counts against the sandbox's memory limit, as the sandbox's own writes do, not
 * against the daemon's.
 *
 * One SOCK_SEQPACKET message each way, a struct rb_writer_head first:
 *   RB_WRITER_FILE, one descriptor attached: the file what follows goes into (the last one is
 *     closed); the failure and the count start again. Without one: no file (the last closed);
 *   RB_WRITER_DATA: the bytes after the head, written at head.off (pwrite);
 *   RB_WRITER_SYNC: answered with a struct rb_writer_reply once every byte before it is
 *     written: the errno of the first failure since FILE (then no byte after it is written) and
 *     the bytes written.
 * The writer ends at its socket's end of file, or with init. A writer init could not start
 * answers its socket once with the fork's errno and is closed. */
#ifndef RB_WRITER_H
#define RB_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

enum rb_writer_op { RB_WRITER_FILE = 1, RB_WRITER_DATA = 2, RB_WRITER_SYNC = 3 };

struct rb_writer_head {
	uint32_t op;
	uint32_t len; /* of the bytes after the head (DATA) */
	uint64_t off;
};

struct rb_writer_reply {
	int32_t errnum;
	uint32_t not_started; /* 1: init's answer, its fork failed with errnum */
	uint64_t written;
};

/* The most bytes one DATA message carries (rb_writer_data splits what is longer). */
#define RB_WRITER_CHUNK (64u << 10)

/* init's own oom_score_adj, opened before init became undumpable (its /proc files are then
 * the host root's): each writer is forked with it at 1000, the OOM killer's first choice, so a
 * file that passes the sandbox's memory limit fails its call and kills nothing of the sandbox's.
 * fd -1: not open (the writer then has init's). */
struct rb_writer_oom {
	int fd;
	char orig[16];
};
void rb_writer_oom_open(struct rb_writer_oom *o);
/* In init, on a request with the writer's end of the socket: forks the writer, or answers why
 * not. */
void rb_writer_start(int sock, const struct rb_writer_oom *o);
/* In init's child: serves sock until its end of file, then exits, as it does when parent is
 * gone. Every other descriptor is closed first, every capability dropped. */
__attribute__((noreturn)) void rb_writer_main(int sock, pid_t parent);

/* The caller's side. Each returns 0 or -1 with err (a writer gone: ECONNRESET, "killed"). */
int rb_writer_file(int sock, int fd, struct rb_error *err);
/* The writer closes its file: nothing of the sandbox's stays open in it (a file removed later
 * would keep its pages while it did). */
int rb_writer_release(int sock, struct rb_error *err);
int rb_writer_data(int sock, const void *data, size_t len, uint64_t off, struct rb_error *err);
/* Waits for the writer: every byte sent is in the file, or the first failure is err (with its
 * errno). *written (may be NULL): the bytes written since the last FILE. */
int rb_writer_sync(int sock, uint64_t *written, struct rb_error *err);

#endif

/* One copy loop for every file runbox copies whole (kept logs, sealed inputs): read to EOF,
 * written fully, optionally hashed (SHA-256) and capped. */
#ifndef RB_COPYFD_H
#define RB_COPYFD_H

#include <stdint.h>

/* Why a copy stopped short. */
enum rb_copy_fail {
	RB_COPY_OK = 0,
	RB_COPY_READ,  /* reading in failed (errno) */
	RB_COPY_WRITE, /* writing out failed (errno) */
	RB_COPY_CAP,   /* in holds more than cap bytes (errno EFBIG); the chunk past it is not written */
};

/* Copies in (from its offset) to out until in's EOF. cap: the most bytes it may copy
 * (UINT64_MAX: no cap). *copied: the bytes written, also on failure. sha256_hex (65 bytes, or
 * NULL for no hash): the hex digest of what was copied, once it all was. 0, or -1 with errno
 * and *why saying which side failed; the caller names the files. */
int rb_copy_fd(int in, int out, uint64_t cap, uint64_t *copied, char *sha256_hex, enum rb_copy_fail *why);

#endif

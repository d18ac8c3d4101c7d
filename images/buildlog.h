/* mmdebstrap's --verbose output read line by line while a build runs: apt's and dpkg's lines
 * counted into progress ("fetched N / unpacked N of M"), mmdebstrap's own I:/W:/E: lines passed on. */
#ifndef RB_IMAGE_BUILDLOG_H
#define RB_IMAGE_BUILDLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/progress.h"

#define RB_BUILDLOG_LINE 1024 /* a longer line is cut there */
#define RB_BUILDLOG_KEEP 40   /* lines not passed on that are kept, said if the build fails */

struct rb_buildlog {
	struct rb_progress progress;
	bool downloading; /* after "I: downloading packages": apt's Get: lines are packages */
	uint64_t total;   /* "M newly installed", the largest said; 0 until then */
	uint64_t fetched, unpacked;
	char line[RB_BUILDLOG_LINE];
	size_t len;
	char kept[RB_BUILDLOG_KEEP][RB_BUILDLOG_LINE]; /* a ring of the last lines not passed on */
	unsigned n_kept, next_kept;
};

void rb_buildlog_init(struct rb_buildlog *b, const struct rb_progress *progress);
/* Bytes of mmdebstrap's output, split into lines: each counted, each I:/W:/E: line (or one
 * that is neither apt's nor dpkg's usual chatter) reported as a progress line. */
void rb_buildlog_feed(struct rb_buildlog *b, const char *data, size_t n);
/* The end: a last unterminated line fed; failed: the kept lines reported, so the error has its
 * context; a final report. */
void rb_buildlog_end(struct rb_buildlog *b, bool failed);

#endif

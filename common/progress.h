/* Progress of long library work (an import, a build, a harvest), reported through a callback the
 * caller gives: the library never writes to a terminal; the CLI renders it (cli/progress.h). */
#ifndef RB_PROGRESS_H
#define RB_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct rb_progress_report {
	const char *what; /* what is counted: "read", "harvested", "fetched", "unpacked" */
	uint64_t done;    /* bytes (is_bytes) or items so far */
	uint64_t total;   /* the same unit; 0 when not known */
	bool is_bytes;
	uint64_t items;         /* members applied, files harvested: said next to done; 0 when none */
	const char *items_what; /* "members", "files" */
	bool final;             /* the last report of this work */
	/* A line of the work's own output to show as it is (above a bar), without its newline; NULL:
	 * counts only. Said where the work has lines of its own (mmdebstrap's). */
	const char *line;
};

/* fn NULL (the default, a zeroed options struct) reports nothing. fn is called often (per member,
 * per block): it must be cheap; rate-limiting is the caller's. */
struct rb_progress {
	void (*fn)(void *arg, const struct rb_progress_report *r);
	void *arg;
};

static inline void rb_progress_say(const struct rb_progress *p, const struct rb_progress_report *r)
{
	if (p && p->fn)
		p->fn(p->arg, r);
}

#endif

/* The CLI's rendering of library progress (common/progress.h) on stderr: one updating line with a
 * bar on a terminal (from 0.2 s into the work, at most 10 redraws a second, cleared at the end);
 * elsewhere plain lines, only for work that lasts RB_CLI_PROGRESS_PLAIN_SEC. */
#ifndef RB_CLI_PROGRESS_H
#define RB_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "common/progress.h"

/* Plain lines (no terminal): one every this many seconds, only once the work lasts that long. */
#define RB_CLI_PROGRESS_PLAIN_SEC 5

struct rb_cli_progress {
	int fd;
	const char *label; /* "import", "harvest", "build" */
	bool off;          /* --json or quiet: nothing at all */
	bool tty;          /* fd is a terminal: the updating line */
	bool drawn;        /* tty: a line is on the terminal; plain: a line was printed */
	bool have;         /* last holds a report */
	bool from_first;   /* the clock starts at the first report, not at init: for work that
	                    * begins some time after (a manifest step's harvest, after its step) */
	struct timespec start, last_draw;
	struct rb_progress_report last;
};

/* off: say nothing (--json, or a caller's quiet). */
void rb_cli_progress_init(struct rb_cli_progress *p, int fd, const char *label, bool off);
/* The callback to put in a library call's options; p must outlive the call. */
struct rb_progress rb_cli_progress_sink(struct rb_cli_progress *p);
/* The work is over: a terminal's line is cleared and, if one was drawn, a one-line summary said
 * (ok) or nothing (failed: the error follows); a plain line ends the plain ones once any was said. */
void rb_cli_progress_end(struct rb_cli_progress *p, bool ok);

#endif

/* mmdebstrap's output as progress (buildlog.h): its lines are the only source of what it
 * fetched and unpacked; a line it may change the wording of costs a count, never the build. */
#include "images/buildlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rb_buildlog_init(struct rb_buildlog *b, const struct rb_progress *progress)
{
	memset(b, 0, sizeof *b);
	if (progress)
		b->progress = *progress;
}

static void report(const struct rb_buildlog *b, const char *line, bool final)
{
	struct rb_progress_report r = {.what = b->unpacked ? "unpacked" : "fetched",
	                               .done = b->unpacked ? b->unpacked : b->fetched,
	                               .total = b->total,
	                               .line = line,
	                               .final = final};
	if (b->unpacked && b->fetched) {
		r.items = b->fetched;
		r.items_what = "fetched";
	}
	if (r.total && r.done > r.total)
		r.total = r.done; /* a second apt call installed more than the first said */
	rb_progress_say(&b->progress, &r);
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void keep(struct rb_buildlog *b, const char *line)
{
	snprintf(b->kept[b->next_kept], RB_BUILDLOG_LINE, "%s", line);
	b->next_kept = (b->next_kept + 1) % RB_BUILDLOG_KEEP;
	if (b->n_kept < RB_BUILDLOG_KEEP)
		b->n_kept++;
}

static void one_line(struct rb_buildlog *b, const char *l)
{
	unsigned long long up, m;
	if (starts(l, "I: ") || starts(l, "W: ") || starts(l, "E: ")) {
		if (starts(l, "I: downloading packages"))
			b->downloading = true;
		report(b, l, false);
		return;
	}
	keep(b, l);
	if (sscanf(l, "%llu upgraded, %llu newly installed", &up, &m) == 2) {
		if (m > b->total)
			b->total = m;
	} else if (b->downloading && starts(l, "Get:")) {
		b->fetched++;
	} else if (starts(l, "Unpacking ")) {
		b->unpacked++;
	} else {
		return;
	}
	report(b, NULL, false);
}

void rb_buildlog_feed(struct rb_buildlog *b, const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = data[i];
		if (c == '\n' || c == '\r') {
			b->line[b->len] = '\0';
			if (b->len)
				one_line(b, b->line);
			b->len = 0;
		} else if (b->len < RB_BUILDLOG_LINE - 1) {
			b->line[b->len++] = c;
		}
	}
}

void rb_buildlog_end(struct rb_buildlog *b, bool failed)
{
	if (b->len) {
		b->line[b->len] = '\0';
		one_line(b, b->line);
		b->len = 0;
	}
	if (failed) {
		unsigned first = (b->next_kept + RB_BUILDLOG_KEEP - b->n_kept) % RB_BUILDLOG_KEEP;
		for (unsigned i = 0; i < b->n_kept; i++)
			report(b, b->kept[(first + i) % RB_BUILDLOG_KEEP], false);
	}
	report(b, NULL, true);
}

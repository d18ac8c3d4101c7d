/* Progress lines on stderr (progress.h): the only place runbox draws over its own output, and
 * only on a terminal; a file or pipe gets plain lines, never a control byte. */
#include "cli/progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/term.h"
#include "common/ttysafe.h"

#define REDRAW_NS  100000000LL /* at most 10 redraws a second */
#define FIRST_NS   200000000LL /* quick work draws nothing: no bar flickers by */
#define BAR_WIDTH  24
#define LINE_MAX_W 200

static long long since_ns(const struct timespec *a, const struct timespec *b)
{
	return (long long)(b->tv_sec - a->tv_sec) * 1000000000LL + (b->tv_nsec - a->tv_nsec);
}

/* 1536 -> "1.5 KiB"; bytes below 1 KiB as they are. */
static void human(uint64_t n, char *out, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	unsigned u = 0;
	while (v >= 1024 && u < 4)
		v /= 1024, u++;
	if (u == 0)
		snprintf(out, len, "%" PRIu64 " B", n);
	else
		snprintf(out, len, "%.1f %s", v, units[u]);
}

/* "42%  12.3 MiB / 45.0 MiB  3.1 MiB/s  120 members" (no total: "read 12.3 MiB ..."); summary:
 * "read 45.0 MiB, 120 members, 2.1 s". */
static void describe(const struct rb_cli_progress *p, const struct timespec *now, bool summary, char *out, size_t len)
{
	const struct rb_progress_report *r = &p->last;
	char done[32], total[32], rate[40] = "", items[48] = "";
	double secs = (double)since_ns(&p->start, now) / 1e9;
	if (r->is_bytes) {
		human(r->done, done, sizeof done);
		human(r->total, total, sizeof total);
		if (secs > 0.2 && !summary) {
			char h[32];
			human((uint64_t)((double)r->done / secs), h, sizeof h);
			snprintf(rate, sizeof rate, "  %s/s", h);
		}
	} else {
		snprintf(done, sizeof done, "%" PRIu64, r->done);
		snprintf(total, sizeof total, "%" PRIu64, r->total);
	}
	if (r->items)
		snprintf(items, sizeof items, "%s%" PRIu64 " %s", summary ? ", " : "  ", r->items,
		         r->items_what ? r->items_what : "items");
	if (summary)
		snprintf(out, len, "%s %s%s, %.1f s", r->what, done, items, secs);
	else if (r->total)
		snprintf(out, len, "%3u%%  %s%s%s / %s%s%s",
		         (unsigned)(r->done >= r->total ? 100 : r->done * 100 / r->total), r->is_bytes ? "" : r->what,
		         r->is_bytes ? "" : " ", done, total, rate, items);
	else
		snprintf(out, len, "%s %s%s%s", r->what, done, rate, items);
}

static void draw_tty(struct rb_cli_progress *p, const struct timespec *now)
{
	char text[160], bar[BAR_WIDTH + 3], line[LINE_MAX_W + 16];
	describe(p, now, false, text, sizeof text);
	const struct rb_progress_report *r = &p->last;
	if (r->total) {
		unsigned fill = (unsigned)((r->done >= r->total ? r->total : r->done) * BAR_WIDTH / r->total);
		bar[0] = '[';
		for (unsigned i = 0; i < BAR_WIDTH; i++)
			bar[1 + i] = i < fill ? '#' : '-';
		bar[BAR_WIDTH + 1] = ']';
		bar[BAR_WIDTH + 2] = '\0';
	} else {
		snprintf(bar, sizeof bar, "%s", "...");
	}
	struct rb_tty_size ts;
	unsigned cols = rb_term_size(p->fd, &ts) && ts.cols ? ts.cols : 80;
	if (cols > LINE_MAX_W)
		cols = LINE_MAX_W;
	int n = snprintf(line, sizeof line, "%s %s %s", p->label, bar, text);
	if (n < 0)
		return;
	/* One column short of the width: a line that fills it would wrap, and \r would then redraw
	 * only its second half. */
	size_t keep = (size_t)n < cols - 1 ? (size_t)n : cols - 1;
	dprintf(p->fd, "\r\033[K%.*s", (int)keep, line);
	p->drawn = true;
}

static void on_report(void *arg, const struct rb_progress_report *r)
{
	struct rb_cli_progress *p = arg;
	if (p->off)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (r->line) {
		/* The work's own line, above the bar, its control bytes shown, never obeyed. */
		char safe[RB_TTYSAFE_ROOM(LINE_MAX_W) + 8];
		rb_ttysafe_line(r->line, safe, sizeof safe);
		dprintf(p->fd, "%s%s\n", p->tty && p->drawn ? "\r\033[K" : "", safe);
		if (p->tty && p->drawn && p->have)
			draw_tty(p, &now);
		return;
	}
	if (!p->have && p->from_first)
		p->start = now;
	p->last = *r;
	p->have = true;
	if (p->tty) {
		if (!p->drawn && (r->final || since_ns(&p->start, &now) < FIRST_NS))
			return;
		if (!r->final && p->drawn && since_ns(&p->last_draw, &now) < REDRAW_NS)
			return;
		p->last_draw = now;
		draw_tty(p, &now);
		return;
	}
	/* Plain: nothing for short work; then one line every few seconds. */
	const struct timespec *from = p->drawn ? &p->last_draw : &p->start;
	if (since_ns(from, &now) < RB_CLI_PROGRESS_PLAIN_SEC * 1000000000LL)
		return;
	char text[160];
	describe(p, &now, false, text, sizeof text);
	dprintf(p->fd, "runbox: %s: %s\n", p->label, text);
	p->last_draw = now;
	p->drawn = true;
}

void rb_cli_progress_init(struct rb_cli_progress *p, int fd, const char *label, bool off)
{
	memset(p, 0, sizeof *p);
	p->fd = fd;
	p->label = label;
	p->off = off;
	p->tty = isatty(fd) == 1;
	clock_gettime(CLOCK_MONOTONIC, &p->start);
}

struct rb_progress rb_cli_progress_sink(struct rb_cli_progress *p)
{
	return (struct rb_progress){.fn = on_report, .arg = p};
}

void rb_cli_progress_end(struct rb_cli_progress *p, bool ok)
{
	if (p->off || !p->drawn)
		return;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	char text[160] = "";
	if (p->have)
		describe(p, &now, ok, text, sizeof text);
	if (p->tty)
		dprintf(p->fd, "\r\033[K");
	if (ok)
		dprintf(p->fd, "runbox: %s: done, %s\n", p->label, text);
	else if (!p->tty)
		dprintf(p->fd, "runbox: %s: stopped at %s\n", p->label, text);
	p->drawn = false;
}

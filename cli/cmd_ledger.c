/* `runbox ledger show|query|verify|export`: readable listings and JSON over ledger/ledger.h.
 * Exit 0 on success, 1 when verify finds the chain broken, 125 on bad input or failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/commands.h"
#include "common/cleanup.h"
#include "common/jsonout.h"
#include "common/log.h"
#include "common/paths.h"
#include "ledger/ledger.h"

static const char usage[] =
    "usage: runbox ledger [--state-dir DIR] COMMAND\n"
    "\n"
    "  runs [FILTERS] [--detail] [--json]\n"
    "                                one line per run: time, tenant, agent, run, result, steps,\n"
    "                                artifacts; --detail adds each step's exact command (size,\n"
    "                                sha256) and the run's artifacts with full digests\n"
    "  show RUN_ID [--json]          the run's events: seq, time, type, a one-line summary\n"
    "  query [FILTERS] [--json] [--limit N]\n"
    "                                events matching every filter, as a table (or a JSON array)\n"
    "      --tenant T  --agent A  --run RUN_ID  --type TYPE\n"
    "                                   --agent and --run are prefixes (a name cut with … in a\n"
    "                                   table, pasted as shown, still finds it)\n"
    "      --last N  --reverse          the newest N only; newest first\n"
    "      --wide                       full names and digests, nothing cut to the terminal's width\n"
    "      --since TIME  --until TIME   RFC 3339 or a prefix (2026-11-24T18:03, 2026-11-24); UTC\n"
    "                                   unless an offset is given; both ends inclusive of the span\n"
    "                                   they name (--until 2026-11-24T18:03 covers that minute)\n"
    "      --grep TEXT                  case-sensitive substring of the event's data\n"
    "      --label NAME=VALUE           events of runs whose run_start has that label\n"
    "  verify [--json]               check the hash chain and the head file: exit 0 intact, 1 broken\n"
    "  export --jsonl                every event, one JSON object per line\n"
    "\n"
    "--state-dir DIR (or RUNBOX_STATE_DIR) selects the state directory holding ledger.db.\n"
    "Times are shown in UTC. See docs/ledger.md.\n";

enum {
	O_STATE = 1 << 0,
	O_TENANT = 1 << 1,
	O_AGENT = 1 << 2,
	O_RUN = 1 << 3,
	O_TYPE = 1 << 4,
	O_SINCE = 1 << 5,
	O_UNTIL = 1 << 6,
	O_GREP = 1 << 7,
	O_LIMIT = 1 << 8,
	O_JSON = 1 << 9,
	O_JSONL = 1 << 10,
	O_LAST = 1 << 11,
	O_REVERSE = 1 << 12,
	O_WIDE = 1 << 13,
	O_DETAIL = 1 << 14,
	O_LABEL = 1 << 15,
};

static const struct opt {
	const char *name;
	int bit;
	bool value;
} opts[] = {
    {"state-dir", O_STATE, true},  {"tenant", O_TENANT, true}, {"agent", O_AGENT, true},    {"run", O_RUN, true},
    {"type", O_TYPE, true},        {"since", O_SINCE, true},   {"until", O_UNTIL, true},    {"grep", O_GREP, true},
    {"limit", O_LIMIT, true},      {"json", O_JSON, false},    {"jsonl", O_JSONL, false},   {"last", O_LAST, true},
    {"reverse", O_REVERSE, false}, {"wide", O_WIDE, false},    {"detail", O_DETAIL, false}, {"label", O_LABEL, true},
};

static const struct sub {
	const char *name;
	int args;    /* positional arguments after the subcommand */
	int allowed; /* options it takes */
} subs[] = {
    {"show", 1, O_STATE | O_JSON | O_WIDE},
    {"query", 0,
     O_STATE | O_TENANT | O_AGENT | O_RUN | O_TYPE | O_SINCE | O_UNTIL | O_GREP | O_LIMIT | O_JSON | O_LAST |
         O_REVERSE | O_WIDE | O_LABEL},
    {"runs", 0,
     O_STATE | O_TENANT | O_AGENT | O_RUN | O_SINCE | O_UNTIL | O_JSON | O_LAST | O_REVERSE | O_WIDE | O_DETAIL},
    {"verify", 0, O_STATE | O_JSON},
    {"export", 0, O_STATE | O_JSONL},
};

struct args {
	const struct sub *sub;
	const char *pos[4];
	int npos;
	int seen;
	const char *val[16]; /* by bit index */
};

static int bit_index(int bit)
{
	return __builtin_ctz((unsigned)bit);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	char msg[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	rb_err("ledger: %s (see `runbox ledger --help`)", msg);
	return 125;
}

/* Returns 0, or the exit code of a usage error (already reported). */
static int parse(int argc, char **argv, struct args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i];
		if (strncmp(arg, "--", 2) != 0 || !arg[2]) {
			if (!a->sub) {
				for (size_t k = 0; k < RB_ARRAY_SIZE(subs); k++)
					if (!strcmp(arg, subs[k].name))
						a->sub = &subs[k];
				if (!a->sub)
					return usage_error("unknown command `%s`", arg);
			} else if (a->npos < (int)RB_ARRAY_SIZE(a->pos)) {
				a->pos[a->npos++] = arg;
			} else {
				return usage_error("unexpected argument `%s`", arg);
			}
			continue;
		}
		const char *name = arg + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct opt *o = NULL;
		for (size_t k = 0; k < RB_ARRAY_SIZE(opts); k++)
			if (strlen(opts[k].name) == len && !strncmp(opts[k].name, name, len))
				o = &opts[k];
		if (!o)
			return usage_error("unknown option `%s`", arg);
		const char *v = NULL;
		if (o->value) {
			if (eq)
				v = eq + 1;
			else if (i + 1 < argc)
				v = argv[++i];
			else
				return usage_error("option `%s` needs a value", arg);
		} else if (eq) {
			return usage_error("option `--%s` takes no value", o->name);
		}
		a->seen |= o->bit;
		a->val[bit_index(o->bit)] = v;
	}
	if (!a->sub)
		return usage_error("%s", "missing command: runs, show, query, verify or export");
	for (size_t k = 0; k < RB_ARRAY_SIZE(opts); k++)
		if ((a->seen & opts[k].bit) && !(a->sub->allowed & opts[k].bit)) {
			return usage_error("option `--%s` does not apply to `%s`", opts[k].name, a->sub->name);
		}
	if (a->npos != a->sub->args)
		return usage_error(a->sub->args ? "`%s` needs one argument" : "`%s` takes no arguments", a->sub->name);
	if (!strcmp(a->sub->name, "export") && !(a->seen & O_JSONL))
		return usage_error("%s", "export needs --jsonl (the one format it writes)");
	return 0;
}

/* --- readable output: text from the ledger can come from the sandbox, so control characters
 * (terminal escapes) are shown escaped, never written raw. --- */

/* Writes s escaped and cut to max code points (0: no cut), padded with spaces to pad; f NULL
 * writes nothing. Returns the width written (before the padding). */
static int put_clean(FILE *f, const char *s, int max, int pad)
{
	int width = 0;
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		char esc[8] = "";
		int len = 1, w = 1;
		if (*p == '\n')
			strcpy(esc, "\\n"), w = 2;
		else if (*p == '\t')
			strcpy(esc, "\\t"), w = 2;
		else if (*p < 0x20 || *p == 0x7f)
			snprintf(esc, sizeof esc, "\\x%02x", *p), w = 4;
		else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) /* C1 controls, U+0080..U+009F */
			snprintf(esc, sizeof esc, "\\u%04x", p[1]), len = 2, w = 6;
		else if (*p >= 0x80)
			while ((p[len] & 0xc0) == 0x80)
				len++;
		if (max && width + w > max - 1 && (width + w > max || p[len])) {
			if (f)
				fputs("…", f);
			width++;
			break;
		}
		if (f && esc[0])
			fputs(esc, f);
		else if (f)
			fwrite(p, 1, (size_t)len, f);
		width += w;
		p += len;
	}
	int wrote = width;
	for (; f && width < pad; width++)
		fputc(' ', f);
	return wrote;
}

static const char *str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

static bool num(json_t *o, const char *key, double *v)
{
	json_t *j = json_object_get(o, key);
	if (!json_is_number(j))
		return false;
	*v = json_number_value(j);
	return true;
}

static void bytes(char *out, size_t n, double b)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	while (b >= 1024 && u < 4)
		b /= 1024, u++;
	snprintf(out, n, u ? "%.1f %s" : "%.0f %s", b, units[u]);
}

/* "sha256:0123456789ab" from a digest or bare hex; the whole of it when wide (--wide). */
static const char *short_digest(const char *d, char out[80], bool wide)
{
	const char *hex = strncmp(d, "sha256:", 7) ? d : d + 7;
	snprintf(out, 80, "%s%.*s", hex == d ? "" : "sha256:", wide ? 64 : 12, hex);
	return out;
}

/* Appends to a fixed buffer; the listing cuts long lines anyway. */
struct sb {
	char buf[2048];
	size_t n;
};
__attribute__((format(printf, 2, 3))) static void add(struct sb *b, const char *fmt, ...)
{
	if (b->n >= sizeof b->buf - 1)
		return;
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(b->buf + b->n, sizeof b->buf - b->n, fmt, ap);
	va_end(ap);
	if (r > 0)
		b->n = b->n + (size_t)r < sizeof b->buf ? b->n + (size_t)r : sizeof b->buf - 1;
}

/* s in double quotes, with `"` and `\\` escaped: text from inside the sandbox (a file's name)
 * cannot fake where it ends, or the fields printed after it. Control characters are escaped
 * when the line is printed (put_clean). */
static void add_quoted(struct sb *b, const char *s)
{
	add(b, "\"");
	for (; *s && b->n < sizeof b->buf - 3; s++) {
		if (*s == '"' || *s == '\\')
			b->buf[b->n++] = '\\';
		b->buf[b->n++] = *s;
	}
	b->buf[b->n] = '\0';
	add(b, "\"");
}

static void add_step(struct sb *b, json_t *d)
{
	double v;
	if (num(d, "step", &v))
		add(b, "step %.0f ", v);
}

static void summary(json_t *ev, struct sb *b, bool wide)
{
	const char *type = str(ev, "type");
	json_t *d = json_object_get(ev, "data");
	char x[80], y[80];
	double v;
	if (!json_is_object(d)) {
		add(b, "(data is not a JSON object)");
		return;
	}
	if (!strcmp(type, "run_start")) {
		add(b, "agent %s", str(d, "agent"));
		if (*str(d, "agent_version"))
			add(b, " version %s", str(d, "agent_version"));
		add(b, ", image %s %s, policy %s %s", str(d, "image"), short_digest(str(d, "image_digest"), x, wide),
		    str(d, "policy_name"), short_digest(str(d, "policy_hash"), y, wide));
		if (*str(d, "manifest_hash"))
			add(b, ", manifest %s", short_digest(str(d, "manifest_hash"), x, wide));
	} else if (!strcmp(type, "step_start")) {
		add_step(b, d);
		add(b, "%s", str(d, "kind"));
		if (num(d, "size", &v))
			bytes(x, sizeof x, v), add(b, ", %s", x);
		if (*str(d, "sha256"))
			add(b, ", %s", short_digest(str(d, "sha256"), y, wide));
		add(b, ": %s", str(d, "text"));
	} else if (!strcmp(type, "step_end")) {
		add_step(b, d);
		add(b, "%s", str(d, "status"));
		if (num(d, "exit_code", &v))
			add(b, ", exit %.0f", v);
		if (num(d, "signal", &v) && v > 0)
			add(b, " signal %.0f", v);
		if (json_is_true(json_object_get(d, "timed_out")) && strcmp(str(d, "status"), "timed_out") != 0)
			add(b, ", TIMED OUT");
		if (json_is_true(json_object_get(d, "oom_killed")))
			add(b, ", OOM KILLED");
		if (json_is_true(json_object_get(d, "seccomp_killed")))
			add(b, ", SECCOMP KILLED");
		if (*str(d, "detail"))
			add(b, " (%s)", str(d, "detail"));
		if (num(d, "wall_ms", &v))
			add(b, ", wall %.0f ms", v);
		if (num(d, "cpu_ms", &v))
			add(b, ", cpu %.0f ms", v);
		if (num(d, "memory_peak_bytes", &v))
			bytes(x, sizeof x, v), add(b, ", memory peak %s", x);
		if (num(d, "pids_peak", &v))
			add(b, ", pids peak %.0f", v);
	} else if (!strcmp(type, "artifact")) {
		/* Size and digest first, the name last and quoted: a name (chosen inside the
		 * sandbox) that looks like ", 12.1 KiB, sha256:…" followed by spaces past the cut
		 * must not hide the real ones. */
		add_step(b, d);
		if (num(d, "size", &v))
			bytes(x, sizeof x, v), add(b, "%s, ", x);
		if (*str(d, "digest"))
			add(b, "%s, ", short_digest(str(d, "digest"), y, wide));
		json_t *r = json_object_get(d, "redactions"), *n;
		double total = 0;
		const char *k;
		if (json_is_number(r))
			total = json_number_value(r);
		else if (json_is_object(r))
			json_object_foreach(r, k, n) total += json_number_value(n);
		if (total > 0)
			add(b, "%.0f redaction%s, ", total, total == 1 ? "" : "s");
		add_quoted(b, str(d, "path"));
	} else if (!strcmp(type, "egress_blocked")) {
		add_step(b, d);
		add(b, "%.0f packets blocked", num(d, "blocked_packets", &v) ? v : 0);
		json_t *p = json_object_get(d, "by_protocol"), *n;
		const char *k;
		if (json_is_object(p) && json_object_size(p)) {
			const char *sep = " (";
			json_object_foreach(p, k, n)
			{
				add(b, "%s%s %.0f", sep, k, json_number_value(n));
				sep = ", ";
			}
			add(b, ")");
		}
	} else if (!strcmp(type, "harvest_skipped")) {
		add_step(b, d);
		add(b, "%.0f files not harvested", num(d, "skipped_total", &v) ? v : 0);
	} else if (!strcmp(type, "cleanup")) {
		bool ok = json_is_true(json_object_get(d, "ok"));
		add(b, "%s %s", str(d, "what"), ok ? "ok" : "FAILED");
		if (!ok && *str(d, "error"))
			add(b, ": %s", str(d, "error"));
	} else if (!strcmp(type, "run_end")) {
		add(b, "result %s", str(d, "result"));
		if (num(d, "steps", &v))
			add(b, ", %.0f step%s", v, v == 1 ? "" : "s");
		if (num(d, "cpu_seconds", &v))
			add(b, ", cpu %.2f s", v);
		if (num(d, "memory_gib_seconds", &v))
			add(b, ", memory %.4f GiB·s", v);
		if (num(d, "stored_bytes", &v))
			bytes(x, sizeof x, v), add(b, ", stored %s", x);
	} else {
		_cleanup_free_ char *t = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
		add(b, "%s", t ? t : "");
	}
}

static int print_json(json_t *v, size_t flags)
{
	return rb_json_print(stdout, v, flags);
}

/* The terminal's width: COLUMNS, else the terminal's own (TIOCGWINSZ); 0 when stdout is no
 * terminal and COLUMNS is unset (a pipe or a file gets whole lines). */
static int term_width(void)
{
	const char *c = getenv("COLUMNS");
	if (c && *c) {
		char *end;
		long v = strtol(c, &end, 10);
		if (!*end && v >= 20 && v <= 100000)
			return (int)v;
	}
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	return 0;
}

/* A table that fits a width: each column as wide as its widest cell, then, while the line is
 * wider than the terminal, the widest elastic column loses a character (cut with "…", which a
 * prefix filter takes as pasted). The last column is not padded. */
#define TABLE_COLS 8
struct table {
	int n;
	const char *head[TABLE_COLS];
	int min[TABLE_COLS]; /* 0: fixed, never cut */
	int w[TABLE_COLS];
	json_t *rows; /* arrays of strings */
};

static void table_row(struct table *t, const char *const *cells)
{
	json_t *row = json_array();
	for (int c = 0; c < t->n; c++)
		json_array_append_new(row, json_string(cells[c] ? cells[c] : ""));
	json_array_append_new(t->rows, row);
}

static void table_print(struct table *t, int width, bool reverse)
{
	for (int c = 0; c < t->n; c++)
		t->w[c] = (int)strlen(t->head[c]);
	size_t i;
	json_t *row;
	json_array_foreach(t->rows, i, row) for (int c = 0; c < t->n; c++)
	{
		int w = put_clean(NULL, json_string_value(json_array_get(row, (size_t)c)), 0, 0);
		if (w > t->w[c])
			t->w[c] = w;
	}
	for (;;) {
		int total = 0, widest = -1;
		for (int c = 0; c < t->n; c++) {
			total += t->w[c] + (c ? 2 : 0);
			if (t->min[c] && t->w[c] > t->min[c] && (widest < 0 || t->w[c] > t->w[widest]))
				widest = c;
		}
		if (!width || total <= width || widest < 0)
			break;
		t->w[widest]--;
	}
	for (int c = 0; c < t->n; c++) {
		if (c)
			fputs("  ", stdout);
		put_clean(stdout, t->head[c], t->w[c], c + 1 < t->n ? t->w[c] : 0);
	}
	fputc('\n', stdout);
	size_t n = json_array_size(t->rows);
	for (i = 0; i < n; i++) {
		row = json_array_get(t->rows, reverse ? n - 1 - i : i);
		for (int c = 0; c < t->n; c++) {
			if (c)
				fputs("  ", stdout);
			put_clean(stdout, json_string_value(json_array_get(row, (size_t)c)), t->w[c],
			          c + 1 < t->n ? t->w[c] : 0);
		}
		fputc('\n', stdout);
	}
}

static void print_show(const char *run_id, json_t *events, bool wide)
{
	json_t *first = json_array_get(events, 0);
	fputs("run ", stdout);
	put_clean(stdout, run_id, 0, 0);
	fputs("  tenant ", stdout);
	put_clean(stdout, str(first, "tenant"), 0, 0);
	fputs("  agent ", stdout);
	put_clean(stdout, str(first, "agent"), 0, 0);
	printf("\n%-6s  %-24s  %-14s  %s\n", "SEQ", "TIME (UTC)", "TYPE", "SUMMARY");
	size_t i;
	json_t *ev;
	json_array_foreach(events, i, ev)
	{
		struct sb b = {.n = 0};
		summary(ev, &b, wide);
		printf("%-6" JSON_INTEGER_FORMAT "  ", json_integer_value(json_object_get(ev, "seq")));
		put_clean(stdout, str(ev, "ts"), 24, 24);
		fputs("  ", stdout);
		put_clean(stdout, str(ev, "type"), 14, 14);
		fputs("  ", stdout);
		put_clean(stdout, b.buf, wide ? 0 : 200, 0);
		fputc('\n', stdout);
	}
}

/* "2026-11-24T18:03:05Z" from a ledger time: to the second, still a valid --since/--until. */
static const char *ts_second(const char *ts, char out[32])
{
	const char *dot = strchr(ts, '.');
	if (!dot || strlen(ts) > 31)
		return ts;
	snprintf(out, 32, "%.*sZ", (int)(dot - ts), ts);
	return out;
}

static void print_table(json_t *events, bool wide, bool reverse)
{
	struct table t = {.n = 7,
	                  .head = {"SEQ", "TIME (UTC)", "TENANT", "AGENT", "RUN", "TYPE", "SUMMARY"},
	                  .min = {0, 0, 6, 8, 13, 0, 24},
	                  .rows = json_array()};
	size_t i;
	json_t *ev;
	json_array_foreach(events, i, ev)
	{
		struct sb b = {.n = 0};
		summary(ev, &b, wide);
		char seq[32];
		snprintf(seq, sizeof seq, "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(ev, "seq")));
		const char *cells[] = {
		    seq, str(ev, "ts"), str(ev, "tenant"), str(ev, "agent"), str(ev, "run_id"), str(ev, "type"), b.buf};
		table_row(&t, cells);
	}
	table_print(&t, wide ? 0 : term_width(), reverse);
	json_decref(t.rows);
	printf("(%zu event%s)\n", json_array_size(events), json_array_size(events) == 1 ? "" : "s");
}

static void human_bytes(char *out, size_t n, json_int_t b)
{
	bytes(out, n, (double)b);
}

/* --detail: what each run ran (the exact text, its size and sha256) and what it produced (its
 * artifacts, full digests): the compliance question in one command. */
static int print_detail(struct rb_ledger *l, json_t *run, struct rb_error *err)
{
	const char *id = str(run, "run_id");
	_cleanup_json_ json_t *steps = NULL, *arts = NULL;
	struct rb_ledger_filter f = {.run_id = id, .type = "step_start"};
	if (rb_ledger_query(l, &f, &steps, err) < 0 ||
	    rb_ledger_run_artifacts(l, id, str(run, "tenant"), &arts, err) < 0)
		return -1;
	size_t i;
	json_t *ev;
	json_array_foreach(steps, i, ev)
	{
		json_t *d = json_object_get(ev, "data");
		char sz[48] = "", h[32];
		json_int_t size = json_integer_value(json_object_get(d, "size"));
		if (size >= 1024) {
			human_bytes(h, sizeof h, size);
			snprintf(sz, sizeof sz, " (%s)", h);
		}
		printf("    step %" JSON_INTEGER_FORMAT " %s", json_integer_value(json_object_get(d, "step")),
		       str(d, "kind"));
		if (*str(d, "name")) {
			fputs(" ", stdout);
			put_clean(stdout, str(d, "name"), 0, 0);
		}
		printf(" at %s, %" JSON_INTEGER_FORMAT " bytes%s, sha256:%s\n", str(ev, "ts"), size, sz,
		       str(d, "sha256"));
		/* The exact text, each line indented; control characters escaped, never obeyed. */
		const char *text = str(d, "text");
		while (*text) {
			const char *nl = strchr(text, '\n');
			size_t len = nl ? (size_t)(nl - text) : strlen(text);
			_cleanup_free_ char *line = strndup(text, len);
			fputs("      | ", stdout);
			put_clean(stdout, line ? line : "", 0, 0);
			fputc('\n', stdout);
			text += len + (nl ? 1 : 0);
		}
	}
	json_array_foreach(arts, i, ev)
	{
		printf("    artifact %s  %" JSON_INTEGER_FORMAT " bytes  ", str(ev, "digest"),
		       json_integer_value(json_object_get(ev, "size")));
		put_clean(stdout, str(ev, "path"), 0, 0);
		fputc('\n', stdout);
	}
	return 0;
}

static int print_runs(struct rb_ledger *l, json_t *runs, bool wide, bool reverse, bool detail, struct rb_error *err)
{
	struct table t = {.n = 7,
	                  .head = {"TIME (UTC)", "TENANT", "AGENT", "RUN", "RESULT", "STEPS", "ARTIFACTS"},
	                  .min = {0, 6, 8, 13, 0, 0, 0},
	                  .rows = json_array()};
	size_t i, n = json_array_size(runs);
	json_t *r;
	json_array_foreach(runs, i, r)
	{
		char steps[32], arts[32];
		snprintf(steps, sizeof steps, "%" JSON_INTEGER_FORMAT, json_integer_value(json_object_get(r, "steps")));
		snprintf(arts, sizeof arts, "%" JSON_INTEGER_FORMAT,
		         json_integer_value(json_object_get(r, "artifacts")));
		const char *result = json_is_string(json_object_get(r, "result")) ? str(r, "result") : "(no end)";
		char ts[32];
		const char *cells[] = {wide ? str(r, "ts") : ts_second(str(r, "ts"), ts),
		                       str(r, "tenant"),
		                       str(r, "agent"),
		                       str(r, "run_id"),
		                       result,
		                       steps,
		                       arts};
		table_row(&t, cells);
	}
	if (!detail) {
		table_print(&t, wide ? 0 : term_width(), reverse);
	} else {
		/* A run's line, then what it ran and produced, uncut: this is the record itself. */
		for (i = 0; i < n; i++) {
			r = json_array_get(runs, reverse ? n - 1 - i : i);
			fputs("run ", stdout);
			put_clean(stdout, str(r, "run_id"), 0, 0);
			fputs("  tenant ", stdout);
			put_clean(stdout, str(r, "tenant"), 0, 0);
			fputs("  agent ", stdout);
			put_clean(stdout, str(r, "agent"), 0, 0);
			printf("  %s to %s  %s\n", str(r, "ts"), str(r, "end_ts"),
			       json_is_string(json_object_get(r, "result")) ? str(r, "result") : "(no end)");
			if (print_detail(l, r, err) < 0) {
				json_decref(t.rows);
				return -1;
			}
		}
	}
	json_decref(t.rows);
	printf("(%zu run%s)\n", n, n == 1 ? "" : "s");
	return 0;
}

/* The event types runbox writes (docs/ledger.md), and any other the ledger holds. */
static const char *const known_types[] = {"run_start",       "step_start",      "step_end",       "artifact",
                                          "storage_stopped", "harvest_skipped", "egress_blocked", "gateway_sent",
                                          "gateway_call",    "cleanup",         "run_end"};

static int check_type(struct rb_ledger *l, const char *type, struct rb_error *err)
{
	for (size_t k = 0; k < RB_ARRAY_SIZE(known_types); k++)
		if (!strcmp(type, known_types[k]))
			return 0;
	_cleanup_json_ json_t *have = NULL;
	if (rb_ledger_types(l, &have, err) < 0) {
		rb_err("ledger: %s", err->msg);
		return 125;
	}
	char list[1024];
	size_t n = 0;
	for (size_t k = 0; k < RB_ARRAY_SIZE(known_types); k++)
		n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", known_types[k]);
	size_t i;
	json_t *v;
	json_array_foreach(have, i, v)
	{
		const char *t = json_string_value(v);
		if (!strcmp(t, type))
			return 0;
		bool listed = false;
		for (size_t k = 0; k < RB_ARRAY_SIZE(known_types); k++)
			listed |= !strcmp(t, known_types[k]);
		if (!listed && n < sizeof list)
			n += (size_t)snprintf(list + n, sizeof list - n, ", %s", t);
	}
	rb_err("ledger: --type `%s`: no such event type (types: %s)", type, list);
	return 125;
}

/* A name cut in a table ends in "…" (or "..." typed): the prefix before it. */
static const char *uncut(const char *v, char *buf, size_t n)
{
	if (!v)
		return NULL;
	size_t len = strlen(v);
	if (len >= 3 && (!strcmp(v + len - 3, "…") || !strcmp(v + len - 3, "...")))
		len -= 3; /* "…" is 3 bytes of UTF-8 too */
	snprintf(buf, n, "%.*s", (int)len, v);
	return buf;
}

/* A write to stdout failed: a reader that went away (`ledger query | head -1`, EPIPE, SIGPIPE
 * being caught) has what it wanted, which is no failure; anything else is one line. */
static int write_failed(int errnum)
{
	if (errnum == EPIPE)
		return 0;
	rb_err("ledger: write to stdout: %s", strerror(errnum));
	return 125;
}

static void ledger_closep(struct rb_ledger **l)
{
	rb_ledger_close(*l);
}

int rb_cmd_ledger(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") || (i == 1 && !strcmp(argv[i], "help"))) {
			fputs(usage, stdout);
			return 0;
		}
	struct args a = {0};
	int rc = parse(argc, argv, &a);
	if (rc || !a.sub)
		return rc ? rc : 125;
	const char *sub = a.sub->name;
	char agent[256], run[256];
	bool wide = a.seen & O_WIDE, reverse = a.seen & O_REVERSE;
	struct rb_ledger_filter f = {
	    .tenant = a.val[bit_index(O_TENANT)],
	    .agent = uncut(a.val[bit_index(O_AGENT)], agent, sizeof agent),
	    .run_id = uncut(a.val[bit_index(O_RUN)], run, sizeof run),
	    .prefixes = true,
	    .type = a.val[bit_index(O_TYPE)],
	    .since = a.val[bit_index(O_SINCE)],
	    .until = a.val[bit_index(O_UNTIL)],
	    .grep = a.val[bit_index(O_GREP)],
	};
	/* --label K=V: the events of runs labelled so (serve's labels, --label of runbox run). */
	char label[320];
	if (a.seen & O_LABEL) {
		const char *lv = a.val[bit_index(O_LABEL)];
		const char *eq = strchr(lv, '=');
		if (!eq || eq == lv || (size_t)snprintf(label, sizeof label, "%s", lv) >= sizeof label)
			return usage_error("--label `%s`: expected NAME=VALUE", lv);
		label[eq - lv] = '\0';
		f.label_key = label;
		f.label_value = label + (eq - lv) + 1;
	}
	if (a.seen & O_LIMIT) {
		const char *s = a.val[bit_index(O_LIMIT)];
		char *end;
		errno = 0;
		unsigned long n = strtoul(s, &end, 10);
		if (errno || end == s || *end || n == 0 || n > 1000000000 || *s == '-')
			return usage_error("--limit `%s`: expected a positive integer", s);
		f.limit = (unsigned)n;
	}
	if (a.seen & O_LAST) {
		const char *s = a.val[bit_index(O_LAST)];
		char *end;
		errno = 0;
		unsigned long n = strtoul(s, &end, 10);
		if (errno || end == s || *end || n == 0 || n > 1000000000 || *s == '-')
			return usage_error("--last `%s`: expected a positive integer", s);
		f.last = (unsigned)n;
	}
	/* Bad times are usage errors, reported before anything is opened. */
	struct rb_error err = {0};
	char t[32];
	if (f.since && rb_ledger_parse_time(f.since, 0, t, &err) < 0) {
		rb_err("ledger: --since: %s", err.msg);
		return 125;
	}
	if (f.until && rb_ledger_parse_time(f.until, 1, t, &err) < 0) {
		rb_err("ledger: --until: %s", err.msg);
		return 125;
	}

	struct rb_paths paths;
	if (rb_paths_init(&paths, rb_cli_host(), a.val[bit_index(O_STATE)], &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}
	/* Reading never creates a state directory: a mistyped --state-dir must not look like an
	 * empty, intact ledger. An existing state directory without a ledger yet gets an empty one
	 * for show, query and export. */
	struct stat st;
	if (stat(paths.state_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rb_err("ledger: no state directory `%s` (no runs recorded there)", paths.state_dir);
		return 125;
	}
	/* Nor does verify make the ledger it is asked about: "intact" would then say nothing. */
	char db[sizeof paths.state_dir + 16];
	snprintf(db, sizeof db, "%s/ledger.db", paths.state_dir);
	if (!strcmp(sub, "verify") && lstat(db, &st) < 0 && errno == ENOENT) {
		rb_err("ledger: no ledger in `%s` (no runs recorded there); nothing to verify", paths.state_dir);
		return 125;
	}
	__attribute__((cleanup(ledger_closep))) struct rb_ledger *l = NULL;
	if (rb_ledger_open(paths.state_dir, &l, &err) < 0) {
		rb_err("%s", err.msg);
		return 125;
	}

	if (!strcmp(sub, "verify")) {
		_cleanup_json_ json_t *rep = NULL;
		int r = rb_ledger_verify(l, &rep, &err);
		if (r < 0) {
			rb_err("%s", err.msg);
			return 125;
		}
		if (a.seen & O_JSON) {
			if (print_json(rep, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
				return write_failed(errno) ? 125 : r;
		} else if (r == 0) {
			printf("ledger intact: %" JSON_INTEGER_FORMAT " events, head ",
			       json_integer_value(json_object_get(rep, "events")));
			put_clean(stdout, str(json_object_get(rep, "head"), "hash"), 0, 0);
			fputc('\n', stdout);
		} else {
			/* The reason can quote what a damaged head file holds: shown, not obeyed. */
			json_t *bad = json_object_get(rep, "first_bad_seq");
			if (bad)
				printf("ledger BROKEN at seq %" JSON_INTEGER_FORMAT ": ", json_integer_value(bad));
			else
				fputs("ledger BROKEN: ", stdout);
			put_clean(stdout, str(rep, "reason"), 0, 0);
			fputc('\n', stdout);
		}
		return r;
	}
	if (!strcmp(sub, "export")) {
		if (rb_ledger_export_jsonl(l, stdout, &err) < 0) {
			if (err.errnum == EPIPE)
				return 0;
			rb_err("%s", err.msg);
			return 125;
		}
		return 0;
	}
	if (!strcmp(sub, "runs")) {
		struct rb_ledger_runs_filter rf = {.tenant = f.tenant,
		                                   .agent_prefix = f.agent,
		                                   .run_prefix = f.run_id,
		                                   .since = f.since,
		                                   .until = f.until,
		                                   .last = f.last};
		_cleanup_json_ json_t *runs = NULL;
		if (rb_ledger_runs(l, &rf, &runs, &err) < 0) {
			rb_err("ledger: %s", err.msg);
			return 125;
		}
		if (a.seen & O_JSON) {
			if (print_json(runs, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
				return write_failed(errno);
		} else if (print_runs(l, runs, wide, reverse, a.seen & O_DETAIL, &err) < 0) {
			rb_err("ledger: %s", err.msg);
			return 125;
		}
		if (fflush(stdout) == EOF)
			return write_failed(errno);
		return 0;
	}
	if (f.type && (rc = check_type(l, f.type, &err)))
		return rc;
	if (!strcmp(sub, "show")) {
		f = (struct rb_ledger_filter){.run_id = a.pos[0]};
	}
	_cleanup_json_ json_t *events = NULL;
	if (rb_ledger_query(l, &f, &events, &err) < 0) {
		rb_err("ledger: %s", err.msg);
		return 125;
	}
	if (!strcmp(sub, "show") && json_array_size(events) == 0) {
		rb_err("ledger: no events for run `%s`", a.pos[0]);
		return 125;
	}
	if (reverse) {
		size_t n = json_array_size(events);
		_cleanup_json_ json_t *rev = json_array();
		for (size_t i = n; i > 0; i--)
			json_array_append(rev, json_array_get(events, i - 1));
		json_decref(events);
		events = rb_steal_ptr(&rev);
		reverse = false;
	}
	if (a.seen & O_JSON) {
		if (print_json(events, JSON_INDENT(2) | JSON_PRESERVE_ORDER) < 0)
			return write_failed(errno);
	} else if (!strcmp(sub, "show")) {
		print_show(a.pos[0], events, wide);
	} else {
		print_table(events, wide, reverse);
	}
	if (fflush(stdout) == EOF)
		return write_failed(errno);
	return 0;
}

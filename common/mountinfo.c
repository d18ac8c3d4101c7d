/* The one reader of mountinfo (mountinfo.h). A line: ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS
 * [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS. */
#define _GNU_SOURCE
#include "common/mountinfo.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/util.h"

#define MOUNTINFO_MAX (1u << 22)

/* Copies the next space-separated field at *p into out (len), undoing \ooo escapes. */
static bool field(const char **p, char *out, size_t len)
{
	const char *s = *p;
	while (*s == ' ')
		s++;
	if (!*s)
		return false;
	size_t n = 0;
	for (; *s && *s != ' '; s++) {
		char c = *s;
		if (c == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
		    s[3] <= '7') {
			c = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		}
		if (n + 1 < len)
			out[n++] = c;
	}
	out[n] = '\0';
	*p = s;
	return true;
}

static bool parse_line(const char *line, struct rb_mount *m)
{
	char skip[PATH_MAX];
	const char *p = line;
	for (int i = 0; i < 3; i++)
		if (!field(&p, skip, sizeof skip))
			return false;
	if (!field(&p, m->root, sizeof m->root) || !field(&p, m->mount_point, sizeof m->mount_point) ||
	    !field(&p, skip, sizeof skip))
		return false;
	/* Optional fields until the lone "-". */
	for (;;) {
		if (!field(&p, skip, sizeof skip))
			return false;
		if (!strcmp(skip, "-"))
			break;
	}
	return field(&p, m->fstype, sizeof m->fstype) && field(&p, m->source, sizeof m->source) &&
	       field(&p, m->super_opts, sizeof m->super_opts);
}

int rb_mountinfo_each_in(const char *text, int (*fn)(const struct rb_mount *m, void *ctx), void *ctx)
{
	_cleanup_free_ struct rb_mount *m = malloc(sizeof *m);
	_cleanup_free_ char *line = malloc(3 * PATH_MAX + 8192);
	if (!m || !line)
		return -1;
	for (const char *p = text; rb_next_line(&p, line, 3 * PATH_MAX + 8192);) {
		if (!parse_line(line, m))
			continue;
		int r = fn(m, ctx);
		if (r)
			return r;
	}
	return 0;
}

int rb_mountinfo_each(int (*fn)(const struct rb_mount *m, void *ctx), void *ctx, struct rb_error *err)
{
	_cleanup_free_ char *text = NULL;
	if (rb_read_file("/proc/self/mountinfo", MOUNTINFO_MAX, &text, NULL, err) < 0)
		return -1;
	int r = rb_mountinfo_each_in(text, fn, ctx);
	if (r < 0 && err)
		rb_error_set(err, ENOMEM, "read /proc/self/mountinfo");
	return r;
}

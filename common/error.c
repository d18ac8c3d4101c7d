/* The rb_error helpers: one clear line per failure. */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int rb_error_set(struct rb_error *err, int errnum, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if (errnum && (size_t)n < sizeof err->msg)
		snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
	err->errnum = errnum;
	return -1;
}

int rb_error_prefix(struct rb_error *err, const char *fmt, ...)
{
	if (!err)
		return -1;
	char head[RB_ERROR_MAX], old[RB_ERROR_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(head, sizeof head, fmt, ap);
	va_end(ap);
	memcpy(old, err->msg, sizeof old);
	snprintf(err->msg, sizeof err->msg, "%.200s: %.300s", head, old);
	return -1;
}

void rb_error_clear(struct rb_error *err)
{
	if (err) {
		err->errnum = 0;
		err->msg[0] = '\0';
	}
}

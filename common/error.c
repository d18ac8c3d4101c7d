/* The rb_error helpers: one clear line per failure, and its kind. */
#include "common/error.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define TRUNCATED " [truncated]"

/* Marks a message that filled the buffer: its end gives way to the marker. */
static void mark_truncated(struct rb_error *err)
{
	size_t cut = sizeof err->msg - sizeof TRUNCATED;
	memcpy(err->msg + cut, TRUNCATED, sizeof TRUNCATED);
}

static int set(struct rb_error *err, enum rb_error_kind kind, int errnum, const char *fmt, va_list ap)
{
	int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	if (n < 0)
		n = 0;
	if (errnum && (size_t)n < sizeof err->msg)
		n += snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
	if ((size_t)n >= sizeof err->msg)
		mark_truncated(err);
	err->errnum = errnum;
	err->kind = kind;
	return -1;
}

int rb_error_set(struct rb_error *err, int errnum, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	set(err, RB_ERR_UNSET, errnum, fmt, ap);
	va_end(ap);
	return -1;
}

int rb_error_setk(struct rb_error *err, enum rb_error_kind kind, int errnum, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	set(err, kind, errnum, fmt, ap);
	va_end(ap);
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
	if ((size_t)snprintf(err->msg, sizeof err->msg, "%s: %s", head, old) >= sizeof err->msg)
		mark_truncated(err);
	return -1;
}

enum rb_error_kind rb_error_kind_of(const struct rb_error *err)
{
	if (!err)
		return RB_ERR_INTERNAL;
	if (err->kind != RB_ERR_UNSET)
		return err->kind;
	switch (err->errnum) {
	case 0:
	case EINVAL:
	case E2BIG:
	case ENAMETOOLONG:
	case ERANGE:
	case EFBIG:
	case EMSGSIZE:
	case ENOTDIR:
	case EISDIR:
	case ELOOP: return RB_ERR_INPUT;
	case ENOENT:
	case ESRCH: return RB_ERR_NOT_FOUND;
	case EACCES:
	case EPERM:
	case EROFS: return RB_ERR_FORBIDDEN;
	case EEXIST:
	case EBUSY:
	case ETXTBSY:
	case ENOTEMPTY: return RB_ERR_CONFLICT;
	case ENOSYS:
	case EOPNOTSUPP:
	case EAFNOSUPPORT:
	case EPROTONOSUPPORT:
	case ENOSPC:
	case EDQUOT:
	case EMFILE:
	case ENFILE:
	case EAGAIN: return RB_ERR_HOST;
	default: return RB_ERR_INTERNAL;
	}
}

int rb_error_http_status(enum rb_error_kind kind)
{
	switch (kind) {
	case RB_ERR_INPUT: return 400;
	case RB_ERR_NOT_FOUND: return 404;
	case RB_ERR_FORBIDDEN: return 403;
	case RB_ERR_CONFLICT: return 409;
	case RB_ERR_HOST: return 503;
	default: return 500;
	}
}

const char *rb_error_kind_name(enum rb_error_kind kind)
{
	static const char *const names[] = {"internal", "input", "not_found", "forbidden",
	                                    "conflict", "host",  "internal"};
	return (unsigned)kind < sizeof names / sizeof names[0] ? names[kind] : "internal";
}

void rb_error_clear(struct rb_error *err)
{
	if (err) {
		err->errnum = 0;
		err->kind = RB_ERR_UNSET;
		err->msg[0] = '\0';
	}
}

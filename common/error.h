/* Error reporting for every runbox component: a function returns 0 or a negative value and
 * fills a struct rb_error naming the thing that failed and the errno text (crun's model). */
#ifndef RB_ERROR_H
#define RB_ERROR_H

#include <stddef.h>

#define RB_ERROR_MAX 512

/* What kind of failure, for whoever maps it onto an answer: the CLI's exit 125 for all of
 * them, runbox serve's HTTP status (rb_error_http_status). */
enum rb_error_kind {
	RB_ERR_UNSET = 0, /* inferred from errnum by rb_error_kind_of */
	RB_ERR_INPUT,     /* what the caller gave is wrong: a bad flag, key, value, document */
	RB_ERR_NOT_FOUND, /* what the caller named does not exist */
	RB_ERR_FORBIDDEN, /* a policy or a permission refuses it */
	RB_ERR_CONFLICT,  /* the state forbids it now: in use, exists, busy */
	RB_ERR_HOST,      /* this host lacks a feature or a resource runbox needs */
	RB_ERR_INTERNAL,  /* anything else: a bug or an unexpected failure */
};

struct rb_error {
	int errnum; /* errno at the failure, or 0 */
	enum rb_error_kind kind;
	char msg[RB_ERROR_MAX]; /* one line, names the path, key or syscall */
};

/* Formats msg, appends ": strerror(errnum)" when errnum != 0, returns -1. Safe to call with
 * err == NULL. Not async-signal-safe (uses vsnprintf), but allocates nothing. A message that
 * does not fit ends in " [truncated]". The kind is left unset (inferred). */
int rb_error_set(struct rb_error *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with more context ("policy default.json: ..."); the kind stays.
 * What does not fit is cut from the end and marked " [truncated]". */
int rb_error_prefix(struct rb_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* rb_error_set with its kind said; returns -1. */
int rb_error_setk(struct rb_error *err, enum rb_error_kind kind, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The kind: the one set, else one read from errnum (0: input, since every check that finds a
 * bad value says so without an errno; ENOENT: not found; EACCES/EPERM: forbidden;
 * EEXIST/EBUSY/ETXTBSY: conflict; ENOSYS/EOPNOTSUPP and kin, ENOSPC: host; the rest internal). */
enum rb_error_kind rb_error_kind_of(const struct rb_error *err);
/* 400, 404, 403, 409, 503 (host), 500. */
int rb_error_http_status(enum rb_error_kind kind);
const char *rb_error_kind_name(enum rb_error_kind kind);

void rb_error_clear(struct rb_error *err);

#endif

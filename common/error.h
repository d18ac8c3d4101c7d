/* Error reporting for every runbox component: a function returns 0 or a negative value and
 * fills a struct rb_error naming the thing that failed and the errno text (crun's model). */
#ifndef RB_ERROR_H
#define RB_ERROR_H

#include <stddef.h>

#define RB_ERROR_MAX 512

struct rb_error {
	int errnum;             /* errno at the failure, or 0 */
	char msg[RB_ERROR_MAX]; /* one line, names the path, key or syscall */
};

/* Formats msg, appends ": strerror(errnum)" when errnum != 0, returns -1. Safe to call with
 * err == NULL. Not async-signal-safe (uses vsnprintf), but allocates nothing. */
int rb_error_set(struct rb_error *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes an existing message with more context ("policy default.json: ..."). */
int rb_error_prefix(struct rb_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void rb_error_clear(struct rb_error *err);

#endif

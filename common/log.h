/* The one way runbox code talks to the terminal: "runbox: ..." lines, through a logger its
 * caller owns (level and sink), on stderr when none is given. */
#ifndef RB_LOG_H
#define RB_LOG_H

#include <stddef.h>

enum rb_log_level { RB_LOG_ERROR, RB_LOG_WARN, RB_LOG_INFO, RB_LOG_DEBUG };

/* Gets each formatted line (no newline) of at most level. */
typedef void (*rb_log_sink_fn)(void *ctx, enum rb_log_level level, const char *line, size_t len);

struct rb_logger {
	enum rb_log_level level;
	rb_log_sink_fn sink; /* NULL: stderr, one write(2) per line */
	void *ctx;
};

/* Makes lg (not copied: it must outlive its use; NULL: warnings and errors to stderr) the
 * logger of the calling thread's library calls, and returns the one it replaces. A process
 * that holds many runs gives each thread, or each call, the logger of the run it serves. */
const struct rb_logger *rb_log_use(const struct rb_logger *lg);
/* The level of the calling thread's logger. */
enum rb_log_level rb_log_level(void);
void rb_logf(const struct rb_logger *lg, enum rb_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* rb_logf to the calling thread's logger (rb_log_use). */
void rb_log(enum rb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define rb_err(...)   rb_log(RB_LOG_ERROR, __VA_ARGS__)
#define rb_warn(...)  rb_log(RB_LOG_WARN, __VA_ARGS__)
#define rb_info(...)  rb_log(RB_LOG_INFO, __VA_ARGS__)
#define rb_debug(...) rb_log(RB_LOG_DEBUG, __VA_ARGS__)

#endif

/* The one way runbox code talks to the terminal: "runbox: ..." lines on stderr. */
#ifndef RB_LOG_H
#define RB_LOG_H

enum rb_log_level { RB_LOG_ERROR, RB_LOG_WARN, RB_LOG_INFO, RB_LOG_DEBUG };

void rb_log_set_level(enum rb_log_level level);
void rb_log(enum rb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define rb_err(...)   rb_log(RB_LOG_ERROR, __VA_ARGS__)
#define rb_warn(...)  rb_log(RB_LOG_WARN, __VA_ARGS__)
#define rb_info(...)  rb_log(RB_LOG_INFO, __VA_ARGS__)
#define rb_debug(...) rb_log(RB_LOG_DEBUG, __VA_ARGS__)

#endif

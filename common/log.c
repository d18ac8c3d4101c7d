/* Logger: level filter and one formatted line per call, control characters shown escaped,
 * given to the caller's sink or written to stderr with a single write(2). */
#define _GNU_SOURCE
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/ttysafe.h"

/* Per thread, never shared: the logger whoever owns this thread chose (rb_log_use). */
static _Thread_local const struct rb_logger *thread_logger;

static const struct rb_logger default_logger = {.level = RB_LOG_WARN};

const struct rb_logger *rb_log_use(const struct rb_logger *lg)
{
	const struct rb_logger *old = thread_logger;
	thread_logger = lg;
	return old;
}

static const struct rb_logger *resolve(const struct rb_logger *lg)
{
	return lg ? lg : &default_logger;
}

/* One line: msg (formatted by the caller, once the level let it through) with its prefix. */
static void emit(const struct rb_logger *lg, enum rb_log_level level, const char *msg)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	char line[2048];
	int n;
	if (level == RB_LOG_DEBUG) {
		/* Debug lines carry the monotonic clock, so phases of the runner, the factory, the
		 * spawner and init (separate processes) line up, and the task's page faults so far:
		 * a fault costs as much as ten system calls on some hosts. */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		struct rusage ru = {0};
		getrusage(RUSAGE_THREAD, &ru);
		n = snprintf(line, sizeof line, "runbox[%d] %lld.%06ld: [%ld faults] ", (int)getpid(),
		             (long long)ts.tv_sec, ts.tv_nsec / 1000, ru.ru_minflt + ru.ru_majflt);
	} else {
		n = snprintf(line, sizeof line, "runbox: %s: ", names[level]);
	}
	/* The message may carry text chosen inside a sandbox (a harvested file's name in a store
	 * error, a step's output, a path): it is shown, never obeyed, and stays one line. */
	size_t len = (size_t)n + rb_ttysafe_line(msg, line + n, sizeof line - (size_t)n - 1);
	if (lg->sink) {
		line[len] = '\0';
		lg->sink(lg->ctx, level, line, len);
		return;
	}
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

enum rb_log_level rb_log_level(void)
{
	return resolve(thread_logger)->level;
}

void rb_logf(const struct rb_logger *lg, enum rb_log_level level, const char *fmt, ...)
{
	lg = resolve(lg);
	if (level > lg->level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized): started above
	va_end(ap);
	emit(lg, level, msg);
}

void rb_log(enum rb_log_level level, const char *fmt, ...)
{
	const struct rb_logger *lg = resolve(thread_logger);
	if (level > lg->level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized): started above
	va_end(ap);
	emit(lg, level, msg);
}

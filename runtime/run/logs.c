/* A run's step logs kept past the run (see logs.h). */
#define _GNU_SOURCE
#include "runtime/run/logs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/copyfd.h"
#include "common/util.h"

void rb_logs_dir(const char *state_dir, const char *run_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/results/%s/logs", state_dir, run_id);
}

/* One log, copied whole (it is bounded by the run's log cap). 0 when there is none. */
static int copy_log(const char *from, const char *to, bool *made_dir, const char *dir, struct rb_error *err)
{
	_cleanup_close_ int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (in < 0 || fstat(in, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
		return 0;
	if (!*made_dir) {
		if (rb_mkdir_p(dir, 0700, err) < 0)
			return -1;
		*made_dir = true;
	}
	_cleanup_close_ int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return rb_error_set(err, errno, "create `%s`", to);
	uint64_t copied;
	enum rb_copy_fail why;
	if (rb_copy_fd(in, out, UINT64_MAX, &copied, NULL, &why) < 0)
		return rb_error_set(err, errno, why == RB_COPY_READ ? "read `%s`" : "write `%s`",
		                    why == RB_COPY_READ ? from : to);
	if (close(rb_steal_fd(&out)) < 0)
		return rb_error_set(err, errno, "close `%s`", to);
	return 0;
}

int rb_logs_keep(const struct rb_run *run, struct rb_error *err)
{
	char dir[PATH_MAX];
	rb_logs_dir(run->paths.state_dir, run->id, dir);
	/* Made even when no step printed anything: its presence says the logs are kept. */
	if (run->steps_run && rb_mkdir_p(dir, 0700, err) < 0)
		return rb_error_prefix(err, "keep the run's logs");
	bool made = run->steps_run > 0;
	static const char *const streams[] = {"stdout", "stderr"};
	for (unsigned step = 1; step <= run->steps_run; step++)
		for (int s = 0; s < 2; s++) {
			char from[PATH_MAX + 64], to[PATH_MAX + 64];
			snprintf(from, sizeof from, "%s/step-%u.%s", run->dir, step, streams[s]);
			snprintf(to, sizeof to, "%s/step-%u.%s", dir, step, streams[s]);
			if (copy_log(from, to, &made, dir, err) < 0)
				return rb_error_prefix(err, "keep the run's logs");
		}
	return 0;
}

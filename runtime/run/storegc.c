/* Retention of the artifact store (see storegc.h). */
#define _GNU_SOURCE
#include "runtime/run/storegc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "ledger/ledger.h"

/* An object written or reused this recently is kept whatever the ledger says: the run that
 * stored it commits its artifact event after the harvest. */
#define GRACE_S 600

/* To the millisecond, as the ledger's timestamps are: a cutoff cut to the second would count
 * a row of the same second, written before it, as within the retention. */
void rb_store_cutoff(uint64_t retention_s, char out[32])
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	time_t t = (uint64_t)now.tv_sec > retention_s ? now.tv_sec - (time_t)retention_s : 0;
	struct tm tm;
	gmtime_r(&t, &tm);
	char sec[24];
	strftime(sec, sizeof sec, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, 32, "%s.%03ldZ", sec, t ? now.tv_nsec / 1000000 : 0L);
}

static void close_dir(DIR **d)
{
	if (*d)
		closedir(*d);
}

static bool hex_name(const char *s, size_t n)
{
	if (strlen(s) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

struct sweep {
	json_t *live, *removed;
	time_t keep_after; /* objects modified after this are kept */
	bool dry_run;
	uint64_t kept, removed_bytes;
};

/* One shard directory: <store>/sha256/<2 hex>. */
static int sweep_shard(struct sweep *s, int shard_fd, const char *shard, struct rb_error *err)
{
	__attribute__((cleanup(close_dir))) DIR *d = fdopendir(shard_fd);
	if (!d) {
		close(shard_fd);
		return rb_error_set(err, errno, "open the store's shard `%s`", shard);
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		bool tmp = !strncmp(e->d_name, ".tmp-", 5); /* an interrupted write */
		if (!tmp && (!hex_name(e->d_name, 64) || strncmp(e->d_name, shard, 2) != 0))
			continue; /* not the store's: left alone */
		char digest[80];
		snprintf(digest, sizeof digest, "sha256:%s", e->d_name);
		if (st.st_mtime > s->keep_after || (!tmp && json_object_get(s->live, digest))) {
			s->kept++;
			continue;
		}
		if (!s->dry_run && unlinkat(dirfd(d), e->d_name, 0) < 0 && errno != ENOENT)
			return rb_error_set(err, errno, "remove the store's object `%s/%s`", shard, e->d_name);
		json_array_append_new(s->removed, json_pack("{s:s, s:I}", tmp ? "temporary" : "digest",
		                                            tmp ? e->d_name : digest, "size", (json_int_t)st.st_size));
		s->removed_bytes += (uint64_t)st.st_size;
	}
	return 0;
}

/* The result directories of runs (runtime/run/result_spill.h) older than the retention. */
static int sweep_results(struct sweep *s, const char *state_dir, struct rb_error *err)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/results", state_dir);
	__attribute__((cleanup(close_dir))) DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : rb_error_set(err, errno, "open `%s`", dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_mtime > s->keep_after)
			continue;
		char path[PATH_MAX];
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
			continue;
		if (!s->dry_run && rb_rm_rf(path, err) < 0)
			return -1;
		json_array_append_new(s->removed, json_pack("{s:s}", "results", path));
	}
	return 0;
}

int rb_store_gc(const struct rb_paths *paths, uint64_t retention_s, bool dry_run, json_t **report, struct rb_error *err)
{
	*report = NULL;
	char cutoff[32], store[PATH_MAX];
	rb_store_cutoff(retention_s, cutoff);
	snprintf(store, sizeof store, "%s/artifacts/sha256", paths->state_dir);
	time_t now = time(NULL);
	struct sweep s = {.dry_run = dry_run, .removed = json_array()};
	s.keep_after = now - (time_t)(retention_s > GRACE_S ? retention_s : GRACE_S);
	_cleanup_close_ int store_fd = open(store, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = 0;
	if (store_fd < 0 && errno != ENOENT)
		r = rb_error_set(err, errno, "open the artifact store `%s`", store);
	if (store_fd >= 0) {
		/* What the ledger still needs, read before anything is removed; an unreadable ledger
		 * removes nothing. */
		struct rb_ledger *l = NULL;
		if (rb_ledger_open(paths->state_dir, &l, err) < 0 ||
		    rb_ledger_live_digests(l, cutoff, &s.live, err) < 0)
			r = -1;
		if (l)
			rb_ledger_close(l);
	}
	__attribute__((cleanup(close_dir))) DIR *d = r == 0 && store_fd >= 0 ? fdopendir(rb_steal_fd(&store_fd)) : NULL;
	struct dirent *e;
	while (d && r == 0 && (e = readdir(d))) {
		if (!hex_name(e->d_name, 2))
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			r = sweep_shard(&s, fd, e->d_name, err);
	}
	if (r == 0)
		r = sweep_results(&s, paths->state_dir, err);
	json_decref(s.live);
	*report = json_pack("{s:I, s:s, s:I, s:o, s:I, s:b}", "retention_s", (json_int_t)retention_s, "cutoff", cutoff,
	                    "kept", (json_int_t)s.kept, "removed", s.removed, "removed_bytes",
	                    (json_int_t)s.removed_bytes, "dry_run", dry_run);
	return r;
}

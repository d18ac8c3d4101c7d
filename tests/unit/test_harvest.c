/* runtime/run/harvest.c and runtime/run/artifacts.c: files are stored under the right digests; links,
 * FIFOs, devices, sockets, mounts and swaps in `out` lead nowhere outside; every cap holds
 * and every skip is recorded. Each test has a control showing the trap was real. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"
#include "runtime/run/artifacts.h"
#include "runtime/run/harvest.h"
#include "runtime/sandbox/nsopen.h"
#include "scrub/scrub.h"

struct fx {
	char base[PATH_MAX];
	char out[PATH_MAX];
	char store[PATH_MAX];
	char outside[PATH_MAX]; /* a directory beside out, standing for the host */
	char secret[PATH_MAX];  /* outside/secret: its content must never reach the store */
	char secret_text[64];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	/* tmpfs when there is one, as /workspace is in a sandbox (and 100,000 files are quick) */
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	snprintf(f->base, sizeof f->base, "%s/rb-harvest-XXXXXX", tmp);
	if (!mkdtemp(f->base))
		return -1;
	snprintf(f->out, sizeof f->out, "%s/out", f->base);
	snprintf(f->store, sizeof f->store, "%s/store", f->base);
	snprintf(f->outside, sizeof f->outside, "%s/outside", f->base);
	snprintf(f->secret, sizeof f->secret, "%s/secret", f->outside);
	char id[24];
	rb_new_run_id(id);
	snprintf(f->secret_text, sizeof f->secret_text, "HOST-SECRET-%s-never-harvest", id);
	if (mkdir(f->out, 0755) < 0 || mkdir(f->outside, 0755) < 0)
		return -1;
	FILE *s = fopen(f->secret, "w");
	if (!s)
		return -1;
	fputs(f->secret_text, s);
	fclose(s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	struct rb_error err;
	rb_rm_rf(f->base, &err);
	free(f);
	return 0;
}

static void put(const char *dir, const char *name, const char *data, size_t len)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		fail_msg("create %s: %s", p, strerror(errno));
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void puts_(const char *dir, const char *name, const char *text)
{
	put(dir, name, text, strlen(text));
}

static void mkdir_in(const char *dir, const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/%s", dir, name);
	assert_int_equal(mkdir(p, 0755), 0);
}

static int harvest_caps(struct fx *f, const struct rb_harvest_caps *caps, rb_harvest_scrub_fn scrub, void *ctx,
                        rb_harvest_race_fn race, void *race_ctx, struct rb_harvest_result *res)
{
	int fd = open(f->out, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct rb_error err = {0};
	int r = rb_harvest_with_race(fd, caps, scrub, ctx, f->store, race, race_ctx, res, &err);
	if (r != 0)
		print_error("harvest: %s\n", err.msg);
	close(fd);
	return r;
}

static void harvest(struct fx *f, struct rb_harvest_result *res)
{
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, NULL, NULL, res), 0);
	assert_true(res->complete);
}

static const struct rb_harvest_artifact *artifact(const struct rb_harvest_result *res, const char *path)
{
	for (size_t i = 0; i < res->n_artifacts; i++)
		if (strcmp(res->artifacts[i].path, path) == 0)
			return &res->artifacts[i];
	return NULL;
}

static const struct rb_harvest_skip *skipped(const struct rb_harvest_result *res, const char *path)
{
	for (size_t i = 0; i < res->n_skipped; i++)
		if (strcmp(res->skipped[i].path, path) == 0)
			return &res->skipped[i];
	return NULL;
}

static void assert_skip(const struct rb_harvest_result *res, const char *path, enum rb_harvest_reason reason)
{
	const struct rb_harvest_skip *s = skipped(res, path);
	if (!s)
		fail_msg("%s not recorded as skipped", path);
	if (s->reason != reason)
		fail_msg("%s: reason %s, expected %s", path, rb_harvest_reason_name(s->reason),
		         rb_harvest_reason_name(reason));
}

/* Every object in the store, searched for needle. Also counts the objects. */
static const char *g_needle;
static int g_found, g_objects;
static int scan_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	g_objects++;
	char *data = NULL;
	size_t len = 0;
	struct rb_error err;
	if (rb_read_file(path, 1 << 30, &data, &len, &err) == 0 && memmem(data, len, g_needle, strlen(g_needle)))
		g_found++;
	free(data);
	return 0;
}

static int store_contains(const struct fx *f, const char *needle)
{
	g_needle = needle;
	g_found = g_objects = 0;
	nftw(f->store, scan_one, 16, FTW_PHYS);
	return g_found;
}

static void read_object(const struct fx *f, const char *digest, char **data, size_t *len)
{
	char p[PATH_MAX];
	struct rb_error err = {0};
	assert_int_equal(rb_artifact_path(f->store, digest, p, &err), 0);
	if (rb_read_file(p, 1 << 26, data, len, &err) != 0)
		fail_msg("read object: %s", err.msg);
}

static void digest_of(const char *data, size_t len, char out[RB_ARTIFACT_DIGEST_LEN])
{
	char hex[65];
	rb_sha256_hex(data, len, hex);
	snprintf(out, RB_ARTIFACT_DIGEST_LEN, "sha256:%s", hex);
}

/* ---- regular files ---- */

static void test_regular_files(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "hello.txt", "hello\n");
	mkdir_in(f->out, "sub");
	char bin[1000];
	for (unsigned i = 0; i < sizeof bin; i++)
		bin[i] = (char)(i * 7);
	char sub[PATH_MAX];
	snprintf(sub, sizeof sub, "%s/sub", f->out);
	put(sub, "data.bin", bin, sizeof bin);
	put(f->out, "empty", "", 0);

	struct rb_harvest_result res;
	harvest(f, &res);
	assert_int_equal(res.n_artifacts, 3);
	assert_int_equal(res.skipped_total, 0);
	assert_int_equal(res.files_seen, 3);
	assert_int_equal(res.dirs_seen, 2);

	/* control: the digest of "hello\n" as sha256sum prints it */
	const struct rb_harvest_artifact *a = artifact(&res, "hello.txt");
	assert_non_null(a);
	assert_string_equal(a->digest, "sha256:5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
	assert_int_equal(a->size, 6);
	assert_int_equal(a->original_size, 6);
	char d[RB_ARTIFACT_DIGEST_LEN];
	a = artifact(&res, "sub/data.bin");
	assert_non_null(a);
	digest_of(bin, sizeof bin, d);
	assert_string_equal(a->digest, d);
	a = artifact(&res, "empty");
	assert_non_null(a);
	assert_string_equal(a->digest, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

	/* read back by digest, byte for byte; objects 0640 with the store's group (never
	 * world-readable), shard directories 0711 */
	char *data;
	size_t len;
	read_object(f, artifact(&res, "sub/data.bin")->digest, &data, &len);
	assert_int_equal(len, sizeof bin);
	assert_memory_equal(data, bin, sizeof bin);
	free(data);
	char p[PATH_MAX];
	struct rb_error err;
	assert_int_equal(rb_artifact_path(f->store, artifact(&res, "hello.txt")->digest, p, &err), 0);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	struct stat store;
	assert_int_equal(stat(f->store, &store), 0);
	assert_int_equal(st.st_gid, store.st_gid);
	/* the shard: searchable, not listable */
	*strrchr(p, '/') = '\0';
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0711);

	/* the JSON carries the same */
	_cleanup_json_ json_t *j = rb_harvest_json(&res);
	assert_non_null(j);
	assert_int_equal(json_array_size(json_object_get(j, "artifacts")), 3);
	json_t *first = json_array_get(json_object_get(j, "artifacts"), 0);
	assert_string_equal(json_string_value(json_object_get(first, "path")), "empty"); /* sorted */
	assert_true(json_is_object(json_object_get(first, "redactions")));
	assert_int_equal(json_integer_value(json_object_get(j, "skipped_total")), 0);
	assert_true(json_is_true(json_object_get(j, "complete")));
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "caps"), "max_files")),
	                 RB_HARVEST_DEFAULT_FILES);
	assert_int_equal(res.objects_new, 3);
	assert_int_equal(res.bytes_new, 6 + sizeof bin);
	rb_harvest_result_free(&res);

	/* a second harvest of the same tree adds nothing to the store */
	harvest(f, &res);
	assert_int_equal(res.n_artifacts, 3);
	assert_int_equal(res.objects_new, 0);
	rb_harvest_result_free(&res);
}

/* ---- links ---- */

static void test_symlink_to_secret(void **state)
{
	struct fx *f = *state;
	char link[PATH_MAX], shadow[PATH_MAX];
	snprintf(link, sizeof link, "%s/leak", f->out);
	snprintf(shadow, sizeof shadow, "%s/shadow", f->out);
	assert_int_equal(symlink(f->secret, link), 0);
	assert_int_equal(symlink("/etc/shadow", shadow), 0);
	puts_(f->out, "ok.txt", "fine");

	/* control: the links do lead outside out, and the secret is readable through them */
	char *via = NULL;
	size_t len;
	struct rb_error err;
	assert_int_equal(rb_read_file(link, 4096, &via, &len, &err), 0);
	assert_string_equal(via, f->secret_text);
	free(via);
	char *shadow_text = NULL;
	size_t shadow_len = 0;
	bool have_shadow = rb_read_file(shadow, 1 << 20, &shadow_text, &shadow_len, &err) == 0 && shadow_len > 0;

	struct rb_harvest_result res;
	harvest(f, &res);
	assert_skip(&res, "leak", RB_HARVEST_SYMLINK);
	assert_skip(&res, "shadow", RB_HARVEST_SYMLINK);
	assert_int_equal(res.n_artifacts, 1);
	assert_non_null(artifact(&res, "ok.txt"));
	assert_int_equal(res.bytes_read, 4);
	assert_int_equal(store_contains(f, "fine"), 1); /* control for the scan itself */
	assert_int_equal(store_contains(f, f->secret_text), 0);
	if (have_shadow) {
		/* its first line (root's entry) is nowhere in the store */
		char *nl = memchr(shadow_text, '\n', shadow_len);
		if (nl)
			*nl = '\0';
		assert_int_equal(store_contains(f, shadow_text), 0);
	}
	free(shadow_text);
	_cleanup_json_ json_t *j = rb_harvest_json(&res);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "skipped_by_reason"), "symlink")), 2);
	rb_harvest_result_free(&res);
}

static void test_symlinked_dir_not_followed(void **state)
{
	struct fx *f = *state;
	char link[PATH_MAX], through[PATH_MAX];
	snprintf(link, sizeof link, "%s/dir", f->out);
	assert_int_equal(symlink(f->outside, link), 0);
	/* control: out/dir/secret is the secret */
	snprintf(through, sizeof through, "%s/secret", link);
	assert_int_equal(access(through, R_OK), 0);

	struct rb_harvest_result res;
	harvest(f, &res);
	assert_skip(&res, "dir", RB_HARVEST_SYMLINK);
	assert_int_equal(res.n_artifacts, 0);
	assert_int_equal(res.dirs_seen, 1);
	assert_int_equal(res.bytes_read, 0);
	assert_int_equal(store_contains(f, f->secret_text), 0);
	rb_harvest_result_free(&res);
}

static void test_hardlinks_counted_once(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "a", "linked content");
	mkdir_in(f->out, "sub");
	char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
	snprintf(a, sizeof a, "%s/a", f->out);
	snprintf(b, sizeof b, "%s/b", f->out);
	snprintf(c, sizeof c, "%s/sub/c", f->out);
	assert_int_equal(link(a, b), 0);
	assert_int_equal(link(a, c), 0);
	struct stat st;
	assert_int_equal(stat(a, &st), 0);
	assert_int_equal(st.st_nlink, 3); /* control: three names, one inode */

	struct rb_harvest_result res;
	harvest(f, &res);
	assert_int_equal(res.files_seen, 3);
	assert_int_equal(res.n_artifacts, 1);
	assert_int_equal(res.skipped_by_reason[RB_HARVEST_HARDLINK], 2);
	assert_int_equal(res.bytes_read, strlen("linked content"));
	const char *first = res.artifacts[0].path;
	for (size_t i = 0; i < res.n_skipped; i++) {
		assert_int_equal(res.skipped[i].reason, RB_HARVEST_HARDLINK);
		assert_string_equal(res.skipped[i].other, first);
	}
	_cleanup_json_ json_t *j = rb_harvest_json(&res);
	const char *reason =
	    json_string_value(json_object_get(json_array_get(json_object_get(j, "skipped"), 0), "reason"));
	assert_non_null(reason);
	assert_true(strncmp(reason, "hardlink_of:", 12) == 0);
	assert_string_equal(reason + 12, first);
	rb_harvest_result_free(&res);
}

/* ---- special files ---- */

/* Runs a harvest in a child guarded by alarm(10): a blocking open would end it by SIGALRM.
 * The child exits 0 when path was recorded with reason and nothing was read. */
static void harvest_in_child(struct fx *f, const char *path, enum rb_harvest_reason reason)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10);
		struct rb_harvest_result res;
		if (harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res) != 0)
			_exit(2);
		const struct rb_harvest_skip *s = skipped(&res, path);
		_exit(s && s->reason == reason && res.bytes_read == 0 && res.n_artifacts == 0 ? 0 : 3);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("harvest child killed by signal %d (blocked?)", WTERMSIG(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_fifo_does_not_block(void **state)
{
	struct fx *f = *state;
	char fifo[PATH_MAX];
	snprintf(fifo, sizeof fifo, "%s/fifo", f->out);
	assert_int_equal(mkfifo(fifo, 0644), 0);

	/* control: opening it for reading does block (no writer ever comes) */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(1);
		open(fifo, O_RDONLY);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM);

	harvest_in_child(f, "fifo", RB_HARVEST_FIFO);
}

static void test_device_node(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	char dev[PATH_MAX];
	snprintf(dev, sizeof dev, "%s/zero", f->out);
	if (mknod(dev, S_IFCHR | 0644, makedev(1, 5)) < 0) {
		if (errno == EPERM)
			skip();
		fail_msg("mknod: %s", strerror(errno));
	}
	/* control: it is a live /dev/zero: reading it gives bytes forever */
	int fd = open(dev, O_RDONLY);
	if (fd >= 0) {
		char buf[16];
		assert_int_equal(read(fd, buf, sizeof buf), (ssize_t)sizeof buf);
		close(fd);
	}
	struct stat st;
	assert_int_equal(lstat(dev, &st), 0);
	assert_true(S_ISCHR(st.st_mode));

	harvest_in_child(f, "zero", RB_HARVEST_DEVICE);
}

static void test_socket(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/sock", f->out);
	if (n >= (int)sizeof sa.sun_path)
		skip();
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
	struct stat st;
	assert_int_equal(lstat(sa.sun_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode)); /* control */

	struct rb_harvest_result res;
	harvest(f, &res);
	assert_skip(&res, "sock", RB_HARVEST_SOCKET);
	assert_int_equal(res.n_artifacts, 0);
	rb_harvest_result_free(&res);
	close(s);
}

/* ---- caps ---- */

static void test_many_files_count_cap(void **state)
{
	struct fx *f = *state;
	enum { DIRS = 10, PER_DIR = 10000 };
	for (int d = 0; d < DIRS; d++) {
		char dir[PATH_MAX];
		snprintf(dir, sizeof dir, "%s/d%d", f->out, d);
		assert_int_equal(mkdir(dir, 0755), 0);
		int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(dfd >= 0);
		for (int i = 0; i < PER_DIR; i++) {
			char name[32], text[32];
			snprintf(name, sizeof name, "f%d", i);
			int len = snprintf(text, sizeof text, "file %d/%d\n", d, i);
			int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			assert_true(fd >= 0);
			assert_int_equal(write(fd, text, (size_t)len), len);
			close(fd);
		}
		close(dfd);
	}
	struct rb_harvest_result res;
	harvest(f, &res);
	/* control: every file was met */
	assert_int_equal(res.files_seen, DIRS * PER_DIR);
	assert_int_equal(res.entries_seen, DIRS * PER_DIR + DIRS);
	/* the cap held, and the rest is counted, listed only up to the record cap */
	assert_int_equal(res.n_artifacts, RB_HARVEST_DEFAULT_FILES);
	assert_int_equal(res.skipped_total, DIRS * PER_DIR - RB_HARVEST_DEFAULT_FILES);
	assert_int_equal(res.skipped_by_reason[RB_HARVEST_OVER_COUNT_CAP], DIRS * PER_DIR - RB_HARVEST_DEFAULT_FILES);
	assert_int_equal(res.n_skipped, RB_HARVEST_DEFAULT_SKIP_RECORDS);
	for (size_t i = 0; i < res.n_skipped; i++)
		assert_int_equal(res.skipped[i].reason, RB_HARVEST_OVER_COUNT_CAP);
	store_contains(f, "\x01never");
	assert_int_equal(g_objects, RB_HARVEST_DEFAULT_FILES);
	_cleanup_json_ json_t *j = rb_harvest_json(&res);
	assert_int_equal(json_array_size(json_object_get(j, "skipped")), RB_HARVEST_DEFAULT_SKIP_RECORDS);
	assert_int_equal(json_integer_value(json_object_get(j, "skipped_total")),
	                 DIRS * PER_DIR - RB_HARVEST_DEFAULT_FILES);
	rb_harvest_result_free(&res);
}

static void test_sparse_file_never_read(void **state)
{
	struct fx *f = *state;
	static const struct {
		const char *name;
		off_t size;
	} files[] = {{"sparse2g", 2LL << 30}, {"sparse100g", 100LL << 30}};
	for (size_t i = 0; i < RB_ARRAY_SIZE(files); i++) {
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/%s", f->out, files[i].name);
		int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		if (ftruncate(fd, files[i].size) < 0)
			fail_msg("ftruncate %s: %s", p, strerror(errno));
		struct stat st;
		assert_int_equal(fstat(fd, &st), 0);
		/* control: that large, and really sparse */
		assert_int_equal(st.st_size, files[i].size);
		assert_true(st.st_blocks * 512 < (1 << 20));
		close(fd);
	}
	puts_(f->out, "small", "abc");

	struct rb_harvest_result res;
	harvest(f, &res);
	assert_skip(&res, "sparse2g", RB_HARVEST_OVER_FILE_CAP);
	assert_skip(&res, "sparse100g", RB_HARVEST_OVER_FILE_CAP);
	assert_int_equal(skipped(&res, "sparse100g")->size, 100LL << 30);
	assert_int_equal(res.n_artifacts, 1);
	assert_int_equal(res.bytes_read, 3); /* only "small" was read */
	rb_harvest_result_free(&res);

	/* with a file cap that admits 2 GB, the total cap still stops it before any read */
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	caps.max_file_bytes = 4ULL << 30;
	assert_int_equal(harvest_caps(f, &caps, NULL, NULL, NULL, NULL, &res), 0);
	assert_skip(&res, "sparse2g", RB_HARVEST_OVER_TOTAL_CAP);
	assert_skip(&res, "sparse100g", RB_HARVEST_OVER_FILE_CAP);
	assert_int_equal(res.bytes_read, 3);
	rb_harvest_result_free(&res);
}

static void test_total_cap_and_skip_records(void **state)
{
	struct fx *f = *state;
	char text[100];
	for (int i = 0; i < 5; i++) {
		char name[8];
		memset(text, 'a' + i, sizeof text);
		snprintf(name, sizeof name, "f%d", i);
		put(f->out, name, text, sizeof text);
	}
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	caps.max_total_bytes = 250;
	caps.max_skip_records = 1;
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, &caps, NULL, NULL, NULL, NULL, &res), 0);
	assert_int_equal(res.n_artifacts, 2);
	assert_int_equal(res.bytes_read, 200);
	assert_int_equal(res.skipped_total, 3);
	assert_int_equal(res.skipped_by_reason[RB_HARVEST_OVER_TOTAL_CAP], 3);
	assert_int_equal(res.n_skipped, 1);
	rb_harvest_result_free(&res);

	/* control: with the default caps all five are stored */
	harvest(f, &res);
	assert_int_equal(res.n_artifacts, 5);
	rb_harvest_result_free(&res);

	/* a file cap of 99 refuses all five without reading */
	caps.max_total_bytes = RB_HARVEST_DEFAULT_TOTAL_BYTES;
	caps.max_file_bytes = 99;
	assert_int_equal(harvest_caps(f, &caps, NULL, NULL, NULL, NULL, &res), 0);
	assert_int_equal(res.skipped_by_reason[RB_HARVEST_OVER_FILE_CAP], 5);
	assert_int_equal(res.bytes_read, 0);
	rb_harvest_result_free(&res);
}

static void test_deep_tree(void **state)
{
	struct fx *f = *state;
	enum { LEVELS = 1000 };
	int fd = open(f->out, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (int level = 1; level <= LEVELS; level++) {
		assert_int_equal(mkdirat(fd, "d", 0755), 0);
		int next = openat(fd, "d", O_PATH | O_DIRECTORY | O_CLOEXEC);
		assert_true(next >= 0);
		close(fd);
		fd = next;
		/* a file at every level: "file" inside the level-th directory */
		int w = openat(fd, "file", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		assert_true(w >= 0);
		char text[32];
		int len = snprintf(text, sizeof text, "level %d", level);
		assert_int_equal(write(w, text, (size_t)len), len);
		close(w);
	}
	/* control: the bottom is there */
	assert_int_equal(faccessat(fd, "file", R_OK, 0), 0);
	close(fd);

	struct rb_harvest_result res;
	harvest(f, &res);
	assert_int_equal(res.n_artifacts, RB_HARVEST_DEFAULT_DEPTH);
	assert_int_equal(res.dirs_seen, RB_HARVEST_DEFAULT_DEPTH + 1);
	assert_int_equal(res.skipped_total, 1);
	char deepest[4 * RB_HARVEST_DEFAULT_DEPTH + 8] = "", over[sizeof deepest + 2];
	for (unsigned i = 0; i < RB_HARVEST_DEFAULT_DEPTH; i++)
		strcat(deepest, i ? "/d" : "d");
	snprintf(over, sizeof over, "%s/d", deepest);
	assert_skip(&res, over, RB_HARVEST_OVER_DEPTH);
	strcat(deepest, "/file");
	assert_non_null(artifact(&res, deepest));
	rb_harvest_result_free(&res);

	/* a depth above the hard limit is refused, not clamped */
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	caps.max_depth = LEVELS;
	int dfd = open(f->out, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct rb_error err = {0};
	assert_int_equal(rb_harvest(dfd, &caps, NULL, NULL, f->store, &res, &err), -1);
	assert_non_null(strstr(err.msg, "max_depth"));
	rb_harvest_result_free(&res);
	close(dfd);
}

/* ---- swaps ---- */

struct swap {
	struct fx *f;
	const char *victim;
	enum { TO_SYMLINK, TO_FIFO, TO_DIR_SYMLINK } kind;
	int fired;
};

/* Replaces the victim after it was classified, before it is opened for reading. */
static void swap_hook(void *ctx, int pfd, const char *name)
{
	struct swap *s = ctx;
	if (strcmp(name, s->victim) != 0 || s->fired++)
		return;
	char old[64];
	snprintf(old, sizeof old, "%s.old", name);
	if (renameat(pfd, name, pfd, old) < 0)
		fail_msg("rename: %s", strerror(errno));
	switch (s->kind) {
	case TO_SYMLINK: assert_int_equal(symlinkat(s->f->secret, pfd, name), 0); break;
	case TO_FIFO: assert_int_equal(mkfifoat(pfd, name, 0644), 0); break;
	case TO_DIR_SYMLINK: assert_int_equal(symlinkat(s->f->outside, pfd, name), 0); break;
	}
}

static void test_swap_file_for_symlink(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "victim", "innocent");
	struct swap s = {f, "victim", TO_SYMLINK, 0};
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, swap_hook, &s, &res), 0);
	assert_int_equal(s.fired, 1);
	assert_skip(&res, "victim", RB_HARVEST_CHANGED);
	assert_int_equal(res.bytes_read, 0);
	assert_int_equal(store_contains(f, f->secret_text), 0);
	/* control: the swapped name now reads the secret */
	char p[PATH_MAX], *via = NULL;
	size_t len;
	struct rb_error err;
	snprintf(p, sizeof p, "%s/victim", f->out);
	assert_int_equal(rb_read_file(p, 4096, &via, &len, &err), 0);
	assert_string_equal(via, f->secret_text);
	free(via);
	rb_harvest_result_free(&res);
}

static void test_swap_file_for_fifo(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "victim", "innocent");
	struct swap s = {f, "victim", TO_FIFO, 0};
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(10);
		struct rb_harvest_result res;
		if (harvest_caps(f, NULL, NULL, NULL, swap_hook, &s, &res) != 0)
			_exit(2);
		const struct rb_harvest_skip *sk = skipped(&res, "victim");
		_exit(s.fired == 1 && sk && sk->reason == RB_HARVEST_CHANGED && res.bytes_read == 0 ? 0 : 3);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		fail_msg("harvest child killed by signal %d (blocked on the fifo?)", WTERMSIG(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	struct stat st;
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/victim", f->out);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISFIFO(st.st_mode)); /* control: the swap happened */
}

static void test_swap_dir_for_symlink(void **state)
{
	struct fx *f = *state;
	mkdir_in(f->out, "victim");
	char d[PATH_MAX];
	snprintf(d, sizeof d, "%s/victim", f->out);
	puts_(d, "inside", "inside content");
	struct swap s = {f, "victim", TO_DIR_SYMLINK, 0};
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, swap_hook, &s, &res), 0);
	assert_int_equal(s.fired, 1);
	/* the walk went on in the directory it classified, which is still inside out */
	assert_int_equal(store_contains(f, f->secret_text), 0);
	assert_int_equal(store_contains(f, "inside content"), 1);
	for (size_t i = 0; i < res.n_artifacts; i++)
		assert_null(strstr(res.artifacts[i].path, "secret"));
	/* control: the name now leads to the secret's directory */
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/victim/secret", f->out);
	assert_int_equal(access(p, R_OK), 0);
	rb_harvest_result_free(&res);
}

/* A child exchanges a regular file and a symlink to the secret (and a directory and a
 * symlink to the secret's directory) as fast as it can while harvests run. */
static void test_swap_race(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "x", "benign x");
	mkdir_in(f->out, "dx");
	char dx[PATH_MAX], y[PATH_MAX], dy[PATH_MAX];
	snprintf(dx, sizeof dx, "%s/dx", f->out);
	puts_(dx, "inner", "benign inner");
	snprintf(y, sizeof y, "%s/y", f->out);
	snprintf(dy, sizeof dy, "%s/dy", f->out);
	assert_int_equal(symlink(f->secret, y), 0);
	assert_int_equal(symlink(f->outside, dy), 0);

	int ofd = open(f->out, O_PATH | O_DIRECTORY | O_CLOEXEC);
	/* control: an exchange puts the secret under the name x */
	assert_int_equal(renameat2(ofd, "x", ofd, "y", RENAME_EXCHANGE), 0);
	char p[PATH_MAX], *via = NULL;
	size_t len;
	struct rb_error err;
	snprintf(p, sizeof p, "%s/x", f->out);
	assert_int_equal(rb_read_file(p, 4096, &via, &len, &err), 0);
	assert_string_equal(via, f->secret_text);
	free(via);
	assert_int_equal(renameat2(ofd, "x", ofd, "y", RENAME_EXCHANGE), 0);

	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < 2000000; i++) {
			renameat2(ofd, "x", ofd, "y", RENAME_EXCHANGE);
			renameat2(ofd, "dx", ofd, "dy", RENAME_EXCHANGE);
		}
		_exit(0);
	}
	uint64_t stored = 0, changed = 0, links = 0;
	for (int round = 0; round < 300; round++) {
		struct rb_harvest_result res;
		assert_int_equal(harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res), 0);
		stored += res.n_artifacts;
		changed += res.skipped_by_reason[RB_HARVEST_CHANGED];
		links += res.skipped_by_reason[RB_HARVEST_SYMLINK];
		for (size_t i = 0; i < res.n_artifacts; i++) {
			char *data;
			size_t dlen;
			read_object(f, res.artifacts[i].digest, &data, &dlen);
			assert_null(memmem(data, dlen, f->secret_text, strlen(f->secret_text)));
			free(data);
		}
		rb_harvest_result_free(&res);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(ofd);
	print_message("swap race: %" PRIu64 " stored, %" PRIu64 " changed, %" PRIu64 " symlinks over 300 harvests\n",
	              stored, changed, links);
	assert_true(stored > 0);
	assert_true(links > 0);
	assert_int_equal(store_contains(f, f->secret_text), 0);
}

/* ---- scrubbing ---- */

#define KEY "AKIAIOSFODNN7EXAMPLE"
static int test_scrub(void *ctx, const char *in, size_t len, char **out, size_t *out_len, json_t **redactions,
                      struct rb_error *err)
{
	int *calls = ctx;
	(*calls)++;
	size_t klen = strlen(KEY), n = 0;
	for (const char *p = in; (p = memmem(p, len - (size_t)(p - in), KEY, klen)); p += klen)
		n++;
	if (n == 0) {
		*out = NULL; /* unchanged */
		*redactions = NULL;
		return 0;
	}
	static const char repl[] = "[REDACTED:aws]";
	char *o = malloc(len + n * sizeof repl), *w = o;
	const char *r = in, *hit;
	while ((hit = memmem(r, len - (size_t)(r - in), KEY, klen))) {
		memcpy(w, r, (size_t)(hit - r));
		w += hit - r;
		memcpy(w, repl, sizeof repl - 1);
		w += sizeof repl - 1;
		r = hit + klen;
	}
	memcpy(w, r, len - (size_t)(r - in));
	w += len - (size_t)(r - in);
	*out = o;
	*out_len = (size_t)(w - o);
	*redactions = json_pack("{s:I}", "aws_access_key", (json_int_t)n);
	return 0;
}

static int failing_scrub(void *ctx, const char *in, size_t len, char **out, size_t *out_len, json_t **redactions,
                         struct rb_error *err)
{
	return rb_error_set(err, 0, "scrubber refused");
}

static void test_scrub_applied(void **state)
{
	struct fx *f = *state;
	const char *creds = "id=" KEY "\nagain " KEY " end\n";
	puts_(f->out, "creds.txt", creds);
	puts_(f->out, "plain.txt", "nothing to see");
	int calls = 0;
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, test_scrub, &calls, NULL, NULL, &res), 0);
	assert_int_equal(calls, 4); /* two files, and their two paths */
	const struct rb_harvest_artifact *a = artifact(&res, "creds.txt");
	assert_non_null(a);
	assert_int_equal(a->original_size, strlen(creds));
	assert_int_equal(a->redaction_count, 2);
	assert_int_equal(json_integer_value(json_object_get(a->redactions, "aws_access_key")), 2);
	char *data;
	size_t len;
	read_object(f, a->digest, &data, &len);
	assert_int_equal(a->size, len);
	assert_null(memmem(data, len, KEY, strlen(KEY)));
	assert_non_null(memmem(data, len, "[REDACTED:aws]", 14));
	char d[RB_ARTIFACT_DIGEST_LEN];
	digest_of(data, len, d);
	assert_string_equal(a->digest, d); /* the digest is of what was stored */
	free(data);
	a = artifact(&res, "plain.txt");
	assert_int_equal(a->redaction_count, 0);
	assert_int_equal(a->size, a->original_size);
	assert_int_equal(res.redactions_total, 2);
	_cleanup_json_ json_t *j = rb_harvest_json(&res);
	assert_int_equal(json_integer_value(json_object_get(j, "redactions_total")), 2);
	rb_harvest_result_free(&res);
	assert_int_equal(store_contains(f, KEY), 0);

	/* control: unscrubbed, the key lands in the store */
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res), 0);
	assert_int_equal(store_contains(f, KEY), 1);
	rb_harvest_result_free(&res);
}

static void test_scrub_failure_not_stored(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "creds.txt", "id=" KEY);
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, failing_scrub, NULL, NULL, NULL, &res), 0);
	/* the scrubber fails on the name too: it is never recorded unscrubbed */
	assert_skip(&res, "[REDACTED:scrub-failed]", RB_HARVEST_SCRUB_FAILED);
	assert_true(skipped(&res, "[REDACTED:scrub-failed]")->path_redacted);
	assert_int_equal(res.n_artifacts, 0);
	assert_int_equal(store_contains(f, KEY), 0);
	assert_int_equal(g_objects, 0);
	rb_harvest_result_free(&res);
}

/* The real scrubber (scrub/scrub.h) plugged in through its adapter. */
static void test_with_runbox_scrubber(void **state)
{
	struct fx *f = *state;
	static const char token[] = "rbx1.tok-3f9a1c77e2b54d0a9c1e";
	static const char token_b64[] = "cmJ4MS50b2stM2Y5YTFjNzdlMmI1NGQwYTljMWU="; /* base64 of token */
	static const char aws[] = "AKIAQ3EGRVSM6ZJ7WX2B";
	const struct rb_scrub_secret sec = {.label = "run-token", .value = token, .len = strlen(token)};
	struct rb_scrubber *scrubber = NULL;
	struct rb_error err = {0};
	if (rb_scrub_new_labeled(&sec, 1, &scrubber, &err) != 0)
		fail_msg("scrubber: %s", err.msg);
	char text[512];
	snprintf(text, sizeof text, "token %s\nencoded %s\naws_access_key_id = %s\n", token, token_b64, aws);
	puts_(f->out, "leaky.txt", text);
	puts_(f->out, "plain.txt", "just an ordinary sentence about apples\n");

	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, rb_scrub_harvest_cb, scrubber, NULL, NULL, &res), 0);
	const struct rb_harvest_artifact *a = artifact(&res, "leaky.txt");
	assert_non_null(a);
	assert_true(a->redaction_count >= 3);
	assert_non_null(json_object_get(a->redactions, "aws-access-key-id"));
	assert_int_equal(store_contains(f, token), 0);
	assert_int_equal(store_contains(f, token_b64), 0);
	assert_int_equal(store_contains(f, aws), 0);
	/* control: ordinary text is stored as it was */
	a = artifact(&res, "plain.txt");
	assert_int_equal(a->redaction_count, 0);
	assert_int_equal(store_contains(f, "ordinary sentence about apples"), 1);
	rb_harvest_result_free(&res);
	rb_scrub_free(scrubber);
}

/* Names are recorded scrubbed: a file named after a secret, a hardlink's first name. */
static void test_paths_scrubbed(void **state)
{
	struct fx *f = *state;
	mkdir_in(f->out, "sub");
	puts_(f->out, "sub/" KEY ".txt", "content");
	char a[4200], b[4200];
	snprintf(a, sizeof a, "%s/sub/" KEY ".txt", f->out);
	snprintf(b, sizeof b, "%s/zz-link", f->out);
	assert_int_equal(link(a, b), 0);
	puts_(f->out, "plain.txt", "nothing");
	int calls = 0;
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, test_scrub, &calls, NULL, NULL, &res), 0);
	/* the walk meets either name first: that one is the artifact, the other the hardlink */
	const struct rb_harvest_artifact *art = artifact(&res, "sub/[REDACTED:aws].txt");
	const struct rb_harvest_skip *sk = skipped(&res, art ? "zz-link" : "sub/[REDACTED:aws].txt");
	assert_non_null(sk);
	assert_int_equal(sk->reason, RB_HARVEST_HARDLINK);
	if (art) {
		assert_true(art->path_redacted);
		assert_string_equal(sk->other, "sub/[REDACTED:aws].txt");
		assert_true(sk->other_redacted);
		assert_false(sk->path_redacted);
	} else {
		assert_false(artifact(&res, "zz-link")->path_redacted);
		assert_string_equal(sk->other, "zz-link");
		assert_true(sk->path_redacted);
		assert_false(sk->other_redacted);
	}
	assert_non_null(artifact(&res, "plain.txt"));
	assert_false(artifact(&res, "plain.txt")->path_redacted); /* control: an ordinary name stays */
	_cleanup_json_ json_t *j = rb_harvest_json(&res);
	_cleanup_free_ char *text = json_dumps(j, 0);
	assert_null(strstr(text, KEY));
	assert_non_null(strstr(text, "\"path_redacted\": true"));
	rb_harvest_result_free(&res);

	/* control: without a scrubber the name is recorded as it is */
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res), 0);
	assert_true(artifact(&res, "sub/" KEY ".txt") || skipped(&res, "sub/" KEY ".txt"));
	rb_harvest_result_free(&res);
}

/* ---- permissions, mounts, names ---- */

/* The rootless case: the runner cannot read what a sandbox user wrote 0600 under a
 * subordinate id. As root this runs the harvest as nobody over root's 0600 file. */
static void test_unreadable_recorded(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "public", "everyone");
	puts_(f->out, "private", "owner only");
	char p[PATH_MAX];
	snprintf(p, sizeof p, "%s/private", f->out);
	assert_int_equal(chmod(p, geteuid() == 0 ? 0600 : 0), 0);
	if (geteuid() != 0) {
		struct rb_harvest_result res;
		harvest(f, &res);
		assert_skip(&res, "private", RB_HARVEST_UNREADABLE);
		assert_non_null(artifact(&res, "public"));
		rb_harvest_result_free(&res);
		return;
	}
	assert_int_equal(chmod(f->base, 0755), 0);
	assert_int_equal(mkdir(f->store, 0755), 0);
	if (chown(f->store, 65534, 65534) < 0) {
		if (errno == EINVAL || errno == EPERM)
			skip(); /* root of a user namespace without 65534 mapped */
		fail_msg("chown: %s", strerror(errno));
	}
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		if (access(p, R_OK) == 0)
			_exit(4); /* the control failed: nobody can read it */
		struct rb_harvest_result res;
		if (harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res) != 0)
			_exit(5);
		const struct rb_harvest_skip *s = skipped(&res, "private");
		bool ok = s && s->reason == RB_HARVEST_UNREADABLE && s->other &&
		          strstr(s->other, "Permission denied") && artifact(&res, "public") && res.n_artifacts == 1;
		_exit(ok ? 0 : 3);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(store_contains(f, "owner only"), 0);
}

/* Rootless (runtime/sandbox/nsopen.c): a 0600 file and a 0700 directory of another sandbox user belong to
 * subordinate ids the runner (65534 here) may not read. A helper in a user namespace owned by
 * 65534 that maps those ids opens them for the walk. Control: the same walk without the hook
 * records them unreadable, and 65534 cannot open them itself. */
static void test_reopen_in_sandbox_userns(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	const uid_t other = 200001; /* a sandbox user's host id, mapped below */
	puts_(f->out, "public", "everyone");
	puts_(f->out, "private", "sandbox user only");
	mkdir_in(f->out, "closed");
	char closed[PATH_MAX], p[PATH_MAX], inner[PATH_MAX];
	snprintf(closed, sizeof closed, "%s/closed", f->out);
	puts_(closed, "inner", "inside a closed directory");
	snprintf(p, sizeof p, "%s/private", f->out);
	snprintf(inner, sizeof inner, "%s/inner", closed);
	assert_int_equal(chown(p, other, other), 0);
	assert_int_equal(chmod(p, 0600), 0);
	assert_int_equal(chown(inner, other, other), 0);
	assert_int_equal(chmod(inner, 0600), 0);
	assert_int_equal(chown(closed, other, other), 0);
	assert_int_equal(chmod(closed, 0700), 0);
	assert_int_equal(chmod(f->base, 0755), 0);
	assert_int_equal(mkdir(f->store, 0755), 0);
	if (chown(f->store, 65534, 65534) < 0)
		skip(); /* root of a user namespace without 65534 mapped */

	/* The sandbox's user namespace: owned by 65534, 0 -> 65534 and 1..10 -> 200000.. */
	int ready[2];
	assert_int_equal(pipe(ready), 0);
	pid_t sb = fork();
	assert_true(sb >= 0);
	if (sb == 0) {
		close(ready[0]);
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0 ||
		    unshare(CLONE_NEWUSER) < 0)
			_exit(2);
		if (write(ready[1], "x", 1) != 1)
			_exit(3);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char c;
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	char map[64], path[64];
	struct rb_error err = {0};
	snprintf(map, sizeof map, "0 65534 1\n1 200000 10\n");
	snprintf(path, sizeof path, "/proc/%d/uid_map", (int)sb);
	assert_int_equal(rb_write_file(path, map, &err), 0);
	snprintf(path, sizeof path, "/proc/%d/gid_map", (int)sb);
	assert_int_equal(rb_write_file(path, map, &err), 0);
	snprintf(path, sizeof path, "/proc/%d/ns/user", (int)sb);
	int userns = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(userns >= 0);

	pid_t runner = fork();
	assert_true(runner >= 0);
	if (runner == 0) {
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		if (access(p, R_OK) == 0 || access(inner, R_OK) == 0)
			_exit(4); /* the control failed: the runner could read them itself */
		struct rb_harvest_result res;
		if (harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res) != 0)
			_exit(5);
		const struct rb_harvest_skip *s1 = skipped(&res, "private"), *s2 = skipped(&res, "closed");
		bool control = s1 && s1->reason == RB_HARVEST_UNREADABLE && s2 && s2->reason == RB_HARVEST_UNREADABLE &&
		               !artifact(&res, "private");
		rb_harvest_result_free(&res);
		if (!control)
			_exit(6);

		struct rb_nsopener o;
		struct rb_error e = {0};
		if (rb_nsopener_prepare(&o, userns, &e) < 0)
			_exit(7);
		struct rb_harvest_hooks hooks = {.reopen = rb_nsopener_open, .reopen_ctx = &o};
		int out = open(f->out, O_PATH | O_DIRECTORY | O_CLOEXEC);
		int r = rb_harvest_hooked(out, NULL, NULL, NULL, f->store, &hooks, &res, &e);
		close(out);
		rb_nsopener_close(&o);
		bool ok = r == 0 && artifact(&res, "private") && artifact(&res, "closed/inner") &&
		          artifact(&res, "public") && res.n_artifacts == 3 && res.skipped_total == 0;
		if (!ok)
			print_error("reopen: r=%d artifacts=%zu skipped=%" PRIu64 " %s\n", r, res.n_artifacts,
			            res.skipped_total, e.msg);
		rb_harvest_result_free(&res);
		_exit(ok ? 0 : 8);
	}
	int status;
	assert_int_equal(waitpid(runner, &status, 0), runner);
	kill(sb, SIGKILL);
	waitpid(sb, NULL, 0);
	close(userns);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(store_contains(f, "sandbox user only"), 1);
	assert_int_equal(store_contains(f, "inside a closed directory"), 1);
}

/* A mount below out (the sandbox cannot make one, but the walk must not cross one). */
static void test_mount_point_not_crossed(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	mkdir_in(f->out, "mnt");
	puts_(f->out, "top", "top file");
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* our own mount namespace: nothing of the host's mounts changes */
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
			_exit(10);
		char m[PATH_MAX];
		snprintf(m, sizeof m, "%s/mnt", f->out);
		if (mount("tmpfs", m, "tmpfs", 0, "size=1m") < 0)
			_exit(10);
		puts_(m, "under", "mounted content");
		char under[PATH_MAX];
		snprintf(under, sizeof under, "%s/under", m);
		if (access(under, R_OK) < 0)
			_exit(4); /* control */
		struct rb_harvest_result res;
		if (harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res) != 0)
			_exit(5);
		const struct rb_harvest_skip *s = skipped(&res, "mnt");
		_exit(s && s->reason == RB_HARVEST_MOUNT_POINT && res.n_artifacts == 1 ? 0 : 3);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 10)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(store_contains(f, "mounted content"), 0);
	assert_int_equal(store_contains(f, "top file"), 1);
}

static void test_odd_names(void **state)
{
	struct fx *f = *state;
	puts_(f->out, "bad\xff\xfename", "latin");
	puts_(f->out, "new\nline", "nl");
	puts_(f->out, "caf\xc3\xa9", "utf8");
	struct rb_harvest_result res;
	harvest(f, &res);
	assert_int_equal(res.n_artifacts, 3);
	_cleanup_json_ json_t *j = rb_harvest_json(&res);
	assert_non_null(j);
	_cleanup_free_ char *s = json_dumps(j, JSON_COMPACT);
	assert_non_null(s);
	assert_non_null(strstr(s, "\"path\":\"bad\\\\xff\\\\xfename\",\"path_escaped\":true"));
	assert_non_null(strstr(s, "new\\nline"));
	rb_harvest_result_free(&res);
}

/* ---- the store ---- */

/* ---- large files: their SHA-256 and write behind the walk (runtime/run/store_behind.h) ---- */

#define BIG_LEN ((3U << 20) / 2) /* above the 1 MiB from which a file is stored behind */

/* BIG_LEN bytes of text, a different text for each seed. */
static char *big_text(unsigned seed)
{
	char *b = malloc(BIG_LEN);
	assert_non_null(b);
	for (size_t i = 0; i < BIG_LEN; i++)
		b[i] = i % 64 == 63 ? '\n' : (char)('a' + (i / 64 + seed) % 26);
	return b;
}

/* Every artifact's object is its digest's content (rb_artifact_read checks the digest). */
static void assert_objects_match(const struct fx *f, const struct rb_harvest_result *res)
{
	for (size_t i = 0; i < res->n_artifacts; i++) {
		char *data;
		size_t len;
		struct rb_error err = {0};
		if (rb_artifact_read(f->store, res->artifacts[i].digest, &data, &len, &err) != 0)
			fail_msg("%s: %s", res->artifacts[i].path, err.msg);
		assert_int_equal(len, res->artifacts[i].size);
		free(data);
	}
}

static void test_large_files_stored_behind(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *clean = big_text(0), *leaky = big_text(1);
	memcpy(leaky + BIG_LEN / 2, KEY, strlen(KEY));
	put(f->out, "clean.txt", clean, BIG_LEN);
	put(f->out, "same.txt", clean, BIG_LEN); /* one object for both */
	put(f->out, "leaky.txt", leaky, BIG_LEN);
	puts_(f->out, "small.txt", "stored in line\n");
	int calls = 0;
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, test_scrub, &calls, NULL, NULL, &res), 0);
	assert_true(res.complete);
	assert_int_equal(res.n_artifacts, 4);
	assert_int_equal(res.objects_new, 3);
	assert_int_equal(res.bytes_new,
	                 2 * (uint64_t)BIG_LEN + strlen("stored in line\n") - strlen(KEY) + strlen("[REDACTED:aws]"));
	assert_int_equal(res.bytes_read, 3 * (uint64_t)BIG_LEN + strlen("stored in line\n"));
	assert_objects_match(f, &res);
	/* a file the scrubber found nothing in is stored byte for byte, under the digest of its bytes */
	char d[RB_ARTIFACT_DIGEST_LEN];
	digest_of(clean, BIG_LEN, d);
	const struct rb_harvest_artifact *a = artifact(&res, "clean.txt");
	assert_string_equal(a->digest, d);
	assert_int_equal(a->size, BIG_LEN);
	assert_int_equal(a->redaction_count, 0);
	assert_string_equal(artifact(&res, "same.txt")->digest, d);
	/* one with a redaction is stored rewritten, counted */
	a = artifact(&res, "leaky.txt");
	assert_int_equal(a->original_size, BIG_LEN);
	assert_int_equal(a->size, BIG_LEN - strlen(KEY) + strlen("[REDACTED:aws]"));
	assert_int_equal(a->redaction_count, 1);
	assert_int_equal(res.redactions_total, 1);
	assert_int_equal(store_contains(f, KEY), 0);
	assert_int_equal(store_contains(f, "[REDACTED:aws]"), 1);
	assert_int_equal(g_objects, 3); /* no temporary file left */
	rb_harvest_result_free(&res);

	/* control: unscrubbed, the key reaches the store */
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res), 0);
	assert_int_equal(store_contains(f, KEY), 1);
	rb_harvest_result_free(&res);
}

/* The file still being stored counts against max_files. */
static void test_large_files_count_cap(void **state)
{
	struct fx *f = *state;
	for (unsigned i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof name, "big%u", i);
		_cleanup_free_ char *b = big_text(i);
		put(f->out, name, b, BIG_LEN);
	}
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	caps.max_files = 2;
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, &caps, NULL, NULL, NULL, NULL, &res), 0);
	assert_int_equal(res.n_artifacts, 2);
	assert_int_equal(res.skipped_by_reason[RB_HARVEST_OVER_COUNT_CAP], 1);
	assert_int_equal(res.bytes_read, 2 * (uint64_t)BIG_LEN);
	assert_objects_match(f, &res);
	rb_harvest_result_free(&res);
	/* control: with room for three, three */
	caps.max_files = 3;
	assert_int_equal(harvest_caps(f, &caps, NULL, NULL, NULL, NULL, &res), 0);
	assert_int_equal(res.n_artifacts, 3);
	assert_int_equal(res.skipped_total, 0);
	rb_harvest_result_free(&res);
}

/* A store that cannot be written fails the harvest, naming the file, as in line. */
static void test_large_file_store_fails(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *b = big_text(0);
	put(f->out, "big.bin", b, BIG_LEN);
	char store[PATH_MAX + 8];
	snprintf(store, sizeof store, "%s/store", f->secret); /* below a regular file */
	int fd = open(f->out, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct rb_harvest_result res;
	struct rb_error err = {0};
	assert_int_equal(rb_harvest(fd, NULL, NULL, NULL, store, &res, &err), -1);
	assert_false(res.complete);
	assert_int_equal(res.n_artifacts, 0);
	assert_non_null(strstr(err.msg, "harvest `big.bin`"));
	rb_harvest_result_free(&res);
	/* control: the same file into a store that can be written */
	assert_int_equal(rb_harvest(fd, NULL, NULL, NULL, f->store, &res, &err), 0);
	assert_int_equal(res.n_artifacts, 1);
	rb_harvest_result_free(&res);
	close(fd);
}

/* A file rewritten (a secret put in, then cut short) while the harvest still stores it: the
 * object holds the bytes that were read and scrubbed, under their digest; never the new ones. */
struct rewrite_ctx {
	const char *out;
	char first[64]; /* the file whose open came first */
	int calls;
};

static void rewrite_first(void *ctx, int parent_dirfd, const char *name)
{
	struct rewrite_ctx *c = ctx;
	if (c->calls++ == 0) {
		snprintf(c->first, sizeof c->first, "%s", name);
		return;
	}
	if (c->calls != 2)
		return;
	/* the first file was read and is being stored: rewrite it in place, then shrink it */
	int fd = openat(parent_dirfd, c->first, O_WRONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	for (size_t off = 0; off + strlen(KEY) < BIG_LEN; off += 4096)
		assert_int_equal(pwrite(fd, KEY, strlen(KEY), (off_t)off), (ssize_t)strlen(KEY));
	assert_int_equal(ftruncate(fd, BIG_LEN / 3), 0);
	close(fd);
}

static void test_large_file_rewritten_while_stored(void **state)
{
	struct fx *f = *state;
	_cleanup_free_ char *a = big_text(0), *b = big_text(1);
	put(f->out, "a.txt", a, BIG_LEN);
	put(f->out, "b.txt", b, BIG_LEN);
	struct rewrite_ctx rc = {.out = f->out};
	int calls = 0;
	struct rb_harvest_result res;
	assert_int_equal(harvest_caps(f, NULL, test_scrub, &calls, rewrite_first, &rc, &res), 0);
	assert_int_equal(rc.calls, 2);
	assert_int_equal(res.n_artifacts, 2);
	assert_objects_match(f, &res);
	const struct rb_harvest_artifact *first = artifact(&res, rc.first);
	assert_non_null(first);
	char d[RB_ARTIFACT_DIGEST_LEN];
	digest_of(strcmp(rc.first, "a.txt") == 0 ? a : b, BIG_LEN, d);
	assert_string_equal(first->digest, d);
	assert_int_equal(first->size, BIG_LEN);
	assert_int_equal(store_contains(f, KEY), 0);
	rb_harvest_result_free(&res);
	/* control: the file does hold the key now, and an unscrubbed harvest stores it */
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &res), 0);
	assert_int_equal(store_contains(f, KEY), 1);
	rb_harvest_result_free(&res);
}

/* ---- large files scrubbed two at a time (rb_harvest_hooks.scrub_concurrent) ---- */

/* rb_scrub_harvest_cb, slowed on large inputs so that two calls overlap, counting how many
 * ran at once; fails on a marker, as a scrubber out of memory would. */
struct overlap_ctx {
	struct rb_scrubber *s;
	int now, most;
};

static int overlap_scrub(void *ctx, const char *in, size_t len, char **out, size_t *out_len, json_t **redactions,
                         struct rb_error *err)
{
	struct overlap_ctx *c = ctx;
	int now = __atomic_add_fetch(&c->now, 1, __ATOMIC_SEQ_CST);
	for (int most = __atomic_load_n(&c->most, __ATOMIC_SEQ_CST); now > most;)
		if (__atomic_compare_exchange_n(&c->most, &most, now, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
			break;
	if (len >= BIG_LEN)
		usleep(50000);
	int r = memmem(in, len, "FAIL-ME", 7) ? rb_error_set(err, 0, "scrubber refused")
	                                      : rb_scrub_harvest_cb(c->s, in, len, out, out_len, redactions, err);
	__atomic_sub_fetch(&c->now, 1, __ATOMIC_SEQ_CST);
	return r;
}

static int harvest_hooked(const char *out, const char *store, bool concurrent, struct overlap_ctx *c,
                          struct rb_harvest_result *res)
{
	int fd = open(out, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	struct rb_harvest_hooks hooks = {.scrub_concurrent = concurrent};
	struct rb_error err = {0};
	int r = rb_harvest_hooked(fd, NULL, overlap_scrub, c, store, &hooks, res, &err);
	if (r != 0)
		print_error("harvest: %s\n", err.msg);
	close(fd);
	return r;
}

static void test_large_files_scrubbed_two_at_a_time(void **state)
{
	struct fx *f = *state;
	static const char token[] = "rbx1.tok-7d2f4a9c1e8b3056af";
	const struct rb_scrub_secret sec = {.label = "run-token", .value = token, .len = strlen(token)};
	struct overlap_ctx c = {0};
	struct rb_error err = {0};
	if (rb_scrub_new_labeled(&sec, 1, &c.s, &err) != 0)
		fail_msg("scrubber: %s", err.msg);
	for (unsigned i = 0; i < 6; i++) {
		char name[16];
		snprintf(name, sizeof name, "f%u.txt", i);
		_cleanup_free_ char *b = big_text(i < 2 ? 0 : i); /* f0 and f1 equal */
		if (i >= 3)                                       /* three with secrets, at different places */
			memcpy(b + BIG_LEN / (i - 1), token, strlen(token));
		if (i == 5)
			memcpy(b + 100, "aws_access_key_id = AKIAQ3EGRVSM6ZJ7WX2B\n", 41);
		put(f->out, name, b, BIG_LEN);
	}
	_cleanup_free_ char *bad = big_text(9);
	memcpy(bad + 10, "FAIL-ME", 7);
	put(f->out, "refused.txt", bad, BIG_LEN);
	puts_(f->out, "small.txt",
	      "in line, token "
	      "rbx1.tok-7d2f4a9c1e8b3056af\n");

	struct rb_harvest_result two, one;
	assert_int_equal(harvest_hooked(f->out, f->store, true, &c, &two), 0);
	assert_int_equal(c.most, 2); /* two scrubs did run at once */
	assert_objects_match(f, &two);
	assert_int_equal(store_contains(f, token), 0);
	assert_int_equal(store_contains(f, "AKIAQ3EGRVSM6ZJ7WX2B"), 0);
	assert_int_equal(store_contains(f, "FAIL-ME"), 0);
	assert_skip(&two, "refused.txt", RB_HARVEST_SCRUB_FAILED);
	assert_string_equal(skipped(&two, "refused.txt")->other, "scrubber refused");

	/* control: one at a time, into a store of its own, the same result */
	char store1[PATH_MAX + 8];
	snprintf(store1, sizeof store1, "%s/store1", f->base);
	c.most = 0;
	assert_int_equal(harvest_hooked(f->out, store1, false, &c, &one), 0);
	assert_int_equal(c.most, 1);
	assert_int_equal(two.n_artifacts, 7);
	assert_int_equal(one.n_artifacts, two.n_artifacts);
	for (size_t i = 0; i < one.n_artifacts; i++) {
		const struct rb_harvest_artifact *a = &one.artifacts[i], *b = &two.artifacts[i];
		assert_string_equal(a->path, b->path);
		assert_string_equal(a->digest, b->digest);
		assert_int_equal(a->size, b->size);
		assert_int_equal(a->original_size, b->original_size);
		assert_int_equal(a->redaction_count, b->redaction_count);
		assert_true((!a->redactions && !b->redactions) || json_equal(a->redactions, b->redactions));
	}
	assert_true(artifact(&two, "f5.txt")->redaction_count >= 2);
	assert_int_equal(artifact(&two, "f2.txt")->redaction_count, 0);
	assert_int_equal(one.redactions_total, two.redactions_total);
	assert_int_equal(one.objects_new, two.objects_new);
	assert_int_equal(two.objects_new, 6); /* f0 and f1 are one object */
	assert_int_equal(one.bytes_new, two.bytes_new);
	assert_int_equal(one.bytes_read, two.bytes_read);
	assert_int_equal(one.skipped_total, two.skipped_total);
	rb_harvest_result_free(&one);
	rb_harvest_result_free(&two);

	/* control: unscrubbed, the token reaches the store */
	assert_int_equal(harvest_caps(f, NULL, NULL, NULL, NULL, NULL, &one), 0);
	assert_true(store_contains(f, token) > 0);
	rb_harvest_result_free(&one);
	rb_scrub_free(c.s);
}

/* The reopen hook may fork (rb_nsopener's helper): it is only ever called with the file behind
 * done, the process single-threaded again. A user that cannot read the root-owned 0600 files
 * harvests them among large files scrubbed slowly behind the walk. */
static int threads_now(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

struct single_ctx {
	int reopens, reopens_threaded; /* reopen calls, and those made with a thread running */
	int most_threads;              /* seen by the race hook: the control */
};

static int counting_reopen(void *ctx, int dirfd, const char *name, uint64_t flags, uint64_t resolve)
{
	struct single_ctx *c = ctx;
	c->reopens++;
	c->reopens_threaded += threads_now() > 1;
	errno = EACCES;
	return -1;
}

static void counting_race(void *ctx, int parent_dirfd, const char *name)
{
	struct single_ctx *c = ctx;
	int n = threads_now();
	c->most_threads = n > c->most_threads ? n : c->most_threads;
}

static void test_reopen_hook_single_threaded(void **state)
{
	struct fx *f = *state;
	if (geteuid() != 0)
		skip();
	for (unsigned i = 0; i < 4; i++) {
		char name[16];
		snprintf(name, sizeof name, "big%u", i);
		_cleanup_free_ char *b = big_text(i);
		put(f->out, name, b, BIG_LEN);
		snprintf(name, sizeof name, "private%u", i);
		puts_(f->out, name, "root only");
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/%s", f->out, name);
		assert_int_equal(chmod(p, 0600), 0);
	}
	assert_int_equal(chmod(f->base, 0755), 0);
	assert_int_equal(mkdir(f->store, 0755), 0);
	assert_int_equal(chown(f->store, 65534, 65534), 0);
	struct rb_error err = {0};
	struct overlap_ctx oc = {0};
	assert_int_equal(rb_scrub_new(NULL, 0, &oc.s, &err), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		struct single_ctx c = {0};
		struct rb_harvest_hooks hooks = {.race = counting_race,
		                                 .race_ctx = &c,
		                                 .reopen = counting_reopen,
		                                 .reopen_ctx = &c,
		                                 .scrub_concurrent = true};
		int fd = open(f->out, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct rb_harvest_result res;
		if (rb_harvest_hooked(fd, NULL, overlap_scrub, &oc, f->store, &hooks, &res, &err) != 0)
			_exit(3);
		if (res.n_artifacts != 4 || res.skipped_by_reason[RB_HARVEST_UNREADABLE] != 4 || c.reopens != 4)
			_exit(4);
		if (c.reopens_threaded != 0)
			_exit(5);
		if (c.most_threads < 2) /* control: files were being scrubbed behind meanwhile */
			_exit(6);
		_exit(0);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	rb_scrub_free(oc.s);
}

static void test_store_layout_and_digests(void **state)
{
	struct fx *f = *state;
	struct rb_error err = {0};
	char d1[RB_ARTIFACT_DIGEST_LEN], d2[RB_ARTIFACT_DIGEST_LEN];
	bool created = false;
	assert_int_equal(rb_artifact_store(f->store, "abc", 3, d1, &created, &err), 0);
	assert_true(created);
	assert_string_equal(d1, "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	char p[PATH_MAX];
	assert_int_equal(rb_artifact_path(f->store, d1, p, &err), 0);
	char want[PATH_MAX];
	snprintf(want, sizeof want, "%s/sha256/ba/ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	         f->store);
	assert_string_equal(p, want);
	struct stat st1, st2;
	assert_int_equal(stat(p, &st1), 0);
	/* deduplicated: the second store writes nothing */
	assert_int_equal(rb_artifact_store(f->store, "abc", 3, d2, &created, &err), 0);
	assert_false(created);
	assert_string_equal(d1, d2);
	assert_int_equal(stat(p, &st2), 0);
	assert_int_equal(st1.st_ino, st2.st_ino);
	/* a damaged object (wrong size) is replaced */
	assert_int_equal(truncate(p, 1), 0);
	assert_int_equal(rb_artifact_store(f->store, "abc", 3, d2, &created, &err), 0);
	assert_true(created);
	assert_int_equal(stat(p, &st2), 0);
	assert_int_equal(st2.st_size, 3);
	/* no temporary file left */
	store_contains(f, "\x01never");
	assert_int_equal(g_objects, 1);

	/* digests become paths: only the exact form is accepted */
	assert_int_equal(rb_artifact_path(f->store, d1 + 7, p, &err), 0);
	assert_string_equal(p, want);
	const char *bad[] = {
	    "sha256:../../../../etc/passwd",
	    "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
	    "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015a",
	    "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad0",
	    "sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	    "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f2/015ad",
	    "",
	    NULL,
	};
	for (size_t i = 0; i < RB_ARRAY_SIZE(bad); i++) {
		assert_false(rb_artifact_digest_valid(bad[i]));
		assert_int_equal(rb_artifact_path(f->store, bad[i], p, &err), -1);
		assert_non_null(strstr(err.msg, "invalid artifact digest"));
	}
}

static void test_bad_out_fd(void **state)
{
	struct fx *f = *state;
	struct rb_harvest_result res;
	struct rb_error err = {0};
	assert_int_equal(rb_harvest(-1, NULL, NULL, NULL, f->store, &res, &err), -1);
	assert_false(res.complete);
	assert_non_null(strstr(err.msg, "out directory"));
	rb_harvest_result_free(&res);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_regular_files),
	    T(test_symlink_to_secret),
	    T(test_symlinked_dir_not_followed),
	    T(test_hardlinks_counted_once),
	    T(test_fifo_does_not_block),
	    T(test_device_node),
	    T(test_socket),
	    T(test_many_files_count_cap),
	    T(test_sparse_file_never_read),
	    T(test_total_cap_and_skip_records),
	    T(test_deep_tree),
	    T(test_swap_file_for_symlink),
	    T(test_swap_file_for_fifo),
	    T(test_swap_dir_for_symlink),
	    T(test_swap_race),
	    T(test_scrub_applied),
	    T(test_scrub_failure_not_stored),
	    T(test_with_runbox_scrubber),
	    T(test_paths_scrubbed),
	    T(test_unreadable_recorded),
	    T(test_reopen_in_sandbox_userns),
	    T(test_mount_point_not_crossed),
	    T(test_odd_names),
	    T(test_large_files_stored_behind),
	    T(test_large_files_count_cap),
	    T(test_large_file_store_fails),
	    T(test_large_file_rewritten_while_stored),
	    T(test_large_files_scrubbed_two_at_a_time),
	    T(test_reopen_hook_single_threaded),
	    T(test_store_layout_and_digests),
	    T(test_bad_out_fd),
	};
	/* RB_TEST_FILTER=test_deep_tree runs one test (cmocka's glob). */
	if (getenv("RB_TEST_FILTER"))
		cmocka_set_test_filter(getenv("RB_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}

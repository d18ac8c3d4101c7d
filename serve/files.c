/* File calls of runbox serve: a path under /workspace, resolved by openat2 with
 * RESOLVE_IN_ROOT from the sandbox's own /workspace descriptor, so a link planted inside the
 * sandbox never leads to a host path; bounded by RB_SERVE_FILE_CAP. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "serve/serve.h"

/* The path below /workspace, or NULL with err: "/workspace/a/b" gives "a/b". */
static const char *below_workspace(const char *path, struct rb_error *err)
{
	static const char ws[] = "/workspace/";
	if (!path || strncmp(path, ws, sizeof ws - 1) != 0 || !path[sizeof ws - 1]) {
		rb_error_setk(err, RB_ERR_INPUT, 0, "query `path`: a file under /workspace/, not `%s`",
		              path ? path : "");
		return NULL;
	}
	return path + sizeof ws - 1;
}

/* Opens rel inside the workspace as its root: `..` and absolute links stay inside it, magic
 * links (/proc/PID/fd) are refused, the last component is never followed (O_NOFOLLOW). */
static int open_in(int ws, const char *rel, int flags, struct rb_error *err)
{
	struct open_how how = {
	    .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC | O_LARGEFILE), /* openat2 adds none */
	    .mode = (flags & O_CREAT) ? 0644 : 0,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, ws, rel, &how, sizeof how);
	if (fd < 0)
		rb_error_set(err, errno, "/workspace/%s", rel);
	return fd;
}

unsigned rb_serve_file_put(struct rb_serve *sv, const char *sid, const char *path, const char *data, size_t len,
                           json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	const char *rel = below_workspace(path, &err);
	int ws = -1;
	uid_t uid;
	gid_t gid;
	bool chown_to = false;
	if (!rel || rb_serve_workspace(sv, sid, &ws, &uid, &gid, &chown_to, &err) < 0)
		return rb_serve_error(&err, reply);
	/* What is written is recorded first, durably, as a process's text is before it starts. */
	char hex[65], digest[72];
	rb_sha256_hex(data, len, hex);
	snprintf(digest, sizeof digest, "sha256:%s", hex);
	if (rb_serve_record_file(sv, sid, "file_write", path, len, digest, &err) < 0) {
		close(ws);
		return rb_serve_error(&err, reply);
	}
	/* Made as the sandbox's root where that is not the daemon's user (as root): the
	 * sandbox's mount takes only ids its user namespace maps, and the file is then its root's.
	 * setfsuid and setfsgid are this thread's alone; set back at once. */
	uid_t ouid = 0;
	gid_t ogid = 0;
	if (chown_to) {
		ogid = (gid_t)setfsgid(gid);
		ouid = (uid_t)setfsuid(uid);
	}
	int fd = open_in(ws, rel, O_WRONLY | O_CREAT | O_TRUNC, &err);
	if (chown_to) {
		setfsuid(ouid);
		setfsgid(ogid);
	}
	close(ws);
	if (fd < 0)
		return rb_serve_error(&err, reply);
	int r = rb_write_all(fd, data, len) < 0 ? rb_error_set(&err, errno, "write %s", path) : 0;
	if (close(fd) < 0 && r == 0)
		r = rb_error_set(&err, errno, "close %s", path);
	if (r < 0)
		return rb_serve_error(&err, reply);
	*reply = json_pack("{s:s, s:I, s:s}", "path", path, "size", (json_int_t)len, "sha256", digest);
	return 200;
}

unsigned rb_serve_file_get(struct rb_serve *sv, const char *sid, const char *path, char **out, size_t *len,
                           json_t **reply)
{
	struct rb_error err;
	rb_error_clear(&err);
	*out = NULL;
	*len = 0;
	const char *rel = below_workspace(path, &err);
	int ws = -1;
	uid_t uid;
	gid_t gid;
	bool chown_to;
	if (!rel || rb_serve_workspace(sv, sid, &ws, &uid, &gid, &chown_to, &err) < 0)
		return rb_serve_error(&err, reply);
	int fd = open_in(ws, rel, O_RDONLY | O_NONBLOCK, &err);
	close(ws);
	if (fd < 0)
		return rb_serve_error(&err, reply);
	struct stat st;
	int r = 0;
	if (fstat(fd, &st) < 0)
		r = rb_error_set(&err, errno, "stat %s", path);
	else if (!S_ISREG(st.st_mode))
		r = rb_error_setk(&err, RB_ERR_INPUT, 0, "%s: not a regular file", path);
	else if ((uint64_t)st.st_size > RB_SERVE_FILE_CAP)
		r = rb_error_setk(&err, RB_ERR_CONFLICT, EFBIG, "%s: %lld bytes, over the cap of %u", path,
		                  (long long)st.st_size, RB_SERVE_FILE_CAP);
	char *buf = r == 0 ? malloc((size_t)st.st_size + 1) : NULL;
	if (r == 0 && !buf)
		r = rb_error_set(&err, ENOMEM, "%s", path);
	size_t got = 0;
	/* Read to the cap, never past it, though the file grew meanwhile. */
	while (r == 0 && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = rb_error_set(&err, errno, "read %s", path);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	/* What is revealed is recorded before the reply carries it. */
	if (r == 0)
		r = rb_serve_record_file(sv, sid, "file_read", path, got, NULL, &err);
	if (r < 0) {
		free(buf);
		return rb_serve_error(&err, reply);
	}
	*out = buf;
	*len = got;
	return 200;
}

/* Recipe builds (build.h). mmdebstrap runs on the host, as the caller, into a directory of the
 * store's temporary space; what it made is then touched only through descriptors resolved inside
 * that tree (openat2 RESOLVE_IN_ROOT, no symlinks), since packages decide what the tree holds. */
#define _GNU_SOURCE
#include "images/build.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "images/buildlog.h"
#include "images/import.h"
#include "images/recipe.h"
#include "images/store.h"

#define BUILD_MAX_ARGS (16 + RB_RECIPE_MAX_MIRRORS)

struct argv {
	char *v[BUILD_MAX_ARGS + 1];
	unsigned n;
};

static void free_argv(struct argv *a)
{
	for (unsigned i = 0; i < a->n; i++)
		free(a->v[i]);
}

static int add(struct argv *a, struct rb_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int add(struct argv *a, struct rb_error *err, const char *fmt, ...)
{
	if (a->n >= BUILD_MAX_ARGS)
		return rb_error_set(err, E2BIG, "image build: too many arguments for mmdebstrap");
	va_list ap;
	va_start(ap, fmt);
	int r = vasprintf(&a->v[a->n], fmt, ap);
	va_end(ap);
	if (r < 0)
		return rb_error_set(err, ENOMEM, "image build");
	a->n++;
	return 0;
}

/* name1,name2,... of a list (its names were checked: no comma, no space in any). */
static char *joined(char *const *list, unsigned n)
{
	size_t len = 1;
	for (unsigned i = 0; i < n; i++)
		len += strlen(list[i]) + 1;
	char *s = malloc(len), *p = s;
	if (!s)
		return NULL;
	for (unsigned i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "," : "", list[i]);
	*p = '\0';
	return s;
}

static int command(const struct rb_recipe *r, const char *tree, bool verbose, struct argv *a, struct rb_error *err)
{
	char mm[PATH_MAX];
	if (!rb_find_in_path("mmdebstrap", mm, sizeof mm))
		return rb_error_set(err, ENOENT,
		                    "image build: mmdebstrap is not installed (Debian: apt-get install "
		                    "mmdebstrap)");
	if (add(a, err, "%s", mm) < 0 || add(a, err, "--variant=%s", r->variant) < 0 ||
	    add(a, err, "--format=directory") < 0 || (verbose && add(a, err, "--verbose") < 0))
		return -1;
	if (r->arch[0] && add(a, err, "--architectures=%s", r->arch) < 0)
		return -1;
	if (r->n_components) {
		_cleanup_free_ char *c = joined(r->components, r->n_components);
		if (!c || add(a, err, "--components=%s", c) < 0)
			return rb_error_set(err, err->errnum ? err->errnum : ENOMEM, "image build: components");
	}
	if (r->n_packages) {
		_cleanup_free_ char *p = joined(r->packages, r->n_packages);
		if (!p || add(a, err, "--include=%s", p) < 0)
			return rb_error_set(err, err->errnum ? err->errnum : ENOMEM, "image build: packages");
	}
	/* "--" ends the options: the suite, the target and the mirrors are operands. */
	if (add(a, err, "--") < 0 || add(a, err, "%s", r->suite) < 0 || add(a, err, "%s", tree) < 0)
		return -1;
	for (unsigned i = 0; i < r->n_mirrors; i++)
		if (add(a, err, "%s", r->mirrors[i]) < 0)
			return -1;
	return 0;
}

/* mmdebstrap in a process group of its own (so cancelling stops apt and dpkg below it too),
 * until it exits or cancel_fd becomes readable. 0 when it succeeded. */
static int run_mmdebstrap(const struct argv *a, const struct rb_recipe *r, const struct rb_build_opts *o,
                          struct rb_error *err)
{
	if (!a->n || !a->v[0])
		return rb_error_set(err, EINVAL, "image build: no command");
	char epoch[32];
	snprintf(epoch, sizeof epoch, "%lld", (long long)r->source_date_epoch);
	/* With a progress callback, its output is read here (a pipe), never written anywhere. */
	int out_fd = o->log_fd;
	_cleanup_close_ int rd = -1, wr = -1;
	if (o->progress.fn) {
		int pp[2];
		if (pipe2(pp, O_CLOEXEC) < 0)
			return rb_error_set(err, errno, "image build: pipe");
		rd = pp[0], wr = pp[1];
		out_fd = wr;
	}
	pid_t pid = fork();
	if (pid < 0)
		return rb_error_set(err, errno, "image build: fork");
	if (pid == 0) {
		setpgid(0, 0);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGINT, SIG_DFL), signal(SIGTERM, SIG_DFL), signal(SIGPIPE, SIG_DFL);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null < 0 || dup2(null, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)
			_exit(126);
		setenv("SOURCE_DATE_EPOCH", epoch, 1);
		setenv("LC_ALL", "C.UTF-8", 1);
		execv(a->v[0], a->v);
		dprintf(2, "runbox: image build: exec %s: %s\n", a->v[0], strerror(errno));
		_exit(127);
	}
	setpgid(pid, pid);
	if (wr >= 0)
		close(rb_steal_fd(&wr)); /* the child's now: EOF once it and its own children are gone */
	_cleanup_free_ struct rb_buildlog *log = rd >= 0 ? malloc(sizeof *log) : NULL;
	if (rd >= 0 && !log) {
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return rb_error_set(err, ENOMEM, "image build");
	}
	if (log)
		rb_buildlog_init(log, &o->progress);
	_cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	bool cancelled = false;
	for (;;) {
		/* The order of the slots is fixed: the pipe's is last and absent once it ended. */
		struct pollfd p[3] = {{.fd = pfd, .events = POLLIN},
		                      {.fd = o->cancel_fd, .events = POLLIN},
		                      {.fd = rd, .events = POLLIN}};
		int n = poll(p, 3, pfd >= 0 ? -1 : 200);
		if (n < 0 && errno != EINTR)
			break;
		if (!cancelled && n > 0 && o->cancel_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
			cancelled = true;
			kill(-pid, SIGTERM);
		}
		if (rd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			char buf[4096];
			ssize_t got = read(rd, buf, sizeof buf);
			if (got > 0)
				rb_buildlog_feed(log, buf, (size_t)got);
			else if (got == 0 || errno != EINTR)
				close(rb_steal_fd(&rd));
			continue; /* the output drains before the exit is looked at */
		}
		int st;
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid) {
			bool good = !cancelled && WIFEXITED(st) && WEXITSTATUS(st) == 0;
			if (log)
				rb_buildlog_end(log, !good && !cancelled);
			if (cancelled)
				return rb_error_set(err, ECANCELED, "image build: cancelled");
			if (good)
				return 0;
			if (WIFEXITED(st))
				return rb_error_set(err, 0, "image build: mmdebstrap exited %d (its output is above)",
				                    WEXITSTATUS(st));
			return rb_error_set(err, 0, "image build: mmdebstrap killed by signal %d", WTERMSIG(st));
		}
	}
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return rb_error_set(err, errno, "image build: wait for mmdebstrap");
}

static int open_in(int root, const char *rel, int flags)
{
	struct open_how how = {
	    .flags = (unsigned long long)(flags | O_CLOEXEC),
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	return (int)syscall(SYS_openat2, root, rel, &how, sizeof how);
}

/* A sandbox gets its /dev from runbox at every run, and the host's resolver and name belong to
 * the host: what mmdebstrap put there (device nodes, copies of /etc/resolv.conf and
 * /etc/hostname) does not go into the image. */
static int neutralize(int root, struct rb_error *err)
{
	_cleanup_close_ int dev = open_in(root, "dev", O_RDONLY | O_DIRECTORY);
	if (dev >= 0) {
		int dup_fd = dup(dev);
		DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
		if (!d)
			return rb_error_set(err, errno, "image build: read the tree's /dev");
		struct dirent *e;
		while ((e = readdir(d))) {
			struct stat st;
			if (e->d_name[0] == '.' || fstatat(dev, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    S_ISDIR(st.st_mode))
				continue;
			if (unlinkat(dev, e->d_name, 0) < 0) {
				closedir(d);
				return rb_error_set(err, errno, "image build: remove /dev/%s", e->d_name);
			}
		}
		closedir(d);
	} else if (errno != ENOENT) {
		return rb_error_set(err, errno, "image build: open the tree's /dev");
	}
	_cleanup_close_ int etc = open_in(root, "etc", O_RDONLY | O_DIRECTORY);
	if (etc < 0)
		return errno == ENOENT ? 0 : rb_error_set(err, errno, "image build: open the tree's /etc");
	static const char *const host_files[] = {"resolv.conf", "hostname"};
	for (unsigned i = 0; i < 2; i++)
		if (unlinkat(etc, host_files[i], 0) < 0 && errno != ENOENT)
			return rb_error_set(err, errno, "image build: remove /etc/%s", host_files[i]);
	return 0;
}

/* The recipe's file at path (absolute, clean), its parents made 0755, itself replaced. */
static int put_file(int root, const struct rb_recipe_file *f, struct rb_error *err)
{
	_cleanup_free_ char *copy = strdup(f->path + 1);
	if (!copy)
		return rb_error_set(err, ENOMEM, "image build: file `%s`", f->path);
	_cleanup_close_ int dir = open_in(root, ".", O_RDONLY | O_DIRECTORY);
	char *base = copy;
	for (char *slash; (slash = strchr(base, '/')); base = slash + 1) {
		*slash = '\0';
		if (mkdirat(dir, base, 0755) < 0 && errno != EEXIST)
			return rb_error_set(err, errno, "image build: file `%s`: make `%s`", f->path, base);
		int next = open_in(dir, base, O_RDONLY | O_DIRECTORY);
		if (next < 0)
			return rb_error_set(err, errno, "image build: file `%s`: `%s` is not a directory of the tree",
			                    f->path, base);
		close(dir);
		dir = next;
	}
	if (dir < 0)
		return rb_error_set(err, errno, "image build: open the tree");
	if (unlinkat(dir, base, 0) < 0 && errno != ENOENT)
		return rb_error_set(err, errno, "image build: file `%s`: replace it", f->path);
	_cleanup_close_ int fd = openat(dir, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || rb_write_all(fd, f->content, strlen(f->content)) < 0 || fchmod(fd, f->mode) < 0)
		return rb_error_set(err, errno, "image build: write `%s`", f->path);
	return 0;
}

/* The recipe's commands, in a runbox sandbox whose root is the tree (opts->run_commands), then
 * the tree made neutral again: what the sandbox mounted over it (its /dev entries, a
 * /workspace the tree did not have) is not the image's. */
static int commands(int root, const char *tree, const struct rb_recipe *r, const struct rb_build_opts *o,
                    struct rb_error *err)
{
	if (!o->run_commands)
		return rb_error_set(err, ENOTSUP,
		                    "image build: the recipe has commands and nothing here runs sandboxes");
	struct stat st;
	bool had_workspace = fstatat(root, "workspace", &st, AT_SYMLINK_NOFOLLOW) == 0;
	/* The build's own clock and a non-interactive dpkg, as mmdebstrap had them. */
	char epoch[48];
	snprintf(epoch, sizeof epoch, "SOURCE_DATE_EPOCH=%lld", (long long)r->source_date_epoch);
	char *env[] = {epoch, "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8", NULL};
	if (o->run_commands(o->commands_ctx, tree, r->commands, r->n_commands, r->commands_gateway, env, err) < 0)
		return -1;
	if (neutralize(root, err) < 0)
		return -1;
	if (!had_workspace && unlinkat(root, "workspace", AT_REMOVEDIR) < 0 && errno != ENOENT)
		return rb_error_set(err, errno, "image build: remove the sandbox's /workspace from the tree");
	return 0;
}

int rb_image_build(const struct rb_paths *paths, const char *recipe, const struct rb_build_opts *opts, char out[72],
                   struct rb_error *err)
{
	if (opts->name && !rb_store_name_valid(opts->name))
		return rb_error_set(err, 0, "image name `%s`: not a valid store reference", opts->name);
	struct rb_import_opts asked = {
	    .pol = opts->pol, .keep_setuid = opts->keep_setuid, .keep_file_caps = opts->keep_file_caps};
	if (rb_import_privileges_allowed(&asked, err) < 0)
		return rb_error_prefix(err, "image build");
	__attribute__((cleanup(rb_recipe_free))) struct rb_recipe r;
	if (rb_recipe_load(recipe, &r, err) < 0)
		return -1;
	char real[PATH_MAX];
	if (!realpath(recipe, real))
		return rb_error_set(err, errno, "recipe `%s`", recipe);
	char store[PATH_MAX], refs[PATH_MAX], work[PATH_MAX + 32], tree[PATH_MAX + 48];
	if (rb_store_dirs(paths, store, refs, err) < 0)
		return -1;
	snprintf(work, sizeof work, "%s/.build-XXXXXX", store);
	if (!mkdtemp(work))
		return rb_error_set(err, errno, "make `%s`", work);
	_cleanup_close_ int hold = rb_store_hold_temp(work, err);
	if (hold < 0) {
		rb_store_rm_tree(work, NULL);
		return -1;
	}
	snprintf(tree, sizeof tree, "%s/tree", work);
	__attribute__((cleanup(free_argv))) struct argv a = {0};
	int rc = command(&r, tree, opts->progress.fn != NULL, &a, err);
	if (rc == 0)
		rc = run_mmdebstrap(&a, &r, opts, err);
	if (rc == 0) {
		_cleanup_close_ int root = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (root < 0)
			rc = rb_error_set(err, errno, "image build: open `%s`", tree);
		if (rc == 0)
			rc = neutralize(root, err);
		for (unsigned i = 0; rc == 0 && i < r.n_files; i++)
			rc = put_file(root, &r.files[i], err);
		if (rc == 0 && r.n_commands)
			rc = commands(root, tree, &r, opts, err);
	}
	if (rc == 0) {
		char label[PATH_MAX + 96];
		snprintf(label, sizeof label, "recipe %s sha256:%s", real, r.hash);
		struct rb_import_opts io = {.pol = opts->pol,
		                            .name = opts->name,
		                            .max_members = RB_IMPORT_MAX_MEMBERS,
		                            .max_bytes = RB_IMPORT_MAX_BYTES,
		                            .keep_setuid = opts->keep_setuid,
		                            .keep_file_caps = opts->keep_file_caps};
		rc = rb_image_import_built(paths, tree, label, &io, out, err);
	}
	struct rb_error rmerr;
	if (rb_store_rm_tree(work, &rmerr) < 0 && rc == 0)
		rc = rb_error_set(err, rmerr.errnum, "image build: %s", rmerr.msg);
	return rc;
}

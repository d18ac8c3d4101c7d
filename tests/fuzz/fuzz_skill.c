/* Fuzz target: the SKILL.md parser, through rb_skill_load on a scratch bundle that holds an
 * executable entry (run.sh, bin/run.sh), a plain file, and a symlink. A loaded skill has a
 * valid name and input names, and an entry inside the bundle, reached without any symlink. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "policy/skill.h"
#include "tests/fuzz/fuzz.h"

static const char *bundle(void);

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void bundle_remove(void)
{
	nftw(bundle(), rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *rel, const void *data, size_t len, mode_t mode)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", bundle(), rel);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd) < 0)
		FUZZ_FAIL("cannot write the scratch bundle's %s", rel);
}

/* The scratch bundle, made at the first call (libFuzzer has no setup hook that the plain
 * driver shares) in $TMPDIR (run.sh points it into build/fuzz: libFuzzer's timed exit skips
 * atexit) and removed at exit. */
static const char *bundle(void)
{
	static char dir[256];
	if (dir[0])
		return dir;
	char path[512];
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/rbx-fuzz-skill.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		FUZZ_FAIL("mkdtemp");
	atexit(bundle_remove);
	write_file("run.sh", "#!/bin/sh\n", 10, 0755);
	write_file("data.txt", "x\n", 2, 0644);
	snprintf(path, sizeof path, "%s/bin", dir);
	mkdir(path, 0755);
	write_file("bin/run.sh", "#!/bin/sh\n", 10, 0755);
	snprintf(path, sizeof path, "%s/link.sh", dir);
	if (symlink("run.sh", path) < 0)
		FUZZ_FAIL("symlink");
	return dir;
}

static int name_ok(const char *s, const char *extra, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || strchr(extra, s[i])))
			return 0;
	return 1;
}

/* Every component of the entry, walked from the bundle, is a real directory or (the last) a
 * regular executable file: no symlink, "..", or absolute path. */
static void check_entry(const char *entry)
{
	if (!entry || !*entry || entry[0] == '/')
		FUZZ_FAIL("entry '%s' is empty or absolute", entry ? entry : "(null)");
	char walk[1024];
	snprintf(walk, sizeof walk, "%s", bundle());
	char *copy = strdup(entry), *p = copy, *c;
	while ((c = strsep(&p, "/"))) {
		if (!strcmp(c, ".."))
			FUZZ_FAIL("entry '%s' climbs out with ..", entry);
		if (!*c || !strcmp(c, "."))
			continue;
		size_t n = strlen(walk);
		snprintf(walk + n, sizeof walk - n, "/%s", c);
		struct stat st;
		if (lstat(walk, &st) < 0)
			FUZZ_FAIL("entry '%s': %s does not exist", entry, walk);
		if (S_ISLNK(st.st_mode))
			FUZZ_FAIL("entry '%s' goes through the symlink %s", entry, walk);
		if (p ? !S_ISDIR(st.st_mode) : !(S_ISREG(st.st_mode) && (st.st_mode & 0111)))
			FUZZ_FAIL("entry '%s': %s is not what it should be (mode %o)", entry, walk, st.st_mode);
	}
	free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	write_file("SKILL.md", data, size, 0644);
	struct rb_skill s;
	struct rb_error err = {0};
	if (rb_skill_load(bundle(), &s, &err) == 0) {
		if (!name_ok(s.name, "-", RB_SKILL_NAME_MAX))
			FUZZ_FAIL("skill name '%s' is not [a-z0-9-]{1,64}", s.name);
		if (!s.description || !s.dir)
			FUZZ_FAIL("a loaded skill lacks its description or folder");
		if (s.n_inputs > RB_SKILL_MAX_INPUTS)
			FUZZ_FAIL("%zu inputs", s.n_inputs);
		for (size_t i = 0; i < s.n_inputs; i++)
			if (!s.inputs[i] || !name_ok(s.inputs[i], "_", 64))
				FUZZ_FAIL("input name '%s' is not [a-z0-9_]{1,64}",
				          s.inputs[i] ? s.inputs[i] : "(null)");
		check_entry(s.entry);
		rb_skill_free(&s);
	} else if (err.msg[0] == '\0') {
		FUZZ_FAIL("a refused SKILL.md comes with no message");
	}
	return 0;
}

/* Shared by the unit tests that read the repository's fixtures and write temporary files:
 * finding the repository's root, and writing a file with its parents. Include after cmocka. */
#ifndef RB_TEST_FS_FIXTURE_H
#define RB_TEST_FS_FIXTURE_H

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/* The repository's root: the cwd when marker (a path relative to the root) is there (tests
 * run from the root), else derived from this_file (__FILE__ of the test, "tests/unit/x.c"). */
__attribute__((unused)) static int repo_root(char *out, size_t len, const char *marker, const char *this_file,
                                             const char *file_tail)
{
	struct stat st;
	if (getcwd(out, len) && stat(marker, &st) == 0)
		return 0;
	const char *tail = strstr(this_file, file_tail);
	if (this_file[0] != '/' || !tail)
		return -1;
	snprintf(out, len, "%.*s", (int)(tail - this_file - 1), this_file);
	return 0;
}

/* Writes dir/rel (making its parents) with text and mode. */
__attribute__((unused)) static void put_file(const char *dir, const char *rel, const char *text, mode_t mode)
{
	char path[PATH_MAX + 256];
	snprintf(path, sizeof path, "%s/%s", dir, rel);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	struct rb_error err;
	assert_int_equal(rb_mkdir_p(path, 0755, &err), 0);
	*slash = '/';
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

#endif

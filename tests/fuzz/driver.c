/* A plain main for the fuzz targets: runs each file named on the command line once through
 * LLVMFuzzerTestOneInput, so `make test` replays the corpus and regressions without clang. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/fuzz/fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	int bad = ferror(f) || !buf;
	fclose(f);
	if (bad) {
		fprintf(stderr, "%s: read failed\n", path);
		free(buf);
		return -1;
	}
	/* An exact-size copy, so ASan sees a read one past the input. */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	return 0;
}

int main(int argc, char **argv)
{
	int failed = 0;
	for (int i = 1; i < argc; i++)
		if (run_file(argv[i]) < 0)
			failed = 1;
	printf("%d inputs run\n", argc - 1);
	return failed;
}

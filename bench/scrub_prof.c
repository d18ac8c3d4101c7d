/* One scrub of a file for a profiler: the first MB megabytes of FILE through
 * rb_scrub_harvest_cb (what a harvest calls), with SECRETS (0 or 1) exact secrets, the
 * harvest bench's run token. Usage: scrub_prof FILE MB SECRETS [OUT]; see docs/scrub.md. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scrub/scrub.h"

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: scrub_prof FILE MB SECRETS [OUT]\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "r");
	size_t cap = strtoul(argv[2], NULL, 10) << 20;
	char *b = malloc(cap ? cap : 1);
	if (!f || !b) {
		perror(argv[1]);
		return 1;
	}
	size_t n = fread(b, 1, cap, f);
	fclose(f);
	size_t nsec = strtoul(argv[3], NULL, 10) ? 1 : 0;
	struct rb_error err = {0};
	struct rb_scrub_secret tok = {"run-token", "rbx_run_Q3b9Tz7Lm2Kp8Rw4Nv6H", 28};
	struct rb_scrubber *s;
	if (rb_scrub_new_labeled(&tok, nsec, &s, &err) != 0) {
		fprintf(stderr, "scrubber: %s\n", err.msg);
		return 1;
	}
	char *o = NULL;
	size_t ol = 0;
	json_t *red = NULL;
	struct timespec t0, t1;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	if (rb_scrub_harvest_cb(s, b, n, &o, &ol, &red, &err) != 0) {
		fprintf(stderr, "scrub: %s\n", err.msg);
		return 1;
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	printf("%zu bytes, %.0f MB/s per core, %zu bytes out\n", n, (double)n / 1e6 / dt, o ? ol : n);
	if (argc > 4) {
		FILE *w = fopen(argv[4], "w");
		if (!w || fwrite(o ? o : b, 1, o ? ol : n, w) != (o ? ol : n) || fclose(w) != 0) {
			perror(argv[4]);
			return 1;
		}
	}
	free(o);
	json_decref(red);
	free(b);
	rb_scrub_free(s);
	return 0;
}

/* The harvest phase end to end: N files cut from a text file are written into an out
 * directory, then rb_harvest walks, reads, scrubs (rb_scrub_harvest_cb, with a run token as
 * an exact secret) and stores them content-addressed, two large files scrubbed at a time where a
 * run's harvest would (runtime/run/collect.c: a CPU to spare); prints its MB/s, wall and CPU time,
 * against its peer in the same process: rb_harvest of the same files without a scrubber
 * (walk, read, SHA-256, store), run before and after it, the best of the two.
 * Usage: scrub_harvest TEXT WORK_DIR [FILES [MB_EACH]]  (bench/scrub_eval.sh runs it). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "runtime/run/harvest.h"
#include "scrub/scrub.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu(void) /* user + system of the process */
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
	       (double)u.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: scrub_harvest TEXT WORK_DIR [FILES [MB_EACH]]\n");
		return 2;
	}
	unsigned files = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 4;
	size_t each = (argc > 4 ? strtoul(argv[4], NULL, 10) : 50) << 20;
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	char *text = malloc(each);
	size_t n = text ? fread(text, 1, each, f) : 0;
	fclose(f);
	if (n == 0) {
		fprintf(stderr, "%s: empty\n", argv[1]);
		return 1;
	}
	char out[4096], store[4096], p[4200];
	snprintf(out, sizeof out, "%s/out", argv[2]);
	snprintf(store, sizeof store, "%s/store", argv[2]);
	mkdir(argv[2], 0755);
	mkdir(out, 0755);
	mkdir(store, 0755);
	for (unsigned k = 0; k < files; k++) {
		snprintf(p, sizeof p, "%s/part%u.txt", out, k);
		FILE *o = fopen(p, "w");
		/* each file its own bytes (the store would keep one copy of equal files) */
		if (!o || fprintf(o, "part %u\n", k) < 0 || fwrite(text, 1, n, o) != n || fclose(o) != 0) {
			perror(p);
			return 1;
		}
	}
	free(text);
	struct rb_error err = {0};
	struct rb_scrub_secret tok = {"run-token", "rbx_run_Q3b9Tz7Lm2Kp8Rw4Nv6H", 28};
	struct rb_scrubber *s;
	if (rb_scrub_new_labeled(&tok, 1, &s, &err) != 0) {
		fprintf(stderr, "scrubber: %s\n", err.msg);
		return 1;
	}
	struct rb_harvest_caps caps;
	rb_harvest_caps_default(&caps);
	caps.max_file_bytes = caps.max_total_bytes = 1ULL << 40;
	int dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct rb_harvest_result res = {0};
	double peer_c = 1e9, peer_w = 1e9, dt = 0, dc = 0;
	bool two = rb_harvest_cpu_to_spare();
	/* peer, scrubbed, peer: each into a store of its own (equal objects would be skipped) */
	for (int k = 0; k < 3; k++) {
		char st[4200];
		snprintf(st, sizeof st, "%s%d", store, k);
		mkdir(st, 0755);
		struct rb_harvest_result rk = {0};
		double t0 = now(), c0 = cpu();
		struct rb_harvest_hooks hooks = {.scrub_concurrent = two};
		int r = rb_harvest_hooked(dfd, &caps, k == 1 ? rb_scrub_harvest_cb : NULL, k == 1 ? s : NULL, st,
		                          &hooks, &rk, &err);
		double w = now() - t0, c = cpu() - c0;
		if (r != 0) {
			fprintf(stderr, "harvest: %s\n", err.msg);
			return 1;
		}
		if (k == 1) {
			dt = w, dc = c;
			res = rk;
		} else {
			peer_c = c < peer_c ? c : peer_c;
			peer_w = w < peer_w ? w : peer_w;
			rb_harvest_result_free(&rk);
		}
	}
	double mb = (double)res.bytes_read / 1e6;
	printf("harvest of %zu files, %.0f MB (rb_harvest: walk, read, scrub, store): %.0f MB/s per core (CPU "
	       "time), %.0f MB/s wall; %llu redactions; %s\n",
	       res.n_artifacts, mb, mb / dc, mb / dt, (unsigned long long)res.redactions_total,
	       two ? "two files scrubbed at a time" : "one file scrubbed at a time (no CPU to spare)");
	printf("  peer, the same harvest without a scrubber (walk, read, SHA-256, store): %.0f MB/s per core, %.0f "
	       "MB/s wall; the scrubbed harvest at %.2f of it per core, %.2f wall\n",
	       mb / peer_c, mb / peer_w, peer_c / dc, peer_w / dt);
	rb_harvest_result_free(&res);
	close(dfd);
	rb_scrub_free(s);
	return 0;
}

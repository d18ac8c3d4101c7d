/* Recall, false positives and MB/s of the scrubber on bench/scrub_corpus.py's corpus: each
 * record scrubbed alone (caught: a redaction and no 16-byte piece of the secret left; a
 * negative altered: a false positive), then the records mixed into ordinary text (the unit
 * fixtures' control files) at one per ~4 KiB, and the records alone (dense), timed.
 * Usage: scrub_eval CORPUS.jsonl CONTROL_DIR [MB [MIXED_OUT]]  (make bench-scrub builds and
 * runs it; MIXED_OUT: the mixed text is written there for the harvest benchmark). */
#define _GNU_SOURCE
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scrub/scrub.h"

struct fam {
	char name[64];
	unsigned n, caught;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static bool caught(const char *secret, const struct rb_buf_out *o, uint64_t total)
{
	size_t sl = strlen(secret);
	if (total == 0)
		return false;
	if (sl < 16)
		return memmem(o->data, o->len, secret, sl) == NULL;
	for (size_t i = 0; i + 16 <= sl; i++)
		if (memmem(o->data, o->len, secret + i, 16))
			return false;
	return true;
}

struct text {
	char *d;
	size_t n, cap;
};

static void add(struct text *t, const char *s, size_t n)
{
	if (t->n + n + 1 > t->cap) {
		t->cap = (t->n + n + 1) * 2;
		t->d = realloc(t->d, t->cap);
		if (!t->d) {
			perror("realloc");
			exit(1);
		}
	}
	memcpy(t->d + t->n, s, n);
	t->n += n;
}

/* Best of three: wall-clock MB/s and MB/s of the thread's own CPU time (per core: what the
 * scan costs, whatever else the host runs), into *wall and *per_core. */
static void mbps(struct rb_scrubber *s, const struct text *t, double *wall, double *per_core)
{
	double best = 1e9, best_cpu = 1e9;
	for (int k = 0; k < 3; k++) {
		struct rb_buf_out o;
		struct rb_error err = {0};
		double t0 = now(), c0 = cpu();
		if (rb_scrub_buffer(s, t->d, t->n, &o, NULL, &err) != 0) {
			fprintf(stderr, "scrub: %s\n", err.msg);
			exit(1);
		}
		double dt = now() - t0, dc = cpu() - c0;
		free(o.data);
		if (dt < best)
			best = dt;
		if (dc < best_cpu)
			best_cpu = dc;
	}
	*wall = (double)t->n / 1e6 / best;
	*per_core = (double)t->n / 1e6 / best_cpu;
}

/* The peer: what any filter of these bytes costs at least, an output buffer filled by memcpy
 * and every line found by memchr (the buffer's pages touched before: under a hypervisor a
 * fresh mapping's page faults cost more than the copy); best of three, as mbps. */
static void copy_mbps(const struct text *t, double *wall, double *per_core)
{
	double best = 1e9, best_cpu = 1e9;
	char *o = malloc(t->n);
	if (!o) {
		perror("malloc");
		exit(1);
	}
	memset(o, 0, t->n);
	for (int k = 0; k < 3; k++) {
		double t0 = now(), c0 = cpu();
		size_t lines = 0;
		for (const char *p = t->d, *e = t->d + t->n; p < e; lines++) {
			const char *nl = memchr(p, '\n', (size_t)(e - p));
			size_t l = nl ? (size_t)(nl - p) + 1 : (size_t)(e - p);
			memcpy(o + (p - t->d), p, l);
			p += l;
		}
		double dt = now() - t0, dc = cpu() - c0;
		if (lines == 0 || o[t->n - 1] != t->d[t->n - 1])
			exit(1);
		best = dt < best ? dt : best;
		best_cpu = dc < best_cpu ? dc : best_cpu;
	}
	free(o);
	*wall = (double)t->n / 1e6 / best;
	*per_core = (double)t->n / 1e6 / best_cpu;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: scrub_eval CORPUS.jsonl FILLER_DIR [MB]\n");
		return 2;
	}
	size_t mb = argc > 3 ? strtoul(argv[3], NULL, 10) : 100;
	FILE *f = fopen(argv[1], "r");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	struct rb_scrubber *s;
	struct rb_error err = {0};
	if (rb_scrub_new(NULL, 0, &s, &err) != 0) {
		fprintf(stderr, "rb_scrub_new: %s\n", err.msg);
		return 1;
	}
	static struct fam fams[256];
	size_t nf = 0;
	unsigned neg = 0, fp = 0, pos = 0, hit = 0;
	unsigned uneg = 0, ufp = 0, upos = 0, uhit = 0; /* the records embedded in a URL, apart */
	struct text dense = {0};
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		json_error_t je;
		json_t *j = json_loads(line, 0, &je);
		if (!j) {
			fprintf(stderr, "corpus: %s\n", je.text);
			return 1;
		}
		const char *fam = json_string_value(json_object_get(j, "family"));
		const char *text = json_string_value(json_object_get(j, "text"));
		const char *secret = json_string_value(json_object_get(j, "secret"));
		bool url = json_is_true(json_object_get(j, "url"));
		struct rb_buf_out o;
		struct rb_scrub_counts c;
		if (rb_scrub_buffer(s, text, strlen(text), &o, &c, &err) != 0)
			return 1;
		add(&dense, text, strlen(text));
		if (url) {
			bool ok = secret[0] ? caught(secret, &o, c.total) : c.total == 0;
			*(secret[0] ? &upos : &uneg) += 1;
			*(secret[0] ? &uhit : &ufp) += secret[0] ? ok : !ok;
			if (!ok)
				printf("  %s in a URL (%s): %.160s", secret[0] ? "missed" : "false positive", fam,
				       text);
		} else if (!secret[0]) {
			neg++;
			if (c.total) {
				fp++;
				printf("  false positive: %s", text);
			}
		} else {
			size_t k = 0;
			while (k < nf && strcmp(fams[k].name, fam) != 0)
				k++;
			if (k == nf && nf < 256)
				snprintf(fams[nf++].name, sizeof fams[0].name, "%s", fam);
			bool ok = caught(secret, &o, c.total);
			fams[k].n++;
			fams[k].caught += ok;
			pos++;
			hit += ok;
			if (!ok)
				printf("  missed (%s): %.160s", fam, text);
		}
		free(o.data);
		json_decref(j);
	}
	free(line);
	fclose(f);
	printf("\n%-28s %6s %6s\n", "family", "cases", "recall");
	for (size_t k = 0; k < nf; k++)
		printf("%-28s %6u %6.3f\n", fams[k].name, fams[k].n, (double)fams[k].caught / fams[k].n);
	printf("recall, all: %u/%u = %.4f; false positives: %u of %u negatives\n", hit, pos, (double)hit / pos, fp,
	       neg);
	printf("recall, embedded in a URL (a query value, a path segment, after /bot): %u/%u = %.4f; false "
	       "positives: %u of %u URL negatives\n",
	       uhit, upos, upos ? (double)uhit / upos : 0, ufp, uneg);

	/* mixed: the control files repeated, one corpus record every ~4 KiB */
	struct text ctl = {0}, mixed = {0};
	DIR *d = opendir(argv[2]);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", argv[2], e->d_name);
		FILE *cf = fopen(p, "r");
		char buf[65536];
		size_t n;
		while (cf && (n = fread(buf, 1, sizeof buf, cf)) > 0)
			add(&ctl, buf, n);
		if (cf)
			fclose(cf);
	}
	if (d)
		closedir(d);
	if (!ctl.n) {
		fprintf(stderr, "no control text in %s\n", argv[2]);
		return 1;
	}
	size_t at = 0, rec = 0;
	while (mixed.n < mb << 20) {
		size_t chunk = 4096 < ctl.n - at ? 4096 : ctl.n - at;
		add(&mixed, ctl.d + at, chunk);
		at = (at + chunk) % ctl.n;
		/* the next record of the dense text */
		const char *r0 = dense.d + rec, *nl = memchr(r0, '\n', dense.n - rec);
		size_t rl = nl ? (size_t)(nl - r0) + 1 : dense.n - rec;
		add(&mixed, r0, rl);
		rec = (rec + rl) % dense.n;
	}
	struct text dense_big = {0};
	while (dense_big.n < (mb << 20) / 4)
		add(&dense_big, dense.d, dense.n);
	double w, c, pw, pc;
	mbps(s, &mixed, &w, &c);
	copy_mbps(&mixed, &pw, &pc);
	printf("rb_scrub_buffer, mixed text (%zu MB, a secret per ~4 KiB): %.0f MB/s per core (CPU time), %.0f MB/s "
	       "wall\n",
	       mixed.n >> 20, c, w);
	printf("  peer, a cat-like copy of the same bytes (memcpy and memchr for each line): %.0f MB/s per "
	       "core; rb_scrub_buffer at %.3f of it\n",
	       pc, c / pc);
	mbps(s, &dense_big, &w, &c);
	copy_mbps(&dense_big, &pw, &pc);
	printf("rb_scrub_buffer, dense (the corpus alone, %zu MB): %.0f MB/s per core (CPU time), %.0f MB/s wall\n",
	       dense_big.n >> 20, c, w);
	printf("  peer, the cat-like copy: %.0f MB/s per core; rb_scrub_buffer at %.3f of it\n", pc, c / pc);
	/* one exact secret besides the rules, as in a harvest (bench/scrub_harvest.c's run token) */
	struct rb_scrub_secret tok = {"run-token", "rbx_run_Q3b9Tz7Lm2Kp8Rw4Nv6H", 28};
	struct rb_scrubber *sx;
	if (rb_scrub_new_labeled(&tok, 1, &sx, &err) != 0) {
		fprintf(stderr, "rb_scrub_new_labeled: %s\n", err.msg);
		return 1;
	}
	mbps(sx, &mixed, &w, &c);
	copy_mbps(&mixed, &pw, &pc);
	printf(
	    "rb_scrub_buffer, mixed text with one exact secret (its raw, base64, hex, URL and JSON forms): %.0f MB/s "
	    "per core, %.0f wall; at %.3f of the copy\n",
	    c, w, c / pc);
	rb_scrub_free(sx);
	if (argc > 4) { /* the mixed text as files for bench/scrub_harvest.c */
		FILE *mf = fopen(argv[4], "w");
		if (!mf || fwrite(mixed.d, 1, mixed.n, mf) != mixed.n || fclose(mf) != 0) {
			perror(argv[4]);
			return 1;
		}
	}
	free(mixed.d);
	free(dense.d);
	free(dense_big.d);
	free(ctl.d);
	rb_scrub_free(s);
	return 0;
}

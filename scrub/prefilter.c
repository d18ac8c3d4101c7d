/* The scrubber's candidate filter: the first position whose three bytes may start one of a
 * set of prefixes. AVX2 where the CPU has it (nibble tables in 16 or 32 buckets, 32
 * positions a step, as in Hyperscan's Teddy), else the scalar two-byte bitmap; both then confirm the
 * exact bigram and the trigram's hash. */
#include <stdbool.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(__x86_64__) && defined(__GLIBC__)
#if __GLIBC_PREREQ(2, 33)
#include <sys/platform/x86.h> /* glibc's CPU_FEATURE_ACTIVE */
#define GLIBC_CPU_FEATURES 1
#endif
#endif

#include "scrub/internal.h"

void rb_scrub_prefilter_add(struct rb_scrub_prefilter *p, unsigned c0, unsigned c1, unsigned c2, unsigned bucket)
{
	const unsigned c[3] = {c0 & 0xff, c1 & 0xff, c2 & 0xff};
	uint8_t bit = (uint8_t)(1U << (bucket & 7));
	unsigned set = (bucket >> 3) % RB_SCRUB_PF_SETS;
	for (int k = 0; k < 3; k++) {
		p->lo[set][k][c[k] & 15] |= bit;
		p->hi[set][k][c[k] >> 4] |= bit;
	}
	unsigned g = c[0] | c[1] << 8, h = rb_scrub_tri(c[0], c[1], c[2]);
	p->bigram[g >> 6] |= 1ULL << (g & 63);
	p->trigram[h >> 6] |= 1ULL << (h & 63);
}

/* glibc's answer, read from what its loader found at start (CPUID, and the OS's XSAVE state):
 * __builtin_cpu_supports would link libgcc's constructor, which asks CPUID again at every start
 * of runbox (~0.1 ms of CPU under a hypervisor, where each CPUID is an exit). */
bool rb_scrub_have_avx2(void)
{
#if defined(GLIBC_CPU_FEATURES)
	return CPU_FEATURE_ACTIVE(AVX2);
#elif defined(__x86_64__)
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
#else
	return false;
#endif
}

void rb_scrub_prefilter_done(struct rb_scrub_prefilter *p)
{
	unsigned used = 0; /* the sets some bucket of which is used: the scan tests 1, 2 or all */
	for (unsigned st = 0; st < RB_SCRUB_PF_SETS; st++)
		for (int k = 0; k < 16; k++)
			if (p->lo[st][0][k])
				used = st + 1;
	p->nsets = used <= 1 ? 1 : used <= 2 ? 2 : RB_SCRUB_PF_SETS;
	p->simd = rb_scrub_have_avx2();
}

/* The exact bigram at j (j + 1 < len) and, where there is a third byte, the trigram's hash. */
static inline bool confirm(const struct rb_scrub_prefilter *p, const unsigned char *in, size_t j, size_t len)
{
	unsigned g = in[j] | (unsigned)in[j + 1] << 8;
	if (!((p->bigram[g >> 6] >> (g & 63)) & 1))
		return false;
	if (j + 2 >= len)
		return true;
	unsigned h = rb_scrub_tri(in[j], in[j + 1], in[j + 2]);
	return (p->trigram[h >> 6] >> (h & 63)) & 1;
}

static size_t next_scalar(const struct rb_scrub_prefilter *p, const unsigned char *in, size_t i, size_t len)
{
	while ((i = rb_scrub_next_bigram(p->bigram, in, i, len)) < len && !confirm(p, in, i, len))
		i++;
	return i;
}

#if defined(__x86_64__)
/* The scan of nsets sets of buckets (a constant where it is inlined): goes on in cur's window
 * while i lies in it, then window by window, each window's positions whose three bytes pass
 * one bucket's nibble tables confirmed one by one. */
__attribute__((target("avx2"), always_inline)) static inline size_t scan_avx2(const struct rb_scrub_prefilter *p,
                                                                              struct rb_scrub_pf_cursor *cur,
                                                                              const unsigned char *in, size_t i,
                                                                              size_t len, const unsigned nsets)
{
	if (cur->valid && i >= cur->base && i < cur->base + 32) {
		uint32_t bits = cur->bits & (~0U << (i - cur->base));
		for (; bits; bits &= bits - 1) {
			size_t j = cur->base + (size_t)__builtin_ctz(bits);
			if (confirm(p, in, j, len))
				return j;
		}
		i = cur->base + 32;
	}
	const __m256i nib = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256(), one = _mm256_set1_epi8(1);
	__m256i lo[RB_SCRUB_PF_SETS][3], hi[RB_SCRUB_PF_SETS][3];
#pragma GCC unroll 4
	for (unsigned s = 0; s < nsets; s++)
#pragma GCC unroll 3
		for (int k = 0; k < 3; k++) {
			lo[s][k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p->lo[s][k]));
			hi[s][k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p->hi[s][k]));
		}
	while (i + 34 <= len) {
		__m256i vl[3], vh[3];
#pragma GCC unroll 3
		for (int k = 0; k < 3; k++) {
			const __m256i v = _mm256_loadu_si256((const __m256i *)(in + i + k));
			vl[k] = _mm256_and_si256(v, nib);
			vh[k] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
		}
		__m256i any = zero;
#pragma GCC unroll 4
		for (unsigned s = 0; s < nsets; s++) {
			__m256i m = _mm256_and_si256(_mm256_shuffle_epi8(lo[s][0], vl[0]),
			                             _mm256_shuffle_epi8(hi[s][0], vh[0]));
#pragma GCC unroll 2
			for (int k = 1; k < 3; k++)
				m = _mm256_and_si256(m, _mm256_and_si256(_mm256_shuffle_epi8(lo[s][k], vl[k]),
				                                         _mm256_shuffle_epi8(hi[s][k], vh[k])));
			any = _mm256_or_si256(any, _mm256_min_epu8(m, one));
		}
		uint32_t bits = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(any, zero));
		for (; bits; bits &= bits - 1) {
			size_t j = i + (size_t)__builtin_ctz(bits);
			if (confirm(p, in, j, len)) {
				cur->base = i, cur->bits = bits, cur->valid = true;
				return j;
			}
		}
		i += 32;
	}
	cur->valid = false;
	return next_scalar(p, in, i, len);
}

__attribute__((target("avx2"))) static size_t next_avx2(const struct rb_scrub_prefilter *p,
                                                        struct rb_scrub_pf_cursor *cur, const unsigned char *in,
                                                        size_t i, size_t len)
{
	if (p->nsets == 1)
		return scan_avx2(p, cur, in, i, len, 1);
	return p->nsets == 2 ? scan_avx2(p, cur, in, i, len, 2) : scan_avx2(p, cur, in, i, len, RB_SCRUB_PF_SETS);
}
#endif

size_t rb_scrub_prefilter_next_at(const struct rb_scrub_prefilter *p, struct rb_scrub_pf_cursor *cur,
                                  const unsigned char *in, size_t i, size_t len)
{
#if defined(__x86_64__)
	if (p->simd)
		return next_avx2(p, cur, in, i, len);
#endif
	return next_scalar(p, in, i, len);
}

size_t rb_scrub_prefilter_next(const struct rb_scrub_prefilter *p, const unsigned char *in, size_t i, size_t len)
{
	struct rb_scrub_pf_cursor cur = {0};
	return rb_scrub_prefilter_next_at(p, &cur, in, i, len);
}

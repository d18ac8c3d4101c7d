/* build/gen/scrub_tables.c (rb_scrub_tables, written at build time by scrub/tables_main.c)
 * holds what rb_scrub_rules_init builds, field by field, in both copies, each with its
 * prefilter path; and the comparison sees a difference in any part (the control). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <string.h>

#include "scrub/internal.h"

static bool prefilters_equal(const struct rb_scrub_prefilter *a, const struct rb_scrub_prefilter *b)
{
	return memcmp(a->lo, b->lo, sizeof a->lo) == 0 && memcmp(a->hi, b->hi, sizeof a->hi) == 0 &&
	       a->nsets == b->nsets && memcmp(a->bigram, b->bigram, sizeof a->bigram) == 0 &&
	       memcmp(a->trigram, b->trigram, sizeof a->trigram) == 0;
}

static bool anchors_equal(const struct rb_scrub_rule_tables *a, const struct rb_scrub_rule_tables *b)
{
	if (a->n_anchors != b->n_anchors)
		return false;
	for (size_t i = 0; i < a->n_anchors; i++) {
		const struct rb_scrub_anchor *x = &a->anchor[i], *y = &b->anchor[i];
		if (strcmp(x->s, y->s) != 0 || x->head != y->head || x->mask != y->mask || x->family != y->family ||
		    x->len != y->len || x->key != y->key)
			return false;
	}
	return true;
}

static bool elems_equal(const struct rb_scrub_rule_tables *a, const struct rb_scrub_rule_tables *b)
{
	if (a->n_elems != b->n_elems)
		return false;
	for (size_t i = 0; i < a->n_elems; i++) {
		const struct rb_scrub_elem *x = &a->elem[i], *y = &b->elem[i];
		if (x->cs != y->cs || x->min != y->min || x->max != y->max || x->lit != y->lit || x->red != y->red)
			return false;
	}
	return true;
}

/* Everything but the prefilters' path (simd), which each copy sets for itself. */
static bool tables_equal(const struct rb_scrub_rule_tables *a, const struct rb_scrub_rule_tables *b)
{
	return prefilters_equal(&a->anchors, &b->anchors) && prefilters_equal(&a->keywords, &b->keywords) &&
	       anchors_equal(a, b) && memcmp(a->bucket, b->bucket, sizeof a->bucket) == 0 &&
	       memcmp(a->items, b->items, sizeof a->items) == 0 && elems_equal(a, b) &&
	       memcmp(a->back_at, b->back_at, sizeof a->back_at) == 0 &&
	       memcmp(a->fwd_at, b->fwd_at, sizeof a->fwd_at) == 0 &&
	       memcmp(a->back_n, b->back_n, sizeof a->back_n) == 0 && memcmp(a->fwd_n, b->fwd_n, sizeof a->fwd_n) == 0;
}

static struct rb_scrub_rule_tables built, changed;

static void test_generated_equal_built(void **state)
{
	rb_scrub_rules_init(&built);
	assert_true(built.n_anchors > 100);
	assert_true(built.n_elems > 100);
	for (int k = 0; k < 2; k++) {
		assert_true(tables_equal(&rb_scrub_tables[k], &built));
		assert_int_equal(rb_scrub_tables[k].anchors.simd, k == 1);
		assert_int_equal(rb_scrub_tables[k].keywords.simd, k == 1);
	}
	/* the copy a scrubber takes is the one built here: built.*.simd says what the CPU has */
	assert_int_equal(built.anchors.simd, rb_scrub_have_avx2());
}

/* The control: a change in any part of the tables is seen. */
static void test_comparison_sees_changes(void **state)
{
	rb_scrub_rules_init(&built);
	assert_true(tables_equal(&built, &built));
	changed = built;
	changed.anchors.trigram[7] ^= 1ULL << 3;
	assert_false(tables_equal(&changed, &built));
	changed = built;
	changed.keywords.lo[0][1][5] ^= 1;
	assert_false(tables_equal(&changed, &built));
	changed = built;
	changed.anchor[built.n_anchors / 2].family++;
	assert_false(tables_equal(&changed, &built));
	changed = built;
	changed.anchor[3].s = "no such anchor";
	assert_false(tables_equal(&changed, &built));
	changed = built;
	changed.bucket[RB_SCRUB_ANCHOR_BUCKETS]--;
	assert_false(tables_equal(&changed, &built));
	changed = built;
	changed.items[0] ^= 1;
	assert_false(tables_equal(&changed, &built));
	changed = built;
	changed.elem[built.n_elems - 1].max++;
	assert_false(tables_equal(&changed, &built));
	changed = built;
	changed.fwd_n[0]++;
	assert_false(tables_equal(&changed, &built));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_generated_equal_built),
	    cmocka_unit_test(test_comparison_sees_changes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

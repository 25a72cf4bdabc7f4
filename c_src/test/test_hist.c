#include <stdlib.h>
#include <string.h>

#include "tk_hist.h"
#include "tk_test.h"

static uint64_t rnd_state = 88172645463325252ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* A value of random magnitude: every octave as likely as the others. */
static uint64_t rnd_value(void)
{
    unsigned bits = (unsigned)(rnd() % 65);
    if (bits == 0)
        return 0;
    uint64_t v = rnd();
    return bits == 64 ? v : v & (((uint64_t)1 << bits) - 1);
}

TK_TEST(hist_buckets_tile_the_range)
{
    uint64_t next = 0;
    for (unsigned i = 0; i < TK_HIST_BUCKETS; i++) {
        uint64_t lo, hi;
        tk_hist_bounds(i, &lo, &hi);
        /* Each bucket starts where the previous one ended. */
        TK_CHECK_EQ(lo, next);
        TK_CHECK(hi >= lo);
        TK_CHECK_EQ(tk_hist_index(lo), i);
        TK_CHECK_EQ(tk_hist_index(hi), i);
        TK_CHECK_EQ(tk_hist_index(lo + (hi - lo) / 2), i);
        uint64_t v = tk_hist_value(i);
        TK_CHECK(v >= lo && v <= hi);
        next = hi + 1;
        if (i == TK_HIST_BUCKETS - 1)
            TK_CHECK(hi == UINT64_MAX);
    }
    TK_CHECK_EQ(tk_hist_index(UINT64_MAX), TK_HIST_BUCKETS - 1);
    /* Below 128 every value is its own bucket. */
    for (uint64_t v = 0; v < TK_HIST_EXACT; v++) {
        TK_CHECK_EQ(tk_hist_index(v), v);
        TK_CHECK_EQ(tk_hist_value((unsigned)v), v);
    }
}

/* The stated error: a bucket's value is within 2^-7 of every value in
 * it (checked at both ends of every bucket, and at random values). */
TK_TEST(hist_error_bound)
{
    double worst = 0;
    for (unsigned i = TK_HIST_EXACT; i < TK_HIST_BUCKETS; i++) {
        uint64_t lo, hi;
        tk_hist_bounds(i, &lo, &hi);
        double val = (double)tk_hist_value(i);
        double e1 = (val - (double)lo) / (double)lo, e2 = ((double)hi - val) / (double)hi;
        if (e1 > worst)
            worst = e1;
        if (e2 > worst)
            worst = e2;
    }
    TK_CHECK(worst <= TK_HIST_ERROR);
    TK_CHECK(worst > TK_HIST_ERROR * 0.99); /* the bound is tight */
    for (int k = 0; k < 1000000; k++) {
        uint64_t v = rnd_value();
        double val = (double)tk_hist_value(tk_hist_index(v));
        if (v < TK_HIST_EXACT)
            TK_CHECK(val == (double)v);
        else if (!(val >= (double)v * (1 - TK_HIST_ERROR) && val <= (double)v * (1 + TK_HIST_ERROR)))
            TK_CHECK(!"within 2^-7");
    }
}

TK_TEST(hist_empty_and_single)
{
    tk_hist h;
    tk_hist_init(&h);
    uint64_t n = 7;
    TK_CHECK_EQ(h.count, 0);
    TK_CHECK_EQ(tk_hist_next(&h, 0, &n), TK_HIST_BUCKETS);
    TK_CHECK_EQ(tk_hist_bucket(&h, 5), 0);
    TK_CHECK(h.blocks == NULL);
    /* Adding zero values changes nothing. */
    TK_REQUIRE(tk_hist_add_n(&h, 5, 0) == 0);
    TK_CHECK_EQ(h.count, 0);
    TK_CHECK(h.blocks == NULL);

    TK_REQUIRE(tk_hist_add(&h, 1234567) == 0);
    TK_CHECK_EQ(h.count, 1);
    TK_CHECK_EQ(h.min, 1234567);
    TK_CHECK_EQ(h.max, 1234567);
    TK_CHECK_EQ(h.sum_lo, 1234567);
    TK_CHECK_EQ(h.sum_hi, 0);
    unsigned i = tk_hist_next(&h, 0, &n);
    TK_CHECK_EQ(i, tk_hist_index(1234567));
    TK_CHECK_EQ(n, 1);
    TK_CHECK_EQ(tk_hist_next(&h, i + 1, &n), TK_HIST_BUCKETS);
    /* One block for one value. */
    unsigned blocks = 0;
    for (unsigned b = 0; b < TK_HIST_BLOCKS; b++)
        blocks += h.blocks[b] != NULL;
    TK_CHECK_EQ(blocks, 1);
    tk_hist_free(&h);
    TK_CHECK(h.blocks == NULL);
    TK_CHECK_EQ(h.count, 0);

    /* Zero is a value like any other. */
    TK_REQUIRE(tk_hist_add(&h, 0) == 0);
    TK_CHECK_EQ(h.count, 1);
    TK_CHECK_EQ(h.min, 0);
    TK_CHECK_EQ(h.max, 0);
    TK_CHECK_EQ(tk_hist_bucket(&h, 0), 1);
    tk_hist_free(&h);
}

TK_TEST(hist_sum_takes_128_bits)
{
    tk_hist h;
    tk_hist_init(&h);
    TK_REQUIRE(tk_hist_add_n(&h, (uint64_t)1 << 63, 4) == 0);
    TK_CHECK_EQ(h.sum_lo, 0);
    TK_CHECK_EQ(h.sum_hi, 2);
    TK_REQUIRE(tk_hist_add_n(&h, UINT64_MAX, UINT64_MAX - 4) == 0);
    unsigned __int128 want = (unsigned __int128)1 << 65;
    want += (unsigned __int128)UINT64_MAX * (UINT64_MAX - 4);
    TK_CHECK(h.sum_lo == (uint64_t)want);
    TK_CHECK(h.sum_hi == (uint64_t)(want >> 64));
    TK_CHECK_EQ(h.count, UINT64_MAX);
    tk_hist_free(&h);
}

/* The merge of two histograms is the histogram of all their values,
 * bucket for bucket. */
TK_TEST(hist_merge_is_exact)
{
    for (int round = 0; round < 50; round++) {
        tk_hist a, b, all;
        tk_hist_init(&a);
        tk_hist_init(&b);
        tk_hist_init(&all);
        int n = (int)(rnd() % 5000);
        for (int k = 0; k < n; k++) {
            uint64_t v = round % 2 ? rnd_value() : 1000 + rnd() % 5000000;
            TK_REQUIRE(tk_hist_add(rnd() % 3 ? &a : &b, v) == 0);
            TK_REQUIRE(tk_hist_add(&all, v) == 0);
        }
        TK_REQUIRE(tk_hist_merge(&a, &b) == 0);
        TK_CHECK(a.count == all.count);
        TK_CHECK(a.sum_lo == all.sum_lo && a.sum_hi == all.sum_hi);
        TK_CHECK(a.min == all.min && a.max == all.max);
        for (unsigned i = 0; i < TK_HIST_BUCKETS; i++)
            if (tk_hist_bucket(&a, i) != tk_hist_bucket(&all, i))
                TK_CHECK(!"same buckets");
        /* Merging an empty histogram changes nothing. */
        tk_hist empty;
        tk_hist_init(&empty);
        TK_REQUIRE(tk_hist_merge(&a, &empty) == 0);
        TK_CHECK(a.count == all.count && a.min == all.min);
        /* Into an empty one: a copy. */
        TK_REQUIRE(tk_hist_merge(&empty, &all) == 0);
        TK_CHECK(empty.count == all.count && empty.min == all.min && empty.max == all.max);
        tk_hist_free(&empty);
        tk_hist_free(&a);
        tk_hist_free(&b);
        tk_hist_free(&all);
    }
}

TK_TEST(hist_next_walks_the_buckets)
{
    tk_hist h;
    tk_hist_init(&h);
    uint64_t vals[] = {3, 127, 128, 130, 1000, 1 << 20, (uint64_t)1 << 40, UINT64_MAX};
    for (unsigned k = 0; k < sizeof vals / sizeof vals[0]; k++)
        TK_REQUIRE(tk_hist_add_n(&h, vals[k], k + 1) == 0);
    uint64_t n, total = 0;
    unsigned seen = 0;
    for (unsigned i = tk_hist_next(&h, 0, &n); i < TK_HIST_BUCKETS;
         i = tk_hist_next(&h, i + 1, &n)) {
        TK_CHECK_EQ(i, tk_hist_index(vals[seen]));
        TK_CHECK_EQ(n, seen + 1);
        total += n;
        seen++;
    }
    TK_CHECK_EQ(seen, 8);
    TK_CHECK_EQ(total, h.count);
    tk_hist_free(&h);
}

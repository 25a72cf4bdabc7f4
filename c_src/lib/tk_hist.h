/* tk_hist.h: a histogram of durations (or any non-negative 64-bit
 * integers) with a stated relative error, for call latencies.
 *
 * Layout (log-linear integer buckets, as HdrHistogram's with 7 bits of
 * sub-bucket): values below 128 have a bucket each (exact); a value v of
 * 128 or more, with k = floor(log2 v) in 7..63, falls in one of 64 equal
 * buckets of the octave [2^k, 2^(k+1)), each 2^(k-6) wide. So bucket
 *
 *   i = v                                    for v < 128
 *   i = 128 + 64 (k - 7) + ((v >> (k - 6)) & 63)    otherwise
 *
 * and there are TK_HIST_BUCKETS of them, covering 0 .. 2^64 - 1 (in
 * nanoseconds: up to 584 years; nothing is ever out of range).
 *
 * The value a bucket stands for is its midpoint (tk_hist_value): a bucket
 * of the octave 2^k is 2^(k-6) wide and starts at 2^k or more, so its
 * midpoint is within 2^-7 (0.79 %) of every value in it; values below
 * 128 are their own bucket's value. The minimum and the maximum are kept
 * exactly. Quantiles are computed from the buckets by tracekit_hist (the
 * Erlang side, which merges the histograms of several nodes): a quantile
 * is the value of the bucket that holds its rank, so it is within 0.79 %
 * of the exact one.
 *
 * Two histograms merge exactly by adding their buckets: the merge of
 * two is the histogram of all their values.
 *
 * Memory: the buckets come in blocks of 64 (one per octave above 127),
 * allocated when a value first falls in one (tk_mem); a histogram of
 * durations spread over a few octaves takes a few KiB. One writer at a
 * time; no locks.
 */
#ifndef TK_HIST_H
#define TK_HIST_H

#include <stdint.h>

#define TK_HIST_SUB_BITS 7u
#define TK_HIST_EXACT (1u << TK_HIST_SUB_BITS)     /* 128: exact below */
#define TK_HIST_PER_OCTAVE (TK_HIST_EXACT / 2)     /* 64 */
#define TK_HIST_BUCKETS (TK_HIST_EXACT + (64u - TK_HIST_SUB_BITS) * TK_HIST_PER_OCTAVE)
#define TK_HIST_BLOCK 64u
#define TK_HIST_BLOCKS (TK_HIST_BUCKETS / TK_HIST_BLOCK)
/* The relative error of a bucket's value, as a fraction: 2^-7. */
#define TK_HIST_ERROR (1.0 / 128.0)
/* The layout's version: raised whenever the rule above changes, so that
 * histograms of different layouts are never merged. */
#define TK_HIST_LAYOUT 1u

typedef struct {
    uint64_t **blocks;       /* TK_HIST_BLOCKS pointers, NULL until needed */
    uint64_t count;
    uint64_t sum_lo, sum_hi; /* the sum of the values, 128 bits */
    uint64_t min, max;       /* exact; 0 when empty */
} tk_hist;

/* An empty histogram (no memory held). */
void tk_hist_init(tk_hist *h);
void tk_hist_free(tk_hist *h);

/* The bucket of v. */
static inline unsigned tk_hist_index(uint64_t v)
{
    if (v < TK_HIST_EXACT)
        return (unsigned)v;
    unsigned k = 63u - (unsigned)__builtin_clzll(v);
    return TK_HIST_EXACT + (k - TK_HIST_SUB_BITS) * TK_HIST_PER_OCTAVE +
           (unsigned)((v >> (k - (TK_HIST_SUB_BITS - 1))) & (TK_HIST_PER_OCTAVE - 1));
}

/* The smallest and largest value of bucket i (i < TK_HIST_BUCKETS). */
void tk_hist_bounds(unsigned i, uint64_t *lo, uint64_t *hi);
/* The value bucket i stands for: its midpoint. */
uint64_t tk_hist_value(unsigned i);

/* Adds n values of v. 0, or -1 when out of memory (nothing added). */
int tk_hist_add_n(tk_hist *h, uint64_t v, uint64_t n);
static inline int tk_hist_add(tk_hist *h, uint64_t v)
{
    return tk_hist_add_n(h, v, 1);
}

/* Adds `from` to `into`, exactly. 0, or -1 when out of memory (then
 * `into` may hold part of it: discard it). */
int tk_hist_merge(tk_hist *into, const tk_hist *from);

/* How many values bucket i holds. */
uint64_t tk_hist_bucket(const tk_hist *h, unsigned i);

/* The first bucket at or after i that holds values, with its count in
 * *n; TK_HIST_BUCKETS when none. */
unsigned tk_hist_next(const tk_hist *h, unsigned i, uint64_t *n);

#endif

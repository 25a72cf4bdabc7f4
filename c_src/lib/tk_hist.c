#include "tk_hist.h"

#include <string.h>

#include "tk_mem.h"

_Static_assert(TK_HIST_BUCKETS % TK_HIST_BLOCK == 0, "whole blocks");
_Static_assert(TK_HIST_BUCKETS == 3776, "the layout of TK_HIST_LAYOUT 1");

void tk_hist_init(tk_hist *h)
{
    memset(h, 0, sizeof *h);
}

void tk_hist_free(tk_hist *h)
{
    if (h->blocks != NULL) {
        for (unsigned b = 0; b < TK_HIST_BLOCKS; b++)
            tk_mem_free(h->blocks[b]);
        tk_mem_free(h->blocks);
    }
    tk_hist_init(h);
}

void tk_hist_bounds(unsigned i, uint64_t *lo, uint64_t *hi)
{
    if (i < TK_HIST_EXACT) {
        *lo = *hi = i;
        return;
    }
    unsigned k = TK_HIST_SUB_BITS + (i - TK_HIST_EXACT) / TK_HIST_PER_OCTAVE;
    uint64_t sub = (i - TK_HIST_EXACT) % TK_HIST_PER_OCTAVE;
    unsigned shift = k - (TK_HIST_SUB_BITS - 1);
    *lo = (TK_HIST_PER_OCTAVE + sub) << shift;
    *hi = *lo + ((uint64_t)1 << shift) - 1;
}

uint64_t tk_hist_value(unsigned i)
{
    uint64_t lo, hi;
    tk_hist_bounds(i, &lo, &hi);
    return lo + (hi - lo) / 2;
}

/* The counter of bucket i, its block allocated if need be; NULL when out
 * of memory. */
static uint64_t *counter(tk_hist *h, unsigned i)
{
    if (h->blocks == NULL &&
        (h->blocks = tk_mem_zalloc(TK_HIST_BLOCKS * sizeof *h->blocks)) == NULL)
        return NULL;
    uint64_t **b = &h->blocks[i / TK_HIST_BLOCK];
    if (*b == NULL && (*b = tk_mem_zalloc(TK_HIST_BLOCK * sizeof **b)) == NULL)
        return NULL;
    return &(*b)[i % TK_HIST_BLOCK];
}

/* The summary fields for n more values of v (v * n may take 128 bits). */
static void note(tk_hist *h, uint64_t v, uint64_t n)
{
    if (h->count == 0 || v < h->min)
        h->min = v;
    if (h->count == 0 || v > h->max)
        h->max = v;
    h->count += n;
    /* v * n in 128 bits, from 32-bit halves. */
    uint64_t vl = v & 0xffffffffu, vh = v >> 32, nl = n & 0xffffffffu, nh = n >> 32;
    uint64_t ll = vl * nl, lh = vl * nh, hl = vh * nl, hh = vh * nh;
    uint64_t mid = (ll >> 32) + (lh & 0xffffffffu) + (hl & 0xffffffffu);
    uint64_t lo = (ll & 0xffffffffu) | (mid << 32);
    uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    h->sum_lo += lo;
    h->sum_hi += hi + (h->sum_lo < lo);
}

int tk_hist_add_n(tk_hist *h, uint64_t v, uint64_t n)
{
    if (n == 0)
        return 0;
    uint64_t *c = counter(h, tk_hist_index(v));
    if (c == NULL)
        return -1;
    *c += n;
    if (n == 1 && h->count > 0) { /* (the common case: one value) */
        if (v < h->min)
            h->min = v;
        if (v > h->max)
            h->max = v;
        h->count++;
        h->sum_lo += v;
        h->sum_hi += h->sum_lo < v;
        return 0;
    }
    note(h, v, n);
    return 0;
}

int tk_hist_merge(tk_hist *into, const tk_hist *from)
{
    if (from->count == 0)
        return 0;
    if (from->blocks != NULL) {
        for (unsigned b = 0; b < TK_HIST_BLOCKS; b++) {
            const uint64_t *src = from->blocks[b];
            if (src == NULL)
                continue;
            for (unsigned j = 0; j < TK_HIST_BLOCK; j++) {
                if (src[j] == 0)
                    continue;
                uint64_t *c = counter(into, b * TK_HIST_BLOCK + j);
                if (c == NULL)
                    return -1;
                *c += src[j];
            }
        }
    }
    if (into->count == 0 || from->min < into->min)
        into->min = from->min;
    if (into->count == 0 || from->max > into->max)
        into->max = from->max;
    into->count += from->count;
    into->sum_lo += from->sum_lo;
    into->sum_hi += from->sum_hi + (into->sum_lo < from->sum_lo);
    return 0;
}

uint64_t tk_hist_bucket(const tk_hist *h, unsigned i)
{
    if (h->blocks == NULL || i >= TK_HIST_BUCKETS)
        return 0;
    const uint64_t *b = h->blocks[i / TK_HIST_BLOCK];
    return b != NULL ? b[i % TK_HIST_BLOCK] : 0;
}

unsigned tk_hist_next(const tk_hist *h, unsigned i, uint64_t *n)
{
    if (h->blocks == NULL)
        return TK_HIST_BUCKETS;
    while (i < TK_HIST_BUCKETS) {
        const uint64_t *b = h->blocks[i / TK_HIST_BLOCK];
        if (b == NULL) {
            i = (i / TK_HIST_BLOCK + 1) * TK_HIST_BLOCK;
            continue;
        }
        if (b[i % TK_HIST_BLOCK] != 0) {
            *n = b[i % TK_HIST_BLOCK];
            return i;
        }
        i++;
    }
    return TK_HIST_BUCKETS;
}

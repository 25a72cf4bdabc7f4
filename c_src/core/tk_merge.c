#include "tk_merge.h"

#include <string.h>

#include "tk_mem.h"

/* A staged record: stamp, payload length, payload padded to 8 bytes. */
struct tk_merge_src {
    unsigned char *buf;
    size_t cap, rd, wr; /* bytes: consumed up to rd, filled up to wr */
    size_t count;       /* records between rd and wr */
    uint64_t newest;    /* stamp of the last record staged */
};

#define STAGED_HDR 16u

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

int tk_merge_init(tk_merge *m, unsigned nsrc, size_t max_payload)
{
    m->nsrc = nsrc;
    m->src = tk_mem_zalloc(nsrc * sizeof *m->src);
    m->h1 = tk_mem_zalloc(nsrc * sizeof *m->h1);
    m->tmp_cap = pad8(max_payload);
    m->tmp = tk_mem_alloc(m->tmp_cap);
    m->bound = 0;
    if (m->src == NULL || m->h1 == NULL || m->tmp == NULL) {
        tk_merge_destroy(m);
        return -1;
    }
    return 0;
}

void tk_merge_destroy(tk_merge *m)
{
    if (m->src != NULL)
        for (unsigned i = 0; i < m->nsrc; i++)
            tk_mem_free(m->src[i].buf);
    tk_mem_free(m->src);
    tk_mem_free(m->h1);
    tk_mem_free(m->tmp);
    m->src = NULL;
    m->h1 = NULL;
    m->tmp = NULL;
}

/* Room for `need` more bytes at the end of s's buffer. */
static int reserve(tk_merge_src *s, size_t need)
{
    if (s->rd == s->wr)
        s->rd = s->wr = 0;
    if (s->wr + need <= s->cap)
        return 0;
    if (s->rd > 0) { /* slide the live part to the front */
        memmove(s->buf, s->buf + s->rd, s->wr - s->rd);
        s->wr -= s->rd;
        s->rd = 0;
        if (s->wr + need <= s->cap)
            return 0;
    }
    size_t cap = s->cap ? s->cap : 4096;
    while (cap < s->wr + need)
        cap *= 2;
    unsigned char *b = tk_mem_realloc(s->buf, s->cap, cap);
    if (b == NULL)
        return -1;
    s->buf = b;
    s->cap = cap;
    return 0;
}

int tk_merge_collect(tk_merge *m, _Atomic(tk_ring *) *rings, size_t limit)
{
    uint64_t bound = UINT64_MAX;
    int rc = 0;

    /* First pass: H1. A ring created after this pass has H1 = 0: all of
     * its records are "late". Acquire on the pointer: the ring's fields
     * are initialised before it was published. */
    for (unsigned i = 0; i < m->nsrc; i++) {
        tk_ring *r = atomic_load_explicit(&rings[i], memory_order_acquire);
        m->h1[i] = r != NULL ? tk_ring_head(r) : 0;
    }
    /* Second pass: H2, and take records up to it. */
    for (unsigned i = 0; i < m->nsrc; i++) {
        tk_ring *r = atomic_load_explicit(&rings[i], memory_order_acquire);
        if (r == NULL)
            continue;
        uint64_t h2 = tk_ring_head(r);
        tk_merge_src *s = &m->src[i];
        tk_ring_rec rec;
        int cut = 0;
        for (;;) {
            if (limit != 0 && s->count >= limit) {
                cut = 1;
                break;
            }
            if (reserve(s, STAGED_HDR + m->tmp_cap) != 0) {
                cut = 1;
                rc = -1;
                break;
            }
            if (!tk_ring_pop(r, h2, m->tmp, m->tmp_cap, &rec))
                break;
            unsigned char *d = s->buf + s->wr;
            uint64_t len64 = rec.len;
            memcpy(d, &rec.stamp, 8);
            memcpy(d + 8, &len64, 8);
            memcpy(d + STAGED_HDR, m->tmp, rec.len);
            s->wr += STAGED_HDR + pad8(rec.len);
            s->count++;
            s->newest = rec.stamp;
            if (rec.pos >= m->h1[i] && rec.stamp < bound)
                bound = rec.stamp; /* first late record of this ring */
        }
        /* Records left behind in the ring have stamps >= the newest one
         * staged from it, and whatever happened after one of them has a
         * larger stamp still (an ordered clock does not repeat a reading
         * across a hand-off between threads): everything up to and
         * including the newest staged stamp may go out. */
        if (cut && tk_ring_used(r) > 0) {
            uint64_t b = s->count > 0 ? s->newest + 1 : 0;
            if (b < bound)
                bound = b;
        }
    }
    m->bound = bound;
    return rc;
}

int tk_merge_next(tk_merge *m, const void **payload, size_t *len,
                  uint64_t *stamp)
{
    int best = -1;
    uint64_t best_stamp = 0;
    for (unsigned i = 0; i < m->nsrc; i++) {
        tk_merge_src *s = &m->src[i];
        if (s->count == 0)
            continue;
        uint64_t st;
        memcpy(&st, s->buf + s->rd, 8);
        if (best < 0 || st < best_stamp) {
            best = (int)i;
            best_stamp = st;
        }
    }
    if (best < 0 || (m->bound != UINT64_MAX && best_stamp >= m->bound))
        return 0;
    tk_merge_src *s = &m->src[best];
    uint64_t len64;
    memcpy(&len64, s->buf + s->rd + 8, 8);
    *payload = s->buf + s->rd + STAGED_HDR;
    *len = (size_t)len64;
    *stamp = best_stamp;
    s->rd += STAGED_HDR + pad8((size_t)len64);
    s->count--;
    return 1;
}

size_t tk_merge_staged(const tk_merge *m)
{
    size_t n = 0;
    for (unsigned i = 0; i < m->nsrc; i++)
        n += m->src[i].count;
    return n;
}

size_t tk_merge_staged_bytes(const tk_merge *m)
{
    size_t n = 0;
    for (unsigned i = 0; i < m->nsrc; i++)
        n += m->src[i].wr - m->src[i].rd;
    return n;
}


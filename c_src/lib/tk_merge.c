#include "tk_merge.h"

#include <string.h>

#include "tk_mem.h"

/* A source's staged records, in the taken form of tk_ring.h (header word,
 * stamp word, payload padded to 8 bytes), as tk_ring_take copies them. */
struct tk_merge_src {
    unsigned char *buf;
    size_t cap, rd, wr; /* bytes: consumed up to rd, filled up to wr */
    size_t count;       /* records between rd and wr */
    uint64_t newest;    /* stamp of the last record staged */
};

/* Bytes one take copies at most: large batches keep the per-batch
 * validation cheap. A record larger than that is taken alone, into room
 * made for it. */
#define TAKE_BATCH (64 * 1024)

int tk_merge_init(tk_merge *m, unsigned nsrc)
{
    m->nsrc = nsrc;
    m->nactive = 0;
    m->src = tk_mem_zalloc(nsrc * sizeof *m->src);
    m->h1 = tk_mem_zalloc(nsrc * sizeof *m->h1);
    m->active = tk_mem_zalloc(nsrc * sizeof *m->active);
    m->bound = 0;
    if (m->src == NULL || m->h1 == NULL || m->active == NULL) {
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
    tk_mem_free(m->active);
    m->src = NULL;
    m->h1 = NULL;
    m->active = NULL;
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
    unsigned char *b = tk_mem_realloc(s->buf, s->wr, cap);
    if (b == NULL)
        return -1;
    s->buf = b;
    s->cap = cap;
    return 0;
}

static inline uint64_t word_at(const unsigned char *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w;
}

/* Counts the records of a batch just copied to s->buf + at, and notes the
 * first one from offset `late` on (a record at or after H1: "late") in
 * *bound. */
static void scan_batch(tk_merge_src *s, size_t at, size_t n, size_t late,
                       uint64_t *bound)
{
    for (size_t off = 0; off < n;) {
        uint64_t hdr = word_at(s->buf + at + off);
        uint64_t stamp = tk_ring_rec_stamp(s->buf + at + off);
        if (off >= late && stamp < *bound)
            *bound = stamp;
        s->newest = stamp;
        s->count++;
        off += tk_ring_rec_total(hdr);
    }
}

void tk_merge_heads(tk_merge *m, _Atomic(tk_ring *) *rings)
{
    /* A ring created after this pass has H1 = 0: all of its records are
     * "late". Acquire on the pointer: the ring's fields are initialised
     * before it was published. */
    for (unsigned i = 0; i < m->nsrc; i++) {
        tk_ring *r = atomic_load_explicit(&rings[i], memory_order_acquire);
        m->h1[i] = r != NULL ? tk_ring_head(r) : 0;
    }
}

/* Stages records of source i from ring r up to its head now (H2), at most
 * `limit` staged (0: no limit). Lowers *bound for late records and for
 * records left behind. -1 if staging could not grow, else 0. */
static int take_source(tk_merge *m, unsigned i, tk_ring *r, size_t limit,
                       uint64_t *bound)
{
    uint64_t h2 = tk_ring_head(r);
    tk_merge_src *s = &m->src[i];
    size_t before = s->count;
    int cut = 0, rc = 0;
    size_t room = TAKE_BATCH;
    for (;;) {
        if (limit != 0 && s->count >= limit) {
            cut = 1;
            break;
        }
        if (reserve(s, room) != 0) {
            cut = 1;
            rc = -1;
            break;
        }
        tk_ring_batch b = {.dst = s->buf + s->wr, .cap = room,
                           .max_recs = limit != 0 ? limit - s->count : SIZE_MAX,
                           .mark = m->h1[i]};
        if (tk_ring_take(r, h2, &b) == 0) {
            if (b.need == 0)
                break;
            room = b.need; /* a record larger than a batch */
            continue;
        }
        scan_batch(s, s->wr, b.bytes, b.mark_at, bound);
        s->wr += b.bytes;
        room = TAKE_BATCH;
    }
    if (before == 0 && s->count > 0)
        m->active[m->nactive++] = i;
    /* Records left behind in the ring have stamps >= the newest one staged
     * from it, and whatever happened after one of them has a larger stamp
     * still (an ordered clock does not repeat a reading across a hand-off
     * between threads): everything up to and including the newest staged
     * stamp may go out. */
    if (cut && tk_ring_used(r) > 0) {
        uint64_t b = s->count > 0 ? s->newest + 1 : 0;
        if (b < *bound)
            *bound = b;
    }
    return rc;
}

int tk_merge_take(tk_merge *m, _Atomic(tk_ring *) *rings, size_t limit)
{
    uint64_t bound = UINT64_MAX;
    int rc = 0;
    for (unsigned i = 0; i < m->nsrc; i++) {
        tk_ring *r = atomic_load_explicit(&rings[i], memory_order_acquire);
        if (r != NULL && take_source(m, i, r, limit, &bound) != 0)
            rc = -1;
    }
    m->bound = bound;
    return rc;
}

int tk_merge_collect(tk_merge *m, _Atomic(tk_ring *) *rings, size_t limit)
{
    tk_merge_heads(m, rings);
    return tk_merge_take(m, rings, limit);
}

int tk_merge_next(tk_merge *m, const void **payload, size_t *len,
                  uint64_t *stamp)
{
    /* Only sources with staged records are looked at (a handful: one per
     * producer thread that has been busy). */
    int best = -1;
    uint64_t best_stamp = 0;
    for (unsigned k = 0; k < m->nactive; k++) {
        tk_merge_src *s = &m->src[m->active[k]];
        uint64_t st = tk_ring_rec_stamp(s->buf + s->rd);
        if (best < 0 || st < best_stamp) {
            best = (int)k;
            best_stamp = st;
        }
    }
    if (best < 0 || (m->bound != UINT64_MAX && best_stamp >= m->bound))
        return 0;
    tk_merge_src *s = &m->src[m->active[best]];
    uint64_t hdr = word_at(s->buf + s->rd);
    *payload = s->buf + s->rd + TK_RING_HEADER;
    *len = tk_ring_rec_payload(hdr);
    *stamp = best_stamp;
    s->rd += tk_ring_rec_total(hdr);
    if (--s->count == 0) /* drop it from the active list */
        m->active[best] = m->active[--m->nactive];
    return 1;
}

size_t tk_merge_staged(const tk_merge *m)
{
    size_t n = 0;
    for (unsigned i = 0; i < m->nsrc; i++)
        n += m->src[i].count;
    return n;
}

#include "tk_ring.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tk_debug.h"
#include "tk_mem.h"
#include "tk_term.h" /* the project's varints */

#ifdef TK_DEBUG
/* The calling thread, by the address of a thread-local variable. */
static _Thread_local char this_thread;

/* Only one thread ever produces into a ring: the first one claims it. */
static void assert_owner(tk_ring *r)
{
    const void *me = &this_thread, *none = NULL;
    if (!atomic_compare_exchange_strong(&r->owner, &none, me))
        TK_ASSERT(none == me);
}
#else
#define assert_owner(r) ((void)0)
#endif

int tk_ring_init(tk_ring *r, size_t size, tk_ring_policy policy)
{
    if (!tk_ring_size_ok(size))
        return -1;
    /* Not zeroed: only published records are ever read, and zeroing would
     * touch every page up front (milliseconds for a big ring, on the
     * first event of a thread). Always aligned, so that tk_ring_destroy
     * frees every ring alike; big rings to a huge page. */
    size_t align = size >= TK_RING_HUGE_SIZE ? TK_RING_HUGE_SIZE : 64;
    r->words = tk_mem_aligned_alloc(align, size);
    if (r->words == NULL)
        return -1;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    /* Best effort: where transparent huge pages are off (or the kernel
     * refuses), the ring works the same on 4 KiB pages. The slack before
     * the aligned start is never touched: it takes address space, not
     * memory. */
    if (align == TK_RING_HUGE_SIZE)
        (void)madvise((void *)r->words, size, MADV_HUGEPAGE);
#endif
    atomic_init(&r->head, 0);
    r->tail_seen = 0;
    r->last_stamp = 0;
    r->seg_next = 0; /* the first stamp whole */
    r->taken_end = 0;
    r->taken_stamp = 0;
    atomic_init(&r->written, 0);
    atomic_init(&r->dropped, 0);
    atomic_init(&r->overwritten, 0);
    atomic_init(&r->tail, 0);
#ifdef TK_DEBUG
    atomic_init(&r->owner, NULL);
#endif
    r->size = size;
    r->max_payload = tk_ring_max_payload_of(size);
    r->mask = size / 8 - 1;
    /* Segments of TK_RING_SEGMENT bytes, or 1/64 of a smaller ring, so
     * that an eviction (which frees 1/64 of the ring more than it needs)
     * finds a record with its stamp whole soon after. */
    r->seg_size = size / 64 < TK_RING_SEGMENT ? size / 64 : TK_RING_SEGMENT;
    r->seg_shift = (unsigned)__builtin_ctzll(r->seg_size);
    r->seg_mask = size / r->seg_size - 1;
    r->evict_end = r->evict_seq = 0;
    r->segs = NULL;
    if (policy == TK_RING_OVERWRITE) {
        r->segs = malloc((r->seg_mask + 1) * sizeof *r->segs);
        if (r->segs == NULL) {
            tk_mem_aligned_free((void *)r->words);
            r->words = NULL;
            return -1;
        }
        /* No entry is of any lap yet. */
        for (uint64_t i = 0; i <= r->seg_mask; i++)
            r->segs[i].pos = UINT64_MAX;
    }
    r->policy = policy;
    return 0;
}

void tk_ring_destroy(tk_ring *r)
{
    tk_mem_aligned_free((void *)r->words);
    r->words = NULL;
    free(r->segs);
    r->segs = NULL;
}

void tk_ring_touch(tk_ring *r)
{
    /* Relaxed stores: nobody reads the ring yet. From the end backwards,
     * so that the lines the producer writes first are the ones most
     * recently touched. */
    for (uint64_t off = r->size; off > 0; off -= 4096)
        atomic_store_explicit(&r->words[(off - 4096) >> 3], 0, memory_order_relaxed);
}

static inline uint64_t load_word(tk_ring *r, uint64_t idx)
{
    return atomic_load_explicit(&r->words[idx & r->mask],
                                memory_order_relaxed);
}

static inline uint64_t load8(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* ---- a record's fields ---------------------------------------------------- */

/* Any record: the size field counts its own bytes, the fewest that hold
 * it (adding its 1 to 5 bytes moves the size across a 7-bit boundary at
 * most once). */
__attribute__((noinline)) static size_t put_fields_any(unsigned char *payload,
                                                       bool whole,
                                                       uint64_t stamp,
                                                       size_t len)
{
    size_t sl = tk_varint_len(stamp);
    uint64_t base = sl + (uint64_t)len;
    size_t tl = tk_varint_len((base + 1) << 1);
    if (tk_varint_len((base + tl) << 1) > tl)
        tl++;
    tk_wbuf w = {payload - tl - sl, payload};
    tk_put_varint(&w, (base + tl) << 1 | whole);
    tk_put_varint(&w, stamp);
    return tl + sl;
}

/* Most records' fields: a size below 64 bytes (its field one byte) and a
 * stamp or delta of sl bytes, at most 7, both in one word, stored with the
 * fields in its high bytes just before the payload (the bytes below them
 * are room). */
static inline void put_fields_word(unsigned char *payload, uint64_t size,
                                   bool whole, uint64_t stamp, size_t sl)
{
    uint64_t w = (size << 1 | whole) | tk_varint_word(stamp, sl) << 8;
    w <<= 8 * (7 - sl);
    memcpy(payload - 8, &w, 8);
}

/* Writes a record's two fields (its total size in the ring with the whole
 * bit, then the stamp or its delta) as varints just before the payload,
 * into the room the caller keeps there: their bytes (2 to
 * TK_RING_HEAD_MAX). */
static inline size_t put_fields(unsigned char *payload, bool whole,
                                uint64_t stamp, size_t len)
{
    size_t sl = tk_varint_len(stamp);
    uint64_t size = sl + (uint64_t)len + 1;
    if (size >= 64 || sl > 7)
        return put_fields_any(payload, whole, stamp, len);
    put_fields_word(payload, size, whole, stamp, sl);
    return sl + 1;
}

/* ---- writing bytes into words ------------------------------------------ */

/* Writes n bytes from src at ring position pos. The first word keeps the
 * bytes before pos (the end of the previous record, written again
 * unchanged); the last one gets zeros after the n bytes. Each word is one
 * load of src at the offset that lines its bytes up with the ring's word
 * (src is plain memory: unaligned loads cost nothing), so no shifting but
 * for the first and the last. It reads from up to 7 bytes before src when
 * n < 8: the caller's room (see tk_ring_push). */
static inline void put_bytes(tk_ring *r, uint64_t pos, const unsigned char *src,
                             size_t n)
{
    _Atomic uint64_t *base = r->words, *lim = r->words + r->mask + 1;
    _Atomic uint64_t *p = r->words + ((pos >> 3) & r->mask);
    unsigned sh = 8 * (unsigned)(pos & 7);
    /* The bytes before pos (none when pos starts the word: the mask is
     * then 0). */
    uint64_t keep = atomic_load_explicit(p, memory_order_relaxed) &
                    ((UINT64_C(1) << sh) - 1);
    if (n < 8) {
        /* The n bytes as the last ones of the 8 before src + n. */
        uint64_t v = load8(src + n - 8) >> (8 * (8 - n));
        atomic_store_explicit(p, keep | v << sh, memory_order_relaxed);
        if (sh + 8 * n > 64) {
            p = p + 1 == lim ? base : p + 1;
            atomic_store_explicit(p, v >> (64 - sh), memory_order_relaxed);
        }
        return;
    }
    atomic_store_explicit(p++, keep | load8(src) << sh, memory_order_relaxed);
    /* Whole words from q; then the last 0 to 7 bytes. A record takes at
     * most a quarter of the ring, so it crosses the storage's end at most
     * once. */
    const unsigned char *q = src + 8 - sh / 8, *end = src + n;
    size_t words = (size_t)(end - q) >> 3;
    if (words > (size_t)(lim - p)) {
        for (; p < lim; p++, q += 8)
            atomic_store_explicit(p, load8(q), memory_order_relaxed);
        p = base;
    }
    for (; q + 16 <= end; p += 2, q += 16) {
        atomic_store_explicit(p, load8(q), memory_order_relaxed);
        atomic_store_explicit(p + 1, load8(q + 8), memory_order_relaxed);
    }
    if (q + 8 <= end) {
        atomic_store_explicit(p++, load8(q), memory_order_relaxed);
        q += 8;
    }
    if (p == lim)
        p = base;
    if (q < end)
        atomic_store_explicit(p, load8(end - 8) >> (8 * (8 - (end - q))),
                              memory_order_relaxed);
}

/* ---- reading records back ---------------------------------------------- */

/* Copies len bytes from ring position pos to dst: whole words, shifted
 * together when pos is not at a word's start, then the last 1 to 7 bytes
 * one by one. It may load the word after the last one it needs (ring
 * memory all the same; its value is not used). */
static void get_bytes(tk_ring *r, uint64_t pos, unsigned char *dst, size_t len)
{
    uint64_t idx = pos >> 3;
    unsigned sh = 8 * (unsigned)(pos & 7);
    uint64_t cur = load_word(r, idx);
    if (sh == 0) {
        for (; len >= 8; len -= 8, dst += 8) {
            memcpy(dst, &cur, 8);
            cur = load_word(r, ++idx);
        }
    } else {
        for (; len >= 8; len -= 8, dst += 8) {
            uint64_t next = load_word(r, ++idx);
            uint64_t v = cur >> sh | next << (64 - sh);
            memcpy(dst, &v, 8);
            cur = next;
        }
    }
    if (len == 0)
        return;
    uint64_t v = cur >> sh;
    if (sh + 8 * len > 64)
        v |= load_word(r, idx + 1) << (64 - sh);
    for (size_t i = 0; i < len; i++)
        dst[i] = (unsigned char)(v >> (8 * i));
}

/* A record's length and stamp fields as read from the ring. */
typedef struct {
    size_t head;     /* bytes of the two varints */
    size_t len;      /* payload bytes */
    bool whole;      /* the stamp is whole (else a delta) */
    uint64_t stamp;  /* the stamp or the delta */
} rec_head;

/* Bytes of the varint at the start of x (1 to 8), or 0 when it does not
 * end within x's bytes. */
static inline unsigned varint_bytes(uint64_t x)
{
    uint64_t ends = ~x & UINT64_C(0x8080808080808080);
    return ends ? (unsigned)(__builtin_ctzll(ends) >> 3) + 1 : 0;
}

/* The value of a varint of n bytes (1 to 8) at the start of x. */
static inline uint64_t varint_value(uint64_t x, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v |= ((x >> (8 * i)) & 0x7f) << (7 * i);
    return v;
}

/* The 8 bytes from ring position pos, from the one or two words they lie
 * in. */
static inline uint64_t load_at(tk_ring *r, uint64_t pos)
{
    uint64_t idx = pos >> 3;
    unsigned sh = 8 * (unsigned)(pos & 7);
    uint64_t x = load_word(r, idx);
    return sh ? x >> sh | load_word(r, idx + 1) << (64 - sh) : x;
}

/* Reads the fields of the record at pos, which must end at or before
 * `end`. 0, or -1 when they are not those of a record a push could have
 * written (a torn read in overwrite mode). */
static inline int read_head(tk_ring *r, uint64_t pos, uint64_t end, rec_head *h)
{
    uint64_t t;
    /* The common case, both fields within the first 8 bytes: from two
     * words, with no copy. */
    uint64_t x = load_at(r, pos);
    unsigned n1 = varint_bytes(x), n2 = n1 && n1 < 8 ? varint_bytes(x >> (8 * n1)) : 0;
    if (n2 != 0 && n1 + n2 <= 8) {
        t = varint_value(x, n1);
        h->stamp = varint_value(x >> (8 * n1), n2);
        h->head = n1 + n2;
    } else {
        unsigned char b[TK_RING_HEAD_MAX];
        get_bytes(r, pos, b, sizeof b);
        tk_rbuf rb = {b, b + 5}; /* the size: at most 5 bytes */
        if (!tk_get_varint(&rb, &t))
            return -1;
        rb.end = b + sizeof b;
        if (!tk_get_varint(&rb, &h->stamp))
            return -1;
        h->head = (size_t)(rb.p - b);
    }
    uint64_t total = t >> 1;
    h->whole = t & 1;
    if (total < h->head || total > end - pos ||
        total > tk_ring_need_max(tk_ring_max_payload(r)))
        return -1;
    h->len = (size_t)(total - h->head);
    return 0;
}

/* The producer's own view of one of its records: its size in the ring.
 * Nothing to check (the producer wrote it and nobody else writes): only
 * the first field, of at most 5 bytes, most often one. That byte is read
 * as a byte of the storage: only this thread ever writes the ring, so no
 * store can race with the read. */
static inline uint64_t own_size(tk_ring *r, uint64_t pos)
{
    const unsigned char *bytes = (const unsigned char *)r->words;
    uint64_t t = bytes[pos & (r->size - 1)];
    if (t & 0x80) {
        uint64_t x = load_at(r, pos);
        t = varint_value(x, varint_bytes(x));
    }
    return t >> 1;
}

/* ---- the overwrite policy's index ------------------------------------------ */

/* An overwrite ring's producer keeps, for each segment, where its record
 * with a whole stamp starts and how many records were pushed before it.
 * A segment holds at most one live such record: the first to start in
 * it, or the first after eviction emptied the ring (which evicted the
 * segment's earlier ones). An entry is of this lap when its position is
 * in the segment. So eviction finds where to stop, and counts what it
 * evicts, without reading the records in between. */
static inline tk_ring_seg *seg_of(tk_ring *r, uint64_t pos)
{
    return &r->segs[(pos >> r->seg_shift) & r->seg_mask];
}

/* The records pushed before the one at pos (a record from tail on, or
 * h). From the last eviction's end; else (the consumer moved tail there)
 * by walking to the next record the index holds: at most a segment's
 * records. */
static uint64_t seq_at(tk_ring *r, uint64_t pos, uint64_t h)
{
    if (pos == r->evict_end)
        return r->evict_seq;
    uint64_t walked = 0;
    for (; pos < h; pos += own_size(r, pos), walked++) {
        const tk_ring_seg *g = seg_of(r, pos);
        if (g->pos == pos)
            return g->seq - walked;
    }
    return tk_stat_read(&r->written) - walked;
}

/* The first record from lo on whose stamp is whole, and the records
 * pushed before it; h (and all records) when there is none before h. */
static uint64_t whole_from(tk_ring *r, uint64_t lo, uint64_t h, uint64_t *seq)
{
    for (uint64_t s = lo >> r->seg_shift; s <= h >> r->seg_shift; s++) {
        const tk_ring_seg *g = &r->segs[s & r->seg_mask];
        if (g->pos >> r->seg_shift == s && g->pos >= lo && g->pos < h) {
            *seq = g->seq;
            return g->pos;
        }
    }
    *seq = tk_stat_read(&r->written);
    return h;
}

/* Overwrite policy: evict the oldest records until `need` bytes are free
 * after head h. The consumer may be moving tail at the same time, so every
 * move is a compare-and-swap. The records from tail on were written by
 * this producer and cannot have been overwritten yet (we only overwrite
 * space we have evicted), so reading them is safe. Tail only ever moves
 * to a record whose stamp is whole, or to h: then the next record's is
 * (the consumer cannot know the base of a delta past records it never
 * took). */
__attribute__((noinline)) static void evict(tk_ring *r, uint64_t h,
                                            uint64_t need)
{
    /* Free a little more than needed (1/64 of the ring), so that a full
     * ring pays one compare-and-swap per batch of evicted records rather
     * than one per record. */
    uint64_t want = need + r->size / 64;
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    while (!tk_ring_room(r, h, need, t)) {
        /* `want` bytes are free from any record at or after lo (see
         * tk_ring_room; lo is a multiple of 8). Stop at the first whole
         * stamp from there. */
        uint64_t lo = ((h + want + 7) & ~(uint64_t)7) - r->size, seq;
        uint64_t end = whole_from(r, lo > t ? lo : t, h, &seq);
        uint64_t n = seq - seq_at(r, t, h);
        /* Acquire on both outcomes: a tail moved by the consumer means it
         * finished reading those records before we reuse their space. */
        if (atomic_compare_exchange_weak_explicit(&r->tail, &t, end,
                                                  memory_order_acquire,
                                                  memory_order_acquire)) {
            tk_stat_add(&r->overwritten, n);
            r->evict_end = t = end;
            r->evict_seq = seq;
            if (end == h)
                r->seg_next = 0; /* the next stamp whole */
        }
        /* On failure t holds the consumer's newer tail: loop. */
    }
    r->tail_seen = t;
    /* Release fence: the evictions above are ordered before the stores
     * that overwrite the evicted space. A consumer that reads any of those
     * stores and then issues its acquire fence is guaranteed to see tail
     * moved (see tk_ring_take): the classic seqlock pairing. */
    atomic_thread_fence(memory_order_release);
}

/* Any record: whole stamps, records of 64 bytes and more, a ring short
 * of room or at the storage's end. */
__attribute__((noinline)) static int push_any(tk_ring *r, uint64_t stamp,
                                              unsigned char *payload,
                                              size_t len)
{
    if (len > tk_ring_max_payload(r)) {
        tk_ring_count_drop(r);
        return -1;
    }
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    /* A thread moved to another core may read a clock a little behind
     * its previous reading; consumers rely on stamps not decreasing
     * within a ring. */
    if (stamp < r->last_stamp)
        stamp = r->last_stamp;
    /* The stamp is whole for the first record to start in a segment, and
     * after eviction emptied the ring (seg_next is then 0); else the
     * delta. */
    bool whole = h >= r->seg_next;
    size_t fn = put_fields(payload, whole, whole ? stamp : stamp - r->last_stamp, len);
    uint64_t need = fn + len;
    if (!tk_ring_room(r, h, need, r->tail_seen)) {
        if (r->policy == TK_RING_DROP) {
            /* Acquire: pairs with the consumer's release of tail, so that
             * the consumer has finished reading the space we reuse. */
            r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
            if (!tk_ring_room(r, h, need, r->tail_seen)) {
                tk_ring_count_drop(r);
                return -1;
            }
        } else {
            evict(r, h, need);
            if (!whole && r->seg_next == 0) {
                /* Everything was evicted: this record starts the ring
                 * again and needs its stamp whole (it fits: the ring is
                 * empty). */
                whole = true;
                fn = put_fields(payload, true, stamp, len);
                need = fn + len;
            }
        }
    }
    if (whole && r->segs != NULL) {
        tk_ring_seg *g = seg_of(r, h);
        g->pos = h;
        g->seq = tk_stat_read(&r->written);
    }
    put_bytes(r, h, payload - fn, need);
    r->last_stamp = stamp;
    r->seg_next = (h | (r->seg_size - 1)) + 1;
    /* Release: the record's bytes are visible to a consumer that sees the
     * new head with an acquire load. */
    atomic_store_explicit(&r->head, h + need, memory_order_release);
    tk_stat_add(&r->written, 1);
    return 0;
}

static inline void copy_word(_Atomic uint64_t *p, const unsigned char *src,
                             unsigned k)
{
    atomic_store_explicit(p + k, load8(src + 8 * k), memory_order_relaxed);
}

/* Most records: a delta stamp, fewer than 64 bytes in all (a size field
 * of one byte) and a delta of at most 7 bytes, with TK_RING_SLACK bytes
 * free in the ring before the storage's end. Their fields are one word
 * and they are copied as a fixed run of words: 4, or 9 when they reach
 * past the fourth. Words past the record's end get whatever follows it
 * in the caller's memory: that space is free (the room asked for covers
 * it) and the next record writes over it; a word is read back only up
 * to head. */
int tk_ring_push(tk_ring *r, uint64_t stamp, unsigned char *payload,
                 size_t len)
{
    assert_owner(r);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (stamp < r->last_stamp)
        stamp = r->last_stamp;
    uint64_t d = stamp - r->last_stamp;
    size_t sl = tk_varint_len(d);
    uint64_t need = sl + 1 + (uint64_t)len;
    uint64_t i = (h >> 3) & r->mask;
    /* need < 64, sl < 8 and len < 64 at once (len too, since a length
     * near SIZE_MAX would wrap need); then the 9 words from h's: before
     * the storage's end, and free. */
    if ((need | sl << 3 | len) >= 64 || h >= r->seg_next ||
        i > r->mask + 1 - TK_RING_SLACK / 8 ||
        !tk_ring_room(r, h & ~(uint64_t)7, TK_RING_SLACK, r->tail_seen))
        return push_any(r, stamp, payload, len);
    put_fields_word(payload, need, false, d, sl);
    /* Before the record, the bytes of h's word that precede h (the end
     * of the record before), so that every word is one load. */
    unsigned char *rec = payload - 1 - sl;
    _Atomic uint64_t *p = r->words + i;
    unsigned o = (unsigned)(h & 7);
    uint64_t prev = atomic_load_explicit(p, memory_order_relaxed);
    uint64_t before = prev << 8 << (8 * (7 - o));
    memcpy(rec - 8, &before, 8);
    const unsigned char *src = rec - o;
    copy_word(p, src, 0);
    copy_word(p, src, 1);
    copy_word(p, src, 2);
    copy_word(p, src, 3);
    if (o + need > 32) {
        copy_word(p, src, 4);
        copy_word(p, src, 5);
        copy_word(p, src, 6);
        copy_word(p, src, 7);
        copy_word(p, src, 8);
    }
    r->last_stamp = stamp;
    /* Release: the record's bytes are visible to a consumer that sees the
     * new head with an acquire load. */
    atomic_store_explicit(&r->head, h + need, memory_order_release);
    tk_stat_add(&r->written, 1);
    return 0;
}

size_t tk_ring_take(tk_ring *r, uint64_t limit, tk_ring_batch *b)
{
    unsigned char *out = b->dst;
    b->bytes = b->recs = 0;
    b->need = 0;
    for (;;) {
        uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
        if (t >= limit)
            return 0;
        /* Acquire on tail: in overwrite mode it orders our reads after the
         * producer's eviction that moved tail here. Copy whole records
         * while they fit, checking each one's fields: in overwrite mode
         * the producer may be rewriting them under us, and a torn read
         * must not send us astray (the CAS below then fails anyway). A
         * delta's base is the stamp of the record before: ours when tail
         * is where our last batch ended (the producer moves tail only to
         * records whose stamp is whole). */
        uint64_t pos = t, prev = r->taken_stamp;
        bool base = t == r->taken_end, orphan = false;
        size_t n = 0, recs = 0, first_need = 0, mark_at = SIZE_MAX;
        rec_head rh;
        while (pos < limit && recs < b->max_recs) {
            if (read_head(r, pos, limit, &rh) != 0)
                break;
            if (!rh.whole && !base) {
                orphan = true;
                break;
            }
            size_t total = tk_ring_record_size(rh.len);
            if (recs == 0)
                first_need = total;
            if (n + total > b->cap)
                break;
            if (mark_at == SIZE_MAX && pos >= b->mark)
                mark_at = n;
            uint64_t stamp = rh.whole ? rh.stamp : prev + rh.stamp;
            uint64_t w0 = tk_ring_hdr(total, rh.len) | stamp << 32, zero = 0;
            uint32_t hi = (uint32_t)(stamp >> 32);
            /* The padding zeroed by a word, then the payload over it, then
             * the header and stamp (the word may reach back into them). */
            memcpy(out + n + total - 8, &zero, 8);
            get_bytes(r, pos + rh.head, out + n + TK_RING_HEADER, rh.len);
            memcpy(out + n, &w0, 8);
            memcpy(out + n + 8, &hi, 4);
            n += total;
            pos += rh.head + rh.len;
            recs++;
            prev = stamp;
            base = true;
        }
        /* Acquire fence: if any load above read words the producer wrote
         * after evicting one of these records, its eviction (a CAS on tail
         * before its release fence) happens before our CAS below, which
         * then fails. So a successful CAS proves the copy is intact. */
        atomic_thread_fence(memory_order_acquire);
        uint64_t expect = t;
        if (n == 0) {
            /* Tail has moved: what we read may be torn; retry. */
            if (atomic_load_explicit(&r->tail, memory_order_relaxed) != t)
                continue;
            /* Tail still at t, so the producer has not reused that space:
             * the record is whole, too large for cap (or the caller asked
             * for no record). A delta with no base there would be a
             * broken invariant (tail moved elsewhere than to a whole
             * stamp). */
            TK_ASSERT(!orphan);
            (void)orphan;
            if (b->max_recs > 0)
                b->need = first_need;
            return 0;
        }
        /* Release: our reads of the records happen before the producer
         * reuses their space (the producer acquires tail). */
        if (atomic_compare_exchange_strong_explicit(&r->tail, &expect, pos,
                                                    memory_order_release,
                                                    memory_order_relaxed)) {
            r->taken_end = pos;
            r->taken_stamp = prev;
            b->from = t;
            b->mark_at = mark_at == SIZE_MAX ? n : mark_at;
            b->recs = recs;
            b->bytes = n;
            return n;
        }
        /* The producer evicted records we copied: start again. */
    }
}

uint64_t tk_ring_used(tk_ring *r)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    return h > t ? h - t : 0;
}

#include "tk_ring.h"

#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "tk_debug.h"
#include "tk_mem.h"

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
    atomic_init(&r->written, 0);
    atomic_init(&r->dropped, 0);
    atomic_init(&r->overwritten, 0);
    atomic_init(&r->bytes, 0);
    atomic_init(&r->tail, 0);
#ifdef TK_DEBUG
    atomic_init(&r->owner, NULL);
#endif
    r->size = size;
    r->mask = size / 8 - 1;
    r->policy = policy;
    return 0;
}

void tk_ring_destroy(tk_ring *r)
{
    tk_mem_aligned_free((void *)r->words);
    r->words = NULL;
}

void tk_ring_touch(tk_ring *r)
{
    /* Relaxed stores: nobody reads the ring yet. From the end backwards,
     * so that the lines the producer writes first are the ones most
     * recently touched. */
    for (uint64_t off = r->size; off > 0; off -= 4096)
        atomic_store_explicit(&r->words[(off - 4096) >> 3], 0, memory_order_relaxed);
}

static inline void store_word(tk_ring *r, uint64_t pos, uint64_t w)
{
    atomic_store_explicit(&r->words[(pos >> 3) & r->mask], w,
                          memory_order_relaxed);
}

static inline uint64_t load_word(tk_ring *r, uint64_t pos)
{
    return atomic_load_explicit(&r->words[(pos >> 3) & r->mask],
                                memory_order_relaxed);
}

/* Stores `len` bytes at consecutive words from w, the last one padded with
 * zeroes. */
static inline void copy_words(_Atomic uint64_t *w, const void *src, size_t len)
{
    const unsigned char *p = src;
    size_t n = len >> 3;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        memcpy(&v, p + 8 * i, 8);
        atomic_store_explicit(&w[i], v, memory_order_relaxed);
    }
    if (len & 7) {
        /* The last 1 to 7 bytes: the payload's last 8 bytes shifted down
         * (little-endian) when there are 8, a fixed-size load rather than
         * a copy of a variable length. */
        uint64_t v = 0;
        size_t k = len & 7;
        if (len >= 8) {
            memcpy(&v, p + len - 8, 8);
            v >>= 8 * (8 - k);
        } else {
            memcpy(&v, p, k);
        }
        atomic_store_explicit(&w[n], v, memory_order_relaxed);
    }
}

/* Overwrite policy: evict the oldest records until `need` bytes are free
 * after head h. The consumer may be moving tail at the same time, so every
 * move is a compare-and-swap. The header at tail was written by this
 * producer and cannot have been overwritten yet (we only overwrite space we
 * have evicted), so reading it is safe. */
static void evict(tk_ring *r, uint64_t h, uint64_t need)
{
    /* Free a little more than needed (1/64 of the ring), so that a full
     * ring pays one compare-and-swap per batch of evicted records rather
     * than one per record. */
    uint64_t want = need + r->size / 64;
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    while (!tk_ring_room(r, h, need, t)) {
        /* Whole records from t until `want` bytes would be free (or the
         * head is reached). */
        uint64_t end = t, n = 0;
        while (end < h && !tk_ring_room(r, h, want, end)) {
            end += tk_ring_rec_total(load_word(r, end));
            n++;
        }
        /* Acquire on both outcomes: a tail moved by the consumer means it
         * finished reading those records before we reuse their space. */
        if (atomic_compare_exchange_weak_explicit(&r->tail, &t, end,
                                                  memory_order_acquire,
                                                  memory_order_acquire)) {
            tk_stat_add(&r->overwritten, n);
            t = end;
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

int tk_ring_push(tk_ring *r, uint64_t stamp, const void *payload, size_t len)
{
    assert_owner(r);
    if (r->policy == TK_RING_DROP) {
        /* Room, or refused and counted (also a payload too large). */
        if (!tk_ring_fits(r, len)) {
            tk_ring_count_drop(r);
            return -1;
        }
    } else if (len > tk_ring_max_payload(r)) {
        tk_ring_count_drop(r);
        return -1;
    }
    uint64_t need = tk_ring_record_size(len);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (r->policy == TK_RING_OVERWRITE && !tk_ring_room(r, h, need, r->tail_seen))
        evict(r, h, need);

    /* A thread moved to another core may read a clock a little behind
     * its previous reading; consumers rely on stamps not decreasing
     * within a ring. */
    if (stamp < r->last_stamp)
        stamp = r->last_stamp;
    r->last_stamp = stamp;
    uint64_t idx = (h >> 3) & r->mask;
    uint64_t room = (r->mask + 1 - idx) * 8; /* bytes before the storage ends */
    /* The first two words: header and stamp's low half; stamp's high half
     * and the payload's first 4 bytes. The rest of the payload from the
     * third word on. */
    uint32_t head4 = 0;
    size_t in_head = len < 4 ? len : 4;
    if (in_head == 4)
        memcpy(&head4, payload, 4);
    else
        memcpy(&head4, payload, in_head);
    uint64_t w0 = tk_ring_hdr(need, len) | stamp << 32;
    uint64_t w1 = stamp >> 32 | (uint64_t)head4 << 32;
    const unsigned char *rest = (const unsigned char *)payload + in_head;
    size_t rest_len = len - in_head;
    if (room >= need) {
        /* The record does not wrap (the common case): one base pointer,
         * consecutive words. */
        _Atomic uint64_t *w = &r->words[idx];
        atomic_store_explicit(&w[0], w0, memory_order_relaxed);
        atomic_store_explicit(&w[1], w1, memory_order_relaxed);
        copy_words(w + 2, rest, rest_len);
    } else {
        /* It wraps, at a word boundary: the first words one by one, then
         * the rest in (at most) two runs of words. */
        store_word(r, h, w0);
        store_word(r, h + 8, w1);
        size_t first = room > 16 ? (size_t)room - 16 : 0;
        if (first > rest_len)
            first = rest_len;
        copy_words(&r->words[((h + 16) >> 3) & r->mask], rest, first);
        copy_words(&r->words[((h + 16 + first) >> 3) & r->mask], rest + first,
                   rest_len - first);
    }
    /* Release: the record's words are visible to a consumer that sees the
     * new head with an acquire load. */
    atomic_store_explicit(&r->head, h + need, memory_order_release);
    tk_stat_add(&r->written, 1);
    tk_stat_add(&r->bytes, need);
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
         * while they fit, checking each header: in overwrite mode the
         * producer may be rewriting them under us, and a torn header must
         * not send us astray (the CAS below then fails anyway). */
        uint64_t pos = t, hdr = 0;
        size_t n = 0, recs = 0;
        while (pos < limit && recs < b->max_recs) {
            hdr = load_word(r, pos);
            size_t total = tk_ring_rec_total(hdr);
            if (!tk_ring_hdr_ok(hdr, r->size) || n + total > b->cap)
                break;
            for (uint64_t i = 0; i < total; i += 8) {
                uint64_t w = load_word(r, pos + i);
                memcpy(out + n + i, &w, 8);
            }
            n += total;
            pos += total;
            recs++;
        }
        /* Acquire fence: if any load above read words the producer wrote
         * after evicting one of these records, its eviction (a CAS on tail
         * before its release fence) happens before our CAS below, which
         * then fails. So a successful CAS proves the copy is intact. */
        atomic_thread_fence(memory_order_acquire);
        uint64_t expect = t;
        if (n == 0) {
            /* Tail has moved: the header we read may be torn; retry. */
            if (atomic_load_explicit(&r->tail, memory_order_relaxed) != t)
                continue;
            /* Tail still at t, so the producer has not reused that space:
             * the header is the record's own, too large for cap (or the
             * caller asked for no record). */
            if (b->max_recs > 0 && tk_ring_hdr_ok(hdr, r->size))
                b->need = tk_ring_rec_total(hdr);
            return 0;
        }
        /* Release: our reads of the records happen before the producer
         * reuses their space (the producer acquires tail). */
        if (atomic_compare_exchange_strong_explicit(&r->tail, &expect, t + n,
                                                    memory_order_release,
                                                    memory_order_relaxed)) {
            b->from = t;
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

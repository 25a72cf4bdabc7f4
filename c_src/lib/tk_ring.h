/* tk_ring.h: a single-producer, single-consumer ring of variable-size
 * records, with two policies when it is full:
 *
 *   TK_RING_DROP       the new record is refused and counted (keep oldest)
 *   TK_RING_OVERWRITE  the oldest records are evicted and counted (keep
 *                      newest: a flight recorder)
 *
 * Positions are byte offsets that only grow (64 bits: they never wrap in
 * practice); the storage index is position & mask. A record starts at a
 * word: 4 bytes of header (tk_ring_hdr: its total length and its padding),
 * 8 bytes of stamp (the producer's clock, used by consumers to merge
 * several rings), then the payload, the whole padded to 8 bytes.
 *
 * Storage is an array of atomic 64-bit words accessed with relaxed loads and
 * stores. In drop mode producer and consumer never touch the same words at
 * the same time; in overwrite mode the producer may overwrite a record the
 * consumer is copying, and the consumer detects it (see tk_ring_take). Using
 * atomic words makes that race well defined (and visible to ThreadSanitizer
 * as the benign race it is) at no cost on x86-64 or arm64.
 *
 * Threads: exactly one producer thread calls tk_ring_push/tk_ring_fits
 * (TK_DEBUG builds assert it); consumers take records one at a time (the
 * caller serialises them). Statistics may be read by anyone.
 */
#ifndef TK_RING_H
#define TK_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tk_stat.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "a record's header, stamp and payload share words in little-endian order"
#endif

typedef enum { TK_RING_DROP = 0, TK_RING_OVERWRITE = 1 } tk_ring_policy;

#define TK_RING_HEADER 12u         /* header (4 bytes) + stamp (8 bytes) */
#define TK_RING_MIN_SIZE 4096u     /* bytes */
#define TK_RING_MAX_SIZE (1u << 30)

typedef struct tk_ring {
    /* Written by the producer only. */
    alignas(64) _Atomic uint64_t head; /* end of the last published record */
    uint64_t tail_seen;                /* producer's cached view of tail */
    uint64_t last_stamp;               /* stamps never decrease in a ring */
    _Atomic uint64_t written;          /* records published */
    _Atomic uint64_t dropped;          /* records refused (drop policy) */
    _Atomic uint64_t overwritten;      /* records evicted (overwrite policy) */
    _Atomic uint64_t bytes;            /* bytes published */
#ifdef TK_DEBUG
    _Atomic(const void *) owner;       /* the producer thread, once known */
#endif

    /* Moved by the consumer; in overwrite mode also by the producer. */
    alignas(64) _Atomic uint64_t tail; /* start of the oldest record */

    /* Set at init. */
    alignas(64) uint64_t size;         /* bytes, a power of two */
    uint64_t mask;                     /* size / 8 - 1, over words */
    tk_ring_policy policy;
    _Atomic uint64_t *words;
} tk_ring;

/* Rings of this size and more have their storage aligned to 2 MiB and
 * asked of the kernel in transparent huge pages (madvise; Linux). A ring
 * bigger than the caches writes every record to a line not touched for a
 * while: with 4 KiB pages each of its pages also costs a TLB miss (a
 * two-level walk in a virtual machine) and, at first touch, a page fault;
 * a huge page costs one fault and one TLB entry per 2 MiB. */
#define TK_RING_HUGE_SIZE (2u << 20)

/* size: bytes, a power of two in [TK_RING_MIN_SIZE, TK_RING_MAX_SIZE].
 * Returns 0, or -1 for a bad size or when out of memory. The storage is
 * not touched: see tk_ring_touch. */
int tk_ring_init(tk_ring *r, size_t size, tk_ring_policy policy);
void tk_ring_destroy(tk_ring *r);

/* Makes every page of the storage resident (a store to each page; the
 * kernel hands out zeroed pages), so that the producer never page-faults
 * on it. Call before the ring is shared. */
void tk_ring_touch(tk_ring *r);

/* Whether `size` is a ring size tk_ring_init accepts: a power of two in
 * [TK_RING_MIN_SIZE, TK_RING_MAX_SIZE]. */
static inline int tk_ring_size_ok(uint64_t size)
{
    return size >= TK_RING_MIN_SIZE && size <= TK_RING_MAX_SIZE &&
           (size & (size - 1)) == 0;
}

/* Largest payload a record can carry in a ring of `size` bytes (a quarter
 * of the ring, so that an overwrite ring always holds several records). */
static inline size_t tk_ring_max_payload_of(size_t size)
{
    return size / 4 - TK_RING_HEADER;
}

static inline size_t tk_ring_max_payload(const tk_ring *r)
{
    return tk_ring_max_payload_of((size_t)r->size);
}

/* ---- the record format ------------------------------------------------- */

/* Bytes a record with `payload` bytes takes in the ring: header, stamp and
 * payload, padded to 8 bytes. */
static inline uint64_t tk_ring_record_size(size_t payload)
{
    return (TK_RING_HEADER + (uint64_t)payload + 7) & ~(uint64_t)7;
}

/* Header: the record's total length (bytes, a multiple of 8, header and
 * padding included) with its padding (0 to 7 bytes) in the low 3 bits, in
 * the low 32 bits of the record's first word; the stamp's low half is the
 * word's high 32 bits (hdr below is that whole word: the functions read
 * its low half). */
static inline uint32_t tk_ring_hdr(uint64_t total, size_t payload)
{
    return (uint32_t)(total | (total - TK_RING_HEADER - payload));
}
static inline size_t tk_ring_rec_total(uint64_t hdr) { return (size_t)(hdr & 0xfffffff8u); }
static inline size_t tk_ring_rec_payload(uint64_t hdr)
{
    return tk_ring_rec_total(hdr) - TK_RING_HEADER - (size_t)(hdr & 7);
}

/* The stamp of a record copied out of a ring. */
static inline uint64_t tk_ring_rec_stamp(const unsigned char *rec)
{
    uint64_t s;
    memcpy(&s, rec + 4, 8);
    return s;
}

/* Whether a header could have been written by tk_ring_push into a ring of
 * `size` bytes. */
static inline int tk_ring_hdr_ok(uint64_t hdr, uint64_t size)
{
    size_t total = tk_ring_rec_total(hdr);
    return total >= 16 && total <= size / 4 && (hdr & 7) <= total - TK_RING_HEADER;
}

/* The full check: whether a record of `need` bytes fits after head h when
 * the oldest record starts at tail t. */
static inline int tk_ring_room(const tk_ring *r, uint64_t h, uint64_t need,
                               uint64_t t)
{
    return h + need - t <= r->size;
}

/* ---- producer ------------------------------------------------------------ */

/* Would a record with `payload` bytes be accepted now? Always true in
 * overwrite mode (for payloads up to tk_ring_max_payload). Cheap: reads
 * the consumer's tail only when the cached view says "no". */
static inline int tk_ring_fits(tk_ring *r, size_t payload)
{
    if (payload > tk_ring_max_payload(r))
        return 0;
    if (r->policy == TK_RING_OVERWRITE)
        return 1;
    uint64_t need = tk_ring_record_size(payload);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (tk_ring_room(r, h, need, r->tail_seen))
        return 1;
    /* Acquire: pairs with the consumer's release of tail, so that the
     * consumer has finished reading the space we are about to reuse. */
    r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
    return tk_ring_room(r, h, need, r->tail_seen);
}

/* Appends a record. Returns 0 when published, -1 when refused (drop policy
 * and no room, or payload too large); refusals are counted in `dropped`. */
int tk_ring_push(tk_ring *r, uint64_t stamp, const void *payload,
                 size_t len);

/* Counts an event refused before it became a record (for example by
 * tk_ring_fits in a tracer's enabled callback). */
static inline void tk_ring_count_drop(tk_ring *r)
{
    tk_stat_add(&r->dropped, 1);
}

/* ---- consumer ------------------------------------------------------------ */

/* The current end of published records (acquire: the records before it
 * are fully written). */
static inline uint64_t tk_ring_head(tk_ring *r)
{
    return atomic_load_explicit(&r->head, memory_order_acquire);
}

/* A batch of records for tk_ring_take. */
typedef struct {
    void *dst;       /* in: where the records go */
    size_t cap;      /* in: bytes at dst */
    size_t max_recs; /* in: at most this many records */
    size_t bytes;    /* out: bytes copied (0: none) */
    size_t recs;     /* out: records copied */
    uint64_t from;   /* out: ring position of the first */
    size_t need;     /* out: when nothing was copied because the oldest
                        record is larger than cap, its size; else 0 */
} tk_ring_batch;

/* Removes the oldest records that start before `limit` (a value of
 * tk_ring_head): as many whole records as fit in b->cap bytes, at most
 * b->max_recs, copied to b->dst in the ring's record format (header word,
 * stamp word, payload padded to 8 bytes). The batch is validated once (a
 * compare-and-swap of tail that fails if the producer evicted any of them
 * meanwhile; then the copy is retried). Returns b->bytes. When the oldest
 * record does not fit in cap, nothing is taken and b->need says how much
 * room it needs: every record can be taken by a caller that makes room. */
size_t tk_ring_take(tk_ring *r, uint64_t limit, tk_ring_batch *b);

/* Bytes currently held (published and not yet consumed or evicted). */
uint64_t tk_ring_used(tk_ring *r);

#endif

/* tk_ring.h: a single-producer, single-consumer ring of variable-size
 * records, with two policies when it is full:
 *
 *   TK_RING_DROP       the new record is refused and counted (keep oldest)
 *   TK_RING_OVERWRITE  the oldest records are evicted and counted (keep
 *                      newest: a flight recorder)
 *
 * Positions are byte offsets that only grow (64 bits: they never wrap in
 * practice); the storage index is position & mask. Records are packed
 * byte after byte, with no padding: a record is
 *
 *   varint  the record's size in bytes (these two fields included) << 1
 *           | A
 *   varint  A = 1: the stamp (the producer's clock, used by consumers to
 *           merge several rings); A = 0: the stamp minus the stamp of the
 *           record before it in the ring (stamps never decrease in a ring)
 *   bytes   the payload
 *
 * (varints are LEB128: 7 bits a byte, low bits first). The first record
 * that starts in each segment of the ring (TK_RING_SEGMENT bytes, less in
 * small rings) carries its stamp whole: in overwrite mode the producer
 * evicts only up to such a record, so the oldest record is always either
 * whole or the one after the last record the consumer took, whose stamp
 * the consumer keeps. The producer of an overwrite ring keeps, per
 * segment, where that record starts and how many records came before it
 * (16 bytes a segment: 1/256 of a ring of 1 MiB or more, 1/4 of a 4 KiB
 * one), so eviction neither reads the records it evicts nor counts them
 * one by one. Eviction cannot empty the ring: it wants at most a quarter
 * of it and a 64th, and a whole stamp starts within a segment and a
 * record of any position. Were it to, the next record's stamp would be
 * whole too: the push keeps that as a safeguard.
 *
 * A record of a few bytes of payload takes one byte of length and,
 * for events a few microseconds apart, two or three bytes of stamp.
 *
 * Consumers get records in another form, the taken form (tk_ring_take):
 * each starts at an 8-byte boundary with 4 bytes of header (its total
 * length with its padding; tk_ring_hdr), its stamp whole in 8 bytes, then
 * the payload padded to 8 bytes. That is what tk_merge stages.
 *
 * Storage is an array of atomic 64-bit words accessed with relaxed loads and
 * stores. A word may hold the end of one record and the start of the next:
 * the producer rewrites it with the earlier bytes unchanged. The bytes
 * past the head are free space and may hold anything (a short record is
 * copied as a fixed run of words): nothing reads them as records. In
 * drop mode producer and consumer never touch the same bytes at the same
 * time; in overwrite mode the producer may overwrite a record the
 * consumer is copying, and the consumer detects it (see tk_ring_take).
 * Using atomic words makes those races well defined (and visible to
 * ThreadSanitizer as the benign races they are) at no cost on x86-64 or
 * arm64.
 *
 * Threads: exactly one producer thread calls tk_ring_push/tk_ring_fits
 * (TK_DEBUG builds assert it); consumers take records one batch at a time
 * (the caller serialises them). Statistics may be read by anyone.
 */
#ifndef TK_RING_H
#define TK_RING_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tk_stat.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "records are packed into words in little-endian order"
#endif

typedef enum { TK_RING_DROP = 0, TK_RING_OVERWRITE = 1 } tk_ring_policy;

#define TK_RING_HEADER 12u         /* taken form: header (4) + stamp (8) */
#define TK_RING_HEAD_MAX 15u       /* in the ring: length (5) + stamp (10) */
#define TK_RING_ROOM 16u           /* before a payload: see tk_ring_push */
#define TK_RING_SLACK 72u          /* from a payload's start: the same */
/* Bytes of a caller's buffer for a payload of len bytes. */
#define TK_RING_BUF(len) \
    (TK_RING_ROOM + ((len) > TK_RING_SLACK ? (len) : TK_RING_SLACK))
#define TK_RING_SEGMENT 4096u      /* bytes, at most: see above */
#define TK_RING_MIN_SIZE 4096u     /* bytes */
#define TK_RING_MAX_SIZE (1u << 30)

/* An overwrite ring's index entry (see tk_ring.c). */
typedef struct {
    uint64_t pos, seq;
} tk_ring_seg;

typedef struct tk_ring {
    /* Written by the producer only. */
    alignas(64) _Atomic uint64_t head; /* end of the last published record */
    uint64_t tail_seen;                /* producer's cached view of tail */
    uint64_t last_stamp;               /* stamps never decrease in a ring */
    uint64_t seg_next;                 /* where the segment after the last
                                          record's start begins; 0: the
                                          next stamp whole */
    uint64_t evict_end, evict_seq;     /* where eviction last moved tail,
                                          and the records pushed before */
    tk_ring_seg *segs;                 /* overwrite: per segment, its
                                          record with a whole stamp */
    _Atomic uint64_t written;          /* records published */
    _Atomic uint64_t dropped;          /* records refused (drop policy) */
    _Atomic uint64_t overwritten;      /* records evicted (overwrite policy) */
#ifdef TK_DEBUG
    _Atomic(const void *) owner;       /* the producer thread, once known */
#endif

    /* Moved by the consumer; in overwrite mode also by the producer. */
    alignas(64) _Atomic uint64_t tail; /* start of the oldest record */
    /* The consumer's own: where its last batch ended and the stamp of
     * that batch's last record (the base of the next one's delta). */
    uint64_t taken_end, taken_stamp;

    /* Set at init. */
    alignas(64) uint64_t size;         /* bytes, a power of two */
    uint64_t mask;                     /* size / 8 - 1, over words */
    uint64_t seg_size;                 /* bytes, a power of two */
    unsigned seg_shift;                /* log2 of seg_size */
    uint64_t seg_mask;                 /* segments in the ring - 1 */
    size_t max_payload;                /* tk_ring_max_payload_of(size) */
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

/* Largest payload a record can carry in a ring of `size` bytes (so that a
 * record takes at most a quarter of the ring, and an overwrite ring always
 * holds several records). */
static inline size_t tk_ring_max_payload_of(size_t size)
{
    return size / 4 - TK_RING_HEAD_MAX;
}

static inline size_t tk_ring_max_payload(const tk_ring *r)
{
    return r->max_payload;
}

/* Bytes of ring a record with `payload` bytes takes at most (its length
 * and stamp at their longest). */
static inline uint64_t tk_ring_need_max(size_t payload)
{
    return TK_RING_HEAD_MAX + (uint64_t)payload;
}

/* ---- the taken form -------------------------------------------------- */

/* Bytes a record with `payload` bytes takes in the taken form: header,
 * stamp and payload, padded to 8 bytes. */
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

/* The stamp of a record in the taken form. */
static inline uint64_t tk_ring_rec_stamp(const unsigned char *rec)
{
    uint64_t s;
    memcpy(&s, rec + 4, 8);
    return s;
}

/* Whether a record of `need` bytes fits after head h when the oldest
 * record starts at tail t. By words: the word that holds a record's last
 * byte may hold the next record's first bytes, and the words of a new
 * record (from the one h is in to the one its last byte is in) must be
 * clear of the word the oldest record starts in. */
static inline int tk_ring_room(const tk_ring *r, uint64_t h, uint64_t need,
                               uint64_t t)
{
    return ((h + need + 7) & ~(uint64_t)7) - (t & ~(uint64_t)7) <= r->size;
}

/* ---- producer ------------------------------------------------------------ */

/* Would a record with `payload` bytes be accepted now? Always true in
 * overwrite mode (for payloads up to tk_ring_max_payload). Cheap: reads
 * the consumer's tail only when the cached view says "no". It counts the
 * length and stamp at their longest: at most TK_RING_HEAD_MAX bytes more
 * than tk_ring_push takes. */
static inline int tk_ring_fits(tk_ring *r, size_t payload)
{
    if (payload > tk_ring_max_payload(r))
        return 0;
    if (r->policy == TK_RING_OVERWRITE)
        return 1;
    uint64_t need = tk_ring_need_max(payload);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (tk_ring_room(r, h, need, r->tail_seen))
        return 1;
    /* Acquire: pairs with the consumer's release of tail, so that the
     * consumer has finished reading the space we are about to reuse. */
    r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
    return tk_ring_room(r, h, need, r->tail_seen);
}

/* Appends a record. The caller keeps TK_RING_ROOM bytes of its own
 * before the payload, which the push overwrites: it writes the record's
 * fields there and copies fields and payload in one pass, whole words
 * from plain memory. The caller's memory also extends at least
 * TK_RING_SLACK bytes from the payload's start, whatever len: a short
 * record is copied as a fixed run of words, and the push reads (never
 * writes) those bytes. Returns 0 when published, -1 when refused (drop
 * policy and no room, or payload too large); refusals are counted in
 * `dropped`. */
int tk_ring_push(tk_ring *r, uint64_t stamp, unsigned char *payload,
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
    size_t bytes;    /* out: bytes written at dst (0: none) */
    size_t recs;     /* out: records copied */
    uint64_t mark;   /* in: a ring position (say, an earlier head) */
    uint64_t from;   /* out: ring position of the first */
    size_t mark_at;  /* out: offset at dst of the first record that starts
                        at or after mark (bytes when none does) */
    size_t need;     /* out: when nothing was copied because the oldest
                        record is larger than cap, its size; else 0 */
} tk_ring_batch;

/* Removes the oldest records that start before `limit` (a value of
 * tk_ring_head): as many whole records as fit in b->cap bytes in the taken
 * form, at most b->max_recs, written to b->dst in that form. The batch is
 * validated once (a compare-and-swap of tail that fails if the producer
 * evicted any of them meanwhile; then the copy is retried). Returns
 * b->bytes. When the oldest record does not fit in cap, nothing is taken
 * and b->need says how much room it needs: every record can be taken by a
 * caller that makes room. */
size_t tk_ring_take(tk_ring *r, uint64_t limit, tk_ring_batch *b);

/* Bytes published since the ring was made (its records' sizes in the
 * ring): the head, which only grows. Any thread. */
static inline uint64_t tk_ring_bytes(tk_ring *r)
{
    return atomic_load_explicit(&r->head, memory_order_relaxed);
}

/* Bytes of ring currently held (published and not yet consumed or
 * evicted). */
uint64_t tk_ring_used(tk_ring *r);

#endif

/* The push's fast path copies a short record as a fixed run of words and
 * so writes past the record's end, into space it holds free. A push never
 * changes a byte of a record still in the ring: checked byte for byte
 * after every push, with the oldest record starting at every byte of a
 * word, the producer's cached tail stale (the consumer took records since)
 * or exact, across the storage's end, in both policies. */
#include <stdlib.h>
#include <string.h>

#include "ring_pop.h"
#include "tk_test.h"

static unsigned char fast_byte(uint64_t seq, size_t i)
{
    return (unsigned char)(seq * 29 + i * 13 + 1);
}

/* A record's payload: its sequence number in 8 bytes, then fast_byte. */
static size_t fast_len(uint64_t seq)
{
    return 8 + (size_t)(seq * 7 % 48); /* sizes 10 to 63 in the ring */
}

static unsigned char snap[1 << 16];

/* Pushes record seq from a buffer of exactly TK_RING_BUF(len) bytes whose
 * bytes past the payload are `fill`, and checks that every byte of
 * storage from tail to head before the push that is still in the ring
 * after it is unchanged. The push's result. */
static int push_keeping(tk_ring *r, uint64_t stamp, uint64_t seq,
                        unsigned char fill)
{
    const unsigned char *ring = (const unsigned char *)r->words;
    uint64_t mask = r->size - 1;
    uint64_t t0 = atomic_load(&r->tail), h0 = tk_ring_head(r);
    for (uint64_t p = t0; p < h0; p++)
        snap[p & mask] = ring[p & mask];
    size_t len = fast_len(seq);
    unsigned char payload[64];
    memcpy(payload, &seq, 8);
    for (size_t i = 8; i < len; i++)
        payload[i] = fast_byte(seq, i);
    bool kept;
    int rc = ring_push_exact(r, stamp, payload, len, fill, &kept);
    TK_CHECK(kept);
    uint64_t t1 = atomic_load(&r->tail);
    for (uint64_t p = t0 > t1 ? t0 : t1; p < h0; p++)
        if (ring[p & mask] != snap[p & mask]) {
            TK_CHECK_EQ(ring[p & mask], snap[p & mask]);
            TK_CHECK_EQ(p - t1, 0); /* where, from the oldest record */
            break;
        }
    return rc;
}

/* Takes one record and checks it is a record pushed (its bytes, length
 * and stamp), after the one taken before. 1, or 0 if the ring is empty. */
static int take_checked(tk_ring *r, uint64_t *next_seq)
{
    static unsigned char out[256];
    ring_rec rec;
    if (!ring_pop(r, tk_ring_head(r), out, sizeof out, &rec))
        return 0;
    uint64_t seq = 0;
    if (rec.len >= 8)
        memcpy(&seq, out, 8);
    if (rec.len < 8 || seq < *next_seq) {
        TK_CHECK(rec.len >= 8 && seq >= *next_seq); /* in order, once */
        return 0;
    }
    TK_CHECK_EQ(rec.len, fast_len(seq));
    TK_CHECK_EQ(rec.stamp, 1000 + 3 * seq);
    for (size_t i = 8; i < rec.len; i++)
        if (out[i] != fast_byte(seq, i)) {
            TK_CHECK_EQ(out[i], fast_byte(seq, i));
            break;
        }
    *next_seq = seq + 1;
    return 1;
}

static void fast_keeps_records(tk_ring_policy policy, size_t size,
                               unsigned start, unsigned take_every)
{
    tk_ring r;
    TK_REQUIRE(tk_ring_init(&r, size, policy) == 0);
    uint64_t seq = 0, next = 0, refused = 0;
    unsigned char fill = (unsigned char)(0x5A + start);
    /* Empty the ring at a position in mid-storage, at byte `start` of a
     * word: records pushed and taken. */
    while (tk_ring_head(&r) < size / 2 + start) {
        TK_REQUIRE(push_keeping(&r, 1000 + 3 * seq, seq, fill) == 0);
        seq++;
        TK_REQUIRE(take_checked(&r, &next));
    }
    /* Three laps of records, taken now and then. */
    while (tk_ring_head(&r) < 3 * size + size / 2) {
        if (push_keeping(&r, 1000 + 3 * seq, seq, fill) != 0) {
            TK_REQUIRE(policy == TK_RING_DROP);
            refused++;
            if (refused % 4 == 0) /* make a little room */
                TK_REQUIRE(take_checked(&r, &next));
        }
        seq++;
        if (take_every != 0 && seq % take_every == 0)
            (void)take_checked(&r, &next);
    }
    while (take_checked(&r, &next))
        ;
    TK_CHECK_EQ(tk_ring_used(&r), 0);
    if (policy == TK_RING_DROP)
        TK_CHECK(refused > 0);
    else
        TK_CHECK(atomic_load(&r.overwritten) > 0);
    tk_ring_destroy(&r);
}

TK_TEST(ring_fast_push_keeps_every_record_drop)
{
    for (unsigned start = 0; start < 16; start++)
        for (unsigned every = 0; every < 3; every++) {
            fast_keeps_records(TK_RING_DROP, 4096, start, every * 6);
            fast_keeps_records(TK_RING_DROP, 8192, start, every * 6);
        }
}

TK_TEST(ring_fast_push_keeps_every_record_overwrite)
{
    for (unsigned start = 0; start < 16; start++)
        for (unsigned every = 0; every < 3; every++) {
            fast_keeps_records(TK_RING_OVERWRITE, 4096, start, every * 6);
            fast_keeps_records(TK_RING_OVERWRITE, 8192, start, every * 6);
        }
}

/* A length past the ring's limit is refused and counted whatever it is:
 * also one so large that the record's size would wrap to a few bytes
 * (which, published, would be a record no consumer can take). The push
 * reads none of such a payload's bytes. */
TK_TEST(ring_push_refuses_a_length_whose_size_wraps)
{
    tk_ring r;
    unsigned char buf[TK_RING_BUF(8)] = {0}, out[64];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    TK_REQUIRE(tk_ring_push(&r, 10, buf + TK_RING_ROOM, 8) == 0);
    for (size_t k = 0; k <= 12; k++) {
        uint64_t h = tk_ring_head(&r);
        TK_CHECK_EQ(tk_ring_push(&r, 11, buf + TK_RING_ROOM, SIZE_MAX - k), -1);
        TK_CHECK_EQ(tk_ring_head(&r), h);
    }
    TK_CHECK_EQ(atomic_load(&r.dropped), 13);
    TK_CHECK_EQ(atomic_load(&r.written), 1);
    TK_CHECK(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
    TK_CHECK_EQ(tk_ring_used(&r), 0);
    tk_ring_destroy(&r);
}

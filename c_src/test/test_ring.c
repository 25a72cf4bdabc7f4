#include "ring_pop.h"
#include "tk_ring.h"
#include "tk_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Payload of record `seq`: its length and bytes derive from seq, so a
 * consumer can check any record it gets. */
static size_t pay_len(uint64_t seq, size_t max)
{
    return (size_t)(8 + (seq * 2654435761u) % (max - 8));
}

static void pay_fill(unsigned char *p, uint64_t seq, size_t len)
{
    memcpy(p, &seq, 8);
    for (size_t i = 8; i < len; i++)
        p[i] = (unsigned char)(seq + i);
}

/* The stamp of record `seq`: increasing by 1 to 8191, from 2^62 on (so
 * that a whole stamp takes 9 bytes and a delta 1 or 2). */
static uint64_t stamp_of(uint64_t seq)
{
    return (UINT64_C(1) << 62) + (seq << 12) + ((seq * 2654435761u) & 0xfff);
}

static int pay_ok(const unsigned char *p, size_t len, uint64_t *seq)
{
    if (len < 8)
        return 0;
    memcpy(seq, p, 8);
    for (size_t i = 8; i < len; i++)
        if (p[i] != (unsigned char)(*seq + i))
            return 0;
    return 1;
}

TK_TEST(ring_rejects_bad_sizes)
{
    tk_ring r;
    TK_CHECK_EQ(tk_ring_init(&r, 1000, TK_RING_DROP), -1);
    TK_CHECK_EQ(tk_ring_init(&r, 2048, TK_RING_DROP), -1);
    TK_CHECK_EQ(tk_ring_init(&r, 4096 + 8, TK_RING_DROP), -1);
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    TK_CHECK_EQ(tk_ring_max_payload(&r), 1024 - TK_RING_HEAD_MAX);
    tk_ring_destroy(&r);
}

TK_TEST(ring_empty_pop)
{
    tk_ring r;
    unsigned char buf[4096];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    TK_CHECK_EQ(ring_pop(&r, tk_ring_head(&r), buf, sizeof buf, &rec), 0);
    TK_CHECK_EQ(tk_ring_used(&r), 0);
    tk_ring_destroy(&r);
}

TK_TEST(ring_records_of_varied_size_round_trip)
{
    tk_ring r;
    unsigned char in[1024], out[1024];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 8192, TK_RING_DROP) == 0);
    /* Sizes 0..23 cover every padding case. */
    for (uint64_t n = 0; n < 24; n++) {
        for (size_t i = 0; i < n; i++)
            in[i] = (unsigned char)(n * 31 + i);
        TK_REQUIRE(ring_push(&r, 100 + n, in, n) == 0);
    }
    for (uint64_t n = 0; n < 24; n++) {
        TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
        TK_CHECK_EQ(rec.len, n);
        TK_CHECK_EQ(rec.stamp, 100 + n);
        for (size_t i = 0; i < n; i++)
            TK_CHECK_EQ(out[i], (unsigned char)(n * 31 + i));
    }
    TK_CHECK_EQ(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec), 0);
    TK_CHECK_EQ(atomic_load(&r.written), 24);
    tk_ring_destroy(&r);
}

/* The push writes the record's fields into the TK_RING_ROOM bytes before
 * the payload and nothing else of the caller's: not the payload, not a
 * byte before the room. Every length from 0 (the fields alone, fewer than
 * 8 bytes) to past a word, every stamp length (whole and delta), at every
 * byte of a word in the ring. */
TK_TEST(ring_push_writes_only_its_room)
{
    tk_ring r;
    unsigned char buf[32 + TK_RING_ROOM + TK_RING_SLACK], out[128];
    unsigned char *pl = buf + 32 + TK_RING_ROOM;
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    uint64_t stamp = 0;
    for (size_t len = 0; len <= 40; len++) {
        for (unsigned k = 0; k < 9; k++) {
            memset(buf, 0xA5, sizeof buf);
            for (size_t i = 0; i < len; i++)
                pl[i] = (unsigned char)(len + 3 * i);
            /* Deltas of 1 to 9 bytes (41 rounds stay below 2^62); whole
             * stamps at each segment's first record. */
            stamp += (uint64_t)1 << (7 * k);
            TK_REQUIRE(tk_ring_push(&r, stamp, pl, len) == 0);
            for (size_t i = 0; i < 32; i++)
                TK_CHECK_EQ(buf[i], 0xA5);
            for (size_t i = 0; i < len; i++)
                TK_CHECK_EQ(pl[i], (unsigned char)(len + 3 * i));
            for (size_t i = len; i < TK_RING_SLACK; i++)
                TK_CHECK_EQ(pl[i], 0xA5);
            TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
            TK_CHECK_EQ(rec.len, len);
            TK_CHECK_EQ(rec.stamp, stamp);
            TK_CHECK(memcmp(out, pl, len) == 0);
        }
    }
    tk_ring_destroy(&r);
}

TK_TEST(ring_wraps_around)
{
    tk_ring r;
    unsigned char in[2048], out[2048];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    size_t max = tk_ring_max_payload(&r);
    /* Many laps of the ring with records that straddle its end. */
    for (uint64_t seq = 0; seq < 5000; seq++) {
        size_t len = pay_len(seq, max);
        pay_fill(in, seq, len);
        TK_REQUIRE(ring_push(&r, seq, in, len) == 0);
        TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
        uint64_t got;
        TK_REQUIRE(pay_ok(out, rec.len, &got));
        TK_CHECK_EQ(got, seq);
        TK_CHECK_EQ(rec.len, len);
    }
    TK_CHECK(atomic_load(&r.head) > 100 * 4096);
    tk_ring_destroy(&r);
}

/* In a ring of 4096 bytes (segments of 64 bytes), a payload of 30 bytes
 * with a stamp below 128 takes 32 bytes: one byte of size (32 << 1), one
 * of stamp (whole or delta alike). */
#define REC32 30

TK_TEST(ring_full_drops_and_counts)
{
    tk_ring r;
    unsigned char in[64] = {0}, out[1024];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    int accepted = 0;
    for (int i = 0; i < 200; i++)
        accepted += ring_push(&r, (uint64_t)i, in, REC32) == 0;
    TK_CHECK_EQ(accepted, 128);
    TK_CHECK_EQ(atomic_load(&r.dropped), 72);
    TK_CHECK_EQ(atomic_load(&r.written), 128);
    TK_CHECK_EQ(tk_ring_bytes(&r), 4096);
    TK_CHECK(!tk_ring_fits(&r, 0));
    tk_ring_count_drop(&r);
    TK_CHECK_EQ(atomic_load(&r.dropped), 73);
    /* The oldest are kept: record 0 comes out first. */
    TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
    TK_CHECK_EQ(rec.stamp, 0);
    TK_CHECK_EQ(rec.len, REC32);
    /* 32 bytes free: tk_ring_fits counts the longest size and stamp (15
     * bytes) and words: 17 bytes of payload fit, 18 do not; a push counts
     * what it writes: 30 fit, 31 do not. */
    TK_CHECK(tk_ring_fits(&r, 17));
    TK_CHECK(!tk_ring_fits(&r, 18));
    TK_CHECK_EQ(ring_push(&r, 127, in, REC32 + 1), -1);
    TK_CHECK_EQ(ring_push(&r, 127, in, REC32), 0);
    /* Too large for any ring of this size: refused and counted. */
    static unsigned char big[TK_RING_ROOM + 4096];
    TK_CHECK_EQ(tk_ring_push(&r, 0, big + TK_RING_ROOM, tk_ring_max_payload(&r) + 1), -1);
    TK_CHECK_EQ(atomic_load(&r.dropped), 75);
    tk_ring_destroy(&r);
}

TK_TEST(ring_overwrite_keeps_newest)
{
    tk_ring r;
    unsigned char in[64] = {0}, out[1024];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_OVERWRITE) == 0);
    /* Records of 50 bytes (48 of payload). */
    for (int i = 0; i < 100; i++)
        TK_REQUIRE(ring_push(&r, (uint64_t)i, in, 48) == 0);
    TK_CHECK_EQ(atomic_load(&r.written), 100);
    TK_CHECK_EQ(atomic_load(&r.dropped), 0);
    TK_CHECK(tk_ring_fits(&r, 500));
    /* The newest are kept, in order, whole: as many as fill the ring but
     * for what an eviction frees ahead (1/64 of the ring and up to the
     * next whole stamp: two segments and a record at most). */
    uint64_t gone = atomic_load(&r.overwritten);
    TK_CHECK(gone > 0);
    TK_CHECK((100 - gone) * 50 >= 4096 - 64 - 2 * 64 - 50);
    TK_CHECK_EQ(tk_ring_used(&r), (100 - gone) * 50);
    for (uint64_t i = gone; i < 100; i++) {
        TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
        TK_CHECK_EQ(rec.stamp, i);
        TK_CHECK_EQ(rec.len, 48);
    }
    TK_CHECK_EQ(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec), 0);
    tk_ring_destroy(&r);
}

TK_TEST(ring_stamps_never_decrease)
{
    tk_ring r;
    unsigned char out[64];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    TK_REQUIRE(ring_push(&r, 50, "a", 1) == 0);
    TK_REQUIRE(ring_push(&r, 40, "b", 1) == 0);
    TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
    TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
    TK_CHECK_EQ(rec.stamp, 50);
    tk_ring_destroy(&r);
}

/* Stamps of every size (deltas of 0 to 2^63, whole stamps of up to 10
 * bytes), lengths of every size, evictions of a few records and of a
 * quarter of the ring, takes of one record and of many: each record comes
 * out as it went in, in order, and the ring's counts add up. */
/* Takes up to `want` records and checks each against what was pushed:
 * newer than the last one taken, with its stamp; counts them in *taken. */
static void take_and_check(tk_ring *r, size_t want, const uint64_t *stamps,
                           uint64_t *next, uint64_t *taken)
{
    static unsigned char out[4096];
    ring_rec rec;
    for (size_t n = 0;
         n < want && ring_pop(r, tk_ring_head(r), out, sizeof out, &rec); n++) {
        uint64_t got;
        TK_REQUIRE(pay_ok(out, rec.len, &got));
        TK_CHECK(got >= *next);
        TK_CHECK_EQ(rec.stamp, stamps[got]);
        *next = got + 1;
        (*taken)++;
    }
}

TK_TEST(ring_records_round_trip_through_evictions)
{
    static const uint64_t steps[] = {0, 1, 127, 128, 16383, 16384, 1u << 21,
                                     UINT64_C(1) << 35, UINT64_C(1) << 56,
                                     UINT64_C(1) << 63};
    static unsigned char in[1100];
    static uint64_t stamps[20000];
    tk_ring r;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_OVERWRITE) == 0);
    uint64_t stamp = 0, next = 0, popped = 0, x = 88172645463325252ull;
    for (uint64_t seq = 0; seq < 20000; seq++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t step = steps[x % 10];
        stamp = stamp > UINT64_MAX - step ? UINT64_MAX : stamp + step;
        /* Mostly small records; now and then one of 1,000 bytes or
         * more, which evicts a quarter of the ring and more. */
        size_t len = x % 97 == 0 ? tk_ring_max_payload(&r) - (size_t)(x % 5)
                                 : 8 + (size_t)((x >> 8) % 70);
        pay_fill(in, seq, len);
        stamps[seq] = stamp;
        TK_REQUIRE(ring_push(&r, stamp, in, len) == 0);
        if ((x >> 20) % 7 == 0) /* take a batch of 1 to 4 records */
            take_and_check(&r, 1 + (size_t)((x >> 24) % 4), stamps, &next, &popped);
    }
    take_and_check(&r, SIZE_MAX, stamps, &next, &popped);
    TK_CHECK_EQ(next, 20000);
    TK_CHECK_EQ(popped + atomic_load(&r.overwritten), 20000);
    TK_CHECK(atomic_load(&r.overwritten) > 1000);
    TK_CHECK_EQ(tk_ring_used(&r), 0);
    tk_ring_destroy(&r);
}

/* An overwrite ring with no consumer stays nearly full: eviction stops at
 * the first record with a whole stamp past the room it wants (the need
 * and 1/64 of the ring), and such a record starts in every segment a
 * record starts in. So after each push the ring holds at least its size
 * less 1/64, a segment and a record; and the records it evicted
 * and the ones it holds add up to all it took. In rings whose segments
 * are smaller than a record (4 KiB: 64 bytes) and larger (64 KiB). */
TK_TEST(ring_overwrite_evicts_little_more_than_it_needs)
{
    static unsigned char in[100];
    static unsigned char out[4096];
    const size_t sizes[] = {4096, 65536};
    for (size_t k = 0; k < 2; k++) {
        tk_ring r;
        TK_REQUIRE(tk_ring_init(&r, sizes[k], TK_RING_OVERWRITE) == 0);
        uint64_t x = 2463534242u, low = UINT64_MAX;
        /* The first segment to start after the room wanted begins
         * within a segment of it, and its first record within a record
         * of that (the room is counted in whole words: 7 bytes). */
        const uint64_t floor = sizes[k] - sizes[k] / 64 - 7 - r.seg_size -
                               tk_ring_need_max(85);
        for (uint64_t seq = 0; seq < 50000; seq++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t len = (size_t)(x % 86);
            TK_REQUIRE(ring_push(&r, 3 * seq + (x >> 40) % 3000, in, len) == 0);
            uint64_t used = tk_ring_used(&r);
            TK_CHECK(used <= sizes[k]);
            if (atomic_load(&r.overwritten) > 0 && used < low)
                low = used;
        }
        TK_CHECK(low >= floor);
        uint64_t held = 0;
        ring_rec rec;
        while (ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec))
            held++;
        TK_CHECK_EQ(held + atomic_load(&r.overwritten), 50000);
        TK_CHECK(held > sizes[k] / 100);
        tk_ring_destroy(&r);
    }
}

/* ---- one producer, one consumer, on two threads ------------------------ */

struct spsc {
    tk_ring ring;
    long n;
    atomic_int done;
    long bad;
};

static void *spsc_producer(void *arg)
{
    struct spsc *s = arg;
    unsigned char buf[2048];
    size_t max = tk_ring_max_payload(&s->ring);
    for (uint64_t seq = 0; seq < (uint64_t)s->n; seq++) {
        size_t len = pay_len(seq, max < 300 ? max : 300);
        pay_fill(buf, seq, len);
        (void)ring_push(&s->ring, stamp_of(seq), buf, len);
    }
    atomic_store_explicit(&s->done, 1, memory_order_release);
    return NULL;
}

static void spsc_run(tk_ring_policy policy)
{
    static struct spsc s;
    unsigned char out[2048];
    ring_rec rec;
    pthread_t th;
    TK_REQUIRE(tk_ring_init(&s.ring, 8192, policy) == 0);
    s.n = tk_test_iters(200000, 25);
    atomic_store(&s.done, 0);
    pthread_create(&th, NULL, spsc_producer, &s);
    uint64_t popped = 0, prev = 0;
    int first = 1, ok = 1;
    for (;;) {
        int done = atomic_load_explicit(&s.done, memory_order_acquire);
        while (ring_pop(&s.ring, tk_ring_head(&s.ring), out, sizeof out,
                           &rec)) {
            uint64_t seq = 0;
            if (!pay_ok(out, rec.len, &seq) || stamp_of(seq) != rec.stamp ||
                (!first && seq <= prev))
                ok = 0;
            /* Drop keeps the oldest: no gap is possible before a drop, and
             * after it only newer records. Either way order holds. */
            prev = seq;
            first = 0;
            popped++;
        }
        if (done)
            break;
    }
    pthread_join(th, NULL);
    TK_CHECK(ok);
    uint64_t written = atomic_load(&s.ring.written);
    if (policy == TK_RING_DROP) {
        TK_CHECK_EQ(written + atomic_load(&s.ring.dropped), (uint64_t)s.n);
        TK_CHECK_EQ(popped, written);
    } else {
        TK_CHECK_EQ(written, (uint64_t)s.n);
        TK_CHECK_EQ(popped + atomic_load(&s.ring.overwritten), written);
        TK_CHECK_EQ(prev, (uint64_t)s.n - 1); /* the newest survives */
    }
    tk_ring_destroy(&s.ring);
}

TK_TEST_THREADED(ring_spsc_drop_stress) { spsc_run(TK_RING_DROP); }
TK_TEST_THREADED(ring_spsc_overwrite_stress) { spsc_run(TK_RING_OVERWRITE); }

/* The drop check after re-reading the tail: a record that fits exactly
 * once the consumer has moved on, while the producer's cached tail is
 * stale, is accepted. */
TK_TEST(ring_exact_fit_with_stale_cached_tail)
{
    tk_ring r;
    unsigned char in[64] = {0}, out[1024];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    for (int i = 0; i < 128; i++) /* 128 records of 32 bytes: exactly full */
        TK_REQUIRE(ring_push(&r, (uint64_t)i, in, REC32) == 0);
    TK_CHECK_EQ(r.tail_seen, 0); /* never needed the tail yet */
    TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
    /* 32 bytes free: a 32-byte record fits exactly, a larger one does not. */
    TK_CHECK_EQ(ring_push(&r, 127, in, REC32 + 1), -1);
    TK_CHECK_EQ(ring_push(&r, 127, in, REC32), 0);
    TK_CHECK_EQ(atomic_load(&r.dropped), 1);
    TK_CHECK_EQ(tk_ring_used(&r), 4096);
    tk_ring_destroy(&r);
}

/* A batch too small for the oldest record takes nothing and says how much
 * room that record needs; with that room it is taken. */
TK_TEST(ring_take_reports_the_room_a_record_needs)
{
    tk_ring r;
    TK_REQUIRE(tk_ring_init(&r, 65536, TK_RING_DROP) == 0);
    static unsigned char in[16000], out[16384];
    TK_REQUIRE(ring_push(&r, 1, in, sizeof in) == 0);
    tk_ring_batch b = {.dst = out, .cap = 4096, .max_recs = 10};
    TK_CHECK_EQ(tk_ring_take(&r, tk_ring_head(&r), &b), 0);
    TK_CHECK_EQ(b.need, tk_ring_record_size(sizeof in));
    b.cap = b.need;
    TK_CHECK_EQ(tk_ring_take(&r, tk_ring_head(&r), &b), tk_ring_record_size(sizeof in));
    TK_CHECK_EQ(b.recs, 1);
    TK_CHECK_EQ(b.need, 0);
    /* Empty: nothing taken, nothing needed. */
    TK_CHECK_EQ(tk_ring_take(&r, tk_ring_head(&r), &b), 0);
    TK_CHECK_EQ(b.need, 0);
    tk_ring_destroy(&r);
}

/* A big ring's storage starts on a huge-page boundary; a touched ring of
 * either kind records and gives back as an untouched one does. */
TK_TEST(ring_big_storage_aligned_and_touched)
{
    size_t sizes[] = {TK_RING_MIN_SIZE, TK_RING_HUGE_SIZE, 2 * TK_RING_HUGE_SIZE};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        tk_ring r;
        TK_REQUIRE(tk_ring_init(&r, sizes[k], TK_RING_OVERWRITE) == 0);
        uintptr_t at = (uintptr_t)r.words;
        TK_CHECK_EQ(at % (sizes[k] >= TK_RING_HUGE_SIZE ? TK_RING_HUGE_SIZE : 64), 0);
        tk_ring_touch(&r);
        unsigned char buf[256];
        uint64_t n = 0;
        for (; n < sizes[k] / 16; n++) /* wraps: 24-byte records */
            TK_REQUIRE(ring_push(&r, n, &n, sizeof n) == 0);
        ring_rec rec;
        uint64_t last = 0, got = 0, v = 0;
        while (ring_pop(&r, tk_ring_head(&r), buf, sizeof buf, &rec)) {
            memcpy(&v, buf, sizeof v);
            TK_CHECK_EQ(rec.stamp, v);
            TK_CHECK(got == 0 || v == last + 1);
            last = v;
            got++;
        }
        TK_CHECK_EQ(last, n - 1);
        TK_CHECK(got > 0);
        tk_ring_destroy(&r);
    }
}

/* Every payload length from 0 to 300 bytes, across the end of the storage
 * at every offset: the header, the stamp and the payload (whose first
 * bytes share a word with the stamp) come back as pushed. */
TK_TEST(ring_every_length_round_trips)
{
    tk_ring r;
    unsigned char in[300], out[4096];
    ring_rec rec;
    TK_REQUIRE(tk_ring_init(&r, 4096, TK_RING_DROP) == 0);
    uint64_t stamp = 0x0123456789abcdefull;
    for (int round = 0; round < 40; round++)
        for (size_t len = 0; len <= 300; len += 1 + (size_t)round % 3) {
            for (size_t i = 0; i < len; i++)
                in[i] = (unsigned char)(len * 7 + i);
            TK_REQUIRE(ring_push(&r, stamp, in, len) == 0);
            TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, sizeof out, &rec));
            TK_CHECK_EQ(rec.stamp, stamp);
            TK_CHECK_EQ(rec.len, len);
            TK_CHECK(memcmp(out, in, len) == 0);
            stamp += 0x100000001ull;
        }
    tk_ring_destroy(&r);
}

/* ---- overwrite under a racing consumer, every size and stamp ----------- */

/* The producer evicts while the consumer copies: records of every length
 * up to tk_ring_max_payload (a quarter of the ring, so that one eviction
 * can empty the ring), stamps that stay, step by up to 2^63, jump to
 * 2^64 - 1 or go back (kept at the last one), taken in batches of 1 to 8.
 * Every record taken is one that was pushed, with its stamp, in order, and
 * after the producer stops everything left is taken. */
struct race {
    tk_ring ring;
    long n;
    atomic_int done;
    uint64_t *stamps; /* the stamp each record must come out with */
    long refused;
};

static uint64_t race_stamp(uint64_t prev, uint64_t x, bool to_end)
{
    static const uint64_t steps[] = {0, 1, 127, 128, 16384, UINT64_C(1) << 35,
                                     UINT64_C(1) << 63};
    switch (x % 11) {
    case 0: /* backwards: kept at the last one */
        return prev / 2;
    case 1: /* to the end of time */
        if (to_end)
            return UINT64_MAX;
        return prev;
    default: {
        uint64_t step = steps[(x >> 8) % 7];
        return prev > UINT64_MAX - step ? UINT64_MAX : prev + step;
    }
    }
}

static void *race_producer(void *arg)
{
    struct race *s = arg;
    static unsigned char buf[65536];
    size_t max = tk_ring_max_payload(&s->ring);
    uint64_t x = 0x9e3779b97f4a7c15ull, stamp = 0, kept = 0;
    for (uint64_t seq = 0; seq < (uint64_t)s->n; seq++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* The jump to 2^64 - 1 in the last eighth only: from there on
         * every stamp is that one (10 bytes whole, deltas of 0). */
        stamp = race_stamp(stamp, x >> 4, seq >= (uint64_t)s->n / 8 * 7);
        size_t len = x % 13 == 0   ? max - (size_t)((x >> 32) % 8)
                     : x % 5 == 0  ? 8 + (size_t)((x >> 32) % (max - 8))
                                   : 8 + (size_t)((x >> 32) % 40);
        kept = stamp > kept ? stamp : kept;
        s->stamps[seq] = kept;
        pay_fill(buf, seq, len);
        if (ring_push(&s->ring, stamp, buf, len) != 0)
            s->refused++;
    }
    atomic_store_explicit(&s->done, 1, memory_order_release);
    return NULL;
}

TK_TEST_THREADED(ring_overwrite_race_every_size_and_stamp)
{
    static struct race s;
    static unsigned char out[8192];
    pthread_t th;
    TK_REQUIRE(tk_ring_init(&s.ring, 4096, TK_RING_OVERWRITE) == 0);
    s.n = tk_test_iters(100000, 20);
    s.stamps = calloc((size_t)s.n, sizeof *s.stamps);
    TK_REQUIRE(s.stamps != NULL);
    atomic_store(&s.done, 0);
    s.refused = 0;
    pthread_create(&th, NULL, race_producer, &s);
    uint64_t taken = 0, next = 0, x = 1;
    long bad = 0;
    for (int last = 0; !last;) {
        last = atomic_load_explicit(&s.done, memory_order_acquire);
        for (;;) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            tk_ring_batch b = {.dst = out, .cap = sizeof out,
                               .max_recs = 1 + (size_t)(x >> 61)};
            if (tk_ring_take(&s.ring, tk_ring_head(&s.ring), &b) == 0) {
                TK_CHECK_EQ(b.need, 0); /* every record fits in out */
                break;
            }
            for (size_t off = 0; off < b.bytes;) {
                uint64_t hdr, seq = 0;
                memcpy(&hdr, out + off, 8);
                size_t len = tk_ring_rec_payload(hdr);
                if (tk_ring_rec_total(hdr) < TK_RING_HEADER ||
                    off + tk_ring_rec_total(hdr) > b.bytes ||
                    !pay_ok(out + off + TK_RING_HEADER, len, &seq) ||
                    seq < next || seq >= (uint64_t)s.n ||
                    tk_ring_rec_stamp(out + off) != s.stamps[seq]) {
                    bad++;
                    break;
                }
                next = seq + 1;
                taken++;
                off += tk_ring_rec_total(hdr);
            }
        }
    }
    pthread_join(th, NULL);
    TK_CHECK_EQ(s.refused, 0);
    TK_CHECK_EQ(bad, 0);
    TK_CHECK_EQ(next, (uint64_t)s.n); /* the newest survives */
    TK_CHECK_EQ(taken + atomic_load(&s.ring.overwritten), (uint64_t)s.n);
    TK_CHECK_EQ(tk_ring_used(&s.ring), 0);
    free(s.stamps);
    tk_ring_destroy(&s.ring);
}

/* ---- the format, modelled plainly -------------------------------------- */

/* What tk_ring.h says a record is, written without the library: LEB128
 * varints; the size field the fewest bytes that hold the record's size
 * (that field included) << 1 | whole; the stamp whole for the first record
 * to start in a segment (TK_RING_SEGMENT bytes, 1/64 of a smaller ring),
 * else its delta. A model ring keeps the bytes each push must write and
 * the records not yet taken; pushes and takes are checked against it byte
 * for byte, from the storage itself and through tk_ring_take. */
static size_t ref_varint(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (unsigned char)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v != 0);
    return n;
}

/* The bytes of a size field for a record of sl bytes of stamp and len of
 * payload. */
static size_t ref_size_field(size_t sl, size_t len)
{
    unsigned char t[10];
    size_t tl = 1;
    while (ref_varint(t, (sl + len + tl) << 1) > tl)
        tl++;
    return tl;
}

/* The record's bytes into p (TK_RING_HEAD_MAX + len): its size, 0 if the
 * size field would not be the fewest bytes (never). */
static size_t ref_record(unsigned char *p, bool whole, uint64_t field,
                         const unsigned char *payload, size_t len)
{
    unsigned char s[10];
    size_t sl = ref_varint(s, field), tl = ref_size_field(sl, len);
    if (ref_varint(p, (sl + len + tl) << 1 | whole) != tl)
        return 0;
    memcpy(p + tl, s, sl);
    if (len)
        memcpy(p + tl + sl, payload, len);
    return tl + sl + len;
}

static unsigned char ref_byte(uint64_t seq, size_t i)
{
    return (unsigned char)(seq * 37 + (seq >> 8) + i * 11 + (i >> 8));
}

#define MODEL_RECS 16384

typedef struct {
    tk_ring *r;
    uint64_t size, seg;
    uint64_t head, last_start, last_stamp;
    bool started; /* a record was pushed: last_start means something */
    unsigned char shadow[65536]; /* the bytes pushes wrote, by position */
    /* The records not yet taken, oldest first (a circular list). */
    struct { uint64_t pos, stamp, seq; size_t len; } rec[MODEL_RECS];
    size_t first, count;
    uint64_t seq;       /* records pushed (accepted or not) */
    uint64_t taken, evicted, refused;
    unsigned char payload[16384];
    unsigned char want[TK_RING_HEAD_MAX + 16384];
} model;

static void model_init(model *m, tk_ring *r)
{
    m->r = r;
    m->size = r->size;
    m->seg = r->size / 64 < TK_RING_SEGMENT ? r->size / 64 : TK_RING_SEGMENT;
    m->head = m->last_start = m->last_stamp = 0;
    m->started = false;
    m->first = m->count = 0;
    m->seq = m->taken = m->evicted = m->refused = 0;
}

/* Whether the ring's bytes at positions [from, to) are the model's. */
static int model_bytes_ok(const model *m, uint64_t from, uint64_t to)
{
    const unsigned char *ring = (const unsigned char *)m->r->words;
    for (uint64_t p = from; p < to; p++)
        if (ring[p & (m->size - 1)] != m->shadow[p & (m->size - 1)])
            return 0;
    return 1;
}

/* Whether the ring's n bytes from position pos are those at p. */
static int ring_is(const model *m, uint64_t pos, const unsigned char *p, size_t n)
{
    const unsigned char *ring = (const unsigned char *)m->r->words;
    for (size_t i = 0; i < n; i++)
        if (ring[(pos + i) & (m->size - 1)] != p[i])
            return 0;
    return 1;
}

/* Takes up to `want` records, each the oldest one not evicted: its
 * position, stamp and bytes as pushed. Records the model holds before it
 * were evicted (overwrite policy only), and so were all it holds when the
 * ring is empty. */
static void model_take(model *m, size_t want)
{
    static unsigned char out[16384 + 64];
    ring_rec got;
    for (size_t n = 0; n < want; n++) {
        if (!ring_pop(m->r, tk_ring_head(m->r), out, sizeof out, &got)) {
            TK_CHECK_EQ(tk_ring_used(m->r), 0);
            if (m->r->policy == TK_RING_DROP)
                TK_CHECK_EQ(m->count, 0);
            m->evicted += m->count;
            m->count = 0;
            return;
        }
        while (m->count > 0 && m->rec[m->first].pos < got.pos) {
            TK_REQUIRE(m->r->policy == TK_RING_OVERWRITE);
            m->first = (m->first + 1) % MODEL_RECS;
            m->count--;
            m->evicted++;
        }
        TK_REQUIRE(m->count > 0);
        TK_REQUIRE(m->rec[m->first].pos == got.pos);
        TK_CHECK_EQ(got.stamp, m->rec[m->first].stamp);
        TK_REQUIRE(got.len == m->rec[m->first].len);
        for (size_t i = 0; i < got.len; i++)
            if (out[i] != ref_byte(m->rec[m->first].seq, i)) {
                TK_CHECK_EQ(out[i], ref_byte(m->rec[m->first].seq, i));
                break;
            }
        m->first = (m->first + 1) % MODEL_RECS;
        m->count--;
        m->taken++;
    }
}

/* Pushes a record of len bytes, from memory of exactly TK_RING_BUF(len)
 * bytes (so that AddressSanitizer sees a read or write past either end),
 * and checks what the push did against the model. 1 when accepted. */
static int model_push(model *m, uint64_t stamp, size_t len)
{
    uint64_t seq = m->seq++;
    for (size_t i = 0; i < len; i++)
        m->payload[i] = ref_byte(seq, i);
    if (stamp < m->last_stamp)
        stamp = m->last_stamp;
    bool whole = !m->started || (m->head ^ m->last_start) >= m->seg;
    size_t n = ref_record(m->want, whole, whole ? stamp : stamp - m->last_stamp,
                          m->payload, len);
    if (n == 0) {
        TK_CHECK(n != 0);
        return 0;
    }
    uint64_t tail = atomic_load(&m->r->tail);
    int fits = tk_ring_room(m->r, m->head, n, tail);
    bool same;
    int rc = ring_push_exact(m->r, stamp, m->payload, len, 0x5A, &same);
    TK_CHECK(same); /* the payload is the caller's: never written */
    uint64_t h = tk_ring_head(m->r);
    if (m->r->policy == TK_RING_DROP) {
        TK_CHECK_EQ(rc, fits ? 0 : -1);
        if (rc != 0) {
            TK_CHECK_EQ(h, m->head);
            m->refused++;
            return 0;
        }
    }
    TK_CHECK_EQ(rc, 0);
    /* The record, and the bytes before it in its first word (the end of
     * the record before, if still to be taken). After an eviction that
     * emptied the ring, the stamp is whole. */
    tail = atomic_load(&m->r->tail);
    uint64_t from = m->head - (m->head & 7);
    bool ok = h - m->head == n &&
              model_bytes_ok(m, from > tail ? from : tail, m->head) &&
              ring_is(m, m->head, m->want, n);
    if (!ok && !whole && tk_ring_used(m->r) == h - m->head) {
        n = ref_record(m->want, true, stamp, m->payload, len);
        ok = h - m->head == n && ring_is(m, m->head, m->want, n);
    }
    if (!ok) {
        TK_CHECK_EQ(h - m->head, n);
        TK_CHECK(ok);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        m->shadow[(m->head + i) & (m->size - 1)] = m->want[i];
    if (m->count == MODEL_RECS) {
        TK_CHECK(m->count < MODEL_RECS);
        return 0;
    }
    size_t at = (m->first + m->count++) % MODEL_RECS;
    m->rec[at].pos = m->head;
    m->rec[at].stamp = stamp;
    m->rec[at].seq = seq;
    m->rec[at].len = len;
    m->started = true;
    m->last_start = m->head;
    m->last_stamp = stamp;
    m->head = h;
    return 1;
}

/* A step of the stamp of 1 to k bytes as a varint (0 to 127 for one), or
 * what is left below 2^64. */
static uint64_t model_stamp(uint64_t prev, uint64_t *x, unsigned k)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    unsigned b = 1 + (unsigned)(*x % k), bits = 7 * b < 64 ? 7 * b : 64;
    uint64_t lo = b == 1 ? 0 : UINT64_C(1) << (7 * (b - 1));
    uint64_t span = bits == 64 ? UINT64_MAX - lo : (UINT64_C(1) << bits) - lo;
    uint64_t step = lo + (*x >> 3) % span;
    return prev > UINT64_MAX - step ? UINT64_MAX : prev + step;
}

/* A filler record that moves the head forward by d bytes when one record
 * can (its stamp the last one), else by as few as it can. */
static void model_fill(model *m, uint64_t d)
{
    bool whole = !m->started || (m->head ^ m->last_start) >= m->seg;
    uint64_t field = whole ? m->last_stamp : 0;
    uint64_t target = d > 900 ? 600 : d;
    size_t len = 0;
    for (size_t l = target > 16 ? (size_t)target - 16 : 0; l <= target; l++)
        if (ref_record(m->want, whole, field, m->payload, l) == target) {
            len = l;
            break;
        }
    (void)model_push(m, m->last_stamp, len);
}

/* Every payload length from 0 to 300 starts at every byte of a ring of
 * 4096 bytes: across its end, ending at it, starting at it, at every byte
 * of a word; with stamps of 1 to 10 bytes whole and deltas of 1 to 10
 * bytes (the larger ones for the larger lengths: the stamps grow). */
static void sweep_lengths_and_offsets(tk_ring_policy policy)
{
    enum { SIZE = 4096 };
    static model m;
    static unsigned char covered[SIZE];
    tk_ring r;
    for (size_t len = 0; len <= 300; len++) {
        TK_REQUIRE(tk_ring_init(&r, SIZE, policy) == 0);
        model_init(&m, &r);
        uint64_t x = 0x9e3779b97f4a7c15ull ^ len, stamp = 0;
        unsigned k = 1 + (unsigned)(len % 10);
        stamp = model_stamp(0, &x, k);
        memset(covered, 0, sizeof covered);
        size_t left = SIZE;
        long steps = 0;
        while (left > 0) {
            TK_REQUIRE(++steps < 40 * SIZE);
            size_t off = (size_t)(m.head & (SIZE - 1));
            if (!covered[off]) {
                stamp = model_stamp(stamp, &x, k);
                TK_REQUIRE(model_push(&m, stamp, len));
                covered[off] = 1;
                left--;
            } else {
                uint64_t d = 1;
                while (covered[(off + d) & (SIZE - 1)])
                    d++;
                model_fill(&m, d);
            }
            if (tk_ring_used(&r) > SIZE / 2)
                model_take(&m, SIZE);
        }
        model_take(&m, SIZE);
        TK_CHECK_EQ(m.count, 0);
        TK_CHECK_EQ(m.taken, m.seq);
        TK_CHECK_EQ(atomic_load(&r.dropped), 0);
        TK_CHECK_EQ(atomic_load(&r.overwritten), 0);
        TK_CHECK_EQ(tk_ring_bytes(&r), m.head);
        tk_ring_destroy(&r);
    }
}

TK_TEST(ring_drop_every_length_at_every_offset)
{
    sweep_lengths_and_offsets(TK_RING_DROP);
}

TK_TEST(ring_overwrite_every_length_at_every_offset)
{
    sweep_lengths_and_offsets(TK_RING_OVERWRITE);
}

/* Full rings: refusals (drop) and evictions (overwrite) with records of
 * every length class (0 to 7 bytes, around the size field's 7-bit
 * boundaries, up to tk_ring_max_payload), stamps of every size (some going
 * back: kept at the last one), taken now and then in batches of 1 to 8:
 * every push and every record taken as the model says, the counts adding
 * up. */
static void model_full_ring(tk_ring_policy policy, size_t size, unsigned k)
{
    static model m;
    tk_ring r;
    TK_REQUIRE(tk_ring_init(&r, size, policy) == 0);
    model_init(&m, &r);
    size_t max = tk_ring_max_payload(&r);
    uint64_t x = 0x2545f4914f6cdd1dull + k, stamp = 0;
    for (long i = 0; i < 6000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t len;
        switch (x % 8) {
        case 0: len = (size_t)(x >> 8) % 8; break;
        case 1: len = 50 + (size_t)(x >> 8) % 20; break;   /* size 64 */
        case 2: len = 114 + (size_t)(x >> 8) % 20; break;  /* size 128 */
        case 3: len = max - (size_t)(x >> 8) % 4; break;
        default: len = (size_t)(x >> 8) % (max + 1); break;
        }
        uint64_t s = (x >> 40) % 16 == 0 ? stamp / 2 /* back */
                                          : model_stamp(stamp, &x, k);
        (void)model_push(&m, s, len);
        stamp = m.last_stamp;
        if ((x >> 20) % 5 == 0)
            model_take(&m, 1 + (size_t)(x >> 50) % 8);
        else if ((x >> 20) % 97 == 1)
            model_take(&m, SIZE_MAX);
    }
    model_take(&m, SIZE_MAX);
    TK_CHECK_EQ(m.count, 0);
    TK_CHECK_EQ(tk_ring_used(&r), 0);
    TK_CHECK_EQ(tk_ring_bytes(&r), m.head);
    if (policy == TK_RING_DROP) {
        TK_CHECK(m.refused > 100);
        TK_CHECK_EQ(atomic_load(&r.dropped), m.refused);
        TK_CHECK_EQ(m.taken + m.refused, m.seq);
    } else {
        TK_CHECK(m.evicted > 100);
        TK_CHECK_EQ(atomic_load(&r.overwritten), m.evicted);
        TK_CHECK_EQ(m.taken + m.evicted, m.seq);
    }
    tk_ring_destroy(&r);
}

/* Steps of the stamps of up to k bytes, k from 1 to 10: whole stamps
 * of every size. */
TK_TEST(ring_full_drop_matches_the_model)
{
    for (unsigned k = 1; k <= 10; k++) {
        model_full_ring(TK_RING_DROP, 4096, k);
        model_full_ring(TK_RING_DROP, 16384, k);
    }
}

TK_TEST(ring_full_overwrite_matches_the_model)
{
    for (unsigned k = 1; k <= 10; k++) {
        model_full_ring(TK_RING_OVERWRITE, 4096, k);
        model_full_ring(TK_RING_OVERWRITE, 16384, k);
    }
}

/* Records whose size field is about to take one byte more (sizes around
 * 64, 8192 and 2^20 bytes, whose field then takes 2, 3 and 4 bytes: the
 * field counts its own bytes), with stamps of 1 to 10 bytes. */
TK_TEST(ring_size_field_at_its_7_bit_boundaries)
{
    static model m;
    static const size_t rings[] = {4096, 65536};
    tk_ring r;
    for (size_t k = 0; k < 2; k++) {
        size_t edge = k == 0 ? 64 : 8192;
        TK_REQUIRE(tk_ring_init(&r, rings[k], TK_RING_DROP) == 0);
        model_init(&m, &r);
        for (unsigned sl = 1; sl <= 10; sl++) {
            uint64_t stamp = sl == 1 ? 100 : UINT64_C(1) << (7 * (sl - 1));
            for (size_t len = edge - 12 - sl; len <= edge + 2; len++) {
                TK_CHECK(model_push(&m, stamp, len));
                model_take(&m, SIZE_MAX);
            }
        }
        TK_CHECK_EQ(m.taken, m.seq);
        tk_ring_destroy(&r);
    }
    /* Around 2^20 in a ring of 8 MiB: records of a segment and more, every
     * stamp whole. */
    size_t edge = (size_t)1 << 20;
    unsigned char *in = malloc(TK_RING_ROOM + edge + 2);
    unsigned char *out = malloc(edge + 64);
    TK_REQUIRE(in != NULL && out != NULL);
    TK_REQUIRE(tk_ring_init(&r, 8u << 20, TK_RING_DROP) == 0);
    uint64_t seq = 0;
    for (unsigned sl = 1; sl <= 10; sl += 9) {
        uint64_t stamp = sl == 1 ? 100 : UINT64_C(1) << 63;
        for (size_t len = edge - 6 - sl; len <= edge + 2; len++, seq++) {
            unsigned char *pl = in + TK_RING_ROOM;
            for (size_t i = 0; i < len; i++)
                pl[i] = ref_byte(seq, i);
            uint64_t h = tk_ring_head(&r);
            TK_REQUIRE(tk_ring_push(&r, stamp, pl, len) == 0);
            TK_CHECK_EQ(tk_ring_head(&r) - h, sl + len + ref_size_field(sl, len));
            ring_rec rec;
            TK_REQUIRE(ring_pop(&r, tk_ring_head(&r), out, edge + 64, &rec));
            TK_CHECK_EQ(rec.stamp, stamp);
            TK_REQUIRE(rec.len == len);
            TK_CHECK(memcmp(out, pl, len) == 0);
        }
    }
    tk_ring_destroy(&r);
    free(in);
    free(out);
}

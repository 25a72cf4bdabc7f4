#include "tk_pub.h"
#include "tk_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    uint64_t version;
    uint64_t words[7];
} cfg;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

TK_TEST(pub_stage_commit_abort_get)
{
    cfg init = {1, {1, 1, 1, 1, 1, 1, 1}};
    tk_pub p;
    TK_REQUIRE(tk_pub_init(&p, sizeof init, &init) == 0);
    const cfg *c = tk_pub_read_begin(&p, 0);
    TK_CHECK_EQ(c->version, 1);
    tk_pub_read_end(&p, 0);
    TK_CHECK_EQ(tk_pub_version(&p), 0);

    cfg *s = tk_pub_stage(&p);
    TK_CHECK(s != (const void *)c); /* staging is the other generation */
    TK_CHECK(memcmp(s, &init, sizeof init) == 0); /* ... holding a copy */
    s->version = 2;
    s->words[3] = 2;
    tk_pub_commit(&p);
    c = tk_pub_read_begin(&p, 0);
    TK_CHECK_EQ(c->version, 2);
    TK_CHECK_EQ(c->words[3], 2);
    tk_pub_read_end(&p, 0);
    TK_CHECK_EQ(tk_pub_version(&p), 1);

    /* Consolidated: the next staging copy has the committed contents. */
    s = tk_pub_stage(&p);
    TK_CHECK_EQ(s->version, 2);
    TK_CHECK_EQ(s->words[3], 2);
    s->version = 99;
    tk_pub_abort(&p);
    cfg out;
    tk_pub_get(&p, &out);
    TK_CHECK_EQ(out.version, 2);
    s = tk_pub_stage(&p);
    TK_CHECK_EQ(s->version, 2); /* the aborted change is gone */
    tk_pub_abort(&p);
    TK_CHECK_EQ(tk_pub_version(&p), 1);
    tk_pub_destroy(&p);

    /* No initial contents: zeroes. */
    TK_REQUIRE(tk_pub_init(&p, sizeof init, NULL) == 0);
    tk_pub_get(&p, &out);
    TK_CHECK_EQ(out.version, 0);
    TK_CHECK_EQ(out.words[6], 0);
    tk_pub_destroy(&p);
}

TK_TEST(pub_modes)
{
    tk_pub p;
    TK_REQUIRE(tk_pub_init_flags(&p, 8, NULL, TK_PUB_FENCE) == 0);
    TK_CHECK(!tk_pub_gp_uses_membarrier(&p.gp));
    tk_pub_destroy(&p);
    TK_REQUIRE(tk_pub_init(&p, 8, NULL) == 0);
    /* Membarrier is used exactly when the kernel offers it (never under
     * TSan, which cannot see its ordering). */
    TK_CHECK_EQ(tk_pub_gp_uses_membarrier(&p.gp),
                !TK_PUB_TSAN && tk_pub_membarrier_available());
    tk_pub_destroy(&p);
}

/* ---- a commit waits for the readers of the old version ----------------- */

static struct {
    tk_pub p;
    unsigned slot;
    int nest;
    atomic_int inside, release, committed;
    uint64_t seen;
} hold;

static void *hold_reader(void *arg)
{
    (void)arg;
    const cfg *c = tk_pub_read_begin(&hold.p, hold.slot);
    if (hold.nest)
        (void)tk_pub_read_begin(&hold.p, hold.slot);
    hold.seen = c->version;
    atomic_store(&hold.inside, 1);
    while (!atomic_load(&hold.release))
        sleep_ms(1);
    /* Still the version the section began with, untouched. */
    if (c->version != hold.seen)
        hold.seen = ~(uint64_t)0;
    if (hold.nest)
        tk_pub_read_end(&hold.p, hold.slot);
    tk_pub_read_end(&hold.p, hold.slot);
    return NULL;
}

static void *hold_writer(void *arg)
{
    (void)arg;
    cfg *s = tk_pub_stage(&hold.p);
    s->version++;
    tk_pub_commit(&hold.p);
    atomic_store(&hold.committed, 1);
    return NULL;
}

static void commit_waits_for(unsigned slot, int nest, unsigned flags)
{
    TK_REQUIRE(tk_pub_init_flags(&hold.p, sizeof(cfg), NULL, flags) == 0);
    hold.slot = slot;
    hold.nest = nest;
    atomic_store(&hold.inside, 0);
    atomic_store(&hold.release, 0);
    atomic_store(&hold.committed, 0);
    pthread_t r, w;
    pthread_create(&r, NULL, hold_reader, NULL);
    while (!atomic_load(&hold.inside))
        sleep_ms(1);
    pthread_create(&w, NULL, hold_writer, NULL);
    sleep_ms(30);
    /* The reader is still in its section on version 0: no commit yet. */
    TK_CHECK_EQ(atomic_load(&hold.committed), 0);
    atomic_store(&hold.release, 1);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    TK_CHECK_EQ(atomic_load(&hold.committed), 1);
    TK_CHECK_EQ(hold.seen, 0);
    /* After commit returned, a new section sees the new version. */
    const cfg *c = tk_pub_read_begin(&hold.p, slot);
    TK_CHECK_EQ(c->version, 1);
    tk_pub_read_end(&hold.p, slot);
    tk_pub_destroy(&hold.p);
}

TK_TEST_THREADED(pub_commit_waits_for_owned_slot)
{
    commit_waits_for(3, 0, TK_PUB_AUTO);
    commit_waits_for(3, 0, TK_PUB_FENCE);
}

TK_TEST_THREADED(pub_commit_waits_for_shared_slot)
{
    commit_waits_for(TK_PUB_SHARED, 0, TK_PUB_AUTO);
    commit_waits_for(TK_PUB_SHARED + 7, 0, TK_PUB_FENCE);
}

TK_TEST_THREADED(pub_commit_waits_for_nested_sections)
{
    commit_waits_for(5, 1, TK_PUB_AUTO);
    commit_waits_for(TK_PUB_SHARED, 1, TK_PUB_AUTO);
}

/* A reader that is not in a section does not hold a commit back, however
 * many sections it ran before (the writer waits for a change of the slot,
 * not for the slot to be quiet). */
TK_TEST_THREADED(pub_idle_readers_do_not_delay_commit)
{
    tk_pub p;
    TK_REQUIRE(tk_pub_init(&p, sizeof(cfg), NULL) == 0);
    for (unsigned s = 0; s < TK_PUB_SLOTS; s++) {
        (void)tk_pub_read_begin(&p, s);
        tk_pub_read_end(&p, s);
    }
    for (int i = 0; i < 100; i++) {
        cfg *c = tk_pub_stage(&p);
        c->version++;
        tk_pub_commit(&p);
    }
    cfg out;
    tk_pub_get(&p, &out);
    TK_CHECK_EQ(out.version, 100);
    tk_pub_destroy(&p);
}

/* ---- many readers, many versions ----------------------------------------
 *
 * The payload repeats its version in every word and points to a heap
 * object that carries the version too. Each writer frees the object of the
 * version it replaced as soon as its commit returns: a reader still holding
 * it would be a use after free (AddressSanitizer) and a race (TSan).
 * Readers check that a version is never torn, never changes during their
 * section, never goes back, and is never older than a commit that had
 * returned before the section began.
 */
#define ST_READERS 4
#define ST_WRITERS 2

typedef struct {
    uint64_t version;
    uint64_t words[6];
    uint64_t *obj; /* obj[0..3] == version */
} vcfg;

static struct {
    tk_pub p;
    atomic_int stop_readers, stop_writers;
    _Atomic uint64_t returned; /* highest version whose commit returned */
    atomic_long reads, commits;
} st;

static int vcfg_whole(const vcfg *c, uint64_t v)
{
    if (c->version != v || c->obj == NULL)
        return 0;
    for (int i = 0; i < 6; i++)
        if (c->words[i] != v)
            return 0;
    for (int i = 0; i < 4; i++)
        if (c->obj[i] != v)
            return 0;
    return 1;
}

static void *st_reader(void *arg)
{
    unsigned slot = (unsigned)(uintptr_t)arg;
    uint64_t last = 0;
    long n = 0;
    while (!atomic_load_explicit(&st.stop_readers, memory_order_relaxed)) {
        uint64_t floor =
            atomic_load_explicit(&st.returned, memory_order_acquire);
        const vcfg *c = tk_pub_read_begin(&st.p, slot);
        uint64_t v = c->version;
        TK_CHECK(vcfg_whole(c, v));
        TK_CHECK(v >= last);
        TK_CHECK(v >= floor);
        /* Stay a little, then look again: nothing may have changed. */
        for (volatile int k = 0; k < (n & 63); k++)
            ;
        TK_CHECK(vcfg_whole(c, v));
        tk_pub_read_end(&st.p, slot);
        last = v;
        /* Readers also do other work: outside a section now and then, so
         * that on a machine with fewer cores than threads a reader is not
         * nearly always preempted inside one. */
        if ((++n & 255) == 0) {
            atomic_fetch_add_explicit(&st.reads, 256, memory_order_relaxed);
            sched_yield();
        }
    }
    return NULL;
}

static void *st_writer(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&st.stop_writers, memory_order_relaxed)) {
        vcfg *s = tk_pub_stage(&st.p);
        /* Staging holds the latest version (consolidated copy). */
        uint64_t v = s->version + 1;
        uint64_t *old = s->obj;
        uint64_t *obj = malloc(4 * sizeof *obj);
        for (int k = 0; k < 4; k++)
            obj[k] = v;
        s->version = v;
        for (int k = 0; k < 6; k++)
            s->words[k] = v;
        s->obj = obj;
        tk_pub_commit(&st.p);
        /* No reader can still hold the previous version. */
        for (int k = 0; k < 4; k++)
            old[k] = 0xdead;
        free(old);
        uint64_t r = atomic_load(&st.returned);
        while (r < v && !atomic_compare_exchange_weak(&st.returned, &r, v))
            ;
        atomic_fetch_add_explicit(&st.commits, 1, memory_order_relaxed);
    }
    return NULL;
}

/* Runs until both sides have done their share: at least `min_commits`
 * commits and `min_reads` reads, interleaved. */
static void pub_stress(unsigned flags)
{
    vcfg init = {0, {0}, NULL};
    init.obj = calloc(4, sizeof(uint64_t));
    TK_REQUIRE(tk_pub_init_flags(&st.p, sizeof init, &init, flags) == 0);
    long min_commits = tk_test_iters(2000, 20);
    long min_reads = tk_test_iters(200000, 20);
    atomic_store(&st.stop_readers, 0);
    atomic_store(&st.stop_writers, 0);
    atomic_store(&st.returned, 0);
    atomic_store(&st.reads, 0);
    atomic_store(&st.commits, 0);
    pthread_t r[ST_READERS], w[ST_WRITERS];
    /* Two owned slots and two threads sharing the shared slot. */
    unsigned slots[ST_READERS] = {0, 1, TK_PUB_SHARED, TK_PUB_SHARED};
    for (int i = 0; i < ST_READERS; i++)
        pthread_create(&r[i], NULL, st_reader, (void *)(uintptr_t)slots[i]);
    for (int i = 0; i < ST_WRITERS; i++)
        pthread_create(&w[i], NULL, st_writer, NULL);
    while (atomic_load(&st.commits) < min_commits ||
           atomic_load(&st.reads) < min_reads)
        sleep_ms(1);
    atomic_store(&st.stop_writers, 1);
    for (int i = 0; i < ST_WRITERS; i++)
        pthread_join(w[i], NULL);
    atomic_store(&st.stop_readers, 1);
    for (int i = 0; i < ST_READERS; i++)
        pthread_join(r[i], NULL);
    vcfg out;
    tk_pub_get(&st.p, &out);
    /* Every commit built on the one before it: writers were serialised
     * and staging always started from the latest version. */
    long commits = atomic_load(&st.commits);
    TK_CHECK_EQ(out.version, commits);
    TK_CHECK_EQ(tk_pub_version(&st.p), commits);
    TK_CHECK(vcfg_whole(&out, out.version));
    printf("    %ld reads, %ld commits\n", atomic_load(&st.reads), commits);
    free(out.obj);
    tk_pub_destroy(&st.p);
}

TK_TEST_THREADED(pub_concurrent_versions_membarrier)
{
    pub_stress(TK_PUB_AUTO);
}

TK_TEST_THREADED(pub_concurrent_versions_fence)
{
    pub_stress(TK_PUB_FENCE);
}

/* ---- a flag outside the configuration, and tk_pub_sync --------------------
 *
 * A recorder's close: the writer raises a flag, waits with tk_pub_sync,
 * and from then on no reader acts on the flag being down. Readers count,
 * inside their section, each time they found it down; the count read after
 * sync returns never grows again. */
typedef struct {
    tk_pub p;
    atomic_int closed, stop;
    atomic_long acted;
} sync_st;

static void *sync_reader(void *arg)
{
    sync_st *s = arg;
    static atomic_uint next;
    unsigned k = atomic_fetch_add(&next, 1);
    unsigned slot = k % 3 == 2 ? TK_PUB_SHARED : k % 64; /* owned: one thread each */
    long n = 0;
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        (void)tk_pub_read_begin(&s->p, slot);
        if (!atomic_load_explicit(&s->closed, memory_order_acquire)) {
            /* A little work between the look and the act, as a callback
             * encodes an event before it pushes it. */
            for (volatile int k = 0; k < (n & 127); k++)
                ;
            atomic_fetch_add_explicit(&s->acted, 1, memory_order_relaxed);
        }
        tk_pub_read_end(&s->p, slot);
        if ((++n & 63) == 0)
            sched_yield();
    }
    return NULL;
}

static void pub_sync_rounds(unsigned flags)
{
    enum { READERS = 4 };
    long rounds = tk_test_iters(200, 10);
    for (long round = 0; round < rounds; round++) {
        sync_st s;
        cfg init = {0, {0}};
        TK_REQUIRE(tk_pub_init_flags(&s.p, sizeof init, &init, flags) == 0);
        atomic_store(&s.closed, 0);
        atomic_store(&s.stop, 0);
        atomic_store(&s.acted, 0);
        pthread_t r[READERS];
        for (int i = 0; i < READERS; i++)
            pthread_create(&r[i], NULL, sync_reader, &s);
        while (atomic_load(&s.acted) < 1000)
            sched_yield();
        atomic_store_explicit(&s.closed, 1, memory_order_release);
        tk_pub_sync(&s.p);
        long at_sync = atomic_load(&s.acted);
        sleep_ms(1);
        TK_CHECK_EQ(atomic_load(&s.acted), at_sync);
        atomic_store(&s.stop, 1);
        for (int i = 0; i < READERS; i++)
            pthread_join(r[i], NULL);
        TK_CHECK_EQ(atomic_load(&s.acted), at_sync);
        tk_pub_destroy(&s.p);
    }
}

TK_TEST_THREADED(pub_sync_membarrier)
{
    pub_sync_rounds(TK_PUB_AUTO);
}

TK_TEST_THREADED(pub_sync_fence)
{
    pub_sync_rounds(TK_PUB_FENCE);
}

/* ---- reader cost ----------------------------------------------------------
 * Print the cost of a read_begin/read_end pair (and reading one word) in
 * each reader mode; what they check is only that every read returned the
 * published contents. The loop is its own function so that callgrind can
 * count its instructions (6M iterations per test):
 *   valgrind --tool=callgrind --toggle-collect=pub_read_pairs \
 *       build/ctest/plain/tk_tests pub_reader_cost_fence
 */
__attribute__((noinline)) uint64_t pub_read_pairs(tk_pub *p, unsigned slot,
                                                  long n)
{
    uint64_t sum = 0;
    for (long i = 0; i < n; i++) {
        const cfg *c = tk_pub_read_begin(p, slot);
        sum += c->version;
        tk_pub_read_end(p, slot);
    }
    return sum;
}

__attribute__((noinline)) uint64_t pub_plain_reads(const cfg *volatile *c,
                                                   long n)
{
    uint64_t sum = 0;
    for (long i = 0; i < n; i++)
        sum += (*c)->version;
    return sum;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void reader_cost(const char *name, unsigned flags, unsigned slot)
{
    const long n = 2000000;
    cfg init = {7, {0}};
    tk_pub p;
    TK_REQUIRE(tk_pub_init_flags(&p, sizeof init, &init, flags) == 0);
    if (flags == TK_PUB_AUTO && !tk_pub_gp_uses_membarrier(&p.gp))
        name = "fence (membarrier unavailable)";
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        uint64_t sum = pub_read_pairs(&p, slot, n);
        double ns = (now_ns() - t0) / (double)n;
        best = ns < best ? ns : best;
        TK_CHECK_EQ(sum, 7 * (uint64_t)n);
    }
    printf("    read_begin+read_end, %s: %.2f ns\n", name, best);
    tk_pub_destroy(&p);
}

TK_TEST(pub_reader_cost_baseline)
{
    const long n = 2000000;
    cfg init = {7, {0}};
    const cfg *base = &init;
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        double t0 = now_ns();
        uint64_t sum = pub_plain_reads((const cfg *volatile *)&base, n);
        double ns = (now_ns() - t0) / (double)n;
        best = ns < best ? ns : best;
        TK_CHECK_EQ(sum, 7 * (uint64_t)n);
    }
    printf("    plain pointer read: %.2f ns\n", best);
}

TK_TEST(pub_reader_cost_membarrier)
{
    reader_cost("membarrier", TK_PUB_AUTO, 2);
}

TK_TEST(pub_reader_cost_fence)
{
    reader_cost("fence", TK_PUB_FENCE, 2);
}

TK_TEST(pub_reader_cost_shared_slot)
{
    reader_cost("shared slot", TK_PUB_AUTO, TK_PUB_SHARED);
}

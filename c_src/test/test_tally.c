#include "tk_tally.h"
#include "tk_test.h"

#include <pthread.h>
#include <stdlib.h>

TK_TEST(tally_counts_and_resets)
{
    tk_tally *t = malloc(sizeof *t);
    TK_REQUIRE(t != NULL && tk_tally_init(t) == 0);
    uint64_t out[TK_TALLY_KEYS];
    tk_tally_read(t, out);
    TK_CHECK_EQ(out[3], 0);
    for (int i = 0; i < 5; i++)
        tk_tally_add(t, 0, 3);
    tk_tally_add(t, 7, 3);
    tk_tally_add(t, TK_TALLY_SHARED, 3);
    tk_tally_add(t, 1000, 4); /* out of range slot: shared row */
    tk_tally_read(t, out);
    TK_CHECK_EQ(out[3], 7);
    TK_CHECK_EQ(out[4], 1);
    tk_tally_reset(t);
    tk_tally_read(t, out);
    TK_CHECK_EQ(out[3], 0);
    TK_CHECK_EQ(out[4], 0);
    tk_tally_add(t, 0, 3);
    tk_tally_read(t, out);
    TK_CHECK_EQ(out[3], 1);
    tk_tally_destroy(t);
    free(t);
}

#define TT_THREADS 4
static tk_tally *tt;
static long tt_per_thread;

static void *tt_worker(void *arg)
{
    unsigned slot = (unsigned)(uintptr_t)arg;
    for (long i = 0; i < tt_per_thread; i++) {
        tk_tally_add(tt, slot, (unsigned)(i % 3));
        /* The last thread shares the fallback row with atomic adds. */
        if (slot == TT_THREADS - 1)
            tk_tally_add(tt, TK_TALLY_SHARED, 9);
    }
    return NULL;
}

/* Producers count while a reader reads: every read is monotonic between
 * resets, and the final counts are exact. */
TK_TEST_THREADED(tally_concurrent_exact)
{
    tt = malloc(sizeof *tt);
    TK_REQUIRE(tt != NULL && tk_tally_init(tt) == 0);
    tt_per_thread = tk_test_iters(300000, 20);
    pthread_t th[TT_THREADS];
    for (int i = 0; i < TT_THREADS; i++)
        pthread_create(&th[i], NULL, tt_worker, (void *)(uintptr_t)i);
    uint64_t prev[TK_TALLY_KEYS] = {0}, out[TK_TALLY_KEYS];
    for (int r = 0; r < 200; r++) {
        tk_tally_read(tt, out);
        for (int k = 0; k < 3; k++) {
            TK_CHECK(out[k] >= prev[k]);
            prev[k] = out[k];
        }
    }
    for (int i = 0; i < TT_THREADS; i++)
        pthread_join(th[i], NULL);
    tk_tally_read(tt, out);
    uint64_t total = (uint64_t)(TT_THREADS * tt_per_thread);
    TK_CHECK_EQ(out[0] + out[1] + out[2], total);
    TK_CHECK_EQ(out[0], (uint64_t)TT_THREADS * ((tt_per_thread + 2) / 3));
    TK_CHECK_EQ(out[9], (uint64_t)tt_per_thread);
    tk_tally_destroy(tt);
    free(tt);
}

#include "tk_keymap.h"
#include "tk_test.h"

#include <pthread.h>
#include <stdint.h>

TK_TEST(keymap_insert_find)
{
    static tk_keymap m;
    tk_keymap_init(&m);
    TK_CHECK_EQ(tk_keymap_find(&m, 0x1234), -1);
    int a = tk_keymap_index(&m, 0x1234);
    int b = tk_keymap_index(&m, 0x5678);
    TK_REQUIRE(a >= 0 && b >= 0);
    TK_CHECK(a != b);
    TK_CHECK_EQ(tk_keymap_index(&m, 0x1234), a);
    TK_CHECK_EQ(tk_keymap_find(&m, 0x5678), b);
    TK_CHECK_EQ(tk_keymap_key(&m, a), 0x1234);
}

TK_TEST(keymap_full)
{
    static tk_keymap m;
    tk_keymap_init(&m);
    for (uint64_t k = 1; k <= TK_KEYMAP_CAP; k++)
        TK_CHECK(tk_keymap_index(&m, k << 6 | 0xB) >= 0);
    TK_CHECK_EQ(tk_keymap_index(&m, (uint64_t)(TK_KEYMAP_CAP + 1) << 6 | 0xB),
                -1);
    /* Every key still found at a distinct index. */
    int seen[TK_KEYMAP_CAP] = {0};
    for (uint64_t k = 1; k <= TK_KEYMAP_CAP; k++) {
        int i = tk_keymap_find(&m, k << 6 | 0xB);
        TK_REQUIRE(i >= 0 && i < TK_KEYMAP_CAP);
        TK_CHECK_EQ(seen[i], 0);
        seen[i] = 1;
    }
}

/* Threads insert overlapping key sets at once: each key must end at exactly
 * one index, the same for every thread. */
#define KM_THREADS 4
#define KM_KEYS 200
static tk_keymap km_shared;
static int km_result[KM_THREADS][KM_KEYS];

static void *km_worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int r = 0; r < KM_KEYS; r++) {
        int k = (r * 7 + id * 13) % KM_KEYS; /* different orders */
        km_result[id][k] = tk_keymap_index(&km_shared, (uint64_t)(k + 1) << 6);
    }
    return NULL;
}

TK_TEST_THREADED(keymap_concurrent_inserts)
{
    long rounds = tk_test_iters(20, 50);
    for (long round = 0; round < rounds; round++) {
        pthread_t th[KM_THREADS];
        tk_keymap_init(&km_shared);
        for (int i = 0; i < KM_THREADS; i++)
            pthread_create(&th[i], NULL, km_worker, (void *)(intptr_t)i);
        for (int i = 0; i < KM_THREADS; i++)
            pthread_join(th[i], NULL);
        for (int k = 0; k < KM_KEYS; k++) {
            TK_REQUIRE(km_result[0][k] >= 0);
            for (int i = 1; i < KM_THREADS; i++)
                TK_CHECK_EQ(km_result[i][k], km_result[0][k]);
            TK_CHECK_EQ(tk_keymap_key(&km_shared, km_result[0][k]),
                        (uint64_t)(k + 1) << 6);
        }
    }
}

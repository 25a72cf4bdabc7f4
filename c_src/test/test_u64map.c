#include "tk_test.h"
#include "tk_u64map.h"

TK_TEST(u64map_put_get_grow_clear)
{
    tk_u64map m = {0};
    uint32_t v;
    TK_CHECK_EQ(tk_u64map_get(&m, 5, &v), 0);
    for (uint64_t k = 1; k <= 10000; k++)
        TK_REQUIRE(tk_u64map_put(&m, k * 0x1000 + 3, (uint32_t)k) == 0);
    TK_CHECK_EQ(m.n, 10000);
    TK_CHECK(m.cap >= 20000);
    for (uint64_t k = 1; k <= 10000; k++) {
        TK_REQUIRE(tk_u64map_get(&m, k * 0x1000 + 3, &v));
        TK_CHECK_EQ(v, k);
    }
    TK_CHECK_EQ(tk_u64map_get(&m, 0x1000 * 10001 + 3, &v), 0);
    TK_REQUIRE(tk_u64map_put(&m, 0x1003, 77) == 0); /* replaces */
    TK_CHECK_EQ(m.n, 10000);
    TK_REQUIRE(tk_u64map_get(&m, 0x1003, &v));
    TK_CHECK_EQ(v, 77);
    tk_u64map_clear(&m);
    TK_CHECK_EQ(tk_u64map_get(&m, 0x1003, &v), 0);
    TK_CHECK_EQ(m.n, 0);
    tk_u64map_free(&m);
}

/* Removal against a plain model: random puts and removes of keys that
 * collide a lot (a small map), every key looked up after each step. */
TK_TEST(u64map_remove_keeps_the_others)
{
    enum { K = 300 };
    tk_u64map m = {0};
    uint32_t model[K + 1];
    int in[K + 1] = {0};
    uint64_t x = 12345;
    for (long step = 0; step < 200000; step++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t k = 1 + x % K;
        if ((x >> 20) % 3 == 0) {
            tk_u64map_remove(&m, k * 0x40 + 3);
            in[k] = 0;
        } else {
            TK_REQUIRE(tk_u64map_put(&m, k * 0x40 + 3, (uint32_t)step) == 0);
            in[k] = 1;
            model[k] = (uint32_t)step;
        }
        if (step % 97 == 0) {
            size_t n = 0;
            for (uint64_t q = 1; q <= K; q++) {
                uint32_t *v = tk_u64map_ref(&m, q * 0x40 + 3);
                TK_REQUIRE((v != NULL) == in[q]);
                if (v != NULL)
                    TK_CHECK_EQ(*v, model[q]);
                n += in[q];
            }
            TK_CHECK_EQ(m.n, n);
        }
    }
    tk_u64map_remove(&m, 999999); /* not there */
    tk_u64map_free(&m);
}

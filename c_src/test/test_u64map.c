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

#include <stddef.h>

#include "tk_limit.h"
#include "tk_test.h"

static void run(tk_limit *l, const uint64_t *t, const int *want, int n)
{
    for (int i = 0; i < n; i++)
        TK_CHECK_EQ(tk_limit_event(l, t[i]), want[i]);
}

TK_TEST(limit_max_events)
{
    tk_limit l;
    TK_REQUIRE(tk_limit_init(&l, 3, 0, 0) == 0);
    uint64_t t[] = {1, 2, 3, 4, 5};
    int want[] = {TK_LIMIT_SHOW, TK_LIMIT_SHOW, TK_LIMIT_LAST, TK_LIMIT_OVER, TK_LIMIT_OVER};
    run(&l, t, want, 5);
    TK_CHECK_EQ(l.shown, 3);
    TK_CHECK_EQ(l.over, 2);
    TK_CHECK_EQ(l.reached, TK_LIMIT_MAX);
    tk_limit_free(&l);
}

/* {3, 10 ms} in microseconds: tracekit_limits_tests' rate cases. */
TK_TEST(limit_rate)
{
    tk_limit l;
    TK_REQUIRE(tk_limit_init(&l, 100, 3, 10000) == 0);
    uint64_t a[] = {0, 1000, 2000, 9999, 20000};
    int wa[] = {TK_LIMIT_SHOW, TK_LIMIT_SHOW, TK_LIMIT_SHOW, TK_LIMIT_STOP, TK_LIMIT_OVER};
    run(&l, a, wa, 5);
    TK_CHECK_EQ(l.reached, TK_LIMIT_RATE);
    TK_CHECK_EQ(l.shown, 3);
    TK_CHECK_EQ(l.over, 2);
    tk_limit_free(&l);

    TK_REQUIRE(tk_limit_init(&l, 100, 3, 10000) == 0);
    uint64_t b[] = {0, 5000, 10000, 15000, 16000, 17000};
    int wb[] = {TK_LIMIT_SHOW, TK_LIMIT_SHOW, TK_LIMIT_SHOW,
                TK_LIMIT_SHOW, TK_LIMIT_SHOW, TK_LIMIT_STOP};
    run(&l, b, wb, 6);
    tk_limit_free(&l);

    /* A time before the window's oldest counts as equal to it. */
    TK_REQUIRE(tk_limit_init(&l, 0, 1, 10) == 0);
    TK_CHECK_EQ(tk_limit_event(&l, 100), TK_LIMIT_SHOW);
    TK_CHECK_EQ(tk_limit_event(&l, 50), TK_LIMIT_STOP);
    tk_limit_free(&l);
}

TK_TEST(limit_none_and_bounds)
{
    tk_limit l;
    TK_REQUIRE(tk_limit_init(&l, 0, 0, 0) == 0);
    for (uint64_t t = 0; t < 100000; t++)
        TK_REQUIRE(tk_limit_event(&l, 0) == TK_LIMIT_SHOW);
    TK_CHECK_EQ(l.shown, 100000);
    tk_limit_free(&l);
    TK_CHECK_EQ(tk_limit_init(&l, 0, TK_LIMIT_RATE_MAX + 1, 5), -1);
    TK_CHECK(l.window == NULL);
    TK_REQUIRE(tk_limit_init(&l, 0, TK_LIMIT_RATE_MAX, 5) == 0);
    tk_limit_free(&l);
}

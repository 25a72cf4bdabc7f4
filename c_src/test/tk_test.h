/* tk_test.h: a small unit-test harness for the C core.
 *
 * A test is a function defined with TK_TEST(name) (or TK_TEST_THREADED for
 * tests that start threads: those also run under ThreadSanitizer). Tests
 * register themselves at load time; tk_test_main.c runs them and ends with
 * the line "N passed, N failed".
 *
 * TK_CHECK(cond) records a failure and goes on; TK_REQUIRE(cond) records a
 * failure and leaves the test. Both may be used from any thread.
 */
#ifndef TK_TEST_H
#define TK_TEST_H

#include <inttypes.h>
#include <stdint.h>

typedef void (*tk_test_fn)(void);

void tk_test_register(const char *file, const char *name, tk_test_fn fn,
                      int threaded);
void tk_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Nonzero when TK_TEST_LONG is set: concurrency tests run longer. */
int tk_test_long(void);
/* Iterations: `base`, or `base * factor` in long mode. */
long tk_test_iters(long base, long factor);

#define TK_TEST_DEFINE_(name, threaded)                                     \
    static void name(void);                                                 \
    __attribute__((constructor)) static void name##_register(void)          \
    {                                                                       \
        tk_test_register(__FILE__, #name, name, threaded);                  \
    }                                                                       \
    static void name(void)

#define TK_TEST(name) TK_TEST_DEFINE_(name, 0)
#define TK_TEST_THREADED(name) TK_TEST_DEFINE_(name, 1)

#define TK_CHECK(cond)                                                      \
    do {                                                                    \
        if (!(cond))                                                        \
            tk_test_fail(__FILE__, __LINE__, "%s", #cond);                  \
    } while (0)

#define TK_REQUIRE(cond)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            tk_test_fail(__FILE__, __LINE__, "%s", #cond);                  \
            return;                                                         \
        }                                                                   \
    } while (0)

/* Integer equality with both values in the message. */
#define TK_CHECK_EQ(a, b)                                                   \
    do {                                                                    \
        int64_t tk_a_ = (int64_t)(a), tk_b_ = (int64_t)(b);                 \
        if (tk_a_ != tk_b_)                                                 \
            tk_test_fail(__FILE__, __LINE__, "%s == %s (%" PRId64           \
                         " != %" PRId64 ")", #a, #b, tk_a_, tk_b_);         \
    } while (0)

#endif

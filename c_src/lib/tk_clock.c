#include "tk_clock.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

int tk_clock_tsc;
int tk_clock_fenced;

void tk_clock_init(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000007u &&
        __get_cpuid(0x80000007u, &a, &b, &c, &d))
        tk_clock_tsc = (d >> 8) & 1;
#endif
    const char *how = getenv("TRACEKIT_CLOCK");
    if (how != NULL && strcmp(how, "monotonic") == 0)
        tk_clock_tsc = 0;
    tk_clock_fenced = how != NULL && strcmp(how, "fenced") == 0;
}

static uint64_t mono_ns(void)
{
    return tk_clock_monotonic_();
}

static uint64_t tsc_hz;
static pthread_once_t hz_once = PTHREAD_ONCE_INIT;

/* TSC ticks over a CLOCK_MONOTONIC interval of about 20 ms, each end
 * read between two monotonic readings (the pair closest together). */
static void measure_hz(void)
{
    uint64_t m0 = 0, t0 = 0, m1, t1, best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = mono_ns(), t = tk_clock_stamp_fenced(), b = mono_ns();
        if (b - a < best) {
            best = b - a;
            m0 = a + (b - a) / 2;
            t0 = t;
        }
    }
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    best = UINT64_MAX;
    m1 = m0;
    t1 = t0;
    for (int i = 0; i < 5; i++) {
        uint64_t a = mono_ns(), t = tk_clock_stamp_fenced(), b = mono_ns();
        if (b - a < best) {
            best = b - a;
            m1 = a + (b - a) / 2;
            t1 = t;
        }
    }
    tsc_hz = m1 > m0 ? (uint64_t)((double)(t1 - t0) * 1e9 / (double)(m1 - m0))
                     : 1000000000u;
}

uint64_t tk_clock_hz(void)
{
    if (!tk_clock_tsc)
        return 1000000000u;
    pthread_once(&hz_once, measure_hz);
    return tsc_hz;
}

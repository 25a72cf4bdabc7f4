/* tk_clock.h: the stamp every record carries, used to merge the rings of
 * several producer threads into one time-ordered stream.
 *
 * It must be cheap (it is read on every event) and consistent across
 * threads: a reading taken after another in happens-before order is not
 * smaller. On x86-64 CPUs that report an invariant time-stamp counter
 * (CPUID 0x80000007, EDX bit 8) the stamp is the TSC, about 18 ns here
 * with the fence it needs (11 without) against 25 ns for clock_gettime;
 * otherwise it is CLOCK_MONOTONIC in
 * nanoseconds. tk_clock_init() chooses once. Stamps are only compared with
 * each other, never shown.
 */
#ifndef TK_CLOCK_H
#define TK_CLOCK_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

extern int tk_clock_tsc; /* nonzero: stamps are TSC readings */

/* Chooses the source; call once before the first stamp (idempotent). */
void tk_clock_init(void);

/* Stamps per second: 1e9 for CLOCK_MONOTONIC stamps; for TSC stamps,
 * measured against CLOCK_MONOTONIC over about 20 ms the first time it is
 * asked (then kept). Trace files record it, so that stamps of one machine
 * convert to time on one scale. */
uint64_t tk_clock_hz(void);

static inline uint64_t tk_clock_stamp(void)
{
#if defined(__x86_64__)
    if (tk_clock_tsc) {
        /* LFENCE first: the read waits for earlier instructions (such as
         * the acquire that made this event follow another thread's) to
         * complete, so the stamp cannot be taken early. */
        _mm_lfence();
        return __rdtsc();
    }
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif

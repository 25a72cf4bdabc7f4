/* tk_clock.h: the stamp every record carries, used to merge the rings of
 * several producer threads into one time-ordered stream.
 *
 * It must be cheap (it is read on every event) and consistent across
 * threads: a reading taken after another in happens-before order is not
 * smaller. On x86-64 CPUs that report an invariant time-stamp counter
 * (CPUID 0x80000007, EDX bit 8) the stamp is the TSC; otherwise it is
 * CLOCK_MONOTONIC in nanoseconds. tk_clock_init() chooses once, and reads
 * TRACEKIT_CLOCK: `monotonic' forces CLOCK_MONOTONIC, `fenced' an LFENCE
 * before every TSC read. Stamps are only compared with each other, never
 * shown.
 *
 * RDTSC does not wait for earlier instructions: it may read the counter
 * while an earlier load is still in flight. A thread that takes over a
 * tracee from another one (an acquire that reads the other's release)
 * could then read a smaller stamp than the other's last one, if its
 * stamp came within the CPU's reorder window (its reorder buffer: at most
 * a few hundred instructions) after that acquire. `fenced' closes the
 * window whatever the caller does (LFENCE waits for every earlier
 * instruction, loads included). The plain read relies on the caller: the
 * tracers stamp an event at the top of trace_*, which the VM calls after
 * enabled_* for the same event, after building the event's term, and
 * after whatever handed the process to this thread (the run queue, the
 * message queue): README, "The ordering stamp", has the measurements.
 * Code with a short path from an acquire to its stamp (the C tests'
 * token hand-offs) calls tk_clock_stamp_fenced.
 */
#ifndef TK_CLOCK_H
#define TK_CLOCK_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

extern int tk_clock_tsc;    /* nonzero: stamps are TSC readings */
extern int tk_clock_fenced; /* nonzero: LFENCE before every TSC read */

/* Chooses the source and the fence (TRACEKIT_CLOCK); call once before
 * the first stamp (idempotent). */
void tk_clock_init(void);

/* Stamps per second: 1e9 for CLOCK_MONOTONIC stamps; for TSC stamps,
 * measured against CLOCK_MONOTONIC over about 20 ms the first time it is
 * asked (then kept). Trace files record it, so that stamps of one machine
 * convert to time on one scale. */
uint64_t tk_clock_hz(void);

static inline uint64_t tk_clock_monotonic_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The stamp of an event: see above for what the plain TSC read assumes
 * of the caller. */
static inline uint64_t tk_clock_stamp(void)
{
#if defined(__x86_64__)
    if (tk_clock_tsc) {
        if (tk_clock_fenced)
            _mm_lfence();
        return __rdtsc();
    }
#endif
    return tk_clock_monotonic_();
}

/* A stamp not taken before any earlier instruction completes, whatever
 * TRACEKIT_CLOCK says: for callers whose path from an acquire to the
 * stamp is short. (clock_gettime reads the TSC with its own barrier.) */
static inline uint64_t tk_clock_stamp_fenced(void)
{
#if defined(__x86_64__)
    if (tk_clock_tsc) {
        /* LFENCE: the read waits for earlier instructions (such as the
         * acquire that made this event follow another thread's) to
         * complete, so the stamp cannot be taken early. */
        _mm_lfence();
        return __rdtsc();
    }
#endif
    return tk_clock_monotonic_();
}

#endif

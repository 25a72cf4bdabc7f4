/* tk_stat.h: statistics counters with a single writer.
 *
 * A counter that only its owner thread ever increments (a ring's written
 * and dropped counts, a thread's tally row) needs no read-modify-write: a
 * relaxed load and a relaxed store make an exact increment, and readers on
 * other threads see some recent value. The atomic type makes those
 * concurrent reads well defined (and visible to ThreadSanitizer).
 */
#ifndef TK_STAT_H
#define TK_STAT_H

#include <stdatomic.h>
#include <stdint.h>

/* Adds `by` to a counter written only by the calling thread. */
static inline void tk_stat_add(_Atomic uint64_t *c, uint64_t by)
{
    uint64_t v = atomic_load_explicit(c, memory_order_relaxed);
    atomic_store_explicit(c, v + by, memory_order_relaxed);
}

/* Reads a counter from any thread. */
static inline uint64_t tk_stat_read(_Atomic uint64_t *c)
{
    return atomic_load_explicit(c, memory_order_relaxed);
}

#endif

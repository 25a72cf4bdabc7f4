/* ring.h: the tracekit_ring NIF library: its private data and the ring
 * resource.
 *
 * A ring resource is the tracer state: a recorder (tk_recorder.h: the
 * per-thread rings the VM's callbacks write into, and the settings) and
 * the consumer side, a tk_merge under a mutex that drain/1,2 take events
 * out of, in time order, as the process tracer's terms.
 */
#ifndef TK_RING_NIF_H
#define TK_RING_NIF_H

#include <erl_nif.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tk_merge.h"
#include "tk_recorder.h"

#define RING_ATOMS(X)                                                       \
    X(error) X(enomem) X(written) X(dropped) X(overwritten) X(bytes)        \
    X(producers) X(filtered) X(buffered) X(drained) X(truncated)            \
    X(undecodable) X(size) X(policy) X(closed) X(paused) X(sample) X(tags)  \
    X(all) X(min_size) X(max_size) X(memory) X(schedulers) X(drain_chunk)

/* The library's private data (one per load of the library). */
typedef struct {
    tk_recorder_lib rec;
    ErlNifResourceType *ring_type;
    _Atomic long alive; /* rings allocated and not yet freed */
#define RING_ATOM_FIELD(a) ERL_NIF_TERM am_##a;
    RING_ATOMS(RING_ATOM_FIELD)
#undef RING_ATOM_FIELD
} ring_lib;

typedef struct {
    tk_recorder *rec; /* the producer side (aligned: not in the resource) */

    /* Consumer side, under `lock`. */
    ErlNifMutex *lock;
    tk_merge merge;
    uint64_t drained;
    uint64_t undecodable; /* records drain could not turn into terms */
} ring_res;

#endif

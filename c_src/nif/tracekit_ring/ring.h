/* ring.h: the tracekit_ring NIF library: its private data, the ring
 * resource, and what its files share.
 *
 * A ring resource is the tracer state. It owns one tk_ring per producer
 * thread (made ready by new/1, taken by a thread on its first event), the
 * consumer side (a tk_merge under a mutex) and the configuration chosen at
 * creation.
 *
 * Files: ring_nif.c (load, new, close, stats, set, drain), tracer.c (the
 * VM's callbacks: the hot path). Events are encoded and decoded by
 * c_src/nif/common (tk_codec.h).
 */
#ifndef TK_RING_NIF_H
#define TK_RING_NIF_H

#include <erl_nif.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tk_codec.h"
#include "tk_merge.h"
#include "tk_pub.h"
#include "tk_ring.h"
#include "tk_scratch.h"
#include "tk_tags.h"
#include "tk_thread.h"

#define RING_ATOMS(X)                                                       \
    X(ok) X(error) X(trace) X(discard) X(remove) X(trace_status) X(extra)   \
    X(match_spec_result) X(scheduler_id) X(timestamp) X(true) X(false)      \
    X(undefined) X(drop) X(overwrite) X(full) X(none) X(max_bytes)          \
    X(written) X(dropped) X(overwritten) X(bytes) X(producers) X(filtered)  \
    X(buffered) X(drained) X(truncated) X(undecodable) X(size) X(policy)    \
    X(closed) X(enomem) X(paused) X(sample) X(tags) X(all) X(min_size)      \
    X(max_size) X(memory) X(drain_chunk) X(badopt)

/* The library's private data (one per load of the library). */
typedef struct {
    ErlNifResourceType *ring_type;
    tk_codec codec;
    tk_scratch scratch;
    _Atomic long alive; /* rings allocated and not yet freed */
#define RING_ATOM_FIELD(a) ERL_NIF_TERM am_##a;
    RING_ATOMS(RING_ATOM_FIELD)
#undef RING_ATOM_FIELD
} ring_lib;

/* What set/2 changes while tracing runs: published through tk_pub, read
 * without locks by every callback. */
typedef struct {
    bool paused;
    bool all_tags;   /* no tag filter given (`all') */
    uint32_t sample; /* keep every Nth event; 1 = all */
    tk_tagset tags;  /* the tags recorded */
} ring_cfg;

/* Counters of one producer slot, written by its thread only, on their own
 * cache line. */
typedef struct {
    alignas(64) _Atomic uint64_t filtered; /* refused by the configuration */
    _Atomic uint64_t truncated;            /* recorded with a part cut for
                                              want of room */
    uint64_t tick;                         /* events seen, for sampling */
} slot_state;

typedef struct {
    /* Configuration, fixed at creation. */
    size_t size; /* bytes per producer ring */
    tk_ring_policy policy;
    tk_payload payload;
    bool payload_ready;   /* payload initialised (the destructor checks) */
    size_t reserve;       /* drop mode: free bytes enabled_* requires */
    const void *registry; /* the thread registry that numbers producers[] */

    /* Configuration that set/2 changes (ring_cfg). */
    tk_pub cfg;
    bool cfg_ready; /* cfg initialised (the destructor checks) */

    atomic_bool closed;
    _Atomic(tk_ring *) producers[TK_THREAD_SLOTS];
    /* Rings made ready by new/1, one per normal scheduler, their memory
     * already touched: a thread's first event takes one instead of
     * allocating (and page-faulting) on the hot path. */
    tk_ring **pool;
    unsigned pool_n;
    _Atomic unsigned pool_next;
    slot_state slots[TK_THREAD_SLOTS];
    _Atomic uint64_t lost; /* dropped outside any producer ring: threads
                              past the slot table, no memory, a tag that
                              is not a trace tag */

    /* Consumer side, under `lock`. */
    ErlNifMutex *lock;
    tk_merge merge;
    uint64_t drained;
    uint64_t undecodable; /* records drain could not turn into terms */
} ring_res;

/* The ring behind a term, or NULL. */
static inline ring_res *ring_get(const ring_lib *lib, ErlNifEnv *env,
                                 ERL_NIF_TERM t)
{
    ring_res *r;
    return enif_get_resource(env, t, lib->ring_type, (void **)&r) ? r : NULL;
}

/* ---- tracer.c: the callbacks, one pair per event class ---------------- */

#define TRACER_CLASSES(X)                                                   \
    X(generic) X(send) X(receive) X(call) X(procs) X(ports)                 \
    X(running_procs) X(running_ports) X(garbage_collection)
#define TRACER_DECL(cls)                                                    \
    ERL_NIF_TERM tk_enabled_##cls(ErlNifEnv *, int, const ERL_NIF_TERM[]);  \
    ERL_NIF_TERM tk_trace_##cls(ErlNifEnv *, int, const ERL_NIF_TERM[]);
TRACER_CLASSES(TRACER_DECL)
#undef TRACER_DECL

#endif

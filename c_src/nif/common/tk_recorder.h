/* tk_recorder.h: the hot path of tracekit's recording tracers
 * (tracekit_ring, tracekit_file): per-thread rings that the VM's callbacks
 * write events into, and the settings set/2 changes.
 *
 * A recorder is the part of a tracer's state that the callbacks touch. The
 * tracer module keeps it in its resource (by pointer: a recorder is
 * aligned to cache lines, which a resource's memory is not) and adds its
 * consumer side: tracekit_ring drains the rings into terms, tracekit_file's
 * writer thread moves them to disk.
 *
 * enabled*(Tag, State, Tracee) runs first, on the thread of the traced
 * event; answering `discard` there means the VM never builds the trace
 * term, so everything that can be decided without the term is decided
 * there: a closed or foreign state, the tag filter, sampling, and (drop
 * policy) a full ring. trace*(Tag, State, Tracee, Term, Opts) then encodes
 * the event into the calling thread's own ring. Neither takes a lock.
 * Memory is allocated once per thread and recorder (that thread's ring,
 * its encoding buffer), when an event is larger than the thread's buffer
 * (which then grows), and by enif_term_to_binary for the terms the NIF
 * API cannot take apart.
 *
 * Anyone may call the callbacks with any terms: the state must be the
 * tracer's resource, the tag a trace tag, and every term is copied within
 * bounds.
 */
#ifndef TK_RECORDER_H
#define TK_RECORDER_H

#include <erl_nif.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tk_codec.h"
#include "tk_pub.h"
#include "tk_ring.h"
#include "tk_scratch.h"
#include "tk_tags.h"
#include "tk_thread.h"

/* What a library that records keeps in its private data for the
 * callbacks: a tk_recorder_lib at the start of its private data. The
 * tracer states are resources of `holder_type` that start with a
 * `tk_recorder *`. */
#define TK_RECORDER_ATOMS(X)                                                \
    X(ok) X(trace) X(discard) X(remove) X(trace_status) X(extra)            \
    X(match_spec_result) X(scheduler_id) X(timestamp) X(drop) X(overwrite)  \
    X(full) X(none) X(max_bytes) X(true) X(false) X(undefined)

typedef struct {
    tk_codec codec;
    tk_scratch scratch;
    ErlNifResourceType *holder_type; /* the tracer states' resource type */
#define TK_RECORDER_ATOM_FIELD(a) ERL_NIF_TERM am_##a;
    TK_RECORDER_ATOMS(TK_RECORDER_ATOM_FIELD)
#undef TK_RECORDER_ATOM_FIELD
} tk_recorder_lib;

/* Also sets what every recording library needs once loaded: tk_mem's
 * allocator (the VM's) and the stamp's clock (tk_clock_init). 0, or -1
 * when out of memory. */
int tk_recorder_lib_init(tk_recorder_lib *lib, ErlNifEnv *env,
                         ErlNifResourceType *holder_type);
void tk_recorder_lib_free(tk_recorder_lib *lib);

/* What set/2 changes while tracing runs: published through tk_pub, read
 * without locks by every callback. */
typedef struct {
    bool paused;
    bool all_tags;   /* no tag filter given (`all') */
    uint32_t sample; /* keep every Nth event; 1 = all */
    tk_tagset tags;  /* the tags recorded */
} tk_recorder_cfg;

/* Counters of one producer slot, written by its thread only, on their own
 * cache line. */
typedef struct {
    alignas(64) _Atomic uint64_t filtered; /* refused by the settings */
    _Atomic uint64_t truncated;            /* recorded with a part cut for
                                              want of room */
    uint64_t tick;                         /* events seen, for sampling */
} tk_recorder_slot;

typedef struct {
    /* Fixed at creation. */
    size_t size; /* bytes per producer ring */
    tk_ring_policy policy;
    tk_payload payload;
    bool payload_ready;
    size_t reserve;       /* drop mode: free bytes enabled_* requires */
    const void *registry; /* the thread registry that numbers producers[] */

    /* The settings set/2 changes (tk_recorder_cfg). */
    tk_pub cfg;
    bool cfg_ready;

    atomic_bool closed;
    _Atomic(tk_ring *) producers[TK_THREAD_SLOTS];
    /* Rings made ready at creation, one per normal scheduler, their memory
     * already touched: a thread's first event takes one instead of
     * allocating (and page-faulting) on the hot path. */
    tk_ring **pool;
    unsigned pool_n;
    _Atomic unsigned pool_next;
    tk_recorder_slot slots[TK_THREAD_SLOTS];
    _Atomic uint64_t lost; /* dropped outside any producer ring: threads
                              past the slot table, no memory, a tag that
                              is not a trace tag */
} tk_recorder;

/* What all the rings made at creation may take: half of the machine's
 * memory. */
uint64_t tk_recorder_memory_limit(void);
/* Rings made at creation: one per normal scheduler. */
unsigned tk_recorder_pool_size(void);

/* A new recorder (NULL when out of memory). Its arguments are checked by
 * the caller (tk_recorder_args). */
tk_recorder *tk_recorder_new(size_t size, tk_ring_policy policy,
                             tk_payload_mode mode, size_t max_bytes,
                             tk_tagset tags, bool all_tags);
void tk_recorder_free(tk_recorder *r);

/* The arguments of new_nif(Size, Policy, Payload, MaxBytes, Tags) that
 * both tracers take: 0, or -1 (badarg). */
typedef struct {
    ErlNifUInt64 size, max_bytes;
    tk_ring_policy policy;
    tk_payload_mode mode;
    tk_tagset tags;
    bool all_tags;
} tk_recorder_args;
int tk_recorder_args_get(const tk_recorder_lib *lib, ErlNifEnv *env,
                         const ERL_NIF_TERM argv[5], tk_recorder_args *a);

/* The callbacks enabled*(Tag, State, Tracee) and trace*(Tag, State,
 * Tracee, Term, Opts), as NIF functions of a library whose private data
 * starts with a tk_recorder_lib. A State that is not a holder of this
 * library's type is a tracer that removes itself. */
ERL_NIF_TERM tk_recorder_enabled_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);
ERL_NIF_TERM tk_recorder_trace_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[]);

/* Stops recording: the callbacks remove the tracer from each tracee. */
void tk_recorder_close(tk_recorder *r);
/* The same, and returns once no callback records or counts anything more:
 * every one that did not see the recorder closed has finished (a grace
 * period of the settings' readers). Never from a callback. */
void tk_recorder_close_sync(tk_recorder *r);

/* set(Paused, Tags, Sample), each `undefined' or a new value: 0, or -1
 * (badarg). Returns once every callback that could act on the old
 * settings has finished. */
int tk_recorder_set(tk_recorder_lib *lib, ErlNifEnv *env, tk_recorder *r,
                    const ERL_NIF_TERM argv[3]);

typedef struct {
    uint64_t written, dropped, overwritten, bytes, filtered, truncated;
    unsigned producers;
} tk_recorder_stats;

void tk_recorder_stats_get(tk_recorder *r, tk_recorder_stats *s);

/* The settings as stats/1 shows them: paused, sample, tags. */
void tk_recorder_cfg_get(tk_recorder *r, tk_recorder_cfg *c);

/* The function table entries of the erl_tracer callbacks, for a tracer
 * module whose NIF library records with a recorder. Every event class has
 * its own pair of names, as the VM looks them up (and then never falls
 * back to the generic pair), all served by one implementation of each. */
#define TK_RECORDER_CB_(e, t)                                               \
    {e, 3, tk_recorder_enabled_nif, 0}, {t, 5, tk_recorder_trace_nif, 0}
#define TK_RECORDER_CALLBACKS                                               \
    TK_RECORDER_CB_("enabled", "trace"),                                    \
    TK_RECORDER_CB_("enabled_send", "trace_send"),                          \
    TK_RECORDER_CB_("enabled_receive", "trace_receive"),                    \
    TK_RECORDER_CB_("enabled_call", "trace_call"),                          \
    TK_RECORDER_CB_("enabled_procs", "trace_procs"),                        \
    TK_RECORDER_CB_("enabled_ports", "trace_ports"),                        \
    TK_RECORDER_CB_("enabled_running_procs", "trace_running_procs"),        \
    TK_RECORDER_CB_("enabled_running_ports", "trace_running_ports"),        \
    TK_RECORDER_CB_("enabled_garbage_collection", "trace_garbage_collection")

#endif

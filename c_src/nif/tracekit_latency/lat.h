/* lat.h: the tracekit_latency NIF library: a tracer module that measures
 * call latency in C.
 *
 * The hot path (lat_nif.c, the callbacks): enabled_* admits the call,
 * return_from, exception_from and exit events while the calling thread's
 * ring has room, trace_* writes a 32-byte record (tk_lat_rec: the
 * tracee's pid word, the M and F atom words, the arity, the kind) with
 * the ordering stamp into that ring. No term is copied or encoded, no
 * lock is taken, nothing is allocated (each normal scheduler's ring is
 * made when the tracer is). A full ring refuses events in enabled_* and
 * counts them; tk_lat_admit marks where (tk_lat.h, "Loss").
 *
 * The consumer (consumer.c): a thread of the tracer's own (never a
 * scheduler) takes the records out of every ring in stamp order
 * (tk_merge) and pairs them (tk_lat) into per-function histograms, under
 * the data lock that read/1 takes to copy them out.
 *
 * Files: lat_nif.c (load and upgrade, the resource, the functions people
 * call, the callbacks), consumer.c (the thread), snapshot.c (the
 * histograms as terms).
 */
#ifndef TK_LATENCY_NIF_H
#define TK_LATENCY_NIF_H

#include <erl_nif.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tk_lat.h"
#include "tk_merge.h"
#include "tk_ring.h"
#include "tk_thread.h"

#define LAT_ATOMS(X)                                                        \
    X(ok) X(error) X(trace) X(discard) X(remove) X(trace_status) X(call)    \
    X(return_from) X(exception_from) X(exit) X(enomem) X(true) X(false)     \
    X(outermost) X(each) X(undefined)                                       \
    X(layout) X(tracekit_hist) X(hz) X(recursion) X(functions) X(counters)  \
    X(returns) X(exceptions) X(unfinished) X(nested) X(count) X(sum) X(min) \
    X(max) X(buckets) X(calls) X(exits) X(measured) X(unmatched) X(lost)    \
    X(blind) X(blind_periods) X(markers) X(over_functions) X(over_processes)           \
    X(over_frames) X(no_memory) X(junk) X(dropped) X(filtered) X(ignored)   \
    X(unplaced) X(processes) X(frames) X(written) X(taken) X(size)          \
    X(closed) X(paused) X(finished) X(version) X(error_bound) X(exact_below) \
    X(schedulers) X(memory) X(min_size) X(max_size) X(max_functions)          \
    X(max_processes) X(max_frames)

/* The library's private data. */
typedef struct {
    ErlNifResourceType *type;
    const void *registry; /* this library's thread registry */
#define LAT_ATOM_FIELD(a) ERL_NIF_TERM am_##a;
    LAT_ATOMS(LAT_ATOM_FIELD)
#undef LAT_ATOM_FIELD
} lat_lib;

/* What one producer thread keeps: its ring's state and its counters,
 * written by that thread only, on their own cache line. */
typedef struct {
    alignas(64) uint8_t blind;   /* tk_lat_admit's */
    _Atomic uint64_t filtered;   /* events of other tags, or while paused */
    _Atomic uint64_t ignored;    /* trace_* with a term no record can hold */
} lat_slot;

/* A tracer: what the callbacks and the consumer share. Aligned to cache
 * lines (it is not the resource, which holds a pointer to it). */
typedef struct lat_core {
    /* Fixed at creation. */
    const void *registry;
    size_t size; /* bytes of each thread's ring */
    tk_lat_opts opts;

    atomic_bool paused, closed;
    _Atomic(tk_ring *) producers[TK_THREAD_SLOTS];
    tk_ring **pool; /* one ready ring per normal scheduler */
    unsigned pool_n;
    _Atomic unsigned pool_next;
    _Atomic uint64_t unplaced; /* events lost outside any ring */
    lat_slot slots[TK_THREAD_SLOTS];

    /* The data, under `lock': the consumer thread's, and read/1's. */
    ErlNifMutex *lock;
    tk_merge merge;
    tk_lat *lat;
    uint64_t unplaced_seen;
    uint64_t taken; /* records taken out of the rings */
    bool finished;  /* tk_lat_finish done: open calls are unfinished */

    /* Between callers and the thread, under `ctl'. */
    ErlNifMutex *ctl;
    ErlNifCond *cond;
    bool stop, discard;          /* stop: drain, finish, exit; discard: just exit */
    bool thread_started, thread_exited;
    bool joining, joined; /* under the list's lock (consumer.c) */
    ErlNifTid tid;
    struct lat_core *next; /* in the list of cores whose thread runs */
} lat_core;

/* The resource: the tracer state the callbacks get. */
typedef struct {
    lat_core *core;
} lat_res;

/* consumer.c */
/* Starts the consumer thread: 0, or -1. */
int lat_consumer_start(lat_core *c);
/* Stops it once everything recorded is taken and paired, and the calls
 * still open are unfinished (close/1); returns when that is done. */
void lat_consumer_stop(lat_core *c);
/* The resource is gone: the thread exits without anybody waiting, and
 * the core is freed when it is reaped. Without a thread, frees c now. */
void lat_consumer_orphan(lat_core *c);
/* Joins and frees the orphans that have exited (all of them, waiting for
 * those still running, when `all'); with `all', also stops the threads of
 * live cores (the library's code is about to go away: their tracers then
 * take no more events). */
void lat_consumer_reap(bool all);
/* Takes what the rings hold into the histograms (under c->lock). */
void lat_consumer_round(lat_core *c);
/* Frees the rings, the pairing and the histograms (each once); the
 * thread of an orphan does it before it exits. */
void lat_core_free_data(lat_core *c);
void lat_core_free(lat_core *c);

/* snapshot.c */
/* read/1's term: the histograms and counters, copied out under the lock
 * and made into terms after. */
ERL_NIF_TERM lat_snapshot(ErlNifEnv *env, const lat_lib *lib, lat_core *c, bool functions);
/* A histogram as a term: #{count, sum, min, max, buckets => [{I, N}]}. */
ERL_NIF_TERM lat_hist_term(ErlNifEnv *env, const lat_lib *lib, const tk_hist *h);

#endif

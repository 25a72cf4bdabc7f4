/* tk_lat.h: call latency from a stream of call, return, exception and
 * exit records in time order: per process a stack of the calls it is in,
 * each return or exception paired with its call, the duration added to
 * the function's histogram (tk_hist).
 *
 * The stream. The latency tracer's callbacks write a fixed-size record
 * (tk_lat_rec) per event into their thread's ring; its consumer thread
 * takes them out of every ring in stamp order (tk_merge, which keeps each
 * process's events in order across scheduler migrations) and hands them
 * here. A process's returns and exceptions come in the reverse order of
 * its calls (the VM pushes a return frame per traced call), so the
 * innermost open call is the one a return ends; a return whose function is
 * not that call's means events of the process were lost, and its stack is
 * dropped (`lost').
 *
 * Recursion. TK_LAT_OUTERMOST: a call of a function while the process is
 * already inside a call of the same function is not measured (`nested'):
 * the outermost call's duration includes it. (Directly recursive calls
 * share one frame with a repeat count, so recursion of any depth takes
 * one frame.) TK_LAT_EACH: every call is measured, each level alone.
 *
 * Ends that are not returns. An exception (exception_from) ends a call
 * like a return and goes in the function's histogram of exceptions, apart
 * from the returns. The exit of a process drops its stack: the calls it
 * was in are `unfinished', as are those open at tk_lat_finish (the end of
 * the trace); neither is ever measured.
 *
 * Loss. A full ring drops events; its producer then writes a TK_LAT_BLIND
 * record (with the stamp of the first event it dropped) and, before the
 * first event it keeps again, a TK_LAT_SIGHTED record. From the first
 * BLIND of any ring until every ring that went blind is sighted again,
 * any process may have lost events: every stack is dropped (its calls
 * `lost') and calls, returns and exceptions are not followed (`blind').
 * So a lost event never pairs a return with the wrong call.
 *
 * Bounds: at most max_functions functions, max_processes processes with
 * calls open, max_frames frames in all (each process's stack grows in
 * place beyond 4 frames). A call that a bound (or memory) refuses is not
 * followed, nor is anything the process calls inside it, and the returns
 * of those calls are recognised as theirs (`over_*'): the stack stays
 * exact.
 *
 * One thread at a time; memory through tk_mem.
 */
#ifndef TK_LAT_H
#define TK_LAT_H

#include <stddef.h>
#include <stdint.h>

#include "tk_hist.h"
#include "tk_ring.h"

/* What a record is. */
enum {
    TK_LAT_CALL = 1,      /* pid, m, f, arity */
    TK_LAT_RETURN = 2,    /* pid, m, f, arity */
    TK_LAT_EXCEPTION = 3, /* pid, m, f, arity */
    TK_LAT_EXIT = 4,      /* pid */
    TK_LAT_BLIND = 5,     /* ring `arity' drops events from here ... */
    TK_LAT_SIGHTED = 6    /* ... and keeps them again from here */
};

/* A record of the hot path: the payload of a ring record, 32 bytes. The
 * words are the VM's: a local pid and atoms, which are valid in every
 * environment and compared as words; 0 is never a pid. */
typedef struct {
    uint64_t pid;
    uint64_t m, f;
    uint32_t arity;
    uint32_t kind;
} tk_lat_rec;

/* ---- the producer side: a thread's ring (drop policy) -------------------
 *
 * Each ring keeps room for the record that says it goes blind: an event
 * is kept only when its record and that one fit (and, when the ring is
 * blind, the SIGHTED record too). So the BLIND record always fits, and
 * is written at the place of the first event dropped, in stamp order
 * with the events around it. `blind' is the ring's state, kept by its
 * producer thread (the only one to touch it); `src' is the ring's number
 * (its thread's slot, below TK_LAT_SOURCES), which the BLIND and SIGHTED
 * records carry in `arity'. */

/* Rings a stream comes from, at most. */
#define TK_LAT_SOURCES 256u

/* Bytes a record takes in a ring, at most. */
#define TK_LAT_REC_BYTES (TK_RING_HEAD_MAX + 32u)

/* Whether the ring keeps an event now (enabled_*, before the VM builds
 * the event). When it does not, the event is counted as dropped and the
 * ring goes blind. */
int tk_lat_admit(tk_ring *r, unsigned src, uint8_t *blind);

/* Writes an event's record (trace_*), after a SIGHTED record when the
 * ring was blind. 0, or -1 when there is no room: then as tk_lat_admit
 * refusing it. */
int tk_lat_push(tk_ring *r, unsigned src, uint8_t *blind, uint64_t stamp,
                const tk_lat_rec *rec);

/* ---- the consumer side ------------------------------------------------- */

typedef enum { TK_LAT_OUTERMOST = 0, TK_LAT_EACH = 1 } tk_lat_recursion;

typedef struct {
    tk_lat_recursion recursion;
    uint32_t max_functions;
    uint32_t max_processes;
    uint64_t max_frames;
    uint64_t hz; /* stamps per second: durations are kept in nanoseconds */
} tk_lat_opts;

/* A function: its name words and what was measured of it. */
typedef struct {
    uint64_t m, f;
    uint32_t arity;
    tk_hist returns;    /* durations of calls that returned (ns) */
    tk_hist exceptions; /* durations of calls that raised (ns) */
    uint64_t unfinished;
    uint64_t nested;    /* calls inside a call of itself (outermost) */
} tk_lat_fn;

typedef struct {
    uint64_t calls, returns, exceptions, exits; /* records seen */
    uint64_t measured;   /* durations added to histograms */
    uint64_t nested;     /* calls not measured: recursion, outermost */
    uint64_t unmatched;  /* returns and exceptions of calls not seen */
    uint64_t unfinished; /* measured calls open at an exit or at the end */
    uint64_t lost;       /* measured calls open when events were lost */
    uint64_t blind;      /* calls, returns, exceptions while events were lost */
    uint64_t blind_periods;
    uint64_t markers;    /* BLIND and SIGHTED records */
    uint64_t over_functions, over_processes, over_frames; /* bounds */
    uint64_t no_memory;  /* durations not added for want of memory */
    uint64_t junk;       /* records that are none of the kinds above */
} tk_lat_counts;

/* Called when a measured call ends (the extension point for a consumer
 * that does more with a call than its duration): the process, the
 * function's index, the stamps of the call and of its end, and whether
 * it ended in an exception. */
typedef void (*tk_lat_done_fn)(void *ctx, uint64_t pid, unsigned fn, uint64_t start,
                               uint64_t end, int exception);

typedef struct tk_lat tk_lat;

/* NULL when out of memory. The bounds must be at least 1. */
tk_lat *tk_lat_new(const tk_lat_opts *o);
void tk_lat_free(tk_lat *l);
void tk_lat_on_done(tk_lat *l, tk_lat_done_fn fn, void *ctx);

/* The next record in stamp order. */
void tk_lat_record(tk_lat *l, uint64_t stamp, const tk_lat_rec *r);

/* Events were lost somewhere no record can say (a thread without a ring
 * of its own): every stack is dropped, as at the start of a blind period. */
void tk_lat_reset(tk_lat *l);

/* The end of the stream: every call still open is unfinished. */
void tk_lat_finish(tk_lat *l);

const tk_lat_counts *tk_lat_counts_of(const tk_lat *l);
unsigned tk_lat_functions(const tk_lat *l);
const tk_lat_fn *tk_lat_function(const tk_lat *l, unsigned i);
/* Processes with calls open, and the frames they take. */
uint32_t tk_lat_processes(const tk_lat *l);
uint64_t tk_lat_frames(const tk_lat *l);
/* Whether calls are followed now (no ring is blind). */
int tk_lat_seeing(const tk_lat *l);

#endif

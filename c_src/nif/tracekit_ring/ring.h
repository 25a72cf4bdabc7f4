/* ring.h: the tracekit_ring resource and what its parts share.
 *
 * A ring resource is the tracer state. It owns one tk_ring per producer
 * thread (created by that thread on its first event), the consumer side
 * (a tk_merge under a mutex) and the configuration chosen at creation.
 *
 * Files: ring_nif.c (load, new, close, stats, drain), tracer.c (the VM's
 * callbacks: the hot path), encode.c (terms into records), decode.c
 * (records back into the process tracer's terms).
 */
#ifndef TK_RING_NIF_H
#define TK_RING_NIF_H

#include <erl_nif.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tk_keymap.h"
#include "tk_merge.h"
#include "tk_pub.h"
#include "tk_ring.h"
#include "tk_thread.h"

/* How much of messages, arguments and return values a record keeps. */
typedef enum { PAYLOAD_FULL = 0, PAYLOAD_NONE = 1, PAYLOAD_MAX = 2 } payload_mode;

/* Which part of an event is "payload" (user data), by tag. */
typedef enum {
    PART_NONE = 0, /* nothing: pids, names, MFAs, GC info */
    PART_MSG,      /* the trace term itself (message, exit reason) */
    PART_ARGS,     /* the argument list in the {M, F, Args} trace term */
    PART_EXTRA,    /* the extra term (return value) */
    PART_EXC,      /* the value in the {Class, Value} extra term */
    PART_SPAWN,    /* the argument list in the {M, F, Args} extra term */
    PART_SEQ       /* the last element of the seq_trace info tuple */
} payload_part;

/* What set/2 changes while tracing runs: published through tk_pub, read
 * without locks by every callback. */
typedef struct {
    bool paused;
    bool all_tags;                     /* no tag filter: skip the lookup */
    uint32_t sample;                   /* keep every Nth event; 1 = all */
    uint64_t tags[TK_KEYMAP_CAP / 64]; /* tag filter over tag indexes */
} ring_cfg;

/* Per producer slot, on its own cache line. */
typedef struct {
    alignas(64) _Atomic uint64_t filtered; /* refused by the configuration */
    uint64_t tick;                         /* events seen, for sampling */
} slot_state;

typedef struct {
    /* Configuration, fixed at creation. */
    size_t size;           /* bytes per producer ring */
    tk_ring_policy policy;
    payload_mode payload;
    size_t max_bytes;      /* PAYLOAD_MAX: bytes per payload term */
    size_t reserve;        /* drop mode: free bytes enabled_* requires */

    /* Configuration that set/2 changes (ring_cfg). */
    tk_pub cfg;
    bool cfg_ready;        /* cfg initialised (the destructor checks) */

    atomic_bool closed;
    _Atomic(tk_ring *) producers[TK_THREAD_SLOTS];
    /* Rings made ready by new/1, one per normal scheduler, their memory
     * already touched: a thread's first event takes one instead of
     * allocating (and page-faulting) on the hot path. */
    tk_ring **pool;
    unsigned pool_n;
    _Atomic unsigned pool_next;
    slot_state slots[TK_THREAD_SLOTS];
    _Atomic uint64_t lost;  /* dropped outside any producer ring: threads
                               past the slot table, ring allocation failed */

    /* Consumer side, under `lock`. */
    ErlNifMutex *lock;
    tk_merge merge;
    uint64_t drained;
} ring_res;

extern ErlNifResourceType *ring_type;

/* Tag atoms -> small indexes (and each tag's payload part). */
extern tk_keymap tag_index;
extern unsigned char tag_part[TK_KEYMAP_CAP];

/* The calling thread's encoding buffer (allocated on its first use), and
 * its size. NULL if it could not be allocated. */
#define SCRATCH_SIZE (64 * 1024)
unsigned char *scratch_buffer(unsigned slot);
void scratch_free_all(void);

#define ATOMS(X)                                                            \
    X(ok) X(error) X(trace) X(trace_ts) X(discard) X(remove)                \
    X(trace_status) X(seq_trace) X(extra) X(match_spec_result)              \
    X(scheduler_id) X(timestamp) X(cpu_timestamp) X(monotonic)              \
    X(strict_monotonic) X(true) X(false) X(undefined) X(drop) X(overwrite)  \
    X(written) X(dropped) X(overwritten) X(bytes) X(producers) X(filtered)  \
    X(buffered) X(drained) X(size) X(policy) X(closed) X(enomem)            \
    X(truncated) X(paused) X(sample) X(tags) X(all)
#define ATOM_DECL(a) extern ERL_NIF_TERM am_##a;
ATOMS(ATOM_DECL)
#undef ATOM_DECL
extern ERL_NIF_TERM am_ellipsis; /* '...' */

/* ---- tracer.c: the callbacks, one pair per event class ---------------- */

#define TRACER_CLASSES(X)                                                   \
    X(generic) X(send) X(receive) X(call) X(procs) X(ports)                 \
    X(running_procs) X(running_ports) X(garbage_collection)
#define TRACER_DECL(cls)                                                    \
    ERL_NIF_TERM tk_enabled_##cls(ErlNifEnv *, int, const ERL_NIF_TERM[]);  \
    ERL_NIF_TERM tk_trace_##cls(ErlNifEnv *, int, const ERL_NIF_TERM[]);
TRACER_CLASSES(TRACER_DECL)
#undef TRACER_DECL

/* ---- encode.c ---------------------------------------------------------- */

/* Whether terms whose two low bits are 11 are immediates (atoms, small
 * integers, [], local pids and ports): ERTS's representation since long
 * before OTP 27, but not an API, so ring_nif.c checks it when the library
 * loads (imm_check) and the encoder uses it only if the check passed. */
extern bool imm_ok;
bool imm_check(ErlNifEnv *env);
static inline bool is_imm(ERL_NIF_TERM t) { return imm_ok && (t & 3) == 3; }

typedef struct {
    unsigned char *p, *end;
} enc_buf;

/* Encodes `t` fully (as far as the buffer allows). */
void enc_term(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t);
/* Encodes `t` within `budget` bytes, the rest replaced by markers. */
void enc_term_budget(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t,
                     size_t budget);
/* Encodes a term that is most often a local pid (a tracee, a receiver):
 * one NIF call in that case. */
void enc_pid_or_term(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t);
/* Encodes the truncation marker '...'. */
void enc_marker(enc_buf *b);
/* Encodes the payload part of the trace term or the extra term according
 * to the ring's payload mode. */
void enc_payload(ErlNifEnv *env, enc_buf *b, const ring_res *r,
                 payload_part part, bool is_extra, ERL_NIF_TERM t);
void enc_u8(enc_buf *b, unsigned v);
void enc_word(enc_buf *b, uint64_t w);

/* ---- decode.c ---------------------------------------------------------- */

/* Builds the event term of one record; returns 0 if the record is
 * malformed (which would be a bug). */
int dec_event(ErlNifEnv *env, const unsigned char *p, size_t len,
              ERL_NIF_TERM *out);

/* Record layout, after the ring's header:
 *   u8  flags: REC_EXTRA | REC_MSR | REC_SCHED, timestamp kind << 4
 *   tag word (an atom's term), tracee term, trace term,
 *   [extra term] [match-spec result term] [scheduler id word]
 *   [timestamp words: now/cpu 3, monotonic 1, strict_monotonic 2]
 * Terms use encode.c's format. */
#define REC_EXTRA 1u
#define REC_MSR 2u
#define REC_SCHED 4u
enum { TS_NONE = 0, TS_NOW, TS_CPU, TS_MONO, TS_STRICT };

#endif

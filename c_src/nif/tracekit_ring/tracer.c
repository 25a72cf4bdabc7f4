/* tracer.c: the erl_tracer callbacks of tracekit_ring: the hot path.
 *
 * enabled*(Tag, Ring, Tracee) runs first, on the thread of the traced
 * event; answering `discard` there means the VM never builds the trace
 * term, so everything that can be decided without the term is decided
 * here: a closed or foreign state, the tag filter, and (drop policy) a full
 * ring. trace*(Tag, Ring, Tracee, Term, Opts) then encodes the event into
 * the calling thread's own ring. Neither locks nor allocates, except once
 * per thread and ring (that thread's ring and encoding buffer).
 *
 * Every event class has its own pair of callbacks so that the VM never
 * falls back to a generic dispatch; they share one implementation.
 */
#include <string.h>

#include "ring.h"
#include "tk_clock.h"

static inline ring_res *ring_of(ErlNifEnv *env, ERL_NIF_TERM state)
{
    ring_res *r;
    if (!enif_get_resource(env, state, ring_type, (void **)&r))
        return NULL;
    return r;
}

#if TK_PUB_SLOTS != TK_THREAD_SLOTS
#error "configuration readers use the thread registry's slots"
#endif

/* Whether the configuration lets events with this tag through. */
static inline bool cfg_wants(const ring_cfg *c, ERL_NIF_TERM tag)
{
    if (c->paused)
        return false;
    if (c->all_tags)
        return true;
    /* The filter names known tags only: other tags are refused. */
    int idx = tk_keymap_find(&tag_index, (uint64_t)tag);
    return idx >= 0 && ((c->tags[idx >> 6] >> (idx & 63)) & 1);
}

static inline void count_filtered(ring_res *r, unsigned slot)
{
    if (slot < TK_THREAD_SHARED) {
        /* Single writer: load + store. */
        _Atomic uint64_t *c = &r->slots[slot].filtered;
        atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    }
}

static inline void count_lost(ring_res *r)
{
    atomic_fetch_add_explicit(&r->lost, 1, memory_order_relaxed);
}

/* The calling thread's ring, created on its first event. Only the owner
 * thread ever stores into its slot. Returns NULL for threads without a
 * slot of their own, or when memory runs out. */
static tk_ring *own_ring(ring_res *r, unsigned slot)
{
    if (slot >= TK_THREAD_SHARED)
        return NULL;
    tk_ring *ring =
        atomic_load_explicit(&r->producers[slot], memory_order_relaxed);
    if (ring != NULL)
        return ring;
    /* First event of this thread: a ring from the pool if one is left
     * (each index is handed out once), else a new one. */
    unsigned i = atomic_fetch_add_explicit(&r->pool_next, 1, memory_order_relaxed);
    if (i < r->pool_n) {
        ring = r->pool[i];
        r->pool[i] = NULL; /* now owned through producers[] */
    } else {
        ring = enif_alloc(sizeof *ring);
        if (ring == NULL)
            return NULL;
        if (tk_ring_init(ring, r->size, r->policy) != 0) {
            enif_free(ring);
            return NULL;
        }
    }
    /* Release: the consumer that sees the pointer sees an initialised
     * ring. */
    atomic_store_explicit(&r->producers[slot], ring, memory_order_release);
    return ring;
}

static ERL_NIF_TERM enabled_any(ErlNifEnv *env, int argc,
                                const ERL_NIF_TERM argv[])
{
    (void)argc;
    ERL_NIF_TERM tag = argv[0];
    ring_res *r = ring_of(env, argv[1]);
    /* A closed ring, or a state that is not a ring: the tracer removes
     * itself (trace_status) and drops everything else. */
    if (r == NULL || atomic_load_explicit(&r->closed, memory_order_acquire))
        return tag == am_trace_status ? am_remove : am_discard;
    if (tag == am_trace_status)
        return am_trace;

    unsigned slot = tk_thread_slot();
    /* The configuration may change at any time (set/2): read it in a
     * section, which set/2 waits for before it returns. */
    const ring_cfg *c = tk_pub_read_begin(&r->cfg, slot);
    bool wanted = cfg_wants(c, tag);
    uint32_t sample = c->sample;
    tk_pub_read_end(&r->cfg, slot);
    if (!wanted) {
        count_filtered(r, slot);
        return am_discard;
    }
    /* Sampling: every Nth event of this thread goes through. */
    if (sample > 1 && slot < TK_THREAD_SHARED &&
        ++r->slots[slot].tick % sample != 0) {
        count_filtered(r, slot);
        return am_discard;
    }
    if (r->policy == TK_RING_DROP) {
        tk_ring *ring = own_ring(r, slot);
        if (ring == NULL) {
            count_lost(r);
            return am_discard;
        }
        /* Full: drop here, before the VM builds the term. */
        if (!tk_ring_fits(ring, r->reserve)) {
            tk_ring_count_drop(ring);
            return am_discard;
        }
    }
    return am_trace;
}

static inline unsigned ts_kind_of(ERL_NIF_TERM v)
{
    if (v == am_strict_monotonic)
        return TS_STRICT;
    if (v == am_monotonic)
        return TS_MONO;
    if (v == am_timestamp)
        return TS_NOW;
    if (v == am_cpu_timestamp)
        return TS_CPU;
    return TS_NONE;
}

/* The timestamp the process tracer would have made, in the same shape. */
static ERL_NIF_TERM make_ts(ErlNifEnv *env, unsigned kind)
{
    switch (kind) {
    case TS_MONO:
        return enif_make_int64(env, enif_monotonic_time(ERL_NIF_NSEC));
    case TS_STRICT: {
        ErlNifTime mono = enif_monotonic_time(ERL_NIF_NSEC);
        return enif_make_tuple2(
            env, enif_make_int64(env, mono),
            enif_make_unique_integer(env, ERL_NIF_UNIQUE_MONOTONIC));
    }
    case TS_NOW:
        return enif_now_time(env);
    default:
        return enif_cpu_time(env);
    }
}

static ERL_NIF_TERM trace_any(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    uint64_t stamp = tk_clock_stamp();
    ERL_NIF_TERM tag = argv[0], opts = argv[4];
    ring_res *r = ring_of(env, argv[1]);
    if (r == NULL || atomic_load_explicit(&r->closed, memory_order_relaxed))
        return am_ok;
    unsigned slot = tk_thread_slot();
    /* Checked again here: enabled_* may have answered before a set/2 that
     * has since returned. (Sampling was decided there.) */
    const ring_cfg *c = tk_pub_read_begin(&r->cfg, slot);
    bool wanted = cfg_wants(c, tag);
    tk_pub_read_end(&r->cfg, slot);
    if (!wanted) {
        count_filtered(r, slot);
        return am_ok;
    }
    tk_ring *ring = own_ring(r, slot);
    unsigned char *buf = ring != NULL ? scratch_buffer(slot) : NULL;
    if (buf == NULL) {
        count_lost(r);
        return am_ok;
    }

    /* Opts holds at most extra, match_spec_result, scheduler_id and
     * timestamp; look up only while keys remain. */
    ERL_NIF_TERM extra = 0, msr = 0, sched = 0, tsv = 0;
    unsigned flags = 0, ts_kind = TS_NONE;
    size_t nopts = 0;
    if (enif_get_map_size(env, opts, &nopts) && nopts > 0) {
        if (enif_get_map_value(env, opts, am_extra, &extra))
            flags |= REC_EXTRA, nopts--;
        if (nopts > 0 &&
            enif_get_map_value(env, opts, am_match_spec_result, &msr))
            flags |= REC_MSR, nopts--;
        if (nopts > 0 && enif_get_map_value(env, opts, am_scheduler_id, &sched))
            flags |= REC_SCHED, nopts--;
        if (nopts > 0 && enif_get_map_value(env, opts, am_timestamp, &tsv))
            ts_kind = ts_kind_of(tsv);
    }

    payload_part part = PART_NONE;
    if (r->payload != PAYLOAD_FULL) {
        int idx = tk_keymap_find(&tag_index, (uint64_t)tag);
        if (idx >= 0)
            part = (payload_part)tag_part[idx];
    }
    size_t cap = tk_ring_max_payload(ring);
    enc_buf b = {buf, buf + (cap < SCRATCH_SIZE ? cap : SCRATCH_SIZE)};
    unsigned char *end = b.end;

    enc_u8(&b, flags | ts_kind << 4);
    enc_word(&b, (uint64_t)tag);
    enc_pid_or_term(env, &b, argv[2]); /* tracee, or seq_trace's label */
    if (ts_kind != TS_NONE)
        enc_term(env, &b, make_ts(env, ts_kind));
    if (flags & REC_SCHED)
        enc_term(env, &b, sched);
    if (flags & REC_MSR)
        enc_term(env, &b, msr);
    if (flags & REC_EXTRA) {
        /* The extra term may take half of what is left; the trace term
         * gets the rest. */
        b.end = b.p + (size_t)(end - b.p) / 2;
        if (part == PART_MSG || r->payload == PAYLOAD_FULL)
            enc_pid_or_term(env, &b, extra); /* often a receiver's pid */
        else
            enc_payload(env, &b, r, part, true, extra);
        b.end = end;
    }
    enc_payload(env, &b, r, part, false, argv[3]);

    (void)tk_ring_push(ring, stamp, buf, (size_t)(b.p - buf));
    return am_ok;
}

/* The callbacks, one per event class, as the VM looks them up. */
#define TRACER_PAIR(cls)                                                    \
    ERL_NIF_TERM tk_enabled_##cls(ErlNifEnv *env, int argc,                 \
                                  const ERL_NIF_TERM argv[])                \
    {                                                                       \
        return enabled_any(env, argc, argv);                                \
    }                                                                       \
    ERL_NIF_TERM tk_trace_##cls(ErlNifEnv *env, int argc,                   \
                                const ERL_NIF_TERM argv[])                  \
    {                                                                       \
        return trace_any(env, argc, argv);                                  \
    }

TRACER_PAIR(generic)
TRACER_PAIR(send)
TRACER_PAIR(receive)
TRACER_PAIR(call)
TRACER_PAIR(procs)
TRACER_PAIR(ports)
TRACER_PAIR(running_procs)
TRACER_PAIR(running_ports)
TRACER_PAIR(garbage_collection)

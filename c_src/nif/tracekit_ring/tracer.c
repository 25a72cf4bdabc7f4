/* tracer.c: the erl_tracer callbacks of tracekit_ring: the hot path.
 *
 * enabled*(Tag, Ring, Tracee) runs first, on the thread of the traced
 * event; answering `discard` there means the VM never builds the trace
 * term, so everything that can be decided without the term is decided
 * here: a closed or foreign state, the tag filter, and (drop policy) a full
 * ring. trace*(Tag, Ring, Tracee, Term, Opts) then encodes the event into
 * the calling thread's own ring. Neither takes a lock. Memory is allocated
 * once per thread and ring (that thread's ring, its encoding buffer), when
 * an event is larger than the thread's buffer (which then grows), and by
 * enif_term_to_binary for the terms the NIF API cannot take apart.
 *
 * Anyone may call these functions with any terms: the state must be a
 * ring, the tag a trace tag, and every term is copied within bounds.
 *
 * Every event class has its own pair of callbacks so that the VM never
 * falls back to a generic dispatch; they share one implementation.
 */
#include <string.h>

#include "ring.h"
#include "tk_clock.h"

#if TK_PUB_SLOTS != TK_THREAD_SLOTS
#error "configuration readers use the thread registry's slots"
#endif

/* The ring of a callback's state, if this library may produce into it: a
 * ring numbered by another library's thread registry (one loaded from
 * another file before an upgrade) is not. */
static inline ring_res *ring_of(const ring_lib *lib, ErlNifEnv *env,
                                ERL_NIF_TERM state)
{
    ring_res *r = ring_get(lib, env, state);
    return r != NULL && r->registry == tk_thread_registry() ? r : NULL;
}

/* Whether the configuration lets events with this tag through. */
static inline bool cfg_wants(const ring_cfg *c, int tag)
{
    return !c->paused && ((c->tags >> tag) & 1);
}

static inline void count_filtered(ring_res *r, unsigned slot)
{
    if (slot < TK_THREAD_SHARED)
        tk_stat_add(&r->slots[slot].filtered, 1);
}

static inline void count_truncated(ring_res *r, unsigned slot)
{
    if (slot < TK_THREAD_SHARED)
        tk_stat_add(&r->slots[slot].truncated, 1);
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
    const ring_lib *lib = enif_priv_data(env);
    ring_res *r = ring_of(lib, env, argv[1]);
    /* A closed ring, or a state that is not a ring: the tracer removes
     * itself (trace_status) and drops everything else. */
    if (r == NULL || atomic_load_explicit(&r->closed, memory_order_acquire))
        return argv[0] == lib->am_trace_status ? lib->am_remove : lib->am_discard;
    if (argv[0] == lib->am_trace_status)
        return lib->am_trace;
    int tag = tk_codec_tag(&lib->codec, argv[0]);
    if (tag < 0) { /* not a trace tag: nothing a record could hold */
        count_lost(r);
        return lib->am_discard;
    }
    unsigned slot = tk_thread_slot();
    /* The configuration may change at any time (set/2): read it in a
     * section, which set/2 waits for before it returns. */
    const ring_cfg *c = tk_pub_read_begin(&r->cfg, slot);
    bool wanted = cfg_wants(c, tag);
    uint32_t sample = c->sample;
    tk_pub_read_end(&r->cfg, slot);
    if (!wanted) {
        count_filtered(r, slot);
        return lib->am_discard;
    }
    /* Sampling: every Nth event of this thread goes through. */
    if (sample > 1 && slot < TK_THREAD_SHARED &&
        ++r->slots[slot].tick % sample != 0) {
        count_filtered(r, slot);
        return lib->am_discard;
    }
    if (r->policy == TK_RING_DROP) {
        tk_ring *ring = own_ring(r, slot);
        if (ring == NULL) {
            count_lost(r);
            return lib->am_discard;
        }
        /* Full: drop here, before the VM builds the term. */
        if (!tk_ring_fits(ring, r->reserve)) {
            tk_ring_count_drop(ring);
            return lib->am_discard;
        }
    }
    return lib->am_trace;
}

/* The timestamp kind the VM asks for, by its atom. */
static inline unsigned ts_kind_of(const tk_codec *c, ERL_NIF_TERM v)
{
    if (v == c->am_strict_monotonic)
        return TK_TS_STRICT;
    if (v == c->am_monotonic)
        return TK_TS_MONO;
    if (v == c->am_timestamp)
        return TK_TS_NOW;
    if (v == c->am_cpu_timestamp)
        return TK_TS_CPU;
    return TK_TS_NONE;
}

/* The timestamp the process tracer would have made, in the same shape. */
static ERL_NIF_TERM make_ts(ErlNifEnv *env, unsigned kind)
{
    switch (kind) {
    case TK_TS_MONO:
        return enif_make_int64(env, enif_monotonic_time(ERL_NIF_NSEC));
    case TK_TS_STRICT: {
        ErlNifTime mono = enif_monotonic_time(ERL_NIF_NSEC);
        return enif_make_tuple2(
            env, enif_make_int64(env, mono),
            enif_make_unique_integer(env, ERL_NIF_UNIQUE_MONOTONIC));
    }
    case TK_TS_NOW:
        return enif_now_time(env);
    default:
        return enif_cpu_time(env);
    }
}

/* Opts holds at most extra, match_spec_result, scheduler_id and
 * timestamp; look up only while keys remain. */
static void read_opts(const ring_lib *lib, ErlNifEnv *env, ERL_NIF_TERM opts,
                      tk_event_in *ev)
{
    size_t n = 0;
    ERL_NIF_TERM v;
    if (!enif_get_map_size(env, opts, &n) || n == 0)
        return;
    if (enif_get_map_value(env, opts, lib->am_extra, &ev->extra))
        n--;
    if (n > 0 && enif_get_map_value(env, opts, lib->am_match_spec_result, &ev->msr))
        n--;
    if (n > 0 && enif_get_map_value(env, opts, lib->am_scheduler_id, &ev->sched))
        n--;
    if (n > 0 && enif_get_map_value(env, opts, lib->am_timestamp, &v)) {
        ev->ts_kind = ts_kind_of(&lib->codec, v);
        if (ev->ts_kind != TK_TS_NONE)
            ev->ts = make_ts(env, ev->ts_kind);
    }
}

/* Encodes the event into the thread's buffer and pushes it. A record may
 * take up to the ring's record limit: when the buffer is smaller and the
 * event was cut for want of room, the buffer grows and the event is
 * encoded again. */
static void record(ring_lib *lib, ErlNifEnv *env, ring_res *r, tk_ring *ring,
                   unsigned slot, uint64_t stamp, const tk_event_in *ev)
{
    size_t limit = tk_ring_max_payload(ring), cap;
    unsigned char *buf = tk_scratch_get(&lib->scratch, slot, 0, &cap);
    if (buf == NULL) {
        count_lost(r);
        return;
    }
    for (;;) {
        bool short_of_room;
        size_t room = cap < limit ? cap : limit;
        size_t len = tk_enc_event(env, &lib->codec, &r->payload, ev, buf, room,
                                  &short_of_room);
        if (short_of_room && room < limit) {
            size_t want = 2 * cap < limit ? 2 * cap : limit, got;
            unsigned char *bigger = tk_scratch_get(&lib->scratch, slot, want, &got);
            if (bigger != NULL && got > cap) {
                buf = bigger;
                cap = got;
                continue;
            }
        }
        if (short_of_room)
            count_truncated(r, slot);
        (void)tk_ring_push(ring, stamp, buf, len);
        return;
    }
}

static ERL_NIF_TERM trace_any(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    uint64_t stamp = tk_clock_stamp();
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = ring_of(lib, env, argv[1]);
    if (r == NULL || atomic_load_explicit(&r->closed, memory_order_relaxed))
        return lib->am_ok;
    int tag = tk_codec_tag(&lib->codec, argv[0]);
    if (tag < 0) { /* not a trace tag: nothing a record could hold */
        count_lost(r);
        return lib->am_ok;
    }
    unsigned slot = tk_thread_slot();
    /* Checked again here: enabled_* may have answered before a set/2 that
     * has since returned. (Sampling was decided there.) The section lasts
     * until the record is pushed, so that set/2, which waits for it, keeps
     * its promise: no event refused by the new settings is recorded once
     * it has returned. */
    const ring_cfg *c = tk_pub_read_begin(&r->cfg, slot);
    if (!cfg_wants(c, tag)) {
        tk_pub_read_end(&r->cfg, slot);
        count_filtered(r, slot);
        return lib->am_ok;
    }
    tk_ring *ring = own_ring(r, slot);
    if (ring == NULL) {
        count_lost(r);
    } else {
        tk_event_in ev = {.tag = (unsigned)tag, .tracee = argv[2],
                          .msg = argv[3]};
        read_opts(lib, env, argv[4], &ev);
        record(lib, env, r, ring, slot, stamp, &ev);
    }
    tk_pub_read_end(&r->cfg, slot);
    return lib->am_ok;
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

TRACER_CLASSES(TRACER_PAIR)

/* tk_recorder.c: the recording tracers' hot path (see tk_recorder.h). */
#include "tk_recorder.h"

#include <string.h>
#include <unistd.h>

#include "tk_clock.h"
#include "tk_mem.h"

#if TK_PUB_SLOTS != TK_THREAD_SLOTS
#error "settings readers use the thread registry's slots"
#endif

int tk_recorder_lib_init(tk_recorder_lib *lib, ErlNifEnv *env,
                         ErlNifResourceType *holder_type)
{
    memset(lib, 0, sizeof *lib);
    lib->holder_type = holder_type;
    /* The library's memory is VM memory: it shows in erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    /* The stamp: the TSC or CLOCK_MONOTONIC, fenced or not (TRACEKIT_CLOCK). */
    tk_clock_init();
#define TK_RECORDER_ATOM_INIT(a) lib->am_##a = enif_make_atom(env, #a);
    TK_RECORDER_ATOMS(TK_RECORDER_ATOM_INIT)
#undef TK_RECORDER_ATOM_INIT
    return tk_codec_init(&lib->codec, env);
}

void tk_recorder_lib_free(tk_recorder_lib *lib)
{
    tk_scratch_free(&lib->scratch);
}

/* ---- creation ------------------------------------------------------------------ */

uint64_t tk_recorder_memory_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return UINT64_MAX;
    return (uint64_t)pages * (uint64_t)page / 2;
}

unsigned tk_recorder_pool_size(void)
{
    ErlNifSysInfo info;
    enif_system_info(&info, sizeof info);
    unsigned n = info.scheduler_threads > 0 ? (unsigned)info.scheduler_threads : 1;
    return n < TK_THREAD_SHARED ? n : TK_THREAD_SHARED;
}

/* A ring of the recorder's size and policy (rings are aligned to cache
 * lines). */
static tk_ring *ring_new(const tk_recorder *r)
{
    tk_ring *ring = tk_mem_aligned_alloc(alignof(tk_ring), sizeof *ring);
    if (ring != NULL && tk_ring_init(ring, r->size, r->policy) != 0) {
        tk_mem_aligned_free(ring);
        ring = NULL;
    }
    return ring;
}

static void ring_free(tk_ring *ring)
{
    if (ring != NULL) {
        tk_ring_destroy(ring);
        tk_mem_aligned_free(ring);
    }
}

tk_recorder *tk_recorder_new(size_t size, tk_ring_policy policy,
                             tk_payload_mode mode, size_t max_bytes,
                             tk_tagset tags, bool all_tags)
{
    tk_recorder *r = tk_mem_aligned_alloc(alignof(tk_recorder), sizeof *r);
    if (r == NULL)
        return NULL;
    memset(r, 0, sizeof *r);
    r->size = size;
    r->policy = policy;
    r->registry = tk_thread_registry();
    if (tk_payload_init(&r->payload, mode, max_bytes) != 0)
        goto fail;
    r->payload_ready = true;
    /* The room enabled_* asks for: enough for a typical event; a bigger
     * one that finds no room is dropped (and counted) in trace_*. */
    size_t maxp = tk_ring_max_payload_of(size);
    r->reserve = mode == TK_PAYLOAD_NONE ? 64 : 256;
    if (r->reserve > maxp)
        r->reserve = maxp;
    tk_recorder_cfg cfg = {.paused = false, .all_tags = all_tags, .sample = 1,
                           .tags = tags};
    if (tk_pub_init(&r->cfg, sizeof cfg, &cfg) != 0)
        goto fail;
    r->cfg_ready = true;
    /* One ready ring per normal scheduler, memory touched now rather than
     * on the schedulers' first laps. */
    unsigned want = tk_recorder_pool_size();
    r->pool = tk_mem_zalloc(want * sizeof *r->pool);
    if (r->pool == NULL)
        goto fail;
    for (; r->pool_n < want; r->pool_n++) {
        tk_ring *ring = ring_new(r);
        if (ring == NULL)
            goto fail;
        tk_ring_touch(ring);
        r->pool[r->pool_n] = ring;
    }
    return r;
fail:
    tk_recorder_free(r);
    return NULL;
}

void tk_recorder_free(tk_recorder *r)
{
    /* No callback can be running: the VM holds the state term (which keeps
     * the resource alive) for as long as any tracee may call us. */
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++)
        ring_free(atomic_load(&r->producers[i]));
    for (unsigned i = 0; i < r->pool_n; i++)
        ring_free(r->pool[i]); /* NULL once handed out */
    tk_mem_free(r->pool);
    if (r->payload_ready)
        tk_payload_destroy(&r->payload);
    if (r->cfg_ready)
        tk_pub_destroy(&r->cfg);
    tk_mem_aligned_free(r);
}

int tk_recorder_args_get(const tk_recorder_lib *lib, ErlNifEnv *env,
                         const ERL_NIF_TERM argv[5], tk_recorder_args *a)
{
    if (argv[2] == lib->am_full)
        a->mode = TK_PAYLOAD_FULL;
    else if (argv[2] == lib->am_none)
        a->mode = TK_PAYLOAD_NONE;
    else if (argv[2] == lib->am_max_bytes)
        a->mode = TK_PAYLOAD_MAX;
    else
        return -1;
    if (!enif_get_uint64(env, argv[0], &a->size) || !tk_ring_size_ok(a->size) ||
        a->size * tk_recorder_pool_size() > tk_recorder_memory_limit() ||
        !(argv[1] == lib->am_drop || argv[1] == lib->am_overwrite) ||
        !enif_get_uint64(env, argv[3], &a->max_bytes) ||
        a->max_bytes > TK_PAYLOAD_MAX_BYTES ||
        tk_codec_tagset(&lib->codec, env, argv[4], &a->tags) != 0)
        return -1;
    a->policy = argv[1] == lib->am_drop ? TK_RING_DROP : TK_RING_OVERWRITE;
    a->all_tags = argv[4] == lib->am_true;
    return 0;
}

/* ---- the callbacks -------------------------------------------------------------- */

/* Whether this library may produce into the recorder: one numbered by
 * another library's thread registry (made by a version of the library
 * loaded from another file, before an upgrade) is not, as the slot
 * numbers of two registries would make two threads push into one
 * single-producer ring. */
static inline bool own(const tk_recorder *r)
{
    return r->registry == tk_thread_registry();
}


/* Whether the settings let events with this tag through. */
static inline bool cfg_wants(const tk_recorder_cfg *c, int tag)
{
    return !c->paused && ((c->tags >> tag) & 1);
}

static inline void count_filtered(tk_recorder *r, unsigned slot)
{
    if (slot < TK_THREAD_SHARED)
        tk_stat_add(&r->slots[slot].filtered, 1);
}

static inline void count_truncated(tk_recorder *r, unsigned slot)
{
    if (slot < TK_THREAD_SHARED)
        tk_stat_add(&r->slots[slot].truncated, 1);
}

static inline void count_lost(tk_recorder *r)
{
    atomic_fetch_add_explicit(&r->lost, 1, memory_order_relaxed);
}

/* The calling thread's ring, created on its first event. Only the owner
 * thread ever stores into its slot. Returns NULL for threads without a
 * slot of their own, or when memory runs out. */
static tk_ring *own_ring(tk_recorder *r, unsigned slot)
{
    if (slot >= TK_THREAD_SHARED)
        return NULL;
    tk_ring *ring = atomic_load_explicit(&r->producers[slot], memory_order_relaxed);
    if (ring != NULL)
        return ring;
    /* First event of this thread: a ring from the pool if one is left
     * (each index is handed out once), else a new one. */
    unsigned i = atomic_fetch_add_explicit(&r->pool_next, 1, memory_order_relaxed);
    if (i < r->pool_n) {
        ring = r->pool[i];
        r->pool[i] = NULL; /* now owned through producers[] */
    } else if ((ring = ring_new(r)) == NULL) {
        return NULL;
    }
    /* Release: the consumer that sees the pointer sees an initialised
     * ring. */
    atomic_store_explicit(&r->producers[slot], ring, memory_order_release);
    return ring;
}

/* The recorder a tracer state holds; NULL when the state is not a holder
 * of this library. */
static inline tk_recorder *holder_of(const tk_recorder_lib *lib, ErlNifEnv *env,
                                     ERL_NIF_TERM state)
{
    void *h;
    return enif_get_resource(env, state, lib->holder_type, &h) ? *(tk_recorder **)h : NULL;
}

/* A recorder of another library version (see own): its events are refused
 * here and counted (its stats still add up), and its tracer stays until
 * it is closed. In a read section of its settings' shared slot (this
 * library's slot numbers are not its), so that a waiting close/1 sees the
 * count final. */
static ERL_NIF_TERM foreign_enabled(const tk_recorder_lib *lib, tk_recorder *r,
                                    ERL_NIF_TERM tag)
{
    ERL_NIF_TERM answer;
    (void)tk_pub_read_begin(&r->cfg, TK_PUB_SHARED);
    if (atomic_load_explicit(&r->closed, memory_order_acquire)) {
        answer = tag == lib->am_trace_status ? lib->am_remove : lib->am_discard;
    } else if (tag == lib->am_trace_status) {
        answer = lib->am_trace;
    } else {
        count_lost(r);
        answer = lib->am_discard;
    }
    tk_pub_read_end(&r->cfg, TK_PUB_SHARED);
    return answer;
}

/* enabled* inside its read section: the decision and what it counts
 * happen before a close/1 that waits for the section (tk_recorder_close_sync)
 * returns, and none after. */
static ERL_NIF_TERM enabled_in(const tk_recorder_lib *lib, tk_recorder *r,
                               unsigned slot, const tk_recorder_cfg *c,
                               ERL_NIF_TERM tag_term)
{
    /* Closed: the tracer removes itself (trace_status) and drops
     * everything else. */
    if (atomic_load_explicit(&r->closed, memory_order_acquire))
        return tag_term == lib->am_trace_status ? lib->am_remove : lib->am_discard;
    if (tag_term == lib->am_trace_status)
        return lib->am_trace;
    int tag = tk_codec_tag(&lib->codec, tag_term);
    if (tag < 0) { /* not a trace tag: nothing a record could hold */
        count_lost(r);
        return lib->am_discard;
    }
    if (!cfg_wants(c, tag)) {
        count_filtered(r, slot);
        return lib->am_discard;
    }
    /* Sampling: every Nth event of this thread goes through. */
    if (c->sample > 1 && slot < TK_THREAD_SHARED &&
        ++r->slots[slot].tick % c->sample != 0) {
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

ERL_NIF_TERM tk_recorder_enabled_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    tk_recorder_lib *lib = enif_priv_data(env);
    tk_recorder *r = holder_of(lib, env, argv[1]);
    /* A state that is not a recorder: the tracer removes itself. */
    if (r == NULL)
        return argv[0] == lib->am_trace_status ? lib->am_remove : lib->am_discard;
    if (!own(r))
        return foreign_enabled(lib, r, argv[0]);
    unsigned slot = tk_thread_slot();
    /* The settings may change at any time (set/2): read them in a section,
     * which set/2 waits for before it returns. */
    const tk_recorder_cfg *c = tk_pub_read_begin(&r->cfg, slot);
    ERL_NIF_TERM answer = enabled_in(lib, r, slot, c, argv[0]);
    tk_pub_read_end(&r->cfg, slot);
    return answer;
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

/* A timestamp made earlier, {Kind, Ts}, when Ts has the shape the VM
 * gives Kind: monotonic an integer, strict_monotonic {Integer, Integer},
 * timestamp and cpu_timestamp {Mega, Sec, Micro} of non-negative
 * integers. TK_TS_NONE for anything else. */
static unsigned ts_given(const tk_codec *c, ErlNifEnv *env, ERL_NIF_TERM v, ERL_NIF_TERM *ts)
{
    const ERL_NIF_TERM *kv, *e;
    int n;
    ErlNifSInt64 i;
    ErlNifUInt64 u;
    if (!enif_get_tuple(env, v, &n, &kv) || n != 2)
        return TK_TS_NONE;
    unsigned kind = ts_kind_of(c, kv[0]);
    bool ok;
    switch (kind) {
    case TK_TS_MONO:
        ok = enif_get_int64(env, kv[1], &i);
        break;
    case TK_TS_STRICT:
        ok = enif_get_tuple(env, kv[1], &n, &e) && n == 2 && enif_get_int64(env, e[0], &i) &&
             enif_get_int64(env, e[1], &i);
        break;
    case TK_TS_NOW:
    case TK_TS_CPU:
        ok = enif_get_tuple(env, kv[1], &n, &e) && n == 3 && enif_get_uint64(env, e[0], &u) &&
             enif_get_uint64(env, e[1], &u) && enif_get_uint64(env, e[2], &u);
        break;
    default:
        ok = false;
    }
    if (!ok)
        return TK_TS_NONE;
    *ts = kv[1];
    return kind;
}

/* The stamp of an event made earlier, from the stamp of now: as far back
 * as its timestamp is from now (never later than now; the ring keeps its
 * stamps from decreasing, whatever the caller gave). A cpu_timestamp
 * says nothing of when: the stamp of now. */
static uint64_t stamp_given(ErlNifEnv *env, unsigned kind, ERL_NIF_TERM ts, uint64_t now)
{
    const ERL_NIF_TERM *e;
    int n;
    ErlNifSInt64 mono;
    ErlNifUInt64 mega, sec, micro;
    double back_ns;
    if (kind == TK_TS_NOW && enif_get_tuple(env, ts, &n, &e) && n == 3 &&
        enif_get_uint64(env, e[0], &mega) && enif_get_uint64(env, e[1], &sec) &&
        enif_get_uint64(env, e[2], &micro)) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        back_ns = ((double)t.tv_sec * 1e9 + (double)t.tv_nsec) -
                  (((double)mega * 1e6 + (double)sec) * 1e6 + (double)micro) * 1e3;
    } else if ((kind == TK_TS_MONO && enif_get_int64(env, ts, &mono)) ||
               (kind == TK_TS_STRICT && enif_get_tuple(env, ts, &n, &e) && n == 2 &&
                enif_get_int64(env, e[0], &mono))) {
        back_ns = (double)enif_monotonic_time(ERL_NIF_NSEC) - (double)mono;
    } else {
        return now;
    }
    if (!(back_ns > 0))
        return now;
    double back = back_ns * (double)tk_clock_hz() / 1e9;
    return back >= (double)now ? 0 : now - (uint64_t)back;
}

/* Opts holds at most extra, match_spec_result, scheduler_id and
 * timestamp; look up only while keys remain. The VM gives the timestamp's
 * kind (the tracer makes the time); a caller that records an event made
 * earlier gives {Kind, Ts} (tracekit:slow/2 writes the calls it keeps so). */
static void read_opts(const tk_recorder_lib *lib, ErlNifEnv *env,
                      ERL_NIF_TERM opts, tk_event_in *ev, uint64_t *stamp)
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
        else if ((ev->ts_kind = ts_given(&lib->codec, env, v, &ev->ts)) != TK_TS_NONE)
            *stamp = stamp_given(env, ev->ts_kind, ev->ts, *stamp);
    }
}

/* The push reads TK_RING_SLACK bytes from a payload's start, whatever
 * its length: every thread's buffer has them. */
_Static_assert(TK_SCRATCH_MIN >= TK_RING_BUF(0), "scratch buffers hold a ring's slack");

/* Encodes the event into the thread's buffer, after the room the push
 * writes the record's fields into, and pushes it. A record may take up to
 * the ring's record limit: when the buffer is smaller and the event was
 * cut for want of room, the buffer grows and the event is encoded
 * again. */
static void record(tk_recorder_lib *lib, ErlNifEnv *env, tk_recorder *r,
                   tk_ring *ring, unsigned slot, uint64_t stamp,
                   const tk_event_in *ev)
{
    size_t limit = tk_ring_max_payload(ring) + TK_RING_ROOM, cap;
    unsigned char *buf = tk_scratch_get(&lib->scratch, slot, 0, &cap);
    if (buf == NULL) {
        count_lost(r);
        return;
    }
    for (;;) {
        bool short_of_room;
        size_t room = cap < limit ? cap : limit;
        size_t len = tk_enc_event(env, &lib->codec, &r->payload, ev,
                                  buf + TK_RING_ROOM, room - TK_RING_ROOM,
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
        (void)tk_ring_push(ring, stamp, buf + TK_RING_ROOM, len);
        return;
    }
}

ERL_NIF_TERM tk_recorder_trace_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    uint64_t stamp = tk_clock_stamp();
    tk_recorder_lib *lib = enif_priv_data(env);
    tk_recorder *r = holder_of(lib, env, argv[1]);
    if (r == NULL)
        return lib->am_ok;
    if (!own(r)) { /* enabled_* answered in another version, then this */
        (void)foreign_enabled(lib, r, argv[0]);
        return lib->am_ok;
    }
    unsigned slot = tk_thread_slot();
    /* The section lasts until the record is pushed, so that set/2 and
     * close, which wait for it, keep their promises: no event refused by
     * the new settings is recorded once set/2 has returned, and none at
     * all once a waiting close has (checked again here: enabled_* may
     * have answered before either). (Sampling was decided there.) */
    const tk_recorder_cfg *c = tk_pub_read_begin(&r->cfg, slot);
    int tag = tk_codec_tag(&lib->codec, argv[0]);
    if (atomic_load_explicit(&r->closed, memory_order_acquire)) {
        /* nothing */
    } else if (tag < 0) { /* not a trace tag: nothing a record could hold */
        count_lost(r);
    } else if (!cfg_wants(c, tag)) {
        count_filtered(r, slot);
    } else {
        tk_ring *ring = own_ring(r, slot);
        if (ring == NULL) {
            count_lost(r);
        } else {
            tk_event_in ev = {.tag = (unsigned)tag, .tracee = argv[2],
                              .msg = argv[3]};
            read_opts(lib, env, argv[4], &ev, &stamp);
            record(lib, env, r, ring, slot, stamp, &ev);
        }
    }
    tk_pub_read_end(&r->cfg, slot);
    return lib->am_ok;
}

/* ---- the people's side ------------------------------------------------------------ */

void tk_recorder_close(tk_recorder *r)
{
    atomic_store_explicit(&r->closed, true, memory_order_release);
}

void tk_recorder_close_sync(tk_recorder *r)
{
    tk_recorder_close(r);
    tk_pub_sync(&r->cfg);
}

int tk_recorder_set(tk_recorder_lib *lib, ErlNifEnv *env, tk_recorder *r,
                    const ERL_NIF_TERM argv[3])
{
    unsigned sample = 0;
    tk_tagset tags = 0;
    if (!(argv[0] == lib->am_undefined || argv[0] == lib->am_true ||
          argv[0] == lib->am_false) ||
        !(argv[1] == lib->am_undefined ||
          tk_codec_tagset(&lib->codec, env, argv[1], &tags) == 0) ||
        !(argv[2] == lib->am_undefined ||
          (enif_get_uint(env, argv[2], &sample) && sample >= 1)))
        return -1;
    tk_recorder_cfg *c = tk_pub_stage(&r->cfg);
    if (argv[0] != lib->am_undefined)
        c->paused = argv[0] == lib->am_true;
    if (argv[1] != lib->am_undefined) {
        c->tags = tags;
        c->all_tags = argv[1] == lib->am_true;
    }
    if (argv[2] != lib->am_undefined)
        c->sample = sample;
    tk_pub_commit(&r->cfg);
    return 0;
}

void tk_recorder_stats_get(tk_recorder *r, tk_recorder_stats *s)
{
    memset(s, 0, sizeof *s);
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        s->filtered += tk_stat_read(&r->slots[i].filtered);
        s->truncated += tk_stat_read(&r->slots[i].truncated);
        tk_ring *ring = atomic_load_explicit(&r->producers[i], memory_order_acquire);
        if (ring == NULL)
            continue;
        s->producers++;
        s->written += tk_stat_read(&ring->written);
        s->dropped += tk_stat_read(&ring->dropped);
        s->overwritten += tk_stat_read(&ring->overwritten);
        s->bytes += tk_ring_bytes(ring);
    }
    s->dropped += atomic_load_explicit(&r->lost, memory_order_relaxed);
}

void tk_recorder_cfg_get(tk_recorder *r, tk_recorder_cfg *c)
{
    tk_pub_get(&r->cfg, c);
}

/* ring_nif.c: the tracekit_ring NIF library: load and upgrade, the ring
 * resource, the functions people call (new, close, stats, set, drain) and
 * the VM's callbacks (the recorders' hot path, tk_recorder.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "tk_clock.h"
#include "tk_mem.h"

/* Drain hands out at most this many events per call, so that one call stays
 * well within a scheduler's time slice; the Erlang side loops. */
#define DRAIN_CHUNK 4000

/* ---- the resource --------------------------------------------------------- */

static void ring_dtor(ErlNifEnv *env, void *obj)
{
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = obj;
    atomic_fetch_sub(&lib->alive, 1);
    /* No callback can be running: the VM holds the state term (which
     * keeps this resource alive) for as long as any tracee may call us. */
    if (r->rec != NULL)
        tk_recorder_free(r->rec);
    tk_merge_destroy(&r->merge);
    if (r->lock != NULL)
        enif_mutex_destroy(r->lock);
}

static ring_res *get_ring(const ring_lib *lib, ErlNifEnv *env, ERL_NIF_TERM t)
{
    ring_res *r;
    return enif_get_resource(env, t, lib->ring_type, (void **)&r) ? r : NULL;
}

/* ---- load and upgrade -------------------------------------------------------- */

#define TK_NIF_UNLOAD_MORE(priv) tk_recorder_lib_free(&((ring_lib *)(priv))->rec)

/* On an upgrade, rings made before stay rings (the resource type is taken
 * over) and keep their count. */
static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    ring_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    memset(lib, 0, sizeof *lib);
#define RING_ATOM_INIT(a) lib->am_##a = enif_make_atom(env, #a);
    RING_ATOMS(RING_ATOM_INIT)
#undef RING_ATOM_INIT
    atomic_init(&lib->alive, old_priv != NULL ? atomic_load(&((ring_lib *)old_priv)->alive) : 0);
    lib->ring_type = enif_open_resource_type(env, NULL, "tracekit_ring",
                                             ring_dtor, flags, NULL);
    if (lib->ring_type == NULL || tk_recorder_lib_init(&lib->rec, env, lib->ring_type) != 0) {
        enif_free(lib);
        return -1;
    }
    *priv = lib;
    return 0;
}

#include "tk_niflib.h"
TK_NIF_LIFE(open_lib)

/* ---- limits: the one statement of them, asked by tracekit_ring.erl ----- */

/* limits() -> #{min_size, max_size, memory, schedulers, max_bytes,
 * drain_chunk}. */
static ERL_NIF_TERM limits_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const ring_lib *lib = enif_priv_data(env);
    ERL_NIF_TERM keys[] = {lib->am_min_size, lib->am_max_size, lib->am_memory,
                           lib->am_schedulers, lib->rec.am_max_bytes,
                           lib->am_drain_chunk};
    ERL_NIF_TERM vals[] = {enif_make_uint64(env, TK_RING_MIN_SIZE),
                           enif_make_uint64(env, TK_RING_MAX_SIZE),
                           enif_make_uint64(env, tk_recorder_memory_limit()),
                           enif_make_uint(env, tk_recorder_pool_size()),
                           enif_make_uint64(env, TK_PAYLOAD_MAX_BYTES),
                           enif_make_uint(env, DRAIN_CHUNK)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map);
    return map;
}

/* tags() -> every tag the tracer records. */
static ERL_NIF_TERM tags_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const ring_lib *lib = enif_priv_data(env);
    return tk_codec_tag_list(&lib->rec.codec, env, TK_TAGSET_ALL);
}

/* ---- new(Size, Policy, Payload, MaxBytes, Tags) ---------------------------
 * tracekit_ring:new/1 checks the options against limits(); what comes here
 * is checked again (anyone may call this function), a bad argument is
 * badarg. */

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    tk_recorder_args a;
    if (tk_recorder_args_get(&lib->rec, env, argv, &a) != 0)
        return enif_make_badarg(env);
    ring_res *r = enif_alloc_resource(lib->ring_type, sizeof *r);
    if (r == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    memset(r, 0, sizeof *r);
    atomic_fetch_add(&lib->alive, 1); /* the destructor runs from here on */
    r->lock = enif_mutex_create("tracekit_ring");
    r->rec = tk_recorder_new(a.size, a.policy, a.mode, a.max_bytes, a.tags,
                             a.all_tags);
    ERL_NIF_TERM ret;
    if (r->lock == NULL || r->rec == NULL ||
        tk_merge_init(&r->merge, TK_THREAD_SLOTS) != 0)
        ret = enif_raise_exception(env, lib->am_enomem);
    else
        ret = enif_make_tuple2(env, lib->rec.am_ok, enif_make_resource(env, r));
    enif_release_resource(r);
    return ret;
}

static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = get_ring(lib, env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    tk_recorder_close(r->rec);
    return lib->rec.am_ok;
}

/* Events recorded and not yet drained, overwritten or found undecodable
 * (never less than what is staged). Under r->lock. */
static uint64_t buffered_locked(ring_res *r)
{
    tk_recorder_stats s;
    tk_recorder_stats_get(r->rec, &s);
    uint64_t gone = r->drained + r->undecodable + s.overwritten;
    uint64_t buffered = s.written > gone ? s.written - gone : 0;
    uint64_t staged = tk_merge_staged(&r->merge);
    return buffered > staged ? buffered : staged;
}

static ERL_NIF_TERM stats_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = get_ring(lib, env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    tk_recorder_stats s;
    tk_recorder_stats_get(r->rec, &s);
    enif_mutex_lock(r->lock);
    uint64_t drained = r->drained, undecodable = r->undecodable;
    uint64_t buffered = buffered_locked(r);
    enif_mutex_unlock(r->lock);
    tk_recorder_cfg cfg;
    tk_recorder_cfg_get(r->rec, &cfg);
    const tk_recorder_lib *rl = &lib->rec;
    ERL_NIF_TERM tags = cfg.all_tags ? lib->am_all
                                     : tk_codec_tag_list(&rl->codec, env, cfg.tags);
    ERL_NIF_TERM keys[] = {lib->am_written, lib->am_dropped, lib->am_overwritten,
                           lib->am_bytes, lib->am_producers, lib->am_filtered,
                           lib->am_truncated, lib->am_drained,
                           lib->am_undecodable, lib->am_buffered, lib->am_size,
                           lib->am_policy, lib->am_closed, lib->am_paused,
                           lib->am_sample, lib->am_tags};
    ERL_NIF_TERM vals[] = {
        enif_make_uint64(env, s.written), enif_make_uint64(env, s.dropped),
        enif_make_uint64(env, s.overwritten), enif_make_uint64(env, s.bytes),
        enif_make_uint(env, s.producers), enif_make_uint64(env, s.filtered),
        enif_make_uint64(env, s.truncated), enif_make_uint64(env, drained),
        enif_make_uint64(env, undecodable), enif_make_uint64(env, buffered),
        enif_make_uint64(env, r->rec->size),
        r->rec->policy == TK_RING_DROP ? rl->am_drop : rl->am_overwrite,
        atomic_load(&r->rec->closed) ? rl->am_true : rl->am_false,
        cfg.paused ? rl->am_true : rl->am_false, enif_make_uint(env, cfg.sample),
        tags};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map);
    return map;
}

/* set_nif(Ring, Paused, Tags, Sample): each `undefined' or a new value
 * (checked by tracekit_ring:set/2, and again here). Returns when every
 * callback that could act on the old settings has finished. Runs on a
 * dirty scheduler: the grace period can take a while if a reader thread
 * is descheduled. */
static ERL_NIF_TERM set_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = get_ring(lib, env, argv[0]);
    if (r == NULL || tk_recorder_set(&lib->rec, env, r->rec, argv + 1) != 0)
        return enif_make_badarg(env);
    return lib->rec.am_ok;
}

/* Moves up to `max` events from the rings into evs[*n..], decoded. Under
 * r->lock. A record that does not decode is counted, never skipped
 * silently. */
static void take_events(ErlNifEnv *env, const ring_lib *lib, ring_res *r,
                        size_t max, ERL_NIF_TERM *evs, size_t *n)
{
    const void *p;
    size_t len, got = 0;
    uint64_t stamp;
    (void)tk_merge_collect(&r->merge, r->rec->producers, max);
    while (got < max && tk_merge_next(&r->merge, &p, &len, &stamp)) {
        if (tk_dec_event(env, &lib->rec.codec, p, len, &evs[*n + got]))
            got++;
        else
            r->undecodable++;
    }
    r->drained += got;
    *n += got;
}

/* drain_chunk(Ring, Max) -> [Event] with at most min(Max, DRAIN_CHUNK). */
static ERL_NIF_TERM drain_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = get_ring(lib, env, argv[0]);
    ErlNifUInt64 max;
    if (r == NULL || !enif_get_uint64(env, argv[1], &max) || max == 0)
        return enif_make_badarg(env);
    if (max > DRAIN_CHUNK)
        max = DRAIN_CHUNK;
    ERL_NIF_TERM *evs = enif_alloc(max * sizeof *evs);
    if (evs == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    size_t n = 0;
    enif_mutex_lock(r->lock);
    take_events(env, lib, r, max, evs, &n);
    enif_mutex_unlock(r->lock);
    ERL_NIF_TERM list = enif_make_list_from_array(env, evs, (unsigned)n);
    enif_free(evs);
    enif_consume_timeslice(env, (int)(1 + 100 * n / DRAIN_CHUNK));
    return list;
}

static ERL_NIF_TERM alive_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    ring_lib *lib = enif_priv_data(env);
    return enif_make_long(env, atomic_load(&lib->alive));
}

/* drain_all(Ring) -> [Event]: everything recorded when the call began (at
 * most that many events: producers that go on recording cannot keep it
 * going), on a dirty scheduler, built directly as one list in the caller's
 * heap (chunks appended in Erlang would be copied and collected again and
 * again). The consumer lock is taken one chunk at a time, so a drain_chunk
 * on a normal scheduler never waits long. */
static ERL_NIF_TERM drain_all_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = get_ring(lib, env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    enif_mutex_lock(r->lock);
    uint64_t want = buffered_locked(r);
    enif_mutex_unlock(r->lock);
    size_t n = 0, cap = DRAIN_CHUNK;
    ERL_NIF_TERM *evs = enif_alloc(cap * sizeof *evs);
    if (evs == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    while (n < want) {
        size_t ask = want - n < DRAIN_CHUNK ? (size_t)(want - n) : DRAIN_CHUNK;
        if (cap - n < ask) {
            ERL_NIF_TERM *bigger = enif_realloc(evs, 2 * cap * sizeof *evs);
            if (bigger == NULL)
                break; /* what is taken so far goes out */
            evs = bigger;
            cap *= 2;
        }
        size_t before = n;
        enif_mutex_lock(r->lock);
        take_events(env, lib, r, ask, evs, &n);
        enif_mutex_unlock(r->lock);
        if (n - before < ask)
            break;
    }
    ERL_NIF_TERM list = enif_make_list_from_array(env, evs, (unsigned)n);
    enif_free(evs);
    return list;
}

/* ---- the functions ------------------------------------------------------------------ */

/* The callbacks are the recorder's (a holder starts with its recorder). */
_Static_assert(offsetof(ring_res, rec) == 0, "a holder starts with its recorder");

static ErlNifFunc funcs[] = {
    /* Dirty: touching the memory of big rings takes a while. */
    {"new_nif", 5, new_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"close", 1, close_nif, 0},
    {"stats", 1, stats_nif, 0},
    {"drain_chunk", 2, drain_nif, 0},
    {"drain_all", 1, drain_all_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"alive", 0, alive_nif, 0},
    {"limits", 0, limits_nif, 0},
    {"tags", 0, tags_nif, 0},
    {"set_nif", 4, set_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    TK_RECORDER_CALLBACKS
};

ERL_NIF_INIT(tracekit_ring, funcs, load, NULL, upgrade, unload)

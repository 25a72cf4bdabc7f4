/* ring_nif.c: the tracekit_ring NIF library: load and upgrade, the ring
 * resource, and the functions people call (new, close, stats, set, drain).
 * The VM's callbacks are in tracer.c. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        tk_ring *ring = atomic_load(&r->producers[i]);
        if (ring != NULL) {
            tk_ring_destroy(ring);
            enif_free(ring);
        }
    }
    for (unsigned i = 0; i < r->pool_n; i++)
        if (r->pool[i] != NULL) { /* never handed out */
            tk_ring_destroy(r->pool[i]);
            enif_free(r->pool[i]);
        }
    enif_free(r->pool);
    tk_merge_destroy(&r->merge);
    if (r->payload_ready)
        tk_payload_destroy(&r->payload);
    if (r->cfg_ready)
        tk_pub_destroy(&r->cfg);
    if (r->lock != NULL)
        enif_mutex_destroy(r->lock);
}

/* ---- load and upgrade -------------------------------------------------------- */

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    long alive)
{
    ring_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    memset(lib, 0, sizeof *lib);
#define RING_ATOM_INIT(a) lib->am_##a = enif_make_atom(env, #a);
    RING_ATOMS(RING_ATOM_INIT)
#undef RING_ATOM_INIT
    atomic_init(&lib->alive, alive);
    lib->ring_type = enif_open_resource_type(env, NULL, "tracekit_ring",
                                             ring_dtor, flags, NULL);
    if (lib->ring_type == NULL || tk_codec_init(&lib->codec, env) != 0) {
        enif_free(lib);
        return -1;
    }
    /* The library's memory is VM memory: it shows in erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    tk_clock_init();
    const char *clk = getenv("TRACEKIT_CLOCK");
    if (clk != NULL && strcmp(clk, "monotonic") == 0)
        tk_clock_tsc = 0;
    *priv = lib;
    return 0;
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)info;
    return open_lib(env, priv, ERL_NIF_RT_CREATE, 0);
}

/* A new version of the module: rings made before stay rings (the
 * resource type is taken over) and keep their count. */
static int upgrade(ErlNifEnv *env, void **priv, void **old_priv,
                   ERL_NIF_TERM info)
{
    (void)info;
    ring_lib *old = *old_priv;
    return open_lib(env, priv, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER,
                    atomic_load(&old->alive));
}

static void unload(ErlNifEnv *env, void *priv)
{
    (void)env;
    ring_lib *lib = priv;
    tk_scratch_free(&lib->scratch);
    enif_free(lib);
}

/* ---- limits: the one statement of them, asked by tracekit_ring.erl ----- */

/* What all the rings of one ring resource may take at creation: half of
 * the machine's memory. */
static uint64_t memory_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return UINT64_MAX;
    return (uint64_t)pages * (uint64_t)page / 2;
}

/* Rings made ready at creation: one per normal scheduler. */
static unsigned pool_size(void)
{
    ErlNifSysInfo info;
    enif_system_info(&info, sizeof info);
    unsigned n = info.scheduler_threads > 0 ? (unsigned)info.scheduler_threads : 1;
    return n < TK_THREAD_SHARED ? n : TK_THREAD_SHARED;
}

/* limits() -> #{min_size, max_size, memory, schedulers, max_bytes,
 * drain_chunk}. */
static ERL_NIF_TERM limits_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const ring_lib *lib = enif_priv_data(env);
    ERL_NIF_TERM keys[] = {lib->am_min_size, lib->am_max_size, lib->am_memory,
                           enif_make_atom(env, "schedulers"), lib->am_max_bytes,
                           lib->am_drain_chunk};
    ERL_NIF_TERM vals[] = {enif_make_uint64(env, TK_RING_MIN_SIZE),
                           enif_make_uint64(env, TK_RING_MAX_SIZE),
                           enif_make_uint64(env, memory_limit()),
                           enif_make_uint(env, pool_size()),
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
    return tk_codec_tag_list(&lib->codec, env, TK_TAGSET_ALL);
}

/* ---- new(Size, Policy, Payload, MaxBytes, Tags) ---------------------------
 * tracekit_ring:new/1 checks the options against limits(); what comes here
 * is checked again (anyone may call this function), a bad argument is
 * badarg. */

static ring_res *new_ring(ring_lib *lib, uint64_t size,
                          tk_ring_policy policy, tk_payload_mode mode,
                          uint64_t max_bytes, tk_tagset tags, bool all_tags)
{
    ring_res *r = enif_alloc_resource(lib->ring_type, sizeof *r);
    if (r == NULL)
        return NULL;
    memset(r, 0, sizeof *r);
    atomic_fetch_add(&lib->alive, 1); /* the destructor runs from here on */
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
    ring_cfg cfg = {.paused = false, .all_tags = all_tags, .sample = 1,
                    .tags = tags};
    if (tk_pub_init(&r->cfg, sizeof cfg, &cfg) != 0)
        goto fail;
    r->cfg_ready = true;
    /* One ready ring per normal scheduler, memory touched now rather than
     * on the schedulers' first laps. */
    unsigned want = pool_size();
    r->pool = enif_alloc(want * sizeof *r->pool);
    if (r->pool == NULL)
        goto fail;
    for (; r->pool_n < want; r->pool_n++) {
        tk_ring *ring = enif_alloc(sizeof *ring);
        if (ring == NULL || tk_ring_init(ring, size, policy) != 0) {
            enif_free(ring);
            goto fail;
        }
        memset((void *)ring->words, 0, size);
        r->pool[r->pool_n] = ring;
    }
    r->lock = enif_mutex_create("tracekit_ring");
    if (r->lock == NULL || tk_merge_init(&r->merge, TK_THREAD_SLOTS) != 0)
        goto fail;
    return r;
fail:
    enif_release_resource(r);
    return NULL;
}

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ErlNifUInt64 size, max_bytes;
    tk_tagset tags;
    tk_payload_mode mode;
    if (argv[2] == lib->am_full)
        mode = TK_PAYLOAD_FULL;
    else if (argv[2] == lib->am_none)
        mode = TK_PAYLOAD_NONE;
    else if (argv[2] == lib->am_max_bytes)
        mode = TK_PAYLOAD_MAX;
    else
        return enif_make_badarg(env);
    if (!enif_get_uint64(env, argv[0], &size) || !tk_ring_size_ok(size) ||
        size * pool_size() > memory_limit() ||
        !(argv[1] == lib->am_drop || argv[1] == lib->am_overwrite) ||
        !enif_get_uint64(env, argv[3], &max_bytes) ||
        max_bytes > TK_PAYLOAD_MAX_BYTES ||
        tk_codec_tagset(&lib->codec, env, argv[4], &tags) != 0)
        return enif_make_badarg(env);
    ring_res *r = new_ring(lib, size,
                           argv[1] == lib->am_drop ? TK_RING_DROP : TK_RING_OVERWRITE,
                           mode, max_bytes, tags, argv[4] == lib->am_true);
    if (r == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    ERL_NIF_TERM t = enif_make_resource(env, r);
    enif_release_resource(r);
    return enif_make_tuple2(env, lib->am_ok, t);
}

static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = ring_get(lib, env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    atomic_store_explicit(&r->closed, true, memory_order_release);
    return lib->am_ok;
}

static ERL_NIF_TERM stats_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = ring_get(lib, env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    uint64_t written = 0, dropped = 0, overwritten = 0, bytes = 0,
             filtered = 0, truncated = 0;
    unsigned producers = 0;
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        filtered += tk_stat_read(&r->slots[i].filtered);
        truncated += tk_stat_read(&r->slots[i].truncated);
        tk_ring *ring = atomic_load_explicit(&r->producers[i], memory_order_acquire);
        if (ring == NULL)
            continue;
        producers++;
        written += tk_stat_read(&ring->written);
        dropped += tk_stat_read(&ring->dropped);
        overwritten += tk_stat_read(&ring->overwritten);
        bytes += tk_stat_read(&ring->bytes);
    }
    dropped += atomic_load_explicit(&r->lost, memory_order_relaxed);
    enif_mutex_lock(r->lock);
    uint64_t drained = r->drained, undecodable = r->undecodable;
    uint64_t staged = tk_merge_staged(&r->merge);
    enif_mutex_unlock(r->lock);
    /* Still to be drained: in the rings (counts read above may be a little
     * apart from `drained`; never report less than what is staged). */
    uint64_t gone = drained + undecodable + overwritten;
    uint64_t buffered = written > gone ? written - gone : 0;
    if (buffered < staged)
        buffered = staged;

    ring_cfg cfg;
    tk_pub_get(&r->cfg, &cfg);
    ERL_NIF_TERM tags = cfg.all_tags ? lib->am_all
                                     : tk_codec_tag_list(&lib->codec, env, cfg.tags);
    ERL_NIF_TERM keys[] = {lib->am_written, lib->am_dropped, lib->am_overwritten,
                           lib->am_bytes, lib->am_producers, lib->am_filtered,
                           lib->am_truncated, lib->am_drained,
                           lib->am_undecodable, lib->am_buffered, lib->am_size,
                           lib->am_policy, lib->am_closed, lib->am_paused,
                           lib->am_sample, lib->am_tags};
    ERL_NIF_TERM vals[] = {
        enif_make_uint64(env, written), enif_make_uint64(env, dropped),
        enif_make_uint64(env, overwritten), enif_make_uint64(env, bytes),
        enif_make_uint(env, producers), enif_make_uint64(env, filtered),
        enif_make_uint64(env, truncated), enif_make_uint64(env, drained),
        enif_make_uint64(env, undecodable), enif_make_uint64(env, buffered),
        enif_make_uint64(env, r->size),
        r->policy == TK_RING_DROP ? lib->am_drop : lib->am_overwrite,
        atomic_load(&r->closed) ? lib->am_true : lib->am_false,
        cfg.paused ? lib->am_true : lib->am_false,
        enif_make_uint(env, cfg.sample), tags};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map);
    return map;
}

/* set_nif(Ring, Paused, Tags, Sample): each `undefined' or a new value
 * (checked by tracekit_ring:set/2, and again here). Returns when every
 * callback that could act on the old configuration has finished. Runs on a
 * dirty scheduler: the grace period can take a while if a reader thread
 * is descheduled. */
static ERL_NIF_TERM set_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = ring_get(lib, env, argv[0]);
    unsigned sample = 0;
    tk_tagset tags = 0;
    if (r == NULL ||
        !(argv[1] == lib->am_undefined || argv[1] == lib->am_true ||
          argv[1] == lib->am_false) ||
        !(argv[2] == lib->am_undefined ||
          tk_codec_tagset(&lib->codec, env, argv[2], &tags) == 0) ||
        !(argv[3] == lib->am_undefined ||
          (enif_get_uint(env, argv[3], &sample) && sample >= 1)))
        return enif_make_badarg(env);
    ring_cfg *c = tk_pub_stage(&r->cfg);
    if (argv[1] != lib->am_undefined)
        c->paused = argv[1] == lib->am_true;
    if (argv[2] != lib->am_undefined) {
        c->tags = tags;
        c->all_tags = argv[2] == lib->am_true;
    }
    if (argv[3] != lib->am_undefined)
        c->sample = sample;
    tk_pub_commit(&r->cfg);
    return lib->am_ok;
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
    (void)tk_merge_collect(&r->merge, r->producers, max);
    while (got < max && tk_merge_next(&r->merge, &p, &len, &stamp)) {
        if (tk_dec_event(env, &lib->codec, p, len, &evs[*n + got]))
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
    ring_res *r = ring_get(lib, env, argv[0]);
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

/* drain_all(Ring) -> [Event]: everything recorded so far, on a dirty
 * scheduler, built directly as one list in the caller's heap (chunks
 * appended in Erlang would be copied and collected again and again). The
 * consumer lock is taken one chunk at a time, so a drain_chunk on a normal
 * scheduler never waits long. */
static ERL_NIF_TERM drain_all_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_lib *lib = enif_priv_data(env);
    ring_res *r = ring_get(lib, env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    size_t n = 0, cap = DRAIN_CHUNK;
    ERL_NIF_TERM *evs = enif_alloc(cap * sizeof *evs);
    if (evs == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    for (;;) {
        if (cap - n < DRAIN_CHUNK) {
            ERL_NIF_TERM *bigger = enif_realloc(evs, 2 * cap * sizeof *evs);
            if (bigger == NULL)
                break; /* what is taken so far goes out */
            evs = bigger;
            cap *= 2;
        }
        size_t before = n;
        enif_mutex_lock(r->lock);
        take_events(env, lib, r, DRAIN_CHUNK, evs, &n);
        enif_mutex_unlock(r->lock);
        if (n - before < DRAIN_CHUNK)
            break;
    }
    ERL_NIF_TERM list = enif_make_list_from_array(env, evs, (unsigned)n);
    enif_free(evs);
    return list;
}

#define CB(cls, name_e, name_t)                                             \
    {name_e, 3, tk_enabled_##cls, 0}, {name_t, 5, tk_trace_##cls, 0},

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
    CB(generic, "enabled", "trace")
    CB(send, "enabled_send", "trace_send")
    CB(receive, "enabled_receive", "trace_receive")
    CB(call, "enabled_call", "trace_call")
    CB(procs, "enabled_procs", "trace_procs")
    CB(ports, "enabled_ports", "trace_ports")
    CB(running_procs, "enabled_running_procs", "trace_running_procs")
    CB(running_ports, "enabled_running_ports", "trace_running_ports")
    CB(garbage_collection, "enabled_garbage_collection",
       "trace_garbage_collection")
};

ERL_NIF_INIT(tracekit_ring, funcs, load, NULL, upgrade, unload)

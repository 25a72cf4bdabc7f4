/* lat_nif.c: the tracekit_latency NIF library: load and upgrade, the
 * tracer resource, the functions people call (new, resume, close, read,
 * stats, the histogram layout) and the VM's callbacks, the hot path. */
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "lat.h"
#include "tk_clock.h"
#include "tk_mem.h"

/* ---- the resource ---------------------------------------------------------- */

static void lat_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    lat_res *r = obj;
    /* No callback can be running: the VM holds the state term (which
     * keeps this resource alive) for as long as any tracee may call us.
     * The thread is not waited for here (a scheduler). */
    if (r->core != NULL) {
        atomic_store(&r->core->closed, true);
        lat_consumer_orphan(r->core);
    }
    /* The threads of earlier orphans that have exited are joined (at
     * once: none is waited for). */
    lat_consumer_reap(false);
}

static lat_core *core_of(const lat_lib *lib, ErlNifEnv *env, ERL_NIF_TERM t)
{
    lat_res *r;
    return enif_get_resource(env, t, lib->type, (void **)&r) ? r->core : NULL;
}

/* ---- load, upgrade, unload ---------------------------------------------------- */

/* Loads of this file's code (a load, or an upgrade from it, each until
 * its unload): the consumer threads run this code, so the last unload
 * stops them. */
static _Atomic int loads;

#define TK_NIF_UNLOAD_MORE(priv)                                            \
    do {                                                                    \
        if (atomic_fetch_sub(&loads, 1) == 1)                               \
            lat_consumer_reap(true);                                        \
    } while (0)

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags, void *old_priv)
{
    (void)old_priv;
    lat_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    memset(lib, 0, sizeof *lib);
#define LAT_ATOM_INIT(a) lib->am_##a = enif_make_atom(env, #a);
    LAT_ATOMS(LAT_ATOM_INIT)
#undef LAT_ATOM_INIT
    lib->registry = tk_thread_registry();
    lib->type = enif_open_resource_type(env, NULL, "tracekit_latency", lat_dtor, flags, NULL);
    if (lib->type == NULL) {
        enif_free(lib);
        return -1;
    }
    /* The library's memory is VM memory: it shows in erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    tk_clock_init();
    atomic_fetch_add(&loads, 1);
    *priv = lib;
    return 0;
}

#include "tk_niflib.h"
TK_NIF_LIFE(open_lib)

/* ---- limits ---------------------------------------------------------------- */

#define MAX_FUNCTIONS 1000000u
#define MAX_PROCESSES 10000000u
#define MAX_FRAMES 100000000u

static uint64_t memory_limit(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0)
        return UINT64_MAX;
    return (uint64_t)pages * (uint64_t)page / 2;
}

static unsigned pool_size(void)
{
    ErlNifSysInfo info;
    enif_system_info(&info, sizeof info);
    unsigned n = info.scheduler_threads > 0 ? (unsigned)info.scheduler_threads : 1;
    return n < TK_THREAD_SHARED ? n : TK_THREAD_SHARED;
}

/* limits() -> #{min_size, max_size, memory, schedulers, max_functions,
 * max_processes, max_frames}: the one statement of them. */
static ERL_NIF_TERM limits_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const lat_lib *lib = enif_priv_data(env);
    ERL_NIF_TERM keys[] = {lib->am_min_size, lib->am_max_size, lib->am_memory,
                           lib->am_schedulers, lib->am_max_functions,
                           lib->am_max_processes, lib->am_max_frames};
    ERL_NIF_TERM vals[] = {enif_make_uint(env, TK_RING_MIN_SIZE),
                           enif_make_uint(env, TK_RING_MAX_SIZE),
                           enif_make_uint64(env, memory_limit()),
                           enif_make_uint(env, pool_size()),
                           enif_make_uint(env, MAX_FUNCTIONS),
                           enif_make_uint(env, MAX_PROCESSES),
                           enif_make_uint(env, MAX_FRAMES)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map);
    return map;
}

/* ---- the histogram layout: the one statement of it ---------------------------- */

/* layout() -> #{version, buckets, error_bound, exact_below} */
static ERL_NIF_TERM layout_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const lat_lib *lib = enif_priv_data(env);
    ERL_NIF_TERM keys[] = {lib->am_version, lib->am_buckets, lib->am_error_bound,
                           lib->am_exact_below};
    ERL_NIF_TERM vals[] = {
        enif_make_tuple2(env, lib->am_tracekit_hist, enif_make_uint(env, TK_HIST_LAYOUT)),
        enif_make_uint(env, TK_HIST_BUCKETS), enif_make_double(env, TK_HIST_ERROR),
        enif_make_uint(env, TK_HIST_EXACT)};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, 4, &map);
    return map;
}

/* bucket(I) -> {Lo, Hi, Value}: the values bucket I holds and the one it
 * stands for. */
static ERL_NIF_TERM bucket_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    unsigned i;
    if (!enif_get_uint(env, argv[0], &i) || i >= TK_HIST_BUCKETS)
        return enif_make_badarg(env);
    uint64_t lo, hi;
    tk_hist_bounds(i, &lo, &hi);
    return enif_make_tuple3(env, enif_make_uint64(env, lo), enif_make_uint64(env, hi),
                            enif_make_uint64(env, tk_hist_value(i)));
}

/* histogram(Values) -> the histogram of a list of non-negative integers
 * below 2^64 (at most 10,000,000 of them), as read/1 gives each. */
static ERL_NIF_TERM histogram_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const lat_lib *lib = enif_priv_data(env);
    unsigned len;
    if (!enif_get_list_length(env, argv[0], &len) || len > 10000000u)
        return enif_make_badarg(env);
    tk_hist h;
    tk_hist_init(&h);
    ERL_NIF_TERM list = argv[0], head;
    while (enif_get_list_cell(env, list, &head, &list)) {
        ErlNifUInt64 v;
        if (!enif_get_uint64(env, head, &v)) {
            tk_hist_free(&h);
            return enif_make_badarg(env);
        }
        if (tk_hist_add(&h, v) != 0) {
            tk_hist_free(&h);
            return enif_raise_exception(env, lib->am_enomem);
        }
    }
    ERL_NIF_TERM t = lat_hist_term(env, lib, &h);
    tk_hist_free(&h);
    return t;
}

/* ---- new(Size, Recursion, MaxFunctions, MaxProcesses, MaxFrames, Paused) -----
 * tracekit_latency:new/1 checks the options against limits(); they are
 * checked again here (anyone may call this function): badarg. */

static tk_ring *ring_new(size_t size)
{
    tk_ring *r = tk_mem_aligned_alloc(alignof(tk_ring), sizeof *r);
    if (r != NULL && tk_ring_init(r, size, TK_RING_DROP) != 0) {
        tk_mem_aligned_free(r);
        r = NULL;
    }
    return r;
}

static lat_core *core_new(size_t size, const tk_lat_opts *o, bool paused)
{
    lat_core *c = tk_mem_aligned_alloc(alignof(lat_core), sizeof *c);
    if (c == NULL)
        return NULL;
    memset(c, 0, sizeof *c);
    c->registry = tk_thread_registry();
    c->size = size;
    c->opts = *o;
    atomic_init(&c->paused, paused);
    atomic_init(&c->closed, false);
    c->lock = enif_mutex_create("tracekit_latency");
    c->ctl = enif_mutex_create("tracekit_latency_ctl");
    c->cond = enif_cond_create("tracekit_latency");
    c->lat = tk_lat_new(o);
    unsigned want = pool_size();
    c->pool = tk_mem_zalloc(want * sizeof *c->pool);
    if (c->lock == NULL || c->ctl == NULL || c->cond == NULL || c->lat == NULL ||
        c->pool == NULL || tk_merge_init(&c->merge, TK_THREAD_SLOTS) != 0)
        goto fail;
    for (; c->pool_n < want; c->pool_n++) {
        if ((c->pool[c->pool_n] = ring_new(size)) == NULL)
            goto fail;
        tk_ring_touch(c->pool[c->pool_n]);
    }
    return c;
fail:
    lat_core_free(c);
    return NULL;
}

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const lat_lib *lib = enif_priv_data(env);
    ErlNifUInt64 size, max_frames;
    unsigned max_fns, max_procs;
    if (!enif_get_uint64(env, argv[0], &size) || !tk_ring_size_ok(size) ||
        size * pool_size() > memory_limit() ||
        !(argv[1] == lib->am_outermost || argv[1] == lib->am_each) ||
        !enif_get_uint(env, argv[2], &max_fns) || max_fns == 0 || max_fns > MAX_FUNCTIONS ||
        !enif_get_uint(env, argv[3], &max_procs) || max_procs == 0 ||
        max_procs > MAX_PROCESSES ||
        !enif_get_uint64(env, argv[4], &max_frames) || max_frames == 0 ||
        max_frames > MAX_FRAMES ||
        !(argv[5] == lib->am_true || argv[5] == lib->am_false))
        return enif_make_badarg(env);
    /* Threads of freed tracers that have exited are joined here. */
    lat_consumer_reap(false);
    tk_lat_opts o = {argv[1] == lib->am_each ? TK_LAT_EACH : TK_LAT_OUTERMOST, max_fns,
                     max_procs, max_frames, tk_clock_hz()};
    lat_res *r = enif_alloc_resource(lib->type, sizeof *r);
    if (r == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    r->core = core_new(size, &o, argv[5] == lib->am_true);
    ERL_NIF_TERM ret;
    if (r->core == NULL || lat_consumer_start(r->core) != 0)
        ret = enif_raise_exception(env, lib->am_enomem);
    else
        ret = enif_make_tuple2(env, lib->am_ok, enif_make_resource(env, r));
    enif_release_resource(r);
    return ret;
}

/* resume(L): events are taken from now on (a tracer made paused). */
static ERL_NIF_TERM resume_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const lat_lib *lib = enif_priv_data(env);
    lat_core *c = core_of(lib, env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    atomic_store_explicit(&c->paused, false, memory_order_release);
    return lib->am_ok;
}

/* close(L): no more events; returns when everything recorded is paired
 * and the calls still open are unfinished. The callbacks then remove the
 * tracer from each tracee. */
static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const lat_lib *lib = enif_priv_data(env);
    lat_core *c = core_of(lib, env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    atomic_store_explicit(&c->closed, true, memory_order_release);
    lat_consumer_stop(c);
    return lib->am_ok;
}

static ERL_NIF_TERM read_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const lat_lib *lib = enif_priv_data(env);
    lat_core *c = core_of(lib, env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    return lat_snapshot(env, lib, c, true);
}

static ERL_NIF_TERM stats_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const lat_lib *lib = enif_priv_data(env);
    lat_core *c = core_of(lib, env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    ERL_NIF_TERM m = lat_snapshot(env, lib, c, false);
    ERL_NIF_TERM keys[] = {lib->am_size, lib->am_paused, lib->am_recursion};
    ERL_NIF_TERM vals[] = {enif_make_uint64(env, c->size),
                           atomic_load(&c->paused) ? lib->am_true : lib->am_false,
                           c->opts.recursion == TK_LAT_EACH ? lib->am_each : lib->am_outermost};
    for (unsigned i = 0; i < 3; i++)
        enif_make_map_put(env, m, keys[i], vals[i], &m);
    return m;
}

/* ---- the callbacks ---------------------------------------------------------------- */

/* The tracer a state is, if this library may produce into it: one whose
 * threads were numbered by another library's registry (made by another
 * file's code before an upgrade) is not. */
static inline lat_core *usable(const lat_lib *lib, ErlNifEnv *env, ERL_NIF_TERM state)
{
    lat_core *c = core_of(lib, env, state);
    return c != NULL && c->registry == lib->registry ? c : NULL;
}

/* The calling thread's ring, made on its first event; NULL for a thread
 * without a slot of its own, or when out of memory. */
static tk_ring *own_ring(lat_core *c, unsigned slot)
{
    if (slot >= TK_THREAD_SHARED)
        return NULL;
    tk_ring *ring = atomic_load_explicit(&c->producers[slot], memory_order_relaxed);
    if (ring != NULL)
        return ring;
    unsigned i = atomic_fetch_add_explicit(&c->pool_next, 1, memory_order_relaxed);
    if (i < c->pool_n) {
        ring = c->pool[i];
        c->pool[i] = NULL;
    } else if ((ring = ring_new(c->size)) == NULL) {
        return NULL;
    }
    /* Release: the consumer that sees the pointer sees an initialised ring. */
    atomic_store_explicit(&c->producers[slot], ring, memory_order_release);
    return ring;
}

static inline void count(_Atomic uint64_t *n)
{
    tk_stat_add(n, 1);
}

static inline void count_unplaced(lat_core *c)
{
    atomic_fetch_add_explicit(&c->unplaced, 1, memory_order_release);
}

/* The kind of record a tag makes, or 0. */
static inline uint32_t kind_of(const lat_lib *lib, ERL_NIF_TERM tag)
{
    if (tag == lib->am_call)
        return TK_LAT_CALL;
    if (tag == lib->am_return_from)
        return TK_LAT_RETURN;
    if (tag == lib->am_exception_from)
        return TK_LAT_EXCEPTION;
    if (tag == lib->am_exit)
        return TK_LAT_EXIT;
    return 0;
}

static ERL_NIF_TERM enabled_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const lat_lib *lib = enif_priv_data(env);
    lat_core *c = usable(lib, env, argv[1]);
    if (c == NULL || atomic_load_explicit(&c->closed, memory_order_acquire))
        return argv[0] == lib->am_trace_status ? lib->am_remove : lib->am_discard;
    if (argv[0] == lib->am_trace_status)
        return lib->am_trace;
    unsigned slot = tk_thread_slot();
    if (kind_of(lib, argv[0]) == 0 || atomic_load_explicit(&c->paused, memory_order_acquire)) {
        if (slot < TK_THREAD_SHARED)
            count(&c->slots[slot].filtered);
        return lib->am_discard;
    }
    tk_ring *ring = own_ring(c, slot);
    if (ring == NULL) {
        count_unplaced(c);
        return lib->am_discard;
    }
    /* A full ring: dropped here, before the VM builds the event. */
    return tk_lat_admit(ring, slot, &c->slots[slot].blind) ? lib->am_trace : lib->am_discard;
}

/* The arity of a call's arguments (a list, or the arity itself with the
 * `arity' flag): 0..255, else -1. */
static int arity_of(ErlNifEnv *env, ERL_NIF_TERM t)
{
    unsigned a;
    if (enif_get_uint(env, t, &a))
        return a <= 255 ? (int)a : -1;
    ERL_NIF_TERM head;
    for (a = 0; a <= 255; a++) {
        if (enif_is_empty_list(env, t))
            return (int)a;
        if (!enif_get_list_cell(env, t, &head, &t))
            return -1;
    }
    return -1;
}

static ERL_NIF_TERM trace_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    uint64_t stamp = tk_clock_stamp();
    const lat_lib *lib = enif_priv_data(env);
    lat_core *c = usable(lib, env, argv[1]);
    if (c == NULL || atomic_load_explicit(&c->closed, memory_order_relaxed))
        return lib->am_ok;
    unsigned slot = tk_thread_slot();
    uint32_t kind = kind_of(lib, argv[0]);
    if (kind == 0 || atomic_load_explicit(&c->paused, memory_order_acquire)) {
        if (slot < TK_THREAD_SHARED)
            count(&c->slots[slot].filtered);
        return lib->am_ok;
    }
    ErlNifPid pid;
    tk_lat_rec rec = {argv[2], 0, 0, 0, kind};
    bool ok = enif_get_local_pid(env, argv[2], &pid);
    if (ok && kind != TK_LAT_EXIT) {
        const ERL_NIF_TERM *mfa;
        int n, arity = -1;
        unsigned a;
        ok = enif_get_tuple(env, argv[3], &n, &mfa) && n == 3 && enif_is_atom(env, mfa[0]) &&
             enif_is_atom(env, mfa[1]) &&
             (kind == TK_LAT_CALL ? (arity = arity_of(env, mfa[2])) >= 0
                                  : enif_get_uint(env, mfa[2], &a) && a <= 255 &&
                                        (arity = (int)a) >= 0);
        if (ok) {
            rec.m = mfa[0];
            rec.f = mfa[1];
            rec.arity = (uint32_t)arity;
        }
    }
    if (!ok) { /* not an event of a traced call or process */
        if (slot < TK_THREAD_SHARED)
            count(&c->slots[slot].ignored);
        return lib->am_ok;
    }
    tk_ring *ring = own_ring(c, slot);
    if (ring == NULL)
        count_unplaced(c);
    else
        (void)tk_lat_push(ring, slot, &c->slots[slot].blind, stamp, &rec);
    return lib->am_ok;
}

/* ---- the functions ------------------------------------------------------------------ */

#define CB_(e, t) {e, 3, enabled_nif, 0}, {t, 5, trace_nif, 0}

static ErlNifFunc funcs[] = {
    /* Dirty: touching the rings' memory, waiting for the consumer, copying
     * what it holds under its lock. */
    {"new_nif", 6, new_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"resume", 1, resume_nif, 0},
    {"close", 1, close_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"read", 1, read_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"stats", 1, stats_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"limits", 0, limits_nif, 0},
    {"layout", 0, layout_nif, 0},
    {"bucket", 1, bucket_nif, 0},
    {"histogram_nif", 1, histogram_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    CB_("enabled", "trace"),
    CB_("enabled_send", "trace_send"),
    CB_("enabled_receive", "trace_receive"),
    CB_("enabled_call", "trace_call"),
    CB_("enabled_procs", "trace_procs"),
    CB_("enabled_ports", "trace_ports"),
    CB_("enabled_running_procs", "trace_running_procs"),
    CB_("enabled_running_ports", "trace_running_ports"),
    CB_("enabled_garbage_collection", "trace_garbage_collection"),
};

ERL_NIF_INIT(tracekit_latency, funcs, load, NULL, upgrade, unload)

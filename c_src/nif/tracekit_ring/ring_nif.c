/* ring_nif.c: the tracekit_ring NIF library: load, the ring resource, and
 * the functions people call (new, close, stats, drain). The VM's callbacks
 * are in tracer.c. */
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "tk_clock.h"
#include "tk_mem.h"

ErlNifResourceType *ring_type;
tk_keymap tag_index;
unsigned char tag_part[TK_KEYMAP_CAP];

#define ATOM_DEF(a) ERL_NIF_TERM am_##a;
ATOMS(ATOM_DEF)
#undef ATOM_DEF
ERL_NIF_TERM am_ellipsis;

/* Drain hands out at most this many events per call, so that one call stays
 * well within a scheduler's time slice; the Erlang side loops. */
#define DRAIN_CHUNK 4000

/* ---- per-thread encoding buffers ----------------------------------------- */

static _Atomic(unsigned char *) scratch[TK_THREAD_SLOTS];

unsigned char *scratch_buffer(unsigned slot)
{
    if (slot >= TK_THREAD_SHARED)
        return NULL;
    /* Only the owner thread stores into its slot. */
    unsigned char *b = atomic_load_explicit(&scratch[slot], memory_order_relaxed);
    if (b == NULL) {
        b = enif_alloc(SCRATCH_SIZE);
        atomic_store_explicit(&scratch[slot], b, memory_order_relaxed);
    }
    return b;
}

void scratch_free_all(void)
{
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        enif_free(atomic_load(&scratch[i]));
        atomic_store(&scratch[i], NULL);
    }
}

/* ---- the resource --------------------------------------------------------- */

/* Rings allocated and not yet freed, in this node. */
static _Atomic long rings_alive;

static void ring_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    ring_res *r = obj;
    atomic_fetch_sub(&rings_alive, 1);
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
    if (r->cfg_ready)
        tk_pub_destroy(&r->cfg);
    if (r->lock != NULL)
        enif_mutex_destroy(r->lock);
}

static ring_res *get_ring(ErlNifEnv *env, ERL_NIF_TERM t)
{
    ring_res *r;
    return enif_get_resource(env, t, ring_type, (void **)&r) ? r : NULL;
}

/* ---- load ----------------------------------------------------------------- */

static void add_tag(ErlNifEnv *env, const char *name, payload_part part)
{
    ERL_NIF_TERM a = enif_make_atom(env, name);
    int i = tk_keymap_index(&tag_index, (uint64_t)a);
    if (i >= 0)
        tag_part[i] = (unsigned char)part;
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
#define ATOM_INIT(a) am_##a = enif_make_atom(env, #a);
    ATOMS(ATOM_INIT)
#undef ATOM_INIT
    am_ellipsis = enif_make_atom(env, "...");
    ring_type = enif_open_resource_type(env, NULL, "tracekit_ring", ring_dtor,
                                        ERL_NIF_RT_CREATE, NULL);
    if (ring_type == NULL)
        return -1;
    /* Core memory (rings, counter rows) is VM memory: it shows in
     * erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    tk_clock_init();
    imm_ok = imm_check(env);
    const char *clk = getenv("TRACEKIT_CLOCK");
    if (clk != NULL && strcmp(clk, "monotonic") == 0)
        tk_clock_tsc = 0;

    tk_keymap_init(&tag_index);
    /* Every tag the VM emits, with the part that is user data. */
    static const struct { const char *name; payload_part part; } tags[] = {
        {"send", PART_MSG}, {"send_to_non_existing_process", PART_MSG},
        {"receive", PART_MSG}, {"call", PART_ARGS},
        {"return_from", PART_EXTRA}, {"exception_from", PART_EXC},
        {"return_to", PART_NONE}, {"spawn", PART_SPAWN},
        {"spawned", PART_SPAWN}, {"exit", PART_MSG}, {"link", PART_NONE},
        {"unlink", PART_NONE}, {"getting_linked", PART_NONE},
        {"getting_unlinked", PART_NONE}, {"register", PART_NONE},
        {"unregister", PART_NONE}, {"in", PART_NONE}, {"out", PART_NONE},
        {"in_exiting", PART_NONE}, {"out_exiting", PART_NONE},
        {"out_exited", PART_NONE}, {"gc_major_start", PART_NONE},
        {"gc_major_end", PART_NONE}, {"gc_minor_start", PART_NONE},
        {"gc_minor_end", PART_NONE}, {"open", PART_NONE},
        {"closed", PART_MSG}, {"seq_trace", PART_SEQ},
    };
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        add_tag(env, tags[i].name, tags[i].part);
    return 0;
}

static void unload(ErlNifEnv *env, void *priv)
{
    (void)env;
    (void)priv;
    scratch_free_all();
}

/* Tags: `true' for all, or a list of known tag atoms. 0, or -1 if bad. */
static int parse_tags(ErlNifEnv *env, ERL_NIF_TERM t, ring_cfg *c)
{
    if (t == am_true) {
        memset(c->tags, 0xff, sizeof c->tags);
        c->all_tags = true;
        return 0;
    }
    unsigned len;
    if (!enif_get_list_length(env, t, &len))
        return -1;
    memset(c->tags, 0, sizeof c->tags);
    c->all_tags = false;
    ERL_NIF_TERM head, tail = t;
    while (enif_get_list_cell(env, tail, &head, &tail)) {
        int i = tk_keymap_find(&tag_index, (uint64_t)head);
        if (i < 0)
            return -1;
        c->tags[i >> 6] |= 1ull << (i & 63);
    }
    return 0;
}

/* ---- new(Size, Policy, Payload, MaxBytes, Tags) ---------------------------
 * Arguments are checked by tracekit_ring:new/1; here only their types. */

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ErlNifUInt64 size, max_bytes;
    unsigned len;
    if (!enif_get_uint64(env, argv[0], &size) ||
        !(argv[1] == am_drop || argv[1] == am_overwrite) ||
        !enif_get_uint64(env, argv[3], &max_bytes) ||
        !(argv[4] == am_true || enif_get_list_length(env, argv[4], &len)))
        return enif_make_badarg(env);
    payload_mode mode;
    if (enif_is_identical(argv[2], enif_make_atom(env, "full")))
        mode = PAYLOAD_FULL;
    else if (enif_is_identical(argv[2], enif_make_atom(env, "none")))
        mode = PAYLOAD_NONE;
    else if (enif_is_identical(argv[2], enif_make_atom(env, "max_bytes")))
        mode = PAYLOAD_MAX;
    else
        return enif_make_badarg(env);
    if (!tk_ring_size_ok(size))
        return enif_make_badarg(env);

    ring_res *r = enif_alloc_resource(ring_type, sizeof *r);
    if (r == NULL)
        return enif_raise_exception(env, am_enomem);
    memset(r, 0, sizeof *r);
    atomic_fetch_add(&rings_alive, 1); /* the destructor runs from here on */
    r->size = size;
    r->policy = argv[1] == am_drop ? TK_RING_DROP : TK_RING_OVERWRITE;
    r->payload = mode;
    r->max_bytes = max_bytes > 0 ? max_bytes : 1;
    /* The room enabled_* asks for: enough for a typical event; a bigger
     * one that finds no room is dropped (and counted) in trace_*. */
    size_t maxp = tk_ring_max_payload_of(size);
    r->reserve = mode == PAYLOAD_NONE ? 64 : 256;
    if (r->reserve > maxp)
        r->reserve = maxp;
    ring_cfg cfg = {.paused = false, .sample = 1};
    if (parse_tags(env, argv[4], &cfg) != 0) {
        enif_release_resource(r);
        return enif_make_badarg(env);
    }
    if (tk_pub_init(&r->cfg, sizeof cfg, &cfg) != 0) {
        enif_release_resource(r);
        return enif_raise_exception(env, am_enomem);
    }
    r->cfg_ready = true;
    /* One ready ring per normal scheduler, memory touched now rather than
     * on the schedulers' first laps. */
    ErlNifSysInfo info;
    enif_system_info(&info, sizeof info);
    unsigned want = info.scheduler_threads > 0 ? (unsigned)info.scheduler_threads : 1;
    if (want > TK_THREAD_SHARED)
        want = TK_THREAD_SHARED;
    r->pool = enif_alloc(want * sizeof *r->pool);
    if (r->pool == NULL) {
        enif_release_resource(r);
        return enif_raise_exception(env, am_enomem);
    }
    for (; r->pool_n < want; r->pool_n++) {
        tk_ring *ring = enif_alloc(sizeof *ring);
        if (ring == NULL || tk_ring_init(ring, size, r->policy) != 0) {
            enif_free(ring);
            enif_release_resource(r);
            return enif_raise_exception(env, am_enomem);
        }
        memset((void *)ring->words, 0, size);
        r->pool[r->pool_n] = ring;
    }
    r->lock = enif_mutex_create("tracekit_ring");
    if (r->lock == NULL || tk_merge_init(&r->merge, TK_THREAD_SLOTS,
                                         maxp < SCRATCH_SIZE ? maxp
                                                             : SCRATCH_SIZE) != 0) {
        enif_release_resource(r);
        return enif_raise_exception(env, am_enomem);
    }
    ERL_NIF_TERM t = enif_make_resource(env, r);
    enif_release_resource(r);
    return enif_make_tuple2(env, am_ok, t);
}

static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_res *r = get_ring(env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    atomic_store_explicit(&r->closed, true, memory_order_release);
    return am_ok;
}

static ERL_NIF_TERM stats_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_res *r = get_ring(env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    uint64_t written = 0, dropped = 0, overwritten = 0, bytes = 0, filtered = 0;
    unsigned producers = 0;
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        filtered += atomic_load_explicit(&r->slots[i].filtered, memory_order_relaxed);
        tk_ring *ring = atomic_load_explicit(&r->producers[i], memory_order_acquire);
        if (ring == NULL)
            continue;
        producers++;
        written += atomic_load_explicit(&ring->written, memory_order_relaxed);
        dropped += atomic_load_explicit(&ring->dropped, memory_order_relaxed);
        overwritten += atomic_load_explicit(&ring->overwritten, memory_order_relaxed);
        bytes += atomic_load_explicit(&ring->bytes, memory_order_relaxed);
    }
    dropped += atomic_load_explicit(&r->lost, memory_order_relaxed);
    enif_mutex_lock(r->lock);
    uint64_t drained = r->drained;
    uint64_t staged = tk_merge_staged(&r->merge);
    enif_mutex_unlock(r->lock);
    /* Still to be drained: in the rings (counts read above may be a little
     * apart from `drained`; never report less than what is staged). */
    uint64_t gone = drained + overwritten;
    uint64_t buffered = written > gone ? written - gone : 0;
    if (buffered < staged)
        buffered = staged;

    ring_cfg cfg;
    tk_pub_get(&r->cfg, &cfg);
    ERL_NIF_TERM tags = am_all;
    if (!cfg.all_tags) {
        tags = enif_make_list(env, 0);
        for (int i = TK_KEYMAP_CAP - 1; i >= 0; i--)
            if ((cfg.tags[i >> 6] >> (i & 63)) & 1)
                tags = enif_make_list_cell(
                    env, (ERL_NIF_TERM)tk_keymap_key(&tag_index, i), tags);
    }
    ERL_NIF_TERM keys[] = {am_written, am_dropped, am_overwritten, am_bytes,
                           am_producers, am_filtered, am_drained, am_buffered,
                           am_size, am_policy, am_closed, am_paused,
                           am_sample, am_tags};
    ERL_NIF_TERM vals[] = {
        enif_make_uint64(env, written), enif_make_uint64(env, dropped),
        enif_make_uint64(env, overwritten), enif_make_uint64(env, bytes),
        enif_make_uint(env, producers), enif_make_uint64(env, filtered),
        enif_make_uint64(env, drained), enif_make_uint64(env, buffered),
        enif_make_uint64(env, r->size),
        r->policy == TK_RING_DROP ? am_drop : am_overwrite,
        atomic_load(&r->closed) ? am_true : am_false,
        cfg.paused ? am_true : am_false, enif_make_uint(env, cfg.sample), tags};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map);
    return map;
}

/* set_nif(Ring, Paused, Tags, Sample): each `undefined' or a new value
 * (checked by tracekit_ring:set/2). Returns when every callback that could
 * act on the old configuration has finished. Runs on a dirty scheduler: the
 * grace period can take a while if a reader thread is descheduled. */
static ERL_NIF_TERM set_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_res *r = get_ring(env, argv[0]);
    unsigned sample = 0;
    ring_cfg tags;
    if (r == NULL ||
        !(argv[1] == am_undefined || argv[1] == am_true || argv[1] == am_false) ||
        !(argv[2] == am_undefined || parse_tags(env, argv[2], &tags) == 0) ||
        !(argv[3] == am_undefined ||
          (enif_get_uint(env, argv[3], &sample) && sample >= 1)))
        return enif_make_badarg(env);
    ring_cfg *c = tk_pub_stage(&r->cfg);
    if (argv[1] != am_undefined)
        c->paused = argv[1] == am_true;
    if (argv[2] != am_undefined) {
        memcpy(c->tags, tags.tags, sizeof c->tags);
        c->all_tags = tags.all_tags;
    }
    if (argv[3] != am_undefined)
        c->sample = sample;
    tk_pub_commit(&r->cfg);
    return am_ok;
}

/* drain_chunk(Ring, Max) -> [Event] with at most min(Max, DRAIN_CHUNK). */
static ERL_NIF_TERM drain_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_res *r = get_ring(env, argv[0]);
    ErlNifUInt64 max;
    if (r == NULL || !enif_get_uint64(env, argv[1], &max) || max == 0)
        return enif_make_badarg(env);
    if (max > DRAIN_CHUNK)
        max = DRAIN_CHUNK;
    ERL_NIF_TERM *evs = enif_alloc(max * sizeof *evs);
    if (evs == NULL)
        return enif_raise_exception(env, am_enomem);
    size_t n = 0;
    enif_mutex_lock(r->lock);
    (void)tk_merge_collect(&r->merge, r->producers, max);
    const void *p;
    size_t len;
    uint64_t stamp;
    while (n < max && tk_merge_next(&r->merge, &p, &len, &stamp))
        if (dec_event(env, p, len, &evs[n]))
            n++;
    r->drained += n;
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
    return enif_make_long(env, atomic_load(&rings_alive));
}

/* drain_all(Ring) -> [Event]: everything recorded so far, on a dirty
 * scheduler, built directly as one list in the caller's heap (chunks
 * appended in Erlang would be copied and collected again and again). The
 * consumer lock is taken one chunk at a time, so a drain_chunk on a normal
 * scheduler never waits long. */
static ERL_NIF_TERM drain_all_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    ring_res *r = get_ring(env, argv[0]);
    if (r == NULL)
        return enif_make_badarg(env);
    size_t n = 0, cap = DRAIN_CHUNK;
    ERL_NIF_TERM *evs = enif_alloc(cap * sizeof *evs);
    if (evs == NULL)
        return enif_raise_exception(env, am_enomem);
    for (;;) {
        size_t before = n;
        enif_mutex_lock(r->lock);
        (void)tk_merge_collect(&r->merge, r->producers, DRAIN_CHUNK);
        const void *p;
        size_t len;
        uint64_t stamp;
        while (n - before < DRAIN_CHUNK &&
               tk_merge_next(&r->merge, &p, &len, &stamp)) {
            if (n == cap) {
                ERL_NIF_TERM *bigger = enif_realloc(evs, 2 * cap * sizeof *evs);
                if (bigger == NULL)
                    break; /* what is taken so far goes out */
                evs = bigger;
                cap *= 2;
            }
            if (dec_event(env, p, len, &evs[n]))
                n++;
        }
        r->drained += n - before;
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

ERL_NIF_INIT(tracekit_ring, funcs, load, NULL, NULL, unload)

/* tracekit_count: the smallest useful tracer module.
 *
 * The tracer state is a counter resource. Every event is counted by its tag
 * in per-thread rows (tk_tally): no lock, no allocation, no shared cache
 * line on the event path. Only trace tags are counted (tk_tags.h): a term
 * that is not one is ignored, so nothing anyone passes to trace/5 can
 * change what the counters mean. After close/1 the tracer removes itself:
 * enabled/3 answers `remove` to trace_status and `discard` to everything
 * else, and a state that is not a counter is treated the same way.
 */
#include <erl_nif.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "tk_codec.h"
#include "tk_mem.h"
#include "tk_niflib.h"
#include "tk_tally.h"
#include "tk_thread.h"

#if TK_TALLY_SLOTS != TK_THREAD_SLOTS || TK_TALLY_KEYS < TK_TAG_COUNT
#error "tally rows must match the thread registry and the tag table"
#endif

typedef struct {
    tk_tally tally;
    atomic_bool closed;
} counter;

#define COUNT_ATOMS(X) X(ok) X(trace) X(discard) X(remove) X(trace_status) X(enomem)

/* The library's private data. */
typedef struct {
    ErlNifResourceType *counter_type;
    tk_codec codec;
    COUNT_ATOMS(TK_ATOM_FIELD)
} count_lib;

static void counter_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    tk_tally_destroy(&((counter *)obj)->tally);
}

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    (void)old_priv;
    count_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    lib->counter_type = enif_open_resource_type(env, NULL, "tracekit_count",
                                                counter_dtor, flags, NULL);
    if (lib->counter_type == NULL || tk_codec_init(&lib->codec, env) != 0) {
        enif_free(lib);
        return -1;
    }
    /* The library's memory is VM memory: it shows in erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    COUNT_ATOMS(TK_ATOM_INIT)
    *priv = lib;
    return 0;
}

TK_NIF_LIFE(open_lib)

/* The counter behind a term, or NULL. */
static counter *get_counter(const count_lib *lib, ErlNifEnv *env,
                            ERL_NIF_TERM t)
{
    counter *c;
    return enif_get_resource(env, t, lib->counter_type, (void **)&c) ? c : NULL;
}

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const count_lib *lib = enif_priv_data(env);
    counter *c = enif_alloc_resource(lib->counter_type, sizeof *c);
    if (c == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    atomic_init(&c->closed, false);
    if (tk_tally_init(&c->tally) != 0) {
        /* The destructor frees whatever init allocated. */
        enif_release_resource(c);
        return enif_raise_exception(env, lib->am_enomem);
    }
    ERL_NIF_TERM t = enif_make_resource(env, c);
    enif_release_resource(c);
    return enif_make_tuple2(env, lib->am_ok, t);
}

static ERL_NIF_TERM read_nif(ErlNifEnv *env, int argc,
                             const ERL_NIF_TERM argv[])
{
    (void)argc;
    const count_lib *lib = enif_priv_data(env);
    counter *c = get_counter(lib, env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    uint64_t n[TK_TALLY_KEYS];
    tk_tally_read(&c->tally, n);
    ERL_NIF_TERM map = enif_make_new_map(env);
    for (unsigned k = 0; k < TK_TAG_COUNT; k++)
        if (n[k] != 0)
            enif_make_map_put(env, map, lib->codec.tag[k],
                              enif_make_uint64(env, n[k]), &map);
    return map;
}

static ERL_NIF_TERM reset_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    const count_lib *lib = enif_priv_data(env);
    counter *c = get_counter(lib, env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    tk_tally_reset(&c->tally);
    return lib->am_ok;
}

static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    const count_lib *lib = enif_priv_data(env);
    counter *c = get_counter(lib, env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    atomic_store_explicit(&c->closed, true, memory_order_release);
    return lib->am_ok;
}

/* enabled(Tag, State, Tracee) */
static ERL_NIF_TERM enabled_nif(ErlNifEnv *env, int argc,
                                const ERL_NIF_TERM argv[])
{
    (void)argc;
    const count_lib *lib = enif_priv_data(env);
    counter *c = get_counter(lib, env, argv[1]);
    if (c == NULL || atomic_load_explicit(&c->closed, memory_order_acquire))
        return argv[0] == lib->am_trace_status ? lib->am_remove : lib->am_discard;
    return lib->am_trace;
}

/* trace(Tag, State, Tracee, TraceTerm, Opts) */
static ERL_NIF_TERM trace_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    const count_lib *lib = enif_priv_data(env);
    counter *c = get_counter(lib, env, argv[1]);
    if (c == NULL || atomic_load_explicit(&c->closed, memory_order_relaxed))
        return lib->am_ok;
    int tag = tk_codec_tag(&lib->codec, argv[0]);
    if (tag >= 0)
        tk_tally_add(&c->tally, tk_thread_slot(), (unsigned)tag);
    return lib->am_ok;
}

static ErlNifFunc funcs[] = {
    {"new", 0, new_nif, 0},
    {"read", 1, read_nif, 0},
    {"reset", 1, reset_nif, 0},
    {"close", 1, close_nif, 0},
    {"enabled", 3, enabled_nif, 0},
    {"trace", 5, trace_nif, 0},
};

ERL_NIF_INIT(tracekit_count, funcs, load, NULL, upgrade, unload)

/* tracekit_count: the smallest useful tracer module.
 *
 * The tracer state is a counter resource. Every event is counted by its tag
 * in per-thread rows (tk_tally): no lock, no allocation, no shared cache
 * line on the event path. After close/1 the tracer removes itself: enabled/3
 * answers `remove` to trace_status and `discard` to everything else, and a
 * state that is not a counter is treated the same way.
 */
#include <erl_nif.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "tk_keymap.h"
#include "tk_mem.h"
#include "tk_tally.h"
#include "tk_thread.h"

#if TK_TALLY_SLOTS != TK_THREAD_SLOTS || TK_TALLY_KEYS != TK_KEYMAP_CAP
#error "tally rows must match the thread registry and the tag map"
#endif

typedef struct {
    tk_tally tally;
    atomic_bool closed;
} counter;

static ErlNifResourceType *counter_type;
/* Tag atom -> counter index, shared by all counters of this library. */
static tk_keymap tags;

static ERL_NIF_TERM am_ok, am_trace, am_discard, am_remove, am_trace_status;

static void counter_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    tk_tally_destroy(&((counter *)obj)->tally);
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
    counter_type = enif_open_resource_type(env, NULL, "tracekit_count",
                                           counter_dtor, ERL_NIF_RT_CREATE,
                                           NULL);
    if (counter_type == NULL)
        return -1;
    /* Core memory (rings, counter rows) is VM memory: it shows in
     * erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    tk_keymap_init(&tags);
    am_ok = enif_make_atom(env, "ok");
    am_trace = enif_make_atom(env, "trace");
    am_discard = enif_make_atom(env, "discard");
    am_remove = enif_make_atom(env, "remove");
    am_trace_status = enif_make_atom(env, "trace_status");
    return 0;
}

/* The counter behind a term, or NULL. */
static counter *get_counter(ErlNifEnv *env, ERL_NIF_TERM t)
{
    counter *c;
    return enif_get_resource(env, t, counter_type, (void **)&c) ? c : NULL;
}

static ERL_NIF_TERM new_nif(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    counter *c = enif_alloc_resource(counter_type, sizeof *c);
    if (c == NULL)
        return enif_raise_exception(env, enif_make_atom(env, "enomem"));
    atomic_init(&c->closed, false);
    if (tk_tally_init(&c->tally) != 0) {
        /* The destructor frees whatever init allocated. */
        enif_release_resource(c);
        return enif_raise_exception(env, enif_make_atom(env, "enomem"));
    }
    ERL_NIF_TERM t = enif_make_resource(env, c);
    enif_release_resource(c);
    return enif_make_tuple2(env, am_ok, t);
}

static ERL_NIF_TERM read_nif(ErlNifEnv *env, int argc,
                             const ERL_NIF_TERM argv[])
{
    (void)argc;
    counter *c = get_counter(env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    uint64_t n[TK_TALLY_KEYS];
    tk_tally_read(&c->tally, n);
    ERL_NIF_TERM map = enif_make_new_map(env);
    for (int k = 0; k < TK_TALLY_KEYS; k++) {
        uint64_t tag = tk_keymap_key(&tags, k);
        if (tag != 0 && n[k] != 0)
            enif_make_map_put(env, map, (ERL_NIF_TERM)tag,
                              enif_make_uint64(env, n[k]), &map);
    }
    return map;
}

static ERL_NIF_TERM reset_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    counter *c = get_counter(env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    tk_tally_reset(&c->tally);
    return am_ok;
}

static ERL_NIF_TERM close_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    counter *c = get_counter(env, argv[0]);
    if (c == NULL)
        return enif_make_badarg(env);
    atomic_store_explicit(&c->closed, true, memory_order_release);
    return am_ok;
}

/* enabled(Tag, State, Tracee) */
static ERL_NIF_TERM enabled_nif(ErlNifEnv *env, int argc,
                                const ERL_NIF_TERM argv[])
{
    (void)argc;
    counter *c = get_counter(env, argv[1]);
    if (c == NULL || atomic_load_explicit(&c->closed, memory_order_acquire))
        return enif_is_identical(argv[0], am_trace_status) ? am_remove
                                                           : am_discard;
    return am_trace;
}

/* trace(Tag, State, Tracee, TraceTerm, Opts) */
static ERL_NIF_TERM trace_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    counter *c = get_counter(env, argv[1]);
    if (c == NULL || atomic_load_explicit(&c->closed, memory_order_relaxed) ||
        !enif_is_atom(env, argv[0]))
        return am_ok;
    /* Atoms are never garbage collected: the tag's term word is a stable
     * key, valid in every environment. */
    int key = tk_keymap_index(&tags, (uint64_t)argv[0]);
    if (key >= 0)
        tk_tally_add(&c->tally, tk_thread_slot(), (unsigned)key);
    return am_ok;
}

static ErlNifFunc funcs[] = {
    {"new", 0, new_nif, 0},
    {"read", 1, read_nif, 0},
    {"reset", 1, reset_nif, 0},
    {"close", 1, close_nif, 0},
    {"enabled", 3, enabled_nif, 0},
    {"trace", 5, trace_nif, 0},
};

ERL_NIF_INIT(tracekit_count, funcs, load, NULL, NULL, NULL)

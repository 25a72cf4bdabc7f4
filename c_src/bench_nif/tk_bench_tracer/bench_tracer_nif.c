/* tk_bench_tracer: the reference tracers the benchmarks measure against.
 *
 * With an atom as state, the empty tracer: enabled/3 answers its state
 * (`trace' or `discard') for every event and `trace' for trace_status;
 * trace/5 does nothing. What remains is the cost of the VM's own trace
 * probe and term building: the floor for any tracer module.
 *
 * With a floor resource as state (floor_new/0), the least a tracer that
 * records events in order must do: enabled/3 finds its state (its
 * library's data and a resource lookup, as any tracer whose state can be
 * closed must), and trace/5 finds it again, takes a stamp from the clock tracekit's rings use, and writes a
 * four-word record (header, stamp, tag, tracee) into the calling thread's
 * own 1 MiB buffer. No encoding, no configuration, no statistics. */
#include <erl_nif.h>
#include <stdint.h>

#include "tk_clock.h"
#include "tk_niflib.h"
#include "tk_thread.h"

#define BENCH_ATOMS(X) X(ok) X(trace) X(trace_status) X(discard)

typedef struct {
    ErlNifResourceType *floor_type;
    BENCH_ATOMS(TK_ATOM_FIELD)
} bench_lib;

#define FLOOR_WORDS (1u << 17) /* 1 MiB */
typedef struct {
    uint64_t *buf[TK_THREAD_SLOTS];
    uint64_t pos[TK_THREAD_SLOTS];
} floor_res;

static void floor_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    floor_res *f = obj;
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++)
        enif_free(f->buf[i]);
}

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    (void)old_priv;
    bench_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    BENCH_ATOMS(TK_ATOM_INIT)
    tk_clock_init();
    lib->floor_type = enif_open_resource_type(env, NULL, "tk_bench_floor",
                                              floor_dtor, flags, NULL);
    if (lib->floor_type == NULL) {
        enif_free(lib);
        return -1;
    }
    *priv = lib;
    return 0;
}

TK_NIF_LIFE(open_lib)

static ERL_NIF_TERM floor_new(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const bench_lib *lib = enif_priv_data(env);
    floor_res *f = enif_alloc_resource(lib->floor_type, sizeof *f);
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        f->buf[i] = NULL;
        f->pos[i] = 0;
    }
    ERL_NIF_TERM t = enif_make_resource(env, f);
    enif_release_resource(f);
    return t;
}

static ERL_NIF_TERM enabled(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const bench_lib *lib = enif_priv_data(env);
    floor_res *f;
    if (argv[0] == lib->am_trace_status)
        return lib->am_trace;
    if (enif_is_atom(env, argv[1]))
        return argv[1];
    return enif_get_resource(env, argv[1], lib->floor_type, (void **)&f)
               ? lib->am_trace
               : lib->am_discard;
}

static ERL_NIF_TERM trace(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)argc;
    const bench_lib *lib = enif_priv_data(env);
    floor_res *f;
    if (!enif_get_resource(env, argv[1], lib->floor_type, (void **)&f))
        return lib->am_ok;
    uint64_t stamp = tk_clock_stamp();
    unsigned slot = tk_thread_slot();
    if (slot >= TK_THREAD_SHARED)
        return lib->am_ok;
    uint64_t *b = f->buf[slot];
    if (b == NULL && (b = f->buf[slot] = enif_alloc(FLOOR_WORDS * 8)) == NULL)
        return lib->am_ok;
    uint64_t p = f->pos[slot];
    b[p] = 4 * 8;
    b[p + 1] = stamp;
    b[p + 2] = argv[0];
    b[p + 3] = argv[2];
    f->pos[slot] = (p + 4) & (FLOOR_WORDS - 1);
    return lib->am_ok;
}

static ErlNifFunc funcs[] = {
    {"enabled", 3, enabled, 0},
    {"trace", 5, trace, 0},
    {"floor_new", 0, floor_new, 0},
};

ERL_NIF_INIT(tk_bench_tracer, funcs, load, NULL, upgrade, unload)

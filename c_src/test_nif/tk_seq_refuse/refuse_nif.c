/* tk_seq_refuse: a test tracer module that stays installed but refuses
 * every event: enabled/3 answers `trace` to trace_status (so the VM keeps
 * it) and `discard` to everything else. As the system seq tracer it shows
 * what the VM does when the tracer declines a seq_trace event: the serial
 * does not advance. (A tracer answering `remove` to trace_status is
 * dropped as system seq tracer the next time the VM looks at it, after
 * which serials advance as with no tracer at all.) */
#include "tk_niflib.h"

#define REFUSE_ATOMS(X) X(ok) X(trace) X(discard) X(trace_status)

typedef struct {
    REFUSE_ATOMS(TK_ATOM_FIELD)
} refuse_lib;

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    (void)flags;
    (void)old_priv;
    refuse_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    REFUSE_ATOMS(TK_ATOM_INIT)
    *priv = lib;
    return 0;
}

TK_NIF_LIFE(open_lib)

/* enabled(Tag, State, Tracee) */
static ERL_NIF_TERM enabled_nif(ErlNifEnv *env, int argc,
                                const ERL_NIF_TERM argv[])
{
    (void)argc;
    const refuse_lib *lib = enif_priv_data(env);
    return argv[0] == lib->am_trace_status ? lib->am_trace : lib->am_discard;
}

/* trace(Tag, State, Tracee, TraceTerm, Opts): does nothing (enabled/3
 * discards every event the VM would send). */
static ERL_NIF_TERM trace_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)argc;
    (void)argv;
    const refuse_lib *lib = enif_priv_data(env);
    return lib->am_ok;
}

static ErlNifFunc funcs[] = {
    {"enabled", 3, enabled_nif, 0},
    {"trace", 5, trace_nif, 0},
};

ERL_NIF_INIT(tk_seq_refuse, funcs, load, NULL, upgrade, unload)

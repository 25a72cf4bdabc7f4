/* tk_seq_refuse: a test tracer module that stays installed but refuses
 * every event: enabled/3 answers `trace` to trace_status (so the VM keeps
 * it) and `discard` to everything else. As the system seq tracer it shows
 * what the VM does when the tracer declines a seq_trace event: the serial
 * does not advance. (A tracer answering `remove` to trace_status is
 * dropped as system seq tracer the next time the VM looks at it, after
 * which serials advance as with no tracer at all.) */
#include <erl_nif.h>

static ERL_NIF_TERM am_ok, am_trace, am_discard, am_trace_status;

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
    am_ok = enif_make_atom(env, "ok");
    am_trace = enif_make_atom(env, "trace");
    am_discard = enif_make_atom(env, "discard");
    am_trace_status = enif_make_atom(env, "trace_status");
    return 0;
}

/* enabled(Tag, State, Tracee) */
static ERL_NIF_TERM enabled_nif(ErlNifEnv *env, int argc,
                                const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    return enif_is_identical(argv[0], am_trace_status) ? am_trace : am_discard;
}

/* trace(Tag, State, Tracee, TraceTerm, Opts): never called (enabled/3
 * discards every event). */
static ERL_NIF_TERM trace_nif(ErlNifEnv *env, int argc,
                              const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    (void)argv;
    return am_ok;
}

static ErlNifFunc funcs[] = {
    {"enabled", 3, enabled_nif, 0},
    {"trace", 5, trace_nif, 0},
};

ERL_NIF_INIT(tk_seq_refuse, funcs, load, NULL, NULL, NULL)

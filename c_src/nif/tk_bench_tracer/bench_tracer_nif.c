/* tk_bench_tracer: the empty tracer module the benchmarks measure against.
 *
 * enabled/3 answers its state (`trace' or `discard') for every event and
 * `trace' for trace_status; trace/5 does nothing. What remains is the cost
 * of the VM's own trace probe and term building: the floor for any tracer
 * module. */
#include <erl_nif.h>

static ERL_NIF_TERM am_ok, am_trace, am_trace_status;

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
    am_ok = enif_make_atom(env, "ok");
    am_trace = enif_make_atom(env, "trace");
    am_trace_status = enif_make_atom(env, "trace_status");
    return 0;
}

static ERL_NIF_TERM enabled(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    return argv[0] == am_trace_status ? am_trace : argv[1];
}

static ERL_NIF_TERM trace(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])
{
    (void)env;
    (void)argc;
    (void)argv;
    return am_ok;
}

static ErlNifFunc funcs[] = {
    {"enabled", 3, enabled, 0},
    {"trace", 5, trace, 0},
};

ERL_NIF_INIT(tk_bench_tracer, funcs, load, NULL, NULL, NULL)

/* limit_nif.c: tk_limit (the event limits the trace file's writer applies)
 * as tracekit_model:limit_run/4, for the property that it decides as
 * tracekit_limits does.
 *
 * limit_run(Max, RateN, Span, Times) -> [show | last | stop | over], one
 * per time: Max 0 is no maximum, RateN 0 no rate. */
#include "model_nif.h"
#include "tk_limit.h"

TK_MODEL_NIF(limit_run_nif)
{
    (void)argc;
    ErlNifUInt64 max, span;
    unsigned n, len;
    if (!enif_get_uint64(env, argv[0], &max) || !enif_get_uint(env, argv[1], &n) ||
        !enif_get_uint64(env, argv[2], &span) || !enif_get_list_length(env, argv[3], &len) ||
        len > 100000)
        return enif_make_badarg(env);
    tk_limit l;
    if (tk_limit_init(&l, max, n, span) != 0)
        return enif_make_badarg(env);
    static const char *names[] = {"show", "last", "stop", "over"};
    ERL_NIF_TERM out = enif_make_list(env, 0), head, tail = argv[3];
    ERL_NIF_TERM *ds = enif_alloc(sizeof *ds * (len + 1));
    unsigned i = 0;
    while (ds != NULL && enif_get_list_cell(env, tail, &head, &tail)) {
        ErlNifUInt64 t;
        if (!enif_get_uint64(env, head, &t)) {
            enif_free(ds);
            tk_limit_free(&l);
            return enif_make_badarg(env);
        }
        ds[i++] = enif_make_atom(env, names[tk_limit_event(&l, t)]);
    }
    if (ds == NULL) {
        tk_limit_free(&l);
        return enif_make_badarg(env);
    }
    out = enif_make_list_from_array(env, ds, i);
    enif_free(ds);
    tk_limit_free(&l);
    return out;
}

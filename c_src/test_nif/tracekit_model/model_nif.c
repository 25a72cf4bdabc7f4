/* model_nif.c: the function table and load callback of tracekit_model.
 * The functions themselves live in seq_nif.c, session_nif.c, bp_nif.c and
 * limit_nif.c. */
#include "model_nif.h"

/* Declarations of every NIF function, from the parts' lists. */
#define TK_MODEL_FUNC(ename, arity, cname, flags) TK_MODEL_NIF(cname);
#include "seq_funcs.inc"
#include "session_funcs.inc"
#include "bp_funcs.inc"
#include "limit_funcs.inc"
#undef TK_MODEL_FUNC

#define TK_MODEL_FUNC(ename, arity, cname, flags) {ename, arity, cname, flags},
static ErlNifFunc funcs[] = {
#include "seq_funcs.inc"
#include "session_funcs.inc"
#include "bp_funcs.inc"
#include "limit_funcs.inc"
};
#undef TK_MODEL_FUNC

static int load_parts(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    if (tk_model_seq_load(env, flags) != 0 ||
        tk_model_session_load(env, flags) != 0 ||
        tk_model_bp_load(env, flags) != 0)
        return -1;
    return 0;
}

static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)
{
    (void)priv;
    (void)info;
    return load_parts(env, ERL_NIF_RT_CREATE);
}

/* A new version of the module: models made before stay models. */
static int upgrade(ErlNifEnv *env, void **priv, void **old_priv,
                   ERL_NIF_TERM info)
{
    (void)priv;
    (void)old_priv;
    (void)info;
    return load_parts(env, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER);
}

ERL_NIF_INIT(tracekit_model, funcs, load, NULL, upgrade, NULL)

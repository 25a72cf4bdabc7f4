/* tk_niflib.h: what every tracekit NIF library does to load, upgrade and
 * unload, and to make its atoms.
 *
 * A library keeps its state in private data (atoms, resource types,
 * tables), made by one function of its own:
 *
 *   static int open_lib(ErlNifEnv *env, void **priv,
 *                       ErlNifResourceFlags flags, void *old_priv)
 *
 * which opens its resource types with `flags` and, on an upgrade, may read
 * the previous version's data (old_priv, NULL on a first load).
 * TK_NIF_LIFE(open_lib) defines the load, upgrade and unload callbacks
 * around it: an upgrade (a new version of the module, as code:load_file
 * makes) opens the resource types with ERL_NIF_RT_TAKEOVER, so that
 * resources made by the old version stay valid, and unload frees the data
 * with enif_free (a library with more to free defines TK_NIF_UNLOAD_MORE
 * first).
 *
 * Atoms: a list X(name) ... turned into struct fields with TK_ATOM_FIELD
 * and made with TK_ATOM_INIT (into `lib`).
 */
#ifndef TK_NIFLIB_H
#define TK_NIFLIB_H

#include <erl_nif.h>

#define TK_ATOM_FIELD(a) ERL_NIF_TERM am_##a;
#define TK_ATOM_INIT(a) lib->am_##a = enif_make_atom(env, #a);

#ifndef TK_NIF_UNLOAD_MORE
#define TK_NIF_UNLOAD_MORE(priv) ((void)(priv))
#endif

#define TK_NIF_LIFE(open_fn)                                                \
    static int load(ErlNifEnv *env, void **priv, ERL_NIF_TERM info)         \
    {                                                                       \
        (void)info;                                                         \
        return open_fn(env, priv, ERL_NIF_RT_CREATE, NULL);                 \
    }                                                                       \
    static int upgrade(ErlNifEnv *env, void **priv, void **old_priv,        \
                       ERL_NIF_TERM info)                                   \
    {                                                                       \
        (void)info;                                                         \
        return open_fn(env, priv, ERL_NIF_RT_CREATE | ERL_NIF_RT_TAKEOVER,  \
                       *old_priv);                                          \
    }                                                                       \
    static void unload(ErlNifEnv *env, void *priv)                          \
    {                                                                       \
        (void)env;                                                          \
        TK_NIF_UNLOAD_MORE(priv);                                           \
        enif_free(priv);                                                    \
    }

#endif

/* model_nif.h: the parts of the tracekit_model NIF library.
 *
 * tracekit_model exposes the C core's models of the VM (seq_trace, trace
 * sessions, breakpoints) to Erlang, for the differential tests that run the
 * same scenario on the VM and on the model. Each model has its own source
 * file, its own load function and its own list of NIF functions
 * (<part>_funcs.inc, included into the single function table of
 * model_nif.c).
 */
#ifndef TK_MODEL_NIF_H
#define TK_MODEL_NIF_H

#include <erl_nif.h>

/* Load functions of the parts: they make their atoms and open their
 * resource types with `flags' (taken over on an upgrade). 0 on success. */
int tk_model_seq_load(ErlNifEnv *env, ErlNifResourceFlags flags);
int tk_model_session_load(ErlNifEnv *env, ErlNifResourceFlags flags);
int tk_model_bp_load(ErlNifEnv *env, ErlNifResourceFlags flags);

#define TK_MODEL_NIF(name)                                                  \
    ERL_NIF_TERM name(ErlNifEnv *env, int argc, const ERL_NIF_TERM argv[])

#endif

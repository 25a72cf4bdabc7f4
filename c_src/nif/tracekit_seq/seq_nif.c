/* seq_nif.c: the tracekit_seq NIF library: the causal order of seq_trace
 * events (tk_seqorder.h), for tracekit_seq:order/1.
 *
 *   seq_order([{Kind, Label, LastCnt, Serial, From, To, Msg, SpawnReply}])
 *       -> [{Index, Match}]
 *
 * Terms come interned as numbers (To is -1 for a print); the answer gives
 * the input positions in causal order, each with the position of its
 * matched send or receive (-1: none), 0-based.
 */
#include <erl_nif.h>

#include "tk_mem.h"
#include "tk_niflib.h"
#include "tk_seqorder.h"

#define SEQ_ATOMS(X) X(send) X(receive) X(print) X(true) X(false) X(enomem)

typedef struct {
    SEQ_ATOMS(TK_ATOM_FIELD)
} seq_lib;

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    (void)flags;
    (void)old_priv;
    seq_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    SEQ_ATOMS(TK_ATOM_INIT)
    /* The library's memory is VM memory: it shows in erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    *priv = lib;
    return 0;
}

TK_NIF_LIFE(open_lib)

/* One input tuple into an event; 0 if it is malformed. */
static int get_event(ErlNifEnv *env, const seq_lib *lib, ERL_NIF_TERM t,
                     tk_seqorder_event *e)
{
    const ERL_NIF_TERM *tp;
    int arity, to;
    unsigned label, from, msg;
    ErlNifSInt64 lastcnt, serial;
    if (!enif_get_tuple(env, t, &arity, &tp) || arity != 8 ||
        !enif_get_uint(env, tp[1], &label) ||
        !enif_get_int64(env, tp[2], &lastcnt) ||
        !enif_get_int64(env, tp[3], &serial) ||
        !enif_get_uint(env, tp[4], &from) || !enif_get_int(env, tp[5], &to) ||
        !enif_get_uint(env, tp[6], &msg) ||
        !(tp[7] == lib->am_true || tp[7] == lib->am_false))
        return 0;
    if (tp[0] == lib->am_send)
        e->kind = TK_SEQORDER_SEND;
    else if (tp[0] == lib->am_receive)
        e->kind = TK_SEQORDER_RECEIVE;
    else if (tp[0] == lib->am_print)
        e->kind = TK_SEQORDER_PRINT;
    else
        return 0;
    e->label = label;
    e->lastcnt = lastcnt;
    e->serial = serial;
    e->from = from;
    e->to = to < 0 ? TK_SEQORDER_NOBODY : (uint32_t)to;
    e->msg = msg;
    e->spawn_reply = tp[7] == lib->am_true;
    return 1;
}

static ERL_NIF_TERM seq_order_nif(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[])
{
    (void)argc;
    const seq_lib *lib = enif_priv_data(env);
    unsigned len;
    if (!enif_get_list_length(env, argv[0], &len))
        return enif_make_badarg(env);
    size_t n = len;
    tk_seqorder_event *ev = enif_alloc((n + 1) * sizeof *ev);
    size_t *order = enif_alloc((n + 1) * sizeof *order);
    long *match = enif_alloc((n + 1) * sizeof *match);
    ERL_NIF_TERM ret, head, list = argv[0];
    if (ev == NULL || order == NULL || match == NULL) {
        ret = enif_raise_exception(env, lib->am_enomem);
        goto out;
    }
    for (size_t i = 0; enif_get_list_cell(env, list, &head, &list); i++)
        if (!get_event(env, lib, head, &ev[i])) {
            ret = enif_make_badarg(env);
            goto out;
        }
    if (tk_seqorder(ev, n, order, match) != 0) {
        ret = enif_raise_exception(env, lib->am_enomem);
        goto out;
    }
    ret = enif_make_list(env, 0);
    for (size_t k = n; k-- > 0;)
        ret = enif_make_list_cell(
            env,
            enif_make_tuple2(env, enif_make_uint64(env, order[k]),
                             enif_make_long(env, match[order[k]])),
            ret);
out:
    enif_free(ev);
    enif_free(order);
    enif_free(match);
    return ret;
}

static ErlNifFunc funcs[] = {
    {"seq_order", 1, seq_order_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
};

ERL_NIF_INIT(tracekit_seq, funcs, load, NULL, upgrade, unload)

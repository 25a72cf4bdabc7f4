/* bp_nif.c: the breakpoint model (tk_bp) as tracekit_model:bp_* functions.
 *
 * A model is a resource holding a tk_bp over a fixed table of functions
 * ({M,F,A} with an "exported" flag, in the order given to bp_new/1).
 * bp_function/5 takes the arguments of trace:function/4 (plus the
 * session's number in the model) and runs the whole change sequence;
 * bp_info/4 answers like trace:info/3 for call_count and traced; bp_call/3
 * executes a function (the reader side, on the calling scheduler thread).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "model_nif.h"
#include "tk_thread.h"
#include "tk_bp.h"

typedef struct {
    tk_bp m;
    int ready;
    unsigned n;
    ERL_NIF_TERM *mod, *fun; /* atoms: valid in every environment */
    long *arity;
} bp_model;

static ErlNifResourceType *bp_model_type;

static ERL_NIF_TERM am_ok, am_true, am_false, am_undefined, am_restart,
    am_pause, am_any, am_local, am_meta, am_global, am_call_count,
    am_call_time, am_call_memory, am_traced, am_enomem;

static void bp_model_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    bp_model *bm = obj;
    if (bm->ready)
        tk_bp_destroy(&bm->m);
    enif_free(bm->mod);
    enif_free(bm->fun);
    enif_free(bm->arity);
}

int tk_model_bp_load(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    bp_model_type = enif_open_resource_type(env, NULL, "tracekit_model_bp",
                                            bp_model_dtor, flags,
                                            NULL);
    if (bp_model_type == NULL)
        return -1;
    am_ok = enif_make_atom(env, "ok");
    am_true = enif_make_atom(env, "true");
    am_false = enif_make_atom(env, "false");
    am_undefined = enif_make_atom(env, "undefined");
    am_restart = enif_make_atom(env, "restart");
    am_pause = enif_make_atom(env, "pause");
    am_any = enif_make_atom(env, "_");
    am_local = enif_make_atom(env, "local");
    am_meta = enif_make_atom(env, "meta");
    am_global = enif_make_atom(env, "global");
    am_call_count = enif_make_atom(env, "call_count");
    am_call_time = enif_make_atom(env, "call_time");
    am_call_memory = enif_make_atom(env, "call_memory");
    am_traced = enif_make_atom(env, "traced");
    am_enomem = enif_make_atom(env, "enomem");
    return 0;
}

#if TK_PUB_SLOTS != TK_THREAD_SLOTS
#error "breakpoint readers use the thread registry's slots"
#endif

static int same(ERL_NIF_TERM a, ERL_NIF_TERM b)
{
    return enif_is_identical(a, b);
}

static bp_model *get_model(ErlNifEnv *env, ERL_NIF_TERM t)
{
    bp_model *bm;
    if (!enif_get_resource(env, t, bp_model_type, (void **)&bm) || !bm->ready)
        return NULL;
    return bm;
}

static int get_session(ErlNifEnv *env, ERL_NIF_TERM t, unsigned *s)
{
    return enif_get_uint(env, t, s) && *s < TK_BP_MAX_SESSIONS;
}

/* bp_new([{{M,F,A}, Exported}]) */
TK_MODEL_NIF(tk_model_bp_new)
{
    (void)argc;
    unsigned len;
    if (!enif_get_list_length(env, argv[0], &len) || len == 0 ||
        len > 1000000)
        return enif_make_badarg(env);
    bp_model *bm = enif_alloc_resource(bp_model_type, sizeof *bm);
    if (bm == NULL)
        return enif_raise_exception(env, am_enomem);
    memset(bm, 0, sizeof *bm);
    ERL_NIF_TERM res = enif_make_resource(env, bm);
    enif_release_resource(bm);
    bm->mod = enif_alloc(len * sizeof *bm->mod);
    bm->fun = enif_alloc(len * sizeof *bm->fun);
    bm->arity = enif_alloc(len * sizeof *bm->arity);
    if (bm->mod == NULL || bm->fun == NULL || bm->arity == NULL ||
        tk_bp_init(&bm->m, len, TK_PUB_AUTO) != 0)
        return enif_raise_exception(env, am_enomem);
    bm->ready = 1;
    bm->n = len;
    ERL_NIF_TERM list = argv[0], head;
    for (unsigned i = 0; enif_get_list_cell(env, list, &head, &list); i++) {
        const ERL_NIF_TERM *pair, *mfa;
        int arity;
        if (!enif_get_tuple(env, head, &arity, &pair) || arity != 2 ||
            !enif_get_tuple(env, pair[0], &arity, &mfa) || arity != 3 ||
            !enif_is_atom(env, mfa[0]) || !enif_is_atom(env, mfa[1]) ||
            !enif_get_long(env, mfa[2], &bm->arity[i]) ||
            (!same(pair[1], am_true) && !same(pair[1], am_false)))
            return enif_make_badarg(env);
        bm->mod[i] = mfa[0];
        bm->fun[i] = mfa[1];
        tk_bp_set_exported(&bm->m, i, same(pair[1], am_true));
    }
    return res;
}

/* An MFA pattern as trace:function/4 takes it: {M, F, A} where a '_'
 * makes the rest wildcards too. `specified` is the number of leading
 * fields that are not '_'. */
typedef struct {
    ERL_NIF_TERM mod, fun;
    long arity;
    int specified;
} mfa_pat;

static int get_pattern(ErlNifEnv *env, ERL_NIF_TERM t, mfa_pat *p)
{
    const ERL_NIF_TERM *e;
    int n;
    if (!enif_get_tuple(env, t, &n, &e) || n != 3 || !enif_is_atom(env, e[0]) ||
        !enif_is_atom(env, e[1]))
        return 0;
    if (!same(e[2], am_any) && !enif_get_long(env, e[2], &p->arity))
        return 0;
    p->specified = 0;
    while (p->specified < 3 && !same(e[p->specified], am_any))
        p->specified++;
    for (int i = p->specified; i < 3; i++)
        if (!same(e[i], am_any))
            return 0;
    p->mod = e[0];
    p->fun = e[1];
    return 1;
}

static int matches(const bp_model *bm, unsigned i, const mfa_pat *p)
{
    return (p->specified < 1 || same(bm->mod[i], p->mod)) &&
           (p->specified < 2 || same(bm->fun[i], p->fun)) &&
           (p->specified < 3 || bm->arity[i] == p->arity);
}

/* The function of an exact {M,F,A}: its index, -1 when not in the table,
 * -2 when the term is not an {M,F,A}. */
static int find_mfa(ErlNifEnv *env, const bp_model *bm, ERL_NIF_TERM t)
{
    mfa_pat p;
    if (!get_pattern(env, t, &p) || p.specified != 3)
        return -2;
    for (unsigned i = 0; i < bm->n; i++)
        if (matches(bm, i, &p))
            return (int)i;
    return -1;
}

/* A nonzero id for a term (match specs, meta tracers). */
static uint32_t term_id(ERL_NIF_TERM t)
{
    uint32_t h = (uint32_t)enif_hash(ERL_NIF_PHASH2, t, 0);
    return h == 0 ? 1 : h;
}

/* bp_function(Model, Session, MFA, Pattern, Flags): trace:function/4. */
TK_MODEL_NIF(tk_model_bp_function)
{
    (void)argc;
    bp_model *bm = get_model(env, argv[0]);
    unsigned session;
    mfa_pat pat;
    if (bm == NULL || !get_session(env, argv[1], &session) ||
        !get_pattern(env, argv[2], &pat))
        return enif_make_badarg(env);

    /* The flag list, with trace_pattern's rules: `global` excludes the
     * breakpoint flags; a {meta, Tracer} tuple is refused in a session
     * that has a tracer (the only kind the model stands for). */
    uint32_t cats = 0;
    int global = 0;
    ERL_NIF_TERM list = argv[4], item;
    while (enif_get_list_cell(env, list, &item, &list)) {
        uint32_t cat;
        if (same(item, am_global)) {
            if (cats != 0)
                return enif_make_badarg(env);
            global = 1;
            continue;
        }
        if (same(item, am_local))
            cat = TK_BP_LOCAL_TRACE;
        else if (same(item, am_meta))
            cat = TK_BP_META_TRACE;
        else if (same(item, am_call_count))
            cat = TK_BP_COUNT;
        else if (same(item, am_call_time))
            cat = TK_BP_TIME_TRACE;
        else if (same(item, am_call_memory))
            cat = TK_BP_MEM_TRACE;
        else
            return enif_make_badarg(env);
        if (global)
            return enif_make_badarg(env);
        cats |= cat;
    }
    if (!enif_is_empty_list(env, list))
        return enif_make_badarg(env);

    tk_bp_op op;
    uint32_t ms = 0;
    ERL_NIF_TERM p = argv[3];
    if (same(p, am_false))
        op = TK_BP_OFF;
    else if (same(p, am_true) || enif_is_empty_list(env, p))
        op = TK_BP_ON;
    else if (same(p, am_restart))
        op = TK_BP_RESTART;
    else if (same(p, am_pause))
        op = TK_BP_PAUSE;
    else if (enif_is_list(env, p)) {
        op = TK_BP_ON;
        ms = term_id(p);
    } else
        return enif_make_badarg(env);
    /* A match spec with nothing to apply it to. */
    if (ms != 0 && !(cats & (TK_BP_LOCAL_TRACE | TK_BP_META_TRACE)) &&
        (cats & (TK_BP_COUNT | TK_BP_TIME_TRACE | TK_BP_MEM_TRACE)))
        return enif_make_badarg(env);

    ErlNifPid self;
    uint32_t meta_tracer =
        enif_self(env, &self) ? term_id(enif_make_pid(env, &self)) : 1;
    long matched = 0;
    int failed = 0;
    tk_bp_begin(&bm->m, session);
    for (unsigned i = 0; i < bm->n; i++) {
        if (!matches(bm, i, &pat))
            continue;
        int r = tk_bp_stage_pattern(&bm->m, i, op, cats, ms, ms, meta_tracer);
        if (r < 0)
            failed = 1;
        else
            matched += r;
    }
    tk_bp_finish(&bm->m);
    if (failed)
        return enif_raise_exception(env, am_enomem);
    return enif_make_long(env, matched);
}

/* bp_info(Model, Session, {M,F,A}, call_count | traced) */
TK_MODEL_NIF(tk_model_bp_info)
{
    (void)argc;
    bp_model *bm = get_model(env, argv[0]);
    unsigned session;
    if (bm == NULL || !get_session(env, argv[1], &session))
        return enif_make_badarg(env);
    int f = find_mfa(env, bm, argv[2]);
    ERL_NIF_TERM item = argv[3];
    if (f == -2 || (!same(item, am_call_count) && !same(item, am_traced)))
        return enif_make_badarg(env);
    ERL_NIF_TERM v = am_undefined;
    if (f >= 0) {
        tk_bp_lock(&bm->m);
        if (same(item, am_call_count)) {
            uint64_t n;
            v = tk_bp_count_of(&bm->m, session, (unsigned)f, &n)
                    ? enif_make_uint64(env, n)
                    : am_false;
        } else {
            uint32_t fl = tk_bp_flags_of(&bm->m, session, (unsigned)f,
                                         tk_bp_active(&bm->m));
            v = (fl & TK_BP_GLOBAL_TRACE)  ? am_global
                : (fl & TK_BP_LOCAL_TRACE) ? am_local
                                           : am_false;
        }
        tk_bp_unlock(&bm->m);
    }
    return enif_make_tuple2(env, item, v);
}

/* bp_flags(Model, Session, {M,F,A}) -> {Active, Staging} | undefined */
TK_MODEL_NIF(tk_model_bp_flags)
{
    (void)argc;
    bp_model *bm = get_model(env, argv[0]);
    unsigned session;
    if (bm == NULL || !get_session(env, argv[1], &session))
        return enif_make_badarg(env);
    int f = find_mfa(env, bm, argv[2]);
    if (f == -2)
        return enif_make_badarg(env);
    if (f == -1)
        return am_undefined;
    tk_bp_lock(&bm->m);
    unsigned a = tk_bp_active(&bm->m);
    uint32_t fa = tk_bp_flags_of(&bm->m, session, (unsigned)f, a);
    uint32_t fs = tk_bp_flags_of(&bm->m, session, (unsigned)f, a ^ 1u);
    tk_bp_unlock(&bm->m);
    return enif_make_tuple2(env, enif_make_uint(env, fa),
                            enif_make_uint(env, fs));
}

/* bp_call(Model, {M,F,A}, N): N local calls by a process that is call
 * traced in no session. Runs on a dirty CPU scheduler. */
/* Calls per bp_call_chunk (as ?BP_CHUNK in tracekit_model.erl). */
#define BP_CALL_CHUNK 100000

TK_MODEL_NIF(tk_model_bp_call)
{
    (void)argc;
    bp_model *bm = get_model(env, argv[0]);
    unsigned long n;
    /* Bounded: tracekit_model:bp_call/3 loops over chunks, so that no
     * NIF call holds a dirty scheduler for long. */
    if (bm == NULL || !enif_get_ulong(env, argv[2], &n) || n > BP_CALL_CHUNK)
        return enif_make_badarg(env);
    int f = find_mfa(env, bm, argv[1]);
    if (f < 0)
        return enif_make_badarg(env);
    unsigned slot = tk_thread_slot();
    for (unsigned long i = 0; i < n; i++)
        if (tk_bp_call(&bm->m, slot, (unsigned)f, NULL, NULL, 0) < 0)
            return enif_raise_exception(
                env, enif_make_atom(env, "inconsistent_breakpoints"));
    return am_ok;
}

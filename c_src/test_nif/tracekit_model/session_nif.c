/* session_nif.c: the trace session model (c_src/core/tk_session.h) as
 * tracekit_model:session_* functions.
 *
 * A model is a resource. Arguments and answers use the model's own
 * vocabulary: tracees are {tracee, Id}, tracers {tracer, Key}, match
 * specifications {ms, Key} (keys chosen by the caller), sessions are named
 * by their ids; answers of session_info are {Name, WeakId} as the VM's,
 * with weak ids counted from 0 in each model. Every operation answers
 * what the VM answers, with the atom `badarg' where the VM raises it.
 */
#include <string.h>

#include "model_nif.h"
#include "tk_session.h"

typedef struct {
    ErlNifMutex *lock;
    tk_ses_model *m;
} model_res;

static ErlNifResourceType *model_type;

static ERL_NIF_TERM am_ok, am_badarg, am_undefined, am_true, am_false,
    am_global, am_local, am_tracee, am_tracer, am_ms, am_call_data, am_legacy,
    am_default, am_none, am_underscore, am_all, am_any, am_existing, am_new,
    am_on_load, am_send, am_receive, am_restart, am_pause, am_new_processes,
    am_new_ports, am_processes, am_existing_processes, am_ports,
    am_existing_ports, am_limit;

static struct {
    int key;
    ERL_NIF_TERM atom;
    const char *name;
} keys[] = {
    {TK_K_FLAGS, 0, "flags"},
    {TK_K_TRACER, 0, "tracer"},
    {TK_K_TRACED, 0, "traced"},
    {TK_K_MATCH_SPEC, 0, "match_spec"},
    {TK_K_META, 0, "meta"},
    {TK_K_META_MATCH_SPEC, 0, "meta_match_spec"},
    {TK_K_CALL_COUNT, 0, "call_count"},
    {TK_K_CALL_TIME, 0, "call_time"},
    {TK_K_CALL_MEMORY, 0, "call_memory"},
    {TK_K_ALL, 0, "all"},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static ERL_NIF_TERM flag_atoms[TK_SES_NFLAG_NAMES];

static void model_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    model_res *r = obj;
    if (r->m)
        tk_ses_free(r->m);
    if (r->lock)
        enif_mutex_destroy(r->lock);
}

int tk_model_session_load(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    model_type = enif_open_resource_type(env, NULL, "tk_session_model",
                                         model_dtor, flags, NULL);
    if (!model_type)
        return -1;
#define A(v, s) v = enif_make_atom(env, s)
    A(am_ok, "ok"); A(am_badarg, "badarg"); A(am_undefined, "undefined");
    A(am_true, "true"); A(am_false, "false"); A(am_global, "global");
    A(am_local, "local"); A(am_tracee, "tracee"); A(am_tracer, "tracer");
    A(am_ms, "ms"); A(am_call_data, "call_data"); A(am_legacy, "legacy");
    A(am_default, "default"); A(am_none, "none"); A(am_underscore, "_");
    A(am_all, "all"); A(am_any, "any"); A(am_existing, "existing");
    A(am_new, "new"); A(am_on_load, "on_load"); A(am_send, "send");
    A(am_receive, "receive"); A(am_restart, "restart"); A(am_pause, "pause");
    A(am_new_processes, "new_processes"); A(am_new_ports, "new_ports");
    A(am_processes, "processes");
    A(am_existing_processes, "existing_processes"); A(am_ports, "ports");
    A(am_existing_ports, "existing_ports"); A(am_limit, "model_limit");
#undef A
    for (size_t i = 0; i < NKEYS; i++)
        keys[i].atom = enif_make_atom(env, keys[i].name);
    for (int i = 0; i < TK_SES_NFLAG_NAMES; i++)
        flag_atoms[i] = enif_make_atom(env, tk_ses_flag_names[i].name);
    return 0;
}

/* ---- helpers ---------------------------------------------------------------- */

static model_res *get_model(ErlNifEnv *env, ERL_NIF_TERM t)
{
    model_res *r;
    return enif_get_resource(env, t, model_type, (void **)&r) ? r : NULL;
}

/* The model of a term, locked; NULL (nothing locked) if not a model. */
static model_res *lock_model(ErlNifEnv *env, ERL_NIF_TERM t)
{
    model_res *r = get_model(env, t);
    if (r)
        enif_mutex_lock(r->lock);
    return r;
}

static ERL_NIF_TERM unlock(model_res *r, ERL_NIF_TERM res)
{
    enif_mutex_unlock(r->lock);
    return res;
}

static int get_int(ErlNifEnv *env, ERL_NIF_TERM t, int *out)
{
    return enif_get_int(env, t, out);
}

/* {tracee, Id} -> Id, or -1. */
static int get_tracee(ErlNifEnv *env, ERL_NIF_TERM t)
{
    const ERL_NIF_TERM *e;
    int arity, id;
    if (enif_get_tuple(env, t, &arity, &e) && arity == 2 &&
        enif_is_identical(e[0], am_tracee) && get_int(env, e[1], &id))
        return id;
    return -1;
}

static ERL_NIF_TERM result(ErlNifEnv *env, int r, ERL_NIF_TERM ok)
{
    if (r == TK_SES_BADARG)
        return am_badarg;
    if (r == TK_SES_LIMIT)
        return enif_raise_exception(env, am_limit);
    if (r == TK_SES_UNDEFINED)
        return am_undefined;
    return ok;
}

static ERL_NIF_TERM flags_term(ErlNifEnv *env, uint32_t flags)
{
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (int i = TK_SES_NFLAG_NAMES - 1; i >= 0; i--)
        if (flags & tk_ses_flag_names[i].bit)
            list = enif_make_list_cell(env, flag_atoms[i], list);
    return list;
}

/* A flag list: *mask gets the bits; 0 when some element is not a known
 * flag atom or the list is improper. */
static int parse_flags(ErlNifEnv *env, ERL_NIF_TERM list, int fun_flags,
                       uint32_t *mask)
{
    ERL_NIF_TERM head;
    char name[64];
    *mask = 0;
    while (enif_get_list_cell(env, list, &head, &list)) {
        if (!enif_get_atom(env, head, name, sizeof name, ERL_NIF_LATIN1))
            return 0;
        uint32_t bit = fun_flags ? tk_ses_fflag_bit(name)
                                 : tk_ses_flag_bit(name);
        if (!bit)
            return 0;
        *mask |= bit;
    }
    return enif_is_empty_list(env, list);
}

/* A match specification argument. */
static long parse_ms(ErlNifEnv *env, ERL_NIF_TERM t)
{
    const ERL_NIF_TERM *e;
    int arity;
    long k;
    if (enif_is_identical(t, am_true) || enif_is_empty_list(env, t))
        return TK_MS_TRUE;
    if (enif_is_identical(t, am_false))
        return TK_MS_FALSE;
    if (enif_is_identical(t, am_restart))
        return TK_MS_RESTART;
    if (enif_is_identical(t, am_pause))
        return TK_MS_PAUSE;
    if (enif_get_tuple(env, t, &arity, &e) && arity == 2 &&
        enif_is_identical(e[0], am_ms) && enif_get_long(env, e[1], &k) &&
        k > 0)
        return k;
    return TK_MS_BAD;
}

/* {M, F, A} with atoms, '_' and integers: 1 with *p set, 0 otherwise. */
static int parse_mfa(ErlNifEnv *env, ERL_NIF_TERM t, tk_ses_mfa *p)
{
    const ERL_NIF_TERM *e;
    int arity;
    memset(p, 0, sizeof *p);
    if (!enif_get_tuple(env, t, &arity, &e) || arity != 3 ||
        !enif_is_atom(env, e[0]) || !enif_is_atom(env, e[1]))
        return 0;
    p->module_wild = enif_is_identical(e[0], am_underscore);
    p->name_wild = enif_is_identical(e[1], am_underscore);
    p->module = (uint64_t)e[0];
    p->name = (uint64_t)e[1];
    if (enif_is_identical(e[2], am_underscore))
        p->arity_wild = 1;
    else if (!enif_get_long(env, e[2], &p->arity))
        return 0;
    return 1;
}

static int key_of(ERL_NIF_TERM t)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (enif_is_identical(t, keys[i].atom))
            return keys[i].key;
    return TK_K_OTHER;
}

static ERL_NIF_TERM key_atom(int key, ERL_NIF_TERM other)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].key == key)
            return keys[i].atom;
    return other;
}

static ERL_NIF_TERM value_term(ErlNifEnv *env, const tk_ses_value *v)
{
    switch (v->kind) {
    case TK_V_UNDEFINED: return am_undefined;
    case TK_V_FALSE: return am_false;
    case TK_V_TRUE: return am_true;
    case TK_V_GLOBAL: return am_global;
    case TK_V_LOCAL: return am_local;
    case TK_V_NIL: return enif_make_list(env, 0);
    case TK_V_MS:
        return enif_make_tuple2(env, am_ms,
                                enif_make_uint64(env, (ErlNifUInt64)v->n));
    case TK_V_TRACER:
        return enif_make_tuple2(env, am_tracer,
                                enif_make_uint64(env, (ErlNifUInt64)v->n));
    case TK_V_INT: return enif_make_uint64(env, (ErlNifUInt64)v->n);
    case TK_V_CALL_DATA: return am_call_data;
    case TK_V_FLAGS: return flags_term(env, (uint32_t)v->n);
    default: return am_undefined;
    }
}

/* What an info question is about. */
static int parse_what(ErlNifEnv *env, tk_ses_model *m, ERL_NIF_TERM t,
                      int *id)
{
    tk_ses_mfa p;
    *id = 0;
    if ((*id = get_tracee(env, t)) >= 0)
        return TK_W_TRACEE;
    if (enif_is_identical(t, am_new) || enif_is_identical(t, am_new_processes))
        return TK_W_NEW_PROCS;
    if (enif_is_identical(t, am_new_ports))
        return TK_W_NEW_PORTS;
    if (enif_is_identical(t, am_on_load))
        return TK_W_ON_LOAD;
    if (enif_is_identical(t, am_send))
        return TK_W_SEND;
    if (enif_is_identical(t, am_receive))
        return TK_W_RECEIVE;
    if (enif_is_identical(t, am_all) || enif_is_identical(t, am_any))
        return TK_W_ALL;
    /* A function: no wildcards, an arity that is a small integer. */
    if (parse_mfa(env, t, &p) && !p.module_wild && !p.name_wild &&
        !p.arity_wild) {
        *id = tk_ses_find_function(m, p.module, p.name, (int)p.arity);
        return TK_W_FUNC;
    }
    return TK_W_BAD;
}

/* ---- NIF functions ------------------------------------------------------------- */

TK_MODEL_NIF(session_new_nif)
{
    (void)argc;
    int rel;
    if (!get_int(env, argv[0], &rel))
        return enif_make_badarg(env);
    model_res *r = enif_alloc_resource(model_type, sizeof *r);
    if (!r)
        return enif_raise_exception(env, enif_make_atom(env, "enomem"));
    r->lock = enif_mutex_create("tk_session_model");
    r->m = tk_ses_new(rel);
    ERL_NIF_TERM t = enif_make_resource(env, r);
    enif_release_resource(r);
    if (!r->lock || !r->m)
        return enif_raise_exception(env, enif_make_atom(env, "enomem"));
    return t;
}


TK_MODEL_NIF(session_add_function_nif)
{
    (void)argc;
    tk_ses_mfa p;
    if (!parse_mfa(env, argv[1], &p) || p.module_wild || p.name_wild ||
        p.arity_wild)
        return enif_make_badarg(env);
    int exported = enif_is_identical(argv[2], am_true);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    int fid = tk_ses_add_function(r->m, p.module, p.name, (int)p.arity,
                                  exported);
    return unlock(r, result(env, fid, enif_make_int(env, fid)));
}

TK_MODEL_NIF(session_create_nif)
{
    (void)argc;
    int tracer;
    if (!enif_is_atom(env, argv[1]) || !get_int(env, argv[2], &tracer))
        return enif_make_badarg(env);
    int args_ok = enif_is_identical(argv[3], am_true);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    long weak = 0;
    int sid = tk_ses_create(r->m, (uint64_t)argv[1], (uint64_t)tracer,
                            args_ok, &weak);
    return unlock(r, result(env, sid,
                            enif_make_tuple2(env, enif_make_int(env, sid),
                                             enif_make_long(env, weak))));
}

TK_MODEL_NIF(session_destroy_nif)
{
    (void)argc;
    int sid;
    if (!get_int(env, argv[1], &sid))
        return enif_make_badarg(env);
    int by_weak = enif_is_identical(argv[2], am_true);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    int res = tk_ses_destroy(r->m, sid, by_weak);
    return unlock(r, result(env, res, res ? am_true : am_false));
}

static ERL_NIF_TERM tracee_term(ErlNifEnv *env, int tid)
{
    return enif_make_tuple2(env, am_tracee, enif_make_int(env, tid));
}

TK_MODEL_NIF(session_spawn_nif)
{
    (void)argc;
    int parent = TK_SES_NONE;
    if (!enif_is_identical(argv[1], am_none) &&
        (parent = get_tracee(env, argv[1])) < 0)
        return enif_make_badarg(env);
    int link = enif_is_identical(argv[2], am_true);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    int tid = tk_ses_spawn(r->m, parent, link);
    return unlock(r, result(env, tid, tracee_term(env, tid)));
}

TK_MODEL_NIF(session_open_port_nif)
{
    (void)argc;
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    int tid = tk_ses_open_port(r->m);
    return unlock(r, result(env, tid, tracee_term(env, tid)));
}

TK_MODEL_NIF(session_exit_nif)
{
    (void)argc;
    int tid = get_tracee(env, argv[1]);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    return unlock(r, result(env, tk_ses_exit(r->m, tid), am_ok));
}

static ERL_NIF_TERM link_op(ErlNifEnv *env, const ERL_NIF_TERM argv[], int on)
{
    int a = get_tracee(env, argv[1]), b = get_tracee(env, argv[2]);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    int res = on ? tk_ses_link(r->m, a, b) : tk_ses_unlink(r->m, a, b);
    return unlock(r, result(env, res, am_ok));
}

TK_MODEL_NIF(session_link_nif)
{
    (void)argc;
    return link_op(env, argv, 1);
}

TK_MODEL_NIF(session_unlink_nif)
{
    (void)argc;
    return link_op(env, argv, 0);
}

/* trace:process/4 (ports == 0) and trace:port/4 (ports == 1):
 * (Model, Sid, Spec, How, Flags, ExtCount). */
static ERL_NIF_TERM trace_op(ErlNifEnv *env, const ERL_NIF_TERM argv[],
                             int ports)
{
    int sid;
    long ext;
    if (!get_int(env, argv[1], &sid) || !enif_get_long(env, argv[5], &ext))
        return enif_make_badarg(env);
    ERL_NIF_TERM spec_t = argv[2];
    int spec, tid = -1;
    if ((tid = get_tracee(env, spec_t)) >= 0)
        spec = TK_SPEC_TRACEE;
    else if (enif_is_identical(spec_t, am_all) ||
             enif_is_identical(spec_t, ports ? am_ports : am_processes))
        spec = TK_SPEC_ALL;
    else if (enif_is_identical(spec_t, am_existing) ||
             enif_is_identical(spec_t, ports ? am_existing_ports
                                             : am_existing_processes))
        spec = TK_SPEC_EXISTING;
    else if (enif_is_identical(spec_t, am_new) ||
             enif_is_identical(spec_t, ports ? am_new_ports
                                             : am_new_processes))
        spec = TK_SPEC_NEW;
    else
        spec = TK_SPEC_BAD;
    int how = enif_is_identical(argv[3], am_true)    ? 1
              : enif_is_identical(argv[3], am_false) ? 0
                                                      : -1;
    uint32_t mask;
    int bad = !parse_flags(env, argv[4], 0, &mask);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    long count = 0;
    int res = tk_ses_trace(r->m, sid, ports, spec, tid, how, mask, bad, ext,
                           &count);
    return unlock(r, result(env, res, enif_make_long(env, count)));
}

TK_MODEL_NIF(session_process_nif)
{
    (void)argc;
    return trace_op(env, argv, 0);
}

TK_MODEL_NIF(session_port_nif)
{
    (void)argc;
    return trace_op(env, argv, 1);
}

/* trace:function/4 and, with a fixed target, trace:send/3, trace:recv/3. */
static ERL_NIF_TERM function_op(ErlNifEnv *env, ERL_NIF_TERM model,
                                ERL_NIF_TERM sid_t, ERL_NIF_TERM target_t,
                                ERL_NIF_TERM ms_t, ERL_NIF_TERM flags_t)
{
    int sid;
    if (!get_int(env, sid_t, &sid))
        return enif_make_badarg(env);
    tk_ses_mfa pat;
    int target;
    if (enif_is_identical(target_t, am_on_load))
        target = TK_FT_ON_LOAD;
    else if (enif_is_identical(target_t, am_send))
        target = TK_FT_SEND;
    else if (enif_is_identical(target_t, am_receive))
        target = TK_FT_RECEIVE;
    else if (parse_mfa(env, target_t, &pat))
        target = TK_FT_MFA;
    else
        target = TK_FT_BAD;
    long ms = parse_ms(env, ms_t);
    uint32_t ff;
    int bad = !parse_flags(env, flags_t, 1, &ff);
    model_res *r = lock_model(env, model);
    if (!r)
        return enif_make_badarg(env);
    long n = 0;
    int res = tk_ses_function(r->m, sid, target,
                              target == TK_FT_MFA ? &pat : NULL, ms, ff, bad,
                              &n);
    return unlock(r, result(env, res, enif_make_long(env, n)));
}

TK_MODEL_NIF(session_function_nif)
{
    (void)argc;
    return function_op(env, argv[0], argv[1], argv[2], argv[3], argv[4]);
}

TK_MODEL_NIF(session_send_nif)
{
    (void)argc;
    return function_op(env, argv[0], argv[1], am_send, argv[2], argv[3]);
}

TK_MODEL_NIF(session_recv_nif)
{
    (void)argc;
    return function_op(env, argv[0], argv[1], am_receive, argv[2], argv[3]);
}

TK_MODEL_NIF(session_call_nif)
{
    (void)argc;
    int fid;
    if (!get_int(env, argv[1], &fid))
        return enif_make_badarg(env);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    return unlock(r, result(env, tk_ses_call(r->m, fid), am_ok));
}

TK_MODEL_NIF(session_info_nif)
{
    (void)argc;
    int sid;
    if (!get_int(env, argv[1], &sid))
        return enif_make_badarg(env);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    int id;
    int what = parse_what(env, r->m, argv[2], &id);
    if (what == TK_W_ALL)
        what = TK_W_BAD; /* trace:info(S, all, _) is no question */
    int key = enif_is_atom(env, argv[3]) ? key_of(argv[3]) : TK_K_OTHER;
    tk_ses_answer a;
    int res = tk_ses_info(r->m, sid, what, id, key, &a);
    ERL_NIF_TERM v = am_undefined;
    if (res == TK_SES_OK) {
        if (a.nitems > 0) {
            v = enif_make_list(env, 0);
            for (int i = a.nitems - 1; i >= 0; i--)
                v = enif_make_list_cell(
                    env,
                    enif_make_tuple2(env, key_atom(a.items[i].key, argv[3]),
                                     value_term(env, &a.items[i].value)),
                    v);
        } else {
            v = value_term(env, &a.value);
        }
        v = enif_make_tuple2(env, argv[3], v);
    }
    return unlock(r, result(env, res, v));
}

static ERL_NIF_TERM weak_ref(ErlNifEnv *env, const tk_ses_model *m, int sid)
{
    if (sid == TK_SES_LEGACY)
        return enif_make_tuple2(env, am_legacy, am_default);
    return enif_make_tuple2(env, (ERL_NIF_TERM)tk_ses_name(m, sid),
                            enif_make_long(env, tk_ses_weak_id(m, sid)));
}

TK_MODEL_NIF(session_session_info_nif)
{
    (void)argc;
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    int id, n = 0, sids[TK_SES_MAX_SESSIONS];
    int what = parse_what(env, r->m, argv[1], &id);
    int res = tk_ses_session_info(r->m, what, id, sids, TK_SES_MAX_SESSIONS,
                                  &n);
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (int i = n - 1; i >= 0; i--)
        list = enif_make_list_cell(env, weak_ref(env, r->m, sids[i]), list);
    return unlock(r, result(env, res, list));
}

TK_MODEL_NIF(session_union_nif)
{
    (void)argc;
    int tid = get_tracee(env, argv[1]);
    model_res *r = lock_model(env, argv[0]);
    if (!r)
        return enif_make_badarg(env);
    long u = tk_ses_union(r->m, tid);
    return unlock(r, u < 0 ? am_undefined : enif_make_long(env, u));
}

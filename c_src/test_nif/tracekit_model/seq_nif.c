/* seq_nif.c: the seq_trace model (tk_seq) as functions of tracekit_model.
 *
 * A world is a resource holding a tk_seq_world and the terms the model
 * treats as numbers: process names (any term, typically the pids of the
 * processes a test runs for real), labels (interned by exact equality,
 * label 0 is the integer 0) and message contents. */
#include "model_nif.h"
#include "tk_mem.h"
#include "tk_seq.h"

#include <string.h>

typedef struct {
    ErlNifMutex *lock;
    tk_seq_world *w;
    ErlNifEnv *store; /* copies of all terms below */
    ERL_NIF_TERM *names;
    size_t nnames, capnames; /* index: model process id */
    ERL_NIF_TERM *labels;
    size_t nlabels, caplabels; /* index: label id */
    ERL_NIF_TERM *contents;
    size_t ncontents, capcontents; /* index: content id */
} world;

static ErlNifResourceType *world_type;

static ERL_NIF_TERM am_ok, am_true, am_false, am_none, am_accept, am_refuse,
    am_send, am_receive, am_print, am_timestamp, am_strict_monotonic_timestamp,
    am_monotonic_timestamp, am_label, am_serial, am_spawn, am_seq_trace,
    am_sequential_trace_token, am_EXIT, am_spawn_request, am_spawn_reply,
    am_no_process, am_dead_process, am_no_message, am_exists, am_enomem;

static void world_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    world *w = obj;
    tk_seq_world_free(w->w);
    if (w->store != NULL)
        enif_free_env(w->store);
    enif_free(w->names);
    enif_free(w->labels);
    enif_free(w->contents);
    if (w->lock != NULL)
        enif_mutex_destroy(w->lock);
}

int tk_model_seq_load(ErlNifEnv *env, ErlNifResourceFlags flags)
{
    /* The core's memory comes from the VM, as in the other libraries. */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    world_type = enif_open_resource_type(env, NULL, "tk_seq_world", world_dtor,
                                         flags, NULL);
    if (world_type == NULL)
        return -1;
#define ATOM(v, s) v = enif_make_atom(env, s)
    ATOM(am_ok, "ok");
    ATOM(am_true, "true");
    ATOM(am_false, "false");
    ATOM(am_none, "none");
    ATOM(am_accept, "accept");
    ATOM(am_refuse, "refuse");
    ATOM(am_send, "send");
    ATOM(am_receive, "receive");
    ATOM(am_print, "print");
    ATOM(am_timestamp, "timestamp");
    ATOM(am_strict_monotonic_timestamp, "strict_monotonic_timestamp");
    ATOM(am_monotonic_timestamp, "monotonic_timestamp");
    ATOM(am_label, "label");
    ATOM(am_serial, "serial");
    ATOM(am_spawn, "spawn");
    ATOM(am_seq_trace, "seq_trace");
    ATOM(am_sequential_trace_token, "sequential_trace_token");
    ATOM(am_EXIT, "EXIT");
    ATOM(am_spawn_request, "spawn_request");
    ATOM(am_spawn_reply, "spawn_reply");
    ATOM(am_no_process, "no_process");
    ATOM(am_dead_process, "dead_process");
    ATOM(am_no_message, "no_message");
    ATOM(am_exists, "already_exists");
    ATOM(am_enomem, "enomem");
#undef ATOM
    return 0;
}

/* ---- helpers ---------------------------------------------------------- */

static int push_term(ERL_NIF_TERM **arr, size_t *n, size_t *cap, ERL_NIF_TERM t)
{
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        ERL_NIF_TERM *a = enif_realloc(*arr, ncap * sizeof *a);
        if (a == NULL)
            return -1;
        *arr = a;
        *cap = ncap;
    }
    (*arr)[(*n)++] = t;
    return 0;
}

static ERL_NIF_TERM raise2(ErlNifEnv *env, ERL_NIF_TERM tag, ERL_NIF_TERM what)
{
    return enif_raise_exception(env, enif_make_tuple2(env, tag, what));
}

static ERL_NIF_TERM enomem(ErlNifEnv *env)
{
    return enif_raise_exception(env, am_enomem);
}

static int get_world(ErlNifEnv *env, ERL_NIF_TERM t, world **w)
{
    return enif_get_resource(env, t, world_type, (void **)w);
}

static int get_tracer(ERL_NIF_TERM t, tk_seq_tracer *tr)
{
    if (enif_is_identical(t, am_none))
        *tr = TK_SEQ_TRACER_NONE;
    else if (enif_is_identical(t, am_accept))
        *tr = TK_SEQ_TRACER_ACCEPT;
    else if (enif_is_identical(t, am_refuse))
        *tr = TK_SEQ_TRACER_REFUSE;
    else
        return 0;
    return 1;
}

/* The model process named `name`, or -1. */
static long find_name(const world *w, ERL_NIF_TERM name)
{
    for (size_t i = w->nnames; i-- > 0;)
        if (enif_is_identical(w->names[i], name))
            return (long)i;
    return -1;
}

/* Looks up the process of argv[i]; on failure *err gets the exception. */
static int proc_arg(ErlNifEnv *env, const world *w, ERL_NIF_TERM name,
                    uint32_t *id, ERL_NIF_TERM *err)
{
    long i = find_name(w, name);
    if (i < 0) {
        *err = raise2(env, am_no_process, name);
        return 0;
    }
    *id = (uint32_t)i;
    return 1;
}

static int intern_label(world *w, ERL_NIF_TERM label, uint32_t *id)
{
    for (size_t i = 0; i < w->nlabels; i++)
        if (enif_is_identical(w->labels[i], label)) {
            *id = (uint32_t)i;
            return 0;
        }
    if (push_term(&w->labels, &w->nlabels, &w->caplabels,
                  enif_make_copy(w->store, label)))
        return -1;
    *id = (uint32_t)(w->nlabels - 1);
    return 0;
}

static int store_content(world *w, ERL_NIF_TERM t, uint64_t *id)
{
    if (push_term(&w->contents, &w->ncontents, &w->capcontents,
                  enif_make_copy(w->store, t)))
        return -1;
    *id = w->ncontents - 1;
    return 0;
}

/* Turns a model result code into the exception the caller sees. */
static ERL_NIF_TERM fail(ErlNifEnv *env, int rc, ERL_NIF_TERM name)
{
    switch (rc) {
    case TK_SEQ_BADARG:
        return enif_make_badarg(env);
    case TK_SEQ_NOPROC:
        return raise2(env, am_dead_process, name);
    case TK_SEQ_NOMSG:
        return raise2(env, am_no_message, name);
    default:
        return enomem(env);
    }
}

static ERL_NIF_TERM small(ErlNifEnv *env, int64_t v)
{
    return enif_make_int64(env, v);
}

static ERL_NIF_TERM token_term(ErlNifEnv *env, const world *w,
                               const tk_seq_token *t)
{
    if (!t->present)
        return enif_make_list(env, 0);
    return enif_make_tuple5(env, enif_make_uint(env, t->flags),
                            enif_make_copy(env, w->labels[t->label]),
                            small(env, t->serial),
                            enif_make_copy(env, w->names[t->from]),
                            small(env, t->lastcnt));
}

static ERL_NIF_TERM msg_term(ErlNifEnv *env, const world *w,
                             tk_seq_msg_kind kind, uint64_t content,
                             uint32_t from)
{
    switch (kind) {
    case TK_SEQ_MSG_EXIT:
        return enif_make_tuple3(env, am_EXIT,
                                enif_make_copy(env, w->names[from]),
                                enif_make_copy(env, w->contents[content]));
    case TK_SEQ_MSG_SPAWN_REQUEST:
        return enif_make_tuple2(env, am_spawn_request,
                                enif_make_copy(env, w->names[content]));
    case TK_SEQ_MSG_SPAWN_REPLY:
        return enif_make_tuple2(env, am_spawn_reply,
                                enif_make_copy(env, w->names[content]));
    default:
        return enif_make_copy(env, w->contents[content]);
    }
}

static ERL_NIF_TERM event_term(ErlNifEnv *env, const world *w,
                               const tk_seq_event *e)
{
    static const ERL_NIF_TERM *kinds[] = {&am_send, &am_receive, &am_print};
    ERL_NIF_TERM to = e->to == TK_SEQ_NOBODY
                          ? enif_make_list(env, 0)
                          : enif_make_copy(env, w->names[e->to]);
    ERL_NIF_TERM info = enif_make_tuple5(
        env, *kinds[e->kind],
        enif_make_tuple2(env, small(env, e->lastcnt), small(env, e->serial)),
        enif_make_copy(env, w->names[e->from]), to,
        msg_term(env, w, e->msg_kind, e->content, e->msg_from));
    ERL_NIF_TERM label = enif_make_copy(env, w->labels[e->label]);
    switch (e->ts) {
    case TK_SEQ_TS_TIMESTAMP:
        return enif_make_tuple4(env, am_seq_trace, label, info, am_timestamp);
    case TK_SEQ_TS_STRICT_MONOTONIC:
        return enif_make_tuple4(env, am_seq_trace, label, info,
                                am_strict_monotonic_timestamp);
    case TK_SEQ_TS_MONOTONIC:
        return enif_make_tuple4(env, am_seq_trace, label, info,
                                am_monotonic_timestamp);
    default:
        return enif_make_tuple3(env, am_seq_trace, label, info);
    }
}

/* A flag atom's bit, or 0. */
static unsigned flag_of(ERL_NIF_TERM a)
{
    if (enif_is_identical(a, am_send))
        return TK_SEQ_SEND;
    if (enif_is_identical(a, am_receive))
        return TK_SEQ_RECEIVE;
    if (enif_is_identical(a, am_print))
        return TK_SEQ_PRINT;
    if (enif_is_identical(a, am_timestamp))
        return TK_SEQ_TIMESTAMP;
    if (enif_is_identical(a, am_strict_monotonic_timestamp))
        return TK_SEQ_STRICT_MONOTONIC;
    if (enif_is_identical(a, am_monotonic_timestamp))
        return TK_SEQ_MONOTONIC;
    return 0;
}

/* Every function below locks the world for its whole run. */
#define WITH_WORLD(env, term, w)                                            \
    world *w;                                                               \
    if (!get_world(env, term, &w))                                          \
        return enif_make_badarg(env);                                       \
    enif_mutex_lock(w->lock)

#define RETURN(w, v)                                                        \
    do {                                                                    \
        ERL_NIF_TERM ret_ = (v);                                            \
        enif_mutex_unlock(w->lock);                                         \
        return ret_;                                                        \
    } while (0)

#define PROC(env, w, term, id)                                              \
    uint32_t id;                                                            \
    do {                                                                    \
        ERL_NIF_TERM err_;                                                  \
        if (!proc_arg(env, w, term, &id, &err_))                            \
            RETURN(w, err_);                                                \
    } while (0)

/* ---- worlds ----------------------------------------------------------- */

TK_MODEL_NIF(seq_new_nif)
{
    (void)argc;
    tk_seq_tracer tr;
    if (!get_tracer(argv[0], &tr))
        return enif_make_badarg(env);
    world *w = enif_alloc_resource(world_type, sizeof *w);
    if (w == NULL)
        return enomem(env);
    memset(w, 0, sizeof *w);
    w->lock = enif_mutex_create("tk_seq_world");
    w->w = tk_seq_world_new(tr);
    w->store = enif_alloc_env();
    uint32_t zero;
    if (w->lock == NULL || w->w == NULL || w->store == NULL ||
        intern_label(w, enif_make_int(w->store, 0), &zero)) {
        enif_release_resource(w);
        return enomem(env);
    }
    ERL_NIF_TERM t = enif_make_resource(env, w);
    enif_release_resource(w);
    return t;
}

TK_MODEL_NIF(seq_set_tracer_nif)
{
    (void)argc;
    tk_seq_tracer tr;
    WITH_WORLD(env, argv[0], w);
    if (!get_tracer(argv[1], &tr))
        RETURN(w, enif_make_badarg(env));
    tk_seq_set_tracer(w->w, tr);
    RETURN(w, am_ok);
}

TK_MODEL_NIF(seq_add_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    if (find_name(w, argv[1]) >= 0)
        RETURN(w, raise2(env, am_exists, argv[1]));
    uint32_t id;
    if (tk_seq_proc_new(w->w, &id) != TK_SEQ_OK ||
        push_term(&w->names, &w->nnames, &w->capnames,
                  enif_make_copy(w->store, argv[1])))
        RETURN(w, enomem(env));
    RETURN(w, am_ok);
}

TK_MODEL_NIF(seq_counters_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    uint64_t clock, lastcnt;
    int rc = tk_seq_counters(w->w, id, &clock, &lastcnt);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, enif_make_tuple2(env, enif_make_uint64(env, clock),
                               enif_make_uint64(env, lastcnt)));
}

/* ---- set_token / get_token ------------------------------------------------ */

TK_MODEL_NIF(seq_set_token_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    ERL_NIF_TERM comp = argv[2], val = argv[3];
    unsigned flag = flag_of(comp);
    int rc;
    /* erts_seq_trace(): a flag with true or false; label with any term;
     * serial with {Small, Small}; sequential_trace_token with []; every
     * other combination is badarg. */
    if (flag != 0 && (enif_is_identical(val, am_true) ||
                      enif_is_identical(val, am_false))) {
        bool old;
        rc = tk_seq_set_flag(w->w, id, flag, enif_is_identical(val, am_true),
                             &old);
        if (rc != TK_SEQ_OK)
            RETURN(w, fail(env, rc, argv[1]));
        RETURN(w, old ? am_true : am_false);
    }
    if (enif_is_identical(comp, am_label)) {
        uint32_t label, old;
        if (intern_label(w, val, &label))
            RETURN(w, enomem(env));
        rc = tk_seq_set_label(w->w, id, label, &old);
        if (rc != TK_SEQ_OK)
            RETURN(w, fail(env, rc, argv[1]));
        RETURN(w, enif_make_copy(env, w->labels[old]));
    }
    if (enif_is_identical(comp, am_serial)) {
        const ERL_NIF_TERM *tp;
        int arity;
        ErlNifSInt64 prev, cur;
        if (!enif_get_tuple(env, val, &arity, &tp) || arity != 2 ||
            !enif_get_int64(env, tp[0], &prev) ||
            !enif_get_int64(env, tp[1], &cur))
            RETURN(w, enif_make_badarg(env)); /* not smalls either */
        int64_t op, oc;
        rc = tk_seq_set_serial(w->w, id, prev, cur, &op, &oc);
        if (rc != TK_SEQ_OK)
            RETURN(w, fail(env, rc, argv[1]));
        RETURN(w, enif_make_tuple2(env, small(env, op), small(env, oc)));
    }
    if (enif_is_identical(comp, am_sequential_trace_token) &&
        enif_is_empty_list(env, val)) {
        tk_seq_token old;
        rc = tk_seq_clear_token(w->w, id, &old);
        if (rc != TK_SEQ_OK)
            RETURN(w, fail(env, rc, argv[1]));
        RETURN(w, token_term(env, w, &old));
    }
    RETURN(w, enif_make_badarg(env));
}

/* set_token({Flags, Label, Serial, From, LastCnt}) with Flags reduced to
 * its six flag bits by the Erlang side. */
TK_MODEL_NIF(seq_set_token_fields_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    unsigned flags;
    uint32_t label;
    ErlNifSInt64 serial, lastcnt;
    if (!enif_get_uint(env, argv[2], &flags) || flags > TK_SEQ_ALL_FLAGS)
        RETURN(w, enif_make_badarg(env));
    if (intern_label(w, argv[3], &label))
        RETURN(w, enomem(env));
    /* Integers beyond 64 bits are not smalls: badarg after the label, as
     * tk_seq_set_token does for the others. */
    if (!enif_get_int64(env, argv[4], &serial) ||
        !enif_get_int64(env, argv[5], &lastcnt)) {
        int rc = tk_seq_set_label(w->w, id, label, NULL);
        RETURN(w, rc == TK_SEQ_OK ? enif_make_badarg(env)
                                  : fail(env, rc, argv[1]));
    }
    int rc = tk_seq_set_token(w->w, id, flags, label, serial, lastcnt);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, am_ok);
}

TK_MODEL_NIF(seq_get_token_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    tk_seq_token t;
    int rc = tk_seq_get_token(w->w, id, &t);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, token_term(env, w, &t));
}

TK_MODEL_NIF(seq_get_component_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    ERL_NIF_TERM comp = argv[2];
    unsigned c = flag_of(comp);
    if (c == 0) {
        if (enif_is_identical(comp, am_label))
            c = TK_SEQ_COMP_LABEL;
        else if (enif_is_identical(comp, am_serial))
            c = TK_SEQ_COMP_SERIAL;
        else if (enif_is_identical(comp, am_spawn))
            c = TK_SEQ_COMP_SPAWN;
        else
            RETURN(w, enif_make_badarg(env));
    }
    tk_seq_answer a;
    int rc = tk_seq_get_component(w->w, id, c, &a);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    ERL_NIF_TERM v;
    switch (a.kind) {
    case TK_SEQ_ANS_NIL:
        RETURN(w, enif_make_list(env, 0));
    case TK_SEQ_ANS_BOOL:
        v = a.flag ? am_true : am_false;
        break;
    case TK_SEQ_ANS_LABEL:
        v = enif_make_copy(env, w->labels[a.label]);
        break;
    default:
        v = enif_make_tuple2(env, small(env, a.lastcnt), small(env, a.serial));
        break;
    }
    RETURN(w, enif_make_tuple2(env, comp, v));
}

/* ---- events of the processes --------------------------------------------- */

/* print/1 (argc 3) and print/2 (argc 4); seq_trace:print/2 itself raises
 * badarg for an atom label before calling the BIF. Both answer ok. */
TK_MODEL_NIF(seq_print_nif)
{
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    uint32_t label;
    const uint32_t *lp = NULL;
    if (argc == 4) {
        if (enif_is_atom(env, argv[2]))
            RETURN(w, enif_make_badarg(env));
        if (intern_label(w, argv[2], &label))
            RETURN(w, enomem(env));
        lp = &label;
    }
    uint64_t info;
    bool passed;
    if (store_content(w, argv[argc - 1], &info))
        RETURN(w, enomem(env));
    int rc = tk_seq_print(w->w, id, lp, info, &passed);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, am_ok);
}

TK_MODEL_NIF(seq_send_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], from);
    PROC(env, w, argv[2], to);
    uint64_t content;
    uint32_t msg;
    if (store_content(w, argv[3], &content))
        RETURN(w, enomem(env));
    int rc = tk_seq_send(w->w, from, to, content, &msg);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, msg == 0 ? am_none : enif_make_uint(env, msg));
}

TK_MODEL_NIF(seq_deliver_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], to);
    uint64_t content;
    uint32_t msg;
    if (store_content(w, argv[2], &content))
        RETURN(w, enomem(env));
    int rc = tk_seq_deliver_untokened(w->w, to, content, &msg);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, enif_make_uint(env, msg));
}

static ERL_NIF_TERM queued_msg_term(ErlNifEnv *env, const world *w,
                                    uint32_t msg)
{
    tk_seq_msg_kind kind;
    uint64_t content;
    uint32_t from;
    (void)tk_seq_msg_info(w->w, msg, &kind, &content, &from, NULL, NULL);
    return msg_term(env, w, kind, content, from);
}

TK_MODEL_NIF(seq_receive_nif)
{
    (void)argc;
    unsigned msg;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    if (!enif_get_uint(env, argv[2], &msg))
        RETURN(w, enif_make_badarg(env));
    int rc = tk_seq_receive(w->w, id, msg);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[2]));
    RETURN(w, queued_msg_term(env, w, msg));
}

TK_MODEL_NIF(seq_queue_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    long n = tk_seq_queue(w->w, id, NULL, 0);
    if (n < 0)
        RETURN(w, fail(env, (int)n, argv[1]));
    uint32_t *ids = enif_alloc(((size_t)n + 1) * sizeof *ids);
    if (ids == NULL)
        RETURN(w, enomem(env));
    (void)tk_seq_queue(w->w, id, ids, (size_t)n);
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (long i = n; i-- > 0;)
        list = enif_make_list_cell(
            env,
            enif_make_tuple2(env, enif_make_uint(env, ids[i]),
                             queued_msg_term(env, w, ids[i])),
            list);
    enif_free(ids);
    RETURN(w, list);
}

TK_MODEL_NIF(seq_spawn_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], parent);
    if (find_name(w, argv[2]) >= 0)
        RETURN(w, raise2(env, am_exists, argv[2]));
    bool link = enif_is_identical(argv[3], am_true);
    if (!link && !enif_is_identical(argv[3], am_false))
        RETURN(w, enif_make_badarg(env));
    if (!tk_seq_proc_alive(w->w, parent))
        RETURN(w, fail(env, TK_SEQ_NOPROC, argv[1]));
    /* The child's name first: the model refers to it in its events. */
    if (push_term(&w->names, &w->nnames, &w->capnames,
                  enif_make_copy(w->store, argv[2])))
        RETURN(w, enomem(env));
    uint32_t child;
    int rc = tk_seq_spawn(w->w, parent, link, &child);
    if (rc != TK_SEQ_OK) {
        w->nnames--;
        RETURN(w, fail(env, rc, argv[1]));
    }
    RETURN(w, am_ok);
}

TK_MODEL_NIF(seq_link_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], a);
    PROC(env, w, argv[2], b);
    int rc = tk_seq_link(w->w, a, b);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, am_ok);
}

TK_MODEL_NIF(seq_exit_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    PROC(env, w, argv[1], id);
    uint64_t reason;
    if (store_content(w, argv[2], &reason))
        RETURN(w, enomem(env));
    int rc = tk_seq_exit(w->w, id, reason);
    if (rc != TK_SEQ_OK)
        RETURN(w, fail(env, rc, argv[1]));
    RETURN(w, am_ok);
}

TK_MODEL_NIF(seq_reset_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    tk_seq_reset(w->w);
    RETURN(w, am_true);
}

TK_MODEL_NIF(seq_events_nif)
{
    (void)argc;
    WITH_WORLD(env, argv[0], w);
    size_t n;
    const tk_seq_event *e = tk_seq_events(w->w, &n);
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (size_t i = n; i-- > 0;)
        list = enif_make_list_cell(env, event_term(env, w, &e[i]), list);
    tk_seq_events_clear(w->w);
    RETURN(w, list);
}

/* ---- outside the model ----------------------------------------------------- */

/* enif_send without a message environment: the message carries no token
 * information, so the caller's serial does not advance and the receiver's
 * token is left as it is when the message is received. */
TK_MODEL_NIF(seq_send_untokened_nif)
{
    (void)argc;
    ErlNifPid pid;
    if (!enif_get_local_pid(env, argv[0], &pid))
        return enif_make_badarg(env);
    return enif_send(env, &pid, NULL, argv[1]) ? am_ok : am_false;
}

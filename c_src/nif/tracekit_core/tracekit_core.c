/* tracekit_core: tracekit's NIFs that are not tracer callbacks.
 *
 *   seq_order([{Kind, Label, LastCnt, Serial, From, To, Msg, SpawnReply}])
 *       -> [{Index, Match}]
 *
 * The causal order of seq_trace events (tk_seqorder.h), for
 * tracekit_seq:order/1. Terms come interned as numbers (To is -1 for a
 * print); the answer gives the input positions in causal order, each with
 * the position of its matched send or receive (-1: none), 0-based.
 *
 *   file_open(Path) -> {ok, Reader} | {error, Posix | not_a_trace}
 *   file_next(Reader) -> {Type, Payload, Offset} | eof | {corrupt, Offset}
 *   file_resync(Reader) -> {ok, Offset} | eof
 *   file_close(Reader) -> ok
 *   file_dict(Reader, Payload) -> ok | {error, bad_chunk | closed}
 *   file_events(Reader, Payload, {RefStamp, RefSystem, Hz})
 *       -> {[{Time, Stamp, Event}], Undecodable}
 *
 * Trace files (FORMAT.md), chunk by chunk, for tracekit_file's readers:
 * the chunk framing and checks are tk_tfile's. The file's dictionary lives
 * in the reader: file_dict appends a dictionary chunk's entries, so that
 * a file of many dictionary chunks costs time linear in its entries (a
 * dictionary rebuilt per chunk, or handed to every events chunk, would
 * cost their product). An events chunk is decoded here with it; each
 * record's time (ns) is its stamp on the line of its machine's reference
 * anchor and rate (tk_stamp_time).
 */
#include <erl_nif.h>
#include <errno.h>
#include <string.h>

#include "tk_codec.h"
#include "tk_mem.h"
#include "tk_niflib.h"
#include "tk_seqorder.h"
#include "tk_posix.h"
#include "tk_tfile.h"

#define NIF_ATOMS(X)                                                        \
    X(send) X(receive) X(print) X(true) X(false) X(enomem) X(ok) X(error)   \
    X(eof) X(corrupt) X(not_a_trace) X(bad_chunk) X(closed)

typedef struct {
    ErlNifResourceType *reader_type;
    tk_codec codec;
    NIF_ATOMS(TK_ATOM_FIELD)
} nif_lib;

/* A trace file open for reading; calls on one reader are serialised. Its
 * dictionary so far: entries 0 .. ndict-1, terms of denv (the reader's
 * own environment, allocated with the first entry). */
typedef struct {
    ErlNifMutex *lock;
    tk_tread r;
    bool open;
    ErlNifEnv *denv;
    ERL_NIF_TERM *dict;
    size_t ndict, dcap;
} reader;

static void dict_free(reader *rd)
{
    if (rd->denv != NULL)
        enif_free_env(rd->denv);
    enif_free(rd->dict);
    rd->denv = NULL;
    rd->dict = NULL;
    rd->ndict = rd->dcap = 0;
}

static void reader_dtor(ErlNifEnv *env, void *obj)
{
    (void)env;
    reader *rd = obj;
    if (rd->open)
        tk_tread_close(&rd->r);
    dict_free(rd);
    if (rd->lock != NULL)
        enif_mutex_destroy(rd->lock);
}

static int open_lib(ErlNifEnv *env, void **priv, ErlNifResourceFlags flags,
                    void *old_priv)
{
    (void)old_priv;
    nif_lib *lib = enif_alloc(sizeof *lib);
    if (lib == NULL)
        return -1;
    lib->reader_type = enif_open_resource_type(env, NULL, "tracekit_file_reader",
                                               reader_dtor, flags, NULL);
    if (lib->reader_type == NULL || tk_codec_init(&lib->codec, env) != 0) {
        enif_free(lib);
        return -1;
    }
    NIF_ATOMS(TK_ATOM_INIT)
    /* The library's memory is VM memory: it shows in erlang:memory(). */
    tk_mem_alloc = enif_alloc;
    tk_mem_free = enif_free;
    *priv = lib;
    return 0;
}

TK_NIF_LIFE(open_lib)

/* One input tuple into an event; 0 if it is malformed. */
static int get_event(ErlNifEnv *env, const nif_lib *lib, ERL_NIF_TERM t,
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
    const nif_lib *lib = enif_priv_data(env);
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

/* ---- trace files --------------------------------------------------------------- */

static reader *get_reader(const nif_lib *lib, ErlNifEnv *env, ERL_NIF_TERM t)
{
    reader *rd;
    return enif_get_resource(env, t, lib->reader_type, (void **)&rd) ? rd : NULL;
}

static ERL_NIF_TERM error2(ErlNifEnv *env, const nif_lib *lib, ERL_NIF_TERM why)
{
    return enif_make_tuple2(env, lib->am_error, why);
}

/* file_open(Path :: binary()) */
static ERL_NIF_TERM file_open_nif(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[])
{
    (void)argc;
    const nif_lib *lib = enif_priv_data(env);
    ErlNifBinary bin;
    char path[4096];
    if (!enif_inspect_binary(env, argv[0], &bin) || bin.size >= sizeof path ||
        memchr(bin.data, 0, bin.size) != NULL)
        return enif_make_badarg(env);
    memcpy(path, bin.data, bin.size);
    path[bin.size] = 0;
    reader *rd = enif_alloc_resource(lib->reader_type, sizeof *rd);
    if (rd == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    memset(rd, 0, sizeof *rd);
    rd->lock = enif_mutex_create("tracekit_file_reader");
    int rc = rd->lock != NULL ? tk_tread_open(&rd->r, path) : -1;
    ERL_NIF_TERM ret;
    if (rc == 0) {
        rd->open = true;
        ret = enif_make_tuple2(env, lib->am_ok, enif_make_resource(env, rd));
    } else if (rc == -2) {
        ret = error2(env, lib, lib->am_not_a_trace);
    } else {
        char name[32];
        ret = error2(env, lib, enif_make_atom(env, tk_posix_name(rd->lock ? errno : ENOMEM, name, sizeof name)));
    }
    enif_release_resource(rd);
    return ret;
}

/* file_next(Reader) */
static ERL_NIF_TERM file_next_nif(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[])
{
    (void)argc;
    const nif_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    if (rd == NULL)
        return enif_make_badarg(env);
    enif_mutex_lock(rd->lock);
    unsigned type;
    const unsigned char *p;
    size_t len;
    ERL_NIF_TERM ret;
    uint64_t at = rd->r.off;
    int rc = rd->open ? tk_tread_next(&rd->r, &type, &p, &len) : TK_TREAD_EOF;
    if (rc == TK_TREAD_CHUNK) {
        ERL_NIF_TERM bin;
        unsigned char *data = enif_make_new_binary(env, len, &bin);
        if (data == NULL) {
            enif_mutex_unlock(rd->lock);
            return enif_raise_exception(env, lib->am_enomem);
        }
        memcpy(data, p, len);
        ret = enif_make_tuple3(env, enif_make_uint(env, type), bin,
                               enif_make_uint64(env, at));
    } else if (rc == TK_TREAD_EOF) {
        ret = lib->am_eof;
    } else {
        ret = enif_make_tuple2(env, lib->am_corrupt, enif_make_uint64(env, rd->r.off));
    }
    enif_mutex_unlock(rd->lock);
    return ret;
}

/* file_resync(Reader) */
static ERL_NIF_TERM file_resync_nif(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[])
{
    (void)argc;
    const nif_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    if (rd == NULL)
        return enif_make_badarg(env);
    enif_mutex_lock(rd->lock);
    ERL_NIF_TERM ret = rd->open && tk_tread_resync(&rd->r)
                           ? enif_make_tuple2(env, lib->am_ok,
                                              enif_make_uint64(env, rd->r.off))
                           : lib->am_eof;
    enif_mutex_unlock(rd->lock);
    return ret;
}

/* file_close(Reader) */
static ERL_NIF_TERM file_close_nif(ErlNifEnv *env, int argc,
                                   const ERL_NIF_TERM argv[])
{
    (void)argc;
    const nif_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    if (rd == NULL)
        return enif_make_badarg(env);
    enif_mutex_lock(rd->lock);
    if (rd->open)
        tk_tread_close(&rd->r);
    rd->open = false;
    dict_free(rd);
    enif_mutex_unlock(rd->lock);
    return lib->am_ok;
}

/* Room for one more dictionary entry. 0, or -1 when out of memory. */
static int dict_reserve(reader *rd)
{
    if (rd->ndict < rd->dcap)
        return 0;
    size_t cap = rd->dcap ? 2 * rd->dcap : 256;
    ERL_NIF_TERM *d = enif_realloc(rd->dict, cap * sizeof *d);
    if (d == NULL)
        return -1;
    rd->dict = d;
    rd->dcap = cap;
    return 0;
}

/* A dictionary entry: one term in the external term format, whole. A
 * compressed one is refused: the writer never compresses, and a few bytes
 * of it could declare a term of gigabytes. */
static int dict_entry(ErlNifEnv *env, const unsigned char *ext, size_t len,
                      ERL_NIF_TERM *out)
{
    return len >= 2 && ext[0] == 131 && ext[1] != 80 &&
           enif_binary_to_term(env, ext, len, out, 0) == len;
}

/* Appends a dictionary chunk's entries, all or none. Under the lock. */
static ERL_NIF_TERM dict_append(ErlNifEnv *env, const nif_lib *lib, reader *rd,
                                const ErlNifBinary *bin)
{
    tk_dict_iter it;
    if (!rd->open)
        return error2(env, lib, lib->am_closed);
    /* The chunk's numbers must follow the entries so far (FORMAT.md). */
    if (tk_dict_begin(&it, bin->data, bin->size) != 0 || it.first != rd->ndict)
        return error2(env, lib, lib->am_bad_chunk);
    if (rd->denv == NULL && (rd->denv = enif_alloc_env()) == NULL)
        return enif_raise_exception(env, lib->am_enomem);
    /* Decoded into the caller's environment first, kept in the reader only
     * when every entry decodes: a bad chunk leaves nothing behind. */
    size_t n0 = rd->ndict;
    const unsigned char *ext;
    size_t len;
    int rc;
    while ((rc = tk_dict_next(&it, &ext, &len)) == 1) {
        ERL_NIF_TERM t;
        /* Beyond 2^32 entries, no record could name the next one. */
        if (rd->ndict > UINT32_MAX || !dict_entry(env, ext, len, &t)) {
            rc = -1;
            break;
        }
        if (dict_reserve(rd) != 0) {
            rd->ndict = n0;
            return enif_raise_exception(env, lib->am_enomem);
        }
        rd->dict[rd->ndict++] = t;
    }
    if (rc != 0) {
        rd->ndict = n0;
        return error2(env, lib, lib->am_bad_chunk);
    }
    for (size_t i = n0; i < rd->ndict; i++)
        rd->dict[i] = enif_make_copy(rd->denv, rd->dict[i]);
    return lib->am_ok;
}

/* file_dict(Reader, Payload) */
static ERL_NIF_TERM file_dict_nif(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[])
{
    (void)argc;
    const nif_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    ErlNifBinary bin;
    if (rd == NULL || !enif_inspect_binary(env, argv[1], &bin))
        return enif_make_badarg(env);
    enif_mutex_lock(rd->lock);
    ERL_NIF_TERM ret = dict_append(env, lib, rd, &bin);
    enif_mutex_unlock(rd->lock);
    return ret;
}

/* file_events(Reader, Payload, {RefStamp, RefSystem, Hz}) */
static ERL_NIF_TERM file_events_nif(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[])
{
    (void)argc;
    const nif_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    ErlNifBinary bin;
    const ERL_NIF_TERM *ref;
    int three;
    ErlNifUInt64 rs, rsys, hz;
    if (rd == NULL || !enif_inspect_binary(env, argv[1], &bin) ||
        !enif_get_tuple(env, argv[2], &three, &ref) || three != 3 ||
        !enif_get_uint64(env, ref[0], &rs) || !enif_get_uint64(env, ref[1], &rsys) ||
        !enif_get_uint64(env, ref[2], &hz))
        return enif_make_badarg(env);
    tk_events_iter it;
    if (tk_events_begin(&it, bin.data, bin.size) != 0)
        return error2(env, lib, lib->am_bad_chunk);
    /* The dictionary cannot change while the chunk is decoded. */
    enif_mutex_lock(rd->lock);
    tk_anchor anchor = {rs, rsys};
    ERL_NIF_TERM list = enif_make_list(env, 0), ev;
    uint64_t stamp, bad = 0;
    const unsigned char *rec;
    size_t len;
    int rc;
    while ((rc = tk_events_next(&it, &stamp, &rec, &len)) == 1) {
        if (!tk_dec_file_event(env, &lib->codec, rec, len, rd->dict, rd->ndict, &ev)) {
            bad++;
            continue;
        }
        list = enif_make_list_cell(
            env,
            enif_make_tuple3(env, enif_make_int64(env, tk_stamp_time(anchor, hz, stamp)),
                             enif_make_uint64(env, stamp), ev),
            list);
    }
    enif_mutex_unlock(rd->lock);
    if (rc != 0)
        return error2(env, lib, lib->am_bad_chunk);
    ERL_NIF_TERM events;
    enif_make_reverse_list(env, list, &events);
    return enif_make_tuple2(env, events, enif_make_uint64(env, bad));
}

static ErlNifFunc funcs[] = {
    {"seq_order", 1, seq_order_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"file_open", 1, file_open_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"file_next", 1, file_next_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"file_resync", 1, file_resync_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"file_close", 1, file_close_nif, ERL_NIF_DIRTY_JOB_IO_BOUND},
    {"file_dict", 2, file_dict_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
    {"file_events", 3, file_events_nif, ERL_NIF_DIRTY_JOB_CPU_BOUND},
};

ERL_NIF_INIT(tracekit_core, funcs, load, NULL, upgrade, unload)

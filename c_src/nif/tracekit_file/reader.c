/* reader.c: trace files (FORMAT.md) read chunk by chunk, for
 * tracekit_file_reader (the Erlang side of reading, which opens the files
 * of a source, reads their headers and merges their events):
 *
 *   reader_open(Path) -> {ok, Reader} | {error, Posix | not_a_trace | cut}
 *   reader_next(Reader) -> {Kind, Payload, Offset, Next} | {eof, Offset}
 *                          | {corrupt, Offset}
 *       Kind: header | dict | events | end | later (a type of a later
 *       version) | bad_chunk (type 0); a lost chunk gives
 *       {lost, Count, Offset, Next} (bad_chunk if its payload is not one)
 *   reader_resync(Reader) -> {ok, Offset} | eof
 *   reader_close(Reader) -> ok
 *   reader_dict(Reader, Payload) -> ok | {error, bad_chunk | closed}
 *   reader_events(Reader, Payload, {RefStamp, RefSystem, Hz})
 *       -> {[{Time, Stamp, Event}], Undecodable}
 *
 * The chunk framing and checks are tk_tfile's, and so are the chunk types
 * and the lost chunk's layout: the Erlang side knows chunks by kind. The file's dictionary lives
 * in the reader: reader_dict appends a dictionary chunk's entries, so that
 * a file of many dictionary chunks costs time linear in its entries (a
 * dictionary rebuilt per chunk, or handed to every events chunk, would
 * cost their product). An events chunk is decoded here with it; each
 * record's time (ns) is its stamp on the line of its machine's reference
 * anchor and rate (tk_stamp_time).
 */
#include <errno.h>
#include <string.h>

#include "file.h"
#include "tk_ext.h"
#include "tk_posix.h"

/* A trace file open for reading; calls on one reader are serialised. Its
 * dictionary so far: entries 0 .. ndict-1, terms of denv (the reader's
 * own environment, allocated with the first entry), and their lengths in
 * the file. */
typedef struct {
    ErlNifMutex *lock;
    tk_tread r;
    bool open;
    ErlNifEnv *denv;
    ERL_NIF_TERM *dict;
    uint32_t *lens;
    size_t ndict, dcap;
} reader;

static void dict_free(reader *rd)
{
    if (rd->denv != NULL)
        enif_free_env(rd->denv);
    enif_free(rd->dict);
    enif_free(rd->lens);
    rd->denv = NULL;
    rd->dict = NULL;
    rd->lens = NULL;
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

int file_reader_init(file_lib *lib, ErlNifEnv *env, ErlNifResourceFlags flags)
{
    lib->reader_type = enif_open_resource_type(env, NULL, "tracekit_file_reader",
                                               reader_dtor, flags, NULL);
    return lib->reader_type != NULL ? 0 : -1;
}

static reader *get_reader(const file_lib *lib, ErlNifEnv *env, ERL_NIF_TERM t)
{
    reader *rd;
    return enif_get_resource(env, t, lib->reader_type, (void **)&rd) ? rd : NULL;
}

static ERL_NIF_TERM error2(ErlNifEnv *env, const file_lib *lib, ERL_NIF_TERM why)
{
    return enif_make_tuple2(env, lib->am_error, why);
}

/* reader_open(Path :: binary()) */
ERL_NIF_TERM file_reader_open_nif(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[])
{
    (void)argc;
    const file_lib *lib = enif_priv_data(env);
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
        ret = enif_make_tuple2(env, lib->rec.am_ok, enif_make_resource(env, rd));
    } else if (rc == -2) {
        ret = error2(env, lib, lib->am_not_a_trace);
    } else if (rc == -3) {
        ret = error2(env, lib, lib->am_cut);
    } else {
        char name[32];
        ret = error2(env, lib, enif_make_atom(env, tk_posix_name(rd->lock ? errno : ENOMEM, name, sizeof name)));
    }
    enif_release_resource(rd);
    return ret;
}

/* A chunk that checked out as the Erlang side takes it:
 * {Kind, Payload, At, Next} (lost: {lost, Count, At, Next}). */
static ERL_NIF_TERM chunk_term(ErlNifEnv *env, const file_lib *lib, unsigned type,
                               ERL_NIF_TERM bin, const unsigned char *p, size_t len,
                               uint64_t at, uint64_t next)
{
    ERL_NIF_TERM kind, data = bin;
    uint64_t count, stamp;
    switch (type) {
    case TK_CHUNK_HEADER: kind = lib->am_header; break;
    case TK_CHUNK_DICT: kind = lib->am_dict; break;
    case TK_CHUNK_EVENTS: kind = lib->am_events; break;
    case TK_CHUNK_END: kind = lib->am_end; break;
    case TK_CHUNK_LOST:
        if (tk_lost_read(p, len, &count, &stamp) == 0) {
            kind = lib->am_lost;
            data = enif_make_uint64(env, count);
        } else {
            kind = lib->am_bad_chunk;
        }
        break;
    default: kind = type > TK_CHUNK_END ? lib->am_later : lib->am_bad_chunk;
    }
    return enif_make_tuple4(env, kind, data, enif_make_uint64(env, at),
                            enif_make_uint64(env, next));
}

/* reader_next(Reader) */
ERL_NIF_TERM file_reader_next_nif(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[])
{
    (void)argc;
    const file_lib *lib = enif_priv_data(env);
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
        ret = chunk_term(env, lib, type, bin, p, len, at, rd->r.off);
    } else if (rc == TK_TREAD_EOF) {
        ret = enif_make_tuple2(env, lib->am_eof, enif_make_uint64(env, at));
    } else {
        ret = enif_make_tuple2(env, lib->am_corrupt, enif_make_uint64(env, rd->r.off));
    }
    enif_mutex_unlock(rd->lock);
    return ret;
}

/* reader_resync(Reader) */
ERL_NIF_TERM file_reader_resync_nif(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[])
{
    (void)argc;
    const file_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    if (rd == NULL)
        return enif_make_badarg(env);
    enif_mutex_lock(rd->lock);
    ERL_NIF_TERM ret = rd->open && tk_tread_resync(&rd->r)
                           ? enif_make_tuple2(env, lib->rec.am_ok,
                                              enif_make_uint64(env, rd->r.off))
                           : lib->am_eof;
    enif_mutex_unlock(rd->lock);
    return ret;
}

/* reader_close(Reader) */
ERL_NIF_TERM file_reader_close_nif(ErlNifEnv *env, int argc,
                                   const ERL_NIF_TERM argv[])
{
    (void)argc;
    const file_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    if (rd == NULL)
        return enif_make_badarg(env);
    enif_mutex_lock(rd->lock);
    if (rd->open)
        tk_tread_close(&rd->r);
    rd->open = false;
    dict_free(rd);
    enif_mutex_unlock(rd->lock);
    return lib->rec.am_ok;
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
    uint32_t *l = enif_realloc(rd->lens, cap * sizeof *l);
    if (l == NULL)
        return -1;
    rd->lens = l;
    rd->dcap = cap;
    return 0;
}

/* A dictionary entry: one term in the external term format, whole, of a
 * kind the writer makes (tk_ext.h: an atom, a local pid or port, []; so
 * that nothing a reference names is bigger than TK_EXT_ENTRY_MAX, and a
 * compressed term, whose few bytes could declare gigabytes, is refused). */
static int dict_entry(ErlNifEnv *env, const unsigned char *ext, size_t len,
                      ERL_NIF_TERM *out)
{
    return tk_ext_entry_ok(tk_ext_check(ext, len)) &&
           enif_binary_to_term(env, ext, len, out, 0) == len;
}

/* Appends a dictionary chunk's entries, all or none. Under the lock. */
static ERL_NIF_TERM dict_append(ErlNifEnv *env, const file_lib *lib, reader *rd,
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
        rd->lens[rd->ndict] = (uint32_t)len;
        rd->dict[rd->ndict++] = t;
    }
    if (rc != 0) {
        rd->ndict = n0;
        return error2(env, lib, lib->am_bad_chunk);
    }
    for (size_t i = n0; i < rd->ndict; i++)
        rd->dict[i] = enif_make_copy(rd->denv, rd->dict[i]);
    return lib->rec.am_ok;
}

/* reader_dict(Reader, Payload) */
ERL_NIF_TERM file_reader_dict_nif(ErlNifEnv *env, int argc,
                                  const ERL_NIF_TERM argv[])
{
    (void)argc;
    const file_lib *lib = enif_priv_data(env);
    reader *rd = get_reader(lib, env, argv[0]);
    ErlNifBinary bin;
    if (rd == NULL || !enif_inspect_binary(env, argv[1], &bin))
        return enif_make_badarg(env);
    enif_mutex_lock(rd->lock);
    ERL_NIF_TERM ret = dict_append(env, lib, rd, &bin);
    enif_mutex_unlock(rd->lock);
    return ret;
}

/* reader_events(Reader, Payload, {RefStamp, RefSystem, Hz}) */
ERL_NIF_TERM file_reader_events_nif(ErlNifEnv *env, int argc,
                                    const ERL_NIF_TERM argv[])
{
    (void)argc;
    const file_lib *lib = enif_priv_data(env);
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
    uint64_t stamp, bad = 0, expand = 0, refs;
    const unsigned char *rec;
    size_t len;
    int rc;
    while ((rc = tk_events_next(&it, &stamp, &rec, &len)) == 1) {
        /* The readers' one rule (FORMAT.md): the records, and what their
         * references stand for, within the bounds. */
        if (!tk_event_file_check(rec, len, rd->lens, rd->ndict, &refs)) {
            bad++;
            continue;
        }
        if ((expand += refs) > TK_TFILE_EXPAND_MAX) {
            rc = -1;
            break;
        }
        if (!tk_dec_file_event(env, &lib->rec.codec, rec, len, rd->dict, rd->ndict, &ev)) {
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


/* tk_dec.c: event records back into terms, in the consumer (drain). The
 * event tuple is built exactly as OTP's process tracer builds its messages
 * (erl_tracer's trace callback), so a drained event equals the message a
 * process tracer would have received for the same event.
 *
 * tk_event_parse (plain C) checks the whole record first, so the builders
 * below only meet well-formed terms; their recursion is bounded by the
 * nesting rule of tk_term.h.
 */
#include <string.h>

#include "tk_codec.h"

typedef struct {
    ErlNifEnv *env;
    const tk_codec *c;
    tk_rbuf r;
    /* A trace file's dictionary, or NULL: terms of another environment
     * (the reader's), copied into env where a record uses them. */
    const ERL_NIF_TERM *dict;
    size_t ndict;
    /* A record of a trace file: it comes from outside this VM, so it may
     * hold no VM words (TK_T_IMM, ATOM, PID), which would be taken for
     * terms as they are. */
    bool file;
} dec;

static int dec_value(dec *d, ERL_NIF_TERM *out);

/* n terms into an array (on the stack when small). */
static int dec_array(dec *d, uint64_t n, ERL_NIF_TERM *small, size_t small_n,
                     ERL_NIF_TERM **arr)
{
    *arr = small;
    if (n > small_n) {
        if (!tk_count_ok(&d->r, n)) /* each term is at least one byte */
            return 0;
        *arr = enif_alloc(n * sizeof(ERL_NIF_TERM));
        if (*arr == NULL)
            return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if (!dec_value(d, &(*arr)[i])) {
            if (*arr != small)
                enif_free(*arr);
            return 0;
        }
    return 1;
}

static int dec_list(dec *d, ERL_NIF_TERM *out)
{
    uint32_t n;
    ERL_NIF_TERM small[16], *arr, tail;
    if (!tk_get_len(&d->r, &n) || !dec_array(d, n, small, 16, &arr))
        return 0;
    int ok = dec_value(d, &tail);
    if (ok) {
        for (uint32_t i = n; i > 0; i--)
            tail = enif_make_list_cell(d->env, arr[i - 1], tail);
        *out = tail;
    }
    if (arr != small)
        enif_free(arr);
    return ok;
}

static int dec_tuple(dec *d, ERL_NIF_TERM *out)
{
    uint32_t n;
    ERL_NIF_TERM small[16], *arr;
    if (!tk_get_len(&d->r, &n) || !dec_array(d, n, small, 16, &arr))
        return 0;
    *out = enif_make_tuple_from_array(d->env, arr, n);
    if (arr != small)
        enif_free(arr);
    return 1;
}

static int dec_map(dec *d, ERL_NIF_TERM *out)
{
    uint32_t n;
    ERL_NIF_TERM small[16], *arr;
    if (!tk_get_len(&d->r, &n) || !dec_array(d, 2 * (uint64_t)n, small, 16, &arr))
        return 0;
    /* Keys and values alternate. */
    ERL_NIF_TERM map = enif_make_new_map(d->env);
    int ok = 1;
    for (uint32_t i = 0; i < n && ok; i++)
        ok = enif_make_map_put(d->env, map, arr[2 * i], arr[2 * i + 1], &map);
    if (arr != small)
        enif_free(arr);
    *out = map;
    return ok;
}

/* TK_T_BIN, TK_T_BINCUT ({'...', Prefix, Total}). */
static int dec_binary(dec *d, bool cut, ERL_NIF_TERM *out)
{
    uint32_t n;
    uint64_t total = 0;
    if (!tk_get_len(&d->r, &n) || (cut && !tk_get_varint(&d->r, &total)) ||
        (size_t)(d->r.end - d->r.p) < n)
        return 0;
    unsigned char *data = enif_make_new_binary(d->env, n, out);
    if (data == NULL)
        return 0;
    memcpy(data, d->r.p, n);
    d->r.p += n;
    if (cut)
        *out = enif_make_tuple3(d->env, d->c->am_ellipsis, *out,
                                enif_make_uint64(d->env, total));
    return 1;
}

static int dec_ext(dec *d, ERL_NIF_TERM *out)
{
    uint32_t n;
    if (!tk_get_len(&d->r, &n) || (size_t)(d->r.end - d->r.p) < n)
        return 0;
    size_t used = enif_binary_to_term(d->env, d->r.p, n, out, 0);
    d->r.p += n;
    return used == n;
}

/* A fun kept by name: {'...', fun, Name}. */
static int dec_fun(dec *d, ERL_NIF_TERM *out)
{
    ERL_NIF_TERM name;
    if (!dec_binary(d, false, &name))
        return 0;
    *out = enif_make_tuple3(d->env, d->c->am_ellipsis, d->c->am_fun, name);
    return 1;
}

static int dec_value(dec *d, ERL_NIF_TERM *out)
{
    unsigned tag;
    uint64_t w;
    int64_t v;
    if (!tk_get_u8(&d->r, &tag))
        return 0;
    switch (tag) {
    case TK_T_NIL:
        *out = enif_make_list(d->env, 0);
        return 1;
    case TK_T_IMM:
        /* Immediates are valid in every environment: the word is the term. */
        if (d->file || !tk_get_svarint(&d->r, &v))
            return 0;
        *out = (ERL_NIF_TERM)tk_imm_word(v);
        return 1;
    case TK_T_ATOM:
    case TK_T_PID:
        if (d->file || !tk_get_varint(&d->r, &w) ||
            !(tag == TK_T_ATOM ? tk_atom_ok(w) : tk_pid_ok(w)))
            return 0;
        *out = (ERL_NIF_TERM)(tag == TK_T_ATOM ? tk_atom_word(w) : tk_pid_word(w));
        return 1;
    case TK_T_NOW: {
        /* Only a ring's records hold it: a file holds the tuple. */
        ERL_NIF_TERM part[3];
        for (int i = 0; i < 3; i++) {
            if (d->file || !tk_get_varint(&d->r, &w) || !tk_now_ok(w))
                return 0;
            part[i] = enif_make_uint64(d->env, (ErlNifUInt64)w);
        }
        *out = enif_make_tuple_from_array(d->env, part, 3);
        return 1;
    }
    case TK_T_DICT: {
        uint32_t i;
        if (!tk_get_len(&d->r, &i) || d->dict == NULL || i >= d->ndict)
            return 0;
        *out = enif_make_copy(d->env, d->dict[i]);
        return 1;
    }
    case TK_T_INT:
        if (!tk_get_svarint(&d->r, &v))
            return 0;
        *out = enif_make_int64(d->env, (ErlNifSInt64)v);
        return 1;
    case TK_T_FLOAT: {
        double f;
        if (!tk_get_word(&d->r, &w))
            return 0;
        memcpy(&f, &w, 8);
        *out = enif_make_double(d->env, f);
        return 1;
    }
    case TK_T_BIN:
    case TK_T_BINCUT:
        return dec_binary(d, tag == TK_T_BINCUT, out);
    case TK_T_LIST:
        return dec_list(d, out);
    case TK_T_TUPLE:
        return dec_tuple(d, out);
    case TK_T_MAP:
        return dec_map(d, out);
    case TK_T_EXT:
        return dec_ext(d, out);
    case TK_T_FUN:
        return dec_fun(d, out);
    case TK_T_CUT:
        *out = d->c->am_ellipsis;
        return 1;
    default:
        return 0;
    }
}

static int dec_event(ErlNifEnv *env, const tk_codec *c, const void *rec,
                     size_t len, const ERL_NIF_TERM *dict, size_t ndict,
                     bool file, ERL_NIF_TERM *out);

int tk_dec_event(ErlNifEnv *env, const tk_codec *c, const void *rec,
                 size_t len, ERL_NIF_TERM *out)
{
    return dec_event(env, c, rec, len, NULL, 0, false, out);
}

int tk_dec_file_event(ErlNifEnv *env, const tk_codec *c, const void *rec,
                      size_t len, const ERL_NIF_TERM *dict, size_t ndict,
                      ERL_NIF_TERM *out)
{
    return dec_event(env, c, rec, len, dict, ndict, true, out);
}

static int dec_event(ErlNifEnv *env, const tk_codec *c, const void *rec,
                     size_t len, const ERL_NIF_TERM *dict, size_t ndict,
                     bool file, ERL_NIF_TERM *out)
{
    tk_event ev;
    ERL_NIF_TERM f[TK_F_COUNT] = {0};
    if (tk_event_parse(rec, len, &ev) != 0)
        return 0;
    for (int i = 0; i < TK_F_COUNT; i++) {
        if (ev.field[i].len == 0)
            continue;
        dec d = {env, c, {ev.field[i].p, ev.field[i].p + ev.field[i].len},
                 dict, ndict, file};
        if (!dec_value(&d, &f[i]))
            return 0;
    }
    ERL_NIF_TERM e[9];
    unsigned n = 0;
    bool seq = ev.tag == TK_TAG_seq_trace;
    e[n++] = seq ? c->am_seq_trace : c->am_trace;
    e[n++] = f[TK_F_TRACEE]; /* seq_trace: the label */
    if (!seq)
        e[n++] = c->tag[ev.tag];
    e[n++] = f[TK_F_MSG]; /* seq_trace: the info */
    if (ev.flags & TK_EV_EXTRA)
        e[n++] = f[TK_F_EXTRA];
    if (ev.flags & TK_EV_MSR)
        e[n++] = f[TK_F_MSR];
    if (ev.flags & TK_EV_SCHED)
        e[n++] = f[TK_F_SCHED];
    if (ev.ts_kind != TK_TS_NONE) {
        e[n++] = f[TK_F_TS];
        if (!seq)
            e[0] = c->am_trace_ts;
    }
    *out = enif_make_tuple_from_array(env, e, n);
    return 1;
}

/* decode.c: records back into terms, in the consumer (drain). The event
 * tuple is built exactly as OTP's process tracer builds its messages
 * (erl_tracer's trace callback), so a drained event equals the message a
 * process tracer would have received for the same event. */
#include <string.h>

#include "ring.h"
#include "term_format.h"

typedef struct {
    const unsigned char *p, *end;
} dec_buf;

static int get_bytes(dec_buf *d, void *out, size_t n)
{
    if ((size_t)(d->end - d->p) < n)
        return 0;
    memcpy(out, d->p, n);
    d->p += n;
    return 1;
}

static int get_u32(dec_buf *d, uint32_t *v) { return get_bytes(d, v, 4); }
static int get_word(dec_buf *d, uint64_t *v) { return get_bytes(d, v, 8); }

static int dec_rec(ErlNifEnv *env, dec_buf *d, ERL_NIF_TERM *out, int depth);

/* n terms into a temporary array (on the stack when small). */
static int dec_array(ErlNifEnv *env, dec_buf *d, uint32_t n,
                     ERL_NIF_TERM *small, size_t small_n, ERL_NIF_TERM **arr,
                     int depth)
{
    *arr = small;
    if (n > small_n) {
        /* Each term takes at least one byte: a count beyond the bytes left
         * is corrupt, and allocating for it would be wrong. */
        if (n > (size_t)(d->end - d->p))
            return 0;
        *arr = enif_alloc(n * sizeof(ERL_NIF_TERM));
        if (*arr == NULL)
            return 0;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!dec_rec(env, d, &(*arr)[i], depth + 1)) {
            if (*arr != small)
                enif_free(*arr);
            return 0;
        }
    return 1;
}

static int dec_rec(ErlNifEnv *env, dec_buf *d, ERL_NIF_TERM *out, int depth)
{
    unsigned char tag;
    uint64_t w;
    uint32_t n;
    ERL_NIF_TERM small[16], *arr;
    if (depth > TERM_MAX_DEPTH + 1 || !get_bytes(d, &tag, 1))
        return 0;
    switch (tag) {
    case T_NIL:
        *out = enif_make_list(env, 0);
        return 1;
    case T_ATOM:
    case T_PID:
    case T_PORT:
    case T_IMM:
        /* Atoms and local pids and ports are immediates, valid in every
         * environment: the word is the term. */
        if (!get_word(d, &w))
            return 0;
        *out = (ERL_NIF_TERM)w;
        return 1;
    case T_INT:
        if (!get_word(d, &w))
            return 0;
        *out = enif_make_int64(env, (ErlNifSInt64)w);
        return 1;
    case T_FLOAT: {
        double f;
        if (!get_word(d, &w))
            return 0;
        memcpy(&f, &w, 8);
        *out = enif_make_double(env, f);
        return 1;
    }
    case T_BIN:
    case T_BINCUT: {
        uint64_t total = 0;
        if (!get_u32(d, &n) || (tag == T_BINCUT && !get_word(d, &total)) ||
            (size_t)(d->end - d->p) < n)
            return 0;
        unsigned char *data = enif_make_new_binary(env, n, out);
        memcpy(data, d->p, n);
        d->p += n;
        if (tag == T_BINCUT)
            *out = enif_make_tuple3(env, am_ellipsis, *out,
                                    enif_make_uint64(env, total));
        return 1;
    }
    case T_LIST: {
        ERL_NIF_TERM tail;
        if (!get_u32(d, &n) || !dec_array(env, d, n, small, 16, &arr, depth))
            return 0;
        int ok = dec_rec(env, d, &tail, depth + 1);
        if (ok) {
            for (uint32_t i = n; i > 0; i--)
                tail = enif_make_list_cell(env, arr[i - 1], tail);
            *out = tail;
        }
        if (arr != small)
            enif_free(arr);
        return ok;
    }
    case T_TUPLE:
        if (!get_u32(d, &n) || !dec_array(env, d, n, small, 16, &arr, depth))
            return 0;
        *out = enif_make_tuple_from_array(env, arr, n);
        if (arr != small)
            enif_free(arr);
        return 1;
    case T_MAP: {
        if (!get_u32(d, &n) || n > UINT32_MAX / 2 ||
            !dec_array(env, d, 2 * n, small, 16, &arr, depth))
            return 0;
        ERL_NIF_TERM map = enif_make_new_map(env);
        int ok = 1;
        for (uint32_t i = 0; i < n && ok; i++)
            ok = enif_make_map_put(env, map, arr[2 * i], arr[2 * i + 1], &map);
        if (arr != small)
            enif_free(arr);
        *out = map;
        return ok;
    }
    case T_EXT: {
        if (!get_u32(d, &n) || (size_t)(d->end - d->p) < n)
            return 0;
        size_t used = enif_binary_to_term(env, d->p, n, out, 0);
        d->p += n;
        return used > 0;
    }
    case T_CUT:
        *out = am_ellipsis;
        return 1;
    default:
        return 0;
    }
}

int dec_event(ErlNifEnv *env, const unsigned char *p, size_t len,
              ERL_NIF_TERM *out)
{
    dec_buf d = {p, p + len};
    unsigned char flags;
    uint64_t tagw;
    ERL_NIF_TERM tracee, ts = 0, sched = 0, msr = 0, extra = 0, msg;
    if (!get_bytes(&d, &flags, 1) || !get_word(&d, &tagw) ||
        !dec_rec(env, &d, &tracee, 0))
        return 0;
    unsigned ts_kind = flags >> 4;
    if ((ts_kind != TS_NONE && !dec_rec(env, &d, &ts, 0)) ||
        ((flags & REC_SCHED) && !dec_rec(env, &d, &sched, 0)) ||
        ((flags & REC_MSR) && !dec_rec(env, &d, &msr, 0)) ||
        ((flags & REC_EXTRA) && !dec_rec(env, &d, &extra, 0)) ||
        !dec_rec(env, &d, &msg, 0))
        return 0;

    ERL_NIF_TERM tag = (ERL_NIF_TERM)tagw, e[9];
    unsigned n = 0;
    if (flags & REC_EXTRA) {
        e[n++] = am_trace;
        e[n++] = tracee;
        e[n++] = tag;
        e[n++] = msg;
        e[n++] = extra;
    } else if (tag == am_seq_trace) {
        e[n++] = am_seq_trace;
        e[n++] = tracee; /* the label */
        e[n++] = msg;    /* the seq_trace info */
    } else {
        e[n++] = am_trace;
        e[n++] = tracee;
        e[n++] = tag;
        e[n++] = msg;
    }
    if (flags & REC_MSR)
        e[n++] = msr;
    if (flags & REC_SCHED)
        e[n++] = sched;
    if (ts_kind != TS_NONE) {
        e[n++] = ts;
        if (e[0] == am_trace)
            e[0] = am_trace_ts;
    }
    *out = enif_make_tuple_from_array(env, e, n);
    return 1;
}

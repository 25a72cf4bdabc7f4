/* decode.c: an event record of a trace file into the external term
 * format, with ei: the tuple OTP's process tracer would have sent, built
 * as tk_dec_file_event builds it in the VM (c_src/nif/common/tk_dec.c),
 * so that a record one refuses the other refuses too.
 *
 * Dictionary entries and the external terms of records are copied as
 * they are (they are external terms already); they were checked when
 * read (a dictionary entry when its chunk was read, an EXT term here).
 */
#include <string.h>

#include <ei.h>

#include "cat.h"
#include "tk_tags.h"
#include "tk_term.h"

typedef struct {
    reader *r;
    tk_rbuf in;
    ei_x_buff *x;
} dec;

static int term(dec *d);

static int atom(ei_x_buff *x, const char *s)
{
    return ei_x_encode_atom_len_as(x, s, (int)strlen(s), ERLANG_UTF8, ERLANG_UTF8);
}

/* Bytes copied into the output as they are. */
static int raw(ei_x_buff *x, const void *p, size_t n)
{
    if (n > (size_t)INT32_MAX)
        return -1;
    return ei_x_append_buf(x, p, (int)n);
}

static int binary(dec *d, bool cut)
{
    uint32_t n;
    uint64_t total = 0;
    if (!tk_get_len(&d->in, &n) || (cut && !tk_get_varint(&d->in, &total)) ||
        (size_t)(d->in.end - d->in.p) < n)
        return -1;
    if (cut && (ei_x_encode_tuple_header(d->x, 3) < 0 || atom(d->x, "...") < 0))
        return -1;
    if (ei_x_encode_binary(d->x, d->in.p, (long)n) < 0)
        return -1;
    d->in.p += n;
    return cut ? ei_x_encode_ulonglong(d->x, total) : 0;
}

static int ext(dec *d)
{
    uint32_t n;
    if (!tk_get_len(&d->in, &n) || (size_t)(d->in.end - d->in.p) < n || n < 2 ||
        d->in.p[0] != 131)
        return -1;
    /* binary_to_term must take all of it, and nothing more */
    size_t at = 1;
    tree *scratch = &d->r->scratch;
    scratch->len = 0;
    scratch->home = d->r->node;
    if (etf_parse(scratch, d->in.p, n, &at) < 0 || at != n)
        return -1;
    int rc = raw(d->x, d->in.p + 1, n - 1);
    d->in.p += n;
    return rc;
}

static int seq(dec *d, uint64_t n)
{
    if (!tk_count_ok(&d->in, n))
        return -1;
    for (uint64_t k = 0; k < n; k++)
        if (term(d) < 0)
            return -1;
    return 0;
}

static int term(dec *d)
{
    unsigned tag;
    uint32_t n;
    uint64_t w;
    int64_t v;
    if (!tk_get_u8(&d->in, &tag))
        return -1;
    switch (tag) {
    case TK_T_NIL:
        return ei_x_encode_empty_list(d->x);
    case TK_T_INT:
        if (!tk_get_svarint(&d->in, &v))
            return -1;
        return ei_x_encode_longlong(d->x, (long long)v);
    case TK_T_FLOAT: {
        double f;
        if (!tk_get_word(&d->in, &w))
            return -1;
        memcpy(&f, &w, 8);
        return ei_x_encode_double(d->x, f);
    }
    case TK_T_BIN:
    case TK_T_BINCUT:
        return binary(d, tag == TK_T_BINCUT);
    case TK_T_LIST:
        /* n elements and a tail; no elements: the tail alone (as the
         * VM's list cells make it) */
        if (!tk_get_len(&d->in, &n))
            return -1;
        if (n > 0 && ei_x_encode_list_header(d->x, (long)n) < 0)
            return -1;
        if (seq(d, n) < 0)
            return -1;
        return term(d);
    case TK_T_TUPLE:
        if (!tk_get_len(&d->in, &n) || ei_x_encode_tuple_header(d->x, (long)n) < 0)
            return -1;
        return seq(d, n);
    case TK_T_MAP:
        if (!tk_get_len(&d->in, &n) || ei_x_encode_map_header(d->x, (long)n) < 0)
            return -1;
        return seq(d, 2 * (uint64_t)n);
    case TK_T_EXT:
        return ext(d);
    case TK_T_FUN:
        if (ei_x_encode_tuple_header(d->x, 3) < 0 || atom(d->x, "...") < 0 ||
            atom(d->x, "fun") < 0)
            return -1;
        return binary(d, false);
    case TK_T_CUT:
        return atom(d->x, "...");
    case TK_T_DICT: {
        const reader *r = d->r;
        if (!tk_get_len(&d->in, &n) || n >= r->ndict)
            return -1;
        return raw(d->x, r->dict + r->dict_off[n], r->dict_off[n + 1] - r->dict_off[n]);
    }
    default:
        /* TK_T_IMM is a VM's word: never in a file */
        return -1;
    }
}

/* One field of the record into the tuple. */
static int field(dec *d, const tk_event *ev, tk_event_field f)
{
    d->in.p = ev->field[f].p;
    d->in.end = ev->field[f].p + ev->field[f].len;
    if (term(d) < 0)
        return -1;
    return d->in.p == d->in.end ? 0 : -1;
}

int decode_event(reader *r, const unsigned char *rec, size_t len, ei_x_buff *x)
{
    tk_event ev;
    if (tk_event_parse(rec, len, &ev) != 0)
        return -1;
    dec d = {r, {rec, rec + len}, x};
    bool sq = ev.tag == TK_TAG_seq_trace;
    bool ts = ev.ts_kind != TK_TS_NONE;
    long arity = 3 + !sq + !!(ev.flags & TK_EV_EXTRA) + !!(ev.flags & TK_EV_MSR) +
                 !!(ev.flags & TK_EV_SCHED) + ts;
    if (ei_x_encode_tuple_header(x, arity) < 0 ||
        atom(x, sq ? "seq_trace" : ts ? "trace_ts" : "trace") < 0 ||
        field(&d, &ev, TK_F_TRACEE) < 0 ||
        (!sq && atom(x, tk_tags[ev.tag].name) < 0) ||
        field(&d, &ev, TK_F_MSG) < 0 ||
        ((ev.flags & TK_EV_EXTRA) && field(&d, &ev, TK_F_EXTRA) < 0) ||
        ((ev.flags & TK_EV_MSR) && field(&d, &ev, TK_F_MSR) < 0) ||
        ((ev.flags & TK_EV_SCHED) && field(&d, &ev, TK_F_SCHED) < 0) ||
        (ts && field(&d, &ev, TK_F_TS) < 0))
        return -1;
    return 0;
}

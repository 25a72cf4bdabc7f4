#include "tk_term.h"

#include "tk_tags.h"

#include "tk_ext.h"

/* What a walk over a record's terms also looks at: in a trace file's
 * form, the dictionary entries it refers to and its external terms
 * (tk_event_file_check). NULL: a plain skip. */
typedef struct {
    const uint32_t *entry_len;
    size_t nentries;
    uint64_t refs; /* bytes of the entries referred to, once per reference */
} walk_ctx;

static bool walk(tk_rbuf *r, unsigned depth, walk_ctx *c);

/* n terms, one level down. */
static bool walk_terms(tk_rbuf *r, uint64_t n, unsigned depth, walk_ctx *c)
{
    if (!tk_count_ok(r, n))
        return false;
    for (uint64_t i = 0; i < n; i++)
        if (!walk(r, depth, c))
            return false;
    return true;
}

/* A length, then that many bytes (at *data); BINCUT: a total between. */
static bool skip_sized(tk_rbuf *r, bool total, const unsigned char **data,
                       uint32_t *n)
{
    uint64_t ignored;
    if (!tk_get_len(r, n) || (total && !tk_get_varint(r, &ignored)) ||
        (size_t)(r->end - r->p) < *n)
        return false;
    *data = r->p;
    r->p += *n;
    return true;
}

static bool walk(tk_rbuf *r, unsigned depth, walk_ctx *c)
{
    unsigned tag;
    uint64_t w;
    uint32_t n;
    const unsigned char *data;
    if (!tk_get_u8(r, &tag))
        return false;
    switch (tag) {
    case TK_T_NIL:
    case TK_T_CUT:
        return true;
    case TK_T_INT:
        return tk_get_varint(r, &w);
    case TK_T_IMM: /* a ring's record only: in a file, refused */
        return c == NULL && tk_get_varint(r, &w);
    case TK_T_ATOM:
        return c == NULL && tk_get_varint(r, &w) && tk_atom_ok(w);
    case TK_T_PID:
        return c == NULL && tk_get_varint(r, &w) && tk_pid_ok(w);
    case TK_T_NOW:
        if (c != NULL)
            return false;
        for (int i = 0; i < 3; i++)
            if (!tk_get_varint(r, &w) || !tk_now_ok(w))
                return false;
        return true;
    case TK_T_FLOAT:
        return tk_get_word(r, &w);
    case TK_T_DICT:
        if (!tk_get_len(r, &n))
            return false;
        if (c != NULL) {
            if (n >= c->nentries)
                return false;
            c->refs += c->entry_len[n];
        }
        return true;
    case TK_T_BIN:
    case TK_T_FUN:
        return skip_sized(r, false, &data, &n);
    case TK_T_EXT:
        return skip_sized(r, false, &data, &n) &&
               (c == NULL || tk_ext_check(data, n) != TK_EXT_BAD);
    case TK_T_BINCUT:
        return skip_sized(r, true, &data, &n);
    case TK_T_LIST:
        return tk_term_may_nest(depth) && tk_get_len(r, &n) &&
               walk_terms(r, n, depth + 1, c) && walk(r, depth + 1, c);
    case TK_T_TUPLE:
        return tk_term_may_nest(depth) && tk_get_len(r, &n) &&
               walk_terms(r, n, depth + 1, c);
    case TK_T_MAP:
        return tk_term_may_nest(depth) && tk_get_len(r, &n) &&
               walk_terms(r, 2 * (uint64_t)n, depth + 1, c);
    default:
        return false;
    }
}

bool tk_term_skip(tk_rbuf *r, unsigned depth)
{
    return walk(r, depth, NULL);
}

bool tk_event_file_check(const void *rec, size_t len, const uint32_t *entry_len,
                         size_t nentries, uint64_t *refs)
{
    tk_event ev;
    walk_ctx c = {entry_len, nentries, 0};
    if (tk_event_parse(rec, len, &ev) != 0)
        return false;
    for (int f = 0; f < TK_F_COUNT; f++) {
        if (ev.field[f].len == 0)
            continue;
        tk_rbuf r = {ev.field[f].p, ev.field[f].p + ev.field[f].len};
        if (!walk(&r, 0, &c))
            return false;
    }
    *refs = c.refs;
    return true;
}

int tk_event_parse(const void *rec, size_t len, tk_event *ev)
{
    tk_rbuf r = {rec, (const unsigned char *)rec + len};
    unsigned head;
    if (!tk_get_u8(&r, &head) || !tk_get_u8(&r, &ev->tag) ||
        ev->tag >= TK_TAG_COUNT)
        return -1;
    ev->flags = head & 0xf;
    ev->ts_kind = head >> 4;
    if (ev->ts_kind > TK_TS_LAST ||
        (ev->flags & ~(TK_EV_EXTRA | TK_EV_MSR | TK_EV_SCHED)) != 0)
        return -1;
    for (int f = 0; f < TK_F_COUNT; f++) {
        ev->field[f] = (tk_span){r.p, 0};
        if (!tk_event_field_present((tk_event_field)f, ev->flags, ev->ts_kind))
            continue;
        if (!tk_term_skip(&r, 0))
            return -1;
        ev->field[f].len = (size_t)(r.p - ev->field[f].p);
    }
    return r.p == r.end ? 0 : -1;
}

/* ---- the file form ------------------------------------------------------- */

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "trace files are little-endian: tracekit writes them on little-endian machines only"
#endif

/* Copies n raw bytes. */
static bool pass(tk_rbuf *r, tk_wbuf *w, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    tk_put_bytes(w, r->p, n);
    r->p += n;
    return true;
}

static bool xlate_term(tk_rbuf *r, tk_wbuf *w, unsigned depth,
                       const tk_xlate *x);

static bool xlate_terms(tk_rbuf *r, tk_wbuf *w, uint64_t n, unsigned depth,
                        const tk_xlate *x)
{
    if (!tk_count_ok(r, n))
        return false;
    for (uint64_t i = 0; i < n; i++)
        if (!xlate_term(r, w, depth, x))
            return false;
    return true;
}

/* An immediate word: a small integer, or a dictionary entry. */
static bool xlate_imm(tk_wbuf *w, uint64_t word, const tk_xlate *x)
{
    int is_int = 0;
    int64_t v = 0;
    uint32_t index = 0;
    if (x->imm(x->ctx, word, &is_int, &v, &index) != 0)
        return false;
    tk_put_u8(w, is_int ? TK_T_INT : TK_T_DICT);
    tk_put_varint(w, is_int ? tk_zigzag(v) : index);
    return true;
}

/* A length (or a count) copied. */
static bool pass_len(tk_rbuf *r, tk_wbuf *w, uint32_t *n)
{
    if (!tk_get_len(r, n))
        return false;
    tk_put_varint(w, *n);
    return true;
}

static bool xlate_term(tk_rbuf *r, tk_wbuf *w, unsigned depth,
                       const tk_xlate *x)
{
    unsigned tag;
    uint32_t n;
    uint64_t v;
    int64_t s;
    if (!tk_get_u8(r, &tag))
        return false;
    switch (tag) {
    case TK_T_IMM:
        return tk_get_svarint(r, &s) && xlate_imm(w, tk_imm_word(s), x);
    case TK_T_ATOM:
        return tk_get_varint(r, &v) && tk_atom_ok(v) &&
               xlate_imm(w, tk_atom_word(v), x);
    case TK_T_PID:
        return tk_get_varint(r, &v) && tk_pid_ok(v) &&
               xlate_imm(w, tk_pid_word(v), x);
    case TK_T_NOW:
        /* The tuple: each part of k bytes becomes at most k + 2 (a tag, a
         * zigzag one bit longer), 8 + (k1 + k2 + k3) bytes from at least
         * 1 + (k1 + k2 + k3) >= 4: within TK_EVENT_FILE_ROOM. */
        tk_put_u8(w, TK_T_TUPLE);
        tk_put_varint(w, 3);
        for (int i = 0; i < 3; i++) {
            if (!tk_get_varint(r, &v) || !tk_now_ok(v))
                return false;
            tk_put_u8(w, TK_T_INT);
            tk_put_varint(w, tk_zigzag((int64_t)v));
        }
        return true;
    case TK_T_NIL:
    case TK_T_CUT:
        tk_put_u8(w, tag);
        return true;
    case TK_T_INT:
    case TK_T_DICT:
        if (!tk_get_varint(r, &v))
            return false;
        tk_put_u8(w, tag);
        tk_put_varint(w, v);
        return true;
    case TK_T_FLOAT:
        tk_put_u8(w, tag);
        return pass(r, w, 8);
    case TK_T_EXT:
        /* An external term a file may not hold (nested deeper than the
         * rule: a fun's environment) becomes the marker. */
        if (!tk_get_len(r, &n) || (size_t)(r->end - r->p) < n)
            return false;
        if (tk_ext_check(r->p, n) == TK_EXT_BAD) {
            tk_put_u8(w, TK_T_CUT);
            r->p += n;
            return true;
        }
        tk_put_u8(w, tag);
        tk_put_varint(w, n);
        return pass(r, w, n);
    case TK_T_BIN:
    case TK_T_FUN:
    case TK_T_BINCUT:
        tk_put_u8(w, tag);
        if (!pass_len(r, w, &n))
            return false;
        if (tag == TK_T_BINCUT) {
            if (!tk_get_varint(r, &v))
                return false;
            tk_put_varint(w, v);
        }
        return pass(r, w, n);
    case TK_T_LIST:
    case TK_T_TUPLE:
    case TK_T_MAP:
        if (!tk_term_may_nest(depth))
            return false;
        tk_put_u8(w, tag);
        if (!pass_len(r, w, &n))
            return false;
        if (tag == TK_T_MAP)
            return xlate_terms(r, w, 2 * (uint64_t)n, depth + 1, x);
        return xlate_terms(r, w, n, depth + 1, x) &&
               (tag == TK_T_TUPLE || xlate_term(r, w, depth + 1, x));
    default:
        return false;
    }
}

size_t tk_event_to_file(const void *rec, size_t len, unsigned char *out,
                        const tk_xlate *x)
{
    tk_rbuf r = {rec, (const unsigned char *)rec + len};
    tk_wbuf w = {out, out + TK_EVENT_FILE_ROOM(len)};
    tk_event ev;
    if (tk_event_parse(rec, len, &ev) != 0 || !pass(&r, &w, TK_EVENT_HEAD))
        return 0;
    for (int f = 0; f < TK_F_COUNT; f++)
        if (ev.field[f].len > 0 && !xlate_term(&r, &w, 0, x))
            return 0;
    return (size_t)(w.p - out);
}

/* ---- version 1 of the file form ------------------------------------------ */

/* Its tags beside today's: 4-byte integers (and VM words, never in a
 * file). */
enum { V1_IMM32 = 2, V1_INT32 = 13 };

static bool v1_term(tk_rbuf *r, tk_wbuf *w, unsigned depth);

static bool v1_terms(tk_rbuf *r, tk_wbuf *w, uint64_t n, unsigned depth)
{
    if (!tk_count_ok(r, n))
        return false;
    for (uint64_t i = 0; i < n; i++)
        if (!v1_term(r, w, depth))
            return false;
    return true;
}

/* Each v1 term of k bytes becomes at most 2k - 1 (INT: 9 -> 11, BINCUT
 * 13 -> 16, a u32 -> 5): TK_EVENT_V1_ROOM holds them. */
static bool v1_term(tk_rbuf *r, tk_wbuf *w, unsigned depth)
{
    unsigned tag;
    uint32_t n;
    uint64_t v = 0;
    if (!tk_get_u8(r, &tag))
        return false;
    switch (tag) {
    case TK_T_NIL:
    case TK_T_CUT:
        tk_put_u8(w, tag);
        return true;
    case TK_T_INT:
        if (!tk_get_word(r, &v))
            return false;
        tk_put_u8(w, TK_T_INT);
        tk_put_varint(w, tk_zigzag((int64_t)v));
        return true;
    case V1_INT32:
        if (!tk_get_u32(r, &n))
            return false;
        tk_put_u8(w, TK_T_INT);
        tk_put_varint(w, tk_zigzag((int32_t)n));
        return true;
    case TK_T_DICT:
        if (!tk_get_u32(r, &n))
            return false;
        tk_put_u8(w, TK_T_DICT);
        tk_put_varint(w, n);
        return true;
    case TK_T_FLOAT:
        tk_put_u8(w, tag);
        return pass(r, w, 8);
    case TK_T_BIN:
    case TK_T_FUN:
    case TK_T_EXT:
    case TK_T_BINCUT:
        if (!tk_get_u32(r, &n) || (tag == TK_T_BINCUT && !tk_get_word(r, &v)))
            return false;
        tk_put_u8(w, tag);
        tk_put_varint(w, n);
        if (tag == TK_T_BINCUT)
            tk_put_varint(w, v);
        return pass(r, w, n);
    case TK_T_LIST:
    case TK_T_TUPLE:
    case TK_T_MAP:
        if (!tk_term_may_nest(depth) || !tk_get_u32(r, &n))
            return false;
        tk_put_u8(w, tag);
        tk_put_varint(w, n);
        if (tag == TK_T_MAP)
            return v1_terms(r, w, 2 * (uint64_t)n, depth + 1);
        return v1_terms(r, w, n, depth + 1) &&
               (tag == TK_T_TUPLE || v1_term(r, w, depth + 1));
    default: /* V1_IMM32, TK_T_IMM: a VM's words, never in a file */
        return false;
    }
}

size_t tk_event_from_v1(const void *rec, size_t len, unsigned char *out)
{
    tk_rbuf r = {rec, (const unsigned char *)rec + len};
    tk_wbuf w = {out, out + TK_EVENT_V1_ROOM(len)};
    unsigned head, tag;
    if (len < TK_EVENT_HEAD || !tk_get_u8(&r, &head) || !tk_get_u8(&r, &tag))
        return 0;
    tk_put_u8(&w, head);
    tk_put_u8(&w, tag);
    unsigned flags = head & 0xf, ts_kind = head >> 4;
    for (int f = 0; f < TK_F_COUNT; f++)
        if (tk_event_field_present((tk_event_field)f, flags, ts_kind) &&
            !v1_term(&r, &w, 0))
            return 0;
    tk_event ev; /* the head's own checks, and the result's */
    size_t n = (size_t)(w.p - out);
    return r.p == r.end && tk_event_parse(out, n, &ev) == 0 ? n : 0;
}

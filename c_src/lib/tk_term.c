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

/* u32 length, then that many bytes (at *data). */
static bool skip_sized(tk_rbuf *r, size_t extra_header, const unsigned char **data,
                       uint32_t *n)
{
    uint64_t ignored;
    if (!tk_get_u32(r, n) || (extra_header && !tk_get_word(r, &ignored)) ||
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
    case TK_T_IMM:
    case TK_T_INT:
    case TK_T_FLOAT:
        return tk_get_word(r, &w);
    case TK_T_IMM32:
    case TK_T_INT32:
        return tk_get_u32(r, &n);
    case TK_T_DICT:
        if (!tk_get_u32(r, &n))
            return false;
        if (c != NULL) {
            if (n >= c->nentries)
                return false;
            c->refs += c->entry_len[n];
        }
        return true;
    case TK_T_BIN:
    case TK_T_FUN:
        return skip_sized(r, 0, &data, &n);
    case TK_T_EXT:
        return skip_sized(r, 0, &data, &n) &&
               (c == NULL || tk_ext_check(data, n) != TK_EXT_BAD);
    case TK_T_BINCUT:
        return skip_sized(r, 1, &data, &n);
    case TK_T_LIST:
        return tk_term_may_nest(depth) && tk_get_u32(r, &n) &&
               walk_terms(r, n, depth + 1, c) && walk(r, depth + 1, c);
    case TK_T_TUPLE:
        return tk_term_may_nest(depth) && tk_get_u32(r, &n) &&
               walk_terms(r, n, depth + 1, c);
    case TK_T_MAP:
        return tk_term_may_nest(depth) && tk_get_u32(r, &n) &&
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

/* An immediate word: a small integer in 4 bytes when it fits (never longer
 * than the word was), else a dictionary entry. */
static bool xlate_imm(tk_wbuf *w, uint64_t word, size_t was,
                      const tk_xlate *x)
{
    int is_int = 0;
    int64_t v = 0;
    uint32_t index = 0;
    if (x->imm(x->ctx, word, &is_int, &v, &index) != 0)
        return false;
    if (!is_int) {
        tk_put_u8(w, TK_T_DICT);
        tk_put_u32(w, index);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        tk_put_u8(w, TK_T_INT32);
        tk_put_u32(w, (uint32_t)(int32_t)v);
    } else if (was >= TK_T_WORD_SIZE) {
        tk_put_u8(w, TK_T_INT);
        tk_put_word(w, (uint64_t)v);
    } else {
        return false; /* a 4-byte word holds no larger small integer */
    }
    return true;
}

static bool xlate_term(tk_rbuf *r, tk_wbuf *w, unsigned depth,
                       const tk_xlate *x)
{
    unsigned tag;
    uint32_t n, w32;
    uint64_t word;
    if (!tk_get_u8(r, &tag))
        return false;
    switch (tag) {
    case TK_T_IMM:
        return tk_get_word(r, &word) && xlate_imm(w, word, TK_T_WORD_SIZE, x);
    case TK_T_IMM32:
        return tk_get_u32(r, &w32) && xlate_imm(w, w32, TK_T_IMM32_SIZE, x);
    case TK_T_NIL:
    case TK_T_CUT:
        tk_put_u8(w, tag);
        return true;
    case TK_T_INT:
    case TK_T_FLOAT:
        tk_put_u8(w, tag);
        return pass(r, w, 8);
    case TK_T_INT32:
    case TK_T_DICT:
        tk_put_u8(w, tag);
        return pass(r, w, 4);
    case TK_T_EXT:
        /* An external term a file may not hold (nested deeper than the
         * rule: a fun's environment) becomes the marker. */
        if (!tk_get_u32(r, &n) || (size_t)(r->end - r->p) < n)
            return false;
        if (tk_ext_check(r->p, n) == TK_EXT_BAD) {
            tk_put_u8(w, TK_T_CUT);
            r->p += n;
            return true;
        }
        tk_put_u8(w, tag);
        tk_put_u32(w, n);
        return pass(r, w, n);
    case TK_T_BIN:
    case TK_T_FUN:
    case TK_T_BINCUT:
        tk_put_u8(w, tag);
        if (!tk_get_u32(r, &n))
            return false;
        tk_put_u32(w, n);
        return pass(r, w, (tag == TK_T_BINCUT ? 8 : 0) + (size_t)n);
    case TK_T_LIST:
    case TK_T_TUPLE:
    case TK_T_MAP:
        if (!tk_term_may_nest(depth) || !tk_get_u32(r, &n))
            return false;
        tk_put_u8(w, tag);
        tk_put_u32(w, n);
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
    tk_wbuf w = {out, out + len};
    tk_event ev;
    if (tk_event_parse(rec, len, &ev) != 0 || !pass(&r, &w, TK_EVENT_HEAD))
        return 0;
    for (int f = 0; f < TK_F_COUNT; f++)
        if (ev.field[f].len > 0 && !xlate_term(&r, &w, 0, x))
            return 0;
    return (size_t)(w.p - out);
}

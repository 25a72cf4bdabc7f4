#include "tk_term.h"

#include "tk_tags.h"

/* n terms, one level down. */
static bool skip_terms(tk_rbuf *r, uint64_t n, unsigned depth)
{
    if (!tk_count_ok(r, n))
        return false;
    for (uint64_t i = 0; i < n; i++)
        if (!tk_term_skip(r, depth))
            return false;
    return true;
}

/* u32 length, then that many bytes. */
static bool skip_sized(tk_rbuf *r, size_t extra_header)
{
    uint32_t n;
    uint64_t ignored;
    if (!tk_get_u32(r, &n) || (extra_header && !tk_get_word(r, &ignored)) ||
        (size_t)(r->end - r->p) < n)
        return false;
    r->p += n;
    return true;
}

bool tk_term_skip(tk_rbuf *r, unsigned depth)
{
    unsigned tag;
    uint64_t w;
    uint32_t n;
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
        return tk_get_u32(r, &n);
    case TK_T_BIN:
    case TK_T_EXT:
    case TK_T_FUN:
        return skip_sized(r, 0);
    case TK_T_BINCUT:
        return skip_sized(r, 1);
    case TK_T_LIST:
        return tk_term_may_nest(depth) && tk_get_u32(r, &n) &&
               skip_terms(r, n, depth + 1) && tk_term_skip(r, depth + 1);
    case TK_T_TUPLE:
        return tk_term_may_nest(depth) && tk_get_u32(r, &n) &&
               skip_terms(r, n, depth + 1);
    case TK_T_MAP:
        return tk_term_may_nest(depth) && tk_get_u32(r, &n) &&
               skip_terms(r, 2 * (uint64_t)n, depth + 1);
    default:
        return false;
    }
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

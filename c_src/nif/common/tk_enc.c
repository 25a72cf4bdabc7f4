/* tk_enc.c: trace events into records (tk_term.h's format), before the
 * tracer callback returns: the terms live on the tracee's heap.
 *
 * Every write is bounded: a value is encoded within a limit, and what does
 * not fit becomes the marker '...' (lists keep their first elements and end
 * in '...', binaries keep a prefix), so a record is always complete and
 * decodes. Each value function needs room for at least the marker.
 *
 * No allocation, except inside enif_term_to_binary for what the NIF API
 * cannot take apart (references, remote pids and ports, non-byte
 * bitstrings, and funs and bignums where they are kept whole).
 */
#include <string.h>

#include "tk_codec.h"
#include "tk_debug.h"

/* Why something became the marker. */
#define CUT_ROOM 1u  /* the record had no room left */
#define CUT_DEPTH 2u /* nested deeper than tk_term_may_nest allows */

typedef struct {
    ErlNifEnv *env;
    const tk_codec *c;
    const tk_payload *pl;
    tk_wbuf w;                       /* w.end: the end of the record */
    bool budget;       /* a user-data term under the mode's budget */
    bool budget_bound; /* ... and the budget, not the room, is the limit */
    unsigned cuts;     /* CUT_* seen */
    unsigned room_cuts; /* markers written for want of room (any cause) */
} enc;

static void enc_value(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                      unsigned depth);

static inline size_t room(const enc *e, const unsigned char *limit)
{
    return tk_wroom(&e->w, limit);
}

/* Something is cut: for want of room, unless the budget is what is
 * short (the payload mode's choice). */
static void note_cut(enc *e)
{
    if (!e->budget_bound)
        e->cuts |= CUT_ROOM;
}

static void cut(enc *e, const unsigned char *limit)
{
    TK_ASSERT(room(e, limit) >= 1);
    (void)limit;
    note_cut(e);
    e->room_cuts++;
    tk_put_u8(&e->w, TK_T_CUT);
}

/* The marker in place of a container too deep to open. */
static void cut_depth(enc *e)
{
    e->cuts |= CUT_DEPTH;
    tk_put_u8(&e->w, TK_T_CUT);
}

/* A tag and a varint: immediates (signed), integers (zigzag). */
static void enc_varint(enc *e, unsigned tag, uint64_t v,
                       const unsigned char *limit)
{
    /* 11 bytes hold a tag and any varint: short of that, its length. */
    size_t r = room(e, limit);
    if (r < 11 && r < 1 + tk_varint_len(v)) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, tag);
    tk_put_varint(&e->w, v);
}

static void enc_ext(enc *e, ERL_NIF_TERM t, const unsigned char *limit);

/* An immediate: its word without the low bits that every immediate has
 * (a word without them, where the representation is not the one checked
 * at load, goes as an external term). */
static void enc_imm(enc *e, ERL_NIF_TERM t, const unsigned char *limit)
{
    if (((uint64_t)t & 3) != 3) {
        enc_ext(e, t, limit);
        return;
    }
    uint64_t w = (uint64_t)t;
    if (e->c->words_ok) {
        if (tk_is_atom_word(w))
            return enc_varint(e, TK_T_ATOM, w >> 6, limit);
        if (tk_is_small_word(w))
            return enc_varint(e, TK_T_INT, tk_zigzag(tk_small_value(w)), limit);
        if (tk_is_pid_word(w))
            return enc_varint(e, TK_T_PID, w >> 4, limit);
    }
    enc_varint(e, TK_T_IMM, tk_zigzag(tk_imm_value(w)), limit);
}

/* A tag, a length and bytes: binaries, external terms, fun names. */
static void enc_sized(enc *e, unsigned tag, const void *data, size_t n,
                      const unsigned char *limit)
{
    if (n > UINT32_MAX || room(e, limit) < 1 + tk_varint_len(n) + n) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, tag);
    tk_put_varint(&e->w, n);
    tk_put_bytes(&e->w, data, n);
}

/* External term format, for what the NIF API cannot take apart. */
static void enc_ext(enc *e, ERL_NIF_TERM t, const unsigned char *limit)
{
    ErlNifBinary bin;
    if (!enif_term_to_binary(e->env, t, &bin)) {
        cut(e, limit);
        return;
    }
    enc_sized(e, TK_T_EXT, bin.data, bin.size, limit);
    enif_release_binary(&bin);
}

static void enc_integer(enc *e, ERL_NIF_TERM t, const unsigned char *limit)
{
    ErlNifSInt64 i;
    if (enif_get_int64(e->env, t, &i)) {
        enc_varint(e, TK_T_INT, tk_zigzag(i), limit);
        return;
    }
    /* A bignum. Under a budget, one too large for it is cut before it is
     * serialised: comparing with a power of two looks at sizes first. */
    const tk_payload *pl = e->pl;
    if (e->budget && pl->big_env != NULL &&
        (enif_compare(t, pl->big_pos) >= 0 || enif_compare(t, pl->big_neg) <= 0)) {
        tk_put_u8(&e->w, TK_T_CUT);
        return;
    }
    enc_ext(e, t, limit);
}

static void enc_float(enc *e, ERL_NIF_TERM t, const unsigned char *limit)
{
    double d;
    uint64_t w;
    if (!enif_get_double(e->env, t, &d)) {
        cut(e, limit);
        return;
    }
    memcpy(&w, &d, 8);
    if (room(e, limit) < TK_T_FLOAT_SIZE) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, TK_T_FLOAT);
    tk_put_word(&e->w, w);
}

/* A binary whole, or its first bytes when it does not fit. */
static void enc_bitstring(enc *e, ERL_NIF_TERM t, const unsigned char *limit)
{
    ErlNifBinary bin;
    if (!enif_inspect_binary(e->env, t, &bin)) {
        enc_ext(e, t, limit); /* not a whole number of bytes */
        return;
    }
    if (bin.size <= UINT32_MAX &&
        room(e, limit) >= 1 + tk_varint_len(bin.size) + bin.size) {
        enc_sized(e, TK_T_BIN, bin.data, bin.size, limit);
        return;
    }
    if (room(e, limit) < TK_T_BINCUT_HEAD + 8) {
        cut(e, limit);
        return;
    }
    note_cut(e);
    /* The head with the prefix's length at its longest (a varint of 32
     * bits): the prefix then fits whatever its length. */
    size_t head = 1 + 5 + tk_varint_len(bin.size);
    size_t keep = room(e, limit) - head;
    if (keep > UINT32_MAX)
        keep = UINT32_MAX;
    tk_put_u8(&e->w, TK_T_BINCUT);
    tk_put_varint(&e->w, keep);
    tk_put_varint(&e->w, (uint64_t)bin.size);
    tk_put_bytes(&e->w, bin.data, keep);
}

/* Whether the element written from `at` did not fit: nothing, or a lone
 * marker written for want of room (`room_cuts` was the count before it). */
static inline bool did_not_fit(const enc *e, const unsigned char *at,
                               unsigned room_cuts)
{
    return e->w.p == at ||
           (e->w.p == at + 1 && *at == TK_T_CUT && e->room_cuts != room_cuts);
}

static void enc_list(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                     unsigned depth)
{
    if (enif_is_empty_list(e->env, t)) {
        tk_put_u8(&e->w, TK_T_NIL);
        return;
    }
    if (!tk_term_may_nest(depth)) {
        cut_depth(e);
        return;
    }
    if (room(e, limit) < TK_T_HEAD_SIZE + 2) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, TK_T_LIST);
    /* The count, known at the end, in the place kept for its longest. */
    unsigned char *count_at = e->w.p;
    e->w.p += 5;
    uint32_t n = 0;
    bool ended = false;
    ERL_NIF_TERM head, tail = t;
    /* Each element may use all but the byte kept for the tail. */
    while (enif_get_list_cell(e->env, tail, &head, &tail)) {
        unsigned char *at = e->w.p;
        unsigned room_cuts = e->room_cuts;
        if (room(e, limit - 1) >= 1)
            enc_value(e, head, limit - 1, depth + 1);
        if (did_not_fit(e, at, room_cuts)) {
            /* It did not fit: the list ends here, in the marker. */
            e->w.p = at;
            ended = true;
            break;
        }
        n++;
    }
    size_t width = tk_varint_len(n);
    if (width < 5) { /* the elements move up to the count's end */
        memmove(count_at + width, count_at + 5, (size_t)(e->w.p - (count_at + 5)));
        e->w.p -= 5 - width;
    }
    tk_put_varint_at(count_at, n, width);
    if (ended)
        cut(e, limit);
    else if (enif_is_empty_list(e->env, tail))
        tk_put_u8(&e->w, TK_T_NIL);
    else
        enc_value(e, tail, limit, depth + 1); /* an improper list */
}

static void enc_tuple(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                      unsigned depth)
{
    int n;
    const ERL_NIF_TERM *es;
    if (!tk_term_may_nest(depth)) {
        cut_depth(e);
        return;
    }
    if (!enif_get_tuple(e->env, t, &n, &es) ||
        room(e, limit) < 1 + tk_varint_len((uint64_t)n) + (size_t)n) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, TK_T_TUPLE);
    tk_put_varint(&e->w, (uint64_t)n);
    /* Keep one byte for each element still to come. */
    for (int i = 0; i < n; i++)
        enc_value(e, es[i], limit - (n - 1 - i), depth + 1);
}

static void enc_map(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                    unsigned depth)
{
    size_t n;
    ErlNifMapIterator it;
    if (!tk_term_may_nest(depth)) {
        cut_depth(e);
        return;
    }
    if (!enif_get_map_size(e->env, t, &n) || n > UINT32_MAX / 2 ||
        room(e, limit) < 1 + tk_varint_len(n) + 2 * n ||
        !enif_map_iterator_create(e->env, t, &it, ERL_NIF_MAP_ITERATOR_FIRST)) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, TK_T_MAP);
    tk_put_varint(&e->w, n);
    size_t left = 2 * n;
    ERL_NIF_TERM k, v;
    while (left > 0 && enif_map_iterator_get_pair(e->env, &it, &k, &v)) {
        enc_value(e, k, limit - (left - 1), depth + 1);
        left--;
        enc_value(e, v, limit - (left - 1), depth + 1);
        left--;
        enif_map_iterator_next(e->env, &it);
    }
    enif_map_iterator_destroy(e->env, &it);
    while (left-- > 0) /* a map cannot change under us; kept decodable */
        cut(e, limit);
}

/* A pid or port: its word when local (an immediate), else external. */
static void enc_local(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                      bool local)
{
    if (local)
        enc_imm(e, t, limit);
    else
        enc_ext(e, t, limit);
}

/* A fun. Under a budget, a local fun is kept by its name only
 * (#Fun<Module.Index.Uniq>): its environment can be any size, and the NIF
 * API can only serialise it whole. External funs (fun M:F/A) carry no
 * environment and are kept whole. */
static void enc_fun(enc *e, ERL_NIF_TERM t, const unsigned char *limit)
{
    char name[256];
    if (e->budget) {
        int n = enif_snprintf(name, sizeof name, "%T", t);
        if (n > 0 && (size_t)n < sizeof name && strncmp(name, "#Fun<", 5) == 0) {
            enc_sized(e, TK_T_FUN, name, (size_t)n, limit);
            return;
        }
    }
    enc_ext(e, t, limit);
}

/* Precondition: room(e, limit) >= 1 (there is always room for a marker). */
static void enc_value(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                      unsigned depth)
{
    TK_ASSERT(room(e, limit) >= 1);
    if (e->c->imm_ok && (t & 3) == 3) { /* no NIF call: the word is the term */
        enc_imm(e, t, limit);
        return;
    }
    switch (enif_term_type(e->env, t)) {
    case ERL_NIF_TERM_TYPE_ATOM:
        enc_imm(e, t, limit); /* atoms live forever */
        return;
    case ERL_NIF_TERM_TYPE_INTEGER:
        enc_integer(e, t, limit);
        return;
    case ERL_NIF_TERM_TYPE_FLOAT:
        enc_float(e, t, limit);
        return;
    case ERL_NIF_TERM_TYPE_BITSTRING:
        enc_bitstring(e, t, limit);
        return;
    case ERL_NIF_TERM_TYPE_LIST:
        enc_list(e, t, limit, depth);
        return;
    case ERL_NIF_TERM_TYPE_TUPLE:
        enc_tuple(e, t, limit, depth);
        return;
    case ERL_NIF_TERM_TYPE_MAP:
        enc_map(e, t, limit, depth);
        return;
    case ERL_NIF_TERM_TYPE_PID: {
        ErlNifPid pid;
        enc_local(e, t, limit, enif_get_local_pid(e->env, t, &pid));
        return;
    }
    case ERL_NIF_TERM_TYPE_PORT: {
        ErlNifPort port;
        enc_local(e, t, limit, enif_get_local_port(e->env, t, &port));
        return;
    }
    case ERL_NIF_TERM_TYPE_FUN:
        enc_fun(e, t, limit);
        return;
    default: /* references */
        enc_ext(e, t, limit);
        return;
    }
}

/* ---- user data: what the payload mode keeps --------------------------------- */

/* A user-data term within the mode's budget. */
static void enc_user(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                     unsigned depth)
{
    if (e->pl->mode == TK_PAYLOAD_NONE) {
        tk_put_u8(&e->w, TK_T_CUT);
        return;
    }
    bool saved = e->budget, saved_bound = e->budget_bound;
    size_t budget = e->pl->max_bytes;
    e->budget = true;
    e->budget_bound = budget < room(e, limit);
    if (e->budget_bound)
        limit = e->w.p + budget;
    enc_value(e, t, limit, depth);
    e->budget = saved;
    e->budget_bound = saved_bound;
}

/* {M, F, Args}: M and F whole, Args as their count (payload none) or
 * within the budget. Anything else (such as {M, F, Arity} under the arity
 * flag) is kept whole. */
static void enc_mfa(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                    unsigned depth)
{
    int n;
    const ERL_NIF_TERM *es;
    unsigned len;
    if (!tk_term_may_nest(depth) || !enif_get_tuple(e->env, t, &n, &es) ||
        n != 3 || !enif_get_list_length(e->env, es[2], &len)) {
        enc_value(e, t, limit, depth);
        return;
    }
    if (room(e, limit) < TK_T_HEAD_SIZE + 3 * TK_T_WORD_SIZE) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, TK_T_TUPLE);
    tk_put_varint(&e->w, 3);
    enc_value(e, es[0], limit - 2, depth + 1);
    enc_value(e, es[1], limit - 1, depth + 1);
    if (e->pl->mode == TK_PAYLOAD_NONE)
        enc_varint(e, TK_T_INT, tk_zigzag(len), limit);
    else
        enc_user(e, es[2], limit, depth + 1);
}

/* A tuple whose elements from `from` on are user data. */
static void enc_tail_user(enc *e, ERL_NIF_TERM t, const unsigned char *limit,
                          unsigned depth, int from)
{
    int n;
    const ERL_NIF_TERM *es;
    if (!tk_term_may_nest(depth) || !enif_get_tuple(e->env, t, &n, &es) ||
        n <= from) {
        enc_value(e, t, limit, depth);
        return;
    }
    if (room(e, limit) < 1 + tk_varint_len((uint64_t)n) + (size_t)n) {
        cut(e, limit);
        return;
    }
    tk_put_u8(&e->w, TK_T_TUPLE);
    tk_put_varint(&e->w, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        const unsigned char *l = limit - (n - 1 - i);
        if (i >= from)
            enc_user(e, es[i], l, depth + 1);
        else
            enc_value(e, es[i], l, depth + 1);
    }
}

/* The trace term (is_extra false) or the extra term of an event, as the
 * payload mode keeps it. */
static void enc_part(enc *e, unsigned tag, bool is_extra, ERL_NIF_TERM t,
                     const unsigned char *limit)
{
    if (e->pl->mode == TK_PAYLOAD_FULL) {
        enc_value(e, t, limit, 0);
        return;
    }
    int n;
    const ERL_NIF_TERM *es;
    switch (tk_tags[tag].part) {
    case TK_PART_MSG:
        if (!is_extra)
            return enc_user(e, t, limit, 0);
        break;
    case TK_PART_EXTRA:
        if (is_extra)
            return enc_user(e, t, limit, 0);
        break;
    case TK_PART_ARGS:
        if (!is_extra)
            return enc_mfa(e, t, limit, 0);
        break;
    case TK_PART_SPAWN:
        if (is_extra)
            return enc_mfa(e, t, limit, 0);
        break;
    case TK_PART_EXC: /* {Class, Value} */
        if (is_extra)
            return enc_tail_user(e, t, limit, 0, 1);
        break;
    case TK_PART_SEQ: /* {send, Serial, From, To, Msg}, {print, ..., Info} */
        if (!is_extra && enif_get_tuple(e->env, t, &n, &es) && n >= 2)
            return enc_tail_user(e, t, limit, 0, n - 1);
        break;
    case TK_PART_NONE:
        break;
    }
    enc_value(e, t, limit, 0);
}

/* A timestamp of kind `timestamp' or `cpu_timestamp', {Mega, Sec, Micro},
 * as TK_T_NOW: three varints (nine bytes for today's date, where the
 * tuple takes thirteen). Anything else as it is. */
static void enc_now(enc *e, ERL_NIF_TERM t, const unsigned char *limit)
{
    int n;
    const ERL_NIF_TERM *es;
    uint64_t part[3];
    size_t need = 1;
    if (!enif_get_tuple(e->env, t, &n, &es) || n != 3)
        return enc_value(e, t, limit, 0);
    for (int i = 0; i < 3; i++) {
        ErlNifSInt64 v;
        /* Small integers read from their word where its form was checked
         * at load (no NIF call). */
        if (e->c->words_ok && tk_is_small_word((uint64_t)es[i]))
            v = tk_small_value((uint64_t)es[i]);
        else if (!enif_get_int64(e->env, es[i], &v))
            return enc_value(e, t, limit, 0);
        if (v < 0)
            return enc_value(e, t, limit, 0);
        part[i] = (uint64_t)v;
        need += tk_varint_len(part[i]);
    }
    if (room(e, limit) < need)
        return enc_value(e, t, limit, 0);
    tk_put_u8(&e->w, TK_T_NOW);
    for (int i = 0; i < 3; i++)
        tk_put_varint(&e->w, part[i]);
}

/* ---- the event ---------------------------------------------------------------- */

static ERL_NIF_TERM field_term(const tk_event_in *ev, tk_event_field f)
{
    switch (f) {
    case TK_F_TRACEE: return ev->tracee;
    case TK_F_TS: return ev->ts;
    case TK_F_SCHED: return ev->sched;
    case TK_F_MSR: return ev->msr;
    case TK_F_EXTRA: return ev->extra;
    default: return ev->msg;
    }
}

size_t tk_enc_event(ErlNifEnv *env, const tk_codec *c, const tk_payload *pl,
                    const tk_event_in *ev, unsigned char *buf, size_t cap,
                    bool *short_of_room)
{
    TK_ASSERT(cap >= TK_EVENT_MIN_ROOM && ev->tag < TK_TAG_COUNT);
    enc e = {env, c, pl, {buf, buf + cap}, false, false, 0, 0};
    unsigned flags = (ev->extra ? TK_EV_EXTRA : 0) | (ev->msr ? TK_EV_MSR : 0) |
                     (ev->sched ? TK_EV_SCHED : 0);
    tk_put_u8(&e.w, flags | ev->ts_kind << 4);
    tk_put_u8(&e.w, ev->tag);
    unsigned present = 0;
    for (int f = 0; f < TK_F_COUNT; f++)
        present += tk_event_field_present((tk_event_field)f, flags, ev->ts_kind);
    for (int f = 0; f < TK_F_COUNT; f++) {
        if (!tk_event_field_present((tk_event_field)f, flags, ev->ts_kind))
            continue;
        /* One byte kept for each field still to come. */
        const unsigned char *limit = e.w.end - --present;
        ERL_NIF_TERM t = field_term(ev, (tk_event_field)f);
        switch (f) {
        case TK_F_MSR: /* {message, X}: user data */
            if (pl->mode == TK_PAYLOAD_FULL)
                enc_value(&e, t, limit, 0);
            else
                enc_user(&e, t, limit, 0);
            break;
        case TK_F_EXTRA:
            /* The extra term may take half of what is left; the trace
             * term gets the rest. */
            enc_part(&e, ev->tag, true, t, e.w.p + (room(&e, limit) + 1) / 2);
            break;
        case TK_F_MSG:
            enc_part(&e, ev->tag, false, t, limit);
            break;
        case TK_F_TS:
            if (ev->ts_kind == TK_TS_NOW || ev->ts_kind == TK_TS_CPU)
                enc_now(&e, t, limit);
            else
                enc_value(&e, t, limit, 0);
            break;
        default:
            enc_value(&e, t, limit, 0);
            break;
        }
    }
    *short_of_room = (e.cuts & CUT_ROOM) != 0;
#ifdef TK_DEBUG
    tk_event parsed;
    TK_ASSERT(tk_event_parse(buf, (size_t)(e.w.p - buf), &parsed) == 0);
#endif
    return (size_t)(e.w.p - buf);
}

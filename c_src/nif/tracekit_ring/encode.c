/* encode.c: trace terms into records, before trace/5 returns (the terms
 * live on the tracee's heap). No allocation, except enif_term_to_binary for
 * the few term types the NIF API cannot take apart (see term_format.h).
 *
 * Every write is bounded by a limit; what does not fit is replaced by the
 * marker '...' (lists keep their first elements and end in '...', binaries
 * keep a prefix), so a record is always complete and decodable. */
#include <string.h>

#include "ring.h"
#include "term_format.h"

void enc_u8(enc_buf *b, unsigned v) { *b->p++ = (unsigned char)v; }

void enc_word(enc_buf *b, uint64_t w)
{
    memcpy(b->p, &w, 8);
    b->p += 8;
}

static void enc_u32(enc_buf *b, uint32_t v)
{
    memcpy(b->p, &v, 4);
    b->p += 4;
}

static inline size_t room(const enc_buf *b, const unsigned char *limit)
{
    return limit > b->p ? (size_t)(limit - b->p) : 0;
}

void enc_marker(enc_buf *b) { enc_u8(b, T_CUT); }

/* External term format for what the NIF API cannot take apart. */
static void enc_ext(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t,
                    const unsigned char *limit)
{
    ErlNifBinary bin;
    if (!enif_term_to_binary(env, t, &bin)) {
        enc_marker(b);
        return;
    }
    if (room(b, limit) >= 5 + bin.size && bin.size <= UINT32_MAX) {
        enc_u8(b, T_EXT);
        enc_u32(b, (uint32_t)bin.size);
        memcpy(b->p, bin.data, bin.size);
        b->p += bin.size;
    } else {
        enc_marker(b);
    }
    enif_release_binary(&bin);
}

bool imm_ok;

bool imm_check(ErlNifEnv *env)
{
    ErlNifBinary bin;
    ERL_NIF_TERM imm[] = {enif_make_atom(env, "ok"), enif_make_int(env, 0),
                          enif_make_int(env, -5), enif_make_int64(env, 1ll << 40),
                          enif_make_list(env, 0)};
    if (!enif_alloc_binary(4, &bin))
        return false;
    ERL_NIF_TERM other[] = {enif_make_tuple(env, 0),
                            enif_make_tuple1(env, imm[0]),
                            enif_make_list1(env, imm[0]),
                            enif_make_uint64(env, UINT64_MAX), /* a bignum */
                            enif_make_double(env, 1.5),
                            enif_make_binary(env, &bin), enif_make_ref(env),
                            enif_make_new_map(env)};
    for (size_t i = 0; i < sizeof imm / sizeof imm[0]; i++)
        if ((imm[i] & 3) != 3)
            return false;
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        if ((other[i] & 3) == 3)
            return false;
    return true;
}

/* Precondition: room(b, limit) >= 1 (there is always room for a marker). */
static void enc_rec(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t,
                    const unsigned char *limit, int depth)
{
    if (is_imm(t)) { /* no NIF call needed: the word is the term */
        if (room(b, limit) < 9) {
            enc_marker(b);
            return;
        }
        enc_u8(b, T_IMM);
        enc_word(b, (uint64_t)t);
        return;
    }
    if (depth > TERM_MAX_DEPTH) {
        enc_marker(b);
        return;
    }
    switch (enif_term_type(env, t)) {
    case ERL_NIF_TERM_TYPE_ATOM:
        if (room(b, limit) < 9)
            break;
        enc_u8(b, T_ATOM);
        enc_word(b, (uint64_t)t);
        return;
    case ERL_NIF_TERM_TYPE_INTEGER: {
        ErlNifSInt64 i;
        if (!enif_get_int64(env, t, &i)) {
            enc_ext(env, b, t, limit); /* bignum */
            return;
        }
        if (room(b, limit) < 9)
            break;
        enc_u8(b, T_INT);
        enc_word(b, (uint64_t)i);
        return;
    }
    case ERL_NIF_TERM_TYPE_FLOAT: {
        double d;
        uint64_t w;
        if (room(b, limit) < 9 || !enif_get_double(env, t, &d))
            break;
        memcpy(&w, &d, 8);
        enc_u8(b, T_FLOAT);
        enc_word(b, w);
        return;
    }
    case ERL_NIF_TERM_TYPE_BITSTRING: {
        ErlNifBinary bin;
        if (!enif_inspect_binary(env, t, &bin) || bin.size > UINT32_MAX) {
            enc_ext(env, b, t, limit); /* not a whole number of bytes */
            return;
        }
        if (room(b, limit) >= 5 + bin.size) {
            enc_u8(b, T_BIN);
            enc_u32(b, (uint32_t)bin.size);
            memcpy(b->p, bin.data, bin.size);
            b->p += bin.size;
            return;
        }
        if (room(b, limit) < 13 + 8)
            break;
        size_t keep = room(b, limit) - 13;
        enc_u8(b, T_BINCUT);
        enc_u32(b, (uint32_t)keep);
        enc_word(b, (uint64_t)bin.size);
        memcpy(b->p, bin.data, keep);
        b->p += keep;
        return;
    }
    case ERL_NIF_TERM_TYPE_LIST: {
        if (enif_is_empty_list(env, t)) {
            enc_u8(b, T_NIL);
            return;
        }
        if (room(b, limit) < 5 + 2)
            break;
        enc_u8(b, T_LIST);
        unsigned char *count_at = b->p;
        enc_u32(b, 0);
        uint32_t n = 0;
        ERL_NIF_TERM head, tail = t;
        /* Each element may use all but the byte kept for the tail. */
        while (enif_get_list_cell(env, tail, &head, &tail)) {
            unsigned char *at = b->p;
            if (room(b, limit) >= 2)
                enc_rec(env, b, head, limit - 1, depth + 1);
            if (b->p == at || (b->p == at + 1 && *at == T_CUT)) {
                /* This element did not fit: the list ends here, with the
                 * marker as its tail. */
                b->p = at;
                tail = 0;
                break;
            }
            n++;
        }
        memcpy(count_at, &n, 4);
        if (tail == 0)
            enc_marker(b);
        else if (enif_is_empty_list(env, tail))
            enc_u8(b, T_NIL);
        else
            enc_rec(env, b, tail, limit, depth + 1); /* improper list */
        return;
    }
    case ERL_NIF_TERM_TYPE_TUPLE: {
        int n;
        const ERL_NIF_TERM *es;
        if (!enif_get_tuple(env, t, &n, &es) || room(b, limit) < 5 + (size_t)n)
            break;
        enc_u8(b, T_TUPLE);
        enc_u32(b, (uint32_t)n);
        /* Keep one byte for each element still to come. */
        for (int i = 0; i < n; i++)
            enc_rec(env, b, es[i], limit - (n - 1 - i), depth + 1);
        return;
    }
    case ERL_NIF_TERM_TYPE_MAP: {
        size_t n;
        ErlNifMapIterator it;
        if (!enif_get_map_size(env, t, &n) || room(b, limit) < 5 + 2 * n ||
            n > UINT32_MAX)
            break;
        if (!enif_map_iterator_create(env, t, &it, ERL_NIF_MAP_ITERATOR_FIRST))
            break;
        enc_u8(b, T_MAP);
        enc_u32(b, (uint32_t)n);
        size_t left = 2 * n;
        ERL_NIF_TERM k, v;
        while (left > 0 && enif_map_iterator_get_pair(env, &it, &k, &v)) {
            enc_rec(env, b, k, limit - (left - 1), depth + 1);
            left--;
            enc_rec(env, b, v, limit - (left - 1), depth + 1);
            left--;
            enif_map_iterator_next(env, &it);
        }
        enif_map_iterator_destroy(env, &it);
        while (left-- > 0) /* a map changing under us cannot happen */
            enc_marker(b);
        return;
    }
    case ERL_NIF_TERM_TYPE_PID: {
        ErlNifPid pid;
        if (!enif_get_local_pid(env, t, &pid)) {
            enc_ext(env, b, t, limit);
            return;
        }
        if (room(b, limit) < 9)
            break;
        enc_u8(b, T_PID);
        enc_word(b, (uint64_t)t);
        return;
    }
    case ERL_NIF_TERM_TYPE_PORT: {
        ErlNifPort port;
        if (!enif_get_local_port(env, t, &port)) {
            enc_ext(env, b, t, limit);
            return;
        }
        if (room(b, limit) < 9)
            break;
        enc_u8(b, T_PORT);
        enc_word(b, (uint64_t)t);
        return;
    }
    default: /* references, funs */
        enc_ext(env, b, t, limit);
        return;
    }
    enc_marker(b);
}

void enc_term(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t)
{
    enc_rec(env, b, t, b->end, 0);
}

void enc_pid_or_term(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t)
{
    ErlNifPid pid;
    if (is_imm(t)) {
        enc_term(env, b, t);
        return;
    }
    if (room(b, b->end) >= 9 && enif_get_local_pid(env, t, &pid)) {
        enc_u8(b, T_PID);
        enc_word(b, (uint64_t)t);
        return;
    }
    enc_term(env, b, t);
}

void enc_term_budget(ErlNifEnv *env, enc_buf *b, ERL_NIF_TERM t,
                     size_t budget)
{
    const unsigned char *limit = b->end;
    if (budget < room(b, limit))
        limit = b->p + (budget > 0 ? budget : 1);
    enc_rec(env, b, t, limit, 0);
}

/* What the payload mode leaves of a user-data term. */
static void enc_user(ErlNifEnv *env, enc_buf *b, const ring_res *r,
                     ERL_NIF_TERM t)
{
    if (r->payload == PAYLOAD_NONE)
        enc_marker(b);
    else
        enc_term_budget(env, b, t, r->max_bytes);
}

/* {M, F, Args}: M and F in full, Args as their count (payload none) or
 * within the budget. Anything else (such as {M, F, Arity} under the arity
 * flag) is kept whole. */
static void enc_mfa(ErlNifEnv *env, enc_buf *b, const ring_res *r,
                    ERL_NIF_TERM t)
{
    int n;
    const ERL_NIF_TERM *es;
    unsigned len;
    if (!enif_get_tuple(env, t, &n, &es) || n != 3 ||
        !enif_get_list_length(env, es[2], &len)) {
        enc_term(env, b, t);
        return;
    }
    if (room(b, b->end) < 5 + 3 * 9 + 1) {
        enc_marker(b);
        return;
    }
    enc_u8(b, T_TUPLE);
    enc_u32(b, 3);
    enc_rec(env, b, es[0], b->end - 2, 1);
    enc_rec(env, b, es[1], b->end - 1, 1);
    if (r->payload == PAYLOAD_NONE) {
        enc_u8(b, T_INT);
        enc_word(b, len);
    } else {
        enc_term_budget(env, b, es[2], r->max_bytes);
    }
}

/* A tuple whose last element (from element `from` on) is user data. */
static void enc_tail_user(ErlNifEnv *env, enc_buf *b, const ring_res *r,
                          ERL_NIF_TERM t, int from)
{
    int n;
    const ERL_NIF_TERM *es;
    if (!enif_get_tuple(env, t, &n, &es) || n <= from) {
        enc_term(env, b, t);
        return;
    }
    if (room(b, b->end) < 5 + (size_t)n) {
        enc_marker(b);
        return;
    }
    enc_u8(b, T_TUPLE);
    enc_u32(b, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        if (i >= from)
            enc_user(env, b, r, es[i]);
        else
            enc_rec(env, b, es[i], b->end - (n - 1 - i), 1);
    }
}

void enc_payload(ErlNifEnv *env, enc_buf *b, const ring_res *r,
                 payload_part part, bool is_extra, ERL_NIF_TERM t)
{
    if (r->payload == PAYLOAD_FULL) {
        enc_term(env, b, t);
        return;
    }
    switch (part) {
    case PART_MSG:
        if (!is_extra) {
            enc_user(env, b, r, t);
            return;
        }
        break;
    case PART_EXTRA:
        if (is_extra) {
            enc_user(env, b, r, t);
            return;
        }
        break;
    case PART_ARGS:
        if (!is_extra) {
            enc_mfa(env, b, r, t);
            return;
        }
        break;
    case PART_SPAWN:
        if (is_extra) {
            enc_mfa(env, b, r, t);
            return;
        }
        break;
    case PART_EXC: /* {Class, Value} */
        if (is_extra) {
            enc_tail_user(env, b, r, t, 1);
            return;
        }
        break;
    case PART_SEQ: /* {send, Serial, From, To, Msg}, {print, ..., Info} */
        if (!is_extra) {
            int n;
            const ERL_NIF_TERM *es;
            if (enif_get_tuple(env, t, &n, &es) && n >= 2) {
                enc_tail_user(env, b, r, t, n - 1);
                return;
            }
        }
        break;
    case PART_NONE:
        break;
    }
    enc_term(env, b, t);
}

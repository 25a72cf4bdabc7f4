/* Tests of the record format (tk_term.h): records written with the
 * writer's primitives, in the documented field order, read back by
 * tk_event_parse; and what the reader refuses. */
#include "tk_tags.h"
#include "tk_term.h"
#include "tk_test.h"

#include <string.h>

static void put_int(tk_wbuf *w, int64_t v)
{
    tk_put_u8(w, TK_T_INT);
    tk_put_varint(w, tk_zigzag(v));
}

/* A tuple of n small integers 0..n-1. */
static void put_tuple(tk_wbuf *w, uint32_t n)
{
    tk_put_u8(w, TK_T_TUPLE);
    tk_put_varint(w, n);
    for (uint32_t i = 0; i < n; i++)
        put_int(w, i);
}

/* Every field present: they come back in the order tk_term.h gives, each
 * span holding exactly the term written there. */
TK_TEST(term_event_fields_round_trip)
{
    unsigned char buf[512];
    tk_wbuf w = {buf, buf + sizeof buf};
    unsigned flags = TK_EV_EXTRA | TK_EV_MSR | TK_EV_SCHED;
    tk_put_u8(&w, flags | TK_TS_STRICT << 4);
    tk_put_u8(&w, TK_TAG_call);
    const unsigned char *at[TK_F_COUNT + 1];
    at[TK_F_TRACEE] = w.p;
    put_int(&w, 1001);             /* tracee */
    at[TK_F_TS] = w.p;
    put_tuple(&w, 2);              /* timestamp {Mono, Unique} */
    at[TK_F_SCHED] = w.p;
    put_int(&w, 3);                /* scheduler id */
    at[TK_F_MSR] = w.p;
    tk_put_u8(&w, TK_T_CUT);       /* match-spec result */
    at[TK_F_EXTRA] = w.p;
    tk_put_u8(&w, TK_T_BIN);       /* extra */
    tk_put_varint(&w, 3);
    tk_put_bytes(&w, "abc", 3);
    at[TK_F_MSG] = w.p;
    put_tuple(&w, 3);              /* trace term */
    at[TK_F_COUNT] = w.p;

    tk_event ev;
    TK_REQUIRE(tk_event_parse(buf, (size_t)(w.p - buf), &ev) == 0);
    TK_CHECK_EQ(ev.flags, flags);
    TK_CHECK_EQ(ev.ts_kind, TK_TS_STRICT);
    TK_CHECK_EQ(ev.tag, TK_TAG_call);
    for (int f = 0; f < TK_F_COUNT; f++) {
        TK_CHECK(ev.field[f].p == at[f]);
        TK_CHECK_EQ(ev.field[f].len, at[f + 1] - at[f]);
    }
    TK_CHECK(strcmp(tk_tags[ev.tag].name, "call") == 0);
}

/* Absent fields are empty spans; the others keep their order. */
TK_TEST(term_event_optional_fields)
{
    unsigned char buf[64];
    tk_wbuf w = {buf, buf + sizeof buf};
    tk_put_u8(&w, TK_EV_EXTRA); /* no timestamp, no msr, no sched */
    tk_put_u8(&w, TK_TAG_send);
    put_int(&w, 7);
    tk_put_u8(&w, TK_T_NIL);
    put_int(&w, 8);
    tk_event ev;
    TK_REQUIRE(tk_event_parse(buf, (size_t)(w.p - buf), &ev) == 0);
    TK_CHECK_EQ(ev.field[TK_F_TS].len, 0);
    TK_CHECK_EQ(ev.field[TK_F_SCHED].len, 0);
    TK_CHECK_EQ(ev.field[TK_F_MSR].len, 0);
    TK_CHECK_EQ(ev.field[TK_F_EXTRA].len, 1);
    TK_CHECK_EQ(ev.field[TK_F_EXTRA].p[0], TK_T_NIL);
    TK_CHECK_EQ(ev.field[TK_F_MSG].len, 2);
}

/* A list or tuple nested to depth d (d containers), then a leaf. */
static size_t nest(unsigned char *buf, size_t cap, unsigned d, int list)
{
    tk_wbuf w = {buf, buf + cap};
    tk_put_u8(&w, 0);
    tk_put_u8(&w, TK_TAG_send);
    put_int(&w, 1); /* tracee */
    for (unsigned i = 0; i < d; i++) {
        tk_put_u8(&w, list ? TK_T_LIST : TK_T_TUPLE);
        tk_put_varint(&w, 1);
    }
    tk_put_u8(&w, TK_T_CUT);
    for (unsigned i = 0; list && i < d; i++)
        tk_put_u8(&w, TK_T_NIL); /* each list's tail */
    return (size_t)(w.p - buf);
}

/* The nesting rule: containers may be opened at depths 0 .. MAX - 1, so
 * MAX nested containers parse and one more does not. */
TK_TEST(term_nesting_rule)
{
    static unsigned char buf[4096];
    tk_event ev;
    for (int list = 0; list < 2; list++) {
        size_t n = nest(buf, sizeof buf, TK_TERM_MAX_DEPTH, list);
        TK_CHECK_EQ(tk_event_parse(buf, n, &ev), 0);
        n = nest(buf, sizeof buf, TK_TERM_MAX_DEPTH + 1, list);
        TK_CHECK_EQ(tk_event_parse(buf, n, &ev), -1);
    }
    TK_CHECK(tk_term_may_nest(TK_TERM_MAX_DEPTH - 1));
    TK_CHECK(!tk_term_may_nest(TK_TERM_MAX_DEPTH));
}

/* Whatever is cut short, has a bad tag, a count beyond the bytes, or bytes
 * left over, is refused. */
TK_TEST(term_parse_refuses_malformed_records)
{
    unsigned char buf[64];
    tk_event ev;
    tk_wbuf w = {buf, buf + sizeof buf};
    tk_put_u8(&w, 0);
    tk_put_u8(&w, TK_TAG_send);
    put_int(&w, 1);
    tk_put_u8(&w, TK_T_BIN);
    tk_put_varint(&w, 4);
    tk_put_bytes(&w, "abcd", 4);
    size_t n = (size_t)(w.p - buf);
    TK_REQUIRE(tk_event_parse(buf, n, &ev) == 0);
    for (size_t cut = 0; cut < n; cut++) /* every prefix is incomplete */
        TK_CHECK_EQ(tk_event_parse(buf, cut, &ev), -1);
    buf[n] = TK_T_NIL; /* trailing bytes */
    TK_CHECK_EQ(tk_event_parse(buf, n + 1, &ev), -1);
    buf[1] = TK_TAG_COUNT; /* no such tag */
    TK_CHECK_EQ(tk_event_parse(buf, n, &ev), -1);
    buf[1] = TK_TAG_send;
    buf[0] = 8; /* an unknown flag */
    TK_CHECK_EQ(tk_event_parse(buf, n, &ev), -1);
    buf[0] = (TK_TS_LAST + 1) << 4; /* an unknown timestamp kind */
    TK_CHECK_EQ(tk_event_parse(buf, n, &ev), -1);
    buf[0] = 0;
    buf[4] = TK_T_LAST + 1; /* an unknown term tag */
    TK_CHECK_EQ(tk_event_parse(buf, n, &ev), -1);
    /* A tuple claiming more elements than there are bytes. */
    w = (tk_wbuf){buf, buf + sizeof buf};
    tk_put_u8(&w, 0);
    tk_put_u8(&w, TK_TAG_send);
    put_int(&w, 1);
    tk_put_u8(&w, TK_T_TUPLE);
    tk_put_varint(&w, 0xffffffffu);
    put_int(&w, 2);
    TK_CHECK_EQ(tk_event_parse(buf, (size_t)(w.p - buf), &ev), -1);
    /* A count of 2^32 (no count is that large), and a varint past 64
     * bits. */
    w = (tk_wbuf){buf + 4, buf + sizeof buf};
    tk_put_varint(&w, 1ull << 32);
    tk_put_u8(&w, TK_T_NIL);
    TK_CHECK_EQ(tk_event_parse(buf, (size_t)(w.p - buf), &ev), -1);
    w = (tk_wbuf){buf + 3, buf + sizeof buf};
    for (int i = 0; i < 9; i++)
        tk_put_u8(&w, 0xff);
    tk_put_u8(&w, 2); /* bit 64 */
    TK_CHECK_EQ(tk_event_parse(buf, (size_t)(w.p - buf), &ev), -1);
    buf[12] = 1; /* bit 63: the largest varint */
    w = (tk_wbuf){buf, buf + 13};
    TK_CHECK_EQ(tk_event_parse(buf, 13, &ev), -1); /* (a send has a message) */
    buf[13] = TK_T_NIL;
    TK_CHECK_EQ(tk_event_parse(buf, 14, &ev), 0);
}

/* Varints: every length from 1 to 10 bytes reads back what was written,
 * as tk_varint_len says, and the padded form written in place of a count
 * reads back the same; zigzag keeps every sign and magnitude. */
TK_TEST(term_varints_round_trip)
{
    unsigned char buf[16];
    uint64_t vals[] = {0, 1, 127, 128, 16383, 16384, UINT32_MAX, 1ull << 32,
                       (1ull << 63) - 1, 1ull << 63, UINT64_MAX};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        tk_wbuf w = {buf, buf + sizeof buf};
        tk_put_varint(&w, vals[i]);
        TK_CHECK_EQ((size_t)(w.p - buf), tk_varint_len(vals[i]));
        tk_rbuf r = {buf, w.p};
        uint64_t v = 0;
        TK_CHECK(tk_get_varint(&r, &v) && v == vals[i] && r.p == w.p);
        for (size_t width = tk_varint_len(vals[i]); width <= 10; width++) {
            tk_put_varint_at(buf, vals[i], width);
            r = (tk_rbuf){buf, buf + width};
            TK_CHECK(tk_get_varint(&r, &v) && v == vals[i] && r.p == buf + width);
        }
        int64_t s = (int64_t)vals[i];
        TK_CHECK_EQ(tk_unzigzag(tk_zigzag(s)), s);
    }
    TK_CHECK_EQ(tk_zigzag(-1), 1);
    TK_CHECK_EQ(tk_zigzag(1), 2);
    TK_CHECK_EQ(tk_zigzag(INT64_MIN), UINT64_MAX);
    /* Immediates: the word without its low bits, signed. */
    uint64_t words[] = {3, 0xf, 0x1234567b, UINT64_MAX, (uint64_t)-16 | 0xf};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        TK_CHECK_EQ(tk_imm_word(tk_imm_value(words[i])), words[i]);
    TK_CHECK_EQ(tk_varint_len(tk_zigzag(tk_imm_value(UINT64_MAX))), 1);
}

/* tk_varint_len and tk_varint_word against the plain LEB128 loop, for
 * values of every count of significant bits (0 to 64): the smallest, the
 * largest and scattered ones between; tk_varint_word also padded to more
 * bytes than the value needs, up to 8. */
static size_t plain_varint(unsigned char *p, uint64_t v, size_t width)
{
    size_t n = 0;
    do {
        p[n++] = (unsigned char)(v & 0x7f);
        v >>= 7;
    } while (v != 0 || n < width);
    for (size_t i = 0; i + 1 < n; i++)
        p[i] |= 0x80;
    return n;
}

TK_TEST(term_varint_len_and_word_every_bit_count)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (unsigned bits = 0; bits <= 64; bits++) {
        uint64_t top = bits == 0 ? 0 : UINT64_C(1) << (bits - 1);
        uint64_t below = top == 0 ? 0 : top - 1; /* the bits under the top one */
        for (int i = 0; i < 66; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            uint64_t v = i == 0 ? top : i == 1 ? top | below : top | (x & below);
            unsigned char want[16], got[8];
            size_t n = plain_varint(want, v, 1);
            TK_CHECK_EQ(tk_varint_len(v), n);
            for (size_t width = n; width <= 8; width++) {
                TK_CHECK_EQ(plain_varint(want, v, width), width);
                uint64_t w = tk_varint_word(v, width);
                memcpy(got, &w, 8);
                TK_CHECK(memcmp(got, want, width) == 0);
                for (size_t b = width; b < 8; b++)
                    TK_CHECK_EQ(got[b], 0);
            }
        }
    }
}

/* A fake VM: words below 1000 are small integers (word / 16), others
 * dictionary entries (word - 1000); word 999 cannot be said. */
static int fake_imm(void *ctx, uint64_t word, int *is_int, int64_t *ival,
                    uint32_t *index)
{
    int *calls = ctx;
    (*calls)++;
    if (word == 999)
        return -1;
    *is_int = word < 1000;
    *ival = (int64_t)(word / 16);
    *index = (uint32_t)(word - 1000);
    return 0;
}

static void put_imm(tk_wbuf *w, uint64_t word)
{
    tk_put_u8(w, TK_T_IMM);
    tk_put_varint(w, tk_zigzag(tk_imm_value(word)));
}

/* The file form: immediates become integers or dictionary entries, every
 * other term is copied as it is, within TK_EVENT_FILE_ROOM. */
TK_TEST(term_event_to_file_form)
{
    unsigned char buf[256], out[768];
    tk_wbuf w = {buf, buf + sizeof buf};
    tk_put_u8(&w, TK_EV_EXTRA);
    tk_put_u8(&w, TK_TAG_send);
    put_imm(&w, 1007); /* tracee: a pid, entry 7 */
    put_imm(&w, 83);   /* extra: small integer 5 */
    tk_put_u8(&w, TK_T_LIST);   /* message: [atom entry 3, 3.0 | "hi"] */
    tk_put_varint(&w, 2);
    put_imm(&w, 1003);
    double f = 3.0;
    uint64_t fw;
    memcpy(&fw, &f, 8);
    tk_put_u8(&w, TK_T_FLOAT);
    tk_put_word(&w, fw);
    tk_put_u8(&w, TK_T_BIN);
    tk_put_varint(&w, 2);
    tk_put_bytes(&w, "hi", 2);
    size_t len = (size_t)(w.p - buf);
    int calls = 0;
    tk_xlate x = {fake_imm, &calls};
    size_t n = tk_event_to_file(buf, len, out, &x);
    TK_REQUIRE(n > 0 && n <= TK_EVENT_FILE_ROOM(len));
    TK_CHECK_EQ(calls, 3);
    tk_event ev;
    TK_REQUIRE(tk_event_parse(out, n, &ev) == 0);
    TK_CHECK_EQ(ev.field[TK_F_TRACEE].p[0], TK_T_DICT);
    TK_CHECK_EQ(ev.field[TK_F_TRACEE].p[1], 7);
    TK_CHECK_EQ(ev.field[TK_F_EXTRA].p[0], TK_T_INT);
    TK_CHECK_EQ(ev.field[TK_F_EXTRA].p[1], tk_zigzag(5));
    const unsigned char *m = ev.field[TK_F_MSG].p;
    TK_CHECK_EQ(m[0], TK_T_LIST);
    TK_CHECK_EQ(m[1], 2);
    TK_CHECK_EQ(m[2], TK_T_DICT);
    TK_CHECK_EQ(m[3], 3);
    TK_CHECK_EQ(m[4], TK_T_FLOAT);
    TK_CHECK(memcmp(m + 5, &fw, 8) == 0);
    TK_CHECK_EQ(m[13], TK_T_BIN);
    /* A word the VM side cannot say leaves the record out. */
    w = (tk_wbuf){buf + 2, buf + sizeof buf};
    put_imm(&w, 999);
    TK_CHECK_EQ(tk_event_to_file(buf, len, out, &x), 0);
}

/* The worst growth of the file form: one-byte immediates that become
 * references to entries past 2^28 (a varint of 5 bytes). */
static int far_entry(void *ctx, uint64_t word, int *is_int, int64_t *ival,
                     uint32_t *index)
{
    (void)ctx;
    (void)word;
    *is_int = 0;
    *ival = 0;
    *index = UINT32_MAX;
    return 0;
}

TK_TEST(term_event_to_file_room)
{
    unsigned char buf[64], out[3 * 64];
    tk_wbuf w = {buf, buf + sizeof buf};
    tk_put_u8(&w, 0);
    tk_put_u8(&w, TK_TAG_send);
    put_imm(&w, 3); /* value 0: one byte */
    tk_put_u8(&w, TK_T_TUPLE);
    tk_put_varint(&w, 20);
    for (int i = 0; i < 20; i++)
        put_imm(&w, 3);
    size_t len = (size_t)(w.p - buf);
    tk_xlate x = {far_entry, NULL};
    size_t n = tk_event_to_file(buf, len, out, &x);
    TK_CHECK_EQ(n, 2 + 6 + 2 + 20 * 6);
    TK_CHECK(n <= TK_EVENT_FILE_ROOM(len));
    tk_event ev;
    TK_CHECK_EQ(tk_event_parse(out, n, &ev), 0);
}

/* Version 1 records (fixed-width numbers) in today's form: each term
 * read back with its value, and what version 1 refuses refused. */
TK_TEST(term_event_from_v1)
{
    unsigned char v1[128], out[256];
    size_t n = 0;
    uint32_t u;
    uint64_t q;
    v1[n++] = TK_EV_EXTRA;
    v1[n++] = TK_TAG_send;
    v1[n++] = 14; /* DICT 300 */
    u = 300, memcpy(v1 + n, &u, 4), n += 4;
    v1[n++] = 13; /* INT32 -7 */
    u = (uint32_t)-7, memcpy(v1 + n, &u, 4), n += 4;
    v1[n++] = TK_T_TUPLE; /* {INT -(2^40), BINCUT "ab" of 9, FLOAT} */
    u = 3, memcpy(v1 + n, &u, 4), n += 4;
    v1[n++] = TK_T_INT;
    q = (uint64_t)-(1ll << 40), memcpy(v1 + n, &q, 8), n += 8;
    v1[n++] = TK_T_BINCUT;
    u = 2, memcpy(v1 + n, &u, 4), n += 4;
    q = 9, memcpy(v1 + n, &q, 8), n += 8;
    v1[n++] = 'a', v1[n++] = 'b';
    v1[n++] = TK_T_FLOAT;
    memset(v1 + n, 0, 8), n += 8;
    size_t m = tk_event_from_v1(v1, n, out);
    TK_REQUIRE(m > 0 && m <= TK_EVENT_V1_ROOM(n));
    tk_event ev;
    TK_REQUIRE(tk_event_parse(out, m, &ev) == 0);
    tk_rbuf r = {ev.field[TK_F_TRACEE].p, ev.field[TK_F_TRACEE].p + ev.field[TK_F_TRACEE].len};
    unsigned tag;
    uint32_t k;
    int64_t s;
    TK_CHECK(tk_get_u8(&r, &tag) && tag == TK_T_DICT && tk_get_len(&r, &k) && k == 300);
    r = (tk_rbuf){ev.field[TK_F_EXTRA].p, ev.field[TK_F_EXTRA].p + ev.field[TK_F_EXTRA].len};
    TK_CHECK(tk_get_u8(&r, &tag) && tag == TK_T_INT && tk_get_svarint(&r, &s) && s == -7);
    r = (tk_rbuf){ev.field[TK_F_MSG].p, ev.field[TK_F_MSG].p + ev.field[TK_F_MSG].len};
    TK_CHECK(tk_get_u8(&r, &tag) && tag == TK_T_TUPLE && tk_get_len(&r, &k) && k == 3);
    TK_CHECK(tk_get_u8(&r, &tag) && tag == TK_T_INT && tk_get_svarint(&r, &s) &&
             s == -(1ll << 40));
    uint64_t total;
    TK_CHECK(tk_get_u8(&r, &tag) && tag == TK_T_BINCUT && tk_get_len(&r, &k) && k == 2 &&
             tk_get_varint(&r, &total) && total == 9 && r.p[0] == 'a');
    /* Cut short anywhere, a VM word (IMM32), or bytes left over: refused. */
    for (size_t cut = 0; cut < n; cut++)
        TK_CHECK_EQ(tk_event_from_v1(v1, cut, out), 0);
    v1[n] = TK_T_NIL;
    TK_CHECK_EQ(tk_event_from_v1(v1, n + 1, out), 0);
    v1[2] = 2;
    TK_CHECK_EQ(tk_event_from_v1(v1, n, out), 0);
}

/* Random bytes: the parser, the file check and the version 1 reader never
 * read past a record, and whatever the version 1 reader accepts parses. */
TK_TEST(term_random_bytes)
{
    static unsigned char rec[64], out[2 * 64];
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint32_t lens[4] = {1, 2, 3, 4};
    for (int round = 0; round < 200000; round++) {
        size_t n = 2 + (size_t)(seed % 40);
        for (size_t i = 0; i < n; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            /* mostly small bytes: tags and short varints */
            rec[i] = (unsigned char)(seed % 3 == 0 ? seed >> 8 : (seed >> 8) % 16);
        }
        rec[0] &= 0x47;
        rec[1] %= TK_TAG_COUNT;
        tk_event ev;
        uint64_t refs;
        (void)tk_event_parse(rec, n, &ev);
        (void)tk_event_file_check(rec, n, lens, 4, &refs);
        size_t m = tk_event_from_v1(rec, n, out);
        TK_CHECK(m <= TK_EVENT_V1_ROOM(n));
        if (m > 0)
            TK_CHECK_EQ(tk_event_parse(out, m, &ev), 0);
    }
}

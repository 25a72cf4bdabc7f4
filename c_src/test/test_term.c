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
    tk_put_word(w, (uint64_t)v);
}

/* A tuple of n small integers 0..n-1. */
static void put_tuple(tk_wbuf *w, uint32_t n)
{
    tk_put_u8(w, TK_T_TUPLE);
    tk_put_u32(w, n);
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
    tk_put_u32(&w, 3);
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
    TK_CHECK_EQ(ev.field[TK_F_MSG].len, 9);
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
        tk_put_u32(&w, 1);
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
    tk_put_u32(&w, 4);
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
    buf[11] = TK_T_LAST + 1; /* an unknown term tag */
    TK_CHECK_EQ(tk_event_parse(buf, n, &ev), -1);
    /* A tuple claiming more elements than there are bytes. */
    w = (tk_wbuf){buf, buf + sizeof buf};
    tk_put_u8(&w, 0);
    tk_put_u8(&w, TK_TAG_send);
    put_int(&w, 1);
    tk_put_u8(&w, TK_T_TUPLE);
    tk_put_u32(&w, 0xffffffffu);
    put_int(&w, 2);
    TK_CHECK_EQ(tk_event_parse(buf, (size_t)(w.p - buf), &ev), -1);
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

/* The file form: immediates become integers or dictionary entries, every
 * other term is copied as it is, and the result is never longer. */
TK_TEST(term_event_to_file_form)
{
    unsigned char buf[256], out[256];
    tk_wbuf w = {buf, buf + sizeof buf};
    tk_put_u8(&w, TK_EV_EXTRA);
    tk_put_u8(&w, TK_TAG_send);
    tk_put_u8(&w, TK_T_IMM); /* tracee: a pid, entry 7 */
    tk_put_word(&w, 1007);
    tk_put_u8(&w, TK_T_IMM32); /* extra: small integer 5 */
    tk_put_u32(&w, 80);
    tk_put_u8(&w, TK_T_LIST); /* message: [atom entry 2, 3.0 | 1.5] */
    tk_put_u32(&w, 2);
    tk_put_u8(&w, TK_T_IMM32);
    tk_put_u32(&w, 1002);
    double f = 3.0;
    uint64_t fw;
    memcpy(&fw, &f, 8);
    tk_put_u8(&w, TK_T_FLOAT);
    tk_put_word(&w, fw);
    tk_put_u8(&w, TK_T_BIN);
    tk_put_u32(&w, 2);
    tk_put_bytes(&w, "hi", 2);
    size_t len = (size_t)(w.p - buf);
    int calls = 0;
    tk_xlate x = {fake_imm, &calls};
    size_t n = tk_event_to_file(buf, len, out, &x);
    TK_REQUIRE(n > 0 && n <= len);
    TK_CHECK_EQ(calls, 3);
    tk_event ev;
    TK_REQUIRE(tk_event_parse(out, n, &ev) == 0);
    TK_CHECK_EQ(ev.field[TK_F_TRACEE].p[0], TK_T_DICT);
    uint32_t v;
    memcpy(&v, ev.field[TK_F_TRACEE].p + 1, 4);
    TK_CHECK_EQ(v, 7);
    TK_CHECK_EQ(ev.field[TK_F_EXTRA].p[0], TK_T_INT32);
    memcpy(&v, ev.field[TK_F_EXTRA].p + 1, 4);
    TK_CHECK_EQ(v, 5);
    const unsigned char *m = ev.field[TK_F_MSG].p;
    TK_CHECK_EQ(m[0], TK_T_LIST);
    TK_CHECK_EQ(m[5], TK_T_DICT);
    TK_CHECK_EQ(m[10], TK_T_FLOAT);
    TK_CHECK(memcmp(m + 11, &fw, 8) == 0);
    TK_CHECK_EQ(m[19], TK_T_BIN);
    /* A word the VM side cannot say leaves the record out. */
    buf[3] = 999 & 0xff;
    buf[4] = 999 >> 8;
    TK_CHECK_EQ(tk_event_to_file(buf, len, out, &x), 0);
}

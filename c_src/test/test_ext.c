/* Tests of the external-term check of trace files (tk_ext) and of the
 * readers' check of records in a file's form (tk_event_file_check). */
#include "tk_ext.h"
#include "tk_term.h"
#include "tk_test.h"

#include <stdlib.h>
#include <string.h>

/* A term's bytes being built: the version byte, then what is put. */
typedef struct {
    unsigned char *p;
    size_t len, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL)
            abort();
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put8(buf *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    put(b, &c, 1);
}

static void put16(buf *b, unsigned v)
{
    put8(b, v >> 8);
    put8(b, v & 255);
}

static void put32(buf *b, uint32_t v)
{
    put16(b, v >> 16);
    put16(b, v & 0xffff);
}

static buf term(void)
{
    buf b = {0};
    put8(&b, 131);
    return b;
}

/* An atom of n copies of the UTF-8 character c (1 to 4 bytes). */
static void utf8_atom(buf *b, const char *c, size_t n)
{
    size_t k = strlen(c);
    put8(b, 'v');
    put16(b, (unsigned)(n * k));
    for (size_t i = 0; i < n; i++)
        put(b, c, k);
}

static tk_ext_kind check(const buf *b)
{
    return tk_ext_check(b->p, b->len);
}

/* A pid of node `node` (an atom of n copies of c). */
static buf pid(const char *c, size_t n)
{
    buf b = term();
    put8(&b, 'X');
    utf8_atom(&b, c, n);
    put32(&b, 84);
    put32(&b, 0);
    put32(&b, 3);
    return b;
}

TK_TEST(ext_kinds_of_entries)
{
    buf a = term();
    put(&a, "w\2ok", 4);
    TK_CHECK_EQ(check(&a), TK_EXT_ATOM);
    buf p = pid("n", 10);
    TK_CHECK_EQ(check(&p), TK_EXT_PID);
    buf port = term();
    put8(&port, 'Y');
    put(&port, "w\1n", 3);
    put32(&port, 7);
    put32(&port, 1);
    TK_CHECK_EQ(check(&port), TK_EXT_PORT);
    buf nil = term();
    put8(&nil, 'j');
    TK_CHECK_EQ(check(&nil), TK_EXT_NIL);
    buf tup = term();
    put(&tup, "h\1j", 3);
    TK_CHECK_EQ(check(&tup), TK_EXT_OTHER);
    TK_CHECK(tk_ext_entry_ok(TK_EXT_ATOM) && tk_ext_entry_ok(TK_EXT_PID) &&
             tk_ext_entry_ok(TK_EXT_PORT) && tk_ext_entry_ok(TK_EXT_NIL));
    TK_CHECK(!tk_ext_entry_ok(TK_EXT_OTHER) && !tk_ext_entry_ok(TK_EXT_BAD));
    /* The longest entry: a pid of a node of 255 four-byte characters. */
    buf big = pid("\xf0\x9f\x98\x80", 255);
    TK_CHECK_EQ(check(&big), TK_EXT_PID);
    TK_CHECK_EQ(big.len, TK_EXT_ENTRY_MAX);
    free(a.p), free(p.p), free(port.p), free(nil.p), free(tup.p), free(big.p);
}

/* Atoms of at most 255 characters, valid UTF-8 when they say they are. */
TK_TEST(ext_atoms)
{
    const char *chars[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    for (int c = 0; c < 4; c++)
        for (size_t n = 253; n <= 257; n++) {
            buf b = term();
            utf8_atom(&b, chars[c], n);
            TK_CHECK_EQ(check(&b), n <= 255 ? TK_EXT_ATOM : TK_EXT_BAD);
            free(b.p);
        }
    /* Latin-1 atoms: a byte is a character. */
    buf l = term();
    put8(&l, 'd');
    put16(&l, 256);
    for (int i = 0; i < 256; i++)
        put8(&l, 0xe9);
    TK_CHECK_EQ(check(&l), TK_EXT_BAD);
    l.len = 1;
    put8(&l, 'd');
    put16(&l, 255);
    for (int i = 0; i < 255; i++)
        put8(&l, 0xe9);
    TK_CHECK_EQ(check(&l), TK_EXT_ATOM);
    free(l.p);
    const char *bad[] = {"\xc3", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80",
                         "\xff"};
    for (int i = 0; i < 6; i++) {
        buf b = term();
        utf8_atom(&b, bad[i], 1);
        TK_CHECK_EQ(check(&b), TK_EXT_BAD);
        free(b.p);
    }
}

/* Nesting: a container may be opened at depths 0 .. 199; a term nested
 * 100,000 deep is refused without recursing. */
TK_TEST(ext_nesting)
{
    static const unsigned depths[] = {1, 199, 200, 201, 100000};
    for (int kind = 0; kind < 3; kind++)
        for (int i = 0; i < 5; i++) {
            unsigned d = depths[i];
            buf b = term();
            for (unsigned k = 0; k < d; k++)
                switch (kind) {
                case 0: put(&b, "h\1", 2); break;                 /* {X} */
                case 1: put8(&b, 'l'); put32(&b, 1); break;       /* [X] */
                default: put8(&b, 't'); put32(&b, 1); put8(&b, 'j'); /* #{[] => X} */
                }
            put8(&b, 'j');
            for (unsigned k = 0; kind == 1 && k < d; k++)
                put8(&b, 'j'); /* the lists' tails */
            TK_CHECK_EQ(check(&b), d <= 200 ? TK_EXT_OTHER : TK_EXT_BAD);
            free(b.p);
        }
}

/* Whatever binary_to_term/1 refuses, and what no file holds. */
TK_TEST(ext_refuses_malformed)
{
    buf ok = term();
    put(&ok, "h\2a\1j", 5);
    TK_CHECK_EQ(check(&ok), TK_EXT_OTHER);
    /* Cut anywhere, or a byte more. */
    for (size_t n = 0; n < ok.len; n++)
        TK_CHECK_EQ(tk_ext_check(ok.p, n), TK_EXT_BAD);
    put8(&ok, 'j');
    TK_CHECK_EQ(check(&ok), TK_EXT_BAD);
    ok.p[0] = 130;
    TK_CHECK_EQ(tk_ext_check(ok.p, ok.len - 1), TK_EXT_BAD);
    free(ok.p);
    /* Compressed, an atom cache reference, the old fun, a local term, an
     * unknown tag. */
    static const unsigned char others[][8] = {
        {131, 'P', 0, 0, 0, 10, 0x78, 0x9c}, {131, 'R', 0}, {131, 'u', 0, 0, 0, 0},
        {131, 'y', 0}, {131, 200}};
    static const size_t lens[] = {8, 3, 6, 3, 2};
    for (int i = 0; i < 5; i++)
        TK_CHECK_EQ(tk_ext_check(others[i], lens[i]), TK_EXT_BAD);
    /* A big integer's sign, a bitstring's bits. */
    static const unsigned char big2[] = {131, 'n', 1, 2, 5};
    static const unsigned char big1[] = {131, 'n', 1, 1, 5};
    TK_CHECK_EQ(tk_ext_check(big2, sizeof big2), TK_EXT_BAD);
    TK_CHECK_EQ(tk_ext_check(big1, sizeof big1), TK_EXT_OTHER);
    static const unsigned char bits9[] = {131, 'M', 0, 0, 0, 1, 9, 0xff};
    static const unsigned char bits0[] = {131, 'M', 0, 0, 0, 1, 0, 0xff};
    static const unsigned char bits3[] = {131, 'M', 0, 0, 0, 1, 3, 0xe0};
    TK_CHECK_EQ(tk_ext_check(bits9, sizeof bits9), TK_EXT_BAD);
    TK_CHECK_EQ(tk_ext_check(bits0, sizeof bits0), TK_EXT_BAD);
    TK_CHECK_EQ(tk_ext_check(bits3, sizeof bits3), TK_EXT_OTHER);
    /* Counts larger than the bytes left. */
    static const unsigned char tup[] = {131, 'i', 0x7f, 0xff, 0xff, 0xff, 'j'};
    static const unsigned char map[] = {131, 't', 0x7f, 0xff, 0xff, 0xff, 'j', 'j'};
    static const unsigned char fun[] = {131, 'p', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
    TK_CHECK_EQ(tk_ext_check(tup, sizeof tup), TK_EXT_BAD);
    TK_CHECK_EQ(tk_ext_check(map, sizeof map), TK_EXT_BAD);
    TK_CHECK_EQ(tk_ext_check(fun, sizeof fun), TK_EXT_BAD);
    /* A reference of 1 to 5 words, of a node atom. */
    for (unsigned words = 0; words <= 6; words++) {
        buf r = term();
        put8(&r, 'Z');
        put16(&r, words);
        put(&r, "w\1n", 3);
        put32(&r, 1);
        for (unsigned k = 0; k < words; k++)
            put32(&r, k);
        TK_CHECK_EQ(check(&r), words >= 1 && words <= 5 ? TK_EXT_OTHER : TK_EXT_BAD);
        free(r.p);
    }
}

/* A record in a file's form: its references counted by their entries'
 * bytes, a reference to no entry and a term no file holds refused. */
TK_TEST(ext_file_records)
{
    /* flags, tag, tracee DICT 1, msg: [DICT 0, DICT 1, DICT 1 | []] */
    unsigned char rec[64];
    size_t n = 0;
    rec[n++] = 0;
    rec[n++] = 0;
    rec[n++] = TK_T_DICT;
    rec[n++] = 1; /* varints of one byte */
    rec[n++] = TK_T_LIST;
    rec[n++] = 3;
    rec[n++] = TK_T_DICT;
    rec[n++] = 0;
    for (int i = 0; i < 2; i++) {
        rec[n++] = TK_T_DICT;
        rec[n++] = 1;
    }
    rec[n++] = TK_T_NIL;
    uint32_t lens[2] = {5, 1000};
    uint64_t refs = 0;
    TK_REQUIRE(tk_event_file_check(rec, n, lens, 2, &refs));
    TK_CHECK_EQ(refs, 5 + 3 * 1000);
    TK_CHECK(!tk_event_file_check(rec, n, lens, 1, &refs));
    /* An EXT term nested too deep, in a record. */
    buf deep = term();
    for (int k = 0; k < 300; k++)
        put(&deep, "h\1", 2);
    put8(&deep, 'j');
    unsigned char *r2 = malloc(2 + 5 + deep.len + 1);
    size_t m = 0;
    r2[m++] = 0;
    r2[m++] = 0;
    r2[m++] = TK_T_NIL;
    r2[m++] = TK_T_EXT;
    tk_wbuf lw = {r2 + m, r2 + m + 5};
    tk_put_varint(&lw, deep.len);
    m = (size_t)(lw.p - r2);
    memcpy(r2 + m, deep.p, deep.len), m += deep.len;
    TK_CHECK(!tk_event_file_check(r2, m, lens, 2, &refs));
    /* The writer puts the marker in its place. */
    static unsigned char out[4096];
    tk_xlate none = {NULL, NULL};
    size_t w = tk_event_to_file(r2, m, out, &none);
    TK_REQUIRE(w == 4);
    TK_CHECK(out[3] == TK_T_CUT);
    TK_CHECK(tk_event_file_check(out, w, lens, 2, &refs));
    TK_CHECK_EQ(refs, 0);
    free(r2);
    free(deep.p);
}

/* A VM's words (TK_T_IMM, ATOM, PID) and the ring's timestamps (NOW) are
 * never in a file: the readers' check refuses a record that holds one, in
 * a container or not, where the same record with a dictionary entry in
 * its place passes. */
TK_TEST(ext_file_records_hold_no_ring_terms)
{
    static const unsigned char ring_terms[][5] = {
        {TK_T_IMM, 0x2d}, {TK_T_ATOM, 5}, {TK_T_PID, 7}, {TK_T_NOW, 1, 2, 3}};
    static const size_t ring_len[] = {2, 2, 2, 4};
    uint32_t lens[1] = {5};
    uint64_t refs = 0;
    for (size_t k = 0; k < 4; k++) {
        for (int nested = 0; nested < 2; nested++) {
            unsigned char rec[32];
            size_t n = 0;
            rec[n++] = 0; /* no optional field, no timestamp */
            rec[n++] = 0; /* the first tag */
            rec[n++] = TK_T_DICT; /* tracee */
            rec[n++] = 0;
            if (nested) { /* trace term: [X] */
                rec[n++] = TK_T_LIST;
                rec[n++] = 1;
            }
            size_t at = n;
            memcpy(rec + n, ring_terms[k], ring_len[k]);
            n += ring_len[k];
            if (nested)
                rec[n++] = TK_T_NIL;
            TK_CHECK(!tk_event_file_check(rec, n, lens, 1, &refs));
            /* The same with a dictionary entry in its place. */
            unsigned char ok[32];
            memcpy(ok, rec, at);
            ok[at] = TK_T_DICT;
            ok[at + 1] = 0;
            memcpy(ok + at + 2, rec + at + ring_len[k], n - at - ring_len[k]);
            TK_CHECK(tk_event_file_check(ok, n - ring_len[k] + 2, lens, 1, &refs));
        }
    }
}

/* termorder.c: Erlang's standard order of terms, for map keys (the
 * exports print them as lists:sort/1 of the keys would, EXPORTS.md 1.1),
 * and digests of terms, for the equality (=:=) that pairs a receive with
 * its send (3.2) without keeping the messages themselves.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"

/* ---- helpers ---------------------------------------------------------------- */

/* The UTF-8 text of an atom or of an identifier's node, into b. */
static void name_utf8(sbuf *b, const unsigned char *p, size_t n, bool latin1)
{
    b->len = 0;
    if (!latin1) {
        sb_put(b, p, n);
        return;
    }
    for (size_t k = 0; k < n; k++)
        sb_utf8(b, p[k]);
    if (b->p == NULL)
        sb_put(b, "", 0);
}

static int bytes_cmp(const void *a, size_t an, const void *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    if (c != 0)
        return c < 0 ? -1 : 1;
    return an < bn ? -1 : an > bn ? 1 : 0;
}

/* A big integer's sign and digits (base 256, little-endian, without
 * high zeros: etf.c strips them). */
static const unsigned char *big_digits(const tnode *n, size_t *nd, bool *neg)
{
    const unsigned char *e = n->etf;
    size_t d = e[0] == 'n' ? e[1] : ((size_t)e[1] << 24 | (size_t)e[2] << 16 | (size_t)e[3] << 8 | e[4]);
    const unsigned char *s = e + (e[0] == 'n' ? 2 : 5);
    *neg = s[0] != 0;
    while (d > 0 && s[d] == 0)
        d--;
    *nd = d;
    return s + 1;
}

/* ---- the order ----------------------------------------------------------------- */

/* number < atom < reference < fun < port < pid < tuple < map < [] <
 * list < bitstring */
static int rank(const tnode *n)
{
    switch (n->type) {
    case T_INT:
    case T_BIG:
    case T_FLOAT: return 0;
    case T_ATOM: return 1;
    case T_REF: return 2;
    case T_FUN: return 3;
    case T_PORT: return 4;
    case T_PID: return 5;
    case T_TUPLE: return 6;
    case T_MAP: return 7;
    case T_NIL: return 8;
    case T_LIST: return 9;
    default: return 10; /* T_BIN */
    }
}

static int big_cmp(const tnode *a, const tnode *b)
{
    size_t an, bn;
    bool aneg, bneg;
    const unsigned char *ad = big_digits(a, &an, &aneg), *bd = big_digits(b, &bn, &bneg);
    if (aneg != bneg)
        return aneg ? -1 : 1;
    int mag = an < bn ? -1 : an > bn ? 1 : 0;
    for (size_t k = an; mag == 0 && k > 0; k--)
        mag = ad[k - 1] < bd[k - 1] ? -1 : ad[k - 1] > bd[k - 1] ? 1 : 0;
    return aneg ? -mag : mag;
}

static double big_double(const tnode *n)
{
    size_t nd;
    bool neg;
    const unsigned char *d = big_digits(n, &nd, &neg);
    double v = 0;
    for (size_t k = nd; k > 0; k--)
        v = v * 256.0 + d[k - 1];
    return neg ? -v : v;
}

#define TWO63 9223372036854775808.0

/* An integer against a float, by value. Equal ones are equal: map keys
 * 1 and 1.0 keep the order the file has them in, as lists:sort/1 (a
 * stable sort) keeps maps:keys/1's (EXPORTS.md 5). */
static int int_float_cmp(const tnode *i, double f)
{
    if (i->type == T_BIG) {
        /* a big is beyond 64 bits: only a float as large can be near */
        bool neg;
        size_t nd;
        big_digits(i, &nd, &neg);
        if (fabs(f) < TWO63)
            return neg ? -1 : 1;
        double v = big_double(i);
        return v < f ? -1 : v > f ? 1 : 0;
    }
    int64_t v = i->u.i;
    if (f >= TWO63)
        return -1;
    if (f < -TWO63)
        return 1;
    double fl = floor(f);
    int64_t fi = (int64_t)fl;
    if (v < fi)
        return -1;
    if (v > fi)
        return 1;
    return fl < f ? -1 : 0; /* v == floor(f) */
}

static int num_cmp(const tnode *a, const tnode *b)
{
    bool af = a->type == T_FLOAT, bf = b->type == T_FLOAT;
    if (af && bf)
        return a->u.f < b->u.f ? -1 : a->u.f > b->u.f ? 1 : 0;
    if (!af && !bf) {
        if (a->type == T_INT && b->type == T_INT)
            return a->u.i < b->u.i ? -1 : a->u.i > b->u.i;
        if (a->type == T_BIG && b->type == T_BIG)
            return big_cmp(a, b);
        /* a big against a small one: the big's sign says */
        const tnode *big = a->type == T_BIG ? a : b;
        bool neg;
        size_t nd;
        big_digits(big, &nd, &neg);
        int bigside = neg ? -1 : 1;
        return big == a ? bigside : -bigside;
    }
    return af ? -int_float_cmp(b, a->u.f) : int_float_cmp(a, b->u.f);
}

static int ident_cmp(const tnode *a, const tnode *b)
{
    static sbuf na, nb;
    ident ia, ib;
    ident_of(a, &ia);
    ident_of(b, &ib);
    name_utf8(&na, ia.node, ia.node_len, ia.node_latin1);
    name_utf8(&nb, ib.node, ib.node_len, ib.node_latin1);
    int c = bytes_cmp(na.p, na.len, nb.p, nb.len);
    if (c != 0)
        return c;
    if (a->type == T_REF) {
        /* the words as one number, the last word the highest */
        uint32_t n = ia.nid > ib.nid ? ia.nid : ib.nid;
        for (uint32_t k = n; k > 0; k--) {
            uint64_t x = k <= ia.nid ? ia.id[k - 1] : 0, y = k <= ib.nid ? ib.id[k - 1] : 0;
            if (x != y)
                return x < y ? -1 : 1;
        }
        return 0;
    }
    /* pids: number, then serial; ports: number */
    for (uint32_t k = 0; k < ia.nid && k < ib.nid; k++)
        if (ia.id[k] != ib.id[k])
            return ia.id[k] < ib.id[k] ? -1 : 1;
    return 0;
}

static int bits_cmp(const tnode *a, const tnode *b)
{
    size_t abits = a->bits ? (size_t)(a->n - 1) * 8 + a->bits : (size_t)a->n * 8;
    size_t bbits = b->bits ? (size_t)(b->n - 1) * 8 + b->bits : (size_t)b->n * 8;
    size_t common = abits < bbits ? abits : bbits;
    size_t whole = common / 8;
    int c = memcmp(a->u.p, b->u.p, whole);
    if (c != 0)
        return c < 0 ? -1 : 1;
    for (size_t k = whole * 8; k < common; k++) {
        unsigned x = a->u.p[k / 8] >> (7 - k % 8) & 1, y = b->u.p[k / 8] >> (7 - k % 8) & 1;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return abits < bbits ? -1 : abits > bbits;
}

static int map_cmp(const tree *t, const tnode *a, const tnode *b)
{
    if (a->n != b->n)
        return a->n < b->n ? -1 : 1;
    uint32_t *ia = xmalloc((size_t)a->n * 2 * sizeof *ia + 1), *ib = ia + a->n;
    map_order(t, a, ia);
    map_order(t, b, ib);
    int c = 0;
    for (uint32_t k = 0; k < a->n && c == 0; k++)
        c = term_cmp(t, kid(t, a, 2 * ia[k]), kid(t, b, 2 * ib[k]));
    for (uint32_t k = 0; k < a->n && c == 0; k++)
        c = term_cmp(t, kid(t, a, 2 * ia[k] + 1), kid(t, b, 2 * ib[k] + 1));
    free(ia);
    return c;
}

static int list_cmp(const tree *t, const tnode *a, const tnode *b)
{
    list_it ia, ib;
    const tnode *ta, *tb;
    list_begin(&ia, t, a);
    list_begin(&ib, t, b);
    for (;;) {
        const tnode *ea = list_next(&ia, &ta), *eb = list_next(&ib, &tb);
        if (ea == NULL && eb == NULL)
            return term_cmp(t, ta, tb);
        /* one ended: its tail against the rest of the other (a list) */
        if (ea == NULL)
            return rank(ta) < rank(b) ? -1 : 1;
        if (eb == NULL)
            return rank(a) < rank(tb) ? -1 : 1;
        int c = term_cmp(t, ea, eb);
        if (c != 0)
            return c;
    }
}

int term_cmp(const tree *t, const tnode *a, const tnode *b)
{
    a = deref(t, a);
    b = deref(t, b);
    int ra = rank(a), rb = rank(b);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    switch (ra) {
    case 0:
        return num_cmp(a, b);
    case 1: {
        static sbuf na, nb;
        name_utf8(&na, a->u.p, a->n, a->latin1);
        name_utf8(&nb, b->u.p, b->n, b->latin1);
        return bytes_cmp(na.p, na.len, nb.p, nb.len);
    }
    case 2:
    case 4:
    case 5:
        return ident_cmp(a, b);
    case 3:
        return bytes_cmp(a->etf, a->etf_len, b->etf, b->etf_len);
    case 6:
        if (a->n != b->n)
            return a->n < b->n ? -1 : 1;
        for (uint32_t k = 0; k < a->n; k++) {
            int c = term_cmp(t, kid(t, a, k), kid(t, b, k));
            if (c != 0)
                return c;
        }
        return 0;
    case 7:
        return map_cmp(t, a, b);
    case 8:
        return 0;
    case 9:
        return list_cmp(t, a, b);
    default:
        return bits_cmp(a, b);
    }
}

/* A merge sort of pair indices by key (stable; keys of a map differ). */
static void sort_range(const tree *t, const tnode *m, uint32_t *v, uint32_t *tmp, size_t n)
{
    if (n < 2)
        return;
    if (n <= 8) {
        for (size_t i = 1; i < n; i++) {
            uint32_t x = v[i];
            size_t j = i;
            while (j > 0 && term_cmp(t, kid(t, m, 2 * v[j - 1]), kid(t, m, 2 * x)) > 0) {
                v[j] = v[j - 1];
                j--;
            }
            v[j] = x;
        }
        return;
    }
    size_t h = n / 2;
    sort_range(t, m, v, tmp, h);
    sort_range(t, m, v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = term_cmp(t, kid(t, m, 2 * v[j]), kid(t, m, 2 * v[i])) < 0 ? v[j++] : v[i++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

void map_order(const tree *t, const tnode *m, uint32_t *idx)
{
    for (uint32_t k = 0; k < m->n; k++)
        idx[k] = k;
    if (m->n < 2)
        return;
    uint32_t *tmp = xmalloc(m->n * sizeof *tmp);
    sort_range(t, m, idx, tmp, m->n);
    free(tmp);
}

/* ---- digests ---------------------------------------------------------------------- */

static uint64_t fmix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

/* Two chains of a bijective mix, seeded and fed differently: 128 bits. */
static void feed(digest *h, uint64_t x)
{
    h->a = fmix(h->a ^ x) + 0x9e3779b97f4a7c15ull;
    h->b = fmix(((h->b << 31) | (h->b >> 33)) + x * 0x87c37b91114253d5ull) ^ 0x4cf5ad432745937full;
}

static void feed_bytes(digest *h, const unsigned char *p, size_t n)
{
    feed(h, n);
    for (size_t k = 0; k < n; k += 8) {
        uint64_t w = 0;
        for (size_t j = 0; j < 8 && k + j < n; j++)
            w |= (uint64_t)p[k + j] << (8 * j);
        feed(h, w);
    }
}

static void feed_name(digest *h, const unsigned char *p, size_t n, bool latin1)
{
    static sbuf u;
    name_utf8(&u, p, n, latin1);
    feed_bytes(h, (const unsigned char *)u.p, u.len);
}

static void dig(digest *h, const tree *t, const tnode *n);

static void dig_ident(digest *h, const tnode *n)
{
    ident id;
    ident_of(n, &id);
    feed_name(h, id.node, id.node_len, id.node_latin1);
    feed(h, id.creation);
    feed(h, id.nid);
    for (uint32_t k = 0; k < id.nid; k++)
        feed(h, id.id[k]);
}

static void dig(digest *h, const tree *t, const tnode *n)
{
    n = deref(t, n);
    switch (n->type) {
    case T_INT:
        feed(h, 1);
        feed(h, (uint64_t)n->u.i);
        return;
    case T_BIG: {
        size_t nd;
        bool neg;
        const unsigned char *d = big_digits(n, &nd, &neg);
        feed(h, 2);
        feed(h, neg);
        feed_bytes(h, d, nd);
        return;
    }
    case T_FLOAT: {
        uint64_t w;
        memcpy(&w, &n->u.f, 8);
        feed(h, 3);
        feed(h, w);
        return;
    }
    case T_ATOM:
        feed(h, 4);
        feed_name(h, n->u.p, n->n, n->latin1);
        return;
    case T_NIL:
        feed(h, 5);
        return;
    case T_LIST: {
        list_it it;
        const tnode *e, *tail;
        list_begin(&it, t, n);
        while ((e = list_next(&it, &tail)) != NULL) {
            feed(h, 6);
            dig(h, t, e);
        }
        dig(h, t, tail);
        return;
    }
    case T_TUPLE:
        feed(h, 7);
        feed(h, n->n);
        for (uint32_t k = 0; k < n->n; k++)
            dig(h, t, kid(t, n, k));
        return;
    case T_MAP: {
        /* pairs in any order: the sum of each pair's own digest */
        digest sum = {0, 0};
        for (uint32_t k = 0; k < n->n; k++) {
            digest p = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull};
            dig(&p, t, kid(t, n, 2 * k));
            dig(&p, t, kid(t, n, 2 * k + 1));
            sum.a += p.a;
            sum.b += p.b;
        }
        feed(h, 8);
        feed(h, n->n);
        feed(h, sum.a);
        feed(h, sum.b);
        return;
    }
    case T_BIN: {
        size_t bits = n->bits ? (size_t)(n->n - 1) * 8 + n->bits : (size_t)n->n * 8;
        feed(h, 9);
        feed(h, bits);
        if (n->bits == 0) {
            feed_bytes(h, n->u.p, n->n);
        } else {
            /* the unused low bits of the last byte are not the term's */
            feed_bytes(h, n->u.p, n->n - 1);
            feed(h, n->u.p[n->n - 1] & (0xFFu << (8 - n->bits) & 0xFFu));
        }
        return;
    }
    case T_PID:
        feed(h, 10);
        dig_ident(h, n);
        return;
    case T_PORT:
        feed(h, 11);
        dig_ident(h, n);
        return;
    case T_REF:
        feed(h, 12);
        dig_ident(h, n);
        return;
    default: /* T_FUN */
        feed(h, 13);
        feed_bytes(h, n->etf, n->etf_len);
        return;
    }
}

digest term_digest(const tree *t, const tnode *n)
{
    digest h = {0x6a09e667f3bcc908ull, 0xbb67ae8584caa73bull};
    dig(&h, t, n);
    return h;
}

digest digest_join(const digest *parts, size_t n)
{
    digest h = {0x3c6ef372fe94f82bull, 0xa54ff53a5f1d36f1ull};
    feed(&h, n);
    for (size_t k = 0; k < n; k++) {
        feed(&h, parts[k].a);
        feed(&h, parts[k].b);
    }
    return h;
}

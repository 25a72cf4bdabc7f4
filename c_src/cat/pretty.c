/* pretty.c: terms as the shell's format prints them, to the character:
 * io_lib:format("~0tP", [T, Depth], [{chars_limit, Limit}]) and ~w/~tw.
 *
 * With a character limit, io_lib_pretty first measures the term at
 * depth 1, then at deeper and deeper depths (each step re-measuring only
 * what was cut, with the characters left), and prints the deepest
 * measure that fits. The steps below follow it function by function
 * (print_length, intermediate, find_upper, search_depth, expand), with
 * its intermediate form: a node with its length in characters, its
 * number of "..." and, where something was cut, how to measure it again
 * deeper (a "more": what Erlang keeps in a closure). The forms of OTP 27
 * and 29 agree for every term a trace holds.
 *
 * Printable strings: the printable range is latin1 (the VM's default,
 * +pc latin1). Maps print in the order of the file, which is the order
 * the VM that wrote them iterates them in.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"

/* ---- small pieces of io_lib ------------------------------------------------- */

static int tsub(int t, int e)
{
    return t < 0 ? t : t >= e ? t - e : 0;
}

static const char *const reserved[] = {
    "after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor",
    "case", "catch", "cond", "div", "end", "fun", "if", "let", "not", "of", "or",
    "orelse", "receive", "rem", "try", "when", "xor", "maybe", "else"};

static bool lower_start(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 223 && c <= 255 && c != 247);
}

static bool name_char(uint32_t c)
{
    return lower_start(c) || (c >= 'A' && c <= 'Z') || (c >= 192 && c <= 222 && c != 215) ||
           (c >= '0' && c <= '9') || c == '_' || c == '@';
}

/* The characters of an atom (code points). */
typedef struct {
    uint32_t *c;
    size_t n, cap;
} cps;

static void atom_cps(const tnode *a, cps *out)
{
    out->n = 0;
    GROW(out->c, out->cap, a->n + 1);
    for (size_t i = 0; i < a->n;) {
        uint32_t c;
        size_t k = a->latin1 ? (c = a->u.p[i], 1) : utf8_next(a->u.p + i, a->n - i, &c);
        if (k == 0)
            k = 1, c = a->u.p[i];
        out->c[out->n++] = c;
        i += k;
    }
}

/* One character of a quoted string (io_lib's string_char): `uni`
 * keeps characters above 255 (unicode_as_unicode), else they become
 * \x{H} (unicode_as_latin1). */
static void string_char(sbuf *b, uint32_t c, uint32_t q, bool uni)
{
    if (c == q) {
        sb_ch(b, '\\');
        sb_ch(b, (char)q);
    } else if (c == '\\') {
        sb_str(b, "\\\\");
    } else if (c >= ' ' && c <= '~') {
        sb_ch(b, (char)c);
    } else if (c >= 160 && (c <= 255 || uni)) {
        sb_utf8(b, c);
    } else if (c > 255) {
        sb_fmt(b, "\\x{%X}", c);
    } else {
        switch (c) {
        case '\n': sb_str(b, "\\n"); break;
        case '\r': sb_str(b, "\\r"); break;
        case '\t': sb_str(b, "\\t"); break;
        case '\v': sb_str(b, "\\v"); break;
        case '\b': sb_str(b, "\\b"); break;
        case '\f': sb_str(b, "\\f"); break;
        case 27: sb_str(b, "\\e"); break;
        case 127: sb_str(b, "\\d"); break;
        default:
            sb_ch(b, '\\');
            sb_ch(b, (char)('0' + (c >> 6)));
            sb_ch(b, (char)('0' + ((c >> 3) & 7)));
            sb_ch(b, (char)('0' + (c & 7)));
        }
    }
}

void write_atom(sbuf *b, const tnode *a, bool unicode)
{
    static cps cs;
    atom_cps(a, &cs);
    bool quote;
    if (cs.n == 0) {
        quote = true;
    } else if (!lower_start(cs.c[0])) {
        quote = true;
    } else {
        quote = false;
        for (size_t k = 1; k < cs.n && !quote; k++)
            quote = !name_char(cs.c[k]);
        if (!quote && !a->latin1)
            for (size_t k = 0; k < sizeof reserved / sizeof *reserved && !quote; k++)
                quote = is_atom(a, reserved[k]);
        if (!quote && a->latin1)
            for (size_t k = 0; k < sizeof reserved / sizeof *reserved && !quote; k++)
                quote = a->n == strlen(reserved[k]) && memcmp(a->u.p, reserved[k], a->n) == 0;
    }
    if (!quote) {
        /* unquoted: the characters as they are (all below 256) */
        for (size_t k = 0; k < cs.n; k++)
            sb_utf8(b, cs.c[k]);
        return;
    }
    sb_ch(b, '\'');
    for (size_t k = 0; k < cs.n; k++)
        string_char(b, cs.c[k], '\'', unicode);
    sb_ch(b, '\'');
}

/* float_to_list(F, [short]): the shortest digits that read back as F,
 * in plain or scientific notation, whichever is shorter (plain on a tie,
 * and never plain for an integral value of 2^53 or more). */
void write_float(sbuf *b, double f)
{
    char buf[40];
    if (f == 0) {
        sb_str(b, signbit(f) ? "-0.0" : "0.0");
        return;
    }
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, f);
        if (strtod(buf, NULL) == f)
            break;
    }
    /* buf: [-]d[.ddd]e[+-]xx */
    const char *s = buf;
    bool neg = *s == '-';
    if (neg)
        s++;
    char digits[20];
    size_t nd = 0;
    const char *c = s;
    for (; *c && *c != 'e'; c++)
        if (*c >= '0' && *c <= '9')
            digits[nd++] = *c;
    int exp = atoi(c + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    digits[nd] = 0;
    int place = exp + 1; /* the value is 0.digits * 10^place */
    if (neg)
        sb_ch(b, '-');
    char expl[16];
    snprintf(expl, sizeof expl, "%d", place - 1);
    int explen = (int)strlen(expl);
    int expdot = nd == 1 ? 2 : 1;
    int expcost = explen + 1 + expdot;
    bool sci;
    if (place <= 0)
        sci = !(2 - place <= expcost);
    else if (place >= (int)nd)
        sci = !(place - (int)nd + 2 <= expcost) || fabs(f) >= 9007199254740992.0;
    else
        sci = false;
    if (sci) {
        sb_ch(b, digits[0]);
        sb_ch(b, '.');
        if (nd == 1)
            sb_ch(b, '0');
        else
            sb_put(b, digits + 1, nd - 1);
        sb_ch(b, 'e');
        sb_str(b, expl);
    } else if (place <= 0) {
        sb_str(b, "0.");
        for (int k = 0; k < -place; k++)
            sb_ch(b, '0');
        sb_put(b, digits, nd);
    } else if (place >= (int)nd) {
        sb_put(b, digits, nd);
        for (int k = (int)nd; k < place; k++)
            sb_ch(b, '0');
        sb_str(b, ".0");
    } else {
        sb_put(b, digits, (size_t)place);
        sb_ch(b, '.');
        sb_put(b, digits + place, nd - (size_t)place);
    }
}

void write_int(sbuf *b, const tnode *n)
{
    if (n->type == T_INT) {
        sb_fmt(b, "%lld", (long long)n->u.i);
        return;
    }
    /* a big: base-256 digits, little-endian, divided down by 10^9 */
    const unsigned char *e = n->etf;
    size_t nd = e[0] == 'n' ? e[1] : ((size_t)e[1] << 24 | (size_t)e[2] << 16 | (size_t)e[3] << 8 | e[4]);
    const unsigned char *sign = e + (e[0] == 'n' ? 2 : 5);
    uint32_t *w = xmalloc((nd / 4 + 2) * sizeof *w);
    size_t nw = 0;
    for (size_t k = 0; k < nd; k += 4) {
        uint32_t v = 0;
        for (size_t j = 0; j < 4 && k + j < nd; j++)
            v |= (uint32_t)sign[1 + k + j] << (8 * j);
        w[nw++] = v;
    }
    while (nw > 0 && w[nw - 1] == 0)
        nw--;
    uint32_t *parts = xmalloc((nd / 4 + 2) * 2 * sizeof *parts);
    size_t np = 0;
    while (nw > 0) {
        uint64_t rem = 0;
        for (size_t k = nw; k > 0; k--) {
            uint64_t cur = rem << 32 | w[k - 1];
            w[k - 1] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        parts[np++] = (uint32_t)rem;
        while (nw > 0 && w[nw - 1] == 0)
            nw--;
    }
    if (*sign)
        sb_ch(b, '-');
    if (np == 0)
        sb_ch(b, '0');
    for (size_t k = np; k > 0; k--)
        sb_fmt(b, k == np ? "%u" : "%09u", parts[k - 1]);
    free(w);
    free(parts);
}

/* <X.N.S>, #Port<X.N>, #Ref<X.A.B.C>: X is 0 for the local node; other
 * nodes get 1, 2, ... in the order they are first printed (a VM numbers
 * them its own way: only the local ones can be the same). */
static unsigned node_number(const ident *id, const text_opts *o)
{
    static char **known;
    static size_t nknown;
    sbuf name = {0};
    if (id->node_latin1)
        for (size_t k = 0; k < id->node_len; k++)
            sb_utf8(&name, id->node[k]);
    else
        sb_put(&name, id->node, id->node_len);
    if (name.p == NULL)
        name.p = xstrndup("", 0);
    if (o != NULL && o->local_node != NULL && strcmp(name.p, o->local_node) == 0) {
        free(name.p);
        return 0;
    }
    for (size_t k = 0; k < nknown; k++)
        if (strcmp(known[k], name.p) == 0) {
            free(name.p);
            return (unsigned)k + 1;
        }
    known = xrealloc(known, (nknown + 1) * sizeof *known);
    known[nknown++] = name.p;
    return (unsigned)nknown;
}

static void write_fun(sbuf *b, const tnode *n, bool unicode)
{
    const unsigned char *e = n->etf;
    tree t = {0};
    size_t at;
    if (e[0] == 'q') { /* fun M:F/A */
        at = 1;
        long m = etf_parse(&t, e, n->etf_len, &at);
        long f = m >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
        long a = f >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
        if (a >= 0) {
            sb_str(b, "fun ");
            write_atom(b, &t.v[m], unicode);
            sb_ch(b, ':');
            write_atom(b, &t.v[f], unicode);
            sb_fmt(b, "/%lld", (long long)t.v[a].u.i);
        }
        free(t.v);
        return;
    }
    /* #Fun<Module.OldIndex.OldUniq> */
    at = 1 + 4 + 1 + 16 + 4 + 4;
    long m = etf_parse(&t, e, n->etf_len, &at);
    long i = m >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
    long u = i >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
    if (u >= 0) {
        sb_str(b, "#Fun<");
        atom_text(b, &t.v[m]);
        sb_fmt(b, ".%lld.%lld>", (long long)t.v[i].u.i, (long long)t.v[u].u.i);
    }
    free(t.v);
}

/* Numbers, pids, ports, references, funs: io_lib:write/1. */
static void write_leaf(sbuf *b, const tnode *n, bool unicode, const text_opts *o)
{
    ident id;
    switch (n->type) {
    case T_INT:
    case T_BIG:
        write_int(b, n);
        return;
    case T_FLOAT:
        write_float(b, n->u.f);
        return;
    case T_ATOM:
        write_atom(b, n, unicode);
        return;
    case T_PID:
        ident_of(n, &id);
        sb_fmt(b, "<%u.%llu.%llu>", node_number(&id, o), (unsigned long long)id.id[0],
               (unsigned long long)id.id[1]);
        return;
    case T_PORT:
        ident_of(n, &id);
        sb_fmt(b, "#Port<%u.%llu>", node_number(&id, o), (unsigned long long)id.id[0]);
        return;
    case T_REF:
        ident_of(n, &id);
        sb_fmt(b, "#Ref<%u", node_number(&id, o));
        for (uint32_t k = id.nid; k > 0; k--)
            sb_fmt(b, ".%llu", (unsigned long long)id.id[k - 1]);
        sb_ch(b, '>');
        return;
    case T_FUN:
        write_fun(b, n, unicode);
        return;
    default:
        return;
    }
}

/* io_lib:write_binary/3: bytes as integers, cut at depth D or T
 * characters; true when all of it was written. */
static bool write_binary(sbuf *b, const tnode *n, int d, int t)
{
    sb_str(b, "<<");
    t = tsub(t, 4);
    size_t bytes = n->n, full = n->bits ? bytes - 1 : bytes;
    bool all = true;
    for (size_t k = 0;; k++) {
        if (k == full && !n->bits)
            break;
        if (d == 1 || t == 0) {
            sb_str(b, "...");
            all = false;
            break;
        }
        if (k == full) {
            sb_fmt(b, "%u:%u", n->u.p[k] >> (8 - n->bits), n->bits);
            break;
        }
        if (false) {
            sb_str(b, "...");
            all = false;
            break;
        }
        char num[4];
        int len = snprintf(num, sizeof num, "%u", n->u.p[k]);
        sb_put(b, num, (size_t)len);
        if (k + 1 == full && !n->bits)
            break;
        sb_ch(b, ',');
        d = d - 1;
        t = tsub(t, len + 1);
    }
    sb_str(b, ">>");
    return all;
}

/* ---- ~w and ~tw: io_lib:write1/4 without a depth --------------------------- */

void write_term(sbuf *b, const tree *t, const tnode *n, bool unicode,
                const text_opts *o)
{
    switch (n->type) {
    case T_NIL:
        sb_str(b, "[]");
        return;
    case T_BIN:
        if (n->n == 0)
            sb_str(b, "<<>>");
        else
            write_binary(b, n, -1, -1);
        return;
    case T_TUPLE:
        sb_ch(b, '{');
        for (uint32_t k = 0; k < n->n; k++) {
            if (k)
                sb_ch(b, ',');
            write_term(b, t, kid(t, n, k), unicode, o);
        }
        sb_ch(b, '}');
        return;
    case T_LIST: {
        sb_ch(b, '[');
        for (uint32_t k = 0; k < n->n; k++) {
            if (k)
                sb_ch(b, ',');
            write_term(b, t, kid(t, n, k), unicode, o);
        }
        const tnode *tail = kid(t, n, n->n);
        if (tail->type != T_NIL) {
            sb_ch(b, '|');
            write_term(b, t, tail, unicode, o);
        }
        sb_ch(b, ']');
        return;
    }
    case T_MAP:
        sb_str(b, "#{");
        for (uint32_t k = 0; k < n->n; k++) {
            if (k)
                sb_ch(b, ',');
            write_term(b, t, kid(t, n, 2 * k), unicode, o);
            sb_str(b, " => ");
            write_term(b, t, kid(t, n, 2 * k + 1), unicode, o);
        }
        sb_ch(b, '}');
        return;
    default:
        write_leaf(b, n, unicode, o);
    }
}

/* ---- io_lib_pretty's intermediate form ---------------------------------------- */

enum { K_STR, K_BIN, K_TUPLE, K_LIST, K_MAP, K_PAIR, K_DOTS };
/* how a cut part is measured again deeper */
enum { M_NONE, M_TERM, M_TUPLE1, M_LIST1, M_PAIRS };
/* how a container's list of parts ends */
enum { E_NIL, E_DOTS, E_TAIL };

typedef struct {
    uint8_t kind, more, end;
    int len, dots;
    size_t s_off, s_len; /* K_STR, K_BIN: text */
    uint32_t kids, nkids; /* in pp.idx; with E_DOTS/E_TAIL the last is it */
    uint32_t term;        /* M_*: the term (tree index) */
    int d, d0;            /* M_*: the depth it was measured at */
    uint32_t pos;         /* M_TUPLE1, M_LIST1, M_PAIRS: where it goes on */
} ifn;

typedef struct {
    const tree *t;
    const text_opts *o;
    bool uni;   /* ~tP: unicode; ~P: latin1 */
    ifn *v;
    size_t n, cap;
    uint32_t *idx;
    size_t nidx, idxcap;
    uint32_t *stk;
    size_t nstk, stkcap;
    sbuf text;
    cps chars;
} pp;

static uint32_t node_of(pp *p, const tnode *n)
{
    return (uint32_t)(n - p->t->v);
}

static uint32_t new_if(pp *p, uint8_t kind, int len, int dots)
{
    GROW(p->v, p->cap, p->n + 1);
    ifn *f = &p->v[p->n];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->len = len;
    f->dots = dots;
    return (uint32_t)p->n++;
}

/* A leaf of text; len: its characters. */
static uint32_t str_if(pp *p, const char *s, size_t n, int len, int dots)
{
    uint32_t i = new_if(p, K_STR, len, dots);
    p->v[i].s_off = p->text.len;
    p->v[i].s_len = n;
    sb_put(&p->text, s, n);
    return i;
}

/* A leaf from what was written in p->text from `from` on. */
static uint32_t text_if(pp *p, size_t from, uint8_t kind, int dots)
{
    uint32_t i = new_if(p, kind, (int)utf8_count(p->text.p + from, p->text.len - from), dots);
    p->v[i].s_off = from;
    p->v[i].s_len = p->text.len - from;
    return i;
}

static uint32_t dots_if(pp *p, uint8_t more, uint32_t term, int d, int d0, uint32_t pos)
{
    uint32_t i = new_if(p, K_DOTS, 3, 3);
    ifn *f = &p->v[i];
    f->more = more, f->term = term, f->d = d, f->d0 = d0, f->pos = pos;
    return i;
}

static void push(pp *p, uint32_t i)
{
    GROW(p->stk, p->stkcap, p->nstk + 1);
    p->stk[p->nstk++] = i;
}

/* The parts pushed since `base` become container c's; list_length. */
static void close_container(pp *p, uint32_t c, size_t base, uint8_t end, int l0)
{
    size_t n = p->nstk - base;
    GROW(p->idx, p->idxcap, p->nidx + n);
    memcpy(p->idx + p->nidx, p->stk + base, n * sizeof *p->idx);
    p->nstk = base;
    ifn *f = &p->v[c];
    f->kids = (uint32_t)p->nidx;
    f->nkids = (uint32_t)n;
    f->end = end;
    p->nidx += n;
    int len = l0, dots = 0;
    for (size_t k = 0; k < n; k++) {
        const ifn *e = &p->v[p->idx[f->kids + k]];
        len += (k ? 1 : 0) + e->len;
        dots += e->dots;
    }
    f->len = len;
    f->dots = dots;
}

static uint32_t plen(pp *p, const tnode *n, int d, int t);

/* print_length_tuple1 from element i: parts pushed; returns the end. */
static uint8_t tuple1(pp *p, const tnode *tu, uint32_t i, int d, int t)
{
    for (;; i++, d--) {
        if (i >= tu->n)
            return E_NIL;
        if (d == 1 || t == 0) {
            push(p, dots_if(p, M_TUPLE1, node_of(p, tu), d, 0, i));
            return E_DOTS;
        }
        int t1 = i + 1 == tu->n ? t : tsub(t, 1);
        uint32_t e = plen(p, kid(p->t, tu, i), d - 1, t1);
        push(p, e);
        t = tsub(t1, p->v[e].len);
    }
}

/* print_length_list1 from element i (i == n: the tail). */
static uint8_t list1(pp *p, const tnode *l, uint32_t i, int d, int t)
{
    for (;; i++, d--) {
        const tnode *tail = kid(p->t, l, l->n);
        if (i >= l->n && tail->type == T_NIL)
            return E_NIL;
        if (d == 1 || t == 0) {
            push(p, dots_if(p, M_LIST1, node_of(p, l), d, 0, i));
            return E_DOTS;
        }
        if (i >= l->n) { /* an improper tail */
            push(p, plen(p, tail, d - 1, t));
            return E_TAIL;
        }
        bool last = i + 1 == l->n && tail->type == T_NIL;
        int t1 = last ? t : tsub(t, 1);
        uint32_t e = plen(p, kid(p->t, l, i), d - 1, t1);
        push(p, e);
        t = tsub(t1, p->v[e].len);
    }
}

static uint32_t pair(pp *p, const tnode *k, const tnode *v, int d, int t)
{
    uint32_t c = new_if(p, K_PAIR, 0, 0);
    uint32_t kp = plen(p, k, d, t);
    int kl1 = p->v[kp].len + 4;
    uint32_t vp = plen(p, v, d, tsub(t, kl1));
    size_t base = p->nstk;
    push(p, kp);
    push(p, vp);
    close_container(p, c, base, E_NIL, 0);
    p->v[c].len = kl1 + p->v[vp].len;
    p->v[c].dots = p->v[kp].dots + p->v[vp].dots;
    return c;
}

/* print_length_map_pairs from pair i. */
static uint8_t pairs(pp *p, const tnode *m, uint32_t i, int d, int d0, int t)
{
    for (;; i++, d--) {
        if (i >= m->n)
            return E_NIL;
        if (d == 1 || t == 0) {
            push(p, dots_if(p, M_PAIRS, node_of(p, m), d, d0, i));
            return E_DOTS;
        }
        int t1 = i + 1 == m->n ? t : tsub(t, 1);
        uint32_t e = pair(p, kid(p->t, m, 2 * i), kid(p->t, m, 2 * i + 1), d0, t1);
        push(p, e);
        t = tsub(t1, p->v[e].len);
    }
}

/* io_lib:printable_list/1 in the latin1 range, over elements [0, n). */
static bool printable_latin1(const tree *t, const tnode *l, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        const tnode *e = kid(t, l, k);
        if (e->type != T_INT)
            return false;
        int64_t c = e->u.i;
        if (!((c >= 32 && c <= 126) || (c >= 160 && c <= 255) || c == '\n' || c == '\r' ||
              c == '\t' || c == '\v' || c == '\b' || c == '\f' || c == 27))
            return false;
    }
    return true;
}

/* A character that continues the grapheme cluster before it (what
 * string:slice/3 counts as one character with its base). */
static bool extends(int64_t c)
{
    return (c >= 0x300 && c <= 0x36F) || (c >= 0x1AB0 && c <= 0x1AFF) ||
           (c >= 0x1DC0 && c <= 0x1DFF) || (c >= 0x20D0 && c <= 0x20FF) ||
           (c >= 0xFE00 && c <= 0xFE0F) || (c >= 0xFE20 && c <= 0xFE2F) || c == 0x200C ||
           c == 0x200D;
}

static bool is_char(const tnode *e)
{
    return e->type == T_INT && e->u.i >= 0 && e->u.i <= 0x10FFFF &&
           !(e->u.i >= 0xD800 && e->u.i <= 0xDFFF);
}

/* io_lib_pretty:printable_list/4: 0 not a string, 1 all of it, 2 a
 * prefix of *plen elements. */
static int printable_list(pp *p, const tnode *l, int d, int t, uint32_t *prefix)
{
    if (d == 1)
        return 0;
    const tnode *tail = kid(p->t, l, l->n);
    if (t < 0 || !p->uni) {
        if (tail->type != T_NIL)
            return 0;
        if (t >= 0) { /* latin1 with a limit: N characters */
            int n = tsub(t, 2);
            if ((int64_t)l->n <= n)
                return printable_latin1(p->t, l, l->n) ? 1 : 0;
            if (!printable_latin1(p->t, l, (uint32_t)n))
                return 0;
            *prefix = (uint32_t)n;
            return n > 0 ? 2 : 0;
        }
        return printable_latin1(p->t, l, l->n) ? 1 : 0;
    }
    /* string:slice(L, 0, N): N grapheme clusters */
    int n = tsub(t, 2);
    uint32_t k = 0;
    for (int g = 0; g < n && k < l->n; g++) {
        if (!is_char(kid(p->t, l, k)))
            return 0;
        int64_t c = kid(p->t, l, k)->u.i;
        k++;
        if (c == '\r' && k < l->n && is_char(kid(p->t, l, k)) && kid(p->t, l, k)->u.i == '\n')
            k++;
        while (k < l->n && is_char(kid(p->t, l, k)) && extends(kid(p->t, l, k)->u.i))
            k++;
    }
    if (k == 0)
        return 0;
    if (k < l->n && !is_char(kid(p->t, l, k)))
        return 0; /* the slice looks at the next one */
    if (k == l->n) {
        if (tail->type != T_NIL)
            return 0;
        return printable_latin1(p->t, l, l->n) ? 1 : 0;
    }
    if (!printable_latin1(p->t, l, k))
        return 0;
    *prefix = k;
    return 2;
}

/* A string of elements [0, n) of l, quoted. */
static void write_string(pp *p, const tnode *l, uint32_t n)
{
    sb_ch(&p->text, '"');
    for (uint32_t k = 0; k < n; k++)
        string_char(&p->text, (uint32_t)kid(p->t, l, k)->u.i, '"', true);
    sb_ch(&p->text, '"');
}

#ifndef TK_OTP_RELEASE
#error "TK_OTP_RELEASE: the OTP release whose io_lib_pretty the text follows"
#endif

/* printable_bin0/printable_bin for the list output (io_lib_pretty of the
 * OTP built against, TK_OTP_RELEASE): 0 false, 1 {true,
 * All}, 2 {false, All} (utf8), 3 {true, true, Prefix}, 4 {false, true,
 * Prefix}; *chars and *bytes say what to print. */
static int printable_bin(const tnode *b, int d, int t, bool uni, size_t *bytes)
{
    size_t size = b->n;
    int64_t len;
    if (d >= 0) {
        int64_t dchars = (int64_t)4 * d < (int64_t)size ? (int64_t)4 * d : (int64_t)size;
        len = t >= 0 && t < dchars ? t : dchars;
    } else {
        len = t < 0 ? (int64_t)size : t;
    }
    if (len == 0)
        return 0;
    const unsigned char *s = b->u.p;
#if TK_OTP_RELEASE < 28
    /* OTP 27: the first len characters must all be UTF-8, or the binary
     * is looked at as latin1; past them nothing is decoded. */
    if (uni) {
        size_t at = 0;
        for (int64_t i = len; i > 0 && at < size; i--) {
            uint32_t c;
            size_t k = utf8_next(s + at, size - at, &c);
            if (k == 0) {
                uni = false;
                break;
            }
            at += k;
        }
    }
#endif
    if (uni) {
        int64_t i = len;
        size_t at = 0;
        bool not_utf8 = false;
        for (;;) {
            uint32_t c;
#if TK_OTP_RELEASE < 28
            if (i <= 0 && at < size)
                break;
#endif
            size_t k = utf8_next(s + at, size - at, &c);
            if (at == size)
                break;
            if (k == 0) {
                not_utf8 = true;
                break;
            }
            if (i <= 0)
                break;
            bool pr = (c >= 32 && c <= 126) || (c >= 160 && c <= 255) || c == '\n' ||
                      c == '\r' || c == '\t' || c == '\v' || c == '\b' || c == '\f' || c == 27;
            if (!pr)
                break;
            at += k;
            i--;
        }
        if (!not_utf8) {
            if (at == size) {
                *bytes = size;
                return len - i == (int64_t)size ? 1 : 2;
            }
            if (d > 0 && len - i >= d) {
                *bytes = at;
                return (int64_t)at == len - i ? 3 : 4;
            }
            return 0;
        }
    }
    /* latin1 */
    int64_t nleft = len;
    size_t at = 0;
    for (; at < size; at++) {
        if (nleft == 0)
            break;
        unsigned c = s[at];
        bool pr = (c >= 32 && c <= 126) || (c >= 160) || c == '\n' || c == '\r' ||
                  c == '\t' || c == '\v' || c == '\b' || c == '\f' || c == 27;
        if (!pr)
            break;
        nleft--;
    }
    if (at == size) {
        *bytes = size;
        return 1;
    }
#if TK_OTP_RELEASE < 28
    /* OTP 27: the first min(20, Len) characters all printable and Len of
     * them looked at make a prefix, whatever the depth */
    if (nleft == 0 && len <= 20) {
        *bytes = (size_t)len;
        return 3;
    }
#endif
    if (d > 0 && len - nleft >= d) {
        *bytes = (size_t)(len - nleft);
        return 3;
    }
    return 0;
}

static uint32_t plen_binary(pp *p, const tnode *b, int d, int t)
{
    size_t from = p->text.len, bytes = 0;
    int kind = b->bits ? 0 : printable_bin(b, d - 1, tsub(t, 6), p->uni, &bytes);
    if (kind > 0) {
        sb_str(&p->text, "<<\"");
        if (kind == 2 || kind == 4) {
            for (size_t at = 0; at < bytes;) {
                uint32_t c;
                size_t k = utf8_next(b->u.p + at, bytes - at, &c);
                string_char(&p->text, c, '"', true);
                at += k ? k : 1;
            }
        } else {
            for (size_t at = 0; at < bytes; at++)
                string_char(&p->text, b->u.p[at], '"', true);
        }
        sb_ch(&p->text, '"');
        sb_str(&p->text, kind == 1 ? ">>" : kind == 2 ? "/utf8>>" : kind == 3 ? "...>>" : "/utf8...>>");
        uint32_t i = text_if(p, from, K_STR, kind >= 3 ? 3 : 0);
        if (kind >= 3) {
            p->v[i].more = M_TERM, p->v[i].term = node_of(p, b), p->v[i].d = d;
        }
        return i;
    }
    bool all = write_binary(&p->text, b, d, t);
    uint32_t i = new_if(p, K_BIN, (int)(p->text.len - from), all ? 0 : 3);
    p->v[i].s_off = from;
    p->v[i].s_len = p->text.len - from;
    if (!all)
        p->v[i].more = M_TERM, p->v[i].term = node_of(p, b), p->v[i].d = d;
    return i;
}

/* print_length/7 */
static uint32_t plen(pp *p, const tnode *n, int d, int t)
{
    size_t from = p->text.len, base;
    uint32_t c, prefix = 0;
    uint8_t end;
    switch (n->type) {
    case T_NIL:
        return str_if(p, "[]", 2, 2, 0);
    case T_ATOM:
        write_atom(&p->text, n, p->uni);
        return text_if(p, from, K_STR, 0);
    case T_TUPLE:
        if (n->n == 0)
            return str_if(p, "{}", 2, 2, 0);
        if (d == 1) {
            c = str_if(p, "{...}", 5, 5, 3);
            p->v[c].more = M_TERM, p->v[c].term = node_of(p, n), p->v[c].d = 1;
            return c;
        }
        c = new_if(p, K_TUPLE, 0, 0);
        base = p->nstk;
        end = tuple1(p, n, 0, d, tsub(t, 2));
        close_container(p, c, base, end, 2);
        return c;
    case T_MAP:
        if (n->n == 0)
            return str_if(p, "#{}", 3, 3, 0);
        if (d == 1) {
            c = str_if(p, "#{...}", 6, 6, 3);
            p->v[c].more = M_TERM, p->v[c].term = node_of(p, n), p->v[c].d = 1;
            return c;
        }
        c = new_if(p, K_MAP, 0, 0);
        base = p->nstk;
        end = pairs(p, n, 0, d, d - 1, tsub(t, 3));
        close_container(p, c, base, end, 3);
        return c;
    case T_LIST: {
        int pr = printable_list(p, n, d, t, &prefix);
        if (pr == 1) {
            write_string(p, n, n->n);
            return text_if(p, from, K_STR, 0);
        }
        if (pr == 2) {
            write_string(p, n, prefix);
            sb_str(&p->text, "...");
            return text_if(p, from, K_STR, 0);
        }
        c = new_if(p, K_LIST, 0, 0);
        base = p->nstk;
        end = list1(p, n, 0, d, tsub(t, 2));
        close_container(p, c, base, end, 2);
        if (p->v[c].dots > 0)
            p->v[c].more = M_TERM, p->v[c].term = node_of(p, n), p->v[c].d = d;
        return c;
    }
    case T_BIN:
        if (n->n == 0)
            return str_if(p, "<<>>", 4, 4, 0);
        if (d == 1) {
            c = str_if(p, "<<...>>", 7, 7, 3);
            p->v[c].more = M_TERM, p->v[c].term = node_of(p, n), p->v[c].d = 1;
            return c;
        }
        return plen_binary(p, n, d, t);
    default:
        write_leaf(&p->text, n, false, p->o);
        return text_if(p, from, K_STR, 0);
    }
}

static uint32_t expand(pp *p, uint32_t i, int t, int dd);

/* A "more": measured again, dd deeper, in t characters. For the parts
 * of a container (M_TUPLE1, M_LIST1, M_PAIRS) the parts are pushed and
 * UINT32_MAX is returned with *end set. */
static uint32_t more(pp *p, const ifn *f, int t, int dd, uint8_t *end)
{
    const tnode *n = &p->t->v[f->term];
    switch (f->more) {
    case M_TERM:
        return plen(p, n, f->d + dd, t);
    case M_TUPLE1:
        *end = tuple1(p, n, f->pos, f->d + dd, t);
        return UINT32_MAX;
    case M_LIST1:
        *end = list1(p, n, f->pos, f->d + dd, t);
        return UINT32_MAX;
    case M_PAIRS:
        *end = pairs(p, n, f->pos, f->d + dd, f->d0, t);
        return UINT32_MAX;
    default:
        return UINT32_MAX;
    }
}

/* expand_list/4 of container i into a new container. */
static uint32_t expand_list(pp *p, uint32_t i, int t, int dd, int l0)
{
    ifn f = p->v[i];
    uint32_t c = new_if(p, f.kind, 0, 0);
    size_t base = p->nstk;
    uint8_t end = E_NIL;
    t = tsub(t, l0);
    uint32_t nk = f.nkids - (f.end == E_DOTS ? 1 : 0);
    for (uint32_t k = 0; k < nk; k++) {
        bool last = k + 1 == nk && f.end == E_NIL;
        int t1 = last ? t : tsub(t, 1);
        uint32_t e = expand(p, p->idx[f.kids + k], t1, dd);
        push(p, e);
        t = tsub(t1, p->v[e].len);
    }
    if (f.end == E_DOTS) {
        ifn dots = p->v[p->idx[f.kids + nk]];
        more(p, &dots, t, dd, &end);
    }
    close_container(p, c, base, end, l0);
    return c;
}

/* expand/3 */
static uint32_t expand(pp *p, uint32_t i, int t, int dd)
{
    ifn f = p->v[i];
    if (f.dots == 0 && f.more == M_NONE)
        return i;
    uint8_t end;
    switch (f.kind) {
    case K_TUPLE:
        if (f.more == M_NONE)
            return expand_list(p, i, t, dd, 2);
        break;
    case K_MAP:
        if (f.more == M_NONE)
            return expand_list(p, i, t, dd, 3);
        break;
    case K_PAIR: {
        uint32_t kp = expand(p, p->idx[f.kids], tsub(t, 1), dd);
        int kl1 = p->v[kp].len + 4;
        uint32_t vp = expand(p, p->idx[f.kids + 1], tsub(t, kl1), dd);
        uint32_t c = new_if(p, K_PAIR, 0, 0);
        size_t base = p->nstk;
        push(p, kp);
        push(p, vp);
        close_container(p, c, base, E_NIL, 0);
        p->v[c].len = kl1 + p->v[vp].len;
        p->v[c].dots = p->v[kp].dots + p->v[vp].dots;
        return c;
    }
    default:
        break;
    }
    return more(p, &f, t, dd, &end);
}

/* intermediate/7 with its search of the depth. */
static uint32_t intermediate(pp *p, const tnode *n, int d, int t)
{
    uint32_t lower = plen(p, n, 1, t);
    const ifn *f = &p->v[lower];
    if (f->dots == 0 || f->len > t || d == 1)
        return lower;
    int dl = 1, ddelta = 2, last = f->len;
    for (;;) { /* find_upper */
        int dd2 = ddelta * 2;
        int d1 = d < 0 ? dl + dd2 : (dl + dd2 < d ? dl + dd2 : d);
        uint32_t up = expand(p, lower, t, d1 - dl);
        const ifn *u = &p->v[up];
        if (u->dots == 0 || u->len == last)
            return up;
        if (u->len <= t && (d1 < d || d < 0)) {
            lower = up;
            dl = d1;
            ddelta = dd2;
            last = u->len;
            continue;
        }
        /* search_depth(Lower, Upper, Dl, Du) */
        int du = d1;
        uint32_t upper = up;
        while (du - dl != 1) {
            int dm = (dl + du) / 2;
            uint32_t m = expand(p, lower, t, dm - dl);
            if (p->v[m].len > t) {
                upper = m;
                du = dm;
            } else {
                lower = m;
                dl = dm;
            }
        }
        return p->v[lower].len == t ? lower : upper;
    }
}

/* write/1 of the intermediate form. */
static void write_if(pp *p, sbuf *b, uint32_t i)
{
    const ifn *f = &p->v[i];
    const char *open = "", *close = "";
    char sep = ',';
    switch (f->kind) {
    case K_STR:
    case K_BIN:
        sb_put(b, p->text.p + f->s_off, f->s_len);
        return;
    case K_DOTS:
        sb_str(b, "...");
        return;
    case K_PAIR:
        write_if(p, b, p->idx[f->kids]);
        sb_str(b, " => ");
        write_if(p, b, p->idx[f->kids + 1]);
        return;
    case K_TUPLE:
        open = "{", close = "}";
        break;
    case K_LIST:
        open = "[", close = "]", sep = '|';
        break;
    case K_MAP:
        open = "#{", close = "}";
        break;
    }
    sb_str(b, open);
    for (uint32_t k = 0; k < f->nkids; k++) {
        bool tail = k + 1 == f->nkids && f->end != E_NIL;
        if (k > 0)
            sb_ch(b, tail ? sep : ',');
        else if (tail && f->end == E_TAIL)
            sb_ch(b, sep); /* not reached: a tail follows an element */
        write_if(p, b, p->idx[f->kids + k]);
    }
    sb_str(b, close);
}

void pretty_term(sbuf *b, const tree *t, const tnode *n, int depth, int limit,
                 bool unicode, const text_opts *o)
{
    static pp p;
    p.t = t, p.o = o, p.uni = unicode;
    p.n = p.nidx = p.nstk = 0;
    p.text.len = 0;
    if (depth == 0 || limit == 0) {
        sb_str(b, "...");
        return;
    }
    switch (n->type) {
    case T_ATOM:
        write_atom(b, n, unicode);
        return;
    case T_TUPLE:
    case T_LIST:
    case T_MAP:
    case T_BIN:
    case T_NIL: {
        uint32_t i = limit < 0 ? plen(&p, n, depth, limit) : intermediate(&p, n, depth, limit);
        write_if(&p, b, i);
        return;
    }
    default:
        write_leaf(b, n, false, o);
    }
}

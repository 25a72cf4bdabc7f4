/* term.c: the text of a term in tracekit-cat's own format (README.md,
 * "tracekit-cat"): Erlang's syntax on one line, by rules of this program
 * that do not depend on the OTP release it is built against.
 *
 *   integers   decimal; beyond 128 bytes of magnitude, 16#HEX
 *   floats     the shortest digits that read back as the same double:
 *              123.25 when the exponent is -4 to 15, else 1.5e-7, 2.0e20
 *   atoms      as they are when they are a lowercase ASCII letter then
 *              ASCII letters, digits, _ and @, and not a reserved word;
 *              else in single quotes, with the escapes below
 *   strings    a list of ASCII 32..126, tab, newline and return: "..."
 *   binaries   <<"...">> when every byte is such a character;
 *              <<"..."/utf8>> when they are UTF-8 of such characters and
 *              others from U+00A0 on; else the bytes: <<1,2,255>>; the
 *              bits of a bitstring last: <<1,2:3>>
 *   maps       #{K => V,...} in the order the file holds them
 *   pids       <0.N.S> of the node that recorded the event, else
 *              <node@host.N.S>; ports #Port<0.N>; references #Ref<0.W.W.W>
 *              (the words from the last); funs fun M:F/A, #Fun<M.Index.Uniq>
 *   escapes    \\, the quote, \t, \n, \r, other characters below 32 and
 *              127..159 as \ and three octal digits
 *
 * Containers nested deeper than the depth print as ...; the text stops
 * growing once it passes `stop` (the line is cut shorter anyway).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"

/* Integers longer than this print in hexadecimal: decimal conversion
 * costs the square of the length. */
#define TERM_DEC_BYTES 128

static bool full(const sbuf *b, const term_opts *o)
{
    return b->len > o->stop;
}

/* ---- characters and atoms -------------------------------------------------- */

static void char_esc(sbuf *b, uint32_t c, char quote)
{
    if (c == '\\' || c == (uint32_t)quote) {
        sb_ch(b, '\\');
        sb_ch(b, (char)c);
    } else if (c == '\t') {
        sb_str(b, "\\t");
    } else if (c == '\n') {
        sb_str(b, "\\n");
    } else if (c == '\r') {
        sb_str(b, "\\r");
    } else if (c < 32 || (c >= 127 && c <= 159)) {
        sb_fmt(b, "\\%03o", (unsigned)c);
    } else {
        sb_utf8(b, c);
    }
}

static bool string_char(uint32_t c)
{
    return (c >= 32 && c <= 126) || c == '\t' || c == '\n' || c == '\r';
}

static const char *const reserved[] = {
    "after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor",
    "case", "catch", "cond", "div", "else", "end", "fun", "if", "let", "maybe", "not",
    "of", "or", "orelse", "receive", "rem", "try", "when", "xor"};

static bool bare_atom(const unsigned char *p, size_t n)
{
    if (n == 0 || p[0] < 'a' || p[0] > 'z')
        return false;
    for (size_t k = 1; k < n; k++) {
        unsigned char c = p[k];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '@'))
            return false;
    }
    tnode atom = {.type = T_ATOM, .n = (uint32_t)n, .u.p = p};
    for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++)
        if (is_atom(&atom, reserved[k]))
            return false;
    return true;
}

void term_atom(sbuf *b, const tnode *n)
{
    if (bare_atom(n->u.p, n->n)) {
        sb_put(b, n->u.p, n->n);
        return;
    }
    sb_ch(b, '\'');
    for (size_t k = 0; k < n->n;) {
        uint32_t c = n->u.p[k];
        size_t len = 1;
        if (!n->latin1 && (len = utf8_next(n->u.p + k, n->n - k, &c)) == 0)
            len = 1; /* etf.c let only UTF-8 through */
        char_esc(b, c, '\'');
        k += len;
    }
    sb_ch(b, '\'');
}

/* ---- numbers ------------------------------------------------------------------ */

static void big_hex(sbuf *b, const tnode *n)
{
    static const char hex[] = "0123456789ABCDEF";
    sb_str(b, n->neg ? "-16#" : "16#");
    size_t k = n->n;
    while (k > 1 && n->u.p[k - 1] == 0)
        k--;
    bool lead = true;
    for (; k > 0; k--) {
        unsigned d = n->u.p[k - 1];
        if (!lead || d >> 4)
            sb_ch(b, hex[d >> 4]);
        sb_ch(b, hex[d & 15]);
        lead = false;
    }
}

/* The magnitude (bytes, little end first) in decimal: repeated division
 * by 10^9 of a copy in 32-bit limbs. */
static void big_dec(sbuf *b, const tnode *n)
{
    uint32_t limbs[TERM_DEC_BYTES / 4];
    size_t nl = (n->n + 3) / 4;
    memset(limbs, 0, sizeof limbs);
    for (size_t k = 0; k < n->n; k++)
        limbs[k / 4] |= (uint32_t)n->u.p[k] << (8 * (k % 4));
    char digits[TERM_DEC_BYTES * 3 + 16];
    size_t nd = 0;
    while (nl > 0 && limbs[nl - 1] == 0)
        nl--;
    do {
        uint64_t rem = 0;
        for (size_t k = nl; k > 0; k--) {
            uint64_t cur = rem << 32 | limbs[k - 1];
            limbs[k - 1] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (nl > 0 && limbs[nl - 1] == 0)
            nl--;
        for (int d = 0; d < 9 && (nl > 0 || rem > 0 || d == 0); d++) {
            digits[nd++] = (char)('0' + rem % 10);
            rem /= 10;
        }
    } while (nl > 0);
    if (n->neg)
        sb_ch(b, '-');
    while (nd > 0)
        sb_ch(b, digits[--nd]);
}

static void big_text(sbuf *b, const tnode *n)
{
    if (n->n > TERM_DEC_BYTES)
        big_hex(b, n);
    else
        big_dec(b, n);
}

/* The shortest %.Ne digits that read back as f. */
static void float_text(sbuf *b, double f)
{
    if (!isfinite(f)) { /* no Erlang float is: etf.c refuses them */
        sb_str(b, f != f ? "nan" : f < 0 ? "-inf" : "inf");
        return;
    }
    char sci[40];
    int prec = 0;
    for (; prec < 17; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec, f);
        if (strtod(sci, NULL) == f)
            break;
    }
    /* sci: [-]D[.DDD]e[+-]XX */
    const char *p = sci;
    bool neg = *p == '-';
    if (neg)
        p++;
    char digits[24];
    size_t nd = 0;
    for (; *p != 'e'; p++)
        if (*p != '.')
            digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (neg)
        sb_ch(b, '-');
    if (exp < -4 || exp > 15) {
        sb_ch(b, digits[0]);
        sb_ch(b, '.');
        if (nd == 1)
            sb_ch(b, '0');
        else
            sb_put(b, digits + 1, nd - 1);
        sb_fmt(b, "e%d", exp);
    } else if (exp < 0) {
        sb_str(b, "0.");
        for (int k = -1; k > exp; k--)
            sb_ch(b, '0');
        sb_put(b, digits, nd);
    } else {
        for (int k = 0; k <= exp; k++)
            sb_ch(b, (size_t)k < nd ? digits[k] : '0');
        sb_ch(b, '.');
        if ((size_t)exp + 1 >= nd)
            sb_ch(b, '0');
        else
            sb_put(b, digits + exp + 1, nd - (size_t)exp - 1);
    }
}

/* ---- binaries ------------------------------------------------------------------ */

enum { BIN_ASCII, BIN_UTF8, BIN_BYTES };

static int bin_kind(const unsigned char *p, size_t n)
{
    bool ascii = true;
    for (size_t k = 0; k < n;) {
        uint32_t c;
        size_t len = utf8_next(p + k, n - k, &c);
        if (len == 0 || !(string_char(c) || c >= 160))
            return BIN_BYTES;
        ascii = ascii && c < 128;
        k += len;
    }
    return ascii ? BIN_ASCII : BIN_UTF8;
}

static void bin_text(sbuf *b, const term_opts *o, const tnode *n)
{
    size_t whole = n->bits ? n->n - 1 : n->n;
    int kind = n->bits ? BIN_BYTES : bin_kind(n->u.p, whole);
    sb_str(b, "<<");
    if (kind != BIN_BYTES) {
        sb_ch(b, '"');
        for (size_t k = 0; k < whole && !full(b, o);) {
            uint32_t c;
            size_t len = utf8_next(n->u.p + k, whole - k, &c);
            char_esc(b, c, '"');
            k += len;
        }
        sb_str(b, kind == BIN_UTF8 ? "\"/utf8>>" : "\">>");
        return;
    }
    for (size_t k = 0; k < whole && !full(b, o); k++)
        sb_fmt(b, k ? ",%u" : "%u", n->u.p[k]);
    if (n->bits)
        sb_fmt(b, "%s%u:%u", whole ? "," : "", n->u.p[whole] >> (8 - n->bits), n->bits);
    sb_str(b, ">>");
}

/* ---- lists ---------------------------------------------------------------------- */

/* The elements of a list, following tails that are lists themselves. */
typedef struct {
    const tree *t;
    const tnode *l;
    uint32_t i;
} list_it;

static const tnode *list_next(list_it *it, const tnode **tail)
{
    while (it->i >= it->l->n) {
        const tnode *end = kid(it->t, it->l, it->l->n);
        if (end->type != T_LIST) {
            *tail = end;
            return NULL;
        }
        it->l = end;
        it->i = 0;
    }
    return kid(it->t, it->l, it->i++);
}

static bool is_string(const tree *t, const tnode *l)
{
    list_it it = {t, l, 0};
    const tnode *e, *tail = NULL;
    size_t count = 0;
    while ((e = list_next(&it, &tail)) != NULL) {
        if (e->type != T_INT || e->u.i < 0 || !string_char((uint32_t)e->u.i))
            return false;
        count++;
    }
    return count > 0 && tail->type == T_NIL;
}

static void list_text(sbuf *b, const term_opts *o, const tnode *l, int depth)
{
    list_it it = {o->t, l, 0};
    const tnode *e, *tail = NULL;
    if (is_string(o->t, l)) {
        sb_ch(b, '"');
        while ((e = list_next(&it, &tail)) != NULL && !full(b, o))
            char_esc(b, (uint32_t)e->u.i, '"');
        sb_ch(b, '"');
        return;
    }
    sb_ch(b, '[');
    for (bool first = true; (e = list_next(&it, &tail)) != NULL && !full(b, o); first = false) {
        if (!first)
            sb_ch(b, ',');
        term_text_at(b, o, e, depth + 1);
    }
    if (tail != NULL && tail->type != T_NIL) {
        sb_ch(b, '|');
        term_text_at(b, o, tail, depth + 1);
    }
    sb_ch(b, ']');
}

/* ---- pids, ports, references, funs ------------------------------------------------ */

/* `0` for the home node, else the node's name. */
static void node_part(sbuf *b, const term_opts *o, const ident *id)
{
    size_t at = b->len;
    if (id->node_latin1)
        for (size_t k = 0; k < id->node_len; k++)
            sb_utf8(b, id->node[k]);
    else
        sb_put(b, id->node, id->node_len);
    if (o->home != NULL && strlen(o->home) == b->len - at &&
        memcmp(b->p + at, o->home, b->len - at) == 0) {
        b->len = at;
        sb_ch(b, '0');
    }
}

static void ident_text(sbuf *b, const term_opts *o, const tnode *n)
{
    ident id;
    ident_of(n, &id);
    sb_str(b, n->type == T_PID ? "<" : n->type == T_PORT ? "#Port<" : "#Ref<");
    node_part(b, o, &id);
    for (uint32_t k = 0; k < id.nid; k++) {
        sb_ch(b, '.');
        sb_int(b, (int64_t)id.id[n->type == T_REF ? id.nid - 1 - k : k]);
    }
    sb_ch(b, '>');
}

static void fun_text(sbuf *b, const term_opts *o, const tnode *n)
{
    const tnode *m = kid(o->t, n, 0), *x = kid(o->t, n, 1), *a = kid(o->t, n, 2);
    if (n->type == T_EXPORT) {
        sb_str(b, "fun ");
        term_atom(b, m);
        sb_ch(b, ':');
        term_atom(b, x);
        sb_fmt(b, "/%lld", (long long)a->u.i);
    } else {
        sb_str(b, "#Fun<");
        term_atom(b, m);
        sb_fmt(b, ".%lld.%lld>", (long long)x->u.i, (long long)a->u.i);
    }
}

/* ---- terms ------------------------------------------------------------------------- */

static void elements(sbuf *b, const term_opts *o, const tnode *n, uint32_t count, int depth)
{
    for (uint32_t k = 0; k < count && !full(b, o); k++) {
        if (k)
            sb_ch(b, ',');
        term_text_at(b, o, kid(o->t, n, k), depth + 1);
    }
}

static void map_text(sbuf *b, const term_opts *o, const tnode *n, int depth)
{
    sb_str(b, "#{");
    for (uint32_t k = 0; k < n->n && !full(b, o); k++) {
        if (k)
            sb_ch(b, ',');
        term_text_at(b, o, kid(o->t, n, 2 * k), depth + 1);
        sb_str(b, " => ");
        term_text_at(b, o, kid(o->t, n, 2 * k + 1), depth + 1);
    }
    sb_ch(b, '}');
}

void term_text_at(sbuf *b, const term_opts *o, const tnode *n, int depth)
{
    bool container = n->type == T_LIST || n->type == T_TUPLE || n->type == T_MAP;
    if (full(b, o))
        return;
    if (container && depth > o->depth) {
        sb_str(b, "...");
        return;
    }
    switch (n->type) {
    case T_NIL: sb_str(b, "[]"); break;
    case T_INT: sb_int(b, n->u.i); break;
    case T_BIG: big_text(b, n); break;
    case T_FLOAT: float_text(b, n->u.f); break;
    case T_ATOM: term_atom(b, n); break;
    case T_BIN: bin_text(b, o, n); break;
    case T_LIST: list_text(b, o, n, depth); break;
    case T_TUPLE:
        sb_ch(b, '{');
        elements(b, o, n, n->n, depth);
        sb_ch(b, '}');
        break;
    case T_MAP: map_text(b, o, n, depth); break;
    case T_PID:
    case T_PORT:
    case T_REF: ident_text(b, o, n); break;
    default: fun_text(b, o, n); break;
    }
}

void term_text(sbuf *b, const term_opts *o, const tnode *n)
{
    term_text_at(b, o, n, 1);
}

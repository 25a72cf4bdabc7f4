/* termtext.c: terms as the exports write them (EXPORTS.md 1.1 to 1.3),
 * JSON strings and term fields (1.6, 1.7), and times (1.5).
 *
 * This is not the shell's format of text.c: no depth or length limit,
 * map keys in term order (whatever order the file holds them in), pids
 * of other nodes with their node's name, and the escapes of 1.3. The
 * same term gives the same text wherever it is read, which is what lets
 * tracekit_export and tracekit-cat agree to the byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"

/* ---- lists ---------------------------------------------------------------- */

const tnode *deref(const tree *t, const tnode *n)
{
    /* bounded: each step goes to a later node of the tree */
    while (n->type == T_LIST && n->n == 0)
        n = kid(t, n, 0);
    return n;
}

void list_begin(list_it *it, const tree *t, const tnode *l)
{
    it->t = t;
    it->l = l;
    it->i = 0;
}

const tnode *list_next(list_it *it, const tnode **tail)
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

/* ---- characters ------------------------------------------------------------- */

/* A code point in a quoted atom or string (EXPORTS.md 1.3). */
static void char_esc(sbuf *b, uint32_t c, char q)
{
    if (c == '\\') {
        sb_put(b, "\\\\", 2);
    } else if (c == (uint32_t)q) {
        sb_ch(b, '\\');
        sb_ch(b, q);
    } else if (c >= 8 && c <= 13) {
        static const char esc[] = "btnvfr";
        sb_ch(b, '\\');
        sb_ch(b, esc[c - 8]);
    } else if (c == 27) {
        sb_put(b, "\\e", 2);
    } else if (c < 32 || (c >= 127 && c <= 159)) {
        char o[4] = {'\\', (char)('0' + (c >> 6)), (char)('0' + ((c >> 3) & 7)),
                     (char)('0' + (c & 7))};
        sb_put(b, o, 4);
    } else if (c < 128) {
        sb_ch(b, (char)c);
    } else {
        sb_utf8(b, c);
    }
}

static bool printable_latin1(uint32_t c)
{
    return (c >= 32 && c <= 126) || (c >= 160 && c <= 255) || (c >= 8 && c <= 13) || c == 27;
}

/* ---- atoms ------------------------------------------------------------------- */

static const char *const reserved[] = {
    "after", "and", "andalso", "band", "begin", "bnot", "bor", "bsl", "bsr", "bxor",
    "case", "catch", "cond", "div", "else", "end", "fun", "if", "let", "maybe", "not",
    "of", "or", "orelse", "receive", "rem", "try", "when", "xor"};

/* The i-th code point of an atom, stepping *at. */
static uint32_t atom_cp(const tnode *a, size_t *at)
{
    uint32_t c;
    if (a->latin1) {
        c = a->u.p[*at];
        *at += 1;
        return c;
    }
    size_t k = utf8_next(a->u.p + *at, a->n - *at, &c);
    if (k == 0) { /* etf.c lets no such atom in; a byte as it is */
        c = a->u.p[*at];
        k = 1;
    }
    *at += k;
    return c;
}

static bool name_char(uint32_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '@' || (c >= 0xC0 && c <= 0xFF && c != 0xD7 && c != 0xF7);
}

static bool unquoted(const tnode *a)
{
    if (a->n == 0)
        return false;
    size_t at = 0;
    uint32_t c = atom_cp(a, &at);
    if (!((c >= 'a' && c <= 'z') || (c >= 0xDF && c <= 0xFF && c != 0xF7)))
        return false;
    while (at < a->n)
        if (!name_char(atom_cp(a, &at)))
            return false;
    /* reserved words are ASCII: the same bytes in either encoding */
    for (size_t k = 0; k < sizeof reserved / sizeof *reserved; k++)
        if (is_atom(a, reserved[k]))
            return false;
    return true;
}

void tt_atom(sbuf *b, const tnode *a)
{
    if (unquoted(a)) {
        atom_text(b, a);
        return;
    }
    sb_ch(b, '\'');
    for (size_t at = 0; at < a->n;)
        char_esc(b, atom_cp(a, &at), '\'');
    sb_ch(b, '\'');
}

/* ---- numbers ------------------------------------------------------------------ */

void tt_int(sbuf *b, const tnode *n)
{
    if (n->type == T_INT)
        sb_fmt(b, "%lld", (long long)n->u.i);
    else
        write_int(b, n); /* a big: never 0 (etf.c) */
}

void put_i128(sbuf *b, i128 v)
{
    char d[48];
    size_t n = 0;
    /* digits of the magnitude, taken from a negative value (whose
     * magnitude always fits) */
    i128 x = v < 0 ? v : -v;
    do {
        d[n++] = (char)('0' - (int)(x % 10));
        x /= 10;
    } while (x != 0);
    if (v < 0)
        sb_ch(b, '-');
    while (n > 0)
        sb_ch(b, d[--n]);
}

void put_time_us(sbuf *b, i128 ns)
{
    if (ns < 0)
        sb_ch(b, '-');
    i128 neg = ns < 0 ? ns : -ns; /* -|ns|, which cannot overflow */
    i128 us = -(neg / 1000);
    int rem = (int)-(neg % 1000);
    put_i128(b, us);
    char r[5] = {'.', (char)('0' + rem / 100), (char)('0' + rem / 10 % 10), (char)('0' + rem % 10), 0};
    sb_put(b, r, 4);
}

/* ---- pids, ports, references, funs ----------------------------------------------- */

void tt_ident_node(sbuf *b, const tnode *n)
{
    ident id;
    ident_of(n, &id);
    if (!id.node_latin1) {
        sb_put(b, id.node, id.node_len);
        return;
    }
    for (size_t k = 0; k < id.node_len; k++)
        sb_utf8(b, id.node[k]);
}

/* `0`, or the node's name when it is not `home`. */
static void node_part(sbuf *b, const ident *id, str home)
{
    bool ascii = true;
    for (size_t k = 0; id->node_latin1 && k < id->node_len && ascii; k++)
        ascii = id->node[k] < 128;
    size_t at = b->len;
    if (ascii || !id->node_latin1)
        sb_put(b, id->node, id->node_len);
    else
        for (size_t k = 0; k < id->node_len; k++)
            sb_utf8(b, id->node[k]);
    if (b->len - at == home.n && memcmp(b->p + at, home.p, home.n) == 0) {
        b->len = at;
        sb_ch(b, '0');
    }
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void fun_text(sbuf *b, const tnode *n)
{
    const unsigned char *e = n->etf;
    tree t = {0};
    size_t at;
    if (e[0] == 'q') { /* EXPORT_EXT: fun M:F/A */
        at = 1;
        long m = etf_parse(&t, e, n->etf_len, &at);
        long f = m >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
        long a = f >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
        if (a >= 0) {
            sb_str(b, "fun ");
            tt_atom(b, &t.v[m]);
            sb_ch(b, ':');
            tt_atom(b, &t.v[f]);
            sb_fmt(b, "/%lld", (long long)t.v[a].u.i);
        }
        free(t.v);
        return;
    }
    /* NEW_FUN_EXT: Size:32, Arity:8, Uniq:16/binary, Index:32,
     * NumFree:32, Module, OldIndex, OldUniq, ... (etf.c checked that
     * they are there) */
    uint32_t index = be32(e + 1 + 4 + 1 + 16);
    at = 1 + 4 + 1 + 16 + 4 + 4;
    long m = etf_parse(&t, e, n->etf_len, &at);
    long i = m >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
    long u = i >= 0 ? etf_parse(&t, e, n->etf_len, &at) : -1;
    if (u >= 0) {
        sb_str(b, "#Fun<");
        atom_text(b, &t.v[m]);
        sb_fmt(b, ".%u.%lld>", index, (long long)t.v[u].u.i);
    }
    free(t.v);
}

static void ident_text(sbuf *b, const tnode *n, str home)
{
    ident id;
    ident_of(n, &id);
    switch (n->type) {
    case T_PID:
        sb_ch(b, '<');
        node_part(b, &id, home);
        sb_fmt(b, ".%llu.%llu>", (unsigned long long)id.id[0], (unsigned long long)id.id[1]);
        return;
    case T_PORT:
        sb_str(b, "#Port<");
        node_part(b, &id, home);
        sb_fmt(b, ".%llu>", (unsigned long long)id.id[0]);
        return;
    default: /* T_REF: the words from the last */
        sb_str(b, "#Ref<");
        node_part(b, &id, home);
        for (uint32_t k = id.nid; k > 0; k--)
            sb_fmt(b, ".%llu", (unsigned long long)id.id[k - 1]);
        sb_ch(b, '>');
        return;
    }
}

/* ---- binaries ------------------------------------------------------------------- */

/* Valid UTF-8, a code point of 128 or more, every one printable latin1. */
static bool utf8_printable(const unsigned char *p, size_t n)
{
    bool high = false;
    for (size_t at = 0; at < n;) {
        uint32_t c;
        size_t k = utf8_next(p + at, n - at, &c);
        if (k == 0 || !printable_latin1(c))
            return false;
        high |= c > 127;
        at += k;
    }
    return high;
}

static void binary_text(sbuf *b, const tnode *n)
{
    const unsigned char *p = n->u.p;
    if (n->bits) { /* a bitstring: whole bytes, then Value:Bits */
        sb_str(b, "<<");
        for (uint32_t k = 0; k + 1 < n->n; k++)
            sb_fmt(b, "%u,", p[k]);
        sb_fmt(b, "%u:%u>>", (unsigned)(p[n->n - 1] >> (8 - n->bits)), (unsigned)n->bits);
        return;
    }
    if (n->n == 0) {
        sb_str(b, "<<>>");
        return;
    }
    if (utf8_printable(p, n->n)) {
        sb_str(b, "<<\"");
        for (size_t at = 0; at < n->n;) {
            uint32_t c;
            at += utf8_next(p + at, n->n - at, &c);
            char_esc(b, c, '"');
        }
        sb_str(b, "\"/utf8>>");
        return;
    }
    bool latin1 = true;
    for (uint32_t k = 0; k < n->n && latin1; k++)
        latin1 = printable_latin1(p[k]);
    if (latin1) {
        sb_str(b, "<<\"");
        for (uint32_t k = 0; k < n->n; k++)
            char_esc(b, p[k], '"');
        sb_str(b, "\">>");
        return;
    }
    sb_str(b, "<<");
    for (uint32_t k = 0; k < n->n; k++)
        sb_fmt(b, k ? ",%u" : "%u", p[k]);
    sb_str(b, ">>");
}

/* ---- terms ------------------------------------------------------------------------ */

/* A proper, non-empty list of printable latin1 code points. */
static bool is_string(const tree *t, const tnode *l)
{
    list_it it;
    const tnode *e, *tail;
    size_t count = 0;
    list_begin(&it, t, l);
    while ((e = list_next(&it, &tail)) != NULL) {
        if (e->type != T_INT || e->u.i < 0 || e->u.i > 255 || !printable_latin1((uint32_t)e->u.i))
            return false;
        count++;
    }
    return count > 0 && tail->type == T_NIL;
}

void tt_term(sbuf *b, const tree *t, const tnode *n, str home)
{
    n = deref(t, n);
    switch (n->type) {
    case T_INT:
    case T_BIG:
        tt_int(b, n);
        return;
    case T_FLOAT:
        write_float(b, n->u.f);
        return;
    case T_ATOM:
        tt_atom(b, n);
        return;
    case T_NIL:
        sb_str(b, "[]");
        return;
    case T_LIST: {
        list_it it;
        const tnode *e, *tail;
        list_begin(&it, t, n);
        if (is_string(t, n)) {
            sb_ch(b, '"');
            while ((e = list_next(&it, &tail)) != NULL)
                char_esc(b, (uint32_t)e->u.i, '"');
            sb_ch(b, '"');
            return;
        }
        sb_ch(b, '[');
        bool first = true;
        while ((e = list_next(&it, &tail)) != NULL) {
            if (!first)
                sb_ch(b, ',');
            first = false;
            tt_term(b, t, e, home);
        }
        if (tail->type != T_NIL) {
            sb_ch(b, '|');
            tt_term(b, t, tail, home);
        }
        sb_ch(b, ']');
        return;
    }
    case T_TUPLE:
        sb_ch(b, '{');
        for (uint32_t k = 0; k < n->n; k++) {
            if (k)
                sb_ch(b, ',');
            tt_term(b, t, kid(t, n, k), home);
        }
        sb_ch(b, '}');
        return;
    case T_MAP: {
        uint32_t small[16];
        uint32_t *idx = n->n <= 16 ? small : xmalloc(n->n * sizeof *idx);
        map_order(t, n, idx);
        sb_str(b, "#{");
        for (uint32_t k = 0; k < n->n; k++) {
            if (k)
                sb_ch(b, ',');
            tt_term(b, t, kid(t, n, 2 * idx[k]), home);
            sb_str(b, " => ");
            tt_term(b, t, kid(t, n, 2 * idx[k] + 1), home);
        }
        sb_ch(b, '}');
        if (idx != small)
            free(idx);
        return;
    }
    case T_BIN:
        binary_text(b, n);
        return;
    case T_PID:
    case T_PORT:
    case T_REF:
        ident_text(b, n, home);
        return;
    case T_FUN:
        fun_text(b, n);
        return;
    default:
        return;
    }
}

/* ---- JSON ------------------------------------------------------------------------ */

void json_str(sbuf *b, const char *p, size_t n)
{
    /* room for the worst case (every byte \u00XX), so that the runs of
     * plain bytes are copied without a check per byte */
    GROW(b->p, b->cap, b->len + 6 * n + 3);
    char *o = b->p + b->len;
    *o++ = '"';
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)p[k];
        if (c >= 32 && c != '"' && c != '\\' && c != 127) {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '\b': *o++ = 'b'; break;
        case '\t': *o++ = 't'; break;
        case '\n': *o++ = 'n'; break;
        case '\f': *o++ = 'f'; break;
        case '\r': *o++ = 'r'; break;
        default: {
            static const char hex[] = "0123456789abcdef";
            *o++ = 'u';
            *o++ = '0';
            *o++ = '0';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
        }
    }
    *o++ = '"';
    b->len = (size_t)(o - b->p);
    b->p[b->len] = 0;
}

static bool valid_utf8(const unsigned char *p, size_t n)
{
    for (size_t at = 0; at < n;) {
        uint32_t c;
        size_t k = utf8_next(p + at, n - at, &c);
        if (k == 0)
            return false;
        at += k;
    }
    return true;
}

#define MAX_SAFE 9007199254740991LL

void json_term(sbuf *b, const tree *t, const tnode *n, str home)
{
    static sbuf text;
    /* the text is built apart: terms nest, and this is not reentrant
     * only within one call, which makes no other call here */
    text.len = 0;
    tt_term(&text, t, n, home);
    sb_str(b, "{\"erl\":");
    json_str(b, text.p ? text.p : "", text.len);
    n = deref(t, n);
    switch (n->type) {
    case T_ATOM:
        if (is_atom(n, "true") || is_atom(n, "false")) {
            sb_str(b, ",\"json\":");
            atom_text(b, n);
        } else {
            text.len = 0;
            atom_text(&text, n);
            sb_str(b, ",\"json\":");
            json_str(b, text.p ? text.p : "", text.len);
        }
        break;
    case T_INT:
        if (n->u.i >= -MAX_SAFE && n->u.i <= MAX_SAFE)
            sb_fmt(b, ",\"json\":%lld", (long long)n->u.i);
        break;
    case T_FLOAT:
        sb_str(b, ",\"json\":");
        write_float(b, n->u.f);
        break;
    case T_BIN:
        if (n->bits == 0 && valid_utf8(n->u.p, n->n)) {
            sb_str(b, ",\"json\":");
            json_str(b, (const char *)n->u.p, n->n);
        }
        break;
    default:
        break;
    }
    sb_ch(b, '}');
}

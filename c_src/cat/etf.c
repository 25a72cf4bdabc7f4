/* etf.c: the external term format into a tree of nodes.
 *
 * The text and the filters look at an event's terms by position, so the
 * event's bytes are parsed into an array of nodes first; atoms,
 * binaries and the identifiers of pids, ports, references and funs stay
 * where they are in the bytes (the node points at them). The tree is
 * reused from event to event: its memory is that of the largest event.
 *
 * What binary_to_term/1 would refuse is refused here too, as far as the
 * printing needs it: cut data, unknown tags, atoms that are not UTF-8.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"

/* Deeper than any term a trace file holds (records nest at most 200
 * deep, plus what an external term inside one may hold). */
#define ETF_MAX_DEPTH 2000
/* The numbers a VM makes: a local pid's below 2^28, a reference's first
 * word below 2^18. */
#define ETF_PID_LIMIT (1u << 28)
#define ETF_REF_LIMIT (1u << 18)

typedef struct {
    tree *t;
    const unsigned char *b;
    size_t len;
} ps;

static bool need(const ps *p, size_t at, size_t n)
{
    return at <= p->len && n <= p->len - at;
}

static uint32_t be16(const unsigned char *b)
{
    return (uint32_t)b[0] << 8 | b[1];
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static uint32_t new_nodes(tree *t, size_t n)
{
    GROW(t->v, t->cap, t->len + n);
    uint32_t first = (uint32_t)t->len;
    memset(&t->v[first], 0, n * sizeof(tnode));
    t->len += n;
    return first;
}

static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = s[i] < 0x80 ? 1 : utf8_next(s + i, n - i, &c);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

/* An atom at *at (any of the four atom tags). */
static bool atom_at(const ps *p, size_t *at, tnode *out)
{
    size_t i = *at, n;
    if (!need(p, i, 1))
        return false;
    unsigned tag = p->b[i];
    bool small = tag == 's' || tag == 'w';
    bool utf8 = tag == 'v' || tag == 'w';
    if (tag != 'd' && tag != 's' && tag != 'v' && tag != 'w')
        return false;
    if (!need(p, i + 1, small ? 1 : 2))
        return false;
    n = small ? p->b[i + 1] : be16(p->b + i + 1);
    i += small ? 2 : 3;
    if (!need(p, i, n) || (utf8 && !valid_utf8(p->b + i, n)))
        return false;
    out->type = T_ATOM;
    out->latin1 = !utf8;
    out->u.p = p->b + i;
    out->n = (uint32_t)n;
    *at = i + n;
    return true;
}

static bool skip_atom(const ps *p, size_t *at)
{
    tnode ignored;
    return atom_at(p, at, &ignored);
}

/* An integer term (small, integer or big) that must fit in 64 bits. */
static bool small_int_at(const ps *p, size_t *at, int64_t *v)
{
    size_t i = *at;
    if (!need(p, i, 1))
        return false;
    switch (p->b[i]) {
    case 'a':
        if (!need(p, i, 2))
            return false;
        *v = p->b[i + 1];
        *at = i + 2;
        return true;
    case 'b':
        if (!need(p, i, 5))
            return false;
        *v = (int32_t)be32(p->b + i + 1);
        *at = i + 5;
        return true;
    default:
        return false;
    }
}

static long parse(ps *p, size_t *at, uint32_t slot, unsigned depth);

/* Whether a node atom names the node that wrote the file (tree.home): a
 * reader outside the VM takes that node for the reading one. */
static bool is_home(const ps *p, const tnode *node)
{
    return p->t->home != NULL && strlen(p->t->home) == node->n &&
           memcmp(p->t->home, node->u.p, node->n) == 0;
}

/* n terms into consecutive slots from `first`. */
static bool parse_seq(ps *p, size_t *at, uint32_t first, uint64_t n,
                      unsigned depth)
{
    for (uint64_t k = 0; k < n; k++)
        if (parse(p, at, first + (uint32_t)k, depth + 1) < 0)
            return false;
    return true;
}

/* Big integers that fit in 64 bits become T_INT, as the VM makes them
 * small again; the others keep their magnitude (high zero digits, which
 * binary_to_term drops, left out). */
static void big_value(tnode *n, const unsigned char *digits, size_t nd, bool neg)
{
    while (nd > 0 && digits[nd - 1] == 0)
        nd--;
    n->type = T_BIG;
    n->u.p = digits;
    n->n = (uint32_t)nd;
    n->neg = neg;
    if (nd > 8)
        return;
    uint64_t m = 0;
    for (size_t k = nd; k > 0; k--)
        m = m << 8 | digits[k - 1];
    if (!neg && m <= (uint64_t)INT64_MAX) {
        n->type = T_INT;
        n->u.i = (int64_t)m;
    } else if (neg && m <= (uint64_t)INT64_MAX + 1) {
        n->type = T_INT;
        n->u.i = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
    }
}

/* Integers and floats. */
static bool parse_number(const ps *p, size_t *at, tnode *n)
{
    size_t i = *at;
    unsigned tag = p->b[i];
    uint64_t count;
    if (tag == 'a' || tag == 'b') { /* SMALL_INTEGER_EXT, INTEGER_EXT */
        n->type = T_INT;
        return small_int_at(p, at, &n->u.i);
    }
    if (tag == 'F') { /* NEW_FLOAT_EXT: binary_to_term refuses inf and NaN */
        uint64_t w = 0;
        if (!need(p, i, 9))
            return false;
        for (int k = 1; k <= 8; k++)
            w = w << 8 | p->b[i + k];
        memcpy(&n->u.f, &w, 8);
        n->type = T_FLOAT;
        *at = i + 9;
        return isfinite(n->u.f);
    }
    if (tag == 'c') { /* FLOAT_EXT: 31 bytes of text */
        char txt[32], *end;
        if (!need(p, i, 32))
            return false;
        memcpy(txt, p->b + i + 1, 31);
        txt[31] = 0;
        n->u.f = strtod(txt, &end);
        n->type = T_FLOAT;
        *at = i + 32;
        return end != txt && isfinite(n->u.f);
    }
    /* SMALL_BIG_EXT, LARGE_BIG_EXT */
    if (!need(p, i, tag == 'n' ? 3 : 6))
        return false;
    count = tag == 'n' ? p->b[i + 1] : be32(p->b + i + 1);
    i += tag == 'n' ? 2 : 5;
    if (!need(p, i, 1 + count) || p->b[i] > 1)
        return false;
    big_value(n, p->b + i + 1, (size_t)count, p->b[i] == 1);
    *at = i + 1 + count;
    return true;
}

/* Tuples, lists and maps: their elements into nodes of their own. */
static bool parse_container(ps *p, size_t *at, uint32_t slot, tnode *n, unsigned depth)
{
    size_t i = *at;
    unsigned tag = p->b[i];
    size_t head = tag == 'h' ? 2 : 5;
    if (!need(p, i, head))
        return false;
    uint64_t count = tag == 'h' ? p->b[i + 1] : be32(p->b + i + 1);
    uint64_t kids = tag == 't' ? 2 * count : tag == 'l' ? count + 1 : count;
    i += head;
    if (count > p->len - i || kids > p->len - i + 1) /* a byte per element at least */
        return false;
    n->type = tag == 't' ? T_MAP : tag == 'l' ? T_LIST : T_TUPLE;
    n->n = (uint32_t)count;
    n->kids = new_nodes(p->t, (size_t)kids);
    p->t->v[slot] = *n;
    if (!parse_seq(p, &i, n->kids, kids, depth))
        return false;
    *at = i;
    return true;
}

/* STRING_EXT: a list of small integers. */
static bool parse_string(ps *p, size_t *at, tnode *n)
{
    size_t i = *at;
    if (!need(p, i, 3))
        return false;
    uint32_t count = be16(p->b + i + 1);
    i += 3;
    if (!need(p, i, count))
        return false;
    n->type = T_LIST;
    n->n = count;
    n->kids = new_nodes(p->t, (size_t)count + 1);
    for (uint32_t k = 0; k < count; k++) {
        tnode *e = &p->t->v[n->kids + k];
        e->type = T_INT;
        e->u.i = p->b[i + k];
    }
    p->t->v[n->kids + count].type = T_NIL;
    *at = i + count;
    return true;
}

/* BINARY_EXT, BIT_BINARY_EXT */
static bool parse_binary(const ps *p, size_t *at, tnode *n)
{
    size_t i = *at;
    bool bits = p->b[i] == 'M';
    if (!need(p, i, bits ? 6 : 5))
        return false;
    uint64_t count = be32(p->b + i + 1);
    n->bits = bits ? p->b[i + 5] : 0;
    i += bits ? 6 : 5;
    if (!need(p, i, count) || n->bits > 8 || (bits && (n->bits == 0) != (count == 0)))
        return false;
    if (n->bits == 8)
        n->bits = 0;
    n->type = T_BIN;
    n->n = (uint32_t)count;
    n->u.p = p->b + i;
    *at = i + count;
    return true;
}

/* Pids, ports and references (their numbers stay in the bytes: ident_of). */
static bool parse_ident(const ps *p, size_t *at, tnode *n)
{
    size_t i = *at;
    unsigned tag = p->b[i];
    tnode node;
    if (tag == 'X' || tag == 'g') { /* NEW_PID_EXT, PID_EXT */
        i++;
        if (!atom_at(p, &i, &node) || !need(p, i, tag == 'X' ? 12 : 9))
            return false;
        /* binary_to_term/1 in the node that made a pid refuses one of its
         * own numbered 2^28 or more (no VM makes them). */
        if (be32(p->b + i) >= ETF_PID_LIMIT && is_home(p, &node))
            return false;
        n->type = T_PID;
        *at = i + (tag == 'X' ? 12 : 9);
        return true;
    }
    if (tag == 'Y' || tag == 'x' || tag == 'f') { /* NEW_PORT_EXT, V4_PORT_EXT, PORT_EXT */
        size_t rest = tag == 'Y' ? 8 : tag == 'x' ? 12 : 5;
        i++;
        if (!skip_atom(p, &i) || !need(p, i, rest))
            return false;
        n->type = T_PORT;
        *at = i + rest;
        return true;
    }
    if (tag == 'e') { /* REFERENCE_EXT */
        i++;
        if (!skip_atom(p, &i) || !need(p, i, 5) || be32(p->b + i) >= ETF_REF_LIMIT)
            return false;
        n->type = T_REF;
        *at = i + 5;
        return true;
    }
    /* NEWER_REFERENCE_EXT, NEW_REFERENCE_EXT */
    if (!need(p, i, 3))
        return false;
    uint32_t count = be16(p->b + i + 1);
    i += 3;
    if (count == 0 || count > 5 || !atom_at(p, &i, &node) ||
        !need(p, i, (tag == 'Z' ? 4 : 1) + 4 * (size_t)count))
        return false;
    i += tag == 'Z' ? 4 : 1;
    /* A VM makes the first number of a reference in 18 bits; the old
     * format may hold no other, and binary_to_term/1 in the node that
     * made a NEWER one refuses another too. A reader outside the VM
     * takes the file's own node for that node. */
    if (be32(p->b + i) >= ETF_REF_LIMIT && (tag == 'r' || is_home(p, &node)))
        return false;
    n->type = T_REF;
    *at = i + 4 * (size_t)count;
    return true;
}

/* Funs: EXPORT_EXT (module, function, arity) and NEW_FUN_EXT (Size:32,
 * Arity, Uniq:16/binary, Index:32, NumFree:32, Module, OldIndex, OldUniq,
 * Pid, NumFree terms). binary_to_term/1 skips Size and takes the fields
 * as they come, so that a wrong Size is no error: the fun ends where its
 * fields do. The kids: M, F, A, or Module, Index, OldUniq. */
static bool parse_fun(ps *p, size_t *at, uint32_t slot, tnode *n, unsigned depth)
{
    size_t i = *at;
    bool local = p->b[i] == 'p';
    n->type = local ? T_FUN : T_EXPORT;
    n->n = 3;
    n->kids = new_nodes(p->t, 3);
    tnode *k = &p->t->v[n->kids];
    if (!local) {
        i++;
        if (!atom_at(p, &i, &k[0]) || !atom_at(p, &i, &k[1]) ||
            !small_int_at(p, &i, &k[2].u.i))
            return false;
        k[2].type = T_INT;
        *at = i;
        return true;
    }
    if (!need(p, i, 1 + 4 + 1 + 16 + 4 + 4))
        return false;
    uint32_t nfree = be32(p->b + i + 1 + 4 + 1 + 16 + 4);
    k[1] = (tnode){.type = T_INT, .u.i = be32(p->b + i + 1 + 4 + 1 + 16)};
    i += 1 + 4 + 1 + 16 + 4 + 4;
    int64_t old_index;
    if (!atom_at(p, &i, &k[0]) || !small_int_at(p, &i, &old_index) ||
        !small_int_at(p, &i, &k[2].u.i))
        return false;
    k[2].type = T_INT;
    p->t->v[slot] = *n;
    /* The pid and the free variables are parsed into a node of their own
     * that nothing points at (a fun prints without them). */
    uint32_t scratch = new_nodes(p->t, 1);
    if (parse(p, &i, scratch, depth + 1) < 0 || p->t->v[scratch].type != T_PID)
        return false;
    for (uint32_t f = 0; f < nfree; f++)
        if (parse(p, &i, scratch, depth + 1) < 0)
            return false;
    *at = i;
    return true;
}

static long parse(ps *p, size_t *at, uint32_t slot, unsigned depth)
{
    size_t i = *at;
    if (depth > ETF_MAX_DEPTH || !need(p, i, 1))
        return -1;
    tnode n = {0};
    n.etf = p->b + i;
    bool ok;
    switch (p->b[i]) {
    case 'a': case 'b': case 'F': case 'c': case 'n': case 'o':
        ok = parse_number(p, &i, &n);
        break;
    case 'd': case 's': case 'v': case 'w':
        ok = atom_at(p, &i, &n);
        break;
    case 'h': case 'i': case 'l': case 't':
        ok = parse_container(p, &i, slot, &n, depth);
        break;
    case 'j': /* NIL_EXT */
        n.type = T_NIL;
        i++;
        ok = true;
        break;
    case 'k':
        ok = parse_string(p, &i, &n);
        break;
    case 'm': case 'M':
        ok = parse_binary(p, &i, &n);
        break;
    case 'X': case 'g': case 'Y': case 'x': case 'f': case 'Z': case 'r': case 'e':
        ok = parse_ident(p, &i, &n);
        break;
    case 'p': case 'q':
        ok = parse_fun(p, &i, slot, &n, depth);
        break;
    default:
        /* compressed terms, atom cache references and local pids never
         * come out of term_to_binary/1 without options */
        ok = false;
    }
    if (!ok)
        return -1;
    n.etf_len = (uint32_t)(p->b + i - n.etf);
    p->t->v[slot] = n;
    *at = i;
    return slot;
}

long etf_parse(tree *t, const unsigned char *buf, size_t len, size_t *at)
{
    ps p = {t, buf, len};
    uint32_t root = new_nodes(t, 1);
    return parse(&p, at, root, 0);
}

void atom_text(sbuf *b, const tnode *n)
{
    if (!n->latin1) {
        sb_put(b, n->u.p, n->n);
        return;
    }
    for (uint32_t k = 0; k < n->n; k++)
        sb_utf8(b, n->u.p[k]);
}

/* The atom of a pid, port or reference, whose encoding starts at e. */
static const unsigned char *ident_atom(const unsigned char *e, size_t *len,
                                       bool *latin1)
{
    bool small = e[0] == 's' || e[0] == 'w';
    *latin1 = e[0] == 'd' || e[0] == 's';
    *len = small ? e[1] : be16(e + 1);
    return e + (small ? 2 : 3);
}

bool ident_of(const tnode *n, ident *o)
{
    const unsigned char *e = n->etf;
    memset(o, 0, sizeof *o);
    unsigned tag = e[0];
    const unsigned char *q;
    uint32_t count = 0;
    switch (n->type) {
    case T_PID:
        o->node = ident_atom(e + 1, &o->node_len, &o->node_latin1);
        q = o->node + o->node_len;
        o->nid = 2;
        o->id[0] = be32(q);
        o->id[1] = be32(q + 4);
        return true;
    case T_PORT:
        o->node = ident_atom(e + 1, &o->node_len, &o->node_latin1);
        q = o->node + o->node_len;
        o->nid = 1;
        o->id[0] = tag == 'x' ? (uint64_t)be32(q) << 32 | be32(q + 4) : be32(q);
        return true;
    case T_REF:
        if (tag == 'e') {
            o->node = ident_atom(e + 1, &o->node_len, &o->node_latin1);
            q = o->node + o->node_len;
            o->nid = 1;
            o->id[0] = be32(q);
            return true;
        }
        count = be16(e + 1);
        o->node = ident_atom(e + 3, &o->node_len, &o->node_latin1);
        q = o->node + o->node_len;
        q += tag == 'Z' ? 4 : 1; /* the creation */
        o->nid = count;
        for (uint32_t k = 0; k < count; k++)
            o->id[k] = be32(q + 4 * k);
        return true;
    default:
        return false;
    }
}

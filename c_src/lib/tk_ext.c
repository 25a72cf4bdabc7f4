/* tk_ext.c: the check of external terms in trace files (tk_ext.h). */
#include "tk_ext.h"

#include <stdint.h>

typedef struct {
    const unsigned char *p;
    size_t at, len;
} ext_in;

static bool have(const ext_in *in, size_t n)
{
    return n <= in->len - in->at;
}

static uint32_t be16(const unsigned char *b)
{
    return (uint32_t)b[0] << 8 | b[1];
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

size_t tk_utf8_next(const unsigned char *p, size_t n, uint32_t *c)
{
    if (n == 0)
        return 0;
    unsigned b = p[0];
    size_t len;
    uint32_t v, min;
    if (b < 0x80) {
        *c = b;
        return 1;
    }
    if ((b & 0xE0) == 0xC0)
        len = 2, v = b & 0x1F, min = 0x80;
    else if ((b & 0xF0) == 0xE0)
        len = 3, v = b & 0x0F, min = 0x800;
    else if ((b & 0xF8) == 0xF0)
        len = 4, v = b & 0x07, min = 0x10000;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *c = v;
    return len;
}

/* An atom at in->at (any of its four tags), stepped over. */
static bool atom(ext_in *in)
{
    if (!have(in, 1))
        return false;
    unsigned tag = in->p[in->at];
    bool small = tag == 's' || tag == 'w', utf8 = tag == 'v' || tag == 'w';
    if (tag != 'd' && tag != 's' && tag != 'v' && tag != 'w')
        return false;
    size_t head = small ? 2 : 3;
    if (!have(in, head))
        return false;
    size_t n = small ? in->p[in->at + 1] : be16(in->p + in->at + 1);
    in->at += head;
    if (!have(in, n))
        return false;
    const unsigned char *s = in->p + in->at;
    size_t chars = 0;
    for (size_t i = 0; i < n; chars++) {
        uint32_t c;
        size_t k = utf8 ? tk_utf8_next(s + i, n - i, &c) : 1;
        if (k == 0)
            return false;
        i += k;
    }
    in->at += n;
    return chars <= TK_EXT_MAX_ATOM_CHARS;
}

/* Steps over n bytes. */
static bool skip(ext_in *in, size_t n)
{
    if (!have(in, n))
        return false;
    in->at += n;
    return true;
}

/* The head of a tuple, list, map, fun or export: *inner set to the terms
 * it holds (rest: the bytes left, each inner term taking one at least). */
static tk_ext_kind container_head(ext_in *in, const unsigned char *b, size_t rest,
                                  uint64_t *inner)
{
    uint64_t n;
    switch (b[0]) {
    case 'h': /* SMALL_TUPLE_EXT */
    case 'i': /* LARGE_TUPLE_EXT */
        if (!have(in, b[0] == 'h' ? 2 : 5))
            return TK_EXT_BAD;
        n = b[0] == 'h' ? b[1] : be32(b + 1);
        in->at += b[0] == 'h' ? 2 : 5;
        *inner = n;
        return n <= rest ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'l': /* LIST_EXT: n elements and a tail */
        if (!have(in, 5))
            return TK_EXT_BAD;
        n = be32(b + 1);
        in->at += 5;
        *inner = n + 1;
        return n < rest ? TK_EXT_OTHER : TK_EXT_BAD;
    case 't': /* MAP_EXT: n keys and values */
        if (!have(in, 5))
            return TK_EXT_BAD;
        n = be32(b + 1);
        in->at += 5;
        *inner = 2 * n;
        return 2 * n <= rest ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'p': { /* NEW_FUN_EXT: Size, Arity, Uniq, Index, NumFree, then
                 * Module, OldIndex, OldUniq, Pid and NumFree terms */
        if (!have(in, 1 + 4 + 1 + 16 + 4 + 4))
            return TK_EXT_BAD;
        uint32_t nfree = be32(b + 1 + 4 + 1 + 16 + 4);
        in->at += 1 + 4 + 1 + 16 + 4 + 4;
        *inner = 4 + (uint64_t)nfree;
        return *inner <= rest ? TK_EXT_OTHER : TK_EXT_BAD;
    }
    default: /* 'q', EXPORT_EXT: module, function, arity */
        in->at++;
        *inner = 3;
        return TK_EXT_OTHER;
    }
}

/* A pid, port or reference: its node's atom and its numbers. */
static tk_ext_kind identifier_head(ext_in *in, const unsigned char *b)
{
    uint64_t n;
    switch (b[0]) {
    case 'X': /* NEW_PID_EXT */
    case 'g': /* PID_EXT */
        in->at++;
        return atom(in) && skip(in, b[0] == 'X' ? 12 : 9) ? TK_EXT_PID : TK_EXT_BAD;
    case 'Y': /* NEW_PORT_EXT */
    case 'x': /* V4_PORT_EXT */
    case 'f': /* PORT_EXT */
        in->at++;
        return atom(in) && skip(in, b[0] == 'Y' ? 8 : b[0] == 'x' ? 12 : 5) ? TK_EXT_PORT
                                                                            : TK_EXT_BAD;
    case 'Z': /* NEWER_REFERENCE_EXT */
    case 'r': /* NEW_REFERENCE_EXT */
        if (!have(in, 3))
            return TK_EXT_BAD;
        n = be16(b + 1);
        in->at += 3;
        if (n == 0 || n > 5 || !atom(in))
            return TK_EXT_BAD;
        return skip(in, (b[0] == 'Z' ? 4 : 1) + 4 * (size_t)n) ? TK_EXT_OTHER : TK_EXT_BAD;
    default: /* 'e', REFERENCE_EXT */
        in->at++;
        return atom(in) && skip(in, 5) ? TK_EXT_OTHER : TK_EXT_BAD;
    }
}

/* One term's own bytes at in->at: its kind, and in *inner the number of
 * terms it holds that follow it (containers), or TK_EXT_BAD. */
static tk_ext_kind term_head(ext_in *in, uint64_t *inner)
{
    *inner = 0;
    if (!have(in, 1))
        return TK_EXT_BAD;
    const unsigned char *b = in->p + in->at;
    size_t rest = in->len - in->at; /* each inner term takes a byte at least */
    uint64_t n;
    switch (b[0]) {
    case 'a': /* SMALL_INTEGER_EXT */
        return skip(in, 2) ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'b': /* INTEGER_EXT */
        return skip(in, 5) ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'F': /* NEW_FLOAT_EXT */
        return skip(in, 9) ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'c': /* FLOAT_EXT */
        return skip(in, 32) ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'd':
    case 's':
    case 'v':
    case 'w':
        return atom(in) ? TK_EXT_ATOM : TK_EXT_BAD;
    case 'j': /* NIL_EXT */
        in->at++;
        return TK_EXT_NIL;
    case 'k': /* STRING_EXT */
        return have(in, 3) && skip(in, 3 + be16(b + 1)) ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'm': /* BINARY_EXT */
        return have(in, 5) && skip(in, 5 + (size_t)be32(b + 1)) ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'M': { /* BIT_BINARY_EXT: the last byte holds 1 to 8 bits */
        if (!have(in, 6))
            return TK_EXT_BAD;
        uint32_t bytes = be32(b + 1);
        unsigned bits = b[5];
        if (bits > 8 || (bits == 0) != (bytes == 0))
            return TK_EXT_BAD;
        return skip(in, 6 + (size_t)bytes) ? TK_EXT_OTHER : TK_EXT_BAD;
    }
    case 'n': /* SMALL_BIG_EXT */
    case 'o': /* LARGE_BIG_EXT */
        if (!have(in, b[0] == 'n' ? 3 : 6))
            return TK_EXT_BAD;
        n = b[0] == 'n' ? b[1] : be32(b + 1);
        in->at += b[0] == 'n' ? 2 : 5;
        if (in->p[in->at] > 1) /* the sign */
            return TK_EXT_BAD;
        return skip(in, 1 + (size_t)n) ? TK_EXT_OTHER : TK_EXT_BAD;
    case 'h':
    case 'i':
    case 'l':
    case 't':
    case 'p':
    case 'q':
        return container_head(in, b, rest, inner);
    case 'X':
    case 'g':
    case 'Y':
    case 'x':
    case 'f':
    case 'Z':
    case 'r':
    case 'e':
        return identifier_head(in, b);
    default:
        /* compressed (80), atom cache references (82), the old fun (117),
         * local terms (121), and tags that do not exist */
        return TK_EXT_BAD;
    }
}

tk_ext_kind tk_ext_check(const unsigned char *p, size_t len)
{
    /* left[d]: the terms still to come in the container open at depth d
     * (the root's "container" is depth 0, with the root in it). */
    uint64_t left[TK_EXT_MAX_DEPTH + 1];
    ext_in in = {p, 1, len};
    if (len < 2 || p[0] != 131)
        return TK_EXT_BAD;
    unsigned depth = 0;
    left[0] = 1;
    tk_ext_kind root = TK_EXT_BAD;
    for (;;) {
        while (left[depth] == 0) {
            if (depth == 0)
                return in.at == len ? root : TK_EXT_BAD;
            depth--;
        }
        left[depth]--;
        uint64_t inner;
        tk_ext_kind k = term_head(&in, &inner);
        if (k == TK_EXT_BAD)
            return TK_EXT_BAD;
        if (root == TK_EXT_BAD)
            root = k;
        if (inner > 0) {
            /* A container at this term's depth; its terms one deeper. */
            if (!tk_term_may_nest(depth))
                return TK_EXT_BAD;
            left[++depth] = inner;
        }
    }
}

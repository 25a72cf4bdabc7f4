/* util.c: memory, byte strings and UTF-8 for tracekit-cat. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL) {
        fputs("tracekit-cat: out of memory\n", stderr);
        exit(CAT_OUTPUT);
    }
    return q;
}

void *xmalloc(size_t n)
{
    return xrealloc(NULL, n);
}

char *xstrndup(const char *s, size_t n)
{
    char *d = xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

void grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2 / size) {
            fputs("tracekit-cat: out of memory\n", stderr);
            exit(CAT_OUTPUT);
        }
        c *= 2;
    }
    *p = xrealloc(*p, c * size);
    *cap = c;
}

void sb_put(sbuf *b, const void *s, size_t n)
{
    GROW(b->p, b->cap, b->len + n + 1);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void sb_str(sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

void sb_ch(sbuf *b, char c)
{
    GROW(b->p, b->cap, b->len + 2);
    b->p[b->len++] = c;
    b->p[b->len] = 0;
}

void sb_fmt(sbuf *b, const char *fmt, ...)
{
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        sb_put(b, small, (size_t)n);
        return;
    }
    GROW(b->p, b->cap, b->len + (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sb_int(sbuf *b, int64_t v)
{
    char d[24];
    size_t n = 0;
    uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        d[sizeof d - ++n] = (char)('0' + m % 10);
        m /= 10;
    } while (m > 0);
    if (v < 0)
        d[sizeof d - ++n] = '-';
    sb_put(b, d + sizeof d - n, n);
}

void sb_utf8(sbuf *b, uint32_t c)
{
    char u[4];
    size_t n;
    if (c < 0x80) {
        u[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        u[0] = (char)(0xC0 | (c >> 6));
        u[1] = (char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        u[0] = (char)(0xE0 | (c >> 12));
        u[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        u[2] = (char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (c >> 18));
        u[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        u[3] = (char)(0x80 | (c & 0x3F));
        n = 4;
    }
    sb_put(b, u, n);
}

size_t utf8_next(const unsigned char *p, size_t n, uint32_t *c)
{
    if (n == 0)
        return 0;
    unsigned b = p[0];
    size_t len;
    uint32_t v, min;
    if (b < 0x80) {
        *c = b;
        return 1;
    } else if ((b & 0xE0) == 0xC0) {
        len = 2, v = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
        len = 3, v = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
        len = 4, v = b & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (p[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *c = v;
    return len;
}

/* out.c: buffered output to a file descriptor, and the one-line errors. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cat.h"

#define OUT_BUF (256u * 1024u)

static struct {
    int fd;
    unsigned char buf[OUT_BUF];
    size_t len;
    bool failed;
} out = {1, {0}, 0, false};

void out_open(int fd)
{
    out.fd = fd;
    out.len = 0;
    out.failed = false;
}

static void drain(const unsigned char *p, size_t n)
{
    while (n > 0 && !out.failed) {
        ssize_t w = write(out.fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            /* A closed pipe (head, less) is the reader's choice: quiet. */
            if (errno != EPIPE)
                cat_error("writing the output: %s", strerror(errno));
            out.failed = true;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

void out_write(const void *p, size_t n)
{
    if (out.failed)
        return;
    if (out.len + n > OUT_BUF) {
        drain(out.buf, out.len);
        out.len = 0;
        if (n > OUT_BUF) {
            drain(p, n);
            return;
        }
    }
    memcpy(out.buf + out.len, p, n);
    out.len += n;
}

void out_str(const char *s)
{
    out_write(s, strlen(s));
}

bool out_flush(void)
{
    drain(out.buf, out.len);
    out.len = 0;
    return !out.failed;
}

bool out_failed(void)
{
    return out.failed;
}

void cat_error(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tracekit-cat: %s\n", line);
}

void die_errno(const char *what)
{
    cat_error("%s: %s", what, strerror(errno));
    exit(CAT_OUTPUT);
}

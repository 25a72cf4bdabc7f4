/* out.c: buffered output to a file descriptor, and the one-line errors. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cat.h"

void out_init(output *o, int fd)
{
    o->fd = fd;
    o->len = 0;
    o->failed = false;
}

static void drain(output *o, const unsigned char *p, size_t n)
{
    while (n > 0 && !o->failed) {
        ssize_t w = write(o->fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            /* A closed pipe (head, less) is the reader's choice: quiet. */
            if (errno != EPIPE)
                cat_error("writing the output: %s", strerror(errno));
            o->failed = true;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

void out_write(output *o, const void *p, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n > OUT_BUF) {
        drain(o, o->buf, o->len);
        o->len = 0;
        if (n > OUT_BUF) {
            drain(o, p, n);
            return;
        }
    }
    memcpy(o->buf + o->len, p, n);
    o->len += n;
}

bool out_flush(output *o)
{
    drain(o, o->buf, o->len);
    o->len = 0;
    return !o->failed;
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

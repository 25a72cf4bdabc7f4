/* dbg.c: the framing of dbg's trace port files, so that
 * dbg:trace_client(file, F) and ttb's formatting read tracekit traces: an
 * event is <<0, Size:32, TermBinary>> (term_to_binary form: the version
 * byte, then the event's external term), and events the writer could not
 * keep are <<1, Count:32>>, which dbg hands on as {drop, Count}. */
#include <stdlib.h>

#include "cat.h"

static void frame(unsigned op, uint64_t size)
{
    unsigned char h[5] = {(unsigned char)op, (unsigned char)(size >> 24),
                          (unsigned char)(size >> 16), (unsigned char)(size >> 8),
                          (unsigned char)size};
    out_write(h, 5);
}

static void event(sink *s, const unsigned char *etf, size_t len, const tree *t,
                  const tnode *ev, int64_t time, const char *node)
{
    (void)s, (void)t, (void)ev, (void)time, (void)node;
    static const unsigned char version = 131;
    if (len + 1 > UINT32_MAX) {
        /* dbg's framing has no room for it: said, and left out */
        cat_error("an event of %zu bytes does not fit dbg's framing; left out", len);
        return;
    }
    frame(0, len + 1);
    out_write(&version, 1);
    out_write(etf, len);
}

static void lost(sink *s, uint64_t n)
{
    (void)s;
    while (n > 0) {
        uint64_t k = n > UINT32_MAX ? UINT32_MAX : n;
        frame(1, k);
        n -= k;
    }
}

static void finish(sink *s)
{
    (void)s;
}

sink *dbg_sink(void)
{
    static sink s = {event, lost, finish, false};
    return &s;
}

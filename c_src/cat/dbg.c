/* dbg.c: the framing of dbg's trace port files, so that
 * dbg:trace_client(file, F) and ttb's formatting read tracekit traces: an
 * event is <<0, Size:32, TermBinary>> (term_to_binary form: the version
 * byte, then the event's external term), and events the writer could not
 * keep are <<1, Count:32>>, which dbg hands on as {drop, Count}. */
#include "cat.h"

static void frame(output *out, unsigned op, uint64_t size)
{
    unsigned char h[5] = {(unsigned char)op, (unsigned char)(size >> 24),
                          (unsigned char)(size >> 16), (unsigned char)(size >> 8),
                          (unsigned char)size};
    out_write(out, h, 5);
}

static void event(sink *s, const unsigned char *etf, size_t len, const tree *t,
                  const tnode *ev, int64_t time, const reader *from)
{
    (void)t, (void)ev, (void)time, (void)from;
    output *out = ((dbg_sink *)s)->out;
    static const unsigned char version = 131;
    if (len + 1 > UINT32_MAX) {
        /* dbg's framing has no room for it: said, and left out */
        cat_error("an event of %zu bytes does not fit dbg's framing; left out", len);
        return;
    }
    frame(out, 0, len + 1);
    out_write(out, &version, 1);
    out_write(out, etf, len);
}

static void lost(sink *s, uint64_t n, const reader *from)
{
    (void)from;
    output *out = ((dbg_sink *)s)->out;
    while (n > 0) {
        uint64_t k = n > UINT32_MAX ? UINT32_MAX : n;
        frame(out, 1, k);
        n -= k;
    }
}

void dbg_sink_init(dbg_sink *d, output *out)
{
    *d = (dbg_sink){{event, lost, false}, out};
}

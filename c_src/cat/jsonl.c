/* jsonl.c: JSON Lines (EXPORTS.md 2): one object per event, its fields
 * typed, each term as Erlang text and, where that is clean, as JSON.
 * Nothing is kept from event to event but the clock and the node of the
 * last event that had a process.
 */
#include <string.h>

#include "export.h"

typedef struct {
    sink s;
    uint64_t n;
    eclock clock;
    strtab nodes;
    long node; /* of the last event with a process; -1: none yet */
    sbuf line, text;
} jsonl;

static str home(const jsonl *x)
{
    static const str nonode = {"nonode@nohost", 13};
    return x->node < 0 ? nonode : node_str(&x->nodes, (uint32_t)x->node);
}

static void value(jsonl *x, const tree *t, const efield *f, str h)
{
    sbuf *b = &x->line;
    switch (f->kind) {
    case F_TERM:
        json_term(b, t, f->term, h);
        return;
    case F_SERIAL:
        field_text(b, t, f, h); /* [Last,Serial]: two JSON numbers */
        return;
    default:
        x->text.len = 0;
        field_text(&x->text, t, f, h);
        json_str(b, x->text.p, x->text.len);
        return;
    }
}

static void event_cb(sink *s, const unsigned char *etf, size_t len, const tree *t,
                     const tnode *ev, int64_t time, const char *node)
{
    (void)etf, (void)len, (void)time, (void)node;
    jsonl *x = (jsonl *)s;
    event e;
    event_parse(t, ev, &e);
    x->n++;
    i128 at = clock_tick(&x->clock, &e);
    sbuf *b = &x->line;
    b->len = 0;
    sb_fmt(b, "{\"i\":%llu,\"kind\":", (unsigned long long)x->n);
    if (e.kind == EV_OTHER) {
        sb_str(b, "\"other\",\"term\":");
        json_term(b, t, ev, home(x));
        sb_str(b, "}\n");
        out_sb(b);
        return;
    }
    if (e.proc != NULL)
        x->node = node_id(&x->nodes, e.proc);
    str h = home(x);
    sb_str(b, e.kind == EV_TRACE ? "\"trace\",\"node\":" : "\"seq_trace\",\"node\":");
    if (x->node < 0)
        sb_str(b, "null");
    else
        json_str(b, h.p, h.n);
    sb_str(b, ",\"time_us\":");
    put_time_us(b, at);
    if (e.ts == NULL) {
        sb_str(b, ",\"ts\":null");
    } else {
        x->text.len = 0;
        tt_term(&x->text, t, e.ts, h);
        sb_str(b, ",\"ts\":");
        json_str(b, x->text.p, x->text.len);
        sb_str(b, ",\"ts_ns\":");
        put_i128(b, e.ts_ns);
    }
    sb_str(b, ",\"tag\":");
    x->text.len = 0;
    tag_name(&x->text, &e);
    json_str(b, x->text.p, x->text.len);
    sb_str(b, ",\"pid\":");
    if (e.proc == NULL) {
        sb_str(b, "null");
    } else {
        x->text.len = 0;
        tt_term(&x->text, t, e.proc, h);
        json_str(b, x->text.p, x->text.len);
    }
    for (int k = 0; k < e.nf; k++) {
        sb_str(b, ",\"");
        sb_str(b, e.f[k].key);
        sb_str(b, "\":");
        value(x, t, &e.f[k], h);
    }
    if (e.rest_to > e.rest_from) {
        sb_str(b, ",\"rest\":[");
        for (uint32_t k = e.rest_from; k < e.rest_to; k++) {
            if (k > e.rest_from)
                sb_ch(b, ',');
            json_term(b, t, kid(t, ev, k), h);
        }
        sb_ch(b, ']');
    }
    sb_str(b, "}\n");
    out_sb(b);
}

static void lost(sink *s, uint64_t n)
{
    /* tracekit_file:fold/3 gives no term for lost events either */
    (void)s, (void)n;
}

static void finish(sink *s)
{
    (void)s;
}

sink *jsonl_sink(void)
{
    static jsonl x;
    x.s = (sink){event_cb, lost, finish, true};
    x.node = -1;
    return &x.s;
}

/* folded.c: folded stacks (EXPORTS.md 4), `label;m:f/1;m:g/2 Weight`,
 * the time each process spent with each stack of traced calls, written
 * at the end, sorted.
 *
 * Stacks are kept as a tree of frames (a stack is its top frame's node:
 * its parent, and the frame), and the time as a sum per process and
 * stack: memory grows with the distinct stacks of each process, as
 * tracekit_export's does, and not with the events.
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"

typedef struct {
    sink s;
    eclock clock;
    procs ps;
    strtab stacks;     /* (parent, frame) -> stack id - 1 */
    uint32_t *parent, *fid;
    size_t stcap;
    strtab acc;        /* (process, stack) -> index in ns */
    i128 *ns;
    size_t nscap;
} folded;

/* The stack of `parent` (0: none) with `fid` on top. */
static uint32_t push(folded *x, uint32_t parent, uint32_t fid)
{
    uint32_t k[2] = {parent, fid};
    bool added;
    uint32_t sid = st_intern(&x->stacks, k, sizeof k, &added) + 1;
    if (added) {
        GROW(x->parent, x->stcap, (size_t)sid + 1);
        x->fid = xrealloc(x->fid, x->stcap * sizeof *x->fid);
        x->parent[sid] = parent;
        x->fid[sid] = fid;
    }
    return sid;
}

/* The time since the process's previous event goes to its stack. */
static void account(folded *x, uint32_t pi, const proc *p, i128 ts)
{
    if (p->depth == 0 || ts <= p->last)
        return;
    uint32_t k[2] = {pi, p->stack[p->depth - 1].sid};
    bool added;
    uint32_t i = st_intern(&x->acc, k, sizeof k, &added);
    if (added) {
        GROW(x->ns, x->nscap, (size_t)i + 1);
        x->ns[i] = 0;
    }
    x->ns[i] += ts - p->last;
}

/* The tree of the event in hand. */
static const tree *cur;

/* The stack as Chrome keeps it (EXPORTS.md 3.2): call, return_from,
 * exception_from, return_to, exit. */
static void apply(folded *x, proc *p, const event *e)
{
    long at;
    if (e->kind != EV_TRACE)
        return;
    switch (e->tag) {
    case TG_CALL: {
        uint32_t fid = frame_of(&x->ps, cur, &e->f[0]);
        uint32_t top = p->depth ? p->stack[p->depth - 1].sid : 0;
        GROW(p->stack, p->cap, p->depth + 1);
        p->stack[p->depth++] = (frame){fid, push(x, top, fid), NULL, 0};
        return;
    }
    case TG_RETURN_FROM:
    case TG_EXCEPTION_FROM:
        at = frame_match(&x->ps, p, frame_of(&x->ps, cur, &e->f[0]));
        if (at >= 0)
            p->depth = (size_t)at;
        return;
    case TG_RETURN_TO:
        if (e->unreturned)
            return;
        at = frame_match(&x->ps, p, frame_of(&x->ps, cur, &e->f[0]));
        if (at >= 0)
            p->depth = (size_t)at + 1;
        return;
    case TG_EXIT:
        p->depth = 0;
        return;
    default:
        return;
    }
}

static void event_cb(sink *s, const unsigned char *etf, size_t len, const tree *t,
                     const tnode *ev, int64_t time, const char *node)
{
    (void)etf, (void)len, (void)time, (void)node;
    folded *x = (folded *)s;
    event e;
    event_parse(t, ev, &e);
    i128 ts = clock_tick(&x->clock, &e);
    if (e.kind == EV_OTHER || e.proc == NULL)
        return;
    cur = t;
    proc *p = procs_get(&x->ps, t, e.proc);
    account(x, (uint32_t)(p - x->ps.v), p, ts);
    apply(x, p, &e);
    p->last = ts;
    if (e.kind == EV_TRACE && e.tag == TG_REGISTER && e.f[0].term->type == T_ATOM)
        procs_register(&x->ps, p, t, e.f[0].term);
}

static void lost(sink *s, uint64_t n)
{
    (void)s, (void)n;
}

/* ---- the end: lines sorted by stack ------------------------------------------------- */

typedef struct {
    size_t off, len;
    i128 w;
} line;

static const char *line_text;

static int by_stack(const void *a, const void *b)
{
    const line *p = a, *q = b;
    int c = memcmp(line_text + p->off, line_text + q->off, p->len < q->len ? p->len : q->len);
    if (c != 0)
        return c;
    return p->len < q->len ? -1 : p->len > q->len;
}

/* A frame of the stack's text: `;` becomes `_`. */
static void semi(sbuf *b, const char *p, size_t n)
{
    size_t at = b->len;
    sb_put(b, p, n);
    for (size_t k = at; k < b->len; k++)
        if (b->p[k] == ';')
            b->p[k] = '_';
}

static void finish(sink *s)
{
    folded *x = (folded *)s;
    bool multi = x->ps.nodes.n > 1;
    sbuf text = {0};
    line *lines = NULL;
    size_t nlines = 0, lcap = 0;
    uint32_t *frames = NULL;
    size_t fcap = 0;
    for (uint32_t i = 0; i < x->acc.n; i++) {
        i128 w = (x->ns[i] + 500) / 1000;
        if (w == 0)
            continue;
        size_t klen;
        const char *kb = st_key(&x->acc, i, &klen);
        uint32_t k[2];
        memcpy(k, kb, sizeof k);
        const proc *p = &x->ps.v[k[0]];
        size_t off = text.len;
        if (multi) {
            str node = node_str(&x->ps.nodes, p->node);
            semi(&text, node.p, node.n);
            sb_ch(&text, ';');
        }
        semi(&text, p->label.p, p->label.len);
        /* the frames from the bottom: the stack's parents, reversed */
        size_t depth = 0;
        for (uint32_t sid = k[1]; sid != 0; sid = x->parent[sid]) {
            GROW(frames, fcap, depth + 1);
            frames[depth++] = x->fid[sid];
        }
        while (depth > 0) {
            str f = frame_str(&x->ps, frames[--depth]);
            sb_ch(&text, ';');
            semi(&text, f.p, f.n);
        }
        GROW(lines, lcap, nlines + 1);
        lines[nlines++] = (line){off, text.len - off, w};
    }
    line_text = text.p;
    if (nlines > 0)
        qsort(lines, nlines, sizeof *lines, by_stack);
    sbuf o = {0};
    for (size_t i = 0; i < nlines;) {
        /* equal stack texts (two processes of one label) add up */
        i128 w = lines[i].w;
        size_t j = i + 1;
        while (j < nlines && by_stack(&lines[i], &lines[j]) == 0)
            w += lines[j++].w;
        o.len = 0;
        sb_put(&o, text.p + lines[i].off, lines[i].len);
        sb_ch(&o, ' ');
        put_i128(&o, w);
        sb_ch(&o, '\n');
        out_sb(&o);
        i = j;
    }
    free(o.p);
    free(text.p);
    free(lines);
    free(frames);
}

sink *folded_sink(void)
{
    static folded x;
    x.s = (sink){event_cb, lost, finish, true};
    return &x.s;
}

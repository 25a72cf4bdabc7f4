/* chrome.c: the Chrome Trace Event Format (EXPORTS.md 3), written as
 * the events come: a track per process grouped per node, calls as
 * nested slices, scheduling and GC on a second track, messages as flow
 * arrows from send to receive, other events as instants; what is still
 * open at the end is closed there.
 *
 * Kept between events: the processes (procs.c) and at most PENDING_MAX
 * sends waiting for their receive, for process messages and for
 * seq_trace each (pending.c).
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"

#define SCHED_TID 1000000u

typedef struct {
    sink s;
    uint64_t n, flow;
    eclock clock;
    procs ps;
    uint32_t *node_pid; /* per node: its Chrome pid, 0: not yet */
    size_t npcap, nplen;
    uint32_t npids;
    pending *msgs, *seqs;
    bool first;
    sbuf o, text;
    const tree *t;
} chrome;

/* ---- objects -------------------------------------------------------------------- */

static void sep(chrome *x)
{
    sb_str(&x->o, x->first ? "\n" : ",\n");
    x->first = false;
}

static str home(const chrome *x, const proc *p)
{
    return node_str(&x->ps.nodes, p->node);
}

/* A term's text as a JSON string. */
static void jterm(chrome *x, const tnode *n, const proc *p)
{
    x->text.len = 0;
    tt_term(&x->text, x->t, n, home(x, p));
    json_str(&x->o, x->text.p, x->text.len);
}

static void jtext(chrome *x, const char *s, size_t n)
{
    json_str(&x->o, s, n);
}

static void jsb(chrome *x, const sbuf *s)
{
    json_str(&x->o, s->p, s->len);
}

/* {"ph":"PH","pid":P,"tid":T,"ts":TS[,"dur":0.000],"cat":"CAT","name": */
static void head(chrome *x, const char *ph, const proc *p, uint32_t offset, i128 ts, const char *cat)
{
    sep(x);
    sb_fmt(&x->o, "{\"ph\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", ph, x->node_pid[p->node],
           p->tid + offset);
    put_time_us(&x->o, ts);
    if (ph[0] == 'X')
        sb_str(&x->o, ",\"dur\":0.000");
    sb_fmt(&x->o, ",\"cat\":\"%s\",\"name\":", cat);
}

static void flow(chrome *x, const char *ph, const proc *p, i128 ts, const char *cat,
                 const char *name, uint64_t id)
{
    sep(x);
    sb_fmt(&x->o, "{\"ph\":\"%s\",%s\"pid\":%u,\"tid\":%u,\"ts\":", ph,
           ph[0] == 'f' ? "\"bp\":\"e\"," : "", x->node_pid[p->node], p->tid);
    put_time_us(&x->o, ts);
    sb_fmt(&x->o, ",\"cat\":\"%s\",\"name\":\"%s\",\"id\":%llu}", cat, name, (unsigned long long)id);
}

static void thread_name(chrome *x, const proc *p, uint32_t tid, const sbuf *label, bool sched)
{
    sep(x);
    sb_fmt(&x->o, "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":",
           x->node_pid[p->node], tid);
    if (sched) {
        x->text.len = 0;
        sb_put(&x->text, label->p, label->len);
        sb_str(&x->text, " scheduling");
        jsb(x, &x->text);
    } else {
        jsb(x, label);
    }
    sb_str(&x->o, "}}");
}

/* The E event of a frame popped: {"args":ARGS}. */
static void frame_end(chrome *x, const proc *p, const frame *f, i128 ts)
{
    str mfa = frame_str(&x->ps, f->fid);
    head(x, "E", p, 0, ts, "call");
    jtext(x, mfa.p, mfa.n);
    sb_str(&x->o, ",\"args\":{\"args\":");
    jtext(x, f->args, f->args_len);
    sb_str(&x->o, "}}");
}

/* Pops the frames above `keep` (top first) with their E events. */
static void pop_to(chrome *x, proc *p, size_t keep, i128 ts)
{
    while (p->depth > keep) {
        frame *f = &p->stack[--p->depth];
        frame_end(x, p, f, ts);
        free(f->args);
    }
}

/* ---- tracks (EXPORTS.md 3.1) ----------------------------------------------------- */

static bool sched_tag(int tag)
{
    return tag == TG_IN || tag == TG_OUT || tag == TG_GC_MINOR_START || tag == TG_GC_MINOR_END ||
           tag == TG_GC_MAJOR_START || tag == TG_GC_MAJOR_END;
}

static void announce(chrome *x, proc *p, const event *e)
{
    if (!p->is_announced) {
        GROW(x->node_pid, x->npcap, x->ps.nodes.n);
        while (x->nplen < x->ps.nodes.n)
            x->node_pid[x->nplen++] = 0;
        if (x->node_pid[p->node] == 0) {
            str name = home(x, p);
            x->node_pid[p->node] = ++x->npids;
            sep(x);
            sb_fmt(&x->o, "{\"ph\":\"M\",\"pid\":%u,\"name\":\"process_name\",\"args\":{\"name\":",
                   x->npids);
            jtext(x, name.p, name.n);
            sb_str(&x->o, "}}");
        }
        thread_name(x, p, p->tid, &p->label, false);
        p->announced.len = 0;
        sb_put(&p->announced, p->label.p, p->label.len);
        p->is_announced = true;
    }
    if (!p->sched && sched_tag(e->tag)) {
        thread_name(x, p, p->tid + SCHED_TID, &p->label, true);
        p->sched = true;
    }
}

/* A register event names the tracks again when the label changed. */
static void relabel(chrome *x, proc *p, const event *e)
{
    if (e->kind != EV_TRACE || e->tag != TG_REGISTER || e->f[0].term->type != T_ATOM)
        return;
    const tnode *name = e->f[0].term;
    procs_register(&x->ps, p, x->t, name);
    if (p->announced.len == p->label.len && memcmp(p->announced.p, p->label.p, p->label.len) == 0)
        return;
    thread_name(x, p, p->tid, &p->label, false);
    if (p->sched)
        thread_name(x, p, p->tid + SCHED_TID, &p->label, true);
    p->announced.len = 0;
    sb_put(&p->announced, p->label.p, p->label.len);
}

/* ---- events (EXPORTS.md 3.2) ------------------------------------------------------- */

static void instant_head(chrome *x, const proc *p, i128 ts)
{
    sep(x);
    sb_fmt(&x->o, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%u,\"tid\":%u,\"ts\":", x->node_pid[p->node],
           p->tid);
    put_time_us(&x->o, ts);
    sb_str(&x->o, ",\"cat\":\"proc\",\"name\":");
}

static void instant(chrome *x, const proc *p, const event *e, i128 ts)
{
    instant_head(x, p, ts);
    x->text.len = 0;
    tag_name(&x->text, e);
    jsb(x, &x->text);
    sb_str(&x->o, ",\"args\":{");
    for (int k = 0; k < e->nf; k++) {
        sb_fmt(&x->o, "%s\"%s\":", k ? "," : "", e->f[k].key);
        x->text.len = 0;
        field_text(&x->text, x->t, &e->f[k], home(x, p));
        jsb(x, &x->text);
    }
    if (e->rest_to > e->rest_from) {
        sb_str(&x->o, e->nf ? ",\"rest\":[" : "\"rest\":[");
        for (uint32_t k = e->rest_from; k < e->rest_to; k++) {
            if (k > e->rest_from)
                sb_ch(&x->o, ',');
            jterm(x, kid(x->t, e->ev, k), p);
        }
        sb_ch(&x->o, ']');
    }
    sb_str(&x->o, "}}");
}

static void call(chrome *x, proc *p, const event *e, i128 ts)
{
    uint32_t fid = frame_of(&x->ps, x->t, &e->f[0]);
    str mfa = frame_str(&x->ps, fid);
    head(x, "B", p, 0, ts, "call");
    jtext(x, mfa.p, mfa.n);
    sb_ch(&x->o, '}');
    x->text.len = 0;
    tt_term(&x->text, x->t, e->f[1].term, home(x, p));
    GROW(p->stack, p->cap, p->depth + 1);
    frame *f = &p->stack[p->depth++];
    f->fid = fid;
    f->sid = 0;
    f->args = xstrndup(x->text.p ? x->text.p : "", x->text.len);
    f->args_len = x->text.len;
}

static void ret(chrome *x, proc *p, const event *e, i128 ts)
{
    long at = frame_match(&x->ps, p, frame_of(&x->ps, x->t, &e->f[0]));
    if (at < 0)
        return;
    if (e->tag == TG_RETURN_TO) {
        pop_to(x, p, (size_t)at + 1, ts);
        return;
    }
    pop_to(x, p, (size_t)at + 1, ts);
    frame *f = &p->stack[--p->depth];
    str mfa = frame_str(&x->ps, f->fid);
    head(x, "E", p, 0, ts, "call");
    jtext(x, mfa.p, mfa.n);
    sb_str(&x->o, ",\"args\":{\"args\":");
    jtext(x, f->args, f->args_len);
    sb_str(&x->o, e->tag == TG_RETURN_FROM ? ",\"return\":" : ",\"exception\":");
    jterm(x, e->f[1].term, p);
    sb_str(&x->o, "}}");
    free(f->args);
}

static void running(chrome *x, proc *p, const event *e, i128 ts)
{
    x->text.len = 0;
    field_text(&x->text, x->t, &e->f[0], home(x, p));
    if (e->tag == TG_IN) {
        if (p->running)
            return;
        p->running = true;
        p->in.len = 0;
        sb_put(&p->in, x->text.p, x->text.len);
        head(x, "B", p, SCHED_TID, ts, "sched");
        sb_str(&x->o, "\"running\"}");
        return;
    }
    if (!p->running)
        return;
    p->running = false;
    head(x, "E", p, SCHED_TID, ts, "sched");
    sb_str(&x->o, "\"running\",\"args\":{\"in\":");
    jsb(x, &p->in);
    sb_str(&x->o, ",\"out\":");
    jsb(x, &x->text);
    sb_str(&x->o, "}}");
}

static void gc(chrome *x, proc *p, const event *e, i128 ts)
{
    bool major = e->tag == TG_GC_MAJOR_START || e->tag == TG_GC_MAJOR_END;
    bool start = e->tag == TG_GC_MINOR_START || e->tag == TG_GC_MAJOR_START;
    const char *name = major ? "gc_major" : "gc_minor";
    int open = -1;
    for (int k = 0; k < p->ngc; k++)
        if (p->gc_major[k] == major)
            open = k;
    x->text.len = 0;
    tt_term(&x->text, x->t, e->f[0].term, home(x, p));
    if (start) {
        if (open >= 0)
            return;
        /* the newest first: the other one (if open) moves down */
        if (p->ngc == 1) {
            p->gc_major[1] = p->gc_major[0];
            sbuf s = p->gc_info[1];
            p->gc_info[1] = p->gc_info[0];
            p->gc_info[0] = s;
        }
        p->gc_major[0] = major;
        p->gc_info[0].len = 0;
        sb_put(&p->gc_info[0], x->text.p, x->text.len);
        p->ngc++;
        head(x, "B", p, SCHED_TID, ts, "gc");
        sb_fmt(&x->o, "\"%s\"}", name);
        return;
    }
    if (open < 0)
        return;
    head(x, "E", p, SCHED_TID, ts, "gc");
    sb_fmt(&x->o, "\"%s\",\"args\":{\"start\":", name);
    jsb(x, &p->gc_info[open]);
    sb_str(&x->o, ",\"end\":");
    jsb(x, &x->text);
    sb_str(&x->o, "}}");
    if (open == 0 && p->ngc == 2) {
        p->gc_major[0] = p->gc_major[1];
        sbuf s = p->gc_info[0];
        p->gc_info[0] = p->gc_info[1];
        p->gc_info[1] = s;
    }
    p->ngc--;
}

static void send(chrome *x, proc *p, const event *e, i128 ts)
{
    head(x, "X", p, 0, ts, "msg");
    sb_str(&x->o, e->tag == TG_SEND ? "\"send\"" : "\"send (no such process)\"");
    sb_str(&x->o, ",\"args\":{\"msg\":");
    jterm(x, e->f[0].term, p);
    sb_str(&x->o, ",\"to\":");
    jterm(x, e->f[1].term, p);
    sb_str(&x->o, "}}");
    if (e->tag != TG_SEND)
        return;
    uint64_t id = ++x->flow;
    digest to = {0, 0};
    bool known = procs_receiver(&x->ps, x->t, e->f[1].term, &to);
    if (x->msgs == NULL)
        x->msgs = pending_new();
    pending_add(x->msgs, term_digest(x->t, e->f[0].term), !known, to, id);
    flow(x, "s", p, ts, "msg", "message", id);
}

static void receive(chrome *x, proc *p, const event *e, i128 ts)
{
    head(x, "X", p, 0, ts, "msg");
    sb_str(&x->o, "\"receive\",\"args\":{\"msg\":");
    jterm(x, e->f[0].term, p);
    sb_str(&x->o, "}}");
    uint64_t id = x->msgs ? pending_take(x->msgs, term_digest(x->t, e->f[0].term), p->id) : 0;
    if (id != 0)
        flow(x, "f", p, ts, "msg", "message", id);
}

/* seq_trace send, receive, print (fields: label, serial, from, to, msg) */
static void seq(chrome *x, proc *p, const event *e, i128 ts)
{
    const efield *label = &e->f[0], *serial = &e->f[1], *from = &e->f[2], *to = &e->f[3],
                 *msg = &e->f[4];
    if (e->tag == TG_PRINT)
        instant_head(x, p, ts);
    else
        head(x, "X", p, 0, ts, "seq_trace");
    sb_str(&x->o, e->tag == TG_SEND ? "\"seq send\"" : e->tag == TG_RECEIVE ? "\"seq receive\"" : "\"seq print\"");
    sb_str(&x->o, ",\"args\":{\"label\":");
    jterm(x, label->term, p);
    sb_str(&x->o, ",\"serial\":");
    x->text.len = 0;
    field_text(&x->text, x->t, serial, home(x, p));
    jsb(x, &x->text);
    sb_str(&x->o, ",\"msg\":");
    jterm(x, msg->term, p);
    if (e->tag == TG_PRINT) {
        sb_str(&x->o, "}}");
        return;
    }
    sb_str(&x->o, e->tag == TG_SEND ? ",\"to\":" : ",\"from\":");
    jterm(x, e->tag == TG_SEND ? to->term : from->term, p);
    sb_str(&x->o, "}}");
    digest parts[3] = {term_digest(x->t, label->term), term_digest(x->t, serial->term),
                       term_digest(x->t, from->term)};
    digest key = digest_join(parts, 3), none = {0, 0};
    if (x->seqs == NULL)
        x->seqs = pending_new();
    if (e->tag == TG_SEND) {
        uint64_t id = ++x->flow;
        pending_add(x->seqs, key, true, none, id);
        flow(x, "s", p, ts, "seq_trace", "seq_trace", id);
    } else {
        uint64_t id = pending_take(x->seqs, key, none);
        if (id != 0)
            flow(x, "f", p, ts, "seq_trace", "seq_trace", id);
    }
}

static void apply(chrome *x, proc *p, const event *e, i128 ts)
{
    if (e->kind == EV_SEQ) {
        seq(x, p, e, ts);
        return;
    }
    switch (e->tag) {
    case TG_CALL:
        call(x, p, e, ts);
        return;
    case TG_RETURN_FROM:
    case TG_EXCEPTION_FROM:
        ret(x, p, e, ts);
        return;
    case TG_RETURN_TO:
        /* return_to undefined is an instant, as in tracekit_export
         * (EXPORTS.md 5) */
        if (e->unreturned)
            instant(x, p, e, ts);
        else
            ret(x, p, e, ts);
        return;
    case TG_EXIT:
        instant(x, p, e, ts);
        pop_to(x, p, 0, ts);
        return;
    case TG_IN:
    case TG_OUT:
        running(x, p, e, ts);
        return;
    case TG_GC_MINOR_START:
    case TG_GC_MINOR_END:
    case TG_GC_MAJOR_START:
    case TG_GC_MAJOR_END:
        gc(x, p, e, ts);
        return;
    case TG_SEND:
    case TG_SEND_NX:
        send(x, p, e, ts);
        return;
    case TG_RECEIVE:
        receive(x, p, e, ts);
        return;
    default:
        instant(x, p, e, ts);
        return;
    }
}

static void event_cb(sink *s, const unsigned char *etf, size_t len, const tree *t,
                     const tnode *ev, int64_t time, const char *node)
{
    (void)etf, (void)len, (void)time, (void)node;
    chrome *x = (chrome *)s;
    event e;
    event_parse(t, ev, &e);
    x->n++;
    i128 ts = clock_tick(&x->clock, &e);
    if (e.kind == EV_OTHER || e.proc == NULL)
        return;
    x->t = t;
    x->o.len = 0;
    proc *p = procs_get(&x->ps, t, e.proc);
    announce(x, p, &e);
    apply(x, p, &e, ts);
    p->last = ts;
    relabel(x, p, &e);
    out_sb(&x->o);
}

static void lost(sink *s, uint64_t n)
{
    (void)s, (void)n;
}

/* ---- the end (EXPORTS.md 3.3) --------------------------------------------------------- */

static chrome *sorting;

static int by_track(const void *a, const void *b)
{
    const proc *p = &sorting->ps.v[*(const uint32_t *)a], *q = &sorting->ps.v[*(const uint32_t *)b];
    uint32_t np = sorting->node_pid[p->node], nq = sorting->node_pid[q->node];
    if (np != nq)
        return np < nq ? -1 : 1;
    return p->tid < q->tid ? -1 : p->tid > q->tid;
}

static void finish(sink *s)
{
    chrome *x = (chrome *)s;
    uint32_t n = x->ps.keys.n;
    uint32_t *order = xmalloc((n ? n : 1) * sizeof *order);
    for (uint32_t k = 0; k < n; k++)
        order[k] = k;
    sorting = x;
    qsort(order, n, sizeof *order, by_track);
    for (uint32_t k = 0; k < n; k++) {
        proc *p = &x->ps.v[order[k]];
        x->o.len = 0;
        pop_to(x, p, 0, p->last);
        for (int g = 0; g < p->ngc; g++) {
            head(x, "E", p, SCHED_TID, p->last, "gc");
            sb_fmt(&x->o, "\"%s\",\"args\":{\"start\":", p->gc_major[g] ? "gc_major" : "gc_minor");
            jsb(x, &p->gc_info[g]);
            sb_str(&x->o, "}}");
        }
        if (p->running) {
            head(x, "E", p, SCHED_TID, p->last, "sched");
            sb_str(&x->o, "\"running\",\"args\":{\"in\":");
            jsb(x, &p->in);
            sb_str(&x->o, "}}");
        }
        out_sb(&x->o);
    }
    free(order);
    x->o.len = 0;
    sb_fmt(&x->o, "\n],\"otherData\":{\"format\":\"tracekit-export\",\"version\":1,\"events\":%llu,"
                  "\"time_zero_ns\":",
           (unsigned long long)x->n);
    if (x->clock.timed)
        put_i128(&x->o, x->clock.t0);
    else
        sb_str(&x->o, "null");
    sb_str(&x->o, "}}\n");
    out_sb(&x->o);
}

sink *chrome_sink(void)
{
    static chrome x;
    x.s = (sink){event_cb, lost, finish, true};
    x.first = true;
    out_str("{\"traceEvents\":[");
    return &x.s;
}

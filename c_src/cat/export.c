/* export.c: jsonl, chrome and folded (EXPORTS.md): each event taken
 * apart as EXPORTS.md 1.4 and 2.2 say (its process, tag, named fields
 * and trailing terms; tracekit_export's parse/1 and trace_fields/2), its
 * time on the exports' clock (1.5), and the choice of the format.
 */
#include <string.h>

#include "args.h"
#include "export.h"

sink *export_sink(int format, const text_opts *o)
{
    /* the exports print every pid with its node: no local node (the
     * report's table and names print as the shell's format does) */
    switch (format) {
    case FMT_JSONL:
        return jsonl_sink();
    case FMT_CHROME:
        return chrome_sink();
    case FMT_FOLDED:
        return folded_sink();
    case FMT_HTML:
        return html_sink(o);
    default:
        cat_error("this format is not written by tracekit-cat");
        return NULL;
    }
}

/* ---- time -------------------------------------------------------------------- */

/* An integer term in 128 bits, when it is well within them. */
static bool int128_of(const tnode *n, i128 *v)
{
    if (n->type == T_INT) {
        *v = n->u.i;
        return true;
    }
    if (n->type != T_BIG)
        return false;
    const unsigned char *e = n->etf;
    size_t nd = e[0] == 'n' ? e[1] : ((size_t)e[1] << 24 | (size_t)e[2] << 16 | (size_t)e[3] << 8 | e[4]);
    const unsigned char *s = e + (e[0] == 'n' ? 2 : 5);
    while (nd > 0 && s[nd] == 0)
        nd--;
    if (nd > 15)
        return false;
    i128 m = 0;
    for (size_t k = nd; k > 0; k--)
        m = m * 256 + s[k];
    *v = s[0] ? -m : m;
    return true;
}

/* Nanoseconds of a timestamp term (EXPORTS.md 1.5). Erlang's integers
 * have no bound; these stop at 2^124, far beyond any clock (a tracer's
 * timestamps are 64-bit numbers), so that the clock's arithmetic cannot
 * overflow: a larger one counts as no timestamp (EXPORTS.md 5). */
static bool ts_ns(const tree *t, const tnode *ts, i128 *ns)
{
    static const i128 limit = (i128)1 << 124;
    ts = deref(t, ts);
    i128 v;
    if (ts->type == T_INT || ts->type == T_BIG) {
        if (!int128_of(ts, &v))
            return false;
    } else if (ts->type == T_TUPLE && ts->n == 3) {
        i128 mega, sec, micro;
        if (!int128_of(deref(t, kid(t, ts, 0)), &mega) || !int128_of(deref(t, kid(t, ts, 1)), &sec) ||
            !int128_of(deref(t, kid(t, ts, 2)), &micro))
            return false;
        i128 a, b;
        if (__builtin_mul_overflow(mega, (i128)1000000, &a) || __builtin_add_overflow(a, sec, &a) ||
            __builtin_mul_overflow(a, (i128)1000000000, &a) ||
            __builtin_mul_overflow(micro, (i128)1000, &b) || __builtin_add_overflow(a, b, &v))
            return false;
    } else if (ts->type == T_TUPLE && ts->n == 2) {
        const tnode *u = deref(t, kid(t, ts, 1));
        if ((u->type != T_INT && u->type != T_BIG) || !int128_of(deref(t, kid(t, ts, 0)), &v))
            return false;
    } else {
        return false;
    }
    if (v >= limit || v <= -limit)
        return false;
    *ns = v;
    return true;
}

i128 clock_tick(eclock *c, const event *e)
{
    if (e->ts == NULL) {
        i128 at = c->clock;
        if (!c->timed)
            c->clock += 1000;
        return at;
    }
    if (!c->timed) {
        c->timed = true;
        c->t0 = e->ts_ns - c->clock;
    }
    c->clock = e->ts_ns - c->t0;
    return c->clock;
}

/* ---- nodes and processes ------------------------------------------------------ */

uint32_t node_id(strtab *nodes, const tnode *proc)
{
    static sbuf name;
    name.len = 0;
    tt_ident_node(&name, proc);
    return st_intern(nodes, name.p ? name.p : "", name.len, NULL);
}

static void put32(sbuf *b, uint64_t v)
{
    unsigned char w[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
                          (unsigned char)v};
    sb_put(b, w, 4);
}

void proc_key(sbuf *b, const tnode *proc)
{
    ident id;
    ident_of(proc, &id);
    size_t at;
    sb_ch(b, (char)proc->type);
    at = b->len;
    put32(b, 0);
    tt_ident_node(b, proc);
    size_t n = b->len - at - 4;
    b->p[at] = (char)(n >> 24), b->p[at + 1] = (char)(n >> 16);
    b->p[at + 2] = (char)(n >> 8), b->p[at + 3] = (char)n;
    put32(b, id.creation);
    for (uint32_t k = 0; k < id.nid; k++) {
        put32(b, id.id[k] >> 32);
        put32(b, id.id[k]);
    }
}

/* ---- events -------------------------------------------------------------------- */

static const struct {
    const char *name;
    int tag;
} tags[] = {
    {"send", TG_SEND},
    {"receive", TG_RECEIVE},
    {"call", TG_CALL},
    {"return_from", TG_RETURN_FROM},
    {"exception_from", TG_EXCEPTION_FROM},
    {"return_to", TG_RETURN_TO},
    {"in", TG_IN},
    {"out", TG_OUT},
    {"spawn", TG_SPAWN},
    {"spawned", TG_SPAWNED},
    {"exit", TG_EXIT},
    {"link", TG_LINK},
    {"unlink", TG_LINK},
    {"getting_linked", TG_LINK},
    {"getting_unlinked", TG_LINK},
    {"register", TG_REGISTER},
    {"unregister", TG_UNREGISTER},
    {"in_exiting", TG_IN},
    {"out_exiting", TG_OUT},
    {"out_exited", TG_OUT},
    {"gc_minor_start", TG_GC_MINOR_START},
    {"gc_minor_end", TG_GC_MINOR_END},
    {"gc_major_start", TG_GC_MAJOR_START},
    {"gc_major_end", TG_GC_MAJOR_END},
    {"open", TG_OPEN},
    {"closed", TG_CLOSED},
    {"send_to_non_existing_process", TG_SEND_NX},
};

static int tag_of(const tnode *a)
{
    for (size_t k = 0; k < sizeof tags / sizeof *tags; k++)
        if (is_atom(a, tags[k].name))
            return tags[k].tag;
    return TG_OTHER;
}

static bool is_int(const tnode *n)
{
    return n->type == T_INT || n->type == T_BIG;
}

static bool is_ident(const tnode *n)
{
    return n->type == T_PID || n->type == T_PORT;
}

/* {M, F, X} with atoms M and F. */
static bool mfx(const tree *t, const tnode *n)
{
    return n->type == T_TUPLE && n->n == 3 && deref(t, kid(t, n, 0))->type == T_ATOM &&
           deref(t, kid(t, n, 1))->type == T_ATOM;
}

static void add(event *e, const char *key, int kind, const tnode *term)
{
    efield *f = &e->f[e->nf++];
    f->key = key;
    f->kind = kind;
    f->term = term;
    f->text = NULL;
    f->arity = NULL;
    f->count = -1;
}

/* An MFA field of {M, F, Arity} (2.3): the arity when it is an integer. */
static void add_mfa(event *e, const tree *t, const tnode *m)
{
    add(e, "mfa", F_MFA, m);
    const tnode *a = deref(t, kid(t, m, 2));
    if (is_int(a))
        e->f[e->nf - 1].arity = a;
}

/* An MFA field of {M, F, Args}: the length of a proper list that does
 * not end in '...', or Args when it is an integer. */
static void add_mfargs(event *e, const tree *t, const tnode *m)
{
    add(e, "mfa", F_MFA, m);
    efield *f = &e->f[e->nf - 1];
    const tnode *args = deref(t, kid(t, m, 2));
    if (is_int(args)) {
        f->arity = args;
        return;
    }
    if (args->type == T_NIL) {
        f->count = 0;
        return;
    }
    if (args->type != T_LIST)
        return;
    list_it it;
    const tnode *x, *last = NULL, *tail;
    int64_t n = 0;
    list_begin(&it, t, args);
    while ((x = list_next(&it, &tail)) != NULL) {
        last = x;
        n++;
    }
    if (tail->type == T_NIL && !is_atom(deref(t, last), "..."))
        f->count = n;
}

/* trace_fields/2: the fields of the tag from the terms after it, kids
 * [from, to) of the event (at least one); what is left is the rest. */
static void trace_fields(event *e, const tree *t, uint32_t from, uint32_t to)
{
    const tnode *ev = e->ev;
    uint32_t n = to - from;
    const tnode *t0 = deref(t, kid(t, ev, from));
    const tnode *t1 = n >= 2 ? deref(t, kid(t, ev, from + 1)) : NULL;
    uint32_t used = 1;
    e->tag = tag_of(e->tag_atom);
    switch (e->tag) {
    case TG_SEND:
    case TG_SEND_NX:
        if (n < 2)
            goto other;
        add(e, "msg", F_TERM, t0);
        add(e, "to", F_TERM, t1);
        used = 2;
        break;
    case TG_RECEIVE:
        add(e, "msg", F_TERM, t0);
        break;
    case TG_CALL:
        if (!mfx(t, t0))
            goto other;
        add_mfargs(e, t, t0);
        add(e, "args", F_TERM, deref(t, kid(t, t0, 2)));
        break;
    case TG_RETURN_FROM:
    case TG_EXCEPTION_FROM:
        if (n < 2 || !mfx(t, t0))
            goto other;
        add_mfa(e, t, t0);
        add(e, e->tag == TG_RETURN_FROM ? "value" : "exception", F_TERM, t1);
        used = 2;
        break;
    case TG_RETURN_TO:
        if (mfx(t, t0)) {
            add_mfa(e, t, t0);
        } else if (is_atom(t0, "undefined")) {
            add(e, "mfa", F_TEXT, t0);
            e->f[0].text = "undefined";
            e->unreturned = true;
        } else {
            goto other;
        }
        break;
    case TG_SPAWN:
    case TG_SPAWNED:
        if (n < 2 || !mfx(t, t1))
            goto other;
        add(e, e->tag == TG_SPAWN ? "child" : "parent", F_TERM, t0);
        add_mfargs(e, t, t1);
        add(e, "args", F_TERM, deref(t, kid(t, t1, 2)));
        used = 2;
        break;
    case TG_EXIT:
    case TG_CLOSED:
        add(e, "reason", F_TERM, t0);
        break;
    case TG_LINK:
        add(e, "other", F_TERM, t0);
        break;
    case TG_REGISTER:
    case TG_UNREGISTER:
        add(e, "name", F_TERM, t0);
        break;
    case TG_IN:
    case TG_OUT:
        if (mfx(t, t0))
            add_mfa(e, t, t0);
        else
            add(e, "mfa", F_TERMTEXT, t0);
        break;
    case TG_GC_MINOR_START:
    case TG_GC_MINOR_END:
    case TG_GC_MAJOR_START:
    case TG_GC_MAJOR_END:
        add(e, "info", F_TERM, t0);
        break;
    case TG_OPEN:
        if (n < 2)
            goto other;
        add(e, "parent", F_TERM, t0);
        add(e, "driver", F_TERM, t1);
        used = 2;
        break;
    default:
        goto other;
    }
    e->rest_from = from + used;
    e->rest_to = to;
    return;
other:
    e->tag = TG_OTHER;
    e->nf = 0;
    e->unreturned = false;
    add(e, "term", F_TERM, t0);
    e->rest_from = from + 1;
    e->rest_to = to;
}

/* seq_parse/2 */
static void seq_fields(event *e, const tree *t, const tnode *label, const tnode *info)
{
    info = deref(t, info);
    e->kind = EV_SEQ;
    add(e, "label", F_TERM, label);
    if (info->type == T_TUPLE && info->n == 5) {
        const tnode *tag = deref(t, kid(t, info, 0)), *serial = deref(t, kid(t, info, 1));
        bool known = is_atom(tag, "send") || is_atom(tag, "receive") || is_atom(tag, "print");
        if (known && serial->type == T_TUPLE && serial->n == 2 &&
            is_int(deref(t, kid(t, serial, 0))) && is_int(deref(t, kid(t, serial, 1)))) {
            const tnode *from = deref(t, kid(t, info, 2)), *to = deref(t, kid(t, info, 3));
            e->tag = is_atom(tag, "send") ? TG_SEND : is_atom(tag, "receive") ? TG_RECEIVE : TG_PRINT;
            e->tag_atom = tag;
            const tnode *owner = e->tag == TG_RECEIVE ? to : from;
            e->proc = is_ident(owner) ? owner : NULL;
            add(e, "serial", F_SERIAL, serial);
            add(e, "from", F_TERM, from);
            add(e, "to", F_TERM, to);
            add(e, "msg", F_TERM, deref(t, kid(t, info, 4)));
            return;
        }
    }
    if (info->type == T_TUPLE && info->n > 0 && deref(t, kid(t, info, 0))->type == T_ATOM)
        e->tag_atom = deref(t, kid(t, info, 0));
    add(e, "info", F_TERM, info);
}

void event_parse(const tree *t, const tnode *ev, event *e)
{
    memset(e, 0, sizeof *e);
    e->ev = ev;
    e->kind = EV_OTHER;
    if (ev->type != T_TUPLE || ev->n == 0)
        return;
    const tnode *first = deref(t, kid(t, ev, 0));
    bool ts = is_atom(first, "trace_ts"), tr = ts || is_atom(first, "trace");
    bool seq = is_atom(first, "seq_trace");
    /* timestamp/1: whatever the event's shape */
    const tnode *stamp = ts && ev->n >= 5 ? kid(t, ev, ev->n - 1) : seq && ev->n == 4 ? kid(t, ev, 3) : NULL;
    if (stamp != NULL && ts_ns(t, stamp, &e->ts_ns))
        e->ts = deref(t, stamp);
    if (tr && ev->n >= 4) {
        uint32_t end = ev->n - (ts ? 1 : 0);
        const tnode *tag = deref(t, kid(t, ev, 2));
        if (end < 4 || tag->type != T_ATOM)
            return;
        const tnode *tracee = deref(t, kid(t, ev, 1));
        e->kind = EV_TRACE;
        e->proc = is_ident(tracee) ? tracee : NULL;
        e->tag_atom = tag;
        trace_fields(e, t, 3, end);
    } else if (seq && (ev->n == 3 || ev->n == 4)) {
        seq_fields(e, t, deref(t, kid(t, ev, 1)), kid(t, ev, 2));
    }
}

/* ---- field texts ---------------------------------------------------------------- */

void arity_text(sbuf *b, const tree *t, const efield *f)
{
    (void)t;
    if (f->arity != NULL)
        tt_int(b, f->arity);
    else if (f->count >= 0)
        sb_fmt(b, "%lld", (long long)f->count);
    else
        sb_ch(b, '?');
}

void mfa_text(sbuf *b, const tree *t, const efield *f)
{
    tt_atom(b, deref(t, kid(t, f->term, 0)));
    sb_ch(b, ':');
    tt_atom(b, deref(t, kid(t, f->term, 1)));
    sb_ch(b, '/');
    arity_text(b, t, f);
}

void field_text(sbuf *b, const tree *t, const efield *f, str home)
{
    switch (f->kind) {
    case F_MFA:
        mfa_text(b, t, f);
        return;
    case F_TEXT:
        sb_str(b, f->text);
        return;
    case F_SERIAL:
        sb_ch(b, '[');
        tt_int(b, deref(t, kid(t, f->term, 0)));
        sb_ch(b, ',');
        tt_int(b, deref(t, kid(t, f->term, 1)));
        sb_ch(b, ']');
        return;
    default: /* F_TERM, F_TERMTEXT */
        tt_term(b, t, f->term, home);
        return;
    }
}

void tag_name(sbuf *b, const event *e)
{
    if (e->tag_atom != NULL)
        atom_text(b, e->tag_atom);
    else
        sb_str(b, "info");
}

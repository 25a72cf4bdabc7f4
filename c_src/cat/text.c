/* text.c: the shell's one-line format (tracekit_format:event/2), line for
 * line what tracekit_file:format/1,2 prints: the timestamp as local time,
 * the process with its registered name, what happened, terms shortened to
 * a depth and a number of characters, the line cut at its length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cat.h"

typedef struct {
    sink s;
    text_opts o;
    sbuf line;
} text;

static const tree *T;
static const text_opts *O;

static const tnode *k(const tnode *n, uint32_t i)
{
    return kid(T, n, i);
}

static void term(sbuf *b, const tnode *n)
{
    pretty_term(b, T, n, O->depth, O->line_length, true, O);
}

static void tw(sbuf *b, const tnode *n)
{
    write_term(b, T, n, true, O);
}

/* pid/2: the pid with its registered name when it has one. */
static void pid(sbuf *b, const tnode *p)
{
    const char *name = O->names != NULL ? O->names(T, p) : names_get(p);
    if (name != NULL) {
        write_term(b, T, p, false, O);
        sb_str(b, " (");
        sb_str(b, name);
        sb_ch(b, ')');
    } else {
        tw(b, p);
    }
}

static void dest(sbuf *b, const tnode *to)
{
    if (to->type == T_REF) {
        sb_str(b, "alias ");
        term(b, to);
    } else {
        pid(b, to);
    }
}

static void mfa(sbuf *b, const tnode *m, const tnode *f, const tnode *a)
{
    tw(b, m);
    sb_ch(b, ':');
    tw(b, f);
    sb_ch(b, '/');
    write_term(b, T, a, false, O);
}

static void args(sbuf *b, const tnode *l)
{
    if (is_atom(l, "...")) {
        sb_str(b, "...");
        return;
    }
    if (l->type == T_NIL)
        return;
    for (uint32_t i = 0; i < l->n; i++) {
        if (i)
            sb_str(b, ", ");
        term(b, k(l, i));
    }
    const tnode *tail = k(l, l->n);
    if (tail->type == T_NIL)
        return;
    if (is_atom(tail, "...")) {
        sb_str(b, l->n ? ", ..." : "...");
        return;
    }
    sb_str(b, " | ");
    term(b, tail);
}

/* mfargs/4: M:F(Args) when the arguments are there, else M:F/Arity. */
static void mfargs(sbuf *b, const tnode *m, const tnode *f, const tnode *a)
{
    if (a->type == T_LIST || a->type == T_NIL || is_atom(a, "...")) {
        tw(b, m);
        sb_ch(b, ':');
        tw(b, f);
        sb_ch(b, '(');
        args(b, a);
        sb_ch(b, ')');
    } else {
        mfa(b, m, f, a);
    }
}

/* The rest of the event after the fields a clause uses: " (X)" each. */
static void extra(sbuf *b, const tnode *const *rest, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        sb_str(b, " (");
        term(b, rest[i]);
        sb_ch(b, ')');
    }
}

static bool tuple_n(const tnode *n, uint32_t arity)
{
    return n->type == T_TUPLE && n->n == arity;
}

static bool is_mfa(const tnode *n)
{
    return tuple_n(n, 3) && k(n, 0)->type == T_ATOM && k(n, 1)->type == T_ATOM &&
           (k(n, 2)->type == T_INT || k(n, 2)->type == T_BIG);
}

/* what/3: Rest are the fields after the tag. */
static void what(sbuf *b, const tnode *tag, const tnode *const *r, size_t n)
{
#define TAG(s) is_atom(tag, s)
    if (TAG("call") && n >= 1 && tuple_n(r[0], 3)) {
        mfargs(b, k(r[0], 0), k(r[0], 1), k(r[0], 2));
        extra(b, r + 1, n - 1);
    } else if (TAG("return_from") && n >= 2 && tuple_n(r[0], 3)) {
        mfa(b, k(r[0], 0), k(r[0], 1), k(r[0], 2));
        sb_str(b, " -> ");
        term(b, r[1]);
        extra(b, r + 2, n - 2);
    } else if (TAG("exception_from") && n >= 2 && tuple_n(r[0], 3) && tuple_n(r[1], 2)) {
        mfa(b, k(r[0], 0), k(r[0], 1), k(r[0], 2));
        sb_str(b, " raised ");
        tw(b, k(r[1], 0));
        sb_ch(b, ':');
        term(b, k(r[1], 1));
        extra(b, r + 2, n - 2);
    } else if (TAG("return_to") && n >= 1 && tuple_n(r[0], 3)) {
        sb_str(b, "returned to ");
        mfa(b, k(r[0], 0), k(r[0], 1), k(r[0], 2));
        extra(b, r + 1, n - 1);
    } else if (TAG("return_to") && n >= 1 && is_atom(r[0], "undefined")) {
        sb_str(b, "returned to an untraced function");
        extra(b, r + 1, n - 1);
    } else if ((TAG("send") || TAG("send_to_non_existing_process")) && n >= 2) {
        sb_str(b, "! ");
        term(b, r[0]);
        sb_str(b, " -> ");
        dest(b, r[1]);
        if (TAG("send_to_non_existing_process"))
            sb_str(b, " (no such process)");
        extra(b, r + 2, n - 2);
    } else if (TAG("receive") && n >= 1) {
        sb_str(b, "<< ");
        term(b, r[0]);
        extra(b, r + 1, n - 1);
    } else if ((TAG("spawn") || TAG("spawned")) && n >= 2 && tuple_n(r[1], 3)) {
        sb_str(b, TAG("spawn") ? "spawned " : "was spawned by ");
        pid(b, r[0]);
        sb_str(b, " as ");
        mfargs(b, k(r[1], 0), k(r[1], 1), k(r[1], 2));
        extra(b, r + 2, n - 2);
    } else if (TAG("exit") && n >= 1) {
        sb_str(b, "exited: ");
        term(b, r[0]);
        extra(b, r + 1, n - 1);
    } else if ((TAG("link") || TAG("unlink") || TAG("getting_linked") ||
                TAG("getting_unlinked")) && n >= 1) {
        sb_str(b, TAG("link")             ? "linked to "
                  : TAG("unlink")         ? "unlinked from "
                  : TAG("getting_linked") ? "got linked by "
                                          : "got unlinked by ");
        pid(b, r[0]);
        extra(b, r + 1, n - 1);
    } else if ((TAG("register") || TAG("unregister")) && n >= 1) {
        sb_str(b, TAG("register") ? "registered as " : "unregistered ");
        term(b, r[0]);
        extra(b, r + 1, n - 1);
    } else if (n >= 1 && is_mfa(r[0])) {
        atom_text(b, tag);
        sb_ch(b, ' ');
        mfa(b, k(r[0], 0), k(r[0], 1), k(r[0], 2));
        extra(b, r + 1, n - 1);
    } else {
        atom_text(b, tag);
        for (size_t i = 0; i < n; i++) {
            sb_ch(b, ' ');
            term(b, r[i]);
        }
    }
#undef TAG
}

/* [Last,Serial] */
static void serial(sbuf *b, const tnode *s)
{
    sb_ch(b, '[');
    if (tuple_n(s, 2)) {
        write_term(b, T, k(s, 0), false, O);
        sb_ch(b, ',');
        write_term(b, T, k(s, 1), false, O);
    } else {
        tw(b, s);
    }
    sb_ch(b, ']');
}

static void seq(sbuf *b, const tnode *label, const tnode *info)
{
    sb_str(b, "seq_trace ");
    term(b, label);
    sb_str(b, ": ");
    if (tuple_n(info, 5) && is_atom(k(info, 0), "send")) {
        pid(b, k(info, 2));
        sb_str(b, " ! ");
        term(b, k(info, 4));
        sb_str(b, " -> ");
        dest(b, k(info, 3));
        sb_ch(b, ' ');
        serial(b, k(info, 1));
    } else if (tuple_n(info, 5) && is_atom(k(info, 0), "receive")) {
        pid(b, k(info, 3));
        sb_str(b, " << ");
        term(b, k(info, 4));
        sb_str(b, " from ");
        pid(b, k(info, 2));
        sb_ch(b, ' ');
        serial(b, k(info, 1));
    } else if (tuple_n(info, 5) && is_atom(k(info, 0), "print")) {
        pid(b, k(info, 2));
        sb_str(b, " print ");
        term(b, k(info, 4));
        sb_ch(b, ' ');
        serial(b, k(info, 1));
    } else {
        term(b, info);
    }
}

/* time/1: {Mega, Sec, Micro} as local time, other kinds as terms. */
static void ts(sbuf *b, const tnode *t)
{
    if (tuple_n(t, 3) && k(t, 0)->type == T_INT && k(t, 1)->type == T_INT &&
        k(t, 2)->type == T_INT && k(t, 2)->u.i >= 0 && k(t, 2)->u.i < 1000000) {
        int64_t mega = k(t, 0)->u.i, sec = k(t, 1)->u.i;
        struct tm tm;
        time_t when;
        if (mega > -1000000000 && mega < 1000000000 && sec > -(INT64_C(1) << 50) &&
            sec < (INT64_C(1) << 50) &&
            (when = (time_t)(mega * 1000000 + sec), localtime_r(&when, &tm) != NULL)) {
            sb_fmt(b, "%02d:%02d:%02d.%06lld", tm.tm_hour, tm.tm_min, tm.tm_sec,
                   (long long)k(t, 2)->u.i);
            return;
        }
        write_term(b, T, t, false, O);
        return;
    }
    pretty_term(b, T, t, 10, -1, false, O);
}

/* cut/2: at most Max characters, ending in ... when cut. */
static void cut(sbuf *line, int max)
{
    size_t chars = utf8_count(line->p, line->len);
    if ((int64_t)chars <= max)
        return;
    if (max <= 3) {
        line->len = 0;
        sb_put(line, "...", (size_t)max);
        return;
    }
    size_t keep = (size_t)max - 3, at = 0;
    for (size_t c = 0; c < keep; c++) {
        uint32_t cp;
        size_t n = utf8_next((const unsigned char *)line->p + at, line->len - at, &cp);
        at += n ? n : 1;
    }
    line->len = at;
    sb_str(line, "...");
}

void text_line(sbuf *b, const tree *t, const tnode *ev, const text_opts *o)
{
    T = t;
    O = o;
    const tnode *first = ev->type == T_TUPLE && ev->n > 0 ? k(ev, 0) : NULL;
    const tnode *fields[16], **r = fields;
    b->len = 0;
    if (first != NULL && is_atom(first, "trace_ts") && ev->n >= 5) {
        ts(b, k(ev, ev->n - 1));
        sb_ch(b, ' ');
        if (k(ev, 2)->type == T_ATOM) {
            size_t n = ev->n - 4;
            if (n > 16)
                r = xmalloc(n * sizeof *r);
            for (size_t i = 0; i < n; i++)
                r[i] = k(ev, 3 + (uint32_t)i);
            pid(b, k(ev, 1));
            sb_ch(b, ' ');
            what(b, k(ev, 2), r, n);
        } else {
            term(b, ev);
        }
    } else if (first != NULL && is_atom(first, "trace") && ev->n >= 3 &&
               k(ev, 2)->type == T_ATOM) {
        size_t n = ev->n - 3;
        if (n > 16)
            r = xmalloc(n * sizeof *r);
        for (size_t i = 0; i < n; i++)
            r[i] = k(ev, 3 + (uint32_t)i);
        pid(b, k(ev, 1));
        sb_ch(b, ' ');
        what(b, k(ev, 2), r, n);
    } else if (first != NULL && is_atom(first, "seq_trace") && (ev->n == 4 || ev->n == 3)) {
        if (ev->n == 4) {
            ts(b, k(ev, 3));
            sb_ch(b, ' ');
        }
        seq(b, k(ev, 1), k(ev, 2));
    } else {
        term(b, ev);
    }
    if (r != fields)
        free(r);
    cut(b, o->line_length);
}

void text_time(sbuf *b, const tree *t, const tnode *stamp, const text_opts *o)
{
    T = t;
    O = o;
    ts(b, stamp);
}

static void event(sink *s, const unsigned char *etf, size_t len, const tree *t,
                  const tnode *ev, int64_t time, const char *node)
{
    (void)etf, (void)len, (void)time, (void)node;
    text *x = (text *)s;
    sbuf *b = &x->line;
    text_line(b, t, ev, &x->o);
    sb_ch(b, '\n');
    out_write(b->p, b->len);
}

static void lost(sink *s, uint64_t n)
{
    (void)s, (void)n; /* the shell's format does not show them */
}

static void finish(sink *s)
{
    (void)s;
}

sink *text_sink(const text_opts *o)
{
    static text x;
    x.s = (sink){event, lost, finish, true};
    x.o = *o;
    return &x.s;
}

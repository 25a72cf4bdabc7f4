/* text.c: tracekit-cat's text, one event a line (README.md,
 * "tracekit-cat"):
 *
 *   TIME [NODE] PROCESS TAG WHAT [(REST)...]
 *
 * TIME is the time the merge orders events by, in UTC with microseconds
 * (2026-11-24T10:00:00.123456Z); NODE the node that recorded the event,
 * when the files are of more than one node; PROCESS the tracee (for
 * seq_trace, the sender of a send or print and the receiver of a
 * receive; - when there is none) with the name it registered in the
 * trace; TAG the trace tag (seq_trace events: `seq_trace Label Kind`);
 * WHAT the event's term by tag (two for the tags that have an extra
 * term: send, return_from, exception_from, spawn, spawned, open); REST
 * the terms after them (a match spec's result, a scheduler id), each in
 * parentheses. The line is cut at the line length (characters), ending
 * in ... when it was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cat.h"

/* What a line is printed with. */
typedef struct {
    text_sink *x;
    term_opts to;
    sbuf *b;
} line;

/* Element i of a container. */
static const tnode *elem(const line *l, const tnode *n, uint32_t i)
{
    return kid(l->to.t, n, i);
}

static bool tuple_n(const tnode *n, uint32_t arity)
{
    return n->type == T_TUPLE && n->n == arity;
}

static void term(line *l, const tnode *n)
{
    term_text(l->b, &l->to, n);
}

/* A pid or port with the name it registered in the trace; other terms
 * as they are. */
static void process(line *l, const tnode *p)
{
    term(l, p);
    const char *name = names_get(l->x->nm, p);
    if (name != NULL) {
        sb_str(l->b, " (");
        sb_str(l->b, name);
        sb_ch(l->b, ')');
    }
}

/* M:F/A when n is {M, F, A} with atoms M and F, else the term. */
static void mfa(line *l, const tnode *n)
{
    if (!tuple_n(n, 3) || elem(l, n, 0)->type != T_ATOM || elem(l, n, 1)->type != T_ATOM) {
        term(l, n);
        return;
    }
    term_atom(l->b, elem(l, n, 0));
    sb_ch(l->b, ':');
    term_atom(l->b, elem(l, n, 1));
    sb_ch(l->b, '/');
    term(l, elem(l, n, 2));
}

/* M:F(Arg, ...) of a call or spawn: each argument a term of its own; the
 * ring's cut ('...' for all of them, or a list ending in it) as ...; a
 * number of arguments as M:F/N. */
static void call(line *l, const tnode *n)
{
    const tnode *args = tuple_n(n, 3) ? elem(l, n, 2) : NULL;
    if (args == NULL || elem(l, n, 0)->type != T_ATOM || elem(l, n, 1)->type != T_ATOM ||
        !(args->type == T_LIST || args->type == T_NIL || is_atom(args, "..."))) {
        mfa(l, n);
        return;
    }
    term_atom(l->b, elem(l, n, 0));
    sb_ch(l->b, ':');
    term_atom(l->b, elem(l, n, 1));
    sb_ch(l->b, '(');
    const char *sep = "";
    while (args->type == T_LIST && l->b->len <= l->to.stop) {
        for (uint32_t i = 0; i < args->n && l->b->len <= l->to.stop; i++) {
            sb_str(l->b, sep);
            term(l, elem(l, args, i));
            sep = ", ";
        }
        args = elem(l, args, args->n);
    }
    if (is_atom(args, "...")) {
        sb_str(l->b, sep);
        sb_str(l->b, "...");
    } else if (args->type != T_NIL) {
        sb_str(l->b, " | ");
        term(l, args);
    }
    sb_ch(l->b, ')');
}

static bool tag_is(const tnode *tag, const char *const *names)
{
    for (; *names != NULL; names++)
        if (is_atom(tag, *names))
            return true;
    return false;
}

static const char *const pid_tags[] = {"link", "unlink", "getting_linked",
                                       "getting_unlinked", NULL};
static const char *const mfa_tags[] = {"return_to", "in", "out", "in_exiting",
                                       "out_exiting", "out_exited", NULL};
static const char *const two_term_tags[] = {"send", "send_to_non_existing_process",
                                            "return_from", "exception_from", "spawn",
                                            "spawned", "open", NULL};

/* The terms of a trace event after its tag (f[0..n-1]) by tag: returns
 * how many it used (two for the tags of an extra term, else one). */
static size_t what(line *l, const tnode *tag, const tnode *const *f, size_t n)
{
    sbuf *b = l->b;
    if (n >= 2 && tag_is(tag, two_term_tags)) {
        if (is_atom(tag, "return_from") || is_atom(tag, "exception_from")) {
            mfa(l, f[0]);
            sb_str(b, is_atom(tag, "return_from") ? " -> " : " ");
            if (is_atom(tag, "exception_from") && tuple_n(f[1], 2)) {
                term(l, elem(l, f[1], 0));
                sb_ch(b, ':');
                term(l, elem(l, f[1], 1));
            } else {
                term(l, f[1]);
            }
        } else if (is_atom(tag, "spawn") || is_atom(tag, "spawned")) {
            process(l, f[0]);
            sb_ch(b, ' ');
            call(l, f[1]);
        } else { /* send: Msg -> To; open: Parent Driver */
            bool open = is_atom(tag, "open");
            open ? process(l, f[0]) : term(l, f[0]);
            sb_str(b, open ? " " : " -> ");
            open ? term(l, f[1]) : process(l, f[1]);
        }
        return 2;
    }
    if (n == 0)
        return 0;
    if (is_atom(tag, "call"))
        call(l, f[0]);
    else if (tag_is(tag, pid_tags))
        process(l, f[0]);
    else if (tag_is(tag, mfa_tags))
        mfa(l, f[0]);
    else
        term(l, f[0]);
    return 1;
}

/* A trace event: {trace, P, Tag, ...} or {trace_ts, P, Tag, ..., Ts}. */
static void trace_event(line *l, const tnode *ev, bool ts)
{
    size_t n = ev->n - 3 - (ts ? 1 : 0);
    const tnode *small[8], **f = n > 8 ? xmalloc(n * sizeof *f) : small;
    for (size_t i = 0; i < n; i++)
        f[i] = elem(l, ev, 3 + (uint32_t)i);
    process(l, elem(l, ev, 1));
    sb_ch(l->b, ' ');
    atom_text(l->b, elem(l, ev, 2));
    if (n > 0)
        sb_ch(l->b, ' ');
    for (size_t used = what(l, elem(l, ev, 2), f, n); used < n; used++) {
        sb_str(l->b, " (");
        term(l, f[used]);
        sb_ch(l->b, ')');
    }
    if (f != small)
        free(f);
}

/* {seq_trace, Label, Info[, Ts]}: PROCESS seq_trace Label Kind [Last,Serial] ... */
static void seq_event(line *l, const tnode *label, const tnode *info)
{
    sbuf *b = l->b;
    bool known = tuple_n(info, 5) && (is_atom(elem(l, info, 0), "send") ||
                                      is_atom(elem(l, info, 0), "receive") ||
                                      is_atom(elem(l, info, 0), "print"));
    if (!known) {
        sb_str(b, "- seq_trace ");
        term(l, label);
        sb_ch(b, ' ');
        term(l, info);
        return;
    }
    const tnode *kind = elem(l, info, 0), *serial = elem(l, info, 1);
    bool recv = is_atom(kind, "receive");
    process(l, elem(l, info, recv ? 3 : 2));
    sb_str(b, " seq_trace ");
    term(l, label);
    sb_ch(b, ' ');
    atom_text(b, kind);
    sb_ch(b, ' ');
    if (tuple_n(serial, 2)) {
        sb_ch(b, '[');
        term(l, elem(l, serial, 0));
        sb_ch(b, ',');
        term(l, elem(l, serial, 1));
        sb_ch(b, ']');
    } else {
        term(l, serial);
    }
    sb_ch(b, ' ');
    term(l, elem(l, info, 4));
    if (!is_atom(kind, "print")) {
        sb_str(b, recv ? " <- " : " -> ");
        process(l, elem(l, info, recv ? 2 : 3));
    }
}

/* At most max characters (code points), ending in ... when cut. */
static void cut(sbuf *b, int max)
{
    const unsigned char *p = (const unsigned char *)b->p;
    size_t at = 0, chars = 0, keep_at = 0;
    while (at < b->len) {
        if (chars == (size_t)max - 3)
            keep_at = at;
        if (p[at] < 0x80) {
            at++;
        } else {
            uint32_t c;
            size_t n = utf8_next(p + at, b->len - at, &c);
            at += n ? n : 1;
        }
        chars++;
    }
    if (chars <= (size_t)max)
        return;
    b->len = max <= 3 ? 0 : keep_at;
    sb_put(b, "...", max < 3 ? (size_t)max : 3);
}

/* The merge time: ns since the epoch, as UTC with microseconds. The text
 * of the second is kept for the events that follow in it. */
static void time_text(text_sink *x, sbuf *b, int64_t ns)
{
    int64_t sec = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        sec--;
        frac += 1000000000;
    }
    if (sec != x->second || x->second_text[0] == 0) {
        time_t t = (time_t)sec;
        struct tm tm;
        x->second = sec;
        if (gmtime_r(&t, &tm) == NULL || tm.tm_year + 1900 > 9999 || tm.tm_year + 1900 < 0)
            snprintf(x->second_text, sizeof x->second_text, "%llds", (long long)sec);
        else
            snprintf(x->second_text, sizeof x->second_text, "%04d-%02d-%02dT%02d:%02d:%02d",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec);
    }
    char micro[9] = {'.', 0, 0, 0, 0, 0, 0, 'Z', 0};
    for (int k = 6, us = (int)(frac / 1000); k > 0; k--, us /= 10)
        micro[k] = (char)('0' + us % 10);
    sb_str(b, x->second_text);
    sb_put(b, micro, 8);
}

static bool atom_first(const tree *t, const tnode *ev, const char *name, uint32_t min)
{
    return ev->type == T_TUPLE && ev->n >= min && is_atom(kid(t, ev, 0), name);
}

const tnode *event_process(const tree *t, const tnode *ev)
{
    if ((atom_first(t, ev, "trace", 4) || atom_first(t, ev, "trace_ts", 5)) &&
        kid(t, ev, 2)->type == T_ATOM)
        return kid(t, ev, 1);
    if (atom_first(t, ev, "seq_trace", 3) && ev->n <= 4) {
        const tnode *info = kid(t, ev, 2);
        if (tuple_n(info, 5) && (is_atom(kid(t, info, 0), "send") ||
                                 is_atom(kid(t, info, 0), "print")))
            return kid(t, info, 2);
        if (tuple_n(info, 5) && is_atom(kid(t, info, 0), "receive"))
            return kid(t, info, 3);
    }
    return NULL;
}

/* The line of an event after its time (and node), appended to b. */
static void text_event(text_sink *x, sbuf *b, const tree *t, const tnode *ev, const char *home)
{
    size_t from = b->len;
    /* a character is at most 4 bytes: what passes this is cut anyway */
    line l = {x, {t, home, x->depth, from + 4 * (size_t)x->line_length + 4}, b};
    if (atom_first(t, ev, "trace", 4) && kid(t, ev, 2)->type == T_ATOM)
        trace_event(&l, ev, false);
    else if (atom_first(t, ev, "trace_ts", 5) && kid(t, ev, 2)->type == T_ATOM)
        trace_event(&l, ev, true);
    else if (atom_first(t, ev, "seq_trace", 3) && ev->n <= 4)
        seq_event(&l, kid(t, ev, 1), kid(t, ev, 2));
    else {
        sb_str(b, "- ");
        term(&l, ev);
    }
}

static void event(sink *s, const unsigned char *etf, size_t len, const tree *t,
                  const tnode *ev, int64_t time, const reader *from)
{
    (void)etf, (void)len;
    text_sink *x = (text_sink *)s;
    sbuf *b = &x->line;
    b->len = 0;
    time_text(x, b, time);
    sb_ch(b, ' ');
    if (x->node_column) {
        sb_str(b, from->node != NULL ? from->node : "-");
        sb_ch(b, ' ');
    }
    text_event(x, b, t, ev, from->node);
    cut(b, x->line_length);
    sb_ch(b, '\n');
    out_write(x->out, b->p, b->len);
}

/* Events the writer could not keep: a line of their own, in their place. */
static void lost(sink *s, uint64_t n, const reader *from)
{
    text_sink *x = (text_sink *)s;
    sbuf *b = &x->line;
    b->len = 0;
    sb_fmt(b, "-- %llu events lost%s%s: the writer could not keep them\n", (unsigned long long)n,
           x->node_column ? " on " : "", x->node_column && from->node ? from->node : "");
    out_write(x->out, b->p, b->len);
}

void text_sink_init(text_sink *x, output *out, const names *nm, int depth, int line_length,
                    bool node_column)
{
    *x = (text_sink){{event, lost, true}, out, nm, depth, line_length, node_column, {0}, 0, ""};
}

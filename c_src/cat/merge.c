/* merge.c: the events of every file in time order, as tracekit_file:fold/3
 * merges them (the earliest head first; ties by the order the files were
 * given), filtered, handed to the output. One chunk per file is in memory
 * at a time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ei.h>

#include "merge.h"

/* ---- a binary heap of readers by (head time, index) ------------------------ */

typedef struct {
    reader **v;
    size_t n;
} heap;

static bool before(const reader *a, const reader *b)
{
    int64_t ta = a->evs[a->next].time, tb = b->evs[b->next].time;
    return ta < tb || (ta == tb && a->index < b->index);
}

static void swap(heap *h, size_t i, size_t j)
{
    reader *t = h->v[i];
    h->v[i] = h->v[j];
    h->v[j] = t;
}

static void heap_push(heap *h, reader *r)
{
    size_t i = h->n++;
    h->v[i] = r;
    for (; i > 0 && before(h->v[i], h->v[(i - 1) / 2]); i = (i - 1) / 2)
        swap(h, i, (i - 1) / 2);
}

static reader *heap_pop(heap *h)
{
    reader *top = h->v[0];
    h->v[0] = h->v[--h->n];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && before(h->v[l], h->v[m]))
            m = l;
        if (r < h->n && before(h->v[r], h->v[m]))
            m = r;
        if (m == i)
            break;
        swap(h, i, m);
        i = m;
    }
    return top;
}

/* ---- filters ---------------------------------------------------------------- */

static bool in_list(const char *const *list, size_t n, const char *s)
{
    for (size_t k = 0; s != NULL && k < n; k++)
        if (strcmp(list[k], s) == 0)
            return true;
    return false;
}

static bool node_wanted(const cat_args *a, const reader *r)
{
    return a->nnodes == 0 || in_list(a->nodes, a->nnodes, r->node);
}

/* The event's tag: element 3 of trace and trace_ts, seq_trace for
 * seq_trace events. */
static bool tag_wanted(const cat_args *a, const tree *t, const tnode *ev)
{
    if (a->ntags == 0)
        return true;
    if (ev->type != T_TUPLE || ev->n < 3)
        return false;
    const tnode *what = is_atom(kid(t, ev, 0), "seq_trace") ? kid(t, ev, 0) : kid(t, ev, 2);
    for (size_t k = 0; what->type == T_ATOM && k < a->ntags; k++)
        if (is_atom(what, a->tags[k]))
            return true;
    return false;
}

/* The process of the line as the text prints it, or its registered name. */
static bool pid_wanted(merge *m, const tnode *ev, const reader *r)
{
    const cat_args *a = m->args;
    if (a->npids == 0)
        return true;
    const tnode *p = event_process(&m->t, ev);
    if (p == NULL)
        return false;
    term_opts to = {&m->t, r->node, 1, 256};
    m->scratch.len = 0;
    term_text(&m->scratch, &to, p);
    return in_list(a->pids, a->npids, m->scratch.p) ||
           in_list(a->pids, a->npids, names_get(&m->nm, p));
}

static bool wanted(merge *m, const tnode *ev, const reader *r, int64_t time)
{
    const cat_args *a = m->args;
    return node_wanted(a, r) && (!a->has_since || time >= a->since) &&
           (!a->has_until || time <= a->until) && tag_wanted(a, &m->t, ev) &&
           pid_wanted(m, ev, r);
}

/* ---- the merge -------------------------------------------------------------- */

static void report_lost(merge *m, reader *r)
{
    if (r->lost > r->lost_reported && node_wanted(m->args, r)) {
        m->out->lost(m->out, r->lost - r->lost_reported, r);
        r->lost_reported = r->lost;
    }
}

/* The event at the head of r, parsed when the output or the filters need
 * its tree: false when it does not parse (decode_event made it, so it
 * does). */
static bool handle(merge *m, reader *r, bool need_tree)
{
    const cat_event *e = &r->evs[r->next++];
    const unsigned char *etf = (const unsigned char *)r->x->buff + e->off;
    const tnode *ev = NULL;
    if (need_tree) {
        size_t at = 0;
        m->t.len = 0;
        m->t.home = r->node;
        long root = etf_parse(&m->t, etf, e->len, &at);
        if (root < 0)
            return false;
        ev = &m->t.v[root];
        names_note(&m->nm, &m->t, ev);
    }
    report_lost(m, r);
    if (m->filtered && !wanted(m, ev, r, e->time))
        return true;
    m->out->event(m->out, etf, e->len, &m->t, ev, e->time, r);
    return true;
}

int merge_run(merge *m, reader *rs, size_t n, cat_failure *f)
{
    const cat_args *a = m->args;
    bool need_tree = m->out->needs_tree || a->npids || a->ntags;
    heap h = {xmalloc((n ? n : 1) * sizeof(reader *)), 0};
    int status = CAT_OK;
    m->filtered = a->npids || a->ntags || a->nnodes || a->has_since || a->has_until;
    for (size_t k = 0; k < n && status == CAT_OK; k++) {
        int rc = reader_fill(&rs[k], f);
        if (rc < 0)
            status = f->status;
        else if (rc > 0)
            heap_push(&h, &rs[k]);
        else
            report_lost(m, &rs[k]);
    }
    while (status == CAT_OK && h.n > 0 && !m->output->failed) {
        reader *r = heap_pop(&h);
        if (!handle(m, r, need_tree)) {
            *f = (cat_failure){r->path, 0, CAT_DAMAGED, "an event that does not parse"};
            status = CAT_DAMAGED;
            break;
        }
        int rc = r->next < r->nevs ? 1 : reader_fill(r, f);
        if (rc < 0)
            status = f->status;
        else if (rc > 0)
            heap_push(&h, r);
        else
            report_lost(m, r);
    }
    free(h.v);
    return status;
}

void merge_free(merge *m)
{
    free(m->t.v);
    free(m->scratch.p);
    names_free(&m->nm);
}

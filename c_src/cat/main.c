/* main.c: tracekit-cat, trace files read without a VM.
 *
 * The files of every source are opened, their events merged by time as
 * tracekit_file:fold/3 merges them (the earliest head first; ties by the
 * order the files were given), filtered, and handed to the output format.
 * One chunk per file is in memory at a time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ei.h>

#include "args.h"
#include "cat.h"

/* ---- the merge: a binary heap of readers by (head time, index) ------------ */

typedef struct {
    reader **v;
    size_t n;
} heap;

static int64_t head_time(const reader *r)
{
    return r->evs[r->next].time;
}

static bool before(const reader *a, const reader *b)
{
    int64_t ta = head_time(a), tb = head_time(b);
    return ta < tb || (ta == tb && a->index < b->index);
}

static void heap_push(heap *h, reader *r)
{
    size_t i = h->n++;
    h->v[i] = r;
    while (i > 0 && before(h->v[i], h->v[(i - 1) / 2])) {
        reader *t = h->v[i];
        h->v[i] = h->v[(i - 1) / 2];
        h->v[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
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
        reader *t = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = t;
        i = m;
    }
    return top;
}

/* ---- filters -------------------------------------------------------------- */

static bool node_wanted(const cat_args *a, const reader *r)
{
    if (a->nnodes == 0)
        return true;
    for (size_t k = 0; k < a->nnodes; k++)
        if (r->node != NULL && strcmp(a->nodes[k], r->node) == 0)
            return true;
    return false;
}

/* The event's tag: element 3 of trace and trace_ts, seq_trace for
 * seq_trace events. */
static bool tag_wanted(const cat_args *a, const tree *t, const tnode *ev)
{
    if (a->ntags == 0)
        return true;
    if (ev->type != T_TUPLE || ev->n < 2)
        return false;
    const tnode *what = is_atom(kid(t, ev, 0), "seq_trace") ? kid(t, ev, 0)
                        : ev->n >= 3                       ? kid(t, ev, 2)
                                                           : NULL;
    if (what == NULL || what->type != T_ATOM)
        return false;
    for (size_t k = 0; k < a->ntags; k++)
        if (is_atom(what, a->tags[k]) || (strcmp(a->tags[k], "receive") == 0 &&
                                          is_atom(what, "receive")))
            return true;
    return false;
}

/* The tracee (element 2) printed as ~w, or its registered name. */
static bool pid_wanted(const cat_args *a, const tree *t, const tnode *ev,
                       const text_opts *o, sbuf *scratch)
{
    if (a->npids == 0)
        return true;
    if (ev->type != T_TUPLE || ev->n < 2)
        return false;
    const tnode *p = kid(t, ev, 1);
    scratch->len = 0;
    write_term(scratch, t, p, true, o);
    const char *name = names_get(p);
    for (size_t k = 0; k < a->npids; k++)
        if ((scratch->p && strcmp(a->pids[k], scratch->p) == 0) ||
            (name != NULL && strcmp(a->pids[k], name) == 0))
            return true;
    return false;
}

/* ---- main ------------------------------------------------------------------- */

static bool html_format;

static int fail_with(const cat_failure *f)
{
    if (html_format) /* the report says so on the page */
        html_failed(f);
    if (f->status == CAT_DAMAGED)
        cat_error("%s: %s at byte %llu", f->file, f->why, (unsigned long long)f->offset);
    else
        cat_error("%s: %s", f->file, f->why);
    return f->status;
}

/* --damaged skip: what was read over, one line each; a damaged status. */
static int report_skips(const cat_skips *skips)
{
    for (size_t k = 0; k < skips->n; k++) {
        const cat_skip *r = &skips->v[k];
        if (r->to_end)
            cat_error("%s: skipped from byte %llu to the end", r->file,
                      (unsigned long long)r->from);
        else
            cat_error("%s: skipped bytes %llu to %llu", r->file, (unsigned long long)r->from,
                      (unsigned long long)r->to);
    }
    return CAT_DAMAGED;
}

/* The output file (or standard output): its descriptor, or -1. */
static int open_output(const cat_args *a)
{
    int fd = 1;
    if (a->output != NULL) {
        fd = open(a->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            cat_error("%s: %s", a->output, strerror(errno));
            return -1;
        }
    }
    out_open(fd);
    return fd;
}

/* An export that could read nothing still writes its whole (empty)
 * document, as tracekit_export does, then fails with the reading's
 * status. */
static int fail_export(sink *s, int fd, const cat_failure *f)
{
    int status = fail_with(f);
    s->finish(s);
    out_flush();
    if (fd != 1)
        close(fd);
    return status;
}

int main(int argc, char **argv)
{
    cat_args a;
    if (!args_parse(argc, argv, &a))
        return CAT_USAGE;
    html_format = a.format == FMT_HTML;
    /* The exports' output is there before the files are read (see
     * fail_export); the text and dbg formats' only once they can be. */
    bool export = a.format == FMT_JSONL || a.format == FMT_CHROME || a.format == FMT_FOLDED ||
                  a.format == FMT_HTML;
    text_opts to = {a.depth, a.line_length, a.local_node, NULL};
    int fd = -1;
    sink *s = NULL;
    if (export) {
        if ((fd = open_output(&a)) < 0)
            return CAT_OUTPUT;
        if ((s = export_sink(a.format, &to)) == NULL)
            return CAT_USAGE;
    }

    char **files = NULL;
    size_t nfiles = 0, cap = 0;
    cat_failure f = {0};
    for (size_t k = 0; k < a.nsources; k++)
        if (!source_files(a.sources[k], &files, &nfiles, &cap, &f))
            return s ? fail_export(s, fd, &f) : fail_with(&f);
    reader *rs = xmalloc(nfiles * sizeof *rs);
    cat_skips skips = {0};
    if (!readers_open(rs, nfiles, files, a.damaged_skip ? &skips : NULL, &f))
        return s ? fail_export(s, fd, &f) : fail_with(&f);

    if (to.local_node == NULL)
        for (size_t k = 0; k < nfiles && to.local_node == NULL; k++)
            to.local_node = rs[k].node;

    if (!export) {
        if ((fd = open_output(&a)) < 0)
            return CAT_OUTPUT;
        s = a.format == FMT_DBG ? dbg_sink() : text_sink(&to);
    }

    bool filtered = a.npids || a.ntags || a.nnodes || a.has_since || a.has_until;
    bool need_tree = s->needs_tree || a.npids || a.ntags;
    tree t = {0};
    sbuf scratch = {0};
    heap h = {xmalloc((nfiles ? nfiles : 1) * sizeof(reader *)), 0};
    int status = CAT_OK;
    for (size_t k = 0; k < nfiles && status == CAT_OK; k++) {
        int rc = reader_fill(&rs[k], &f);
        if (rc < 0)
            status = fail_with(&f);
        else if (rc > 0)
            heap_push(&h, &rs[k]);
    }
    while (status == CAT_OK && h.n > 0 && !out_failed()) {
        reader *r = heap_pop(&h);
        const cat_event *e = &r->evs[r->next++];
        const unsigned char *etf = (const unsigned char *)r->x->buff + e->off;
        const tnode *ev = NULL;
        if (need_tree) {
            size_t at = 0;
            t.len = 0;
            long root = etf_parse(&t, etf, e->len, &at);
            if (root < 0) { /* decode_event made it: it parses */
                cat_error("%s: an event that does not parse", r->path);
                status = CAT_DAMAGED;
                break;
            }
            ev = &t.v[root];
            names_note(&t, ev, &to);
        }
        bool show = !filtered ||
                    (node_wanted(&a, r) && (!a.has_since || e->time >= a.since) &&
                     (!a.has_until || e->time <= a.until) && tag_wanted(&a, &t, ev) &&
                     pid_wanted(&a, &t, ev, &to, &scratch));
        if (r->lost > r->lost_reported && node_wanted(&a, r)) {
            s->lost(s, r->lost - r->lost_reported);
            r->lost_reported = r->lost;
        }
        if (show)
            s->event(s, etf, e->len, &t, ev, e->time, r->node);
        int rc = r->next < r->nevs ? 1 : reader_fill(r, &f);
        if (rc < 0)
            status = fail_with(&f);
        else if (rc > 0)
            heap_push(&h, r);
        else if (r->lost > r->lost_reported && node_wanted(&a, r)) {
            s->lost(s, r->lost - r->lost_reported);
            r->lost_reported = r->lost;
        }
    }
    s->finish(s);
    if (!out_flush() && status == CAT_OK)
        status = CAT_OUTPUT;
    if (fd != 1 && close(fd) != 0 && status == CAT_OK) {
        cat_error("%s: %s", a.output, strerror(errno));
        status = CAT_OUTPUT;
    }
    for (size_t k = 0; k < nfiles; k++)
        reader_close(&rs[k]);
    if (skips.n > 0 && status == CAT_OK)
        status = report_skips(&skips);
    return status;
}

/* tk_seqorder.c: causal order of seq_trace events (see tk_seqorder.h). */
#include "tk_seqorder.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tk_debug.h"
#include "tk_mem.h"
#include "tk_small.h"

/* Edges are kept as a list per source node (singly linked in arrays). */
typedef struct {
    const tk_seqorder_event *ev;
    size_t n;
    size_t *edge_to;
    size_t *edge_next; /* next edge of the same source, or SIZE_MAX */
    size_t *head;      /* first edge of each node, or SIZE_MAX */
    size_t nedges, capedges;
    size_t *indeg;
} graph;

static void release(void *p)
{
    if (p != NULL)
        tk_mem_free(p);
}

static int add_edge(graph *g, size_t a, size_t b)
{
    if (a == b)
        return 0;
    if (g->nedges == g->capedges) {
        size_t cap = g->capedges ? g->capedges * 2 : 64;
        size_t old = g->capedges * sizeof(size_t);
        size_t *t = tk_mem_realloc(g->edge_to, old, cap * sizeof *t);
        if (t == NULL)
            return -1;
        g->edge_to = t;
        t = tk_mem_realloc(g->edge_next, old, cap * sizeof *t);
        if (t == NULL)
            return -1;
        g->edge_next = t;
        g->capedges = cap;
    }
    g->edge_to[g->nedges] = b;
    g->edge_next[g->nedges] = g->head[a];
    g->head[a] = g->nedges++;
    g->indeg[b]++;
    return 0;
}

/* The process an event belongs to: the sender of a send, the printer, the
 * receiver of a receive. */
static uint32_t owner(const tk_seqorder_event *e)
{
    return e->kind == TK_SEQORDER_RECEIVE ? e->to : e->from;
}

static bool advances(const tk_seqorder_event *e)
{
    return e->kind != TK_SEQORDER_RECEIVE;
}

/* ---- a stable merge sort of indexes with a context (qsort has none, and
 * a global context would not be thread-safe) ------------------------------ */

typedef int (*cmp_fn)(const tk_seqorder_event *ev, size_t a, size_t b);

static void msort(size_t *a, size_t *tmp, size_t n,
                  const tk_seqorder_event *ev, cmp_fn cmp)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    msort(a, tmp, h, ev, cmp);
    msort(a + h, tmp, n - h, ev, cmp);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = cmp(ev, a[j], a[i]) < 0 ? a[j++] : a[i++];
    while (i < h)
        tmp[k++] = a[i++];
    while (j < n)
        tmp[k++] = a[j++];
    memcpy(a, tmp, n * sizeof *a);
}

static int cmp_i64(int64_t a, int64_t b)
{
    return a < b ? -1 : a > b;
}

static int cmp_u32(uint32_t a, uint32_t b)
{
    return a < b ? -1 : a > b;
}

static int cmp_size(size_t a, size_t b)
{
    return a < b ? -1 : a > b;
}

/* Transfer key: label, sender, {LastCnt, Serial}, message; sends before
 * receives; then input position. */
static int cmp_transfer(const tk_seqorder_event *ev, size_t a, size_t b)
{
    const tk_seqorder_event *x = &ev[a], *y = &ev[b];
    int c;
    if ((c = cmp_u32(x->label, y->label)) || (c = cmp_u32(x->from, y->from)) ||
        (c = cmp_i64(x->serial, y->serial)) ||
        (c = cmp_i64(x->lastcnt, y->lastcnt)) ||
        (c = cmp_u32(x->msg, y->msg)) ||
        (c = cmp_u32(x->kind == TK_SEQORDER_RECEIVE, y->kind == TK_SEQORDER_RECEIVE)))
        return c;
    return cmp_size(a, b);
}

/* Per-process key: owner, serial, sends and prints before receives, input
 * position. */
static int cmp_owner(const tk_seqorder_event *ev, size_t a, size_t b)
{
    const tk_seqorder_event *x = &ev[a], *y = &ev[b];
    int c;
    if ((c = cmp_u32(owner(x), owner(y))) ||
        (c = cmp_i64(x->serial, y->serial)) ||
        (c = cmp_u32(!advances(x), !advances(y))))
        return c;
    return cmp_size(a, b);
}

/* Output priority among events free to go: serial, sends and prints
 * first, owner, input position. */
static int prio(const tk_seqorder_event *ev, size_t a, size_t b)
{
    const tk_seqorder_event *x = &ev[a], *y = &ev[b];
    int c;
    if ((c = cmp_i64(x->serial, y->serial)) ||
        (c = cmp_u32(!advances(x), !advances(y))) ||
        (c = cmp_u32(owner(x), owner(y))))
        return c;
    return cmp_size(a, b);
}

/* ---- a binary heap of node indexes by prio() ---------------------------- */

typedef struct {
    size_t *a;
    size_t n;
    const tk_seqorder_event *ev;
} heap;

static void heap_push(heap *h, size_t x)
{
    size_t i = h->n++;
    h->a[i] = x;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        /* prio() is 0 only for an index with itself (its last key is the
         * index), and no index is in the heap twice: topo() pushes an
         * event once, when its in-degree first reaches 0 (or at the start,
         * when it is 0 and can never be decremented again), never one that
         * is done. So `<= 0' and `< 0' stop at the same place here (the
         * debug build checks it). */
        int c = prio(h->ev, h->a[p], h->a[i]);
        TK_ASSERT(c != 0);
        if (c <= 0)
            break;
        size_t t = h->a[p];
        h->a[p] = h->a[i];
        h->a[i] = t;
        i = p;
    }
}

static size_t heap_pop(heap *h)
{
    size_t top = h->a[0];
    h->a[0] = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < h->n && prio(h->ev, h->a[l], h->a[m]) < 0)
            m = l;
        if (r < h->n && prio(h->ev, h->a[r], h->a[m]) < 0)
            m = r;
        if (m == i)
            break;
        size_t t = h->a[m];
        h->a[m] = h->a[i];
        h->a[i] = t;
        i = m;
    }
    return top;
}

/* ---- the rules -------------------------------------------------------- */

/* Pairs sends with receives of the same transfer. Within a run of equal
 * keys the k-th send (in input order) goes with the k-th receive. */
static void match_transfers(const tk_seqorder_event *ev, size_t n, size_t *idx,
                            size_t *tmp, long *match)
{
    for (size_t i = 0; i < n; i++) {
        idx[i] = i;
        match[i] = -1;
    }
    msort(idx, tmp, n, ev, cmp_transfer);
    size_t i = 0;
    while (i < n) {
        const tk_seqorder_event *x = &ev[idx[i]];
        size_t j = i;
        while (j < n) {
            const tk_seqorder_event *y = &ev[idx[j]];
            if (y->label != x->label || y->from != x->from ||
                y->serial != x->serial || y->lastcnt != x->lastcnt ||
                y->msg != x->msg)
                break;
            j++;
        }
        size_t s = i, r = i;
        for (;;) {
            while (s < j && ev[idx[s]].kind != TK_SEQORDER_SEND)
                s++;
            while (r < j && ev[idx[r]].kind != TK_SEQORDER_RECEIVE)
                r++;
            if (s == j || r == j)
                break;
            match[idx[s]] = (long)idx[r];
            match[idx[r]] = (long)idx[s];
            s++;
            r++;
        }
        i = j;
    }
}

/* Where runs of equal lastcnt start in one process's chain of sends and
 * prints: the first event after one or more receives, which carries the
 * serial of the last of them. */
typedef struct {
    int64_t lastcnt;
    size_t pos;  /* position in the chain */
    bool used;   /* already explained by a receive */
} run_start;

static int cmp_run(const void *pa, const void *pb)
{
    const run_start *a = pa, *b = pb;
    int c = cmp_i64(a->lastcnt, b->lastcnt);
    return c ? c : cmp_size(a->pos, b->pos);
}

/* The first unused run start with this lastcnt at a position >= lo, as an
 * index into runs, or SIZE_MAX. */
static size_t find_run(const run_start *runs, size_t nruns, int64_t lastcnt,
                       size_t lo)
{
    size_t a = 0, b = nruns;
    while (a < b) {
        size_t mid = (a + b) / 2;
        if (runs[mid].lastcnt < lastcnt ||
            (runs[mid].lastcnt == lastcnt && runs[mid].pos < lo))
            a = mid + 1;
        else
            b = mid;
    }
    for (; a < nruns && runs[a].lastcnt == lastcnt; a++)
        if (!runs[a].used)
            return a;
    return SIZE_MAX;
}

/* Per-process view, built once: the events of each process sorted by
 * (owner, serial); for each process its chain of sends and prints, its run
 * starts and its receives. */
typedef struct {
    size_t *idx;   /* all events by (owner, serial, kind) */
    size_t *adv;   /* chains, concatenated */
    size_t *recv;  /* receives, concatenated */
    run_start *runs;
    size_t *proc_first; /* per process: start in idx, adv, recv, runs */
    size_t *adv_first, *recv_first, *run_first;
    size_t nprocs;
} procs;

static void procs_free(procs *p)
{
    release(p->idx);
    release(p->adv);
    release(p->recv);
    release(p->runs);
    release(p->proc_first);
    release(p->adv_first);
    release(p->recv_first);
    release(p->run_first);
}

static int procs_build(procs *p, const tk_seqorder_event *ev, size_t n,
                       size_t *tmp)
{
    size_t m = n ? n + 1 : 2;
    p->idx = tk_mem_alloc(m * sizeof(size_t));
    p->adv = tk_mem_alloc(m * sizeof(size_t));
    p->recv = tk_mem_alloc(m * sizeof(size_t));
    p->runs = tk_mem_alloc(m * sizeof(run_start));
    p->proc_first = tk_mem_alloc(m * sizeof(size_t));
    p->adv_first = tk_mem_alloc(m * sizeof(size_t));
    p->recv_first = tk_mem_alloc(m * sizeof(size_t));
    p->run_first = tk_mem_alloc(m * sizeof(size_t));
    if (!p->idx || !p->adv || !p->recv || !p->runs || !p->proc_first ||
        !p->adv_first || !p->recv_first || !p->run_first)
        return -1;
    for (size_t i = 0; i < n; i++)
        p->idx[i] = i;
    msort(p->idx, tmp, n, ev, cmp_owner);
    size_t na = 0, nr = 0, nruns = 0, np = 0, i = 0;
    while (i < n) {
        uint32_t o = owner(&ev[p->idx[i]]);
        p->proc_first[np] = i;
        p->adv_first[np] = na;
        p->recv_first[np] = nr;
        p->run_first[np] = nruns;
        size_t a0 = na, r0 = nruns;
        for (; i < n && owner(&ev[p->idx[i]]) == o; i++) {
            size_t x = p->idx[i];
            if (!advances(&ev[x])) {
                p->recv[nr++] = x;
                continue;
            }
            if (na == a0 || ev[x].lastcnt != ev[p->adv[na - 1]].lastcnt)
                p->runs[nruns++] = (run_start){ev[x].lastcnt, na - a0, false};
            p->adv[na++] = x;
        }
        qsort(p->runs + r0, nruns - r0, sizeof(run_start), cmp_run);
        np++;
    }
    p->nprocs = np;
    p->proc_first[np] = n;
    p->adv_first[np] = na;
    p->recv_first[np] = nr;
    p->run_first[np] = nruns;
    return 0;
}

/* Edges of one process: its chain; each receive after the sends and
 * prints with a serial <= its own; each receive right before the first
 * unexplained run start carrying its serial (for a spawn_reply, the tagged
 * word of it), receives taken in the order of `rank`. */
static int process_edges(graph *g, procs *p, size_t k, const size_t *rank,
                         size_t *tmp)
{
    const tk_seqorder_event *ev = g->ev;
    size_t *adv = p->adv + p->adv_first[k];
    size_t na = p->adv_first[k + 1] - p->adv_first[k];
    size_t *recv = p->recv + p->recv_first[k];
    size_t nr = p->recv_first[k + 1] - p->recv_first[k];
    run_start *runs = p->runs + p->run_first[k];
    size_t nruns = p->run_first[k + 1] - p->run_first[k];

    for (size_t i = 1; i < na; i++)
        if (add_edge(g, adv[i - 1], adv[i]))
            return -1;
    for (size_t i = 0; i < nruns; i++)
        runs[i].used = false;
    /* Receives in rank order (their order in a first pass). */
    for (size_t i = 0; i < nr; i++)
        tmp[i] = recv[i];
    for (size_t i = 1; i < nr; i++) { /* insertion sort: usually sorted */
        size_t x = tmp[i], j = i;
        while (j > 0 && rank[tmp[j - 1]] > rank[x]) {
            tmp[j] = tmp[j - 1];
            j--;
        }
        tmp[j] = x;
    }
    for (size_t i = 0; i < nr; i++) {
        size_t r = tmp[i];
        int64_t s = ev[r].serial;
        size_t lo = 0, hi = na;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ev[adv[mid]].serial <= s)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && add_edge(g, adv[lo - 1], r))
            return -1;
        int64_t want = ev[r].spawn_reply
                           ? tk_small_of_word(tk_small_tagged(s)) : s;
        size_t a = find_run(runs, nruns, want, lo);
        if (a == SIZE_MAX)
            continue;
        runs[a].used = true;
        size_t m = runs[a].pos;
        if (add_edge(g, r, adv[m]) || (m > 0 && add_edge(g, adv[m - 1], r)))
            return -1;
    }
    return 0;
}

/* Kahn's algorithm, taking the free event of highest priority; when
 * contradictory rules leave none free, the remaining event of highest
 * priority goes next. */
static void topo(graph *g, const size_t *byprio, bool *done, heap *h,
                 size_t *order)
{
    size_t n = g->n, next_forced = 0;
    h->n = 0;
    for (size_t i = 0; i < n; i++) {
        done[i] = false;
        if (g->indeg[i] == 0)
            heap_push(h, i);
    }
    for (size_t k = 0; k < n; k++) {
        size_t x;
        if (h->n > 0) {
            x = heap_pop(h);
        } else {
            while (done[byprio[next_forced]])
                next_forced++;
            x = byprio[next_forced];
        }
        done[x] = true;
        order[k] = x;
        for (size_t e = g->head[x]; e != SIZE_MAX; e = g->edge_next[e]) {
            size_t y = g->edge_to[e];
            if (g->indeg[y] > 0 && --g->indeg[y] == 0 && !done[y])
                heap_push(h, y);
        }
    }
}

static int build_graph(graph *g, procs *p, const long *match,
                       const size_t *rank, size_t *tmp)
{
    g->nedges = 0;
    for (size_t i = 0; i < g->n; i++) {
        g->head[i] = SIZE_MAX;
        g->indeg[i] = 0;
    }
    for (size_t i = 0; i < g->n; i++)
        if (g->ev[i].kind == TK_SEQORDER_SEND && match[i] >= 0 &&
            add_edge(g, i, (size_t)match[i]))
            return -1;
    for (size_t k = 0; k < p->nprocs; k++)
        if (process_edges(g, p, k, rank, tmp))
            return -1;
    return 0;
}

int tk_seqorder(const tk_seqorder_event *ev, size_t n, size_t *order,
                long *match)
{
    int rc = -1;
    size_t m = n ? n : 1;
    graph g = {.ev = ev, .n = n};
    procs p = {0};
    size_t *tmp = tk_mem_alloc(m * sizeof *tmp);
    size_t *byprio = tk_mem_alloc(m * sizeof *byprio);
    size_t *rank = tk_mem_zalloc(m * sizeof *rank);
    bool *done = tk_mem_alloc(m * sizeof *done);
    heap h = {.a = tk_mem_alloc(m * sizeof(size_t)), .ev = ev};
    g.head = tk_mem_alloc(m * sizeof *g.head);
    g.indeg = tk_mem_alloc(m * sizeof *g.indeg);
    if (!tmp || !byprio || !rank || !done || !h.a || !g.head || !g.indeg)
        goto out;

    match_transfers(ev, n, byprio, tmp, match);
    if (procs_build(&p, ev, n, tmp))
        goto out;
    for (size_t i = 0; i < n; i++)
        byprio[i] = i;
    msort(byprio, tmp, n, ev, prio);

    /* First pass: receives of one process claim run starts in priority
     * order. Second pass: in the order the first pass found, which takes
     * the other processes into account (two receives of the same serial
     * in one process are told apart by where their sends are). */
    for (size_t i = 0; i < n; i++)
        rank[byprio[i]] = i;
    if (build_graph(&g, &p, match, rank, tmp))
        goto out;
    topo(&g, byprio, done, &h, order);
    for (size_t i = 0; i < n; i++)
        rank[order[i]] = i;
    if (build_graph(&g, &p, match, rank, tmp))
        goto out;
    topo(&g, byprio, done, &h, order);
    rc = 0;
out:
    procs_free(&p);
    release(tmp);
    release(byprio);
    release(rank);
    release(done);
    release(h.a);
    release(g.head);
    release(g.indeg);
    release(g.edge_to);
    release(g.edge_next);
    return rc;
}

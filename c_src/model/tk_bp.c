#include "tk_bp.h"

#include "tk_mem.h"

#include <stdlib.h>
#include <string.h>

/*
 * Memory ordering. Readers load a site's code word, its list head, the
 * active index and each `next` with acquire; the writer stores them with
 * release, so whatever it wrote before (a breakpoint's contents, a
 * generation's data) is visible to a reader that sees the new value.
 * Generation data itself is plain memory: the writer only writes the
 * staging generation of a breakpoint, which no reader uses (readers use
 * the active one, and the grace period before consolidation drains the
 * readers of the old active one). Counters are atomics because readers add
 * to them while the writer may zero them (restart), as in the VM.
 */

static unsigned staging_ix(tk_bp *m)
{
    return atomic_load_explicit(&m->active, memory_order_relaxed) ^ 1u;
}

static unsigned active_ix(tk_bp *m)
{
    return atomic_load_explicit(&m->active, memory_order_relaxed);
}

static tk_bp_site *site_of(tk_bp *m, unsigned id)
{
    return &m->funcs[id / 2].site[id % 2];
}

int tk_bp_init(tk_bp *m, unsigned nfuncs, unsigned gp_flags)
{
    memset(m, 0, sizeof *m);
    m->funcs = tk_mem_zalloc((nfuncs ? nfuncs : 1) * sizeof *m->funcs);
    m->changed = tk_mem_zalloc(2 * (size_t)(nfuncs ? nfuncs : 1) * sizeof *m->changed);
    if (m->funcs == NULL || m->changed == NULL)
        goto fail;
    if (tk_pub_gp_init(&m->gp, gp_flags) != 0)
        goto fail;
    if (pthread_mutex_init(&m->lock, NULL) != 0) {
        tk_pub_gp_destroy(&m->gp);
        goto fail;
    }
    m->nfuncs = nfuncs;
    for (unsigned f = 0; f < nfuncs; f++) {
        for (unsigned k = 0; k < 2; k++) {
            tk_bp_site *s = &m->funcs[f].site[k];
            atomic_init(&s->code, TK_BP_ORIG_INSTR(f, k));
            atomic_init(&s->head, NULL);
            s->to_insert = NULL;
            s->touched = 0;
        }
        m->funcs[f].exported = 1;
    }
    atomic_init(&m->active, 0);
    m->step = TK_BP_STEP_DONE;
    return 0;
fail:
    tk_mem_free(m->funcs);
    tk_mem_free(m->changed);
    m->funcs = NULL;
    m->changed = NULL;
    return -1;
}

/* ---- shared generation data ------------------------------------------ */

static void meta_unref(tk_bp_meta *x)
{
    if (x != NULL && --x->refc == 0)
        tk_mem_free(x);
}

static void count_unref(tk_bp_count *x)
{
    if (x != NULL && --x->refc == 0)
        tk_mem_free(x);
}

static void acc_unref(tk_bp_acc *x)
{
    if (x != NULL && --x->refc == 0)
        tk_mem_free(x);
}

/* Drops what generation `d` holds and empties it. */
static void data_release(tk_bp_data *d)
{
    if (d->flags & TK_BP_META_TRACE)
        meta_unref(d->meta);
    if (d->flags & TK_BP_COUNT)
        count_unref(d->count);
    if (d->flags & TK_BP_TIME_TRACE)
        acc_unref(d->time);
    if (d->flags & TK_BP_MEM_TRACE)
        acc_unref(d->memory);
    memset(d, 0, sizeof *d);
}

void tk_bp_destroy(tk_bp *m)
{
    for (unsigned id = 0; id < 2 * m->nfuncs; id++) {
        tk_bp_site *s = site_of(m, id);
        tk_bp_g *g = s->to_insert != NULL
                         ? s->to_insert
                         : atomic_load_explicit(&s->head,
                                                memory_order_relaxed);
        while (g != NULL) {
            tk_bp_g *next = atomic_load_explicit(&g->next,
                                                 memory_order_relaxed);
            data_release(&g->data[0]);
            data_release(&g->data[1]);
            tk_mem_free(g);
            g = next;
        }
    }
    while (m->free_list != NULL) {
        tk_bp_g *g = m->free_list;
        m->free_list = g->next_to_free;
        tk_mem_free(g);
    }
    pthread_mutex_destroy(&m->lock);
    tk_pub_gp_destroy(&m->gp);
    tk_mem_free(m->funcs);
    tk_mem_free(m->changed);
    m->funcs = NULL;
    m->changed = NULL;
}

void tk_bp_set_exported(tk_bp *m, unsigned f, int exported)
{
    if (f < m->nfuncs)
        m->funcs[f].exported = exported != 0;
}

/* ---- readers ------------------------------------------------------------ */

/* do_session_breakpoint of beam_bp.c, for every breakpoint of a site. The
 * caller is inside a read section. Returns the number of breakpoints, and
 * sets *bad on an inconsistency. */
static int run_site(unsigned ix, unsigned k, tk_bp_site *s,
                    const tk_bp_ctx *ctx, tk_bp_hit *hits, int n, int max,
                    int *bad)
{
    uintptr_t code = atomic_load_explicit(&s->code, memory_order_acquire);
    if (code != TK_BP_BREAK_INSTR)
        return n;
    if (ctx->dawdle != NULL)
        ctx->dawdle(ctx->dawdle_arg);
    tk_bp_g *g = atomic_load_explicit(&s->head, memory_order_acquire);
    if (g == NULL)
        *bad = 1;
    for (; g != NULL; g = atomic_load_explicit(&g->next, memory_order_acquire)) {
        if (ctx->dawdle != NULL)
            ctx->dawdle(ctx->dawdle_arg);
        const tk_bp_data *d = &g->data[ix];
        uint32_t flags = d->flags, eff = flags, done = 0;
        int traced = (int)((ctx->call_traced >> (g->session & 63)) & 1);
        if (flags & ~TK_BP_ALL)
            *bad = 1;
        if ((eff & (TK_BP_LOCAL_TRACE | TK_BP_GLOBAL_TRACE |
                    TK_BP_TIME_TRACE_ACTIVE | TK_BP_MEM_TRACE_ACTIVE)) &&
            !traced)
            eff &= ~(TK_BP_LOCAL_TRACE | TK_BP_GLOBAL_TRACE |
                     TK_BP_TIME_TRACE | TK_BP_TIME_TRACE_ACTIVE |
                     TK_BP_MEM_TRACE | TK_BP_MEM_TRACE_ACTIVE);
        else if (eff & TK_BP_LOCAL_TRACE)
            done |= TK_BP_LOCAL_TRACE;
        else if (eff & TK_BP_GLOBAL_TRACE)
            done |= TK_BP_GLOBAL_TRACE;
        if (eff & TK_BP_META_TRACE)
            done |= TK_BP_META_TRACE;
        if (eff & TK_BP_COUNT_ACTIVE) {
            if (d->count == NULL) {
                *bad = 1;
            } else {
                atomic_fetch_add_explicit(&d->count->n, 1,
                                          memory_order_relaxed);
                done |= TK_BP_COUNT_ACTIVE;
            }
        }
        if (eff & (TK_BP_TIME_TRACE_ACTIVE | TK_BP_MEM_TRACE_ACTIVE)) {
            for (int t = 0; t < 2; t++) {
                uint32_t act = t ? TK_BP_MEM_TRACE_ACTIVE
                                 : TK_BP_TIME_TRACE_ACTIVE;
                tk_bp_acc *a = t ? d->memory : d->time;
                if (!(eff & act))
                    continue;
                if (a == NULL) {
                    *bad = 1;
                    continue;
                }
                atomic_fetch_add_explicit(&a->calls, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&a->sum, ctx->cost,
                                          memory_order_relaxed);
                done |= act;
            }
        }
        if (hits != NULL && n < max) {
            hits[n].session = g->session;
            hits[n].site = k;
            hits[n].flags = flags;
            hits[n].local_ms = d->local_ms;
            hits[n].meta_ms = d->meta_ms;
            hits[n].meta_tracer =
                (flags & TK_BP_META_TRACE) && d->meta != NULL ? d->meta->tracer
                                                              : 0;
            hits[n].done = done;
        }
        n++;
    }
    return n;
}

int tk_bp_call(tk_bp *m, unsigned slot, unsigned f, const tk_bp_ctx *ctx,
               tk_bp_hit *hits, int max)
{
    static const tk_bp_ctx plain = {0, 0, 0, NULL, NULL};
    if (f >= m->nfuncs)
        return 0;
    if (ctx == NULL)
        ctx = &plain;
    tk_bp_func *fn = &m->funcs[f];
    int n = 0, bad = 0;
    tk_pub_gp_enter(&m->gp, slot);
    /* One index for the whole call, so that both sites are seen in the same
     * generation. (The VM reads it per breakpoint, with no barrier; the
     * grace periods around the flip make either enough.) */
    unsigned ix = atomic_load_explicit(&m->active, memory_order_acquire);
    if (ctx->dawdle != NULL)
        ctx->dawdle(ctx->dawdle_arg);
    if (ctx->remote && fn->exported)
        n = run_site(ix, TK_BP_SITE_EXPORT, &fn->site[TK_BP_SITE_EXPORT], ctx,
                     hits, n, max, &bad);
    n = run_site(ix, TK_BP_SITE_CODE, &fn->site[TK_BP_SITE_CODE], ctx, hits,
                 n, max, &bad);
    tk_pub_gp_leave(&m->gp, slot);
    return bad ? -1 : n;
}

/* ---- staging ------------------------------------------------------------ */

void tk_bp_begin(tk_bp *m, unsigned session)
{
    pthread_mutex_lock(&m->lock);
    m->session = session % TK_BP_MAX_SESSIONS;
    m->step = TK_BP_STEP_STAGE;
    m->nchanged = 0;
}

static tk_bp_site *changed_site(tk_bp *m, unsigned f, unsigned k)
{
    tk_bp_site *s = &m->funcs[f].site[k];
    if (!s->touched) {
        s->touched = 1;
        m->changed[m->nchanged++] = 2 * f + k;
    }
    return s;
}

/* `session`'s breakpoint on a site, a staged one included. */
static tk_bp_g *find_g(tk_bp_site *s, unsigned session)
{
    tk_bp_g *g = s->to_insert != NULL
                     ? s->to_insert
                     : atomic_load_explicit(&s->head, memory_order_relaxed);
    for (; g != NULL; g = atomic_load_explicit(&g->next, memory_order_relaxed))
        if (g->session == session)
            return g;
    return NULL;
}

/* The ACTIVE bits that go with counting categories. */
static uint32_t with_active(uint32_t cats)
{
    uint32_t b = cats;
    if (cats & TK_BP_COUNT)
        b |= TK_BP_COUNT_ACTIVE;
    if (cats & TK_BP_TIME_TRACE)
        b |= TK_BP_TIME_TRACE_ACTIVE;
    if (cats & TK_BP_MEM_TRACE)
        b |= TK_BP_MEM_TRACE_ACTIVE;
    return b;
}

/* The session's breakpoint at site s, created (and linked, or queued for
 * linking at install) when there is none; NULL when there is none and none
 * is wanted (restart/pause), or when out of memory (*nomem set). */
static tk_bp_g *stage_breakpoint(tk_bp *m, tk_bp_site *s, tk_bp_op op,
                                 int *nomem)
{
    tk_bp_g *g = find_g(s, m->session);
    if (g != NULL || op == TK_BP_RESTART || op == TK_BP_PAUSE)
        return g; /* restart/pause never create a breakpoint */
    g = tk_mem_zalloc(sizeof *g);
    if (g == NULL) {
        *nomem = 1;
        return NULL;
    }
    g->session = m->session;
    g->next_to_free = NULL;
    tk_bp_g *head = atomic_load_explicit(&s->head, memory_order_relaxed);
    if (head == NULL) {
        /* First breakpoint of the site: linked at once, both generations
         * disabled. Readers only look at the list once they see the
         * breakpoint instruction, written at install. */
        g->orig_instr = atomic_load_explicit(&s->code, memory_order_relaxed);
        atomic_init(&g->next, NULL);
        atomic_store_explicit(&s->head, g, memory_order_release);
    } else {
        /* Other sessions' breakpoints are in use: link it first in the
         * list at install, after a grace period. */
        g->orig_instr = head->orig_instr;
        atomic_init(&g->next, head);
        s->to_insert = g;
    }
    return g;
}

/* Staging data that already has the category `common': trace and meta
 * data are dropped (new data follows, returns 0); a counter is restarted
 * or paused in place, which is all there is to do (returns 1). */
static int stage_existing(tk_bp_data *bp, uint32_t common, tk_bp_op op)
{
    if (common & (TK_BP_LOCAL_TRACE | TK_BP_GLOBAL_TRACE)) {
        bp->local_ms = 0;
        return 0;
    }
    if (common & TK_BP_META_TRACE) {
        meta_unref(bp->meta);
        bp->meta = NULL;
        bp->meta_ms = 0;
        return 0;
    }
    if (common & TK_BP_COUNT) {
        if (op == TK_BP_PAUSE) {
            bp->flags &= ~TK_BP_COUNT_ACTIVE;
        } else {
            bp->flags |= TK_BP_COUNT_ACTIVE;
            /* Shared with the active generation: readers see the zero at
             * once, as in the VM. */
            atomic_store_explicit(&bp->count->n, 0, memory_order_relaxed);
        }
        return 1;
    }
    if (common & (TK_BP_TIME_TRACE | TK_BP_MEM_TRACE)) {
        int time = (common & TK_BP_TIME_TRACE) != 0;
        uint32_t act = time ? TK_BP_TIME_TRACE_ACTIVE : TK_BP_MEM_TRACE_ACTIVE;
        tk_bp_acc *acc = time ? bp->time : bp->memory;
        if (op == TK_BP_PAUSE) {
            bp->flags &= ~act;
        } else {
            bp->flags |= act;
            atomic_store_explicit(&acc->calls, 0, memory_order_relaxed);
            atomic_store_explicit(&acc->sum, 0, memory_order_relaxed);
        }
        return 1;
    }
    return 0;
}

/* New data of the categories in `bits'. 0, or -1 when out of memory. */
static int stage_new(tk_bp_data *bp, uint32_t bits, uint32_t ms,
                     uint32_t meta_tracer)
{
    if (bits & (TK_BP_LOCAL_TRACE | TK_BP_GLOBAL_TRACE)) {
        bp->local_ms = ms;
    } else if (bits & TK_BP_META_TRACE) {
        tk_bp_meta *x = tk_mem_alloc(sizeof *x);
        if (x == NULL)
            return -1;
        x->refc = 1;
        x->tracer = meta_tracer;
        bp->meta = x;
        bp->meta_ms = ms;
    } else if (bits & TK_BP_COUNT) {
        tk_bp_count *x = tk_mem_alloc(sizeof *x);
        if (x == NULL)
            return -1;
        x->refc = 1;
        atomic_init(&x->n, 0);
        bp->count = x;
    } else if (bits & (TK_BP_TIME_TRACE | TK_BP_MEM_TRACE)) {
        tk_bp_acc *x = tk_mem_alloc(sizeof *x);
        if (x == NULL)
            return -1;
        x->refc = 1;
        atomic_init(&x->calls, 0);
        atomic_init(&x->sum, 0);
        if (bits & TK_BP_TIME_TRACE)
            bp->time = x;
        else
            bp->memory = x;
    }
    bp->flags |= bits;
    return 0;
}

int tk_bp_stage_set(tk_bp *m, unsigned f, uint32_t cat, tk_bp_op op,
                    uint32_t ms, uint32_t meta_tracer)
{
    if (f >= m->nfuncs)
        return 0;
    unsigned k = cat == TK_BP_GLOBAL_TRACE ? TK_BP_SITE_EXPORT
                                           : TK_BP_SITE_CODE;
    if (k == TK_BP_SITE_EXPORT && !m->funcs[f].exported)
        return 0;
    int nomem = 0;
    tk_bp_g *g = stage_breakpoint(m, changed_site(m, f, k), op, &nomem);
    if (g == NULL)
        return nomem ? -1 : 0;
    tk_bp_data *bp = &g->data[staging_ix(m)];
    uint32_t bits = with_active(cat);
    if (stage_existing(bp, bits & bp->flags, op))
        return 0;
    return stage_new(bp, bits, ms, meta_tracer);
}

static void clear_site(tk_bp *m, unsigned f, unsigned k, uint32_t flags)
{
    tk_bp_site *s = changed_site(m, f, k);
    tk_bp_g *g = find_g(s, m->session);
    if (g == NULL)
        return;
    tk_bp_data *bp = &g->data[staging_ix(m)];
    uint32_t common = bp->flags & flags;
    if (common == 0)
        return;
    bp->flags &= ~flags;
    if (common & (TK_BP_LOCAL_TRACE | TK_BP_GLOBAL_TRACE))
        bp->local_ms = 0;
    if (common & TK_BP_META_TRACE) {
        meta_unref(bp->meta);
        bp->meta = NULL;
        bp->meta_ms = 0;
    }
    if (common & TK_BP_COUNT) {
        count_unref(bp->count);
        bp->count = NULL;
    }
    if (common & TK_BP_TIME_TRACE) {
        acc_unref(bp->time);
        bp->time = NULL;
    }
    if (common & TK_BP_MEM_TRACE) {
        acc_unref(bp->memory);
        bp->memory = NULL;
    }
}

void tk_bp_stage_clear(tk_bp *m, unsigned f, uint32_t flags)
{
    if (f >= m->nfuncs)
        return;
    flags = with_active(flags);
    if ((flags & TK_BP_GLOBAL_TRACE) && m->funcs[f].exported)
        clear_site(m, f, TK_BP_SITE_EXPORT, TK_BP_GLOBAL_TRACE);
    if (flags & ~TK_BP_GLOBAL_TRACE)
        clear_site(m, f, TK_BP_SITE_CODE, flags & ~TK_BP_GLOBAL_TRACE);
}

int tk_bp_stage_pattern(tk_bp *m, unsigned f, tk_bp_op op, uint32_t cats,
                        uint32_t local_ms, uint32_t meta_ms,
                        uint32_t meta_tracer)
{
    static const uint32_t order[] = {TK_BP_LOCAL_TRACE, TK_BP_META_TRACE,
                                     TK_BP_COUNT, TK_BP_TIME_TRACE,
                                     TK_BP_MEM_TRACE};
    if (f >= m->nfuncs)
        return 0;
    int exported = m->funcs[f].exported;
    int failed = 0;
    if ((cats & TK_BP_CATEGORIES) == 0) {
        /* Global: the export entry; restart and pause are plain "on"
         * there. Turning it on also clears every breakpoint of the
         * session in the function's code. */
        if (op != TK_BP_OFF) {
            failed |= tk_bp_stage_set(m, f, TK_BP_GLOBAL_TRACE, TK_BP_ON,
                                      local_ms, 0);
            tk_bp_stage_clear(m, f, TK_BP_ALL & ~TK_BP_GLOBAL_TRACE);
        } else {
            tk_bp_stage_clear(m, f, TK_BP_GLOBAL_TRACE);
        }
        return failed ? -1 : exported;
    }
    /* Breakpoint categories: turning them on turns global tracing off. */
    if (op != TK_BP_OFF)
        tk_bp_stage_clear(m, f, TK_BP_GLOBAL_TRACE);
    for (unsigned i = 0; i < sizeof order / sizeof order[0]; i++) {
        uint32_t cat = order[i];
        if (!(cats & cat))
            continue;
        /* restart/pause only mean something to counters; local and meta
         * breakpoints take them as plain "on" (the VM passes no count
         * operation for those). */
        tk_bp_op cop = (cat & (TK_BP_COUNT | TK_BP_TIME_TRACE |
                               TK_BP_MEM_TRACE))
                           ? op
                           : TK_BP_ON;
        if (op == TK_BP_OFF)
            tk_bp_stage_clear(m, f, cat);
        else
            failed |= tk_bp_stage_set(m, f, cat, cop,
                                      cat == TK_BP_META_TRACE ? meta_ms
                                                              : local_ms,
                                      meta_tracer);
    }
    return failed ? -1 : 1;
}

/* ---- the steps ---------------------------------------------------------- */

static uint32_t active_flags_sum(tk_bp *m, tk_bp_site *s)
{
    unsigned ix = active_ix(m);
    uint32_t sum = 0;
    for (tk_bp_g *g = atomic_load_explicit(&s->head, memory_order_relaxed);
         g != NULL; g = atomic_load_explicit(&g->next, memory_order_relaxed))
        sum |= g->data[ix].flags;
    return sum;
}

static void install(tk_bp *m)
{
    for (unsigned i = 0; i < m->nchanged; i++) {
        tk_bp_site *s = site_of(m, m->changed[i]);
        if (atomic_load_explicit(&s->head, memory_order_relaxed) != NULL &&
            atomic_load_explicit(&s->code, memory_order_relaxed) !=
                TK_BP_BREAK_INSTR)
            atomic_store_explicit(&s->code, TK_BP_BREAK_INSTR,
                                  memory_order_release);
        if (s->to_insert != NULL) {
            atomic_store_explicit(&s->head, s->to_insert,
                                  memory_order_release);
            s->to_insert = NULL;
        }
    }
}

static void commit(tk_bp *m)
{
    atomic_store_explicit(&m->active, staging_ix(m), memory_order_release);
}

static void uninstall(tk_bp *m)
{
    for (unsigned i = 0; i < m->nchanged; i++) {
        tk_bp_site *s = site_of(m, m->changed[i]);
        tk_bp_g *head = atomic_load_explicit(&s->head, memory_order_relaxed);
        if (head != NULL &&
            atomic_load_explicit(&s->code, memory_order_relaxed) ==
                TK_BP_BREAK_INSTR &&
            active_flags_sum(m, s) == 0)
            atomic_store_explicit(&s->code, head->orig_instr,
                                  memory_order_release);
    }
}

/* Staging := active, with references. */
static void consolidate_g(tk_bp *m, tk_bp_g *g)
{
    tk_bp_data *src = &g->data[active_ix(m)];
    tk_bp_data *dst = &g->data[staging_ix(m)];
    data_release(dst);
    *dst = *src;
    if (dst->flags & TK_BP_META_TRACE)
        dst->meta->refc++;
    if (dst->flags & TK_BP_COUNT)
        dst->count->refc++;
    if (dst->flags & TK_BP_TIME_TRACE)
        dst->time->refc++;
    if (dst->flags & TK_BP_MEM_TRACE)
        dst->memory->refc++;
}

static void consolidate(tk_bp *m)
{
    unsigned ix = active_ix(m);
    for (unsigned i = 0; i < m->nchanged; i++) {
        tk_bp_site *s = site_of(m, m->changed[i]);
        _Atomic(tk_bp_g *) *prev = &s->head;
        tk_bp_g *g = atomic_load_explicit(prev, memory_order_relaxed);
        while (g != NULL) {
            tk_bp_g *next = atomic_load_explicit(&g->next,
                                                 memory_order_relaxed);
            consolidate_g(m, g);
            if (g->data[ix].flags == 0) {
                /* Unlink; readers standing on g still find `next` through
                 * it, and g is freed only after another grace period. */
                atomic_store_explicit(prev, next, memory_order_release);
                g->next_to_free = m->free_list;
                m->free_list = g;
            } else {
                prev = &g->next;
            }
            g = next;
        }
        s->touched = 0;
    }
}

static void free_unlinked(tk_bp *m)
{
    while (m->free_list != NULL) {
        tk_bp_g *g = m->free_list;
        m->free_list = g->next_to_free;
        tk_mem_free(g);
    }
}

int tk_bp_step(tk_bp *m)
{
    if (m->step < TK_BP_STEP_STAGE || m->step >= TK_BP_STEP_FREE)
        return TK_BP_STEP_DONE;
    /* Thread progress: no reader still uses what the next step changes or
     * frees, and every reader sees what the previous steps wrote. */
    tk_pub_gp_wait(&m->gp);
    m->waits++;
    switch (++m->step) {
    case TK_BP_STEP_INSTALL:
        install(m);
        break;
    case TK_BP_STEP_COMMIT:
        commit(m);
        break;
    case TK_BP_STEP_UNINSTALL:
        uninstall(m);
        break;
    case TK_BP_STEP_CONSOLIDATE:
        consolidate(m);
        break;
    case TK_BP_STEP_FREE:
        free_unlinked(m);
        m->nchanged = 0;
        m->changes++;
        m->step = TK_BP_STEP_DONE;
        pthread_mutex_unlock(&m->lock);
        return TK_BP_STEP_FREE;
    }
    return m->step;
}

void tk_bp_finish(tk_bp *m)
{
    int s;
    do
        s = tk_bp_step(m);
    while (s != TK_BP_STEP_FREE && s != TK_BP_STEP_DONE);
}

/* ---- inspection --------------------------------------------------------- */

void tk_bp_lock(tk_bp *m)
{
    pthread_mutex_lock(&m->lock);
}

void tk_bp_unlock(tk_bp *m)
{
    pthread_mutex_unlock(&m->lock);
}

static tk_bp_g *linked_g(tk_bp *m, unsigned session, unsigned f, unsigned k)
{
    if (f >= m->nfuncs)
        return NULL;
    for (tk_bp_g *g = atomic_load_explicit(&m->funcs[f].site[k].head,
                                           memory_order_relaxed);
         g != NULL; g = atomic_load_explicit(&g->next, memory_order_relaxed))
        if (g->session == session)
            return g;
    return NULL;
}

int tk_bp_count_of(tk_bp *m, unsigned session, unsigned f, uint64_t *n)
{
    tk_bp_g *g = linked_g(m, session, f, TK_BP_SITE_CODE);
    if (g == NULL)
        return 0;
    const tk_bp_data *d = &g->data[active_ix(m)];
    if (!(d->flags & TK_BP_COUNT))
        return 0;
    *n = atomic_load_explicit(&d->count->n, memory_order_relaxed);
    return 1;
}

int tk_bp_acc_of(tk_bp *m, unsigned session, unsigned f, uint32_t which,
                 uint64_t *calls, uint64_t *sum)
{
    tk_bp_g *g = linked_g(m, session, f, TK_BP_SITE_CODE);
    if (g == NULL)
        return 0;
    const tk_bp_data *d = &g->data[active_ix(m)];
    tk_bp_acc *a;
    if (which == TK_BP_TIME_TRACE && (d->flags & TK_BP_TIME_TRACE))
        a = d->time;
    else if (which == TK_BP_MEM_TRACE && (d->flags & TK_BP_MEM_TRACE))
        a = d->memory;
    else
        return 0;
    *calls = atomic_load_explicit(&a->calls, memory_order_relaxed);
    *sum = atomic_load_explicit(&a->sum, memory_order_relaxed);
    return 1;
}

int tk_bp_data_of(tk_bp *m, unsigned session, unsigned f, unsigned site,
                  unsigned gen, tk_bp_data *out)
{
    if (f >= m->nfuncs || site > 1)
        return 0;
    tk_bp_g *g = find_g(&m->funcs[f].site[site], session);
    if (g == NULL)
        return 0;
    *out = g->data[gen & 1u];
    return 1;
}

uint32_t tk_bp_flags_of(tk_bp *m, unsigned session, unsigned f, unsigned gen)
{
    tk_bp_data d;
    uint32_t flags = 0;
    for (unsigned k = 0; k < 2; k++)
        if (tk_bp_data_of(m, session, f, k, gen, &d))
            flags |= d.flags;
    return flags;
}

uintptr_t tk_bp_code(tk_bp *m, unsigned f, unsigned site)
{
    return f < m->nfuncs && site < 2
               ? atomic_load_explicit(&m->funcs[f].site[site].code,
                                      memory_order_relaxed)
               : 0;
}

unsigned tk_bp_active(tk_bp *m)
{
    return active_ix(m);
}

unsigned tk_bp_nbreakpoints(tk_bp *m, unsigned f, unsigned site)
{
    unsigned n = 0;
    if (f >= m->nfuncs || site > 1)
        return 0;
    for (tk_bp_g *g = atomic_load_explicit(&m->funcs[f].site[site].head,
                                           memory_order_relaxed);
         g != NULL; g = atomic_load_explicit(&g->next, memory_order_relaxed))
        n++;
    return n;
}

/* snapshot.c: read/1 and stats/1: the histograms and counters as terms.
 *
 * The histograms are copied out under the data lock (a few words per
 * function and one pair per bucket that holds values) and made into terms
 * after it is released, so that the consumer thread is held for a copy,
 * not for the making of terms.
 */
#include <string.h>

#include "lat.h"
#include "tk_mem.h"

typedef struct {
    uint64_t count, sum_lo, sum_hi, min, max;
    size_t first, n; /* its buckets in the copy's arrays */
} hist_copy;

typedef struct {
    uint64_t m, f, unfinished, nested;
    uint32_t arity;
    hist_copy ret, exc;
} fn_copy;

typedef struct {
    fn_copy *fns;
    unsigned nfns;
    uint16_t *idx;
    uint64_t *cnt;
    size_t nb;
    tk_lat_counts counts;
    uint64_t processes, frames, taken;
    bool finished;
} copy;

static size_t buckets_of(const tk_hist *h)
{
    size_t n = 0;
    uint64_t k;
    for (unsigned i = tk_hist_next(h, 0, &k); i < TK_HIST_BUCKETS; i = tk_hist_next(h, i + 1, &k))
        n++;
    return n;
}

static void copy_hist(copy *cp, hist_copy *to, const tk_hist *h)
{
    to->count = h->count;
    to->sum_lo = h->sum_lo;
    to->sum_hi = h->sum_hi;
    to->min = h->min;
    to->max = h->max;
    to->first = cp->nb;
    uint64_t k;
    for (unsigned i = tk_hist_next(h, 0, &k); i < TK_HIST_BUCKETS; i = tk_hist_next(h, i + 1, &k)) {
        cp->idx[cp->nb] = (uint16_t)i;
        cp->cnt[cp->nb++] = k;
    }
    to->n = cp->nb - to->first;
}

/* Under c->lock. -1 when out of memory. */
static int take_copy(lat_core *c, copy *cp, bool functions)
{
    memset(cp, 0, sizeof *cp);
    const tk_lat *l = c->lat;
    cp->counts = *tk_lat_counts_of(l);
    cp->processes = tk_lat_processes(l);
    cp->frames = tk_lat_frames(l);
    cp->taken = c->taken;
    cp->finished = c->finished;
    if (!functions)
        return 0;
    unsigned n = tk_lat_functions(l);
    size_t nb = 0;
    for (unsigned i = 0; i < n; i++) {
        const tk_lat_fn *e = tk_lat_function(l, i);
        nb += buckets_of(&e->returns) + buckets_of(&e->exceptions);
    }
    cp->fns = tk_mem_alloc((n ? n : 1) * sizeof *cp->fns);
    cp->idx = tk_mem_alloc((nb ? nb : 1) * sizeof *cp->idx);
    cp->cnt = tk_mem_alloc((nb ? nb : 1) * sizeof *cp->cnt);
    if (cp->fns == NULL || cp->idx == NULL || cp->cnt == NULL)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        const tk_lat_fn *e = tk_lat_function(l, i);
        fn_copy *f = &cp->fns[i];
        f->m = e->m;
        f->f = e->f;
        f->arity = e->arity;
        f->unfinished = e->unfinished;
        f->nested = e->nested;
        copy_hist(cp, &f->ret, &e->returns);
        copy_hist(cp, &f->exc, &e->exceptions);
    }
    cp->nfns = n;
    return 0;
}

static void free_copy(copy *cp)
{
    tk_mem_free(cp->fns);
    tk_mem_free(cp->idx);
    tk_mem_free(cp->cnt);
}

/* A 128-bit unsigned integer as a term. */
static ERL_NIF_TERM make_u128(ErlNifEnv *env, uint64_t lo, uint64_t hi)
{
    if (hi == 0)
        return enif_make_uint64(env, lo);
    /* The external format's SMALL_BIG_EXT: digits little-endian. */
    unsigned char ext[3 + 1 + 16] = {131, 110, 0, 0};
    unsigned n = 0;
    for (unsigned i = 0; i < 8; i++)
        ext[4 + n++] = (unsigned char)(lo >> (8 * i));
    for (unsigned i = 0; i < 8; i++)
        ext[4 + n++] = (unsigned char)(hi >> (8 * i));
    while (n > 0 && ext[4 + n - 1] == 0)
        n--;
    ext[2] = (unsigned char)n;
    ERL_NIF_TERM t;
    if (enif_binary_to_term(env, ext, 4 + n, &t, 0) == 0)
        return enif_make_uint64(env, lo); /* (cannot happen) */
    return t;
}

static ERL_NIF_TERM hist_term(ErlNifEnv *env, const lat_lib *lib, const copy *cp,
                              const hist_copy *h)
{
    ERL_NIF_TERM list = enif_make_list(env, 0);
    for (size_t k = h->n; k > 0; k--) {
        size_t j = h->first + k - 1;
        list = enif_make_list_cell(
            env, enif_make_tuple2(env, enif_make_uint(env, cp->idx[j]),
                                  enif_make_uint64(env, cp->cnt[j])), list);
    }
    ERL_NIF_TERM keys[] = {lib->am_count, lib->am_sum, lib->am_min, lib->am_max, lib->am_buckets};
    ERL_NIF_TERM vals[] = {enif_make_uint64(env, h->count), make_u128(env, h->sum_lo, h->sum_hi),
                           enif_make_uint64(env, h->min), enif_make_uint64(env, h->max), list};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, 5, &map);
    return map;
}

ERL_NIF_TERM lat_hist_term(ErlNifEnv *env, const lat_lib *lib, const tk_hist *h)
{
    size_t nb = buckets_of(h);
    copy cp = {0};
    cp.idx = tk_mem_alloc((nb ? nb : 1) * sizeof *cp.idx);
    cp.cnt = tk_mem_alloc((nb ? nb : 1) * sizeof *cp.cnt);
    if (cp.idx == NULL || cp.cnt == NULL) {
        free_copy(&cp);
        return enif_raise_exception(env, lib->am_enomem);
    }
    hist_copy hc;
    copy_hist(&cp, &hc, h);
    ERL_NIF_TERM t = hist_term(env, lib, &cp, &hc);
    free_copy(&cp);
    return t;
}

static ERL_NIF_TERM counters_term(ErlNifEnv *env, const lat_lib *lib, lat_core *c,
                                  const copy *cp)
{
    uint64_t written = 0, dropped = 0, filtered = 0, ignored = 0;
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        filtered += atomic_load_explicit(&c->slots[i].filtered, memory_order_relaxed);
        ignored += atomic_load_explicit(&c->slots[i].ignored, memory_order_relaxed);
        tk_ring *r = atomic_load_explicit(&c->producers[i], memory_order_acquire);
        if (r != NULL) {
            written += tk_stat_read(&r->written);
            dropped += tk_stat_read(&r->dropped);
        }
    }
    const tk_lat_counts *k = &cp->counts;
#define U(v) enif_make_uint64(env, (v))
    ERL_NIF_TERM keys[] = {
        lib->am_calls, lib->am_returns, lib->am_exceptions, lib->am_exits,
        lib->am_measured, lib->am_nested, lib->am_unmatched, lib->am_unfinished,
        lib->am_lost, lib->am_blind, lib->am_blind_periods, lib->am_markers,
        lib->am_over_functions,
        lib->am_over_processes, lib->am_over_frames, lib->am_no_memory, lib->am_junk,
        lib->am_written, lib->am_taken, lib->am_dropped, lib->am_filtered, lib->am_ignored,
        lib->am_unplaced, lib->am_processes, lib->am_frames, lib->am_closed,
        lib->am_finished};
    ERL_NIF_TERM vals[] = {
        U(k->calls), U(k->returns), U(k->exceptions), U(k->exits), U(k->measured),
        U(k->nested), U(k->unmatched), U(k->unfinished), U(k->lost), U(k->blind),
        U(k->blind_periods), U(k->markers), U(k->over_functions), U(k->over_processes), U(k->over_frames),
        U(k->no_memory), U(k->junk), U(written), U(cp->taken), U(dropped), U(filtered),
        U(ignored), U(atomic_load(&c->unplaced)), U(cp->processes), U(cp->frames),
        atomic_load(&c->closed) ? lib->am_true : lib->am_false,
        cp->finished ? lib->am_true : lib->am_false};
#undef U
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, sizeof keys / sizeof keys[0], &map);
    return map;
}

ERL_NIF_TERM lat_snapshot(ErlNifEnv *env, const lat_lib *lib, lat_core *c, bool functions)
{
    copy cp;
    enif_mutex_lock(c->lock);
    int rc = take_copy(c, &cp, functions);
    enif_mutex_unlock(c->lock);
    if (rc != 0) {
        free_copy(&cp);
        return enif_raise_exception(env, lib->am_enomem);
    }
    ERL_NIF_TERM counters = counters_term(env, lib, c, &cp);
    if (!functions) {
        free_copy(&cp);
        return counters;
    }
    ERL_NIF_TERM fns = enif_make_new_map(env);
    for (unsigned i = 0; i < cp.nfns; i++) {
        const fn_copy *f = &cp.fns[i];
        ERL_NIF_TERM mfa = enif_make_tuple3(env, (ERL_NIF_TERM)f->m, (ERL_NIF_TERM)f->f,
                                            enif_make_uint(env, f->arity));
        ERL_NIF_TERM keys[] = {lib->am_returns, lib->am_exceptions, lib->am_unfinished,
                               lib->am_nested};
        ERL_NIF_TERM vals[] = {hist_term(env, lib, &cp, &f->ret),
                               hist_term(env, lib, &cp, &f->exc),
                               enif_make_uint64(env, f->unfinished),
                               enif_make_uint64(env, f->nested)};
        ERL_NIF_TERM m;
        enif_make_map_from_arrays(env, keys, vals, 4, &m);
        enif_make_map_put(env, fns, mfa, m, &fns);
    }
    free_copy(&cp);
    ERL_NIF_TERM keys[] = {lib->am_layout, lib->am_hz, lib->am_recursion, lib->am_functions,
                           lib->am_counters};
    ERL_NIF_TERM vals[] = {
        enif_make_tuple2(env, lib->am_tracekit_hist, enif_make_uint(env, TK_HIST_LAYOUT)),
        enif_make_uint64(env, c->opts.hz),
        c->opts.recursion == TK_LAT_EACH ? lib->am_each : lib->am_outermost, fns, counters};
    ERL_NIF_TERM map;
    enif_make_map_from_arrays(env, keys, vals, 5, &map);
    return map;
}

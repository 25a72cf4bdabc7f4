#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk_lat.h"
#include "tk_test.h"

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static tk_lat *lat(tk_lat_recursion rec, uint32_t fns, uint32_t procs, uint64_t frames)
{
    tk_lat_opts o = {rec, fns, procs, frames, 1000000000u};
    return tk_lat_new(&o);
}

/* Function n is {m, f<n>, 1}: atoms are any distinct words here. */
static tk_lat_rec rec(uint32_t kind, uint64_t pid, unsigned fn)
{
    return (tk_lat_rec){pid, 0x100, 0x200 + 0x40 * (uint64_t)fn, 1, kind};
}

static void ev(tk_lat *l, uint64_t stamp, uint32_t kind, uint64_t pid, unsigned fn)
{
    tk_lat_rec r = rec(kind, pid, fn);
    tk_lat_record(l, stamp, &r);
}

/* The function a test named fn is, in the order the state met them. */
static const tk_lat_fn *fn_of(tk_lat *l, unsigned fn)
{
    for (unsigned i = 0; i < tk_lat_functions(l); i++) {
        const tk_lat_fn *e = tk_lat_function(l, i);
        if (e->f == 0x200 + 0x40 * (uint64_t)fn)
            return e;
    }
    return NULL;
}

TK_TEST(lat_pairs_calls_and_returns)
{
    tk_lat *l = lat(TK_LAT_OUTERMOST, 10, 10, 100);
    TK_REQUIRE(l != NULL);
    ev(l, 100, TK_LAT_CALL, 7, 0);
    ev(l, 150, TK_LAT_CALL, 8, 0);   /* another process, same function */
    ev(l, 160, TK_LAT_CALL, 7, 1);
    ev(l, 200, TK_LAT_RETURN, 7, 1);
    ev(l, 400, TK_LAT_RETURN, 7, 0);
    ev(l, 1150, TK_LAT_EXCEPTION, 8, 0);
    const tk_lat_fn *f0 = fn_of(l, 0), *f1 = fn_of(l, 1);
    TK_REQUIRE(f0 != NULL && f1 != NULL);
    TK_CHECK_EQ(f0->returns.count, 1);
    TK_CHECK_EQ(f0->returns.min, 300);
    TK_CHECK_EQ(f0->exceptions.count, 1);
    TK_CHECK_EQ(f0->exceptions.max, 1000);
    TK_CHECK_EQ(f1->returns.count, 1);
    TK_CHECK_EQ(f1->returns.sum_lo, 40);
    const tk_lat_counts *c = tk_lat_counts_of(l);
    TK_CHECK_EQ(c->calls, 3);
    TK_CHECK_EQ(c->returns, 2);
    TK_CHECK_EQ(c->exceptions, 1);
    TK_CHECK_EQ(c->measured, 3);
    TK_CHECK_EQ(tk_lat_processes(l), 0);
    TK_CHECK_EQ(tk_lat_frames(l), 0);
    tk_lat_free(l);
}

TK_TEST(lat_recursion_outermost_and_each)
{
    for (int each = 0; each <= 1; each++) {
        tk_lat *l = lat(each ? TK_LAT_EACH : TK_LAT_OUTERMOST, 10, 10, 100);
        /* f0 -> f0 -> f0 (direct), then f0 -> f1 -> f0 -> f1 (mutual). */
        ev(l, 0, TK_LAT_CALL, 1, 0);
        ev(l, 10, TK_LAT_CALL, 1, 0);
        ev(l, 20, TK_LAT_CALL, 1, 0);
        ev(l, 50, TK_LAT_RETURN, 1, 0);
        ev(l, 60, TK_LAT_RETURN, 1, 0);
        ev(l, 100, TK_LAT_RETURN, 1, 0);
        ev(l, 1000, TK_LAT_CALL, 1, 0);
        ev(l, 1010, TK_LAT_CALL, 1, 1);
        ev(l, 1020, TK_LAT_CALL, 1, 0);
        ev(l, 1030, TK_LAT_CALL, 1, 1);
        ev(l, 1040, TK_LAT_RETURN, 1, 1);
        ev(l, 1050, TK_LAT_EXCEPTION, 1, 0);
        ev(l, 1070, TK_LAT_EXCEPTION, 1, 1);
        ev(l, 1100, TK_LAT_EXCEPTION, 1, 0);
        const tk_lat_fn *f0 = fn_of(l, 0), *f1 = fn_of(l, 1);
        if (each) {
            TK_CHECK_EQ(f0->returns.count, 3);
            TK_CHECK_EQ(f0->returns.sum_lo, 30 + 50 + 100);
            TK_CHECK_EQ(f0->exceptions.count, 2);
            TK_CHECK_EQ(f0->exceptions.sum_lo, 30 + 100);
            TK_CHECK_EQ(f1->returns.count, 1);
            TK_CHECK_EQ(f1->exceptions.count, 1);
            TK_CHECK_EQ(f1->exceptions.sum_lo, 60);
            TK_CHECK_EQ(tk_lat_counts_of(l)->nested, 0);
        } else {
            /* Only the outermost call of each function counts. */
            TK_CHECK_EQ(f0->returns.count, 1);
            TK_CHECK_EQ(f0->returns.sum_lo, 100);
            TK_CHECK_EQ(f0->exceptions.count, 1);
            TK_CHECK_EQ(f0->exceptions.sum_lo, 100);
            TK_CHECK_EQ(f1->returns.count, 0);
            TK_CHECK_EQ(f1->exceptions.count, 1);
            TK_CHECK_EQ(f1->exceptions.sum_lo, 60);
            TK_CHECK_EQ(f0->nested, 3);
            TK_CHECK_EQ(f1->nested, 1);
        }
        TK_CHECK_EQ(tk_lat_frames(l), 0);
        TK_CHECK_EQ(tk_lat_processes(l), 0);
        tk_lat_free(l);
    }
}

/* Recursion a million deep: one frame under outermost; under each, the
 * frame bound refuses the calls past it and the stack stays exact. */
TK_TEST(lat_deep_recursion)
{
    const uint64_t n = 1000000;
    tk_lat *l = lat(TK_LAT_OUTERMOST, 10, 10, 16);
    for (uint64_t i = 0; i < n; i++)
        ev(l, i, TK_LAT_CALL, 1, 0);
    TK_CHECK_EQ(tk_lat_frames(l), 1);
    for (uint64_t i = 0; i < n; i++)
        ev(l, n + i, TK_LAT_RETURN, 1, 0);
    TK_CHECK_EQ(fn_of(l, 0)->returns.count, 1);
    TK_CHECK_EQ(fn_of(l, 0)->returns.max, 2 * n - 1);
    tk_lat_free(l);

    l = lat(TK_LAT_EACH, 10, 10, 1000);
    for (uint64_t i = 0; i < 5000; i++)
        ev(l, i, TK_LAT_CALL, 1, 0);
    TK_CHECK_EQ(tk_lat_frames(l), 1000);
    TK_CHECK_EQ(tk_lat_counts_of(l)->over_frames, 1);
    for (uint64_t i = 0; i < 5000; i++)
        ev(l, 5000 + i, TK_LAT_RETURN, 1, 0);
    /* The 1000 outer calls, each exactly: the k-th from the outside
     * returned at 10000 - 1 - k after its call at k. */
    const tk_lat_fn *f = fn_of(l, 0);
    TK_CHECK_EQ(f->returns.count, 1000);
    TK_CHECK_EQ(f->returns.max, 9999);
    TK_CHECK_EQ(f->returns.min, 9999 - 2 * 999);
    TK_CHECK_EQ(tk_lat_counts_of(l)->unmatched, 0);
    TK_CHECK_EQ(tk_lat_processes(l), 0);
    tk_lat_free(l);
}

TK_TEST(lat_exit_and_finish_leave_calls_unfinished)
{
    tk_lat *l = lat(TK_LAT_EACH, 10, 10, 100);
    ev(l, 0, TK_LAT_CALL, 1, 0);
    ev(l, 1, TK_LAT_CALL, 1, 1);
    ev(l, 2, TK_LAT_CALL, 2, 1);
    ev(l, 3, TK_LAT_EXIT, 1, 0);
    /* A return after the exit (a pid reused): unmatched. */
    ev(l, 4, TK_LAT_RETURN, 1, 1);
    TK_CHECK_EQ(fn_of(l, 0)->unfinished, 1);
    TK_CHECK_EQ(fn_of(l, 1)->unfinished, 1);
    TK_CHECK_EQ(tk_lat_counts_of(l)->unmatched, 1);
    TK_CHECK_EQ(tk_lat_processes(l), 1);
    tk_lat_finish(l);
    TK_CHECK_EQ(fn_of(l, 1)->unfinished, 2);
    TK_CHECK_EQ(tk_lat_counts_of(l)->unfinished, 3);
    TK_CHECK_EQ(tk_lat_counts_of(l)->measured, 0);
    TK_CHECK_EQ(tk_lat_processes(l), 0);
    TK_CHECK_EQ(tk_lat_frames(l), 0);
    /* An exit of a process never seen, and junk, change nothing else. */
    ev(l, 5, TK_LAT_EXIT, 99, 0);
    ev(l, 6, 77, 1, 0);
    ev(l, 7, TK_LAT_CALL, 0, 0);
    TK_CHECK_EQ(tk_lat_counts_of(l)->junk, 2);
    tk_lat_free(l);
}

TK_TEST(lat_wrong_return_drops_the_stack)
{
    tk_lat *l = lat(TK_LAT_OUTERMOST, 10, 10, 100);
    ev(l, 0, TK_LAT_CALL, 1, 0);
    ev(l, 1, TK_LAT_CALL, 1, 1);
    ev(l, 2, TK_LAT_RETURN, 1, 2); /* never called */
    ev(l, 3, TK_LAT_RETURN, 1, 0);
    const tk_lat_counts *c = tk_lat_counts_of(l);
    TK_CHECK_EQ(c->unmatched, 2);
    TK_CHECK_EQ(c->lost, 2);
    TK_CHECK_EQ(c->measured, 0);
    TK_CHECK_EQ(tk_lat_processes(l), 0);
    tk_lat_free(l);
}

/* While a ring is blind, nothing is followed, and no return made after
 * the loss pairs with a call made before it. */
TK_TEST(lat_blind_periods)
{
    tk_lat *l = lat(TK_LAT_OUTERMOST, 10, 10, 100);
    tk_lat_rec blind3 = {0, 0, 0, 3, TK_LAT_BLIND}, sighted3 = {0, 0, 0, 3, TK_LAT_SIGHTED};
    tk_lat_rec blind5 = {0, 0, 0, 5, TK_LAT_BLIND}, sighted5 = {0, 0, 0, 5, TK_LAT_SIGHTED};
    ev(l, 0, TK_LAT_CALL, 1, 0);
    ev(l, 1, TK_LAT_CALL, 2, 0);
    ev(l, 2, TK_LAT_RETURN, 2, 0);
    tk_lat_record(l, 10, &blind3);
    tk_lat_record(l, 11, &blind5);
    tk_lat_record(l, 12, &blind3); /* (again: one period) */
    TK_CHECK(!tk_lat_seeing(l));
    ev(l, 20, TK_LAT_CALL, 1, 0);   /* an inner call of f0 ... */
    ev(l, 21, TK_LAT_RETURN, 1, 0);
    tk_lat_record(l, 30, &sighted3);
    TK_CHECK(!tk_lat_seeing(l));
    tk_lat_record(l, 31, &sighted5);
    TK_CHECK(tk_lat_seeing(l));
    ev(l, 40, TK_LAT_RETURN, 1, 0); /* ... the outer return: unmatched */
    ev(l, 50, TK_LAT_CALL, 1, 0);
    ev(l, 58, TK_LAT_RETURN, 1, 0);
    const tk_lat_counts *c = tk_lat_counts_of(l);
    TK_CHECK_EQ(c->blind_periods, 1);
    TK_CHECK_EQ(c->lost, 1);
    TK_CHECK_EQ(c->blind, 2);
    TK_CHECK_EQ(c->unmatched, 1);
    TK_CHECK_EQ(c->measured, 2);
    TK_CHECK_EQ(fn_of(l, 0)->returns.max, 8);
    /* A sighting with no blindness, and a source out of range. */
    tk_lat_rec sighted9 = {0, 0, 0, 9, TK_LAT_SIGHTED}, blind_far = {0, 0, 0, TK_LAT_SOURCES, TK_LAT_BLIND};
    tk_lat_record(l, 60, &sighted9);
    tk_lat_record(l, 61, &blind_far);
    TK_CHECK(tk_lat_seeing(l));
    TK_CHECK_EQ(tk_lat_counts_of(l)->junk, 1);
    tk_lat_free(l);
}

TK_TEST(lat_bounds_keep_stacks_exact)
{
    /* Two functions at most: a call of a third is not followed, nor are
     * the calls inside it; the outer call is measured all the same. */
    tk_lat *l = lat(TK_LAT_EACH, 2, 1, 100);
    ev(l, 0, TK_LAT_CALL, 1, 0);
    ev(l, 1, TK_LAT_CALL, 1, 1);
    ev(l, 2, TK_LAT_CALL, 1, 2);
    ev(l, 3, TK_LAT_CALL, 1, 0);
    ev(l, 4, TK_LAT_RETURN, 1, 0);
    ev(l, 5, TK_LAT_RETURN, 1, 2);
    ev(l, 6, TK_LAT_RETURN, 1, 1);
    /* One process at most: another's calls are not followed. */
    ev(l, 7, TK_LAT_CALL, 2, 0);
    ev(l, 8, TK_LAT_RETURN, 2, 0);
    ev(l, 100, TK_LAT_RETURN, 1, 0);
    const tk_lat_counts *c = tk_lat_counts_of(l);
    TK_CHECK_EQ(c->over_functions, 1);
    TK_CHECK_EQ(c->over_processes, 1);
    TK_CHECK_EQ(c->unmatched, 1);
    TK_CHECK_EQ(c->measured, 2);
    TK_CHECK_EQ(fn_of(l, 0)->returns.count, 1);
    TK_CHECK_EQ(fn_of(l, 0)->returns.max, 100);
    TK_CHECK_EQ(fn_of(l, 1)->returns.max, 5);
    TK_CHECK_EQ(tk_lat_functions(l), 2);
    tk_lat_free(l);
}

/* Idle processes keep their entry until the bound needs it: many
 * processes, one after another, with room for two. */
TK_TEST(lat_idle_processes_make_room)
{
    tk_lat *l = lat(TK_LAT_OUTERMOST, 4, 2, 100);
    for (uint64_t pid = 1; pid <= 1000; pid++) {
        ev(l, 10 * pid, TK_LAT_CALL, pid, 0);
        ev(l, 10 * pid + 3, TK_LAT_RETURN, pid, 0);
    }
    TK_CHECK_EQ(fn_of(l, 0)->returns.count, 1000);
    TK_CHECK_EQ(tk_lat_counts_of(l)->over_processes, 0);
    TK_CHECK_EQ(tk_lat_processes(l), 0);
    /* Two busy processes: a third is refused. */
    ev(l, 20000, TK_LAT_CALL, 5000, 0);
    ev(l, 20001, TK_LAT_CALL, 5001, 0);
    ev(l, 20002, TK_LAT_CALL, 5002, 0);
    TK_CHECK_EQ(tk_lat_counts_of(l)->over_processes, 1);
    TK_CHECK_EQ(tk_lat_processes(l), 2);
    tk_lat_free(l);
}

TK_TEST(lat_stamps_to_nanoseconds)
{
    tk_lat_opts o = {TK_LAT_EACH, 4, 4, 4, 2500000000u}; /* a 2.5 GHz counter */
    tk_lat *l = tk_lat_new(&o);
    ev(l, 1000, TK_LAT_CALL, 1, 0);
    ev(l, 1000 + 25000000000ull + 250, TK_LAT_RETURN, 1, 0); /* 10 s + 100 ns */
    TK_CHECK_EQ(fn_of(l, 0)->returns.max, 10000000100ull);
    tk_lat_free(l);
    tk_lat_opts bad = {TK_LAT_EACH, 0, 4, 4, 1};
    TK_CHECK(tk_lat_new(&bad) == NULL);
    /* Any clock, any duration: within a nanosecond of ticks * 1e9 / hz. */
    uint64_t hzs[] = {800000000u, 2900123457u, 3000000000u, 17000000000ull};
    for (unsigned k = 0; k < 4; k++) {
        tk_lat_opts ok = {TK_LAT_EACH, 4, 4, 4, hzs[k]};
        for (int i = 0; i < 200; i++) {
            uint64_t ticks = rnd() >> (rnd() % 40 + 14); /* up to ~ 2^50 */
            l = tk_lat_new(&ok);
            ev(l, 5, TK_LAT_CALL, 1, 0);
            ev(l, 5 + ticks, TK_LAT_RETURN, 1, 0);
            unsigned __int128 want = (unsigned __int128)ticks * 1000000000u / hzs[k];
            uint64_t got = fn_of(l, 0)->returns.max;
            if (!(got == (uint64_t)want || got == (uint64_t)want + 1))
                TK_CHECK(!"within a nanosecond");
            tk_lat_free(l);
        }
    }
}

/* ---- against a plain model: every frame kept, nothing compressed ----- */

#define NP 12
#define NF 5
#define DEPTH 64

typedef struct {
    uint64_t pid;
    int depth;
    int fn[DEPTH];
    uint64_t start[DEPTH];
    int measured[DEPTH];
} mproc;

typedef struct {
    uint64_t count[2], sum[2], min[2], max[2], unfinished;
} mfn;

static void model_end(mfn *mf, mproc *p, uint64_t stamp, int exc)
{
    p->depth--;
    if (!p->measured[p->depth])
        return;
    mfn *f = &mf[p->fn[p->depth]];
    uint64_t d = stamp - p->start[p->depth];
    if (f->count[exc] == 0 || d < f->min[exc])
        f->min[exc] = d;
    if (d > f->max[exc])
        f->max[exc] = d;
    f->count[exc]++;
    f->sum[exc] += d;
}

TK_TEST(lat_random_against_model)
{
    for (int each = 0; each <= 1; each++) {
        tk_lat *l = lat(each ? TK_LAT_EACH : TK_LAT_OUTERMOST, 100, 100, 100000);
        mproc ps[NP];
        mfn mf[NF];
        memset(ps, 0, sizeof ps);
        memset(mf, 0, sizeof mf);
        uint64_t next_pid = 1, stamp = 0;
        for (int i = 0; i < NP; i++)
            ps[i].pid = next_pid++;
        for (long k = 0; k < 300000; k++) {
            mproc *p = &ps[rnd() % NP];
            stamp += rnd() % 1000;
            unsigned what = (unsigned)(rnd() % 100);
            if (what < 1) { /* exit */
                for (int d = 0; d < p->depth; d++)
                    if (p->measured[d])
                        mf[p->fn[d]].unfinished++;
                ev(l, stamp, TK_LAT_EXIT, p->pid, 0);
                p->depth = 0;
                p->pid = next_pid++;
            } else if (p->depth < DEPTH && (p->depth == 0 || what < 52)) {
                /* A call: often of the function it is in. */
                int fn = p->depth > 0 && rnd() % 3 == 0 ? p->fn[p->depth - 1 - (int)(rnd() % p->depth)]
                                                        : (int)(rnd() % NF);
                int inside = 0;
                for (int d = 0; d < p->depth; d++)
                    inside |= p->fn[d] == fn;
                p->fn[p->depth] = fn;
                p->start[p->depth] = stamp;
                p->measured[p->depth] = each || !inside;
                p->depth++;
                ev(l, stamp, TK_LAT_CALL, p->pid, (unsigned)fn);
            } else if (p->depth > 0) {
                int exc = rnd() % 10 == 0;
                int fn = p->fn[p->depth - 1];
                model_end(mf, p, stamp, exc);
                ev(l, stamp, exc ? TK_LAT_EXCEPTION : TK_LAT_RETURN, p->pid, (unsigned)fn);
            }
        }
        tk_lat_finish(l);
        for (int i = 0; i < NP; i++)
            for (int d = 0; d < ps[i].depth; d++)
                if (ps[i].measured[d])
                    mf[ps[i].fn[d]].unfinished++;
        for (int fn = 0; fn < NF; fn++) {
            const tk_lat_fn *e = fn_of(l, (unsigned)fn);
            TK_REQUIRE(e != NULL);
            const tk_hist *h[2] = {&e->returns, &e->exceptions};
            for (int x = 0; x < 2; x++) {
                TK_CHECK_EQ(h[x]->count, mf[fn].count[x]);
                TK_CHECK_EQ(h[x]->sum_lo, mf[fn].sum[x]);
                TK_CHECK_EQ(h[x]->min, mf[fn].min[x]);
                TK_CHECK_EQ(h[x]->max, mf[fn].max[x]);
            }
            TK_CHECK_EQ(e->unfinished, mf[fn].unfinished);
        }
        const tk_lat_counts *c = tk_lat_counts_of(l);
        TK_CHECK_EQ(c->unmatched, 0);
        TK_CHECK_EQ(c->lost, 0);
        TK_CHECK_EQ(tk_lat_frames(l), 0);
        tk_lat_free(l);
    }
}

/* ---- threads: the producers' rings, the merge and the pairing ----------
 * Scheduler threads run simulated processes (each taken under its own
 * mutex, as a run queue hands a process over, so processes move between
 * threads all the time); a process calls and returns from a few
 * functions (recursion, exceptions, exits), each event admitted and
 * written as the tracer's callbacks do. A consumer thread merges the
 * rings and pairs the records. Every duration measured must be one of a
 * call and its own end, both written (never a wrong pair, whatever was
 * dropped); with rings that never fill, every pair written is measured
 * (each level: TK_LAT_EACH). */

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "tk_clock.h"
#include "tk_merge.h"

#define T_SCHEDS 3
#define T_PROCS 24
#define T_DEPTH 12
#define NO_STAMP UINT64_MAX

typedef struct {
    pthread_mutex_t lock;
    uint64_t pid;
    int depth;
    unsigned fn[T_DEPTH];
    uint64_t start[T_DEPTH]; /* NO_STAMP: the call's record was dropped */
    long events;
} tproc;

typedef struct {
    uint64_t pid, start, end;
} tpair;

typedef struct {
    tpair *p;
    size_t n, cap;
} tpairs;

static void pairs_add(tpairs *v, uint64_t pid, uint64_t start, uint64_t end)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 1024;
        v->p = realloc(v->p, v->cap * sizeof *v->p);
    }
    v->p[v->n++] = (tpair){pid, start, end};
}

static int pair_cmp(const void *a, const void *b)
{
    const tpair *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static tproc tprocs[T_PROCS];
static _Atomic(tk_ring *) trings[T_SCHEDS];
static tpairs written[T_SCHEDS]; /* per producer thread */
static atomic_long t_left;
static atomic_uint_fast64_t t_next_pid;
static atomic_int t_producing;

/* An event of process p on the ring of thread s: its stamp, or NO_STAMP
 * when the ring refused it. */
static uint64_t t_event(tk_ring *r, unsigned s, uint8_t *blind, tproc *p, uint32_t kind,
                        unsigned fn)
{
    if (!tk_lat_admit(r, s, blind))
        return NO_STAMP;
    uint64_t st = tk_clock_stamp_fenced();
    if (st < r->last_stamp) /* as tk_ring_push keeps it */
        st = r->last_stamp;
    tk_lat_rec rec = {p->pid, 0x100, 0x200 + 0x40 * (uint64_t)fn, 1, kind};
    return tk_lat_push(r, s, blind, st, &rec) == 0 ? st : NO_STAMP;
}

static void *t_scheduler(void *arg)
{
    unsigned s = (unsigned)(uintptr_t)arg;
    tk_ring *r = atomic_load(&trings[s]);
    uint8_t blind = 0;
    uint64_t x = 0x1234567ull * (s + 1);
    while (atomic_load(&t_left) > 0) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        tproc *p = &tprocs[x % T_PROCS];
        if (pthread_mutex_trylock(&p->lock) != 0)
            continue;
        for (int k = 0; k < 1 + (int)(x % 5); k++) {
            unsigned what = (unsigned)((x >> 20) + (unsigned)k * 37) % 100;
            if (what < 2) {
                (void)t_event(r, s, &blind, p, TK_LAT_EXIT, 0);
                p->depth = 0;
                p->pid = atomic_fetch_add(&t_next_pid, 1);
            } else if (p->depth < T_DEPTH && (p->depth == 0 || what < 52)) {
                unsigned fn = (unsigned)((x >> 30) + (unsigned)k) % 4;
                p->fn[p->depth] = fn;
                p->start[p->depth] = t_event(r, s, &blind, p, TK_LAT_CALL, fn);
                p->depth++;
            } else if (p->depth > 0) {
                p->depth--;
                uint32_t kind = what % 7 == 0 ? TK_LAT_EXCEPTION : TK_LAT_RETURN;
                uint64_t end = t_event(r, s, &blind, p, kind, p->fn[p->depth]);
                if (end != NO_STAMP && p->start[p->depth] != NO_STAMP)
                    pairs_add(&written[s], p->pid, p->start[p->depth], end);
            }
            p->events++;
            atomic_fetch_sub(&t_left, 1);
        }
        pthread_mutex_unlock(&p->lock);
        /* A blind ring waits a little for the consumer, as a busy VM
         * does between events: blind periods begin and end many times. */
        if (blind)
            sched_yield();
    }
    return NULL;
}

static tpairs measured;

static void t_done(void *ctx, uint64_t pid, unsigned fn, uint64_t start, uint64_t end, int exc)
{
    (void)ctx;
    (void)fn;
    (void)exc;
    pairs_add(&measured, pid, start, end);
}

static void t_consume(tk_merge *m, tk_lat *l)
{
    const void *p;
    size_t len;
    uint64_t st;
    (void)tk_merge_collect(m, trings, 0);
    while (tk_merge_next(m, &p, &len, &st)) {
        tk_lat_rec rec;
        memcpy(&rec, p, sizeof rec);
        tk_lat_record(l, st, &rec);
    }
}

static void *t_consumer(void *arg)
{
    tk_lat *l = arg;
    tk_merge m;
    if (tk_merge_init(&m, T_SCHEDS) != 0)
        return NULL;
    while (atomic_load(&t_producing))
        t_consume(&m, l);
    t_consume(&m, l);
    t_consume(&m, l);
    tk_merge_destroy(&m);
    return NULL;
}

static void t_run(tk_lat_recursion rec, size_t ring_size, long events, uint64_t *dropped)
{
    tk_clock_init();
    tk_lat_opts o = {rec, 100, 1000, 100000, 1000000000u};
    tk_lat *l = tk_lat_new(&o);
    TK_REQUIRE(l != NULL);
    tk_lat_on_done(l, t_done, NULL);
    memset(&measured, 0, sizeof measured);
    for (int i = 0; i < T_PROCS; i++) {
        pthread_mutex_init(&tprocs[i].lock, NULL);
        tprocs[i].pid = (uint64_t)i + 1;
        tprocs[i].depth = 0;
    }
    atomic_store(&t_next_pid, T_PROCS + 1);
    for (int s = 0; s < T_SCHEDS; s++) {
        tk_ring *r = malloc(sizeof *r);
        TK_REQUIRE(r != NULL && tk_ring_init(r, ring_size, TK_RING_DROP) == 0);
        atomic_store(&trings[s], r);
        memset(&written[s], 0, sizeof written[s]);
    }
    atomic_store(&t_left, events);
    atomic_store(&t_producing, 1);
    pthread_t cons, th[T_SCHEDS];
    pthread_create(&cons, NULL, t_consumer, l);
    for (int s = 0; s < T_SCHEDS; s++)
        pthread_create(&th[s], NULL, t_scheduler, (void *)(uintptr_t)s);
    for (int s = 0; s < T_SCHEDS; s++)
        pthread_join(th[s], NULL);
    atomic_store(&t_producing, 0);
    pthread_join(cons, NULL);
    tk_lat_finish(l);

    tpairs all = {0};
    *dropped = 0;
    for (int s = 0; s < T_SCHEDS; s++) {
        tk_ring *r = atomic_load(&trings[s]);
        *dropped += tk_stat_read(&r->dropped);
        for (size_t i = 0; i < written[s].n; i++)
            pairs_add(&all, written[s].p[i].pid, written[s].p[i].start, written[s].p[i].end);
        free(written[s].p);
        tk_ring_destroy(r);
        free(r);
    }
    qsort(all.p, all.n, sizeof *all.p, pair_cmp);
    long wrong = 0;
    for (size_t i = 0; i < measured.n; i++)
        if (bsearch(&measured.p[i], all.p, all.n, sizeof *all.p, pair_cmp) == NULL && wrong++ < 3)
            printf("    measured a pair never written: pid %lu, %lu .. %lu\n",
                   (unsigned long)measured.p[i].pid, (unsigned long)measured.p[i].start,
                   (unsigned long)measured.p[i].end);
    TK_CHECK_EQ(wrong, 0);
    TK_CHECK(measured.n > 0);
    TK_CHECK_EQ(tk_lat_counts_of(l)->measured, measured.n);
    if (*dropped == 0 && rec == TK_LAT_EACH)
        TK_CHECK_EQ(measured.n, all.n);
    if (*dropped > 0)
        TK_CHECK(tk_lat_counts_of(l)->blind_periods > 0);
    printf("    %s, rings of %zu bytes: %zu pairs written, %zu measured, %lu events dropped, "
           "%lu blind periods\n", rec == TK_LAT_EACH ? "each" : "outermost", ring_size, all.n,
           measured.n, (unsigned long)*dropped,
           (unsigned long)tk_lat_counts_of(l)->blind_periods);
    free(all.p);
    free(measured.p);
    for (int i = 0; i < T_PROCS; i++)
        pthread_mutex_destroy(&tprocs[i].lock);
    tk_lat_free(l);
}

TK_TEST_THREADED(lat_threads_pair_exactly)
{
    uint64_t dropped;
    t_run(TK_LAT_EACH, 64u << 20, tk_test_iters(200000, 10), &dropped);
    TK_CHECK_EQ(dropped, 0);
    t_run(TK_LAT_OUTERMOST, 64u << 20, tk_test_iters(200000, 10), &dropped);
}

TK_TEST_THREADED(lat_threads_never_pair_wrongly_when_rings_drop)
{
    uint64_t dropped;
    t_run(TK_LAT_EACH, 4096, tk_test_iters(300000, 10), &dropped);
    TK_CHECK(dropped > 0);
    t_run(TK_LAT_OUTERMOST, 4096, tk_test_iters(300000, 10), &dropped);
    TK_CHECK(dropped > 0);
}

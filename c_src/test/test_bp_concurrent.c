/* The breakpoint model under concurrency: reader threads "execute"
 * instrumented functions (read the active generation, count when the flags
 * say so) while writer threads apply random trace patterns through the
 * whole change sequence.
 *
 * Invariants:
 *  - no reader sees a mix of generations: every call observes, for all
 *    sessions and both sites of the function at once, exactly the state
 *    some change published, and one that was current during the call
 *    (between the last change finished before the call and the last one
 *    begun after it);
 *  - no reader meets an inconsistency (the breakpoint instruction without
 *    breakpoints, flags out of range, a counting flag without its
 *    counter);
 *  - nothing is freed while read (AddressSanitizer: the patterns free
 *    breakpoints, counters and meta tracers all the time);
 *  - no data race (ThreadSanitizer);
 *  - after each change the model equals a twin model that got the same
 *    changes with no readers at all;
 *  - counts are exact once quiet: with no writer, every call of a function
 *    whose counter is active adds exactly one.
 *
 * One call in eight dawdles inside its read section (spins or yields
 * between its loads), which widens the windows the grace periods must
 * cover: without the wait before uninstall, before consolidation or before
 * free, this test fails (and AddressSanitizer/ThreadSanitizer report the
 * last one).
 */
#include "tk_bp.h"
#include "tk_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NF 6 /* functions; the last one is not exported */
#define NS 3 /* sessions */
#define NR 4 /* readers */
#define NW 2 /* writers */
#define QUIET_CALLS 1000

typedef struct {
    uint32_t flags, local_ms, meta_ms, tracer;
} obs;

/* What one function looks like in a generation: per session and site. */
typedef struct {
    obs o[NS][2];
} fstate;

static struct {
    tk_bp model, twin;
    long nchanges;        /* changes to make */
    fstate *hist;         /* [nchanges + 1][NF]: state after change k */
    pthread_mutex_t lock; /* writers: twin, history, model, in one order */
    long made;            /* changes made, under lock */
    _Atomic long started; /* last change whose history is written */
    _Atomic long done;    /* last change finished on the model */
    atomic_int stop;
    atomic_long reads, matched_late;
} cc;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The active state of a model, as readers should see it. */
static void snapshot(tk_bp *m, fstate out[NF])
{
    memset(out, 0, NF * sizeof *out);
    unsigned ix = tk_bp_active(m);
    for (unsigned f = 0; f < NF; f++)
        for (unsigned s = 0; s < NS; s++)
            for (unsigned k = 0; k < 2; k++) {
                tk_bp_data d;
                if (!tk_bp_data_of(m, s, f, k, ix, &d) || d.flags == 0)
                    continue;
                obs *o = &out[f].o[s][k];
                o->flags = d.flags;
                o->local_ms = d.local_ms;
                o->meta_ms = d.meta_ms;
                o->tracer = (d.flags & TK_BP_META_TRACE) ? d.meta->tracer : 0;
            }
}

static const tk_bp_ctx all = {.call_traced = ~(uint64_t)0, .remote = 1, .cost = 1};

/* A slow reader now and then: spins or yields inside its section. */
static void dawdle(void *arg)
{
    uint64_t *seed = arg;
    uint64_t r = rnd(seed);
    if (r % 16 == 0)
        sched_yield();
    else
        for (volatile unsigned i = 0; i < (unsigned)(r % 512); i++)
            ;
}

static void *reader(void *arg)
{
    unsigned slot = (unsigned)(uintptr_t)arg;
    uint64_t seed = 0x9e3779b97f4a7c15u ^ (slot * 0x1234567u + 1);
    uint64_t dseed = seed ^ 0x5555;
    tk_bp_ctx slow = all;
    slow.dawdle = dawdle;
    slow.dawdle_arg = &dseed;
    tk_bp_hit hits[2 * NS + 2];
    long n = 0, late = 0;
    while (!atomic_load_explicit(&cc.stop, memory_order_relaxed)) {
        unsigned f = (unsigned)(rnd(&seed) % NF);
        const tk_bp_ctx *ctx = rnd(&seed) % 8 == 0 ? &slow : &all;
        long c0 = atomic_load_explicit(&cc.done, memory_order_acquire);
        int nh = tk_bp_call(&cc.model, slot, f, ctx, hits, 2 * NS + 2);
        long c1 = atomic_load_explicit(&cc.started, memory_order_acquire);
        TK_CHECK(nh >= 0 && nh <= 2 * NS);
        fstate seen;
        memset(&seen, 0, sizeof seen);
        for (int i = 0; i < nh && i < 2 * NS; i++) {
            if (hits[i].flags == 0)
                continue; /* staged or being removed: disabled */
            TK_CHECK(hits[i].session < NS);
            obs *o = &seen.o[hits[i].session % NS][hits[i].site & 1];
            o->flags = hits[i].flags;
            o->local_ms = hits[i].local_ms;
            o->meta_ms = hits[i].meta_ms;
            o->tracer = hits[i].meta_tracer;
        }
        long j;
        for (j = c0; j <= c1; j++)
            if (memcmp(&seen, &cc.hist[j * NF + f], sizeof seen) == 0)
                break;
        if (j > c1)
            tk_test_fail(__FILE__, __LINE__,
                         "f%u: state matches no change in [%ld, %ld]", f, c0,
                         c1);
        else if (j > c0)
            late++;
        if ((++n & 255) == 0)
            sched_yield(); /* outside a section, as real readers are */
    }
    atomic_fetch_add(&cc.reads, n);
    atomic_fetch_add(&cc.matched_late, late);
    return NULL;
}

typedef struct {
    unsigned session, funcs;
    tk_bp_op op;
    uint32_t cats, ms, meta_ms, tracer;
} change;

static change random_change(uint64_t *seed)
{
    static const uint32_t catbits[] = {TK_BP_LOCAL_TRACE, TK_BP_META_TRACE,
                                       TK_BP_COUNT, TK_BP_TIME_TRACE,
                                       TK_BP_MEM_TRACE};
    static const tk_bp_op ops[] = {TK_BP_OFF,     TK_BP_ON,    TK_BP_ON,
                                   TK_BP_RESTART, TK_BP_PAUSE, TK_BP_OFF};
    change c;
    c.session = (unsigned)(rnd(seed) % NS);
    c.funcs = (unsigned)(rnd(seed) % ((1u << NF) - 1)) + 1;
    c.op = ops[rnd(seed) % 6];
    c.cats = 0;
    if (rnd(seed) % 6 != 0) /* else global */
        while (c.cats == 0)
            for (int i = 0; i < 5; i++)
                if (rnd(seed) % 3 == 0)
                    c.cats |= catbits[i];
    c.ms = (uint32_t)(rnd(seed) % 4);
    c.meta_ms = (uint32_t)(rnd(seed) % 4);
    c.tracer = (uint32_t)(rnd(seed) % 3) + 1;
    return c;
}

static void apply(tk_bp *m, const change *c)
{
    tk_bp_begin(m, c->session);
    for (unsigned f = 0; f < NF; f++)
        if (c->funcs & (1u << f))
            TK_CHECK(tk_bp_stage_pattern(m, f, c->op, c->cats, c->ms,
                                         c->meta_ms, c->tracer) >= 0);
    tk_bp_finish(m);
}

static void *writer(void *arg)
{
    uint64_t seed = 0xd1b54a32d192ed03u + (uintptr_t)arg;
    for (;;) {
        change c = random_change(&seed);
        pthread_mutex_lock(&cc.lock);
        if (cc.made == cc.nchanges) {
            pthread_mutex_unlock(&cc.lock);
            break;
        }
        long k = cc.made + 1;
        /* What change k publishes, from the reader-less twin. */
        apply(&cc.twin, &c);
        snapshot(&cc.twin, &cc.hist[k * NF]);
        atomic_store_explicit(&cc.started, k, memory_order_release);
        apply(&cc.model, &c);
        fstate now[NF];
        snapshot(&cc.model, now);
        TK_CHECK(memcmp(now, &cc.hist[k * NF], sizeof now) == 0);
        atomic_store_explicit(&cc.done, k, memory_order_release);
        cc.made = k;
        pthread_mutex_unlock(&cc.lock);
    }
    return NULL;
}

/* Quiet: every reader calls every function QUIET_CALLS times. */
static void *quiet_reader(void *arg)
{
    unsigned slot = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < QUIET_CALLS; i++)
        for (unsigned f = 0; f < NF; f++)
            TK_CHECK(tk_bp_call(&cc.model, slot, f, &all, NULL, 0) >= 0);
    return NULL;
}

static const unsigned reader_slots[NR] = {0, 1, 2, TK_PUB_SHARED};

static void quiet_counts_exact(void)
{
    fstate *last = &cc.hist[cc.made * NF];
    uint64_t before[NF][NS][3], after[NF][NS][3];
    for (int pass = 0; pass < 2; pass++) {
        uint64_t(*v)[NS][3] = pass ? after : before;
        for (unsigned f = 0; f < NF; f++)
            for (unsigned s = 0; s < NS; s++) {
                uint64_t n = 0, calls = 0, sum = 0;
                v[f][s][0] = tk_bp_count_of(&cc.model, s, f, &n) ? n : 0;
                v[f][s][1] = tk_bp_acc_of(&cc.model, s, f, TK_BP_TIME_TRACE,
                                          &calls, &sum)
                                 ? calls
                                 : 0;
                v[f][s][2] = tk_bp_acc_of(&cc.model, s, f, TK_BP_MEM_TRACE,
                                          &calls, &sum)
                                 ? sum
                                 : 0;
            }
        if (pass == 0) {
            pthread_t r[NR];
            for (int i = 0; i < NR; i++)
                pthread_create(&r[i], NULL, quiet_reader,
                               (void *)(uintptr_t)reader_slots[i]);
            for (int i = 0; i < NR; i++)
                pthread_join(r[i], NULL);
        }
    }
    const uint64_t n = (uint64_t)NR * QUIET_CALLS;
    for (unsigned f = 0; f < NF; f++)
        for (unsigned s = 0; s < NS; s++) {
            uint32_t fl = last[f].o[s][TK_BP_SITE_CODE].flags;
            TK_CHECK_EQ(after[f][s][0] - before[f][s][0],
                        (fl & TK_BP_COUNT_ACTIVE) ? n : 0);
            TK_CHECK_EQ(after[f][s][1] - before[f][s][1],
                        (fl & TK_BP_TIME_TRACE_ACTIVE) ? n : 0);
            TK_CHECK_EQ(after[f][s][2] - before[f][s][2],
                        (fl & TK_BP_MEM_TRACE_ACTIVE) ? n : 0);
        }
}

TK_TEST_THREADED(bp_concurrent_patterns)
{
    cc.nchanges = tk_test_iters(800, 20);
    cc.hist = calloc((size_t)(cc.nchanges + 1) * NF, sizeof(fstate));
    TK_REQUIRE(cc.hist != NULL);
    TK_REQUIRE(tk_bp_init(&cc.model, NF, TK_PUB_AUTO) == 0);
    TK_REQUIRE(tk_bp_init(&cc.twin, NF, TK_PUB_FENCE) == 0);
    tk_bp_set_exported(&cc.model, NF - 1, 0);
    tk_bp_set_exported(&cc.twin, NF - 1, 0);
    pthread_mutex_init(&cc.lock, NULL);
    cc.made = 0;
    atomic_store(&cc.started, 0);
    atomic_store(&cc.done, 0);
    atomic_store(&cc.stop, 0);
    atomic_store(&cc.reads, 0);
    atomic_store(&cc.matched_late, 0);

    pthread_t r[NR], w[NW];
    for (int i = 0; i < NR; i++)
        pthread_create(&r[i], NULL, reader, (void *)(uintptr_t)reader_slots[i]);
    for (int i = 0; i < NW; i++)
        pthread_create(&w[i], NULL, writer, (void *)(uintptr_t)i);
    for (int i = 0; i < NW; i++)
        pthread_join(w[i], NULL);
    atomic_store(&cc.stop, 1);
    for (int i = 0; i < NR; i++)
        pthread_join(r[i], NULL);

    TK_CHECK_EQ(cc.made, cc.nchanges);
    TK_CHECK_EQ(cc.model.changes, (uint64_t)cc.nchanges);
    TK_CHECK_EQ(cc.model.waits, 5 * (uint64_t)cc.nchanges);
    TK_CHECK(atomic_load(&cc.reads) > 0);
    quiet_counts_exact();
    printf("    %ld changes, %ld calls (%ld saw a change made during them)\n",
           cc.made, atomic_load(&cc.reads), atomic_load(&cc.matched_late));

    tk_bp_destroy(&cc.model);
    tk_bp_destroy(&cc.twin);
    pthread_mutex_destroy(&cc.lock);
    free(cc.hist);
}

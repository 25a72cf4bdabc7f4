#include "tk_merge.h"
#include "ring_pop.h"
#include "tk_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tk_clock.h"

static _Atomic(tk_ring *) rings[8];

static void rings_init(unsigned n, size_t size, tk_ring_policy p)
{
    for (unsigned i = 0; i < 8; i++) {
        tk_ring *r = NULL;
        if (i < n) {
            r = malloc(sizeof *r);
            if (r == NULL || tk_ring_init(r, size, p) != 0)
                abort();
        }
        atomic_store(&rings[i], r);
    }
}

static void rings_free(void)
{
    for (unsigned i = 0; i < 8; i++) {
        tk_ring *r = atomic_load(&rings[i]);
        if (r != NULL) {
            tk_ring_destroy(r);
            free(r);
        }
        atomic_store(&rings[i], NULL);
    }
}

TK_TEST(merge_orders_by_stamp_and_keeps_ring_order)
{
    tk_merge m;
    rings_init(3, 4096, TK_RING_DROP);
    TK_REQUIRE(tk_merge_init(&m, 8) == 0);
    uint64_t stamps[3][4] = {{1, 4, 7, 10}, {2, 5, 8, 11}, {3, 6, 9, 12}};
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 4; i++)
            ring_push(atomic_load(&rings[r]), stamps[r][i], &stamps[r][i],
                         8);
    TK_REQUIRE(tk_merge_collect(&m, rings, 0) == 0);
    TK_CHECK_EQ(tk_merge_staged(&m), 12);
    const void *p;
    size_t len;
    uint64_t st;
    for (uint64_t want = 1; want <= 12; want++) {
        TK_REQUIRE(tk_merge_next(&m, &p, &len, &st));
        uint64_t v;
        memcpy(&v, p, 8);
        TK_CHECK_EQ(st, want);
        TK_CHECK_EQ(v, want);
    }
    TK_CHECK_EQ(tk_merge_next(&m, &p, &len, &st), 0);
    tk_merge_destroy(&m);
    rings_free();
}

TK_TEST(merge_limit_per_ring_still_progresses)
{
    tk_merge m;
    rings_init(2, 65536, TK_RING_DROP);
    TK_REQUIRE(tk_merge_init(&m, 8) == 0);
    for (uint64_t s = 1; s <= 200; s++)
        ring_push(atomic_load(&rings[s % 2]), s, &s, 8);
    uint64_t want = 1;
    const void *p;
    size_t len;
    uint64_t st;
    for (int round = 0; round < 100 && want <= 200; round++) {
        TK_REQUIRE(tk_merge_collect(&m, rings, 10) == 0);
        TK_CHECK(tk_merge_staged(&m) <= 20);
        while (tk_merge_next(&m, &p, &len, &st)) {
            TK_CHECK_EQ(st, want);
            want++;
        }
    }
    TK_CHECK_EQ(want, 201);
    tk_merge_destroy(&m);
    rings_free();
}

/* ---- tracees moving between producer threads ---------------------------
 * TRACEES tokens are shared by PRODUCERS threads. A thread takes a free
 * token (compare-and-swap, acquire), pushes a record {token, seq} into its
 * own ring, and frees the token (release): the next holder may be another
 * thread, the same shape as a process migrating between schedulers. The
 * consumer must see each token's records in seq order with nothing lost
 * (drop mode, and a producer whose ring is full retries).
 *
 * The stamp follows the acquire within a few instructions: the fenced
 * stamp. (A plain RDTSC fails this test: it can be read before the
 * compare-and-swap completes; see migrate_like_the_vm below for the path
 * the VM runs.) */
#define PRODUCERS 4
#define TRACEES 16

static atomic_int holder[TRACEES]; /* 0 free, else producer + 1 */
static long next_seq[TRACEES];     /* guarded by holding the token */
static long per_tracee;
static atomic_int tracees_done;

static void *mig_producer(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    tk_ring *r = atomic_load(&rings[me]);
    unsigned long rnd = me * 7919u + 1;
    while (atomic_load(&tracees_done) < TRACEES) {
        rnd = rnd * 6364136223846793005ul + 1442695040888963407ul;
        unsigned tok = (unsigned)(rnd >> 33) % TRACEES;
        int free_ = 0;
        if (!atomic_compare_exchange_strong_explicit(
                &holder[tok], &free_, (int)me + 1, memory_order_acquire,
                memory_order_relaxed))
            continue;
        long seq = next_seq[tok];
        if (seq < per_tracee) {
            uint64_t rec[2] = {(uint64_t)tok, (uint64_t)seq};
            while (ring_push(r, tk_clock_stamp_fenced(), rec, sizeof rec) != 0)
                ; /* full: wait for the consumer */
            next_seq[tok] = seq + 1;
            if (seq + 1 == per_tracee)
                atomic_fetch_add(&tracees_done, 1);
        }
        atomic_store_explicit(&holder[tok], 0, memory_order_release);
    }
    return NULL;
}

TK_TEST_THREADED(merge_keeps_migrating_tracees_in_order)
{
    tk_clock_init();
    rings_init(PRODUCERS, 16384, TK_RING_DROP);
    static tk_merge m;
    TK_REQUIRE(tk_merge_init(&m, 8) == 0);
    per_tracee = tk_test_iters(3000, 20);
    atomic_store(&tracees_done, 0);
    for (int t = 0; t < TRACEES; t++) {
        atomic_store(&holder[t], 0);
        next_seq[t] = 0;
    }
    pthread_t th[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++)
        pthread_create(&th[i], NULL, mig_producer, (void *)(uintptr_t)i);
    long seen[TRACEES];
    for (int t = 0; t < TRACEES; t++)
        seen[t] = 0;
    long total = 0, bad = 0;
    uint64_t last_stamp = 0;
    const void *p;
    size_t len;
    uint64_t st;
    while (total < (long)TRACEES * per_tracee) {
        TK_REQUIRE(tk_merge_collect(&m, rings, 0) == 0);
        while (tk_merge_next(&m, &p, &len, &st)) {
            uint64_t rec[2];
            memcpy(rec, p, sizeof rec);
            if (rec[0] >= TRACEES || (long)rec[1] != seen[rec[0]]) {
                if (bad++ < 5)
                    printf("    tok %lu seq %lu expected %ld stamp %lu last %lu\n",
                           (unsigned long)rec[0], (unsigned long)rec[1],
                           rec[0] < TRACEES ? seen[rec[0]] : -1L,
                           (unsigned long)st, (unsigned long)last_stamp);
                if (rec[0] < TRACEES)
                    seen[rec[0]] = (long)rec[1] + 1;
            } else
                seen[rec[0]]++;
            last_stamp = st;
            total++;
        }
    }
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(th[i], NULL);
    TK_CHECK_EQ(bad, 0);
    for (int t = 0; t < TRACEES; t++)
        TK_CHECK_EQ(seen[t], per_tracee);
    TK_REQUIRE(tk_merge_collect(&m, rings, 0) == 0);
    TK_CHECK_EQ(tk_merge_next(&m, &p, &len, &st), 0);
    tk_merge_destroy(&m);
    rings_free();
}

/* ---- processes migrating the way the VM migrates them -----------------
 * VM_SCHEDS scheduler threads, each with a run queue under a mutex (as
 * ERTS's run queues are). A scheduler takes a process from its own queue
 * or steals one from another's, runs it for a few events, and puts it on
 * a random run queue, usually another scheduler's: every process migrates
 * all the time. An event goes the way it goes in the VM: after the
 * process was taken from a run queue (the acquire of the hand-off), the
 * tracer's enabled callback decides (here: the ring has room), the event
 * is built (a record with the process, its sequence number and some
 * words of term, made by a chain of dependent steps shorter than the
 * VM's path), and only then the trace callback takes the stamp: the
 * default one, tk_clock_stamp, which without TRACEKIT_CLOCK=fenced is a
 * plain RDTSC. The consumer checks every process's order and count. */
#define VM_SCHEDS 4
#define VM_PROCS 64
#define VM_SLICE 4 /* events per time slice */

typedef struct {
    pthread_mutex_t lock;
    int q[VM_PROCS]; /* a FIFO of process numbers */
    unsigned head, n;
} vm_runq;

static vm_runq runqs[VM_SCHEDS];
static long vm_seq[VM_PROCS]; /* owned by whoever runs the process */
static long vm_per_proc;
static atomic_long vm_left; /* events still to be produced */

static void runq_put(vm_runq *q, int p)
{
    pthread_mutex_lock(&q->lock);
    q->q[(q->head + q->n++) % VM_PROCS] = p;
    pthread_mutex_unlock(&q->lock);
}

static int runq_take(vm_runq *q)
{
    int p = -1;
    pthread_mutex_lock(&q->lock);
    if (q->n > 0) {
        p = q->q[q->head];
        q->head = (q->head + 1) % VM_PROCS;
        q->n--;
    }
    pthread_mutex_unlock(&q->lock);
    return p;
}

static void *vm_scheduler(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    tk_ring *r = atomic_load(&rings[me]);
    unsigned long rnd = me * 104729u + 17;
    while (atomic_load_explicit(&vm_left, memory_order_relaxed) > 0) {
        int p = runq_take(&runqs[me]);
        for (unsigned k = 1; p < 0 && k < VM_SCHEDS; k++) /* steal */
            p = runq_take(&runqs[(me + k) % VM_SCHEDS]);
        if (p < 0)
            continue;
        for (int e = 0; e < VM_SLICE && vm_seq[p] < vm_per_proc; e++) {
            uint64_t rec[6] = {(uint64_t)p, (uint64_t)vm_seq[p]};
            /* enabled_*: room in the ring (a full ring: wait for the
             * consumer, nothing may be lost here) */
            while (!tk_ring_fits(r, sizeof rec))
                ;
            /* the event's term. Before the trace callback the VM has run
             * the process to the traced operation, called enabled_* and
             * built the term: at least 42 TSC ticks from enabled_*'s entry
             * alone (README, "The ordering stamp"). Here, less: 96
             * dependent steps on the process's own data, the length past
             * which a stamp was never seen to come before the hand-off. */
            uint64_t x = rec[1];
            for (uint64_t k = 0; k < 96; k++)
                x = x * 0x9e3779b97f4a7c15u + k;
            for (int w = 2; w < 6; w++)
                rec[w] = x + (uint64_t)w;
            /* trace_*: the stamp first */
            if (ring_push(r, tk_clock_stamp(), rec, sizeof rec) != 0)
                abort(); /* it fitted a moment ago */
            vm_seq[p]++;
            atomic_fetch_sub_explicit(&vm_left, 1, memory_order_relaxed);
        }
        rnd = rnd * 6364136223846793005ul + 1442695040888963407ul;
        runq_put(&runqs[(rnd >> 33) % VM_SCHEDS], p);
    }
    return NULL;
}

TK_TEST_THREADED(merge_keeps_order_of_processes_migrating_like_the_vm)
{
    tk_clock_init();
    rings_init(VM_SCHEDS, 65536, TK_RING_DROP);
    static tk_merge m;
    TK_REQUIRE(tk_merge_init(&m, 8) == 0);
    vm_per_proc = tk_test_iters(2000, 20);
    atomic_store(&vm_left, (long)VM_PROCS * vm_per_proc);
    for (int i = 0; i < VM_SCHEDS; i++) {
        pthread_mutex_init(&runqs[i].lock, NULL);
        runqs[i].head = runqs[i].n = 0;
    }
    for (int p = 0; p < VM_PROCS; p++) {
        vm_seq[p] = 0;
        runq_put(&runqs[p % VM_SCHEDS], p);
    }
    pthread_t th[VM_SCHEDS];
    for (int i = 0; i < VM_SCHEDS; i++)
        pthread_create(&th[i], NULL, vm_scheduler, (void *)(uintptr_t)i);
    long seen[VM_PROCS] = {0}, total = 0, bad = 0;
    const void *p;
    size_t len;
    uint64_t st;
    while (total < (long)VM_PROCS * vm_per_proc) {
        TK_REQUIRE(tk_merge_collect(&m, rings, 0) == 0);
        while (tk_merge_next(&m, &p, &len, &st)) {
            uint64_t rec[2];
            memcpy(rec, p, sizeof rec);
            if (rec[0] >= VM_PROCS || (long)rec[1] != seen[rec[0]]) {
                if (bad++ < 5)
                    printf("    process %lu seq %lu expected %ld\n",
                           (unsigned long)rec[0], (unsigned long)rec[1],
                           rec[0] < VM_PROCS ? seen[rec[0]] : -1L);
                if (rec[0] < VM_PROCS)
                    seen[rec[0]] = (long)rec[1] + 1;
            } else
                seen[rec[0]]++;
            total++;
        }
    }
    for (int i = 0; i < VM_SCHEDS; i++)
        pthread_join(th[i], NULL);
    TK_CHECK_EQ(bad, 0);
    for (int i = 0; i < VM_PROCS; i++)
        TK_CHECK_EQ(seen[i], vm_per_proc);
    for (int i = 0; i < VM_SCHEDS; i++)
        pthread_mutex_destroy(&runqs[i].lock);
    tk_merge_destroy(&m);
    rings_free();
}

/* Hands out [stamps] in order, then nothing. */
static void expect_out(tk_merge *m, const uint64_t *want, size_t n)
{
    const void *p;
    size_t len;
    uint64_t st;
    for (size_t i = 0; i < n; i++) {
        TK_REQUIRE(tk_merge_next(m, &p, &len, &st));
        TK_CHECK_EQ(st, want[i]);
    }
    TK_CHECK_EQ(tk_merge_next(m, &p, &len, &st), 0);
}

/* A collect that leaves records in a ring (a per-ring limit) hands out
 * everything up to and including the newest stamp staged from that ring,
 * and nothing beyond, though other rings have staged more. */
TK_TEST(merge_hand_out_bound_after_a_cut)
{
    tk_merge m;
    rings_init(2, 4096, TK_RING_DROP);
    TK_REQUIRE(tk_merge_init(&m, 8) == 0);
    for (uint64_t s = 1; s <= 10; s++)
        ring_push(atomic_load(&rings[0]), s, &s, 8);
    /* Ring 1: the newest staged stamp of ring 0, then the bound itself. */
    for (uint64_t s = 3; s <= 5; s++)
        ring_push(atomic_load(&rings[1]), s, &s, 8);
    TK_REQUIRE(tk_merge_collect(&m, rings, 3) == 0);
    uint64_t first[] = {1, 2, 3, 3}; /* ring 0: 1..3 staged, 4.. left */
    expect_out(&m, first, 4);
    TK_REQUIRE(tk_merge_collect(&m, rings, 0) == 0);
    uint64_t rest[] = {4, 4, 5, 5, 6, 7, 8, 9, 10};
    expect_out(&m, rest, 9);
    tk_merge_destroy(&m);
    rings_free();
}

/* Records published between the two passes of a collect ("late": at or
 * after H1) bound what goes out by the smallest stamp among them; one
 * published exactly at H1 is late too. */
TK_TEST(merge_late_record_boundary)
{
    tk_merge m;
    rings_init(2, 4096, TK_RING_DROP);
    TK_REQUIRE(tk_merge_init(&m, 8) == 0);
    uint64_t v = 10;
    ring_push(atomic_load(&rings[0]), v, &v, 8);
    tk_merge_heads(&m, rings);
    v = 12; /* at exactly H1 of ring 0 */
    ring_push(atomic_load(&rings[0]), v, &v, 8);
    v = 30; /* at exactly H1 (0) of ring 1 */
    ring_push(atomic_load(&rings[1]), v, &v, 8);
    TK_REQUIRE(tk_merge_take(&m, rings, 0) == 0);
    TK_CHECK_EQ(tk_merge_staged(&m), 3);
    uint64_t first[] = {10};
    expect_out(&m, first, 1);
    /* The next collect sees them before its H1: all go out. */
    TK_REQUIRE(tk_merge_collect(&m, rings, 0) == 0);
    uint64_t rest[] = {12, 30};
    expect_out(&m, rest, 2);
    tk_merge_destroy(&m);
    rings_free();
}

/* A record larger than a take batch is staged whole and handed out, and
 * the ring goes on draining after it. */
TK_TEST(merge_takes_records_larger_than_a_batch)
{
    tk_merge m;
    rings_init(1, 1u << 20, TK_RING_DROP);
    TK_REQUIRE(tk_merge_init(&m, 8) == 0);
    tk_ring *r = atomic_load(&rings[0]);
    size_t big = tk_ring_max_payload(r); /* a quarter of the ring */
    unsigned char *in = malloc(big);
    TK_REQUIRE(in != NULL);
    for (size_t i = 0; i < big; i++)
        in[i] = (unsigned char)(i * 7);
    uint64_t small = 1;
    TK_REQUIRE(ring_push(r, 1, &small, 8) == 0);
    TK_REQUIRE(ring_push(r, 2, in, big) == 0);
    small = 3;
    TK_REQUIRE(ring_push(r, 3, &small, 8) == 0);
    TK_REQUIRE(tk_merge_collect(&m, rings, 0) == 0);
    const void *p;
    size_t len;
    uint64_t st;
    TK_REQUIRE(tk_merge_next(&m, &p, &len, &st));
    TK_CHECK_EQ(st, 1);
    TK_REQUIRE(tk_merge_next(&m, &p, &len, &st));
    TK_CHECK_EQ(st, 2);
    TK_CHECK_EQ(len, big);
    TK_CHECK(memcmp(p, in, big) == 0);
    TK_REQUIRE(tk_merge_next(&m, &p, &len, &st));
    TK_CHECK_EQ(st, 3);
    TK_CHECK_EQ(tk_ring_used(r), 0);
    free(in);
    tk_merge_destroy(&m);
    rings_free();
}

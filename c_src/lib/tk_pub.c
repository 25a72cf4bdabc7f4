#include "tk_pub.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tk_mem.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* ---- membarrier ----------------------------------------------------------
 *
 * Queried and registered once per process. MEMBARRIER_CMD_PRIVATE_EXPEDITED
 * makes every CPU that currently runs a thread of this process execute a
 * full memory barrier before the call returns; CPUs running other
 * processes need none (a context switch is itself a full barrier).
 */
static pthread_once_t mb_once = PTHREAD_ONCE_INIT;
static int mb_ok;

static void mb_setup(void)
{
#if defined(__linux__) && defined(SYS_membarrier) && !TK_PUB_TSAN
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        return;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0, 0) != 0)
        return;
    /* One real call, so that a kernel that registers but refuses the
     * command later is caught now. */
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
        return;
    mb_ok = 1;
#endif
}

int tk_pub_membarrier_available(void)
{
    pthread_once(&mb_once, mb_setup);
    return mb_ok;
}

/* The writer's heavy barrier: every running reader thread executes a full
 * barrier. Falls back to nothing but the writer's own fence (the readers of
 * a fence-mode domain fence themselves). */
static void heavy_barrier(const tk_pub_gp *g)
{
    atomic_thread_fence(memory_order_seq_cst);
#if defined(__linux__) && defined(SYS_membarrier) && !TK_PUB_TSAN
    if (!g->fence) {
        /* Registered and tested at setup, so it can only fail for want of
         * kernel memory (ENOMEM) or a signal (EINTR): try again. Readers
         * rely on it; going on without it would be unsound. */
        while (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0,
                       0) != 0) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        atomic_thread_fence(memory_order_seq_cst);
    }
#else
    (void)g;
#endif
}

/* ---- the grace-period domain ---------------------------------------- */

int tk_pub_gp_init(tk_pub_gp *g, unsigned flags)
{
    size_t bytes = (size_t)TK_PUB_SHARED * sizeof(tk_pub_slot) +
                   sizeof(tk_pub_shared);
    _Static_assert(sizeof(tk_pub_slot) == TK_PUB_LINE, "one line per slot");
    _Static_assert(sizeof(tk_pub_shared) == 2 * TK_PUB_LINE, "two lines");
    char *mem = tk_mem_aligned_alloc(TK_PUB_LINE, bytes);
    if (mem == NULL)
        return -1;
    memset(mem, 0, bytes);
    g->slots = (tk_pub_slot *)mem;
    g->shared = (tk_pub_shared *)(mem + (size_t)TK_PUB_SHARED *
                                            sizeof(tk_pub_slot));
    for (unsigned s = 0; s < TK_PUB_SHARED; s++) {
        atomic_init(&g->slots[s].seq, 0);
        g->slots[s].depth = 0;
    }
    atomic_init(&g->shared->count[0], 0);
    atomic_init(&g->shared->count[1], 0);
    atomic_init(&g->shared->phase, 0);
    g->fence = (flags & TK_PUB_FENCE) || !tk_pub_membarrier_available();
    return 0;
}

void tk_pub_gp_destroy(tk_pub_gp *g)
{
    tk_mem_aligned_free(g->slots);
    g->slots = NULL;
    g->shared = NULL;
}

int tk_pub_gp_uses_membarrier(const tk_pub_gp *g)
{
    return !g->fence;
}

/* The shared slot. Any number of threads use it, so each reader adds one to
 * count[phase] on entry and takes it back on exit. Which counter a thread
 * used is kept in a per-thread bit stack (sections are LIFO per thread), so
 * that tk_pub_gp_leave needs no argument beyond the slot. */
static _Thread_local uint64_t shared_bits;
static _Thread_local unsigned shared_depth;

void tk_pub_gp_enter_shared(tk_pub_gp *g)
{
    tk_pub_shared *sh = g->shared;
    if (shared_depth >= 64)
        abort(); /* more than 64 nested shared-slot sections */
    /* The phase only steers new readers away from the counter the writer
     * is draining; correctness does not depend on reading the latest one
     * (the writer waits for both counters). */
    unsigned ph =
        atomic_load_explicit(&sh->phase, memory_order_relaxed) & 1u;
    atomic_fetch_add_explicit(&sh->count[ph], 1, memory_order_relaxed);
    tk_pub_gp_reader_fence(g);
    shared_bits = (shared_bits << 1) | ph;
    shared_depth++;
}

void tk_pub_gp_leave_shared(tk_pub_gp *g)
{
    unsigned ph = (unsigned)(shared_bits & 1u);
    shared_bits >>= 1;
    shared_depth--;
    atomic_fetch_sub_explicit(&g->shared->count[ph], 1,
                              memory_order_release);
}

/* Waiting: spin briefly (a read section is a few hundred nanoseconds), then
 * yield, then sleep (the reader may have been preempted). */
static void backoff(unsigned *n)
{
    unsigned i = (*n)++;
    if (i < 64) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    } else if (i < 256) {
        sched_yield();
    } else {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/*
 * Why a reader either sees the writer's publication or is waited for.
 *
 * Writer: W1 publishes (stores the new active pointer/index, code words,
 * ...), then tk_pub_gp_wait: B = heavy_barrier(); then L loads each slot.
 * Reader section: S stores its odd seq, F = tk_pub_gp_reader_fence, then
 * R loads published data.
 *
 * Fence mode: B and F are both seq_cst fences. They are ordered in the
 * single total order of seq_cst operations. If B precedes F, R (after F)
 * observes W1 (before B) or something later: the section sees the new
 * data. If F precedes B, L (after B) observes S (before F) or a later
 * value of the slot: the writer sees the section as running and waits for
 * the slot to change. (C11 7.17.4, fences.)
 *
 * Membarrier mode: F is only a compiler barrier, so program order is kept
 * by the compiler; B is membarrier(), which makes every CPU currently
 * running a thread of the process execute a full barrier at some point P
 * during the call (threads not running have passed a context switch, a
 * full barrier, and their next instruction comes after B). If the reader's
 * S is before P, S is globally visible when membarrier returns, so L sees
 * it. If S is after P, so is R, and R comes after the writer's own barrier
 * preceding the IPIs: R sees W1. Same two cases as with fences.
 *
 * Waiting for a slot: a snapshot value v that is even means the owner was
 * outside any section when L read it; a section it starts afterwards has
 * its S after L in the slot's modification order, hence (by the case
 * analysis) sees W1. An odd v is waited for until the slot changes: the
 * change is the end of that section (a release store; our acquire load
 * makes every read of the section happen before what the writer does
 * next), and any later section again sees W1. New sections cannot delay
 * the writer: it waits for a change, not for the slot to be even.
 *
 * The shared slot: a reader R adds one to count[ph] (S), fences (F), then
 * reads (R). If the writer's load of count[ph] (after B) misses S, then as
 * above R sees W1. The writer loads both counters, so whichever counter R
 * used, R is either waited for or sees W1. Waiting for a counter to reach
 * zero could starve if readers kept arriving; the phase prevents that: the
 * writer first drains count[ph ^ 1] (only readers that read the phase
 * before the previous flip can still arrive there), then flips the phase
 * so that new readers use count[ph ^ 1], then drains count[ph].
 */
void tk_pub_gp_wait(tk_pub_gp *g)
{
    static const unsigned words = (TK_PUB_SHARED + 63) / 64;
    uint64_t snap[TK_PUB_SHARED];
    uint64_t busy[(TK_PUB_SHARED + 63) / 64] = {0};

    heavy_barrier(g);

    for (unsigned s = 0; s < TK_PUB_SHARED; s++) {
        snap[s] = atomic_load_explicit(&g->slots[s].seq,
                                       memory_order_acquire);
        if (snap[s] & 1u)
            busy[s / 64] |= (uint64_t)1 << (s % 64);
    }
    for (unsigned w = 0; w < words; w++) {
        while (busy[w] != 0) {
            unsigned s = w * 64 + (unsigned)__builtin_ctzll(busy[w]);
            unsigned n = 0;
            while (atomic_load_explicit(&g->slots[s].seq,
                                        memory_order_acquire) == snap[s])
                backoff(&n);
            busy[w] &= busy[w] - 1;
        }
    }

    tk_pub_shared *sh = g->shared;
    unsigned ph = atomic_load_explicit(&sh->phase, memory_order_relaxed) & 1u;
    unsigned n = 0;
    while (atomic_load_explicit(&sh->count[ph ^ 1u], memory_order_acquire) !=
           0)
        backoff(&n);
    atomic_store_explicit(&sh->phase, ph ^ 1u, memory_order_relaxed);
    n = 0;
    while (atomic_load_explicit(&sh->count[ph], memory_order_acquire) != 0)
        backoff(&n);
}

/* ---- tk_pub ----------------------------------------------------------- */

int tk_pub_init(tk_pub *p, size_t size, const void *initial)
{
    return tk_pub_init_flags(p, size, initial, TK_PUB_AUTO);
}

int tk_pub_init_flags(tk_pub *p, size_t size, const void *initial,
                      unsigned flags)
{
    if (size == 0)
        size = 1;
    /* Each generation on its own cache lines. */
    size_t rounded = (size + TK_PUB_LINE - 1) / TK_PUB_LINE * TK_PUB_LINE;
    p->gen[0] = tk_mem_aligned_alloc(TK_PUB_LINE, rounded);
    p->gen[1] = tk_mem_aligned_alloc(TK_PUB_LINE, rounded);
    if (p->gen[0] == NULL || p->gen[1] == NULL ||
        tk_pub_gp_init(&p->gp, flags) != 0) {
        tk_mem_aligned_free(p->gen[0]);
        tk_mem_aligned_free(p->gen[1]);
        return -1;
    }
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        tk_pub_gp_destroy(&p->gp);
        tk_mem_aligned_free(p->gen[0]);
        tk_mem_aligned_free(p->gen[1]);
        return -1;
    }
    if (initial != NULL)
        memcpy(p->gen[0], initial, size);
    else
        memset(p->gen[0], 0, size);
    memcpy(p->gen[1], p->gen[0], size);
    p->size = size;
    p->version = 0;
    atomic_init(&p->active, p->gen[0]);
    return 0;
}

void tk_pub_destroy(tk_pub *p)
{
    pthread_mutex_destroy(&p->lock);
    tk_pub_gp_destroy(&p->gp);
    tk_mem_aligned_free(p->gen[0]);
    tk_mem_aligned_free(p->gen[1]);
    p->gen[0] = p->gen[1] = NULL;
}

static void *staging_of(tk_pub *p)
{
    void *a = atomic_load_explicit(&p->active, memory_order_relaxed);
    return a == p->gen[0] ? p->gen[1] : p->gen[0];
}

void *tk_pub_stage(tk_pub *p)
{
    pthread_mutex_lock(&p->lock);
    /* Consolidated by the previous commit: staging == active. No reader
     * can be in it: the last grace period drained them. */
    return staging_of(p);
}

void tk_pub_commit(tk_pub *p)
{
    void *next = staging_of(p);
    void *old = atomic_load_explicit(&p->active, memory_order_relaxed);
    /* Release: a reader that loads `next` (acquire) sees its contents. */
    atomic_store_explicit(&p->active, next, memory_order_release);
    /* No reader that could have loaded `old` is still reading it after
     * this (see tk_pub_gp_wait). */
    tk_pub_gp_wait(&p->gp);
    /* Consolidate: the old generation becomes the next staging copy. */
    memcpy(old, next, p->size);
    p->version++;
    pthread_mutex_unlock(&p->lock);
}

void tk_pub_abort(tk_pub *p)
{
    memcpy(staging_of(p), atomic_load_explicit(&p->active,
                                               memory_order_relaxed),
           p->size);
    pthread_mutex_unlock(&p->lock);
}

void tk_pub_sync(tk_pub *p)
{
    pthread_mutex_lock(&p->lock);
    tk_pub_gp_wait(&p->gp);
    pthread_mutex_unlock(&p->lock);
}

void tk_pub_get(tk_pub *p, void *out)
{
    pthread_mutex_lock(&p->lock);
    memcpy(out, atomic_load_explicit(&p->active, memory_order_relaxed),
           p->size);
    pthread_mutex_unlock(&p->lock);
}

uint64_t tk_pub_version(tk_pub *p)
{
    pthread_mutex_lock(&p->lock);
    uint64_t v = p->version;
    pthread_mutex_unlock(&p->lock);
    return v;
}

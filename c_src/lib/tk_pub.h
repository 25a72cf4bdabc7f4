/* tk_pub.h: two-generation publication of a fixed-size configuration, read
 * without locks, with a grace period between a change and the reuse of the
 * old generation.
 *
 * Two layers:
 *
 *  - tk_pub_gp, a grace-period domain. Readers bracket a read section with
 *    tk_pub_gp_enter/tk_pub_gp_leave on their thread's slot; a writer that
 *    has published something calls tk_pub_gp_wait, which returns once every
 *    read section that could have missed the publication has ended. After
 *    it returns, every section that starts sees what was written before
 *    the wait began, and whatever the writer overwrites or frees next was
 *    read by no section that is still running. tk_bp (the breakpoint model)
 *    uses it directly, as its "wait for thread progress".
 *
 *  - tk_pub, a configuration of `size` bytes in two generations: `active`,
 *    which readers see, and `staging`, which the writer changes. Commit
 *    flips them, waits for a grace period, and copies the new active
 *    generation into the new staging one (consolidation), so that staging
 *    always starts as a copy of what readers see.
 *
 * Reader cost. A read section is: a store to the thread's own slot (its own
 * cache line), a compiler barrier, the load of the active pointer, and a
 * release store (a plain store on x86) when it ends: no atomic
 * read-modify-write and no fence. This relies on membarrier(2): the writer
 * issues MEMBARRIER_CMD_PRIVATE_EXPEDITED, which runs a full memory barrier
 * on every CPU currently running a thread of the process, turning the
 * readers' compiler barriers into full barriers exactly when it matters
 * (the asymmetric-fence scheme of liburcu's "memb" flavour). Where
 * membarrier is unavailable (old kernels, seccomp filters), or when a
 * domain is created with TK_PUB_FENCE, readers issue a sequentially
 * consistent fence instead. ThreadSanitizer builds always use the fence
 * mode (TSan does not see the ordering membarrier provides). A
 * read_begin/read_end pair costs about 1 ns with membarrier and 6 ns with
 * the fence (test_pub.c's pub_reader_cost_* print it).
 *
 * Slots. Slot s in 0..TK_PUB_SHARED-1 belongs to one thread at a time (the
 * NIF thread registry, tk_thread_slot(), hands them out); TK_PUB_SHARED
 * (and any larger number) is shared by any number of threads, costs an
 * atomic add in each direction, and allows 64 nested sections per thread.
 * TK_PUB_SLOTS equals TK_THREAD_SLOTS (check it with #if where both are
 * visible).
 *
 * Read sections never block and never wait for the writer. They may nest
 * (also across domains). A thread must not call tk_pub_gp_wait (or
 * tk_pub_commit) while inside a read section of the same domain: it would
 * wait for itself.
 */
#ifndef TK_PUB_H
#define TK_PUB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define TK_PUB_SLOTS 256
#define TK_PUB_SHARED (TK_PUB_SLOTS - 1)
#define TK_PUB_LINE 64 /* bytes per slot: one cache line */

#if defined(__SANITIZE_THREAD__)
#define TK_PUB_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TK_PUB_TSAN 1
#endif
#endif
#ifndef TK_PUB_TSAN
#define TK_PUB_TSAN 0
#endif
#if TK_PUB_TSAN && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
/* gcc warns that TSan does not model fences; the fences here are for the
 * hardware, and TSan checks the release/acquire pairs that remain. */
#pragma GCC diagnostic ignored "-Wtsan"
#endif

/* Modes of a domain (flags of tk_pub_gp_init / tk_pub_init_flags). */
#define TK_PUB_AUTO 0u  /* membarrier when the kernel has it, else fences */
#define TK_PUB_FENCE 1u /* readers always fence; the writer never calls
                         * membarrier */

/* One owned reader slot. `seq` is odd while the owner is inside a read
 * section; `depth` counts nested sections and is touched only by the owner. */
typedef struct {
    _Atomic uint64_t seq;
    unsigned depth;
    char pad_[TK_PUB_LINE - sizeof(uint64_t) - sizeof(unsigned)];
} tk_pub_slot;

/* The shared slot: readers counted per phase (see tk_pub.c). */
typedef struct {
    _Atomic uint64_t count[2];
    char pad0_[TK_PUB_LINE - 2 * sizeof(uint64_t)];
    _Atomic unsigned phase;
    char pad1_[TK_PUB_LINE - sizeof(unsigned)];
} tk_pub_shared;

typedef struct {
    tk_pub_slot *slots;    /* TK_PUB_SHARED owned slots */
    tk_pub_shared *shared; /* just after them, same allocation */
    int fence;             /* 1: readers fence, writer does not membarrier */
} tk_pub_gp;

/* 0 on success, -1 when out of memory. `flags`: TK_PUB_AUTO or
 * TK_PUB_FENCE. */
int tk_pub_gp_init(tk_pub_gp *g, unsigned flags);
/* No reader may be inside a section. */
void tk_pub_gp_destroy(tk_pub_gp *g);

/* Nonzero when the domain's readers use the membarrier scheme (no fence). */
int tk_pub_gp_uses_membarrier(const tk_pub_gp *g);

/* Whether this process can use membarrier (queried and registered once). */
int tk_pub_membarrier_available(void);

/* Out-of-line paths of the shared slot. */
void tk_pub_gp_enter_shared(tk_pub_gp *g);
void tk_pub_gp_leave_shared(tk_pub_gp *g);

/* The reader's side of the store-load ordering with the writer: after the
 * slot store, before the first load of published data. */
static inline void tk_pub_gp_reader_fence(const tk_pub_gp *g)
{
#if TK_PUB_TSAN
    (void)g;
    atomic_thread_fence(memory_order_seq_cst);
#else
    if (__builtin_expect(g->fence, 0))
        atomic_thread_fence(memory_order_seq_cst);
    else
        /* Only the compiler is held back: the writer's membarrier supplies
         * the CPU barrier (see tk_pub_gp_wait). */
        atomic_signal_fence(memory_order_seq_cst);
#endif
}

/* Begins a read section on `slot`. Loads of published data made after this
 * see at least everything written before any tk_pub_gp_wait that has not
 * yet seen this section. */
static inline void tk_pub_gp_enter(tk_pub_gp *g, unsigned slot)
{
    if (__builtin_expect(slot >= TK_PUB_SHARED, 0)) {
        tk_pub_gp_enter_shared(g);
        return;
    }
    tk_pub_slot *s = &g->slots[slot];
    if (s->depth++ != 0)
        return; /* nested: the outer section already covers it */
    /* Only this thread writes `seq`: a relaxed load and store make it odd.
     * The store must be ordered before the loads of published data that
     * follow; tk_pub_gp_reader_fence does that (fence or membarrier). */
    uint64_t v = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, v + 1, memory_order_relaxed);
    tk_pub_gp_reader_fence(g);
}

/* Ends the read section begun by the matching tk_pub_gp_enter. */
static inline void tk_pub_gp_leave(tk_pub_gp *g, unsigned slot)
{
    if (__builtin_expect(slot >= TK_PUB_SHARED, 0)) {
        tk_pub_gp_leave_shared(g);
        return;
    }
    tk_pub_slot *s = &g->slots[slot];
    if (--s->depth != 0)
        return;
    /* Release: every read of the section happens before a writer that
     * sees the even value (acquire) goes on to overwrite or free. */
    uint64_t v = atomic_load_explicit(&s->seq, memory_order_relaxed);
    atomic_store_explicit(&s->seq, v + 1, memory_order_release);
}

/* Waits for a grace period: returns when every read section that began
 * before the call has ended, except those that see all writes made before
 * the call. Calls on one domain must be serialised (tk_pub and tk_bp hold
 * their writer lock). Never call it inside a read section of `g`. */
void tk_pub_gp_wait(tk_pub_gp *g);

/* ---- the two-generation configuration -------------------------------- */

typedef struct {
    /* Read by every reader: the active generation and the slots. */
    _Atomic(void *) active;
    tk_pub_gp gp;
    /* Writer side. */
    void *gen[2];
    size_t size;
    pthread_mutex_t lock; /* held from tk_pub_stage to commit/abort */
    uint64_t version;     /* commits so far, under `lock` */
} tk_pub;

/* Creates a publication of `size` bytes (size > 0) whose first version is a
 * copy of `initial` (zeroes when NULL). 0 on success, -1 when out of
 * memory. tk_pub_init uses TK_PUB_AUTO. */
int tk_pub_init(tk_pub *p, size_t size, const void *initial);
int tk_pub_init_flags(tk_pub *p, size_t size, const void *initial,
                      unsigned flags);
/* No reader may be inside a section and no change in progress. */
void tk_pub_destroy(tk_pub *p);

/* Readers. `slot` is the calling thread's slot (see above). Returns the
 * active version; the pointer and what it points to stay valid and
 * unchanged until tk_pub_read_end. Lock-free; never waits for a writer.
 * Sections may nest. */
static inline const void *tk_pub_read_begin(tk_pub *p, unsigned slot)
{
    tk_pub_gp_enter(&p->gp, slot);
    /* Acquire: pairs with the release in tk_pub_commit, so the contents
     * the writer staged are visible. */
    return atomic_load_explicit(&p->active, memory_order_acquire);
}

static inline void tk_pub_read_end(tk_pub *p, unsigned slot)
{
    tk_pub_gp_leave(&p->gp, slot);
}

/* Writers. tk_pub serialises them itself: tk_pub_stage takes the writer
 * lock (waiting for another writer's commit or abort) and returns the
 * staging generation, which holds a copy of the active version; change it
 * in place, then call tk_pub_commit or tk_pub_abort from the same thread.
 * Commit publishes it and returns only when every reader that could see
 * the old version has finished: after it returns, every read section sees
 * the new version (or a later one). Never commit inside a read section. */
void *tk_pub_stage(tk_pub *p);
void tk_pub_commit(tk_pub *p);
/* Drops the staged changes. */
void tk_pub_abort(tk_pub *p);

/* Waits for a grace period, serialised with the writers: when it returns,
 * every read section that began before the call has ended, and every one
 * that begins after sees what the caller wrote before the call (a flag
 * outside the configuration, such as a recorder's `closed'). Never call
 * it inside a read section. */
void tk_pub_sync(tk_pub *p);

/* Copies the active version into `out` (size bytes), under the writer
 * lock: a writer-side read that needs no slot. */
void tk_pub_get(tk_pub *p, void *out);

/* Number of commits so far. */
uint64_t tk_pub_version(tk_pub *p);

#endif

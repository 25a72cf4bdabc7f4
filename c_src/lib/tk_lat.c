#include "tk_lat.h"

#include <string.h>

#include "tk_clock.h"
#include "tk_mem.h"
#include "tk_u64map.h"

_Static_assert(sizeof(tk_lat_rec) == 32, "a record is four words");
_Static_assert(TK_LAT_REC_BYTES == TK_RING_HEAD_MAX + sizeof(tk_lat_rec),
               "record size");

/* ---- the producer side ---------------------------------------------------- */

/* Whether n more records fit. */
static inline int has_room(tk_ring *r, unsigned n)
{
    return tk_ring_fits(r, n * TK_LAT_REC_BYTES - TK_RING_HEAD_MAX);
}

/* Pushes a record (copied after the room tk_ring_push writes into, and
 * followed by the slack it reads). */
static int push_rec(tk_ring *r, uint64_t stamp, const tk_lat_rec *rec)
{
    unsigned char buf[TK_RING_BUF(sizeof *rec)];
    memcpy(buf + TK_RING_ROOM, rec, sizeof *rec);
    return tk_ring_push(r, stamp, buf + TK_RING_ROOM, sizeof *rec);
}

static void go_blind(tk_ring *r, unsigned src, uint8_t *blind)
{
    tk_ring_count_drop(r);
    if (*blind)
        return;
    *blind = 1;
    /* Room was kept for it. The stamp is fenced: nothing that happened
     * after the event dropped can have a smaller one. */
    tk_lat_rec m = {0, 0, 0, src, TK_LAT_BLIND};
    (void)push_rec(r, tk_clock_stamp_fenced(), &m);
}

int tk_lat_admit(tk_ring *r, unsigned src, uint8_t *blind)
{
    if (has_room(r, *blind ? 3 : 2))
        return 1;
    go_blind(r, src, blind);
    return 0;
}

int tk_lat_push(tk_ring *r, unsigned src, uint8_t *blind, uint64_t stamp,
                const tk_lat_rec *rec)
{
    if (!has_room(r, *blind ? 3 : 2)) {
        go_blind(r, src, blind);
        return -1;
    }
    if (*blind) {
        tk_lat_rec m = {0, 0, 0, src, TK_LAT_SIGHTED};
        (void)push_rec(r, stamp, &m);
        *blind = 0;
    }
    return push_rec(r, stamp, rec);
}

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ---- the state ----------------------------------------------------------- */

#define INLINE_FRAMES 4u
#define MEASURED 0x80000000u /* in frame.fn: the call is measured */

typedef struct {
    uint32_t fn;    /* function index, | MEASURED */
    uint32_t rep;   /* directly recursive calls sharing the frame (outermost) */
    uint64_t start; /* stamp of the call */
} frame;

typedef struct {
    uint64_t pid;      /* 0: a free entry */
    uint32_t depth, cap;
    uint32_t skipped;  /* calls not followed on top of the stack */
    uint32_t next_free;
    uint8_t deep;      /* its functions are counted in `active' */
    frame *heap;       /* NULL: the frames are inline */
    frame inline_[INLINE_FRAMES];
} proc;

struct tk_lat {
    tk_lat_opts o;
    uint64_t ns_per_tick_hi, ns_per_tick_lo; /* 1e9 / hz, 64.64 fixed point */
    tk_lat_counts c;
    tk_lat_done_fn done;
    void *done_ctx;

    tk_lat_fn *fns;
    uint32_t nfns, fns_cap, last_fn;
    uint32_t *fn_slots; /* index + 1, 0 empty; at most half full */
    size_t fn_slots_cap;

    proc *procs;
    uint32_t nprocs, procs_cap, free_head; /* free list, index + 1 */
    uint32_t live;                         /* entries in use */
    tk_u64map by_pid;                          /* pid -> entry */
    tk_u64map active;   /* (entry + 1) << 32 | fn -> frames of fn (outermost) */
    uint64_t frames;

    uint8_t blind[TK_LAT_SOURCES];
    unsigned nblind;
};

tk_lat *tk_lat_new(const tk_lat_opts *o)
{
    if (o->max_functions == 0 || o->max_processes == 0 || o->max_frames == 0 ||
        o->max_functions >= MEASURED || o->hz == 0)
        return NULL;
    tk_lat *l = tk_mem_zalloc(sizeof *l);
    if (l != NULL) {
        l->o = *o;
        unsigned __int128 f = ((unsigned __int128)1000000000u << 64) / o->hz;
        l->ns_per_tick_hi = (uint64_t)(f >> 64);
        l->ns_per_tick_lo = (uint64_t)f;
    }
    return l;
}

static frame *frames_of(proc *p)
{
    return p->heap != NULL ? p->heap : p->inline_;
}

void tk_lat_free(tk_lat *l)
{
    if (l == NULL)
        return;
    for (uint32_t i = 0; i < l->nfns; i++) {
        tk_hist_free(&l->fns[i].returns);
        tk_hist_free(&l->fns[i].exceptions);
    }
    tk_mem_free(l->fns);
    tk_mem_free(l->fn_slots);
    for (uint32_t i = 0; i < l->nprocs; i++)
        tk_mem_free(l->procs[i].heap);
    tk_mem_free(l->procs);
    tk_u64map_free(&l->by_pid);
    tk_u64map_free(&l->active);
    tk_mem_free(l);
}

void tk_lat_on_done(tk_lat *l, tk_lat_done_fn fn, void *ctx)
{
    l->done = fn;
    l->done_ctx = ctx;
}

const tk_lat_counts *tk_lat_counts_of(const tk_lat *l) { return &l->c; }
unsigned tk_lat_functions(const tk_lat *l) { return l->nfns; }
const tk_lat_fn *tk_lat_function(const tk_lat *l, unsigned i)
{
    return i < l->nfns ? &l->fns[i] : NULL;
}
uint32_t tk_lat_processes(const tk_lat *l)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < l->nprocs; i++)
        n += l->procs[i].pid != 0 && (l->procs[i].depth > 0 || l->procs[i].skipped > 0);
    return n;
}
uint64_t tk_lat_frames(const tk_lat *l) { return l->frames; }
int tk_lat_seeing(const tk_lat *l) { return l->nblind == 0; }

/* ---- functions ------------------------------------------------------------ */

static size_t fn_home(const tk_lat *l, uint64_t m, uint64_t f, uint32_t arity)
{
    return (size_t)mix(m ^ mix(f ^ mix(arity))) & (l->fn_slots_cap - 1);
}

/* The index of the function, or -1 when it is not known. */
static int64_t fn_find(const tk_lat *l, uint64_t m, uint64_t f, uint32_t arity)
{
    if (l->fn_slots_cap == 0)
        return -1;
    for (size_t i = fn_home(l, m, f, arity);; i = (i + 1) & (l->fn_slots_cap - 1)) {
        uint32_t s = l->fn_slots[i];
        if (s == 0)
            return -1;
        const tk_lat_fn *e = &l->fns[s - 1];
        if (e->m == m && e->f == f && e->arity == arity)
            return s - 1;
    }
}

static int fn_slots_grow(tk_lat *l)
{
    size_t cap = l->fn_slots_cap ? 2 * l->fn_slots_cap : 64;
    uint32_t *slots = tk_mem_zalloc(cap * sizeof *slots);
    if (slots == NULL)
        return -1;
    tk_mem_free(l->fn_slots);
    l->fn_slots = slots;
    l->fn_slots_cap = cap;
    for (uint32_t k = 0; k < l->nfns; k++) {
        size_t i = fn_home(l, l->fns[k].m, l->fns[k].f, l->fns[k].arity);
        while (slots[i] != 0)
            i = (i + 1) & (cap - 1);
        slots[i] = k + 1;
    }
    return 0;
}

/* The index of the function, added when new; -1 when the bound or memory
 * refuses it. */
static int64_t fn_get(tk_lat *l, uint64_t m, uint64_t f, uint32_t arity)
{
    int64_t k = fn_find(l, m, f, arity);
    if (k >= 0)
        return k;
    if (l->nfns >= l->o.max_functions)
        return -1;
    if (2 * ((size_t)l->nfns + 1) > l->fn_slots_cap && fn_slots_grow(l) != 0)
        return -1;
    if (l->nfns == l->fns_cap) {
        uint32_t cap = l->fns_cap ? 2 * l->fns_cap : 16;
        tk_lat_fn *fns = tk_mem_realloc(l->fns, l->fns_cap * sizeof *fns, cap * sizeof *fns);
        if (fns == NULL)
            return -1;
        l->fns = fns;
        l->fns_cap = cap;
    }
    tk_lat_fn *e = &l->fns[l->nfns];
    memset(e, 0, sizeof *e);
    e->m = m;
    e->f = f;
    e->arity = arity;
    tk_hist_init(&e->returns);
    tk_hist_init(&e->exceptions);
    size_t i = fn_home(l, m, f, arity);
    while (l->fn_slots[i] != 0)
        i = (i + 1) & (l->fn_slots_cap - 1);
    l->fn_slots[i] = l->nfns + 1;
    return l->nfns++;
}

/* ---- processes ---------------------------------------------------------- */

/* A process's entry stays while it is idle (no call open), so that a
 * process calling traced functions in a loop does not make and free one
 * per call; idle entries are swept when the bound is reached. */

static proc *proc_find(tk_lat *l, uint64_t pid, uint32_t *idx)
{
    uint32_t *v = tk_u64map_ref(&l->by_pid, pid);
    if (v == NULL)
        return NULL;
    *idx = *v;
    return &l->procs[*v];
}

static int idle(const proc *p)
{
    return p->depth == 0 && p->skipped == 0;
}

static void proc_release(tk_lat *l, proc *p, uint32_t idx)
{
    tk_u64map_remove(&l->by_pid, p->pid);
    tk_mem_free(p->heap);
    memset(p, 0, sizeof *p);
    p->next_free = l->free_head;
    l->free_head = idx + 1;
    l->live--;
}

/* Frees the entries of idle processes; how many. */
static uint32_t sweep_idle(tk_lat *l)
{
    uint32_t freed = 0;
    for (uint32_t i = 0; i < l->nprocs; i++)
        if (l->procs[i].pid != 0 && idle(&l->procs[i])) {
            proc_release(l, &l->procs[i], i);
            freed++;
        }
    return freed;
}

/* The entry of pid, made when new; NULL when the bound or memory refuses. */
static proc *proc_get(tk_lat *l, uint64_t pid, uint32_t *idx)
{
    proc *p = proc_find(l, pid, idx);
    if (p != NULL)
        return p;
    if (l->live >= l->o.max_processes && sweep_idle(l) == 0)
        return NULL;
    uint32_t i;
    if (l->free_head != 0) {
        i = l->free_head - 1;
    } else {
        if (l->nprocs == l->procs_cap) {
            uint32_t cap = l->procs_cap ? 2 * l->procs_cap : 64;
            proc *ps = tk_mem_realloc(l->procs, l->procs_cap * sizeof *ps, cap * sizeof *ps);
            if (ps == NULL)
                return NULL;
            l->procs = ps;
            l->procs_cap = cap;
        }
        i = l->nprocs;
    }
    if (tk_u64map_put(&l->by_pid, pid, i) != 0)
        return NULL;
    if (i == l->nprocs)
        l->nprocs++;
    else
        l->free_head = l->procs[i].next_free;
    p = &l->procs[i];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->cap = INLINE_FRAMES;
    l->live++;
    *idx = i;
    return p;
}

/* ---- the functions a process is in (outermost) -----------------------------
 * Whether a process is already inside a function: its stack scanned, or,
 * once it is deeper than DEEP frames (recursion through several
 * functions), a count per (process, function) in `active' until its
 * stack is empty again. The map is only a shortcut: a process whose
 * counts could not be kept (memory) goes on being scanned. */

#define DEEP 8u

static uint64_t active_key(uint32_t idx, uint32_t fn)
{
    return (uint64_t)(idx + 1) << 32 | fn;
}

static void active_dec(tk_lat *l, uint32_t idx, uint32_t fn)
{
    uint64_t key = active_key(idx, fn);
    uint32_t *n = tk_u64map_ref(&l->active, key);
    if (n != NULL && *n > 1)
        --*n;
    else
        tk_u64map_remove(&l->active, key);
}

static int active_inc(tk_lat *l, uint32_t idx, uint32_t fn)
{
    uint64_t key = active_key(idx, fn);
    uint32_t *n = tk_u64map_ref(&l->active, key);
    if (n != NULL) {
        ++*n;
        return 0;
    }
    return tk_u64map_put(&l->active, key, 1);
}

/* Stops counting: the process is scanned from now on. */
static void leave_deep(tk_lat *l, proc *p, uint32_t idx)
{
    if (!p->deep)
        return;
    frame *fr = frames_of(p);
    for (uint32_t d = 0; d < p->depth; d++)
        tk_u64map_remove(&l->active, active_key(idx, fr[d].fn & ~MEASURED));
    p->deep = 0;
}

/* Whether the process is inside a call of fn. */
static int inside(tk_lat *l, proc *p, uint32_t idx, uint32_t fn)
{
    if (p->deep)
        return tk_u64map_ref(&l->active, active_key(idx, fn)) != NULL;
    frame *fr = frames_of(p);
    for (uint32_t d = 0; d < p->depth; d++)
        if ((fr[d].fn & ~MEASURED) == fn)
            return 1;
    return 0;
}

/* After a push: keep the counts of a deep process. */
static void pushed(tk_lat *l, proc *p, uint32_t idx, uint32_t fn)
{
    if (p->deep) {
        if (active_inc(l, idx, fn) != 0) {
            /* (the new frame is not counted: take out the others) */
            p->depth--;
            leave_deep(l, p, idx);
            p->depth++;
        }
    } else if (p->depth > DEEP) {
        frame *fr = frames_of(p);
        p->deep = 1;
        for (uint32_t d = 0; d < p->depth; d++)
            if (active_inc(l, idx, fr[d].fn & ~MEASURED) != 0) {
                uint32_t depth = p->depth;
                p->depth = d; /* the frames counted so far */
                leave_deep(l, p, idx);
                p->depth = depth;
                return;
            }
    }
}

static void popped(tk_lat *l, proc *p, uint32_t idx, uint32_t fn)
{
    if (p->deep) {
        active_dec(l, idx, fn);
        if (p->depth == 0)
            p->deep = 0;
    }
}

/* Drops a process's stack: each measured call counted as `lost' or (with
 * `unfinished') as unfinished of its function; then frees the entry. */
static void proc_drop(tk_lat *l, proc *p, uint32_t idx, int unfinished)
{
    frame *fr = frames_of(p);
    for (uint32_t d = 0; d < p->depth; d++) {
        uint32_t fn = fr[d].fn & ~MEASURED;
        if (fr[d].fn & MEASURED) {
            if (unfinished) {
                l->fns[fn].unfinished++;
                l->c.unfinished++;
            } else {
                l->c.lost++;
            }
        }
    }
    leave_deep(l, p, idx);
    l->frames -= p->depth;
    proc_release(l, p, idx);
}

/* Room for one more frame: 0, or -1 (the frame bound, or memory). */
static int room_for_frame(tk_lat *l, proc *p)
{
    if (l->frames >= l->o.max_frames)
        return -1;
    if (p->depth < p->cap)
        return 0;
    uint32_t cap = 2 * p->cap;
    frame *heap = tk_mem_alloc(cap * sizeof *heap);
    if (heap == NULL)
        return -1;
    memcpy(heap, frames_of(p), p->depth * sizeof *heap);
    tk_mem_free(p->heap);
    p->heap = heap;
    p->cap = cap;
    return 0;
}

/* ---- the records ------------------------------------------------------------ */

/* Stamps to nanoseconds: ticks * 1e9 / hz, as ticks times a 64.64 fixed
 * point factor made once (tk_lat_new), rounded to the nearest
 * nanosecond: the factor is within 2^-64 of 1e9 / hz, so the result is
 * within a nanosecond of the exact one for any duration below 500 years. */
static uint64_t to_ns(const tk_lat *l, uint64_t start, uint64_t end)
{
    uint64_t ticks = end > start ? end - start : 0;
    if (l->o.hz == 1000000000u)
        return ticks;
    unsigned __int128 frac = (unsigned __int128)ticks * l->ns_per_tick_lo + ((uint64_t)1 << 63);
    return ticks * l->ns_per_tick_hi + (uint64_t)(frac >> 64);
}

static int same_fn(const tk_lat_fn *e, const tk_lat_rec *r)
{
    return e->m == r->m && e->f == r->f && e->arity == r->arity;
}

/* The function of a call's record, added when new (the last one found is
 * tried first: a process calling one function in a loop); -1 when a bound
 * or memory refuses it. */
static int64_t fn_of(tk_lat *l, const tk_lat_rec *r)
{
    if (l->last_fn < l->nfns && same_fn(&l->fns[l->last_fn], r))
        return l->last_fn;
    int64_t fn = fn_get(l, r->m, r->f, r->arity);
    if (fn >= 0)
        l->last_fn = (uint32_t)fn;
    return fn;
}

static void on_call(tk_lat *l, uint64_t stamp, const tk_lat_rec *r)
{
    uint32_t idx;
    proc *p = proc_get(l, r->pid, &idx);
    if (p == NULL) {
        /* The process has no entry, so no call of it is followed: its
         * returns find an empty stack (unmatched). */
        l->c.over_processes++;
        return;
    }
    if (p->skipped > 0) { /* inside a call not followed */
        p->skipped++;
        return;
    }
    int64_t fn = fn_of(l, r);
    if (fn < 0) {
        l->c.over_functions++;
        p->skipped++;
        return;
    }
    frame *fr = frames_of(p);
    if (l->o.recursion == TK_LAT_OUTERMOST && p->depth > 0 &&
        (fr[p->depth - 1].fn & ~MEASURED) == (uint32_t)fn &&
        fr[p->depth - 1].rep < UINT32_MAX) {
        fr[p->depth - 1].rep++;
        l->fns[fn].nested++;
        l->c.nested++;
        return;
    }
    if (room_for_frame(l, p) != 0) {
        l->c.over_frames++;
        p->skipped++;
        return;
    }
    uint32_t measured = MEASURED;
    if (l->o.recursion == TK_LAT_OUTERMOST && p->depth > 0 && inside(l, p, idx, (uint32_t)fn)) {
        measured = 0;
        l->fns[fn].nested++;
        l->c.nested++;
    }
    fr = frames_of(p);
    fr[p->depth++] = (frame){(uint32_t)fn | measured, 0, stamp};
    l->frames++;
    if (l->o.recursion == TK_LAT_OUTERMOST)
        pushed(l, p, idx, (uint32_t)fn);
}

static void on_end(tk_lat *l, uint64_t stamp, const tk_lat_rec *r, int exception)
{
    uint32_t idx;
    proc *p = proc_find(l, r->pid, &idx);
    if (p == NULL || idle(p)) {
        l->c.unmatched++;
        return;
    }
    if (p->skipped > 0) { /* the end of a call not followed */
        p->skipped--;
        return;
    }
    frame *top = &frames_of(p)[p->depth - 1];
    uint32_t fn = top->fn & ~MEASURED;
    if (!same_fn(&l->fns[fn], r)) {
        /* Not the innermost call's function: the process lost events. */
        l->c.unmatched++;
        proc_drop(l, p, idx, 0);
        return;
    }
    if (top->rep > 0) {
        top->rep--;
        return;
    }
    frame f = *top;
    p->depth--;
    l->frames--;
    if (l->o.recursion == TK_LAT_OUTERMOST)
        popped(l, p, idx, fn);
    if (f.fn & MEASURED) {
        tk_lat_fn *e = &l->fns[fn];
        if (tk_hist_add(exception ? &e->exceptions : &e->returns, to_ns(l, f.start, stamp)) == 0)
            l->c.measured++;
        else
            l->c.no_memory++;
        if (l->done != NULL)
            l->done(l->done_ctx, r->pid, fn, f.start, stamp, exception);
    }
}

static void drop_all(tk_lat *l, int unfinished)
{
    for (uint32_t i = 0; i < l->nprocs; i++)
        if (l->procs[i].pid != 0)
            proc_drop(l, &l->procs[i], i, unfinished);
}

void tk_lat_reset(tk_lat *l)
{
    drop_all(l, 0);
}

void tk_lat_finish(tk_lat *l)
{
    drop_all(l, 1);
}

void tk_lat_record(tk_lat *l, uint64_t stamp, const tk_lat_rec *r)
{
    unsigned src = r->arity;
    switch (r->kind) {
    case TK_LAT_BLIND:
        l->c.markers++;
        if (src >= TK_LAT_SOURCES) {
            l->c.junk++;
        } else if (!l->blind[src]) {
            if (l->nblind++ == 0) {
                l->c.blind_periods++;
                tk_lat_reset(l);
            }
            l->blind[src] = 1;
        }
        return;
    case TK_LAT_SIGHTED:
        l->c.markers++;
        if (src < TK_LAT_SOURCES && l->blind[src]) {
            l->blind[src] = 0;
            l->nblind--;
        }
        return;
    case TK_LAT_EXIT: {
        uint32_t idx;
        proc *p = r->pid != 0 ? proc_find(l, r->pid, &idx) : NULL;
        l->c.exits++;
        if (p != NULL)
            proc_drop(l, p, idx, 1);
        return;
    }
    case TK_LAT_CALL:
    case TK_LAT_RETURN:
    case TK_LAT_EXCEPTION:
        break;
    default:
        l->c.junk++;
        return;
    }
    if (r->pid == 0) {
        l->c.junk++;
        return;
    }
    if (r->kind == TK_LAT_CALL)
        l->c.calls++;
    else if (r->kind == TK_LAT_RETURN)
        l->c.returns++;
    else
        l->c.exceptions++;
    if (l->nblind > 0) {
        l->c.blind++;
        return;
    }
    if (r->kind == TK_LAT_CALL)
        on_call(l, stamp, r);
    else
        on_end(l, stamp, r, r->kind == TK_LAT_EXCEPTION);
}

/* consumer.c: the consumer thread of a latency tracer.
 *
 * It takes the records out of every producer ring in stamp order and
 * hands them to tk_lat, which pairs them into the histograms; a round
 * holds the data lock for at most ROUND_LIMIT records per ring, so that
 * read/1 never waits long. A round that found little sleeps IDLE_NS.
 * close/1 asks it to stop: it takes everything left (in as many rounds
 * as that needs, again after a pause for the events the VM was recording
 * when tracing stopped), makes the calls still open unfinished, and
 * exits.
 *
 * A thread runs code of the library that started it: every thread a
 * library started is stopped before the library is unloaded (the last
 * load of its file), its tracers then taking no more events.
 */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "lat.h"
#include "tk_mem.h"

#define ROUND_LIMIT 8192          /* records per ring per round */
#define IDLE_NS 1000000           /* a round that took little sleeps 1 ms */
#define BUSY_RECORDS 1000         /* ... that is, fewer records than this */
#define GRACE_NS 2000000          /* at the stop: the last events' time */

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

void lat_consumer_round(lat_core *c)
{
    /* Events lost outside any ring (a thread past the slot table, a ring
     * that could not be made): nobody can say whose, so every stack is
     * dropped now. */
    uint64_t unplaced = atomic_load_explicit(&c->unplaced, memory_order_acquire);
    if (unplaced != c->unplaced_seen) {
        c->unplaced_seen = unplaced;
        tk_lat_reset(c->lat);
    }
    (void)tk_merge_collect(&c->merge, c->producers, ROUND_LIMIT);
    const void *p;
    size_t len;
    uint64_t stamp;
    while (tk_merge_next(&c->merge, &p, &len, &stamp)) {
        tk_lat_rec r;
        if (len != sizeof r) /* never written by this library */
            continue;
        memcpy(&r, p, sizeof r);
        tk_lat_record(c->lat, stamp, &r);
        c->taken++;
    }
}

/* One round under the lock; the records taken. */
static uint64_t round_locked(lat_core *c)
{
    enif_mutex_lock(c->lock);
    uint64_t before = c->taken;
    lat_consumer_round(c);
    uint64_t n = c->taken - before;
    enif_mutex_unlock(c->lock);
    return n;
}

/* Rounds until one finds the rings empty: a round takes at most
 * ROUND_LIMIT records of each ring, and a thread that was kept off its
 * core may be far behind. Nothing is written after the tracer is closed
 * but by callbacks that had passed that check: the loop ends. */
static void take_all(lat_core *c)
{
    for (bool more = true; more;) {
        enif_mutex_lock(c->lock);
        uint64_t before = c->taken;
        lat_consumer_round(c);
        /* (Records staged and held back by the merge's bound go out in
         * the next round.) */
        more = c->taken != before || tk_merge_staged(&c->merge) > 0;
        enif_mutex_unlock(c->lock);
    }
}

static void finish(lat_core *c)
{
    take_all(c);
    nap(GRACE_NS);
    take_all(c);
    enif_mutex_lock(c->lock);
    tk_lat_finish(c->lat);
    c->finished = true;
    enif_mutex_unlock(c->lock);
}

static void *consumer_main(void *arg)
{
    lat_core *c = arg;
    for (;;) {
        enif_mutex_lock(c->ctl);
        bool stop = c->stop, discard = c->discard;
        enif_mutex_unlock(c->ctl);
        if (discard) {
            /* Nobody else can reach the data now (the resource is gone):
             * the rings' memory goes back at once, not when a reaper
             * joins this thread (the next new/1, the library's unload). */
            lat_core_free_data(c);
            break;
        }
        if (stop) {
            finish(c);
            break;
        }
        if (round_locked(c) < BUSY_RECORDS)
            nap(IDLE_NS);
    }
    enif_mutex_lock(c->ctl);
    c->thread_exited = true;
    enif_cond_broadcast(c->cond);
    enif_mutex_unlock(c->ctl);
    return NULL;
}

/* The cores whose thread was started by this file's code and not yet
 * joined: live ones (their resource exists) and orphans. A static lock
 * and list: the same for every load of this file. */
static pthread_mutex_t cores_lock = PTHREAD_MUTEX_INITIALIZER;
static lat_core *running;

int lat_consumer_start(lat_core *c)
{
    if (enif_thread_create("tracekit_latency", &c->tid, consumer_main, c, NULL) != 0)
        return -1;
    c->thread_started = true;
    pthread_mutex_lock(&cores_lock);
    c->next = running;
    running = c;
    pthread_mutex_unlock(&cores_lock);
    return 0;
}

/* Takes c out of the list. Under cores_lock. */
static void unlink_locked(lat_core *c)
{
    for (lat_core **at = &running; *at != NULL; at = &(*at)->next)
        if (*at == c) {
            *at = c->next;
            break;
        }
    c->next = NULL;
}

/* Joins c's thread, taken out of the list by the caller (who alone
 * joins it: `joining'). The list's lock is not held while waiting.
 * Returns whether c's resource has gone meanwhile (then the caller frees
 * c: lat_consumer_orphan left it). */
static bool join(lat_core *c)
{
    enif_thread_join(c->tid, NULL);
    pthread_mutex_lock(&cores_lock);
    c->joined = true;
    bool orphan = c->discard;
    pthread_mutex_unlock(&cores_lock);
    return orphan;
}

void lat_consumer_stop(lat_core *c)
{
    bool mine = false;
    pthread_mutex_lock(&cores_lock);
    if (c->thread_started && !c->joined && !c->joining) {
        c->joining = mine = true;
        unlink_locked(c);
    }
    pthread_mutex_unlock(&cores_lock);
    /* The thread finishes the data and exits; another close waits for
     * that too. */
    enif_mutex_lock(c->ctl);
    c->stop = true;
    while (c->thread_started && !c->thread_exited)
        enif_cond_wait(c->cond, c->ctl);
    enif_mutex_unlock(c->ctl);
    if (mine)
        (void)join(c); /* (the caller holds the resource: not an orphan) */
    /* No thread (never started, or stopped when its library went away):
     * the caller finishes the data itself. */
    if (!c->finished)
        take_all(c);
    enif_mutex_lock(c->lock);
    if (!c->finished) {
        tk_lat_finish(c->lat);
        c->finished = true;
    }
    enif_mutex_unlock(c->lock);
}

/* Cores whose resource is gone: the thread is told to exit, and reaped
 * later (a destructor runs on a scheduler: it must not wait). */
void lat_consumer_orphan(lat_core *c)
{
    pthread_mutex_lock(&cores_lock);
    /* A thread that runs, or is being joined (by lat_consumer_reap), is
     * told; the reaper or joiner frees c. */
    bool free_now = !c->thread_started || c->joined;
    if (!free_now) {
        enif_mutex_lock(c->ctl);
        c->discard = true;
        enif_mutex_unlock(c->ctl);
    }
    pthread_mutex_unlock(&cores_lock);
    if (free_now)
        lat_core_free(c);
}

void lat_consumer_reap(bool all)
{
    /* The cores to join, taken out of the list under the lock and joined
     * after it. */
    lat_core *done = NULL;
    pthread_mutex_lock(&cores_lock);
    for (lat_core **at = &running; *at != NULL;) {
        lat_core *c = *at;
        enif_mutex_lock(c->ctl);
        bool orphan = c->discard, exited = c->thread_exited;
        if (all && !c->discard) {
            /* A live tracer: closed first (its events are taken by nobody
             * after), then it finishes its data. */
            atomic_store(&c->closed, true);
            c->stop = true;
        }
        enif_mutex_unlock(c->ctl);
        if (!all && !(orphan && exited)) {
            at = &c->next;
            continue;
        }
        *at = c->next;
        c->joining = true;
        c->next = done;
        done = c;
    }
    pthread_mutex_unlock(&cores_lock);
    while (done != NULL) {
        lat_core *c = done;
        done = c->next;
        c->next = NULL;
        atomic_store(&c->closed, true);
        if (join(c))
            lat_core_free(c);
    }
}

void lat_core_free_data(lat_core *c)
{
    for (unsigned i = 0; i < TK_THREAD_SLOTS; i++) {
        tk_ring *r = atomic_exchange(&c->producers[i], NULL);
        if (r != NULL) {
            tk_ring_destroy(r);
            tk_mem_aligned_free(r);
        }
    }
    for (unsigned i = 0; c->pool != NULL && i < c->pool_n; i++) {
        if (c->pool[i] != NULL) {
            tk_ring_destroy(c->pool[i]);
            tk_mem_aligned_free(c->pool[i]);
        }
    }
    tk_mem_free(c->pool);
    c->pool = NULL;
    tk_merge_destroy(&c->merge);
    tk_lat_free(c->lat);
    c->lat = NULL;
}

void lat_core_free(lat_core *c)
{
    lat_core_free_data(c);
    if (c->cond != NULL)
        enif_cond_destroy(c->cond);
    if (c->ctl != NULL)
        enif_mutex_destroy(c->ctl);
    if (c->lock != NULL)
        enif_mutex_destroy(c->lock);
    tk_mem_aligned_free(c);
}

/* bench_hot.c: the C pieces of the event hot path, one function each, for
 * instruction counts under callgrind (`make bench` runs it with
 * --toggle-collect on the run_* functions; counts do not depend on the
 * machine's load). Without valgrind it prints ns per operation instead,
 * which on a shared machine is only a rough guide. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tk_clock.h"
#include "tk_merge.h"
#include "tk_pub.h"
#include "tk_ring.h"

#define N 1000000

static tk_ring ring;
static tk_pub pub;
static _Atomic(tk_ring *) rings[4];
static volatile uint64_t sink;

/* A send event with payload none is about 40 bytes of payload. */
__attribute__((noinline)) static void run_push(long n)
{
    unsigned char payload[40];
    memset(payload, 7, sizeof payload);
    for (long i = 0; i < n; i++)
        (void)tk_ring_push(&ring, (uint64_t)i, payload, sizeof payload);
}

__attribute__((noinline)) static void run_clock(long n)
{
    uint64_t s = 0;
    for (long i = 0; i < n; i++)
        s += tk_clock_stamp();
    sink = s;
}

/* The configuration read of every enabled_* and trace_* call. */
__attribute__((noinline)) static void run_config_read(long n)
{
    uint64_t s = 0;
    for (long i = 0; i < n; i++) {
        const uint32_t *c = tk_pub_read_begin(&pub, 3);
        s += *c;
        tk_pub_read_end(&pub, 3);
    }
    sink = s;
}

/* Drain side: taking records out of a ring and merging them. */
__attribute__((noinline)) static void run_merge(tk_merge *m, long n)
{
    const void *p;
    size_t len;
    uint64_t st, s = 0;
    long got = 0;
    while (got < n) {
        tk_merge_collect(m, rings, 4000); /* as the drain NIF does */
        while (tk_merge_next(m, &p, &len, &st)) {
            s += len;
            got++;
        }
    }
    sink = s;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(void)
{
    tk_clock_init();
    uint32_t cfg = 1;
    if (tk_ring_init(&ring, 1 << 20, TK_RING_OVERWRITE) != 0 ||
        tk_pub_init(&pub, sizeof cfg, &cfg) != 0)
        return 1;
    double t0 = now_ns();
    run_push(N);
    double t1 = now_ns();
    run_clock(N);
    double t2 = now_ns();
    run_config_read(N);
    double t3 = now_ns();

    /* Merge: fill a drop ring with N records, then drain it. */
    tk_ring *src = malloc(sizeof *src);
    tk_merge m;
    if (src == NULL || tk_ring_init(src, 64 << 20, TK_RING_DROP) != 0 ||
        tk_merge_init(&m, 4) != 0)
        return 1;
    unsigned char payload[40] = {0};
    for (long i = 0; i < N; i++)
        (void)tk_ring_push(src, (uint64_t)i, payload, sizeof payload);
    atomic_store(&rings[0], src);
    double t4 = now_ns();
    run_merge(&m, N);
    double t5 = now_ns();

    printf("ns per operation (wall clock, rough): push %.1f, clock %.1f, "
           "config read %.1f, drain+merge %.1f (membarrier: %s)\n",
           (t1 - t0) / N, (t2 - t1) / N, (t3 - t2) / N, (t5 - t4) / N,
           tk_pub_gp_uses_membarrier(&pub.gp) ? "yes" : "no");
    return 0;
}

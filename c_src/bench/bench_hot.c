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
#include "tk_lat.h"
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
    unsigned char buf[TK_RING_BUF(40)];
    memset(buf, 7, sizeof buf);
    for (long i = 0; i < n; i++)
        (void)tk_ring_push(&ring, (uint64_t)i, buf + TK_RING_ROOM, 40);
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

/* A flight recorder bigger than the caches: sends as the ring holds them
 * (a payload of SEND_PAYLOAD bytes, what the encoder makes of a send of
 * {req, Pid, I}), stamps 2,500 ticks apart (about a microsecond), into
 * an overwrite ring of 32 MiB. Under callgrind's cache simulation its
 * last-level write misses per event are the lines of ring an event
 * takes. */
#ifndef SEND_PAYLOAD
#define SEND_PAYLOAD 20
#endif
static tk_ring big_ring;
__attribute__((noinline)) static void run_send_big(long n)
{
    unsigned char buf[TK_RING_BUF(SEND_PAYLOAD)];
    memset(buf, 7, sizeof buf);
    for (long i = 0; i < n; i++)
        (void)tk_ring_push(&big_ring, 2500 * (uint64_t)i, buf + TK_RING_ROOM,
                           SEND_PAYLOAD);
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

/* tracekit_latency's hot path after the state lookups: admit (enabled_*)
 * then push a 32-byte record (trace_*), a call and a return per
 * iteration, in a ring drained as it goes (never full). */
static tk_ring lat_ring;
__attribute__((noinline)) static void run_lat_call_return(long n)
{
    uint8_t blind = 0;
    tk_lat_rec call = {0x1234, 0x100, 0x200, 1, TK_LAT_CALL};
    tk_lat_rec ret = {0x1234, 0x100, 0x200, 1, TK_LAT_RETURN};
    for (long i = 0; i < n; i++) {
        if (tk_lat_admit(&lat_ring, 0, &blind))
            (void)tk_lat_push(&lat_ring, 0, &blind, (uint64_t)(2 * i), &call);
        if (tk_lat_admit(&lat_ring, 0, &blind))
            (void)tk_lat_push(&lat_ring, 0, &blind, (uint64_t)(2 * i + 1), &ret);
        if ((i & 1023) == 1023) /* (the consumer's part, outside the count) */
            atomic_store(&lat_ring.tail, atomic_load(&lat_ring.head));
    }
}

/* The consumer: merge and pair n call/return pairs of 64 processes, from
 * 2 rings, into one function's histogram. */
static _Atomic(tk_ring *) lat_rings[2];
__attribute__((noinline)) static void run_lat_consume(tk_merge *m, tk_lat *l, long n)
{
    const void *p;
    size_t len;
    uint64_t st;
    long got = 0;
    while (got < 2 * n) {
        tk_merge_collect(m, lat_rings, 8192); /* as the consumer thread does */
        while (tk_merge_next(m, &p, &len, &st)) {
            tk_lat_rec r;
            memcpy(&r, p, sizeof r);
            tk_lat_record(l, st, &r);
            got++;
        }
    }
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

    if (tk_ring_init(&big_ring, 32 << 20, TK_RING_OVERWRITE) != 0)
        return 1;
    tk_ring_touch(&big_ring);
    double tb0 = now_ns();
    run_send_big(4 * N);
    double tb1 = now_ns();

    /* Merge: fill a drop ring with N records, then drain it. */
    tk_ring *src = malloc(sizeof *src);
    tk_merge m;
    if (src == NULL || tk_ring_init(src, 64 << 20, TK_RING_DROP) != 0 ||
        tk_merge_init(&m, 4) != 0)
        return 1;
    unsigned char buf[TK_RING_BUF(40)] = {0};
    for (long i = 0; i < N; i++)
        (void)tk_ring_push(src, (uint64_t)i, buf + TK_RING_ROOM, 40);
    atomic_store(&rings[0], src);
    double t4 = now_ns();
    run_merge(&m, N);
    double t5 = now_ns();

    /* Latency: the producer's records, then the consumer's pairing. */
    if (tk_ring_init(&lat_ring, 1 << 20, TK_RING_DROP) != 0)
        return 1;
    double t6 = now_ns();
    run_lat_call_return(N);
    double t7 = now_ns();
    tk_ring *lr[2];
    for (int k = 0; k < 2; k++) {
        lr[k] = malloc(sizeof *lr[k]);
        if (lr[k] == NULL || tk_ring_init(lr[k], 128 << 20, TK_RING_DROP) != 0)
            return 1;
        atomic_store(&lat_rings[k], lr[k]);
    }
    uint8_t blind[2] = {0, 0};
    for (long i = 0; i < N; i++) { /* 64 processes, calls and returns on both rings */
        uint64_t pid = 0x1000 + 16 * (uint64_t)(i % 64);
        tk_lat_rec call = {pid, 0x100, 0x200, 1, TK_LAT_CALL};
        tk_lat_rec ret = {pid, 0x100, 0x200, 1, TK_LAT_RETURN};
        (void)tk_lat_push(lr[i & 1], (unsigned)(i & 1), &blind[i & 1], (uint64_t)(4 * i), &call);
        (void)tk_lat_push(lr[i & 1], (unsigned)(i & 1), &blind[i & 1], (uint64_t)(4 * i + 2), &ret);
    }
    tk_merge lm;
    tk_lat_opts lo = {TK_LAT_OUTERMOST, 100, 1000, 100000, 1000000000u};
    tk_lat *lat = tk_lat_new(&lo);
    if (lat == NULL || tk_merge_init(&lm, 2) != 0)
        return 1;
    double t8 = now_ns();
    run_lat_consume(&lm, lat, N);
    double t9 = now_ns();
    if (tk_lat_counts_of(lat)->measured != (uint64_t)N)
        return 1;

    printf("ns per operation (wall clock, rough): push %.1f, clock %.1f, "
           "config read %.1f, send into 32 MiB %.1f, drain+merge %.1f, "
           "latency call+return records %.1f, latency merge+pair per call %.1f "
           "(membarrier: %s)\n",
           (t1 - t0) / N, (t2 - t1) / N, (t3 - t2) / N, (tb1 - tb0) / (4 * N),
           (t5 - t4) / N, (t7 - t6) / N, (t9 - t8) / N,
           tk_pub_gp_uses_membarrier(&pub.gp) ? "yes" : "no");
    return 0;
}

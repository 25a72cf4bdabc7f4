/* Tests of the causal ordering of seq_trace events. The random test makes
 * the events with the seq_trace model (tk_seq), whose production order is
 * a true history, shuffles them and checks that the ordering recovers each
 * process's order and puts every send before its receive. */
#include "tk_seq.h"
#include "tk_seqorder.h"
#include "tk_small.h"
#include "tk_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    /* xorshift64*: deterministic across platforms. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 33) % n;
}

static tk_seqorder_event ev(tk_seqorder_kind k, int64_t lc, int64_t s,
                            uint32_t from, uint32_t to, uint32_t msg)
{
    return (tk_seqorder_event){.kind = k, .label = 1, .lastcnt = lc,
                               .serial = s, .from = from, .to = to,
                               .msg = msg};
}

/* A client (0) asks a server (1), which asks a database (2), and replies;
 * the client prints. Given in reverse, the order comes back. */
TK_TEST(seqorder_request_reply)
{
    enum { C = 0, SV = 1, DB = 2 };
    tk_seqorder_event in[] = {
        ev(TK_SEQORDER_SEND, 0, 1, C, SV, 10),
        ev(TK_SEQORDER_RECEIVE, 0, 1, C, SV, 10),
        ev(TK_SEQORDER_SEND, 1, 2, SV, DB, 11),
        ev(TK_SEQORDER_RECEIVE, 1, 2, SV, DB, 11),
        ev(TK_SEQORDER_SEND, 2, 3, DB, SV, 12),
        ev(TK_SEQORDER_RECEIVE, 2, 3, DB, SV, 12),
        ev(TK_SEQORDER_SEND, 3, 4, SV, C, 13),
        ev(TK_SEQORDER_RECEIVE, 3, 4, SV, C, 13),
        ev(TK_SEQORDER_PRINT, 4, 5, C, TK_SEQORDER_NOBODY, 14),
    };
    enum { N = sizeof in / sizeof in[0] };
    tk_seqorder_event rev[N];
    for (size_t i = 0; i < N; i++)
        rev[i] = in[N - 1 - i];
    size_t order[N];
    long match[N];
    TK_REQUIRE(tk_seqorder(rev, N, order, match) == 0);
    for (size_t k = 0; k < N; k++)
        TK_CHECK_EQ(order[k], N - 1 - k);
    /* rev[8] is the client's send, rev[7] its receive by the server. */
    TK_CHECK_EQ(match[8], 7);
    TK_CHECK_EQ(match[7], 8);
    TK_CHECK_EQ(match[0], -1); /* the print */
}

/* A process that sent serial 10 and then received an old message (serial
 * 3): its next send carries LastCnt 3, which puts the receive after the
 * send of 10 although its serial is smaller. */
TK_TEST(seqorder_old_message)
{
    enum { P = 0, Q = 1, X = 2 };
    tk_seqorder_event in[] = {
        ev(TK_SEQORDER_SEND, 0, 3, Q, P, 20),     /* Q sends early      */
        ev(TK_SEQORDER_SEND, 0, 10, P, X, 21),    /* P sends serial 10  */
        ev(TK_SEQORDER_RECEIVE, 0, 3, Q, P, 20),  /* P receives it late */
        ev(TK_SEQORDER_SEND, 3, 11, P, X, 22),    /* P's next send      */
    };
    size_t order[4];
    long match[4];
    TK_REQUIRE(tk_seqorder(in, 4, order, match) == 0);
    TK_CHECK_EQ(order[0], 0);
    TK_CHECK_EQ(order[1], 1);
    TK_CHECK_EQ(order[2], 2);
    TK_CHECK_EQ(order[3], 3);
    TK_CHECK_EQ(match[0], 2);
}

/* The parent's first send after a spawn carries LastCnt 16 * s + 15 for
 * the spawn_reply's serial s: recognised as following that receive. */
TK_TEST(seqorder_spawn_reply_quirk)
{
    enum { PA = 0, CH = 1, X = 2 };
    tk_seqorder_event in[] = {
        ev(TK_SEQORDER_SEND, 47, 48, PA, X, 33),
        ev(TK_SEQORDER_RECEIVE, 1, 2, CH, PA, 32),
        ev(TK_SEQORDER_SEND, 1, 2, CH, PA, 32),
        ev(TK_SEQORDER_RECEIVE, 0, 1, PA, CH, 31),
        ev(TK_SEQORDER_SEND, 0, 1, PA, CH, 31),
    };
    in[1].spawn_reply = true;
    size_t order[5];
    long match[5];
    TK_REQUIRE(tk_seqorder(in, 5, order, match) == 0);
    size_t want[] = {4, 3, 2, 1, 0};
    for (int k = 0; k < 5; k++)
        TK_CHECK_EQ(order[k], want[k]);
}

/* A receive of serial s comes after the sends and prints of its process
 * with a serial up to s: s itself included (after the receive the clock
 * is at least s, so a later send would carry more). Here process P sent
 * {5, 5} (lastcnt no lower than serial: inconsistent input, as after a
 * reset_trace) and received {4, 5}: the send goes first. Counting only
 * the serials below s would put the receive before the send, and let it
 * claim the send's run start as if the send came after it. (In a
 * consistent history the two coincide: the output priority already puts
 * a send before a receive of the same serial.) */
TK_TEST(seqorder_receive_after_send_of_its_serial)
{
    enum { P = 1, X = 2, Y = 3 };
    tk_seqorder_event in[] = {
        ev(TK_SEQORDER_SEND, 4, 5, X, P, 20),
        ev(TK_SEQORDER_RECEIVE, 4, 5, X, P, 20),
        ev(TK_SEQORDER_SEND, 5, 5, P, Y, 21),
    };
    size_t order[3];
    long match[3];
    TK_REQUIRE(tk_seqorder(in, 3, order, match) == 0);
    /* P's send, X's send (both free, by owner), then the receive. */
    TK_CHECK_EQ(order[0], 2);
    TK_CHECK_EQ(order[1], 0);
    TK_CHECK_EQ(order[2], 1);
    TK_CHECK_EQ(match[0], 1);
    TK_CHECK_EQ(match[2], -1);
}

TK_TEST(seqorder_empty)
{
    size_t order[1];
    long match[1];
    TK_CHECK_EQ(tk_seqorder(NULL, 0, order, match), 0);
}

/* ---- random histories made by the model ---------------------------------- */

#define MAXP 12

typedef struct {
    tk_seq_world *w;
    uint32_t procs[MAXP];
    int nprocs;
    bool needs_advance[MAXP]; /* received since its last send or print */
    int64_t seen[MAXP][64];   /* LastCnt values its receives produced */
    int nseen[MAXP];
    uint64_t next_content;
} hist;

/* A receive shows only through the LastCnt of the process's next send or
 * print: two receives producing the same LastCnt in one process cannot be
 * told apart, so the random histories avoid them (and the value the
 * lastcnt already has). Records the value when it is new. */
static bool fresh_lastcnt(hist *h, int i, int64_t v)
{
    uint64_t clock, lastcnt;
    (void)tk_seq_counters(h->w, h->procs[i], &clock, &lastcnt);
    if (tk_small_of_word(lastcnt) == v || h->nseen[i] == 64)
        return false;
    for (int k = 0; k < h->nseen[i]; k++)
        if (h->seen[i][k] == v)
            return false;
    h->seen[i][h->nseen[i]++] = v;
    return true;
}

static tk_seqorder_kind seqorder_kind(tk_seq_ev_kind k)
{
    return k == TK_SEQ_EV_SEND      ? TK_SEQORDER_SEND
           : k == TK_SEQ_EV_RECEIVE ? TK_SEQORDER_RECEIVE
                                    : TK_SEQORDER_PRINT;
}

static uint32_t owner_of(const tk_seq_event *e)
{
    return e->kind == TK_SEQ_EV_RECEIVE ? e->to : e->from;
}

static void advance(hist *h, int i)
{
    bool passed;
    (void)tk_seq_print(h->w, h->procs[i], NULL, h->next_content++, &passed);
    h->needs_advance[i] = false;
}

static void random_step(hist *h)
{
    int i = (int)rnd((uint32_t)h->nprocs);
    uint32_t p = h->procs[i];
    if (!tk_seq_proc_alive(h->w, p))
        return;
    uint32_t m;
    switch (rnd(6)) {
    case 0:
    case 1: { /* send */
        uint32_t q = h->procs[rnd((uint32_t)h->nprocs)];
        if (tk_seq_proc_alive(h->w, q)) {
            (void)tk_seq_send(h->w, p, q, h->next_content++, &m);
            h->needs_advance[i] = false;
        }
        break;
    }
    case 2:
    case 3: { /* receive one queued message, if unambiguous */
        if (h->needs_advance[i])
            break;
        uint32_t q[64];
        long nq = tk_seq_queue(h->w, p, q, 64);
        if (nq <= 0)
            break;
        uint32_t id = q[rnd((uint32_t)(nq < 64 ? nq : 64))];
        tk_seq_carry carry;
        tk_seq_token t;
        (void)tk_seq_msg_info(h->w, id, NULL, NULL, NULL, &carry, &t);
        if (carry != TK_SEQ_CARRY_TOKEN || !fresh_lastcnt(h, i, t.serial))
            break;
        (void)tk_seq_receive(h->w, p, id);
        h->needs_advance[i] = true;
        break;
    }
    case 4: /* print */
        advance(h, i);
        break;
    case 5: { /* spawn */
        if (h->needs_advance[i] || h->nprocs == MAXP)
            break;
        /* The request's serial is this process's clock + 1, the reply's
         * one more (see tk_seq_spawn). */
        uint64_t clock, lastcnt;
        (void)tk_seq_counters(h->w, p, &clock, &lastcnt);
        int64_t reply = tk_small_of_word(clock + 2);
        if (!fresh_lastcnt(h, i, tk_small_of_word(tk_small_tagged(reply))))
            break;
        uint32_t c;
        if (tk_seq_spawn(h->w, p, false, &c) == TK_SEQ_OK) {
            /* The child received the request. */
            h->seen[h->nprocs][0] = tk_small_of_word(clock + 1);
            h->nseen[h->nprocs] = 1;
            h->procs[h->nprocs] = c;
            h->needs_advance[h->nprocs++] = false;
            h->needs_advance[i] = true; /* the spawn_reply was received */
        }
        break;
    }
    }
}

TK_TEST(seqorder_random_histories)
{
    long rounds = tk_test_iters(300, 200);
    rng_state = 0x9E3779B97F4A7C15ULL;
    for (long round = 0; round < rounds; round++) {
        hist h = {.w = tk_seq_world_new(TK_SEQ_TRACER_ACCEPT),
                  .next_content = 1};
        TK_REQUIRE(h.w != NULL);
        h.nprocs = 2 + (int)rnd(3);
        for (int i = 0; i < h.nprocs; i++) {
            TK_REQUIRE(tk_seq_proc_new(h.w, &h.procs[i]) == TK_SEQ_OK);
            (void)tk_seq_set_label(h.w, h.procs[i], 1, NULL);
            (void)tk_seq_set_flag(h.w, h.procs[i], TK_SEQ_SEND, true, NULL);
            (void)tk_seq_set_flag(h.w, h.procs[i], TK_SEQ_RECEIVE, true, NULL);
            (void)tk_seq_set_flag(h.w, h.procs[i], TK_SEQ_PRINT, true, NULL);
        }
        int steps = 5 + (int)rnd(40);
        for (int s = 0; s < steps; s++)
            random_step(&h);
        for (int i = 0; i < h.nprocs; i++)
            if (h.needs_advance[i])
                advance(&h, i);

        size_t n;
        const tk_seq_event *e = tk_seq_events(h.w, &n);
        tk_seqorder_event *in = calloc(n + 1, sizeof *in);
        size_t *perm = calloc(n + 1, sizeof *perm);  /* input -> history */
        size_t *order = calloc(n + 1, sizeof *order);
        size_t *pos = calloc(n + 1, sizeof *pos);    /* history -> output */
        long *match = calloc(n + 1, sizeof *match);
        TK_REQUIRE(in && perm && order && pos && match);
        for (size_t i = 0; i < n; i++)
            perm[i] = i;
        for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
            size_t j = rnd((uint32_t)i), t = perm[i - 1];
            perm[i - 1] = perm[j];
            perm[j] = t;
        }
        for (size_t i = 0; i < n; i++) {
            const tk_seq_event *x = &e[perm[i]];
            /* Message identity: its kind and content (unique here). */
            uint32_t msg = (uint32_t)(x->content * 8 + x->msg_kind);
            in[i] = (tk_seqorder_event){
                seqorder_kind(x->kind), x->label, x->lastcnt, x->serial, x->from, x->to, msg,
                x->kind == TK_SEQ_EV_RECEIVE &&
                    x->msg_kind == TK_SEQ_MSG_SPAWN_REPLY};
        }
        TK_REQUIRE(tk_seqorder(in, n, order, match) == 0);
        for (size_t k = 0; k < n; k++)
            pos[perm[order[k]]] = k;
        int bad = 0;
        for (size_t a = 0; a < n && !bad; a++) {
            /* Each process's events keep their order. */
            for (size_t b = a + 1; b < n; b++)
                if (owner_of(&e[a]) == owner_of(&e[b])) {
                    if (pos[a] > pos[b])
                        bad = 1;
                    break;
                }
            /* A send is matched with the receive of the same transfer,
             * which comes after it. */
            if (e[a].kind != TK_SEQ_EV_SEND)
                continue;
            for (size_t b = a + 1; b < n; b++)
                if (e[b].kind == TK_SEQ_EV_RECEIVE &&
                    e[b].content == e[a].content &&
                    e[b].msg_kind == e[a].msg_kind) {
                    if (pos[b] < pos[a])
                        bad = 2;
                    break;
                }
        }
        for (size_t i = 0; i < n; i++) {
            const tk_seq_event *x = &e[perm[i]];
            if (match[i] < 0) {
                if (x->kind == TK_SEQ_EV_RECEIVE)
                    bad = 3; /* every receive has its send here */
                continue;
            }
            const tk_seq_event *y = &e[perm[match[i]]];
            if (y->content != x->content || y->msg_kind != x->msg_kind ||
                y->kind == x->kind)
                bad = 4;
        }
        if (bad)
            tk_test_fail(__FILE__, __LINE__, "round %ld: rule %d broken", round,
                         bad);
        free(in);
        free(perm);
        free(order);
        free(pos);
        free(match);
        tk_seq_world_free(h.w);
        if (bad)
            return;
    }
}

/* Tests of the seq_trace model against reference values taken from the VM
 * (OTP's seq_trace_SUITE, reproduced on OTP 27 and 29) and facts observed
 * there. */
#include "tk_seq.h"
#include "tk_test.h"

#include <stdint.h>

#define S TK_SEQ_SEND
#define R TK_SEQ_RECEIVE
#define P TK_SEQ_PRINT

static tk_seq_world *world(tk_seq_tracer tracer, uint32_t *ids, int n)
{
    tk_seq_world *w = tk_seq_world_new(tracer);
    for (int i = 0; w != NULL && i < n; i++)
        if (tk_seq_proc_new(w, &ids[i]) != TK_SEQ_OK)
            return NULL;
    return w;
}

static tk_seq_token token(const tk_seq_world *w, uint32_t id)
{
    tk_seq_token t = {0};
    (void)tk_seq_get_token(w, id, &t);
    return t;
}

/* Checks event i against {kind, {lastcnt, serial}, from, to, msg kind}. */
static int ev_is(const tk_seq_world *w, size_t i, tk_seq_ev_kind kind,
                 int64_t lastcnt, int64_t serial, uint32_t from, uint32_t to,
                 tk_seq_msg_kind mkind)
{
    size_t n;
    const tk_seq_event *e = tk_seq_events(w, &n);
    return i < n && e[i].kind == kind && e[i].lastcnt == lastcnt &&
           e[i].serial == serial && e[i].from == from && e[i].to == to &&
           e[i].msg_kind == mkind;
}

static size_t nevents(const tk_seq_world *w)
{
    size_t n;
    (void)tk_seq_events(w, &n);
    return n;
}

TK_TEST(seq_small_integers)
{
    TK_CHECK(tk_small_fits(TK_SMALL_MAX));
    TK_CHECK(tk_small_fits(TK_SMALL_MIN));
    TK_CHECK(!tk_small_fits(TK_SMALL_MAX + 1));
    TK_CHECK(!tk_small_fits((int64_t)1 << 60));
    TK_CHECK_EQ(tk_small_of_word((uint64_t)1 << 59), TK_SMALL_MIN);
    TK_CHECK_EQ(tk_small_of_word((uint64_t)1 << 60), 0);
    TK_CHECK_EQ(tk_small_of_word(((uint64_t)1 << 63) + 31), 31);
    TK_CHECK(tk_small_unsigned(-1) == ((uint64_t)1 << 60) - 1);
    TK_CHECK_EQ(tk_small_tagged(1), 31);
    TK_CHECK_EQ(tk_small_tagged(2), 47);
}

/* seq_trace_SUITE token_set_get: [] -> set label returns 0 -> each flag
 * set returns false -> {F,L,0,Self,0} -> set serial {3,5} returns {0,0}
 * -> {F,L,5,Self,3}. */
TK_TEST(seq_token_set_get)
{
    uint32_t id;
    tk_seq_world *w = world(TK_SEQ_TRACER_NONE, &id, 1);
    TK_REQUIRE(w != NULL);
    TK_CHECK(!token(w, id).present);
    uint32_t old_label = 99;
    TK_CHECK_EQ(tk_seq_set_label(w, id, 17, &old_label), TK_SEQ_OK);
    TK_CHECK_EQ(old_label, 0);
    unsigned flags[] = {S, R, P, TK_SEQ_TIMESTAMP};
    for (int i = 0; i < 4; i++) {
        bool old = true;
        TK_CHECK_EQ(tk_seq_set_flag(w, id, flags[i], true, &old), TK_SEQ_OK);
        TK_CHECK(!old);
    }
    tk_seq_token t = token(w, id);
    TK_CHECK(t.present);
    TK_CHECK_EQ(t.flags, 15);
    TK_CHECK_EQ(t.label, 17);
    TK_CHECK_EQ(t.serial, 0);
    TK_CHECK_EQ(t.from, id);
    TK_CHECK_EQ(t.lastcnt, 0);
    int64_t op = -1, oc = -1;
    TK_CHECK_EQ(tk_seq_set_serial(w, id, 3, 5, &op, &oc), TK_SEQ_OK);
    TK_CHECK_EQ(op, 0);
    TK_CHECK_EQ(oc, 0);
    t = token(w, id);
    TK_CHECK_EQ(t.serial, 5);
    TK_CHECK_EQ(t.lastcnt, 3);
    uint64_t clock, lastcnt;
    TK_CHECK_EQ(tk_seq_counters(w, id, &clock, &lastcnt), TK_SEQ_OK);
    TK_CHECK_EQ(clock, 5);
    TK_CHECK_EQ(lastcnt, 3);
    /* Flags read back, and a flag set twice answers true. */
    tk_seq_answer a;
    TK_CHECK_EQ(tk_seq_get_component(w, id, P, &a), TK_SEQ_OK);
    TK_CHECK(a.kind == TK_SEQ_ANS_BOOL && a.flag);
    bool old = false;
    TK_CHECK_EQ(tk_seq_set_flag(w, id, P, false, &old), TK_SEQ_OK);
    TK_CHECK(old);
    TK_CHECK_EQ(token(w, id).flags, 11);
    tk_seq_world_free(w);
}

TK_TEST(seq_serial_range_and_new_token_lastcnt)
{
    uint32_t id;
    tk_seq_world *w = world(TK_SEQ_TRACER_NONE, &id, 1);
    TK_REQUIRE(w != NULL);
    /* {2^60, 0} is not small: badarg, and no token is made. */
    TK_CHECK_EQ(tk_seq_set_serial(w, id, (int64_t)1 << 60, 0, NULL, NULL),
                TK_SEQ_BADARG);
    TK_CHECK(!token(w, id).present);
    TK_CHECK_EQ(tk_seq_set_serial(w, id, TK_SMALL_MAX, TK_SMALL_MAX,
                                  NULL, NULL),
                TK_SEQ_OK);
    /* A new token takes the process's lastcnt: set serial {3,0}, clear,
     * set serial again: the old value is {3, 0}. */
    TK_CHECK_EQ(tk_seq_set_serial(w, id, 3, 5, NULL, NULL), TK_SEQ_OK);
    tk_seq_token old;
    TK_CHECK_EQ(tk_seq_clear_token(w, id, &old), TK_SEQ_OK);
    TK_CHECK(old.present && old.serial == 5);
    int64_t op, oc;
    TK_CHECK_EQ(tk_seq_set_serial(w, id, -1, -1, &op, &oc), TK_SEQ_OK);
    TK_CHECK_EQ(op, 3);
    TK_CHECK_EQ(oc, 0);
    uint64_t clock, lastcnt;
    (void)tk_seq_counters(w, id, &clock, &lastcnt);
    TK_CHECK(clock == ((uint64_t)1 << 60) - 1);
    tk_seq_world_free(w);
}

/* The serial wraps past 2^59 - 1 into negative smalls; the clock is a
 * full word that keeps counting (seen: {2^59-1, -2^59} on a send). */
TK_TEST(seq_serial_wraps)
{
    uint32_t ids[2];
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, ids, 2);
    TK_REQUIRE(w != NULL);
    TK_CHECK_EQ(tk_seq_set_serial(w, ids[0], TK_SMALL_MAX,
                                  TK_SMALL_MAX, NULL, NULL),
                TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_flag(w, ids[0], S, true, NULL), TK_SEQ_OK);
    uint32_t m;
    TK_CHECK_EQ(tk_seq_send(w, ids[0], ids[1], 1, &m), TK_SEQ_OK);
    TK_CHECK(ev_is(w, 0, TK_SEQ_EV_SEND, TK_SMALL_MAX, TK_SMALL_MIN,
                   ids[0], ids[1], TK_SEQ_MSG_USER));
    /* From -1 the clock goes to 2^60, shown as 0; a later message with
     * serial 5 does not lower it, so the next serial shows 1. */
    TK_CHECK_EQ(tk_seq_set_serial(w, ids[0], 0, -1, NULL, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_send(w, ids[0], ids[0], 2, &m), TK_SEQ_OK);
    TK_CHECK_EQ(token(w, ids[0]).serial, 0);
    TK_CHECK_EQ(tk_seq_receive(w, ids[0], m), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_serial(w, ids[1], 0, 4, NULL, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_send(w, ids[1], ids[0], 3, &m), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_receive(w, ids[0], m), TK_SEQ_OK);
    TK_CHECK_EQ(token(w, ids[0]).serial, 5);
    TK_CHECK_EQ(tk_seq_send(w, ids[0], ids[0], 4, &m), TK_SEQ_OK);
    TK_CHECK_EQ(token(w, ids[0]).serial, 1);
    TK_CHECK_EQ(token(w, ids[0]).lastcnt, 5);
    tk_seq_world_free(w);
}

/* seq_trace_SUITE exit trace: {send,{0,1},Self,R,{before,exit}} then
 * {send,{1,2},R,Self,{'EXIT',R,Reason}}. */
TK_TEST(seq_exit_signal_serials)
{
    uint32_t self, r;
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, &self, 1);
    TK_REQUIRE(w != NULL);
    TK_REQUIRE(tk_seq_spawn(w, self, true, &r) == TK_SEQ_OK); /* no token */
    TK_CHECK_EQ(nevents(w), 0);
    TK_CHECK_EQ(tk_seq_set_flag(w, self, S, true, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_flag(w, self, R, true, NULL), TK_SEQ_OK);
    uint32_t m;
    TK_CHECK_EQ(tk_seq_send(w, self, r, 100, &m), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_receive(w, r, m), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_exit(w, r, 200), TK_SEQ_OK);
    TK_CHECK(!tk_seq_proc_alive(w, r));
    TK_CHECK(ev_is(w, 0, TK_SEQ_EV_SEND, 0, 1, self, r, TK_SEQ_MSG_USER));
    TK_CHECK(ev_is(w, 1, TK_SEQ_EV_RECEIVE, 0, 1, self, r, TK_SEQ_MSG_USER));
    TK_CHECK(ev_is(w, 2, TK_SEQ_EV_SEND, 1, 2, r, self, TK_SEQ_MSG_EXIT));
    size_t n;
    const tk_seq_event *e = tk_seq_events(w, &n);
    TK_REQUIRE(n == 3);
    TK_CHECK_EQ(e[2].content, 200);
    TK_CHECK_EQ(e[2].msg_from, r);
    /* The 'EXIT' message carries r's token into self. */
    uint32_t q[4];
    TK_REQUIRE(tk_seq_queue(w, self, q, 4) == 1);
    TK_CHECK_EQ(tk_seq_receive(w, self, q[0]), TK_SEQ_OK);
    TK_CHECK(ev_is(w, 3, TK_SEQ_EV_RECEIVE, 1, 2, r, self, TK_SEQ_MSG_EXIT));
    tk_seq_token t = token(w, self);
    TK_CHECK(t.present && t.from == r && t.serial == 2 && t.lastcnt == 1);
    tk_seq_world_free(w);
}

/* An exit signal from a process without token carries []: receiving the
 * 'EXIT' message empties the receiver's token. */
TK_TEST(seq_exit_without_token_clears)
{
    uint32_t self, c;
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, &self, 1);
    TK_REQUIRE(w != NULL);
    TK_REQUIRE(tk_seq_spawn(w, self, true, &c) == TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_label(w, self, 4, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_exit(w, c, 1), TK_SEQ_OK);
    uint32_t q[2];
    TK_REQUIRE(tk_seq_queue(w, self, q, 2) == 1);
    TK_CHECK_EQ(tk_seq_receive(w, self, q[0]), TK_SEQ_OK);
    TK_CHECK(!token(w, self).present);
    TK_CHECK_EQ(nevents(w), 0);
    tk_seq_world_free(w);
}

/* Spawning with a token: spawn_request send/receive {0,1}, spawn_reply
 * send/receive {1,2}, the child's next message {1,3}. The parent keeps
 * its own token but its counters become the reply serial's tagged word. */
TK_TEST(seq_spawn_serials)
{
    uint32_t parent, child;
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, &parent, 1);
    TK_REQUIRE(w != NULL);
    TK_CHECK_EQ(tk_seq_set_label(w, parent, 1, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_flag(w, parent, S, true, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_flag(w, parent, R, true, NULL), TK_SEQ_OK);
    TK_REQUIRE(tk_seq_spawn(w, parent, false, &child) == TK_SEQ_OK);
    TK_CHECK(ev_is(w, 0, TK_SEQ_EV_SEND, 0, 1, parent, child,
                   TK_SEQ_MSG_SPAWN_REQUEST));
    TK_CHECK(ev_is(w, 1, TK_SEQ_EV_RECEIVE, 0, 1, parent, child,
                   TK_SEQ_MSG_SPAWN_REQUEST));
    TK_CHECK(ev_is(w, 2, TK_SEQ_EV_SEND, 1, 2, child, parent,
                   TK_SEQ_MSG_SPAWN_REPLY));
    TK_CHECK(ev_is(w, 3, TK_SEQ_EV_RECEIVE, 1, 2, child, parent,
                   TK_SEQ_MSG_SPAWN_REPLY));
    tk_seq_token pt = token(w, parent), ct = token(w, child);
    TK_CHECK(pt.from == parent && pt.serial == 1 && pt.lastcnt == 0);
    TK_CHECK(ct.from == child && ct.serial == 2 && ct.lastcnt == 1);
    uint32_t m;
    TK_CHECK_EQ(tk_seq_send(w, child, parent, 7, &m), TK_SEQ_OK);
    TK_CHECK(ev_is(w, 4, TK_SEQ_EV_SEND, 1, 3, child, parent,
                   TK_SEQ_MSG_USER));
    /* Parent: lastcnt = clock = 16 * 2 + 15 = 47. */
    TK_CHECK_EQ(tk_seq_send(w, parent, parent, 8, &m), TK_SEQ_OK);
    TK_CHECK(ev_is(w, 5, TK_SEQ_EV_SEND, 47, 48, parent, parent,
                   TK_SEQ_MSG_USER));
    tk_seq_world_free(w);
}

/* Without a token, spawning makes no event and the child has no token. */
TK_TEST(seq_spawn_without_token)
{
    uint32_t parent, child;
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, &parent, 1);
    TK_REQUIRE(w != NULL);
    TK_REQUIRE(tk_seq_spawn(w, parent, false, &child) == TK_SEQ_OK);
    TK_CHECK(!token(w, child).present);
    TK_CHECK_EQ(nevents(w), 0);
    uint64_t c, l;
    TK_CHECK_EQ(tk_seq_counters(w, parent, &c, &l), TK_SEQ_OK);
    TK_CHECK(c == 0 && l == 0);
    tk_seq_world_free(w);
}

/* print/2 reports only when the label matches exactly; print/1 and a
 * matching print/2 advance the serial even without the print flag. */
TK_TEST(seq_print_label_filtering)
{
    uint32_t id;
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, &id, 1);
    TK_REQUIRE(w != NULL);
    bool passed = true;
    TK_CHECK_EQ(tk_seq_print(w, id, NULL, 1, &passed), TK_SEQ_OK);
    TK_CHECK(!passed); /* no token */
    TK_CHECK_EQ(tk_seq_set_label(w, id, 3, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_print(w, id, NULL, 2, &passed), TK_SEQ_OK);
    TK_CHECK(passed);
    TK_CHECK_EQ(token(w, id).serial, 1);
    TK_CHECK_EQ(nevents(w), 0); /* no print flag */
    TK_CHECK_EQ(tk_seq_set_flag(w, id, P, true, NULL), TK_SEQ_OK);
    uint32_t other = 4, same = 3;
    TK_CHECK_EQ(tk_seq_print(w, id, &other, 3, &passed), TK_SEQ_OK);
    TK_CHECK(!passed);
    TK_CHECK_EQ(token(w, id).serial, 1);
    TK_CHECK_EQ(tk_seq_print(w, id, &same, 4, &passed), TK_SEQ_OK);
    TK_CHECK(passed);
    TK_CHECK_EQ(tk_seq_print(w, id, NULL, 5, &passed), TK_SEQ_OK);
    TK_CHECK(ev_is(w, 0, TK_SEQ_EV_PRINT, 0, 2, id, TK_SEQ_NOBODY,
                   TK_SEQ_MSG_PRINT));
    TK_CHECK(ev_is(w, 1, TK_SEQ_EV_PRINT, 0, 3, id, TK_SEQ_NOBODY,
                   TK_SEQ_MSG_PRINT));
    size_t n;
    const tk_seq_event *e = tk_seq_events(w, &n);
    TK_REQUIRE(n == 2);
    TK_CHECK(e[0].content == 4 && e[1].content == 5 && e[0].label == 3);
    tk_seq_world_free(w);
}

/* reset_trace: tokens, counters and queued messages' tokens cleared. */
TK_TEST(seq_reset)
{
    uint32_t ids[2];
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, ids, 2);
    TK_REQUIRE(w != NULL);
    TK_CHECK_EQ(tk_seq_set_serial(w, ids[0], 4, 9, NULL, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_serial(w, ids[1], 0, 100, NULL, NULL), TK_SEQ_OK);
    uint32_t m;
    TK_CHECK_EQ(tk_seq_send(w, ids[1], ids[0], 1, &m), TK_SEQ_OK);
    tk_seq_reset(w);
    for (int i = 0; i < 2; i++) {
        uint64_t c, l;
        TK_CHECK(!token(w, ids[i]).present);
        TK_CHECK_EQ(tk_seq_counters(w, ids[i], &c, &l), TK_SEQ_OK);
        TK_CHECK(c == 0 && l == 0);
    }
    TK_CHECK_EQ(tk_seq_set_label(w, ids[0], 2, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_receive(w, ids[0], m), TK_SEQ_OK);
    TK_CHECK(!token(w, ids[0]).present); /* the message now carries [] */
    tk_seq_world_free(w);
}

/* A system tracer that refuses stops the serials; with no system tracer
 * at all they advance without events. */
TK_TEST(seq_tracer_refusal)
{
    uint32_t ids[2];
    tk_seq_world *w = world(TK_SEQ_TRACER_REFUSE, ids, 2);
    TK_REQUIRE(w != NULL);
    TK_CHECK_EQ(tk_seq_set_flag(w, ids[0], S, true, NULL), TK_SEQ_OK);
    uint32_t m;
    TK_CHECK_EQ(tk_seq_send(w, ids[0], ids[1], 1, &m), TK_SEQ_OK);
    TK_CHECK_EQ(token(w, ids[0]).serial, 0);
    tk_seq_set_tracer(w, TK_SEQ_TRACER_NONE);
    TK_CHECK_EQ(tk_seq_send(w, ids[0], ids[1], 2, &m), TK_SEQ_OK);
    TK_CHECK_EQ(token(w, ids[0]).serial, 1);
    TK_CHECK_EQ(nevents(w), 0);
    /* Refused, a spawn still sets the parent's counters to the reply's
     * tagged word: the reply serial is still 1, so lastcnt becomes 31. */
    tk_seq_set_tracer(w, TK_SEQ_TRACER_REFUSE);
    uint32_t c;
    TK_REQUIRE(tk_seq_spawn(w, ids[0], false, &c) == TK_SEQ_OK);
    TK_CHECK_EQ(token(w, c).serial, 1);
    TK_CHECK_EQ(tk_seq_clear_token(w, ids[0], NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_set_label(w, ids[0], 1, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(token(w, ids[0]).lastcnt, 31);
    tk_seq_world_free(w);
}

/* Sends to a dead process leave no trace; untokened messages leave the
 * receiver's token alone; get_token/1 answers. */
TK_TEST(seq_dead_untokened_and_components)
{
    uint32_t ids[2];
    tk_seq_world *w = world(TK_SEQ_TRACER_ACCEPT, ids, 2);
    TK_REQUIRE(w != NULL);
    tk_seq_answer a;
    TK_CHECK_EQ(tk_seq_get_component(w, ids[0], TK_SEQ_COMP_SPAWN, &a),
                TK_SEQ_OK);
    TK_CHECK(a.kind == TK_SEQ_ANS_BOOL && !a.flag);
    TK_CHECK_EQ(tk_seq_get_component(w, ids[0], TK_SEQ_COMP_SERIAL, &a),
                TK_SEQ_OK);
    TK_CHECK(a.kind == TK_SEQ_ANS_NIL);
    TK_CHECK_EQ(tk_seq_get_component(w, ids[0], 0x800, &a), TK_SEQ_BADARG);
    TK_CHECK_EQ(tk_seq_set_flag(w, ids[0], S, true, NULL), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_get_component(w, ids[0], TK_SEQ_COMP_SPAWN, &a),
                TK_SEQ_BADARG);
    TK_CHECK_EQ(tk_seq_get_component(w, ids[0], TK_SEQ_COMP_SERIAL, &a),
                TK_SEQ_OK);
    TK_CHECK(a.kind == TK_SEQ_ANS_SERIAL && a.serial == 0);
    TK_CHECK_EQ(tk_seq_exit(w, ids[1], 0), TK_SEQ_OK);
    uint32_t m = 99;
    TK_CHECK_EQ(tk_seq_send(w, ids[0], ids[1], 1, &m), TK_SEQ_OK);
    TK_CHECK_EQ(m, 0);
    TK_CHECK_EQ(token(w, ids[0]).serial, 0);
    TK_CHECK_EQ(nevents(w), 0);
    TK_CHECK_EQ(tk_seq_deliver_untokened(w, ids[0], 2, &m), TK_SEQ_OK);
    TK_CHECK_EQ(tk_seq_receive(w, ids[0], m), TK_SEQ_OK);
    TK_CHECK(token(w, ids[0]).present);
    TK_CHECK_EQ(tk_seq_receive(w, ids[0], m), TK_SEQ_NOMSG);
    tk_seq_world_free(w);
}

/* set_token/1 sets the label first: a bad serial raises badarg with the
 * label already changed; From always becomes the process itself. */
TK_TEST(seq_set_token_tuple)
{
    uint32_t ids[2];
    tk_seq_world *w = world(TK_SEQ_TRACER_NONE, ids, 2);
    TK_REQUIRE(w != NULL);
    TK_CHECK_EQ(tk_seq_set_token(w, ids[0], S | TK_SEQ_MONOTONIC, 5, 7, 2),
                TK_SEQ_OK);
    tk_seq_token t = token(w, ids[0]);
    TK_CHECK(t.present && t.flags == (S | TK_SEQ_MONOTONIC) && t.label == 5 &&
             t.serial == 7 && t.lastcnt == 2 && t.from == ids[0]);
    TK_CHECK_EQ(tk_seq_set_token(w, ids[1], S, 6, (int64_t)1 << 60, 0),
                TK_SEQ_BADARG);
    t = token(w, ids[1]);
    TK_CHECK(t.present && t.label == 6 && t.flags == 0);
    TK_CHECK(tk_seq_ts_of(TK_SEQ_MONOTONIC | TK_SEQ_STRICT_MONOTONIC) ==
             TK_SEQ_TS_STRICT_MONOTONIC);
    TK_CHECK(tk_seq_ts_of(TK_SEQ_ALL_FLAGS) == TK_SEQ_TS_TIMESTAMP);
    tk_seq_world_free(w);
}

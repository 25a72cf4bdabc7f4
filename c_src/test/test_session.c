/* Tests of the trace session model: sessions, tracees, inheritance. The
 * expected values are what OTP 27.3 and 29.1 answer to the same steps. */
#include "tk_session.h"
#include "tk_test.h"

#define NAME_A 101
#define NAME_B 102
#define TRACER 7

static int mk(tk_ses_model *m, uint64_t name)
{
    long w;
    return tk_ses_create(m, name, TRACER, 1, &w);
}

static long trace1(tk_ses_model *m, int sid, int tid, int how, uint32_t f)
{
    long n = -100;
    int r = tk_ses_trace(m, sid, tk_ses_tracee_kind(m, tid) == TK_SES_PORT,
                         TK_SPEC_TRACEE, tid, how, f, 0, 0, &n);
    return r == TK_SES_OK ? n : r;
}

static uint32_t flags_of(tk_ses_model *m, int sid, int tid)
{
    tk_ses_answer a;
    if (tk_ses_info(m, sid, TK_W_TRACEE, tid, TK_K_FLAGS, &a) != TK_SES_OK)
        return 0xdeadbeef;
    return (uint32_t)a.value.n;
}

/* session_info(What) as a compact number: the session ids as decimal
 * digits in order (legacy is 0), e.g. 120 for [1, 2, legacy]. */
static long sinfo(tk_ses_model *m, int what, int id)
{
    int sids[TK_SES_MAX_SESSIONS], n;
    int r = tk_ses_session_info(m, what, id, sids, TK_SES_MAX_SESSIONS, &n);
    if (r != TK_SES_OK)
        return r;
    long v = 0;
    for (int i = 0; i < n; i++)
        v = v * 10 + sids[i];
    return v + 1000000 * n; /* keeps leading legacy zeros visible */
}

TK_TEST(session_create_destroy)
{
    tk_ses_model *m = tk_ses_new(29);
    TK_REQUIRE(m);
    long w = -1;
    TK_CHECK_EQ(tk_ses_create(m, NAME_A, TRACER, 0, &w), TK_SES_BADARG);
    int a = tk_ses_create(m, NAME_A, TRACER, 1, &w);
    TK_CHECK_EQ(a, 1);
    TK_CHECK_EQ(w, 0);
    int b = tk_ses_create(m, NAME_A, TRACER, 1, &w); /* names may repeat */
    TK_CHECK_EQ(b, 2);
    TK_CHECK_EQ(w, 1);
    TK_CHECK_EQ(sinfo(m, TK_W_ALL, 0), 3000120);
    TK_CHECK_EQ(sinfo(m, TK_W_SEND, 0), 3000120);
    TK_CHECK_EQ(sinfo(m, TK_W_NEW_PROCS, 0), 0);
    TK_CHECK_EQ(tk_ses_destroy(m, a, 0), 1);
    TK_CHECK_EQ(tk_ses_destroy(m, a, 0), 0);
    TK_CHECK_EQ(tk_ses_destroy(m, a, 1), TK_SES_BADARG);
    TK_CHECK_EQ(tk_ses_destroy(m, TK_SES_LEGACY, 0), TK_SES_BADARG);
    TK_CHECK_EQ(sinfo(m, TK_W_ALL, 0), 2000020);
    tk_ses_answer ans;
    TK_CHECK_EQ(tk_ses_info(m, a, TK_W_NEW_PROCS, 0, TK_K_FLAGS, &ans),
                TK_SES_BADARG);
    long n;
    TK_CHECK_EQ(tk_ses_trace(m, a, 0, TK_SPEC_NEW, 0, 1, TK_TF_SEND, 0, 0, &n),
                TK_SES_BADARG);
    tk_ses_free(m);
}

TK_TEST(session_process_flags)
{
    tk_ses_model *m = tk_ses_new(29);
    int s = mk(m, NAME_A);
    int p = tk_ses_spawn(m, TK_SES_NONE, 0);
    int port = tk_ses_open_port(m);
    TK_CHECK_EQ(trace1(m, s, p, 1, TK_TF_ALL), 1);
    TK_CHECK_EQ(flags_of(m, s, p), TK_TF_ALL); /* port flags included */
    TK_CHECK_EQ(tk_ses_union(m, p), TK_TF_ALL);
    TK_CHECK_EQ(trace1(m, s, p, 0, TK_TF_ALL), 1);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, p), 0); /* ref gone */
    TK_CHECK_EQ(trace1(m, s, p, 1, TK_TF_PORTS | TK_TF_RUNNING_PORTS), 1);
    TK_CHECK_EQ(flags_of(m, s, p), TK_TF_PORTS | TK_TF_RUNNING_PORTS);
    TK_CHECK_EQ(trace1(m, s, port, 1, TK_TF_CALL | TK_TF_PROCS), 1);
    TK_CHECK_EQ(flags_of(m, s, port), TK_TF_CALL | TK_TF_PROCS);
    /* cpu_timestamp is never accepted through the trace module. */
    TK_CHECK_EQ(trace1(m, s, p, 1, TK_TF_CPU_TIMESTAMP), TK_SES_BADARG);
    long n;
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_ALL, 0, 1, TK_TF_CPU_TIMESTAMP,
                             0, 40, &n), TK_SES_BADARG);
    /* A pid to port/4, a port to process/4, bad how, bad flags. */
    TK_CHECK_EQ(tk_ses_trace(m, s, 1, TK_SPEC_TRACEE, p, 1, TK_TF_SEND, 0, 0,
                             &n), TK_SES_BADARG);
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_TRACEE, port, 1, TK_TF_SEND, 0,
                             0, &n), TK_SES_BADARG);
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_TRACEE, p, -1, TK_TF_SEND, 0, 0,
                             &n), TK_SES_BADARG);
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_TRACEE, p, 1, TK_TF_SEND, 1, 0,
                             &n), TK_SES_BADARG);
    /* Dead tracees: badarg to change, `undefined' to ask. */
    tk_ses_exit(m, p);
    TK_CHECK_EQ(trace1(m, s, p, 0, TK_TF_SEND), TK_SES_BADARG);
    tk_ses_answer a;
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_TRACEE, p, TK_K_FLAGS, &a),
                TK_SES_UNDEFINED);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_TRACEE, p, TK_K_TRACED, &a),
                TK_SES_BADARG);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, p), TK_SES_UNDEFINED);
    tk_ses_free(m);
}

TK_TEST(session_existing_all_new)
{
    tk_ses_model *m = tk_ses_new(27);
    int s = mk(m, NAME_A);
    int p = tk_ses_spawn(m, TK_SES_NONE, 0);
    int port = tk_ses_open_port(m);
    long n = -1;
    /* Flags that mean nothing to processes: no process is visited. */
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_EXISTING, 0, 1, 0, 0, 43, &n),
                TK_SES_OK);
    TK_CHECK_EQ(n, 0);
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_EXISTING, 0, 1, TK_TF_PORTS, 0,
                             43, &n), TK_SES_OK);
    TK_CHECK_EQ(n, 0);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, p), 0);
    /* With a process flag every process gets the whole mask. */
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_EXISTING, 0, 1,
                             TK_TF_SEND | TK_TF_PORTS, 0, 43, &n), TK_SES_OK);
    TK_CHECK_EQ(n, 43);
    TK_CHECK_EQ(flags_of(m, s, p), TK_TF_SEND | TK_TF_PORTS);
    TK_CHECK_EQ(flags_of(m, s, port), 0);
    /* new keeps only process flags; any `off' drops all defaults. */
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_NEW, 0, 1,
                             TK_TF_SEND | TK_TF_PROCS | TK_TF_PORTS, 0, 43, &n),
                TK_SES_OK);
    TK_CHECK_EQ(n, 0);
    tk_ses_answer a;
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_NEW_PROCS, 0, TK_K_FLAGS, &a), 0);
    TK_CHECK_EQ(a.value.n, TK_TF_SEND | TK_TF_PROCS);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_NEW_PROCS, 0, TK_K_TRACER, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_TRACER);
    TK_CHECK_EQ(sinfo(m, TK_W_NEW_PROCS, 0), 1000001);
    TK_CHECK_EQ(tk_ses_trace(m, s, 0, TK_SPEC_NEW, 0, 0, TK_TF_SEND, 0, 43,
                             &n), TK_SES_OK);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_NEW_PROCS, 0, TK_K_FLAGS, &a), 0);
    TK_CHECK_EQ(a.value.n, 0);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_NEW_PROCS, 0, TK_K_TRACER, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_NIL);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_NEW_PROCS, 0, TK_K_TRACED, &a),
                TK_SES_BADARG);
    /* Ports: port/4 all with send reaches the ports and the port defaults. */
    TK_CHECK_EQ(tk_ses_trace(m, s, 1, TK_SPEC_ALL, 0, 1,
                             TK_TF_SEND | TK_TF_CALL, 0, 2, &n), TK_SES_OK);
    TK_CHECK_EQ(n, 2);
    TK_CHECK_EQ(flags_of(m, s, port), TK_TF_SEND | TK_TF_CALL);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_NEW_PORTS, 0, TK_K_FLAGS, &a), 0);
    TK_CHECK_EQ(a.value.n, TK_TF_SEND);
    int port2 = tk_ses_open_port(m);
    TK_CHECK_EQ(flags_of(m, s, port2), TK_TF_SEND);
    int p2 = tk_ses_spawn(m, TK_SES_NONE, 0);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, p2), 0);
    tk_ses_free(m);
}

TK_TEST(session_spawn_inheritance)
{
    tk_ses_model *m = tk_ses_new(29);
    int s1 = mk(m, NAME_A), s2 = mk(m, NAME_B);
    int a = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, s1, a, 1, TK_TF_SOS | TK_TF_SEND);
    trace1(m, s2, a, 1, TK_TF_SOS1 | TK_TF_RECEIVE);
    int b = tk_ses_spawn(m, a, 0);
    TK_CHECK_EQ(flags_of(m, s1, b), TK_TF_SOS | TK_TF_SEND);
    TK_CHECK_EQ(flags_of(m, s2, b), TK_TF_RECEIVE);
    TK_CHECK_EQ(flags_of(m, s2, a), TK_TF_RECEIVE);
    int c = tk_ses_spawn(m, a, 0);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, c), 1000001);
    /* Both spawn flags: both go on both sides after the first spawn. */
    int d = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, s1, d, 1, TK_TF_SOS | TK_TF_SOS1 | TK_TF_PROCS);
    int e = tk_ses_spawn(m, d, 0);
    TK_CHECK_EQ(flags_of(m, s1, e), TK_TF_PROCS);
    TK_CHECK_EQ(flags_of(m, s1, d), TK_TF_PROCS);
    /* set_on_first_spawn alone leaves refs without flags on both. */
    int f = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, s2, f, 1, TK_TF_SOS1);
    int g = tk_ses_spawn(m, f, 0);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, f), 1000002);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, g), 1000002);
    TK_CHECK_EQ(flags_of(m, s2, g), 0);
    TK_CHECK_EQ(tk_ses_union(m, g), 0);
    tk_ses_answer ans;
    TK_CHECK_EQ(tk_ses_info(m, s2, TK_W_TRACEE, g, TK_K_TRACER, &ans), 0);
    TK_CHECK_EQ(ans.value.kind, TK_V_TRACER);
    /* Such a ref goes once process/4 touches it. */
    TK_CHECK_EQ(trace1(m, s2, g, 1, 0), 1);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, g), 0);
    tk_ses_free(m);
}

TK_TEST(session_spawn_order_and_defaults)
{
    tk_ses_model *m = tk_ses_new(27);
    int x = mk(m, 1), y = mk(m, 2), z = mk(m, 3);
    long n;
    int e = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, z, e, 1, TK_TF_SOS | TK_TF_SEND);
    trace1(m, y, e, 1, TK_TF_SOS | TK_TF_RECEIVE);
    tk_ses_trace(m, x, 0, TK_SPEC_NEW, 0, 1, TK_TF_PROCS, 0, 0, &n);
    tk_ses_trace(m, y, 0, TK_SPEC_NEW, 0, 1, TK_TF_CALL, 0, 0, &n);
    int f = tk_ses_spawn(m, e, 0);
    /* Defaults (newest session first: y, x), then the parent's refs, newest
     * first (y, z); the parent's flags replace y's defaults. */
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, f), 3000213);
    TK_CHECK_EQ(flags_of(m, x, f), TK_TF_PROCS);
    TK_CHECK_EQ(flags_of(m, y, f), TK_TF_SOS | TK_TF_RECEIVE);
    TK_CHECK_EQ(flags_of(m, z, f), TK_TF_SOS | TK_TF_SEND);
    /* A parent traced without spawn flags passes nothing. */
    int g = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, y, g, 1, TK_TF_SEND);
    int h = tk_ses_spawn(m, g, 0);
    TK_CHECK_EQ(flags_of(m, y, h), TK_TF_CALL);
    tk_ses_free(m);
}

TK_TEST(session_link_inheritance)
{
    tk_ses_model *m = tk_ses_new(29);
    int x = mk(m, 1), y = mk(m, 2), z = mk(m, 3);
    int a = tk_ses_spawn(m, TK_SES_NONE, 0), b = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, y, a, 1, TK_TF_SOL | TK_TF_SEND);
    trace1(m, z, a, 1, TK_TF_SOL1 | TK_TF_SEND);
    trace1(m, x, a, 1, TK_TF_SOL | TK_TF_RECEIVE);
    TK_CHECK_EQ(tk_ses_link(m, a, b), TK_SES_OK);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, b), 3000231); /* a's ref order */
    TK_CHECK_EQ(flags_of(m, z, b), TK_TF_SEND);
    TK_CHECK_EQ(flags_of(m, z, a), TK_TF_SEND);
    /* The other side linking gives nothing; relinking neither. */
    int c = tk_ses_spawn(m, TK_SES_NONE, 0);
    tk_ses_link(m, c, a);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, c), 0);
    trace1(m, x, b, 0, TK_TF_ALL);
    tk_ses_link(m, a, b);
    TK_CHECK_EQ(flags_of(m, x, b), 0);
    tk_ses_unlink(m, b, a);
    tk_ses_link(m, a, b);
    TK_CHECK_EQ(flags_of(m, x, b), TK_TF_SOL | TK_TF_RECEIVE);
    /* Linking to oneself does nothing. */
    int d = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, x, d, 1, TK_TF_SOL1 | TK_TF_SEND);
    tk_ses_link(m, d, d);
    TK_CHECK_EQ(flags_of(m, x, d), TK_TF_SOL1 | TK_TF_SEND);
    /* Link flags are added to what the target has. */
    int e = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, x, e, 1, TK_TF_RECEIVE | TK_TF_TIMESTAMP);
    int f = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, x, f, 1, TK_TF_SOL | TK_TF_SEND);
    tk_ses_link(m, f, e);
    TK_CHECK_EQ(flags_of(m, x, e),
                TK_TF_SOL | TK_TF_SEND | TK_TF_RECEIVE | TK_TF_TIMESTAMP);
    /* An exit removes links: linking again inherits again. */
    tk_ses_exit(m, e);
    TK_CHECK_EQ(tk_ses_link(m, f, e), TK_SES_BADARG);
    tk_ses_free(m);
}

TK_TEST(session_spawn_link)
{
    tk_ses_model *m = tk_ses_new(29);
    int a = mk(m, 1), b = mk(m, 2), c = mk(m, 3);
    long n;
    tk_ses_trace(m, c, 0, TK_SPEC_NEW, 0, 1, TK_TF_CALL, 0, 0, &n);
    int p = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, a, p, 1, TK_TF_SOS | TK_TF_SEND);
    trace1(m, b, p, 1, TK_TF_SOL | TK_TF_RECEIVE);
    int q = tk_ses_spawn(m, p, 1);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, q), 3000321);
    int p2 = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, b, p2, 1, TK_TF_SOL | TK_TF_RECEIVE);
    trace1(m, a, p2, 1, TK_TF_SOS | TK_TF_SEND);
    int q2 = tk_ses_spawn(m, p2, 1);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, q2), 3000312);
    /* spawn_link passes on all of the parent's flags (here with the
     * defaults it got itself)... */
    int p3 = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, c, p3, 1, TK_TF_SOL | TK_TF_RECEIVE);
    int q3 = tk_ses_spawn(m, p3, 1);
    TK_CHECK_EQ(flags_of(m, c, q3), TK_TF_SOL | TK_TF_CALL | TK_TF_RECEIVE);
    /* ... and they replace the child's defaults, where link/1 adds. */
    int d = mk(m, 4);
    int p6 = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, d, p6, 1, TK_TF_SOL);
    tk_ses_trace(m, d, 0, TK_SPEC_NEW, 0, 1, TK_TF_SOS | TK_TF_SEND, 0, 0, &n);
    int q6 = tk_ses_spawn(m, p6, 1);
    TK_CHECK_EQ(flags_of(m, d, q6), TK_TF_SOL);
    int q7 = tk_ses_spawn(m, p6, 0);
    TK_CHECK_EQ(flags_of(m, d, q7), TK_TF_SOS | TK_TF_SEND);
    tk_ses_link(m, p6, q7);
    TK_CHECK_EQ(flags_of(m, d, q7), TK_TF_SOL | TK_TF_SOS | TK_TF_SEND);
    /* First-spawn and first-link together: both sides end with the rest. */
    int p4 = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, a, p4, 1, TK_TF_SOS1 | TK_TF_SOL1 | TK_TF_SEND);
    int q4 = tk_ses_spawn(m, p4, 1);
    TK_CHECK_EQ(flags_of(m, a, p4), TK_TF_SEND);
    TK_CHECK_EQ(flags_of(m, a, q4), TK_TF_SEND);
    /* Spawn flag and first-link: the spawn flag stays on both. */
    int p5 = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, a, p5, 1, TK_TF_SOS | TK_TF_SOL1 | TK_TF_SEND);
    int q5 = tk_ses_spawn(m, p5, 1);
    TK_CHECK_EQ(flags_of(m, a, p5), TK_TF_SOS | TK_TF_SEND);
    TK_CHECK_EQ(flags_of(m, a, q5), TK_TF_SOS | TK_TF_SEND);
    tk_ses_free(m);
}

TK_TEST(session_destroy_strips_refs)
{
    tk_ses_model *m = tk_ses_new(29);
    int s1 = mk(m, 1), s2 = mk(m, 2);
    int p = tk_ses_spawn(m, TK_SES_NONE, 0);
    trace1(m, s1, p, 1, TK_TF_SEND);
    trace1(m, s2, p, 1, TK_TF_CALL);
    TK_CHECK_EQ(tk_ses_union(m, p), TK_TF_SEND | TK_TF_CALL);
    TK_CHECK_EQ(tk_ses_destroy(m, s2, 0), 1);
    TK_CHECK_EQ(tk_ses_union(m, p), TK_TF_SEND);
    TK_CHECK_EQ(sinfo(m, TK_W_TRACEE, p), 1000001);
    TK_CHECK_EQ(trace1(m, s2, p, 1, TK_TF_SEND), TK_SES_BADARG);
    TK_CHECK_EQ(trace1(m, TK_SES_LEGACY, p, 1, TK_TF_SEND), TK_SES_LIMIT);
    tk_ses_free(m);
}

TK_TEST(session_flag_names)
{
    uint32_t all = 0;
    for (int i = 0; i < TK_SES_NFLAG_NAMES; i++) {
        TK_CHECK_EQ(tk_ses_flag_bit(tk_ses_flag_names[i].name),
                    tk_ses_flag_names[i].bit);
        TK_CHECK((all & tk_ses_flag_names[i].bit) == 0);
        all |= tk_ses_flag_names[i].bit;
    }
    TK_CHECK_EQ(all, TK_TF_ALL);
    TK_CHECK_EQ(tk_ses_flag_bit("all"), TK_TF_ALL);
    TK_CHECK_EQ(tk_ses_flag_bit("cpu_timestamp"), TK_TF_CPU_TIMESTAMP);
    TK_CHECK_EQ(tk_ses_flag_bit("nope"), 0);
    TK_CHECK_EQ(TK_TF_PROC_FLAGS & TK_TF_PORTS, 0);
    TK_CHECK((TK_TF_PROC_FLAGS & TK_TF_SEND) != 0);
    TK_CHECK((TK_TF_PORT_FLAGS & TK_TF_CALL) == 0);
    TK_CHECK_EQ(tk_ses_fflag_bit("call_memory"), TK_FF_MEMORY);
    TK_CHECK_EQ(tk_ses_fflag_bit("flags"), 0);
}

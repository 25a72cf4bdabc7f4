/* Tests of the trace session model's function, on_load and event patterns.
 * The module `fm' has the shape of this Erlang module:
 *   -export([a/0, a/1, b/1, c/0]).  plus l/1, module_info/0,1 and two funs
 * which is what OTP 27.3 and 29.1 were asked about. */
#include "tk_session.h"
#include "tk_test.h"

#include <stddef.h>

enum { M_FM = 1, M_OTHER = 2 };
enum { F_A = 10, F_B, F_C, F_L, F_MI, F_FUN, F_LC, F_NONE };
#define TRACER 7
#define MS1 501
#define MS2 502

static int fid_a0, fid_a1, fid_b1, fid_l1;

static tk_ses_model *fm_model(int release)
{
    tk_ses_model *m = tk_ses_new(release);
    fid_a0 = tk_ses_add_function(m, M_FM, F_A, 0, 1);
    fid_a1 = tk_ses_add_function(m, M_FM, F_A, 1, 1);
    fid_b1 = tk_ses_add_function(m, M_FM, F_B, 1, 1);
    tk_ses_add_function(m, M_FM, F_C, 0, 1);
    fid_l1 = tk_ses_add_function(m, M_FM, F_L, 1, 0);
    tk_ses_add_function(m, M_FM, F_MI, 0, 1);
    tk_ses_add_function(m, M_FM, F_MI, 1, 1);
    tk_ses_add_function(m, M_FM, F_FUN, 1, 0);
    tk_ses_add_function(m, M_FM, F_LC, 1, 0);
    return m;
}

static int mk(tk_ses_model *m)
{
    long w;
    return tk_ses_create(m, 1, TRACER, 1, &w);
}

static tk_ses_mfa mfa(uint64_t mod, uint64_t name, long arity)
{
    tk_ses_mfa p = {mod, name, arity, 0, 0, 0};
    if (name == 0)
        p.name_wild = 1;
    if (arity < 0)
        p.arity_wild = 1;
    return p;
}

static long fn(tk_ses_model *m, int sid, tk_ses_mfa p, long ms, uint32_t ff)
{
    long n = -100;
    int r = tk_ses_function(m, sid, TK_FT_MFA, &p, ms, ff, 0, &n);
    return r == TK_SES_OK ? n : r;
}

static tk_ses_value item(tk_ses_model *m, int sid, int fid, int key)
{
    tk_ses_answer a;
    tk_ses_value bad = {-1, 0};
    if (tk_ses_info(m, sid, TK_W_FUNC, fid, key, &a) != TK_SES_OK)
        return bad;
    return a.value;
}

static int kind(tk_ses_model *m, int sid, int fid, int key)
{
    return item(m, sid, fid, key).kind;
}

static long sinfo_func(tk_ses_model *m, int fid)
{
    int sids[TK_SES_MAX_SESSIONS], n;
    int r = tk_ses_session_info(m, TK_W_FUNC, fid, sids, TK_SES_MAX_SESSIONS,
                                &n);
    if (r != TK_SES_OK)
        return r;
    long v = 0;
    for (int i = 0; i < n; i++)
        v = v * 10 + sids[i];
    return v;
}

TK_TEST(session_fun_counts_and_exclusivity)
{
    tk_ses_model *m = fm_model(29);
    int s = mk(m), s2 = mk(m);
    TK_CHECK_EQ(kind(m, s, fid_a1, TK_K_ALL), TK_V_FALSE);
    TK_CHECK_EQ(kind(m, s, -1, TK_K_TRACED), TK_V_UNDEFINED);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, 0, -1), TK_MS_TRUE, TK_FF_GLOBAL), 6);
    TK_CHECK_EQ(kind(m, s, fid_a1, TK_K_TRACED), TK_V_GLOBAL);
    TK_CHECK_EQ(kind(m, s, fid_a1, TK_K_MATCH_SPEC), TK_V_NIL);
    TK_CHECK_EQ(kind(m, s, fid_a1, TK_K_META), TK_V_FALSE);
    TK_CHECK_EQ(kind(m, s, fid_l1, TK_K_TRACED), TK_V_FALSE);
    TK_CHECK_EQ(kind(m, s2, fid_a1, TK_K_ALL), TK_V_FALSE);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, 0, -1), TK_MS_FALSE, TK_FF_GLOBAL), 6);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, 0, -1), TK_MS_TRUE, TK_FF_LOCAL), 9);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, -1), TK_MS_TRUE, TK_FF_LOCAL), 2);
    /* Global on one function replaces its local tracing only. */
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 1), TK_MS_TRUE, 0), 1);
    TK_CHECK_EQ(kind(m, s, fid_a1, TK_K_TRACED), TK_V_GLOBAL);
    TK_CHECK_EQ(kind(m, s, fid_a0, TK_K_TRACED), TK_V_LOCAL);
    /* Global on a local function matches nothing but clears its
     * breakpoints. */
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_L, 1), TK_MS_TRUE, TK_FF_GLOBAL), 0);
    TK_CHECK_EQ(kind(m, s, fid_l1, TK_K_ALL), TK_V_FALSE);
    /* Badargs. */
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_TRUE,
                   TK_FF_GLOBAL | TK_FF_LOCAL), TK_SES_BADARG);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), MS1, TK_FF_COUNT), TK_SES_BADARG);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), MS1, TK_FF_TIME), TK_SES_BADARG);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_BAD, 0), TK_SES_BADARG);
    tk_ses_mfa bad = mfa(M_FM, 0, 0);
    bad.arity_wild = 0;
    TK_CHECK_EQ(fn(m, s, bad, TK_MS_TRUE, 0), TK_SES_BADARG);
    long n;
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_MFA, &bad, TK_MS_TRUE, 0, 1, &n),
                TK_SES_BADARG);
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_BAD, NULL, TK_MS_TRUE, 0, 0, &n),
                TK_SES_BADARG);
    TK_CHECK_EQ(fn(m, s, mfa(M_OTHER, F_A, 0), TK_MS_TRUE, 0), 0);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 300), TK_MS_TRUE, 0), 0);
    tk_ses_free(m);
}

TK_TEST(session_fun_meta_count_info)
{
    for (int rel = 27; rel <= 29; rel += 2) {
        tk_ses_model *m = fm_model(rel);
        int s = mk(m);
        TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_TRUE, TK_FF_LOCAL), 1);
        /* meta alone: [] before OTP 29, false since; false within all. */
        TK_CHECK_EQ(kind(m, s, fid_a0, TK_K_META),
                    rel >= 29 ? TK_V_FALSE : TK_V_NIL);
        tk_ses_answer a;
        TK_CHECK_EQ(tk_ses_info(m, s, TK_W_FUNC, fid_a0, TK_K_ALL, &a), 0);
        TK_CHECK_EQ(a.nitems, 7);
        TK_CHECK_EQ(a.items[0].key, TK_K_TRACED);
        TK_CHECK_EQ(a.items[2].key, TK_K_META);
        TK_CHECK_EQ(a.items[2].value.kind, TK_V_FALSE);
        TK_CHECK_EQ(a.items[4].key, TK_K_CALL_MEMORY);
        TK_CHECK_EQ(a.items[6].key, TK_K_CALL_COUNT);
        TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), MS1, TK_FF_META | TK_FF_LOCAL),
                    1);
        tk_ses_value v = item(m, s, fid_a0, TK_K_META);
        TK_CHECK_EQ(v.kind, TK_V_TRACER);
        TK_CHECK_EQ(v.n, TRACER);
        v = item(m, s, fid_a0, TK_K_META_MATCH_SPEC);
        TK_CHECK_EQ(v.kind, TK_V_MS);
        TK_CHECK_EQ(v.n, MS1);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_MATCH_SPEC).n, MS1);
        /* Counting. */
        TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_TRUE, TK_FF_COUNT), 1);
        tk_ses_call(m, fid_a0);
        tk_ses_call(m, fid_a0);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_CALL_COUNT).n, 2);
        TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), MS2, TK_FF_COUNT | TK_FF_LOCAL),
                    1);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_CALL_COUNT).n, 0);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_MATCH_SPEC).n, MS2);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_META_MATCH_SPEC).n, MS1);
        tk_ses_call(m, fid_a0);
        TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_PAUSE, TK_FF_COUNT), 1);
        tk_ses_call(m, fid_a0);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_CALL_COUNT).n, 1);
        TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_RESTART, TK_FF_COUNT), 1);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_CALL_COUNT).n, 0);
        tk_ses_call(m, fid_a0);
        TK_CHECK_EQ(item(m, s, fid_a0, TK_K_CALL_COUNT).n, 1);
        /* Item checks: OTP 29 rejects bad items even for untraced
         * functions; before, those answered {Item, false}. */
        TK_CHECK_EQ(kind(m, s, fid_a0, TK_K_FLAGS), -1);
        TK_CHECK_EQ(kind(m, s, fid_b1, TK_K_FLAGS),
                    rel >= 29 ? -1 : TK_V_FALSE);
        TK_CHECK_EQ(kind(m, s, -1, TK_K_OTHER),
                    rel >= 29 ? -1 : TK_V_UNDEFINED);
        tk_ses_free(m);
    }
}

TK_TEST(session_fun_restart_pause_without_counters)
{
    tk_ses_model *m = fm_model(29);
    int s = mk(m), s2 = mk(m);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_TRUE, TK_FF_LOCAL), 1);
    TK_CHECK_EQ(fn(m, s2, mfa(M_FM, F_A, 0), TK_MS_RESTART, TK_FF_COUNT), 1);
    TK_CHECK_EQ(kind(m, s2, fid_a0, TK_K_ALL), TK_V_FALSE);
    TK_CHECK_EQ(sinfo_func(m, fid_a0), 1);
    /* On a breakpoint without the counter, pause (like restart) starts it,
     * running. */
    TK_CHECK_EQ(fn(m, s2, mfa(M_FM, F_L, 1), TK_MS_TRUE, TK_FF_LOCAL), 1);
    TK_CHECK_EQ(fn(m, s2, mfa(M_FM, F_L, 1), TK_MS_PAUSE, TK_FF_COUNT), 1);
    tk_ses_call(m, fid_l1);
    TK_CHECK_EQ(item(m, s2, fid_l1, TK_K_CALL_COUNT).kind, TK_V_INT);
    TK_CHECK_EQ(item(m, s2, fid_l1, TK_K_CALL_COUNT).n, 1);
    TK_CHECK_EQ(fn(m, s2, mfa(M_FM, F_L, 1), TK_MS_FALSE,
                   TK_FF_LOCAL | TK_FF_COUNT), 1);
    /* restart/pause with global (or no) flags set global tracing. */
    TK_CHECK_EQ(fn(m, s2, mfa(M_FM, F_A, 1), TK_MS_PAUSE, TK_FF_GLOBAL), 1);
    TK_CHECK_EQ(kind(m, s2, fid_a1, TK_K_TRACED), TK_V_GLOBAL);
    /* restart with local sets local tracing without a match spec. */
    TK_CHECK_EQ(fn(m, s2, mfa(M_FM, F_B, 1), TK_MS_RESTART, TK_FF_LOCAL), 1);
    TK_CHECK_EQ(kind(m, s2, fid_b1, TK_K_TRACED), TK_V_LOCAL);
    TK_CHECK_EQ(kind(m, s2, fid_b1, TK_K_MATCH_SPEC), TK_V_NIL);
    /* Order of sessions: code breakpoints, then global, each oldest first. */
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 1), TK_MS_TRUE, 0), 1);
    int s3 = mk(m);
    TK_CHECK_EQ(fn(m, s3, mfa(M_FM, F_A, 1), TK_MS_TRUE, TK_FF_LOCAL), 1);
    TK_CHECK_EQ(sinfo_func(m, fid_a1), 321);
    TK_CHECK_EQ(fn(m, s2, mfa(M_FM, F_A, 0), TK_MS_TRUE, TK_FF_LOCAL), 1);
    TK_CHECK_EQ(fn(m, s3, mfa(M_FM, F_A, 0), TK_MS_TRUE, TK_FF_LOCAL), 1);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_FALSE, TK_FF_LOCAL), 1);
    TK_CHECK_EQ(fn(m, s, mfa(M_FM, F_A, 0), TK_MS_TRUE, TK_FF_COUNT), 1);
    TK_CHECK_EQ(sinfo_func(m, fid_a0), 231);
    TK_CHECK_EQ(sinfo_func(m, fid_l1), 0);
    TK_CHECK_EQ(sinfo_func(m, -1), TK_SES_UNDEFINED);
    TK_CHECK_EQ(tk_ses_destroy(m, s, 0), 1);
    TK_CHECK_EQ(sinfo_func(m, fid_a0), 23);
    TK_CHECK_EQ(kind(m, s2, fid_a1, TK_K_TRACED), TK_V_GLOBAL);
    tk_ses_free(m);
}

TK_TEST(session_fun_events)
{
    tk_ses_model *m = fm_model(27);
    int s = mk(m);
    tk_ses_answer a;
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_SEND, 0, TK_K_MATCH_SPEC, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_TRUE);
    long n = -1;
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_SEND, NULL, MS1, 0, 0, &n), 0);
    TK_CHECK_EQ(n, 1);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_SEND, 0, TK_K_MATCH_SPEC, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_MS);
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_RECEIVE, NULL, TK_MS_FALSE, 0, 0,
                                &n), 0);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_RECEIVE, 0, TK_K_MATCH_SPEC, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_FALSE);
    int sids[8], k;
    TK_CHECK_EQ(tk_ses_session_info(m, TK_W_RECEIVE, 0, sids, 8, &k), 0);
    TK_CHECK_EQ(k, 1);
    TK_CHECK_EQ(sids[0], TK_SES_LEGACY);
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_SEND, NULL, TK_MS_RESTART, 0, 0,
                                &n), TK_SES_BADARG);
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_SEND, NULL, TK_MS_TRUE,
                                TK_FF_GLOBAL, 0, &n), TK_SES_BADARG);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_SEND, 0, TK_K_FLAGS, &a),
                TK_SES_BADARG);
    tk_ses_free(m);
}

TK_TEST(session_fun_on_load)
{
    tk_ses_model *m = fm_model(29);
    int s = mk(m);
    long n = -1;
    tk_ses_answer a;
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_ON_LOAD, 0, TK_K_FLAGS, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_FALSE); /* off: any item is false */
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_ON_LOAD, NULL, TK_MS_TRUE,
                                TK_FF_LOCAL, 0, &n), 0);
    TK_CHECK_EQ(n, 0);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_ON_LOAD, 0, TK_K_TRACED, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_LOCAL);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_ON_LOAD, 0, TK_K_ALL, &a), 0);
    TK_CHECK_EQ(a.nitems, 5);
    TK_CHECK_EQ(a.items[1].value.kind, TK_V_NIL);
    TK_CHECK_EQ(a.items[4].key, TK_K_CALL_COUNT);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_ON_LOAD, 0, TK_K_FLAGS, &a),
                TK_SES_BADARG);
    int sids[8], k;
    TK_CHECK_EQ(tk_ses_session_info(m, TK_W_ON_LOAD, 0, sids, 8, &k), 0);
    TK_CHECK_EQ(k, 1);
    /* Global with a match spec, then meta: `all' still shows the match
     * spec that `match_spec' alone no longer reports. */
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_ON_LOAD, NULL, MS1, 0, 0, &n), 0);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_ON_LOAD, 0, TK_K_TRACED, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_GLOBAL);
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_ON_LOAD, NULL, TK_MS_TRUE,
                                TK_FF_META, 0, &n), 0);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_ON_LOAD, 0, TK_K_MATCH_SPEC, &a), 0);
    TK_CHECK_EQ(a.value.kind, TK_V_FALSE);
    TK_CHECK_EQ(tk_ses_info(m, s, TK_W_ON_LOAD, 0, TK_K_ALL, &a), 0);
    TK_CHECK_EQ(a.items[1].value.kind, TK_V_MS);
    TK_CHECK_EQ(a.items[2].value.kind, TK_V_TRACER);
    TK_CHECK_EQ(tk_ses_function(m, s, TK_FT_ON_LOAD, NULL, TK_MS_FALSE,
                                TK_FF_META, 0, &n), 0);
    TK_CHECK_EQ(tk_ses_session_info(m, TK_W_ON_LOAD, 0, sids, 8, &k), 0);
    TK_CHECK_EQ(k, 0);
    tk_ses_free(m);
}

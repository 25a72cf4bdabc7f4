#include "tk_bp.h"
#include "tk_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#define CODE TK_BP_SITE_CODE
#define EXPORT TK_BP_SITE_EXPORT
#define CNT (TK_BP_COUNT | TK_BP_COUNT_ACTIVE)

static tk_bp *new_model(unsigned nfuncs)
{
    tk_bp *m = malloc(sizeof *m);
    if (m != NULL && tk_bp_init(m, nfuncs, TK_PUB_AUTO) != 0) {
        free(m);
        m = NULL;
    }
    return m;
}

static void free_model(tk_bp *m)
{
    tk_bp_destroy(m);
    free(m);
}

/* trace:function(S, F, Op, Cats) on one function, the whole sequence. */
static int pattern(tk_bp *m, unsigned s, unsigned f, tk_bp_op op,
                   uint32_t cats)
{
    tk_bp_begin(m, s);
    int r = tk_bp_stage_pattern(m, f, op, cats, 0, 0, 0);
    tk_bp_finish(m);
    return r;
}

/* Local calls of f by a process traced in no session. */
static int calls(tk_bp *m, unsigned f, int n)
{
    int visited = 0;
    for (int i = 0; i < n; i++)
        visited = tk_bp_call(m, 0, f, NULL, NULL, 0);
    return visited;
}

/* trace:info(S, F, call_count): -1 for false. */
static int64_t count(tk_bp *m, unsigned s, unsigned f)
{
    uint64_t n;
    return tk_bp_count_of(m, s, f, &n) ? (int64_t)n : -1;
}

/* Every function outside a change has equal generations. */
static int consolidated(tk_bp *m)
{
    for (unsigned f = 0; f < m->nfuncs; f++)
        for (unsigned k = 0; k < 2; k++)
            for (unsigned s = 0; s < 4; s++) {
                tk_bp_data a, b;
                int x = tk_bp_data_of(m, s, f, k, 0, &a);
                int y = tk_bp_data_of(m, s, f, k, 1, &b);
                if (x != y || (x && (a.flags != b.flags ||
                                     a.count != b.count ||
                                     a.local_ms != b.local_ms)))
                    return 0;
                /* Nothing linked with zero flags either. */
                if (x && a.flags == 0)
                    return 0;
            }
    return 1;
}

/* Each step's effect, for adding then removing a call_count breakpoint. */
TK_TEST(bp_steps_of_set_and_clear)
{
    tk_bp *m = new_model(3);
    TK_REQUIRE(m != NULL);
    unsigned a0 = tk_bp_active(m);
    TK_CHECK_EQ(tk_bp_code(m, 1, CODE), TK_BP_ORIG_INSTR(1, CODE));

    tk_bp_begin(m, 2);
    TK_CHECK_EQ(tk_bp_stage_pattern(m, 1, TK_BP_ON, TK_BP_COUNT, 0, 0, 0), 1);
    /* Staged: data in staging only, the breakpoint allocated and linked
     * but the function still runs its original instruction. */
    TK_CHECK_EQ(tk_bp_flags_of(m, 2, 1, a0 ^ 1), CNT);
    TK_CHECK_EQ(tk_bp_flags_of(m, 2, 1, a0), 0);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 1, CODE), 1);
    TK_CHECK_EQ(tk_bp_code(m, 1, CODE), TK_BP_ORIG_INSTR(1, CODE));
    TK_CHECK_EQ(calls(m, 1, 1), 0);

    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_INSTALL);
    /* Installed: the breakpoint instruction runs the disabled generation. */
    TK_CHECK_EQ(tk_bp_code(m, 1, CODE), TK_BP_BREAK_INSTR);
    TK_CHECK_EQ(tk_bp_active(m), a0);
    tk_bp_hit h[4];
    TK_CHECK_EQ(tk_bp_call(m, 0, 1, NULL, h, 4), 1);
    TK_CHECK_EQ(h[0].flags, 0);
    TK_CHECK_EQ(h[0].done, 0);
    TK_CHECK_EQ(count(m, 2, 1), -1);

    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_COMMIT);
    TK_CHECK_EQ(tk_bp_active(m), a0 ^ 1);
    TK_CHECK_EQ(tk_bp_call(m, 0, 1, NULL, h, 4), 1);
    TK_CHECK_EQ(h[0].flags, CNT);
    TK_CHECK_EQ(h[0].done, TK_BP_COUNT_ACTIVE);
    TK_CHECK_EQ(h[0].session, 2);
    TK_CHECK_EQ(count(m, 2, 1), 1);
    /* The new staging generation is the old active one: not yet a copy. */
    TK_CHECK_EQ(tk_bp_flags_of(m, 2, 1, a0), 0);

    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_UNINSTALL);
    TK_CHECK_EQ(tk_bp_code(m, 1, CODE), TK_BP_BREAK_INSTR); /* in use */
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_CONSOLIDATE);
    TK_CHECK_EQ(tk_bp_flags_of(m, 2, 1, a0), CNT);
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_FREE);
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_DONE); /* nothing open */
    TK_CHECK(consolidated(m));
    TK_CHECK_EQ(m->waits, 5); /* one grace period before each step */

    /* Untouched functions never saw a breakpoint. */
    TK_CHECK_EQ(tk_bp_code(m, 0, CODE), TK_BP_ORIG_INSTR(0, CODE));
    TK_CHECK_EQ(calls(m, 0, 3), 0);

    /* Clearing. */
    tk_bp_begin(m, 2);
    TK_CHECK_EQ(tk_bp_stage_pattern(m, 1, TK_BP_OFF, TK_BP_COUNT, 0, 0, 0), 1);
    TK_CHECK_EQ(tk_bp_flags_of(m, 2, 1, tk_bp_active(m) ^ 1), 0);
    TK_CHECK_EQ(calls(m, 1, 2), 1); /* still counting */
    TK_CHECK_EQ(count(m, 2, 1), 3);
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_INSTALL);
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_COMMIT);
    TK_CHECK_EQ(count(m, 2, 1), -1);
    TK_CHECK_EQ(tk_bp_call(m, 0, 1, NULL, h, 4), 1); /* disabled bp runs */
    TK_CHECK_EQ(h[0].flags, 0);
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_UNINSTALL);
    /* All flags zero: the original instruction is back. */
    TK_CHECK_EQ(tk_bp_code(m, 1, CODE), TK_BP_ORIG_INSTR(1, CODE));
    TK_CHECK_EQ(calls(m, 1, 1), 0);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 1, CODE), 1); /* still linked */
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_CONSOLIDATE);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 1, CODE), 0); /* unlinked */
    TK_CHECK(m->free_list != NULL);                 /* not yet freed */
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_FREE);
    TK_CHECK(m->free_list == NULL);
    TK_CHECK(consolidated(m));
    free_model(m);
}

/* call_count: set, pause, restart, set again, and restart/pause without a
 * breakpoint (trace_call_count_SUITE's pause_and_restart). */
TK_TEST(bp_count_restart_pause)
{
    tk_bp *m = new_model(4);
    TK_REQUIRE(m != NULL);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 0), 0);
    calls(m, 0, 100);
    TK_CHECK_EQ(count(m, 0, 0), 100);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_PAUSE, TK_BP_COUNT), 1);
    TK_CHECK_EQ(tk_bp_flags_of(m, 0, 0, tk_bp_active(m)), TK_BP_COUNT);
    TK_CHECK_EQ(count(m, 0, 0), 100);
    calls(m, 0, 100);
    TK_CHECK_EQ(count(m, 0, 0), 100); /* paused */
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_RESTART, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 0), 0);
    TK_CHECK_EQ(tk_bp_flags_of(m, 0, 0, tk_bp_active(m)), CNT);
    calls(m, 0, 100);
    TK_CHECK_EQ(count(m, 0, 0), 100);
    /* Setting it again zeroes it too, paused or not. */
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 0), 0);
    calls(m, 0, 7);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_PAUSE, TK_BP_COUNT), 1);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 0), 0);
    calls(m, 0, 5);
    TK_CHECK_EQ(count(m, 0, 0), 5);
    /* Pausing twice, restarting twice. */
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_PAUSE, TK_BP_COUNT), 1);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_PAUSE, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 0), 5);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_RESTART, TK_BP_COUNT), 1);
    calls(m, 0, 2);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_RESTART, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 0), 0);

    /* Without a breakpoint: nothing at all (but the function matched). */
    TK_CHECK_EQ(pattern(m, 0, 1, TK_BP_RESTART, TK_BP_COUNT), 1);
    TK_CHECK_EQ(pattern(m, 0, 1, TK_BP_PAUSE, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 1), -1);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 1, CODE), 0);
    TK_CHECK_EQ(tk_bp_code(m, 1, CODE), TK_BP_ORIG_INSTR(1, CODE));
    /* Another session's breakpoint does not count as one. */
    TK_CHECK_EQ(pattern(m, 1, 1, TK_BP_ON, TK_BP_COUNT), 1);
    TK_CHECK_EQ(pattern(m, 0, 1, TK_BP_RESTART, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 1), -1);
    TK_CHECK_EQ(count(m, 1, 1), 0);

    /* With a breakpoint of the session for another flag, restart and
     * pause create an active counter (set_function_break falls through to
     * "new data"; the VM does the same). */
    TK_CHECK_EQ(pattern(m, 0, 2, TK_BP_ON, TK_BP_LOCAL_TRACE), 1);
    TK_CHECK_EQ(pattern(m, 0, 2, TK_BP_PAUSE, TK_BP_COUNT), 1);
    TK_CHECK_EQ(count(m, 0, 2), 0);
    calls(m, 2, 10);
    TK_CHECK_EQ(count(m, 0, 2), 10);
    TK_CHECK_EQ(pattern(m, 0, 3, TK_BP_ON, TK_BP_LOCAL_TRACE), 1);
    TK_CHECK_EQ(pattern(m, 0, 3, TK_BP_RESTART, TK_BP_COUNT), 1);
    calls(m, 3, 4);
    TK_CHECK_EQ(count(m, 0, 3), 4);
    /* And restart/pause with `local` turn local trace on. */
    TK_CHECK_EQ(pattern(m, 0, 1, TK_BP_RESTART, TK_BP_LOCAL_TRACE), 1);
    TK_CHECK_EQ(tk_bp_flags_of(m, 0, 1, tk_bp_active(m)),
                TK_BP_LOCAL_TRACE);
    TK_CHECK(consolidated(m));
    free_model(m);
}

/* trace_call_count_SUITE's basic: seq/3 counted 1000 times, seq_r/3 once,
 * seq_r/4 1000 times. Functions: 0 seq/3, 1 seq_r/3, 2 seq_r/4. */
static void seq(tk_bp *m, int start, int stop)
{
    calls(m, 0, 1);
    if (start != stop)
        seq(m, start + 1, stop);
}

static void seq_r4(tk_bp *m, int start, int stop)
{
    calls(m, 2, 1);
    if (start != stop)
        seq_r4(m, start + 1, stop);
}

static void seq_r(tk_bp *m, int start, int stop)
{
    calls(m, 1, 1);
    seq_r4(m, start, stop);
}

TK_TEST(bp_count_basic_reference)
{
    tk_bp *m = new_model(3);
    TK_REQUIRE(m != NULL);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    tk_bp_begin(m, 0);
    TK_CHECK_EQ(tk_bp_stage_pattern(m, 1, TK_BP_ON, TK_BP_COUNT, 0, 0, 0) +
                    tk_bp_stage_pattern(m, 2, TK_BP_ON, TK_BP_COUNT, 0, 0, 0),
                2);
    tk_bp_finish(m);
    seq(m, 1, 1000);
    TK_CHECK_EQ(count(m, 0, 0), 1000);
    TK_CHECK_EQ(count(m, 0, 1), 0);
    seq_r(m, 1, 1000);
    TK_CHECK_EQ(count(m, 0, 0), 1000);
    TK_CHECK_EQ(count(m, 0, 1), 1);
    TK_CHECK_EQ(count(m, 0, 2), 1000);
    free_model(m);
}

/* A second session on an instrumented function is staged aside and linked
 * at install; sessions count independently; removing one leaves the
 * other. */
TK_TEST(bp_second_session_to_insert)
{
    tk_bp *m = new_model(2);
    TK_REQUIRE(m != NULL);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    calls(m, 0, 3);
    tk_bp_begin(m, 1);
    tk_bp_stage_pattern(m, 0, TK_BP_ON, TK_BP_COUNT, 0, 0, 0);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 0, CODE), 1); /* not linked yet */
    TK_CHECK_EQ(tk_bp_flags_of(m, 1, 0, tk_bp_active(m) ^ 1), CNT);
    TK_CHECK_EQ(calls(m, 0, 1), 1);
    TK_CHECK_EQ(tk_bp_step(m), TK_BP_STEP_INSTALL);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 0, CODE), 2);
    tk_bp_hit h[4];
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, NULL, h, 4), 2);
    TK_CHECK_EQ(h[0].session, 1); /* newest first */
    TK_CHECK_EQ(h[0].flags, 0);   /* disabled until commit */
    TK_CHECK_EQ(h[1].session, 0);
    tk_bp_finish(m);
    calls(m, 0, 10);
    TK_CHECK_EQ(count(m, 0, 0), 15);
    TK_CHECK_EQ(count(m, 1, 0), 10);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_OFF, TK_BP_COUNT), 1);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 0, CODE), 1);
    TK_CHECK_EQ(tk_bp_code(m, 0, CODE), TK_BP_BREAK_INSTR);
    calls(m, 0, 1);
    TK_CHECK_EQ(count(m, 0, 0), -1);
    TK_CHECK_EQ(count(m, 1, 0), 11);
    TK_CHECK_EQ(pattern(m, 1, 0, TK_BP_OFF, TK_BP_COUNT), 1);
    TK_CHECK_EQ(tk_bp_code(m, 0, CODE), TK_BP_ORIG_INSTR(0, CODE));
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 0, CODE), 0);
    TK_CHECK(consolidated(m));
    free_model(m);
}

/* Global call trace lives in the export entry: setting it clears the
 * session's code breakpoints, setting a breakpoint flag clears it; remote
 * calls only; not for unexported functions (which still lose their code
 * breakpoints). */
TK_TEST(bp_global_excludes_breakpoints)
{
    tk_bp *m = new_model(2);
    TK_REQUIRE(m != NULL);
    tk_bp_set_exported(m, 1, 0);
    tk_bp_ctx remote = {.call_traced = 1, .remote = 1},
              local = {.call_traced = 1};
    tk_bp_hit h[4];
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, 0), 1);
    TK_CHECK_EQ(count(m, 0, 0), -1);
    TK_CHECK_EQ(tk_bp_flags_of(m, 0, 0, tk_bp_active(m)), TK_BP_GLOBAL_TRACE);
    TK_CHECK_EQ(tk_bp_code(m, 0, EXPORT), TK_BP_BREAK_INSTR);
    TK_CHECK_EQ(tk_bp_code(m, 0, CODE), TK_BP_ORIG_INSTR(0, CODE));
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, &remote, h, 4), 1);
    TK_CHECK_EQ(h[0].done, TK_BP_GLOBAL_TRACE);
    TK_CHECK_EQ(h[0].site, EXPORT);
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, &local, h, 4), 0);
    /* restart with call_count: global goes, and no code breakpoint exists
     * for restart to act on. */
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_RESTART, TK_BP_COUNT), 1);
    TK_CHECK_EQ(tk_bp_flags_of(m, 0, 0, tk_bp_active(m)), 0);
    TK_CHECK_EQ(tk_bp_code(m, 0, EXPORT), TK_BP_ORIG_INSTR(0, EXPORT));
    TK_CHECK_EQ(count(m, 0, 0), -1);
    /* Unexported: global matches nothing but clears code breakpoints. */
    TK_CHECK_EQ(pattern(m, 0, 1, TK_BP_ON, TK_BP_COUNT), 1);
    TK_CHECK_EQ(pattern(m, 0, 1, TK_BP_ON, 0), 0);
    TK_CHECK_EQ(count(m, 0, 1), -1);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 1, EXPORT), 0);
    /* Turning global off leaves code breakpoints alone. */
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_OFF, 0), 1);
    TK_CHECK_EQ(count(m, 0, 0), 0);
    /* Global in one session, count in another: a remote call runs both. */
    TK_CHECK_EQ(pattern(m, 1, 0, TK_BP_ON, 0), 1);
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, &remote, h, 4), 2);
    TK_CHECK_EQ(h[0].session, 1);
    TK_CHECK_EQ(h[1].session, 0);
    TK_CHECK_EQ(count(m, 0, 0), 1);
    TK_CHECK(consolidated(m));
    free_model(m);
}

/* Call trace needs the process to be traced with `call` in the session,
 * call_time/call_memory too; call_count and meta do not. */
TK_TEST(bp_effects_depend_on_call_flag)
{
    tk_bp *m = new_model(1);
    TK_REQUIRE(m != NULL);
    tk_bp_begin(m, 3);
    tk_bp_stage_pattern(m, 0, TK_BP_ON,
                        TK_BP_LOCAL_TRACE | TK_BP_META_TRACE | TK_BP_COUNT |
                            TK_BP_TIME_TRACE | TK_BP_MEM_TRACE,
                        7, 7, 42);
    tk_bp_finish(m);
    tk_bp_ctx untraced = {.cost = 5},
              traced = {.call_traced = (uint64_t)1 << 3, .cost = 5};
    tk_bp_hit h[2];
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, &untraced, h, 2), 1);
    TK_CHECK_EQ(h[0].done, TK_BP_META_TRACE | TK_BP_COUNT_ACTIVE);
    TK_CHECK_EQ(h[0].meta_tracer, 42);
    TK_CHECK_EQ(h[0].local_ms, 7);
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, &traced, h, 2), 1);
    TK_CHECK_EQ(h[0].done, TK_BP_LOCAL_TRACE | TK_BP_META_TRACE |
                               TK_BP_COUNT_ACTIVE | TK_BP_TIME_TRACE_ACTIVE |
                               TK_BP_MEM_TRACE_ACTIVE);
    uint64_t c, s;
    TK_CHECK(tk_bp_acc_of(m, 3, 0, TK_BP_TIME_TRACE, &c, &s));
    TK_CHECK_EQ(c, 1);
    TK_CHECK_EQ(s, 5);
    TK_CHECK_EQ(count(m, 3, 0), 2);
    /* Pause and restart call_time. */
    TK_CHECK_EQ(pattern(m, 3, 0, TK_BP_PAUSE, TK_BP_TIME_TRACE), 1);
    tk_bp_call(m, 0, 0, &traced, NULL, 0);
    TK_CHECK(tk_bp_acc_of(m, 3, 0, TK_BP_TIME_TRACE, &c, &s));
    TK_CHECK_EQ(c, 1);
    TK_CHECK(tk_bp_acc_of(m, 3, 0, TK_BP_MEM_TRACE, &c, &s));
    TK_CHECK_EQ(c, 2);
    TK_CHECK_EQ(pattern(m, 3, 0, TK_BP_RESTART, TK_BP_TIME_TRACE), 1);
    TK_CHECK(tk_bp_acc_of(m, 3, 0, TK_BP_TIME_TRACE, &c, &s));
    TK_CHECK_EQ(c, 0);
    TK_CHECK_EQ(s, 0);
    /* Meta trace set again with another tracer replaces it. */
    tk_bp_begin(m, 3);
    tk_bp_stage_pattern(m, 0, TK_BP_ON, TK_BP_META_TRACE, 0, 9, 43);
    tk_bp_finish(m);
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, &untraced, h, 2), 1);
    TK_CHECK_EQ(h[0].meta_tracer, 43);
    TK_CHECK_EQ(h[0].meta_ms, 9);
    /* Everything off: the function is plain again. */
    TK_CHECK_EQ(pattern(m, 3, 0, TK_BP_OFF,
                        TK_BP_LOCAL_TRACE | TK_BP_META_TRACE | TK_BP_COUNT |
                            TK_BP_TIME_TRACE | TK_BP_MEM_TRACE),
                1);
    TK_CHECK_EQ(tk_bp_code(m, 0, CODE), TK_BP_ORIG_INSTR(0, CODE));
    TK_CHECK_EQ(tk_bp_call(m, 0, 0, &traced, h, 2), 0);
    TK_CHECK(consolidated(m));
    free_model(m);
}

/* Shared counters: generations share one counter object; it survives a
 * pause (both generations keep it) and is freed once no generation has it
 * (AddressSanitizer checks the freeing; the reference counts here). */
TK_TEST(bp_counter_shared_between_generations)
{
    tk_bp *m = new_model(1);
    TK_REQUIRE(m != NULL);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_ON, TK_BP_COUNT), 1);
    tk_bp_data a, b;
    TK_REQUIRE(tk_bp_data_of(m, 0, 0, CODE, 0, &a));
    TK_REQUIRE(tk_bp_data_of(m, 0, 0, CODE, 1, &b));
    TK_CHECK(a.count == b.count);
    TK_CHECK_EQ(a.count->refc, 2);
    TK_CHECK_EQ(pattern(m, 0, 0, TK_BP_PAUSE, TK_BP_COUNT), 1);
    TK_REQUIRE(tk_bp_data_of(m, 0, 0, CODE, 0, &a));
    TK_CHECK(a.count == b.count);
    TK_CHECK_EQ(a.count->refc, 2);
    tk_bp_begin(m, 0);
    tk_bp_stage_pattern(m, 0, TK_BP_OFF, TK_BP_COUNT, 0, 0, 0);
    TK_CHECK_EQ(b.count->refc, 1); /* only the active generation */
    tk_bp_finish(m);
    TK_CHECK_EQ(tk_bp_nbreakpoints(m, 0, CODE), 0);
    free_model(m);
}

/* A step waits for readers: a reader inside a read section of the model
 * holds back the next step until it leaves. */
static struct {
    tk_bp *m;
    atomic_int inside, leave, stepped;
} sw;

static void *sw_reader(void *arg)
{
    (void)arg;
    tk_pub_gp_enter(&sw.m->gp, 4);
    atomic_store(&sw.inside, 1);
    while (!atomic_load(&sw.leave)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    tk_pub_gp_leave(&sw.m->gp, 4);
    return NULL;
}

static void *sw_writer(void *arg)
{
    (void)arg;
    tk_bp_begin(sw.m, 0);
    tk_bp_stage_pattern(sw.m, 0, TK_BP_ON, TK_BP_COUNT, 0, 0, 0);
    atomic_store(&sw.stepped, tk_bp_step(sw.m));
    tk_bp_finish(sw.m);
    return NULL;
}

TK_TEST_THREADED(bp_step_waits_for_readers)
{
    sw.m = new_model(1);
    TK_REQUIRE(sw.m != NULL);
    atomic_store(&sw.inside, 0);
    atomic_store(&sw.leave, 0);
    atomic_store(&sw.stepped, 0);
    pthread_t r, w;
    pthread_create(&r, NULL, sw_reader, NULL);
    while (!atomic_load(&sw.inside))
        ;
    pthread_create(&w, NULL, sw_writer, NULL);
    struct timespec ts = {0, 30000000};
    nanosleep(&ts, NULL);
    TK_CHECK_EQ(atomic_load(&sw.stepped), 0);
    atomic_store(&sw.leave, 1);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    TK_CHECK_EQ(atomic_load(&sw.stepped), TK_BP_STEP_INSTALL);
    TK_CHECK_EQ(count(sw.m, 0, 0), 0);
    free_model(sw.m);
}

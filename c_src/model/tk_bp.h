/* tk_bp.h: a model of the VM's breakpoint machinery (erts beam_bp.c).
 *
 * The model holds a table of functions (indexes 0..nfuncs-1). Each has two
 * breakpoint sites, as in the VM: its code (local, meta, call_count,
 * call_time, call_memory breakpoints; every call runs it) and, for an
 * exported function, its export entry (global call trace; only remote
 * calls run it, before the code). A site has a first instruction word
 * (`code`), which is either its original instruction or
 * TK_BP_BREAK_INSTR, and a list of breakpoints, one per trace session that
 * instruments the site. A breakpoint keeps the original
 * instruction and two generations of data {flags, match spec ids, meta
 * tracer, call count, call time, call memory}; readers use generation
 * `active` (one index for the whole model), changes are made in
 * `staging = active ^ 1`.
 *
 * Readers ("executing" a function, tk_bp_call) run on any thread with a
 * slot (as in tk_pub) and never take a lock: they read the code word, and
 * when it is the breakpoint instruction, walk the breakpoint list and act
 * on each breakpoint's active generation: count when COUNT_ACTIVE is set,
 * accumulate when TIME/MEM_TRACE_ACTIVE is set (and the caller is call
 * traced in that session), report call trace and meta trace events.
 *
 * A change (trace:function/4 of one session) is staged and then finished
 * by the VM's sequence, each step preceded by a thread-progress barrier (a
 * grace period of the model's tk_pub_gp: every reader that might still use
 * what the step changes or frees has finished):
 *
 *   stage        set/clear flags in the staging generation; new breakpoints
 *                are allocated disabled in the active generation
 *   (wait) install      write the breakpoint instruction into functions
 *                that gained a breakpoint, link breakpoints of sessions
 *                added to an already instrumented function
 *   (wait) commit       flip the active index: the staged data takes effect
 *   (wait) uninstall    restore the original instruction of functions whose
 *                breakpoints all have zero flags
 *   (wait) consolidate  copy active into staging for the changed functions;
 *                unlink breakpoints with zero flags
 *   (wait) free         free the unlinked breakpoints
 *
 * The last wait is in the VM too (its fifth code barrier; the design note
 * in the OTP docs predates sessions and lists four): with several
 * sessions' breakpoints in one list, the function keeps its breakpoint
 * instruction, so readers may still stand on a breakpoint that
 * consolidation unlinked.
 *
 * What each wait protects here. Before uninstall: a reader that read the
 * old active index must not find the original instruction restored (it
 * would see the old generation for some sessions and nothing for a site
 * that was just emptied: a mix). Before consolidation: a reader that saw
 * the breakpoint instruction just before uninstall must not find the list
 * emptied by consolidation (the VM would crash on it; it also clears
 * export trampolines there). Before free: readers standing on unlinked
 * breakpoints. The concurrency test fails without any one of these three.
 * The waits before install and commit order plain stores in the VM; here
 * the code word, list links and index are release/acquire atomics, so
 * they only keep the VM's rhythm.
 *
 * call_count/call_time/call_memory semantics (set_function_break): setting
 * one again, or `restart`, zeroes its data and sets its ACTIVE flag;
 * `pause` clears ACTIVE and keeps the value; restart and pause do nothing
 * to a function without a breakpoint in the session, but on a function
 * that has one (for another flag) without that counter they create the
 * counter, active, as a plain set does (as the VM does).
 *
 * Writers are serialised by the model (tk_bp_begin to the end of the last
 * step). Nothing here allocates or locks on the reader path.
 */
#ifndef TK_BP_H
#define TK_BP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tk_pub.h"

/* Breakpoint flags, the values of beam_bp.c. */
#define TK_BP_LOCAL_TRACE 0x01u
#define TK_BP_META_TRACE 0x02u
#define TK_BP_COUNT 0x04u
#define TK_BP_COUNT_ACTIVE 0x08u
#define TK_BP_DEBUG 0x10u
#define TK_BP_TIME_TRACE 0x20u
#define TK_BP_TIME_TRACE_ACTIVE 0x40u
#define TK_BP_GLOBAL_TRACE 0x80u
#define TK_BP_MEM_TRACE 0x100u
#define TK_BP_MEM_TRACE_ACTIVE 0x200u
#define TK_BP_ALL 0x3FFu

/* Breakpoint sites of a function. */
#define TK_BP_SITE_CODE 0u
#define TK_BP_SITE_EXPORT 1u

/* The breakpoint instruction; original instructions are anything else. */
#define TK_BP_BREAK_INSTR ((uintptr_t)1)
/* The original instruction the model gives site `site` of function `f`. */
#define TK_BP_ORIG_INSTR(f, site)                                           \
    ((uintptr_t)0x1000 + 2 * (uintptr_t)(f) + (uintptr_t)(site))

#define TK_BP_MAX_SESSIONS 64 /* sessions are 0..63 */

/* What a pattern asks for (trace:function/4's first argument). */
typedef enum {
    TK_BP_OFF = 0,     /* false */
    TK_BP_ON = 1,      /* true, [] or a match spec */
    TK_BP_RESTART = 2, /* restart */
    TK_BP_PAUSE = 3    /* pause */
} tk_bp_op;

/* Pattern categories (trace:function/4's flag list), as flag bits:
 * TK_BP_LOCAL_TRACE (local), TK_BP_META_TRACE (meta), TK_BP_COUNT
 * (call_count), TK_BP_TIME_TRACE (call_time), TK_BP_MEM_TRACE
 * (call_memory); none of them means global. */
#define TK_BP_CATEGORIES                                                    \
    (TK_BP_LOCAL_TRACE | TK_BP_META_TRACE | TK_BP_COUNT | TK_BP_TIME_TRACE | \
     TK_BP_MEM_TRACE)

/* Shared, reference-counted data of a generation. Reference counts are
 * touched only by the writer; values are atomics that readers add to. */
typedef struct {
    unsigned refc;
    _Atomic uint64_t n;
} tk_bp_count;

typedef struct {
    unsigned refc;
    _Atomic uint64_t calls;
    _Atomic uint64_t sum; /* time or words, as the callers report them */
} tk_bp_acc;

typedef struct {
    unsigned refc;
    uint32_t tracer;
} tk_bp_meta;

/* One generation of a breakpoint. Match specs are ids (0: none). */
typedef struct {
    uint32_t flags;
    uint32_t local_ms; /* local or global trace match spec */
    uint32_t meta_ms;
    tk_bp_meta *meta;
    tk_bp_count *count;
    tk_bp_acc *time;
    tk_bp_acc *memory;
} tk_bp_data;

typedef struct tk_bp_g {
    uintptr_t orig_instr;
    tk_bp_data data[2];
    unsigned session;
    _Atomic(struct tk_bp_g *) next;
    struct tk_bp_g *next_to_free;
} tk_bp_g;

typedef struct {
    _Atomic uintptr_t code;  /* the first instruction */
    _Atomic(tk_bp_g *) head; /* breakpoints, newest first */
    tk_bp_g *to_insert;      /* staged for an instrumented site */
    unsigned char touched;   /* part of the change in progress */
} tk_bp_site;

typedef struct {
    tk_bp_site site[2];     /* TK_BP_SITE_CODE, TK_BP_SITE_EXPORT */
    unsigned char exported; /* has an export entry (global tracing) */
} tk_bp_func;

/* Steps of a change, in order. */
enum {
    TK_BP_STEP_STAGE = 0, /* staging (tk_bp_begin .. first tk_bp_step) */
    TK_BP_STEP_INSTALL,
    TK_BP_STEP_COMMIT,
    TK_BP_STEP_UNINSTALL,
    TK_BP_STEP_CONSOLIDATE,
    TK_BP_STEP_FREE,
    TK_BP_STEP_DONE
};

typedef struct {
    /* Read by readers. */
    _Atomic unsigned active; /* generation index, 0 or 1 */
    tk_bp_func *funcs;
    unsigned nfuncs;
    tk_pub_gp gp;
    /* Writer side, under `lock` from tk_bp_begin to TK_BP_STEP_DONE. */
    pthread_mutex_t lock;
    unsigned session; /* the staging session */
    int step;         /* the last step done (TK_BP_STEP_DONE: none open) */
    unsigned *changed; /* sites, as 2 * function + site */
    unsigned nchanged;
    tk_bp_g *free_list;
    uint64_t waits;   /* grace periods waited for, ever */
    uint64_t changes; /* finished changes, ever */
} tk_bp;

/* A model of `nfuncs` functions, none instrumented, every one exported.
 * 0 on success, -1 when out of memory. `gp_flags` as for tk_pub_gp_init. */
int tk_bp_init(tk_bp *m, unsigned nfuncs, unsigned gp_flags);
/* No reader may be running and no change in progress. */
void tk_bp_destroy(tk_bp *m);

/* Whether global tracing applies to function f (an exported function);
 * set before any change. */
void tk_bp_set_exported(tk_bp *m, unsigned f, int exported);

/* ---- readers --------------------------------------------------------- */

/* How the call is made. */
typedef struct {
    uint64_t call_traced; /* sessions (bit s) in which the caller has the
                           * `call` trace flag */
    int remote;           /* a remote (export) call: global tracing */
    uint64_t cost;        /* added to call_time/call_memory sums */
    /* When set, called inside the read section after the active index is
     * read and before each breakpoint: a slow reader (a test uses it to
     * widen the windows the grace periods must cover). */
    void (*dawdle)(void *arg);
    void *dawdle_arg;
} tk_bp_ctx;

/* What a call did in one breakpoint (one session, one site). */
typedef struct {
    unsigned session;
    unsigned site;
    uint32_t flags;    /* the generation's flags, as read */
    uint32_t local_ms; /* as read */
    uint32_t meta_ms;
    uint32_t meta_tracer; /* 0 without META_TRACE */
    uint32_t done;        /* what happened: TK_BP_LOCAL_TRACE or
                           * TK_BP_GLOBAL_TRACE (call trace event),
                           * TK_BP_META_TRACE, TK_BP_COUNT_ACTIVE,
                           * TK_BP_TIME_TRACE_ACTIVE, TK_BP_MEM_TRACE_ACTIVE */
} tk_bp_hit;

/* Executes function f once on the calling thread (`slot`, as in tk_pub),
 * lock-free, as one read section: for a remote call of an exported
 * function its export entry, then its code. Fills up to `max` hits (one
 * per breakpoint visited, export entry first, each list in order; `hits`
 * may be NULL) and returns the number of breakpoints visited (0 when both
 * sites run their original instruction), or -1 when the model is
 * inconsistent (the breakpoint instruction with no breakpoint behind it,
 * flags out of range, counting flags without their counter: never
 * expected). */
int tk_bp_call(tk_bp *m, unsigned slot, unsigned f, const tk_bp_ctx *ctx,
               tk_bp_hit *hits, int max);

/* ---- writers --------------------------------------------------------- */

/* Starts a change for `session` (< TK_BP_MAX_SESSIONS): takes the writer
 * lock (waits for another change to finish). */
void tk_bp_begin(tk_bp *m, unsigned session);

/* Stages one function's part of a trace:function(Session, MFA, Op, Flags)
 * call (erts_set_trace_pattern for one matched function). `cats` are
 * pattern categories (0 = global); `local_ms` is the match spec id for
 * local/global trace, `meta_ms` and `meta_tracer` those of meta trace.
 * Returns 1 when the function counts as matched (every function for
 * breakpoint categories, exported ones for global), else 0; -1 when out
 * of memory (what could be staged stays staged). */
int tk_bp_stage_pattern(tk_bp *m, unsigned f, tk_bp_op op, uint32_t cats,
                        uint32_t local_ms, uint32_t meta_ms,
                        uint32_t meta_tracer);

/* The primitives the patterns are made of (set_function_break and
 * clear_function_break of beam_bp.c): set or clear one category's flags
 * (with its ACTIVE bit) for the staging session in the staging
 * generation. `cat` is one of TK_BP_LOCAL_TRACE, TK_BP_GLOBAL_TRACE,
 * TK_BP_META_TRACE, TK_BP_COUNT, TK_BP_TIME_TRACE, TK_BP_MEM_TRACE;
 * TK_BP_GLOBAL_TRACE goes to the export entry (of an exported function),
 * the others to the code. tk_bp_stage_set returns 0, or -1 when out of
 * memory (the change stays consistent: the category is simply not set). */
int tk_bp_stage_set(tk_bp *m, unsigned f, uint32_t cat, tk_bp_op op,
                    uint32_t ms, uint32_t meta_tracer);
void tk_bp_stage_clear(tk_bp *m, unsigned f, uint32_t flags);

/* Waits for a grace period, then runs the next step of the change and
 * returns it (TK_BP_STEP_INSTALL .. TK_BP_STEP_FREE). The free step ends
 * the change and releases the writer lock. */
int tk_bp_step(tk_bp *m);

/* All remaining steps. */
void tk_bp_finish(tk_bp *m);

/* ---- inspection -------------------------------------------------------
 * Writer-side reads: call them under tk_bp_lock (between changes), or
 * from the changing thread between its steps. Readers may run meanwhile. */

void tk_bp_lock(tk_bp *m);
void tk_bp_unlock(tk_bp *m);

/* trace:info(Session, MFA, call_count): 1 and *n when the active
 * generation has COUNT, else 0. */
int tk_bp_count_of(tk_bp *m, unsigned session, unsigned f, uint64_t *n);

/* call_time (which = TK_BP_TIME_TRACE) or call_memory (TK_BP_MEM_TRACE):
 * 1 with calls and sum when set in the active generation, else 0. */
int tk_bp_acc_of(tk_bp *m, unsigned session, unsigned f, uint32_t which,
                 uint64_t *calls, uint64_t *sum);

/* `session`'s breakpoint data on a site of f in generation `gen` (0 or
 * 1): 1 and *out when the breakpoint exists (staged ones included), else
 * 0. */
int tk_bp_data_of(tk_bp *m, unsigned session, unsigned f, unsigned site,
                  unsigned gen, tk_bp_data *out);
/* The flags of `session` on f in generation `gen`, both sites together
 * (GLOBAL_TRACE comes from the export entry, the rest from the code); 0
 * without a breakpoint. */
uint32_t tk_bp_flags_of(tk_bp *m, unsigned session, unsigned f,
                        unsigned gen);

/* Current first instruction of a site of f, and the active index. */
uintptr_t tk_bp_code(tk_bp *m, unsigned f, unsigned site);
unsigned tk_bp_active(tk_bp *m);
/* Number of breakpoints linked on a site of f (staged ones not
 * included). */
unsigned tk_bp_nbreakpoints(tk_bp *m, unsigned f, unsigned site);

#endif

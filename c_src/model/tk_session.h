/* tk_session.h: a model of OTP 27+ trace sessions.
 *
 * The model mirrors what the VM keeps per trace session (erl_bif_trace.c,
 * erl_trace.c, beam_bp.c) at the level that the trace BIFs can observe:
 *
 *   - sessions: created (name, tracer, a weak id from a counter), destroyed
 *     (ALIVE -> DEAD), and the static `legacy' session (id 0);
 *   - tracees (processes and ports): per session one tracer ref with its
 *     flags, kept in the order the refs were made, and the OR of all refs
 *     (what process_info(P, trace) shows); links between processes;
 *   - per session the defaults for new processes and new ports;
 *   - inheritance on spawn (set_on_spawn, set_on_first_spawn) and on link
 *     (set_on_link, set_on_first_link);
 *   - function patterns per session and function: global (on the export
 *     entry), local, meta, call_count, call_time, call_memory (on the code),
 *     with the VM's exclusivity and badarg rules, the on_load pattern, and
 *     the send/receive event patterns;
 *   - the answers of trace:info/3 and trace:session_info/1.
 *
 * Every operation is one call that answers what the VM answers: a count,
 * or TK_SES_BADARG. Terms the model cannot hold (session names, tracers,
 * match specifications, modules) are opaque 64-bit keys chosen by the
 * caller; answers name them by the same keys.
 *
 * Entities are small integers: session ids (0 is legacy; the others are
 * given in creation order), tracee ids (in creation order), function ids
 * (in registration order). A model is single-threaded.
 */
#ifndef TK_SESSION_H
#define TK_SESSION_H

#include <stdint.h>

/* ---- trace flags --------------------------------------------------------
 * The bits are the VM's (erl_process.h): process_info(P, trace) answers the
 * OR of a process's refs in exactly this encoding. */
#define TK_TF_TIMESTAMP          (1u << 0)
#define TK_TF_STRICT_MON_TS      (1u << 1)
#define TK_TF_MON_TS             (1u << 2)
#define TK_TF_SEND               (1u << 4)
#define TK_TF_RECEIVE            (1u << 5)
#define TK_TF_SOS                (1u << 6)  /* set_on_spawn */
#define TK_TF_SOS1               (1u << 7)  /* set_on_first_spawn */
#define TK_TF_SOL                (1u << 8)  /* set_on_link */
#define TK_TF_SOL1               (1u << 9)  /* set_on_first_link */
#define TK_TF_CALL               (1u << 10)
#define TK_TF_PROCS              (1u << 11)
#define TK_TF_RUNNING            (1u << 13)
#define TK_TF_GC                 (1u << 14) /* garbage_collection */
#define TK_TF_ARITY              (1u << 15)
#define TK_TF_RETURN_TO          (1u << 16)
#define TK_TF_SILENT             (1u << 17)
#define TK_TF_RUNNING_PORTS      (1u << 20)
#define TK_TF_RUNNING_PROCS      (1u << 21)
#define TK_TF_PORTS              (1u << 22)
#define TK_TF_SCHEDULER_ID       (1u << 23)
#define TK_TF_EXITING            (1u << 24)

#define TK_TF_TS_MASK (TK_TF_TIMESTAMP | TK_TF_STRICT_MON_TS | TK_TF_MON_TS)
/* Every flag a tracer ref can hold; also what the flag `all' sets. */
#define TK_TF_ALL                                                          \
    (TK_TF_TS_MASK | TK_TF_SEND | TK_TF_RECEIVE | TK_TF_SOS | TK_TF_SOS1 | \
     TK_TF_SOL | TK_TF_SOL1 | TK_TF_CALL | TK_TF_PROCS | TK_TF_RUNNING |   \
     TK_TF_GC | TK_TF_ARITY | TK_TF_RETURN_TO | TK_TF_SILENT |             \
     TK_TF_RUNNING_PORTS | TK_TF_RUNNING_PROCS | TK_TF_PORTS |             \
     TK_TF_SCHEDULER_ID | TK_TF_EXITING)
/* Flags that mean the same for processes and ports. */
#define TK_TF_MODIFIERS                                                    \
    (TK_TF_SILENT | TK_TF_TS_MASK | TK_TF_SCHEDULER_ID | TK_TF_RECEIVE |  \
     TK_TF_SEND)
#define TK_TF_PORT_FLAGS (TK_TF_MODIFIERS | TK_TF_PORTS | TK_TF_RUNNING_PORTS)
#define TK_TF_PROC_FLAGS ((TK_TF_ALL & ~TK_TF_PORT_FLAGS) | TK_TF_MODIFIERS)
/* cpu_timestamp: accepted in flag lists, never stored in a ref. */
#define TK_TF_CPU_TIMESTAMP      (1u << 31)

#define TK_SES_NFLAG_NAMES 21
/* Flag names in the order trace:info(S, T, flags) lists them. */
extern const struct tk_ses_flag_name {
    uint32_t bit;
    const char *name;
} tk_ses_flag_names[TK_SES_NFLAG_NAMES];

/* The bit of a flag name of process/4 and port/4 flag lists (`all' gives
 * TK_TF_ALL, `cpu_timestamp' TK_TF_CPU_TIMESTAMP); 0 for an unknown name. */
uint32_t tk_ses_flag_bit(const char *name);

/* ---- function pattern flags (flag lists of trace:function/4) ---------- */
#define TK_FF_GLOBAL   (1u << 0)
#define TK_FF_LOCAL    (1u << 1)
#define TK_FF_META     (1u << 2)
#define TK_FF_COUNT    (1u << 3) /* call_count */
#define TK_FF_TIME     (1u << 4) /* call_time */
#define TK_FF_MEMORY   (1u << 5) /* call_memory */

/* The bit of a trace:function/4 flag name; 0 for an unknown name. */
uint32_t tk_ses_fflag_bit(const char *name);

/* ---- match specification arguments ------------------------------------
 * A match specification argument is one of these, or a positive key that
 * stands for a valid match specification term. */
#define TK_MS_TRUE     0   /* true or [] */
#define TK_MS_FALSE   (-1)
#define TK_MS_RESTART (-2)
#define TK_MS_PAUSE   (-3)
#define TK_MS_BAD     (-4) /* a term that does not compile */

/* ---- results ------------------------------------------------------------ */
#define TK_SES_OK         0
#define TK_SES_BADARG    (-1)
#define TK_SES_UNDEFINED (-2) /* the answer is the atom `undefined' */
#define TK_SES_LIMIT     (-3) /* the model's capacity is exhausted, or the
                                 operation is outside the model (changes
                                 to the legacy session) */

#define TK_SES_MAX_SESSIONS 32  /* legacy included */
#define TK_SES_MAX_TRACEES  64
#define TK_SES_MAX_FUNCS    64

#define TK_SES_LEGACY 0

typedef struct tk_ses_model tk_ses_model;

/* A model of a node running `otp_release' (27, 28, 29, ...), with only the
 * legacy session. NULL when out of memory. */
tk_ses_model *tk_ses_new(int otp_release);
void tk_ses_free(tk_ses_model *m);

/* ---- sessions ------------------------------------------------------------ */

/* trace:session_create(Name, Tracer, Opts). `args_ok' is 0 when the VM
 * rejects the arguments themselves (Name not an atom, Opts not [], Tracer
 * not a pid, port or loaded tracer module). Answers the new session id
 * (> 0) and its weak id, or TK_SES_BADARG. Weak ids count from 0 in each
 * model, one per session created. */
int tk_ses_create(tk_ses_model *m, uint64_t name, uint64_t tracer,
                  int args_ok, long *weak_id);

/* trace:session_destroy(S): 1 (true) when the session was alive, 0 (false)
 * when already destroyed; TK_SES_BADARG for an unknown id, for the legacy
 * session, and when a destroyed session is named by its weak ref
 * {Name, WeakId} (`by_weak_ref'), which the VM no longer finds. Destroying
 * clears the session's patterns and strips its refs from every tracee (the
 * VM does the latter asynchronously, in its trace cleaner process). */
int tk_ses_destroy(tk_ses_model *m, int sid, int by_weak_ref);

int tk_ses_alive(const tk_ses_model *m, int sid);
uint64_t tk_ses_name(const tk_ses_model *m, int sid);
uint64_t tk_ses_tracer(const tk_ses_model *m, int sid);
long tk_ses_weak_id(const tk_ses_model *m, int sid);

/* ---- tracees ------------------------------------------------------------- */

#define TK_SES_PROC 1
#define TK_SES_PORT 2
#define TK_SES_NONE (-1) /* a parent outside the model: nothing inherited */

/* A process spawned by `parent' (a model process, or TK_SES_NONE), linked
 * to it when `link' (spawn_link). The child gets, in this order: a ref for
 * each session with defaults for new processes (newest session first;
 * legacy, which the model never changes, would come before all); then, for each of the parent's refs, newest ref
 * first, what the parent passes on in that session, which replaces the
 * defaults: with set_on_spawn the parent's flags; with set_on_first_spawn
 * the same without the spawn flags, which the parent loses too; when
 * linked, with set_on_link or set_on_first_link also the parent's flags
 * (set_on_first_link then goes from both, and set_on_link with it).
 * Answers the tracee id or an error. */
int tk_ses_spawn(tk_ses_model *m, int parent, int link);

/* A port opened by anyone: it gets each session's defaults for new ports
 * (ports inherit nothing). Answers the tracee id or an error. */
int tk_ses_open_port(tk_ses_model *m);

/* The tracee exits (process killed, port closed): its refs and links go. */
int tk_ses_exit(tk_ses_model *m, int tid);

/* Process `a' calls link(b). Nothing happens when a == b or when they are
 * already linked. Otherwise, for each ref of `a', oldest first, with
 * set_on_link or set_on_first_link `b' gets a's flags added (a new ref is
 * made when needed); set_on_first_link then clears both link flags on both
 * sides. */
int tk_ses_link(tk_ses_model *m, int a, int b);
/* Process `a' calls unlink(b). */
int tk_ses_unlink(tk_ses_model *m, int a, int b);

int tk_ses_tracee_kind(const tk_ses_model *m, int tid);
int tk_ses_tracee_alive(const tk_ses_model *m, int tid);
/* The OR of a live tracee's refs (process_info(P, trace)); -1 when dead. */
long tk_ses_union(const tk_ses_model *m, int tid);

/* ---- trace:process/4 and trace:port/4 ------------------------------------ */

#define TK_SPEC_TRACEE   1 /* one pid or port: `tid' */
#define TK_SPEC_ALL      2 /* all (processes, ports) */
#define TK_SPEC_EXISTING 3 /* existing (existing_processes, ...) */
#define TK_SPEC_NEW      4 /* new (new_processes, new_ports) */
#define TK_SPEC_BAD      5 /* anything else */

/* trace:process(S, Spec, How, Flags) when `ports' is 0, trace:port(...)
 * when 1. `how' is 1 (true), 0 (false) or -1 (anything else); `mask' the
 * flags (TK_TF_*), `bad_flags' nonzero when the list has an element the VM
 * rejects or is not a proper list. `ext_count' is the number of processes
 * (or ports) the VM has when the call runs, model ones included: that is
 * the answer for all/existing when the flags make the VM visit them.
 * On success *count holds the answer. */
int tk_ses_trace(tk_ses_model *m, int sid, int ports, int spec, int tid,
                 int how, uint32_t mask, int bad_flags, long ext_count,
                 long *count);

/* ---- functions ------------------------------------------------------------ */

/* Registers a function of a loaded module (all of a module's functions
 * must be registered for module-wide patterns to count right). Answers
 * the function id or TK_SES_LIMIT. */
int tk_ses_add_function(tk_ses_model *m, uint64_t module, uint64_t name,
                        int arity, int exported);
/* The id of a registered function, or -1. */
int tk_ses_find_function(const tk_ses_model *m, uint64_t module,
                         uint64_t name, int arity);

/* Targets of trace:function/4 (trace:send/3 and trace:recv/3 are the send
 * and receive targets). */
#define TK_FT_MFA      1
#define TK_FT_ON_LOAD  2
#define TK_FT_SEND     3
#define TK_FT_RECEIVE  4
#define TK_FT_BAD      5 /* another atom, or not a {M,F,A} tuple */

/* An MFA pattern: a wildcard ('_') part ignores its value. */
typedef struct {
    uint64_t module, name;
    long arity;
    int module_wild, name_wild, arity_wild;
} tk_ses_mfa;

/* trace:function(S, Target, MatchSpec, Flags): `ms' is a TK_MS_* value or
 * a match specification key > 0; `fflags' the TK_FF_* flags; `bad_flags'
 * nonzero for a flag the VM rejects ({meta, ...} tuples included: a
 * session with a tracer refuses them). On success *matches holds the
 * answer: the number of functions matched (exports only, for global),
 * 0 for on_load, 1 for send and receive. */
int tk_ses_function(tk_ses_model *m, int sid, int target,
                    const tk_ses_mfa *pat, long ms, uint32_t fflags,
                    int bad_flags, long *matches);

/* One call of a registered function, by any process: every session's
 * active call_count on it counts one. */
int tk_ses_call(tk_ses_model *m, int fid);

/* ---- info ------------------------------------------------------------------ */

/* Items of trace:info/3. */
#define TK_K_FLAGS            1
#define TK_K_TRACER           2
#define TK_K_TRACED           3
#define TK_K_MATCH_SPEC       4
#define TK_K_META             5
#define TK_K_META_MATCH_SPEC  6
#define TK_K_CALL_COUNT       7
#define TK_K_CALL_TIME        8
#define TK_K_CALL_MEMORY      9
#define TK_K_ALL             10
#define TK_K_OTHER           11 /* any other atom */

/* What trace:info/3 and trace:session_info/1 are asked about. */
#define TK_W_TRACEE     1 /* a pid or port: `id' is the tracee */
#define TK_W_NEW_PROCS  2 /* new, new_processes */
#define TK_W_NEW_PORTS  3 /* new_ports */
#define TK_W_FUNC       4 /* an {M,F,A}: `id' is the function or -1 */
#define TK_W_ON_LOAD    5
#define TK_W_SEND       6
#define TK_W_RECEIVE    7
#define TK_W_ALL        8 /* session_info(all) */
#define TK_W_BAD        9 /* another atom or term */

/* Values in answers. */
#define TK_V_UNDEFINED  1 /* undefined */
#define TK_V_FALSE      2
#define TK_V_TRUE       3
#define TK_V_GLOBAL     4
#define TK_V_LOCAL      5
#define TK_V_NIL        6 /* [] */
#define TK_V_MS         7 /* match specification key n */
#define TK_V_TRACER     8 /* tracer key n */
#define TK_V_INT        9 /* integer n */
#define TK_V_CALL_DATA 10 /* call_time/call_memory per-process list */
#define TK_V_FLAGS     11 /* flag list, bits n */

typedef struct {
    int kind;
    uint64_t n;
} tk_ses_value;

/* An answer {Key, Value}; with TK_K_ALL and a list value, the list is
 * items[0..nitems) in the VM's order. */
typedef struct {
    int key;
    tk_ses_value value;
    int nitems;
    struct {
        int key;
        tk_ses_value value;
    } items[8];
} tk_ses_answer;

/* trace:info(S, What, Item). Answers TK_SES_OK with *out set,
 * TK_SES_UNDEFINED when the VM answers the bare atom undefined (a dead
 * pid or port), or TK_SES_BADARG. */
int tk_ses_info(const tk_ses_model *m, int sid, int what, int id, int key,
                tk_ses_answer *out);

/* trace:session_info(What): the sessions, as session ids in the VM's
 * order, into sids[0..*n) (at most `cap'). Answers TK_SES_OK,
 * TK_SES_UNDEFINED (dead tracee, unknown function) or TK_SES_BADARG. */
int tk_ses_session_info(const tk_ses_model *m, int what, int id, int *sids,
                        int cap, int *n);

#endif

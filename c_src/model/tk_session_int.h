/* tk_session_int.h: the state of the trace session model, shared by
 * tk_session.c (sessions, tracees, process/port flags) and tk_session_fun.c
 * (function, on_load and event patterns). Not a public header. */
#ifndef TK_SESSION_INT_H
#define TK_SESSION_INT_H

#include "tk_session.h"

#define TK_SES_FREE  0
#define TK_SES_ALIVE 1
#define TK_SES_DEAD  2

/* Breakpoint flags of one session on one function (beam_bp.c). */
#define TK_BP_LOCAL        (1u << 0)
#define TK_BP_META         (1u << 1)
#define TK_BP_COUNT        (1u << 2)
#define TK_BP_COUNT_ACTIVE (1u << 3)
#define TK_BP_TIME         (1u << 4)
#define TK_BP_TIME_ACTIVE  (1u << 5)
#define TK_BP_MEM          (1u << 6)
#define TK_BP_MEM_ACTIVE   (1u << 7)

/* The on_load pattern's flags (struct trace_pattern_flags). */
#define TK_OL_BREAKPOINT (1u << 0)
#define TK_OL_LOCAL      (1u << 1)
#define TK_OL_META       (1u << 2)
#define TK_OL_COUNT      (1u << 3)
#define TK_OL_TIME       (1u << 4)
#define TK_OL_MEMORY     (1u << 5)

typedef struct {
    int state;
    uint64_t name, tracer;
    long weak_id;
    /* Defaults for new processes and ports; the tracer is the session's
     * when `*_tracer' is set. */
    uint32_t new_procs, new_ports;
    int new_procs_tracer, new_ports_tracer;
    /* send/receive event patterns: on, and a match spec key (0: none). */
    int send_on, recv_on;
    long send_ms, recv_ms;
    /* on_load pattern */
    int ol_on;
    unsigned ol_flags;
    long ol_ms, ol_meta_ms;
    int ol_meta_tracer;
} tk_ses_session;

typedef struct {
    int sid;
    uint32_t flags;
} tk_ses_ref;

typedef struct {
    int kind; /* 0 for an unused slot */
    int alive;
    int nrefs;
    tk_ses_ref refs[TK_SES_MAX_SESSIONS]; /* in the order they were made */
    uint64_t links; /* bit t: linked to tracee t */
} tk_ses_tracee;

/* One session's breakpoint on one function: `stamp' orders the sessions
 * of a function the way the VM lists them (the order breakpoints were
 * made). */
typedef struct {
    int present;
    unsigned long stamp;
    unsigned flags; /* TK_BP_* (unused on exports: present means global) */
    long ms;        /* local (or global) match spec key, 0: none */
    long meta_ms;
    long count;
} tk_ses_bp;

typedef struct {
    uint64_t module, name;
    int arity;
    int exported;
    tk_ses_bp code[TK_SES_MAX_SESSIONS];   /* local, meta, count, time, memory */
    tk_ses_bp export[TK_SES_MAX_SESSIONS]; /* global */
} tk_ses_func;

struct tk_ses_model {
    int release;
    int nsessions; /* slots used, legacy included */
    long next_weak_id;
    unsigned long next_stamp;
    tk_ses_session sessions[TK_SES_MAX_SESSIONS];
    int ntracees;
    tk_ses_tracee tracees[TK_SES_MAX_TRACEES];
    int nfuncs;
    tk_ses_func funcs[TK_SES_MAX_FUNCS];
};

/* Session `sid' exists and is alive. */
int tk_ses_is_alive_(const tk_ses_model *m, int sid);
/* Removes every pattern of session `sid' (on destroy). */
void tk_ses_clear_patterns_(tk_ses_model *m, int sid);
/* Resets the event and on_load patterns of a new session. */
void tk_ses_init_patterns_(tk_ses_session *s);
/* Function parts of tk_ses_info and tk_ses_session_info. */
int tk_ses_info_func_(const tk_ses_model *m, int sid, int fid, int key,
                      tk_ses_answer *out);
int tk_ses_info_on_load_(const tk_ses_model *m, int sid, int key,
                         tk_ses_answer *out);
int tk_ses_func_sessions_(const tk_ses_model *m, int fid, int *sids, int cap,
                          int *n);

#endif

/* export.h: what the export formats (EXPORTS.md: jsonl.c, chrome.c,
 * folded.c) share: the term text of EXPORTS.md 1.1 (termtext.c), Erlang's
 * term order and a digest of terms for equality (termorder.c), tables of
 * byte strings (intern.c), the messages sent and not yet received
 * (pending.c), and each event taken apart as EXPORTS.md 1.4 and 2.2 say
 * (export.c).
 *
 * Times are nanoseconds in 128 bits: EXPORTS.md 1.5 computes them with
 * Erlang's integers, and {Mega, Sec, Micro} of 64-bit numbers does not
 * fit in 64 bits.
 */
#ifndef TK_CAT_EXPORT_H
#define TK_CAT_EXPORT_H

#include "cat.h"

__extension__ typedef __int128 i128;

/* A text that is not NUL-terminated (a node's name, UTF-8). */
typedef struct {
    const char *p;
    size_t n;
} str;

/* ---- term text, JSON (termtext.c) ----------------------------------------- */

/* The term's text (EXPORTS.md 1.1); pids, ports and references of node
 * `home` print with 0 for their node. */
void tt_term(sbuf *b, const tree *t, const tnode *n, str home);
/* An atom as 1.1 writes it (quoted when it has to be). */
void tt_atom(sbuf *b, const tnode *a);
/* An integer (small or big) in decimal. */
void tt_int(sbuf *b, const tnode *n);
/* The node name of a pid, port or reference, UTF-8 (atom_to_binary). */
void tt_ident_node(sbuf *b, const tnode *n);
/* A JSON string of UTF-8 bytes (EXPORTS.md 1.6). */
void json_str(sbuf *b, const char *p, size_t n);
/* A term field: {"erl":TEXT[,"json":V]} (EXPORTS.md 1.7). */
void json_term(sbuf *b, const tree *t, const tnode *n, str home);
void put_i128(sbuf *b, i128 v);
/* Nanoseconds as microseconds with three decimals (EXPORTS.md 1.5). */
void put_time_us(sbuf *b, i128 ns);

/* A list seen through the tails that are lists themselves (what
 * binary_to_term makes of a LIST_EXT whose tail is a LIST_EXT). */
typedef struct {
    const tree *t;
    const tnode *l;
    uint32_t i;
} list_it;
void list_begin(list_it *it, const tree *t, const tnode *l);
/* The next element, or NULL at the end, with *tail the tail that is not
 * a list (T_NIL for a proper list). */
const tnode *list_next(list_it *it, const tnode **tail);
/* A term as binary_to_term makes it: a list of no elements is its
 * tail (EXT terms could say [] ++ X; the tracer's own records never
 * do). */
const tnode *deref(const tree *t, const tnode *n);

/* ---- term order and digests (termorder.c) --------------------------------- */

/* Erlang's standard order (EXPORTS.md 1.1, map keys): <0, 0, >0. */
int term_cmp(const tree *t, const tnode *a, const tnode *b);
/* The indices 0..n-1 of a map's pairs, in the order of their keys. */
void map_order(const tree *t, const tnode *m, uint32_t *idx);

/* 128 bits standing for a term under =:= (equal terms, equal digests;
 * different terms, different digests but with a chance of 2^-128). */
typedef struct {
    uint64_t a, b;
} digest;
digest term_digest(const tree *t, const tnode *n);
/* A digest of digests, in order. */
digest digest_join(const digest *parts, size_t n);
static inline bool digest_eq(digest x, digest y)
{
    return x.a == y.a && x.b == y.b;
}

/* ---- tables of byte strings (intern.c) -------------------------------------- */

/* Keys (byte strings) numbered 0, 1, ... in the order they were added;
 * what a key stands for is kept by the user in arrays indexed by it. */
typedef struct {
    char *bytes;
    size_t blen, bcap;
    size_t *off; /* n + 1 */
    size_t ocap;
    uint32_t *slots; /* id + 1; 0: empty */
    size_t nslots;
    uint32_t n;
} strtab;

/* The key's id, added when new (*added says so; may be NULL). */
uint32_t st_intern(strtab *s, const void *key, size_t len, bool *added);
/* The key's id, or -1. */
long st_find(const strtab *s, const void *key, size_t len);
static inline const char *st_key(const strtab *s, uint32_t id, size_t *len)
{
    *len = s->off[id + 1] - s->off[id];
    return s->bytes + s->off[id];
}

/* ---- messages sent and not yet received (pending.c) ------------------------ */

/* At most PENDING_MAX sends: a new one beyond that forgets the oldest
 * (EXPORTS.md 3.2). Each is a digest of what identifies it (the message,
 * or a seq_trace label, serial and sender), its receiver (a digest of
 * the process, or any) and its flow id. */
#define PENDING_MAX 65536u

typedef struct pending pending;
pending *pending_new(void);
void pending_add(pending *p, digest key, bool any, digest receiver, uint64_t id);
/* The flow id of the oldest send of `key` to `receiver` or to any
 * receiver, taken out; 0 when there is none. */
uint64_t pending_take(pending *p, digest key, digest receiver);

/* ---- events taken apart (export.c) ------------------------------------------- */

enum { EV_OTHER, EV_TRACE, EV_SEQ };

/* Tags the exports treat apart; TG_OTHER: any other tag, or a known tag
 * whose event has not the shape it needs (EXPORTS.md 2.2). */
enum {
    TG_OTHER,
    TG_SEND,
    TG_SEND_NX,
    TG_RECEIVE,
    TG_CALL,
    TG_RETURN_FROM,
    TG_EXCEPTION_FROM,
    TG_RETURN_TO,
    TG_SPAWN,
    TG_SPAWNED,
    TG_EXIT,
    TG_LINK,
    TG_REGISTER,
    TG_UNREGISTER,
    TG_IN,
    TG_OUT,
    TG_GC_MINOR_START,
    TG_GC_MINOR_END,
    TG_GC_MAJOR_START,
    TG_GC_MAJOR_END,
    TG_OPEN,
    TG_CLOSED,
    TG_PRINT /* seq_trace */
};

enum { F_TERM, F_MFA, F_TERMTEXT, F_TEXT, F_SERIAL };

/* One field of an event (EXPORTS.md 2.1, 2.2). */
typedef struct {
    const char *key;
    int kind;
    const tnode *term; /* F_TERM, F_TERMTEXT; F_SERIAL: {Last, Serial}; F_MFA: {M, F, _} */
    const char *text;  /* F_TEXT */
    /* F_MFA's arity: an integer term, a count, or neither ('?') */
    const tnode *arity;
    int64_t count; /* -1: none */
} efield;

typedef struct {
    int kind;           /* EV_* */
    int tag;            /* TG_* */
    bool unreturned;    /* return_to undefined */
    const tnode *ev;
    const tnode *proc;  /* the event's process (pid or port), or NULL */
    const tnode *tag_atom; /* NULL: "info" (a seq_trace Info of no tag) */
    efield f[5];
    int nf;
    uint32_t rest_from, rest_to; /* the trailing terms: kids of ev */
    const tnode *ts;    /* the timestamp term, or NULL */
    i128 ts_ns;
} event;

/* Takes an event tuple apart. */
void event_parse(const tree *t, const tnode *ev, event *e);
/* The text of a field (instants' args, jsonl's strings). */
void field_text(sbuf *b, const tree *t, const efield *f, str home);
/* The MFA string of an F_MFA field (EXPORTS.md 2.3), and its parts. */
void mfa_text(sbuf *b, const tree *t, const efield *f);
void arity_text(sbuf *b, const tree *t, const efield *f);
/* The tag's name (atom_to_binary), or "info". */
void tag_name(sbuf *b, const event *e);

/* The clock of EXPORTS.md 1.5. */
typedef struct {
    i128 clock, t0;
    bool timed;
} eclock;
i128 clock_tick(eclock *c, const event *e);

/* The node an event's process lives on, as an id in a table of node
 * names (the same table for every event). */
uint32_t node_id(strtab *nodes, const tnode *proc);
static inline str node_str(const strtab *nodes, uint32_t id)
{
    str s;
    s.p = st_key(nodes, id, &s.n);
    return s;
}

/* The identity of a process (pid or port): its node, numbers and
 * creation, as bytes that are equal exactly when the terms are. */
void proc_key(sbuf *b, const tnode *proc);

/* ---- processes, their calls and names (procs.c) ---------------------------------- */

/* A traced call not yet returned from (EXPORTS.md 3.2). */
typedef struct {
    uint32_t fid;   /* its M:F/A in the table of frames */
    uint32_t sid;   /* folded: the stack up to and with it */
    char *args;     /* chrome: the text of the arguments */
    size_t args_len;
} frame;

/* What the exports know of a process (tracekit_export's #proc{}). */
typedef struct {
    digest id;     /* the pid or port, as a receiver is compared with */
    uint32_t node; /* in procs.nodes */
    uint32_t tid;
    sbuf label;    /* pid text, then " (Name)" once it registered */
    size_t label_base; /* the pid text's length */
    sbuf announced; /* chrome: the label its tracks were named with */
    bool is_announced, sched, running;
    sbuf in;       /* running: the MFA it was scheduled in with */
    uint8_t ngc;   /* open GC slices, the last opened first */
    uint8_t gc_major[2];
    sbuf gc_info[2];
    frame *stack;  /* the bottom first */
    size_t depth, cap;
    i128 last;     /* the time of its last event */
} proc;

typedef struct {
    strtab keys;    /* proc_key() -> index in v */
    proc *v;
    size_t cap;
    strtab nodes;   /* node names, in the order first seen */
    uint32_t *ntids; /* per node: processes so far */
    size_t ntcap, ntlen;
    strtab frames;  /* "M:F/A" texts (atoms as 1.1 writes them) */
    uint32_t *fr_mf; /* per frame: its "M:F" in mfs */
    bool *fr_any;   /* per frame: arity '?' */
    size_t frcap;
    strtab mfs;
    strtab regs;    /* registered names (UTF-8) -> reg_id */
    digest *reg_id;
    size_t regcap;
    sbuf scratch;
} procs;

/* The process of an event, made when first seen (its tid the next of
 * its node's). */
proc *procs_get(procs *ps, const tree *t, const tnode *pid);
/* The frame of an F_MFA field. */
uint32_t frame_of(procs *ps, const tree *t, const efield *mfa);
/* The topmost frame of p matching a return of frame fid (same M and F;
 * same arity, or '?' on either side), or -1. */
long frame_match(const procs *ps, const proc *p, uint32_t fid);
/* A register event's name (an atom) given to p: its label, and the
 * name's process for sends to it. */
void procs_register(procs *ps, proc *p, const tree *t, const tnode *name);
/* Where a send goes, for pairing: false for any receiver. */
bool procs_receiver(procs *ps, const tree *t, const tnode *to, digest *out);
static inline str frame_str(const procs *ps, uint32_t fid)
{
    str s;
    s.p = st_key(&ps->frames, fid, &s.n);
    return s;
}

/* Output: an event's text goes out whole. */
static inline void out_sb(const sbuf *b)
{
    out_write(b->p, b->len);
}

sink *jsonl_sink(void);
sink *chrome_sink(void);
sink *folded_sink(void);
/* the report of tracekit_report (html.c) */
sink *html_sink(const text_opts *o);

#endif

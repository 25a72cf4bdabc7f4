/* tk_seq.h: a model of the VM's sequential tracing (seq_trace).
 *
 * A world holds model processes, the messages queued for them and the
 * seq_trace events the VM would hand to the system seq tracer. Operations
 * mirror what the VM does for seq_trace:set_token/1,2, get_token/0,1,
 * print/1,2, reset_trace/0, message sending and receiving, spawning and
 * process exit, and return what the VM's functions return. Events carry
 * the kind of their timestamp, not its value.
 *
 * Terms are not modelled: labels, message contents and print infos are
 * opaque numbers chosen by the caller (equal numbers stand for exactly
 * equal terms, =:=). Label 0 stands for the integer 0, the label of a new
 * token.
 *
 * Counters follow the VM's representation: the per-process clock and
 * lastcnt are 64-bit unsigned words; the token's serial and lastcnt are
 * small integers (60-bit signed on a 64-bit VM), made from the words by
 * keeping their low 60 bits (tk_small.h).
 *
 * Every process of a world traps exits: exit signals always become
 * messages. A world is not thread-safe; callers serialise access.
 */
#ifndef TK_SEQ_H
#define TK_SEQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tk_small.h"

/* Token flag bits, as in the token's Flags field. */
#define TK_SEQ_SEND 1u
#define TK_SEQ_RECEIVE 2u
#define TK_SEQ_PRINT 4u
#define TK_SEQ_TIMESTAMP 8u
#define TK_SEQ_STRICT_MONOTONIC 16u
#define TK_SEQ_MONOTONIC 32u
#define TK_SEQ_ALL_FLAGS 63u

/* "No process": the receiver field of a print event ([] in the VM). */
#define TK_SEQ_NOBODY UINT32_MAX

/* Result codes of the operations. */
enum {
    TK_SEQ_OK = 0,
    TK_SEQ_BADARG = -1, /* the VM raises badarg */
    TK_SEQ_NOPROC = -2, /* no such model process, or it is dead */
    TK_SEQ_NOMSG = -3,  /* no such message queued for that process */
    TK_SEQ_NOMEM = -4
};

/* What the system seq tracer does with the VM's questions. */
typedef enum {
    TK_SEQ_TRACER_NONE,   /* no system tracer: serials advance, no events */
    TK_SEQ_TRACER_ACCEPT, /* enabled/3 answers trace: serials advance, events */
    TK_SEQ_TRACER_REFUSE  /* enabled/3 answers anything else: neither */
} tk_seq_tracer;

/* A trace token, {Flags, Label, Serial, From, LastCnt}, or [] when
 * `present` is false. */
typedef struct {
    bool present;
    unsigned flags;
    uint32_t label;
    int64_t serial;  /* a small integer */
    uint32_t from;   /* model process id */
    int64_t lastcnt; /* a small integer */
} tk_seq_token;

/* Kinds of information transfer. */
typedef enum {
    TK_SEQ_MSG_USER,          /* Msg: the content */
    TK_SEQ_MSG_EXIT,          /* {'EXIT', From, Content} */
    TK_SEQ_MSG_SPAWN_REQUEST, /* the spawn_request; content: the child */
    TK_SEQ_MSG_SPAWN_REPLY,   /* the spawn_reply; content: the child */
    TK_SEQ_MSG_PRINT          /* a print event's info */
} tk_seq_msg_kind;

/* What a message carries in its token slot. */
typedef enum {
    TK_SEQ_CARRY_EMPTY, /* []: receiving it clears the receiver's token */
    TK_SEQ_CARRY_TOKEN, /* a token: receiving it installs the token */
    TK_SEQ_CARRY_NONE   /* no token information (timer messages, 'DOWN',
                           enif_send without a message environment):
                           receiving it leaves the receiver's token alone */
} tk_seq_carry;

typedef enum { TK_SEQ_EV_SEND, TK_SEQ_EV_RECEIVE, TK_SEQ_EV_PRINT } tk_seq_ev_kind;

/* The timestamp an event carries, chosen from the token's flags. */
typedef enum {
    TK_SEQ_TS_NONE,
    TK_SEQ_TS_TIMESTAMP,
    TK_SEQ_TS_STRICT_MONOTONIC,
    TK_SEQ_TS_MONOTONIC
} tk_seq_ts;

/* One event as the system tracer gets it:
 * {seq_trace, Label, {Kind, {LastCnt, Serial}, From, To, Msg}[, Ts]}. */
typedef struct {
    tk_seq_ev_kind kind;
    uint32_t label;
    int64_t lastcnt, serial;
    uint32_t from, to; /* to is TK_SEQ_NOBODY for print */
    tk_seq_msg_kind msg_kind;
    uint64_t content;  /* user content, exit reason, child, print info */
    uint32_t msg_from; /* for TK_SEQ_MSG_EXIT: the exiting process */
    tk_seq_ts ts;
} tk_seq_event;

/* Answer of get_token/1. */
typedef enum {
    TK_SEQ_ANS_NIL,    /* [] */
    TK_SEQ_ANS_BOOL,   /* {Component, Bool} */
    TK_SEQ_ANS_LABEL,  /* {label, Label} */
    TK_SEQ_ANS_SERIAL  /* {serial, {LastCnt, Serial}} */
} tk_seq_ans_kind;

typedef struct {
    tk_seq_ans_kind kind;
    bool flag;
    uint32_t label;
    int64_t lastcnt, serial;
} tk_seq_answer;

/* Components of get_token/1 besides the flags. */
#define TK_SEQ_COMP_LABEL 0x100u
#define TK_SEQ_COMP_SERIAL 0x200u
#define TK_SEQ_COMP_SPAWN 0x400u /* accepted only while there is no token */

typedef struct tk_seq_world tk_seq_world;

/* The timestamp kind for a token's flags: timestamp, then
 * strict_monotonic_timestamp, then monotonic_timestamp. */
tk_seq_ts tk_seq_ts_of(unsigned flags);

/* ---- worlds and processes ---------------------------------------------- */

/* A world without processes; NULL when out of memory. */
tk_seq_world *tk_seq_world_new(tk_seq_tracer tracer);
void tk_seq_world_free(tk_seq_world *w);

void tk_seq_set_tracer(tk_seq_world *w, tk_seq_tracer tracer);
tk_seq_tracer tk_seq_get_tracer(const tk_seq_world *w);

/* A new live process without token, clock and lastcnt 0 (a process
 * spawned by one without token). *id gets its id. */
int tk_seq_proc_new(tk_seq_world *w, uint32_t *id);

size_t tk_seq_proc_count(const tk_seq_world *w);
bool tk_seq_proc_alive(const tk_seq_world *w, uint32_t id);

/* The process's clock and lastcnt words (not visible in the VM, except
 * through the serials they produce). */
int tk_seq_counters(const tk_seq_world *w, uint32_t id, uint64_t *clock,
                    uint64_t *lastcnt);

/* ---- seq_trace:set_token/1,2, get_token/0,1 ----------------------------- */

/* set_token(Flag, Bool): creates a token if there is none; *old gets the
 * flag's previous value. `flag` is one of the flag bits. */
int tk_seq_set_flag(tk_seq_world *w, uint32_t id, unsigned flag, bool on,
                    bool *old);

/* set_token(label, Label): creates a token if there is none; *old gets the
 * previous label (0 for a new token). */
int tk_seq_set_label(tk_seq_world *w, uint32_t id, uint32_t label,
                     uint32_t *old);

/* set_token(serial, {Prev, Cur}): TK_SEQ_BADARG unless both are small,
 * and then nothing changes. Creates a token if there is none, sets the
 * token's lastcnt and serial to Prev and Cur and the process's lastcnt and
 * clock to their unsigned values; *old_prev, *old_cur get the token's
 * previous lastcnt and serial. */
int tk_seq_set_serial(tk_seq_world *w, uint32_t id, int64_t prev, int64_t cur,
                      int64_t *old_prev, int64_t *old_cur);

/* set_token([]): *old gets the previous token (present or not). */
int tk_seq_clear_token(tk_seq_world *w, uint32_t id, tk_seq_token *old);

/* set_token({Flags, Label, Serial, From, LastCnt}): what seq_trace does
 * for it, in its order: set the label, set the serial {LastCnt, Serial}
 * (TK_SEQ_BADARG here, with the label already set, when either is not
 * small), then each of the six flags from the bits of `flags`. From is
 * ignored: the token's From becomes the process itself. */
int tk_seq_set_token(tk_seq_world *w, uint32_t id, unsigned flags,
                     uint32_t label, int64_t serial, int64_t lastcnt);

/* get_token(): *out gets the token (present or not). */
int tk_seq_get_token(const tk_seq_world *w, uint32_t id, tk_seq_token *out);

/* get_token(Component): `comp` is a flag bit or one of TK_SEQ_COMP_*.
 * Without a token flags answer false, label and serial answer [] and
 * spawn answers false; with a token spawn is TK_SEQ_BADARG. */
int tk_seq_get_component(const tk_seq_world *w, uint32_t id, unsigned comp,
                         tk_seq_answer *out);

/* ---- events of the processes --------------------------------------------- */

/* seq_trace:print(Info) (label == NULL) or print(Label, Info). *passed
 * gets what the underlying BIF answers: true when the process has a token
 * (and, for print/2, the label matches exactly). */
int tk_seq_print(tk_seq_world *w, uint32_t id, const uint32_t *label,
                 uint64_t info, bool *passed);

/* Process `from` sends `content` to `to`. *msg gets the id of the message
 * queued for `to`, or 0 when `to` is dead: a send to a dead local process
 * neither advances the serial nor makes an event. */
int tk_seq_send(tk_seq_world *w, uint32_t from, uint32_t to, uint64_t content,
                uint32_t *msg);

/* A message reaches `to` from outside any process's token (a timer, a
 * monitor's 'DOWN', enif_send without a message environment). */
int tk_seq_deliver_untokened(tk_seq_world *w, uint32_t to, uint64_t content,
                             uint32_t *msg);

/* Process `id` receives (matches in a receive expression) message `msg`
 * of its queue. TK_SEQ_NOMSG if that message is not queued there. */
int tk_seq_receive(tk_seq_world *w, uint32_t id, uint32_t msg);

/* Messages queued for `id`, oldest first: writes up to `max` ids to
 * `out` and returns how many are queued (or a negative error). */
long tk_seq_queue(const tk_seq_world *w, uint32_t id, uint32_t *out,
                  size_t max);

/* The message's kind, content, sender and token slot. */
int tk_seq_msg_info(const tk_seq_world *w, uint32_t msg, tk_seq_msg_kind *kind,
                    uint64_t *content, uint32_t *from, tk_seq_carry *carry,
                    tk_seq_token *token);

/* Process `parent` spawns a process (linked to it when `link`); *child
 * gets its id. With a token this is a spawn_request from parent to child
 * and a spawn_reply back, each traced as a send and a receive. */
int tk_seq_spawn(tk_seq_world *w, uint32_t parent, bool link, uint32_t *child);

/* link(B) called by A (no seq_trace effect; exit signals follow links). */
int tk_seq_link(tk_seq_world *w, uint32_t a, uint32_t b);

/* Process `id` terminates with `reason`: an exit signal
 * {'EXIT', id, reason} goes to each linked process, in the order the links
 * were made, and is queued there as a message. (The VM sends them in the
 * order of its link tree, a post-order walk of a tree keyed by pid: with
 * more than one link the serials each signal gets differ from the VM's.) */
int tk_seq_exit(tk_seq_world *w, uint32_t id, uint64_t reason);

/* seq_trace:reset_trace(): every process's token, clock and lastcnt
 * become empty and 0; every queued message carries []. */
void tk_seq_reset(tk_seq_world *w);

/* ---- output ------------------------------------------------------------ */

/* The events produced since the last tk_seq_events_clear(), in the order
 * the VM produces them. *n gets their number. */
const tk_seq_event *tk_seq_events(const tk_seq_world *w, size_t *n);
void tk_seq_events_clear(tk_seq_world *w);

#endif

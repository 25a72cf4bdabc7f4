/* tk_seqorder.h: causal order of seq_trace events.
 *
 * seq_trace events collected on one or several nodes (and merged in any
 * order, as logs merged offline are) are put in an order that respects
 * causality, using only what the tokens say:
 *
 *  - a send and the receive of the same transfer carry the same label,
 *    {LastCnt, Serial} and sender, and the same message: they are matched,
 *    and the send comes first;
 *  - the sends and prints of one process have increasing serials (each
 *    one advances the process's clock): they keep that order;
 *  - after a process receives a message with serial s its clock is at
 *    least s, so its sends and prints with a serial <= s came before;
 *  - a process's lastcnt is the serial of the last message it received,
 *    so its first send or print after a receive of serial s carries
 *    LastCnt = s, and the receive came before it, after the send or print
 *    before that one. (When the receive is the parent's receipt of a
 *    spawn_reply, the VM sets lastcnt to 16 * s + 15 instead, the tagged
 *    machine word of s: marked events are looked up that way.)
 *
 * Events not ordered by these rules are put in increasing serial order
 * (sends and prints before receives of the same serial, then by process
 * and input position), so the result is deterministic. Inconsistent input
 * (a reset_trace in the middle, two receives of the same serial in one
 * process) can make the rules contradict each other; the order is then
 * completed the same deterministic way rather than failing.
 *
 * Terms are interned by the caller: labels, processes (or any sender and
 * receiver term) and messages are numbers, equal numbers for equal terms.
 */
#ifndef TK_SEQORDER_H
#define TK_SEQORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    TK_SEQORDER_SEND,
    TK_SEQORDER_RECEIVE,
    TK_SEQORDER_PRINT
} tk_seqorder_kind;

/* The receiver of a print event (there is none). */
#define TK_SEQORDER_NOBODY UINT32_MAX

typedef struct {
    tk_seqorder_kind kind;
    uint32_t label;
    int64_t lastcnt, serial;
    uint32_t from; /* the sender (print: the printing process) */
    uint32_t to;   /* the receiver; TK_SEQORDER_NOBODY for print */
    uint32_t msg;  /* the message or print info */
    bool spawn_reply; /* a receive of a spawn_reply (see above) */
} tk_seqorder_event;

/* Orders the n events of `ev`. order[k] gets the input index of the k-th
 * event in causal order; match[i] gets the input index of the event
 * matched with event i (a send's receive, a receive's send) or -1.
 * Returns 0, or -1 when out of memory. */
int tk_seqorder(const tk_seqorder_event *ev, size_t n, size_t *order,
                long *match);

#endif

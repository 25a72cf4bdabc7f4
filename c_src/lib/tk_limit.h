/* tk_limit.h: the event limits of a trace, as tracekit_limits.erl has
 * them: at most `max` events, and at most `rate_n` events within any span
 * of `rate_span` time units. The trace file's writer applies them to the
 * records it takes in time order, so that a file stops at the same event
 * a printed trace would.
 *
 * Each event is shown, shown as the last one (it reaches `max`), or
 * stopped (it would exceed the rate: it is not shown). After the last or
 * a stopped event the limit is reached, and every later event is over.
 * Pure: the caller gives each event's time, in any unit that does not go
 * back (a time earlier than the window's oldest counts as equal to it).
 */
#ifndef TK_LIMIT_H
#define TK_LIMIT_H

#include <stdint.h>

/* The most events a rate may name: its window keeps one time each. */
#define TK_LIMIT_RATE_MAX 1000000u

enum { TK_LIMIT_NONE = 0, TK_LIMIT_MAX = 1, TK_LIMIT_RATE = 2 };
enum { TK_LIMIT_SHOW = 0, TK_LIMIT_LAST = 1, TK_LIMIT_STOP = 2, TK_LIMIT_OVER = 3 };

typedef struct {
    uint64_t max;       /* 0: no limit on the number */
    uint32_t rate_n;    /* 0: no rate */
    uint64_t rate_span; /* the rate's span, in the callers' time unit */
    uint64_t *window;   /* the times of the last rate_n shown events */
    uint32_t head, len; /* the oldest's index; how many are kept */
    uint64_t shown;     /* events shown (with the last one) */
    uint64_t over;      /* events after the limit was reached (not shown) */
    int reached;        /* TK_LIMIT_NONE, or which limit was reached */
} tk_limit;

/* 0, or -1 when the window cannot be allocated or rate_n is above
 * TK_LIMIT_RATE_MAX. rate_n == 0: no rate. max == 0: no maximum. */
int tk_limit_init(tk_limit *l, uint64_t max, uint32_t rate_n, uint64_t rate_span);
void tk_limit_free(tk_limit *l);

/* Decides about one event at time t: TK_LIMIT_SHOW, TK_LIMIT_LAST (shown,
 * and now the maximum is reached), TK_LIMIT_STOP (not shown: the rate is
 * reached) or TK_LIMIT_OVER (a limit was reached before; not shown). */
int tk_limit_event(tk_limit *l, uint64_t t);

#endif

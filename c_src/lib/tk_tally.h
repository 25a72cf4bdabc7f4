/* tk_tally.h: event counters, one row per producer thread.
 *
 * Each producer thread owns one slot (see the NIFs' thread registry) and is
 * the only writer of its row, so counting is a relaxed load and store: no
 * read-modify-write, no shared cache line. Rows are allocated the first time
 * a thread counts, once. The last slot, TK_TALLY_SHARED, is for threads
 * beyond the registry's capacity and counts with atomic adds.
 *
 * Readers sum the rows. Reset does not write the rows (that would race
 * with their owners): it records the current sums as a baseline that later
 * reads subtract, so no concurrent increment is ever lost.
 */
#ifndef TK_TALLY_H
#define TK_TALLY_H

#include <stdatomic.h>
#include <stdint.h>

#define TK_TALLY_SLOTS 256 /* producer slots, the shared one included */
#define TK_TALLY_SHARED (TK_TALLY_SLOTS - 1)
#define TK_TALLY_KEYS 64 /* counters per row (tag indexes, tk_tags.h) */

typedef struct {
    _Atomic uint64_t n[TK_TALLY_KEYS];
} tk_tally_row;

typedef struct {
    _Atomic(tk_tally_row *) rows[TK_TALLY_SLOTS];
    _Atomic uint64_t baseline[TK_TALLY_KEYS];
} tk_tally;

/* 0 on success, -1 when out of memory. */
int tk_tally_init(tk_tally *t);
void tk_tally_destroy(tk_tally *t);

/* Adds one to counter `key` of `slot`; called only by the slot's owner
 * thread (any thread for TK_TALLY_SHARED). If the thread's row cannot be
 * allocated the event is counted in the shared row. */
void tk_tally_add(tk_tally *t, unsigned slot, unsigned key);

/* out[k] = count of key k since the last reset, for every k. */
void tk_tally_read(tk_tally *t, uint64_t out[TK_TALLY_KEYS]);

void tk_tally_reset(tk_tally *t);

#endif

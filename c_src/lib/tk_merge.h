/* tk_merge.h: the consumer side of a set of producer rings, one per
 * producer thread: takes their records out and hands them back merged into
 * one stream ordered by stamp.
 *
 * Order guarantee. Records of one ring come in the order they were pushed.
 * Across rings, records come by stamp, and a record is handed out only when
 * every record that happened before it (in the C11 sense: pushed before, on
 * any thread, with a chain of synchronisation in between, such as a
 * process moving from one scheduler to another) is already in hand. That
 * is what keeps the events of one traced process in order although they
 * are spread over several rings.
 *
 * How: tk_merge_collect reads every ring's head twice, H1 then H2, and
 * takes records up to H2. A record below H1[b] was published before the
 * first pass read ring b, so anything that happened before it was
 * published before the second pass, hence lies below H2 of its own ring
 * and was taken too. Records between H1 and H2 give no such promise, so
 * the smallest stamp among them bounds what may be handed out: since
 * stamps grow along happens-before, every record with a smaller stamp is
 * below H1 in its ring (or earlier). Records at or above the bound stay
 * staged for a later collect, where they meet whatever precedes them.
 *
 * When a collect leaves records in a ring (a per-ring limit), those have
 * stamps at least the newest staged from that ring, so records up to that
 * stamp may go out.
 *
 * Staging is consumer memory (allocated outside any producer hot path).
 * One consumer at a time: callers serialise tk_merge use.
 */
#ifndef TK_MERGE_H
#define TK_MERGE_H

#include <stddef.h>
#include <stdint.h>

#include "tk_ring.h"

typedef struct tk_merge_src tk_merge_src;

typedef struct {
    unsigned nsrc;
    tk_merge_src *src;
    unsigned *active;   /* sources with staged records */
    unsigned nactive;
    uint64_t bound;     /* records with stamp < bound may be handed out */
    uint64_t *h1;       /* per-collect scratch */
} tk_merge;

/* nsrc rings at most. Returns 0, or -1 when out of memory. Staging grows
 * as records come: a source's buffer holds at least its largest record. */
int tk_merge_init(tk_merge *m, unsigned nsrc);
void tk_merge_destroy(tk_merge *m);

/* Moves published records from rings[0..nsrc) (NULL entries are rings not
 * created yet) into staging, at most `limit` staged records per ring (0:
 * no limit), and recomputes the bound. Returns -1 if staging could not
 * grow (what was taken stays staged), else 0. It is tk_merge_heads (the
 * first pass, H1) then tk_merge_take (the second pass, H2): the tests call
 * them apart to place records between the passes. */
int tk_merge_collect(tk_merge *m, _Atomic(tk_ring *) *rings, size_t limit);
void tk_merge_heads(tk_merge *m, _Atomic(tk_ring *) *rings);
int tk_merge_take(tk_merge *m, _Atomic(tk_ring *) *rings, size_t limit);

/* The next record in merged order that may be handed out: 1 with *payload
 * (valid until the next tk_merge call), *len and *stamp set, or 0. */
int tk_merge_next(tk_merge *m, const void **payload, size_t *len,
                  uint64_t *stamp);

/* Records staged (taken from the rings, not handed out yet). */
size_t tk_merge_staged(const tk_merge *m);

#endif

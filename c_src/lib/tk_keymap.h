/* tk_keymap.h: a lock-free, insert-only map from nonzero 64-bit keys to
 * small dense indexes (the position of the key in the table).
 *
 * Used to turn trace tags (atoms, whose term words never change) into
 * counter indexes on the hot path. Lookups are wait-free; an insert is one
 * compare-and-swap per probed slot. Keys are never removed.
 */
#ifndef TK_KEYMAP_H
#define TK_KEYMAP_H

#include <stdatomic.h>
#include <stdint.h>

#define TK_KEYMAP_CAP 256 /* a power of two */

typedef struct {
    _Atomic uint64_t keys[TK_KEYMAP_CAP]; /* 0 = empty */
} tk_keymap;

void tk_keymap_init(tk_keymap *m);

/* Index of `key` (nonzero), inserting it if absent; -1 when the map is full. */
int tk_keymap_index(tk_keymap *m, uint64_t key);

/* Index of `key`, or -1 when absent. */
int tk_keymap_find(const tk_keymap *m, uint64_t key);

/* The key at index i, or 0 when that slot is empty. */
static inline uint64_t tk_keymap_key(const tk_keymap *m, int i)
{
    return atomic_load_explicit(&m->keys[i], memory_order_acquire);
}

#endif

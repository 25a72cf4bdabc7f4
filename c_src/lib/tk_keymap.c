#include "tk_keymap.h"

#include <stddef.h>

void tk_keymap_init(tk_keymap *m)
{
    for (size_t i = 0; i < TK_KEYMAP_CAP; i++)
        atomic_init(&m->keys[i], 0);
}

static unsigned home(uint64_t key)
{
    /* Fibonacci hashing: atom words differ in their upper bits. */
    return (unsigned)((key * 0x9E3779B97F4A7C15ull) >> 56) & (TK_KEYMAP_CAP - 1);
}

int tk_keymap_find(const tk_keymap *m, uint64_t key)
{
    unsigned h = home(key);
    for (unsigned n = 0; n < TK_KEYMAP_CAP; n++) {
        unsigned i = (h + n) & (TK_KEYMAP_CAP - 1);
        uint64_t k = atomic_load_explicit(&m->keys[i], memory_order_acquire);
        if (k == key)
            return (int)i;
        if (k == 0)
            return -1;
    }
    return -1;
}

int tk_keymap_index(tk_keymap *m, uint64_t key)
{
    unsigned h = home(key);
    for (unsigned n = 0; n < TK_KEYMAP_CAP; n++) {
        unsigned i = (h + n) & (TK_KEYMAP_CAP - 1);
        uint64_t k = atomic_load_explicit(&m->keys[i], memory_order_acquire);
        if (k == 0) {
            uint64_t expected = 0;
            /* Claim the empty slot; if another thread claimed it first,
             * `expected` now holds its key and we compare against that. */
            if (atomic_compare_exchange_strong_explicit(
                    &m->keys[i], &expected, key, memory_order_acq_rel,
                    memory_order_acquire))
                return (int)i;
            k = expected;
        }
        if (k == key)
            return (int)i;
    }
    return -1;
}

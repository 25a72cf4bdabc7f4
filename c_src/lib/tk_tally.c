#include "tk_tally.h"

#include "tk_mem.h"
#include "tk_stat.h"

int tk_tally_init(tk_tally *t)
{
    for (unsigned s = 0; s < TK_TALLY_SLOTS; s++)
        atomic_init(&t->rows[s], NULL);
    for (unsigned k = 0; k < TK_TALLY_KEYS; k++)
        atomic_init(&t->baseline[k], 0);
    /* The shared row exists from the start: it is the fallback when a
     * per-thread row cannot be allocated. */
    tk_tally_row *shared = tk_mem_zalloc(sizeof *shared);
    if (shared == NULL)
        return -1;
    atomic_store_explicit(&t->rows[TK_TALLY_SHARED], shared,
                          memory_order_release);
    return 0;
}

void tk_tally_destroy(tk_tally *t)
{
    for (unsigned s = 0; s < TK_TALLY_SLOTS; s++) {
        tk_mem_free(atomic_load_explicit(&t->rows[s], memory_order_acquire));
        atomic_store_explicit(&t->rows[s], NULL, memory_order_relaxed);
    }
}

void tk_tally_add(tk_tally *t, unsigned slot, unsigned key)
{
    if (key >= TK_TALLY_KEYS)
        return;
    if (slot >= TK_TALLY_SHARED)
        goto shared;
    tk_tally_row *row =
        atomic_load_explicit(&t->rows[slot], memory_order_relaxed);
    if (row == NULL) {
        /* First event of this thread: only this thread writes the slot.
         * Release so that a reader that sees the pointer sees zeroed
         * counters. */
        row = tk_mem_zalloc(sizeof *row);
        if (row == NULL)
            goto shared;
        atomic_store_explicit(&t->rows[slot], row, memory_order_release);
    }
    tk_stat_add(&row->n[key], 1);
    return;
shared:;
    tk_tally_row *sh =
        atomic_load_explicit(&t->rows[TK_TALLY_SHARED], memory_order_acquire);
    atomic_fetch_add_explicit(&sh->n[key], 1, memory_order_relaxed);
}

static void sums(tk_tally *t, uint64_t out[TK_TALLY_KEYS])
{
    for (unsigned k = 0; k < TK_TALLY_KEYS; k++)
        out[k] = 0;
    for (unsigned s = 0; s < TK_TALLY_SLOTS; s++) {
        tk_tally_row *row =
            atomic_load_explicit(&t->rows[s], memory_order_acquire);
        if (row == NULL)
            continue;
        for (unsigned k = 0; k < TK_TALLY_KEYS; k++)
            out[k] += atomic_load_explicit(&row->n[k], memory_order_relaxed);
    }
}

void tk_tally_read(tk_tally *t, uint64_t out[TK_TALLY_KEYS])
{
    sums(t, out);
    for (unsigned k = 0; k < TK_TALLY_KEYS; k++) {
        uint64_t b =
            atomic_load_explicit(&t->baseline[k], memory_order_relaxed);
        /* A reset that ran after our sums were taken: nothing since. */
        out[k] = out[k] > b ? out[k] - b : 0;
    }
}

void tk_tally_reset(tk_tally *t)
{
    uint64_t now[TK_TALLY_KEYS];
    sums(t, now);
    for (unsigned k = 0; k < TK_TALLY_KEYS; k++)
        atomic_store_explicit(&t->baseline[k], now[k], memory_order_relaxed);
}

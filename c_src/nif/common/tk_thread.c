#include "tk_thread.h"

#include <stdatomic.h>
#include <stdint.h>

static ErlNifTSDKey slot_key;
static atomic_uint next_slot;

int tk_thread_init(void)
{
    atomic_init(&next_slot, 0);
    return enif_tsd_key_create("tracekit_thread_slot", &slot_key);
}

void tk_thread_fini(void)
{
    enif_tsd_key_destroy(slot_key);
}

unsigned tk_thread_slot(void)
{
    /* Stored as slot + 1 so that NULL means "not assigned yet". */
    uintptr_t v = (uintptr_t)enif_tsd_get(slot_key);
    if (v != 0)
        return (unsigned)(v - 1);
    unsigned s = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    if (s >= TK_THREAD_SHARED)
        s = TK_THREAD_SHARED;
    enif_tsd_set(slot_key, (void *)(uintptr_t)(s + 1));
    return s;
}

unsigned tk_thread_count(void)
{
    unsigned n = atomic_load_explicit(&next_slot, memory_order_relaxed);
    return n > TK_THREAD_SLOTS ? TK_THREAD_SLOTS : n;
}

#include "tk_thread.h"

#include <stdatomic.h>

static atomic_uint next_slot;
/* The calling thread's slot, in C11 thread-local storage (one TLS read on
 * the hot path), stored as slot + 1 so that 0 means "not assigned yet". */
static _Thread_local unsigned my_slot;

unsigned tk_thread_slot(void)
{
    if (my_slot != 0)
        return my_slot - 1;
    unsigned s = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    if (s >= TK_THREAD_SHARED)
        s = TK_THREAD_SHARED;
    my_slot = s + 1;
    return s;
}

unsigned tk_thread_count(void)
{
    unsigned n = atomic_load_explicit(&next_slot, memory_order_relaxed);
    return n > TK_THREAD_SLOTS ? TK_THREAD_SLOTS : n;
}

#include "tk_thread.h"

#include <stdatomic.h>

static atomic_uint next_slot;
/* Stored as slot + 1, so that 0 means "not assigned yet". */
_Thread_local unsigned tk_thread_my_slot TK_TLS_IE;

unsigned tk_thread_assign(void)
{
    unsigned s = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed);
    if (s >= TK_THREAD_SHARED)
        s = TK_THREAD_SHARED;
    tk_thread_my_slot = s + 1;
    return s;
}

const void *tk_thread_registry(void)
{
    return &next_slot;
}

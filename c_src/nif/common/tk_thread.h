/* tk_thread.h: gives every thread that calls into a NIF library a small,
 * stable slot number, so that per-thread data (counter rows, producer
 * rings) has exactly one writer.
 *
 * The slot lives in a C11 thread-local variable of the library (standard
 * C, no private ERTS symbols; each library has its own). The first call
 * from a thread takes the next number; later calls are one TLS read.
 * Threads past TK_THREAD_SLOTS - 1 all get TK_THREAD_SHARED, which callers
 * must treat as multi-writer.
 */
#ifndef TK_THREAD_H
#define TK_THREAD_H

#include <erl_nif.h>

#define TK_THREAD_SLOTS 256
#define TK_THREAD_SHARED (TK_THREAD_SLOTS - 1)

/* (No set-up is needed. Slot numbers are never reused: a library that sees
 * threads come and go by the hundreds runs out of owned slots, and later
 * threads share TK_THREAD_SHARED.) */

/* The calling thread's slot plus one; 0 until its first call. The
 * initial-exec model makes the read one instruction instead of a call to
 * __tls_get_addr: the variable is 4 bytes of the static TLS space that the
 * C library keeps for libraries loaded with dlopen. */
#if defined(__GNUC__)
#define TK_TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define TK_TLS_IE
#endif
extern _Thread_local unsigned tk_thread_my_slot TK_TLS_IE;

/* First call from a thread: takes the next number. */
unsigned tk_thread_assign(void);

/* The calling thread's slot. */
static inline unsigned tk_thread_slot(void)
{
    unsigned s = tk_thread_my_slot;
    return s != 0 ? s - 1 : tk_thread_assign();
}

/* How many slots have been handed out (capped at TK_THREAD_SLOTS). */
unsigned tk_thread_count(void);

#endif

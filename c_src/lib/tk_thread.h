/* tk_thread.h: gives every thread that calls into a library a small,
 * stable slot number, so that per-thread data (counter rows, producer
 * rings, encoding buffers) has exactly one writer.
 *
 * The slot lives in a C11 thread-local variable (standard C, no private
 * ERTS symbols). Each shared library that links this file has its own
 * registry: its own numbering and its own thread-local variable. The
 * first call from a thread takes the next number; later calls are one TLS
 * read. Threads past TK_THREAD_SLOTS - 1 all get TK_THREAD_SHARED, which
 * callers must treat as multi-writer. Slot numbers are never reused: a
 * library that sees threads come and go by the hundreds runs out of owned
 * slots, and later threads share TK_THREAD_SHARED.
 */
#ifndef TK_THREAD_H
#define TK_THREAD_H

#define TK_THREAD_SLOTS 256
#define TK_THREAD_SHARED (TK_THREAD_SLOTS - 1)

/* The initial-exec model makes the read one instruction instead of a call
 * to __tls_get_addr: the variable is 4 bytes of the static TLS space that
 * the C library keeps for libraries loaded with dlopen. */
#if defined(__GNUC__)
#define TK_TLS_IE __attribute__((tls_model("initial-exec")))
#else
#define TK_TLS_IE
#endif
/* The calling thread's slot plus one; 0 until its first call. */
extern _Thread_local unsigned tk_thread_my_slot TK_TLS_IE;

/* First call from a thread: takes the next number. */
unsigned tk_thread_assign(void);

/* The calling thread's slot. */
static inline unsigned tk_thread_slot(void)
{
    unsigned s = tk_thread_my_slot;
    return s != 0 ? s - 1 : tk_thread_assign();
}

/* This registry's identity: data keyed by slot number is only meaningful
 * to the registry that numbered the threads. (A NIF library upgraded from
 * another file has a registry of its own.) */
const void *tk_thread_registry(void);

#endif

/* tk_scratch.h: per-thread encoding buffers of a NIF library.
 *
 * An event is encoded into the calling thread's buffer, then copied into
 * that thread's ring. A buffer starts at TK_SCRATCH_MIN bytes and grows
 * only when an event does not fit (a term larger than that, recorded
 * whole): once per thread and size, never on the common path. Only the
 * owner thread of a slot touches it, until the library unloads.
 */
#ifndef TK_SCRATCH_H
#define TK_SCRATCH_H

#include <stddef.h>

#include "tk_thread.h"

#define TK_SCRATCH_MIN (64 * 1024)

typedef struct {
    unsigned char *buf;
    size_t cap;
} tk_scratch_slot;

typedef struct {
    tk_scratch_slot slot[TK_THREAD_SHARED];
} tk_scratch;

/* The buffer of `slot` (the caller's own), grown to at least `want` bytes
 * (at least TK_SCRATCH_MIN) if memory allows; *cap gets its size. NULL
 * for the shared slot, or when there is no buffer at all. */
unsigned char *tk_scratch_get(tk_scratch *s, unsigned slot, size_t want,
                              size_t *cap);

/* Frees every buffer: no thread may be using any. */
void tk_scratch_free(tk_scratch *s);

#endif

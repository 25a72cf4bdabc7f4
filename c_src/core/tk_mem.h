/* tk_mem.h: where the core gets its memory.
 *
 * Plain malloc/free by default (the C tests); a NIF library points these at
 * enif_alloc/enif_free when it loads, so that the memory of rings and
 * counters shows in erlang:memory() like any other memory of the VM.
 */
#ifndef TK_MEM_H
#define TK_MEM_H

#include <stddef.h>

extern void *(*tk_mem_alloc)(size_t);
extern void (*tk_mem_free)(void *);

/* Zeroed memory, or NULL. */
void *tk_mem_zalloc(size_t n);
/* Grows or shrinks a block (contents kept up to the smaller size). */
void *tk_mem_realloc(void *p, size_t old_size, size_t new_size);

#endif

/* tk_mem.h: where the C library gets its memory.
 *
 * Plain malloc/free by default (the C tests); a NIF library points these
 * at enif_alloc/enif_free when it loads, so that all the memory the
 * library allocates (rings, staging, counter rows, published
 * configurations, models) shows in erlang:memory() like any other memory
 * of the VM. Every allocation in c_src/lib and c_src/model goes through
 * here.
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
/* A block of n bytes aligned to `align` (a power of two), or NULL; freed
 * with tk_mem_aligned_free. */
void *tk_mem_aligned_alloc(size_t align, size_t n);
void tk_mem_aligned_free(void *p);

#endif

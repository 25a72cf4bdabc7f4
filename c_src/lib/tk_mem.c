#include "tk_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *(*tk_mem_alloc)(size_t) = malloc;
void (*tk_mem_free)(void *) = free;

void *tk_mem_zalloc(size_t n)
{
    void *p = tk_mem_alloc(n);
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

void *tk_mem_realloc(void *p, size_t old_size, size_t new_size)
{
    void *q = tk_mem_alloc(new_size);
    if (q == NULL)
        return NULL;
    if (p != NULL) {
        memcpy(q, p, old_size < new_size ? old_size : new_size);
        tk_mem_free(p);
    }
    return q;
}

/* The block from tk_mem_alloc is kept in the word just before the aligned
 * address. */
void *tk_mem_aligned_alloc(size_t align, size_t n)
{
    if (n > (size_t)-1 - align - sizeof(void *))
        return NULL;
    unsigned char *raw = tk_mem_alloc(n + align + sizeof(void *));
    if (raw == NULL)
        return NULL;
    uintptr_t at = ((uintptr_t)(raw + sizeof(void *)) + align - 1) &
                   ~(uintptr_t)(align - 1);
    memcpy((void *)(at - sizeof(void *)), &raw, sizeof raw);
    return (void *)at;
}

void tk_mem_aligned_free(void *p)
{
    if (p == NULL)
        return;
    void *raw;
    memcpy(&raw, (unsigned char *)p - sizeof raw, sizeof raw);
    tk_mem_free(raw);
}

#include "tk_mem.h"

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

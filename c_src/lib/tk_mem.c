#include "tk_mem.h"

#include "tk_debug.h"

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

/* Under AddressSanitizer the bytes of the block outside the n asked for
 * (the header below included) are marked unaddressable, so that a write
 * just past a ring's storage is reported, not lost in the alignment
 * slack; they are made addressable again before the block goes back (it
 * may be the VM's, through enif_alloc, and reused by code that is not
 * instrumented). */
#if defined(__SANITIZE_ADDRESS__)
#define TK_MEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TK_MEM_ASAN 1
#endif
#endif
#ifdef TK_MEM_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

/* Before the aligned address: the block from tk_mem_alloc and its size,
 * in the two words just below it. */
typedef struct {
    unsigned char *raw;
    size_t total;
} aligned_head;

void *tk_mem_aligned_alloc(size_t align, size_t n)
{
    TK_ASSERT(align != 0 && (align & (align - 1)) == 0);
    if (n > (size_t)-1 - align - sizeof(aligned_head))
        return NULL;
    size_t total = n + align + sizeof(aligned_head);
    unsigned char *raw = tk_mem_alloc(total);
    if (raw == NULL)
        return NULL;
    uintptr_t at = ((uintptr_t)(raw + sizeof(aligned_head)) + align - 1) &
                   ~(uintptr_t)(align - 1);
    aligned_head h = {raw, total};
    memcpy((void *)(at - sizeof h), &h, sizeof h);
    POISON(raw, (size_t)(at - (uintptr_t)raw));
    POISON((unsigned char *)at + n, (size_t)((uintptr_t)raw + total - at - n));
    return (void *)at;
}

void tk_mem_aligned_free(void *p)
{
    if (p == NULL)
        return;
    aligned_head h;
    UNPOISON((unsigned char *)p - sizeof h, sizeof h);
    memcpy(&h, (unsigned char *)p - sizeof h, sizeof h);
    UNPOISON(h.raw, h.total);
    tk_mem_free(h.raw);
}

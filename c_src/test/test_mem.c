/* tk_mem: aligned blocks. */
#include <stdint.h>
#include <stdlib.h>

#include "tk_mem.h"
#include "tk_test.h"

TK_TEST(mem_aligned_blocks_are_aligned_and_whole)
{
    for (size_t align = 8; align <= 4096; align *= 2)
        for (size_t n = 1; n <= 300; n += 37) {
            unsigned char *p = tk_mem_aligned_alloc(align, n);
            TK_REQUIRE(p != NULL);
            TK_CHECK_EQ((uintptr_t)p % align, 0);
            for (size_t i = 0; i < n; i++) /* every byte addressable */
                p[i] = (unsigned char)i;
            tk_mem_aligned_free(p);
        }
    TK_CHECK(tk_mem_aligned_alloc(64, SIZE_MAX - 8) == NULL);
}

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif

#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>

/* The block an aligned one was carved from, as tk_mem_alloc gave it. */
static unsigned char *last_raw;
static size_t last_total;

static void *recording_alloc(size_t n)
{
    last_total = n;
    return last_raw = malloc(n);
}

/* Under AddressSanitizer every byte of the block outside the n asked for
 * (its header included) is unaddressable, and every byte of the n is
 * addressable: a write past a ring's storage, or before it, is reported. */
TK_TEST(mem_aligned_slack_is_unaddressable_under_asan)
{
    void *(*saved)(size_t) = tk_mem_alloc;
    tk_mem_alloc = recording_alloc;
    for (size_t align = 8; align <= 4096; align *= 2)
        for (size_t n = 1; n <= 4096; n = n * 3 + 1) {
            unsigned char *p = tk_mem_aligned_alloc(align, n);
            TK_REQUIRE(p != NULL);
            for (unsigned char *q = last_raw; q < p; q++)
                if (!__asan_address_is_poisoned(q)) {
                    TK_CHECK_EQ(p - q, 0); /* bytes before the block */
                    break;
                }
            TK_CHECK(__asan_region_is_poisoned(p, n) == NULL);
            for (unsigned char *q = p + n; q < last_raw + last_total; q++)
                if (!__asan_address_is_poisoned(q)) {
                    TK_CHECK_EQ(q - (p + n), -1); /* bytes after it */
                    break;
                }
            tk_mem_aligned_free(p);
        }
    tk_mem_alloc = saved;
}
#endif

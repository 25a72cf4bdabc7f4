/* tk_mem: aligned blocks. */
#include <stdint.h>

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

/* Under AddressSanitizer the slack around an aligned block is
 * unaddressable, so that a write past a ring's storage is reported. */
TK_TEST(mem_aligned_slack_is_unaddressable_under_asan)
{
    for (size_t align = 64; align <= 4096; align *= 4) {
        unsigned char *p = tk_mem_aligned_alloc(align, 4096);
        TK_REQUIRE(p != NULL);
        TK_CHECK(!__asan_address_is_poisoned(p));
        TK_CHECK(!__asan_address_is_poisoned(p + 4095));
        TK_CHECK(__asan_address_is_poisoned(p + 4096));
        TK_CHECK(__asan_address_is_poisoned(p + 4096 + align - 1));
        tk_mem_aligned_free(p);
    }
}
#endif

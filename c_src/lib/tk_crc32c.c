#include "tk_crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_hw;

static void init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
    have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t sw(uint32_t c, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
            table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
            table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
            table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n-- > 0)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("sse4.2"))) static uint32_t hw(uint32_t c,
                                                     const unsigned char *p,
                                                     size_t n)
{
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n-- > 0)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t tk_crc32c_sw(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&once, init);
    return ~sw(~crc, data, n);
}

uint32_t tk_crc32c(uint32_t crc, const void *data, size_t n)
{
    pthread_once(&once, init);
#if defined(__x86_64__) && defined(__GNUC__)
    if (have_hw)
        return ~hw(~crc, data, n);
#endif
    return ~sw(~crc, data, n);
}

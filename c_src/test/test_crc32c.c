#include "tk_crc32c.h"
#include "tk_test.h"

#include <string.h>

TK_TEST(crc32c_known_values)
{
    TK_CHECK_EQ(tk_crc32c(0, "123456789", 9), 0xE3069283u);
    TK_CHECK_EQ(tk_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    TK_CHECK_EQ(tk_crc32c(0, "", 0), 0);
    unsigned char zeros[32] = {0};
    TK_CHECK_EQ(tk_crc32c(0, zeros, 32), 0x8A9136AAu); /* RFC 3720 B.4 */
    unsigned char ones[32];
    memset(ones, 0xff, 32);
    TK_CHECK_EQ(tk_crc32c(0, ones, 32), 0x62A8AB43u);
}

/* Hardware and tables agree at every length and alignment, and a CRC can
 * be continued piece by piece. */
TK_TEST(crc32c_paths_agree)
{
    unsigned char buf[600];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += 37) {
            uint32_t a = tk_crc32c(0, buf + off, n);
            TK_CHECK_EQ(a, tk_crc32c_sw(0, buf + off, n));
            size_t half = n / 3;
            TK_CHECK_EQ(a, tk_crc32c(tk_crc32c(0, buf + off, half), buf + off + half,
                                     n - half));
        }
}

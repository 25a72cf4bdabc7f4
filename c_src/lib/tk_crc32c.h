/* tk_crc32c.h: CRC-32C (Castagnoli), the checksum of trace file chunks.
 *
 * Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value and final
 * xor 0xFFFFFFFF: crc32c("123456789") = 0xE3069283. Uses the SSE4.2
 * instruction where the CPU has it, else tables (eight bytes per step).
 */
#ifndef TK_CRC32C_H
#define TK_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC of n bytes, continuing from `crc` (0 to start). */
uint32_t tk_crc32c(uint32_t crc, const void *data, size_t n);

/* The same with tables only (the tests compare both). */
uint32_t tk_crc32c_sw(uint32_t crc, const void *data, size_t n);

#endif

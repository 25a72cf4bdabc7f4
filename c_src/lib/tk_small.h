/* tk_small.h: the VM's small integers, as seq_trace serials show them.
 *
 * On a 64-bit VM a small integer is a machine word with the value in its
 * upper 60 bits and the tag 0xF in its low 4 (make_small shifts the value
 * left by 4). The VM keeps seq_trace counters as plain 64-bit words and
 * shows them as small integers, so a counter past 2^59 - 1 wraps to a
 * negative value, and a raw tagged word that reaches a counter (as after a
 * spawn with a token) shows as 16 * v + 15.
 */
#ifndef TK_SMALL_H
#define TK_SMALL_H

#include <stdbool.h>
#include <stdint.h>

#define TK_SMALL_BITS 60
#define TK_SMALL_MASK ((UINT64_C(1) << TK_SMALL_BITS) - 1)
#define TK_SMALL_MAX ((int64_t)((UINT64_C(1) << 59) - 1))
#define TK_SMALL_MIN (-(int64_t)(UINT64_C(1) << 59))

/* Whether v is a small integer. */
static inline bool tk_small_fits(int64_t v)
{
    return v >= TK_SMALL_MIN && v <= TK_SMALL_MAX;
}

/* The small integer the VM makes of a word (make_small): its low 60 bits,
 * sign-extended from bit 59 (a clock of 2^59 shows as -2^59). */
static inline int64_t tk_small_of_word(uint64_t word)
{
    uint64_t low = word & TK_SMALL_MASK;
    if (low & (UINT64_C(1) << (TK_SMALL_BITS - 1)))
        return (int64_t)(low | ~TK_SMALL_MASK);
    return (int64_t)low;
}

/* The word the VM reads back from a small integer (unsigned_val): its low
 * 60 bits as unsigned (-1 reads as 2^60 - 1). */
static inline uint64_t tk_small_unsigned(int64_t small)
{
    return (uint64_t)small & TK_SMALL_MASK;
}

/* The tagged machine word of a small integer: (v << 4) | 0xF. */
static inline uint64_t tk_small_tagged(int64_t small)
{
    return ((uint64_t)small << 4) | 0xF;
}

#endif

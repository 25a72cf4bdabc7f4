#include "tk_clock.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

int tk_clock_tsc;

void tk_clock_init(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000007u &&
        __get_cpuid(0x80000007u, &a, &b, &c, &d))
        tk_clock_tsc = (d >> 8) & 1;
#endif
}

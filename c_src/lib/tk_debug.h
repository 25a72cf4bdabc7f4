/* tk_debug.h: assertions of the rules the lock-free code relies on (which
 * thread may do what, what a record must look like). Compiled in when
 * TK_DEBUG is defined: the C tests and the sanitizer builds of the NIFs
 * define it; production builds do not pay for them.
 */
#ifndef TK_DEBUG_H
#define TK_DEBUG_H

#ifdef TK_DEBUG
#include <stdio.h>
#include <stdlib.h>

#define TK_ASSERT(cond)                                                     \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__,      \
                    __LINE__, #cond);                                       \
            abort();                                                        \
        }                                                                   \
    } while (0)
#else
#define TK_ASSERT(cond) ((void)0)
#endif

#endif

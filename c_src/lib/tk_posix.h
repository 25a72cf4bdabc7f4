/* tk_posix.h: an errno value as the atom name Erlang uses for it
 * (ENOENT -> "enoent"), as file:open/2 reports errors. */
#ifndef TK_POSIX_H
#define TK_POSIX_H

#include <stddef.h>

/* Writes the name into out (cap bytes) and returns out. */
const char *tk_posix_name(int err, char *out, size_t cap);

#endif

/* tk_posix.h: an errno value as the atom name Erlang uses for it
 * (ENOENT -> "enoent"), as file:open/2 reports errors. */
#ifndef TK_POSIX_H
#define TK_POSIX_H

#include <signal.h>
#include <stddef.h>

/* Writes the name into out (cap bytes) and returns out. */
const char *tk_posix_name(int err, char *out, size_t cap);

/* SIGXFSZ, which a write past the file size limit (ulimit -f) raises and
 * whose default action ends the process, held back in the calling thread:
 * such a write fails with EFBIG instead. tk_posix_xfsz_release puts the
 * thread's mask back, discarding a SIGXFSZ raised meanwhile. */
void tk_posix_xfsz_hold(sigset_t *saved);
void tk_posix_xfsz_release(const sigset_t *saved);

#endif

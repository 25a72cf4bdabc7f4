#include "tk_posix.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const char *tk_posix_name(int err, char *out, size_t cap)
{
    const char *name = strerrorname_np(err); /* glibc 2.32 and newer */
    if (name == NULL) {
        snprintf(out, cap, "eunknown");
        return out;
    }
    size_t i = 0;
    for (; name[i] != '\0' && i + 1 < cap; i++)
        out[i] = (char)tolower((unsigned char)name[i]);
    out[i] = '\0';
    return out;
}

void tk_posix_xfsz_hold(sigset_t *saved)
{
    sigset_t xfsz;
    sigemptyset(&xfsz);
    sigaddset(&xfsz, SIGXFSZ);
    pthread_sigmask(SIG_BLOCK, &xfsz, saved);
}

void tk_posix_xfsz_release(const sigset_t *saved)
{
    if (sigismember(saved, SIGXFSZ) != 1) {
        /* Raised for this thread while held: taken, so that unblocking
         * does not deliver it. */
        sigset_t xfsz;
        struct timespec now = {0, 0};
        sigemptyset(&xfsz);
        sigaddset(&xfsz, SIGXFSZ);
        while (sigtimedwait(&xfsz, NULL, &now) == SIGXFSZ)
            ;
    }
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

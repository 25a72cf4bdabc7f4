#include "tk_posix.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

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

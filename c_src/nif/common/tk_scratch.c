#include "tk_scratch.h"

#include <erl_nif.h>

unsigned char *tk_scratch_get(tk_scratch *s, unsigned slot, size_t want,
                              size_t *cap)
{
    if (slot >= TK_THREAD_SHARED)
        return NULL;
    tk_scratch_slot *t = &s->slot[slot];
    if (want < TK_SCRATCH_MIN)
        want = TK_SCRATCH_MIN;
    if (t->cap < want) {
        unsigned char *b = enif_alloc(want);
        if (b == NULL) { /* keep what there is: the event will be cut */
            *cap = t->cap;
            return t->buf;
        }
        enif_free(t->buf);
        t->buf = b;
        t->cap = want;
    }
    *cap = t->cap;
    return t->buf;
}

void tk_scratch_free(tk_scratch *s)
{
    for (unsigned i = 0; i < TK_THREAD_SHARED; i++) {
        enif_free(s->slot[i].buf);
        s->slot[i] = (tk_scratch_slot){NULL, 0};
    }
}

/* names.c: the names processes registered in the trace itself (the node
 * that wrote it may be gone), keyed by the external form of the pid or
 * port, as the shell's format shows them beside pids. */
#include <stdlib.h>
#include <string.h>

#include "cat.h"

typedef struct {
    unsigned char *key;
    size_t klen;
    char *name; /* NULL: a free slot */
} slot;

static slot *slots;
static size_t nslots, used;

static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ p[k]) * 1099511628211ull;
    return h;
}

static slot *find(const unsigned char *key, size_t klen)
{
    if (nslots == 0)
        return NULL;
    for (size_t i = hash(key, klen) & (nslots - 1);; i = (i + 1) & (nslots - 1)) {
        slot *s = &slots[i];
        if (s->name == NULL || (s->klen == klen && memcmp(s->key, key, klen) == 0))
            return s;
    }
}

static void put(unsigned char *key, size_t klen, char *name)
{
    if ((used + 1) * 2 > nslots) {
        slot *old = slots;
        size_t oldn = nslots;
        nslots = nslots ? nslots * 2 : 64;
        slots = xmalloc(nslots * sizeof *slots);
        memset(slots, 0, nslots * sizeof *slots);
        for (size_t k = 0; k < oldn; k++)
            if (old[k].name != NULL)
                *find(old[k].key, old[k].klen) = old[k];
        free(old);
    }
    slot *s = find(key, klen);
    if (s->name != NULL) {
        free(s->key);
        free(s->name);
    } else {
        used++;
    }
    *s = (slot){key, klen, name};
}

void names_note(const tree *t, const tnode *ev, const text_opts *o)
{
    if (ev->type != T_TUPLE || (ev->n != 4 && ev->n != 5) ||
        !is_atom(kid(t, ev, 2), "register"))
        return;
    const tnode *p = kid(t, ev, 1), *name = kid(t, ev, 3);
    if (p->etf == NULL)
        return;
    sbuf b = {0};
    write_term(&b, t, name, true, o);
    /* the shell's format leaves a name `undefined` out */
    if (is_atom(name, "undefined")) {
        free(b.p);
        b.p = NULL;
    }
    unsigned char *key = xmalloc(p->etf_len);
    memcpy(key, p->etf, p->etf_len);
    if (b.p == NULL) {
        slot *s = find(key, p->etf_len);
        if (s != NULL && s->name != NULL) {
            /* keep the slot (probing chains), with an empty mark */
            free(s->name);
            s->name = xstrndup("", 0);
        }
        free(key);
        return;
    }
    put(key, p->etf_len, b.p);
}

const char *names_get(const tnode *p)
{
    if (p->etf == NULL)
        return NULL;
    slot *s = find(p->etf, p->etf_len);
    return s != NULL && s->name != NULL && s->name[0] ? s->name : NULL;
}

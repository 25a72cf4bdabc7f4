/* names.c: the names processes registered in the trace itself (the node
 * that wrote it may be gone), keyed by the external form of the pid or
 * port, as the text shows them beside pids. The last register event of a
 * process wins; an unregister leaves the name (the process was known by
 * it). */
#include <stdlib.h>
#include <string.h>

#include "cat.h"

struct name_slot {
    unsigned char *key;
    size_t klen;
    char *name; /* NULL: a free slot */
};

static uint64_t hash(const unsigned char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t k = 0; k < n; k++)
        h = (h ^ p[k]) * 1099511628211ull;
    return h;
}

static struct name_slot *find(const names *nm, const unsigned char *key, size_t klen)
{
    if (nm->nslots == 0)
        return NULL;
    for (size_t i = hash(key, klen) & (nm->nslots - 1);; i = (i + 1) & (nm->nslots - 1)) {
        struct name_slot *s = &nm->slots[i];
        if (s->name == NULL || (s->klen == klen && memcmp(s->key, key, klen) == 0))
            return s;
    }
}

static void rehash(names *nm)
{
    struct name_slot *old = nm->slots;
    size_t oldn = nm->nslots;
    nm->nslots = oldn ? oldn * 2 : 64;
    nm->slots = xmalloc(nm->nslots * sizeof *nm->slots);
    memset(nm->slots, 0, nm->nslots * sizeof *nm->slots);
    for (size_t k = 0; k < oldn; k++)
        if (old[k].name != NULL)
            *find(nm, old[k].key, old[k].klen) = old[k];
    free(old);
}

void names_note(names *nm, const tree *t, const tnode *ev)
{
    if (ev->type != T_TUPLE || (ev->n != 4 && ev->n != 5) ||
        !is_atom(kid(t, ev, 2), "register"))
        return;
    const tnode *p = kid(t, ev, 1), *name = kid(t, ev, 3);
    if ((p->type != T_PID && p->type != T_PORT) || name->type != T_ATOM ||
        is_atom(name, "undefined"))
        return;
    if ((nm->used + 1) * 2 > nm->nslots)
        rehash(nm);
    sbuf text = {0};
    term_atom(&text, name);
    struct name_slot *s = find(nm, p->etf, p->etf_len);
    if (s->name != NULL) {
        free(s->name);
        s->name = text.p;
        return;
    }
    unsigned char *key = xmalloc(p->etf_len);
    memcpy(key, p->etf, p->etf_len);
    *s = (struct name_slot){key, p->etf_len, text.p};
    nm->used++;
}

const char *names_get(const names *nm, const tnode *p)
{
    if (p->type != T_PID && p->type != T_PORT)
        return NULL;
    const struct name_slot *s = find(nm, p->etf, p->etf_len);
    return s != NULL ? s->name : NULL;
}

void names_free(names *nm)
{
    for (size_t k = 0; k < nm->nslots; k++)
        if (nm->slots[k].name != NULL) {
            free(nm->slots[k].key);
            free(nm->slots[k].name);
        }
    free(nm->slots);
    *nm = (names){0};
}

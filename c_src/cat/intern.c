/* intern.c: tables of byte strings, each numbered in the order it was
 * added. The exports key their dictionaries this way (node names,
 * processes, functions, stacks), and keep what a key stands for in
 * arrays indexed by its number: one hash table implementation for all.
 *
 * Open addressing with linear probing, at most half full; the keys'
 * bytes one after the other in one growing block.
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"

static uint64_t hash(const unsigned char *p, size_t n)
{
    /* FNV-1a, then a final mix so that the low bits (the slot) depend
     * on every byte */
    uint64_t h = 1469598103934665603ull ^ n;
    for (size_t k = 0; k < n; k++)
        h = (h ^ p[k]) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static bool same(const strtab *s, uint32_t id, const void *key, size_t len)
{
    return s->off[id + 1] - s->off[id] == len && memcmp(s->bytes + s->off[id], key, len) == 0;
}

/* The slot of the key, or of the empty slot where it would go. */
static size_t slot_of(const strtab *s, const void *key, size_t len)
{
    size_t mask = s->nslots - 1;
    for (size_t i = hash(key, len) & mask;; i = (i + 1) & mask) {
        uint32_t v = s->slots[i];
        if (v == 0 || same(s, v - 1, key, len))
            return i;
    }
}

static void rehash(strtab *s)
{
    size_t n = s->nslots ? s->nslots * 2 : 64;
    free(s->slots);
    s->slots = xmalloc(n * sizeof *s->slots);
    memset(s->slots, 0, n * sizeof *s->slots);
    s->nslots = n;
    for (uint32_t id = 0; id < s->n; id++) {
        size_t len;
        const char *k = st_key(s, id, &len);
        s->slots[slot_of(s, k, len)] = id + 1;
    }
}

long st_find(const strtab *s, const void *key, size_t len)
{
    if (s->nslots == 0)
        return -1;
    uint32_t v = s->slots[slot_of(s, key, len)];
    return v == 0 ? -1 : (long)(v - 1);
}

uint32_t st_intern(strtab *s, const void *key, size_t len, bool *added)
{
    if ((size_t)(s->n + 1) * 2 > s->nslots)
        rehash(s);
    size_t i = slot_of(s, key, len);
    if (s->slots[i] != 0) {
        if (added)
            *added = false;
        return s->slots[i] - 1;
    }
    if (s->n == UINT32_MAX - 1) {
        cat_error("more than 4 billion distinct keys in one table");
        exit(CAT_OUTPUT);
    }
    GROW(s->off, s->ocap, (size_t)s->n + 2);
    if (s->n == 0)
        s->off[0] = 0;
    GROW(s->bytes, s->bcap, s->blen + len + 1);
    if (len)
        memcpy(s->bytes + s->blen, key, len);
    s->blen += len;
    s->off[s->n + 1] = s->blen;
    s->slots[i] = ++s->n;
    if (added)
        *added = true;
    return s->n - 1;
}

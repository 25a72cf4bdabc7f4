/* pending.c: the sends the Chrome export has not yet paired with a
 * receive (EXPORTS.md 3.2), at most PENDING_MAX of them: a new one beyond
 * that forgets the oldest, as tracekit_export does.
 *
 * A send is kept as the digest of its message (termorder.c), not the
 * message: each takes the same few bytes whatever it sent, so the table
 * is at most PENDING_MAX entries and its buckets, about 4.5 MiB, however
 * large the messages (EXPORTS.md 5).
 *
 * Entries are linked twice, in the order of the sends: all of them (to
 * forget the oldest), and those of one bucket (to find the oldest send
 * of a message). Buckets are chosen by the digest, so a chain holds few
 * other messages' sends.
 */
#include <stdlib.h>
#include <string.h>

#include "export.h"

#define NIL UINT32_MAX
#define NBUCKETS PENDING_MAX /* a power of two */

typedef struct {
    digest key, receiver;
    uint64_t id;
    bool any;
    uint32_t prev, next;   /* all sends; next: the free list too */
    uint32_t bprev, bnext; /* the sends of the bucket */
} entry;

struct pending {
    entry *e;
    size_t cap;
    uint32_t used; /* entries ever taken from e (the rest never were) */
    uint32_t free;
    uint32_t head, tail; /* the oldest and the newest send */
    uint32_t count;
    uint32_t *bhead, *btail;
};

pending *pending_new(void)
{
    pending *p = xmalloc(sizeof *p);
    memset(p, 0, sizeof *p);
    p->free = p->head = p->tail = NIL;
    return p;
}

static uint32_t bucket(digest k)
{
    return (uint32_t)(k.a & (NBUCKETS - 1));
}

static void unlink_entry(pending *p, uint32_t i)
{
    entry *x = &p->e[i];
    uint32_t b = bucket(x->key);
    if (x->prev != NIL)
        p->e[x->prev].next = x->next;
    else
        p->head = x->next;
    if (x->next != NIL)
        p->e[x->next].prev = x->prev;
    else
        p->tail = x->prev;
    if (x->bprev != NIL)
        p->e[x->bprev].bnext = x->bnext;
    else
        p->bhead[b] = x->bnext;
    if (x->bnext != NIL)
        p->e[x->bnext].bprev = x->bprev;
    else
        p->btail[b] = x->bprev;
    x->next = p->free;
    p->free = i;
    p->count--;
}

void pending_add(pending *p, digest key, bool any, digest receiver, uint64_t id)
{
    if (p->bhead == NULL) { /* the first send: the buckets, all empty */
        p->bhead = xmalloc(NBUCKETS * sizeof *p->bhead);
        p->btail = xmalloc(NBUCKETS * sizeof *p->btail);
        memset(p->bhead, 0xFF, NBUCKETS * sizeof *p->bhead);
        memset(p->btail, 0xFF, NBUCKETS * sizeof *p->btail);
    }
    if (p->count >= PENDING_MAX)
        unlink_entry(p, p->head);
    uint32_t i;
    if (p->free != NIL) {
        i = p->free;
        p->free = p->e[i].next;
    } else {
        GROW(p->e, p->cap, (size_t)p->used + 1);
        i = p->used++;
    }
    entry *x = &p->e[i];
    uint32_t b = bucket(key);
    *x = (entry){key, receiver, id, any, p->tail, NIL, p->btail[b], NIL};
    if (p->tail != NIL)
        p->e[p->tail].next = i;
    else
        p->head = i;
    p->tail = i;
    if (p->btail[b] != NIL)
        p->e[p->btail[b]].bnext = i;
    else
        p->bhead[b] = i;
    p->btail[b] = i;
    p->count++;
}

uint64_t pending_take(pending *p, digest key, digest receiver)
{
    if (p->bhead == NULL)
        return 0;
    for (uint32_t i = p->bhead[bucket(key)]; i != NIL; i = p->e[i].bnext) {
        entry *x = &p->e[i];
        if (digest_eq(x->key, key) && (x->any || digest_eq(x->receiver, receiver))) {
            uint64_t id = x->id;
            unlink_entry(p, i);
            return id;
        }
    }
    return 0;
}

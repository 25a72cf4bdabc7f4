/* ring_pop.h: records one at a time into and out of a ring, for the tests
 * (the library's producers keep room before their payloads, its consumers
 * take batches). */
#ifndef TK_TEST_RING_POP_H
#define TK_TEST_RING_POP_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "tk_ring.h"

typedef struct {
    uint64_t pos;   /* position of the record in the ring */
    uint64_t stamp; /* producer's stamp */
    size_t len;     /* payload bytes, now at the start of buf */
} ring_rec;

/* Takes the oldest record before `limit` into buf (cap bytes: room for the
 * whole record) and moves its payload to the front. 1, or 0 if none. */
static inline int ring_pop(tk_ring *r, uint64_t limit, void *buf, size_t cap,
                           ring_rec *rec)
{
    unsigned char *p = buf;
    tk_ring_batch b = {.dst = buf, .cap = cap, .max_recs = 1};
    uint64_t hdr;
    if (tk_ring_take(r, limit, &b) == 0)
        return 0;
    memcpy(&hdr, p, 8);
    rec->stamp = tk_ring_rec_stamp(p);
    rec->pos = b.from;
    rec->len = tk_ring_rec_payload(hdr);
    memmove(p, p + TK_RING_HEADER, rec->len);
    return 1;
}

/* tk_ring_push of len bytes from anywhere: copied after the room the push
 * writes into (on the heap for large payloads). */
static inline int ring_push(tk_ring *r, uint64_t stamp, const void *payload,
                            size_t len)
{
    unsigned char small[TK_RING_ROOM + 1024];
    unsigned char *buf = len <= 1024 ? small : malloc(TK_RING_ROOM + len);
    if (buf == NULL)
        abort();
    memcpy(buf + TK_RING_ROOM, payload, len);
    int rc = tk_ring_push(r, stamp, buf + TK_RING_ROOM, len);
    if (buf != small)
        free(buf);
    return rc;
}

/* tk_ring_push of len bytes from a buffer of exactly TK_RING_BUF(len)
 * bytes (so that AddressSanitizer sees a read or write past either end),
 * the bytes after the payload `fill`. *kept: whether the push left the
 * payload as it was (it is the caller's: never written). */
static inline int ring_push_exact(tk_ring *r, uint64_t stamp,
                                  const void *payload, size_t len,
                                  unsigned char fill, bool *kept)
{
    unsigned char *buf = malloc(TK_RING_BUF(len));
    if (buf == NULL)
        abort();
    memset(buf, fill, TK_RING_BUF(len));
    if (len)
        memcpy(buf + TK_RING_ROOM, payload, len);
    int rc = tk_ring_push(r, stamp, buf + TK_RING_ROOM, len);
    *kept = len == 0 || memcmp(buf + TK_RING_ROOM, payload, len) == 0;
    free(buf);
    return rc;
}

#endif

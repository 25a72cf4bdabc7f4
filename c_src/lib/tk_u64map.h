/* tk_u64map.h: a map from nonzero 64-bit keys to 32-bit values, for one
 * thread (open addressing, linear probing, grows at half full; removal
 * moves the entries after the hole back, so there are no tombstones). The
 * trace file writer keeps its dictionary in one (VM words to entry
 * numbers), the latency consumer its processes and open functions. */
#ifndef TK_U64MAP_H
#define TK_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t *keys; /* 0: empty */
    uint32_t *vals;
    size_t cap, n;  /* cap: a power of two, or 0 */
} tk_u64map;

/* 1 with *val when key is there, else 0. */
int tk_u64map_get(const tk_u64map *m, uint64_t key, uint32_t *val);
/* Sets key (nonzero) to val. 0, or -1 when out of memory. */
int tk_u64map_put(tk_u64map *m, uint64_t key, uint32_t val);
/* The value of key, to read or change in place (valid until the map next
 * changes), or NULL. */
uint32_t *tk_u64map_ref(const tk_u64map *m, uint64_t key);
/* Removes key (nothing when it is not there). */
void tk_u64map_remove(tk_u64map *m, uint64_t key);
/* Empties the map (keeps its memory). */
void tk_u64map_clear(tk_u64map *m);
void tk_u64map_free(tk_u64map *m);

#endif

#include "tk_u64map.h"

#include <string.h>

#include "tk_mem.h"

static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

int tk_u64map_get(const tk_u64map *m, uint64_t key, uint32_t *val)
{
    if (m->cap == 0)
        return 0;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            *val = m->vals[i];
            return 1;
        }
        if (m->keys[i] == 0)
            return 0;
    }
}

static void insert(uint64_t *keys, uint32_t *vals, size_t cap, uint64_t key,
                   uint32_t val)
{
    size_t i = slot_of(key, cap);
    while (keys[i] != 0 && keys[i] != key)
        i = (i + 1) & (cap - 1);
    keys[i] = key;
    vals[i] = val;
}

static int grow(tk_u64map *m)
{
    size_t cap = m->cap ? 2 * m->cap : 64;
    uint64_t *keys = tk_mem_zalloc(cap * sizeof *keys);
    uint32_t *vals = tk_mem_alloc(cap * sizeof *vals);
    if (keys == NULL || vals == NULL) {
        tk_mem_free(keys);
        tk_mem_free(vals);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++)
        if (m->keys[i] != 0)
            insert(keys, vals, cap, m->keys[i], m->vals[i]);
    tk_mem_free(m->keys);
    tk_mem_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = cap;
    return 0;
}

int tk_u64map_put(tk_u64map *m, uint64_t key, uint32_t val)
{
    uint32_t old;
    if (tk_u64map_get(m, key, &old)) {
        insert(m->keys, m->vals, m->cap, key, val);
        return 0;
    }
    if (2 * (m->n + 1) > m->cap && grow(m) != 0)
        return -1;
    insert(m->keys, m->vals, m->cap, key, val);
    m->n++;
    return 0;
}

uint32_t *tk_u64map_ref(const tk_u64map *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key)
            return &m->vals[i];
        if (m->keys[i] == 0)
            return NULL;
    }
}

void tk_u64map_remove(tk_u64map *m, uint64_t key)
{
    uint32_t *v = tk_u64map_ref(m, key);
    if (v == NULL)
        return;
    size_t mask = m->cap - 1, i = (size_t)(v - m->vals);
    /* Each later entry of the run moves into the hole unless its home
     * lies after the hole (cyclically, up to itself). */
    for (size_t j = (i + 1) & mask; m->keys[j] != 0; j = (j + 1) & mask) {
        size_t home = slot_of(m->keys[j], m->cap);
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->n--;
}

void tk_u64map_clear(tk_u64map *m)
{
    if (m->cap > 0)
        memset(m->keys, 0, m->cap * sizeof *m->keys);
    m->n = 0;
}

void tk_u64map_free(tk_u64map *m)
{
    tk_mem_free(m->keys);
    tk_mem_free(m->vals);
    *m = (tk_u64map){NULL, NULL, 0, 0};
}

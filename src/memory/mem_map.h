/*
 * mem_map.h - the process's live allocations, private to src/memory: the
 * map from (namespace, pointer or handle) to size and device that frees
 * are matched against, in O(1) whatever the number of live allocations.
 * Insert and remove are inline (the allocation fast path); growth and the
 * readers are in map.c, whose comment gives the locking and invariants.
 */
#ifndef SALUS_MEM_MAP_H
#define SALUS_MEM_MAP_H

#include <stdint.h>
#include <stddef.h>

#include "memory/memory.h"
#include "util/atomic.h"

/* What cuMemFree* / cuMemRelease / cuArrayDestroy name: three namespaces. */
enum { MEM_CLS_PTR = 0, MEM_CLS_VMM = 1, MEM_CLS_ARRAY = 2 };

static inline int mem_kind_class(mem_kind_t kind)
{
    return kind == MEM_KIND_VMM ? MEM_CLS_VMM : kind == MEM_KIND_ARRAY ? MEM_CLS_ARRAY
                                                                       : MEM_CLS_PTR;
}

/* An entry as callers see it. */
typedef struct mem_entry {
    uint64_t key;          /* 0: none */
    uint64_t bytes;        /* < 2^48 */
    int16_t  dev;          /* table device index, < 16 */
    uint8_t  cls, kind;
    uint8_t  pool;         /* the pool it came from (mem_p.pools), < 128; 0: none */
    uint8_t  pad[3];
} mem_entry_t;

/* ---- internals (map.c) -------------------------------------------------- */

#define MEM_STRIPES 64

/* An entry as stored: 16 bytes, value = bytes | dev << 48 | cls << 52 |
 * kind << 54 | pool << 57. */
typedef struct mem_cell {
    uint64_t key, val;
} mem_cell_t;

typedef struct mem_stripe {
    uint32_t lock;
    uint32_t count;
    uint64_t mask;                /* capacity - 1; capacity a power of two */
    mem_cell_t *e;                /* NULL until the first insert */
} __attribute__((aligned(64))) mem_stripe_t;

extern mem_stripe_t mem_stripes[MEM_STRIPES];

void mem_stripe_lock_slow(mem_stripe_t *s);
/* Grow s for one more entry; -1 when out of memory and full. */
int  mem_stripe_make_room(mem_stripe_t *s);

static inline uint64_t mem_cell_val(const mem_entry_t *e)
{
    return e->bytes | (uint64_t)(e->dev & 0xf) << 48 | (uint64_t)(e->cls & 3) << 52 |
           (uint64_t)(e->kind & 7) << 54 | (uint64_t)(e->pool & 0x7f) << 57;
}

static inline void mem_cell_entry(const mem_cell_t *c, mem_entry_t *e)
{
    e->key = c->key;
    e->bytes = c->val & ((1ull << 48) - 1);
    e->dev = (int16_t)((c->val >> 48) & 0xf);
    e->cls = (uint8_t)((c->val >> 52) & 3);
    e->kind = (uint8_t)((c->val >> 54) & 7);
    e->pool = (uint8_t)(c->val >> 57);
    e->pad[0] = e->pad[1] = e->pad[2] = 0;
}

static inline int mem_cell_cls(const mem_cell_t *c)
{
    return (int)((c->val >> 52) & 3);
}

static inline uint64_t mem_map_hash(int cls, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)cls << 61)) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static inline void mem_stripe_lock(mem_stripe_t *s)
{
    if (__builtin_expect(util_xchg_acquire(&s->lock, 1) != 0, 0))
        mem_stripe_lock_slow(s);
}

static inline void mem_stripe_unlock(mem_stripe_t *s)
{
    util_store_release(&s->lock, 0);
}

/* Index of (cls, key) in s, or -1; under the stripe's lock. */
static inline long mem_stripe_find(const mem_stripe_t *s, uint64_t h, int cls, uint64_t key)
{
    if (!s->e)
        return -1;
    for (uint64_t i = h & s->mask;; i = (i + 1) & s->mask) {
        const mem_cell_t *c = &s->e[i];
        if (c->key == 0)
            return -1;
        if (c->key == key && mem_cell_cls(c) == cls)
            return (long)i;
    }
}

void mem_stripe_delete(mem_stripe_t *s, uint64_t hole);

/* ---- the map ------------------------------------------------------------- */

/* 0; 1 when an entry of the same key was replaced (copied to *replaced: the
 * driver gave the address again, so the allocation we knew there is gone);
 * -1 when there is no room and no memory to grow. */
static inline int mem_map_insert(const mem_entry_t *e, mem_entry_t *replaced)
{
    uint64_t h = mem_map_hash(e->cls, e->key);
    mem_stripe_t *s = &mem_stripes[h >> 58];
    int rc = 0;
    mem_stripe_lock(s);
    if (__builtin_expect(!s->e || (uint64_t)(s->count + 1) * 2 > s->mask + 1, 0) &&
        mem_stripe_make_room(s) != 0) {
        rc = -1;
        goto out_unlock;
    }
    uint64_t i = h & s->mask;
    for (;; i = (i + 1) & s->mask) {
        mem_cell_t *c = &s->e[i];
        if (c->key == 0) {
            c->key = e->key;
            c->val = mem_cell_val(e);
            s->count++;
            break;
        }
        if (c->key == e->key && mem_cell_cls(c) == e->cls) {
            if (replaced)
                mem_cell_entry(c, replaced);
            c->val = mem_cell_val(e);
            rc = 1;
            break;
        }
    }
out_unlock:
    mem_stripe_unlock(s);
    return rc;
}

/* Remove and copy out the entry of (cls, key); 0 if found, -1 if not. */
static inline int mem_map_remove(int cls, uint64_t key, mem_entry_t *out)
{
    uint64_t h = mem_map_hash(cls, key);
    mem_stripe_t *s = &mem_stripes[h >> 58];
    mem_stripe_lock(s);
    long i = mem_stripe_find(s, h, cls, key);
    if (i >= 0) {
        mem_cell_entry(&s->e[i], out);
        mem_stripe_delete(s, (uint64_t)i);
    }
    mem_stripe_unlock(s);
    return i >= 0 ? 0 : -1;
}

/* Empty, forgetting every entry without touching the old storage (fork). */
void mem_map_reset(void);
/* A copy of the entries on table device d (-1: all), malloc'd in *out (NULL
 * when empty or out of memory); their number. */
size_t mem_map_snapshot(int d, mem_entry_t **out);
/* Number of entries and the sum of their bytes on table device d (-1: all);
 * for tests and checks, takes every stripe lock in turn. */
uint64_t mem_map_sum(int d, uint64_t *count);

#endif /* SALUS_MEM_MAP_H */

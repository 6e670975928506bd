/*
 * map.c - the process's live allocations: (namespace, pointer or handle) ->
 * size and device, so that a free finds what to give back in O(1) whatever
 * the number of live allocations.
 *
 * Divided into: hashing; the stripe lock; one stripe's open-addressing table
 * (find, grow, insert, remove with backward shift); the map's operations.
 *
 * Locking: the map is MEM_STRIPES independent hash tables, chosen by the
 * key's hash, each guarded by its own spin lock (one atomic exchange to
 * take it, a release store to drop it); threads that free and allocate
 * different pointers rarely meet.  A stripe's table is linear probing with
 * backward-shift deletion (no tombstones), grown by doubling past a load of
 * 1/2 under the stripe's lock.  Per stripe, under its lock:
 *   count == number of non-empty entries  <  mask + 1
 *   every entry lies on the probe path from its home to its index, with no
 *   empty entry between.
 * fork(): the child starts from an empty map (mem_map_reset), never reading
 * the parent's storage, which another thread may have been changing.
 */
#include "memory/mem_layout.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield")
#else
#define cpu_relax() do { } while (0)
#endif

#define MEM_STRIPES     64
#define MEM_STRIPE_MIN  16        /* entries in a stripe's first table */

typedef struct mem_stripe {
    uint32_t lock;
    uint32_t count;
    uint64_t mask;                /* capacity - 1; capacity a power of two */
    mem_entry_t *e;               /* NULL until the first insert */
} __attribute__((aligned(64))) mem_stripe_t;

static mem_stripe_t stripes[MEM_STRIPES];

/* ---- hashing ------------------------------------------------------------ */

static inline uint64_t map_hash(int cls, uint64_t key)
{
    uint64_t h = (key ^ ((uint64_t)cls << 61)) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

static inline mem_stripe_t *map_stripe(uint64_t h)
{
    return &stripes[h >> 58];             /* top 6 bits: MEM_STRIPES == 64 */
}

/* ---- the stripe lock ---------------------------------------------------- */

static inline void stripe_lock(mem_stripe_t *s)
{
    for (unsigned spins = 0;; spins++) {
        if (!__atomic_exchange_n(&s->lock, 1, __ATOMIC_ACQUIRE))
            return;
        while (__atomic_load_n(&s->lock, __ATOMIC_RELAXED)) {
            if (++spins > 256) {
                sched_yield();
                spins = 0;
            } else {
                cpu_relax();
            }
        }
    }
}

static inline void stripe_unlock(mem_stripe_t *s)
{
    __atomic_store_n(&s->lock, 0, __ATOMIC_RELEASE);
}

/* ---- one stripe's table ------------------------------------------------- */

/* Index of (cls, key) in s, or -1. */
static inline long stripe_find(const mem_stripe_t *s, uint64_t h, int cls, uint64_t key)
{
    if (!s->e)
        return -1;
    for (uint64_t i = h & s->mask;; i = (i + 1) & s->mask) {
        const mem_entry_t *e = &s->e[i];
        if (e->key == 0)
            return -1;
        if (e->key == key && e->cls == cls)
            return (long)i;
    }
}

static void stripe_place(mem_entry_t *tab, uint64_t mask, const mem_entry_t *e)
{
    uint64_t i = map_hash(e->cls, e->key) & mask;
    while (tab[i].key != 0)
        i = (i + 1) & mask;
    tab[i] = *e;
}

/* Double the table (or make the first); -1 when out of memory. */
static int stripe_grow(mem_stripe_t *s)
{
    uint64_t cap = s->e ? (s->mask + 1) * 2 : MEM_STRIPE_MIN;
    mem_entry_t *tab = calloc(cap, sizeof *tab);
    if (!tab)
        return -1;
    if (s->e) {
        for (uint64_t i = 0; i <= s->mask; i++)
            if (s->e[i].key != 0)
                stripe_place(tab, cap - 1, &s->e[i]);
        free(s->e);
    }
    s->e = tab;
    s->mask = cap - 1;
    return 0;
}

/* Backward-shift deletion: pull later entries of the same probe run into
 * the hole, so that lookups never need tombstones. */
static void stripe_delete(mem_stripe_t *s, uint64_t hole)
{
    uint64_t mask = s->mask;
    for (uint64_t j = (hole + 1) & mask; s->e[j].key != 0; j = (j + 1) & mask) {
        uint64_t home = map_hash(s->e[j].cls, s->e[j].key) & mask;
        /* Move e[j] into the hole if its home is not in (hole, j]. */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->e[hole] = s->e[j];
            hole = j;
        }
    }
    s->e[hole].key = 0;
    s->count--;
}

/* ---- the map ------------------------------------------------------------ */

int mem_map_insert(const mem_entry_t *e, mem_entry_t *replaced)
{
    uint64_t h = map_hash(e->cls, e->key);
    mem_stripe_t *s = map_stripe(h);
    int rc = 0;
    stripe_lock(s);
    if (!s->e || (uint64_t)(s->count + 1) * 2 > s->mask + 1) {
        /* Grow; without memory, go on while a free entry remains. */
        if (stripe_grow(s) != 0 && (!s->e || s->count + 1 > s->mask)) {
            rc = -1;
            goto out_unlock;
        }
    }
    long i = stripe_find(s, h, e->cls, e->key);
    if (i >= 0) {
        /* The driver gave the address again, so the allocation we knew there
         * is gone (freed by a path we do not see: a context's destruction). */
        if (replaced)
            *replaced = s->e[i];
        s->e[i] = *e;
        rc = 1;
    } else {
        stripe_place(s->e, s->mask, e);
        s->count++;
    }
out_unlock:
    stripe_unlock(s);
    return rc;
}

int mem_map_remove(int cls, uint64_t key, mem_entry_t *out)
{
    uint64_t h = map_hash(cls, key);
    mem_stripe_t *s = map_stripe(h);
    stripe_lock(s);
    long i = stripe_find(s, h, cls, key);
    if (i >= 0) {
        *out = s->e[i];
        stripe_delete(s, (uint64_t)i);
    }
    stripe_unlock(s);
    return i >= 0 ? 0 : -1;
}

void mem_map_reset(void)
{
    memset(stripes, 0, sizeof stripes);
}

uint64_t mem_map_sum(int d, uint64_t *count)
{
    uint64_t bytes = 0, n = 0;
    for (int k = 0; k < MEM_STRIPES; k++) {
        mem_stripe_t *s = &stripes[k];
        stripe_lock(s);
        for (uint64_t i = 0; s->e && i <= s->mask; i++)
            if (s->e[i].key != 0 && (d < 0 || s->e[i].dev == d)) {
                bytes += s->e[i].bytes;
                n++;
            }
        stripe_unlock(s);
    }
    if (count)
        *count = n;
    return bytes;
}

size_t mem_map_snapshot(int d, mem_entry_t **out)
{
    mem_entry_t *v = NULL;
    size_t n = 0, cap = 0;
    for (int k = 0; k < MEM_STRIPES; k++) {
        mem_stripe_t *s = &stripes[k];
        stripe_lock(s);
        for (uint64_t i = 0; s->e && i <= s->mask; i++) {
            if (s->e[i].key == 0 || (d >= 0 && s->e[i].dev != d))
                continue;
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                mem_entry_t *nv = realloc(v, ncap * sizeof *nv);
                if (!nv)
                    break;
                v = nv;
                cap = ncap;
            }
            v[n++] = s->e[i];
        }
        stripe_unlock(s);
    }
    *out = v;
    return n;
}

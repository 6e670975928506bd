/*
 * map.c - the process's live allocations: (namespace, pointer or handle) ->
 * size and device, so that a free finds what to give back in O(1) whatever
 * the number of live allocations.  Insert and remove are inline in
 * mem_map.h; here are the stripe lock's slow path, growth, deletion, and the
 * readers.
 *
 * Divided into: the stripe lock; one stripe's table (growth, deletion with
 * backward shift); the readers.
 *
 * Locking: the map is MEM_STRIPES independent hash tables, chosen by the top
 * bits of the key's hash, each guarded by its own spin lock (one atomic
 * exchange to take it, a release store to drop it); threads that free and
 * allocate different pointers rarely meet.  A stripe's table is linear
 * probing with backward-shift deletion (no tombstones) over 16-byte cells,
 * grown by doubling past a load of 1/2 under the stripe's lock.  Per
 * stripe, under its lock:
 *   count == number of non-empty cells  <  mask + 1
 *   every cell lies on the probe path from its home to its index, with no
 *   empty cell between.
 * fork(): the child starts from an empty map (mem_map_reset), never reading
 * the parent's storage, which another thread may have been changing.
 */
#include "memory/mem_map.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define MEM_STRIPE_MIN  16        /* cells in a stripe's first table */

mem_stripe_t mem_stripes[MEM_STRIPES];

/* ---- the stripe lock ------------------------------------------------------ */

void mem_stripe_lock_slow(mem_stripe_t *s)
{
    for (unsigned spins = 0;; spins++) {
        while (util_load_relaxed(&s->lock)) {
            if (++spins > 256) {
                sched_yield();
                spins = 0;
            } else {
                util_cpu_relax();
            }
        }
        if (!util_xchg_acquire(&s->lock, 1))
            return;
    }
}

/* ---- one stripe's table --------------------------------------------------- */

static void place(mem_cell_t *tab, uint64_t mask, const mem_cell_t *c)
{
    uint64_t i = mem_map_hash(mem_cell_cls(c), c->key) & mask;
    while (tab[i].key != 0)
        i = (i + 1) & mask;
    tab[i] = *c;
}

/* Double the table (or make the first); without memory, go on while a free
 * cell remains. */
int mem_stripe_make_room(mem_stripe_t *s)
{
    uint64_t cap = s->e ? (s->mask + 1) * 2 : MEM_STRIPE_MIN;
    mem_cell_t *tab = calloc(cap, sizeof *tab);
    if (!tab)
        return s->e && s->count + 1 <= s->mask ? 0 : -1;
    if (s->e) {
        for (uint64_t i = 0; i <= s->mask; i++)
            if (s->e[i].key != 0)
                place(tab, cap - 1, &s->e[i]);
        free(s->e);
    }
    s->e = tab;
    s->mask = cap - 1;
    return 0;
}

/* Backward-shift deletion: pull later cells of the same probe run into the
 * hole, so that lookups never need tombstones. */
void mem_stripe_delete(mem_stripe_t *s, uint64_t hole)
{
    uint64_t mask = s->mask;
    for (uint64_t j = (hole + 1) & mask; s->e[j].key != 0; j = (j + 1) & mask) {
        uint64_t home = mem_map_hash(mem_cell_cls(&s->e[j]), s->e[j].key) & mask;
        /* Move e[j] into the hole if its home is not in (hole, j]. */
        if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->e[hole] = s->e[j];
            hole = j;
        }
    }
    s->e[hole].key = 0;
    s->count--;
}

/* ---- the readers ---------------------------------------------------------- */

void mem_map_reset(void)
{
    memset(mem_stripes, 0, sizeof mem_stripes);
}

size_t mem_map_snapshot(int d, mem_entry_t **out)
{
    mem_entry_t *v = NULL, e;
    size_t n = 0, cap = 0;
    for (int k = 0; k < MEM_STRIPES; k++) {
        mem_stripe_t *s = &mem_stripes[k];
        mem_stripe_lock(s);
        for (uint64_t i = 0; s->e && i <= s->mask; i++) {
            if (s->e[i].key == 0)
                continue;
            mem_cell_entry(&s->e[i], &e);
            if (d >= 0 && e.dev != d)
                continue;
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                mem_entry_t *nv = realloc(v, ncap * sizeof *nv);
                if (!nv)
                    break;
                v = nv;
                cap = ncap;
            }
            v[n++] = e;
        }
        mem_stripe_unlock(s);
    }
    *out = v;
    return n;
}

uint64_t mem_map_sum(int d, uint64_t *count)
{
    uint64_t bytes = 0, n = 0;
    mem_entry_t e;
    for (int k = 0; k < MEM_STRIPES; k++) {
        mem_stripe_t *s = &mem_stripes[k];
        mem_stripe_lock(s);
        for (uint64_t i = 0; s->e && i <= s->mask; i++) {
            if (s->e[i].key == 0)
                continue;
            mem_cell_entry(&s->e[i], &e);
            if (d < 0 || e.dev == d) {
                bytes += e.bytes;
                n++;
            }
        }
        mem_stripe_unlock(s);
    }
    if (count)
        *count = n;
    return bytes;
}

/*
 * object.c - the handles simgpu gives out and the registry of device-visible
 * address ranges.
 *
 * Divided into: handles (a table of slots, each with a kind and a
 * generation); ranges (a balanced tree of non-overlapping intervals, glibc's
 * tsearch, plus a list of all of them for teardown).
 *
 * Lock: everything here is called with sim_p.lock held.
 *
 * Handles: handle = kind << 56 | (generation & 0xffffff) << 32 | (index + 1).
 * A handle is valid iff slot[index] holds an object of that kind and that
 * generation; freeing a slot bumps its generation, so a stale handle (or one
 * from the parent of a fork()) is refused without touching freed memory.
 * Handles are never 0, 1 or 2, the values CUDA reserves for NULL,
 * CU_STREAM_LEGACY and CU_STREAM_PER_THREAD.
 */
#include "sim.h"

#include <search.h>
#include <stdlib.h>
#include <sys/mman.h>

/* ---- handles ------------------------------------------------------------ */

typedef struct obj_slot {
    void *obj;
    uint32_t gen;
    uint32_t next_free;                 /* index + 1 of the next free slot */
    sim_kind_t kind;                    /* SIM_K_NONE when free */
} obj_slot_t;

/* Invariant: free_head chains exactly the slots of kind SIM_K_NONE below n. */
static obj_slot_t *slots;
static uint32_t n, cap, free_head;

uint64_t sim_obj_new(sim_kind_t kind, void *obj)
{
    uint32_t i;
    if (free_head) {
        i = free_head - 1;
        free_head = slots[i].next_free;
    } else {
        if (n == cap) {
            uint32_t ncap = cap ? cap * 2 : 256;
            obj_slot_t *ns = realloc(slots, (size_t)ncap * sizeof *ns);
            if (!ns || ncap > 0x7fffffffu)
                return 0;
            slots = ns;
            cap = ncap;
        }
        i = n++;
        slots[i].gen = 1;
    }
    slots[i].obj = obj;
    slots[i].kind = kind;
    slots[i].next_free = 0;
    return (uint64_t)kind << 56 | (uint64_t)(slots[i].gen & 0xffffff) << 32 | (i + 1);
}

static obj_slot_t *slot_of(uint64_t h, sim_kind_t kind)
{
    uint64_t idx = (h & 0xffffffffu);
    if ((h >> 56) != (uint64_t)kind || idx == 0 || idx > n)
        return NULL;
    obj_slot_t *s = &slots[idx - 1];
    if (s->kind != kind || (s->gen & 0xffffff) != ((h >> 32) & 0xffffff))
        return NULL;
    return s;
}

void *sim_obj_get(uint64_t h, sim_kind_t kind)
{
    obj_slot_t *s = slot_of(h, kind);
    return s ? s->obj : NULL;
}

static void release_slot(uint32_t i)
{
    slots[i].obj = NULL;
    slots[i].kind = SIM_K_NONE;
    slots[i].gen++;
    slots[i].next_free = free_head;
    free_head = i + 1;
}

void sim_obj_free(uint64_t h)
{
    if ((h >> 56) == 0 || (h >> 56) >= SIM_K_COUNT)
        return;
    obj_slot_t *s = slot_of(h, (sim_kind_t)(h >> 56));
    if (s)
        release_slot((uint32_t)(s - slots));
}

void sim_obj_foreach(sim_kind_t kind, void (*fn)(void *obj, void *arg), void *arg)
{
    for (uint32_t i = 0; i < n; i++)
        if (slots[i].kind == kind)
            fn(slots[i].obj, arg);
}

void sim_obj_reset_after_fork(void)
{
    for (uint32_t i = 0; i < n; i++)
        if (slots[i].kind != SIM_K_NONE)
            release_slot(i);            /* the objects are the parent's: leaked */
}

/* ---- ranges ------------------------------------------------------------- */

static void *root;

/* Intervals compare equal when they overlap; stored ranges never do, so this
 * is a total order on them, and a one-byte probe finds its container. */
static int range_cmp(const void *a, const void *b)
{
    const sim_range_t *x = a, *y = b;
    if (x->base + (x->size ? x->size : 1) <= y->base)
        return -1;
    if (y->base + (y->size ? y->size : 1) <= x->base)
        return 1;
    return 0;
}

int sim_range_add(sim_range_t *r)
{
    void *node = tsearch(r, &root, range_cmp);
    if (!node || *(sim_range_t **)node != r)
        return -1;
    r->prev = NULL;
    r->next = sim_p.ranges;
    if (sim_p.ranges)
        sim_p.ranges->prev = r;
    sim_p.ranges = r;
    return 0;
}

void sim_range_remove(sim_range_t *r)
{
    tdelete(r, &root, range_cmp);
    if (r->prev)
        r->prev->next = r->next;
    else
        sim_p.ranges = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

sim_range_t *sim_range_find(uintptr_t addr)
{
    sim_range_t probe = { .base = addr, .size = 1 };
    void *node = tfind(&probe, &root, range_cmp);
    return node ? *(sim_range_t **)node : NULL;
}

int sim_range_check(uintptr_t addr, size_t len, int prot)
{
    if (len == 0)
        return 0;
    if (addr + len < addr)
        return -1;
    for (uintptr_t p = addr, end = addr + len; p < end;) {
        sim_range_t *r = sim_range_find(p);
        if (!r)
            return -1;
        if (r->kind == SIM_R_MAPPED && (r->prot & prot) != prot)
            return -1;
        p = r->base + r->size;
    }
    return 0;
}

void sim_range_reset_after_fork(void)
{
    root = NULL;                        /* the parent's nodes: leaked */
    sim_p.ranges = NULL;
}

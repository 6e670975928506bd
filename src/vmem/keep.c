/*
 * keep.c - what paging keeps for reuse and lets go in time: the chunks
 * freed big allocations leave, kept for the next allocation of their size,
 * and the drain thread's look (vmem_keep_tick), which lets go what was kept
 * too long, here and in the staging pool (stage.c).
 *
 * Divided into: the chunk cache; the drain thread's look.
 *
 * Lock: the callers hold vmem_p.lock (vmem_int.h); the drain thread's look
 * only tries it (an allocation may wait in it for memory: the look comes
 * back soon instead).
 */
#include "vmem/vmem_int.h"
#include "util/util.h"

#include <string.h>

/* ---- the chunk cache ---------------------------------------------------------------
 * A training job frees and makes again its per-iteration buffers every
 * iteration; served through the driver's VMM calls, each would cost a
 * reservation, a chunk and its mapping, and their undoing (on a GPU
 * cuMemCreate and cuMemMap are far slower than cuMemAlloc from a warm
 * context; on simgpu the pair cost a job of 2 ms iterations 1.5%).  So a
 * freed big allocation is kept, mapped and charged, for the next
 * allocation of its size, as a framework's caching allocator keeps its
 * blocks: VMEM_CACHE of them per device, the oldest let go first, each
 * for VMEM_KEEP_NS, all of them at an allocation of a size none is kept
 * for (kept memory must never count against the job's own allocation: its
 * SALUS_MEM_LIMIT, a full device).  Nobody must wait for kept memory: while a peer
 * waits for memory on the device nothing is kept, and what is kept goes
 * at this process's next allocation or free there, or at the drain
 * thread's next look (vmem_keep_tick, which lets chunks go past their time
 * too: a process that stops allocating keeps nothing long); a page-out
 * lets it all go first (nothing to copy).  Until the drain thread has
 * looked once, nothing is kept.  An exported chunk is never kept (its
 * importers hold it). */

static int waited_on(int ordinal)
{
    return mem_waited_on(ordinal);
}

void vmem_cache_release_locked(vmem_dev_t *v, const vmem_cached_t *c)
{
    vmem_unback(c->base, c->bytes, c->h);
    v->resident -= c->bytes;
    if (c->charged)
        vmem_uncharge(v->ordinal, c->bytes);
    vmem_drv()->mem_address_free(c->base, c->bytes);
}

/* Let the kept chunks freed before `before` go (all: UINT64_MAX); the
 * bytes that were charged. */
static uint64_t cache_expire(vmem_dev_t *v, uint64_t before)
{
    uint64_t charged = 0;
    int k = 0;
    for (int i = 0; i < v->ncache; i++) {
        const vmem_cached_t *c = &v->cache[i];
        if (c->at_ns < before) {
            charged += c->charged ? c->bytes : 0;
            vmem_cache_release_locked(v, c);
        } else {
            v->cache[k++] = *c;
        }
    }
    v->ncache = k;
    return charged;
}

uint64_t vmem_cache_drop_locked(vmem_dev_t *v)
{
    return cache_expire(v, UINT64_MAX);
}

int vmem_cache_put_locked(vmem_dev_t *v, const vmem_buf_t *a)
{
    if (a->exported || a->out || !util_load_relaxed(&vmem_p.ticking) ||
        waited_on(v->ordinal)) {
        vmem_cache_drop_locked(v);
        return 0;
    }
    if (v->ncache == VMEM_CACHE) {
        vmem_cache_release_locked(v, &v->cache[0]);
        memmove(&v->cache[0], &v->cache[1], (VMEM_CACHE - 1) * sizeof v->cache[0]);
        v->ncache--;
    }
    v->cache[v->ncache++] = (vmem_cached_t){ a->base, a->bytes, a->h, a->charged,
                                             util_coarse_ns() };
    return 1;
}

/* A kept chunk of exactly `bytes` into *c (the latest kept first). */
int vmem_cache_take_locked(vmem_dev_t *v, uint64_t bytes, vmem_cached_t *c)
{
    if (v->ncache && waited_on(v->ordinal)) {
        vmem_cache_drop_locked(v);
        return 0;
    }
    for (int i = v->ncache - 1; i >= 0; i--) {
        if (v->cache[i].bytes != bytes)
            continue;
        *c = v->cache[i];
        memmove(&v->cache[i], &v->cache[i + 1], (size_t)(v->ncache - 1 - i) * sizeof *c);
        v->ncache--;
        return 1;
    }
    return 0;
}

/* ---- the drain thread's look -------------------------------------------------- */

uint64_t vmem_keep_tick(void)
{
    uint64_t now = util_now_ns(), next = 0;
    util_store_relaxed(&vmem_p.ticking, 1);
    if (pthread_mutex_trylock(&vmem_p.lock) != 0)
        return VMEM_KEEP_NS / 4;    /* busy (an allocation may wait in it): soon */
    for (int i = 0; i < VMEM_MAX_DEVICES; i++) {
        vmem_dev_t *v = &vmem_p.dev[i];
        if (!v->ready || !v->ncache || vmem_enter(v) != 0)
            continue;
        cache_expire(v, waited_on(v->ordinal) ? UINT64_MAX :
                        now > VMEM_KEEP_NS ? now - VMEM_KEEP_NS : 0);
        vmem_leave();
        if (v->ncache)
            next = VMEM_KEEP_NS / 2;
    }
    void *drop[VMEM_STAGE_KEEP_N];
    unsigned ndrop = vmem_stage_trim_locked(util_coarse_ns(), drop, &next);
    pthread_mutex_unlock(&vmem_p.lock);
    for (unsigned i = 0; i < ndrop; i++)    /* may synchronize: not under the lock */
        vmem_drv()->mem_free_host(drop[i]);
    return next;
}

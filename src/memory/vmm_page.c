/*
 * vmm_page.c - paging a process's virtualized memory (mem_vmm.h) out to
 * pinned host memory and back in at the same device addresses: the
 * primitives the scheduler calls in the process that owns the memory, while
 * its program is stopped at the gate or at rest with its work drained.
 *
 * Divided into: the staging bound; big allocations; small regions; the
 * primitives.
 *
 * Out: the program's work is waited for (a context synchronize), the live
 * bytes are copied to pinned staging in large transfers on libsalus's own
 * stream (one per big allocation; a small region's live allocations
 * coalesced), then the physical chunks are unmapped and released and their
 * budget given back.  Free space in chunks is not copied, nor is a big
 * allocation no work has reached since it was made (mem_p.work_count).  In:
 * the budget is taken back first (refused at once, never waited for, when
 * the device has no room for it now: the caller waits and asks again,
 * holding none of it: the big allocations come back all or none),
 * physical memory is created and mapped at the same addresses, access set,
 * the staged bytes copied back and the staging freed.  Memory that has no
 * live allocation any more (freed while out) is neither backed nor copied.
 *
 * A test seam (mem_vm_phase_hook) parks the process half-way through each
 * direction, where tests SIGKILL it.
 *
 * Lock: mem_vm.lock, held throughout (mem_vmm.h).
 */
#include "memory/mem_vmm.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

#define COALESCE_GAP (64u << 10)     /* live ranges this close are copied as one */

void (*mem_vm_phase_hook)(mem_vm_phase_t phase);

static void phase(mem_vm_phase_t at)
{
    void (*fn)(mem_vm_phase_t) = mem_vm_phase_hook;
    if (fn)
        fn(at);
}

static void copied(uint64_t bytes)
{
    __atomic_add_fetch(&mem_vm.copied, bytes, __ATOMIC_RELAXED);
}

uint64_t mem_paged_copied_bytes(void)
{
    return __atomic_load_n(&mem_vm.copied, __ATOMIC_RELAXED);
}

/* ---- the staging bound ----------------------------------------------------------
 * SALUS_SWAP_LIMIT (page.c's mem_swap_limit): what the host can spare. */

static int stage_fits(uint64_t more)
{
    return mem_vm.staged + more <= mem_swap_limit();
}

static void *stage_alloc(uint64_t bytes)
{
    void *p = NULL;
    if (!stage_fits(bytes) || mem_p.drv.mem_host_alloc(&p, bytes, 0) != CUDA_SUCCESS)
        return NULL;
    mem_vm.staged += bytes;
    return p;
}

static void stage_free(void *p, uint64_t bytes)
{
    mem_p.drv.mem_free_host(p);
    mem_vm.staged -= bytes;
}

/* ---- big allocations -------------------------------------------------------------- */

static int by_bytes_desc(const void *x, const void *y)
{
    const mem_valloc_t *a = *(mem_valloc_t *const *)x, *b = *(mem_valloc_t *const *)y;
    return a->bytes < b->bytes ? 1 : a->bytes > b->bytes ? -1 : 0;
}

/* The big allocations of ordinal that are out (out = 1) or in (out = 0),
 * largest first; the count, or -1. */
static long bigs(int ordinal, int out, mem_valloc_t ***list)
{
    const mem_vmap_t *m = &mem_vm.allocs;
    mem_valloc_t **v = malloc((m->count + 1) * sizeof *v);
    long n = 0;
    if (!v)
        return -1;
    for (size_t i = 0; m->key && i <= m->mask; i++) {
        mem_valloc_t *a = m->val[i];
        if (a && a->big && a->ordinal == ordinal && a->out == out && !a->exported)
            v[n++] = a;               /* an exported one is pinned (never out) */
    }
    qsort(v, (size_t)n, sizeof *v, by_bytes_desc);
    *list = v;
    return n;
}

/* a was never written: no work reached the driver since it was made
 * (mem_p.work_count; `work` its value now, UINT64_MAX unknown). */
static int never_written(const mem_valloc_t *a, uint64_t work)
{
    return work != UINT64_MAX && a->work_at == work;
}

/* Copy out the chosen big allocations (want bytes of chunks, 0: all), then
 * release their chunks; one never written is released without a copy.
 * The bytes freed. */
static CUresult bigs_out(mem_vdev_t *v, uint64_t want, uint64_t *freed)
{
    mem_valloc_t **list;
    long n = bigs(v->ordinal, 0, &list), k = 0;
    uint64_t got = 0;
    uint64_t work = mem_vm_work_now();
    CUresult rc = CUDA_SUCCESS;
    if (n < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (; k < n && (want == 0 || got < want); k++) {
        mem_valloc_t *a = list[k];
        a->clean = (uint8_t)never_written(a, work);
        if (a->clean) {
            got += a->bytes;
            continue;
        }
        if (!(a->stage = stage_alloc(a->size)))
            continue;                 /* past the staging bound: a smaller one may fit */
        rc = mem_p.drv.memcpy_dtoh_async(a->stage, a->base, a->size, v->stream);
        copied(a->size);
        if (rc != CUDA_SUCCESS) {
            stage_free(a->stage, a->size);
            a->stage = NULL;
            break;
        }
        got += a->bytes;
    }
    if (k && (rc = mem_p.drv.stream_synchronize(v->stream)) != CUDA_SUCCESS)
        got = 0;
    for (long i = 0; i < k; i++) {
        mem_valloc_t *a = list[i];
        if (!a->stage && !a->clean)
            continue;
        if (rc != CUDA_SUCCESS) {     /* the copies failed: it stays in */
            if (a->stage)
                stage_free(a->stage, a->size);
            a->stage = NULL;
            a->clean = 0;
            continue;
        }
        mem_vm_unback(a->base, a->bytes, a->h);
        a->h = 0;
        a->out = 1;
        if (a->charged)
            mem_vm_uncharge(a->ordinal, a->bytes);
        a->charged = 0;
        v->resident -= a->bytes;
        v->paged_out += a->size;
        if (i == 0)
            phase(MEM_VM_HALF_OUT);
    }
    free(list);
    *freed += got;
    return rc;
}

static CUresult bigs_in(mem_vdev_t *v, uint64_t *restored)
{
    mem_valloc_t **list;
    long n = bigs(v->ordinal, 1, &list), k = 0;
    CUresult rc = CUDA_SUCCESS;
    if (n < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (; k < n; k++) {
        mem_valloc_t *a = list[k];
        int charged;
        if ((rc = mem_vm_charge(a->ordinal, a->bytes, &charged)) != CUDA_SUCCESS)
            break;
        if ((rc = mem_vm_back(v, a->base, a->bytes, &a->h)) != CUDA_SUCCESS) {
            if (charged)
                mem_vm_uncharge(a->ordinal, a->bytes);
            break;
        }
        a->charged = (uint8_t)charged;
        v->resident += a->bytes;
        if (a->stage && (rc = mem_p.drv.memcpy_htod_async(a->base, a->stage, a->size,
                                                          v->stream)) != CUDA_SUCCESS)
            break;
        copied(a->stage ? a->size : 0);
        if (k == 0)
            phase(MEM_VM_HALF_IN);
    }
    CUresult sync = k ? mem_p.drv.stream_synchronize(v->stream) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS || sync != CUDA_SUCCESS) {
        /* All or nothing: what came back in this call goes out again (its
         * staging kept), so that a page-in refused half-way holds no
         * memory while it waits for the rest: held, it was memory the
         * jobs it waits for needed (two such waits waited for each other). */
        for (long i = 0; i < k; i++) {
            mem_valloc_t *a = list[i];
            if (!a->h)
                continue;
            mem_vm_unback(a->base, a->bytes, a->h);
            a->h = 0;
            if (a->charged)
                mem_vm_uncharge(a->ordinal, a->bytes);
            a->charged = 0;
            v->resident -= a->bytes;
        }
        free(list);
        return rc != CUDA_SUCCESS ? rc : sync;
    }
    for (long i = 0; i < k; i++) {
        mem_valloc_t *a = list[i];
        if (!a->h)
            continue;
        if (a->stage)
            stage_free(a->stage, a->size);
        a->stage = NULL;
        a->clean = 0;
        a->out = 0;
        v->paged_out -= a->size;
        *restored += a->bytes;
    }
    free(list);
    return rc != CUDA_SUCCESS ? rc : sync;
}

void mem_vm_drop_stage(mem_valloc_t *a)
{
    mem_vdev_t *v = &mem_vm.dev[a->ordinal];
    if (a->stage)
        stage_free(a->stage, a->size);
    a->stage = NULL;
    v->paged_out -= a->size;
}

/* ---- small regions ----------------------------------------------------------------- */

static int by_base(const void *x, const void *y)
{
    const mem_vrange_t *a = x, *b = y;
    return a->base < b->base ? -1 : a->base > b->base;
}

/* The live small allocations of v, sorted and coalesced; the count, or -1. */
static long live_ranges(mem_vdev_t *v, mem_vrange_t **out)
{
    const mem_vmap_t *m = &mem_vm.allocs;
    mem_vrange_t *r = malloc((m->count + 1) * sizeof *r);
    size_t n = 0, k = 0;
    if (!r)
        return -1;
    for (size_t i = 0; m->key && i <= m->mask; i++) {
        mem_valloc_t *a = m->val[i];
        if (a && !a->big && a->ordinal == v->ordinal)
            r[n++] = (mem_vrange_t){ a->base, a->size, 0 };
    }
    qsort(r, n, sizeof *r, by_base);
    for (size_t i = 0; i < n; i++) {
        if (k && r[i].base <= r[k - 1].base + r[k - 1].len + COALESCE_GAP) {
            uint64_t end = r[i].base + r[i].len;
            if (end > r[k - 1].base + r[k - 1].len)
                r[k - 1].len = end - r[k - 1].base;
            continue;
        }
        r[k++] = r[i];
    }
    uint64_t off = 0;
    for (size_t i = 0; i < k; i++) {
        r[i].off = off;
        off += r[i].len;
    }
    *out = r;
    return (long)k;
}

static CUresult small_out(mem_vdev_t *v, uint64_t *freed)
{
    mem_vrange_t *r;
    long n = live_ranges(v, &r);
    uint64_t total = 0;
    CUresult rc = CUDA_SUCCESS;
    if (n < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (long i = 0; i < n; i++)
        total += r[i].len;
    void *stage = total ? stage_alloc(total) : NULL;
    if (total && !stage) {
        free(r);
        return CUDA_SUCCESS;          /* the staging bound: it stays in */
    }
    for (long i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        rc = mem_p.drv.memcpy_dtoh_async((char *)stage + r[i].off, r[i].base, r[i].len,
                                         v->stream);
        copied(r[i].len);
    }
    if (rc == CUDA_SUCCESS && n)
        rc = mem_p.drv.stream_synchronize(v->stream);
    if (rc != CUDA_SUCCESS) {
        if (stage)
            stage_free(stage, total);
        free(r);
        return rc;
    }
    for (size_t i = 0; i < v->size / v->gran; i++) {
        mem_vgran_t *g = &v->g[i];
        if (!g->h)
            continue;
        mem_vm_unback(v->base + i * v->gran, v->gran, g->h);
        g->h = 0;
        if (g->charged)
            mem_vm_uncharge(v->ordinal, v->gran);
        g->charged = 0;
        v->resident -= v->gran;
        *freed += v->gran;
    }
    v->small_out = 1;
    v->stage = stage;
    v->stage_bytes = total;
    v->ranges = r;
    v->nranges = (size_t)n;
    v->paged_out += total;
    return CUDA_SUCCESS;
}

/* Copy back the part of staged range r that lies in backed granules (an
 * allocation freed while out may have left a granule unbacked). */
static CUresult copy_back(mem_vdev_t *v, const mem_vrange_t *r)
{
    uint64_t p = r->base, end = r->base + r->len;
    while (p < end) {
        size_t gi = (p - v->base) / v->gran;
        uint64_t gend = v->base + (gi + 1) * v->gran, stop = gend < end ? gend : end;
        if (v->g[gi].h) {
            CUresult rc = mem_p.drv.memcpy_htod_async(p, (char *)v->stage + r->off +
                                                      (p - r->base), stop - p, v->stream);
            if (rc != CUDA_SUCCESS)
                return rc;
            copied(stop - p);
        }
        p = stop;
    }
    return CUDA_SUCCESS;
}

CUresult mem_vm_small_in(mem_vdev_t *v, uint64_t *restored)
{
    size_t ng = v->size / v->gran, i;
    uint64_t got = 0;
    CUresult rc = CUDA_SUCCESS;
    for (i = 0; i < ng; i++) {
        mem_vgran_t *g = &v->g[i];
        int charged;
        if (!g->live)
            continue;
        if ((rc = mem_vm_charge(v->ordinal, v->gran, &charged)) != CUDA_SUCCESS)
            goto out_unback;
        if ((rc = mem_vm_back(v, v->base + i * v->gran, v->gran, &g->h)) != CUDA_SUCCESS) {
            if (charged)
                mem_vm_uncharge(v->ordinal, v->gran);
            goto out_unback;
        }
        g->charged = (uint32_t)charged;
        got += v->gran;
    }
    for (size_t k = 0; k < v->nranges; k++)
        if ((rc = copy_back(v, &v->ranges[k])) != CUDA_SUCCESS)
            goto out_unback;
    if (v->nranges && (rc = mem_p.drv.stream_synchronize(v->stream)) != CUDA_SUCCESS)
        goto out_unback;
    if (v->stage)
        stage_free(v->stage, v->stage_bytes);
    free(v->ranges);
    v->paged_out -= v->stage_bytes;
    v->resident += got;
    v->stage = NULL;
    v->ranges = NULL;
    v->nranges = 0;
    v->stage_bytes = 0;
    v->small_out = 0;
    if (restored)
        *restored += got;
    return CUDA_SUCCESS;
out_unback:                           /* all or nothing: it stays out */
    while (i-- > 0) {
        mem_vgran_t *g = &v->g[i];
        if (!g->h)
            continue;
        mem_vm_unback(v->base + i * v->gran, v->gran, g->h);
        g->h = 0;
        if (g->charged)
            mem_vm_uncharge(v->ordinal, v->gran);
        g->charged = 0;
    }
    return rc;
}

/* ---- the primitives --------------------------------------------------------------- */

static mem_vdev_t *ready_dev(int ordinal)
{
    if (!mem_swap_on() || ordinal < 0 || ordinal >= MEM_VMM_MAX_DEVICES)
        return NULL;
    mem_vdev_t *v = &mem_vm.dev[ordinal];
    return v->ready ? v : NULL;
}

CUresult mem_page_out(int ordinal, uint64_t want, uint64_t *freed)
{
    uint64_t got = 0;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mem_vm.lock);
    mem_vdev_t *v = ready_dev(ordinal);
    if (!v)
        goto out_unlock;              /* nothing virtualized there */
    if (mem_vm_enter(v) != 0) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
        goto out_unlock;
    }
    /* The program's work on its memory ends before the copies start. */
    if ((rc = mem_p.drv.ctx_synchronize()) == CUDA_SUCCESS) {
        mem_vm_async_settle_locked();   /* stream-ordered frees: done now, not copied */
        got = mem_vm_cache_drop_locked(v);   /* kept chunks: freed, nothing to copy */
        if (want == 0 || got < want)
            rc = bigs_out(v, want ? want - got : 0, &got);
    }
    if (rc == CUDA_SUCCESS && (want == 0 || got < want) && v->size && !v->small_out &&
        !v->small_pins)               /* an exported small allocation pins it */
        rc = small_out(v, &got);
    mem_vm_leave();
out_unlock:
    pthread_mutex_unlock(&mem_vm.lock);
    if (rc == CUDA_SUCCESS && freed)
        *freed = got;
    return rc;
}

/* What bringing v back in takes on the device: the chunks of what is out
 * (granules left with no live allocation are not backed again). */
uint64_t mem_vm_need_in(const mem_vdev_t *v)
{
    uint64_t need = 0;
    for (size_t i = 0; v->small_out && i < v->size / v->gran; i++)
        need += v->g[i].live ? v->gran : 0;
    for (size_t i = 0; mem_vm.allocs.key && i <= mem_vm.allocs.mask; i++) {
        const mem_valloc_t *a = mem_vm.allocs.val[i];
        if (a && a->big && a->out && a->ordinal == v->ordinal)
            need += a->bytes;
    }
    return need;
}

/* Whether `need` bytes can be had on ordinal's device now: a page-in that
 * cannot answers at once (its caller waits and asks again), where an
 * allocation would wait SALUS_MEM_WAIT_MS.  A peer may take the room
 * between this look and the charge: then the charge waits as usual. */
static int room_for(int ordinal, uint64_t need)
{
    mem_local_dev_t *ld = mem_local_dev(ordinal);
    if (!ld || need == 0 || mem_lock() != 0)
        return 1;                     /* uncounted, or the charge says */
    shm_reap_dead(mem_p.t, 1);        /* a dead peer's memory is room */
    mem_fix_log(mem_p.t, ld->d);
    uint64_t room = mem_room_locked(ld);
    shm_unlock(mem_p.t);
    return room >= need;
}

CUresult mem_page_in(int ordinal, uint64_t *restored)
{
    uint64_t got = 0;
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&mem_vm.lock);
    mem_vdev_t *v = ready_dev(ordinal);
    if (!v)
        goto out_unlock;
    if (!room_for(ordinal, mem_vm_need_in(v))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    if (mem_vm_enter(v) != 0) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
        goto out_unlock;
    }
    mem_take_nowait(1);               /* refused at once: the caller waits, holding nothing */
    if (v->small_out)
        rc = mem_vm_small_in(v, &got);
    if (rc == CUDA_SUCCESS)
        rc = bigs_in(v, &got);
    mem_take_nowait(0);
    mem_vm_leave();
out_unlock:
    pthread_mutex_unlock(&mem_vm.lock);
    if (rc == CUDA_SUCCESS && restored)
        *restored = got;
    return rc;
}

/*
 * alloc.c - virtualized allocations (vmem_int.h says what they are):
 * cuMemAlloc_v2 and cuMemAllocPitch_v2 of a process with paging on, their
 * frees, and the driver's answers about them (cuMemGetAddressRange,
 * cuPointerGetAttribute) as for an ordinary allocation.
 *
 * Divided into: a device's small region; allocations; frees; queries;
 * figures.  The maps, the budget and physical chunks are core.c's.
 *
 * Lock: vmem_p.lock guards everything here (vmem_int.h).  The driver calls
 * are the real driver's (drv.h), never the program's hooks: a chunk libsalus
 * maps is charged here once, by its size, and by nobody else.
 */
#include "vmem/vmem_int.h"
#include "util/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SMALL_REGION_MIN (1ull << 30)
#define PITCH_ALIGN 512u             /* cuMemAllocPitch's row alignment */

static inline uint64_t round_up(uint64_t x, uint64_t g) { return (x + g - 1) / g * g; }

/* ---- a device's small region ----------------------------------------------------
 * Made at the process's first virtualized allocation on the device, in the
 * context current then (where libsalus's copies will run): the granularity,
 * a stream of libsalus's own, and the small region, twice the device's
 * memory (address space only), with its jemalloc arena. */

static int vdev_setup(vmem_dev_t *v, int ordinal)
{
    const drv_t *d = vmem_drv();
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, ordinal } };
    size_t gran = 0, total = 0;
    CUcontext ctx = NULL;
    if (d->ctx_get_current(&ctx) != CUDA_SUCCESS || !ctx ||
        d->mem_get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
        gran == 0 || (gran & (gran - 1)) ||
        d->device_total_mem(&total, ordinal) != CUDA_SUCCESS || total == 0)
        return -1;
    v->ordinal = ordinal;
    v->ctx = ctx;
    v->gran = gran;
    if (d->stream_create(&v->stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
        return -1;
    /* Without jemalloc, small allocations take a chunk of their own. */
    size_t size = round_up(2 * (uint64_t)total > SMALL_REGION_MIN ? 2 * (uint64_t)total
                                                                   : SMALL_REGION_MIN, gran);
    if (!vmem_jem_available() ||
        d->mem_address_reserve(&v->base, size, gran, 0, 0) != CUDA_SUCCESS)
        goto out_ready;
    v->g = calloc(size / gran, sizeof *v->g);
    if (!v->g || vmem_jem_create(&v->jem, v->base, size) != 0) {
        free(v->g);
        v->g = NULL;
        if (d->mem_address_free)
            d->mem_address_free(v->base, size);
        v->base = 0;
        goto out_ready;
    }
    v->size = size;
    util_or_release(&vmem_p.small_devs, 1u << ordinal);   /* after base and size */
out_ready:
    v->ready = 1;
    return 0;
}

static vmem_dev_t *vdev_of(int ordinal)
{
    if (ordinal < 0 || ordinal >= VMEM_MAX_DEVICES)
        return NULL;
    vmem_dev_t *v = &vmem_p.dev[ordinal];
    if (!v->ready && vdev_setup(v, ordinal) == 0)
        util_store_release(&vmem_p.pageable, 1);   /* page.h pages through vmem_page_* now */
    if (!v->ready) {
        static int said;
        util_log_once(&said, UTIL_LOG_ERROR, "memory: paging could not start on device %d "
                      "(no context, no granularity or no stream); its allocations stay "
                      "ordinary", ordinal);
        return NULL;
    }
    return v;
}

/* Back the granules of [p, p + n) that are not yet, and count the
 * allocation in each.  On failure nothing is left counted. */
static CUresult small_touch(vmem_dev_t *v, uint64_t p, uint64_t n)
{
    size_t first, last, i;
    CUresult rc = CUDA_SUCCESS;
    vmem_granules(v, p, n, &first, &last);
    for (i = first; i <= last; i++) {
        vmem_gran_t *g = &v->g[i];
        if (!g->h) {
            CUdeviceptr at = v->base + i * v->gran;
            int charged;
            if ((rc = vmem_charge(v->ordinal, v->gran, &charged)) != CUDA_SUCCESS)
                break;
            if ((rc = vmem_back(v, at, v->gran, &g->h)) != CUDA_SUCCESS) {
                if (charged)
                    vmem_uncharge(v->ordinal, v->gran);
                break;
            }
            g->charged = (uint32_t)charged;
            v->resident += v->gran;
        }
        g->live++;
    }
    if (rc == CUDA_SUCCESS)
        return rc;
    while (i-- > first)
        v->g[i].live--;               /* backed granules stay, for the next */
    return rc;
}

static void small_untouch(vmem_dev_t *v, uint64_t p, uint64_t n)
{
    size_t first, last;
    vmem_granules(v, p, n, &first, &last);
    for (size_t i = first; i <= last; i++)
        if (v->g[i].live)
            v->g[i].live--;
}

/* ---- allocations ------------------------------------------------------------------ */

static CUresult alloc_small(vmem_dev_t *v, vmem_buf_t *a)
{
    CUresult rc;
    if (v->small_out) {               /* a paged-out region comes back first */
        if (vmem_enter(v) != 0)
            return CUDA_ERROR_INVALID_CONTEXT;
        rc = vmem_small_in(v, NULL);
        vmem_leave();
        if (rc != CUDA_SUCCESS)
            return rc;
    }
    /* Short of memory, the blocks jemalloc's cache keeps go back first:
     * they may be what would serve this one in granules already backed. */
    for (int flushed = 0;; flushed = 1) {
        uintptr_t p = vmem_jem_alloc(&v->jem, a->size);
        if (!p)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        else if ((rc = small_touch(v, p, a->size)) == CUDA_SUCCESS) {
            a->base = p;
            return CUDA_SUCCESS;
        } else
            vmem_jem_free(&v->jem, p, a->size);
        if (rc != CUDA_ERROR_OUT_OF_MEMORY || flushed || !vmem_jem_flush(&v->jem))
            return rc;
    }
}

/* A chunk the table had room for (charged), which the driver may refuse
 * a while (mem_charge_retry: a process that has just ended gives its memory
 * back as it is torn down). */
static CUresult back_charged(vmem_dev_t *v, uint64_t at, uint64_t bytes, int charged,
                             CUmemGenericAllocationHandle *h)
{
    uint64_t refused_at = 0;
    CUresult rc;
    while ((rc = vmem_back(v, at, bytes, h)) == CUDA_ERROR_OUT_OF_MEMORY && charged &&
           mem_charge_retry(v->ordinal, bytes, &refused_at))
        ;
    if (rc == CUDA_SUCCESS && refused_at)    /* what held it is gone: the foreign use too */
        mem_charge_refresh(v->ordinal);
    return rc;
}

static CUresult alloc_big(vmem_dev_t *v, vmem_buf_t *a)
{
    const drv_t *d = vmem_drv();
    CUdeviceptr at = 0;
    int charged;
    vmem_cached_t kept;
    a->big = 1;
    a->bytes = round_up(a->size, v->gran);
    if (vmem_cache_take_locked(v, a->bytes, &kept)) {
        a->base = kept.base;
        a->h = kept.h;
        a->charged = kept.charged;
        /* As written: a page-out copies it even if nothing has written it
         * since, but taking a kept chunk stays flat in the process's
         * threads (vmem_work_now sums each one's counters). */
        a->work_at = UINT64_MAX;
        if (vmem_spans_add(&vmem_p.bigs, a) == 0)
            return CUDA_SUCCESS;
        vmem_cache_release_locked(v, &kept);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* A size none is kept for: the job's pattern changed, and what is kept
     * must not count against this allocation (its limit, a full device). */
    vmem_cache_drop_locked(v);
    CUresult rc = vmem_charge(v->ordinal, a->bytes, &charged);
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((rc = d->mem_address_reserve(&at, a->bytes, v->gran, 0, 0)) != CUDA_SUCCESS)
        goto out_uncharge;
    if ((rc = back_charged(v, at, a->bytes, charged, &a->h)) != CUDA_SUCCESS)
        goto out_free;
    a->base = at;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    if (vmem_spans_add(&vmem_p.bigs, a) != 0)
        goto out_unmap;
    a->charged = (uint8_t)charged;
    v->resident += a->bytes;
    a->work_at = vmem_work_now();
    return CUDA_SUCCESS;
out_unmap:
    vmem_unback(at, a->bytes, a->h);
out_free:
    d->mem_address_free(at, a->bytes);
out_uncharge:
    if (charged)
        vmem_uncharge(v->ordinal, a->bytes);
    return rc;
}

static CUresult valloc_locked(int ordinal, uint64_t size, CUdeviceptr *out)
{
    vmem_dev_t *v = vdev_of(ordinal);
    if (!v)
        return CUDA_ERROR_NOT_SUPPORTED;  /* the caller goes to the driver */
    vmem_buf_t *a = vmem_buf_new_locked();
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a->size = size;
    a->ordinal = ordinal;
    a->ctx = v->ctx;
    vmem_drv()->ctx_get_current(&a->ctx);
    CUresult rc = size < v->gran && v->size ? alloc_small(v, a) : alloc_big(v, a);
    if (rc != CUDA_SUCCESS)
        goto out_free;
    if (vmem_map_put(&vmem_p.allocs, a->base, a) != 0) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_undo;
    }
    a->id = __atomic_add_fetch(&vmem_p.next_id, 1, __ATOMIC_RELAXED);  /* read by the report */
    *out = a->base;
    return CUDA_SUCCESS;
out_undo:
    if (!a->big) {
        small_untouch(v, a->base, a->size);
        vmem_jem_free(&v->jem, a->base, a->size);
    } else {
        vmem_spans_del(&vmem_p.bigs, a);
        vmem_unback(a->base, a->bytes, a->h);
        vmem_drv()->mem_address_free(a->base, a->bytes);
        if (a->charged)
            vmem_uncharge(ordinal, a->bytes);
        v->resident -= a->bytes;
    }
out_free:
    vmem_buf_put_locked(a);
    return rc;
}

CUresult vmem_alloc_try(mem_kind_t kind, CUdeviceptr *out, size_t *pitch, size_t width,
                        size_t height, unsigned elem, int bail, vmem_stuck_t *stuck)
{
    stuck->stuck = 0;
    uint64_t size = width, row = width;
    int ordinal;
    if (!out || width == 0 || (kind == MEM_KIND_PITCH && (!pitch || height == 0)))
        return CUDA_ERROR_INVALID_VALUE;
    if (kind == MEM_KIND_PITCH) {
        if (elem != 4 && elem != 8 && elem != 16)
            return CUDA_ERROR_INVALID_VALUE;
        row = round_up(width, PITCH_ALIGN);
        if (height > MEM_MAX_BYTES / row)
            return CUDA_ERROR_OUT_OF_MEMORY;
        size = row * height;
    }
    if (!vmem_on() || drv_current_device(vmem_drv(), &ordinal) != 0)
        return CUDA_ERROR_NOT_SUPPORTED;  /* no context: the driver answers */
    if (size > MEM_MAX_BYTES)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&vmem_p.lock);
    vmem_stuck_try(bail);
    vmem_async_settle_locked();       /* stream-ordered frees done since */
    CUresult rc = valloc_locked(ordinal, size, out);
    int was_stuck = vmem_stuck_seen();
    pthread_mutex_unlock(&vmem_p.lock);
    stuck->stuck = rc != CUDA_SUCCESS && was_stuck;
    stuck->ordinal = ordinal;
    stuck->bytes = size;
    if (rc == CUDA_SUCCESS && kind == MEM_KIND_PITCH)
        *pitch = row;
    return rc;
}

CUresult vmem_alloc(mem_kind_t kind, CUdeviceptr *out, size_t *pitch, size_t width,
                    size_t height, unsigned elem)
{
    vmem_stuck_t stuck;
    return vmem_alloc_try(kind, out, pitch, width, height, elem, 0, &stuck);
}

int vmem_pageable(void)
{
    return util_load_acquire(&vmem_p.pageable);
}

/* ---- frees --------------------------------------------------------------------------
 * As cuMemFree, the device's work is waited for first: a freed block may
 * be handed out again at once, and work still reading it must be done. */

static void free_locked(vmem_buf_t *a)
{
    vmem_dev_t *v = &vmem_p.dev[a->ordinal];
    if (!a->big) {
        if (a->exported)
            vmem_p.ipc_freed(a);
        small_untouch(v, a->base, a->size);
        vmem_jem_free(&v->jem, a->base, a->size);
        return;
    }
    vmem_spans_del(&vmem_p.bigs, a);
    if (a->out) {
        vmem_drop_stage(a);
    } else if (vmem_cache_put_locked(v, a)) {
        return;                       /* kept: reservation, chunk and charge */
    } else {
        /* An importer's mapping keeps an exported chunk alive, and its
         * charge with it (ipc.c gives it back at the last close). */
        int kept = a->exported && vmem_p.ipc_freed(a);
        vmem_unback(a->base, a->bytes, a->h);
        v->resident -= a->bytes;
        if (a->charged && !kept)
            vmem_uncharge(a->ordinal, a->bytes);
    }
    vmem_drv()->mem_address_free(a->base, a->bytes);
}

/* Whether p is in a device's small region: made before any allocation in
 * it was handed out (the program passed p on after that), never unmade, so
 * read without the lock. */
static int in_small_region(uint64_t p)
{
    for (unsigned m = util_load_acquire(&vmem_p.small_devs); m; m &= m - 1) {
        const vmem_dev_t *v = &vmem_p.dev[__builtin_ctz(m)];
        if (p - v->base < v->size)
            return 1;
    }
    return 0;
}

/* The program's work ends before its memory goes, as cuMemFree's own
 * synchronize makes it: outside the lock (a wait for a kernel that waits
 * on another process must not hold every allocation of this one), and its
 * error is the free's, as the driver's (a sticky error: the context's work
 * has ended all the same, and the memory goes). */
int vmem_free(CUdeviceptr p, CUresult *rc)
{
    if (!vmem_on() || !p)
        return 0;
    if (!in_small_region(p)) {
        pthread_mutex_lock(&vmem_p.lock);
        int ours = vmem_map_get(&vmem_p.allocs, p) != NULL;
        pthread_mutex_unlock(&vmem_p.lock);
        if (!ours)
            return 0;
    }
    CUresult sync = vmem_drv()->ctx_synchronize();
    pthread_mutex_lock(&vmem_p.lock);
    vmem_buf_t *a = vmem_map_get(&vmem_p.allocs, p);
    if (a) {
        vmem_map_del(&vmem_p.allocs, p);
        free_locked(a);
        vmem_buf_put_locked(a);
    }
    pthread_mutex_unlock(&vmem_p.lock);
    /* Gone meanwhile: another thread freed it first (the driver's answer
     * to the second free of a pointer). */
    *rc = !a ? CUDA_ERROR_INVALID_VALUE : sync;
    return 1;
}

/* For async.c's stream-ordered allocations and deferred frees. */
CUresult vmem_alloc_locked(int ordinal, uint64_t size, CUdeviceptr *out)
{
    return valloc_locked(ordinal, size, out);
}

void vmem_free_locked(vmem_buf_t *a)
{
    free_locked(a);
}

/* ---- queries ------------------------------------------------------------------------
 * The allocation holding p: a big one by a search of their bases, a small one by
 * its base, else by a walk over the live allocations (an interior pointer
 * of a small allocation: rare, and linear in the live allocations). */

vmem_buf_t *vmem_find_locked(uint64_t p)
{
    vmem_buf_t *a = vmem_map_get(&vmem_p.allocs, p);
    if (a)
        return a;
    for (int i = 0; i < VMEM_MAX_DEVICES; i++) {
        vmem_dev_t *v = &vmem_p.dev[i];
        if (v->ready && v->size && p >= v->base && p - v->base < v->size)
            goto small;
    }
    a = vmem_spans_find(&vmem_p.bigs, p);
    return a && p - a->base < a->size ? a : NULL;
small:
    for (size_t i = 0; vmem_p.allocs.key && i <= vmem_p.allocs.mask; i++) {
        a = vmem_p.allocs.val[i];
        if (a && !a->big && p >= a->base && p - a->base < a->size)
            return a;
    }
    return NULL;
}

int vmem_range(CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
    if (!vmem_on())
        return -1;
    pthread_mutex_lock(&vmem_p.lock);
    vmem_buf_t *a = vmem_find_locked(p);
    if (a) {
        if (base)
            *base = a->base;
        if (size)
            *size = a->size;
    }
    pthread_mutex_unlock(&vmem_p.lock);
    return a ? 0 : -1;
}

int vmem_attr(void *data, CUpointer_attribute attr, CUdeviceptr p)
{
    if (!vmem_on() || !data)
        return 0;
    if (attr != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && attr != CU_POINTER_ATTRIBUTE_RANGE_SIZE &&
        attr != CU_POINTER_ATTRIBUTE_CONTEXT && attr != CU_POINTER_ATTRIBUTE_BUFFER_ID &&
        attr != CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE &&
        attr != CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES)
        return 0;                     /* the driver answers the mapping as well */
    pthread_mutex_lock(&vmem_p.lock);
    vmem_buf_t *a = vmem_find_locked(p);
    if (a) {
        switch ((int)attr) {
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a->base; break;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a->size; break;
        case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = a->ctx; break;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = a->id; break;
        /* none, as for cuMemAlloc's memory: a shareable handle of one of
         * its chunks would outlive the chunk's next page-out, the peer
         * that mapped it writing the old chunk while this process writes
         * the new one (NCCL checks this before it registers a buffer) */
        case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES: *(unsigned long long *)data = 0; break;
        default: *(int *)data = vmem_ipc_able(); break;   /* ipc.c's handles */
        }
    }
    pthread_mutex_unlock(&vmem_p.lock);
    return a != NULL;
}

/* ---- figures ------------------------------------------------------------------------- */

int vmem_report_fields(char *buf, size_t cap)
{
    if (!vmem_on())
        return 0;
    return snprintf(buf, cap, "\"paged_allocs\":%llu",
                    (unsigned long long)__atomic_load_n(&vmem_p.next_id, __ATOMIC_RELAXED));
}

uint64_t vmem_paged_out_bytes(int ordinal)
{
    if (ordinal < 0 || ordinal >= VMEM_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&vmem_p.lock);
    uint64_t n = vmem_p.dev[ordinal].ready ? vmem_need_in(&vmem_p.dev[ordinal]) : 0;
    pthread_mutex_unlock(&vmem_p.lock);
    return n;
}

uint64_t vmem_resident_bytes(int ordinal)
{
    if (ordinal < 0 || ordinal >= VMEM_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&vmem_p.lock);
    uint64_t n = vmem_p.dev[ordinal].resident;
    pthread_mutex_unlock(&vmem_p.lock);
    return n;
}

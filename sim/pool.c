/*
 * pool.c - stream-ordered allocation: memory pools (default, current and
 * created ones), cuMemAllocAsync / cuMemAllocFromPoolAsync / cuMemFreeAsync,
 * pool attributes and cuMemPoolTrimTo.
 *
 * Divided into: pools; blocks; the release threshold; entry points.
 *
 * Semantics, simple but honest.  A pool hands out blocks, each a range of
 * its own charged to the device like any allocation.  A freed block stays
 * in the pool (still charged, still reserved) for reuse by a later
 * allocation of the same granule-rounded size or up to twice smaller; the
 * pool gives cached blocks back to the device down to its release threshold
 * (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, default 0) at the next stream, event
 * or context synchronize, down to N bytes on cuMemPoolTrimTo(N), and
 * entirely when an allocation from it would not fit otherwise.  Allocation
 * and free take effect at call time (the time model has nothing to order).
 *
 * Invariants of a pool p (under sim_p.lock):
 *   p->reserved == p->used + sum of charged over p->cache
 *   p->used     == sum of charged over p's blocks handed out
 *   reserved_high >= reserved, used_high >= used.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

struct sim_pool {
    uint64_t handle;
    int device;
    int is_default;
    int destroyed;                      /* freed when its last block comes back */
    uint64_t threshold;
    uint64_t reserved, used, reserved_high, used_high;
    sim_range_t *cache;
    int reuse[3];                       /* the three REUSE_* flags, stored */
    CUmemPoolProps props;
};

/* ---- pools ------------------------------------------------------------------------ */

static sim_pool_t *pool_new(int dev, int is_default)
{
    sim_pool_t *p = calloc(1, sizeof *p);
    if (!p || !(p->handle = sim_obj_new(SIM_K_POOL, p))) {
        free(p);
        return NULL;
    }
    p->device = dev;
    p->is_default = is_default;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->props.location.id = dev;
    return p;
}

static sim_pool_t *default_pool(int dev)
{
    if (!sim_p.default_pool[dev])
        sim_p.default_pool[dev] = pool_new(dev, 1);
    return sim_p.default_pool[dev];
}

static sim_pool_t *current_pool(int dev)
{
    return sim_p.current_pool[dev] ? sim_p.current_pool[dev] : default_pool(dev);
}

static sim_pool_t *pool_get(CUmemoryPool h)
{
    sim_pool_t *p = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_POOL);
    return p && !p->destroyed ? p : NULL;
}

/* Give cached blocks back to the device until reserved <= keep. */
static void trim_to(sim_pool_t *p, uint64_t keep)
{
    while (p->reserved > keep && p->cache) {
        sim_range_t *r = p->cache;
        p->cache = r->free_next;
        p->reserved -= r->charged;
        sim_mem_release(r);
    }
}

static void pool_free_if_done(sim_pool_t *p)
{
    if (p->destroyed && p->used == 0) {
        sim_obj_free(p->handle);
        free(p);
    }
}

/* ---- blocks ------------------------------------------------------------------------ */

static CUresult block_alloc(sim_pool_t *p, size_t size, CUdeviceptr *out)
{
    uint64_t g = sim_round_up(size, SIM_GRANULE);
    sim_range_t **best = NULL;
    for (sim_range_t **r = &p->cache; *r; r = &(*r)->free_next)
        if ((*r)->charged >= g && (*r)->charged <= 2 * g &&
            (!best || (*r)->charged < (*best)->charged))
            best = r;
    sim_range_t *b;
    if (best) {
        /* A cached block of the same charge or up to twice it: its backing
         * holds the charge, and the block is now the size asked (a block
         * freed at 640 bytes and reused for 864, both 1024 charged, must
         * take 864: cuMemsetD8Async over it failed, PyTorch's
         * backend:cudaMallocAsync saw invalid argument). */
        b = *best;
        *best = b->free_next;
        b->free_next = NULL;
        b->size = size;
    } else {
        CUresult rc = sim_mem_alloc(NULL, p->device, size, SIM_R_POOL, &b);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY && p->cache) {
            trim_to(p, p->used);        /* what the pool caches, before failing */
            rc = sim_mem_alloc(NULL, p->device, size, SIM_R_POOL, &b);
        }
        if (rc != CUDA_SUCCESS)
            return rc;
        b->pool = p;
        p->reserved += b->charged;
    }
    p->used += b->charged;
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    *out = (CUdeviceptr)b->base;
    return CUDA_SUCCESS;
}

uint64_t sim_pool_handle(const sim_pool_t *p)
{
    return p->handle;
}

void sim_pool_release_block(sim_range_t *r)
{
    sim_pool_t *p = r->pool;
    p->used -= r->charged;
    if (p->destroyed) {
        p->reserved -= r->charged;
        sim_mem_release(r);
        pool_free_if_done(p);
        return;
    }
    r->free_next = p->cache;
    p->cache = r;
}

/* ---- the release threshold ------------------------------------------------------------ */

static void trim_threshold(void *obj, void *arg)
{
    (void)arg;
    sim_pool_t *p = obj;
    trim_to(p, p->threshold);
}

void sim_pools_trim_sync(void)
{
    sim_obj_foreach(SIM_K_POOL, trim_threshold, NULL);
}

/* ---- entry points ----------------------------------------------------------------------- */

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool hp, CUstream hs,
                            int ptsz, int from_pool)
{
    SIM_CHECK_INIT();
    if (!dptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_stream_t *s;
    sim_pool_t *p = NULL;
    CUresult rc = sim_stream_resolve(hs, ptsz, &s);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    if (s->capture && s->capture_invalid) {
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        goto out_unlock;
    }
    p = from_pool ? pool_get(hp) : current_pool(s->ctx->device);
    if (!p)
        rc = from_pool ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    else
        rc = block_alloc(p, size, dptr);
    if (rc == CUDA_SUCCESS && s->capture &&          /* a memory node (graph.c) */
        (rc = sim_capture_alloc(s, *dptr)) != CUDA_SUCCESS)
        sim_pool_release_block(sim_range_find((uintptr_t)*dptr));
out_unlock:
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *d, size_t size, CUstream s)
{
    return alloc_async(d, size, NULL, s, 0, 0);
}
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t size, CUstream s)
{
    return alloc_async(d, size, NULL, s, 1, 0);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t size, CUmemoryPool p, CUstream s)
{
    return alloc_async(d, size, p, s, 0, 1);
}
CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *d, size_t size, CUmemoryPool p,
                                              CUstream s)
{
    return alloc_async(d, size, p, s, 1, 1);
}

static CUresult free_async(CUdeviceptr d, CUstream hs, int ptsz)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(hs, ptsz, &s);
    sim_range_t *r = rc == CUDA_SUCCESS ? sim_range_find((uintptr_t)d) : NULL;
    if (rc == CUDA_SUCCESS && (!r || r->base != (uintptr_t)d || r->kind != SIM_R_POOL))
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && s->capture)
        rc = sim_capture_free(s, d);    /* freed when the graph runs (graph.c) */
    else if (rc == CUDA_SUCCESS)
        sim_pool_release_block(r);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr d, CUstream s) { return free_async(d, s, 0); }
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) { return free_async(d, s, 1); }

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *out, const CUmemPoolProps *props)
{
    SIM_CHECK_INIT();
    if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(props->location.id))
        return CUDA_ERROR_INVALID_DEVICE;
    SIM_LOCK();
    sim_pool_t *p = pool_new(props->location.id, 0);
    if (p) {
        p->props = *props;
        *out = (CUmemoryPool)(uintptr_t)p->handle;
    }
    SIM_UNLOCK();
    return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool hp)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_pool_t *p = pool_get(hp);
    CUresult rc = !p || p->is_default ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS) {
        trim_to(p, 0);
        if (sim_p.current_pool[p->device] == p)
            sim_p.current_pool[p->device] = NULL;
        p->destroyed = 1;
        pool_free_if_done(p);
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool hp, size_t keep)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_pool_t *p = pool_get(hp);
    if (p)
        trim_to(p, keep);
    SIM_UNLOCK();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult pool_attr(sim_pool_t *p, CUmemPool_attribute a, void *v, int set)
{
    switch ((int)a) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
        int *flag = &p->reuse[(int)a - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        if (set)
            *flag = *(int *)v != 0;
        else
            *(int *)v = *flag;
        return CUDA_SUCCESS;
    }
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            p->threshold = *(cuuint64_t *)v;
        else
            *(cuuint64_t *)v = p->threshold;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        if (set)
            return CUDA_ERROR_INVALID_VALUE;
        *(cuuint64_t *)v = (int)a == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? p->used : p->reserved;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
        int used = (int)a == CU_MEMPOOL_ATTR_USED_MEM_HIGH;
        uint64_t *high = used ? &p->used_high : &p->reserved_high;
        if (!set)
            *(cuuint64_t *)v = *high;
        else if (*(cuuint64_t *)v != 0)    /* only a reset to the current value */
            return CUDA_ERROR_INVALID_VALUE;
        else
            *high = used ? p->used : p->reserved;
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult pool_attribute(CUmemoryPool hp, CUmemPool_attribute a, void *v, int set)
{
    SIM_CHECK_INIT();
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_pool_t *p = pool_get(hp);
    CUresult rc = p ? pool_attr(p, a, v, set) : CUDA_ERROR_INVALID_VALUE;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute a, void *v)
{
    return pool_attribute(p, a, v, 1);
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool p, CUmemPool_attribute a, void *v)
{
    return pool_attribute(p, a, v, 0);
}

CUresult CUDAAPI cuMemPoolSetAccess(CUmemoryPool hp, const CUmemAccessDesc *desc, size_t n)
{
    SIM_CHECK_INIT();
    if (n && !desc)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_pool_t *p = pool_get(hp);
    SIM_UNLOCK();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool hp, CUmemLocation *loc)
{
    SIM_CHECK_INIT();
    if (!flags || !loc)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_pool_t *p = pool_get(hp);
    if (p)
        *flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    SIM_UNLOCK();
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult device_pool(CUmemoryPool *out, CUdevice dev, int current)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    SIM_LOCK();
    sim_pool_t *p = current ? current_pool(dev) : default_pool(dev);
    if (p)
        *out = (CUmemoryPool)(uintptr_t)p->handle;
    SIM_UNLOCK();
    return p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice dev)
{
    return device_pool(p, dev, 0);
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *p, CUdevice dev)
{
    return device_pool(p, dev, 1);
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool hp)
{
    SIM_CHECK_INIT();
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    SIM_LOCK();
    sim_pool_t *p = pool_get(hp);
    CUresult rc = p && p->device == dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        sim_p.current_pool[dev] = p;
    SIM_UNLOCK();
    return rc;
}

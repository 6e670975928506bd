/*
 * alloc_nulldrv.c - the answers the allocation benchmark needs from the
 * null driver (bench/nulldrv/nulldrv_all.c: every export, weak, returning at
 * once): one device of 80 GiB, current, a context, and cuMemAlloc_v2 handing
 * out a new address each time (as a driver does; a free returns at once).
 * Strong definitions, linked over the weak ones; enough on their own for
 * the benchmark where nulldrv_all.c is absent.  Single-threaded use.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <string.h>

#define NULL_EXPORT __attribute__((visibility("default")))
#define CAPACITY (80ull << 30)

static struct { int dummy; } the_ctx;
static CUdeviceptr next_ptr = 0x100000000ull;

NULL_EXPORT CUresult CUDAAPI cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
NULL_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) { (void)ctx; return CUDA_SUCCESS; }
NULL_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) { (void)p; return CUDA_SUCCESS; }
NULL_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice d) { (void)d; return CUDA_SUCCESS; }

NULL_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *v) { *v = 13000; return CUDA_SUCCESS; }
NULL_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *n) { *n = 1; return CUDA_SUCCESS; }

NULL_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ordinal)
{
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *pctx = (CUcontext)&the_ctx;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    *pctx = (CUcontext)&the_ctx;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }

NULL_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    (void)dev;
    *bytes = CAPACITY;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    memset(uuid, 0, sizeof *uuid);
    memcpy(uuid->bytes, "nulldrv", 7);
    uuid->bytes[8] = (char)dev;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    *free_bytes = CAPACITY;
    *total = CAPACITY;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *p, size_t bytes)
{
    (void)bytes;
    *p = next_ptr;
    next_ptr += 0x200000;          /* 2 MiB apart, as the driver places them */
    return CUDA_SUCCESS;
}

/* Stream-ordered allocations from the device's one pool, which reserves
 * what its largest allocation needed (the benchmark's pairs reuse it). */
static struct { int dummy; } the_pool;
static size_t pool_reserved;

NULL_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *p, size_t bytes, CUstream s)
{
    (void)s;
    pool_reserved = bytes > pool_reserved ? bytes : pool_reserved;
    *p = next_ptr;                 /* not through cuMemAlloc_v2: libsalus's, preloaded */
    next_ptr += 0x200000;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    (void)p;
    (void)s;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool = (CUmemoryPool)&the_pool;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                                   void *value)
{
    if (pool != (CUmemoryPool)&the_pool || attr != CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
        return CUDA_ERROR_INVALID_VALUE;
    *(cuuint64_t *)value = pool_reserved;
    return CUDA_SUCCESS;
}

/* Paging's VMM calls (SALUS_SWAP=on): a 2 MiB granularity, reservations
 * handed out from their own addresses, handles that are counters, a stream;
 * mapping, access and the rest return at once (nulldrv_all.c). */
static CUdeviceptr next_va = 0x10000000000ull;
static CUmemGenericAllocationHandle next_handle = 1;

NULL_EXPORT CUresult CUDAAPI cuMemGetAllocationGranularity(size_t *g,
                                                           const CUmemAllocationProp *prop,
                                                           CUmemAllocationGranularity_flags o)
{
    (void)prop, (void)o;
    *g = 2ull << 20;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align,
                                                 CUdeviceptr addr, unsigned long long flags)
{
    (void)align, (void)addr, (void)flags;
    *p = next_va;
    next_va += (size + (2ull << 20) - 1) & ~((2ull << 20) - 1);
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                         const CUmemAllocationProp *prop,
                                         unsigned long long flags)
{
    (void)size, (void)prop, (void)flags;
    *h = next_handle++;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *s, unsigned int flags)
{
    (void)flags;
    *s = (CUstream)&the_ctx;
    return CUDA_SUCCESS;
}

/* Paging's stream-ordered frees: an event of libsalus's own per free,
 * recorded on the stream and queried (complete at once: nulldrv_all.c). */
static struct { int dummy; } the_event;

NULL_EXPORT CUresult CUDAAPI cuEventCreate(CUevent *e, unsigned int flags)
{
    (void)flags;
    *e = (CUevent)&the_event;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    return cuDeviceGetMemPool(pool, dev);
}

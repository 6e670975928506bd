/*
 * mem.c - device and host memory: cuMemAlloc*, cuMemFree, pinned and
 * registered host memory, cuMemGetInfo, address ranges and pointer
 * attributes.
 *
 * Divided into: backing and accounting (shared with pools); device memory;
 * host memory; queries; managed memory hints.
 *
 * Device memory is host memory: small allocations come from malloc (aligned
 * to 512 bytes inside a slightly larger block), large ones (>= 1 MiB) from
 * an mmap of their own that is touched only when used (moved into a shared
 * memfd at the same address when first exported by legacy IPC, ipc.c, whose
 * share unback releases).  Each allocation is
 * charged round_up(size, SIM_GRANULE = 512) bytes to its device in the
 * shared state (state.c) before it exists, and given back when freed; pinned
 * and registered host memory is not charged to a device (it is counted as
 * pinned, against SIMGPU_PIN_LIMIT: host memory below), nor are modules'
 * variables (the driver counts those as the context's own overhead).  Every allocation is a range of
 * the registry (object.c), so copies and kernels check device pointers.
 *
 * Lock: sim_p.lock guards the ranges; charging takes the state's lock under
 * it.  The alloc/free pair makes no syscall for small sizes.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MMAP_MIN (1u << 20)

/* ---- backing and accounting -------------------------------------------------
 * Freed small allocations keep their backing in a cache by size class (the
 * number of granules), ready for the next allocation of that class: the
 * alloc/free pair then costs no malloc.  Invariant: a cached range is in no
 * tree or list, owns backing of at least class x SIM_GRANULE bytes, and is
 * charged nothing. */
#define CACHE_CLASSES 32                /* up to 16 KiB */
#define CACHE_DEPTH   32

static sim_range_t *cache[CACHE_CLASSES + 1];
static int cache_n[CACHE_CLASSES + 1];

static unsigned size_class(size_t size)
{
    return (unsigned)((size + SIM_GRANULE - 1) / SIM_GRANULE);
}

static sim_range_t *cache_pop(size_t size)
{
    unsigned c = size_class(size);
    sim_range_t *r = c <= CACHE_CLASSES ? cache[c] : NULL;
    if (r) {
        cache[c] = r->free_next;
        cache_n[c]--;
    }
    return r;
}

static int cache_push(sim_range_t *r)
{
    unsigned c = size_class(r->size);
    if (r->mmapped || c > CACHE_CLASSES || cache_n[c] == CACHE_DEPTH)
        return -1;
    r->free_next = cache[c];
    cache[c] = r;
    cache_n[c]++;
    return 0;
}

static int back(sim_range_t *r, size_t size)
{
    if (size >= MMAP_MIN) {
        size_t len = sim_round_up(size, 4096);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        r->raw = p;
        r->raw_size = len;
        r->mmapped = 1;
        r->base = (uintptr_t)p;
    } else {
        void *p = malloc(sim_round_up(size, SIM_GRANULE) + SIM_GRANULE - 1);
        if (!p)
            return -1;
        r->raw = p;
        r->base = sim_round_up((uintptr_t)p, SIM_GRANULE);
    }
    return 0;
}

static void unback(sim_range_t *r)
{
    if (r->mmapped) {
        munmap(r->raw, r->raw_size);
        sim_ipc_release(r);
    } else
        free(r->raw);
}

CUresult sim_mem_alloc(sim_ctx_t *ctx, int dev, size_t size, int kind, sim_range_t **out)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > (1ull << 46))
        return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t charged = kind == SIM_R_HOST || kind == SIM_R_GLOBAL
                           ? 0 : sim_round_up(size, SIM_GRANULE);
    CUresult rc = charged ? sim_charge(dev, charged) : CUDA_SUCCESS;
    if (rc != CUDA_SUCCESS)
        return rc;
    sim_range_t *r = size < MMAP_MIN ? cache_pop(size) : NULL;
    if (r) {
        void *raw = r->raw;             /* keep the backing, nothing else */
        uintptr_t base = r->base;
        memset(r, 0, sizeof *r);
        r->raw = raw;
        r->base = base;
    } else if (!(r = calloc(1, sizeof *r))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_uncharge;
    } else if (back(r, size)) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_free;
    }
    r->charged = charged;
    r->size = size;
    r->kind = kind;
    r->device = dev;
    r->ctx = ctx;
    if (sim_range_add(r)) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unback;
    }
    *out = r;
    return CUDA_SUCCESS;
out_unback:
    unback(r);
out_free:
    free(r);
out_uncharge:
    if (charged)
        sim_uncharge(dev, charged);
    return rc;
}

void sim_mem_release(sim_range_t *r)
{
    sim_range_remove(r);
    if (r->charged)
        sim_uncharge(r->device, r->charged);
    if (r->pinned)
        sim_unpin(r->pinned);
    if (cache_push(r) == 0)
        return;
    unback(r);
    free(r);
}

static void drop_registered(sim_range_t *r);

void sim_mem_release_ctx(sim_ctx_t *ctx)
{
    sim_range_t *next;
    for (sim_range_t *r = sim_p.ranges; r; r = next) {
        next = r->next;
        if (r->ctx != ctx)
            continue;
        if (r->kind == SIM_R_DEVICE || r->kind == SIM_R_MANAGED || r->kind == SIM_R_HOST) {
            sim_mem_release(r);
        } else if (r->kind == SIM_R_REGISTERED) {
            drop_registered(r);
        }
    }
}

/* ---- device memory ---------------------------------------------------------------- */

static CUresult alloc_device(CUdeviceptr *dptr, size_t size, int kind)
{
    SIM_CHECK_INIT();
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_ctx_t *ctx;
    sim_range_t *r;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_unsafe();      /* not stream-ordered: unsafe in a capture */
    if (rc == CUDA_SUCCESS && (rc = sim_mem_alloc(ctx, ctx->device, size, kind, &r)) == 0)
        *dptr = (CUdeviceptr)r->base;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    return alloc_device(dptr, size, SIM_R_DEVICE);
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t size, unsigned int flags)
{
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_device(dptr, size, SIM_R_MANAGED);
}

/* Rows padded to 512 bytes, as the driver's pitch alignment on this GPU. */
CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                    size_t height, unsigned int elem)
{
    SIM_CHECK_INIT();
    if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = sim_round_up(width, 512);
    if (p < width || height > ((size_t)1 << 46) / p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr d;
    CUresult rc = alloc_device(&d, p * height, SIM_R_DEVICE);
    if (rc == CUDA_SUCCESS) {
        *dptr = d;
        *pitch = p;
    }
    return rc;
}

/* cuMemFree synchronizes with the context's work, as the driver does.  A
 * free of 0 does nothing and succeeds: cudaFree(0), which programs call to
 * make the runtime start, frees 0 through here (the driver's header does
 * not say; cudaFree's documentation does, and the runtime fails without). */
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_CHECK_INIT();
    if (!dptr)
        return CUDA_SUCCESS;
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)dptr);
    CUresult rc = sim_capture_unsafe();
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    if (!r || r->base != (uintptr_t)dptr ||
        (r->kind != SIM_R_DEVICE && r->kind != SIM_R_MANAGED && r->kind != SIM_R_POOL) ||
        sim_ipc_imported(r)) {          /* cuIpcCloseMemHandle's to give back */
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out_unlock;
    }
    if (r->ctx && r->ctx->tail > sim_now()) {
        sim_ctx_wait(r->ctx);
        r = sim_range_find((uintptr_t)dptr);    /* freed meanwhile by another thread? */
        if (!r || r->base != (uintptr_t)dptr) {
            rc = CUDA_ERROR_INVALID_VALUE;
            goto out_unlock;
        }
    }
    if (r->kind == SIM_R_POOL)
        sim_pool_release_block(r);
    else
        sim_mem_release(r);
out_unlock:
    SIM_UNLOCK();
    return rc;
}

/* ---- host memory ----------------------------------------------------------------
 * Pinning costs what it costs on a real host, where it is one of the
 * slowest calls a program makes (a few GB/s: the driver makes every page
 * present and locks it before it returns): cuMemHostAlloc and
 * cuMemHostRegister make the pages present (the first copy into them
 * faults nothing, as into pinned memory) and take at least bytes /
 * SIMGPU_PIN_GBPS (default SIM_BW_PIN) of the caller's time, outside the
 * lock.  What is pinned counts against SIMGPU_PIN_LIMIT, for all processes
 * of the state together (the host's memory; 0 or unset: unbounded): past
 * it the call answers CUDA_ERROR_OUT_OF_MEMORY, as the driver does when the
 * host has no more to lock.  cuMemFreeHost and cuMemHostUnregister first
 * wait for the context's work, as the driver's do (cudaFreeHost
 * synchronizes). */

static void pin_cost(uintptr_t p, size_t size, int writable, uint64_t start)
{
#if defined(MADV_POPULATE_WRITE) && defined(MADV_POPULATE_READ)
    uintptr_t lo = p & ~(uintptr_t)4095, hi = (p + size + 4095) & ~(uintptr_t)4095;
    madvise((void *)lo, hi - lo, writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ);
#else
    (void)p;
    (void)writable;
#endif
    if (sim_p.pin_bw)
        sim_sleep_until(start + size / sim_p.pin_bw);
}

static void drop_registered(sim_range_t *r)
{
    sim_range_remove(r);
    if (r->pinned)
        sim_unpin(r->pinned);
    free(r);
}

static CUresult alloc_host(void **pp, size_t size, unsigned flags)
{
    SIM_CHECK_INIT();
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t start = sim_now();
    SIM_LOCK();
    sim_ctx_t *ctx;
    sim_range_t *r;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc == CUDA_SUCCESS && (rc = sim_mem_alloc(ctx, ctx->device, size, SIM_R_HOST, &r)) == 0) {
        if ((rc = sim_pin(size)) != CUDA_SUCCESS) {
            sim_mem_release(r);
        } else {
            r->pinned = size;
            r->flags = flags;
            *pp = (void *)r->base;
        }
    }
    SIM_UNLOCK();
    if (rc == CUDA_SUCCESS)
        pin_cost((uintptr_t)*pp, size, 1, start);
    return rc;
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t size)
{
    return alloc_host(pp, size, 0);
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t size, unsigned int flags)
{
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                            CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_host(pp, size, flags);
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_range_t *r = p ? sim_range_find((uintptr_t)p) : NULL;
    int ok = r && r->base == (uintptr_t)p && r->kind == SIM_R_HOST;
    if (ok) {
        sim_ctx_wait(r->ctx);
        sim_mem_release(r);
    }
    SIM_UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Registering pins the range (its cost and its count, above), makes it
 * known to copies and kernels, and refuses overlaps as the driver does. */
static CUresult host_register(void *p, size_t size, unsigned flags)
{
    SIM_CHECK_INIT();
    if (!p || !size || (flags & ~0x0fu))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t start = sim_now();
    SIM_LOCK();
    sim_ctx_t *ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    sim_range_t *r = calloc(1, sizeof *r);
    if (!r) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    *r = (sim_range_t){ .base = (uintptr_t)p, .size = size, .kind = SIM_R_REGISTERED,
                        .device = ctx->device, .ctx = ctx, .flags = flags };
    if (sim_range_add(r)) {
        free(r);
        rc = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    } else if ((rc = sim_pin(size)) != CUDA_SUCCESS) {
        drop_registered(r);
    } else {
        r->pinned = size;
    }
out_unlock:
    SIM_UNLOCK();
    if (rc == CUDA_SUCCESS)
        pin_cost((uintptr_t)p, size, !(flags & CU_MEMHOSTREGISTER_READ_ONLY), start);
    return rc;
}

CUresult CUDAAPI cuMemHostRegister(void *p, size_t size, unsigned int flags)
{
    return host_register(p, size, flags);
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t size, unsigned int flags)
{
    return host_register(p, size, flags);
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_range_t *r = p ? sim_range_find((uintptr_t)p) : NULL;
    int ok = r && r->base == (uintptr_t)p && r->kind == SIM_R_REGISTERED;
    if (ok) {
        sim_ctx_wait(r->ctx);
        drop_registered(r);
    }
    SIM_UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags)
{
    SIM_CHECK_INIT();
    if (!d || !p || flags)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)p);
    int ok = r && (r->kind == SIM_R_HOST || r->kind == SIM_R_REGISTERED);
    if (ok)
        *d = (CUdeviceptr)(uintptr_t)p;  /* unified addressing: the same address */
    SIM_UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *flags, void *p)
{
    SIM_CHECK_INIT();
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_range_t *r = p ? sim_range_find((uintptr_t)p) : NULL;
    int ok = r && r->kind == SIM_R_HOST;
    if (ok)
        *flags = r->flags;
    SIM_UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- queries ----------------------------------------------------------------- */

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    SIM_CHECK_INIT();
    if (!free || !total)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_ctx_t *ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc == CUDA_SUCCESS) {
        *free = sim_free_bytes(ctx->device);
        *total = sim_p.capacity;
    }
    SIM_UNLOCK();
    return rc;
}

static int device_kind(const sim_range_t *r)
{
    return r->kind == SIM_R_DEVICE || r->kind == SIM_R_MANAGED || r->kind == SIM_R_POOL ||
           r->kind == SIM_R_MAPPED || r->kind == SIM_R_GLOBAL || r->kind == SIM_R_GRAPH;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)dptr);
    int ok = r && device_kind(r);
    if (ok) {
        if (base)
            *base = (CUdeviceptr)r->base;
        if (size)
            *size = r->size;
    }
    SIM_UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

/* One attribute of the range r holding ptr (r NULL: memory simgpu doesn't
 * know, which the driver reports as unregistered host memory). */
static CUresult pointer_attr(void *data, CUpointer_attribute a, CUdeviceptr ptr,
                             const sim_range_t *r, int lenient)
{
    if (!r && !lenient)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = r && device_kind(r);
    switch ((int)a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = r && r->ctx ? (CUcontext)(uintptr_t)r->ctx->handle : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = !r ? 0 : dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = r ? ptr : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (r && dev && r->kind != SIM_R_MANAGED && !lenient)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = r && (!dev || r->kind == SIM_R_MANAGED) ? (void *)(uintptr_t)ptr : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = r != NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = r ? (unsigned long long)r->base : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = r && r->kind == SIM_R_MANAGED;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = r ? r->device : -2;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = r ? (CUdeviceptr)r->base : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = r ? r->size : 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:   /* the pool of a stream-ordered allocation */
        *(void **)data = r && r->kind == SIM_R_POOL && r->pool
                         ? (void *)(uintptr_t)sim_pool_handle(r->pool) : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned *)data = r ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE : 0;
        return CUDA_SUCCESS;
    /* cuMemAlloc's memory can be exported with cuIpcGetMemHandle (ipc.c);
     * a VMM mapping or a pool's allocation cannot (the driver: only memory
     * from cuMemAlloc is legacy-IPC capable).  NCCL asks this of every
     * buffer it registers before it looks at the VMM handle behind it. */
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = r && r->kind == SIM_R_DEVICE;
        return CUDA_SUCCESS;
    /* The handle types a VMM mapping's allocation was made with; none for
     * memory the driver allocated itself (cuMemAlloc, pools). */
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data =
            r && r->kind == SIM_R_MAPPED && r->mh ? sim_memhandle_types(r->mh) : 0;
        return CUDA_SUCCESS;
    /* No GPUDirect RDMA: simgpu has no NIC to read its memory. */
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute a, CUdeviceptr ptr)
{
    SIM_CHECK_INIT();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    CUresult rc = pointer_attr(data, a, ptr, sim_range_find((uintptr_t)ptr), 0);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
                                        CUdeviceptr ptr)
{
    SIM_CHECK_INIT();
    if (!n || !attrs || !data)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    const sim_range_t *r = sim_range_find((uintptr_t)ptr);
    CUresult rc = CUDA_SUCCESS;
    for (unsigned i = 0; i < n && rc == CUDA_SUCCESS; i++)
        if (data[i])
            rc = pointer_attr(data[i], attrs[i], ptr, r, 1);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuPointerSetAttribute(const void *value, CUpointer_attribute a, CUdeviceptr ptr)
{
    SIM_CHECK_INIT();
    if (!value || a != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    int ok = sim_range_find((uintptr_t)ptr) != NULL;
    SIM_UNLOCK();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- managed memory hints -----------------------------------------------------
 * Advice is checked and otherwise ignored (all memory is equally close
 * here); a prefetch is a transfer of the range at host bandwidth on its
 * stream, as a migration would be. */

static CUresult managed_range(CUdeviceptr p, size_t n)
{
    sim_range_t *r = sim_range_find((uintptr_t)p);
    if (!r || r->kind != SIM_R_MANAGED || !n || n > r->base + r->size - (uintptr_t)p)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult advise(CUdeviceptr p, size_t n, CUmem_advise a)
{
    SIM_CHECK_INIT();
    if ((int)a < CU_MEM_ADVISE_SET_READ_MOSTLY || (int)a > CU_MEM_ADVISE_UNSET_ACCESSED_BY)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    CUresult rc = managed_range(p, n);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise a, CUdevice dev)
{
    if (dev != CU_DEVICE_CPU && !sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    return advise(p, n, a);
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUstream hs, int ptsz)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = managed_range(p, n);
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(hs, ptsz, &s);
    if (rc == CUDA_SUCCESS)
        sim_stream_transfer(s, sim_transfer_ns(n, sim_p.pcie_bw), SIM_W_COPY, "prefetch");
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice dev, CUstream s)
{
    if (dev != CU_DEVICE_CPU && !sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    return prefetch(p, n, s, 0);
}

CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice dev, CUstream s)
{
    if (dev != CU_DEVICE_CPU && !sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    return prefetch(p, n, s, 1);
}

#ifdef CU_PARAMS_cuMemAdvise_v2
static int location_valid(CUmemLocation loc)
{
    return loc.type == CU_MEM_LOCATION_TYPE_HOST ||
           (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && sim_device_valid(loc.id));
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise a, CUmemLocation loc)
{
    if (!location_valid(loc))
        return CUDA_ERROR_INVALID_VALUE;
    return advise(p, n, a);
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc,
                                       unsigned int flags, CUstream s)
{
    if (!location_valid(loc) || flags)
        return CUDA_ERROR_INVALID_VALUE;
    return prefetch(p, n, s, 0);
}

CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation loc,
                                            unsigned int flags, CUstream s)
{
    if (!location_valid(loc) || flags)
        return CUDA_ERROR_INVALID_VALUE;
    return prefetch(p, n, s, 1);
}
#endif

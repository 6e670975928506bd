/*
 * memops.c - the wrappers of hooks.list's MEMOP rows: calls that change how
 * long device memory stays held after the call that allocated it.  A pool
 * keeps what is freed into it (stream-ordered allocations, the pools'
 * calls), and a device its graphs' allocations (graph memory); a VMM handle
 * lives until it is released and its last mapping is gone (cuMemMap,
 * cuMemUnmap, cuMemMapArrayAsync); a virtualized allocation exported
 * over CUDA IPC stays resident, and an imported one mapped, until the
 * handle is done with (cuIpcGetMemHandle, cuIpcOpenMemHandle,
 * cuIpcCloseMemHandle: memory's vmm_ipc.c); and paged memory makes no
 * shareable handle (cuMemRetainAllocationHandle,
 * cuMemGetHandleForAddressRange, cuMulticastBindAddr).
 *
 * Divided into: pools; graph memory; mappings; IPC handles; shareable
 * handles; the wrappers, expanded from the list.
 *
 * Each row's wrapper counts the call and hands its arguments to
 * hook_memop_<export>, written here by hand, which calls the driver and
 * then tells memory what changed.  Nothing is read through an argument
 * before the driver has accepted it (a call it refused changes nothing),
 * but what an admission needs first (an allocation's size, device, pool,
 * each pointer checked), and memory ignores every call while it is not
 * accounting.  No lock here.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

/* ---- pools ---------------------------------------------------------------- */

/* After the driver answered a stream-ordered allocation: memory accounts it
 * (or gives its charge back), and the report counts it. */
static CUresult hook_pool_allocated(mem_op_t *op, CUresult rc, CUdeviceptr *dptr, size_t bytes)
{
    rc = mem_pool_alloc_end(op, rc, rc == CUDA_SUCCESS && dptr ? (uint64_t)*dptr : 0);
    if (rc == CUDA_SUCCESS) {
        hook_block_t *b = hook_block();
        hook_add(&b->c.allocs, 1);
        hook_add(&b->c.bytes_allocated, bytes);
    }
    return rc;
}

/* With paging on, memory serves an allocation from the device's default
 * pool itself (virtualized, memory.h's rule), unless a stream capture is
 * in progress: a captured allocation is a graph's, the driver's.  1 and
 * *rc the answer, or 0: the driver's pool. */
static int hook_pool_valloc(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, int dev,
                            CUresult *rc)
{
    if (__builtin_expect(!vmem_on(), 1) || sched_captures() != 0)
        return 0;
    CUresult r = page_valloc_async(dptr, bytes, pool, dev);
    if (r == CUDA_ERROR_NOT_SUPPORTED)
        return 0;
    if (r == CUDA_SUCCESS) {
        hook_block_t *b = hook_block();
        hook_add(&b->c.allocs, 1);
        hook_add(&b->c.bytes_allocated, bytes);
    }
    *rc = r;
    return 1;
}

/* The allocation's device is its stream's (the pool's, when one is named). */
#define HOOK_POOL_ALLOC(export, kind, pool, stream, ...)                        \
    do {                                                                        \
        mem_op_t op;                                                            \
        int dev_ = mem_stream_device(stream);                                   \
        CUresult rc;                                                            \
        if (hook_pool_valloc(dptr, bytes, pool, dev_, &rc))                     \
            return rc;                                                          \
        rc = mem_pool_alloc_begin(kind, pool, dev_, bytes, &op);                \
        if (rc != CUDA_SUCCESS)                                                 \
            return rc;                                                          \
        rc = HOOK_REAL(export)(__VA_ARGS__);                                    \
        return hook_pool_allocated(&op, rc, dptr, bytes);                       \
    } while (0)

static CUresult hook_memop_cuMemAllocAsync(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
    HOOK_POOL_ALLOC(cuMemAllocAsync, MEM_KIND_ASYNC, NULL, s, dptr, bytes, s);
}

static CUresult hook_memop_cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytes, CUstream s)
{
    HOOK_POOL_ALLOC(cuMemAllocAsync_ptsz, MEM_KIND_ASYNC, NULL, s, dptr, bytes, s);
}

static CUresult hook_memop_cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytes,
                                                   CUmemoryPool pool, CUstream s)
{
    HOOK_POOL_ALLOC(cuMemAllocFromPoolAsync, MEM_KIND_POOL, pool, s, dptr, bytes, pool, s);
}

static CUresult hook_memop_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytes,
                                                        CUmemoryPool pool, CUstream s)
{
    HOOK_POOL_ALLOC(cuMemAllocFromPoolAsync_ptsz, MEM_KIND_POOL, pool, s, dptr, bytes, pool, s);
}

static CUresult hook_memop_cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    CUresult rc = HOOK_REAL(cuMemPoolCreate)(pool, props);
    if (rc == CUDA_SUCCESS && pool && props) {  /* a host pool's id is no device's */
        int host = props->location.type != CU_MEM_LOCATION_TYPE_DEVICE;
        mem_pool_learn(*pool, host ? 0 : props->location.id, host);
    }
    return rc;
}

static CUresult hook_memop_cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult rc = HOOK_REAL(cuMemPoolDestroy)(pool);
    if (rc == CUDA_SUCCESS)
        mem_pool_destroyed(pool);
    return rc;
}

static CUresult hook_memop_cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
    CUresult rc = HOOK_REAL(cuMemPoolTrimTo)(pool, keep);
    if (rc == CUDA_SUCCESS) {
        mem_pool_trimmed(pool);
        vmem_async_settle();           /* paging's stream-ordered frees, done since */
    }
    return rc;
}

/* A pool other devices may access: paging's memory is its own device's. */
static CUresult hook_memop_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map,
                                              size_t count)
{
    CUresult rc = HOOK_REAL(cuMemPoolSetAccess)(pool, map, count);
    if (rc == CUDA_SUCCESS)
        vmem_async_pool_access(pool, map, count);
    return rc;
}

static CUresult hook_memop_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                                 void *value)
{
    CUresult rc = HOOK_REAL(cuMemPoolSetAttribute)(pool, attr, value);
    if (rc == CUDA_SUCCESS)
        mem_pool_set_attribute(pool, attr, value);
    return rc;
}

static CUresult hook_memop_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult rc = HOOK_REAL(cuDeviceGetDefaultMemPool)(pool, dev);
    if (rc == CUDA_SUCCESS && pool)
        mem_pool_learn(*pool, (int)dev, 0);
    return rc;
}

static CUresult hook_memop_cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult rc = HOOK_REAL(cuDeviceGetMemPool)(pool, dev);
    if (rc == CUDA_SUCCESS && pool)
        mem_pool_learn(*pool, (int)dev, 0);
    return rc;
}

static CUresult hook_memop_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult rc = HOOK_REAL(cuDeviceSetMemPool)(dev, pool);
    if (rc == CUDA_SUCCESS) {
        mem_pool_set_current((int)dev, pool);
        vmem_async_pool_set((int)dev, pool);
    }
    return rc;
}

/* ---- graph memory ---------------------------------------------------------- */

/* An allocation node's memory is its pool properties' device's. */
static CUresult hook_memop_cuGraphAddMemAllocNode(CUgraphNode *node, CUgraph graph,
                                                  const CUgraphNode *deps, size_t n,
                                                  CUDA_MEM_ALLOC_NODE_PARAMS *params)
{
    mem_op_t op;
    int dev = params && params->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                  ? params->poolProps.location.id : MEM_DEV_NONE;
    CUresult rc = mem_graph_alloc_begin(dev, params ? params->bytesize : 0, &op);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = HOOK_REAL(cuGraphAddMemAllocNode)(node, graph, deps, n, params);
    mem_graph_alloc_end(&op, rc);
    return rc;
}

/* The generic node calls: an allocation or free node is accounted as the
 * typed calls' (above); any other node passes through untouched. */
static int hook_graph_node_type(const CUgraphNodeParams *p)
{
    return p ? (int)p->type : -1;
}

static CUresult hook_graph_generic_alloc_begin(const CUgraphNodeParams *p, mem_op_t *op)
{
    const CUDA_MEM_ALLOC_NODE_PARAMS_v2 *a = &p->alloc;
    int dev = a->poolProps.location.type == CU_MEM_LOCATION_TYPE_DEVICE
                  ? a->poolProps.location.id : MEM_DEV_NONE;
    return mem_graph_alloc_begin(dev, a->bytesize, op);
}

/* After the driver added a generic node of type (rc its answer): an
 * allocation node's charge settled, a free node's change counted. */
static CUresult graph_node_added(int type, mem_op_t *op, CUresult rc)
{
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC)
        mem_graph_alloc_end(op, rc);
    else if (type == CU_GRAPH_NODE_TYPE_MEM_FREE && rc == CUDA_SUCCESS)
        mem_graph_changed(-1);
    return rc;
}

static CUresult hook_memop_cuGraphAddNode(CUgraphNode *node, CUgraph graph,
                                          const CUgraphNode *deps, size_t n,
                                          CUgraphNodeParams *params)
{
    int type = hook_graph_node_type(params);
    mem_op_t op;
    CUresult rc;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC &&
        (rc = hook_graph_generic_alloc_begin(params, &op)) != CUDA_SUCCESS)
        return rc;
    rc = HOOK_REAL(cuGraphAddNode)(node, graph, deps, n, params);
    return graph_node_added(type, &op, rc);
}

static CUresult hook_memop_cuGraphAddNode_v2(CUgraphNode *node, CUgraph graph,
                                             const CUgraphNode *deps,
                                             const CUgraphEdgeData *edges, size_t n,
                                             CUgraphNodeParams *params)
{
    int type = hook_graph_node_type(params);
    mem_op_t op;
    CUresult rc;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC &&
        (rc = hook_graph_generic_alloc_begin(params, &op)) != CUDA_SUCCESS)
        return rc;
    rc = HOOK_REAL(cuGraphAddNode_v2)(node, graph, deps, edges, n, params);
    return graph_node_added(type, &op, rc);
}

static CUresult hook_memop_cuGraphAddMemFreeNode(CUgraphNode *node, CUgraph graph,
                                                 const CUgraphNode *deps, size_t n,
                                                 CUdeviceptr dptr)
{
    CUresult rc = HOOK_REAL(cuGraphAddMemFreeNode)(node, graph, deps, n, dptr);
    if (rc == CUDA_SUCCESS)
        mem_graph_changed(-1);
    return rc;
}

static CUresult hook_memop_cuDeviceGraphMemTrim(CUdevice dev)
{
    CUresult rc = HOOK_REAL(cuDeviceGraphMemTrim)(dev);
    if (rc == CUDA_SUCCESS)
        mem_graph_changed((int)dev);
    return rc;
}

/* ---- mappings ------------------------------------------------------------ */

static CUresult hook_memop_cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle h, unsigned long long flags)
{
    CUresult rc = HOOK_REAL(cuMemMap)(ptr, size, offset, h, flags);
    if (rc == CUDA_SUCCESS)
        mem_vmm_mapped((uint64_t)ptr, (uint64_t)h);
    return rc;
}

static CUresult hook_memop_cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    CUresult rc = HOOK_REAL(cuMemUnmap)(ptr, size);
    if (rc == CUDA_SUCCESS)
        mem_vmm_unmapped((uint64_t)ptr, (uint64_t)size);
    return rc;
}

/* A sparse array's tile or mip tail is named by its resource and place, not
 * by an address: one key per place, in a range no device address takes
 * (the top bit set). */
static uint64_t hook_array_place(const CUarrayMapInfo *m)
{
    uint64_t h = (uint64_t)(uintptr_t)m->resource.array * 0x9e3779b97f4a7c15ull;
    if (m->subresourceType == CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_SPARSE_LEVEL) {
        const __typeof__(m->subresource.sparseLevel) *l = &m->subresource.sparseLevel;
        uint64_t v[] = { l->level, l->layer, l->offsetX, l->offsetY, l->offsetZ };
        for (size_t i = 0; i < sizeof v / sizeof *v; i++)
            h = (h ^ v[i]) * 0x100000001b3ull;
    } else {
        uint64_t v[] = { 1ull << 32, m->subresource.miptail.layer, m->subresource.miptail.offset };
        for (size_t i = 0; i < sizeof v / sizeof *v; i++)
            h = (h ^ v[i]) * 0x100000001b3ull;
    }
    return h | (1ull << 63);
}

static void hook_array_mapped(const CUarrayMapInfo *list, unsigned count)
{
    for (unsigned i = 0; i < count; i++) {
        const CUarrayMapInfo *m = &list[i];
        if (m->memOperationType == CU_MEM_OPERATION_TYPE_MAP &&
            m->memHandleType == CU_MEM_HANDLE_TYPE_GENERIC)
            mem_vmm_mapped(hook_array_place(m), (uint64_t)m->memHandle.memHandle);
        else if (m->memOperationType == CU_MEM_OPERATION_TYPE_UNMAP)
            mem_vmm_unmapped(hook_array_place(m), 1);
    }
}

static CUresult hook_memop_cuMemMapArrayAsync(CUarrayMapInfo *list, unsigned count, CUstream s)
{
    CUresult rc = HOOK_REAL(cuMemMapArrayAsync)(list, count, s);
    if (rc == CUDA_SUCCESS && list)
        hook_array_mapped(list, count);
    return rc;
}

static CUresult hook_memop_cuMemMapArrayAsync_ptsz(CUarrayMapInfo *list, unsigned count,
                                                   CUstream s)
{
    CUresult rc = HOOK_REAL(cuMemMapArrayAsync_ptsz)(list, count, s);
    if (rc == CUDA_SUCCESS && list)
        hook_array_mapped(list, count);
    return rc;
}

/* ---- IPC handles -------------------------------------------------------------
 * Memory answers for paged (virtualized) memory and for its own handles;
 * every other pointer, handle and address goes to the driver unchanged. */

static CUresult hook_memop_cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr p)
{
    CUresult rc;
    if (vmem_ipc_get(handle, p, &rc))
        return rc;
    return HOOK_REAL(cuIpcGetMemHandle)(handle, p);
}

static CUresult hook_memop_cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle handle,
                                              unsigned int flags)
{
    CUresult rc;
    if (vmem_ipc_open(p, &handle, flags, &rc))
        return rc;
    return HOOK_REAL(cuIpcOpenMemHandle)(p, handle, flags);
}

static CUresult hook_memop_cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle handle,
                                                 unsigned int flags)
{
    CUresult rc;
    if (vmem_ipc_open(p, &handle, flags, &rc))
        return rc;
    return HOOK_REAL(cuIpcOpenMemHandle_v2)(p, handle, flags);
}

static CUresult hook_memop_cuIpcCloseMemHandle(CUdeviceptr p)
{
    CUresult rc;
    if (vmem_ipc_close(p, &rc))
        return rc;
    return HOOK_REAL(cuIpcCloseMemHandle)(p);
}

/* ---- shareable handles ---------------------------------------------------------
 * Paged (virtualized) memory is cuMemAlloc's memory to the program, and
 * gets its answers: no allocation handle to retain (the driver's
 * CUDA_ERROR_INVALID_VALUE for an address no cuMemMap mapped), no
 * multicast binding (which takes mapped VMM memory alone: the same), and
 * no dma-buf of its range (CUDA_ERROR_NOT_SUPPORTED, a driver's answer on
 * a system without dma-buf).  Its chunks are replaced at each page-out and
 * page-in: a handle exported from one would leave a peer writing memory
 * this process no longer reads.  Anything else goes to the driver. */

static int hook_paged(CUdeviceptr p)
{
    return vmem_range(p, NULL, NULL) == 0;
}

static CUresult hook_memop_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
                                                       void *addr)
{
    if (hook_paged((CUdeviceptr)(uintptr_t)addr))
        return CUDA_ERROR_INVALID_VALUE;
    return HOOK_REAL(cuMemRetainAllocationHandle)(handle, addr);
}

static CUresult hook_memop_cuMemGetHandleForAddressRange(void *handle, CUdeviceptr p, size_t size,
                                                         CUmemRangeHandleType type,
                                                         unsigned long long flags)
{
    if (hook_paged(p))
        return CUDA_ERROR_NOT_SUPPORTED;
    return HOOK_REAL(cuMemGetHandleForAddressRange)(handle, p, size, type, flags);
}

static CUresult hook_memop_cuMulticastBindAddr(CUmemGenericAllocationHandle mc, size_t offset,
                                               CUdeviceptr p, size_t size,
                                               unsigned long long flags)
{
    if (hook_paged(p))
        return CUDA_ERROR_INVALID_VALUE;
    return HOOK_REAL(cuMulticastBindAddr)(mc, offset, p, size, flags);
}

/* ---- the wrappers ---------------------------------------------------------- */

#define MEMOP_WRAPPER_(cat, export, ...) MEMOP_WRAP_##cat(export)
#define MEMOP_WRAP_MEMOP(export)                                                \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_enter(HOOK_##export);                                              \
        return hook_memop_##export CU_ARGS_##export;                            \
    }
#define MEMOP_WRAP_LAUNCH(export)
#define MEMOP_WRAP_SYNC(export)
#define MEMOP_WRAP_ALLOC(export)
#define MEMOP_WRAP_FREE(export)
#define MEMOP_WRAP_INFO(export)
#define MEMOP_WRAP_LIFE(export)
#define MEMOP_WRAP_CAPTURE(export)
#define MEMOP_WRAP_COPY(export)
#define MEMOP_WRAP_RESOLVE(export)
HOOK_LIST(MEMOP_WRAPPER_)

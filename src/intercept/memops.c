/*
 * memops.c - the wrappers of hooks.list's MEMOP rows: calls that change how
 * long device memory stays held after the call that allocated it.  A VMM
 * handle lives until it is released and its last mapping is gone (cuMemMap,
 * cuMemUnmap, cuMemMapArrayAsync).
 *
 * Divided into: mappings; the wrappers, expanded from the list.
 *
 * Each row's wrapper counts the call and hands its arguments to
 * hook_memop_<export>, written here by hand, which calls the driver and
 * then tells memory what changed.  Nothing is read through an argument
 * before the driver has accepted it (a call it refused changes nothing),
 * and memory ignores every call while it is not accounting.  No lock here.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

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
#define MEMOP_WRAP_RESOLVE(export)
HOOK_LIST(MEMOP_WRAPPER_)

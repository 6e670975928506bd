/*
 * ipc.c - legacy CUDA IPC memory handles (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle), as far as simgpu can answer
 * them faithfully.
 *
 * The driver makes a legacy handle only for memory of cuMemAlloc and its
 * kin: for an address of a VMM mapping (cuMemMap), of a pool, of host
 * memory or of nothing, cuIpcGetMemHandle answers CUDA_ERROR_INVALID_VALUE
 * (VMM memory is shared through cuMemExportToShareableHandle instead).
 * simgpu's ordinary device memory is private host memory of the process
 * (mem.c), which another process cannot map at the same address: for it,
 * cuIpcGetMemHandle answers CUDA_ERROR_NOT_SUPPORTED.  So simgpu never makes
 * a handle, and cuIpcOpenMemHandle refuses every handle it is given (one a
 * driver did not make: CUDA_ERROR_INVALID_VALUE), and cuIpcCloseMemHandle
 * every address (none was opened).
 *
 * Lock: sim_p.lock, around the range lookup.
 */
#include "sim.h"

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
    SIM_CHECK_INIT();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    SIM_LOCK();
    sim_range_t *r = sim_range_find((uintptr_t)dptr);
    int kind = r ? r->kind : 0;
    SIM_UNLOCK();
    return kind == SIM_R_DEVICE ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
}

static CUresult open_handle(CUdeviceptr *pdptr, unsigned int flags)
{
    SIM_CHECK_INIT();
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_ERROR_INVALID_VALUE;    /* simgpu made no handle */
}

CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                    unsigned int flags)
{
    (void)handle;
    return open_handle(pdptr, flags);
}

CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                       unsigned int flags)
{
    (void)handle;
    return open_handle(pdptr, flags);
}

CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    (void)dptr;
    SIM_CHECK_INIT();
    if (!sim_ctx_current())
        return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_ERROR_INVALID_VALUE;    /* nothing was opened */
}

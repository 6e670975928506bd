/*
 * drv.h - the driver contract: the few CUDA driver calls that libsalus's own
 * modules make (not the program's calls, which intercept forwards), and the
 * one way to name a device.  The whole interface of src/drv.
 *
 * As mimalloc's prim.h specifies its platform, this names what sched and
 * memory need from the driver and nothing else.  intercept fills one table
 * from the real driver when the program initializes CUDA (drv_resolve over
 * the driver's symbols) and hands it to sched_init and mem_init; tests hand
 * them a table of fakes instead.  A module keeps the pointer it was given
 * and reads it after the release store that published it.
 *
 * Every call may be NULL (a driver that lacks the export): each caller says
 * what it does without it.  Every value the driver returns is checked by the
 * caller before use.
 */
#ifndef SALUS_DRV_H
#define SALUS_DRV_H

#include <stdint.h>

#include <cuda.h>

#pragma GCC visibility push(hidden)

/* The calls: X(field, parameters, export, fallback export or NULL).
 * Legacy ABI where CUDA 13 changed it: cuCtxGetDevice(CUdevice *) and
 * cuCtxSynchronize(void) (their _v2 forms take a context). */
#define DRV_CALLS(X)                                                                    \
    X(ctx_get_device,        (CUdevice *dev),                     "cuCtxGetDevice", NULL) \
    X(ctx_synchronize,       (void),                              "cuCtxSynchronize", NULL) \
    X(ctx_get_current,       (CUcontext *ctx),                    "cuCtxGetCurrent", NULL) \
    X(ctx_push_current,      (CUcontext ctx),                     "cuCtxPushCurrent_v2", NULL) \
    X(ctx_pop_current,       (CUcontext *ctx),                    "cuCtxPopCurrent_v2", NULL) \
    X(device_get_uuid,       (CUuuid *uuid, CUdevice dev),        "cuDeviceGetUuid_v2",   \
                                                                  "cuDeviceGetUuid")      \
    X(device_total_mem,      (size_t *bytes, CUdevice dev),       "cuDeviceTotalMem_v2", NULL) \
    X(mem_get_address_range, (CUdeviceptr *base, size_t *size, CUdeviceptr ptr),          \
                                                                  "cuMemGetAddressRange_v2", NULL) \
    X(mem_free,              (CUdeviceptr ptr),                   "cuMemFree_v2", NULL)   \
    X(mem_release,           (CUmemGenericAllocationHandle h),    "cuMemRelease", NULL)   \
    X(array_destroy,         (CUarray array),                     "cuArrayDestroy", NULL) \
    X(pointer_get_attribute, (void *data, CUpointer_attribute attr, CUdeviceptr ptr),     \
                                                                  "cuPointerGetAttribute", NULL) \
    X(array_get_descriptor,  (CUDA_ARRAY_DESCRIPTOR *desc, CUarray array),                \
                                                                  "cuArrayGetDescriptor_v2", NULL) \
    X(stream_get_device,     (CUstream stream, CUdevice *dev),    "cuStreamGetDevice", NULL) \
    X(stream_get_ctx,        (CUstream stream, CUcontext *ctx),   "cuStreamGetCtx", NULL) \
    X(device_get_mem_pool,   (CUmemoryPool *pool, CUdevice dev),  "cuDeviceGetMemPool", NULL) \
    X(mem_pool_get_attribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value),  \
                                                                  "cuMemPoolGetAttribute", NULL) \
    X(device_get_graph_mem_attribute, (CUdevice dev, CUgraphMem_attribute attr, void *value), \
                                                     "cuDeviceGetGraphMemAttribute", NULL) \
    X(mem_get_info,          (size_t *free_bytes, size_t *total_bytes),                    \
                                                                  "cuMemGetInfo_v2", NULL) \
    X(primary_ctx_retain,    (CUcontext *ctx, CUdevice dev),      "cuDevicePrimaryCtxRetain", NULL) \
    X(primary_ctx_release,   (CUdevice dev),                      "cuDevicePrimaryCtxRelease_v2", \
                                                                  "cuDevicePrimaryCtxRelease") \
    DRV_VMM_CALLS(X)

/* What paging needs besides (memory's virtualized allocations): VMM ranges
 * and chunks, pinned staging, copies on a stream of its own. */
#define DRV_VMM_CALLS(X)                                                                \
    X(mem_get_granularity,   (size_t *g, const CUmemAllocationProp *prop,                 \
                              CUmemAllocationGranularity_flags option),                   \
                                                          "cuMemGetAllocationGranularity", NULL) \
    X(mem_address_reserve,   (CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr, \
                              unsigned long long flags),          "cuMemAddressReserve", NULL) \
    X(mem_address_free,      (CUdeviceptr ptr, size_t size),      "cuMemAddressFree", NULL) \
    X(mem_create,            (CUmemGenericAllocationHandle *h, size_t size,               \
                              const CUmemAllocationProp *prop, unsigned long long flags), \
                                                                  "cuMemCreate", NULL)    \
    X(mem_map,               (CUdeviceptr ptr, size_t size, size_t offset,                \
                              CUmemGenericAllocationHandle h, unsigned long long flags),  \
                                                                  "cuMemMap", NULL)       \
    X(mem_unmap,             (CUdeviceptr ptr, size_t size),      "cuMemUnmap", NULL)     \
    X(mem_set_access,        (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,  \
                              size_t count),                      "cuMemSetAccess", NULL) \
    X(mem_host_alloc,        (void **p, size_t bytes, unsigned int flags),                \
                                                                  "cuMemHostAlloc", NULL) \
    X(mem_free_host,         (void *p),                           "cuMemFreeHost", NULL)  \
    X(stream_create,         (CUstream *stream, unsigned int flags), "cuStreamCreate", NULL) \
    X(stream_synchronize,    (CUstream stream),                   "cuStreamSynchronize", NULL) \
    X(memcpy_dtoh_async,     (void *dst, CUdeviceptr src, size_t bytes, CUstream stream),  \
                                                                  "cuMemcpyDtoHAsync_v2", NULL) \
    X(memcpy_htod_async,     (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream), \
                                                                  "cuMemcpyHtoDAsync_v2", NULL) \
    DRV_IPC_CALLS(X)                                                                    \
    DRV_ASYNC_CALLS(X)

/* What IPC on paged memory needs besides (vmm_ipc.c): a chunk's POSIX file
 * descriptor, and a chunk made of another process's descriptor. */
#define DRV_IPC_CALLS(X)                                                                \
    X(mem_export_to_shareable_handle, (void *shared, CUmemGenericAllocationHandle h,      \
                              CUmemAllocationHandleType type, unsigned long long flags),  \
                                                  "cuMemExportToShareableHandle", NULL)   \
    X(mem_import_from_shareable_handle, (CUmemGenericAllocationHandle *h, void *os,       \
                              CUmemAllocationHandleType type),                            \
                                                  "cuMemImportFromShareableHandle", NULL)

/* What paging's stream-ordered frees need (vmm_async.c): an event of
 * libsalus's own recorded on the program's stream, queried later; the
 * device's default pool, which stream-ordered allocations are virtualized
 * from. */
#define DRV_ASYNC_CALLS(X)                                                              \
    X(event_create,          (CUevent *ev, unsigned int flags),   "cuEventCreate", NULL)  \
    X(event_record,          (CUevent ev, CUstream stream),       "cuEventRecord", NULL)  \
    X(event_query,           (CUevent ev),                        "cuEventQuery", NULL)   \
    X(event_synchronize,     (CUevent ev),                        "cuEventSynchronize", NULL) \
    X(event_destroy,         (CUevent ev),                        "cuEventDestroy_v2", NULL) \
    X(device_get_default_mem_pool, (CUmemoryPool *pool, CUdevice dev),                   \
                                                                  "cuDeviceGetDefaultMemPool", NULL)

#define DRV_FIELD_(field, params, name, fallback) CUresult (CUDAAPI *field) params;
typedef struct drv {
    DRV_CALLS(DRV_FIELD_)
} drv_t;
#undef DRV_FIELD_

/* Fill *out from a symbol lookup over the real driver (dlsym on its handle);
 * a call the driver lacks stays NULL.  0, or -1 when sym is NULL or the
 * driver lacks cuCtxGetDevice, without which no module can place a call on
 * a device (*out untouched). */
int drv_resolve(void *(*sym)(const char *name), drv_t *out);

/* The CUDA ordinal of the calling thread's current context: 0 and *ordinal
 * set, or -1 (no context, no driver call, or an ordinal outside
 * 0..DRV_MAX_ORDINAL). */
#define DRV_MAX_ORDINAL 63
int drv_current_device(const drv_t *d, int *ordinal);

/* Where work submitted on `stream` runs: the context and CUDA ordinal of
 * the stream itself (CUDA 13 lets a stream of another device than the
 * current context's take work, and runs a CUkernel launch in its stream's
 * context), or the current context's for the legacy and per-thread streams
 * (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).  From cuStreamGetDevice,
 * else the stream's context (cuStreamGetCtx) pushed for cuCtxGetDevice.
 * 0 and both set (*ctx may be NULL: the driver cannot say), or -1 (the
 * driver refuses the stream, or an ordinal outside 0..DRV_MAX_ORDINAL).
 * Driver calls: the launch slow path caches the answer. */
int drv_stream_place(const drv_t *d, CUstream stream, CUcontext *ctx, int *ordinal);

/* A device's identity, what the arbitration table knows devices by: its
 * uuid, or "ordinal:<n>" (zero-padded to 16 bytes) from a driver that has
 * none, so that every process names a GPU the same way whatever ordinal
 * CUDA_VISIBLE_DEVICES gives it.  Never fails; a driver call, so callers
 * keep it out of locks and off fast paths (ipc caches it per table).
 * Returns 0 for the driver's uuid, 1 for the stand-in (which names no GPU
 * beyond this machine's view: ipc claims no GPU by it). */
int  drv_device_uuid(const drv_t *d, int ordinal, uint8_t uuid[16]);

#pragma GCC visibility pop

#endif /* SALUS_DRV_H */

/*
 * nulldrv.c - a libcuda.so.1 whose every export returns at once (see
 * nulldrv_all.c), with real answers where a program or libsalus needs one:
 * two devices (their uuids, 80 GiB each, all of it free), device 0
 * current, version 13.0, a context handle per device.  For the
 * micro-benchmarks: the cost of a launch through libsalus is measured
 * against this floor.  No state, no lock.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define NULL_EXPORT __attribute__((visibility("default")))

static struct { int dummy; } the_ctx, the_ctx1;

/* An export whose one argument is where its answer goes. */
#define NULL_ANSWER(name, type, value) \
    NULL_EXPORT CUresult CUDAAPI name(type *out) \
    { \
        if (!out) \
            return CUDA_ERROR_INVALID_VALUE; \
        *out = (value); \
        return CUDA_SUCCESS; \
    }

NULL_ANSWER(cuDriverGetVersion, int, 13000)
NULL_ANSWER(cuDeviceGetCount, int, 2)
NULL_ANSWER(cuCtxGetDevice, CUdevice, 0)
NULL_ANSWER(cuCtxGetCurrent, CUcontext, (CUcontext)&the_ctx)

NULL_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    if (!device || ordinal < 0 || ordinal > 1)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

/* Not through the exports: with libsalus preloaded they are its wrappers. */
static CUresult the_context(CUcontext *pctx, CUdevice dev)
{
    if (!pctx || dev < 0 || dev > 1)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = dev ? (CUcontext)&the_ctx1 : (CUcontext)&the_ctx;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    return the_context(pctx, dev);
}

NULL_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    return the_context(pctx, dev);
}

static CUresult the_uuid(CUuuid *uuid, CUdevice dev)
{
    static const char id[16] = "nulldrv-device-0";
    if (!uuid || dev < 0 || dev > 1)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < 16; i++)
        uuid->bytes[i] = id[i];
    uuid->bytes[15] = (char)('0' + dev);
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    return the_uuid(uuid, dev);
}

NULL_EXPORT CUresult CUDAAPI cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return the_uuid(uuid, dev);
}

/* libsalus's memory module sizes its budget from these (a context's charge
 * is measured from the free figure): a device without memory is refused
 * with an error on stderr, which is not what these benchmarks measure. */
#define NULL_MEMORY (80ull << 30)

NULL_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (!bytes || dev < 0 || dev > 1)
        return CUDA_ERROR_INVALID_VALUE;
    *bytes = (size_t)NULL_MEMORY;
    return CUDA_SUCCESS;
}

NULL_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    if (!free || !total)
        return CUDA_ERROR_INVALID_VALUE;
    *free = *total = (size_t)NULL_MEMORY;
    return CUDA_SUCCESS;
}

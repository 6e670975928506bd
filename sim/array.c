/*
 * array.c - CUDA arrays: cuArrayCreate / cuArray3DCreate, their
 * descriptors, cuArrayDestroy, and the bytes copies read and write.
 *
 * An array is opaque to the program; here it is row-major host memory of
 * width x max(height,1) x max(depth,1) x channels x format-size bytes,
 * charged round_up(that, SIM_GRANULE) to its context's device, as any
 * allocation.  Copies address it as rows of width x channels x format bytes
 * (copy.c); kernels never see it.
 *
 * Lock: sim_p.lock guards arrays.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct sim_array {
    uint64_t handle;
    sim_ctx_t *ctx;
    CUDA_ARRAY3D_DESCRIPTOR desc;
    size_t row, height, depth, bytes;
    uint64_t charged;
    void *data;
} sim_array_t;

/* Bytes of one element of a format, 0 for formats simgpu does not model. */
size_t sim_format_size(CUarray_format f)
{
    switch ((int)f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static CUresult array_create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    SIM_CHECK_INIT();
    if (!out || !d || !d->Width)
        return CUDA_ERROR_INVALID_VALUE;
    size_t fs = sim_format_size(d->Format);
    if (!fs)
        /* A valid newer format (NV12, BC, ...) is not modelled; garbage is invalid. */
        return (int)d->Format >= 0xb0 && (int)d->Format <= 0xff ? CUDA_ERROR_NOT_SUPPORTED
                                                                 : CUDA_ERROR_INVALID_VALUE;
    if (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4)
        return CUDA_ERROR_INVALID_VALUE;
    size_t row = d->Width * d->NumChannels * fs;
    size_t h = d->Height ? d->Height : 1, dp = d->Depth ? d->Depth : 1;
    if (d->Width > (1u << 30) || h > (1u << 30) || dp > (1u << 30) ||
        (double)row * (double)h * (double)dp > (double)(1ull << 46))
        return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = row * h * dp;
    sim_array_t *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    SIM_LOCK();
    CUresult rc = sim_ctx_require(&a->ctx);
    if (rc != CUDA_SUCCESS)
        goto out_free;
    a->charged = sim_round_up(bytes, SIM_GRANULE);
    if ((rc = sim_charge(a->ctx->device, a->charged)) != CUDA_SUCCESS)
        goto out_free;
    rc = CUDA_ERROR_OUT_OF_MEMORY;
    a->data = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a->data == MAP_FAILED)
        goto out_uncharge;
    if (!(a->handle = sim_obj_new(SIM_K_ARRAY, a)))
        goto out_unmap;
    a->desc = *d;
    a->row = row;
    a->height = h;
    a->depth = dp;
    a->bytes = bytes;
    *out = (CUarray)(uintptr_t)a->handle;
    SIM_UNLOCK();
    return CUDA_SUCCESS;
out_unmap:
    munmap(a->data, bytes);
out_uncharge:
    sim_uncharge(a->ctx->device, a->charged);
out_free:
    SIM_UNLOCK();
    free(a);
    return rc;
}

CUresult CUDAAPI cuArrayCreate_v2(CUarray *out, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = d->Width, .Height = d->Height, .Depth = 0,
                                   .Format = d->Format, .NumChannels = d->NumChannels };
    return array_create(out, &d3);
}

CUresult CUDAAPI cuArray3DCreate_v2(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return array_create(out, d);
}

static void array_free(sim_array_t *a)
{
    munmap(a->data, a->bytes);
    sim_uncharge(a->ctx->device, a->charged);
    sim_obj_free(a->handle);
    free(a);
}

CUresult CUDAAPI cuArrayDestroy(CUarray h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_array_t *a = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_ARRAY);
    if (a)
        array_free(a);
    SIM_UNLOCK();
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static void free_if_ctx(void *obj, void *arg)
{
    sim_array_t *a = obj;
    if (a->ctx == arg)
        array_free(a);
}

void sim_arrays_destroy_ctx(sim_ctx_t *ctx)
{
    sim_obj_foreach(SIM_K_ARRAY, free_if_ctx, ctx);
}

void *sim_array_data(CUarray h, size_t *row, size_t *height, size_t *depth)
{
    sim_array_t *a = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_ARRAY);
    if (!a)
        return NULL;
    *row = a->row;
    *height = a->height;
    *depth = a->depth;
    return a->data;
}

int sim_array_desc(CUarray h, CUDA_ARRAY3D_DESCRIPTOR *d)
{
    sim_array_t *a = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_ARRAY);
    if (!a)
        return -1;
    *d = a->desc;
    return 0;
}

CUresult CUDAAPI cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *d, CUarray h)
{
    SIM_CHECK_INIT();
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_array_t *a = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_ARRAY);
    CUresult rc = !a ? CUDA_ERROR_INVALID_HANDLE
                : a->desc.Depth ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    if (rc == CUDA_SUCCESS)
        *d = (CUDA_ARRAY_DESCRIPTOR){ .Width = a->desc.Width, .Height = a->desc.Height,
                                      .Format = a->desc.Format,
                                      .NumChannels = a->desc.NumChannels };
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *d, CUarray h)
{
    SIM_CHECK_INIT();
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_array_t *a = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_ARRAY);
    if (a)
        *d = a->desc;
    SIM_UNLOCK();
    return a ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

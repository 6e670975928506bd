/*
 * copy.c - copies and memsets: cuMemcpy* (1D, peer, arrays, 2D, 3D, 3D peer,
 * batches of 1D and of 3D copies) and
 * cuMemset* (8/16/32-bit, 2D), synchronous and asynchronous.
 *
 * Divided into: timing; 1D copies; memsets; 2D/3D copies; entry points
 * (one macro per family, for the _v2, _ptds and _ptsz exports); batches
 * and 3D peer copies.
 *
 * The bytes move at call time; the transfer then occupies its stream for
 * size / bandwidth (SIMGPU_PCIE_GBPS, 25 GB/s, to or from the host, both
 * ways; 1.5 TB/s on the device),
 * not the compute engine.  A synchronous copy or memset returns when its
 * transfer ends, after the work enqueued before it: a blocking
 * device-to-host copy is a host synchronization, as on a real GPU.
 * Every device-side byte is checked against the range registry first:
 * a bad pointer is CUDA_ERROR_INVALID_VALUE, never a fault.
 *
 * Lock: sim_p.lock from stream resolution to the end of the transfer's
 * timing; released while a synchronous call sleeps.
 */
#include "sim.h"

#include <string.h>
#include <sys/mman.h>

enum { D_HTOD, D_DTOH, D_DTOD, D_ANY };

/* ---- timing ---------------------------------------------------------------------- */

const char *sim_copy_name(int dst_device, int src_device)
{
    static const char *const names[2][2] = { { "HtoH", "DtoH" }, { "HtoD", "DtoD" } };
    return names[!!dst_device][!!src_device];
}

static void transfer(sim_stream_t *s, size_t bytes, uint64_t bw, int sync, int kind,
                     const char *name)
{
    uint64_t end = sim_stream_transfer(s, sim_transfer_ns(bytes, bw), kind, name);
    if (sync && end > sim_now()) {
        SIM_UNLOCK();
        sim_sleep_until(end);
        SIM_LOCK();
    }
}

static int is_device(uintptr_t p)
{
    const sim_range_t *r = sim_range_find(p);
    return r && r->kind != SIM_R_HOST && r->kind != SIM_R_REGISTERED;
}

/* ---- 1D copies --------------------------------------------------------------------- */

static CUresult copy_1d(void *dst, const void *src, size_t n, int dir, CUstream hs, int ptds,
                        int sync)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(hs, ptds, &s);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    rc = CUDA_ERROR_INVALID_VALUE;
    if (!dst || !src)
        goto out_unlock;
    int dd = dir == D_HTOD || dir == D_DTOD, sd = dir == D_DTOH || dir == D_DTOD;
    if (dir == D_ANY) {
        dd = sim_range_find((uintptr_t)dst) != NULL;
        sd = sim_range_find((uintptr_t)src) != NULL;
    }
    if ((dd && sim_range_check((uintptr_t)dst, n, PROT_WRITE)) ||
        (sd && sim_range_check((uintptr_t)src, n, PROT_READ)))
        goto out_unlock;
    int ddev = is_device((uintptr_t)dst), sdev = is_device((uintptr_t)src);
    uint64_t bw = ddev && sdev ? SIM_BW_DEVICE : sim_p.pcie_bw;
    if (sync && (rc = sim_capture_conflict(s, 1)) != CUDA_SUCCESS)
        goto out_unlock;
    if (s->capture) {
        rc = sim_capture_memcpy(s, dst, src, n, bw);
        goto out_unlock;
    }
    sim_move(dst, src, n);
    transfer(s, n, bw, sync, SIM_W_COPY, sim_copy_name(ddev, sdev));
    rc = CUDA_SUCCESS;
out_unlock:
    SIM_UNLOCK();
    return rc;
}

#define PTR(d) ((void *)(uintptr_t)(d))

/* name(args) -> copy_1d(dst, src, n, dir, stream, ptds, sync) */
#define COPY_SYNC(name, dir, ptds, dtype, stype) \
    CUresult CUDAAPI name(dtype dst, stype src, size_t n) \
    { return copy_1d(PTR(dst), (const void *)(uintptr_t)src, n, dir, NULL, ptds, 1); }
#define COPY_ASYNC(name, dir, ptds, dtype, stype) \
    CUresult CUDAAPI name(dtype dst, stype src, size_t n, CUstream s) \
    { return copy_1d(PTR(dst), (const void *)(uintptr_t)src, n, dir, s, ptds, 0); }

COPY_SYNC(cuMemcpyHtoD_v2, D_HTOD, 0, CUdeviceptr, const void *)
COPY_SYNC(cuMemcpyHtoD_v2_ptds, D_HTOD, 1, CUdeviceptr, const void *)
COPY_SYNC(cuMemcpyDtoH_v2, D_DTOH, 0, void *, CUdeviceptr)
COPY_SYNC(cuMemcpyDtoH_v2_ptds, D_DTOH, 1, void *, CUdeviceptr)
COPY_SYNC(cuMemcpyDtoD_v2, D_DTOD, 0, CUdeviceptr, CUdeviceptr)
COPY_SYNC(cuMemcpyDtoD_v2_ptds, D_DTOD, 1, CUdeviceptr, CUdeviceptr)
COPY_SYNC(cuMemcpy, D_ANY, 0, CUdeviceptr, CUdeviceptr)
COPY_SYNC(cuMemcpy_ptds, D_ANY, 1, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyHtoDAsync_v2, D_HTOD, 0, CUdeviceptr, const void *)
COPY_ASYNC(cuMemcpyHtoDAsync_v2_ptsz, D_HTOD, 1, CUdeviceptr, const void *)
COPY_ASYNC(cuMemcpyDtoHAsync_v2, D_DTOH, 0, void *, CUdeviceptr)
COPY_ASYNC(cuMemcpyDtoHAsync_v2_ptsz, D_DTOH, 1, void *, CUdeviceptr)
COPY_ASYNC(cuMemcpyDtoDAsync_v2, D_DTOD, 0, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyDtoDAsync_v2_ptsz, D_DTOD, 1, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyAsync, D_ANY, 0, CUdeviceptr, CUdeviceptr)
COPY_ASYNC(cuMemcpyAsync_ptsz, D_ANY, 1, CUdeviceptr, CUdeviceptr)

static CUresult peer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
                     CUstream hs, int ptds, int sync)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    int ok = sim_ctx_get(dc) && sim_ctx_get(sc);
    SIM_UNLOCK();
    if (!ok)
        return CUDA_ERROR_INVALID_CONTEXT;
    return copy_1d(PTR(dst), PTR(src), n, D_DTOD, hs, ptds, sync);
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n)
{
    return peer(d, dc, s, sc, n, NULL, 0, 1);
}
CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                   size_t n)
{
    return peer(d, dc, s, sc, n, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                   size_t n, CUstream st)
{
    return peer(d, dc, s, sc, n, st, 0, 0);
}
CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s,
                                        CUcontext sc, size_t n, CUstream st)
{
    return peer(d, dc, s, sc, n, st, 1, 0);
}

/* Arrays as 1D byte ranges: offset into the array's row-major bytes. */
static CUresult array_span(CUarray a, size_t off, size_t n, char **out)
{
    size_t row, h, d;
    char *data = sim_array_data(a, &row, &h, &d);
    if (!data)
        return CUDA_ERROR_INVALID_HANDLE;
    if (off > row * h * d || n > row * h * d - off)
        return CUDA_ERROR_INVALID_VALUE;
    *out = data + off;
    return CUDA_SUCCESS;
}

/* A copy with an array on one or both sides; host/device ends via copy_1d's
 * checks, so the array's bytes are resolved first (under the lock). */
static CUresult copy_array(CUarray da, size_t doff, void *dp, CUarray sa, size_t soff,
                           const void *sp, size_t n, int dir, CUstream hs, int ptds, int sync)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    char *d = dp, *s = (char *)sp;
    CUresult rc = CUDA_SUCCESS;
    if (da)
        rc = array_span(da, doff, n, &d);
    if (rc == CUDA_SUCCESS && sa)
        rc = array_span(sa, soff, n, &s);
    SIM_UNLOCK();
    if (rc != CUDA_SUCCESS)
        return rc;
    /* The array side is simgpu's own memory: treat it as checked host bytes. */
    int kind = da && sa ? D_ANY : da ? (dir == D_DTOD ? D_DTOH : D_ANY)
                                     : (dir == D_DTOD ? D_HTOD : D_ANY);
    return copy_1d(d, s, n, kind, hs, ptds, sync);
}

CUresult CUDAAPI cuMemcpyHtoA_v2(CUarray a, size_t off, const void *src, size_t n)
{
    return copy_array(a, off, NULL, NULL, 0, src, n, D_ANY, NULL, 0, 1);
}
CUresult CUDAAPI cuMemcpyHtoA_v2_ptds(CUarray a, size_t off, const void *src, size_t n)
{
    return copy_array(a, off, NULL, NULL, 0, src, n, D_ANY, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpyAtoH_v2(void *dst, CUarray a, size_t off, size_t n)
{
    return copy_array(NULL, 0, dst, a, off, NULL, n, D_ANY, NULL, 0, 1);
}
CUresult CUDAAPI cuMemcpyAtoH_v2_ptds(void *dst, CUarray a, size_t off, size_t n)
{
    return copy_array(NULL, 0, dst, a, off, NULL, n, D_ANY, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr src, size_t n)
{
    return copy_array(a, off, NULL, NULL, 0, PTR(src), n, D_DTOD, NULL, 0, 1);
}
CUresult CUDAAPI cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr src, size_t n)
{
    return copy_array(a, off, NULL, NULL, 0, PTR(src), n, D_DTOD, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpyAtoD_v2(CUdeviceptr dst, CUarray a, size_t off, size_t n)
{
    return copy_array(NULL, 0, PTR(dst), a, off, NULL, n, D_DTOD, NULL, 0, 1);
}
CUresult CUDAAPI cuMemcpyAtoD_v2_ptds(CUdeviceptr dst, CUarray a, size_t off, size_t n)
{
    return copy_array(NULL, 0, PTR(dst), a, off, NULL, n, D_DTOD, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpyAtoA_v2(CUarray d, size_t doff, CUarray s, size_t soff, size_t n)
{
    return copy_array(d, doff, NULL, s, soff, NULL, n, D_ANY, NULL, 0, 1);
}
CUresult CUDAAPI cuMemcpyAtoA_v2_ptds(CUarray d, size_t doff, CUarray s, size_t soff, size_t n)
{
    return copy_array(d, doff, NULL, s, soff, NULL, n, D_ANY, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpyHtoAAsync_v2(CUarray a, size_t off, const void *src, size_t n,
                                      CUstream s)
{
    return copy_array(a, off, NULL, NULL, 0, src, n, D_ANY, s, 0, 0);
}
CUresult CUDAAPI cuMemcpyHtoAAsync_v2_ptsz(CUarray a, size_t off, const void *src, size_t n,
                                           CUstream s)
{
    return copy_array(a, off, NULL, NULL, 0, src, n, D_ANY, s, 1, 0);
}
CUresult CUDAAPI cuMemcpyAtoHAsync_v2(void *dst, CUarray a, size_t off, size_t n, CUstream s)
{
    return copy_array(NULL, 0, dst, a, off, NULL, n, D_ANY, s, 0, 0);
}
CUresult CUDAAPI cuMemcpyAtoHAsync_v2_ptsz(void *dst, CUarray a, size_t off, size_t n,
                                           CUstream s)
{
    return copy_array(NULL, 0, dst, a, off, NULL, n, D_ANY, s, 1, 0);
}

/* ---- memsets ------------------------------------------------------------------------ */

CUresult sim_memset_do(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
                       size_t width, size_t height)
{
    size_t row = width * elem;
    if (width > SIZE_MAX / elem || (height > 1 && pitch < row) || dst % elem)
        return CUDA_ERROR_INVALID_VALUE;
    if (height && sim_range_check((uintptr_t)dst, (height - 1) * pitch + row, PROT_WRITE))
        return CUDA_ERROR_INVALID_VALUE;
    uint32_t bits = elem == 1 ? value & 0xff : elem == 2 ? value & 0xffff : value;
    if (!bits && (height == 1 || pitch == row)) {          /* contiguous zeros */
        sim_zero((void *)(uintptr_t)dst, row * height);
        return CUDA_SUCCESS;
    }
    for (size_t y = 0; y < height; y++) {
        char *p = (char *)(uintptr_t)dst + y * pitch;
        if (elem == 1) {
            memset(p, (int)(value & 0xff), width);
        } else if (elem == 2) {
            uint16_t v = (uint16_t)value;
            for (size_t i = 0; i < width; i++)
                memcpy(p + 2 * i, &v, 2);
        } else {
            uint32_t v = value;
            for (size_t i = 0; i < width; i++)
                memcpy(p + 4 * i, &v, 4);
        }
    }
    return CUDA_SUCCESS;
}

static CUresult memset_op(CUdeviceptr dst, size_t pitch, unsigned value, unsigned elem,
                          size_t width, size_t height, CUstream hs, int ptds, int sync)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(hs, ptds, &s);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    if (sync && (rc = sim_capture_conflict(s, 1)) != CUDA_SUCCESS)
        goto out_unlock;
    if (s->capture) {
        rc = sim_capture_memset(s, dst, pitch, value, elem, width, height);
        goto out_unlock;
    }
    rc = sim_memset_do(dst, pitch, value, elem, width, height);
    if (rc == CUDA_SUCCESS)
        transfer(s, width * elem * height, SIM_BW_DEVICE, sync, SIM_W_MEMSET, "memset");
out_unlock:
    SIM_UNLOCK();
    return rc;
}

#define MEMSET_1D(name, elem, vtype, ptds, sync) \
    CUresult CUDAAPI name(CUdeviceptr d, vtype v, size_t n) \
    { return memset_op(d, n * elem, v, elem, n, 1, NULL, ptds, sync); }
#define MEMSET_1D_ASYNC(name, elem, vtype, ptds) \
    CUresult CUDAAPI name(CUdeviceptr d, vtype v, size_t n, CUstream s) \
    { return memset_op(d, n * elem, v, elem, n, 1, s, ptds, 0); }
#define MEMSET_2D(name, elem, vtype, ptds) \
    CUresult CUDAAPI name(CUdeviceptr d, size_t pitch, vtype v, size_t w, size_t h) \
    { return memset_op(d, pitch, v, elem, w, h, NULL, ptds, 1); }
#define MEMSET_2D_ASYNC(name, elem, vtype, ptds) \
    CUresult CUDAAPI name(CUdeviceptr d, size_t pitch, vtype v, size_t w, size_t h, CUstream s) \
    { return memset_op(d, pitch, v, elem, w, h, s, ptds, 0); }

MEMSET_1D(cuMemsetD8_v2, 1, unsigned char, 0, 1)
MEMSET_1D(cuMemsetD8_v2_ptds, 1, unsigned char, 1, 1)
MEMSET_1D(cuMemsetD16_v2, 2, unsigned short, 0, 1)
MEMSET_1D(cuMemsetD16_v2_ptds, 2, unsigned short, 1, 1)
MEMSET_1D(cuMemsetD32_v2, 4, unsigned int, 0, 1)
MEMSET_1D(cuMemsetD32_v2_ptds, 4, unsigned int, 1, 1)
MEMSET_1D_ASYNC(cuMemsetD8Async, 1, unsigned char, 0)
MEMSET_1D_ASYNC(cuMemsetD8Async_ptsz, 1, unsigned char, 1)
MEMSET_1D_ASYNC(cuMemsetD16Async, 2, unsigned short, 0)
MEMSET_1D_ASYNC(cuMemsetD16Async_ptsz, 2, unsigned short, 1)
MEMSET_1D_ASYNC(cuMemsetD32Async, 4, unsigned int, 0)
MEMSET_1D_ASYNC(cuMemsetD32Async_ptsz, 4, unsigned int, 1)
MEMSET_2D(cuMemsetD2D8_v2, 1, unsigned char, 0)
MEMSET_2D(cuMemsetD2D8_v2_ptds, 1, unsigned char, 1)
MEMSET_2D(cuMemsetD2D16_v2, 2, unsigned short, 0)
MEMSET_2D(cuMemsetD2D16_v2_ptds, 2, unsigned short, 1)
MEMSET_2D(cuMemsetD2D32_v2, 4, unsigned int, 0)
MEMSET_2D(cuMemsetD2D32_v2_ptds, 4, unsigned int, 1)
MEMSET_2D_ASYNC(cuMemsetD2D8Async, 1, unsigned char, 0)
MEMSET_2D_ASYNC(cuMemsetD2D8Async_ptsz, 1, unsigned char, 1)
MEMSET_2D_ASYNC(cuMemsetD2D16Async, 2, unsigned short, 0)
MEMSET_2D_ASYNC(cuMemsetD2D16Async_ptsz, 2, unsigned short, 1)
MEMSET_2D_ASYNC(cuMemsetD2D32Async, 4, unsigned int, 0)
MEMSET_2D_ASYNC(cuMemsetD2D32Async_ptsz, 4, unsigned int, 1)

/* ---- 2D and 3D copies -----------------------------------------------------------------
 * One side of a copy: where its (x, y, z) origin is and how rows and slices
 * are laid out; `device` sides are checked against the registry. */
typedef struct side {
    char *base;
    size_t pitch, height;               /* bytes per row, rows per slice */
    int device, array;
    size_t arows, aslices;              /* array: its rows and slices */
} side_t;

static CUresult side_of(side_t *sd, CUmemorytype mt, const void *host, CUdeviceptr dev,
                        CUarray arr, size_t pitch, size_t height)
{
    memset(sd, 0, sizeof *sd);
    sd->pitch = pitch;
    sd->height = height;
    switch ((int)mt) {
    case CU_MEMORYTYPE_HOST:
        sd->base = (char *)host;
        break;
    case CU_MEMORYTYPE_DEVICE:
        sd->base = PTR(dev);
        sd->device = 1;
        break;
    case CU_MEMORYTYPE_UNIFIED:
        sd->base = PTR(dev);
        sd->device = sim_range_find((uintptr_t)dev) != NULL;
        break;
    case CU_MEMORYTYPE_ARRAY:
        if (!(sd->base = sim_array_data(arr, &sd->pitch, &sd->arows, &sd->aslices)))
            return CUDA_ERROR_INVALID_HANDLE;
        sd->height = sd->arows;
        sd->array = 1;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return sd->base ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Check the box (x, y, z) + (w, h, d) of side sd; its first byte in *at. */
static CUresult side_check(const side_t *sd, size_t x, size_t y, size_t z, size_t w, size_t h,
                           size_t d, int prot, char **at)
{
    if (h > 1 && sd->pitch < x + w)
        return CUDA_ERROR_INVALID_VALUE;
    if (d > 1 && sd->height < y + h)
        return CUDA_ERROR_INVALID_VALUE;
    if (sd->array && (x + w > sd->pitch || y + h > sd->arows || z + d > sd->aslices))
        return CUDA_ERROR_INVALID_VALUE;
    size_t slice = sd->pitch * sd->height;
    *at = sd->base + z * slice + y * sd->pitch + x;
    size_t span = (d - 1) * slice + (h - 1) * sd->pitch + w;
    if (sd->device && sim_range_check((uintptr_t)*at, span, prot))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

typedef struct box {
    side_t src, dst;
    size_t sx, sy, sz, dx, dy, dz, w, h, d;
} box_t;

static CUresult copy_box(const box_t *b, CUstream hs, int ptds, int sync)
{
    SIM_CHECK_INIT();
    if (!b->w || !b->h || !b->d)
        return CUDA_SUCCESS;
    SIM_LOCK();
    sim_stream_t *s;
    char *from, *to;
    CUresult rc = sim_stream_resolve(hs, ptds, &s);
    if (rc == CUDA_SUCCESS)
        rc = side_check(&b->src, b->sx, b->sy, b->sz, b->w, b->h, b->d, PROT_READ, &from);
    if (rc == CUDA_SUCCESS)
        rc = side_check(&b->dst, b->dx, b->dy, b->dz, b->w, b->h, b->d, PROT_WRITE, &to);
    if (rc == CUDA_SUCCESS && sync)
        rc = sim_capture_conflict(s, 1);
    if (rc == CUDA_SUCCESS && s->capture)
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;     /* 2D/3D copy nodes: not modelled */
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    for (size_t z = 0; z < b->d; z++)
        for (size_t y = 0; y < b->h; y++)
            memmove(to + z * b->dst.pitch * b->dst.height + y * b->dst.pitch,
                    from + z * b->src.pitch * b->src.height + y * b->src.pitch, b->w);
    int ddev = b->dst.device || b->dst.array, sdev = b->src.device || b->src.array;
    transfer(s, b->w * b->h * b->d, ddev && sdev ? SIM_BW_DEVICE : sim_p.pcie_bw, sync,
             SIM_W_COPY, sim_copy_name(ddev, sdev));
out_unlock:
    SIM_UNLOCK();
    return rc;
}

static CUresult copy_2d(const CUDA_MEMCPY2D *c, CUstream hs, int ptds, int sync)
{
    SIM_CHECK_INIT();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    box_t b = { .sx = c->srcXInBytes, .sy = c->srcY, .dx = c->dstXInBytes, .dy = c->dstY,
                .w = c->WidthInBytes, .h = c->Height, .d = 1 };
    SIM_LOCK();
    CUresult rc = side_of(&b.src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray,
                          c->srcPitch, c->Height);
    if (rc == CUDA_SUCCESS)
        rc = side_of(&b.dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray,
                     c->dstPitch, c->Height);
    SIM_UNLOCK();
    return rc != CUDA_SUCCESS ? rc : copy_box(&b, hs, ptds, sync);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *c, CUstream hs, int ptds, int sync)
{
    SIM_CHECK_INIT();
    if (!c || c->srcLOD || c->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    box_t b = { .sx = c->srcXInBytes, .sy = c->srcY, .sz = c->srcZ, .dx = c->dstXInBytes,
                .dy = c->dstY, .dz = c->dstZ, .w = c->WidthInBytes, .h = c->Height,
                .d = c->Depth };
    SIM_LOCK();
    CUresult rc = side_of(&b.src, c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray,
                          c->srcPitch, c->srcHeight);
    if (rc == CUDA_SUCCESS)
        rc = side_of(&b.dst, c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray,
                     c->dstPitch, c->dstHeight);
    SIM_UNLOCK();
    return rc != CUDA_SUCCESS ? rc : copy_box(&b, hs, ptds, sync);
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *c) { return copy_2d(c, NULL, 0, 1); }
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c) { return copy_2d(c, NULL, 1, 1); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *c) { return copy_2d(c, NULL, 0, 1); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *c)
{
    return copy_2d(c, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream s) { return copy_2d(c, s, 0, 0); }
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream s)
{
    return copy_2d(c, s, 1, 0);
}
CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *c) { return copy_3d(c, NULL, 0, 1); }
CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *c) { return copy_3d(c, NULL, 1, 1); }
CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *c, CUstream s) { return copy_3d(c, s, 0, 0); }
CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *c, CUstream s)
{
    return copy_3d(c, s, 1, 0);
}

/* ---- batches and 3D peer copies ---------------------------------------------------
 * cuMemcpyBatchAsync (CUDA 12.8; _v2 from 13.0 drops failIdx): count 1D
 * copies, each between any two kinds of memory, on a stream that is not
 * the legacy one; attrs[k] applies from copy attrsIdxs[k] on (the first
 * index 0, increasing), and each names a source access order.  A bad copy
 * stops the batch there: *failIdx is its index, SIZE_MAX for an error of
 * the whole call, and the copies before it are done (the driver's, too,
 * may have run them).  cuMemcpy3DBatchAsync (the same; _v2 without failIdx):
 * each op a 3D copy between pointers and arrays, its extent in elements
 * (bytes between pointers, the array's element otherwise, equal between
 * two arrays), a pointer's rows and layers tightly packed where 0. */

static CUresult batch_check(size_t count, const CUmemcpyAttributes *attrs, const size_t *idxs,
                            size_t nattrs, CUstream hs)
{
    if (!count || !attrs || !idxs || nattrs < 1 || nattrs > count || idxs[0] != 0 ||
        hs == NULL || hs == CU_STREAM_LEGACY)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < nattrs; k++)
        if ((k && idxs[k] <= idxs[k - 1]) || idxs[k] >= count ||
            attrs[k].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
            attrs[k].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                      CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, size_t *fail,
                      CUstream hs, int ptds)
{
    SIM_CHECK_INIT();
    if (fail)
        *fail = SIZE_MAX;
    CUresult rc = dsts && srcs && sizes ? batch_check(count, attrs, idxs, nattrs, hs)
                                        : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < count; i++)
        if ((rc = copy_1d(PTR(dsts[i]), PTR(srcs[i]), sizes[i], D_ANY, hs, ptds, 0)) !=
                CUDA_SUCCESS && fail)
            *fail = i;
    return rc;
}

CUresult CUDAAPI cuMemcpyBatchAsync(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                    CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                                    CUstream st)
{
    return batch(d, s, n, count, a, ai, na, fail, st, 0);
}
CUresult CUDAAPI cuMemcpyBatchAsync_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                         CUmemcpyAttributes *a, size_t *ai, size_t na,
                                         size_t *fail, CUstream st)
{
    return batch(d, s, n, count, a, ai, na, fail, st, 1);
}
CUresult CUDAAPI cuMemcpyBatchAsync_v2(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                                       CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream st)
{
    return batch(d, s, n, count, a, ai, na, NULL, st, 0);
}
CUresult CUDAAPI cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *n,
                                            size_t count, CUmemcpyAttributes *a, size_t *ai,
                                            size_t na, CUstream st)
{
    return batch(d, s, n, count, a, ai, na, NULL, st, 1);
}

/* A 3D copy between contexts: both must be live (one ignored for an array
 * side, as the driver ignores it); then a 3D copy as any other. */
static CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER *c, CUstream hs, int ptds, int sync)
{
    SIM_CHECK_INIT();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    int ok = (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || sim_ctx_get(c->srcContext)) &&
             (c->dstMemoryType == CU_MEMORYTYPE_ARRAY || sim_ctx_get(c->dstContext));
    SIM_UNLOCK();
    if (!ok)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUDA_MEMCPY3D m = {
        .srcXInBytes = c->srcXInBytes, .srcY = c->srcY, .srcZ = c->srcZ, .srcLOD = c->srcLOD,
        .srcMemoryType = c->srcMemoryType, .srcHost = c->srcHost, .srcDevice = c->srcDevice,
        .srcArray = c->srcArray, .srcPitch = c->srcPitch, .srcHeight = c->srcHeight,
        .dstXInBytes = c->dstXInBytes, .dstY = c->dstY, .dstZ = c->dstZ, .dstLOD = c->dstLOD,
        .dstMemoryType = c->dstMemoryType, .dstHost = c->dstHost, .dstDevice = c->dstDevice,
        .dstArray = c->dstArray, .dstPitch = c->dstPitch, .dstHeight = c->dstHeight,
        .WidthInBytes = c->WidthInBytes, .Height = c->Height, .Depth = c->Depth,
    };
    return copy_3d(&m, hs, ptds, sync);
}

CUresult CUDAAPI cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *c) { return copy_3d_peer(c, NULL, 0, 1); }
CUresult CUDAAPI cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *c)
{
    return copy_3d_peer(c, NULL, 1, 1);
}
CUresult CUDAAPI cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *c, CUstream s)
{
    return copy_3d_peer(c, s, 0, 0);
}
CUresult CUDAAPI cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *c, CUstream s)
{
    return copy_3d_peer(c, s, 1, 0);
}

/* Bytes of one element of an operand: 1 for a pointer, the array's own; 0
 * for a handle that is not an array.  Under sim_p.lock. */
static size_t operand_elem(const CUmemcpy3DOperand *o)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    if (o->type == CU_MEMCPY_OPERAND_TYPE_POINTER)
        return 1;
    if (o->type != CU_MEMCPY_OPERAND_TYPE_ARRAY || sim_array_desc(o->op.array.array, &d) != 0)
        return 0;
    return sim_format_size(d.Format) * d.NumChannels;
}

static void operand_side(const CUmemcpy3DOperand *o, const CUextent3D *e, size_t elem,
                         CUmemorytype *mt, CUdeviceptr *dev, CUarray *arr, size_t *x, size_t *y,
                         size_t *z, size_t *pitch, size_t *height)
{
    if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY) {
        *mt = CU_MEMORYTYPE_ARRAY, *arr = o->op.array.array;
        *x = o->op.array.offset.x * elem, *y = o->op.array.offset.y, *z = o->op.array.offset.z;
        return;
    }
    *mt = CU_MEMORYTYPE_UNIFIED, *dev = o->op.ptr.ptr;
    *pitch = (o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width) * elem;
    *height = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
}

static CUresult batch3d_op(const CUDA_MEMCPY3D_BATCH_OP *op, CUstream hs, int ptds)
{
    const CUextent3D *e = &op->extent;
    SIM_LOCK();                       /* the arrays' descriptors */
    size_t se = operand_elem(&op->src), de = operand_elem(&op->dst);
    SIM_UNLOCK();
    size_t elem = op->src.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? se : de;
    if (!se || !de || (se != 1 && de != 1 && se != de) || !e->width || !e->height ||
        !e->depth || op->srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
        op->srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
        return CUDA_ERROR_INVALID_VALUE;
    const CUmemcpy3DOperand *sides[2] = { &op->src, &op->dst };
    for (int i = 0; i < 2; i++)
        if (sides[i]->type == CU_MEMCPY_OPERAND_TYPE_POINTER &&
            ((sides[i]->op.ptr.rowLength && sides[i]->op.ptr.rowLength < e->width) ||
             (sides[i]->op.ptr.layerHeight && sides[i]->op.ptr.layerHeight < e->height)))
            return CUDA_ERROR_INVALID_VALUE;
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    operand_side(&op->src, e, elem, &m.srcMemoryType, &m.srcDevice, &m.srcArray, &m.srcXInBytes,
                 &m.srcY, &m.srcZ, &m.srcPitch, &m.srcHeight);
    operand_side(&op->dst, e, elem, &m.dstMemoryType, &m.dstDevice, &m.dstArray, &m.dstXInBytes,
                 &m.dstY, &m.dstZ, &m.dstPitch, &m.dstHeight);
    m.WidthInBytes = e->width * elem, m.Height = e->height, m.Depth = e->depth;
    return copy_3d(&m, hs, ptds, 0);
}

static CUresult batch3d(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                        unsigned long long flags, CUstream hs, int ptds)
{
    SIM_CHECK_INIT();
    if (fail)
        *fail = SIZE_MAX;
    if (!n || !ops || flags || hs == NULL || hs == CU_STREAM_LEGACY)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        CUresult rc = batch3d_op(&ops[i], hs, ptds);
        if (rc != CUDA_SUCCESS) {
            if (fail)
                *fail = i;
            return rc;
        }
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpy3DBatchAsync(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                      unsigned long long flags, CUstream s)
{
    return batch3d(n, ops, fail, flags, s, 0);
}
CUresult CUDAAPI cuMemcpy3DBatchAsync_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, size_t *fail,
                                           unsigned long long flags, CUstream s)
{
    return batch3d(n, ops, fail, flags, s, 1);
}
CUresult CUDAAPI cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                         unsigned long long flags, CUstream s)
{
    return batch3d(n, ops, NULL, flags, s, 0);
}
CUresult CUDAAPI cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops,
                                              unsigned long long flags, CUstream s)
{
    return batch3d(n, ops, NULL, flags, s, 1);
}

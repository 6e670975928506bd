/*
 * test_simgpu_mem.c - simgpu's other memory in one process: stream-ordered
 * pools (reuse, release threshold, trim, attributes, created pools), graph
 * memory (allocation nodes, reserved until trimmed), CUDA
 * arrays (size from the descriptor, copies), texture and surface objects
 * over arrays and memory (the driver's checks), the VMM API (granularity,
 * handles charged to the device, reserve / map / access / unmap with data),
 * and managed-memory hints (modules' variables: test_simgpu_globals.c;
 * pinned host memory: test_simgpu_state.c).
 *
 * Every size is checked against cuMemGetInfo: the accounting is exact
 * (allocations in 512-byte granules, VMM handles by their size).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cu_procmap.h"
#include "lib/testutil.h"

/* test_simgpu_util.c */
extern CUcontext simt_ctx;
extern CUfunction simt_fill;
int simt_init(const char *tag);
uint64_t simt_free(void);
CUresult simt_fill_on(CUstream s, CUdeviceptr p, float v, unsigned long long n);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))
#define MiB (1ull << 20)
#define GiB (1ull << 30)

static cuuint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = 12345;
    CK(cuMemPoolGetAttribute(p, a, &v));
    return v;
}

/* ---- pools ------------------------------------------------------------------------------- */

static void test_pool_default(void **state)
{
    (void)state;
    CUmemoryPool def, cur;
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    CK(cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(def, cur);
    uint64_t f0 = simt_free();
    CUdeviceptr a, b;
    CK(cuMemAllocAsync(&a, MiB + 1, NULL));
    assert_int_equal(f0 - simt_free(), MiB + 512);
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), MiB + 512);
    CK(simt_fill_on(NULL, a, 1, 4));                /* usable as any device memory */
    CK(cuMemFreeAsync(a, NULL));
    /* Freed to the pool: still reserved, still charged to the device. */
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0);
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), MiB + 512);
    assert_int_equal(f0 - simt_free(), MiB + 512);
    CK(cuMemAllocAsync(&b, MiB, NULL));             /* reuses the cached block */
    assert_int_equal(b, a);
    CK(cuMemFreeAsync(b, NULL));
    /* A synchronize releases what exceeds the threshold (0 by default). */
    CK(cuStreamSynchronize(NULL));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(simt_free(), f0);
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), MiB + 512);
    CKE(cuMemFreeAsync(a, NULL), CUDA_ERROR_INVALID_VALUE);       /* freed already */
    CKE(cuMemAllocAsync(&a, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);         /* the default stays */
}

static void test_pool_threshold_and_trim(void **state)
{
    (void)state;
    CUmemoryPool def;
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    cuuint64_t keep = 64 * MiB, zero = 0;
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), keep);
    uint64_t f0 = simt_free();
    CUdeviceptr p[3];
    for (int i = 0; i < 3; i++)
        CK(cuMemAllocAsync(&p[i], 4 * MiB, NULL));
    for (int i = 0; i < 3; i++)
        CK(cuMemFreeAsync(p[i], NULL));
    CK(cuCtxSynchronize());                         /* 12 MiB < threshold: kept */
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 12 * MiB);
    assert_int_equal(f0 - simt_free(), 12 * MiB);
    CK(cuMemPoolTrimTo(def, 5 * MiB));              /* down to at most 5 MiB */
    assert_true(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) <= 5 * MiB);
    CK(cuMemPoolTrimTo(def, 0));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(simt_free(), f0);
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0);
    CKE(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &keep),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
        CUDA_ERROR_INVALID_VALUE);
    int reuse = 0;
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    CK(cuMemPoolGetAttribute(def, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse));
    assert_int_equal(reuse, 0);
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
}

static void test_pool_created(void **state)
{
    (void)state;
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool p, cur, def;
    CK(cuMemPoolCreate(&p, &props));
    uint64_t f0 = simt_free();
    CUdeviceptr a, b;
    CK(cuMemAllocFromPoolAsync(&a, 1000, p, NULL));
    assert_int_equal(f0 - simt_free(), 1024);
    CK(cuDeviceSetMemPool(0, p));
    CK(cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(cur, p);
    CK(cuMemAllocAsync(&b, 1000, NULL));            /* from the current pool */
    assert_int_equal(pool_attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 2048);
    CK(cuMemFree(a));                               /* cuMemFree takes pool memory too */
    CK(cuMemFreeAsync(b, NULL));
    CK(cuMemPoolDestroy(p));                        /* its cache goes back */
    assert_int_equal(simt_free(), f0);
    CK(cuDeviceGetMemPool(&cur, 0));
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    assert_ptr_equal(cur, def);
    CKE(cuMemAllocFromPoolAsync(&a, 1000, p, NULL), CUDA_ERROR_INVALID_VALUE);
    props.location.id = 3;
    CKE(cuMemPoolCreate(&p, &props), CUDA_ERROR_INVALID_DEVICE);
    props.location.id = 0;
    props.allocType = (CUmemAllocationType)0;
    CKE(cuMemPoolCreate(&p, &props), CUDA_ERROR_INVALID_VALUE);
}

/* A pool's cache counts against the device, and is given up before an
 * allocation from that pool fails. */
static void test_pool_cache_and_capacity(void **state)
{
    (void)state;
    CUmemoryPool def;
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    cuuint64_t keep = 32 * GiB;
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CUdeviceptr a, b;
    CK(cuMemAllocAsync(&a, 10 * GiB, NULL));
    CK(cuMemFreeAsync(a, NULL));
    CK(cuCtxSynchronize());                         /* kept: under the threshold */
    CKE(cuMemAlloc(&b, 10 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemAllocAsync(&b, 12 * GiB, NULL));        /* trims its cache, then fits */
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 12 * GiB);
    CK(cuMemFreeAsync(b, NULL));
    CK(cuMemPoolTrimTo(def, 0));
    cuuint64_t zero = 0;
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
}

/* A cached block reused for a bigger request of the same charge is that
 * request's size: every byte of it takes a memset and a copy (PyTorch's
 * backend:cudaMallocAsync frees 640 bytes and asks 864 again), and the
 * pointer's attributes say its size and its pool. */
static void test_pool_reuse_size(void **state)
{
    (void)state;
    CUmemoryPool def;
    CK(cuDeviceGetDefaultMemPool(&def, 0));
    cuuint64_t keep = GiB;
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    CUdeviceptr a, b;
    CK(cuMemAllocAsync(&a, 640, NULL));
    CK(cuMemFreeAsync(a, NULL));
    CK(cuMemAllocAsync(&b, 864, NULL));
    assert_true(b == a);                            /* the cached block (both 1024 charged) */
    CK(cuMemsetD8Async(b, 0x5a, 864, NULL));
    unsigned char out[864];
    CK(cuMemcpyDtoH(out, b, sizeof out));
    for (size_t i = 0; i < sizeof out; i++)
        assert_int_equal(out[i], 0x5a);
    size_t size = 0;
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, b));
    assert_int_equal(size, 864);
    CUmemoryPool of = NULL;
    CK(cuPointerGetAttribute(&of, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, b));
    assert_ptr_equal(of, def);
    CUdeviceptr plain;
    CK(cuMemAlloc(&plain, 64));
    of = def;
    CK(cuPointerGetAttribute(&of, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, plain));
    assert_null(of);                                /* not from a pool */
    CK(cuMemFree(plain));
    CK(cuMemFreeAsync(b, NULL));
    CK(cuMemPoolTrimTo(def, 0));
    cuuint64_t zero = 0;
    CK(cuMemPoolSetAttribute(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
}

/* ---- arrays ------------------------------------------------------------------------------ */

/* ---- graph memory ------------------------------------------------------------------------ */

static cuuint64_t graph_attr(CUgraphMem_attribute a)
{
    cuuint64_t v = 12345;
    CK(cuDeviceGetGraphMemAttribute(0, a, &v));
    return v;
}

/* An allocation node's memory is charged when it is made, used while a
 * graph or an executable graph holds it, reserved until a trim after. */
static void test_graph_memory(void **state)
{
    (void)state;
    CUgraph g;
    CUgraphNode alloc, fr;
    CUgraphExec x;
    CUDA_MEM_ALLOC_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.bytesize = 8 * MiB;
    uint64_t f0 = simt_free();
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p));
    assert_true(p.dptr != 0);
    assert_int_equal(f0 - simt_free(), 8 * MiB);
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 8 * MiB);
    CK(cuGraphAddMemFreeNode(&fr, g, &alloc, 1, p.dptr));
    CKE(cuGraphAddMemFreeNode(&fr, g, NULL, 0, p.dptr + 512), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphLaunch(x, NULL));
    CK(cuStreamSynchronize(NULL));
    CKE(cuMemFree(p.dptr), CUDA_ERROR_INVALID_VALUE);      /* the graph's, not ours */
    CK(cuGraphDestroy(g));
    CK(cuDeviceGraphMemTrim(0));                           /* the executable holds it */
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 8 * MiB);
    CK(cuGraphExecDestroy(x));
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0);
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
    assert_int_equal(f0 - simt_free(), 8 * MiB);           /* reserved until trimmed */
    CK(cuDeviceGraphMemTrim(0));
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 8 * MiB);
    assert_int_equal(simt_free(), f0);
    cuuint64_t zero = 0;
    CK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero));
    assert_int_equal(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 0);
}

static void test_arrays(void **state)
{
    (void)state;
    uint64_t f0 = simt_free();
    CUarray a, a3;
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 100, .Height = 50, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 4 };
    CK(cuArrayCreate(&a, &d));
    assert_int_equal(f0 - simt_free(), 80384);       /* 100 x 50 x 16 = 80000, in granules */
    CUDA_ARRAY_DESCRIPTOR back;
    CK(cuArrayGetDescriptor(&back, a));
    assert_true(back.Width == 100 && back.Height == 50 && back.NumChannels == 4 &&
                back.Format == CU_AD_FORMAT_FLOAT);
    CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = 30, .Height = 20, .Depth = 10,
                                   .Format = CU_AD_FORMAT_UNSIGNED_INT16, .NumChannels = 2 };
    CK(cuArray3DCreate(&a3, &d3));
    assert_int_equal(f0 - simt_free(), 80384 + 24064);  /* 30 x 20 x 10 x 2 x 2 = 24000 */
    CUDA_ARRAY3D_DESCRIPTOR back3;
    CK(cuArray3DGetDescriptor(&back3, a3));
    assert_true(back3.Depth == 10 && back3.NumChannels == 2);
    CKE(cuArrayGetDescriptor(&back, a3), CUDA_ERROR_INVALID_VALUE);   /* a 3D array */
    /* Bytes in and out, through 1D and 2D copies. */
    unsigned char in[1600], out[1600];
    for (int i = 0; i < 1600; i++)
        in[i] = (unsigned char)(i * 3);
    CK(cuMemcpyHtoA(a, 1600, in, sizeof in));       /* row 1 */
    CK(cuMemcpyAtoH(out, a, 1600, sizeof out));
    assert_memory_equal(in, out, sizeof in);
    CKE(cuMemcpyHtoA(a, 80000 - 10, in, 20), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a, .srcY = 1,
                        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out, .dstPitch = 16,
                        .WidthInBytes = 16, .Height = 2 };
    memset(out, 0, sizeof out);
    CK(cuMemcpy2D(&c));
    assert_memory_equal(out, in, 16);
    c.srcY = 49;                                    /* rows 49 and 50: past the array */
    CKE(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, 1600));
    CK(cuMemcpyAtoD(dev, a, 1600, 1600));
    memset(out, 0, sizeof out);
    CK(cuMemcpyDtoH(out, dev, 1600));
    assert_memory_equal(in, out, sizeof in);
    CK(cuMemFree(dev));
    CK(cuArrayDestroy(a));
    CK(cuArrayDestroy(a3));
    assert_int_equal(simt_free(), f0);
    CKE(cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    d.NumChannels = 3;
    CKE(cuArrayCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
    d.NumChannels = 1;
    d.Format = (CUarray_format)0x7;
    CKE(cuArrayCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
    d.Format = CU_AD_FORMAT_FLOAT;
    d.Width = 0;
    CKE(cuArrayCreate(&a, &d), CUDA_ERROR_INVALID_VALUE);
}

/* ---- VMM ------------------------------------------------------------------------------------ */

static CUmemAllocationProp vmm_prop(void)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
}

/* Texture and surface objects over arrays, linear and pitched memory, with
 * the driver's checks; their descriptions read back as given. */
static void test_texture_objects(void **state)
{
    (void)state;
    CUarray arr, surfarr;
    CUDA_ARRAY3D_DESCRIPTOR d = { .Width = 64, .Height = 32, .Format = CU_AD_FORMAT_FLOAT,
                                  .NumChannels = 4 };
    CK(cuArray3DCreate(&arr, &d));
    d.Flags = CUDA_ARRAY3D_SURFACE_LDST;
    CK(cuArray3DCreate(&surfarr, &d));
    CUdeviceptr mem;
    CK(cuMemAlloc(&mem, 1 << 20));
    CUDA_TEXTURE_DESC td = { .addressMode = { CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_WRAP },
                             .filterMode = CU_TR_FILTER_MODE_LINEAR,
                             .flags = CU_TRSF_NORMALIZED_COORDINATES, .maxAnisotropy = 4 };
    CUDA_RESOURCE_DESC ra = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = arr };
    CUDA_RESOURCE_DESC rl = { .resType = CU_RESOURCE_TYPE_LINEAR };
    rl.res.linear.devPtr = mem;
    rl.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT8;
    rl.res.linear.numChannels = 4;
    rl.res.linear.sizeInBytes = 1 << 20;
    CUDA_RESOURCE_DESC rp = { .resType = CU_RESOURCE_TYPE_PITCH2D };
    rp.res.pitch2D.devPtr = mem;
    rp.res.pitch2D.format = CU_AD_FORMAT_HALF;
    rp.res.pitch2D.numChannels = 2;
    rp.res.pitch2D.width = 1000;
    rp.res.pitch2D.height = 200;
    rp.res.pitch2D.pitchInBytes = 4096;
    CUDA_RESOURCE_VIEW_DESC view = { .format = CU_RES_VIEW_FORMAT_FLOAT_4X32, .width = 32,
                                     .height = 16 };

    CUtexObject ta, tl, tp;
    CK(cuTexObjectCreate(&ta, &ra, &td, &view));
    CK(cuTexObjectCreate(&tl, &rl, &td, NULL));
    CK(cuTexObjectCreate(&tp, &rp, &td, NULL));
    assert_true(ta && tl && tp && ta != tl && tl != tp);
    CUDA_RESOURCE_DESC rout;
    CUDA_TEXTURE_DESC tout;
    CUDA_RESOURCE_VIEW_DESC vout;
    CK(cuTexObjectGetResourceDesc(&rout, tp));
    assert_memory_equal(&rout, &rp, sizeof rp);
    CK(cuTexObjectGetResourceDesc(&rout, ta));
    assert_ptr_equal(rout.res.array.hArray, arr);
    CK(cuTexObjectGetTextureDesc(&tout, tl));
    assert_memory_equal(&tout, &td, sizeof td);
    CK(cuTexObjectGetResourceViewDesc(&vout, ta));
    assert_memory_equal(&vout, &view, sizeof view);
    CKE(cuTexObjectGetResourceDesc(NULL, ta), CUDA_ERROR_INVALID_VALUE);

    /* What the driver refuses. */
    CUtexObject t;
    CKE(cuTexObjectCreate(&t, &ra, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuTexObjectCreate(NULL, &ra, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuTexObjectCreate(&t, &rl, &td, &view), CUDA_ERROR_INVALID_VALUE); /* view: arrays */
    CUDA_RESOURCE_DESC bad = rl;
    bad.res.linear.devPtr = mem + 256;                  /* not texture-aligned */
    bad.res.linear.sizeInBytes = 4096;
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = rl;
    bad.res.linear.sizeInBytes = (1 << 20) + 512;       /* past the allocation */
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = rl;
    bad.res.linear.numChannels = 3;
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = rl;
    bad.flags = 1;
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = rp;
    bad.res.pitch2D.pitchInBytes = 4100;                /* not pitch-aligned */
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = rp;
    bad.res.pitch2D.width = 1100;                       /* wider than the pitch */
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = rp;
    bad.res.pitch2D.height = 300;                       /* rows past the allocation */
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad = ra;
    bad.res.array.hArray = (CUarray)(uintptr_t)0x1234;
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    bad.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
    CKE(cuTexObjectCreate(&t, &bad, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_TEXTURE_DESC badtd = td;
    badtd.addressMode[2] = (CUaddress_mode)7;
    CKE(cuTexObjectCreate(&t, &ra, &badtd, NULL), CUDA_ERROR_INVALID_VALUE);
    badtd = td;
    badtd.flags = 0x80;
    CKE(cuTexObjectCreate(&t, &ra, &badtd, NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_RESOURCE_VIEW_DESC bigview = view;
    bigview.width = 65;
    CKE(cuTexObjectCreate(&t, &ra, &td, &bigview), CUDA_ERROR_INVALID_VALUE);

    /* Surfaces: arrays made for load/store only. */
    CUsurfObject s;
    CUDA_RESOURCE_DESC rs = { .resType = CU_RESOURCE_TYPE_ARRAY, .res.array.hArray = surfarr };
    CK(cuSurfObjectCreate(&s, &rs));
    CK(cuSurfObjectGetResourceDesc(&rout, s));
    assert_ptr_equal(rout.res.array.hArray, surfarr);
    CUsurfObject s2;
    CKE(cuSurfObjectCreate(&s2, &ra), CUDA_ERROR_INVALID_VALUE);   /* no SURFACE_LDST */
    CKE(cuSurfObjectCreate(&s2, &rl), CUDA_ERROR_INVALID_VALUE);
    CKE(cuSurfObjectCreate(&s2, NULL), CUDA_ERROR_INVALID_VALUE);
    /* A texture is no surface, nor the other way round. */
    CKE(cuSurfObjectDestroy(ta), CUDA_ERROR_INVALID_VALUE);
    CKE(cuTexObjectDestroy(s), CUDA_ERROR_INVALID_VALUE);
    CK(cuSurfObjectDestroy(s));
    CKE(cuSurfObjectDestroy(s), CUDA_ERROR_INVALID_VALUE);
    CKE(cuSurfObjectGetResourceDesc(&rout, s), CUDA_ERROR_INVALID_VALUE);

    CK(cuTexObjectDestroy(ta));
    CK(cuTexObjectDestroy(tl));
    CK(cuTexObjectDestroy(tp));
    CKE(cuTexObjectDestroy(tp), CUDA_ERROR_INVALID_VALUE);
    CKE(cuTexObjectGetTextureDesc(&tout, tp), CUDA_ERROR_INVALID_VALUE);
    /* No context, no object. */
    CK(cuCtxSetCurrent(NULL));
    CKE(cuTexObjectCreate(&t, &ra, &td, NULL), CUDA_ERROR_INVALID_CONTEXT);
    CKE(cuSurfObjectCreate(&s2, &rs), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSetCurrent(simt_ctx));
    CK(cuArrayDestroy(arr));
    CK(cuArrayDestroy(surfarr));
    CK(cuMemFree(mem));
}

static void test_vmm_map_with_data(void **state)
{
    (void)state;
    CUmemAllocationProp prop = vmm_prop();
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    assert_int_equal(g, 2 * MiB);
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    assert_int_equal(g, 2 * MiB);
    uint64_t f0 = simt_free();
    CUmemGenericAllocationHandle h1, h2;
    CK(cuMemCreate(&h1, 2 * MiB, &prop, 0));
    CK(cuMemCreate(&h2, 4 * MiB, &prop, 0));
    assert_int_equal(f0 - simt_free(), 6 * MiB);
    CUdeviceptr va, va2;
    CK(cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    assert_int_equal(va % (2 * MiB), 0);
    CK(cuMemMap(va, 2 * MiB, 0, h1, 0));
    CK(cuMemMap(va + 2 * MiB, 4 * MiB, 0, h2, 0));
    CKE(cuMemMap(va, 2 * MiB, 0, h2, 0), CUDA_ERROR_INVALID_VALUE);  /* already mapped */
    /* No access yet: copies refuse it rather than fault. */
    char byte = 1;
    CKE(cuMemcpyHtoD(va, &byte, 1), CUDA_ERROR_INVALID_VALUE);
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(cuMemSetAccess(va, 6 * MiB, &acc, 1));
    unsigned long long flags = 0;
    CK(cuMemGetAccess(&flags, &acc.location, va + 3 * MiB));
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    /* One copy across the two mappings, and a kernel over both. */
    size_t n = 4096;
    char *in = malloc(n), *out = malloc(n);
    for (size_t i = 0; i < n; i++)
        in[i] = (char)(i * 13);
    CUdeviceptr edge = va + 2 * MiB - n / 2;
    CK(cuMemcpyHtoD(edge, in, n));
    CK(cuMemcpyDtoH(out, edge, n));
    assert_memory_equal(in, out, n);
    CK(simt_fill_on(NULL, va + 2 * MiB - 8, 2.0f, 4));
    float f[4];
    CK(cuMemcpyDtoH(f, va + 2 * MiB - 8, sizeof f));
    assert_true(f[0] == 2.0f && f[3] == 2.0f);
    CKE(cuMemcpyHtoD(va + 6 * MiB - 8, in, 16), CUDA_ERROR_INVALID_VALUE);  /* past the map */
    /* A second mapping of h1 shares its bytes. */
    CK(cuMemAddressReserve(&va2, 2 * MiB, 0, 0, 0));
    CK(cuMemMap(va2, 2 * MiB, 0, h1, 0));
    CK(cuMemSetAccess(va2, 2 * MiB, &acc, 1));
    CK(cuMemcpyDtoH(out, va2 + 2 * MiB - n / 2, n / 2));
    assert_memory_equal(in, out, n / 2 - 8);        /* then the two floats of the fill */
    assert_memory_equal(out + n / 2 - 8, f, 8);
    /* Retain from an address; release: the memory lives while mapped. */
    CUmemGenericAllocationHandle r;
    CUmemAllocationProp got;
    CK(cuMemRetainAllocationHandle(&r, (void *)(uintptr_t)(va + MiB)));
    assert_int_equal(r, h1);
    CK(cuMemGetAllocationPropertiesFromHandle(&got, r));
    assert_int_equal(got.location.id, 0);
    CK(cuMemRelease(r));
    CK(cuMemRelease(h1));
    CK(cuMemRelease(h2));
    assert_int_equal(f0 - simt_free(), 6 * MiB);
    CKE(cuMemUnmap(va, 3 * MiB), CUDA_ERROR_INVALID_VALUE);     /* not whole mappings */
    CKE(cuMemAddressFree(va, 8 * MiB), CUDA_ERROR_INVALID_VALUE);  /* still mapped */
    CK(cuMemUnmap(va, 6 * MiB));
    assert_int_equal(f0 - simt_free(), 2 * MiB);    /* h1 is still mapped at va2 */
    CK(cuMemUnmap(va2, 2 * MiB));
    assert_int_equal(simt_free(), f0);
    CKE(cuMemcpyDtoH(out, va, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAddressFree(va, 8 * MiB));
    CK(cuMemAddressFree(va2, 2 * MiB));
    free(in);
    free(out);
}

/* Paging's way: the same address backed by new physical memory after an
 * unmap and release, whose bytes are not the old ones, and no access until
 * it is set again. */
static void test_vmm_remap_same_address(void **state)
{
    (void)state;
    CUmemAllocationProp prop = vmm_prop();
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    uint64_t f0 = simt_free();
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr va;
    char in[256], out[256], zero[256] = { 0 };
    memset(in, 0x5a, sizeof in);
    CK(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0));
    CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    CK(cuMemMap(va, 2 * MiB, 0, h, 0));
    CK(cuMemSetAccess(va, 2 * MiB, &acc, 1));
    CK(cuMemcpyHtoD(va + MiB, in, sizeof in));
    CK(cuMemUnmap(va, 2 * MiB));
    CK(cuMemRelease(h));
    assert_int_equal(simt_free(), f0);              /* the memory went back */
    CKE(cuMemcpyDtoH(out, va + MiB, sizeof out), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemCreate(&h2, 2 * MiB, &prop, 0));
    CK(cuMemMap(va, 2 * MiB, 0, h2, 0));
    CKE(cuMemcpyDtoH(out, va + MiB, sizeof out), CUDA_ERROR_INVALID_VALUE);  /* no access */
    CK(cuMemSetAccess(va, 2 * MiB, &acc, 1));
    CK(cuMemcpyDtoH(out, va + MiB, sizeof out));
    assert_memory_equal(out, zero, sizeof out);     /* new memory, not the old bytes */
    CK(cuMemUnmap(va, 2 * MiB));
    CK(cuMemRelease(h2));
    CK(cuMemAddressFree(va, 2 * MiB));
    assert_int_equal(simt_free(), f0);
}

/* Pages of p..p+n that are resident (mincore: an anonymous page, or a
 * memfd's page in the page cache). */
static size_t resident_pages(const void *p, size_t n)
{
    size_t pages = (n + 4095) / 4096, count = 0;
    unsigned char *v = malloc(pages);
    assert_non_null(v);
    assert_int_equal(mincore((void *)p, n, v), 0);
    for (size_t i = 0; i < pages; i++)
        count += v[i] & 1;
    free(v);
    return count;
}

/* Large copies keep never-written memory unwritten (sparse.c): the bytes
 * are memmove's (a destination full of other bytes reads back zeros where
 * the source was never written), and the host pays RAM only for what was
 * written, both ways: device to pinned host memory and back to a new
 * handle, as paging does. */
static void test_sparse_copies(void **state)
{
    (void)state;
    const size_t n = 16 * MiB, k = 4096;
    CUmemAllocationProp prop = vmm_prop();
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr va, va2;
    CK(cuMemAddressReserve(&va, n, 0, 0, 0));
    CK(cuMemCreate(&h, n, &prop, 0));
    CK(cuMemMap(va, n, 0, h, 0));
    CK(cuMemSetAccess(va, n, &acc, 1));
    char *pat = malloc(k), *host = NULL, *out = malloc(n);
    for (size_t i = 0; i < k; i++)
        pat[i] = (char)(i * 7 + 1);
    CK(cuMemcpyHtoD(va + MiB, pat, k));                 /* one aligned page */
    CK(cuMemcpyHtoD(va + 9 * MiB + 100, pat, k));       /* straddling two */
    CK(cuMemAllocHost((void **)&host, n));
    memset(host, 0xaa, n);                              /* every page resident, not zero */
    CK(cuMemcpyDtoH(host, va, n));
    memset(out, 0, n);
    memcpy(out + MiB, pat, k);
    memcpy(out + 9 * MiB + 100, pat, k);
    /* Before any read of host (a read maps the zero page, which mincore
     * counts and the copy back would take for bytes). */
    assert_in_range(resident_pages(host, n), 3, 3 + 4);  /* the written pages, and edges */
    /* Back to new memory filled with other bytes first. */
    CK(cuMemAddressReserve(&va2, n, 0, 0, 0));
    CK(cuMemCreate(&h2, n, &prop, 0));
    CK(cuMemMap(va2, n, 0, h2, 0));
    CK(cuMemSetAccess(va2, n, &acc, 1));
    CK(cuMemsetD8(va2, 0x77, n));
    CK(cuMemcpyHtoD(va2, host, n));
    assert_in_range(resident_pages((void *)(uintptr_t)va2, n), 3, 3 + 4);
    assert_memory_equal(host, out, n);
    memset(out, 0x55, n);
    CK(cuMemcpyDtoH(out, va2, n));
    assert_memory_equal(out, host, n);
    CK(cuMemFreeHost(host));
    CK(cuMemUnmap(va, n));
    CK(cuMemUnmap(va2, n));
    CK(cuMemRelease(h));
    CK(cuMemRelease(h2));
    CK(cuMemAddressFree(va, n));
    CK(cuMemAddressFree(va2, n));
    free(pat);
    free(out);
}

/* A memset of zeros of 1 MiB or more gives whole pages back (sparse.c):
 * the bytes are memset's (zeros in the span, unaligned ends included, in
 * 8-, 16- and 32-bit forms and a contiguous 2D one; every byte around it
 * kept), and the span's inner pages cost the host no RAM afterwards. */
static void test_zero_memsets(void **state)
{
    (void)state;
    const size_t n = 8 * MiB, at = 100, len = 6 * MiB + 3 * 16;   /* 16 | len: the 2D form */
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n));
    unsigned char *out = malloc(n);
    assert_non_null(out);
    for (int form = 0; form < 4; form++) {
        CK(cuMemsetD8(p, 0xee, n));                     /* every page written */
        assert_int_equal(resident_pages((void *)(uintptr_t)p, n), n / 4096);
        if (form == 0)
            CK(cuMemsetD8(p + at, 0, len));
        else if (form == 1)
            CK(cuMemsetD16(p + at, 0, len / 2));
        else if (form == 2)
            CK(cuMemsetD32Async(p + at, 0, len / 4, NULL));
        else
            CK(cuMemsetD2D32(p + at, len / 4, 0, len / 16, 4));  /* pitch = row */
        CK(cuCtxSynchronize());
        /* The pages wholly inside the span were given back. */
        assert_in_range(resident_pages((void *)(uintptr_t)p, n), n / 4096 - len / 4096,
                        n / 4096 - len / 4096 + 2);
        CK(cuMemcpyDtoH(out, p, n));
        for (size_t i = 0; i < n; i++)
            if (out[i] != (i >= at && i < at + len ? 0 : 0xee))
                fail_msg("form %d: byte %zu is %#x", form, i, out[i]);
    }
    /* A value that is not zero writes bytes as before. */
    CK(cuMemsetD32(p, 0x01000000u, n / 4));
    CK(cuMemcpyDtoH(out, p, n));
    for (size_t i = 0; i < n; i++)
        if (out[i] != (i % 4 == 3 ? 1 : 0))
            fail_msg("byte %zu is %#x", i, out[i]);
    free(out);
    CK(cuMemFree(p));
}

static void test_vmm_errors(void **state)
{
    (void)state;
    CUmemAllocationProp prop = vmm_prop();
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    size_t g;
    CKE(cuMemCreate(&h, MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);    /* not a granule */
    CKE(cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemCreate(&h, 32 * GiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CKE(cuMemGetAllocationGranularity(&g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    prop.location.id = 4;
    CKE(cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    prop.location.id = 0;
    CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    int fd = -1;
    CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    assert_true(fd >= 0);
    CUmemGenericAllocationHandle imp;
    CK(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    CK(cuMemRelease(imp));
    close(fd);
    CK(cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
    CKE(cuMemMap(va + 4096, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  /* unaligned */
    CKE(cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);         /* past h */
    CKE(cuMemMap(va + 4 * MiB, 2 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  /* past va */
    CKE(cuMemMap(va, 2 * MiB, 0, (CUmemGenericAllocationHandle)77, 0), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuMemUnmap(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);               /* not mapped */
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CKE(cuMemSetAccess(va, 2 * MiB, &acc, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemRelease(h));
    CKE(cuMemRelease(h), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuMemAddressFree(va, 2 * MiB), CUDA_ERROR_INVALID_VALUE);         /* not its size */
    CK(cuMemAddressFree(va, 4 * MiB));
}

/* ---- managed memory hints ------------------------------------------------------------------ */

static void test_managed_hints(void **state)
{
    (void)state;
    /* The 8000 forms (a device ordinal) by version: cuda.h maps the names to
     * whichever its release prefers. */
    PFN_cuMemAdvise_v8000 advise = NULL;
    PFN_cuMemPrefetchAsync_v8000 prefetch = NULL;
    CK(cuGetProcAddress_v2("cuMemAdvise", (void **)&advise, 8000, 0, NULL));
    CK(cuGetProcAddress_v2("cuMemPrefetchAsync", (void **)&prefetch, 8000, 0, NULL));
    CUdeviceptr m, d;
    CK(cuMemAllocManaged(&m, 4 * MiB, CU_MEM_ATTACH_GLOBAL));
    CK(cuMemAlloc(&d, 4096));
    CK(advise(m, MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, 0));
    CK(advise(m, MiB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, CU_DEVICE_CPU));
    CKE(advise(d, 4096, CU_MEM_ADVISE_SET_READ_MOSTLY, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(advise(m, 8 * MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(advise(m, MiB, (CUmem_advise)99, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(advise(m, MiB, CU_MEM_ADVISE_SET_READ_MOSTLY, 5), CUDA_ERROR_INVALID_DEVICE);
    CK(prefetch(m, 4 * MiB, 0, NULL));          /* a transfer on the stream */
    CK(cuStreamSynchronize(NULL));
    CKE(prefetch(d, 4096, 0, NULL), CUDA_ERROR_INVALID_VALUE);
#ifdef CU_PARAMS_cuMemAdvise_v2
    PFN_cuMemAdvise_v12020 advise2 = NULL;
    CUmemLocation dev = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    CK(cuGetProcAddress_v2("cuMemAdvise", (void **)&advise2, 12020, 0, NULL));
    CK(advise2(m, MiB, CU_MEM_ADVISE_SET_ACCESSED_BY, dev));
#endif
    CK(cuMemFree(m));
    CK(cuMemFree(d));
}

int main(void)
{
    if (simt_init("simgpu-mem"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_default),
        cmocka_unit_test(test_pool_threshold_and_trim),
        cmocka_unit_test(test_pool_created),
        cmocka_unit_test(test_pool_cache_and_capacity),
        cmocka_unit_test(test_pool_reuse_size),
        cmocka_unit_test(test_graph_memory),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_texture_objects),
        cmocka_unit_test(test_vmm_map_with_data),
        cmocka_unit_test(test_vmm_remap_same_address),
        cmocka_unit_test(test_sparse_copies),
        cmocka_unit_test(test_zero_memsets),
        cmocka_unit_test(test_vmm_errors),
        cmocka_unit_test(test_managed_hints),
    };
    return cmocka_run_group_tests_name("simgpu memory", tests, NULL, NULL);
}

/*
 * asyncclient.c - a driver-API program for test_memory_async: which of its
 * stream-ordered allocations are mapped through VMM (libsalus's paging
 * serves them) and which are the driver's pools', run over simgpu with
 * two devices, with or without libsalus preloaded (SALUS_SWAP=on).
 *
 *   asyncclient
 *
 * Allocates with cuMemAllocAsync from the default pool (default), with
 * cuMemAllocFromPoolAsync from the default pool (frompool) and from a pool
 * it made (created), with cuMemAllocAsync while its pool is the current
 * one (current) and once the default pool is current again (restored),
 * during a stream capture (captured), once the default pool is shared
 * with the second device (shared), and before that through the per-thread
 * exports on the per-thread stream (ptsz: cuMemAllocAsync_ptsz, freed by
 * cuMemFreeAsync_ptsz, looked up as a program built for per-thread
 * default streams gets them).  Each allocation's bytes go through and
 * back, and the driver's queries answer its own base and size; the first
 * is freed by cuMemFreeAsync inside the capture and stays usable after
 * it.  Prints "async ok default=<1 if paging mapped it> frompool=..."
 * or what failed.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) { \
    printf("async failed: %s = %d\n", #x, (int)rc_); return 1; } } while (0)
#define TRUE(x) do { if (!(x)) { printf("async failed: %s\n", #x); return 1; } } while (0)

#define MiB (1ull << 20)

/* A stream-ordered allocation that names no pool is not the driver's
 * pools': libsalus's paging mapped it (it answers for its memory as for
 * cuMemAlloc's, with no allocation handle to retain, so the pool is what
 * tells the two apart). */
static int vmm(CUdeviceptr p)
{
    CUmemoryPool pool = NULL;
    if (cuPointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p) != CUDA_SUCCESS)
        return 0;
    return pool == NULL;
}

/* p holds n bytes of its own: the driver's range, and a round of bytes. */
static int one(CUdeviceptr p, size_t n, unsigned char seed)
{
    CUdeviceptr base = 0;
    size_t size = 0;
    CK(cuMemGetAddressRange_v2(&base, &size, p + n / 2));
    TRUE(base == p && size == n);
    unsigned char *h = malloc(n), *back = malloc(n);
    TRUE(h && back);
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned char)(i * 31 + seed);
    CK(cuMemcpyHtoD_v2(p, h, n));
    CK(cuMemcpyDtoH_v2(back, p, n));
    TRUE(memcmp(h, back, n) == 0);
    free(h);
    free(back);
    return 0;
}

int main(void)
{
    CUcontext ctx;
    CUstream s, cap;
    CUmemoryPool dflt, made;
    CUdeviceptr a, b, c, d, e, f, g;
    CUgraph graph;
    int v[8];
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    CK(cuDeviceGetDefaultMemPool(&dflt, 0));
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CK(cuMemPoolCreate(&made, &props));

    CK(cuMemAllocAsync(&a, 1000, NULL));
    CK(cuMemAllocFromPoolAsync(&b, 3 * MiB, dflt, s));
    CK(cuMemAllocFromPoolAsync(&c, 5000, made, s));
    CK(cuDeviceSetMemPool(0, made));
    CK(cuMemAllocAsync(&d, 1 * MiB, s));
    CK(cuDeviceSetMemPool(0, dflt));
    CK(cuMemAllocAsync(&e, 7000, s));
    CK(cuStreamSynchronize(s));
    v[0] = vmm(a), v[1] = vmm(b), v[2] = vmm(c), v[3] = vmm(d), v[5] = vmm(e);
    if (one(a, 1000, 1) || one(b, 3 * MiB, 2) || one(c, 5000, 3) || one(d, 1 * MiB, 4) ||
        one(e, 7000, 5))
        return 1;

    /* The per-thread forms, NULL naming the per-thread stream. */
    CUresult (*alloc_pt)(CUdeviceptr *, size_t, CUstream) =
        (CUresult (*)(CUdeviceptr *, size_t, CUstream))dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz");
    CUresult (*free_pt)(CUdeviceptr, CUstream) =
        (CUresult (*)(CUdeviceptr, CUstream))dlsym(RTLD_DEFAULT, "cuMemFreeAsync_ptsz");
    CUdeviceptr h;
    TRUE(alloc_pt && free_pt);
    CK(alloc_pt(&h, 5 * MiB, NULL));
    v[7] = vmm(h);
    if (one(h, 5 * MiB, 8))
        return 1;

    /* A capture: its allocation is the graph's, and a free of memory made
     * outside it does not take that memory away before the graph runs. */
    CK(cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemAllocAsync(&g, 2 * MiB, cap));
    v[4] = vmm(g);
    CK(cuMemFreeAsync(g, cap));
    CK(cuMemFreeAsync(a, cap));
    CK(cuStreamEndCapture(cap, &graph));
    if (one(a, 1000, 6))
        return 1;

    /* The default pool shared with device 1: its memory must be reachable
     * from there, which paging's is not. */
    CUmemAccessDesc acc[2] = {
        { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE },
        { { CU_MEM_LOCATION_TYPE_DEVICE, 1 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE } };
    CK(cuMemPoolSetAccess(dflt, acc, 2));
    CK(cuMemAllocAsync(&f, 4 * MiB, s));
    v[6] = vmm(f);
    if (one(f, 4 * MiB, 7))
        return 1;

    CK(cuMemFreeAsync(b, s));
    CK(cuMemFreeAsync(c, s));
    CK(cuMemFree_v2(d));
    CK(cuMemFree_v2(e));                 /* stream-ordered memory, freed plainly */
    CK(cuMemFreeAsync(f, NULL));
    CK(free_pt(h, NULL));
    CK(cuCtxSynchronize());
    TRUE(cuMemFree_v2(e) != CUDA_SUCCESS);   /* freed: the driver's answer */
    printf("async ok default=%d frompool=%d created=%d current=%d captured=%d restored=%d "
           "shared=%d ptsz=%d\n", v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
    return 0;
}

/*
 * vmmclient.c - a driver-API program for the paging tests
 * (test_memory_vmm), run with or without libsalus preloaded.
 *
 *   vmmclient malloc   prints "malloc <file>": the object that defines the
 *                      malloc this program calls (dlsym + dladdr)
 *   vmmclient alloc    over simgpu: small, big and pitched allocations, the
 *                      driver's answers about interior pointers, a round of
 *                      bytes through each, cudaMalloc's alignment (a
 *                      texture over the smallest), frees; prints one line
 *                      "alloc ok retain=<1 if an allocation handle could be
 *                      retained from its memory> types=<its allowed
 *                      shareable handle types>" or what differed
 */
#include <cuda.h>

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x) do { CUresult rc_ = (x); if (rc_ != CUDA_SUCCESS) { \
    printf("alloc failed: %s = %d\n", #x, (int)rc_); return 1; } } while (0)
#define TRUE(x) do { if (!(x)) { printf("alloc failed: %s\n", #x); return 1; } } while (0)

static int origin(void)
{
    Dl_info info;
    void *m = dlsym(RTLD_DEFAULT, "malloc");
    if (!m || !dladdr(m, &info) || !info.dli_fname)
        return 1;
    printf("malloc %s\n", info.dli_fname);
    return 0;
}

/* An allocation of n bytes: the driver's range of an interior pointer is
 * the allocation itself, and its bytes come back. */
static int one(CUdeviceptr p, size_t n, unsigned char seed)
{
    CUdeviceptr base = 0, start = 0;
    size_t size = 0, asize = 0;
    CK(cuMemGetAddressRange_v2(&base, &size, p + n / 2));
    TRUE(base == p && size == n);
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + n - 1));
    CK(cuPointerGetAttribute(&asize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 1));
    TRUE(start == p && asize == n);
    CUpointer_attribute attrs[2] = { CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                     CU_POINTER_ATTRIBUTE_RANGE_SIZE };
    void *data[2] = { &start, &asize };
    start = 0, asize = 0;
    CK(cuPointerGetAttributes(2, attrs, data, p + n / 3));
    TRUE(start == p && asize == n);
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

static int alloc(void)
{
    CUcontext ctx;
    CUdeviceptr a, b, big, pitched;
    size_t pitch = 0;
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc_v2(&a, 1000));
    CK(cuMemAlloc_v2(&b, 5000));
    CK(cuMemAlloc_v2(&big, 3 << 20));
    CK(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 100, 4));
    TRUE(pitch >= 1000);
    /* cudaMalloc's memory is aligned to at least 256 bytes (512 in
     * practice, the texture alignment), and a texture over linear memory
     * needs it. */
    TRUE(a % 512 == 0 && b % 512 == 0 && big % 512 == 0 && pitched % 512 == 0);
    static const size_t tiny[] = { 1, 8, 24, 100, 200, 513 };
    CUdeviceptr t[sizeof tiny / sizeof tiny[0]];
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        CK(cuMemAlloc_v2(&t[i], tiny[i]));
        TRUE(t[i] % 512 == 0);
    }
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++)
        CK(cuMemFree_v2(t[i]));
    CUDA_RESOURCE_DESC res = { .resType = CU_RESOURCE_TYPE_LINEAR };
    res.res.linear.devPtr = a;
    res.res.linear.format = CU_AD_FORMAT_FLOAT;
    res.res.linear.numChannels = 1;
    res.res.linear.sizeInBytes = 1000 / 4 * 4;
    CUDA_TEXTURE_DESC tex = { .filterMode = CU_TR_FILTER_MODE_POINT };
    CUtexObject to;
    CK(cuTexObjectCreate(&to, &res, &tex, NULL));
    CK(cuTexObjectDestroy(to));
    /* Ordinary memory has no allocation handle and no shareable handle
     * types: only memory the program mapped itself through VMM has. */
    CUmemGenericAllocationHandle h;
    int retain = cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)a) == CUDA_SUCCESS;
    if (retain)
        CK(cuMemRelease(h));
    unsigned long long types = ~0ull;
    CK(cuPointerGetAttribute(&types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, big + 4096));
    if (one(a, 1000, 1) || one(b, 5000, 2) || one(big, 3 << 20, 3) ||
        one(pitched, pitch * 100, 4))
        return 1;
    CK(cuMemFree_v2(a));
    CK(cuMemFree_v2(b));
    CK(cuMemFree_v2(big));
    CK(cuMemFree_v2(pitched));
    TRUE(cuMemFree_v2(a) != CUDA_SUCCESS);   /* freed: the driver's answer */
    printf("alloc ok retain=%d types=%llu\n", retain, types);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "malloc") == 0)
        return origin();
    if (argc == 2 && strcmp(argv[1], "alloc") == 0)
        return alloc();
    fprintf(stderr, "usage: vmmclient malloc|alloc\n");
    return 2;
}

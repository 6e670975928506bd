/*
 * fakecuda.c - a fake libcuda.so.1 for the tests of the interception layer
 * that need a driver to load but not a GPU: the loader (SALUS_REAL_LIBCUDA,
 * missing exports), the dlsym override, and child processes that must fail
 * cleanly.  It exports a handful of functions; everything else is absent, as
 * in a driver older than the program.  No state, no lock.
 */
/* Define exports under their exact names (cuMemAlloc is not cuMemAlloc_v2). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT CUresult cuInit(unsigned int flags)
{
    return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;
    return CUDA_SUCCESS;
}

/* Hands out addresses of a bump region: enough to tell allocations apart. */
FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size)
{
    static CUdeviceptr next = 0x100000;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    *dptr = next;
    next += (size + 0xfff) & ~(size_t)0xfff;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return dptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* An export of the same name in a non-driver sense: not wrapped, passed. */
FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int size)
{
    (void)size;
    if (dptr)
        *dptr = 0x1000;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                    unsigned int gz, unsigned int bx, unsigned int by,
                                    unsigned int bz, unsigned int shared, CUstream stream,
                                    void **params, void **extra)
{
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared;
    (void)stream; (void)params; (void)extra;
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status);

FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                      cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    void *fn = NULL;
    if (strcmp(symbol, "cuInit") == 0 && version >= 2000)
        fn = (void *)cuInit;
    else if (strcmp(symbol, "cuMemAlloc") == 0 && version >= 3020)
        fn = (void *)cuMemAlloc_v2;
    else if (strcmp(symbol, "cuMemAlloc") == 0 && version >= 2000)
        fn = (void *)cuMemAlloc;
    else if (strcmp(symbol, "cuLaunchKernel") == 0 && version >= 4000)
        fn = (void *)cuLaunchKernel;
    else if (strcmp(symbol, "cuGetProcAddress") == 0 && version >= 12000)
        fn = (void *)cuGetProcAddress_v2;
    else if (strcmp(symbol, "cuGetProcAddress") == 0 && version >= 11030)
        fn = (void *)cuGetProcAddress;
    *pfn = fn;
    if (status)
        *status = fn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

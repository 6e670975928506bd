/*
 * drvclient.c - a small driver-API program that reaches the driver through
 * one path at a time, for the interception tests over simgpu.
 *
 *   drvclient <mode> [<kernels.cubin>]
 *
 * Modes (how the functions are found):
 *   direct     linked to libcuda (built twice: as is, and with
 *              CUDA_API_PER_THREAD_DEFAULT_STREAM, where cuda.h names the
 *              _ptsz/_ptds exports);
 *   launchex   direct, launching with cuLaunchKernelEx;
 *   dlsym      dlopen("libcuda.so.1") and dlsym of the versioned names, as
 *              Python bindings do;
 *   getproc    dlsym "cuGetProcAddress_v2", its self-lookup at 12000, then
 *              every function at 12000 with flags 0, as the CUDA runtime does;
 *   getproc-pt the same with flags 2 (per-thread default stream);
 *   getproc11  dlsym "cuGetProcAddress" (4 arguments), its self-lookup at
 *              11030, then every function with flags 0.
 * Each mode does the same work: 4 allocations (1+2+3+4 MiB), 5 launches of
 * salus_spin(1000 ns), a stream sync, a context sync, a copy to the device
 * (not a wait) and one to the host (a wait), 4 frees.  It prints one JSON line
 * of what it did, for the test to hold libsalus's report against.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
#define PT_BUILD 1
#else
#define PT_BUILD 0
#endif

typedef CUresult (*gpa5_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*gpa4_t)(const char *, void **, int, cuuint64_t);

static struct api {
    CUresult (*Init)(unsigned int);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*ModuleLoad)(CUmodule *, const char *);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*LaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
    CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
} api;

/* name: the base name (cuGetProcAddress), export: the legacy versioned name
 * (dlsym), wrapped: whether libsalus wraps it. */
static const struct entry {
    const char *name, *export_name;
    void **slot;
    int wrapped;
} entries[] = {
    { "cuInit", "cuInit", (void **)&api.Init, 1 },
    { "cuDeviceGet", "cuDeviceGet", (void **)&api.DeviceGet, 0 },
    { "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", (void **)&api.DevicePrimaryCtxRetain, 1 },
    { "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", (void **)&api.DevicePrimaryCtxRelease, 1 },
    { "cuCtxSetCurrent", "cuCtxSetCurrent", (void **)&api.CtxSetCurrent, 0 },
    { "cuModuleLoad", "cuModuleLoad", (void **)&api.ModuleLoad, 1 },
    { "cuModuleGetFunction", "cuModuleGetFunction", (void **)&api.ModuleGetFunction, 0 },
    { "cuMemAlloc", "cuMemAlloc_v2", (void **)&api.MemAlloc, 1 },
    { "cuMemFree", "cuMemFree_v2", (void **)&api.MemFree, 1 },
    { "cuLaunchKernel", "cuLaunchKernel", (void **)&api.LaunchKernel, 1 },
    { "cuLaunchKernelEx", "cuLaunchKernelEx", (void **)&api.LaunchKernelEx, 1 },
    { "cuStreamSynchronize", "cuStreamSynchronize", (void **)&api.StreamSynchronize, 1 },
    { "cuCtxSynchronize", "cuCtxSynchronize", (void **)&api.CtxSynchronize, 1 },
    { "cuMemcpyHtoD", "cuMemcpyHtoD_v2", (void **)&api.MemcpyHtoD, 1 },
    { "cuMemcpyDtoH", "cuMemcpyDtoH_v2", (void **)&api.MemcpyDtoH, 1 },
};
#define N_ENTRIES (int)(sizeof entries / sizeof entries[0])

static int expect_wrapped, expect_passed;

static void fill_direct(void)
{
    api.Init = cuInit;
    api.DeviceGet = cuDeviceGet;
    api.DevicePrimaryCtxRetain = cuDevicePrimaryCtxRetain;
    api.DevicePrimaryCtxRelease = cuDevicePrimaryCtxRelease;
    api.CtxSetCurrent = cuCtxSetCurrent;
    api.ModuleLoad = cuModuleLoad;
    api.ModuleGetFunction = cuModuleGetFunction;
    api.MemAlloc = cuMemAlloc;
    api.MemFree = cuMemFree;
    api.LaunchKernel = cuLaunchKernel;
    api.LaunchKernelEx = cuLaunchKernelEx;
    api.StreamSynchronize = cuStreamSynchronize;
    api.CtxSynchronize = cuCtxSynchronize;
    api.MemcpyHtoD = cuMemcpyHtoD;
    api.MemcpyDtoH = cuMemcpyDtoH;
}

static void *open_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        fprintf(stderr, "drvclient: dlopen libcuda.so.1: %s\n", dlerror());
    return h;
}

static int fill_dlsym(void)
{
    void *h = open_driver();
    if (!h)
        return -1;
    for (int i = 0; i < N_ENTRIES; i++)
        *entries[i].slot = dlsym(h, entries[i].export_name);
    return 0;
}

/* The runtime's way: find the resolver, ask it for itself, then for all. */
static int fill_getproc(int five, cuuint64_t flags)
{
    void *h = open_driver();
    if (!h)
        return -1;
    void *self = NULL, *first = dlsym(h, five ? "cuGetProcAddress_v2" : "cuGetProcAddress");
    if (!first) {
        fprintf(stderr, "drvclient: no cuGetProcAddress in the driver\n");
        return -1;
    }
    CUdriverProcAddressQueryResult status;
    CUresult rc = five ? ((gpa5_t)first)("cuGetProcAddress", &self, 12000, 0, &status)
                       : ((gpa4_t)first)("cuGetProcAddress", &self, 11030, 0);
    if (rc != CUDA_SUCCESS || self != first) {
        fprintf(stderr, "drvclient: self-lookup gave %p (rc %d), dlsym %p\n", self, (int)rc, first);
        return -1;
    }
    expect_wrapped++;
    for (int i = 0; i < N_ENTRIES; i++) {
        rc = five ? ((gpa5_t)self)(entries[i].name, entries[i].slot, 12000, flags, &status)
                  : ((gpa4_t)self)(entries[i].name, entries[i].slot, 12000, flags);
        if (rc != CUDA_SUCCESS)
            return -1;
        if (entries[i].wrapped)
            expect_wrapped++;
        else
            expect_passed++;
    }
    /* A name no driver has: no function (the 4-argument form may say
     * CUDA_ERROR_NOT_FOUND), passed. */
    void *none = NULL;
    rc = five ? ((gpa5_t)self)("cuNoSuchFunction", &none, 12000, flags, &status)
              : ((gpa4_t)self)("cuNoSuchFunction", &none, 12000, flags);
    if ((rc != CUDA_SUCCESS && (five || rc != CUDA_ERROR_NOT_FOUND)) || none != NULL)
        return -1;
    expect_passed++;
    return 0;
}

#define CHECK(call)                                                                  \
    do {                                                                             \
        CUresult rc_ = (call);                                                       \
        if (rc_ != CUDA_SUCCESS) {                                                   \
            fprintf(stderr, "drvclient: %s failed: %d (line %d)\n", #call, (int)rc_, __LINE__); \
            return 5;                                                                \
        }                                                                            \
    } while (0)

static int work(const char *cubin, int use_ex, const char *launch_export, const char *mode)
{
    enum { N_ALLOC = 4, N_LAUNCH = 5 };
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUdeviceptr ptr[N_ALLOC];
    unsigned long long bytes = 0;
    static char host[4096];

    CHECK(api.Init(0));
    CHECK(api.DeviceGet(&dev, 0));
    CHECK(api.DevicePrimaryCtxRetain(&ctx, dev));
    CHECK(api.CtxSetCurrent(ctx));
    CHECK(api.ModuleLoad(&mod, cubin));
    CHECK(api.ModuleGetFunction(&fn, mod, "salus_spin"));
    for (int i = 0; i < N_ALLOC; i++) {
        size_t size = (size_t)(i + 1) << 20;
        CHECK(api.MemAlloc(&ptr[i], size));
        bytes += size;
    }
    unsigned long long ns = 1000;
    void *params[] = { &ns };
    for (int i = 0; i < N_LAUNCH; i++) {
        if (use_ex) {
            CUlaunchConfig config;
            memset(&config, 0, sizeof config);
            config.gridDimX = config.gridDimY = config.gridDimZ = 1;
            config.blockDimX = config.blockDimY = config.blockDimZ = 1;
            CHECK(api.LaunchKernelEx(&config, fn, params, NULL));
        } else {
            CHECK(api.LaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
        }
    }
    CHECK(api.StreamSynchronize(NULL));
    CHECK(api.CtxSynchronize());
    CHECK(api.MemcpyHtoD(ptr[0], host, sizeof host));
    CHECK(api.MemcpyDtoH(host, ptr[0], sizeof host));
    for (int i = 0; i < N_ALLOC; i++)
        CHECK(api.MemFree(ptr[i]));
    CHECK(api.DevicePrimaryCtxRelease(dev));
    printf("{\"mode\":\"%s\",\"launches\":%d,\"syncs\":3,\"allocs\":%d,\"frees\":%d,"
           "\"bytes\":%llu,\"expect_wrapped\":%d,\"expect_passed\":%d,"
           "\"launch_export\":\"%s\"}\n",
           mode, N_LAUNCH, N_ALLOC, N_ALLOC, bytes, expect_wrapped, expect_passed, launch_export);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *cubin = argc > 2 ? argv[2] : "kernels.cubin";
    int ok = 0, use_ex = 0, pt = PT_BUILD;
    if (strcmp(mode, "direct") == 0) {
        fill_direct();
    } else if (strcmp(mode, "launchex") == 0) {
        fill_direct();
        use_ex = 1;
    } else if (strcmp(mode, "dlsym") == 0) {
        ok = fill_dlsym();
    } else if (strcmp(mode, "getproc") == 0) {
        ok = fill_getproc(1, 0);
    } else if (strcmp(mode, "getproc-pt") == 0) {
        ok = fill_getproc(1, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
        pt = 1;
    } else if (strcmp(mode, "getproc11") == 0) {
        ok = fill_getproc(0, 0);
    } else {
        fprintf(stderr, "usage: drvclient direct|launchex|dlsym|getproc|getproc-pt|getproc11 "
                        "[kernels.cubin]\n");
        return 2;
    }
    if (ok != 0)
        return 4;
    for (int i = 0; i < N_ENTRIES; i++) {
        if (!*entries[i].slot) {
            fprintf(stderr, "drvclient: no %s\n", entries[i].name);
            return 4;
        }
    }
    const char *launch_export = use_ex ? (pt ? "cuLaunchKernelEx_ptsz" : "cuLaunchKernelEx")
                                       : (pt ? "cuLaunchKernel_ptsz" : "cuLaunchKernel");
    return work(cubin, use_ex, launch_export, mode);
}

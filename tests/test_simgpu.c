/*
 * test_simgpu.c - simgpu's driver API in one process: cuGetProcAddress,
 * devices, error names, contexts, memory and its accounting, copies and
 * memsets, modules (cubin, PTX, fatbin, garbage), launches and the emulated
 * kernels, bad handles and unimplemented calls.
 *
 * The time model, graphs, pools, arrays and VMM have their own binaries
 * (test_simgpu_exec, test_simgpu_mem); several processes, test_simgpu_mp;
 * the state and loading, test_simgpu_state.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <cudaProfiler.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_procmap.h"
#include "sim_errors.h"
#include "lib/testutil.h"

/* test_simgpu_util.c */
extern char simt_state[], simt_trace[];
extern CUcontext simt_ctx;
extern CUmodule simt_mod;
extern CUfunction simt_spin, simt_fill, simt_axpy;
int simt_init(const char *tag);
uint64_t simt_free(void);
CUresult simt_spin_on(CUstream s, unsigned long long ns);
CUresult simt_fill_on(CUstream s, CUdeviceptr p, float v, unsigned long long n);

/* simgpu implements the deprecated queries too: they are tested. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))
#define GiB (1ull << 30)

/* ---- cuGetProcAddress ----------------------------------------------------------- */

static void *self(const char *export)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *p = dlsym(h, export);
    dlclose(h);
    return p;
}

/* The 4-argument export, which cuda.h renames to the 5-argument one. */
static CUresult gpa4(const char *sym, void **pfn, int ver, cuuint64_t flags)
{
    PFN_cuGetProcAddress_v11030 fn = (PFN_cuGetProcAddress_v11030)self("cuGetProcAddress");
    assert_non_null(fn);
    return fn(sym, pfn, ver, flags);
}

/* cuCtxCreate_v2, whatever cuda.h maps cuCtxCreate to. */
static CUresult ctx_create(CUcontext *c, unsigned flags, CUdevice dev)
{
    PFN_cuCtxCreate_v3020 fn = NULL;
    if (cuGetProcAddress_v2("cuCtxCreate", (void **)&fn, 3020, 0, NULL) || !fn)
        return CUDA_ERROR_UNKNOWN;
    return fn(c, flags, dev);
}

static void expect_proc(const char *sym, int ver, cuuint64_t flags, const char *export)
{
    void *pfn = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    CK(cuGetProcAddress_v2(sym, &pfn, ver, flags, &st));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_non_null(pfn);
    if (pfn != self(export))
        fail_msg("%s@%d flags %llu is not %s", sym, ver, (unsigned long long)flags, export);
}

static void test_procaddress_examples(void **state)
{
    (void)state;
    expect_proc("cuMemAlloc", 3020, 0, "cuMemAlloc_v2");
    expect_proc("cuMemAlloc", 2000, 0, "cuMemAlloc");
    expect_proc("cuMemAlloc", 12000, 2, "cuMemAlloc_v2");     /* no per-thread variant */
    expect_proc("cuLaunchKernel", 12000, 2, "cuLaunchKernel_ptsz");
    expect_proc("cuLaunchKernel", 12000, 0, "cuLaunchKernel");
    expect_proc("cuLaunchKernel", 12000, 1, "cuLaunchKernel");
    expect_proc("cuLaunchKernel", 4000, 2, "cuLaunchKernel");  /* _ptsz came at 7000 */
    expect_proc("cuCtxSynchronize", 12000, 0, "cuCtxSynchronize");
#ifdef CU_PARAMS_cuCtxSynchronize_v2
    expect_proc("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
    expect_proc("cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2");
#endif
    expect_proc("cuMemcpyDtoH", 12000, 2, "cuMemcpyDtoH_v2_ptds");
    expect_proc("cuMemcpyDtoH", 12000, 0, "cuMemcpyDtoH_v2");
    expect_proc("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2");
    expect_proc("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    expect_proc("cuProfilerStart", 12000, 0, "cuProfilerStart");
    expect_proc("cuProfilerInitialize", 12000, 0, "cuProfilerInitialize");
    /* The graphics interop headers' entry points, by the same rule. */
    expect_proc("cuGLGetDevices", 12000, 0, "cuGLGetDevices_v2");
    expect_proc("cuGLGetDevices", 5000, 0, "cuGLGetDevices");
    expect_proc("cuGLMapBufferObject", 12000, 2, "cuGLMapBufferObject_v2_ptds");
    expect_proc("cuGLMapBufferObjectAsync", 12000, 0, "cuGLMapBufferObjectAsync_v2");
    expect_proc("cuEGLStreamConsumerConnectWithFlags", 12000, 0,
                "cuEGLStreamConsumerConnectWithFlags");
    expect_proc("cuVDPAUCtxCreate", 12000, 0, "cuVDPAUCtxCreate_v2");
    void *pfn = NULL;
    CK(cuGetProcAddress_v2("cuInit", &pfn, 12000, 0, NULL));   /* status is optional */
    assert_ptr_equal(pfn, self("cuInit"));
    /* The 4-argument form answers the same. */
    CK(gpa4("cuMemAlloc", &pfn, 3020, 0));
    assert_ptr_equal(pfn, self("cuMemAlloc_v2"));
}

static void test_procaddress_refusals(void **state)
{
    (void)state;
    void *pfn = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    CK(cuGetProcAddress_v2("cuMemAlloc", &pfn, 1000, 0, &st));
    assert_null(pfn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    pfn = (void *)1;
    CK(cuGetProcAddress_v2("cuNoSuchEntryPoint", &pfn, 12000, 0, &st));
    assert_null(pfn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CK(cuGetProcAddress_v2("cuMemAlloc_v2", &pfn, 12000, 0, &st));  /* exports aren't bases */
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CKE(gpa4("cuNoSuchEntryPoint", &pfn, 12000, 0), CUDA_ERROR_NOT_FOUND);
    CKE(gpa4("cuMemAlloc", &pfn, 1000, 0), CUDA_ERROR_NOT_FOUND);
    CKE(cuGetProcAddress_v2("cuMemAlloc", &pfn, CU_PROCMAP_HEADER_VERSION + 10, 0, &st),
        CUDA_ERROR_INVALID_VALUE);
    CKE(cuGetProcAddress_v2(NULL, &pfn, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGetProcAddress_v2("cuMemAlloc", NULL, 12000, 0, &st), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGetProcAddress_v2("cuMemAlloc", &pfn, 12000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    int v = 0;
    CK(cuDriverGetVersion(&v));
    assert_int_equal(v, CU_PROCMAP_HEADER_VERSION);
}

typedef struct row { const char *base; int version, per_thread; const char *export; } row_t;
#define ROW(base, version, per_thread, export) { #base, version, per_thread, #export },
static const row_t rows[] = { CU_PROCMAP(ROW) };

static void test_procaddress_every_row(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        void *pfn = NULL, *want = self(rows[i].export);
        CUdriverProcAddressQueryResult st = -1;
        CK(cuGetProcAddress_v2(rows[i].base, &pfn, rows[i].version,
                               rows[i].per_thread ? 2 : 0, &st));
        if (!want || pfn != want || st != CU_GET_PROC_ADDRESS_SUCCESS)
            fail_msg("%s@%d -> %p, dlsym(%s) = %p", rows[i].base, rows[i].version, pfn,
                     rows[i].export, want);
    }
    assert_int_equal(sizeof rows / sizeof rows[0], CU_PROCMAP_COUNT);
}

/* ---- devices and errors -------------------------------------------------------------- */

static void test_devices(void **state)
{
    (void)state;
    int n = 0, v = 0, major = 0, minor = 0;
    CUdevice d;
    char name[64], bus[32];
    CK(cuDeviceGetCount(&n));
    assert_int_equal(n, 1);
    CK(cuDeviceGet(&d, 0));
    CKE(cuDeviceGet(&d, 1), CUDA_ERROR_INVALID_DEVICE);
    CKE(cuDeviceGet(NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuDeviceGetName(name, sizeof name, 0));
    assert_non_null(strstr(name, "simgpu"));
    CK(cuDeviceComputeCapability(&major, &minor, 0));
    assert_int_equal(major * 10 + minor, 90);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    assert_int_equal(v, 132);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0));
    assert_int_equal(v, 32);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
    assert_int_equal(v, 9);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0));
    assert_int_equal(v, 1024);
    CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    assert_int_equal(v, 1);
    CKE(cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 7), CUDA_ERROR_INVALID_DEVICE);
    CKE(cuDeviceGetAttribute(NULL, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
    size_t total = 0;
    CK(cuDeviceTotalMem(&total, 0));
    assert_int_equal(total, 16 * GiB);
    CUuuid u1, u2;
    CK(cuDeviceGetUuid(&u1, 0));
    CK(cuDeviceGetUuid_v2(&u2, 0));
    assert_memory_equal(u1.bytes, u2.bytes, 16);
    CK(cuDeviceGetPCIBusId(bus, sizeof bus, 0));
    CK(cuDeviceGetByPCIBusId(&d, bus));
    assert_int_equal(d, 0);
    CUdevprop p;
    CK(cuDeviceGetProperties(&p, 0));
    assert_int_equal(p.SIMDWidth, 32);
}

#define ERR_ROW(name, value) { #name, value },
static const struct { const char *name; int value; } errors[] = { SIM_ERRORS(ERR_ROW) };

static void test_error_strings(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++) {
        const char *name = NULL, *str = NULL;
        CK(cuGetErrorName((CUresult)errors[i].value, &name));
        assert_string_equal(name, errors[i].name);
        CK(cuGetErrorString((CUresult)errors[i].value, &str));
        assert_non_null(str);
        assert_true(strlen(str) > 3);
    }
    const char *s = "x";
    CKE(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    s = "x";
    CKE(cuGetErrorString((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
    CK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    assert_string_equal(s, "invalid argument");
    CK(cuGetErrorString(CUDA_ERROR_ILLEGAL_INSTRUCTION, &s));
    assert_string_equal(s, "illegal instruction");
}

/* ---- contexts ------------------------------------------------------------------------- */

static void test_context_stack(void **state)
{
    (void)state;
    CUcontext a, b, cur, popped;
    CUdevice dev = -1;
    unsigned flags = 99, api = 0;
    CK(cuCtxPopCurrent(&popped));       /* an empty stack to start with */
    assert_ptr_equal(popped, simt_ctx);
    CK(ctx_create(&a, CU_CTX_SCHED_BLOCKING_SYNC, 0));    /* pushed */
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    CK(cuCtxGetFlags(&flags));
    assert_int_equal(flags, CU_CTX_SCHED_BLOCKING_SYNC);
    CK(ctx_create(&b, 0, 0));
    assert_ptr_not_equal(a, b);
    CK(cuCtxPopCurrent(&popped));
    assert_ptr_equal(popped, b);
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    CK(cuCtxPushCurrent(b));
    CK(cuCtxGetDevice(&dev));
    assert_int_equal(dev, 0);
    CK(cuCtxGetApiVersion(b, &api));
    assert_int_equal(api, 3020);
    unsigned long long ida = 0, idb = 0;
    CK(cuCtxGetId(a, &ida));
    CK(cuCtxGetId(b, &idb));
    assert_true(ida && idb && ida != idb);
    size_t lim = 0;
    CK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));
    CK(cuCtxGetLimit(&lim, CU_LIMIT_STACK_SIZE));
    assert_int_equal(lim, 4096);
    int least = 1, greatest = 1;
    CK(cuCtxGetStreamPriorityRange(&least, &greatest));
    assert_true(least == 0 && greatest < 0);
    CK(cuCtxDestroy(b));                /* current: popped too */
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    CKE(cuCtxPushCurrent(b), CUDA_ERROR_INVALID_CONTEXT);   /* stale */
    CKE(cuCtxDestroy(b), CUDA_ERROR_INVALID_CONTEXT);
    /* cuCtxDetach (CUDA 2.0, PyCUDA's) destroys a created context. */
    CK(ctx_create(&b, 0, 0));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    CK(cuCtxDetach(b));
    CKE(cuCtxDetach(b), CUDA_ERROR_INVALID_CONTEXT);
#pragma GCC diagnostic pop
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    CKE(ctx_create(&b, 0x1000, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(ctx_create(&b, 0, 3), CUDA_ERROR_INVALID_DEVICE);
    CK(cuCtxSetCurrent(NULL));          /* pops a */
    CK(cuCtxDestroy(a));
    CK(cuCtxGetCurrent(&cur));
    assert_null(cur);
    /* No current context. */
    CUdeviceptr p;
    size_t f, t;
    CKE(cuMemAlloc(&p, 1024), CUDA_ERROR_INVALID_CONTEXT);
    CKE(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    CKE(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    CKE(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
    CKE(simt_spin_on(NULL, 1), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSetCurrent(simt_ctx));
}

static void test_primary_ctx(void **state)
{
    (void)state;
    CUcontext p;
    unsigned flags;
    int active = 0;
    CK(cuDevicePrimaryCtxRetain(&p, 0));
    assert_ptr_equal(p, simt_ctx);      /* one primary context per device */
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 1);
    CK(cuDevicePrimaryCtxRelease(0));   /* still retained once */
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 1);
    CK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_YIELD));
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(flags, CU_CTX_SCHED_YIELD);
    CKE(cuDevicePrimaryCtxRetain(&p, 5), CUDA_ERROR_INVALID_DEVICE);
    CKE(cuCtxDestroy(simt_ctx), CUDA_ERROR_INVALID_CONTEXT);  /* not by cuCtxDestroy */
}

/* ---- memory --------------------------------------------------------------------------- */

static void test_memory_accounting(void **state)
{
    (void)state;
    CUdeviceptr a, b, c;
    uint64_t f0 = simt_free();
    CK(cuMemAlloc(&a, 1));
    assert_int_equal(f0 - simt_free(), 512);     /* the granule */
    CK(cuMemAlloc(&b, 513));
    assert_int_equal(f0 - simt_free(), 512 + 1024);
    CK(cuMemAlloc(&c, 3 << 20));                 /* mmap-backed */
    assert_int_equal(f0 - simt_free(), 512 + 1024 + (3 << 20));
    assert_int_equal(a % 256, 0);
    CUdeviceptr base;
    size_t size;
    CK(cuMemGetAddressRange(&base, &size, b + 100));
    assert_true(base == b && size == 513);
    CKE(cuMemGetAddressRange(&base, &size, b + 513), CUDA_ERROR_NOT_FOUND);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    assert_int_equal(simt_free(), f0);
    CKE(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);             /* twice */
    CK(cuMemFree(0));                                        /* cudaFree(0) */
    CKE(cuMemAlloc(&a, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemAlloc(&a, 17 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(simt_free(), f0);
    /* The whole capacity, exactly, and not a granule more. */
    CK(cuMemAlloc(&a, f0));
    CKE(cuMemAlloc(&b, 1), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemFree(a));
    size_t pitch;
    CK(cuMemAllocPitch(&a, &pitch, 1000, 10, 4));
    assert_int_equal(pitch, 1024);
    assert_int_equal(f0 - simt_free(), 10240);
    CK(cuMemFree(a));
    CKE(cuMemAllocPitch(&a, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAllocManaged(&a, 4096, CU_MEM_ATTACH_GLOBAL));
    int managed = 0;
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
    assert_int_equal(managed, 1);
    CK(cuMemFree(a));
    CKE(cuMemAllocManaged(&a, 4096, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(simt_free(), f0);
}

static void test_host_memory(void **state)
{
    (void)state;
    uint64_t f0 = simt_free();
    void *h;
    CUdeviceptr d;
    unsigned flags = 0;
    CK(cuMemAllocHost(&h, 1 << 16));
    CK(cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    assert_int_equal(simt_free(), f0);          /* host memory is not device memory */
    CK(cuMemHostGetFlags(&flags, h));
    assert_int_equal(flags, CU_MEMHOSTALLOC_DEVICEMAP);
    CK(cuMemHostGetDevicePointer(&d, h, 0));
    assert_int_equal(d, (CUdeviceptr)(uintptr_t)h);
    unsigned type = 0;
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    assert_int_equal(type, CU_MEMORYTYPE_HOST);
    CK(cuMemFreeHost(h));
    CKE(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    char *buf = malloc(8192);
    CK(cuMemHostRegister(buf, 8192, 0));
    CKE(cuMemHostRegister(buf + 100, 10, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CK(cuMemHostUnregister(buf));
    CKE(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CKE(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                              (CUdeviceptr)(uintptr_t)buf), CUDA_ERROR_INVALID_VALUE);
    free(buf);
}

static void test_copies_and_memsets(void **state)
{
    (void)state;
    enum { N = 4096 };
    unsigned char in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = (unsigned char)(i * 7);
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, N));
    CK(cuMemAlloc(&b, N));
    CK(cuMemcpyHtoD(a, in, N));
    CK(cuMemcpyDtoD(b, a, N));
    memset(out, 0, N);
    CK(cuMemcpyDtoH(out, b, N));
    assert_memory_equal(in, out, N);
    CK(cuMemcpyHtoDAsync(a, in + 1, N - 1, NULL));
    CK(cuMemcpyDtoHAsync(out, a, N - 1, NULL));
    CK(cuStreamSynchronize(NULL));
    assert_memory_equal(in + 1, out, N - 1);
    CK(cuMemcpy((CUdeviceptr)(uintptr_t)out, a, 16));      /* unified: device -> host */
    /* Out of the allocation: refused, nothing written. */
    CKE(cuMemcpyHtoD(a + 1, in, N), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemcpyDtoH(out, a + N, 1), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemcpyHtoD(0x1000, in, 8), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemcpyDtoH(NULL, a, 8), CUDA_ERROR_INVALID_VALUE);
    /* Memsets. */
    CK(cuMemsetD8(a, 0xab, N));
    CK(cuMemcpyDtoH(out, a, N));
    for (int i = 0; i < N; i++)
        assert_int_equal(out[i], 0xab);
    CK(cuMemsetD32(a, 0x01020304, N / 4));
    uint32_t w;
    CK(cuMemcpyDtoH(&w, a + 8, 4));
    assert_int_equal(w, 0x01020304);
    CK(cuMemsetD16Async(a, 0xbeef, 2, NULL));
    uint16_t h;
    CK(cuMemcpyDtoH(&h, a + 2, 2));
    assert_int_equal(h, 0xbeef);
    CKE(cuMemsetD32(a + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);  /* misaligned */
    CKE(cuMemsetD8(a, 0, N + 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemsetD2D8(a, 64, 0x11, 16, 8));          /* 8 rows of 16 in a pitch of 64 */
    CK(cuMemcpyDtoH(out, a, 64 * 8));
    assert_int_equal(out[0], 0x11);
    assert_int_equal(out[15], 0x11);
    assert_int_equal(out[16], 0x04);               /* untouched D32 pattern */
    assert_int_equal(out[7 * 64 + 15], 0x11);
    /* 2D copy: a 16 x 4 window of host rows into the pitched buffer. */
    CUDA_MEMCPY2D c = { .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = in, .srcPitch = 100,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = b,
                        .dstPitch = 64, .dstXInBytes = 8, .WidthInBytes = 16, .Height = 4 };
    CK(cuMemcpy2D(&c));
    CK(cuMemcpyDtoH(out, b, 256));
    assert_memory_equal(out + 8, in, 16);
    assert_memory_equal(out + 3 * 64 + 8, in + 300, 16);
    c.Height = 100;                                /* past the allocation */
    CKE(cuMemcpy2D(&c), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D c3 = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = b,
                         .srcPitch = 64, .srcHeight = 4, .dstMemoryType = CU_MEMORYTYPE_HOST,
                         .dstHost = out, .dstPitch = 64, .dstHeight = 4,
                         .WidthInBytes = 64, .Height = 4, .Depth = 2 };
    memset(out, 0, N);
    CK(cuMemcpy3D(&c3));
    assert_memory_equal(out + 8, in, 16);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
}

/* ---- modules --------------------------------------------------------------------------- */

static void expect_layout(CUfunction f, int n, const size_t *off, const size_t *size)
{
#ifndef CU_PARAMS_cuFuncGetParamInfo       /* before CUDA 12.4 */
    (void)f, (void)n, (void)off, (void)size;
#else
    for (int i = 0; i < n; i++) {
        size_t o = 99, s = 99;
        CK(cuFuncGetParamInfo(f, i, &o, &s));
        assert_int_equal(o, off[i]);
        assert_int_equal(s, size[i]);
    }
    CKE(cuFuncGetParamInfo(f, n, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
#endif
}

static void check_module(CUmodule m)
{
    CUfunction spin, fill, axpy;
    CK(cuModuleGetFunction(&spin, m, "salus_spin"));
    CK(cuModuleGetFunction(&fill, m, "salus_fill"));
    CK(cuModuleGetFunction(&axpy, m, "salus_axpy"));
    CKE(cuModuleGetFunction(&spin, m, "salus_nope"), CUDA_ERROR_NOT_FOUND);
    CKE(cuModuleGetFunction(&spin, m, NULL), CUDA_ERROR_INVALID_VALUE);
    expect_layout(spin, 1, (size_t[]){ 0 }, (size_t[]){ 8 });
    expect_layout(fill, 3, (size_t[]){ 0, 8, 16 }, (size_t[]){ 8, 4, 8 });
    expect_layout(axpy, 4, (size_t[]){ 0, 8, 16, 24 }, (size_t[]){ 8, 8, 4, 8 });
#ifdef CU_PARAMS_cuModuleGetFunctionCount
    unsigned count = 0;
    CK(cuModuleGetFunctionCount(&count, m));
    assert_int_equal(count, 3);
#endif
    /* The emulated kernels compute: y = 3 + 0.5 * 2. */
    enum { N = 1000 };
    CUdeviceptr x, y;
    float two = 2, three = 3, a = 0.5f, out[N];
    unsigned long long n = N;
    CK(cuMemAlloc(&x, N * 4));
    CK(cuMemAlloc(&y, N * 4));
    void *fx[] = { &x, &two, &n }, *fy[] = { &y, &three, &n }, *ax[] = { &y, &x, &a, &n };
    CK(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, NULL, fx, NULL));
    CK(cuLaunchKernel(fill, 4, 1, 1, 256, 1, 1, 0, NULL, fy, NULL));
    CK(cuLaunchKernel(axpy, 4, 1, 1, 256, 1, 1, 0, NULL, ax, NULL));
    CK(cuMemcpyDtoH(out, y, sizeof out));
    for (int i = 0; i < N; i++)
        assert_true(out[i] == 4.0f);
    CK(cuMemFree(x));
    CK(cuMemFree(y));
}

static void test_module_cubin(void **state)
{
    (void)state;
    char path[512];
    CUmodule m;
    int regs = 0, threads = 0;
    CK(cuModuleLoad(&m, tu_build_path("workloads/kernels.cubin", path, sizeof path)));
    check_module(m);
    CUfunction f;
    CK(cuModuleGetFunction(&f, m, "salus_axpy"));
    CK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    assert_true(regs > 0);
    CK(cuFuncGetAttribute(&threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    assert_int_equal(threads, 1024);
    CKE(cuFuncGetAttribute(&regs, (CUfunction_attribute)999, f), CUDA_ERROR_INVALID_VALUE);
    /* The old launch state that PyCUDA sets before each cuLaunchKernel. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    CK(cuFuncSetBlockShape(f, 256, 1, 1));
    CKE(cuFuncSetBlockShape(f, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuFuncSetSharedSize(f, 0));
    CK(cuModuleUnload(m));
    CKE(cuFuncSetBlockShape(f, 256, 1, 1), CUDA_ERROR_INVALID_HANDLE);
#pragma GCC diagnostic pop
    CKE(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f), CUDA_ERROR_INVALID_HANDLE);
    unsigned long long ns = 1;
    void *args[] = { &ns };
    CKE(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuModuleLoad(&m, "/nonexistent/kernels.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
}

static void test_module_ptx(void **state)
{
    (void)state;
    char path[512];
    char *ptx = tu_read_file(tu_build_path("workloads/kernels.ptx", path, sizeof path), NULL);
    assert_non_null(ptx);
    CUmodule m;
    char log[64] = "junk";
    float wall = -1;
    CUjit_option opts[] = { CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                            CU_JIT_WALL_TIME, CU_JIT_OPTIMIZATION_LEVEL };
    void *vals[] = { log, (void *)(uintptr_t)sizeof log, NULL, (void *)(uintptr_t)3 };
    CK(cuModuleLoadDataEx(&m, ptx, 4, opts, vals));
    memcpy(&wall, &vals[2], sizeof wall);
    assert_string_equal(log, "");
    assert_true(wall == 0.0f);
    check_module(m);
    CK(cuModuleUnload(m));
    CK(cuModuleLoadData(&m, ptx));
    CK(cuModuleUnload(m));
    free(ptx);
}

static void test_module_fatbin_and_library(void **state)
{
    (void)state;
    char path[512];
    size_t len;
    char *cubin = tu_read_file(tu_build_path("workloads/kernels.cubin", path, sizeof path),
                               &len);
    assert_non_null(cubin);
    /* A fatbin as nvcc lays it out: header, one ELF entry for sm_90. */
    size_t plen = (len + 7) & ~(size_t)7, total = 16 + 64 + plen;
    unsigned char *fb = calloc(1, total);
    uint32_t magic = 0xba55ed50u, u32;
    uint16_t u16;
    uint64_t u64;
    memcpy(fb, &magic, 4);
    u16 = 1; memcpy(fb + 4, &u16, 2);
    u16 = 16; memcpy(fb + 6, &u16, 2);
    u64 = 64 + plen; memcpy(fb + 8, &u64, 8);
    u16 = 2; memcpy(fb + 16, &u16, 2);
    u32 = 64; memcpy(fb + 20, &u32, 4);
    u64 = plen; memcpy(fb + 24, &u64, 8);
    u32 = 90; memcpy(fb + 16 + 28, &u32, 4);
    u64 = 0x11; memcpy(fb + 16 + 40, &u64, 8);
    memcpy(fb + 80, cubin, len);
    CUmodule m;
    CK(cuModuleLoadData(&m, fb));
    check_module(m);
    CK(cuModuleUnload(m));
    struct { int magic, version; const void *data; void *unused; } wrapper =
        { 0x466243b1, 1, fb, NULL };
    CK(cuModuleLoadFatBinary(&m, &wrapper));
    CK(cuModuleUnload(m));
    /* Libraries: a CUkernel launches as a CUfunction. */
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    CK(cuLibraryLoadData(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, "salus_spin"));
    CK(cuKernelGetFunction(&f, k));
    CKE(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    unsigned long long ns = 1000;
    void *args[] = { &ns };
    CK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CKE(cuModuleUnload((CUmodule)lib), CUDA_ERROR_INVALID_HANDLE);  /* not a module */
    CK(cuLibraryUnload(lib));
    free(fb);
    free(cubin);
}

static void test_module_garbage(void **state)
{
    (void)state;
    CUmodule m;
    char text[] = "hello, this is not PTX";
    unsigned char bin[256];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (unsigned char)(i * 37 + 11);
    bin[sizeof bin - 1] = 0;
    unsigned char elf[128] = { 0x7f, 'E', 'L', 'F', 2, 1, 1 };
    memset(elf + 7, 0xee, sizeof elf - 7);
    CKE(cuModuleLoadData(&m, text), CUDA_ERROR_INVALID_IMAGE);
    CKE(cuModuleLoadData(&m, bin), CUDA_ERROR_INVALID_IMAGE);
    CKE(cuModuleLoadData(&m, elf), CUDA_ERROR_INVALID_IMAGE);
    CKE(cuModuleLoadData(&m, ".version 9.0\n.entry (\n"), CUDA_ERROR_INVALID_IMAGE);
    CKE(cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuModuleLoadData(NULL, text), CUDA_ERROR_INVALID_VALUE);
    char path[512];
    CKE(cuModuleLoad(&m, tu_build_path("tests/test_simgpu", path, sizeof path)),
        CUDA_ERROR_INVALID_IMAGE);      /* a host ELF is no cubin */
}

/* ---- launches ----------------------------------------------------------------------------- */

static void test_launch_checks(void **state)
{
    (void)state;
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4096));
    float v = 1.5f, out[4];
    unsigned long long n = 4;
    /* Parameters through `extra`: the packed buffer, as the device sees it. */
    struct { CUdeviceptr p; float v; unsigned pad; unsigned long long n; } buf = { p, v, 0, n };
    size_t size = sizeof buf;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    CK(cuLaunchKernel(simt_fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    CK(cuMemcpyDtoH(out, p, sizeof out));
    assert_true(out[0] == 1.5f && out[3] == 1.5f);
    void *args[] = { &p, &v, &n };
    CKE(cuLaunchKernel(simt_fill, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel(simt_fill, 1, 1, 1, 32, 1, 1, 0, NULL, args, extra), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel(simt_fill, 0, 1, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel(simt_fill, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel(simt_fill, 1, 70000, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchKernel(simt_fill, 1, 1, 1, 1, 1, 1, 1 << 20, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    /* A kernel writing out of its buffer: refused, nothing written, no fault. */
    n = 2048;
    CKE(cuLaunchKernel(simt_fill, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUdeviceptr bogus = 0x10;
    void *bad[] = { &bogus, &v, &n };
    CKE(cuLaunchKernel(simt_fill, 1, 1, 1, 32, 1, 1, 0, NULL, bad, NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* cuLaunchKernelEx, with attributes. */
    n = 4;
    v = 7;
    CUlaunchAttribute attr = { .id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION };
    attr.value.clusterDim.x = 2;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg = { .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 32,
                           .blockDimY = 1, .blockDimZ = 1, .attrs = &attr, .numAttrs = 1 };
    CK(cuLaunchKernelEx(&cfg, simt_fill, args, NULL));
    CK(cuMemcpyDtoH(out, p, sizeof out));
    assert_true(out[2] == 7.0f);
    cfg.gridDimX = 3;                   /* not a multiple of the cluster */
    CKE(cuLaunchKernelEx(&cfg, simt_fill, args, NULL), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    CKE(cuLaunchKernelEx(NULL, simt_fill, args, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuLaunchCooperativeKernel(simt_fill, 132, 1, 1, 256, 1, 1, 0, NULL, args));
    CKE(cuLaunchCooperativeKernel(simt_fill, 100000, 1, 1, 1024, 1, 1, 0, NULL, args),
        CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    CK(cuCtxSynchronize());
    CK(cuMemFree(p));
}

/* ---- bad handles and unimplemented calls ---------------------------------------------------- */

static void test_bad_handles(void **state)
{
    (void)state;
    CUstream s;
    CUevent e;
    CK(cuStreamCreate(&s, 0));
    CK(cuStreamDestroy(s));
    CKE(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    CKE(simt_spin_on(s, 1), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventCreate(&e, 0));
    CK(cuEventDestroy(e));
    CKE(cuEventRecord(e, NULL), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
    /* Forged values, including a pointer to real memory: refused, never read. */
    int local = 0;
    void *forged[] = { (void *)0x1234, &local, (void *)~(uintptr_t)0, (void *)(uintptr_t)simt_mod };
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++) {
        CKE(cuStreamQuery((CUstream)forged[i]), CUDA_ERROR_INVALID_HANDLE);
        CKE(cuEventSynchronize((CUevent)forged[i]), CUDA_ERROR_INVALID_HANDLE);
        CKE(cuCtxPushCurrent((CUcontext)forged[i]), CUDA_ERROR_INVALID_CONTEXT);
        CKE(cuLaunchKernel((CUfunction)forged[i], 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
            CUDA_ERROR_INVALID_HANDLE);
        CKE(cuArrayDestroy((CUarray)forged[i]), CUDA_ERROR_INVALID_HANDLE);
        CKE(cuMemRelease((CUmemGenericAllocationHandle)(uintptr_t)forged[i]),
            CUDA_ERROR_INVALID_HANDLE);
    }
    CKE(cuModuleUnload((CUmodule)(uintptr_t)simt_spin), CUDA_ERROR_INVALID_HANDLE);
}

static void test_unimplemented(void **state)
{
    (void)state;
    CUmipmappedArray mm;
    CUDA_ARRAY3D_DESCRIPTOR md = { .Width = 64, .Height = 64, .Format = CU_AD_FORMAT_FLOAT,
                                   .NumChannels = 1 };
    CKE(cuMipmappedArrayCreate(&mm, &md, 4), CUDA_ERROR_NOT_SUPPORTED);
    /* A private table nobody knows is refused, the pointer left alone
     * (test_simgpu_rt serves the known ones). */
    const void *table = &table;
    CUuuid id;
    memset(&id, 0, sizeof id);
    CKE(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_FOUND);
    assert_ptr_equal(table, &table);
    CKE(cuGetExportTable(NULL, &id), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGetExportTable(&table, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuProfilerStart());
    CK(cuProfilerStop());
    CK(cuProfilerInitialize("cfg", "out", CU_OUT_CSV));
    /* Graphics interop: no display, as a driver on a compute node answers.
     * The arguments are not read. */
    static const char *const gfx[] = {
        "cuGLGetDevices_v2", "cuGraphicsGLRegisterImage", "cuGLInit",
        "cuEGLStreamConsumerConnect", "cuGraphicsEGLRegisterImage", "cuVDPAUGetDevice",
        "cuGraphicsVDPAURegisterVideoSurface", "cuGLMapBufferObjectAsync_v2_ptsz",
    };
    for (size_t i = 0; i < sizeof gfx / sizeof gfx[0]; i++) {
        CUresult (*fn)(void *, void *, void *, void *) =
            (CUresult (*)(void *, void *, void *, void *))self(gfx[i]);
        assert_non_null(fn);
        CKE(fn(NULL, NULL, NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
    }
}

int main(void)
{
    if (simt_init("simgpu-api"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_procaddress_examples),
        cmocka_unit_test(test_procaddress_refusals),
        cmocka_unit_test(test_procaddress_every_row),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_error_strings),
        cmocka_unit_test(test_context_stack),
        cmocka_unit_test(test_primary_ctx),
        cmocka_unit_test(test_memory_accounting),
        cmocka_unit_test(test_host_memory),
        cmocka_unit_test(test_copies_and_memsets),
        cmocka_unit_test(test_module_cubin),
        cmocka_unit_test(test_module_ptx),
        cmocka_unit_test(test_module_fatbin_and_library),
        cmocka_unit_test(test_module_garbage),
        cmocka_unit_test(test_launch_checks),
        cmocka_unit_test(test_bad_handles),
        cmocka_unit_test(test_unimplemented),
    };
    return cmocka_run_group_tests_name("simgpu", tests, NULL, NULL);
}

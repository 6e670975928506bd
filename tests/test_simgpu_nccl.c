/*
 * test_simgpu_nccl.c - the driver's answers NCCL's first communicator and
 * its first collective depend on, beyond those the other simgpu tests
 * cover (tests/frameworks/80_torch_distributed runs NCCL itself):
 *
 *   - the pointer attributes it reads of each buffer it registers: memory
 *     from cuMemAlloc is legacy-IPC capable, a VMM mapping is not and
 *     carries the handle types its allocation was made with, and nothing
 *     is GPUDirect-RDMA capable;
 *   - a kernel launched with a parameter buffer shorter than its
 *     parameters (NCCL's kernels declare 4 KiB and are given what one
 *     launch uses): the buffer's bytes, the rest zero.
 *
 * simgpu's NVML side (compute capability, peers, field values) is in
 * test_nvml's test_sim_nvml_matches_driver.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <stdio.h>
#include <string.h>

#include "lib/testutil.h"

/* test_simgpu_util.c */
extern CUcontext simt_ctx;
extern CUfunction simt_fill;
int simt_init(const char *tag);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define MiB (1ull << 20)

static int int_attr(CUpointer_attribute a, CUdeviceptr p)
{
    int v = -1;
    CK(cuPointerGetAttribute(&v, a, p));
    return v;
}

static unsigned long long types_attr(CUdeviceptr p)
{
    unsigned long long v = ~0ull;
    CK(cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p));
    return v;
}

static void test_registered_buffer_attributes(void **state)
{
    (void)state;
    CUdeviceptr plain, va;
    CK(cuMemAlloc(&plain, 4096));
    assert_int_equal(int_attr(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, plain + 64), 1);
    assert_int_equal(int_attr(CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, plain), 0);
    assert_int_equal(types_attr(plain), 0);

    CUmemAllocationProp prop = {
        .type = CU_MEM_ALLOCATION_TYPE_PINNED,
        .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
        .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
    };
    CUmemAccessDesc acc = { .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle h;
    CK(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0));
    CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    CK(cuMemMap(va, 2 * MiB, 0, h, 0));
    CK(cuMemSetAccess(va, 2 * MiB, &acc, 1));
    assert_int_equal(int_attr(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, va), 0);
    assert_int_equal(types_attr(va + MiB), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CK(cuMemUnmap(va, 2 * MiB));
    CK(cuMemRelease(h));

    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;     /* not exportable */
    CK(cuMemCreate(&h, 2 * MiB, &prop, 0));
    CK(cuMemMap(va, 2 * MiB, 0, h, 0));
    CK(cuMemSetAccess(va, 2 * MiB, &acc, 1));
    assert_int_equal(types_attr(va), 0);
    CK(cuMemUnmap(va, 2 * MiB));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(va, 2 * MiB));
    CK(cuMemFree(plain));
}

/* salus_fill(float *p, float v, unsigned long long n) given its arguments
 * through CU_LAUNCH_PARAM_BUFFER_*, `len` bytes of them. */
static CUresult fill_packed(CUdeviceptr p, float v, unsigned long long n, size_t len)
{
    struct { CUdeviceptr p; float v; unsigned pad; unsigned long long n; } args = { p, v, 0, n };
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &len,
                      CU_LAUNCH_PARAM_END };
    return cuLaunchKernel(simt_fill, 8, 1, 1, 128, 1, 1, 0, NULL, NULL, extra);
}

static void test_short_parameter_buffer(void **state)
{
    (void)state;
    enum { N = 64 };
    CUdeviceptr x;
    float out[N];
    CK(cuMemAlloc(&x, N * sizeof(float)));
    CK(cuMemsetD32(x, 0, N));
    CK(fill_packed(x, 3.0f, N, 24));                /* the whole parameters: filled */
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(out, x, sizeof out));
    assert_true(out[0] == 3.0f && out[N - 1] == 3.0f);
    CK(fill_packed(x, 5.0f, N, 16));                /* n left out: zero, nothing filled */
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(out, x, sizeof out));
    assert_true(out[0] == 3.0f && out[N - 1] == 3.0f);
    CK(cuMemFree(x));
}

int main(void)
{
    if (simt_init("simgpu-nccl"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registered_buffer_attributes),
        cmocka_unit_test(test_short_parameter_buffer),
    };
    return cmocka_run_group_tests_name("simgpu: NCCL's calls", tests, NULL, NULL);
}

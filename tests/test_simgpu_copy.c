/*
 * test_simgpu_copy.c - simgpu's batched and 3D peer copies, as CUDA 13
 * programs call them (CCCL lowers copy_bytes to cuMemcpyBatchAsync):
 *   batches      host to device, device to device and device to host in one
 *                batch, on a stream, with the legacy form's failIdx and the
 *                _v2 form without it; every byte where it was sent;
 *   refusals     the legacy stream, no attributes, a first attribute index
 *                other than 0, an unknown source access order: the whole
 *                call (failIdx SIZE_MAX); copy 2 reading past its source's
 *                end stops the batch there (failIdx 2), copies 0 and 1 done;
 *   3D peer      a box between two contexts' allocations, synchronous and
 *                on a stream, and a context that is not one refused;
 *   3D batches   pointer boxes with row and layer pitches both ways, an
 *                array's row (its elements' bytes), and the refusals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/testutil.h"

#include <cudaTypedefs.h>

/* test_simgpu_util.c */
int simt_init(const char *tag);
extern CUcontext simt_ctx;

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))
#define N 4096

/* cuda.h of CUDA 13 names the _v2 form; the 12.8 one, with failIdx, is
 * what a program built then resolves (cuGetProcAddress, version 12080). */
static PFN_cuMemcpyBatchAsync_v12080 batch_12080;

static CUresult legacy_batch(CUdeviceptr *d, CUdeviceptr *s, size_t *n, size_t count,
                             CUmemcpyAttributes *a, size_t *ai, size_t na, size_t *fail,
                             CUstream st)
{
    if (!batch_12080) {
        CUdriverProcAddressQueryResult q;
        CK(cuGetProcAddress("cuMemcpyBatchAsync", (void **)&batch_12080, 12080,
                            CU_GET_PROC_ADDRESS_DEFAULT, &q));
        assert_non_null(batch_12080);
    }
    return batch_12080(d, s, n, count, a, ai, na, fail, st);
}

static CUmemcpyAttributes attr_stream(void)
{
    CUmemcpyAttributes a;
    memset(&a, 0, sizeof a);
    a.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return a;
}

static void fill(unsigned char *p, unsigned seed)
{
    for (int i = 0; i < N; i++)
        p[i] = (unsigned char)(i * 7 + seed);
}

static void test_batches(void **state)
{
    (void)state;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, N));
    CK(cuMemAlloc(&b, N));
    unsigned char in[N], out[N];
    fill(in, 3);
    memset(out, 0, sizeof out);
    /* in -> a, a -> b, b -> out: in stream order, one batch. */
    CUdeviceptr dsts[3] = { a, b, (CUdeviceptr)(uintptr_t)out };
    CUdeviceptr srcs[3] = { (CUdeviceptr)(uintptr_t)in, a, b };
    size_t sizes[3] = { N, N, N }, idx[1] = { 0 }, fail = 0;
    CUmemcpyAttributes at[1] = { attr_stream() };
    CK(legacy_batch(dsts, srcs, sizes, 3, at, idx, 1, &fail, s));
    CK(cuStreamSynchronize(s));
    assert_int_equal(fail, SIZE_MAX);
    assert_memory_equal(in, out, N);
    /* The _v2 form: half of a, into the second half of out. */
    fill(in, 9);
    CK(cuMemcpyHtoD(a, in, N));
    CUdeviceptr d2[1] = { (CUdeviceptr)(uintptr_t)(out + N / 2) }, s2[1] = { a };
    size_t n2[1] = { N / 2 };
    CK(cuMemcpyBatchAsync_v2(d2, s2, n2, 1, at, idx, 1, s));
    CK(cuStreamSynchronize(s));
    assert_memory_equal(out + N / 2, in, N / 2);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuStreamDestroy(s));
}

static void test_batch_refusals(void **state)
{
    (void)state;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr a, b, c;
    CK(cuMemAlloc(&a, N));
    CK(cuMemAlloc(&b, N));
    CK(cuMemAlloc(&c, N));
    unsigned char in[N], out[N];
    fill(in, 5);
    CK(cuMemcpyHtoD(a, in, N));
    /* Copy 2 reads past the end of a. */
    CUdeviceptr dsts[3] = { b, c, c }, srcs[3] = { a, a, a };
    size_t sizes[3] = { N, N, 2 * N }, idx[2] = { 0, 1 }, fail = 0;
    CUmemcpyAttributes at[2] = { attr_stream(), attr_stream() };
    CKE(legacy_batch(dsts, srcs, sizes, 3, at, idx, 1, &fail, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fail, SIZE_MAX);                    /* the legacy stream */
    CKE(legacy_batch(dsts, srcs, sizes, 3, at, idx, 0, &fail, s), CUDA_ERROR_INVALID_VALUE);
    size_t one[1] = { 1 };
    CKE(legacy_batch(dsts, srcs, sizes, 3, at, one, 1, &fail, s), CUDA_ERROR_INVALID_VALUE);
    at[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    CKE(legacy_batch(dsts, srcs, sizes, 3, at, idx, 2, &fail, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fail, SIZE_MAX);
    at[1] = attr_stream();
    fail = 0;
    CKE(legacy_batch(dsts, srcs, sizes, 3, at, idx, 2, &fail, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fail, 2);                           /* the overrun */
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH(out, b, N));
    assert_memory_equal(in, out, N);                     /* copies 0 and 1 done */
    CK(cuMemcpyDtoH(out, c, N));
    assert_memory_equal(in, out, N);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    CK(cuMemFree(c));
    CK(cuStreamDestroy(s));
}

static void test_3d_peer(void **state)
{
    (void)state;
    CUdevice dev;
    CUcontext other;
    CK(cuCtxGetDevice(&dev));
    CK(cuCtxCreate(&other, NULL, 0, dev));              /* current now: other */
    CUdeviceptr dst;
    CK(cuMemAlloc(&dst, N));
    CK(cuCtxSetCurrent(simt_ctx));
    CUdeviceptr src;
    CK(cuMemAlloc(&src, N));
    unsigned char in[N], out[N];
    fill(in, 11);
    CK(cuMemcpyHtoD(src, in, N));
    CUDA_MEMCPY3D_PEER c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = src, c.srcContext = simt_ctx;
    c.srcPitch = 64, c.srcHeight = 8;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = dst, c.dstContext = other;
    c.dstPitch = 64, c.dstHeight = 8;
    c.WidthInBytes = 64, c.Height = 8, c.Depth = 8;    /* all of N: 64 x 8 x 8 */
    CK(cuMemsetD8(dst, 0, N));
    CK(cuMemcpy3DPeer(&c));
    CK(cuMemcpyDtoH(out, dst, N));
    assert_memory_equal(in, out, N);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemsetD8(dst, 0, N));
    c.Depth = 4;                                         /* the first half */
    CK(cuMemcpy3DPeerAsync(&c, s));
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH(out, dst, N));
    assert_memory_equal(in, out, N / 2);
    for (int i = N / 2; i < N; i++)
        assert_int_equal(out[i], 0);
    c.dstContext = (CUcontext)(uintptr_t)0x1234;
    CKE(cuMemcpy3DPeer(&c), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuStreamDestroy(s));
    CK(cuMemFree(src));
    CK(cuMemFree(dst));
    CK(cuCtxDestroy(other));
    CK(cuCtxSetCurrent(simt_ctx));
}

static CUmemcpy3DOperand ptr_op(CUdeviceptr p, size_t row, size_t layer)
{
    CUmemcpy3DOperand o;
    memset(&o, 0, sizeof o);
    o.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    o.op.ptr.ptr = p, o.op.ptr.rowLength = row, o.op.ptr.layerHeight = layer;
    return o;
}

static CUDA_MEMCPY3D_BATCH_OP op3(CUmemcpy3DOperand src, CUmemcpy3DOperand dst, size_t w,
                                  size_t h, size_t d)
{
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src = src, op.dst = dst;
    op.extent.width = w, op.extent.height = h, op.extent.depth = d;
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return op;
}

/* A 16 x 4 x 2 box: packed on the host, into rows of 32 and layers of 8
 * on the device, back out packed; then 16 floats into an array row and
 * back (elements of the array's 4 bytes). */
static void test_3d_batches(void **state)
{
    (void)state;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CK(cuMemAlloc(&d, 32 * 8 * 2));
    CK(cuMemsetD8(d, 0xee, 32 * 8 * 2));
    unsigned char in[16 * 4 * 2], out[16 * 4 * 2];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 5 + 1);
    memset(out, 0, sizeof out);
    CUDA_MEMCPY3D_BATCH_OP ops[2] = {
        op3(ptr_op((CUdeviceptr)(uintptr_t)in, 0, 0), ptr_op(d, 32, 8), 16, 4, 2),
        op3(ptr_op(d, 32, 8), ptr_op((CUdeviceptr)(uintptr_t)out, 0, 0), 16, 4, 2),
    };
    CK(cuMemcpy3DBatchAsync(2, ops, 0, s));
    CK(cuStreamSynchronize(s));
    assert_memory_equal(in, out, sizeof in);
    unsigned char row[32];                               /* the padding is untouched */
    CK(cuMemcpyDtoH(row, d + 32, 32));
    assert_memory_equal(row, in + 16, 16);
    for (int i = 16; i < 32; i++)
        assert_int_equal(row[i], 0xee);
    CUDA_ARRAY_DESCRIPTOR ad = { .Width = 16, .Height = 1, .Format = CU_AD_FORMAT_FLOAT,
                                 .NumChannels = 1 };
    CUarray arr;
    CK(cuArrayCreate(&arr, &ad));
    float f[16], g[16];
    for (int i = 0; i < 16; i++)
        f[i] = (float)i * 1.5f, g[i] = 0;
    CUmemcpy3DOperand ao;
    memset(&ao, 0, sizeof ao);
    ao.type = CU_MEMCPY_OPERAND_TYPE_ARRAY, ao.op.array.array = arr;
    CUDA_MEMCPY3D_BATCH_OP aops[2] = {
        op3(ptr_op((CUdeviceptr)(uintptr_t)f, 0, 0), ao, 16, 1, 1),
        op3(ao, ptr_op((CUdeviceptr)(uintptr_t)g, 0, 0), 16, 1, 1),
    };
    CK(cuMemcpy3DBatchAsync(2, aops, 0, s));
    CK(cuStreamSynchronize(s));
    assert_memory_equal(f, g, sizeof f);
    /* Refusals: flags, the legacy stream, a zero extent, a row shorter
     * than the copy's (failIdx at that op, in the 12.8 form). */
    CKE(cuMemcpy3DBatchAsync(2, ops, 1, s), CUDA_ERROR_INVALID_VALUE);
    CKE(cuMemcpy3DBatchAsync(2, ops, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_MEMCPY3D_BATCH_OP bad[2] = { ops[0], ops[1] };
    bad[0].extent.depth = 0;
    CKE(cuMemcpy3DBatchAsync(1, bad, 0, s), CUDA_ERROR_INVALID_VALUE);
    bad[0] = ops[0];
    bad[1].src.op.ptr.rowLength = 8;
    PFN_cuMemcpy3DBatchAsync_v12080 legacy = NULL;
    CUdriverProcAddressQueryResult q;
    CK(cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&legacy, 12080,
                        CU_GET_PROC_ADDRESS_DEFAULT, &q));
    size_t fail = 0;
    CKE(legacy(2, bad, &fail, 0, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fail, 1);
    CK(cuStreamSynchronize(s));
    CK(cuArrayDestroy(arr));
    CK(cuMemFree(d));
    CK(cuStreamDestroy(s));
}

int main(void)
{
    if (simt_init("simgpu-copy"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_batch_refusals),
        cmocka_unit_test(test_3d_peer),
        cmocka_unit_test(test_3d_batches),
    };
    return cmocka_run_group_tests_name("simgpu batched and 3D peer copies", tests, NULL, NULL);
}

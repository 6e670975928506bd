/*
 * test_simgpu_xla.c - the driver calls XLA's CUDA backend makes beyond
 * those the other simgpu tests cover: graphs built with the generic
 * cuGraphAddNode (v1 and _v2) and an executable graph's kernel node given
 * new arguments (its command buffers), each graph launch's work numbered
 * in the trace, and tensor maps (cuTensorMapEncodeTiled's documented
 * checks, cuTensorMapReplaceAddress).
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

#include "lib/testutil.h"

/* test_simgpu_util.c */
extern char simt_state[], simt_trace[];
extern CUcontext simt_ctx;
extern CUfunction simt_spin, simt_fill, simt_axpy;
int simt_init(const char *tag);
CUresult simt_fill_on(CUstream s, CUdeviceptr p, float v, unsigned long long n);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))

/* ---- graphs -------------------------------------------------------------------------- */

/* The graph numbers ("graph") of the trace's last n lines naming name; 0
 * for a line without one. */
static void last_graphs(const char *name, int n, unsigned long long *out)
{
    char *text = tu_read_file(simt_trace, NULL), want[160];
    assert_non_null(text);
    snprintf(want, sizeof want, "\"name\":\"%s\"", name);
    int m = 0;                                  /* lines seen; out is a ring of the last n */
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
        if (strstr(l, want)) {
            double g = 0;
            out[m++ % n] = tu_json_num(l, "graph", &g) ? 0 : (unsigned long long)g;
        }
    assert_true(m >= n);
    unsigned long long ring[16];
    assert_true(n <= 16);
    for (int i = 0; i < n; i++)                 /* oldest first */
        ring[i] = out[(m + i) % n];
    memcpy(out, ring, (size_t)n * sizeof *out);
    free(text);
}

/* cuGraphAddNode (v1, by cuGetProcAddress) and _v2 add the typed calls'
 * nodes; an executable graph's kernel node takes new arguments for its
 * later launches and its graph keeps the old; each graph launch's work is
 * numbered in the trace, a direct launch's is not. */
static void test_graph_generic_and_exec_update(void **state)
{
    (void)state;
    enum { N = 64 };
    CUdeviceptr x;
    CK(cuMemAlloc(&x, N * 4));
    PFN_cuGraphAddNode_v12020 add_v1 = NULL;
    CK(cuGetProcAddress_v2("cuGraphAddNode", (void **)&add_v1, 12020, 0, NULL));
    assert_non_null(add_v1);
    CUgraph g, other;
    CUgraphNode set, fill, foreign;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphCreate(&other, 0));
    CUgraphNodeParams p = { .type = CU_GRAPH_NODE_TYPE_MEMSET };
    p.memset = (CUDA_MEMSET_NODE_PARAMS_v2){ .dst = x, .value = 0, .elementSize = 4,
                                             .width = N, .height = 1, .ctx = simt_ctx };
    CK(add_v1(&set, g, NULL, 0, &p));
    float v = 5;
    unsigned long long n = N;
    void *args[] = { &x, &v, &n };
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_KERNEL;
    p.kernel = (CUDA_KERNEL_NODE_PARAMS_v3){ .func = simt_fill, .gridDimX = 1, .gridDimY = 1,
                                             .gridDimZ = 1, .blockDimX = N, .blockDimY = 1,
                                             .blockDimZ = 1, .kernelParams = args };
    CUgraphEdgeData edge = { .type = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT };
    CK(cuGraphAddNode(&fill, g, &set, &edge, 1, &p));
    CK(cuGraphAddNode(&foreign, other, NULL, NULL, 0, &p));
    CUgraphNodeType type;
    CK(cuGraphNodeGetType(fill, &type));
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_KERNEL);
    /* what the driver refuses: a bad edge, reserved bytes set; a type
     * simgpu does not model */
    CUgraphNode bad;
    edge.type = 7;
    CKE(cuGraphAddNode(&bad, g, &set, &edge, 1, &p), CUDA_ERROR_INVALID_VALUE);
    p.reserved0[1] = 1;
    CKE(cuGraphAddNode(&bad, g, NULL, NULL, 0, &p), CUDA_ERROR_INVALID_VALUE);
    p.reserved0[1] = 0;
    CUgraphNodeParams ev = { .type = CU_GRAPH_NODE_TYPE_EVENT_RECORD };
    CKE(cuGraphAddNode(&bad, g, NULL, NULL, 0, &ev), CUDA_ERROR_NOT_SUPPORTED);

    CUgraphExec exec, again;
    CK(cuGraphInstantiate(&exec, g, 0));
    float out[N];
    CK(cuGraphLaunch(exec, NULL));
    CK(cuMemcpyDtoH(out, x, sizeof out));
    assert_true(out[0] == 5.0f && out[N - 1] == 5.0f);
    float w = 7;
    void *args7[] = { &x, &w, &n };
    CUDA_KERNEL_NODE_PARAMS kp = { .func = simt_fill, .gridDimX = 1, .gridDimY = 1,
                                   .gridDimZ = 1, .blockDimX = N, .blockDimY = 1,
                                   .blockDimZ = 1, .kernelParams = args7 };
    CK(cuGraphExecKernelNodeSetParams(exec, fill, &kp));
    w = 8;                                          /* packed at the call */
    CK(cuGraphLaunch(exec, NULL));
    CK(cuMemcpyDtoH(out, x, sizeof out));
    assert_true(out[0] == 7.0f && out[N - 1] == 7.0f);
    CKE(cuGraphExecKernelNodeSetParams(exec, foreign, &kp), CUDA_ERROR_INVALID_VALUE);
    CKE(cuGraphExecKernelNodeSetParams(exec, set, &kp), CUDA_ERROR_INVALID_VALUE);
    p.kernel.kernelParams = args7;
    CK(cuGraphExecNodeSetParams(exec, fill, &p));   /* the generic call, kernel v3 */
    CK(cuGraphLaunch(exec, NULL));
    CK(cuMemcpyDtoH(out, x, sizeof out));
    assert_true(out[0] == 8.0f);
    CK(cuGraphInstantiate(&again, g, 0));           /* the graph kept its own */
    CK(cuGraphLaunch(again, NULL));
    CK(cuMemcpyDtoH(out, x, sizeof out));
    assert_true(out[0] == 5.0f);
    CK(simt_fill_on(NULL, x, 1.0f, N));             /* a direct launch: no number */
    CK(cuCtxSynchronize());
    unsigned long long gs[5];
    last_graphs("salus_fill", 5, gs);
    assert_true(gs[0] > 0 && gs[1] == gs[0] + 1 && gs[2] == gs[1] + 1 && gs[3] == gs[2] + 1);
    assert_int_equal(gs[4], 0);
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphExecDestroy(again));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(other));
    CK(cuMemFree(x));
}

/* ---- tensor maps ---------------------------------------------------------------------- */

/* A 2D float tile as XLA's Hopper GEMMs ask for it, then each documented
 * refusal once, and a new address. */
static void test_tensor_map_tiled(void **state)
{
    (void)state;
    CUdeviceptr x;
    CK(cuMemAlloc(&x, 1 << 20));
    void *a = (void *)(uintptr_t)x;
    CUtensorMap m;
    cuuint64_t dim[2] = { 256, 512 }, stride[1] = { 256 * 4 };
    cuuint32_t box[2] = { 32, 64 }, es[2] = { 1, 1 };
#define ENC(type, rank, addr, dims, strides, boxes, ess, il, sw, oob)                       \
    cuTensorMapEncodeTiled(&m, type, rank, addr, dims, strides, boxes, ess, il, sw,       \
                           CU_TENSOR_MAP_L2_PROMOTION_L2_128B, oob)
    const CUtensorMapDataType F32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    const CUtensorMapInterleave NONE = CU_TENSOR_MAP_INTERLEAVE_NONE;
    const CUtensorMapSwizzle SW128 = CU_TENSOR_MAP_SWIZZLE_128B;
    const CUtensorMapFloatOOBfill ZERO = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
    CK(ENC(F32, 2, a, dim, stride, box, es, NONE, SW128, ZERO));
    CK(ENC(F32, 2, a, dim, stride, box, es, NONE, SW128,
           CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA));
    CK(ENC(F32, 1, a, dim, NULL, box, es, NONE, SW128, ZERO));   /* rank 1: no strides */
    /* each refusal the documentation names */
    CKE(ENC(F32, 6, a, dim, stride, box, es, NONE, SW128, ZERO), CUDA_ERROR_INVALID_VALUE);
    CKE(ENC(F32, 2, a, dim, stride, box, es, CU_TENSOR_MAP_INTERLEAVE_16B, SW128, ZERO),
        CUDA_ERROR_INVALID_VALUE);                              /* interleaved: rank >= 3 */
    CKE(ENC(F32, 2, (char *)a + 8, dim, stride, box, es, NONE, SW128, ZERO),
        CUDA_ERROR_INVALID_VALUE);                              /* 16-byte alignment */
    cuuint64_t odd[1] = { 1000 }, zero[2] = { 0, 512 };
    CKE(ENC(F32, 2, a, dim, odd, box, es, NONE, SW128, ZERO), CUDA_ERROR_INVALID_VALUE);
    CKE(ENC(F32, 2, a, zero, stride, box, es, NONE, SW128, ZERO), CUDA_ERROR_INVALID_VALUE);
    cuuint32_t big[2] = { 32, 257 }, narrow[2] = { 2, 64 }, wide[2] = { 64, 64 };
    cuuint32_t es9[2] = { 1, 9 };
    CKE(ENC(F32, 2, a, dim, stride, big, es, NONE, SW128, ZERO), CUDA_ERROR_INVALID_VALUE);
    CKE(ENC(F32, 2, a, dim, stride, narrow, es, NONE, SW128, ZERO), CUDA_ERROR_INVALID_VALUE);
    CKE(ENC(F32, 2, a, dim, stride, wide, es, NONE, SW128, ZERO),
        CUDA_ERROR_INVALID_VALUE);                              /* 256 bytes > the 128B span */
    CKE(ENC(F32, 2, a, dim, stride, box, es9, NONE, SW128, ZERO), CUDA_ERROR_INVALID_VALUE);
    CKE(ENC(CU_TENSOR_MAP_DATA_TYPE_INT32, 2, a, dim, stride, box, es, NONE, SW128,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA),
        CUDA_ERROR_INVALID_VALUE);                              /* NaN fill: floats only */
    CKE(ENC((CUtensorMapDataType)99, 2, a, dim, stride, box, es, NONE, SW128, ZERO),
        CUDA_ERROR_INVALID_VALUE);
    cuuint64_t dim3[3] = { 8, 8, 8 }, stride3[2] = { 64, 512 };
    cuuint32_t box3[3] = { 8, 8, 8 }, es3[3] = { 1, 1, 1 };
    CKE(ENC(CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, a, dim3, stride3, box3, es3,
            CU_TENSOR_MAP_INTERLEAVE_32B, SW128, ZERO),
        CUDA_ERROR_INVALID_VALUE);                              /* 32B interleave: 32B swizzle */
    CK(ENC(CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, a, dim3, stride3, box3, es3,
           CU_TENSOR_MAP_INTERLEAVE_32B, CU_TENSOR_MAP_SWIZZLE_32B, ZERO));
    CKE(cuTensorMapReplaceAddress(&m, (char *)a + 16),
        CUDA_ERROR_INVALID_VALUE);                              /* interleaved by 32 bytes */
    CK(cuTensorMapReplaceAddress(&m, (char *)a + 64));
    CK(ENC(F32, 2, a, dim, stride, box, es, NONE, SW128, ZERO));
    CK(cuTensorMapReplaceAddress(&m, (char *)a + 16));
    CKE(cuTensorMapReplaceAddress(&m, (char *)a + 4), CUDA_ERROR_INVALID_VALUE);
    CUtensorMap junk;
    memset(&junk, 0, sizeof junk);
    CKE(cuTensorMapReplaceAddress(&junk, a), CUDA_ERROR_INVALID_VALUE);
#undef ENC
    CK(cuMemFree(x));
}

int main(void)
{
    if (simt_init("simgpu-xla"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_graph_generic_and_exec_update),
        cmocka_unit_test(test_tensor_map_tiled),
    };
    return cmocka_run_group_tests_name("simgpu: XLA's calls", tests, NULL, NULL);
}

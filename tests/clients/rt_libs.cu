/*
 * rt_libs.cu - the toolkit's libraries over the CUDA runtime, for simgpu's
 * runtime tests (test_simgpu_rt): cuBLAS, cuBLASLt and cuDNN as a
 * framework calls them.
 *
 *   rt_libs <mode>
 *
 * Modes:
 *   sgemm    cublasCreate, cublasSgemm 256 x 256 x 256 on a stream, destroy;
 *   lt-f16   cuBLASLt's heuristics for an fp16 matmul (fp32 compute) and
 *   lt-bf16  for a bf16 one: they must find an algorithm, which then runs
 *            (cublasLtMatmul with a workspace);
 *   conv     cuDNN: a 3x3 convolution forward, NCHW float, with the
 *            algorithm cuDNN ranks first.
 * The operands go in and come back through copies, checked on the host;
 * the results are not checked (simgpu's kernels compute nothing).  Prints
 * one JSON line ("ok":1 and what was found) and exits 0; a failed call
 * prints its status and exits 2.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(kind, call, code) do { \
        printf("{\"ok\":0,\"%s\":\"%s\",\"line\":%d,\"status\":%d}\n", kind, call, __LINE__, \
               (int)(code)); \
        exit(2); \
    } while (0)
#define CK(x)  do { cudaError_t e_ = (x); if (e_ != cudaSuccess) FAIL("call", #x, e_); } while (0)
#define CKB(x) do { cublasStatus_t s_ = (x); if (s_ != CUBLAS_STATUS_SUCCESS) FAIL("call", #x, s_); } while (0)
#define CKD(x) do { cudnnStatus_t s_ = (x); if (s_ != CUDNN_STATUS_SUCCESS) FAIL("call", #x, s_); } while (0)
#define CHECK(c) do { if (!(c)) FAIL("check", #c, 0); } while (0)

/* A device buffer of n bytes holding a pattern, checked by reading it back. */
static void *operand(size_t n, unsigned char seed)
{
    unsigned char *h = (unsigned char *)malloc(n), *back = (unsigned char *)malloc(n);
    void *d;
    CHECK(h && back);
    for (size_t i = 0; i < n; i++)
        h[i] = (unsigned char)(seed + i * 7);
    CK(cudaMalloc(&d, n));
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(back, d, n, cudaMemcpyDeviceToHost));
    CHECK(memcmp(h, back, n) == 0);
    free(h);
    free(back);
    return d;
}

static void sgemm(void)
{
    const int n = 256;
    const float one = 1.0f, zero = 0.0f;
    cublasHandle_t h;
    cudaStream_t s;
    CKB(cublasCreate(&h));
    CK(cudaStreamCreate(&s));
    CKB(cublasSetStream(h, s));
    float *a = (float *)operand(n * n * 4, 1), *b = (float *)operand(n * n * 4, 2),
          *c = (float *)operand(n * n * 4, 3);
    CKB(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, n, n, n, &one, a, n, b, n, &zero, c, n));
    CK(cudaStreamSynchronize(s));
    CKB(cublasDestroy(h));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    printf("{\"ok\":1,\"mode\":\"sgemm\"}\n");
}

static void lt(cudaDataType_t type, const char *mode)
{
    const int n = 512;
    const float one = 1.0f, zero = 0.0f;
    const size_t ws_bytes = 32 << 20;
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    CKB(cublasLtCreate(&h));
    CKB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CKB(cublasLtMatrixLayoutCreate(&la, type, n, n, n));
    CKB(cublasLtMatrixLayoutCreate(&lb, type, n, n, n));
    CKB(cublasLtMatrixLayoutCreate(&lc, type, n, n, n));
    CKB(cublasLtMatmulPreferenceCreate(&pref));
    CKB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &ws_bytes, sizeof ws_bytes));
    cublasLtMatmulHeuristicResult_t r[8];
    int found = 0;
    CKB(cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, lc, pref, 8, r, &found));
    CHECK(found > 0);
    void *a = operand(n * n * 2, 4), *b = operand(n * n * 2, 5), *c = operand(n * n * 2, 6);
    void *ws;
    CK(cudaMalloc(&ws, ws_bytes));
    CKB(cublasLtMatmul(h, op, &one, a, la, b, lb, &zero, c, lc, c, lc, &r[0].algo, ws, ws_bytes,
                       0));
    CK(cudaDeviceSynchronize());
    CKB(cublasLtMatmulPreferenceDestroy(pref));
    CKB(cublasLtMatrixLayoutDestroy(la));
    CKB(cublasLtMatrixLayoutDestroy(lb));
    CKB(cublasLtMatrixLayoutDestroy(lc));
    CKB(cublasLtMatmulDescDestroy(op));
    CKB(cublasLtDestroy(h));
    CK(cudaFree(ws));
    printf("{\"ok\":1,\"mode\":\"%s\",\"algorithms\":%d}\n", mode, found);
}

static void conv(void)
{
    cudnnHandle_t h;
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t c;
    int n, ch, hh, ww, found = 0;
    CKD(cudnnCreate(&h));
    CKD(cudnnCreateTensorDescriptor(&x));
    CKD(cudnnCreateTensorDescriptor(&y));
    CKD(cudnnCreateFilterDescriptor(&w));
    CKD(cudnnCreateConvolutionDescriptor(&c));
    CKD(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 32, 32));
    CKD(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 8, 3, 3, 3));
    CKD(cudnnSetConvolution2dDescriptor(c, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT));
    CKD(cudnnGetConvolution2dForwardOutputDim(c, x, w, &n, &ch, &hh, &ww));
    CHECK(n == 2 && ch == 8 && hh == 32 && ww == 32);
    CKD(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, ch, hh, ww));
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    CKD(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, c, y, 8, &found, perf));
    CHECK(found > 0);
    size_t ws_bytes = 0;
    CKD(cudnnGetConvolutionForwardWorkspaceSize(h, x, w, c, y, perf[0].algo, &ws_bytes));
    void *dx = operand(2 * 3 * 32 * 32 * 4, 7), *dw = operand(8 * 3 * 3 * 3 * 4, 8),
         *dy = operand((size_t)n * ch * hh * ww * 4, 9), *ws = NULL;
    if (ws_bytes)
        CK(cudaMalloc(&ws, ws_bytes));
    const float one = 1.0f, zero = 0.0f;
    CKD(cudnnConvolutionForward(h, &one, x, dx, w, dw, c, perf[0].algo, ws, ws_bytes, &zero, y,
                                dy));
    CK(cudaDeviceSynchronize());
    CKD(cudnnDestroyTensorDescriptor(x));
    CKD(cudnnDestroyTensorDescriptor(y));
    CKD(cudnnDestroyFilterDescriptor(w));
    CKD(cudnnDestroyConvolutionDescriptor(c));
    CKD(cudnnDestroy(h));
    printf("{\"ok\":1,\"mode\":\"conv\",\"algorithms\":%d,\"algo\":%d}\n", found,
           (int)perf[0].algo);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "sgemm"))
        sgemm();
    else if (!strcmp(mode, "lt-f16"))
        lt(CUDA_R_16F, mode);
    else if (!strcmp(mode, "lt-bf16"))
        lt(CUDA_R_16BF, mode);
    else if (!strcmp(mode, "conv"))
        conv();
    else {
        fprintf(stderr, "rt_libs: unknown mode '%s' (sgemm, lt-f16, lt-bf16, conv)\n", mode);
        return 2;
    }
    return 0;
}

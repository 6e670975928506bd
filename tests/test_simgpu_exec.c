/*
 * test_simgpu_exec.c - simgpu's time model in one process: kernel durations,
 * synchronize and query, back-to-back kernels, the context-switch penalty,
 * events, legacy / blocking / non-blocking / per-thread streams, host
 * callbacks, graphs and stream capture, threads sharing a context, and the
 * trace (its format; kernels, copies and memsets with when they were
 * submitted).
 *
 * Times are CLOCK_MONOTONIC ns, the clock simgpu uses.  Lower bounds come
 * from the model and are exact; where a bound depends on how fast the test
 * runs, the assertion is conditioned on what the test observed (a launch
 * that returned before the previous kernel ended), never a speed threshold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/testutil.h"

/* test_simgpu_util.c */
extern char simt_state[], simt_trace[];
extern CUcontext simt_ctx;
extern CUfunction simt_spin, simt_fill, simt_axpy;
int simt_init(const char *tag);
CUresult simt_spin_on(CUstream s, unsigned long long ns);
CUresult simt_fill_on(CUstream s, CUdeviceptr p, float v, unsigned long long n);
long simt_trace_named(const char *name, tu_kernel_t **out);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))
#define MS 1000000ull

/* The last n kernels of the trace, in start order. */
static tu_kernel_t *last_kernels(long n)
{
    tu_kernel_t *k;
    long m = simt_trace_named(NULL, &k);
    assert_true(m >= n);
    memmove(k, k + m - n, (size_t)n * sizeof *k);
    return k;
}

/* ---- durations and synchronize -------------------------------------------------------------- */

static void test_spin_and_sync(void **state)
{
    (void)state;
    uint64_t t0 = tu_now_ns();
    CK(simt_spin_on(NULL, 100 * MS));
    CKE(cuStreamQuery(NULL), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(NULL));
    uint64_t t1 = tu_now_ns();
    assert_true(t1 - t0 >= 100 * MS);
    CK(cuStreamQuery(NULL));
    tu_kernel_t *k = last_kernels(1);
    assert_string_equal(k[0].name, "salus_spin");
    assert_int_equal(k[0].end_ns - k[0].start_ns, 100 * MS);
    assert_true(k[0].start_ns >= t0 && k[0].end_ns <= t1);
    assert_int_equal(k[0].stream, 0);           /* the legacy default stream */
    free(k);
    /* cuCtxSynchronize waits for every stream of the context. */
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    t0 = tu_now_ns();
    CK(simt_spin_on(s, 60 * MS));
    CK(cuCtxSynchronize());
    assert_true(tu_now_ns() - t0 >= 60 * MS);
    CK(cuStreamQuery(s));
    CK(cuStreamDestroy(s));
}

/* Other kernels take SIMGPU_KERNEL_NS (10 us by default), whatever their shape. */
static void test_default_duration(void **state)
{
    (void)state;
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 64));
    CK(simt_fill_on(NULL, p, 1, 16));
    CK(cuCtxSynchronize());
    tu_kernel_t *k = last_kernels(1);
    assert_string_equal(k[0].name, "salus_fill");
    assert_int_equal(k[0].end_ns - k[0].start_ns, 10000);
    free(k);
    /* The fixed model (no SIMGPU_KERNEL_WAVE_NS) ignores the launch's shape:
     * test_simgpu_kmodel has the shape model. */
    float v = 1;
    unsigned long long n = 16;
    void *args[] = { &p, &v, &n };
    CK(cuLaunchKernel(simt_fill, 100000, 8, 1, 1024, 1, 1, 40000, NULL, args, NULL));
    CK(cuCtxSynchronize());
    k = last_kernels(1);
    assert_int_equal(k[0].end_ns - k[0].start_ns, 10000);
    free(k);
    CK(cuMemFree(p));
}

static void test_back_to_back(void **state)
{
    (void)state;
    uint64_t returned[3];
    for (int i = 0; i < 3; i++) {
        CK(simt_spin_on(NULL, 30 * MS));
        returned[i] = tu_now_ns();
    }
    CK(cuCtxSynchronize());
    tu_kernel_t *k = last_kernels(3);
    for (int i = 1; i < 3; i++) {
        assert_true(k[i].start_ns >= k[i - 1].end_ns);
        /* Enqueued before the previous one ended: it starts right at its end,
         * the same context paying no switch. */
        if (returned[i] < k[i - 1].end_ns)
            assert_int_equal(k[i].start_ns, k[i - 1].end_ns);
    }
    free(k);
}

static CUresult ctx_create(CUcontext *c)
{
    PFN_cuCtxCreate_v3020 fn = NULL;
    if (cuGetProcAddress_v2("cuCtxCreate", (void **)&fn, 3020, 0, NULL) || !fn)
        return CUDA_ERROR_UNKNOWN;
    return fn(c, 0, 0);
}

/* Kernels of two contexts alternate on the one engine: each change of
 * context costs SIMGPU_CTX_SWITCH_US (100 us). */
static void test_context_switch_penalty(void **state)
{
    (void)state;
    CUcontext a, b, popped;
    CK(ctx_create(&a));
    CK(ctx_create(&b));
    for (int i = 0; i < 3; i++) {
        CK(cuCtxSetCurrent(a));
        CK(simt_spin_on(NULL, 5 * MS));
        CK(cuCtxSetCurrent(b));
        CK(simt_spin_on(NULL, 5 * MS));
    }
    CK(cuCtxSynchronize());
    CK(cuCtxSetCurrent(a));
    CK(cuCtxSynchronize());
    tu_kernel_t *k = last_kernels(6);
    unsigned long long ida, idb;
    CK(cuCtxGetId(a, &ida));
    CK(cuCtxGetId(b, &idb));
    for (int i = 0; i < 6; i++)
        assert_int_equal(k[i].context, i % 2 ? idb : ida);
    for (int i = 1; i < 6; i++)
        assert_true(k[i].start_ns >= k[i - 1].end_ns + 100000);
    free(k);
    CK(cuCtxPopCurrent(&popped));
    CK(cuCtxDestroy(a));
    CK(cuCtxDestroy(b));
    CK(cuCtxSetCurrent(simt_ctx));
}

/* ---- events ---------------------------------------------------------------------------- */

static void test_events(void **state)
{
    (void)state;
    CUevent e0, e1, e2, nt;
    float ms = -1;
    CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e1, CU_EVENT_BLOCKING_SYNC));
    CK(cuEventCreate(&e2, 0));
    CK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    CKE(cuEventCreate(&e2, 0x100), CUDA_ERROR_INVALID_VALUE);
    CKE(cuEventCreate(&e2, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventQuery(e2));                           /* never recorded: complete */
    CKE(cuEventElapsedTime(&ms, e0, e2), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventRecord(e0, NULL));
    CK(simt_spin_on(NULL, 40 * MS));
    CK(cuEventRecord(e1, NULL));
    CK(cuEventRecord(nt, NULL));
    CKE(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    CKE(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY);
    uint64_t t0 = tu_now_ns();
    CK(cuEventSynchronize(e1));
    assert_true(tu_now_ns() > t0);
    CK(cuEventQuery(e1));
    CK(cuEventElapsedTime(&ms, e0, e1));
    assert_true(ms >= 40.0f && ms < 2000.0f);
    CK(cuEventElapsedTime(&ms, e1, e0));
    assert_true(ms <= -40.0f);
    CKE(cuEventElapsedTime(&ms, e0, nt), CUDA_ERROR_INVALID_HANDLE);
    CKE(cuEventElapsedTime(NULL, e0, e1), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventRecordWithFlags(e2, NULL, CU_EVENT_RECORD_DEFAULT));
    CK(cuEventSynchronize(e2));
    CK(cuEventDestroy(e0));
    CK(cuEventDestroy(e1));
    CK(cuEventDestroy(e2));
    CK(cuEventDestroy(nt));
    CKE(cuEventDestroy(nt), CUDA_ERROR_INVALID_HANDLE);
}

/* ---- streams --------------------------------------------------------------------------- */

/* Copies do not use the engine, so they show the streams' own ordering. */
static void test_legacy_stream_semantics(void **state)
{
    (void)state;
    CUstream blk, nb;
    CUdeviceptr p;
    char byte = 0;
    CK(cuStreamCreate(&blk, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&p, 64));
    /* Legacy work waits for earlier work of blocking streams... */
    uint64_t t0 = tu_now_ns();
    CK(simt_spin_on(blk, 60 * MS));
    CK(cuMemcpyDtoH(&byte, p, 1));                  /* a host sync on the legacy stream */
    assert_true(tu_now_ns() - t0 >= 60 * MS);
    CK(cuStreamQuery(blk));
    /* ...not for non-blocking ones. */
    CK(simt_spin_on(nb, 300 * MS));
    CK(cuMemcpyDtoH(&byte, p, 1));
    CKE(cuStreamQuery(nb), CUDA_ERROR_NOT_READY);   /* the copy did not wait for it */
    CK(cuStreamSynchronize(nb));
    /* Blocking streams wait for earlier legacy work; non-blocking ones don't. */
    CK(simt_spin_on(NULL, 300 * MS));
    CK(cuMemcpyHtoDAsync(p, &byte, 1, nb));
    CK(cuMemcpyHtoDAsync(p, &byte, 1, blk));
    CKE(cuStreamQuery(blk), CUDA_ERROR_NOT_READY);
    CK(cuStreamQuery(nb));
    CK(cuCtxSynchronize());
    CK(cuStreamDestroy(blk));
    CK(cuStreamDestroy(nb));
    CK(cuMemFree(p));
}

static void test_stream_wait_event(void **state)
{
    (void)state;
    CUstream a, b;
    CUevent e;
    CUdeviceptr p;
    char byte = 1;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuMemAlloc(&p, 64));
    CK(simt_spin_on(a, 300 * MS));
    CK(cuEventRecord(e, a));
    CK(cuStreamWaitEvent(b, e, 0));
    CK(cuMemcpyHtoDAsync(p, &byte, 1, b));
    CKE(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(b));
    CK(cuStreamQuery(a));
    CKE(cuStreamWaitEvent(b, e, 0x10), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventDestroy(e));
    CK(cuStreamDestroy(a));
    CK(cuStreamDestroy(b));
    CK(cuMemFree(p));
}

static void test_stream_queries(void **state)
{
    (void)state;
    CUstream s, t;
    int prio = 1;
    unsigned flags = 0;
    CUcontext c = NULL;
    unsigned long long ids, idt, idl = 7;
    CK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -10));
    CK(cuStreamGetPriority(s, &prio));
    assert_int_equal(prio, -5);                     /* clamped to the greatest */
    CK(cuStreamGetFlags(s, &flags));
    assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
    CK(cuStreamGetCtx(s, &c));
    assert_ptr_equal(c, simt_ctx);
    CK(cuStreamCreate(&t, 0));
    CK(cuStreamGetId(s, &ids));
    CK(cuStreamGetId(t, &idt));
    CK(cuStreamGetId(CU_STREAM_LEGACY, &idl));
    assert_true(ids != idt && ids && idt && idl == 0);
    CKE(cuStreamCreate(&t, 0x8), CUDA_ERROR_INVALID_VALUE);
    CKE(cuStreamGetFlags(s, NULL), CUDA_ERROR_INVALID_VALUE);
    CKE(cuStreamDestroy(CU_STREAM_LEGACY), CUDA_ERROR_INVALID_HANDLE);
    CK(cuStreamDestroy(s));
    CK(cuStreamDestroy(t));
}

static void *per_thread(void *arg)
{
    unsigned long long *id = arg;
    cuCtxSetCurrent(simt_ctx);
    if (simt_spin_on(CU_STREAM_PER_THREAD, 1000) || cuStreamGetId(CU_STREAM_PER_THREAD, id) ||
        cuStreamSynchronize(CU_STREAM_PER_THREAD))
        *id = 0;
    return NULL;
}

static void test_per_thread_stream(void **state)
{
    (void)state;
    unsigned long long mine = 0, other = 0;
    pthread_t t;
    CK(simt_spin_on(CU_STREAM_PER_THREAD, 1000));
    CK(cuStreamGetId(CU_STREAM_PER_THREAD, &mine));
    assert_true(mine != 0);
    pthread_create(&t, NULL, per_thread, &other);
    pthread_join(t, NULL);
    assert_true(other != 0 && other != mine);
    /* A _ptsz export treats NULL as the per-thread stream. */
    PFN_cuLaunchKernel_v7000_ptsz launch = NULL;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress_v2("cuLaunchKernel", (void **)&launch, 12000,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    unsigned long long ns = 1000;
    void *args[] = { &ns };
    CK(launch(simt_spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuCtxSynchronize());
    tu_kernel_t *k = last_kernels(1);
    assert_int_equal(k[0].stream, mine);
    free(k);
}

static void test_stream_attributes(void **state)
{
    (void)state;
    CUstream s, t;
    CUstreamAttrValue v, w;
    int prio;
    CK(cuStreamCreate(&s, 0));
    CK(cuStreamCreate(&t, 0));
    memset(&v, 0, sizeof v);
    v.accessPolicyWindow.num_bytes = 4096;
    v.accessPolicyWindow.hitRatio = 0.5f;
    CK(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v));
    memset(&w, 0, sizeof w);
    CK(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &w));
    assert_int_equal(w.accessPolicyWindow.num_bytes, 4096);
    v.priority = -3;
    CK(cuStreamSetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, &v));
    CK(cuStreamGetPriority(s, &prio));
    assert_int_equal(prio, -3);
    CK(cuStreamCopyAttributes(t, s));
    CK(cuStreamGetPriority(t, &prio));
    assert_int_equal(prio, -3);
    CKE(cuStreamGetAttribute(s, (CUstreamAttrID)999, &w), CUDA_ERROR_INVALID_VALUE);
    CKE(cuStreamGetAttribute(s, CU_STREAM_ATTRIBUTE_PRIORITY, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy(s));
    CK(cuStreamDestroy(t));
}

static void test_occupancy(void **state)
{
    (void)state;
    int n = 0, grid = 0, block = 0;
    size_t dyn = 0;
    CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, simt_fill, 256, 0));
    assert_true(n >= 1 && n <= 8);              /* at most 2048 threads per SM */
    CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, simt_fill, 32, 0));
    assert_true(n >= 1 && n <= 32);
    CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, simt_fill, 128, 200000));
    assert_int_equal(n, 1);                     /* the shared memory of one block */
    CKE(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, simt_fill, 2048, 0),
        CUDA_ERROR_INVALID_VALUE);
    CK(cuOccupancyMaxPotentialBlockSize(&grid, &block, simt_fill, NULL, 0, 0));
    assert_true(block >= 32 && block <= 1024 && block % 32 == 0);
    assert_true(grid >= 132 && grid % 132 == 0);
    CK(cuOccupancyMaxPotentialBlockSize(&grid, &block, simt_fill, NULL, 0, 100));
    assert_true(block <= 100);
    CK(cuOccupancyAvailableDynamicSMemPerBlock(&dyn, simt_fill, 2, 128));
    assert_true(dyn > 0 && dyn < 233472 / 2);
}

/* ---- host callbacks --------------------------------------------------------------------- */

static volatile uint64_t called_at;
static void host_fn(void *arg)
{
    (void)arg;
    called_at = tu_now_ns();
}

static CUstream cb_stream;
static CUresult cb_status = (CUresult)-1;
static void stream_cb(CUstream s, CUresult status, void *arg)
{
    cb_stream = s;
    cb_status = status;
    *(int *)arg = 1;
}

static void test_host_callbacks(void **state)
{
    (void)state;
    CUstream s;
    int done = 0;
    CK(cuStreamCreate(&s, 0));
    called_at = 0;
    CK(simt_spin_on(s, 80 * MS));
    CK(cuLaunchHostFunc(s, host_fn, NULL));
    CK(cuStreamAddCallback(s, stream_cb, &done, 0));
    assert_int_equal(called_at, 0);                 /* not before the kernel ends */
    CKE(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(s));                     /* waits for the callbacks too */
    assert_int_not_equal(called_at, 0);
    assert_int_equal(done, 1);
    assert_ptr_equal(cb_stream, s);
    assert_int_equal(cb_status, CUDA_SUCCESS);
    tu_kernel_t *k = last_kernels(1);
    assert_true(called_at >= k[0].end_ns);
    free(k);
    CK(cuStreamQuery(s));
    CKE(cuStreamAddCallback(s, stream_cb, &done, 1), CUDA_ERROR_INVALID_VALUE);
    CKE(cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy(s));
}

/* ---- graphs ------------------------------------------------------------------------------ */

static void test_graph_explicit(void **state)
{
    (void)state;
    enum { N = 256 };
    CUdeviceptr x;
    CK(cuMemAlloc(&x, N * 4));
    CUgraph g;
    CUgraphNode set, fill, spin, nodes[4];
    CUgraphExec exec;
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS ms = { .dst = x, .value = 0, .elementSize = 4, .width = N,
                                   .height = 1 };
    CK(cuGraphAddMemsetNode(&set, g, NULL, 0, &ms, simt_ctx));
    float v = 5;
    unsigned long long n = N, ns = 2 * MS;
    void *fargs[] = { &x, &v, &n }, *sargs[] = { &ns };
    CUDA_KERNEL_NODE_PARAMS kp = { .func = simt_fill, .gridDimX = 2, .gridDimY = 1,
                                   .gridDimZ = 1, .blockDimX = 128, .blockDimY = 1,
                                   .blockDimZ = 1, .kernelParams = fargs };
    CK(cuGraphAddKernelNode(&fill, g, &set, 1, &kp));
    kp.func = simt_spin;
    kp.kernelParams = sargs;
    CK(cuGraphAddKernelNode(&spin, g, &fill, 1, &kp));
    size_t count = 4;
    CK(cuGraphGetNodes(g, nodes, &count));
    assert_int_equal(count, 3);
    CUgraphNodeType type;
    CK(cuGraphNodeGetType(nodes[1], &type));
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_KERNEL);
    CK(cuGraphInstantiate(&exec, g, 0));
    CK(cuGraphDestroy(g));                          /* the executable graph is a copy */
    v = 9;                                          /* and its parameters were copied */
    CK(cuGraphLaunch(exec, NULL));
    CK(cuGraphLaunch(exec, NULL));
    CK(cuCtxSynchronize());
    float out[N];
    CK(cuMemcpyDtoH(out, x, sizeof out));
    assert_true(out[0] == 5.0f && out[N - 1] == 5.0f);
    tu_kernel_t *k = last_kernels(4);
    assert_string_equal(k[2].name, "salus_fill");
    assert_string_equal(k[3].name, "salus_spin");
    assert_int_equal(k[3].end_ns - k[3].start_ns, 2 * MS);
    free(k);
    CK(cuGraphExecDestroy(exec));
    CKE(cuGraphLaunch(exec, NULL), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(x));
}

static void test_stream_capture(void **state)
{
    (void)state;
    enum { N = 128 };
    CUstream s;
    CUdeviceptr x, y;
    CUgraph g;
    CUgraphExec exec;
    CUstreamCaptureStatus st;
    float host[N], out[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&x, N * 4));
    CK(cuMemAlloc(&y, N * 4));
    CK(cuMemsetD32(y, 0, N));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(cuMemcpyHtoDAsync(x, host, sizeof host, s));
    CK(cuMemsetD32Async(y, 0x3f800000, N, s));      /* 1.0f */
    float a = 2;
    unsigned long long n = N;
    void *args[] = { &y, &x, &a, &n };
    CK(cuLaunchKernel(simt_axpy, 1, 1, 1, 128, 1, 1, 0, s, args, NULL));
    /* A synchronous copy is unsafe during a capture unless the thread is
     * relaxed (test_simgpu_capture has the rules). */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuThreadExchangeStreamCaptureMode(&mode));
    CK(cuMemcpyDtoH(out, y, sizeof out));           /* nothing ran yet */
    CK(cuThreadExchangeStreamCaptureMode(&mode));
    assert_int_equal(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
    assert_true(out[5] == 0.0f);
    CK(cuStreamEndCapture(s, &g));
    CK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuGraphInstantiate(&exec, g, 0));
    CK(cuGraphLaunch(exec, s));
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH(out, y, sizeof out));
    for (int i = 0; i < N; i++)
        assert_true(out[i] == 1.0f + 2.0f * i);
    CKE(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    CKE(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL),
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuGraphExecDestroy(exec));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy(s));
    CK(cuMemFree(x));
    CK(cuMemFree(y));
}

/* ---- threads ------------------------------------------------------------------------------ */

/* Threads sharing the context, each with its own stream: allocations,
 * frees, launches, events and synchronizes interleave safely. */
static void *hammer(void *arg)
{
    int *bad = arg;
    CUstream s;
    CUevent e;
    if (cuCtxSetCurrent(simt_ctx) || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuEventCreate(&e, 0)) {
        *bad = 1;
        return NULL;
    }
    for (int i = 0; i < 500 && !*bad; i++) {
        CUdeviceptr p;
        unsigned long long n = 64;
        float v = (float)i;
        void *args[] = { &p, &v, &n };
        *bad = cuMemAlloc(&p, 256 + (size_t)i % 4096) ||
               cuLaunchKernel(simt_fill, 1, 1, 1, 64, 1, 1, 0, s, args, NULL) ||
               cuEventRecord(e, s) || (i % 50 == 0 && cuEventSynchronize(e)) ||
               cuMemFree(p);
    }
    *bad |= cuStreamSynchronize(s) || cuStreamDestroy(s) || cuEventDestroy(e);
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    size_t f0, f1, total;
    pthread_t t[4];
    int bad[4] = { 0 };
    CK(cuMemGetInfo(&f0, &total));
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, hammer, &bad[i]);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(bad[i], 0);
    }
    CK(cuMemGetInfo(&f1, &total));
    assert_int_equal(f1, f0);
}

/* ---- the trace ------------------------------------------------------------------------- */

/* The window [before, after] of the host call that submitted k. */
static void assert_submitted(const tu_kernel_t *k, const char *kind, uint64_t before,
                             uint64_t after)
{
    assert_string_equal(k->kind, kind);
    assert_true(k->submit_ns >= before && k->submit_ns <= after);
    assert_true(k->submit_ns <= k->start_ns && k->start_ns <= k->end_ns);
}

/* Kernels, async copies and memsets each get a line with when the host
 * submitted them; work queued behind a kernel on its stream was submitted
 * long before it started; a blocking device-to-host copy is a copy line that
 * ended before the call returned. */
static void test_trace_submit_and_kinds(void **state)
{
    (void)state;
    enum { N = 1 << 16 };
    static float host[N];
    CUdeviceptr p;
    CUstream s;
    CK(cuMemAlloc(&p, sizeof host));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint64_t t[7];
    t[0] = tu_now_ns();
    CK(simt_spin_on(s, 50 * MS));
    t[1] = tu_now_ns();
    CK(simt_fill_on(s, p, 1, N));
    t[2] = tu_now_ns();
    CK(cuMemsetD32Async(p, 7, N, s));
    t[3] = tu_now_ns();
    CK(cuMemcpyHtoDAsync(p, host, sizeof host, s));
    t[4] = tu_now_ns();
    CK(cuMemcpyDtoHAsync(host, p, sizeof host, s));
    t[5] = tu_now_ns();
    CK(cuMemcpyDtoH(host, p, sizeof host));     /* legacy stream; s is non-blocking */
    t[6] = tu_now_ns();
    CK(cuStreamSynchronize(s));

    tu_kernel_t *all;
    long n = tu_trace_load_all(simt_trace, &all), m = 0;
    assert_true(n >= 6);
    tu_kernel_t w[6];
    for (long i = 0; i < n; i++)
        if (all[i].pid == getpid() && all[i].submit_ns >= t[0]) {
            assert_true(m < 6);
            w[m++] = all[i];
        }
    free(all);
    assert_int_equal(m, 6);
    /* By submission: sorted by start, the legacy copy may come first. */
    for (int i = 0; i < 6; i++)
        for (int j = i + 1; j < 6; j++)
            if (w[j].submit_ns < w[i].submit_ns) {
                tu_kernel_t x = w[i];
                w[i] = w[j];
                w[j] = x;
            }
    static const char *const kinds[] = { "kernel", "kernel", "memset", "copy", "copy", "copy" };
    static const char *const names[] = { "salus_spin", "salus_fill", "memset", "HtoD", "DtoH",
                                         "DtoH" };
    for (int i = 0; i < 6; i++) {
        assert_submitted(&w[i], kinds[i], t[i], t[i + 1]);
        assert_string_equal(w[i].name, names[i]);
    }
    for (int i = 1; i < 5; i++) {               /* one stream: in order */
        assert_int_equal(w[i].stream, w[0].stream);
        assert_true(w[i].start_ns >= w[i - 1].end_ns);
    }
    assert_int_equal(w[0].end_ns - w[0].start_ns, 50 * MS);
    /* The fill was submitted while the spin ran: it waited for it on the
     * stream, from its submission to the spin's end. */
    if (t[2] < w[0].end_ns) {
        assert_int_equal(w[1].start_ns, w[0].end_ns);
        assert_true(w[1].start_ns - w[1].submit_ns >= w[0].end_ns - t[2]);
    }
    assert_int_equal(w[5].stream, 0);
    assert_true(w[5].end_ns <= t[6]);            /* it blocked the host */
    CK(cuStreamDestroy(s));
    CK(cuMemFree(p));
}

/* tu_trace_cross_submits on a written trace of two processes: a handoff
 * after the last work ended is clean, even with a copy ending last; work
 * submitted before the other's copy ended is found, on that device only. */
static void test_trace_cross_submits(void **state)
{
    (void)state;
    static const char *const lines[] = {
        /* pid 1: a kernel, then a copy that ends last, both on device 0 */
        "{\"pid\":1,\"device\":0,\"kind\":\"kernel\",\"submit_ns\":0,\"start_ns\":0,\"end_ns\":100}",
        "{\"pid\":1,\"device\":0,\"kind\":\"copy\",\"submit_ns\":10,\"start_ns\":100,\"end_ns\":150}",
        /* pid 2 on device 1 meanwhile: another device, not a crossing */
        "{\"pid\":2,\"device\":1,\"kind\":\"kernel\",\"submit_ns\":20,\"start_ns\":20,\"end_ns\":60}",
        /* pid 2 on device 0 once pid 1's copy ended */
        "{\"pid\":2,\"device\":0,\"kind\":\"memset\",\"submit_ns\":150,\"start_ns\":150,\"end_ns\":160}",
        /* pid 1 again, while pid 2's memset runs */
        "{\"pid\":1,\"device\":0,\"kind\":\"kernel\",\"submit_ns\":155,\"start_ns\":160,\"end_ns\":170}",
    };
    char path[512];
    snprintf(path, sizeof path, "%s/cross-trace.jsonl", tu_tmpdir());
    tu_kernel_t *k;
    long first = -1;
    for (int n = 4; n <= 5; n++) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        for (int i = 0; i < n; i++)
            fprintf(f, "%s\n", lines[i]);
        fclose(f);
        assert_int_equal(tu_trace_load_all(path, &k), n);
        assert_int_equal(tu_trace_cross_submits(k, n, &first), n - 4);
        if (n == 5) {
            assert_int_equal(k[first].pid, 1);
            assert_int_equal(k[first].submit_ns, 155);
        }
        free(k);
    }
    /* pid 2's memset submitted at 149, before pid 1's copy ended. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 3; i++)
        fprintf(f, "%s\n", lines[i]);
    fprintf(f, "{\"pid\":2,\"device\":0,\"kind\":\"memset\",\"submit_ns\":149,"
               "\"start_ns\":150,\"end_ns\":160}\n");
    fclose(f);
    assert_int_equal(tu_trace_load_all(path, &k), 4);
    assert_int_equal(tu_trace_cross_submits(k, 4, &first), 1);
    assert_int_equal(k[first].pid, 2);
    assert_string_equal(k[first].kind, "memset");
    free(k);
    unlink(path);
}

/* Every line is exactly the documented object, in one piece. */
static void test_trace_format(void **state)
{
    (void)state;
    char *text = tu_read_file(simt_trace, NULL);
    assert_non_null(text);
    int lines = 0, kinds[3] = { 0 };
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        int pid, dev, end = 0;
        unsigned long long ctx, stream, submit, start, stop;
        char kind[16], name[128];
        int got = sscanf(line, "{\"pid\":%d,\"device\":%d,\"context\":%llu,\"stream\":%llu,"
                               "\"kind\":\"%15[^\"]\",\"name\":\"%127[^\"]\","
                               "\"submit_ns\":%llu,\"start_ns\":%llu,\"end_ns\":%llu%n",
                         &pid, &dev, &ctx, &stream, kind, name, &submit, &start, &stop, &end);
        unsigned long long graph = 1;
        int tail = 0;                               /* a graph launch's work: its number */
        if (got == 9 && !strncmp(line + end, ",\"graph\":", 9))
            sscanf(line + end, ",\"graph\":%llu%n", &graph, &tail);
        if (got != 9 || graph == 0 || strcmp(line + end + tail, "}"))
            fail_msg("bad trace line: %s", line);
        assert_int_equal(pid, getpid());
        assert_int_equal(dev, 0);
        assert_true(ctx > 0 && submit <= start && stop >= start);
        if (!strcmp(kind, "kernel"))
            kinds[0]++;
        else if (!strcmp(kind, "copy"))
            kinds[1]++;
        else if (!strcmp(kind, "memset"))
            kinds[2]++;
        else
            fail_msg("bad kind: %s", line);
    }
    assert_true(lines > 20);
    assert_true(kinds[0] > 0 && kinds[1] > 0 && kinds[2] > 0);
    free(text);
}

int main(void)
{
    if (simt_init("simgpu-exec"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spin_and_sync),
        cmocka_unit_test(test_default_duration),
        cmocka_unit_test(test_back_to_back),
        cmocka_unit_test(test_context_switch_penalty),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_legacy_stream_semantics),
        cmocka_unit_test(test_stream_wait_event),
        cmocka_unit_test(test_stream_queries),
        cmocka_unit_test(test_per_thread_stream),
        cmocka_unit_test(test_stream_attributes),
        cmocka_unit_test(test_occupancy),
        cmocka_unit_test(test_host_callbacks),
        cmocka_unit_test(test_graph_explicit),
        cmocka_unit_test(test_stream_capture),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_trace_submit_and_kinds),
        cmocka_unit_test(test_trace_cross_submits),
        cmocka_unit_test(test_trace_format),
    };
    return cmocka_run_group_tests_name("simgpu time model", tests, NULL, NULL);
}

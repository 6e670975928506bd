/*
 * test_simgpu_capture.c - simgpu's stream capture rules, as the driver has
 * them: a potentially unsafe call (cuCtxSynchronize, cuMemAlloc, cuMemFree,
 * cuMemUnmap, a synchronous copy) during a capture fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, which
 * then takes no more work and ends with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
 * as the capture's mode and each thread's interaction mode
 * (cuThreadExchangeStreamCaptureMode) say; a relaxed capture or thread is
 * not prohibited; waiting for the capturing stream is refused in every
 * mode.  Stream-ordered allocation and graph launches are recorded.
 *
 * One process, the primary context; a second thread where the rule is
 * about other threads (joined before the test goes on: no ordering between
 * processes or threads is assumed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/testutil.h"

/* test_simgpu_util.c */
extern char simt_trace[];
extern CUcontext simt_ctx;
extern CUfunction simt_spin, simt_fill;
int simt_init(const char *tag);
CUresult simt_spin_on(CUstream s, unsigned long long ns);
CUresult simt_fill_on(CUstream s, CUdeviceptr p, float v, unsigned long long n);
long simt_trace_named(const char *name, tu_kernel_t **out);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))

static CUstream stream;

static int setup(void **state)
{
    (void)state;
    return cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return cuStreamDestroy(stream) == CUDA_SUCCESS ? 0 : -1;
}

static CUstreamCaptureStatus status(CUstream s)
{
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(s, &st));
    return st;
}

static CUstreamCaptureMode exchange(CUstreamCaptureMode mode)
{
    CK(cuThreadExchangeStreamCaptureMode(&mode));
    return mode;
}

/* End the capture of `stream` expecting it invalidated. */
static void end_invalidated(void)
{
    CUgraph g = (CUgraph)1;
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CKE(simt_spin_on(stream, 1000), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CKE(cuStreamEndCapture(stream, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_NONE);
}

/* End the capture of `stream`, launch its graph, wait: n kernels ran. */
static void end_and_run(size_t n)
{
    CUgraph g;
    CUgraphExec x;
    size_t count = 0;
    CK(cuStreamEndCapture(stream, &g));
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuGraphGetNodes(g, NULL, &count));
    assert_int_equal(count, n);
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphLaunch(x, stream));
    CK(cuStreamSynchronize(stream));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}

/* ---- one thread ------------------------------------------------------------------ */

/* The case of the issue: a context synchronize during a global capture
 * (torch.cuda.graph's mode) fails and invalidates the capture. */
static void test_ctx_sync_global_invalidates(void **state)
{
    (void)state;
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(simt_spin_on(stream, 1000));
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CKE(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated();
    CK(cuCtxSynchronize());                         /* legal again */
}

/* A relaxed capture, or a relaxed thread, may synchronize the context and
 * allocate: the capture survives and its graph runs. */
static void test_relaxed_not_prohibited(void **state)
{
    (void)state;
    CUdeviceptr p;
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(simt_spin_on(stream, 1000));
    CK(cuCtxSynchronize());
    CK(cuMemAlloc(&p, 4096));
    CK(cuMemFree(p));
    CK(simt_spin_on(stream, 1000));
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    end_and_run(2);

    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(simt_spin_on(stream, 1000));
    assert_int_equal(exchange(CU_STREAM_CAPTURE_MODE_RELAXED), CU_STREAM_CAPTURE_MODE_GLOBAL);
    CK(cuCtxSynchronize());
    assert_int_equal(exchange(CU_STREAM_CAPTURE_MODE_GLOBAL), CU_STREAM_CAPTURE_MODE_RELAXED);
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    end_and_run(1);
    CUstreamCaptureMode bad = (CUstreamCaptureMode)7;
    CKE(cuThreadExchangeStreamCaptureMode(&bad), CUDA_ERROR_INVALID_VALUE);
}

/* Each potentially unsafe call, in its own global capture, fails and
 * invalidates it; so does waiting for or querying the capturing stream,
 * even in a relaxed capture. */
static void test_unsafe_calls(void **state)
{
    (void)state;
    static float host[64];
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, sizeof host));
    for (int c = 0; c < 6; c++) {
        CUdeviceptr p = 0;
        CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CUresult rc = c == 0 ? cuMemAlloc(&p, 4096)
                    : c == 1 ? cuMemFree(dev)
                    : c == 2 ? cuMemcpyDtoH(host, dev, sizeof host)
                    : c == 3 ? cuStreamSynchronize(stream)
                    : c == 4 ? cuStreamQuery(stream)
                    : cuStreamSynchronize(CU_STREAM_LEGACY);
        if (rc != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
            fail_msg("case %d: CUresult %d, not STREAM_CAPTURE_UNSUPPORTED", c, (int)rc);
        assert_int_equal(p, 0);
        end_invalidated();
    }
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
    CKE(cuStreamSynchronize(stream), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated();
    CK(cuMemFree(dev));                              /* none of those freed it */
}

/* VMM in a capture, as PyTorch's expandable segments use it: mapping and
 * granting access are not prohibited (a capture's allocation grows its
 * segment), but cuMemUnmap waits for the range's work, as cuMemFree does,
 * and is refused and invalidates; the mapping survives it. */
static void test_vmm_in_capture(void **state)
{
    (void)state;
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemAccessDesc acc = { .location = prop.location,
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    const size_t sz = 2u << 20;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CK(cuMemCreate(&h, sz, &prop, 0));
    CK(cuMemAddressReserve(&va, sz, 0, 0, 0));
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemMap(va, sz, 0, h, 0));
    CK(cuMemSetAccess(va, sz, &acc, 1));
    CKE(cuMemUnmap(va, sz), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated();
    float one = 1.0f;
    CK(cuMemcpyHtoD(va, &one, sizeof one));          /* still mapped, still usable */
    CK(cuMemUnmap(va, sz));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(va, sz));
}

/* ---- other threads ------------------------------------------------------------------ */

typedef struct peer {
    CUstreamCaptureMode mode;        /* the peer thread's interaction mode */
    CUresult rc;                     /* what its cuCtxSynchronize answered */
} peer_t;

static void *peer_sync(void *arg)
{
    peer_t *p = arg;
    CUstreamCaptureMode m = p->mode;
    p->rc = cuCtxSetCurrent(simt_ctx);
    if (p->rc == CUDA_SUCCESS)
        p->rc = cuThreadExchangeStreamCaptureMode(&m);
    if (p->rc == CUDA_SUCCESS)
        p->rc = cuCtxSynchronize();
    return NULL;
}

static CUresult sync_from_peer(CUstreamCaptureMode mode)
{
    pthread_t t;
    peer_t p = { .mode = mode, .rc = CUDA_ERROR_UNKNOWN };
    assert_int_equal(pthread_create(&t, NULL, peer_sync, &p), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    return p.rc;
}

/* Another thread in the default (global) mode may not synchronize while a
 * global capture runs, and invalidates it; a thread-local capture ignores
 * other threads, and so does a peer thread in thread-local mode. */
static void test_other_threads(void **state)
{
    (void)state;
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(simt_spin_on(stream, 1000));
    CKE(sync_from_peer(CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    end_invalidated();

    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(simt_spin_on(stream, 1000));
    CK(sync_from_peer(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    end_and_run(1);

    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(simt_spin_on(stream, 1000));
    CK(sync_from_peer(CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_int_equal(status(stream), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    end_and_run(1);
}

typedef struct ender {
    CUresult rc;
} ender_t;

static void *peer_end(void *arg)
{
    ender_t *e = arg;
    CUgraph g;
    e->rc = cuCtxSetCurrent(simt_ctx);
    if (e->rc == CUDA_SUCCESS)
        e->rc = cuStreamEndCapture(stream, &g);
    return NULL;
}

/* A capture that is not relaxed ends on the thread that began it. */
static void test_end_on_other_thread(void **state)
{
    (void)state;
    pthread_t t;
    ender_t e = { CUDA_ERROR_UNKNOWN };
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(simt_spin_on(stream, 1000));
    assert_int_equal(pthread_create(&t, NULL, peer_end, &e), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    CKE(e.rc, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
    end_and_run(1);
}

/* ---- what a capture may record ------------------------------------------------------- */

/* cuMemAllocAsync and cuMemFreeAsync in a capture are memory nodes (the
 * memory is usable by the captured kernels when the graph runs); a graph
 * launched into a capture is recorded node by node. */
static void test_async_memory_and_graphs(void **state)
{
    (void)state;
    CUgraph inner, g;
    CUgraphExec innerx, x;
    CUdeviceptr p = 0;
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(simt_spin_on(stream, 1000));
    CK(simt_spin_on(stream, 1000));
    CK(cuStreamEndCapture(stream, &inner));
    CK(cuGraphInstantiate(&innerx, inner, 0));

    tu_kernel_t *k;
    long before = simt_trace_named("salus_fill", &k);
    free(k);
    CK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuMemAllocAsync(&p, 4096, stream));
    assert_true(p != 0);
    CK(simt_fill_on(stream, p, 3.0f, 1024));
    CK(cuGraphLaunch(innerx, stream));
    CK(cuMemFreeAsync(p, stream));
    CK(cuStreamEndCapture(stream, &g));
    size_t n = 5;
    CUgraphNode nodes[5];
    CUgraphNodeType type;
    CK(cuGraphGetNodes(g, nodes, &n));
    assert_int_equal(n, 5);
    CK(cuGraphNodeGetType(nodes[0], &type));
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    CK(cuGraphNodeGetType(nodes[2], &type));
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_KERNEL);
    CK(cuGraphNodeGetType(nodes[4], &type));
    assert_int_equal(type, CU_GRAPH_NODE_TYPE_MEM_FREE);
    CK(cuGraphInstantiate(&x, g, 0));
    for (int i = 0; i < 2; i++)                      /* the graph keeps its memory */
        CK(cuGraphLaunch(x, stream));
    CK(cuStreamSynchronize(stream));
    float out[4];
    CK(cuMemcpyDtoH(out, p, sizeof out));
    assert_true(out[0] == 3.0f && out[3] == 3.0f);
    long after = simt_trace_named("salus_fill", &k);
    free(k);
    assert_int_equal(after - before, 2);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphExecDestroy(innerx));
    CK(cuGraphDestroy(g));
    CK(cuGraphDestroy(inner));
}

#if CUDA_VERSION >= 12030
/* cuStreamBeginCaptureToGraph records into the caller's graph. */
static void test_capture_to_graph(void **state)
{
    (void)state;
    CUgraph g, ended;
    CUgraphNode first;
    size_t n = 0;
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddEmptyNode(&first, g, NULL, 0));
    CK(cuStreamBeginCaptureToGraph(stream, g, &first, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(simt_spin_on(stream, 1000));
    CK(cuStreamEndCapture(stream, &ended));
    assert_ptr_equal(ended, g);
    CK(cuGraphGetNodes(g, NULL, &n));
    assert_int_equal(n, 2);
    CK(cuGraphDestroy(g));
}
#else
static void test_capture_to_graph(void **state)
{
    (void)state;
    skip();   /* this toolkit's headers do not declare cuStreamBeginCaptureToGraph */
}
#endif

int main(void)
{
    if (simt_init("simgpu-capture"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ctx_sync_global_invalidates),
        cmocka_unit_test(test_relaxed_not_prohibited),
        cmocka_unit_test(test_unsafe_calls),
        cmocka_unit_test(test_vmm_in_capture),
        cmocka_unit_test(test_other_threads),
        cmocka_unit_test(test_end_on_other_thread),
        cmocka_unit_test(test_async_memory_and_graphs),
        cmocka_unit_test(test_capture_to_graph),
    };
    return cmocka_run_group_tests_name("simgpu stream capture", tests, setup, teardown);
}

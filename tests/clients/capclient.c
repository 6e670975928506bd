/*
 * capclient.c - a driver-API program that captures a CUDA graph as
 * torch.cuda.graph does (global mode, on a side stream), for the scheduler's
 * capture test over simgpu.
 *
 *   capclient <kernels.cubin> <launches>
 *
 * It takes the GPU (one salus_spin: under Salus, its launch waits for the
 * lease), begins a capture at once and records the launches of salus_fill,
 * each after about a millisecond of host work (a framework's capture is
 * slow: a waiting peer's looks at the holder fall inside it), ends the
 * capture, instantiates the graph, launches it and synchronizes.  Its line
 * on stdout is one JSON object with each step's CUresult; it exits 0 only
 * when all succeeded.
 *
 * CAP_FREED=<bytes>: before the capture it also allocates that much and
 * frees it, so that paging's allocator (SALUS_SWAP=on) keeps the chunk for
 * reuse, and the keep's expiry falls inside a capture of enough launches.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Host work: spin on the clock for ns. */
static void host_work(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end)
        ;
}

#define TRY(step, call) do { \
        if ((r.step = (call)) != CUDA_SUCCESS) goto out; \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: capclient <kernels.cubin> <launches>\n");
        return 2;
    }
    int launches = atoi(argv[2]);
    struct {
        CUresult setup, warm, begin, record, end, instantiate, launch, sync;
    } r = { CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN,
            CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN, CUDA_ERROR_UNKNOWN };
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction spin, fill;
    CUstream s;
    CUdeviceptr buf;
    CUgraph graph = NULL;
    CUgraphExec exec;
    int recorded = 0;
    unsigned long long ns = 2000000, n = 256;
    float v = 1.0f;
    void *spin_args[] = { &ns };
    void *fill_args[] = { &buf, &v, &n };

    TRY(setup, cuInit(0));
    TRY(setup, cuDeviceGet(&dev, 0));
    TRY(setup, cuDevicePrimaryCtxRetain(&ctx, dev));
    TRY(setup, cuCtxSetCurrent(ctx));
    TRY(setup, cuModuleLoad(&mod, argv[1]));
    TRY(setup, cuModuleGetFunction(&spin, mod, "salus_spin"));
    TRY(setup, cuModuleGetFunction(&fill, mod, "salus_fill"));
    TRY(setup, cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    TRY(setup, cuMemAlloc(&buf, n * sizeof(float)));

    TRY(warm, cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, spin_args, NULL));
    const char *freed = getenv("CAP_FREED");
    if (freed) {
        CUdeviceptr kept;
        TRY(warm, cuMemAlloc(&kept, strtoull(freed, NULL, 0)));
        TRY(warm, cuMemFree(kept));
    }

    TRY(begin, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (; recorded < launches; recorded++) {
        host_work(1000000);
        TRY(record, cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, s, fill_args, NULL));
    }
    TRY(end, cuStreamEndCapture(s, &graph));
    TRY(instantiate, cuGraphInstantiate(&exec, graph, 0));
    TRY(launch, cuGraphLaunch(exec, s));
    TRY(sync, cuStreamSynchronize(s));
out:
    printf("{\"recorded\":%d,\"setup\":%d,\"warm\":%d,\"begin\":%d,\"record\":%d,"
           "\"end\":%d,\"instantiate\":%d,\"launch\":%d,\"sync\":%d}\n", recorded,
           (int)r.setup, (int)r.warm, (int)r.begin, (int)r.record, (int)r.end,
           (int)r.instantiate, (int)r.launch, (int)r.sync);
    return r.sync == CUDA_SUCCESS ? 0 : 1;
}

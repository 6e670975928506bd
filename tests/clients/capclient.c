/*
 * capclient.c - a driver-API program that captures a CUDA graph as
 * torch.cuda.graph does (global mode, on a side stream), for the scheduler's
 * capture test over simgpu.
 *
 *   capclient <kernels.cubin> <go-file> <launches>
 *
 * It takes the GPU (one salus_spin and a stream sync), begins a capture,
 * records one salus_fill, says {"capturing":1} on stdout and waits (up to
 * 60 s) for <go-file> to exist: the test makes it once a peer waits for the
 * GPU.  Then it records the other launches, each after about a millisecond
 * of host work (a framework's capture is slow: the peer's looks at the
 * holder fall inside it), ends the capture, instantiates the graph,
 * launches it and synchronizes.  Its last line is one JSON object with
 * each step's CUresult; it exits 0 only when all succeeded.
 */
#include <cuda.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

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

/* Wait for path to exist, up to ms; 0 once it does. */
static int await_file(const char *path, int ms)
{
    uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;
    while (access(path, F_OK) != 0) {
        if (now_ns() >= end)
            return -1;
        usleep(1000);
    }
    return 0;
}

#define TRY(step, call) do { \
        if ((r.step = (call)) != CUDA_SUCCESS) goto out; \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: capclient <kernels.cubin> <go-file> <launches>\n");
        return 2;
    }
    int launches = atoi(argv[3]);
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
    int recorded = 0, waited = 0;
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
    TRY(warm, cuStreamSynchronize(s));

    TRY(begin, cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    TRY(record, cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, s, fill_args, NULL));
    recorded = 1;
    printf("{\"capturing\":1}\n");
    fflush(stdout);
    waited = await_file(argv[2], 60000) == 0;
    for (; recorded < launches; recorded++) {
        host_work(1000000);
        TRY(record, cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, s, fill_args, NULL));
    }
    TRY(end, cuStreamEndCapture(s, &graph));
    TRY(instantiate, cuGraphInstantiate(&exec, graph, 0));
    TRY(launch, cuGraphLaunch(exec, s));
    TRY(sync, cuStreamSynchronize(s));
out:
    printf("{\"waited\":%d,\"recorded\":%d,\"setup\":%d,\"warm\":%d,\"begin\":%d,\"record\":%d,"
           "\"end\":%d,\"instantiate\":%d,\"launch\":%d,\"sync\":%d}\n", waited, recorded,
           (int)r.setup, (int)r.warm, (int)r.begin, (int)r.record, (int)r.end,
           (int)r.instantiate, (int)r.launch, (int)r.sync);
    return r.sync == CUDA_SUCCESS && waited ? 0 : 1;
}

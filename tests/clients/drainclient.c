/*
 * drainclient.c - a driver-API program whose GPU work is still queued or
 * running when it reaches what a scheduler may take for a boundary, in the
 * patterns of real frameworks, for the exclusive-handoff tests over simgpu.
 *
 *   drainclient <kernels.cubin> <pattern> <iterations> <kernel_us>
 *
 * Patterns (each iteration launches salus_spin kernels of kernel_us):
 *   plain    two kernels, then a sync of the legacy stream;
 *   side     two kernels on the legacy stream and a longer one on a
 *            non-blocking side stream; only the legacy stream is synced
 *            (a prefetch or NCCL stream the loop never waits for);
 *   poll     three kernels on a stream, then cuEventQuery / cuStreamQuery
 *            every 100 us until done: it never blocks in the driver;
 *   queue    two kernels and an event per iteration; it waits only for the
 *            event of 31 iterations before (JAX's 32 dispatched executions);
 *   threads  two threads, each with its own stream: two kernels, a sync of
 *            that stream;
 *   hold     the iterations' kernels queued without a sync; prints "queued"
 *            and waits to be killed;
 *   copies   a memset, a copy to the device (asynchronous both) and a
 *            kernel, then a copy back that blocks the host (its only sync);
 *   hostfn   two kernels and a host callback (cuLaunchHostFunc) that sets a
 *            flag, which the host waits for on a condition variable, never
 *            in the driver (JAX's PJRT learns of an execution's end so).
 * It ends with a context synchronize and prints "done <CUresult>"; it exits
 * 0 only when every call succeeded.
 */
#include <cuda.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CUcontext ctx;
static CUfunction spin;
static unsigned long long kernel_ns;
static int iters;

static CUresult launch(CUstream s, unsigned long long ns)
{
    void *args[] = { &ns };
    return cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

#define TRY(call) do { CUresult r_ = (call); if (r_ != CUDA_SUCCESS) return r_; } while (0)

static CUresult plain(void)
{
    for (int i = 0; i < iters; i++) {
        TRY(launch(NULL, kernel_ns));
        TRY(launch(NULL, kernel_ns));
        TRY(cuStreamSynchronize(NULL));
    }
    return CUDA_SUCCESS;
}

static CUresult side(void)
{
    CUstream s;
    TRY(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < iters; i++) {
        TRY(launch(NULL, kernel_ns));
        TRY(launch(NULL, kernel_ns));
        TRY(launch(s, 3 * kernel_ns));
        TRY(cuStreamSynchronize(NULL));
    }
    return CUDA_SUCCESS;
}

static CUresult poll_loop(void)
{
    CUstream s;
    CUevent e;
    TRY(cuStreamCreate(&s, 0));
    TRY(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < 3; k++)
            TRY(launch(s, kernel_ns));
        TRY(cuEventRecord(e, s));
        CUresult r;
        while ((r = (i & 1) ? cuStreamQuery(s) : cuEventQuery(e)) == CUDA_ERROR_NOT_READY)
            usleep(100);                /* polls; spares the CPU the tests share */
        TRY(r);
    }
    return CUDA_SUCCESS;
}

#define AHEAD 32
static CUresult queue(void)
{
    CUevent ev[AHEAD];
    for (int i = 0; i < AHEAD; i++)
        TRY(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < iters; i++) {
        TRY(launch(NULL, kernel_ns));
        TRY(launch(NULL, kernel_ns));
        TRY(cuEventRecord(ev[i % AHEAD], NULL));
        if (i >= AHEAD - 1)
            TRY(cuEventSynchronize(ev[(i + 1) % AHEAD]));
    }
    return CUDA_SUCCESS;
}

static void *thread_main(void *arg)
{
    CUresult *rc = arg;
    CUstream s;
    *rc = cuCtxSetCurrent(ctx);
    if (*rc == CUDA_SUCCESS)
        *rc = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    for (int i = 0; i < iters && *rc == CUDA_SUCCESS; i++)
        if ((*rc = launch(s, kernel_ns)) == CUDA_SUCCESS &&
            (*rc = launch(s, kernel_ns)) == CUDA_SUCCESS)
            *rc = cuStreamSynchronize(s);
    return NULL;
}

static CUresult threads(void)
{
    pthread_t th[2];
    CUresult rc[2] = { CUDA_SUCCESS, CUDA_SUCCESS };
    for (int i = 0; i < 2; i++)
        if (pthread_create(&th[i], NULL, thread_main, &rc[i]) != 0)
            return CUDA_ERROR_OPERATING_SYSTEM;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    return rc[0] != CUDA_SUCCESS ? rc[0] : rc[1];
}

static CUresult copies(void)
{
    enum { BYTES = 1 << 20 };
    static char host[BYTES];
    CUdeviceptr d;
    TRY(cuMemAlloc(&d, BYTES));
    for (int i = 0; i < iters; i++) {
        TRY(cuMemsetD8Async(d, (unsigned char)i, BYTES, NULL));
        TRY(cuMemcpyHtoDAsync(d, host, BYTES, NULL));
        TRY(launch(NULL, kernel_ns));
        TRY(cuMemcpyDtoH(host, d, BYTES));
    }
    return cuMemFree(d);
}

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int done_n;

static void CUDA_CB step_done(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&done_mu);
    done_n++;
    pthread_cond_signal(&done_cv);
    pthread_mutex_unlock(&done_mu);
}

static CUresult hostfn(void)
{
    for (int i = 0; i < iters; i++) {
        TRY(launch(NULL, kernel_ns));
        TRY(launch(NULL, kernel_ns));
        TRY(cuLaunchHostFunc(NULL, step_done, NULL));
        pthread_mutex_lock(&done_mu);
        while (done_n <= i)
            pthread_cond_wait(&done_cv, &done_mu);
        pthread_mutex_unlock(&done_mu);
    }
    return CUDA_SUCCESS;
}

static CUresult hold(void)
{
    for (int i = 0; i < iters; i++)
        TRY(launch(NULL, kernel_ns));
    printf("queued\n");
    fflush(stdout);
    for (;;)
        pause();
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: drainclient <kernels.cubin> <pattern> <iterations> "
                        "<kernel_us>\n");
        return 2;
    }
    iters = atoi(argv[3]);
    kernel_ns = strtoull(argv[4], NULL, 10) * 1000ull;
    CUmodule m;
    CUresult rc = cuInit(0);
    if (!rc) rc = cuDevicePrimaryCtxRetain(&ctx, 0);
    if (!rc) rc = cuCtxSetCurrent(ctx);
    if (!rc) rc = cuModuleLoad(&m, argv[1]);
    if (!rc) rc = cuModuleGetFunction(&spin, m, "salus_spin");
    const char *p = argv[2];
    if (!rc) {
        rc = !strcmp(p, "plain") ? plain() : !strcmp(p, "side") ? side() :
             !strcmp(p, "poll") ? poll_loop() : !strcmp(p, "queue") ? queue() :
             !strcmp(p, "threads") ? threads() : !strcmp(p, "hold") ? hold() :
             !strcmp(p, "copies") ? copies() : !strcmp(p, "hostfn") ? hostfn() :
             CUDA_ERROR_INVALID_VALUE;
    }
    if (!rc)
        rc = cuCtxSynchronize();
    printf("done %d\n", (int)rc);
    return rc == CUDA_SUCCESS ? 0 : 1;
}

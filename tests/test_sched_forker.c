/*
 * test_sched_forker.c - a driver-API program for test_sched_sim (not a test
 * itself): it trains for a while as a DataLoader-using job does, forking a
 * worker after CUDA is in use; the worker makes no CUDA call.
 *
 *   test_sched_forker <kernels.cubin> <milliseconds>
 *
 * Prints "worker <pid>" when it forks and "ok" at the end; exit 0, or 1 on
 * a CUDA failure.
 */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000ull + (unsigned long long)ts.tv_nsec / 1000000ull;
}

static int iteration(CUfunction spin)
{
    unsigned long long ns = 1000000;              /* 1 ms of GPU time */
    void *args[] = { &ns };
    for (int k = 0; k < 4; k++)
        if (cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS)
            return -1;
    return cuCtxSynchronize() == CUDA_SUCCESS ? 0 : -1;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction spin;
    if (argc != 3)
        return 2;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuModuleLoad(&mod, argv[1]) != CUDA_SUCCESS ||
        cuModuleGetFunction(&spin, mod, "salus_spin") != CUDA_SUCCESS)
        return 1;
    for (int i = 0; i < 5; i++)
        if (iteration(spin) != 0)
            return 1;
    fflush(stdout);
    pid_t worker = fork();
    if (worker == 0) {                            /* a DataLoader worker: CPU only */
        struct timespec ts = { 0, 300 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        _exit(0);
    }
    printf("worker %d\n", (int)worker);
    fflush(stdout);
    unsigned long long end = now_ms() + (unsigned long long)atol(argv[2]);
    while (now_ms() < end)
        if (iteration(spin) != 0)
            return 1;
    int status;
    waitpid(worker, &status, 0);
    printf("ok\n");
    return 0;
}

/*
 * admitclient.c - a job that holds its context and memory until killed:
 * it retains the primary context of device 0, prints "ctx <ns>" (the
 * CLOCK_MONOTONIC time the driver made it), allocates <MiB> (0: nothing)
 * with cuMemAlloc_v2, prints "ready" and waits for a signal.  For
 * test_memory_admit, over simgpu with libsalus preloaded: the order in
 * which queued jobs get their contexts.  With "wait", it waits for
 * SIGUSR1 between its context and its allocation.
 *
 *   admitclient <MiB> [wait]
 *
 * Exits 1 with the failing call's CUresult printed when a call fails.
 */
#include <cuda.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    CUcontext ctx;
    CUdeviceptr p;
    struct timespec ts;
    CUresult rc;
    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "wait") != 0)) {
        fprintf(stderr, "usage: admitclient <MiB> [wait]\n");
        return 2;
    }
    sigset_t usr1;                    /* blocked from the start: none is lost */
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    unsigned long long mib = strtoull(argv[1], NULL, 10);
    if ((rc = cuInit(0)) != CUDA_SUCCESS || (rc = cuDevicePrimaryCtxRetain(&ctx, 0)) != CUDA_SUCCESS ||
        (rc = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
        goto out_fail;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    printf("ctx %lld\n", (long long)ts.tv_sec * 1000000000ll + ts.tv_nsec);
    fflush(stdout);
    int sig;
    if (argc == 3)
        sigwait(&usr1, &sig);
    if (mib && (rc = cuMemAlloc_v2(&p, mib << 20)) != CUDA_SUCCESS)
        goto out_fail;
    printf("ready\n");
    fflush(stdout);
    for (;;)
        pause();
out_fail:
    printf("failed %d\n", (int)rc);
    return 1;
}

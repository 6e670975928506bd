/*
 * rankclient.c - one rank of a data-parallel job, as DDP runs one per GPU,
 * for the gang tests over simgpu: every iteration it runs its kernel, tells
 * its peer it is done (a value written on its stream after the kernel, into
 * host memory the ranks share), waits on its stream until the peer's value
 * says the same (a collective's dependency: the peer's kernel has run) and
 * synchronizes the stream (the host waits, as .item() after an all-reduce).
 *
 *   rankclient <kernels.cubin> <shm name> <rank 0|1> <iterations> <kernel ns>
 *
 * Rank r uses CUDA device r and writes word r of the shared page; it waits
 * on word 1 - r.  Set up (its context, module and stream), it adds one to
 * word 2 and starts when word 3 is not 0 (the caller's go, so that the
 * jobs start together).  Its last line on stdout is one JSON object: the rank, the
 * iterations done and the first failing CUresult (0: none); it exits 0 only
 * when all succeeded.
 */
#include <cuda.h>

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: rankclient <kernels.cubin> <shm> <rank> <iterations> <ns>\n");
        return 2;
    }
    int rank = atoi(argv[3]) ? 1 : 0;
    long iters = atol(argv[4]), done = 0;
    unsigned long long ns = strtoull(argv[5], NULL, 0);
    int fd = shm_open(argv[2], O_RDWR, 0600);
    uint32_t *words = fd >= 0 ? mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                              : MAP_FAILED;
    if (words == MAP_FAILED) {
        perror("rankclient: the shared page");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction spin;
    CUstream s;
    CUresult rc;
    if ((rc = cuInit(0)) || (rc = cuDeviceGet(&dev, rank)) ||
        (rc = cuDevicePrimaryCtxRetain(&ctx, dev)) || (rc = cuCtxSetCurrent(ctx)) ||
        (rc = cuModuleLoad(&mod, argv[1])) ||
        (rc = cuModuleGetFunction(&spin, mod, "salus_spin")) ||
        (rc = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) ||
        (rc = cuMemHostRegister(words, 4096, CU_MEMHOSTREGISTER_DEVICEMAP)))
        goto out;
    __atomic_add_fetch(&words[2], 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&words[3], __ATOMIC_ACQUIRE))
        usleep(1000);
    CUdeviceptr mine = (CUdeviceptr)(uintptr_t)&words[rank];
    CUdeviceptr peer = (CUdeviceptr)(uintptr_t)&words[1 - rank];
    for (long i = 1; i <= iters; i++) {
        void *args[] = { &ns };
        if ((rc = cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL)) ||
            (rc = cuStreamWriteValue32(s, mine, (cuuint32_t)i, 0)) ||
            (rc = cuStreamWaitValue32(s, peer, (cuuint32_t)i, CU_STREAM_WAIT_VALUE_GEQ)) ||
            (rc = cuStreamSynchronize(s)))
            goto out;
        done = i;
    }
out:
    printf("{\"rank\":%d,\"iterations\":%ld,\"rc\":%d}\n", rank, done, (int)rc);
    fflush(stdout);
    return rc == CUDA_SUCCESS ? 0 : 1;
}

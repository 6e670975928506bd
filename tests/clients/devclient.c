/*
 * devclient.c - a driver-API program that uses several devices the way
 * frameworks do, for the scheduler's device tests over simgpu
 * (test_sched_devices):
 *
 *   devclient <kernels.cubin> stream <iterations> <kernel_us>
 *       CUDA 13's streams: primary contexts on devices 0 and 1, a CUkernel
 *       from a library (cuLibraryGetKernel, not tied to a context), a stream
 *       made in device 1's context; then device 0's context is made current
 *       and every launch goes to the device-1 stream (the stream's context
 *       runs it, whatever is current), each iteration two kernels and a
 *       sync of that stream;
 *   devclient <kernels.cubin> enroll <devices> <iterations> <kernel_us> <bytes>
 *       JAX's start: a primary context retained and made current on each of
 *       <devices> devices; then device 0 alone: <bytes> allocated there,
 *       and iterations of two kernels and a sync.
 *
 * It prints "uuid <ordinal> <32 hex digits>" for each device it opened,
 * "ready" once set up, and last "done <CUresult>"; it exits 0 only when
 * every call succeeded.
 */
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(call) do { if ((rc = (call)) != CUDA_SUCCESS) goto out; } while (0)

static void say_uuid(int ordinal)
{
    CUuuid u;
    if (cuDeviceGetUuid(&u, ordinal) != CUDA_SUCCESS)
        return;
    printf("uuid %d ", ordinal);
    for (int i = 0; i < 16; i++)
        printf("%02x", (unsigned char)u.bytes[i]);
    printf("\n");
}

static CUresult spin_on(CUfunction f, CUstream s, unsigned long long ns)
{
    void *args[] = { &ns };
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

static CUresult stream_mode(const char *cubin, int iters, unsigned long long ns)
{
    CUresult rc;
    CUcontext c0, c1;
    CUlibrary lib;
    CUkernel k;
    CUstream s1;
    TRY(cuDevicePrimaryCtxRetain(&c0, 0));
    TRY(cuDevicePrimaryCtxRetain(&c1, 1));
    say_uuid(0);
    say_uuid(1);
    TRY(cuLibraryLoadFromFile(&lib, cubin, NULL, NULL, 0, NULL, NULL, 0));
    TRY(cuLibraryGetKernel(&k, lib, "salus_spin"));
    TRY(cuCtxSetCurrent(c1));
    TRY(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    TRY(cuCtxSetCurrent(c0));
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < iters; i++) {
        TRY(spin_on((CUfunction)k, s1, ns));
        TRY(spin_on((CUfunction)k, s1, ns));
        TRY(cuStreamSynchronize(s1));
    }
out:
    return rc;
}

static CUresult enroll_mode(const char *cubin, int devices, int iters, unsigned long long ns,
                            unsigned long long bytes)
{
    CUresult rc = CUDA_SUCCESS;
    CUcontext c[8], c0 = NULL;
    CUmodule mod;
    CUfunction f;
    CUdeviceptr p;
    for (int d = 0; d < devices && d < 8; d++) {
        TRY(cuDevicePrimaryCtxRetain(&c[d], d));
        TRY(cuCtxSetCurrent(c[d]));
        say_uuid(d);
        if (d == 0)
            c0 = c[d];
    }
    TRY(cuCtxSetCurrent(c0));
    TRY(cuModuleLoad(&mod, cubin));
    TRY(cuModuleGetFunction(&f, mod, "salus_spin"));
    if (bytes)
        TRY(cuMemAlloc(&p, bytes));
    printf("ready\n");
    fflush(stdout);
    for (int i = 0; i < iters; i++) {
        TRY(spin_on(f, NULL, ns));
        TRY(spin_on(f, NULL, ns));
        TRY(cuStreamSynchronize(NULL));
    }
out:
    return rc;
}

int main(int argc, char **argv)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    if (argc < 3) {
        fprintf(stderr, "usage: devclient <kernels.cubin> stream|enroll ...\n");
        return 2;
    }
    if ((rc = cuInit(0)) != CUDA_SUCCESS)
        goto out;
    if (!strcmp(argv[2], "stream") && argc == 5)
        rc = stream_mode(argv[1], atoi(argv[3]), strtoull(argv[4], NULL, 0) * 1000ull);
    else if (!strcmp(argv[2], "enroll") && argc == 7)
        rc = enroll_mode(argv[1], atoi(argv[3]), atoi(argv[4]),
                         strtoull(argv[5], NULL, 0) * 1000ull, strtoull(argv[6], NULL, 0));
    else
        fprintf(stderr, "devclient: bad arguments\n");
out:
    printf("done %d\n", (int)rc);
    return rc == CUDA_SUCCESS ? 0 : 1;
}

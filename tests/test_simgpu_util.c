/*
 * test_simgpu_util.c - what the simgpu test binaries share: a state of their
 * own, the primary context, the workloads' module and its kernels, a trace
 * file, and small readers.
 *
 * Each binary calls simt_init() from main() before any test: it picks a
 * unique SIMGPU_STATE and SIMGPU_TRACE, so that binaries never share state,
 * and removes both at exit.  Single-threaded, like the tests.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/testutil.h"

char simt_state[128];
char simt_trace[512];
CUcontext simt_ctx;
CUmodule simt_mod;
CUfunction simt_spin, simt_fill, simt_axpy;

static void cleanup(void)
{
    static pid_t owner;
    if (!owner)
        owner = getpid();
    if (owner == getpid() && simt_state[0]) {
        shm_unlink(simt_state);
        unlink(simt_trace);
    }
}

/* Returns 0, or prints what failed and returns -1.  env: NULL, or
 * "NAME=VALUE" strings ending with NULL, set after the defaults (a binary
 * that tests a setting read at cuInit). */
int simt_init_env(const char *tag, const char *const *env)
{
    char path[512];
    tu_unique_name(tag, simt_state, sizeof simt_state);
    snprintf(simt_trace, sizeof simt_trace, "%s/%s-trace.jsonl", tu_tmpdir(), tag);
    unlink(simt_trace);
    setenv("SIMGPU_STATE", simt_state, 1);
    setenv("SIMGPU_MEMORY", "16G", 1);
    setenv("SIMGPU_TRACE", simt_trace, 1);
    unsetenv("SIMGPU_DEVICES");
    unsetenv("SIMGPU_KERNEL_NS");
    unsetenv("SIMGPU_CTX_SWITCH_US");
    unsetenv("SIMGPU_KERNEL_WAVE_NS");
    unsetenv("SIMGPU_KERNEL_LAUNCH_NS");
    unsetenv("SIMGPU_KERNEL_TABLE");
    unsetenv("LD_PRELOAD");
    for (int i = 0; env && env[i]; i++)
        putenv((char *)env[i]);
    cleanup();                          /* records the owner */
    atexit(cleanup);
    CUresult rc;
    if ((rc = cuInit(0)) || (rc = cuDevicePrimaryCtxRetain(&simt_ctx, 0)) ||
        (rc = cuCtxSetCurrent(simt_ctx)) ||
        (rc = cuModuleLoad(&simt_mod, tu_build_path("workloads/kernels.cubin", path,
                                                    sizeof path))) ||
        (rc = cuModuleGetFunction(&simt_spin, simt_mod, "salus_spin")) ||
        (rc = cuModuleGetFunction(&simt_fill, simt_mod, "salus_fill")) ||
        (rc = cuModuleGetFunction(&simt_axpy, simt_mod, "salus_axpy"))) {
        fprintf(stderr, "simt_init: set-up failed with CUresult %d\n", (int)rc);
        return -1;
    }
    return 0;
}

int simt_init(const char *tag)
{
    return simt_init_env(tag, NULL);
}

uint64_t simt_free(void)
{
    size_t free = 0, total = 0;
    cuMemGetInfo(&free, &total);
    return free;
}

/* Launch salus_spin(ns) on s. */
CUresult simt_spin_on(CUstream s, unsigned long long ns)
{
    void *args[] = { &ns };
    return cuLaunchKernel(simt_spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

/* Launch salus_fill(p, v, n). */
CUresult simt_fill_on(CUstream s, CUdeviceptr p, float v, unsigned long long n)
{
    void *args[] = { &p, &v, &n };
    return cuLaunchKernel(simt_fill, 8, 1, 1, 128, 1, 1, 0, s, args, NULL);
}

/* The kernels of the trace whose name is name (NULL: all), in start order. */
long simt_trace_named(const char *name, tu_kernel_t **out)
{
    tu_kernel_t *k;
    long n = tu_trace_load(simt_trace, &k), m = 0;
    if (n < 0)
        return -1;
    for (long i = 0; i < n; i++)
        if (!name || !strcmp(k[i].name, name))
            k[m++] = k[i];
    *out = k;
    return m;
}

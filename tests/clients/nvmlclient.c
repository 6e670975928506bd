/*
 * nvmlclient.c - a program that holds device memory and reads it back both
 * ways, through the driver (cuMemGetInfo_v2) and through NVML, as tools and
 * frameworks do; for test_nvml, over simgpu (and its NVML), with libsalus
 * preloaded or not.
 *
 *   nvmlclient <MiB> [hold | spin <kernels.cubin>]
 *
 * Retains device 0's primary context, allocates <MiB>, then prints one JSON
 * line ("program":"nvmlclient", "step":0): the driver's free and total, what
 * NVML's nvmlDeviceGetMemoryInfo and _v2 say of device 0, the pids of
 * nvmlDeviceGetComputeRunningProcesses and its _v2 and _v3 (sorted, comma
 * separated), and how many of the names libsalus hooks resolved to a
 * function of libsalus with exactly that name.  With `hold` it then prints
 * the next step's line at each SIGUSR1, until SIGTERM.  With `spin` it
 * writes its memory and runs as a training job (1 ms salus_spin kernels,
 * each followed by a stream synchronize) while a second thread prints a
 * line at each SIGUSR1: the job can wait at the gate and be paged out, and
 * still be asked.
 *
 * Built twice: nvmlclient dlopens libnvidia-ml.so.1 and dlsyms every name
 * (pynvml's and nvidia-smi's way); nvmlclient-linked (NVML_LINKED) is
 * linked to it.  A failed call prints its code in place of the numbers.
 */
#include <cuda.h>
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1
#include <nvml.h>

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvml_list.h"

#define MIB (1ull << 20)

typedef nvmlReturn_t (*procs_v1_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v1_t *);
typedef nvmlReturn_t (*procs_v2_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *);

static struct {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*mem2)(nvmlDevice_t, nvmlMemory_v2_t *);
    procs_v1_fn procs1;
    procs_v2_fn procs2, procs3;
} nv;

static int wrapped;       /* hooked names that resolved to libsalus's own */

#ifdef NVML_LINKED
static int bind(void)
{
    nv.init = nvmlInit_v2;
    nv.handle = nvmlDeviceGetHandleByIndex_v2;
    nv.mem = nvmlDeviceGetMemoryInfo;
    nv.mem2 = nvmlDeviceGetMemoryInfo_v2;
    nv.procs1 = nvmlDeviceGetComputeRunningProcesses;
    nv.procs2 = nvmlDeviceGetComputeRunningProcesses_v2;
    nv.procs3 = nvmlDeviceGetComputeRunningProcesses_v3;
    return 0;
}
#else
/* Where a dlsym answer lies: 1 in libsalus, under exactly that name. */
static int in_salus_as(void *fn, const char *name)
{
    Dl_info info;
    return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libsalus") &&
           info.dli_sname && strcmp(info.dli_sname, name) == 0;
}

static int bind(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
#define LOOK_(cat, name, type) wrapped += in_salus_as(dlsym(h, #name), #name);
    NVH_LIST(LOOK_)
    *(void **)&nv.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nv.handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&nv.mem = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.mem2 = dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    *(void **)&nv.procs1 = dlsym(h, "nvmlDeviceGetComputeRunningProcesses");
    *(void **)&nv.procs2 = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v2");
    *(void **)&nv.procs3 = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    return nv.init && nv.handle && nv.mem && nv.mem2 && nv.procs1 && nv.procs2 && nv.procs3
               ? 0 : -1;
}
#endif

static int cmp_uint(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/* "pid,pid,..." sorted, or "error <rc>". */
static void pids_text(unsigned *pids, unsigned n, nvmlReturn_t rc, char *out, size_t len)
{
    if (rc != NVML_SUCCESS) {
        snprintf(out, len, "error %d", (int)rc);
        return;
    }
    qsort(pids, n, sizeof *pids, cmp_uint);
    out[0] = 0;
    for (unsigned i = 0; i < n; i++)
        snprintf(out + strlen(out), len - strlen(out), "%s%u", i ? "," : "", pids[i]);
}

static void procs(nvmlDevice_t d, int v, char *out, size_t len)
{
    nvmlProcessInfo_v2_t rows[64];
    nvmlProcessInfo_v1_t rows1[64];
    unsigned pids[64], n = 0;
    nvmlReturn_t rc;
    if (v == 1) {
        n = 64;
        rc = nv.procs1(d, &n, rows1);
        for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++)
            pids[i] = rows1[i].pid;
    } else {
        /* Ask the size first, as nvidia-smi does. */
        unsigned want = 0;
        rc = (v == 2 ? nv.procs2 : nv.procs3)(d, &want, NULL);
        if (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE) {
            n = want < 64 ? want : 64;
            rc = want ? (v == 2 ? nv.procs2 : nv.procs3)(d, &n, rows) : NVML_SUCCESS;
        }
        for (unsigned i = 0; rc == NVML_SUCCESS && i < n; i++)
            pids[i] = rows[i].pid;
    }
    pids_text(pids, n, rc, out, len);
}

/* The driver's view and NVML's, read as of one moment: a peer that takes or
 * gives back memory between the two (a page-out beside a job that
 * allocates) would make them disagree for nothing, so the reads are made
 * again until cuMemGetInfo says the same after NVML as before it (stable:
 * 0 when it never did in 20 tries). */
static void report(int step, nvmlDevice_t d)
{
    size_t cu_free = 0, cu_total = 0, again_free = 0, again_total = 0;
    CUresult crc;
    nvmlMemory_t m1;
    nvmlMemory_v2_t m2;
    nvmlReturn_t r1, r2;
    int stable = 0;
    for (int i = 0; i < 20 && !stable; i++) {
        crc = cuMemGetInfo(&cu_free, &cu_total);
        m1 = (nvmlMemory_t){ 0 };
        m2 = (nvmlMemory_v2_t){ .version = nvmlMemory_v2 };
        r1 = nv.mem(d, &m1);
        r2 = nv.mem2(d, &m2);
        stable = cuMemGetInfo(&again_free, &again_total) == crc && again_free == cu_free &&
                 again_total == cu_total;
    }
    char p1[512], p2[512], p3[512];
    procs(d, 1, p1, sizeof p1);
    procs(d, 2, p2, sizeof p2);
    procs(d, 3, p3, sizeof p3);
    printf("{\"program\":\"nvmlclient\",\"step\":%d,\"pid\":%d,\"cu_rc\":%d,\"cu_free\":%zu,"
           "\"cu_total\":%zu,\"v1_rc\":%d,\"v1_total\":%llu,\"v1_free\":%llu,\"v1_used\":%llu,"
           "\"v2_rc\":%d,\"v2_total\":%llu,\"v2_free\":%llu,\"v2_used\":%llu,"
           "\"v2_reserved\":%llu,\"procs_v1\":\"%s\",\"procs_v2\":\"%s\",\"procs_v3\":\"%s\","
           "\"wrapped\":%d,\"hooked\":%d,\"stable\":%d}\n",
           step, (int)getpid(), (int)crc, cu_free, cu_total, (int)r1, m1.total, m1.free, m1.used,
           (int)r2, m2.total, m2.free, m2.used, m2.reserved, p1, p2, p3, wrapped, NVH_COUNT,
           stable);
    fflush(stdout);
}

static sigset_t sigs;
static nvmlDevice_t dev0;
static CUcontext ctx;

/* Print a line at each SIGUSR1 (step 1 on), until SIGTERM. */
static void answer_signals(void)
{
    for (int step = 1;; step++) {
        int sig;
        if (sigwait(&sigs, &sig) != 0 || sig == SIGTERM)
            return;
        report(step, dev0);
    }
}

static void *reporter(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);           /* cuMemGetInfo answers for the current context */
    answer_signals();
    fflush(stdout);
    _exit(0);
}

/* A job: 1 ms kernels, each waited for, for ever (until SIGTERM). */
static int spin(const char *cubin, CUdeviceptr p, unsigned long long bytes)
{
    CUmodule m;
    CUfunction f;
    unsigned long long ns = 1000000;
    void *args[] = { &ns };
    pthread_t t;
    if (cuModuleLoad(&m, cubin) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "salus_spin") != CUDA_SUCCESS ||
        (bytes && cuMemsetD8(p, 0x5a, bytes) != CUDA_SUCCESS) ||
        pthread_create(&t, NULL, reporter, NULL) != 0) {
        fprintf(stderr, "nvmlclient: cannot start the job\n");
        return 1;
    }
    for (;;)
        if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS ||
            cuStreamSynchronize(NULL) != CUDA_SUCCESS) {
            fprintf(stderr, "nvmlclient: a kernel failed\n");
            return 1;
        }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: nvmlclient <MiB> [hold | spin <kernels.cubin>]\n");
        return 2;
    }
    int hold = argc > 2 && strcmp(argv[2], "hold") == 0;
    const char *cubin = argc > 3 && strcmp(argv[2], "spin") == 0 ? argv[3] : NULL;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGUSR1);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);

    CUdevice dev;
    CUdeviceptr p = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "nvmlclient: no CUDA device\n");
        return 1;
    }
    unsigned long long mib = strtoull(argv[1], NULL, 10);
    if (mib && cuMemAlloc(&p, mib * MIB) != CUDA_SUCCESS) {
        fprintf(stderr, "nvmlclient: cuMemAlloc of %llu MiB failed\n", mib);
        return 1;
    }
    if (bind() != 0 || nv.init() != NVML_SUCCESS || nv.handle(0, &dev0) != NVML_SUCCESS) {
        fprintf(stderr, "nvmlclient: no NVML\n");
        return 1;
    }
    report(0, dev0);
    if (cubin)
        return spin(cubin, p, mib * MIB);
    if (hold)
        answer_signals();
    return 0;
}

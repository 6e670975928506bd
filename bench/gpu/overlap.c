/*
 * overlap.c - one process of bench/gpu/check.sh's overlap step: launches
 * salus_stamp (stamp.cu: fixed work over every SM, each block's start and
 * end on %globaltimer) in one of the submission patterns of a real
 * framework, so that the step can tell whether two such processes' kernels
 * ever ran at the same time.
 *
 *   overlap --module CUBIN|PTX --stamps FILE --pattern P [--launches N]
 *           [--ms MS] [--iters K]
 *
 * Patterns (issue 11, section 1):
 *   plain    one kernel, then cuCtxSynchronize
 *   side     one kernel on the legacy stream and one on a non-blocking side
 *            stream, then cuStreamSynchronize of the legacy stream only
 *   poll     two kernels, then cuStreamQuery (even iterations) or
 *            cuEventQuery (odd) in a loop instead of a synchronizing call
 *   queue32  JAX-style dispatch: 32 launches in flight, each waiting only
 *            for the event of the launch 32 before it; prints
 *            {"event":"queued"} once 32 are queued (check.sh's SIGKILL cue)
 *   threads  two threads, each on its own non-blocking stream, each
 *            synchronizing only that stream
 *
 * The stamps go to FILE, mapped shared and registered with the driver
 * (cuMemHostRegister, as NCCL registers its shared memory), so that they
 * outlive a SIGKILLed process: launch i, block b at offset (i * blocks + b)
 * * 16, start then end, 0 where the block never ran.  If the driver refuses
 * the registration, device memory is used and copied to FILE at the end.
 * The module is the cubin, or the PTX beside it (same name, .ptx) when the
 * driver cannot load the cubin.  --ms calibrates iters so that one launch takes about MS ms alone (over
 * simgpu, whose kernels write nothing, the default iters stay).
 *
 * stdout: a first JSON line (pid, pattern, launches, blocks, iters,
 * stamps: "host" or "device") before any launch, {"event":"queued"} in
 * queue32, and a last line with the seconds taken.  Exit 0, 1 on a CUDA
 * error (said on stderr), 2 on bad arguments.
 */
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CK(call)                                                              \
    do {                                                                      \
        CUresult rc_ = (call);                                                \
        if (rc_ != CUDA_SUCCESS) {                                            \
            const char *s_ = NULL;                                            \
            cuGetErrorName(rc_, &s_);                                         \
            fprintf(stderr, "overlap: %s: %s (%d)\n", #call, s_ ? s_ : "?", (int)rc_); \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

static struct {
    const char *module, *stamps, *pattern;
    int launches;
    double ms;
    unsigned long long iters;
} opt = { NULL, NULL, "plain", 64, 2.0, 1ull << 16 };

static CUcontext ctx;
static CUfunction fn;
static int blocks;
static CUdeviceptr dstamps;      /* the stamps as the device sees them */
static uint64_t *hstamps;        /* the shared mapping of FILE */
static size_t stamp_bytes;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void launch(int i, CUstream s)
{
    CUdeviceptr out = dstamps + (CUdeviceptr)i * blocks * 16;
    unsigned long long iters = opt.iters;
    void *args[] = { &iters, &out };
    CK(cuLaunchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, s, args, NULL));
}

/* ---- set-up ------------------------------------------------------------- */

static int usage(void)
{
    fprintf(stderr, "usage: overlap --module CUBIN|PTX --stamps FILE "
                    "--pattern plain|side|poll|queue32|threads [--launches N] [--ms MS] "
                    "[--iters K]\n");
    return 2;
}

static int parse(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -1;
        if (!strcmp(a, "--module"))
            opt.module = v;
        else if (!strcmp(a, "--stamps"))
            opt.stamps = v;
        else if (!strcmp(a, "--pattern"))
            opt.pattern = v;
        else if (!strcmp(a, "--launches"))
            opt.launches = atoi(v);
        else if (!strcmp(a, "--ms"))
            opt.ms = atof(v);
        else if (!strcmp(a, "--iters"))
            opt.iters = strtoull(v, NULL, 10);
        else
            return -1;
        i++;
    }
    return opt.module && opt.stamps && opt.launches > 0 && opt.launches % 2 == 0 &&
           opt.iters > 0 ? 0 : -1;
}

/* The stamps in FILE, registered; else in device memory (returns "device"). */
static const char *stamps_map(void)
{
    stamp_bytes = (size_t)opt.launches * blocks * 16;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (stamp_bytes + page - 1) / page * page;
    int fd = open(opt.stamps, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
        perror(opt.stamps);
        exit(1);
    }
    hstamps = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (hstamps == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    if (cuMemHostRegister(hstamps, len, CU_MEMHOSTREGISTER_DEVICEMAP) == CUDA_SUCCESS &&
        cuMemHostGetDevicePointer(&dstamps, hstamps, 0) == CUDA_SUCCESS)
        return "host";
    CK(cuMemAlloc(&dstamps, stamp_bytes));
    CK(cuMemsetD8(dstamps, 0, stamp_bytes));
    return "device";
}

/* Iterations for about opt.ms per launch, from one launch of opt.iters. */
static void calibrate(void)
{
    CUdeviceptr probe;
    uint64_t t[2] = { 0, 0 };
    CK(cuMemAlloc(&probe, (size_t)blocks * 16));
    unsigned long long iters = opt.iters;
    void *args[] = { &iters, &probe };
    CK(cuLaunchKernel(fn, blocks, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(t, probe, sizeof t));
    CK(cuMemFree(probe));
    if (t[1] > t[0] && opt.ms > 0) {
        double k = opt.ms * 1e6 / (double)(t[1] - t[0]);
        opt.iters = (unsigned long long)(opt.iters * k) + 1;
    }
}

/* ---- patterns ----------------------------------------------------------- */

static void run_plain(void)
{
    for (int i = 0; i < opt.launches; i++) {
        launch(i, NULL);
        CK(cuCtxSynchronize());
    }
}

static void run_side(void)
{
    CUstream side;
    CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < opt.launches; i += 2) {
        launch(i, NULL);
        launch(i + 1, side);
        CK(cuStreamSynchronize(NULL));
    }
    CK(cuStreamSynchronize(side));
}

static void run_poll(void)
{
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < opt.launches; i += 2) {
        launch(i, NULL);
        launch(i + 1, NULL);
        CK(cuEventRecord(ev, NULL));
        CUresult r;
        while ((r = (i / 2) % 2 ? cuEventQuery(ev) : cuStreamQuery(NULL)) == CUDA_ERROR_NOT_READY)
            sched_yield();
        CK(r);
    }
}

static void run_queue32(void)
{
    CUevent ev[32];
    for (int j = 0; j < 32; j++)
        CK(cuEventCreate(&ev[j], CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < opt.launches; i++) {
        if (i >= 32)
            CK(cuEventSynchronize(ev[i % 32]));
        launch(i, NULL);
        CK(cuEventRecord(ev[i % 32], NULL));
        if (i == 31 || (i == opt.launches - 1 && i < 31)) {
            printf("{\"event\":\"queued\"}\n");
            fflush(stdout);
        }
    }
    CK(cuCtxSynchronize());
}

static void *thread_main(void *arg)
{
    int first = (int)(intptr_t)arg;
    CUstream s;
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = first; i < opt.launches; i += 2) {
        launch(i, s);
        CK(cuStreamSynchronize(s));
    }
    CK(cuStreamDestroy(s));
    return NULL;
}

static void run_threads(void)
{
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        if (pthread_create(&t[k], NULL, thread_main, (void *)(intptr_t)k) != 0) {
            fprintf(stderr, "overlap: pthread_create failed\n");
            exit(1);
        }
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
}

int main(int argc, char **argv)
{
    if (parse(argc, argv) != 0)
        return usage();
    static const struct { const char *name; void (*run)(void); } patterns[] = {
        { "plain", run_plain }, { "side", run_side }, { "poll", run_poll },
        { "queue32", run_queue32 }, { "threads", run_threads },
    };
    void (*run)(void) = NULL;
    for (size_t i = 0; i < sizeof patterns / sizeof patterns[0]; i++)
        if (!strcmp(opt.pattern, patterns[i].name))
            run = patterns[i].run;
    if (!run)
        return usage();

    CUdevice dev;
    CUmodule mod;
    int sms = 0, per_sm = 0;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    if (cuModuleLoad(&mod, opt.module) != CUDA_SUCCESS) {
        /* A driver too old for the cubin: the PTX beside it (stamp.ptx). */
        char ptx[4096];
        snprintf(ptx, sizeof ptx, "%s", opt.module);
        char *dot = strrchr(ptx, '.');
        if (dot && (size_t)(dot - ptx) + 5 < sizeof ptx)
            strcpy(dot, ".ptx");
        fprintf(stderr, "overlap: %s does not load here; trying %s\n", opt.module, ptx);
        CK(cuModuleLoad(&mod, ptx));
    }
    CK(cuModuleGetFunction(&fn, mod, "salus_stamp"));
    CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, 256, 0));
    blocks = sms * (per_sm > 0 ? per_sm : 1);
    calibrate();
    const char *where = stamps_map();
    printf("{\"pid\":%d,\"pattern\":\"%s\",\"launches\":%d,\"blocks\":%d,\"iters\":%llu,"
           "\"stamps\":\"%s\"}\n", (int)getpid(), opt.pattern, opt.launches, blocks, opt.iters,
           where);
    fflush(stdout);

    double t0 = now_s();
    run();
    CK(cuCtxSynchronize());
    double secs = now_s() - t0;
    if (!strcmp(where, "device")) {
        CK(cuMemcpyDtoH(hstamps, dstamps, stamp_bytes));
        msync(hstamps, stamp_bytes, MS_SYNC);
    }
    printf("{\"pid\":%d,\"pattern\":\"%s\",\"launches\":%d,\"seconds\":%.3f}\n", (int)getpid(),
           opt.pattern, opt.launches, secs);
    return 0;
}

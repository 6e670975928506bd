/*
 * test_sched_seam.c - the drain never breaks a stream capture, at the seams
 * where one can begin: in one process over simgpu (linked as the driver,
 * the scheduler given its table), whose context synchronize invalidates a
 * global-mode capture as the driver's does.
 *   between the passes  a capture begins between the drain's two
 *                       synchronizing passes (sched_drain_set_seam): the
 *                       second pass synchronizes nothing, the drain says it
 *                       deferred, and the capture ends with its graph;
 *   during a pass       another thread begins a capture while the drain's
 *                       first synchronize waits for a 150 ms kernel: its
 *                       begin waits for that synchronize to return, the
 *                       second pass defers, and the capture ends with its
 *                       graph.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/testutil.h"
#include "sched/sched_int.h"

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)

static CUcontext ctx;
static CUfunction spin;
static CUstream cap;
static CUresult begun;
static uint64_t begun_ns;

static void *driver_sym(const char *name)
{
    return dlsym(RTLD_DEFAULT, name);
}

static CUresult spin_on(CUstream s, unsigned long long ns)
{
    void *args[] = { &ns };
    return cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
}

/* A capture's begin as intercept makes it: counted first, then the driver. */
static void begin_capture(void)
{
    sched_capture_begin();
    begun = cuStreamBeginCapture(cap, CU_STREAM_CAPTURE_MODE_GLOBAL);
    begun_ns = tu_now_ns();
    if (begun != CUDA_SUCCESS)
        sched_capture_end();
    else
        begun = spin_on(cap, 1000);          /* recorded, not run */
}

/* The capture ended on its own thread (a global capture's end must be):
 * its status before, the end's answer, the graph. */
typedef struct ended {
    CUresult query, end;
    CUstreamCaptureStatus status;
    CUgraph graph;
} ended_t;

static ended_t end_capture(void)
{
    ended_t e = { .status = CU_STREAM_CAPTURE_STATUS_NONE };
    e.query = cuStreamIsCapturing(cap, &e.status);
    e.end = cuStreamEndCapture(cap, &e.graph);
    sched_capture_end();
    return e;
}

/* It ended with its graph, not invalidated. */
static void assert_whole(const ended_t *e)
{
    CK(e->query);
    if (e->status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
        fail_msg("the capture's status is %d, not active: the drain synchronized a context "
                 "while it was open", (int)e->status);
    CK(e->end);
    assert_non_null(e->graph);
    CK(cuGraphDestroy(e->graph));
}

static int setup(void **state)
{
    (void)state;
    static int done;
    if (done)
        return 0;
    char sim[64], table[64], cubin[512];
    setenv("SIMGPU_STATE", tu_unique_name("sseam", sim, sizeof sim), 1);
    setenv("SALUS_TABLE", tu_unique_name("stseam", table, sizeof table), 1);
    setenv("SALUS_POLICY", "fair", 1);
    CUmodule mod;
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) ||
        cuModuleLoad(&mod, tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin)) ||
        cuModuleGetFunction(&spin, mod, "salus_spin") ||
        cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING))
        return -1;
    static drv_t drv;
    if (drv_resolve(driver_sym, &drv) != 0)
        return -1;
    sched_init(&drv);
    sched_thread_t th = { .gate = &sched_gate_unreg };
    sched_launch(&th, spin);          /* registers, holds device 0, notes the context */
    done = 1;
    return sched_captures() == 0 ? 0 : -1;
}

/* ---- between the passes ----------------------------------------------------- */

static void seam_capture(void)
{
    sched_drain_set_seam(NULL);
    begin_capture();
}

static void test_capture_between_passes(void **state)
{
    (void)state;
    CK(spin_on(NULL, 2000000));           /* 2 ms of work for the drain to wait for */
    sched_drain_set_seam(seam_capture);
    int rc = sched_drain_self();
    CK(begun);
    ended_t e = end_capture();
    assert_whole(&e);
    assert_int_equal(rc, -1);             /* the second pass deferred */
    assert_int_equal(sched_drain_self(), 0);
}

/* ---- during a pass ------------------------------------------------------------ */

static int drained;                      /* the main thread's drain returned */
static ended_t ended;

static void *capture_thread(void *arg)
{
    (void)arg;
    tu_sleep_ms(40);                      /* inside the first pass's synchronize */
    if ((begun = cuCtxSetCurrent(ctx)) == CUDA_SUCCESS)
        begin_capture();
    while (!__atomic_load_n(&drained, __ATOMIC_ACQUIRE))
        tu_sleep_ms(1);
    if (begun == CUDA_SUCCESS)
        ended = end_capture();
    return NULL;
}

static void test_capture_during_a_pass(void **state)
{
    (void)state;
    pthread_t th;
    CK(spin_on(NULL, 150000000));         /* the first synchronize waits 150 ms */
    uint64_t t0 = tu_now_ns();
    assert_int_equal(pthread_create(&th, NULL, capture_thread, NULL), 0);
    int rc = sched_drain_self();
    uint64_t done = tu_now_ns();
    __atomic_store_n(&drained, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CK(begun);
    print_message("      the capture began %.1f ms after the drain, which took %.1f ms\n",
                  (double)(begun_ns - t0) / 1e6, (double)(done - t0) / 1e6);
    assert_whole(&ended);
    assert_true(begun_ns - t0 >= 100000000ull);   /* after the synchronize in progress */
    assert_int_equal(rc, -1);
    assert_int_equal(sched_drain_self(), 0);
}

int main(void)
{
    if (!tu_built("workloads/kernels.cubin"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_capture_between_passes, setup),
        cmocka_unit_test_setup(test_capture_during_a_pass, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

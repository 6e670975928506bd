/*
 * test_simgpu_kmodel.c - simgpu's shape model of kernel durations
 * (SIMGPU_KERNEL_WAVE_NS, SIMGPU_KERNEL_LAUNCH_NS, SIMGPU_KERNEL_TABLE;
 * sim/kmodel.c), in a process that turns it on before cuInit: a kernel
 * lasts the launch time plus one wave time per wave of resident blocks, so
 * it grows with the grid, and with the block's threads and shared memory
 * through the blocks an SM holds; the table's rule sets a kernel's wave
 * time by its name (a malformed line beside it is ignored); salus_spin,
 * the workloads' kernel, keeps its own duration; a graph's kernel is timed
 * as the same launch made directly.  The fixed model (the default) is
 * test_simgpu_exec's test_default_duration.  And the launch queue's depth
 * (SIMGPU_QUEUE_DEPTH), set in the same process: a launch into a full
 * stream blocks the host until the oldest of its launches ends.
 *
 * Durations are read from the trace: start and end come from the model,
 * exact whatever the speed of the machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/testutil.h"

/* test_simgpu_util.c */
extern CUfunction simt_spin, simt_fill, simt_axpy;
int simt_init_env(const char *tag, const char *const *env);
CUresult simt_spin_on(CUstream s, unsigned long long ns);
long simt_trace_named(const char *name, tu_kernel_t **out);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define WAVE   3000ull                  /* SIMGPU_KERNEL_WAVE_NS */
#define LAUNCH 2000ull                  /* SIMGPU_KERNEL_LAUNCH_NS */
#define AXPY   50000ull                 /* the table's wave time of salus_axpy */
#define SMS    132ull

static CUdeviceptr buf;                 /* what the kernels write: 16 floats */

/* The duration of the last kernel of the trace named name. */
static uint64_t last_duration(const char *name)
{
    tu_kernel_t *k;
    long n = simt_trace_named(name, &k);
    assert_true(n >= 1);
    uint64_t d = k[n - 1].end_ns - k[n - 1].start_ns;
    free(k);
    return d;
}

/* salus_fill over 1 float with this shape; its duration. */
static uint64_t fill(unsigned gx, unsigned gy, unsigned bx, unsigned shmem)
{
    float v = 1;
    unsigned long long n = 1;
    void *args[] = { &buf, &v, &n };
    CK(cuLaunchKernel(simt_fill, gx, gy, 1, bx, 1, 1, shmem, NULL, args, NULL));
    CK(cuCtxSynchronize());
    return last_duration("salus_fill");
}

static uint64_t resident(CUfunction f, int block, size_t shmem)
{
    int n = 0;
    CK(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, f, block, shmem));
    assert_true(n >= 1);
    return (uint64_t)n * SMS;
}

static uint64_t model(uint64_t blocks, uint64_t per_wave, uint64_t wave)
{
    return LAUNCH + (blocks + per_wave - 1) / per_wave * wave;
}

static void test_grows_with_the_grid(void **state)
{
    (void)state;
    uint64_t per = resident(simt_fill, 128, 0);
    assert_int_equal(fill(1, 1, 1, 0), LAUNCH + WAVE);          /* one block: one wave */
    assert_int_equal(fill((unsigned)per, 1, 128, 0), LAUNCH + WAVE);
    assert_int_equal(fill((unsigned)per + 1, 1, 128, 0), LAUNCH + 2 * WAVE);
    assert_int_equal(fill((unsigned)per * 10, 1, 128, 0), LAUNCH + 10 * WAVE);
    /* Every dimension of the grid counts. */
    assert_int_equal(fill((unsigned)per, 10, 128, 0), LAUNCH + 10 * WAVE);
    assert_int_equal(fill(100000, 1, 128, 0), model(100000, per, WAVE));
}

static void test_block_and_shared_memory(void **state)
{
    (void)state;
    /* Bigger blocks, fewer of them per SM: the same grid takes more waves. */
    uint64_t small = resident(simt_fill, 64, 0), big = resident(simt_fill, 1024, 0);
    assert_true(big < small);
    assert_int_equal(fill(4096, 1, 64, 0), model(4096, small, WAVE));
    assert_int_equal(fill(4096, 1, 1024, 0), model(4096, big, WAVE));
    assert_true(fill(4096, 1, 1024, 0) > fill(4096, 1, 64, 0));
    /* Dynamic shared memory limits residency too. */
    uint64_t plain = resident(simt_fill, 128, 0), shared = resident(simt_fill, 128, 40000);
    assert_true(shared < plain);
    assert_int_equal(fill(4096, 1, 128, 40000), model(4096, shared, WAVE));
    assert_true(fill(4096, 1, 128, 40000) > fill(4096, 1, 128, 0));
}

/* The table's rule for salus_axpy sets its wave time; salus_fill, which no
 * rule names, keeps the default (test_grows_with_the_grid). */
static void test_table_by_name(void **state)
{
    (void)state;
    CUdeviceptr x;
    CK(cuMemAlloc(&x, 64));
    CK(cuMemsetD8(x, 0, 64));
    float a = 2;
    unsigned long long n = 16;
    void *args[] = { &buf, &x, &a, &n };
    uint64_t per = resident(simt_axpy, 256, 0);
    CK(cuLaunchKernel(simt_axpy, (unsigned)per * 3, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
    CK(cuCtxSynchronize());
    assert_int_equal(last_duration("salus_axpy"), LAUNCH + 3 * AXPY);
    CK(cuMemFree(x));
}

/* salus_spin lasts its parameter whatever its shape. */
static void test_spin_unchanged(void **state)
{
    (void)state;
    unsigned long long ns = 1234567;
    void *args[] = { &ns };
    CK(cuLaunchKernel(simt_spin, 50000, 1, 1, 1024, 1, 1, 0, NULL, args, NULL));
    CK(cuCtxSynchronize());
    assert_int_equal(last_duration("salus_spin"), ns);
    CK(simt_spin_on(NULL, 5000));
    CK(cuCtxSynchronize());
    assert_int_equal(last_duration("salus_spin"), 5000);
}

/* A kernel replayed from a graph is timed from its node's shape. */
static void test_graph_kernel(void **state)
{
    (void)state;
    CUstream s;
    CUgraph g;
    CUgraphExec ge;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    float v = 1;
    unsigned long long n = 1;
    void *args[] = { &buf, &v, &n };
    uint64_t per = resident(simt_fill, 256, 0);
    CK(cuLaunchKernel(simt_fill, (unsigned)per * 7, 1, 1, 256, 1, 1, 0, s, args, NULL));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiate(&ge, g, 0));
    CK(cuGraphLaunch(ge, s));
    CK(cuStreamSynchronize(s));
    assert_int_equal(last_duration("salus_fill"), LAUNCH + 7 * WAVE);
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy(s));
}

/* The launch queue (SIMGPU_QUEUE_DEPTH=8 here): a program that never syncs
 * runs at most 8 launches ahead of a stream's work, as the driver's push
 * buffer holds it: when the 20th of 5 ms kernels returns, the 12th has
 * ended; an event after the 11th is complete, one after the 19th is not. */
static void test_launch_queue_depth(void **state)
{
    (void)state;
    CUstream s;
    CUevent early, late;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&early, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&late, CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < 20; i++) {
        CK(simt_spin_on(s, 5000000));
        if (i == 11)
            CK(cuEventRecord(early, s));
        if (i == 18)
            CK(cuEventRecord(late, s));
    }
    assert_int_equal(cuEventQuery(early), CUDA_SUCCESS);
    assert_int_equal(cuEventQuery(late), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(s));
    CK(cuEventDestroy(early));
    CK(cuEventDestroy(late));
    CK(cuStreamDestroy(s));
}

int main(void)
{
    static char table[600], table_env[640];
    snprintf(table, sizeof table, "%s/simgpu-kmodel-%d.table", tu_tmpdir(), (int)getpid());
    FILE *f = fopen(table, "w");
    if (!f)
        return 1;
    fprintf(f, "# the test's table\n\nnot a rule\nsalus_axpy %llu  # by name\n", AXPY);
    fclose(f);
    snprintf(table_env, sizeof table_env, "SIMGPU_KERNEL_TABLE=%s", table);
    static const char wave[] = "SIMGPU_KERNEL_WAVE_NS=3000", launch[] = "SIMGPU_KERNEL_LAUNCH_NS=2000";
    static const char depth[] = "SIMGPU_QUEUE_DEPTH=8";
    const char *env[] = { wave, launch, depth, table_env, NULL };
    int rc = simt_init_env("simgpu-kmodel", env);
    unlink(table);                      /* read at cuInit */
    if (rc || cuMemAlloc(&buf, 64) != CUDA_SUCCESS)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grows_with_the_grid),
        cmocka_unit_test(test_block_and_shared_memory),
        cmocka_unit_test(test_table_by_name),
        cmocka_unit_test(test_spin_unchanged),
        cmocka_unit_test(test_graph_kernel),
        cmocka_unit_test(test_launch_queue_depth),
    };
    return cmocka_run_group_tests_name("simgpu shape model and launch queue", tests, NULL, NULL);
}

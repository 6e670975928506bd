/*
 * test_simgpu_memop.c - simgpu's stream memory operations: cuStreamWaitValue
 * and cuStreamWriteValue (32 and 64 bits, batched), their conditions and
 * argument checks, the time model (work behind a wait starts after the
 * awaited write, which takes effect after the work before it), a wait on
 * host memory shared with another process that completes only when that
 * process's kernel has run, and a wait that nothing satisfies, which keeps
 * its stream's syncs waiting until the value comes.
 *
 * The other process is this binary again (`--child writer <shm> <ns>`),
 * spawned with a deadline; it reports on stdout, one "key value" a line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/testutil.h"

/* test_simgpu_util.c */
extern char simt_state[], simt_trace[];
int simt_init(const char *tag);
CUresult simt_spin_on(CUstream s, unsigned long long ns);
long simt_trace_named(const char *name, tu_kernel_t **out);

/* The salus_spin kernels of the trace that started at or after t0. */
static long spins_since(uint64_t t0, tu_kernel_t **out)
{
    long n = simt_trace_named("salus_spin", out), m = 0;
    for (long i = 0; i < n; i++)
        if ((*out)[i].start_ns >= t0)
            (*out)[m++] = (*out)[i];
    return n < 0 ? n : m;
}

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))
#define MS 1000000ull
#define FLAG_BYTES 4096

static char self_path[512];

/* A page of host memory shared by name, mapped and registered (0 or -1). */
static volatile uint32_t *flags_map(const char *name, int create)
{
    int fd = shm_open(name, O_RDWR | (create ? O_CREAT | O_EXCL : 0), 0600);
    if (fd < 0 || (create && ftruncate(fd, FLAG_BYTES) != 0))
        return NULL;
    void *p = mmap(NULL, FLAG_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED || cuMemHostRegister(p, FLAG_BYTES, CU_MEMHOSTREGISTER_DEVICEMAP))
        return NULL;
    return p;
}

/* ---- the child: a kernel of <ns>, then flag[0] = 1 on the same stream ------------------------- */

static int child_writer(char **argv)
{
    CUcontext c;
    CUmodule m;
    CUfunction spin;
    CUstream s;
    char path[512];
    unsigned long long ns = strtoull(argv[1], NULL, 0);
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) ||
        cuModuleLoad(&m, tu_build_path("workloads/kernels.cubin", path, sizeof path)) ||
        cuModuleGetFunction(&spin, m, "salus_spin") || cuStreamCreate(&s, 0))
        return 1;
    volatile uint32_t *flag = flags_map(argv[0], 0);
    if (!flag)
        return 2;
    void *args[] = { &ns };
    CUresult rc = cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
    if (!rc)
        rc = cuStreamWriteValue32(s, (CUdeviceptr)(uintptr_t)flag, 1, 0);
    printf("early %u\n", flag[0]);       /* not before the kernel has run */
    if (!rc)
        rc = cuStreamSynchronize(s);
    printf("late %u\nrc %d\n", flag[0], (int)rc);
    return rc ? 3 : 0;
}

/* ---- in one process ------------------------------------------------------------------------------ */

static CUdeviceptr devptr(volatile void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

static void test_conditions_and_checks(void **state)
{
    (void)state;
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    uint64_t *host;
    CK(cuMemAllocHost((void **)&host, 64));
    CUdeviceptr w = devptr(host);
    host[0] = 5;
    CK(cuStreamWaitValue32(s, w, 5, CU_STREAM_WAIT_VALUE_EQ));
    CK(cuStreamWaitValue32(s, w, 3, CU_STREAM_WAIT_VALUE_GEQ));
    CK(cuStreamWaitValue32(s, w, 4, CU_STREAM_WAIT_VALUE_AND));
    CK(cuStreamWaitValue32(s, w, 0xfffffff0u, CU_STREAM_WAIT_VALUE_NOR));
    CK(cuStreamWaitValue64(s, w, 5, CU_STREAM_WAIT_VALUE_EQ));
    CK(cuStreamQuery(s));                              /* every condition held */
    host[0] = 0xfffffffeu;                             /* GEQ is cyclic: 2 is "after" it */
    CK(cuStreamWriteValue32(s, w, 2, 0));
    CK(cuStreamWaitValue32(s, w, 0xfffffffeu, CU_STREAM_WAIT_VALUE_GEQ));
    CK(cuStreamSynchronize(s));
    assert_int_equal((uint32_t)host[0], 2);
    CK(cuStreamWriteValue64(s, w + 8, 0x123456789abcull, 0));
    CK(cuStreamSynchronize(s));
    assert_int_equal(host[1], 0x123456789abcull);

    CUstreamBatchMemOpParams ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = w + 16;
    ops[0].writeValue.value = 7;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[1].waitValue.address = w + 16;
    ops[1].waitValue.value = 7;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    ops[2].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    CK(cuStreamBatchMemOp(s, 3, ops, 0));
    CK(cuStreamSynchronize(s));
    assert_int_equal((uint32_t)host[2], 7);

    uint32_t stack_word = 0;                           /* not registered: unreachable */
    CKE(cuStreamWaitValue32(s, devptr(&stack_word), 0, 0), CUDA_ERROR_INVALID_VALUE);
    CKE(cuStreamWriteValue32(s, w + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);   /* misaligned */
    CKE(cuStreamWaitValue32(s, w, 1, 0x10), CUDA_ERROR_INVALID_VALUE);     /* bad flag */
    CKE(cuStreamBatchMemOp(s, 1, ops, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFreeHost(host));
    CK(cuStreamDestroy(s));
}

/* A write takes effect when its stream reaches it; work behind a wait starts
 * after the write that satisfies it. */
static void test_time_model(void **state)
{
    (void)state;
    CUstream a, b;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    uint32_t *host;
    CK(cuMemAllocHost((void **)&host, 64));
    host[0] = 0;
    uint64_t t0 = tu_now_ns();
    CK(simt_spin_on(a, 30 * MS));
    CK(cuStreamWriteValue32(a, devptr(host), 1, 0));
    assert_int_equal(__atomic_load_n(&host[0], __ATOMIC_ACQUIRE), 0);   /* not yet */
    CK(cuStreamWaitValue32(b, devptr(host), 1, CU_STREAM_WAIT_VALUE_GEQ));
    CKE(cuStreamQuery(b), CUDA_ERROR_NOT_READY);
    CK(simt_spin_on(b, 1 * MS));                       /* behind the wait */
    CK(cuStreamSynchronize(b));
    assert_int_equal(host[0], 1);
    tu_kernel_t *k;
    long n = spins_since(t0, &k);
    assert_int_equal(n, 2);
    assert_true(k[0].end_ns - k[0].start_ns == 30 * MS);
    assert_true(k[1].stream != k[0].stream);
    assert_true(k[1].start_ns >= k[0].end_ns);         /* not before the awaited write */
    free(k);
    CK(cuMemFreeHost(host));
    CK(cuStreamDestroy(a));
    CK(cuStreamDestroy(b));
}

/* ---- across processes ----------------------------------------------------------------------------- */

typedef struct syncer {
    CUstream s;
    CUcontext ctx;
    int done;
    CUresult rc;
} syncer_t;

static void *sync_thread(void *arg)
{
    syncer_t *y = arg;
    cuCtxSetCurrent(y->ctx);
    CUresult rc = cuStreamSynchronize(y->s);
    y->rc = rc;
    __atomic_store_n(&y->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int synced(void *arg)
{
    return __atomic_load_n(&((syncer_t *)arg)->done, __ATOMIC_ACQUIRE);
}

/* Another process's kernel, then its write: the wait here completes only
 * after that kernel, and this stream's next kernel starts after it. */
static void test_wait_for_other_process(void **state)
{
    (void)state;
    char name[128];
    tu_unique_name("memop", name, sizeof name);
    volatile uint32_t *flag = flags_map(name, 1);
    assert_non_null(flag);
    uint64_t t0 = tu_now_ns();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamWaitValue32(s, devptr(flag), 1, CU_STREAM_WAIT_VALUE_EQ));
    CKE(cuStreamQuery(s), CUDA_ERROR_NOT_READY);

    tu_env_t env;
    tu_env_init(&env);
    tu_proc_t p;
    char *argv[] = { self_path, "--child", "writer", name, "50000000", NULL };
    assert_int_equal(tu_spawn(&p, argv, &env), 0);
    CK(simt_spin_on(s, 2 * MS));                       /* waits here until the write */
    CK(cuStreamSynchronize(s));
    assert_int_equal(flag[0], 1);
    assert_int_equal(tu_wait(&p, 20000), 0);
    char *out = tu_read_file(p.out_path, NULL);
    assert_non_null(out);
    assert_non_null(strstr(out, "early 0"));
    assert_non_null(strstr(out, "late 1"));
    free(out);

    tu_kernel_t *k;
    long n = spins_since(t0, &k);
    assert_int_equal(n, 2);
    int child = k[0].pid == getpid() ? 1 : 0;
    assert_int_equal(k[child].pid, p.pid);
    assert_int_equal(k[child].end_ns - k[child].start_ns, 50 * MS);
    assert_int_equal(k[1 - child].pid, getpid());
    assert_true(k[1 - child].start_ns >= k[child].end_ns);
    free(k);
    CK(cuStreamDestroy(s));
    tu_env_free(&env);
    cuMemHostUnregister((void *)flag);
    munmap((void *)flag, FLAG_BYTES);
    shm_unlink(name);
}

/* A value that does not come keeps the stream's syncs waiting (a real GPU
 * spins); the sync returns once another writer (here the host) gives it. */
static void test_wait_that_never_comes(void **state)
{
    (void)state;
    char name[128];
    tu_unique_name("memop", name, sizeof name);
    volatile uint32_t *flag = flags_map(name, 1);
    assert_non_null(flag);
    syncer_t y = { .done = 0 };
    CK(cuCtxGetCurrent(&y.ctx));
    CK(cuStreamCreate(&y.s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamWaitValue32(y.s, devptr(flag), 1, CU_STREAM_WAIT_VALUE_GEQ));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sync_thread, &y), 0);
    assert_false(tu_await(synced, &y, 300));           /* still waiting after 300 ms */
    CKE(cuStreamQuery(y.s), CUDA_ERROR_NOT_READY);
    __atomic_store_n(&flag[0], 1, __ATOMIC_RELEASE);
    assert_true(tu_await(synced, &y, 5000));
    pthread_join(t, NULL);
    CK(y.rc);
    CK(cuStreamQuery(y.s));
    CK(cuStreamDestroy(y.s));
    cuMemHostUnregister((void *)flag);
    munmap((void *)flag, FLAG_BYTES);
    shm_unlink(name);
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "--child") && !strcmp(argv[2], "writer"))
        return child_writer(argv + 3);
    tu_build_path("tests/test_simgpu_memop", self_path, sizeof self_path);
    if (simt_init("simgpu-memop"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conditions_and_checks),
        cmocka_unit_test(test_time_model),
        cmocka_unit_test(test_wait_for_other_process),
        cmocka_unit_test(test_wait_that_never_comes),
    };
    return cmocka_run_group_tests_name("simgpu stream memory operations", tests, NULL, NULL);
}

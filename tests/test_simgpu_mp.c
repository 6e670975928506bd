/*
 * test_simgpu_mp.c - several processes on one simgpu state: capacity shared
 * and OOM, reclaim after SIGKILL (every kind of memory), context memory, fork
 * children, concurrent allocation races, the engine serialized across
 * processes with the context-switch penalty, several processes appending to
 * one trace, a dead process's queued work cut.  The state itself (its
 * validation, its configuration, loading) is test_simgpu_state.c.
 *
 * Children are this binary again (`--child <role> ...`, test_simgpu_mp_lib.c),
 * spawned with a deadline by testutil; the parent is a simgpu process of the
 * same state where a test needs it.  Children report on stdout, one
 * "key value" a line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_simgpu_mp_lib.h"

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))
/* What each context takes by default (SIMGPU_CTX_MEMORY). */
#define CTX_MEM (512 * MiB)

static uint64_t sim_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ---- children ------------------------------------------------------------------------------ */

static int file_exists(void *path)
{
    return access(path, F_OK) == 0;
}

/* The parent's start signal (up to 20 s; the parent judges what follows). */
static void wait_file(const char *path)
{
    tu_await(file_exists, (void *)path, 20000);
}

static int child_setup(void)
{
    CUcontext c;
    CUresult rc = cuInit(0);
    if (!rc)
        rc = cuDevicePrimaryCtxRetain(&c, 0);
    if (!rc)
        rc = cuCtxSetCurrent(c);
    mp_say("setup", rc);
    return rc ? 1 : 0;
}

/* alloc <bytes>: allocate, report, then wait to be killed. */
static int child_alloc(char **argv)
{
    if (child_setup())
        return 1;
    CUdeviceptr p;
    mp_say("allocated", cuMemAlloc(&p, strtoull(argv[0], NULL, 0)));
    for (int i = 0; i < 30000; i++)
        usleep(1000);
    return 0;
}

/* hold-all: 64 MiB of every kind (plain, VMM, pool, array), then wait. */
static int child_hold_all(void)
{
    if (child_setup())
        return 1;
    CUdeviceptr p, va;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    CUmemoryPool pool;
    CUarray a;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    cuuint64_t keep = GiB;
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 4096, .Height = 4096, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 1 };
    int bad = cuMemAlloc(&p, 64 * MiB) || cuMemCreate(&h, 64 * MiB, &prop, 0) ||
              cuMemAddressReserve(&va, 64 * MiB, 0, 0, 0) || cuMemMap(va, 64 * MiB, 0, h, 0) ||
              cuDeviceGetDefaultMemPool(&pool, 0) ||
              cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) ||
              cuMemAllocAsync(&p, 64 * MiB, NULL) || cuArrayCreate(&a, &d);
    mp_say("held", bad);
    for (int i = 0; i < 30000; i++)
        usleep(1000);
    return 0;
}

/* race <bytes> <start-file>: one allocation when told to, held until killed. */
static int child_race(char **argv)
{
    if (child_setup())
        return 1;
    wait_file(argv[1]);
    CUdeviceptr p;
    mp_say("allocated", cuMemAlloc(&p, strtoull(argv[0], NULL, 0)));
    for (int i = 0; i < 30000; i++)
        usleep(1000);
    return 0;
}

/* churn <n>: n alloc/free pairs of assorted sizes; everything freed. */
static int child_churn(char **argv)
{
    if (child_setup())
        return 1;
    int n = atoi(argv[0]), bad = 0;
    for (int i = 0; i < n && !bad; i++) {
        CUdeviceptr p;
        bad = cuMemAlloc(&p, 1 + (size_t)(i * 7919) % (3 * MiB)) || cuMemFree(p);
    }
    mp_say("churned", bad);
    return 0;
}

/* spin <iters> <ns> <start-file>: load the module, then iters x (spin, sync). */
static int child_spin(char **argv)
{
    if (child_setup())
        return 1;
    char path[512];
    CUmodule m;
    CUfunction f;
    if (cuModuleLoad(&m, tu_build_path("workloads/kernels.cubin", path, sizeof path)) ||
        cuModuleGetFunction(&f, m, "salus_spin"))
        return 2;
    mp_say("ready", 0);
    wait_file(argv[2]);
    int iters = atoi(argv[0]);
    unsigned long long ns = strtoull(argv[1], NULL, 0);
    void *args[] = { &ns };
    for (int i = 0; i < iters; i++)
        if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) ||
            (ns && cuStreamSynchronize(NULL)))
            return 3;
    return cuCtxSynchronize() ? 4 : 0;
}

/* queue <n> <ns>: n spins of ns queued without a sync, then wait to be killed. */
static int child_queue(char **argv)
{
    if (child_setup())
        return 1;
    char path[512];
    CUmodule m;
    CUfunction f;
    if (cuModuleLoad(&m, tu_build_path("workloads/kernels.cubin", path, sizeof path)) ||
        cuModuleGetFunction(&f, m, "salus_spin"))
        return 2;
    unsigned long long ns = strtoull(argv[1], NULL, 0);
    void *args[] = { &ns };
    int bad = 0;
    for (int i = 0; i < atoi(argv[0]); i++)
        bad |= cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS;
    mp_say("queued", bad);
    for (int i = 0; i < 30000; i++)
        usleep(1000);
    return 0;
}

/* ctxmem: the device's free memory after each step of a context's and a
 * module's life (SIMGPU_CTX_MEMORY as the parent set it). */
static const char ctxmem_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry salus_noop()\n{\n\tret;\n}\n";

static long long free_now(void)
{
    size_t free, total;
    return cuMemGetInfo(&free, &total) == CUDA_SUCCESS ? (long long)free : -1;
}

/* cuCtxCreate_v2, whatever cuda.h maps cuCtxCreate to. */
static CUresult ctx_create(CUcontext *c)
{
    PFN_cuCtxCreate_v3020 fn = NULL;
    if (cuGetProcAddress_v2("cuCtxCreate", (void **)&fn, 3020, 0, NULL) || !fn)
        return CUDA_ERROR_UNKNOWN;
    return fn(c, 0, 0);
}

static int child_ctxmem(void)
{
    CUcontext c1, c2;
    CUmodule m;
    CUresult rc = cuInit(0);
    if (!rc)
        rc = ctx_create(&c1);
    mp_say("create", rc);
    if (rc)
        return 0;
    mp_say("free1", free_now());
    mp_say("create2", ctx_create(&c2));
    mp_say("free2", free_now());
    mp_say("load", cuModuleLoadData(&m, ctxmem_ptx));
    mp_say("free3", free_now());
    mp_say("unload", cuModuleUnload(m));
    mp_say("free4", free_now());
    mp_say("destroy", cuCtxDestroy(c2));
    mp_say("free5", free_now());
    return 0;
}

static int child_main(int argc, char **argv)
{
    if (argc < 1)
        return 100;
    if (!strcmp(argv[0], "alloc") && argc >= 2) return child_alloc(argv + 1);
    if (!strcmp(argv[0], "hold-all")) return child_hold_all();
    if (!strcmp(argv[0], "race") && argc >= 3) return child_race(argv + 1);
    if (!strcmp(argv[0], "churn") && argc >= 2) return child_churn(argv + 1);
    if (!strcmp(argv[0], "spin") && argc >= 4) return child_spin(argv + 1);
    if (!strcmp(argv[0], "queue") && argc >= 3) return child_queue(argv + 1);
    if (!strcmp(argv[0], "ctxmem")) return child_ctxmem();
    return 100;
}

/* ---- the parent's helpers --------------------------------------------------------------- */

static void kill_and_wait(tu_proc_t *p)
{
    kill(p->pid, SIGKILL);
    tu_wait(p, 5000);
}

/* ---- capacity and reclaim ------------------------------------------------------------------ */

static void test_capacity_shared_and_reclaim(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t a, b;
    mp_env(&env, simt_state);
    uint64_t f0 = simt_free();
    mp_spawn(&a, &env, "alloc", "10737418240", NULL, NULL);         /* 10 GiB */
    assert_int_equal(mp_reported(&a, "allocated", 10000), CUDA_SUCCESS);
    assert_int_equal(f0 - simt_free(), 10 * GiB + CTX_MEM);     /* the parent sees it */
    CUdeviceptr p;
    CKE(cuMemAlloc(&p, 8 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    mp_spawn(&b, &env, "alloc", "7516192768", NULL, NULL);         /* 7 GiB: no room either */
    assert_int_equal(mp_reported(&b, "allocated", 10000), CUDA_ERROR_OUT_OF_MEMORY);
    kill_and_wait(&b);
    /* SIGKILL the holder: its 10 GiB are the parent's to take, at once. */
    kill_and_wait(&a);
    uint64_t t0 = tu_now_ns();
    CUresult rc;
    while ((rc = cuMemAlloc(&p, 8 * GiB)) != CUDA_SUCCESS && tu_now_ns() - t0 < 100 * MS)
        tu_sleep_ms(1);
    CK(rc);
    assert_true(tu_now_ns() - t0 < 100 * MS);
    CK(cuMemFree(p));
    assert_int_equal(simt_free(), f0);
    tu_env_free(&env);
}

static void test_reclaim_every_kind(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t a;
    mp_env(&env, simt_state);
    uint64_t f0 = simt_free();
    mp_spawn(&a, &env, "hold-all", NULL, NULL, NULL);
    assert_int_equal(mp_reported(&a, "held", 10000), 0);
    assert_int_equal(f0 - simt_free(), 4 * 64 * MiB + CTX_MEM); /* the array is 64 MiB too */
    kill_and_wait(&a);
    assert_int_equal(simt_free(), f0);
    tu_env_free(&env);
}

/* A context takes SIMGPU_CTX_MEMORY (the child's own setting) until it is
 * destroyed, a module its image until unloaded, and a process's share goes
 * with it; a context that does not fit is refused. */
static void test_context_memory(void **state)
{
    (void)state;
    static const struct { const char *ctx; uint64_t bytes; } cases[] = {
        { "96M", 96 * MiB }, { "0", 0 }, { NULL, CTX_MEM },
    };
    uint64_t f0 = simt_free();
    for (int i = 0; i < 3; i++) {
        tu_env_t env;
        tu_proc_t p;
        mp_env(&env, simt_state);
        if (cases[i].ctx)
            tu_env_set(&env, "SIMGPU_CTX_MEMORY", "%s", cases[i].ctx);
        mp_run(&env, "ctxmem", &p);
        uint64_t b = cases[i].bytes;
        long long f1 = mp_reported(&p, "free1", 100), f2 = mp_reported(&p, "free2", 100);
        assert_int_equal(mp_reported(&p, "create", 100), CUDA_SUCCESS);
        assert_int_equal(mp_reported(&p, "create2", 100), CUDA_SUCCESS);
        assert_int_equal(mp_reported(&p, "load", 100), CUDA_SUCCESS);
        assert_int_equal(f0 - f1, b);
        assert_int_equal(f1 - f2, b);
        assert_int_equal(f2 - mp_reported(&p, "free3", 100), 512);   /* the PTX text, rounded */
        assert_int_equal(mp_reported(&p, "free4", 100), f2);
        assert_int_equal(mp_reported(&p, "free5", 100), f1);
        assert_int_equal(simt_free(), f0);                        /* gone with the process */
        tu_env_free(&env);
    }
    tu_env_t env;
    tu_proc_t p;
    mp_env(&env, simt_state);
    tu_env_set(&env, "SIMGPU_CTX_MEMORY", "32G");
    mp_run(&env, "ctxmem", &p);
    assert_int_equal(mp_reported(&p, "create", 100), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(simt_free(), f0);
    tu_env_free(&env);
}

/* Three processes want 6 GiB each of 16: exactly two get it. */
static void test_allocation_race(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t c[3];
    char start[512];
    snprintf(start, sizeof start, "%s/race-start", tu_tmpdir());
    unlink(start);
    mp_env(&env, simt_state);
    uint64_t f0 = simt_free();
    for (int i = 0; i < 3; i++)
        mp_spawn(&c[i], &env, "race", "6442450944", start, NULL);
    for (int i = 0; i < 3; i++)
        assert_int_equal(mp_reported(&c[i], "setup", 10000), 0);
    uint64_t f1 = simt_free();                  /* less their contexts */
    assert_int_equal(f0 - f1, 3 * CTX_MEM);
    close(open(start, O_CREAT | O_WRONLY, 0644));
    int ok = 0, oom = 0;
    for (int i = 0; i < 3; i++) {
        long long rc = mp_reported(&c[i], "allocated", 20000);
        ok += rc == CUDA_SUCCESS;
        oom += rc == CUDA_ERROR_OUT_OF_MEMORY;
    }
    assert_int_equal(ok, f1 >= 12 * GiB ? 2 : 1);
    assert_int_equal(ok + oom, 3);
    for (int i = 0; i < 3; i++)
        kill_and_wait(&c[i]);
    assert_int_equal(simt_free(), f0);          /* they died: reclaimed */
    tu_env_free(&env);
}

/* Allocations and frees of several processes at once leave no trace. */
static void test_concurrent_churn(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t c[3];
    mp_env(&env, simt_state);
    uint64_t f0 = simt_free();
    for (int i = 0; i < 3; i++)
        mp_spawn(&c[i], &env, "churn", "3000", NULL, NULL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mp_reported(&c[i], "churned", 30000), 0);
        assert_int_equal(tu_wait(&c[i], 10000), 0);
    }
    assert_int_equal(simt_free(), f0);
    tu_env_free(&env);
}

/* ---- fork ---------------------------------------------------------------------------------- */

static int fork_child(CUdeviceptr parents, uint64_t parent_free)
{
    CUdeviceptr p;
    CUcontext c;
    size_t free, total;
    if (cuMemAlloc(&p, 16) != CUDA_ERROR_NOT_INITIALIZED)
        return 1;
    if (cuCtxGetCurrent(&c) != CUDA_ERROR_NOT_INITIALIZED)
        return 2;
    if (cuInit(0) || cuCtxGetCurrent(&c) || c)
        return 3;
    if (cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 4;
    if (cuMemFree(parents) != CUDA_ERROR_INVALID_VALUE)
        return 5;                       /* never the parent's memory */
    if (cuMemGetInfo(&free, &total) || free != parent_free - CTX_MEM)
        return 6;                       /* the parent's, less its own context */
    if (cuMemAlloc(&p, MiB))
        return 7;                       /* and exits holding it */
    return 0;
}

static void test_fork_child(void **state)
{
    (void)state;
    uint64_t f0 = simt_free();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, GiB));
    uint64_t f1 = simt_free();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fork_child(p, f1));
    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(simt_free(), f1);          /* its context and MiB went with it */
    CK(cuMemFree(p));
    assert_int_equal(simt_free(), f0);
}

/* ---- the engine and the trace ----------------------------------------------------------------- */

static int strict_line(const char *line, tu_kernel_t *k)
{
    int end = 0;
    unsigned long long ctx, stream, submit, start, stop;
    int got = sscanf(line, "{\"pid\":%d,\"device\":%d,\"context\":%llu,\"stream\":%llu,"
                           "\"kind\":\"%7[^\"]\",\"name\":\"%63[^\"]\",\"submit_ns\":%llu,"
                           "\"start_ns\":%llu,\"end_ns\":%llu}%n",
                     &k->pid, &k->device, &ctx, &stream, k->kind, k->name, &submit, &start,
                     &stop, &end);
    k->context = ctx;
    k->submit_ns = submit;
    k->start_ns = start;
    k->end_ns = stop;
    return got == 9 && line[end] == '\0' && submit <= start && start <= stop ? 0 : -1;
}

/* Run n children "spin iters ns" together on one trace; returns its kernels. */
static long run_spinners(int n, const char *iters, const char *ns, tu_kernel_t **out,
                         int *pids)
{
    char trace[512], start[512];
    snprintf(trace, sizeof trace, "%s/mp-trace-%s-%s.jsonl", tu_tmpdir(), iters, ns);
    snprintf(start, sizeof start, "%s/mp-start-%s-%s", tu_tmpdir(), iters, ns);
    unlink(trace);
    unlink(start);
    tu_env_t env;
    mp_env(&env, simt_state);
    tu_env_set(&env, "SIMGPU_TRACE", "%s", trace);
    tu_proc_t c[8];
    for (int i = 0; i < n; i++) {
        mp_spawn(&c[i], &env, "spin", iters, ns, start);
        pids[i] = c[i].pid;
    }
    for (int i = 0; i < n; i++)
        assert_int_equal(mp_reported(&c[i], "ready", 10000), 0);
    close(open(start, O_CREAT | O_WRONLY, 0644));
    for (int i = 0; i < n; i++)
        assert_int_equal(tu_wait(&c[i], 30000), 0);
    tu_env_free(&env);
    /* Every line is the exact object, whole. */
    char *text = tu_read_file(trace, NULL);
    assert_non_null(text);
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        tu_kernel_t k;
        if (strict_line(l, &k))
            fail_msg("bad trace line: %s", l);
    }
    free(text);
    return tu_trace_load(trace, out);
}

static void test_engine_serialized_across_processes(void **state)
{
    (void)state;
    tu_kernel_t *k;
    int pids[2];
    long n = run_spinners(2, "20", "5000000", &k, pids);
    assert_int_equal(n, 40);
    for (long i = 1; i < n; i++) {
        assert_true(k[i].start_ns >= k[i - 1].end_ns);      /* one kernel at a time */
        if (k[i].context != k[i - 1].context)
            assert_true(k[i].start_ns >= k[i - 1].end_ns + 100000);   /* the switch */
    }
    assert_true(tu_trace_switches(k, n) >= 1);
    for (int i = 0; i < 2; i++)
        assert_int_equal(tu_trace_busy(k, n, pids[i], 0, 0), 20 * 5 * MS);
    free(k);
}

/* Four processes appending short kernels as fast as they can. */
static void test_trace_appends(void **state)
{
    (void)state;
    tu_kernel_t *k;
    int pids[4];
    long n = run_spinners(4, "300", "0", &k, pids);
    assert_int_equal(n, 1200);
    for (int i = 0; i < 4; i++) {
        int mine = 0;
        for (long j = 0; j < n; j++)
            mine += k[j].pid == pids[i];
        assert_int_equal(mine, 300);
    }
    free(k);
}

/* A process killed with 1 s of kernels queued: its work goes with it, as
 * its contexts do on a real GPU.  The next kernel starts at once instead of
 * after the dead queue, and the trace says where the dead work was cut. */
static void test_dead_process_work_cut(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t a;
    mp_env(&env, simt_state);
    tu_env_set(&env, "SIMGPU_TRACE", "%s", simt_trace);     /* ours: we write the cut */
    mp_spawn(&a, &env, "queue", "20", "50000000", NULL);
    assert_int_equal(mp_reported(&a, "queued", 10000), 0);
    kill_and_wait(&a);
    unsigned long long ns = MS;
    void *args[] = { &ns };
    CK(cuLaunchKernel(simt_spin, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuCtxSynchronize());
    tu_kernel_t *k;
    long n = tu_trace_load_all(simt_trace, &k);
    uint64_t first = 0, mine = 0, last_end = 0;
    int dead = 0;
    for (long i = 0; i < n; i++) {
        if (k[i].pid == a.pid) {
            dead++;
            if (!first)
                first = k[i].start_ns;
            last_end = sim_max_u64(last_end, k[i].end_ns);
        } else if (k[i].pid == getpid()) {
            mine = k[i].start_ns;       /* the last: ours just now */
        }
    }
    assert_int_equal(dead, 20);
    assert_true(first && mine);
    assert_true(mine < first + 20 * 50 * MS);   /* not behind the dead queue */
    assert_true(last_end <= mine);              /* the cut is applied */
    long first_cross = -1;
    assert_int_equal(tu_trace_cross_submits(k, n, &first_cross), 0);
    char *text = tu_read_file(simt_trace, NULL);
    char needle[64];
    snprintf(needle, sizeof needle, "{\"pid\":%d,", (int)a.pid);
    int cuts = 0;
    for (int i = 0; text && tu_count_lines(text, needle) > i; i++) {
        char line[512];
        if (!tu_find_line(text, needle, i, line, sizeof line) && strstr(line, "\"kind\":\"cut\""))
            cuts++;
    }
    assert_int_equal(cuts, 1);
    free(text);
    free(k);
    tu_env_free(&env);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return child_main(argc - 2, argv + 2);
    if (mp_init("test_simgpu_mp", "simgpu-mp"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_capacity_shared_and_reclaim),
        cmocka_unit_test(test_reclaim_every_kind),
        cmocka_unit_test(test_allocation_race),
        cmocka_unit_test(test_context_memory),
        cmocka_unit_test(test_concurrent_churn),
        cmocka_unit_test(test_fork_child),
        cmocka_unit_test(test_engine_serialized_across_processes),
        cmocka_unit_test(test_trace_appends),
        cmocka_unit_test(test_dead_process_work_cut),
    };
    return cmocka_run_group_tests_name("simgpu processes", tests, NULL, NULL);
}

/*
 * test_simgpu_state.c - simgpu's state and loading, each seen by a process of
 * its own: a shared-memory object that is not a state is refused without a
 * crash, the first process fixes the configuration (later ones are told
 * their settings are ignored), the answers before cuInit, the driver's own
 * functions called under a preloaded library exporting the same names
 * (-Bsymbolic), SIMGPU_LOG naming an unimplemented call, and pinned host
 * memory: its cost (in this process) and SIMGPU_PIN_LIMIT, which bounds it
 * for all processes of a state.
 *
 * Children are this binary again (`--child <role>`, test_simgpu_mp_lib.c),
 * run to their end with a deadline; each reports on stdout, one "key value"
 * a line, and the parent judges.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "test_simgpu_mp_lib.h"

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))
CUresult simt_spin_on(CUstream s, unsigned long long ns);

/* ---- children ------------------------------------------------------------------------------ */

/* info: what this process sees of the state. */
static int child_info(void)
{
    CUresult rc = cuInit(0);
    mp_say("init", rc);
    int n = -1;
    mp_say("count_rc", cuDeviceGetCount(&n));
    if (rc)
        return 0;
    mp_say("devices", n);
    size_t total = 0;
    cuDeviceTotalMem(&total, 0);
    mp_say("total", (long long)total);
    return 0;
}

/* preinit: the answers before cuInit, then cuInit itself. */
static int child_preinit(void)
{
    int n, v;
    CUdeviceptr p;
    CUcontext c;
    void *pfn;
    mp_say("count", cuDeviceGetCount(&n));
    mp_say("alloc", cuMemAlloc(&p, 16));
    mp_say("current", cuCtxGetCurrent(&c));
    mp_say("version", cuDriverGetVersion(&v));
    mp_say("procaddr", cuGetProcAddress_v2("cuInit", &pfn, 12000, 0, NULL));
    mp_say("init_flags", cuInit(1));
    mp_say("init", cuInit(0));
    mp_say("count_after", cuDeviceGetCount(&n));
    return 0;
}

/* symbolic: run with a library preloaded that exports cuInit, cuMemAlloc_v2
 * and cuDeviceGetUuid; simgpu must answer and call its own functions. */
static int child_symbolic(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    PFN_cuGetProcAddress_v12000 gpa = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
    PFN_cuInit_v2000 init = NULL;
    PFN_cuMemAlloc_v3020 alloc = NULL;
    PFN_cuDeviceGetUuid_v11040 uuid2 = NULL;
    PFN_cuDevicePrimaryCtxRetain_v7000 retain = NULL;
    PFN_cuCtxSetCurrent_v4000 set = NULL;
    if (!gpa)
        return 2;
    mp_say("preloaded", cuInit(0));        /* the direct call: the preloaded one */
    gpa("cuInit", (void **)&init, 12000, 0, NULL);
    gpa("cuMemAlloc", (void **)&alloc, 12000, 0, NULL);
    gpa("cuDeviceGetUuid", (void **)&uuid2, 12000, 0, NULL);
    gpa("cuDevicePrimaryCtxRetain", (void **)&retain, 12000, 0, NULL);
    gpa("cuCtxSetCurrent", (void **)&set, 12000, 0, NULL);
    mp_say("same", alloc == dlsym(h, "cuMemAlloc_v2") && alloc != dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
    CUcontext c;
    CUdeviceptr p;
    CUuuid u;
    mp_say("init", init(0));
    mp_say("ctx", retain(&c, 0) || set(c));
    mp_say("alloc", alloc(&p, 4096));
    mp_say("uuid", uuid2(&u, 0));          /* cuDeviceGetUuid_v2 calls cuDeviceGetUuid */
    return 0;
}

/* stub: under SIMGPU_LOG=1, an unimplemented call says so. */
static int child_stub(void)
{
    mp_say("init", cuInit(0));
    mp_say("stub", cuMipmappedArrayDestroy(NULL));
    return 0;
}

/* pin <bytes> hold|once: cuMemHostAlloc of <bytes>; hold: then wait to be
 * killed; once: register 2 MiB, free the allocation, register 2 MiB more. */
static int child_pin(char **argv)
{
    CUcontext c;
    void *h = NULL;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 1;
    CUresult rc = cuMemHostAlloc(&h, strtoull(argv[0], NULL, 0), 0);
    mp_say("alloc", rc);
    if (!strcmp(argv[1], "hold")) {
        for (int i = 0; i < 30000; i++)
            usleep(1000);
        return 0;
    }
    char *q = mmap(NULL, 4 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED)
        return 1;
    mp_say("register", cuMemHostRegister(q, 2 * MiB, 0));
    if (rc == CUDA_SUCCESS)
        cuMemFreeHost(h);
    mp_say("register_after_free", cuMemHostRegister(q + 2 * MiB, 2 * MiB, 0));
    return 0;
}

static int child_main(int argc, char **argv)
{
    if (argc < 1)
        return 100;
    if (!strcmp(argv[0], "info")) return child_info();
    if (!strcmp(argv[0], "preinit")) return child_preinit();
    if (!strcmp(argv[0], "symbolic")) return child_symbolic();
    if (!strcmp(argv[0], "stub")) return child_stub();
    if (!strcmp(argv[0], "pin") && argc >= 3) return child_pin(argv + 1);
    return 100;
}

/* ---- the state -------------------------------------------------------------------------------- */

static void run_info(const char *state, const char *memory, const char *devices, tu_proc_t *p)
{
    tu_env_t env;
    mp_env(&env, state);
    if (memory)
        tu_env_set(&env, "SIMGPU_MEMORY", "%s", memory);
    else
        tu_env_unset(&env, "SIMGPU_MEMORY");
    if (devices)
        tu_env_set(&env, "SIMGPU_DEVICES", "%s", devices);
    mp_run(&env, "info", p);
    tu_env_free(&env);
}

static void test_bad_state_refused(void **state)
{
    (void)state;
    char name[64];
    tu_unique_name("simgpu-bad", name, sizeof name);
    int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
    assert_true(fd >= 0);
    char junk[4096];
    memset(junk, 0x5a, sizeof junk);
    for (int i = 0; i < 64; i++)
        assert_int_equal(write(fd, junk, sizeof junk), sizeof junk);
    close(fd);
    tu_proc_t p;
    run_info(name, "16G", NULL, &p);            /* exits normally: no crash */
    assert_int_equal(mp_reported(&p, "init", 100), CUDA_ERROR_SYSTEM_DRIVER_MISMATCH);
    assert_int_equal(mp_reported(&p, "count_rc", 100), CUDA_ERROR_NOT_INITIALIZED);
    char *err = tu_read_file(p.err_path, NULL);
    assert_non_null(strstr(err, "not a simgpu state"));
    free(err);
    shm_unlink(name);
    run_info("no-slash", "16G", NULL, &p);
    assert_int_equal(mp_reported(&p, "init", 100), CUDA_ERROR_INVALID_VALUE);
}

static void test_first_process_fixes_config(void **state)
{
    (void)state;
    char name[64];
    tu_unique_name("simgpu-cfg", name, sizeof name);
    tu_proc_t p;
    run_info(name, "8G", "3", &p);
    assert_int_equal(mp_reported(&p, "devices", 100), 3);
    assert_int_equal(mp_reported(&p, "total", 100), 8 * GiB);
    run_info(name, "16G", "1", &p);             /* too late: a note, and the first's values */
    assert_int_equal(mp_reported(&p, "devices", 100), 3);
    assert_int_equal(mp_reported(&p, "total", 100), 8 * GiB);
    char *err = tu_read_file(p.err_path, NULL);
    assert_int_equal(tu_count_lines(err, "SIMGPU_MEMORY ignored"), 1);
    assert_int_equal(tu_count_lines(err, "SIMGPU_DEVICES ignored"), 1);
    free(err);
    run_info(name, NULL, NULL, &p);             /* nothing asked: nothing to say */
    err = tu_read_file(p.err_path, NULL);
    assert_int_equal(tu_count_lines(err, "ignored"), 0);
    free(err);
    shm_unlink(name);
}

static void test_before_cuinit(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t p;
    mp_env(&env, simt_state);
    mp_run(&env, "preinit", &p);
    assert_int_equal(mp_reported(&p, "count", 100), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(mp_reported(&p, "alloc", 100), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(mp_reported(&p, "current", 100), CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(mp_reported(&p, "version", 100), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "procaddr", 100), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "init_flags", 100), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(mp_reported(&p, "init", 100), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "count_after", 100), CUDA_SUCCESS);
    tu_env_free(&env);
}

static void test_symbolic_under_preload(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t p;
    char shim[512];
    mp_env(&env, simt_state);
    tu_env_set(&env, "LD_PRELOAD", "%s", tu_build_path("tests/libsimgpu_shim.so", shim,
                                                       sizeof shim));
    mp_run(&env, "symbolic", &p);
    assert_int_equal(mp_reported(&p, "preloaded", 100), 999);
    assert_int_equal(mp_reported(&p, "same", 100), 1);
    assert_int_equal(mp_reported(&p, "init", 100), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "ctx", 100), 0);
    assert_int_equal(mp_reported(&p, "alloc", 100), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&p, "uuid", 100), CUDA_SUCCESS);
    tu_env_free(&env);
}

static void test_log_unimplemented(void **state)
{
    (void)state;
    tu_env_t env;
    tu_proc_t p;
    mp_env(&env, simt_state);
    tu_env_set(&env, "SIMGPU_LOG", "1");
    mp_run(&env, "stub", &p);
    assert_int_equal(mp_reported(&p, "stub", 100), CUDA_ERROR_NOT_SUPPORTED);
    char *err = tu_read_file(p.err_path, NULL);
    assert_int_equal(tu_count_lines(err, "cuMipmappedArrayDestroy is not implemented"), 1);
    free(err);
    tu_env_free(&env);
}

/* ---- pinned host memory ----------------------------------------------------------------------- */

static void pin_env(tu_env_t *env, const char *state, const char *limit)
{
    mp_env(env, state);
    tu_env_set(env, "SIMGPU_PIN_LIMIT", "%s", limit);
    tu_env_set(env, "SIMGPU_PIN_GBPS", "0");
}

static int all_resident(const void *p, size_t n)
{
    size_t pages = (n + 4095) / 4096;
    unsigned char *v = malloc(pages);
    int all = v && mincore((void *)p, n, v) == 0;
    for (size_t i = 0; all && i < pages; i++)
        all = v[i] & 1;
    free(v);
    return all;
}

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Pinning costs at least bytes / SIMGPU_PIN_GBPS (1 GB/s in this process:
 * main) and leaves every page present, allocated or registered; freeing pinned memory waits
 * for the context's work, as the driver's cuMemFreeHost does. */
static void test_pinned_host_cost(void **state)
{
    (void)state;
    void *h;
    uint64_t t0 = now_ns();
    CK(cuMemHostAlloc(&h, 48 * MiB, 0));
    assert_true(now_ns() - t0 >= 48 * MiB / 1);
    assert_true(all_resident(h, 48 * MiB));
    char *q = mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(q != MAP_FAILED);
    assert_false(all_resident(q, 16 * MiB));
    t0 = now_ns();
    CK(cuMemHostRegister(q, 16 * MiB, 0));
    assert_true(now_ns() - t0 >= 16 * MiB / 1);
    assert_true(all_resident(q, 16 * MiB));
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(simt_spin_on(s, 20000000ull));                  /* 20 ms of work */
    CKE(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CK(cuMemFreeHost(h));
    CK(cuStreamQuery(s));                               /* done before the free returned */
    CK(simt_spin_on(s, 20000000ull));
    CK(cuMemHostUnregister(q));
    CK(cuStreamQuery(s));
    CK(cuStreamDestroy(s));
    munmap(q, 16 * MiB);
}

/* SIMGPU_PIN_LIMIT (8 MiB here) bounds what all processes of the state pin
 * together, allocated and registered alike; a free gives its share back at
 * once, and a process that dies holding pinned memory gives it back too. */
static void test_pin_limit_shared(void **state)
{
    (void)state;
    char name[64];
    tu_unique_name("simgpu-pin", name, sizeof name);
    tu_env_t env;
    tu_proc_t holder;
    pin_env(&env, name, "8M");
    mp_spawn(&holder, &env, "pin", "6291456", "hold", NULL);       /* 6 MiB, held */
    assert_int_equal(mp_reported(&holder, "alloc", 10000), CUDA_SUCCESS);
    tu_proc_t once;
    mp_spawn(&once, &env, "pin", "4194304", "once", NULL);         /* 6 + 4 > 8 */
    assert_int_equal(mp_reported(&once, "alloc", 10000), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(mp_reported(&once, "register", 10000), CUDA_SUCCESS);   /* 6 + 2 */
    assert_int_equal(mp_reported(&once, "register_after_free", 10000),
                     CUDA_ERROR_OUT_OF_MEMORY);                    /* 6 + 2 + 2 > 8 */
    assert_int_equal(tu_wait(&once, 5000), 0);
    mp_spawn(&once, &env, "pin", "2097152", "once", NULL);         /* 6 + 2: fits */
    assert_int_equal(mp_reported(&once, "alloc", 10000), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&once, "register", 10000), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(mp_reported(&once, "register_after_free", 10000), CUDA_SUCCESS);
    assert_int_equal(tu_wait(&once, 5000), 0);
    kill(holder.pid, SIGKILL);                     /* its 6 MiB are the host's again */
    tu_wait(&holder, 5000);
    tu_env_free(&env);
    pin_env(&env, name, "1G");                     /* too late: a note, and 8 MiB */
    mp_spawn(&once, &env, "pin", "6291456", "once", NULL);
    assert_int_equal(mp_reported(&once, "alloc", 10000), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&once, "register", 10000), CUDA_SUCCESS);
    assert_int_equal(mp_reported(&once, "register_after_free", 10000), CUDA_SUCCESS);
    assert_int_equal(tu_wait(&once, 5000), 0);
    char *err = tu_read_file(once.err_path, NULL);
    assert_int_equal(tu_count_lines(err, "SIMGPU_PIN_LIMIT ignored"), 1);
    free(err);
    tu_env_free(&env);
    shm_unlink(name);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return child_main(argc - 2, argv + 2);
    setenv("SIMGPU_PIN_GBPS", "1", 1);      /* test_pinned_host_cost's model */
    if (mp_init("test_simgpu_state", "simgpu-state"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_state_refused),
        cmocka_unit_test(test_first_process_fixes_config),
        cmocka_unit_test(test_before_cuinit),
        cmocka_unit_test(test_symbolic_under_preload),
        cmocka_unit_test(test_log_unimplemented),
        cmocka_unit_test(test_pinned_host_cost),
        cmocka_unit_test(test_pin_limit_shared),
    };
    return cmocka_run_group_tests_name("simgpu state", tests, NULL, NULL);
}

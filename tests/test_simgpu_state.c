/*
 * test_simgpu_state.c - simgpu's state and loading, each seen by a process of
 * its own: a shared-memory object that is not a state is refused without a
 * crash, the first process fixes the configuration (later ones are told
 * their settings are ignored), the answers before cuInit, the driver's own
 * functions called under a preloaded library exporting the same names
 * (-Bsymbolic), and SIMGPU_LOG naming an unimplemented call.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_simgpu_mp_lib.h"

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

static int child_main(int argc, char **argv)
{
    if (argc < 1)
        return 100;
    if (!strcmp(argv[0], "info")) return child_info();
    if (!strcmp(argv[0], "preinit")) return child_preinit();
    if (!strcmp(argv[0], "symbolic")) return child_symbolic();
    if (!strcmp(argv[0], "stub")) return child_stub();
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

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--child"))
        return child_main(argc - 2, argv + 2);
    if (mp_init("test_simgpu_state", "simgpu-state"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_state_refused),
        cmocka_unit_test(test_first_process_fixes_config),
        cmocka_unit_test(test_before_cuinit),
        cmocka_unit_test(test_symbolic_under_preload),
        cmocka_unit_test(test_log_unimplemented),
    };
    return cmocka_run_group_tests_name("simgpu state", tests, NULL, NULL);
}

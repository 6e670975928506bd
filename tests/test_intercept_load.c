/*
 * test_intercept_load.c - how libsalus meets the process and the driver,
 * without a GPU or simgpu: the lazy loader (SALUS_REAL_LIBCUDA, a missing
 * driver), the dlsym override against a fake libcuda.so.1, the report and
 * fork(), and child processes with libsalus preloaded (a process that never
 * uses CUDA, a driver that cannot be loaded, libsalus named as the driver,
 * and dlsym(RTLD_NEXT, ...) from another library, with libsalus optimized
 * and built -O0 -fno-optimize-sibling-calls).
 *
 * Like test_intercept, the binary links the intercept objects: its dlsym is
 * the trampoline, its wrappers libsalus's.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "intercept/intercept.h"
#include "lib/testutil.h"

#define CHILD_MS 20000

static char fakecuda[512];

/* Load the fake driver through SALUS_REAL_LIBCUDA, from the unloaded state. */
static int setup_fake_driver(void **state)
{
    (void)state;
    tu_build_path("tests/fakecuda/libcuda.so.1", fakecuda, sizeof fakecuda);
    setenv("SALUS_REAL_LIBCUDA", fakecuda, 1);
    hook_real_reset();
    return 0;
}

static int teardown_driver(void **state)
{
    (void)state;
    unsetenv("SALUS_REAL_LIBCUDA");
    hook_real_reset();
    return 0;
}

/* Run fn with stderr going to a file; return what it wrote (static). */
static const char *with_stderr(void (*fn)(void))
{
    static char text[8192];
    char path[600];
    snprintf(path, sizeof path, "%s/stderr-XXXXXX", tu_tmpdir());
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *got = tu_read_file(path, NULL);
    snprintf(text, sizeof text, "%s", got ? got : "");
    free(got);
    unlink(path);
    return text;
}

/* ---- the loader ------------------------------------------------------------- */

static void test_loader_fake_driver(void **state)
{
    (void)state;
    assert_null(hook_real_handle());                  /* nothing loaded yet */
    assert_int_equal(cuInit(0), CUDA_SUCCESS);        /* the fake's answer */
    assert_non_null(hook_real_handle());
    assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr p = 0;
    assert_int_equal(cuMemAlloc_v2(&p, 100), CUDA_SUCCESS);
    assert_int_equal(p, 0x100000);
    /* The fake has no cuLaunchKernelEx: an honest error, not a crash. */
    assert_int_equal(cuLaunchKernelEx(NULL, NULL, NULL, NULL), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                     CUDA_ERROR_INVALID_HANDLE);
}

static CUresult last_rc[3];
static void calls_without_driver(void)
{
    CUdeviceptr p = 0;
    void *fn = NULL;
    last_rc[0] = cuInit(0);
    last_rc[1] = cuMemAlloc_v2(&p, 100);
    last_rc[2] = cuGetProcAddress_v2("cuInit", &fn, 12000, 0, NULL);
}

/* No driver: every call answers CUDA_ERROR_NOT_INITIALIZED; said once. */
static void test_loader_no_driver(void **state)
{
    (void)state;
    setenv("SALUS_REAL_LIBCUDA", "/nonexistent/libcuda.so.1", 1);
    hook_real_reset();
    const char *err = with_stderr(calls_without_driver);
    for (int i = 0; i < 3; i++)
        assert_int_equal(last_rc[i], CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(tu_count_lines(err, "cannot load the CUDA driver"), 1);
    assert_non_null(strstr(err, "/nonexistent/libcuda.so.1"));
    assert_non_null(strstr(err, "SALUS_REAL_LIBCUDA"));       /* what to do */
    assert_null(hook_real_handle());
}

/* ---- the dlsym override ----------------------------------------------------- */

static void test_dlsym_decisions(void **state)
{
    (void)state;
    void *h = dlopen(fakecuda, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    /* Wrapped exports the driver has: our wrapper. */
    assert_ptr_equal(hook_dlsym_decide(h, "cuMemAlloc_v2"), hook_wrappers[HOOK_cuMemAlloc_v2]);
    assert_ptr_equal(hook_dlsym_decide(h, "cuGetProcAddress_v2"), (void *)cuGetProcAddress_v2);
    assert_ptr_equal(hook_dlsym_decide(h, "cuGetProcAddress"), (void *)cuGetProcAddress);
    /* Forwarded: not wrapped, absent from the driver, not a CUDA name,
     * RTLD_NEXT, NULL. */
    assert_null(hook_dlsym_decide(h, "cuMemAlloc"));
    assert_null(hook_dlsym_decide(h, "cuDriverGetVersion"));
    assert_null(hook_dlsym_decide(h, "cuLaunchKernelEx"));
    assert_null(hook_dlsym_decide(h, "malloc"));
    assert_null(hook_dlsym_decide(h, "c"));
    assert_null(hook_dlsym_decide(h, ""));
    assert_null(hook_dlsym_decide(h, NULL));
    assert_null(hook_dlsym_decide(RTLD_NEXT, "cuMemAlloc_v2"));
    /* Another object's cuMemAlloc_v2 is not the driver's: forwarded. */
    char lib[512];
    void *other = dlopen(tu_build_path("libsalus.so", lib, sizeof lib), RTLD_NOW | RTLD_LOCAL);
    if (other) {
        assert_null(hook_dlsym_decide(other, "cuMemAlloc_v2"));
        dlclose(other);
    }
    dlclose(h);
}

/* Through the trampoline itself (this binary's dlsym). */
static void test_dlsym_trampoline(void **state)
{
    (void)state;
    void *h = dlopen(fakecuda, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    assert_ptr_equal(dlsym(h, "cuMemAlloc_v2"), hook_wrappers[HOOK_cuMemAlloc_v2]);
    assert_ptr_equal(dlsym(h, "cuInit"), (void *)cuInit);
    assert_ptr_equal(dlsym(h, "cuDriverGetVersion"), hook_dlsym_real(h, "cuDriverGetVersion"));
    assert_non_null(dlsym(h, "cuDriverGetVersion"));
    dlerror();
    assert_null(dlsym(h, "cuNoSuchFunction"));
    assert_non_null(dlerror());          /* the real dlsym's error, forwarded */
    assert_non_null(dlsym(RTLD_DEFAULT, "strlen"));
    dlclose(h);
}

/* ---- the report and fork() ------------------------------------------------------ */

static void test_report_format(void **state)
{
    (void)state;
    cuInit(0);
    char buf[16384];
    int n = hook_report_format(buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    assert_int_equal(buf[0], '{');
    assert_int_equal(buf[n - 1], '}');
    double v;
    const char *fields[] = { "launches", "syncs", "allocs", "frees", "bytes_allocated",
                             "resolver_wrapped", "resolver_passed", "cuInit" };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        assert_int_equal(tu_json_num(buf, fields[i], &v), 0);
    assert_int_equal(tu_json_num(buf, "pid", &v), 0);
    assert_int_equal((int)v, (int)getpid());
    assert_int_equal(hook_report_format(buf, 16), -1);   /* too small: refused */
}

/* A child starts from zero and reports only once it calls the driver. */
static void test_fork_child_counts_its_own(void **state)
{
    (void)state;
    char report[600];
    snprintf(report, sizeof report, "%s/fork-report.json", tu_tmpdir());
    unlink(report);
    setenv("SALUS_REPORT", report, 1);
    cuInit(0);
    cuInit(0);
    hook_counts_t parent;
    hook_counts_snapshot(&parent);
    assert_true(parent.calls[HOOK_cuInit] >= 2);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        hook_counts_t c;
        hook_counts_snapshot(&c);
        int bad = c.calls[HOOK_cuInit] != 0 || c.launches != 0;
        hook_report_write();               /* no driver call yet: nothing */
        struct stat st;
        bad |= (stat(report, &st) == 0) << 1;
        cuInit(0);
        hook_report_write();
        _exit(bad);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    unsetenv("SALUS_REPORT");
    char *text = tu_read_file(report, NULL);
    assert_non_null(text);
    assert_int_equal(tu_count_lines(text, "\"pid\""), 1);
    double v;
    assert_int_equal(tu_json_num(text, "pid", &v), 0);
    assert_int_equal((int)v, (int)pid);
    assert_int_equal(tu_json_num(text, "cuInit", &v), 0);
    assert_int_equal((int)v, 1);
    free(text);
    hook_counts_t after;
    hook_counts_snapshot(&after);               /* the parent's are intact */
    assert_int_equal(after.calls[HOOK_cuInit], parent.calls[HOOK_cuInit]);
}

/* ---- child processes with libsalus preloaded ------------------------------------- */

static void env_preload(tu_env_t *env, const char *lib)
{
    char path[512];
    tu_env_init(env);
    tu_env_set(env, "LD_PRELOAD", "%s", tu_build_path(lib, path, sizeof path));
    tu_env_set(env, "LD_LIBRARY_PATH", "%s", tu_build_path("tests/fakecuda", path, sizeof path));
    tu_env_unset(env, "SALUS_REAL_LIBCUDA");
    tu_env_unset(env, "SALUS_LOG");
}

/* LD_PRELOAD reaches every program; one that never uses CUDA pays nothing
 * and writes nothing. */
static void test_process_without_cuda(void **state)
{
    (void)state;
    char report[600];
    snprintf(report, sizeof report, "%s/nocuda.json", tu_tmpdir());
    unlink(report);
    tu_env_t env;
    env_preload(&env, "libsalus.so");
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    char *argv[] = { "/bin/sh", "-c", "ls / >/dev/null && exit 7", NULL };
    tu_proc_t p;
    assert_int_equal(tu_run(argv, &env, CHILD_MS, &p), 7);
    char *err = tu_read_file(p.err_path, NULL);
    assert_string_equal(err ? err : "", "");
    free(err);
    struct stat st;
    assert_int_equal(stat(report, &st), -1);
    tu_env_free(&env);
}

static int run_initclient(tu_env_t *env, char **err_text, tu_proc_t *p)
{
    char client[512];
    tu_build_path("tests/clients/initclient", client, sizeof client);
    char *argv[] = { client, NULL };
    int rc = tu_run(argv, env, CHILD_MS, p);
    *err_text = tu_read_file(p->err_path, NULL);
    return rc;
}

static void test_process_with_fake_driver(void **state)
{
    (void)state;
    char report[600];
    snprintf(report, sizeof report, "%s/fake.json", tu_tmpdir());
    unlink(report);
    tu_env_t env;
    env_preload(&env, "libsalus.so");
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    tu_proc_t p;
    char *err;
    assert_int_equal(run_initclient(&env, &err, &p), 0);
    free(err);
    char *text = tu_read_file(report, NULL);
    assert_non_null(text);
    double v;
    assert_int_equal(tu_count_lines(text, "\"pid\""), 1);
    assert_int_equal(tu_json_num(text, "pid", &v), 0);
    assert_int_equal((int)v, (int)p.pid);
    assert_int_equal(tu_json_num(text, "cuInit", &v), 0);
    assert_int_equal((int)v, 1);
    assert_int_equal(tu_json_num(text, "launches", &v), 0);
    assert_int_equal((int)v, 0);
    free(text);
    tu_env_free(&env);
}

/* A driver that cannot be loaded, and libsalus named as the driver: the call
 * fails with CUDA_ERROR_NOT_INITIALIZED (the client exits 3), said once,
 * with what to do; no signal. */
static void test_process_driver_faults(void **state)
{
    (void)state;
    char self[512];
    const char *drivers[] = { "/nonexistent/libcuda.so.1",
                              tu_build_path("libsalus.so", self, sizeof self) };
    const char *says[] = { "cannot load the CUDA driver", "is libsalus itself" };
    for (int i = 0; i < 2; i++) {
        tu_env_t env;
        env_preload(&env, "libsalus.so");
        tu_env_set(&env, "SALUS_REAL_LIBCUDA", "%s", drivers[i]);
        tu_proc_t p;
        char *err;
        assert_int_equal(run_initclient(&env, &err, &p), 3);
        assert_non_null(err);
        assert_int_equal(tu_count_lines(err, says[i]), 1);
        assert_int_equal(tu_count_lines(err, "SALUS_REAL_LIBCUDA"), 1);
        assert_non_null(strstr(err, "salus["));
        free(err);
        tu_env_free(&env);
    }
}

/* libnext_a's dlsym(RTLD_NEXT, "next_x") must find libnext_b's, through
 * libsalus's dlsym as without it, whatever the optimization of libsalus;
 * an interposer that forwards through an ordinary call finds a's own. */
static void test_rtld_next(void **state)
{
    (void)state;
    static const struct { const char *preload; const char *want; } runs[] = {
        { NULL, "b" },
        { "libsalus.so", "b" },
        { "tests/libsalus-O0.so", "b" },
        { "tests/clients/libbadnext.so", "a" },
    };
    char prog[512];
    tu_build_path("tests/clients/next_main", prog, sizeof prog);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        tu_env_t env;
        if (runs[i].preload) {
            env_preload(&env, runs[i].preload);
        } else {
            tu_env_init(&env);
            tu_env_unset(&env, "LD_PRELOAD");
        }
        char *argv[] = { prog, NULL };
        tu_proc_t p;
        int rc = tu_run(argv, &env, CHILD_MS, &p);
        char *out = tu_read_file(p.out_path, NULL);
        if (!out || strncmp(out, runs[i].want, 1) != 0)
            fail_msg("preload %s: next_x from %s, want %s (exit %d)",
                     runs[i].preload ? runs[i].preload : "none", out ? out : "?",
                     runs[i].want, rc);
        assert_int_equal(rc, strcmp(runs[i].want, "b") == 0 ? 0 : 1);
        free(out);
        tu_env_free(&env);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_loader_fake_driver, setup_fake_driver, teardown_driver),
        cmocka_unit_test_setup_teardown(test_loader_no_driver, setup_fake_driver, teardown_driver),
        cmocka_unit_test_setup_teardown(test_dlsym_decisions, setup_fake_driver, teardown_driver),
        cmocka_unit_test_setup_teardown(test_dlsym_trampoline, setup_fake_driver, teardown_driver),
        cmocka_unit_test_setup_teardown(test_report_format, setup_fake_driver, teardown_driver),
        cmocka_unit_test_setup_teardown(test_fork_child_counts_its_own, setup_fake_driver,
                                        teardown_driver),
        cmocka_unit_test(test_process_without_cuda),
        cmocka_unit_test(test_process_with_fake_driver),
        cmocka_unit_test(test_process_driver_faults),
        cmocka_unit_test(test_rtld_next),
    };
    return cmocka_run_group_tests_name("intercept_load", tests, NULL, NULL);
}

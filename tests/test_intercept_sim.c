/*
 * test_intercept_sim.c - every path into the driver, over simgpu, with
 * libsalus preloaded: a program linked to libcuda (legacy and per-thread
 * builds), cuLaunchKernelEx, dlopen + dlsym of versioned names,
 * cuGetProcAddress (5 arguments with flags 0 and 2, 4 arguments; a driver
 * whose answer is not its export, which libsalus passes through), and the
 * CUDA runtime itself (libcudart resolving its whole driver table, then
 * running its work to the end).
 *
 * Each run is a child process (tests/clients) with its own SIMGPU_STATE,
 * SALUS_REPORT and SIMGPU_TRACE; the test holds libsalus's report and
 * simgpu's trace against what the client says it did.  Skipped, saying why,
 * when simgpu or the kernels are not built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda.h>
#include "hook_list.h"
#include "lib/testutil.h"

#ifndef CUDA_HOME_DIR
#define CUDA_HOME_DIR "/usr/local/cuda"
#endif
#define CHILD_MS 30000

#define NAME_(cat, export, ...) #export,
static const char *const wrapped[] = { HOOK_LIST(NAME_) };

static int is_wrapped(const char *name)
{
    for (size_t i = 0; i < sizeof wrapped / sizeof wrapped[0]; i++)
        if (strcmp(wrapped[i], name) == 0)
            return 1;
    return 0;
}

/* What one run left: the client's line, its report, its kernels. */
typedef struct run {
    tu_proc_t p;
    int rc;
    char *out, *err, *report;
    long kernels;           /* salus_spin kernels of the client's pid */
    long probes;            /* probe_kernel kernels of the client's pid (cudart_probe) */
} run_t;

static void run_free(run_t *r)
{
    free(r->out);
    free(r->err);
    free(r->report);
}

/* extra: one more "NAME=value" for the client's environment, or NULL. */
static void run_client(run_t *r, const char *client, const char *mode, int cudart, int debug,
                       const char *extra)
{
    char prog[512], cubin[512], report[600], trace[600], state[64], table[64], sim[512];
    memset(r, 0, sizeof *r);
    snprintf(report, sizeof report, "%s/report-%s-%s.json", tu_tmpdir(), client, mode);
    snprintf(trace, sizeof trace, "%s/trace-%s-%s.json", tu_tmpdir(), client, mode);
    unlink(report);
    unlink(trace);
    tu_env_t env;
    tu_env_init(&env);
    tu_env_salus(&env, tu_unique_name("isim", state, sizeof state),
                 tu_unique_name("itab", table, sizeof table));
    tu_env_set(&env, "SALUS_REPORT", "%s", report);
    tu_env_set(&env, "SIMGPU_TRACE", "%s", trace);
    if (cudart)
        tu_env_set(&env, "LD_LIBRARY_PATH", "%s:%s/lib64", tu_build_path("sim", sim, sizeof sim),
                   CUDA_HOME_DIR);
    if (debug)
        tu_env_set(&env, "SALUS_LOG", "debug");
    else
        tu_env_unset(&env, "SALUS_LOG");
    if (extra) {
        const char *eq = strchr(extra, '=');
        char name[64];
        assert_non_null(eq);
        snprintf(name, sizeof name, "%.*s", (int)(eq - extra), extra);
        tu_env_set(&env, name, "%s", eq + 1);
    }
    char rel[128];
    snprintf(rel, sizeof rel, "tests/clients/%s", client);
    tu_build_path(rel, prog, sizeof prog);
    tu_build_path("workloads/kernels.cubin", cubin, sizeof cubin);
    char *argv[] = { prog, (char *)mode, cubin, NULL };
    r->rc = tu_run(argv, &env, CHILD_MS, &r->p);
    r->out = tu_read_file(r->p.out_path, NULL);
    r->err = tu_read_file(r->p.err_path, NULL);
    r->report = tu_read_file(report, NULL);
    tu_kernel_t *k = NULL;
    long n = tu_trace_load(trace, &k);
    for (long i = 0; i < n; i++)
        if (k[i].pid == r->p.pid && strcmp(k[i].name, "salus_spin") == 0)
            r->kernels++;
        else if (k[i].pid == r->p.pid && strcmp(k[i].name, "probe_kernel") == 0)
            r->probes++;
    free(k);
    tu_env_free(&env);
}

/* ---- one path at a time ------------------------------------------------------- */

static void check_path(const char *client, const char *mode, int per_thread)
{
    if (!tu_built("sim/libcuda.so.1") || !tu_built("workloads/kernels.cubin"))
        skip();
    run_t r;
    run_client(&r, client, mode, 0, 0, NULL);
    if (r.rc != 0)
        fail_msg("%s %s exited %d: %s", client, mode, r.rc, r.err ? r.err : "");
    const char *did = r.out, *rep = r.report;
    assert_non_null(did);
    assert_non_null(rep);
    assert_int_equal(tu_count_lines(rep, "\"pid\""), 1);
    assert_int_equal((int)tu_json_need(rep, "pid"), (int)r.p.pid);
    assert_int_equal(tu_json_need(rep, "launches"), tu_json_need(did, "launches"));
    assert_int_equal(tu_json_need(rep, "syncs"), tu_json_need(did, "syncs"));
    assert_int_equal(tu_json_need(rep, "allocs"), tu_json_need(did, "allocs"));
    assert_int_equal(tu_json_need(rep, "frees"), tu_json_need(did, "frees"));
    assert_int_equal(tu_json_need(rep, "bytes_allocated"), tu_json_need(did, "bytes"));
    assert_int_equal(tu_json_need(rep, "resolver_wrapped"), tu_json_need(did, "expect_wrapped"));
    assert_int_equal(tu_json_need(rep, "resolver_passed"), tu_json_need(did, "expect_passed"));
    /* The wrapper of exactly the variant the client asked for ran. */
    char launch[64];
    assert_int_equal(tu_json_str(did, "launch_export", launch, sizeof launch), 0);
    assert_int_equal(tu_json_need(rep, launch), tu_json_need(did, "launches"));
    assert_int_equal(tu_json_need(rep, per_thread ? "cuStreamSynchronize_ptsz" : "cuStreamSynchronize"), 1);
    assert_int_equal(tu_json_need(rep, per_thread ? "cuMemcpyDtoH_v2_ptds" : "cuMemcpyDtoH_v2"), 1);
    /* And simgpu ran the kernels. */
    assert_int_equal(r.kernels, (long)tu_json_need(did, "launches"));
    run_free(&r);
}

static void test_direct(void **state)      { (void)state; check_path("drvclient", "direct", 0); }
static void test_direct_ptds(void **state) { (void)state; check_path("drvclient_ptds", "direct", 1); }
static void test_launch_ex(void **state)   { (void)state; check_path("drvclient", "launchex", 0); }
static void test_dlsym(void **state)       { (void)state; check_path("drvclient", "dlsym", 0); }
static void test_getproc(void **state)     { (void)state; check_path("drvclient", "getproc", 0); }
static void test_getproc_pt(void **state)  { (void)state; check_path("drvclient", "getproc-pt", 1); }
static void test_getproc11(void **state)   { (void)state; check_path("drvclient", "getproc11", 0); }

/* A driver whose answer is not the export its headers name (simgpu's fault
 * SIMGPU_PROCADDR_PT: cuLaunchKernel at 12000 with flags 0 answered with
 * cuLaunchKernel_ptsz): libsalus hands that answer through instead of its
 * wrapper of the legacy export, says so once at debug level, and wraps
 * every other lookup as before.  The client's launches then reach simgpu
 * without libsalus: none counted, all run. */
static void test_getproc_guard(void **state)
{
    (void)state;
    if (!tu_built("sim/libcuda.so.1") || !tu_built("workloads/kernels.cubin"))
        skip();
    run_t r;
    run_client(&r, "drvclient", "getproc", 0, 1, "SIMGPU_PROCADDR_PT=cuLaunchKernel@12000");
    if (r.rc != 0)
        fail_msg("drvclient getproc exited %d: %s", r.rc, r.err ? r.err : "");
    const char *did = r.out, *rep = r.report;
    assert_non_null(did);
    assert_non_null(rep);
    assert_int_equal(tu_json_need(rep, "resolver_wrapped"), tu_json_need(did, "expect_wrapped") - 1);
    assert_int_equal(tu_json_need(rep, "resolver_passed"), tu_json_need(did, "expect_passed") + 1);
    double launches = -1, legacy = 0;
    assert_int_equal(tu_json_num(rep, "launches", &launches), 0);
    assert_true(launches == 0);
    tu_json_num(rep, "cuLaunchKernel", &legacy);        /* absent or 0 */
    assert_true(legacy == 0);
    assert_int_equal(r.kernels, (long)tu_json_need(did, "launches"));
    assert_int_equal(tu_count_lines(r.err, "is not its export cuLaunchKernel ("), 1);
    assert_int_equal(tu_count_lines(r.err, "-> cuLaunchKernel passed (the driver's answer is not"), 1);
    assert_int_equal(tu_count_lines(r.err, "-> cuMemAlloc_v2 wrapped"), 1);
    run_free(&r);
}

/* ---- the CUDA runtime ----------------------------------------------------------- */

typedef CUresult (*gpa_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

/* The export simgpu itself answers for (symbol, version, flags), or NULL. */
static const char *sim_answer(gpa_t gpa, const char *symbol, int version, unsigned long long flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    if (gpa(symbol, &fn, version, flags, &status) != CUDA_SUCCESS || !fn)
        return NULL;
    Dl_info info;
    if (!dladdr(fn, &info) || !info.dli_sname)
        return "?";
    return info.dli_sname;
}

/* libcudart resolves its driver table through libsalus: every lookup the
 * debug log shows is answered with our wrapper exactly when simgpu's own
 * answer is an export we wrap, and then with the wrapper of that export.
 * Then the program runs to its end over simgpu (which serves the runtime's
 * private tables), and libsalus sees its work: every launch, the sync, the
 * allocation and the free, as simgpu's trace shows the kernels. */
static void test_cudart(void **state)
{
    (void)state;
    char sim[512];
    if (!tu_built("sim/libcuda.so.1") || !tu_built("tests/clients/cudart_probe"))
        skip();
    run_t r;
    run_client(&r, "cudart_probe", "", 1, 1, NULL);
    assert_false(r.p.timed_out);
    if (r.rc != 0 || !r.out)
        fail_msg("cudart_probe exited %d: %s %s", r.rc, r.out ? r.out : "", r.err ? r.err : "");
    assert_int_equal(tu_json_need(r.out, "error"), 0);
    assert_true(tu_json_need(r.out, "count") >= 1);
    void *h = dlopen(tu_build_path("sim/libcuda.so.1", sim, sizeof sim), RTLD_NOW | RTLD_LOCAL);
    assert_non_null(h);
    gpa_t gpa = (gpa_t)dlsym(h, "cuGetProcAddress_v2");
    assert_non_null(gpa);

    int lookups = 0, wraps = 0, per_thread_wraps = 0;
    char line[512];
    for (int i = 0; tu_find_line(r.err, ": debug: resolve ", i, line, sizeof line) == 0; i++) {
        char symbol[128], chosen[128], verdict[32];
        int version;
        unsigned long long flags;
        /* "resolve <symbol>@<version> flags=<f> -> <export> <verdict> ..."; the
         * runtime's first question is for the empty name. */
        const char *at = strstr(line, "resolve ") + strlen("resolve ");
        const char *sep = strchr(at, '@');
        if (!sep || (size_t)(sep - at) >= sizeof symbol ||
            sscanf(sep + 1, "%d flags=%llu -> %127s %31s", &version, &flags, chosen, verdict) != 4)
            fail_msg("unreadable: %s", line);
        memcpy(symbol, at, (size_t)(sep - at));
        symbol[sep - at] = '\0';
        lookups++;
        const char *sim_export = sim_answer(gpa, symbol, version, flags);
        int should_wrap = sim_export && is_wrapped(sim_export);
        int did_wrap = strcmp(verdict, "wrapped") == 0;
        if (should_wrap != did_wrap || (did_wrap && strcmp(chosen, sim_export) != 0))
            fail_msg("%s@%d flags %llu: simgpu answers %s, libsalus %s %s", symbol, version, flags,
                     sim_export ? sim_export : "nothing", chosen, verdict);
        wraps += did_wrap;
        per_thread_wraps += did_wrap && flags == 2 && (strstr(chosen, "_ptsz") || strstr(chosen, "_ptds"));
    }
    dlclose(h);
    fprintf(stderr, "cudart: %d lookups through libsalus, %d wrapped (%d per-thread)\n",
            lookups, wraps, per_thread_wraps);
    assert_true(lookups >= 400);
    assert_true(wraps > 0);
    /* The report agrees with the log, and with what the program did. */
    assert_non_null(r.report);
    assert_int_equal(tu_json_need(r.report, "resolver_wrapped"), wraps);
    assert_int_equal(tu_json_need(r.report, "resolver_passed"), lookups - wraps);
    assert_int_equal(tu_json_need(r.report, "launches"), tu_json_need(r.out, "launches"));
    assert_int_equal(r.probes, (long)tu_json_need(r.out, "launches"));
    assert_int_equal(tu_json_need(r.report, "allocs"), tu_json_need(r.out, "allocs"));
    assert_int_equal(tu_json_need(r.report, "frees"), tu_json_need(r.out, "frees"));
    assert_int_equal(tu_json_need(r.report, "bytes_allocated"), tu_json_need(r.out, "bytes"));
    assert_true(tu_json_need(r.report, "syncs") >= 1);
    run_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct),
        cmocka_unit_test(test_direct_ptds),
        cmocka_unit_test(test_launch_ex),
        cmocka_unit_test(test_dlsym),
        cmocka_unit_test(test_getproc),
        cmocka_unit_test(test_getproc_pt),
        cmocka_unit_test(test_getproc11),
        cmocka_unit_test(test_getproc_guard),
        cmocka_unit_test(test_cudart),
    };
    return cmocka_run_group_tests_name("intercept_sim", tests, NULL, NULL);
}

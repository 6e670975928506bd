/*
 * test_simgpu_cudart.c - the toolkit's own CUDA runtime and libraries over
 * simgpu, unmodified: the programs of tests/clients built by nvcc
 * (rt_client linked -cudart shared, -cudart static and PTX only; rt_libs
 * with cuBLAS, cuBLASLt and cuDNN), each a child with its own state and
 * trace, judged by its exit status, its JSON line and the kernels the trace
 * shows for it.  Their checks read data moved by copies through the host;
 * simgpu's kernels compute nothing, so no result of a kernel is checked.
 * The tables the runtime asks the driver for are test_simgpu_rt's.
 *
 * Skipped, saying why, when a client is not built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/testutil.h"

#define CLIENT_MS  60000

typedef struct rt_run {
    tu_proc_t p;
    int rc;
    char *out, *err;
    long kernels;                       /* of the client's pid */
    long named;                         /* of those, named as asked */
} rt_run_t;

static void rt_free(rt_run_t *r)
{
    free(r->out);
    free(r->err);
}

/* Run tests/clients/<client> <mode> over simgpu (state of its own; extra:
 * one "NAME=value" more); kernel: the name to count in its trace. */
static void rt_run(rt_run_t *r, const char *client, const char *mode, const char *kernel,
                   const char *extra)
{
    char rel[128], prog[512], state[64], trace[600];
    snprintf(rel, sizeof rel, "tests/clients/%s", client);
    if (!tu_built(rel))
        skip();
    memset(r, 0, sizeof *r);
    snprintf(trace, sizeof trace, "%s/rt-%s-%s.jsonl", tu_tmpdir(), client, mode);
    unlink(trace);
    tu_env_t env;
    tu_env_init(&env);
    tu_env_simgpu(&env, tu_unique_name("rt", state, sizeof state));
    tu_env_set(&env, "SIMGPU_TRACE", "%s", trace);
    tu_env_unset(&env, "CUDA_MODULE_LOADING");
    if (extra) {
        const char *eq = strchr(extra, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - extra), extra);
        tu_env_set(&env, name, "%s", eq + 1);
    }
    tu_build_path(rel, prog, sizeof prog);
    char *argv[] = { prog, (char *)mode, NULL };
    r->rc = tu_run(argv, &env, CLIENT_MS, &r->p);
    r->out = tu_read_file(r->p.out_path, NULL);
    r->err = tu_read_file(r->p.err_path, NULL);
    tu_kernel_t *k = NULL;
    long n = tu_trace_load(trace, &k);
    for (long i = 0; i < n; i++) {
        if (k[i].pid != r->p.pid)
            continue;
        r->kernels++;
        r->named += kernel && !strcmp(k[i].name, kernel);
    }
    free(k);
    tu_env_free(&env);
    if (r->rc != 0 || !r->out || tu_json_need(r->out, "ok") != 1)
        fail_msg("%s %s exited %d: %s%s", client, mode, r->rc, r->out ? r->out : "",
                 r->err ? r->err : "");
}

/* rt_client: every launch it counted reached simgpu as rt_scale. */
static void rt_client(const char *client, const char *mode)
{
    rt_run_t r;
    rt_run(&r, client, mode, "rt_scale", NULL);
    long launches = (long)tu_json_need(r.out, "launches");
    assert_true(launches > 0);
    assert_int_equal(r.named, launches);
    assert_int_equal(tu_json_need(r.out, "major"), 9);
    rt_free(&r);
}

static void test_rt_shared(void **state)  { (void)state; rt_client("rt_shared", "basic"); }
static void test_rt_static(void **state)  { (void)state; rt_client("rt_static", "basic"); }
static void test_rt_ptx(void **state)     { (void)state; rt_client("rt_ptx", "basic"); }
static void test_rt_reset(void **state)   { (void)state; rt_client("rt_shared", "reset"); }
static void test_rt_static_reset(void **state) { (void)state; rt_client("rt_static", "reset"); }
static void test_rt_threads(void **state) { (void)state; rt_client("rt_shared", "threads"); }

/* rt_libs: the library ran its kernels over simgpu. */
static void rt_libs(const char *mode, const char *extra)
{
    rt_run_t r;
    rt_run(&r, "rt_libs", mode, NULL, extra);
    assert_true(r.kernels > 0);
    double found;
    if (tu_json_num(r.out, "algorithms", &found) == 0)
        assert_true(found > 0);
    rt_free(&r);
}

static void test_rt_sgemm(void **state)   { (void)state; rt_libs("sgemm", NULL); }
static void test_rt_lt_f16(void **state)  { (void)state; rt_libs("lt-f16", NULL); }
static void test_rt_lt_bf16(void **state) { (void)state; rt_libs("lt-bf16", NULL); }
static void test_rt_conv(void **state)    { (void)state; rt_libs("conv", NULL); }
/* cuBLAS's runtime loads all its fatbins at start under EAGER, one without
 * code for sm_90 among them. */
static void test_rt_sgemm_eager(void **state)
{
    (void)state;
    rt_libs("sgemm", "CUDA_MODULE_LOADING=EAGER");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rt_shared),
        cmocka_unit_test(test_rt_static),
        cmocka_unit_test(test_rt_ptx),
        cmocka_unit_test(test_rt_reset),
        cmocka_unit_test(test_rt_static_reset),
        cmocka_unit_test(test_rt_threads),
        cmocka_unit_test(test_rt_sgemm),
        cmocka_unit_test(test_rt_lt_f16),
        cmocka_unit_test(test_rt_lt_bf16),
        cmocka_unit_test(test_rt_conv),
        cmocka_unit_test(test_rt_sgemm_eager),
    };
    return cmocka_run_group_tests_name("simgpu cudart", tests, NULL, NULL);
}

/*
 * test_simgpu_globals.c - simgpu's module variables (cuModuleGetGlobal): a
 * module's __device__ and __constant__ variables, from PTX (initializers
 * not evaluated, as the driver's JIT leaves them to the program) and from a
 * cubin (initial values from .nv.global.init and .nv.constant3), copies in
 * and out of them, their bounds, and that they are not allocations.
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
int simt_init(const char *tag);
uint64_t simt_free(void);

#define CK(x) assert_int_equal((x), CUDA_SUCCESS)
#define CKE(x, e) assert_int_equal((x), (e))

/* ---- module variables ----------------------------------------------------------------------- */

static const char globals_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .global .align 4 .u32 counter[4];\n"
    ".visible .global .align 4 .u32 answer = 42;\n"
    ".visible .const .align 4 .u32 konst = 7;\n"
    ".extern .global .align 4 .u32 elsewhere;\n"
    ".visible .entry bump(\n\t.param .u64 bump_param_0\n)\n{\n"
    "\t.reg .b32 %r<3>;\n\tld.global.u32 %r1, [counter];\n\tld.global.u32 %r2, [answer];\n"
    "\tadd.u32 %r1, %r1, %r2;\n\tld.const.u32 %r2, [konst];\n\tadd.u32 %r1, %r1, %r2;\n"
    "\tst.global.u32 [counter], %r1;\n\tret;\n}\n";

/* Each variable: its size, and its first word after load. */
static void expect_global(CUmodule m, const char *name, size_t size, uint32_t first)
{
    CUdeviceptr d = 0;
    size_t bytes = 0;
    uint32_t w = 99;
    CK(cuModuleGetGlobal(&d, &bytes, m, name));
    assert_int_equal(bytes, size);
    CK(cuMemcpyDtoH(&w, d, 4));
    assert_int_equal(w, first);
}

static void check_globals(CUmodule m, int initialized)
{
    uint64_t f0 = simt_free();
    expect_global(m, "counter", 16, 0);
    expect_global(m, "answer", 4, initialized ? 42 : 0);
    expect_global(m, "konst", 4, initialized ? 7 : 0);
    CUdeviceptr d;
    size_t bytes;
    CK(cuModuleGetGlobal(&d, NULL, m, "counter"));  /* either output may be omitted */
    CK(cuModuleGetGlobal(NULL, &bytes, m, "counter"));
    uint32_t in[4] = { 1, 2, 3, 4 }, out[4];
    CK(cuMemcpyHtoD(d, in, sizeof in));
    CK(cuMemcpyDtoH(out, d, sizeof out));
    assert_memory_equal(in, out, sizeof in);
    CKE(cuMemcpyHtoD(d, in, 20), CUDA_ERROR_INVALID_VALUE);    /* past the variable */
    CKE(cuMemFree(d), CUDA_ERROR_INVALID_VALUE);               /* not an allocation */
    CKE(cuModuleGetGlobal(&d, &bytes, m, "nope"), CUDA_ERROR_NOT_FOUND);
    CKE(cuModuleGetGlobal(&d, &bytes, m, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(simt_free(), f0);              /* variables are not allocations */
    CUfunction f;
    CK(cuModuleGetFunction(&f, m, "bump"));
    CK(cuModuleUnload(m));
    CKE(cuMemcpyDtoH(out, d, 4), CUDA_ERROR_INVALID_VALUE);    /* gone with it */
}

static void test_module_globals_ptx(void **state)
{
    (void)state;
    CUmodule m;
    CUdeviceptr d;
    CK(cuModuleLoadData(&m, globals_ptx));
    CKE(cuModuleGetGlobal(&d, NULL, m, "elsewhere"), CUDA_ERROR_NOT_FOUND);  /* extern */
    check_globals(m, 0);                /* PTX initializers are not evaluated */
}

/* The same variables in a cubin, when the toolkit's ptxas is there to make it. */
static void test_module_globals_cubin(void **state)
{
    (void)state;
    const char *home = getenv("CUDA_HOME") ? getenv("CUDA_HOME") : "/usr/local/cuda";
    char ptxas[512], ptx[512], cubin[512], cmd[2048];
    snprintf(ptxas, sizeof ptxas, "%s/bin/ptxas", home);
    if (access(ptxas, X_OK) != 0) {
        fprintf(stderr, "no %s to build a cubin with variables\n", ptxas);
        skip();
    }
    snprintf(ptx, sizeof ptx, "%s/globals.ptx", tu_tmpdir());
    snprintf(cubin, sizeof cubin, "%s/globals.cubin", tu_tmpdir());
    FILE *f = fopen(ptx, "w");
    assert_non_null(f);
    fputs(globals_ptx, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' -arch=sm_90 '%s' -o '%s' 2>/dev/null", ptxas, ptx, cubin);
    assert_int_equal(system(cmd), 0);
    CUmodule m;
    CK(cuModuleLoad(&m, cubin));
    check_globals(m, 1);                /* initial values from .nv.global.init, .nv.constant3 */
}

int main(void)
{
    if (simt_init("simgpu-globals"))
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_globals_ptx),
        cmocka_unit_test(test_module_globals_cubin),
    };
    return cmocka_run_group_tests_name("simgpu module variables", tests, NULL, NULL);
}

/*
 * test_procmap.c - the driver map generated from cudaTypedefs.h: every
 * typedef is there, every export it names exists in the toolkit's stub
 * libcuda.so, and cuGetProcAddress's (symbol, version, flags) -> export rule
 * gives the right variant for the cases that matter.
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

#include "intercept/intercept.h"
#include "lib/testutil.h"

#ifndef CUDA_HOME_DIR
#define CUDA_HOME_DIR "/usr/local/cuda"
#endif

#define EXPORT_NAME_(base, version, pt, export) #export,
static const char *const exports[] = { CU_PROCMAP(EXPORT_NAME_) };
#define N_EXPORTS (sizeof exports / sizeof exports[0])

/* As many rows as the header has PFN_ typedefs ("typedef CUresult(CUDAAPI
 * *PFN_...", with or without a space before the parenthesis). */
static void test_every_typedef_is_mapped(void **state)
{
    (void)state;
    char *text = tu_read_file(CUDA_HOME_DIR "/include/cudaTypedefs.h", NULL);
    if (!text)
        skip();
    size_t typedefs = 0;
    for (const char *p = text; (p = strstr(p, "CUDAAPI *PFN_")); p++)
        typedefs++;
    free(text);
    assert_int_equal(N_EXPORTS, CU_PROCMAP_COUNT);
    assert_int_equal(typedefs, CU_PROCMAP_COUNT);
}

/* Every export the map names is a symbol of the toolkit's stub driver. */
static void test_every_export_is_in_the_stub(void **state)
{
    (void)state;
    void *stub = dlopen(CUDA_HOME_DIR "/lib64/stubs/libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!stub) {
        fprintf(stderr, "no stub driver: %s\n", dlerror());
        skip();
    }
    int missing = 0;
    for (size_t i = 0; i < N_EXPORTS; i++) {
        if (!dlsym(stub, exports[i])) {
            fprintf(stderr, "not in the stub: %s\n", exports[i]);
            missing++;
        }
    }
    dlclose(stub);
    assert_int_equal(missing, 0);
}

static const char *lookup(const char *symbol, int version, int flags)
{
    const char *out = "untouched";
    if (hook_procmap_lookup(symbol, version, (cuuint64_t)flags, &out) != 0)
        return strcmp(out, "untouched") == 0 ? NULL : "written on failure";
    return out;
}

static void test_lookups(void **state)
{
    (void)state;
    assert_string_equal(lookup("cuMemAlloc", 3020, 0), "cuMemAlloc_v2");
    assert_string_equal(lookup("cuMemAlloc", 12000, 0), "cuMemAlloc_v2");
    assert_string_equal(lookup("cuMemAlloc", 2000, 0), "cuMemAlloc");
    assert_string_equal(lookup("cuMemAlloc", 3010, 0), "cuMemAlloc");
    assert_string_equal(lookup("cuLaunchKernel", 12000, 2), "cuLaunchKernel_ptsz");
    assert_string_equal(lookup("cuLaunchKernel", 12000, 0), "cuLaunchKernel");
    assert_string_equal(lookup("cuLaunchKernel", 12000, 1), "cuLaunchKernel");
    /* Per-thread asked below the per-thread variant's version: legacy. */
    assert_string_equal(lookup("cuLaunchKernel", 4000, 2), "cuLaunchKernel");
    /* Per-thread asked of a function with no per-thread variant: legacy. */
    assert_string_equal(lookup("cuInit", 12000, 2), "cuInit");
    assert_string_equal(lookup("cuCtxSynchronize", 12000, 0), "cuCtxSynchronize");
    assert_string_equal(lookup("cuMemcpyDtoH", 12000, 2), "cuMemcpyDtoH_v2_ptds");
    assert_string_equal(lookup("cuMemcpyDtoH", 12000, 0), "cuMemcpyDtoH_v2");
    assert_string_equal(lookup("cuStreamSynchronize", 12000, 2), "cuStreamSynchronize_ptsz");
    assert_string_equal(lookup("cuGetProcAddress", 11030, 0), "cuGetProcAddress");
    assert_string_equal(lookup("cuGetProcAddress", 11080, 0), "cuGetProcAddress");
    assert_string_equal(lookup("cuGetProcAddress", 12000, 0), "cuGetProcAddress_v2");
#if CU_PROCMAP_HEADER_VERSION >= 13000
    assert_string_equal(lookup("cuCtxSynchronize", 13000, 0), "cuCtxSynchronize_v2");
    assert_string_equal(lookup("cuCtxGetDevice", 13000, 0), "cuCtxGetDevice_v2");
    assert_string_equal(lookup("cuMemcpyBatchAsync", 13000, 2), "cuMemcpyBatchAsync_v2_ptsz");
    assert_string_equal(lookup("cuMemcpyBatchAsync", 12080, 2), "cuMemcpyBatchAsync_ptsz");
#endif
}

static void test_lookups_that_fail(void **state)
{
    (void)state;
    assert_null(lookup("cuNoSuchFunction", 12000, 0));
    assert_null(lookup("", 12000, 0));
    assert_null(lookup(NULL, 12000, 0));
    /* Version too low for any variant. */
    assert_null(lookup("cuMemAllocAsync", 11010, 0));
    assert_null(lookup("cuGetProcAddress", 11020, 0));
    assert_null(lookup("cuMemAlloc", 1000, 0));
    /* Flags other than default, legacy or per-thread. */
    assert_null(lookup("cuMemAlloc", 12000, 3));
    assert_null(lookup("cuMemAlloc", 12000, 4));
    /* A prefix of a name is not the name. */
    assert_null(lookup("cuMemAll", 12000, 0));
}

/* Each row is what its own (base, version, flags) names: bases near the ends
 * of the sorted table included. */
static void test_lookup_every_row(void **state)
{
    (void)state;
#define CHECK_ROW_(base, version, pt, export)                                  \
    do {                                                                       \
        const char *got = lookup(#base, version, pt ? 2 : 0);                  \
        assert_non_null(got);                                                  \
        assert_string_equal(got, #export);                                     \
    } while (0);
    CU_PROCMAP(CHECK_ROW_)
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_typedef_is_mapped),
        cmocka_unit_test(test_every_export_is_in_the_stub),
        cmocka_unit_test(test_lookups),
        cmocka_unit_test(test_lookups_that_fail),
        cmocka_unit_test(test_lookup_every_row),
    };
    return cmocka_run_group_tests_name("procmap", tests, NULL, NULL);
}

/*
 * test_procmap.c - the driver map generated from cudaTypedefs.h: every
 * typedef is there, every export it names exists in the toolkit's stub
 * libcuda.so, and cuGetProcAddress's (symbol, version, flags) -> export rule
 * gives the right variant for the cases that matter; and simgpu exports
 * every entry point that any driver header of the toolkit declares (cuda.h,
 * the graphics interop headers, cudaProfiler.h), not only the map's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <regex.h>
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

/* ---- every name of every driver header, in simgpu ----------------------------- */

/* Text with its comments blanked and its `#ifdef _WIN32 ... #endif` blocks
 * cut (none of them nests another conditional). */
static void strip_header(char *t)
{
    for (char *p = t; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *e = strstr(p + 2, "*/");
            e = e ? e + 2 : p + strlen(p);
            memset(p, ' ', (size_t)(e - p));
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                *p++ = ' ';
        } else if (!strncmp(p, "#ifdef _WIN32", 13)) {
            char *e = strstr(p, "#endif");
            e = e ? e + 6 : p + strlen(p);
            memset(p, ' ', (size_t)(e - p));
        }
    }
}

/* How many names the header declares that lib does not export (each said on
 * stderr); -1 if the header cannot be read.  A name is declared by
 * "CUDAAPI cuX(" or is what "#define cuX ..." renames to: cuY, or
 * __CUDA_API_PTDS/PTSZ(cuY), which is cuY and cuY_ptds/_ptsz.  A static
 * inline function of the header is no export. */
static int missing_from(void *lib, const char *header, int *names)
{
    char path[512];
    snprintf(path, sizeof path, "%s/include/%s", CUDA_HOME_DIR, header);
    char *text = tu_read_file(path, NULL);
    if (!text)
        return -1;
    strip_header(text);
    regex_t decl, def;
    assert_int_equal(regcomp(&decl, "CUDAAPI[ \t]+(cu[A-Za-z0-9_]+)[ \t]*\\(", REG_EXTENDED), 0);
    assert_int_equal(regcomp(&def, "#[ \t]*define[ \t]+cu[A-Za-z0-9_]+[ \t]+"
                                   "(__CUDA_API_PT(DS|SZ)\\()?(cu[A-Za-z0-9_]+)",
                             REG_EXTENDED), 0);
    int missing = 0;
    regmatch_t m[4];
    for (int pass = 0; pass < 2; pass++) {
        regex_t *re = pass ? &def : &decl;
        int group = pass ? 3 : 1;
        for (const char *p = text; !regexec(re, p, 4, m, 0); p += m[0].rm_eo) {
            char name[128], inl[160];
            int len = (int)(m[group].rm_eo - m[group].rm_so);
            snprintf(name, sizeof name, "%.*s", len, p + m[group].rm_so);
            snprintf(inl, sizeof inl, "CUresult %s(", name);
            const char *at = strstr(text, inl);
            if (at && at - text > 14 && !strncmp(at - 14, "static inline ", 14))
                continue;
            for (int v = 0; v < (pass && m[1].rm_so >= 0 ? 2 : 1); v++) {
                char sym[140];
                snprintf(sym, sizeof sym, "%s%s", name,
                         v == 0 ? "" : p[m[2].rm_so] == 'D' ? "_ptds" : "_ptsz");
                (*names)++;
                if (!dlsym(lib, sym)) {
                    fprintf(stderr, "%s declares %s, simgpu does not export it\n", header, sym);
                    missing++;
                }
            }
        }
    }
    regfree(&decl);
    regfree(&def);
    free(text);
    return missing;
}

static void test_simgpu_exports_every_header_name(void **state)
{
    (void)state;
    static const char *const headers[] = {
        "cuda.h", "cudaGL.h", "cudaEGL.h", "cudaVDPAU.h", "cudaProfiler.h",
    };
    void *lib = dlopen(SIMGPU_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        fail_msg("cannot load simgpu: %s", dlerror());
    int missing = 0;
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        int names = 0, n = missing_from(lib, headers[i], &names);
        if (n < 0)
            fail_msg("cannot read %s of the toolkit", headers[i]);
        /* The scan finds what it must: each header declares some names. */
        assert_true(names > 0);
        missing += n;
    }
    /* Every map row and every symbol of the toolkit's stub, too. */
    for (size_t i = 0; i < N_EXPORTS; i++)
        if (!dlsym(lib, exports[i]) && ++missing)
            fprintf(stderr, "simgpu does not export %s\n", exports[i]);
    dlclose(lib);
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
        cmocka_unit_test(test_simgpu_exports_every_header_name),
    };
    return cmocka_run_group_tests_name("procmap", tests, NULL, NULL);
}

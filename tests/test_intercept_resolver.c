/*
 * test_intercept_resolver.c - cuGetProcAddress (both forms) against a fake
 * driver: the variants the map picks for version and flags, the
 * self-lookup, the driver's own answers (no function, errors), version
 * skew, and the guard: a driver whose answer is not the export our wrapper
 * calls gets its answer handed through, and paging stops when what was
 * handed through writes device memory.
 *
 * The binary links the intercept objects themselves (the resolver under
 * test is libsalus's) and swaps the real-function table for a fake one (the
 * seam).  The fake driver answers as a real one does: the address of the
 * export its map names (here, the fake table's slot for that export), or,
 * when a test skews it, another address for one (symbol, version).
 *
 * Like the resolver, it includes cuda.h with __CUDA_API_VERSION_INTERNAL.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "intercept/intercept.h"
#include "lib/testutil.h"

/* ---- the fake driver --------------------------------------------------------
 * Its exports are distinct addresses, one per wrapped export (never called:
 * these tests call only the resolver, whose real slots are the fakes
 * below); an unwrapped export is answers[0]. */
static char exports[HOOK_COUNT];
static char answers[4];
static hook_real_t driver;    /* the fake driver's exports, as installed */
static struct {
    int calls, versions[4];
    const char *symbol;
    cuuint64_t flags;
    CUdriverProcAddressQueryResult *status;
    CUresult rc;          /* what the fake returns */
    const char *skew_symbol;   /* this symbol at skew_version ... */
    int skew_version;
    void *skew_answer;         /* ... answers this instead of its export */
} gpa;

/* The export a faithful driver hands out for (symbol, version, flags). */
static void *driver_export(const char *symbol, int version, cuuint64_t flags)
{
    const char *name;
    if (hook_procmap_lookup(symbol, version, flags, &name) != 0)
        return &answers[0];
    int id = hook_find(name);
    if (id < 0)
        return &answers[0];
    return driver.slot[id] ? driver.slot[id] : (void *)&exports[id];
}

static CUresult CUDAAPI fake_gpa5(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult *status)
{
    if (gpa.calls < 4)
        gpa.versions[gpa.calls] = version;
    if (gpa.calls++ == 0) {      /* the caller's question, not a second one */
        gpa.symbol = symbol;
        gpa.flags = flags;
        gpa.status = status;
    }
    if (gpa.rc != CUDA_SUCCESS || !symbol || !pfn)
        return gpa.rc != CUDA_SUCCESS ? gpa.rc : CUDA_ERROR_INVALID_VALUE;
    int known = strncmp(symbol, "cuNoSuch", 8) != 0;
    if (!known)
        *pfn = NULL;
    else if (gpa.skew_symbol && strcmp(symbol, gpa.skew_symbol) == 0 &&
             version == gpa.skew_version)
        *pfn = gpa.skew_answer;
    else
        *pfn = driver_export(symbol, version, flags);
    if (status)
        *status = known ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_gpa4(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return fake_gpa5(symbol, pfn, version, flags, NULL);
}

static hook_real_t fake_table(void)
{
    hook_real_t t;
    for (int i = 0; i < HOOK_COUNT; i++)
        t.slot[i] = &exports[i];
    t.fn.f_cuGetProcAddress_v2 = fake_gpa5;
    t.fn.f_cuGetProcAddress = fake_gpa4;
    return t;
}

static int setup_resolver(void **state)
{
    (void)state;
    memset(&gpa, 0, sizeof gpa);
    driver = fake_table();
    hook_real_install(&driver);
    return 0;
}

static hook_counts_t counts(void)
{
    hook_counts_t c;
    hook_counts_snapshot(&c);
    return c;
}

/* Resolve with the 5-argument form; the answer, or "untouched". */
static void *resolve(const char *symbol, int version, cuuint64_t flags)
{
    void *fn = (void *)&answers[3];
    CUdriverProcAddressQueryResult status = 77;
    gpa.calls = 0;
    CUresult rc = cuGetProcAddress_v2(symbol, &fn, version, flags, &status);
    assert_int_equal(rc, CUDA_SUCCESS);
    assert_ptr_equal(gpa.status, &status);      /* the driver got our caller's status */
    return fn;
}

#define WRAPPER(export) hook_wrappers[HOOK_##export]
#define EXPORT(export) ((void *)&exports[HOOK_##export])
#define DRIVER ((void *)&answers[0])

/* ---- the map's choice -------------------------------------------------------- */

static void test_resolver_variants(void **state)
{
    (void)state;
    hook_counts_t before = counts();
    assert_ptr_equal(resolve("cuLaunchKernel", 12000, 0), WRAPPER(cuLaunchKernel));
    assert_string_equal(gpa.symbol, "cuLaunchKernel");
    assert_int_equal(gpa.versions[0], 12000);
    assert_int_equal(gpa.flags, 0);
    assert_ptr_equal(resolve("cuLaunchKernel", 12000, 1), WRAPPER(cuLaunchKernel));
    assert_ptr_equal(resolve("cuLaunchKernel", 12000, 2), WRAPPER(cuLaunchKernel_ptsz));
    assert_int_equal(gpa.flags, 2);
    assert_ptr_equal(resolve("cuLaunchKernel", 4000, 2), WRAPPER(cuLaunchKernel));
    assert_ptr_equal(resolve("cuMemcpyDtoH", 12000, 2), WRAPPER(cuMemcpyDtoH_v2_ptds));
    assert_ptr_equal(resolve("cuMemcpyDtoH", 12000, 0), WRAPPER(cuMemcpyDtoH_v2));
    assert_ptr_equal(resolve("cuMemAlloc", 3020, 0), WRAPPER(cuMemAlloc_v2));
    assert_ptr_equal(resolve("cuMemAlloc", 3020, 2), WRAPPER(cuMemAlloc_v2));
    assert_ptr_equal(resolve("cuMemAlloc", 2000, 0), DRIVER);    /* cuMemAlloc: not wrapped */
    assert_ptr_equal(resolve("cuCtxSynchronize", 12000, 0), WRAPPER(cuCtxSynchronize));
#if CU_PROCMAP_HEADER_VERSION >= 13000
    assert_ptr_equal(resolve("cuCtxSynchronize", 13000, 0), WRAPPER(cuCtxSynchronize_v2));
#endif
    assert_ptr_equal(resolve("cuModuleGetFunction", 12000, 0), DRIVER);
    assert_ptr_equal(resolve("cuGetExportTable", 12000, 0), DRIVER);
    assert_ptr_equal(resolve("cuMemAlloc", 12000, 3), DRIVER);   /* unknown flags */
    hook_counts_t after = counts();
    assert_int_equal(after.resolver_wrapped - before.resolver_wrapped,
                     CU_PROCMAP_HEADER_VERSION >= 13000 ? 10 : 9);
    assert_int_equal(after.resolver_passed - before.resolver_passed, 4);
    assert_int_equal(after.calls[HOOK_cuGetProcAddress_v2] - before.calls[HOOK_cuGetProcAddress_v2],
                     CU_PROCMAP_HEADER_VERSION >= 13000 ? 14 : 13);
}

/* cudart asks for the resolver itself: 4 arguments at 11030, 5 at 12000. */
static void test_resolver_self_lookup(void **state)
{
    (void)state;
    assert_ptr_equal(resolve("cuGetProcAddress", 12000, 0), WRAPPER(cuGetProcAddress_v2));
    assert_ptr_equal(resolve("cuGetProcAddress", 11030, 0), WRAPPER(cuGetProcAddress));
    assert_ptr_equal(WRAPPER(cuGetProcAddress_v2), (void *)cuGetProcAddress_v2);
    void *fn = NULL;
    gpa.calls = 0;
    assert_int_equal(cuGetProcAddress("cuGetProcAddress", &fn, 11030, 0), CUDA_SUCCESS);
    assert_ptr_equal(fn, (void *)cuGetProcAddress);
    assert_int_equal(gpa.calls, 1);
    assert_null(gpa.status);                    /* through the 4-argument real one */
    assert_int_equal(cuGetProcAddress("cuLaunchKernel", &fn, 12000, 2), CUDA_SUCCESS);
    assert_ptr_equal(fn, WRAPPER(cuLaunchKernel_ptsz));
}

/* The driver's answer stands when it has no function or fails. */
static void test_resolver_driver_answers(void **state)
{
    (void)state;
    hook_counts_t before = counts();
    void *fn = (void *)&answers[3];
    CUdriverProcAddressQueryResult status = 77;
    assert_int_equal(cuGetProcAddress_v2("cuNoSuchFunction", &fn, 12000, 0, &status), CUDA_SUCCESS);
    assert_null(fn);
    assert_int_equal(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

    gpa.rc = CUDA_ERROR_INVALID_VALUE;
    fn = (void *)&answers[3];
    status = 77;
    assert_int_equal(cuGetProcAddress_v2("cuLaunchKernel", &fn, 99000, 0, &status),
                     CUDA_ERROR_INVALID_VALUE);
    assert_ptr_equal(fn, &answers[3]);          /* untouched */
    assert_int_equal(status, 77);
    gpa.rc = CUDA_SUCCESS;

    /* NULL arguments go to the driver, which judges them. */
    assert_int_equal(cuGetProcAddress_v2(NULL, &fn, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress_v2("cuInit", NULL, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cuGetProcAddress(NULL, NULL, 12000, 0), CUDA_ERROR_INVALID_VALUE);
    /* The status is optional. */
    fn = NULL;
    assert_int_equal(cuGetProcAddress_v2("cuInit", &fn, 12000, 0, NULL), CUDA_SUCCESS);
    assert_ptr_equal(fn, WRAPPER(cuInit));
    hook_counts_t after = counts();
    assert_int_equal(after.resolver_passed - before.resolver_passed, 5);
    assert_int_equal(after.resolver_wrapped - before.resolver_wrapped, 1);
}

/* Above the header's version the map names the newest variant it knows:
 * wrapped while the driver's answer is that export, passed once the driver
 * has a newer one (another function).  One question each: the guard
 * compares with the export, it does not ask again. */
static void test_resolver_version_skew(void **state)
{
    (void)state;
    int newer = CU_PROCMAP_HEADER_VERSION + 1000;
    assert_ptr_equal(resolve("cuLaunchKernel", newer, 2), WRAPPER(cuLaunchKernel_ptsz));
    assert_int_equal(gpa.calls, 1);
    assert_int_equal(gpa.versions[0], newer);
    gpa.skew_symbol = "cuLaunchKernel";
    gpa.skew_version = newer;
    gpa.skew_answer = &answers[1];
    assert_ptr_equal(resolve("cuLaunchKernel", newer, 2), &answers[1]);
    assert_ptr_equal(resolve("cuLaunchKernel", CU_PROCMAP_HEADER_VERSION, 2),
                     WRAPPER(cuLaunchKernel_ptsz));
    assert_ptr_equal(resolve("cuMemAlloc", newer, 0), WRAPPER(cuMemAlloc_v2));
}

/* ---- the guard ----------------------------------------------------------------
 * Capture what libsalus says on stderr (fd 2) at debug level. */
static int saved_stderr = -1;
static char log_path[512];

static void log_begin(void)
{
    snprintf(log_path, sizeof log_path, "%s/resolver-%d.log", tu_tmpdir(), (int)getpid());
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    fflush(stderr);
    saved_stderr = dup(2);
    assert_true(saved_stderr >= 0);
    assert_int_equal(dup2(fd, 2), 2);
    close(fd);
    util_log_level = UTIL_LOG_DEBUG;
}

/* What was said since log_begin (the caller frees it). */
static char *log_end(void)
{
    util_log_level = UTIL_LOG_WARN;
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    char *text = tu_read_file(log_path, NULL);
    unlink(log_path);
    assert_non_null(text);
    return text;
}

/* The driver answers its per-thread variant for a legacy question (or a
 * newer ABI at a version this toolkit knows): our wrapper of the legacy
 * export would forward the caller's arguments to the wrong function, so
 * the driver's answer goes to the caller, said once at debug level; the
 * other (symbol, version, flags) keep their wrappers.  (The once-line is
 * the process's first for the legacy cuLaunchKernel: no other test here
 * passes that export through.) */
static void test_resolver_guard_passes_other_abi(void **state)
{
    (void)state;
    gpa.skew_symbol = "cuLaunchKernel";
    gpa.skew_version = 12000;
    gpa.skew_answer = EXPORT(cuLaunchKernel_ptsz);
    hook_counts_t before = counts();
    log_begin();
    void *first = resolve("cuLaunchKernel", 12000, 0);
    void *again = resolve("cuLaunchKernel", 12000, 0);
    void *ptsz = resolve("cuLaunchKernel", 12000, 2);
    void *older = resolve("cuLaunchKernel", 11000, 0);
    char *text = log_end();
    hook_counts_t after = counts();
    assert_ptr_equal(first, EXPORT(cuLaunchKernel_ptsz));
    assert_ptr_equal(again, EXPORT(cuLaunchKernel_ptsz));
    assert_ptr_equal(ptsz, WRAPPER(cuLaunchKernel_ptsz));  /* flags 2: the export asked */
    assert_ptr_equal(older, WRAPPER(cuLaunchKernel));
    assert_int_equal(after.resolver_passed - before.resolver_passed, 2);
    assert_int_equal(after.resolver_wrapped - before.resolver_wrapped, 2);
    /* Said once for the legacy export whatever the repeats; the per-call
     * debug lines say why each was passed. */
    assert_int_equal(tu_count_lines(text, "is not its export cuLaunchKernel ("), 1);
    assert_int_equal(tu_count_lines(text, "passed through, not intercepted"), 1);
    assert_int_equal(tu_count_lines(text, "-> cuLaunchKernel passed (the driver's answer is not"), 2);
    assert_int_equal(tu_count_lines(text, "-> cuLaunchKernel wrapped"), 1);
    free(text);
}

/* A writer of device memory handed through unwrapped stops paging for the
 * process (page_stop), for good; one that writes nothing does not.  First
 * of the binary's tests: the flag is the process's. */
static void test_resolver_passed_writer_stops_paging(void **state)
{
    (void)state;
    assert_int_equal(page_stopped(), 0);
    gpa.skew_symbol = "cuMemFree";               /* frees: no write */
    gpa.skew_version = 12000;
    gpa.skew_answer = &answers[2];
    assert_ptr_equal(resolve("cuMemFree", 12000, 0), &answers[2]);
    assert_ptr_equal(resolve("cuMemGetInfo", 12000, 0), WRAPPER(cuMemGetInfo_v2));
    assert_int_equal(page_stopped(), 0);
    gpa.skew_symbol = "cuMemcpyHtoDAsync";       /* a copy the driver answers otherwise */
    gpa.skew_answer = &answers[3];
    assert_ptr_equal(resolve("cuMemcpyHtoDAsync", 12000, 0), &answers[3]);
    assert_int_equal(page_stopped(), 1);
    assert_int_equal(hook_base_writes("cuLaunchKernel"), 1);
    assert_int_equal(hook_base_writes("cuMemAllocAsync"), 1);
    assert_int_equal(hook_base_writes("cuMemAllocHost"), 0);
    assert_int_equal(hook_base_writes("cuStreamSynchronize"), 0);
}

/* The driver hands out a function it does not export under the map's name
 * (an export it lacks: its slot keeps the lazy stub), or one unknown to us:
 * passed through, never our wrapper. */
static void test_resolver_guard_unknown_function(void **state)
{
    (void)state;
    driver.slot[HOOK_cuMemAlloc_v2] = NULL;     /* the driver lacks the export */
    hook_real_install(&driver);
    assert_ptr_equal(resolve("cuMemAlloc", 12000, 0), EXPORT(cuMemAlloc_v2));
    gpa.skew_symbol = "cuMemFree";
    gpa.skew_version = 12000;
    gpa.skew_answer = &answers[2];
    assert_ptr_equal(resolve("cuMemFree", 12000, 0), &answers[2]);
    assert_ptr_equal(resolve("cuMemFree", 11000, 0), WRAPPER(cuMemFree_v2));
    /* The 4-argument form is guarded the same way. */
    void *fn = NULL;
    assert_int_equal(cuGetProcAddress("cuMemFree", &fn, 12000, 0), CUDA_SUCCESS);
    assert_ptr_equal(fn, &answers[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_resolver_passed_writer_stops_paging, setup_resolver),
        cmocka_unit_test_setup(test_resolver_variants, setup_resolver),
        cmocka_unit_test_setup(test_resolver_self_lookup, setup_resolver),
        cmocka_unit_test_setup(test_resolver_driver_answers, setup_resolver),
        cmocka_unit_test_setup(test_resolver_version_skew, setup_resolver),
        cmocka_unit_test_setup(test_resolver_guard_passes_other_abi, setup_resolver),
        cmocka_unit_test_setup(test_resolver_guard_unknown_function, setup_resolver),
    };
    return cmocka_run_group_tests_name("intercept_resolver", tests, NULL, NULL);
}

/*
 * test_intercept.c - the hook table and the wrappers, against fake drivers.
 *
 * The test binary links the intercept objects themselves, so its wrappers,
 * resolver and dlsym are libsalus's, and the real-function table can be
 * swapped for fakes (the seam).  Divided into: the hook table and the
 * exported symbols of libsalus.so; the wrappers against fakes (every one
 * reaches exactly its own slot; the counts of each category; threads).  The
 * resolver is test_intercept_resolver.c's; the loader, the dlsym override,
 * the report and child processes are in test_intercept_load.c.
 *
 * Like the wrappers it tests, it includes cuda.h with
 * __CUDA_API_VERSION_INTERNAL: it calls and fakes exports by their exact names.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "intercept/intercept.h"
#include "nvml/nvhook.h"
#include "lib/testutil.h"

/* ---- fakes of every wrapped export ----------------------------------------
 * fake_<export> counts its calls (atomically: test_thread_counts calls from
 * several threads) and answers FAKE_RC + its id, so a test can
 * tell which slot a wrapper reached, or CUDA_SUCCESS while fake_succeed. */
#define FAKE_RC 1000
static int fake_called[HOOK_COUNT];
static int fake_succeed;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#define FAKE_(cat, export, ...)                                              \
    static CUresult CUDAAPI fake_##export CU_PARAMS_##export                 \
    {                                                                        \
        __atomic_fetch_add(&fake_called[HOOK_##export], 1, __ATOMIC_RELAXED); \
        return fake_succeed ? CUDA_SUCCESS : (CUresult)(FAKE_RC + HOOK_##export); \
    }
HOOK_LIST(FAKE_)
#pragma GCC diagnostic pop

#define FAKE_SLOT_(cat, export, ...) .f_##export = fake_##export,
static const hook_real_t fakes = { .fn = { HOOK_LIST(FAKE_SLOT_) } };

/* call_<export>(): the wrapper called with every argument zero.  DECLS turns
 * a CU_PARAMS_ list "(T0 a0, T1 a1)" into "T0 a0 = {0}; T1 a1 = {0};";
 * WHEN_ARGS_ drops it for a "(void)" list (whose CU_ARGS_ is "()"). */
#define CAT_(a, b) CAT2_(a, b)
#define CAT2_(a, b) a##b
#define WHEN_ARGS_(...) CAT_(WHEN_, __VA_OPT__(1))
#define WHEN_(x)
#define WHEN_1(x) x
#define DECL1_(p) p = {0};
#define NARGS_(...) NARGS_N_(__VA_ARGS__, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define NARGS_N_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, n, ...) n
#define DECLS(...) CAT_(DECLS_, NARGS_(__VA_ARGS__))(__VA_ARGS__)
#define DECLS_1(p) DECL1_(p)
#define DECLS_2(p, ...) DECL1_(p) DECLS_1(__VA_ARGS__)
#define DECLS_3(p, ...) DECL1_(p) DECLS_2(__VA_ARGS__)
#define DECLS_4(p, ...) DECL1_(p) DECLS_3(__VA_ARGS__)
#define DECLS_5(p, ...) DECL1_(p) DECLS_4(__VA_ARGS__)
#define DECLS_6(p, ...) DECL1_(p) DECLS_5(__VA_ARGS__)
#define DECLS_7(p, ...) DECL1_(p) DECLS_6(__VA_ARGS__)
#define DECLS_8(p, ...) DECL1_(p) DECLS_7(__VA_ARGS__)
#define DECLS_9(p, ...) DECL1_(p) DECLS_8(__VA_ARGS__)
#define DECLS_10(p, ...) DECL1_(p) DECLS_9(__VA_ARGS__)
#define DECLS_11(p, ...) DECL1_(p) DECLS_10(__VA_ARGS__)
#define DECLS_12(p, ...) DECL1_(p) DECLS_11(__VA_ARGS__)
#define CALL_DECLS_(args, params) WHEN_ARGS_ args (DECLS params)
#define CALL_(cat, export, ...)                                              \
    static CUresult call_##export(void)                                      \
    {                                                                        \
        CALL_DECLS_(CU_ARGS_##export, CU_PARAMS_##export)                    \
        return export CU_ARGS_##export;                                      \
    }
HOOK_LIST(CALL_)

#define CALL_SLOT_(cat, export, ...) call_##export,
static CUresult (*const calls[HOOK_COUNT])(void) = { HOOK_LIST(CALL_SLOT_) };

static int setup_fakes(void **state)
{
    (void)state;
    memset(fake_called, 0, sizeof fake_called);
    hook_real_install(&fakes);
    return 0;
}

static hook_counts_t counts(void)
{
    hook_counts_t c;
    hook_counts_snapshot(&c);
    return c;
}

/* ---- the hook table --------------------------------------------------------- */

typedef struct { const char *base, *export_name; int version, pt; } map_row_t;
#define MAP_ROW_(base, version, pt, export) { #base, #export, version, pt },
static const map_row_t map_rows[] = { CU_PROCMAP(MAP_ROW_) };
#define N_MAP (sizeof map_rows / sizeof map_rows[0])

static const map_row_t *map_find(const char *export_name)
{
    for (size_t i = 0; i < N_MAP; i++)
        if (strcmp(map_rows[i].export_name, export_name) == 0)
            return &map_rows[i];
    return NULL;
}

static void test_table_matches_the_map(void **state)
{
    (void)state;
    for (int i = 0; i < HOOK_COUNT; i++) {
        const map_row_t *row = map_find(hook_names[i]);
        assert_non_null(row);
        assert_string_equal(row->base, hook_bases[i]);
        assert_int_equal(row->version, hook_versions[i]);
        assert_int_equal(row->pt, hook_per_thread[i]);
        assert_int_equal(hook_find(hook_names[i]), i);
        assert_non_null(hook_wrappers[i]);
        assert_true((int)hook_categories[i] < HOOK_CAT_COUNT);
        if (i > 0)
            assert_true(strcmp(hook_names[i - 1], hook_names[i]) < 0);
        for (int j = 0; j < i; j++)
            assert_ptr_not_equal(hook_wrappers[i], hook_wrappers[j]);
    }
    assert_int_equal(hook_find("cuMemAlloc"), -1);
    assert_int_equal(hook_find(""), -1);
    assert_int_equal(hook_find("zz"), -1);
    assert_int_equal(hook_find("cuLaunchKernel_"), -1);
}

/* Every launch, copy, memset, stream write and allocation of the driver
 * (hook_base_writes, what the resolver stops paging for when it hands one
 * through), in the form this toolkit's headers call (the newest version of
 * its base, legacy and per-thread), is wrapped: copies, memsets and stream
 * writes as GPU work (COPY, or SYNC where the host waits), launches as
 * LAUNCH (or SYNC: a host function), allocations as ALLOC or MEMOP.  Paging
 * must see each, and none may run while memory is out (the vmem issue's
 * writers libsalus did not see: batched, peer and array copies,
 * synchronous 2D memsets, stream writes). */
static int wrapped_as_it_should(const char *base, hook_category_t cat)
{
    if (strncmp(base, "cuMemAlloc", 10) == 0 || strcmp(base, "cuMemCreate") == 0)
        return cat == HOOK_CAT_ALLOC || cat == HOOK_CAT_MEMOP;
    if (strncmp(base, "cuLaunch", 8) == 0 || strncmp(base, "cuGraphLaunch", 13) == 0)
        return cat == HOOK_CAT_LAUNCH || cat == HOOK_CAT_SYNC;
    return cat == HOOK_CAT_COPY || cat == HOOK_CAT_SYNC;
}

static void test_every_writer_is_gated(void **state)
{
    (void)state;
    int checked = 0;
    for (size_t i = 0; i < N_MAP; i++) {
        const map_row_t *r = &map_rows[i];
        if (!hook_base_writes(r->base))
            continue;
        int newest = 1;
        for (size_t j = 0; j < N_MAP; j++)
            if (strcmp(map_rows[j].base, r->base) == 0 && map_rows[j].pt == r->pt &&
                map_rows[j].version > r->version)
                newest = 0;
        if (!newest)
            continue;
        int id = hook_find(r->export_name);
        if (id < 0 || !wrapped_as_it_should(r->base, hook_categories[id]))
            fail_msg("%s launches, writes or allocates device memory and is not wrapped as "
                     "such", r->export_name);
        checked++;
    }
    assert_true(checked >= 90);                  /* the map has them all */
}

/* What design.md says must be wrapped is, and a listed legacy export's
 * per-thread twin is listed too. */
static void test_table_covers_the_categories(void **state)
{
    (void)state;
    static const struct { const char *name; hook_category_t cat; } must[] = {
        { "cuLaunchKernel", HOOK_CAT_LAUNCH }, { "cuLaunchKernelEx", HOOK_CAT_LAUNCH },
        { "cuLaunchCooperativeKernel", HOOK_CAT_LAUNCH }, { "cuGraphLaunch", HOOK_CAT_LAUNCH },
        { "cuStreamSynchronize", HOOK_CAT_SYNC }, { "cuCtxSynchronize", HOOK_CAT_SYNC },
        { "cuEventSynchronize", HOOK_CAT_SYNC }, { "cuMemcpyDtoH_v2", HOOK_CAT_SYNC },
        { "cuMemcpy", HOOK_CAT_SYNC }, { "cuMemcpy_ptds", HOOK_CAT_SYNC },
        { "cuMemAlloc_v2", HOOK_CAT_ALLOC }, { "cuMemAllocPitch_v2", HOOK_CAT_ALLOC },
        { "cuMemAllocManaged", HOOK_CAT_ALLOC }, { "cuMemAllocAsync", HOOK_CAT_MEMOP },
        { "cuMemAllocFromPoolAsync", HOOK_CAT_MEMOP }, { "cuMemCreate", HOOK_CAT_ALLOC },
        { "cuMemMap", HOOK_CAT_MEMOP }, { "cuMemUnmap", HOOK_CAT_MEMOP },
        { "cuMemPoolTrimTo", HOOK_CAT_MEMOP }, { "cuDeviceSetMemPool", HOOK_CAT_MEMOP },
        { "cuArrayCreate_v2", HOOK_CAT_ALLOC }, { "cuArray3DCreate_v2", HOOK_CAT_ALLOC },
        { "cuMemFree_v2", HOOK_CAT_FREE }, { "cuMemFreeAsync", HOOK_CAT_FREE },
        { "cuMemRelease", HOOK_CAT_FREE }, { "cuArrayDestroy", HOOK_CAT_FREE },
        { "cuMemGetInfo_v2", HOOK_CAT_INFO }, { "cuDeviceTotalMem_v2", HOOK_CAT_INFO },
        { "cuInit", HOOK_CAT_LIFE }, { "cuDevicePrimaryCtxRetain", HOOK_CAT_LIFE },
        { "cuDevicePrimaryCtxRelease_v2", HOOK_CAT_LIFE }, { "cuCtxCreate_v2", HOOK_CAT_LIFE },
        { "cuCtxCreate_v3", HOOK_CAT_LIFE }, { "cuCtxDestroy_v2", HOOK_CAT_LIFE },
        { "cuStreamBeginCapture_v2", HOOK_CAT_CAPTURE },
        { "cuStreamBeginCapture_v2_ptsz", HOOK_CAT_CAPTURE },
        { "cuStreamEndCapture", HOOK_CAT_CAPTURE }, { "cuStreamEndCapture_ptsz", HOOK_CAT_CAPTURE },
        { "cuThreadExchangeStreamCaptureMode", HOOK_CAT_CAPTURE },
        { "cuGetProcAddress", HOOK_CAT_RESOLVE }, { "cuGetProcAddress_v2", HOOK_CAT_RESOLVE },
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++) {
        int id = hook_find(must[i].name);
        if (id < 0)
            fail_msg("%s is not wrapped", must[i].name);
        assert_int_equal(hook_categories[id], must[i].cat);
    }
    for (int i = 0; i < HOOK_COUNT; i++) {
        for (size_t r = 0; r < N_MAP && !hook_per_thread[i]; r++) {
            size_t n = strlen(hook_names[i]);
            const char *e = map_rows[r].export_name;
            if (map_rows[r].pt && strncmp(e, hook_names[i], n) == 0 &&
                (strcmp(e + n, "_ptsz") == 0 || strcmp(e + n, "_ptds") == 0) &&
                hook_find(e) < 0)
                fail_msg("%s is wrapped but not its per-thread form %s", hook_names[i], e);
        }
    }
}

/* libsalus.so exports the list, NVML's list (nvml.list), dlsym and salus_*
 * functions: nothing else. */
static void test_exported_symbols(void **state)
{
    (void)state;
    char lib[512], cmd[600], line[256];
    tu_build_path("libsalus.so", lib, sizeof lib);
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>/dev/null", lib);
    FILE *p = popen(cmd, "r");
    if (!p)
        skip();
    int seen[HOOK_COUNT] = { 0 }, seen_nvml[NVH_IDS] = { 0 }, total = 0, has_dlsym = 0;
    while (fgets(line, sizeof line, p)) {
        char addr[64], type[8], name[200];
        if (sscanf(line, "%63s %7s %199s", addr, type, name) != 3)
            continue;
        total++;
        int id = hook_find(name), nv = nvh_find(name);
        if (id >= 0)
            seen[id]++;
        else if (nv >= 0)
            seen_nvml[nv]++;
        else if (strcmp(name, "dlsym") == 0)
            has_dlsym = 1;
        else if (strncmp(name, "salus_", 6) != 0)
            fail_msg("libsalus.so exports %s, which is neither wrapped nor salus_*", name);
    }
    if (pclose(p) != 0 && total == 0)
        skip();   /* no nm here */
    assert_true(has_dlsym);
    for (int i = 0; i < HOOK_COUNT; i++)
        if (seen[i] != 1)
            fail_msg("libsalus.so does not export %s", hook_names[i]);
    for (int i = 0; i < NVH_IDS; i++)
        if (seen_nvml[i] != 1)
            fail_msg("libsalus.so does not export %s", nvh_names[i]);
}

/* ---- the wrappers ----------------------------------------------------------- */

static void test_every_wrapper_reaches_its_own_slot(void **state)
{
    (void)state;
    for (int i = 0; i < HOOK_COUNT; i++) {
        if (hook_categories[i] == HOOK_CAT_RESOLVE)
            continue;   /* the resolver has its own (test_intercept_resolver.c) */
        memset(fake_called, 0, sizeof fake_called);
        hook_counts_t before = counts();
        uint64_t work = hook_work_released();
        CUresult rc = calls[i]();
        hook_counts_t after = counts();
        /* What can write device memory counts as work let through, once,
         * and nothing else does (memory's never-written allocations). */
        int is_work = hook_categories[i] == HOOK_CAT_LAUNCH ||
                      hook_categories[i] == HOOK_CAT_COPY || hook_categories[i] == HOOK_CAT_SYNC;
        if (hook_work_released() - work != (uint64_t)is_work)
            fail_msg("%s counted %llu work calls, not %d", hook_names[i],
                     (unsigned long long)(hook_work_released() - work), is_work);
        if ((int)rc != FAKE_RC + i)
            fail_msg("%s returned %d, not its slot's %d", hook_names[i], (int)rc, FAKE_RC + i);
        for (int j = 0; j < HOOK_COUNT; j++)
            if (fake_called[j] != (j == i))
                fail_msg("%s reached the slot of %s", hook_names[i], hook_names[j]);
        assert_int_equal(after.calls[i] - before.calls[i], 1);
        assert_int_equal(after.launches - before.launches, hook_categories[i] == HOOK_CAT_LAUNCH);
        /* The driver failed: nothing was allocated or freed. */
        assert_int_equal(after.allocs, before.allocs);
        assert_int_equal(after.frees, before.frees);
    }
}

static struct {
    CUfunction f;
    unsigned g[3], b[3], shared;
    CUstream stream;
    void **params, **extra;
} launch_seen;

static CUresult CUDAAPI fake_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    CUstream stream, void **params, void **extra)
{
    launch_seen.f = f;
    launch_seen.g[0] = gx, launch_seen.g[1] = gy, launch_seen.g[2] = gz;
    launch_seen.b[0] = bx, launch_seen.b[1] = by, launch_seen.b[2] = bz;
    launch_seen.shared = shared;
    launch_seen.stream = stream;
    launch_seen.params = params;
    launch_seen.extra = extra;
    return CUDA_SUCCESS;
}

/* All eleven arguments, five of them on the stack, arrive unchanged. */
static void test_launch_passes_every_argument(void **state)
{
    (void)state;
    hook_real_t t = fakes;
    t.fn.f_cuLaunchKernel = fake_launch;
    t.fn.f_cuLaunchKernel_ptsz = fake_launch;
    hook_real_install(&t);
    void *params[1], *extra[1];
    hook_counts_t before = counts();
    for (int pt = 0; pt < 2; pt++) {
        memset(&launch_seen, 0, sizeof launch_seen);
        CUresult rc = (pt ? cuLaunchKernel_ptsz : cuLaunchKernel)(
            (CUfunction)0x1234, 2, 3, 4, 5, 6, 7, 8, (CUstream)0x5678, params, extra);
        assert_int_equal(rc, CUDA_SUCCESS);
        assert_ptr_equal(launch_seen.f, (CUfunction)0x1234);
        assert_int_equal(launch_seen.g[0], 2);
        assert_int_equal(launch_seen.g[2], 4);
        assert_int_equal(launch_seen.b[0], 5);
        assert_int_equal(launch_seen.b[2], 7);
        assert_int_equal(launch_seen.shared, 8);
        assert_ptr_equal(launch_seen.stream, (CUstream)0x5678);
        assert_ptr_equal(launch_seen.params, params);
        assert_ptr_equal(launch_seen.extra, extra);
    }
    hook_counts_t after = counts();
    assert_int_equal(after.launches - before.launches, 2);
    assert_int_equal(after.calls[HOOK_cuLaunchKernel_ptsz] - before.calls[HOOK_cuLaunchKernel_ptsz], 1);
}

static CUresult CUDAAPI fake_alloc(CUdeviceptr *p, size_t size)
{
    if (size > (1u << 30))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *p = 0x7000;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_pitch(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned e)
{
    (void)e;
    *p = 0x8000;
    *pitch = (w + 511) & ~(size_t)511;
    (void)h;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_array(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d)
{
    (void)d;
    *a = (CUarray)0x9000;
    return CUDA_SUCCESS;
}

static CUresult CUDAAPI fake_free(CUdeviceptr p)
{
    return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static void test_memory_counts(void **state)
{
    (void)state;
    hook_real_t t = fakes;
    t.fn.f_cuMemAlloc_v2 = fake_alloc;
    t.fn.f_cuMemAllocPitch_v2 = fake_pitch;
    t.fn.f_cuArrayCreate_v2 = fake_array;
    t.fn.f_cuMemFree_v2 = fake_free;
    hook_real_install(&t);
    hook_counts_t before = counts();
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUarray a = NULL;
    assert_int_equal(cuMemAlloc_v2(&p, 3000), CUDA_SUCCESS);
    assert_int_equal(p, 0x7000);
    assert_int_equal(cuMemAlloc_v2(&p, 2ull << 30), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(cuMemAllocPitch_v2(&p, &pitch, 100, 10, 4), CUDA_SUCCESS);
    CUDA_ARRAY_DESCRIPTOR d = { .Width = 64, .Height = 8, .Format = CU_AD_FORMAT_HALF,
                                .NumChannels = 2 };
    assert_int_equal(cuArrayCreate_v2(&a, &d), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(p), CUDA_SUCCESS);
    assert_int_equal(cuMemFree_v2(0), CUDA_ERROR_INVALID_VALUE);
    hook_counts_t after = counts();
    assert_int_equal(after.allocs - before.allocs, 3);
    assert_int_equal(after.bytes_allocated - before.bytes_allocated,
                     3000 + 100 * 10 + 64 * 8 * 2 * 2);
    assert_int_equal(after.frees - before.frees, 1);
    assert_int_equal(after.calls[HOOK_cuMemAlloc_v2] - before.calls[HOOK_cuMemAlloc_v2], 2);
}

/* Every wait of the host for the GPU (fake_succeed: the driver's answer). */
static void sync_calls(int succeed)
{
    CUDA_MEMCPY2D to_device = { .dstMemoryType = CU_MEMORYTYPE_DEVICE };
    CUDA_MEMCPY2D to_host = { .dstMemoryType = CU_MEMORYTYPE_HOST };
    CUDA_MEMCPY3D to_unified = { .dstMemoryType = CU_MEMORYTYPE_UNIFIED };
    char buf[8];
    fake_succeed = succeed;
    cuStreamSynchronize(NULL);
    cuStreamSynchronize_ptsz(NULL);
    cuCtxSynchronize();
    cuEventSynchronize(NULL);
    cuMemcpyDtoH_v2(buf, 0, sizeof buf);
    cuMemcpy2D_v2(&to_device);      /* not a wait */
    cuMemcpy2D_v2(&to_host);
    cuMemcpy2D_v2(NULL);            /* not a wait; no crash */
    cuMemcpy3D_v2_ptds(&to_unified);
    fake_succeed = 0;
}

static void test_sync_counts(void **state)
{
    (void)state;
    /* The fakes fail: no wait succeeded, none is counted. */
    hook_counts_t before = counts();
    sync_calls(0);
    hook_counts_t after = counts();
    assert_int_equal(after.syncs - before.syncs, 0);
    assert_int_equal(after.calls[HOOK_cuMemcpy2D_v2] - before.calls[HOOK_cuMemcpy2D_v2], 3);
    /* They succeed: the 7 waits are counted. */
    before = after;
    sync_calls(1);
    after = counts();
    assert_int_equal(after.syncs - before.syncs, 7);
    assert_int_equal(after.launches, before.launches);
}

/* Stream capture: a capture counts from a BEGIN that succeeded to an END
 * that ended it (with a graph or invalidated); other answers change
 * nothing, and the count never goes below zero.  While one is in progress,
 * a launch on the gated path (every launch here: the scheduler is dormant
 * over fakes) asks the driver whether its stream captures, never for the
 * legacy stream; with none in progress it asks nothing. */
static CUresult end_rc;
static CUresult CUDAAPI end_fake(CUstream s, CUgraph *g)
{
    (void)s;
    *g = NULL;
    return end_rc;
}

static void test_capture_counts(void **state)
{
    (void)state;
    hook_real_t t = fakes;
    t.fn.f_cuStreamEndCapture = end_fake;
    hook_real_install(&t);
    CUstream s = (CUstream)(uintptr_t)0x5000;
    CUgraph g;
    int base = sched_captures();
    assert_int_equal(base, 0);                      /* nothing else here captures */
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL),
                     FAKE_RC + HOOK_cuStreamBeginCapture_v2);
    assert_int_equal(sched_captures(), base);
    fake_succeed = 1;
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture_ptsz(s), CUDA_SUCCESS);
    assert_int_equal(sched_captures(), base + 2);
    end_rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    assert_int_equal(cuStreamEndCapture(s, &g), end_rc);
    assert_int_equal(sched_captures(), base + 2);
    end_rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    assert_int_equal(cuStreamEndCapture(s, &g), end_rc);
    assert_int_equal(sched_captures(), base + 1);

    memset(fake_called, 0, sizeof fake_called);
    assert_int_equal(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(fake_called[HOOK_cuStreamIsCapturing], 1);
    assert_int_equal(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(cuGraphLaunch(NULL, CU_STREAM_LEGACY), CUDA_SUCCESS);
    assert_int_equal(fake_called[HOOK_cuStreamIsCapturing], 1);
    assert_int_equal(cuLaunchKernel_ptsz(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(fake_called[HOOK_cuStreamIsCapturing_ptsz], 1);
    assert_int_equal(fake_called[HOOK_cuLaunchKernel] + fake_called[HOOK_cuLaunchKernel_ptsz] +
                     fake_called[HOOK_cuGraphLaunch], 4);

    end_rc = CUDA_SUCCESS;
    assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    assert_int_equal(sched_captures(), base);
    assert_int_equal(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL), CUDA_SUCCESS);
    assert_int_equal(fake_called[HOOK_cuStreamIsCapturing], 1);
    assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    assert_int_equal(sched_captures(), 0);
    fake_succeed = 0;
}

/* A driver without the export: the wrapper answers CUDA_ERROR_NOT_FOUND. */
static void test_missing_export(void **state)
{
    (void)state;
    hook_real_t t = fakes;
    t.fn.f_cuLaunchKernelEx = NULL;
    hook_real_install(&t);
    assert_int_equal(cuLaunchKernelEx(NULL, NULL, NULL, NULL), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(cuLaunchKernelEx_ptsz(NULL, NULL, NULL, NULL), FAKE_RC + HOOK_cuLaunchKernelEx_ptsz);
}

/* Threads register on their first launch; their counts outlive them. */
enum { N_THREADS = 4, N_PER_THREAD = 1000 };
static pthread_barrier_t launched, checked;
static void *launcher(void *arg)
{
    (void)arg;
    for (int i = 0; i < N_PER_THREAD; i++)
        cuGraphLaunch_ptsz(NULL, NULL);
    pthread_barrier_wait(&launched);
    pthread_barrier_wait(&checked);
    return NULL;
}

static void test_thread_counts(void **state)
{
    (void)state;
    pthread_t t[N_THREADS];
    pthread_barrier_init(&launched, NULL, N_THREADS + 1);
    pthread_barrier_init(&checked, NULL, N_THREADS + 1);
    hook_counts_t before = counts();
    for (int i = 0; i < N_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, launcher, NULL), 0);
    pthread_barrier_wait(&launched);
    hook_counts_t running = counts();      /* their blocks are live */
    pthread_barrier_wait(&checked);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(t[i], NULL);
    hook_counts_t after = counts();        /* folded at exit */
    assert_int_equal(running.launches - before.launches, N_THREADS * N_PER_THREAD);
    assert_int_equal(after.launches - before.launches, N_THREADS * N_PER_THREAD);
    assert_int_equal(fake_called[HOOK_cuGraphLaunch_ptsz], N_THREADS * N_PER_THREAD);
    pthread_barrier_destroy(&launched);
    pthread_barrier_destroy(&checked);
}

/* A sync's token: what every thread launched since the previous fold, once.
 * Threads that launched before a fold and then stay quiet are not in the
 * next (the fold walks only the threads that launched since: a sync's cost
 * does not grow with threads that are merely alive); a thread that launches
 * again is, and so are the launches of threads that exited meanwhile. */
enum { FOLD_THREADS = 32, FOLD_EACH = 3 };
static pthread_barrier_t fold_go, fold_done;
static int fold_again = -1;               /* the thread that launches twice more */
static void *fold_launcher(void *arg)
{
    int me = (int)(intptr_t)arg;
    CUfunction f = (CUfunction)(uintptr_t)(0x1000 + 0x40 * me);
    for (int i = 0; i < FOLD_EACH; i++)
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    pthread_barrier_wait(&fold_go);       /* the main thread folds */
    pthread_barrier_wait(&fold_go);       /* ... and folds again */
    if (me == fold_again) {
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    }
    pthread_barrier_wait(&fold_done);
    pthread_barrier_wait(&fold_done);     /* then they exit */
    return NULL;
}

static void *launcher_once(void *arg)
{
    (void)arg;
    for (int i = 0; i < 5; i++)
        cuLaunchKernel((CUfunction)(uintptr_t)0x77, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    return NULL;
}

static void test_sync_folds_active_threads(void **state)
{
    (void)state;
    pthread_t t[FOLD_THREADS];
    hook_threads_fold();                  /* what earlier tests launched */
    pthread_barrier_init(&fold_go, NULL, FOLD_THREADS + 1);
    pthread_barrier_init(&fold_done, NULL, FOLD_THREADS + 1);
    fold_again = 7;
    for (int i = 0; i < FOLD_THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, fold_launcher, (void *)(intptr_t)i), 0);
    pthread_barrier_wait(&fold_go);
    sched_token_t first = hook_threads_fold();
    assert_int_equal(first.launches, FOLD_THREADS * FOLD_EACH);
    uint64_t hash = 0;
    for (int i = 0; i < FOLD_THREADS; i++)
        hash += FOLD_EACH * sched_mix(0x1000 + 0x40 * (uint64_t)i);
    assert_true(first.hash == hash);
    assert_int_equal(hook_threads_fold().launches, 0);     /* nobody launched since */
    pthread_barrier_wait(&fold_go);
    pthread_barrier_wait(&fold_done);
    sched_token_t again = hook_threads_fold();
    assert_int_equal(again.launches, 2);
    assert_true(again.hash == 2 * sched_mix(0x1000 + 0x40 * 7));
    pthread_barrier_wait(&fold_done);
    for (int i = 0; i < FOLD_THREADS; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(hook_threads_fold().launches, 0);     /* exits add nothing unseen */
    pthread_t quick;                      /* launches, exits, and only then a fold */
    assert_int_equal(pthread_create(&quick, NULL, launcher_once, NULL), 0);
    pthread_join(quick, NULL);
    assert_int_equal(hook_threads_fold().launches, 5);
    pthread_barrier_destroy(&fold_go);
    pthread_barrier_destroy(&fold_done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_the_map),
        cmocka_unit_test(test_table_covers_the_categories),
        cmocka_unit_test(test_every_writer_is_gated),
        cmocka_unit_test(test_exported_symbols),
        cmocka_unit_test_setup(test_every_wrapper_reaches_its_own_slot, setup_fakes),
        cmocka_unit_test_setup(test_launch_passes_every_argument, setup_fakes),
        cmocka_unit_test_setup(test_memory_counts, setup_fakes),
        cmocka_unit_test_setup(test_sync_counts, setup_fakes),
        cmocka_unit_test_setup(test_missing_export, setup_fakes),
        cmocka_unit_test_setup(test_capture_counts, setup_fakes),
        cmocka_unit_test_setup(test_thread_counts, setup_fakes),
        cmocka_unit_test_setup(test_sync_folds_active_threads, setup_fakes),
    };
    return cmocka_run_group_tests_name("intercept", tests, NULL, NULL);
}

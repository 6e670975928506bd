/*
 * wl_mem.c - device buffers of the workloads over each driver allocation
 * path, so that tests of memory accounting can drive every one of them:
 *
 *   alloc    cuMemAlloc_v2                          freed by cuMemFree_v2
 *   pitch    cuMemAllocPitch_v2 (rows of 1 MiB)     cuMemFree_v2
 *   managed  cuMemAllocManaged                      cuMemFree_v2
 *   async    cuMemAllocAsync on the work stream     cuMemFreeAsync
 *   vmm      cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess
 *                                                   cuMemUnmap + cuMemAddressFree + cuMemRelease
 *   array    cuArrayCreate_v2 (2D, float4 texels)   cuArrayDestroy
 *
 * Divided into: one allocation per path; the OOM policy around it; free;
 * the end of a run.
 * A buffer records what it holds (wl_buf_t), and a failed allocation
 * leaves nothing behind.
 */
#include "wl.h"

#include <string.h>
#include <unistd.h>

#define PITCH_ROW    (1024ull * 1024)   /* bytes per row of a pitched buffer */
#define ARRAY_TEXEL  16ull              /* CU_AD_FORMAT_FLOAT x 4 channels */
#define ARRAY_WIDTH  16384ull           /* texels per row: within every GPU's 2D limit */
#define ARRAY_HEIGHT 65536ull           /* rows: the 2D height limit of current GPUs */
#define OOM_RETRY_NS (10ull * 1000 * 1000)

/* ---- one allocation per path -------------------------------------------- */

static int alloc_pitch(wl_buf_t *b, const char *what)
{
    size_t width = b->size < PITCH_ROW ? (size_t)b->size : PITCH_ROW;
    size_t height = (size_t)((b->size + width - 1) / width), pitch = 0;
    int rc = wl_cu(cuMemAllocPitch(&b->ptr, &pitch, width, height, 16),
                   "cuMemAllocPitch_v2(%s: %zu x %zu)", what, width, height);
    if (!rc)
        b->span = pitch * height;
    return rc;
}

static int alloc_vmm(wl_gpu_t *g, wl_buf_t *b, const char *what)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = g->dev;
    size_t gran = 0;
    int rc = wl_cu(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   "cuMemGetAllocationGranularity");
    if (rc)
        return rc;
    if (!gran)
        gran = 2u << 20;
    size_t span = (size_t)((b->size + gran - 1) / gran * gran);
    if ((rc = wl_cu(cuMemCreate(&b->handle, span, &prop, 0), "cuMemCreate(%s)", what)))
        return rc;
    if ((rc = wl_cu(cuMemAddressReserve(&b->ptr, span, 0, 0, 0), "cuMemAddressReserve(%s)", what)))
        goto out_release;
    if ((rc = wl_cu(cuMemMap(b->ptr, span, 0, b->handle, 0), "cuMemMap(%s)", what)))
        goto out_free_address;
    CUmemAccessDesc access = { .location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    if ((rc = wl_cu(cuMemSetAccess(b->ptr, span, &access, 1), "cuMemSetAccess(%s)", what)))
        goto out_unmap;
    b->span = span;
    return WL_OK;
    /* The first failure is the one recorded; these are checked all the same. */
out_unmap:
    wl_cu(cuMemUnmap(b->ptr, span), "cuMemUnmap");
out_free_address:
    wl_cu(cuMemAddressFree(b->ptr, span), "cuMemAddressFree");
out_release:
    wl_cu(cuMemRelease(b->handle), "cuMemRelease");
    b->ptr = 0;
    b->handle = 0;
    return rc;
}

static int alloc_array(wl_buf_t *b, const char *what)
{
    uint64_t texels = (b->size + ARRAY_TEXEL - 1) / ARRAY_TEXEL;
    uint64_t width = texels < ARRAY_WIDTH ? texels : ARRAY_WIDTH;
    uint64_t height = (texels + width - 1) / width;
    if (height > ARRAY_HEIGHT) {
        char sz[32];
        return wl_errorf(WL_EUSAGE, "--alloc array: %s of %s is more than one 2D array holds "
                         "(%llu rows of %llu bytes)", what, wl_fmt_size(b->size, sz, sizeof sz),
                         ARRAY_HEIGHT, ARRAY_WIDTH * ARRAY_TEXEL);
    }
    CUDA_ARRAY_DESCRIPTOR desc = { .Width = (size_t)width, .Height = (size_t)height,
                                   .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4 };
    int rc = wl_cu(cuArrayCreate(&b->array, &desc), "cuArrayCreate_v2(%s: %llu x %llu float4)",
                   what, (unsigned long long)width, (unsigned long long)height);
    if (!rc)
        b->span = (size_t)(width * height * ARRAY_TEXEL);
    return rc;
}

static int alloc_once(wl_gpu_t *g, wl_buf_t *b, const char *what)
{
    switch (b->kind) {
    case WL_ALLOC_PITCH:
        return alloc_pitch(b, what);
    case WL_ALLOC_MANAGED:
        return wl_cu(cuMemAllocManaged(&b->ptr, b->size, CU_MEM_ATTACH_GLOBAL),
                     "cuMemAllocManaged(%s)", what);
    case WL_ALLOC_ASYNC:
        return wl_cu(g->api.mem_alloc_async(&b->ptr, b->size, g->stream), "cuMemAllocAsync%s(%s)",
                     g->stream_kind == WL_STREAM_PER_THREAD ? "_ptsz" : "", what);
    case WL_ALLOC_VMM:
        return alloc_vmm(g, b, what);
    case WL_ALLOC_ARRAY:
        return alloc_array(b, what);
    default:
        return wl_cu(cuMemAlloc(&b->ptr, b->size), "cuMemAlloc_v2(%s)", what);
    }
}

/* ---- the OOM policy ----------------------------------------------------- */

int wl_buf_alloc(wl_gpu_t *g, wl_buf_t *b, uint64_t size, const char *what,
                 uint64_t deadline_ns, uint64_t *retries)
{
    memset(b, 0, sizeof *b);
    b->kind = g->alloc_kind;
    if (size == 0)
        return WL_OK;
    char sz[32];
    char label[96];
    snprintf(label, sizeof label, "%s %s", what, wl_fmt_size(size, sz, sizeof sz));
    for (int first = 1;; first = 0) {
        b->size = size;
        int rc = alloc_once(g, b, label);
        if (rc == WL_OK)
            return WL_OK;
        b->size = 0;
        if (!wl_error_is_oom() || g->oom_kind != WL_OOM_RETRY)
            return rc;
        /* Retry: what a framework does after emptying its cache, or a job
         * waiting for a peer to free memory.  The bound is the run's own
         * (--seconds, a signal): there is nothing else to give up for. */
        if (g->verbose && first)
            fprintf(stderr, "%s: %s; retrying every 10 ms\n", g->prog, wl_error());
        uint64_t now = wl_now_ns();
        wl_error_clear();
        if (wl_stop_requested() || (deadline_ns && now >= deadline_ns))
            return WL_ESTOP;
        if (retries)
            (*retries)++;
        uint64_t wake = now + OOM_RETRY_NS;
        if (deadline_ns && wake > deadline_ns)
            wake = deadline_ns;
        wl_sleep_until(wake);
    }
}

/* ---- free --------------------------------------------------------------- */

int wl_buf_free(wl_gpu_t *g, wl_buf_t *b)
{
    if (b->size == 0)
        return WL_OK;
    int rc;
    switch (b->kind) {
    case WL_ALLOC_ASYNC:
        rc = wl_cu(g->api.mem_free_async(b->ptr, g->stream), "cuMemFreeAsync%s",
                   g->stream_kind == WL_STREAM_PER_THREAD ? "_ptsz" : "");
        break;
    case WL_ALLOC_VMM:
        rc = wl_cu(cuMemUnmap(b->ptr, b->span), "cuMemUnmap");
        if (!rc)
            rc = wl_cu(cuMemAddressFree(b->ptr, b->span), "cuMemAddressFree");
        if (!rc)
            rc = wl_cu(cuMemRelease(b->handle), "cuMemRelease");
        break;
    case WL_ALLOC_ARRAY:
        rc = wl_cu(cuArrayDestroy(b->array), "cuArrayDestroy");
        break;
    default:
        rc = wl_cu(cuMemFree(b->ptr), "cuMemFree_v2");
        break;
    }
    memset(b, 0, sizeof *b);
    return rc;
}

/* ---- the end of a run --------------------------------------------------- */

int wl_finish(wl_gpu_t *g, wl_buf_t *const bufs[], int n, uint64_t *end_ns,
              size_t *free_end, int rc)
{
    if (!g->ctx)
        return rc;
    size_t total = 0;
    int r = wl_drain(g);
    rc = rc ? rc : r;
    *end_ns = wl_now_ns();
    for (int i = 0; i < n; i++) {
        r = wl_buf_free(g, bufs[i]);
        rc = rc ? rc : r;
    }
    r = wl_drain(g);
    rc = rc ? rc : r;
    r = wl_gpu_meminfo(g, free_end, &total);
    return rc ? rc : r;
}

void wl_report_mem(const char *prog, size_t start, size_t iter, size_t end, size_t total)
{
    fprintf(stderr, "%s[%d]: free_mem start=%zu iter=%zu end=%zu total=%zu\n",
            prog, (int)getpid(), start, iter, end, total);
}

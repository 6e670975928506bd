/*
 * wrappers.c - the exported wrappers of every export in hooks.list, one macro
 * per category, and the hook table (names, categories, wrapper addresses).
 *
 * Divided into: the helpers the list's expressions call; the category
 * events (where the scheduler and memory admission plug in); the category
 * macros and their expansion over HOOK_LIST.
 *
 * Each wrapper is defined under the export's exact name with its prototype
 * from CU_PARAMS_<export>; __CUDA_API_VERSION_INTERNAL makes cuda.h declare
 * every export under that name, so the compiler checks each definition
 * against the driver's own declaration.  A wrapper counts in its thread's
 * block (no lock, no atomic read-modify-write, no syscall) and calls the real
 * function through hook_real.  No lock here.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include "intercept/intercept.h"

#include <string.h>

/* ---- helpers of the list's expressions ----------------------------------- */

static inline CUstream hook_config_stream(const CUlaunchConfig *config)
{
    return config ? config->hStream : NULL;
}

/* cuLaunchCooperativeKernelMultiDevice (deprecated since CUDA 11.3): one
 * kernel per device of the list; gated as its first, on the first's stream
 * (a process sharing all its devices holds their leases together only in
 * a gang). */
static inline CUfunction hook_multi_fn(const CUDA_LAUNCH_PARAMS *list, unsigned n)
{
    return list && n ? list[0].function : NULL;
}

static inline CUstream hook_multi_stream(const CUDA_LAUNCH_PARAMS *list, unsigned n)
{
    return list && n ? list[0].hStream : NULL;
}

/* A 2D or 3D copy makes the host wait when it writes host memory; with
 * unified addressing the destination may be host memory too. */
#define hook_copy_to_host(desc) \
    ((desc) && ((desc)->dstMemoryType == CU_MEMORYTYPE_HOST || \
                (desc)->dstMemoryType == CU_MEMORYTYPE_UNIFIED))

static uint64_t hook_format_bytes(CUarray_format format)
{
    switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    default: return 4;   /* 32-bit formats; the rest are estimates */
    }
}

/* Bytes an array asks for: width x height x depth elements (0 is 1). */
static uint64_t hook_array_bytes_of(size_t w, size_t h, size_t d, unsigned ch,
                                    CUarray_format format)
{
    return (uint64_t)w * (h ? h : 1) * (d ? d : 1) * (ch ? ch : 1) * hook_format_bytes(format);
}

static uint64_t hook_array_bytes(const CUDA_ARRAY_DESCRIPTOR *d)
{
    return d ? hook_array_bytes_of(d->Width, d->Height, 0, d->NumChannels, d->Format) : 0;
}

static uint64_t hook_array3d_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    return d ? hook_array_bytes_of(d->Width, d->Height, d->Depth, d->NumChannels, d->Format) : 0;
}

/* The device a cuMemCreate takes memory from: the location its properties
 * name, not the current context's.  Host memory (CU_MEM_LOCATION_TYPE_HOST,
 * _HOST_NUMA, _HOST_NUMA_CURRENT) is no device's; an invalid location is
 * left to the driver to refuse. */
static int hook_prop_device(const CUmemAllocationProp *prop)
{
    if (!prop)
        return MEM_DEV_CURRENT;
    switch ((int)prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return prop->location.id >= 0 ? prop->location.id : MEM_DEV_CURRENT;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return MEM_DEV_NONE;
    default:
        return MEM_DEV_CURRENT;
    }
}

/* ---- category events -----------------------------------------------------
 * Each wrapper calls its category's events; these are the places the next
 * modules plug in: the scheduler (launch, sync, life) and memory admission
 * (alloc, free, info, life). */

/* Before work is submitted: the fast path, given the calling thread's block.
 * The scheduler's gate (one relaxed load) follows, in the wrapper's
 * SCHED_SELECT.  Keep the launch path branch-free (see hook_block_t in
 * intercept.h). */
static inline __attribute__((always_inline))
void hook_on_launch(hook_block_t *b, hook_id_t id, const void *work, CUstream stream)
{
    (void)stream;
    hook_add(&b->c.calls[id], 1);
    sched_count(&b->s, work);
}

/* Whether a SYNC row's kind makes the host wait: all but HOSTFN, a host
 * callback enqueued, which is a boundary candidate with no wait (no sync
 * counted, no in-sync mark for a blocked holder, no pool release). */
static inline int hook_sync_blocks(sched_sync_kind_t kind)
{
    return kind != SCHED_SYNC_HOSTFN;
}

/* After the host waited for the GPU, or enqueued a host callback: an
 * iteration boundary candidate.  `syncs` counts the waits that succeeded
 * (a failed one may not have waited). */
static inline void hook_on_sync(hook_block_t *b, sched_sync_kind_t kind, const void *object,
                                CUresult rc)
{
    (void)object;
    int waited = rc == CUDA_SUCCESS && hook_sync_blocks(kind);
    if (waited)
        hook_add(&b->c.syncs, 1);
    sched_sync_end(&b->s, kind, rc == CUDA_SUCCESS, hook_threads_fold);
    if (waited && kind != SCHED_SYNC_COPY) {
        vmem_async_settle();          /* paging's stream-ordered frees the sync passed */
        mem_pools_sync();             /* pools release memory at these */
    }
}

/* Before an allocation reaches the driver: memory admission reserves `size`
 * on `dev` (hooks.list's dev=) here (or refuses it: the driver is not
 * called) ... */
static inline CUresult hook_before_alloc(mem_kind_t kind, int dev, uint64_t size, mem_op_t *op)
{
    return mem_alloc_begin(kind, dev, size, op);
}

/* ... (a refusal by the driver of what the table had room for is tried again
 * a while: mem_alloc_retry) and accounts it after the call, or gives it back
 * if the driver failed. */
static inline CUresult hook_on_alloc(hook_block_t *b, mem_op_t *op, CUresult rc,
                                     uint64_t handle, uint64_t size)
{
    rc = mem_alloc_end(op, rc, handle);
    if (rc == CUDA_SUCCESS) {
        hook_add(&b->c.allocs, 1);
        hook_add(&b->c.bytes_allocated, size);
    }
    return rc;
}

static inline void hook_on_free(hook_block_t *b, mem_op_t *op, CUresult rc)
{
    mem_free_end(op, rc);
    if (rc == CUDA_SUCCESS)
        hook_add(&b->c.frees, 1);
}

/* After the driver answered a memory query: the process's own view. */
static inline void hook_info_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    mem_view_info(free_bytes, total_bytes);
}

static inline void hook_info_cuDeviceTotalMem_v2(size_t *bytes, CUdevice_v1 dev)
{
    mem_view_total(bytes, dev);
}

/* Paging (SALUS_SWAP=on): a virtualized allocation is answered as an
 * ordinary one would be, its own base, size, context and buffer id, where
 * the driver answers with the chunk libsalus mapped under it (memory.h). */
static inline void hook_info_cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size,
                                                     CUdeviceptr ptr)
{
    vmem_range(ptr, base, size);
}

static inline void hook_info_cuPointerGetAttribute(void *data, CUpointer_attribute attr,
                                                   CUdeviceptr ptr)
{
    vmem_attr(data, attr, ptr);
}

static inline void hook_info_cuPointerGetAttributes(unsigned n, CUpointer_attribute *attrs,
                                                    void **data, CUdeviceptr ptr)
{
    for (unsigned i = 0; attrs && data && i < n; i++)
        vmem_attr(data[i], attrs[i], ptr);
}

/* cuMemAlloc_v2 and cuMemAllocPitch_v2 of a process with paging on are
 * served by memory (virtualized), not by the driver: 1 with *rc the answer,
 * or 0 when they go to the driver after all (vmem_alloc's NOT_SUPPORTED). */
static inline int hook_valloc(hook_block_t *b, mem_kind_t kind, CUdeviceptr *out,
                              size_t *pitch, size_t width, size_t height, unsigned elem,
                              CUresult *rc)
{
    if (__builtin_expect(!vmem_on(), 1))
        return 0;
    CUresult r = page_valloc(kind, out, pitch, width, height, elem);
    if (r == CUDA_ERROR_NOT_SUPPORTED)
        return 0;
    if (r == CUDA_SUCCESS) {
        hook_add(&b->c.allocs, 1);
        hook_add(&b->c.bytes_allocated, (uint64_t)width * (height ? height : 1));
    }
    *rc = r;
    return 1;
}

/* Which ALLOC and FREE rows paging serves, by their kind: the positional
 * arguments of cuMemAlloc_v2 (a0 out, a1 size), of cuMemAllocPitch_v2 (a0
 * out, a1 pitch, a2 width, a3 height, a4 element size), of cuMemFree_v2
 * (a0) and of cuMemFreeAsync[_ptsz] (a0, a1 stream; pt: the per-thread
 * form); every other kind goes to the driver. */
#define HOOK_VALLOC_MEM_KIND_DEVICE  hook_valloc(b, MEM_KIND_DEVICE, a0, NULL, a1, 1, 0, &rc)
#define HOOK_VALLOC_MEM_KIND_PITCH   hook_valloc(b, MEM_KIND_PITCH, a0, a1, a2, a3, a4, &rc)
#define HOOK_VALLOC_MEM_KIND_MANAGED 0
#define HOOK_VALLOC_MEM_KIND_ASYNC   0
#define HOOK_VALLOC_MEM_KIND_POOL    0
#define HOOK_VALLOC_MEM_KIND_VMM     0
#define HOOK_VALLOC_MEM_KIND_ARRAY   0
#define HOOK_VFREE_MEM_KIND_DEVICE(pt) (vmem_on() && vmem_free(a0, &rc))
#define HOOK_VFREE_MEM_KIND_ASYNC(pt)  (vmem_on() && hook_vfree_async(a0, a1, pt, &rc))
#define HOOK_VFREE_MEM_KIND_VMM(pt)    0
#define HOOK_VFREE_MEM_KIND_ARRAY(pt)  0

/* Memory admission and the scheduler start when the program initializes
 * the driver, over the real driver's contract (drv.h); both stay dormant
 * over a fake table.  A job is admitted before its context is made
 * (SALUS_MEM_RESERVE); when a context goes away, so do its allocations,
 * unseen. */
static void hook_modules_start(void)
{
    drv_t drv;
    if (hook_real_drv(&drv) != 0)
        return;
    static const sched_hooks_t hooks = { .boundary = mem_iteration_end,
                                         .waiting = page_serve,
                                         .tenure = page_in_before_run,
                                         .paged_out = page_is_out,
                                         .fits = page_in_fits,
                                         .keep = page_keep_locked,
                                         .blocked = page_blocked_locked,
                                         .tick = vmem_keep_tick };
    sched_init(&drv);
    if (drv.device_total_mem && mem_init(&drv, NULL) == 0) {
        page_start();                 /* what memory's waits ask above it */
        vmem_set_work_count(hook_work_released);
        sched_set_hooks(&hooks);
    }
}

/* A context made or retained joins the process to no lease: it joins a
 * device's lease when it first launches on it, so that a process holding
 * contexts on every GPU (JAX) is gated where it works only.  A reserving
 * job is admitted before its context is made, and what the context itself
 * takes is charged where it is, at once (memory.h). */
static int hook_ctx_event(hook_life_kind_t kind)
{
    /* What a context itself takes is charged apart from allocations. */
    static const int8_t ctx_event[] = {
        [HOOK_LIFE_INIT] = -1, [HOOK_LIFE_RETAIN] = MEM_CTX_RETAINED,
        [HOOK_LIFE_RELEASE] = MEM_CTX_RELEASED, [HOOK_LIFE_RESET] = MEM_CTX_RESET,
        [HOOK_LIFE_CREATE] = MEM_CTX_CREATED, [HOOK_LIFE_DESTROY] = MEM_CTX_DESTROYED,
        [HOOK_LIFE_MODULE] = MEM_CTX_MODULE,
    };
    return (unsigned)kind < sizeof ctx_event ? ctx_event[kind] : -1;
}

static inline void hook_mem_before_life(hook_life_kind_t kind, int dev)
{
    int ev = hook_ctx_event(kind);
    if (ev >= 0)
        mem_context_begin((mem_ctx_event_t)ev, dev);
    if (kind == HOOK_LIFE_RELEASE || kind == HOOK_LIFE_RESET || kind == HOOK_LIFE_DESTROY)
        vmem_async_context_ending();   /* paging's events go before their context */
}

static inline void hook_mem_after_life(hook_life_kind_t kind, int dev, CUresult rc)
{
    int ev = hook_ctx_event(kind);
    if (ev >= 0)
        mem_context_end((mem_ctx_event_t)ev, dev, rc);
    if (rc != CUDA_SUCCESS)
        return;
    if (kind == HOOK_LIFE_STREAM || kind == HOOK_LIFE_RELEASE || kind == HOOK_LIFE_RESET ||
        kind == HOOK_LIFE_DESTROY)
        sched_streams_changed();       /* a handle may come back as another device's stream */
    if (kind == HOOK_LIFE_INIT)
        hook_modules_start();
    else if (kind == HOOK_LIFE_RELEASE || kind == HOOK_LIFE_RESET || kind == HOOK_LIFE_DESTROY)
        mem_context_gone(dev);
}

/* Stream capture.  A capture counts from before its begin (the scheduler
 * keeps its drain's synchronizes apart from it, sched.h) until one ends
 * (with its graph, or invalidated: either way the stream no longer
 * captures); a begin that fails is uncounted, other errors change nothing.
 * The thread's interaction mode needs no action: Salus makes no
 * potentially unsafe call while any capture is in progress, whatever the
 * mode (the scheduler's rule, sched.h). */
static inline void hook_before_capture(hook_capture_kind_t kind)
{
    if (kind == HOOK_CAPTURE_BEGIN)
        sched_capture_begin();
}

static inline void hook_on_capture(hook_capture_kind_t kind, CUresult rc)
{
    if ((kind == HOOK_CAPTURE_BEGIN && rc != CUDA_SUCCESS) ||
        (kind == HOOK_CAPTURE_END &&
         (rc == CUDA_SUCCESS || rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)))
        sched_capture_end();
}

/* Whether a launch on `stream` (a per-thread export's when pt) is recorded
 * into a capture rather than submitted: asked of the driver only while the
 * process has a capture in progress, on the gated path.  The legacy stream
 * never captures, and is not asked (the driver refuses that question while
 * a blocking stream captures). */
static int hook_recorded(CUstream stream, int pt)
{
    if (sched_captures() == 0 || (!pt && (stream == NULL || stream == CU_STREAM_LEGACY)))
        return 0;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult rc = pt ? HOOK_REAL(cuStreamIsCapturing_ptsz)(stream, &st)
                     : HOOK_REAL(cuStreamIsCapturing)(stream, &st);
    return rc == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* cuMemFreeAsync of a pointer paging serves: released once its stream has
 * passed the free (memory.h); a free recorded into a capture cannot be
 * ordered so, and memory keeps the allocation. */
static int hook_vfree_async(CUdeviceptr p, CUstream s, int pt, CUresult *rc)
{
    int captured = hook_recorded(s, pt);
    return vmem_free_async(p, pt && s == NULL ? CU_STREAM_PER_THREAD : s, captured, rc);
}

/* A synchronous copy submits GPU work before the host waits for it: it
 * passes the gate as an asynchronous one does (one relaxed load when the
 * gate is fast).  The legacy stream never captures. */
static inline void hook_copy_gate(hook_block_t *b)
{
    if (!SCHED_GATE_FAST(sched_gate_value(&b->s)))
        hook_thread_gated(b, NULL, NULL);
}

/* ---- the wrappers -------------------------------------------------------- */

/* Where a launch goes when the thread's gate is not OPEN (SCHED_SELECT in
 * the launch wrappers, branch-free): a thread's first launch registers it
 * and counts the call in its new block (the fast path counted it in
 * hook_unregistered's, which is discarded); then the scheduler's slow path
 * (register the process, wait for the lease, bookkeeping, rejoin the active
 * list), then the driver.  A launch recorded into a capture submits no work:
 * it goes to the driver without the slow path (no wait for the lease, no
 * max-slice handoff, whose context synchronize would invalidate the
 * capture), and the thread's gate stays as it was, so that its next launch
 * is looked at again. */
#define GATED_(cat, export, ...) GATED_##cat(export, __VA_ARGS__)
#define GATED_LAUNCH(export, base, version, pt, work, stream)                   \
    static __attribute__((noinline, cold)) CUresult CUDAAPI                     \
    hook_gated_##export CU_PARAMS_##export                                      \
    {                                                                           \
        hook_block_t *b = hook_tls;                                             \
        if (b == &hook_unregistered) {                                          \
            b = hook_thread_register();                                         \
            hook_on_launch(b, HOOK_##export, (const void *)(work), NULL);       \
        }                                                                       \
        if (!hook_recorded((CUstream)(stream), pt))                             \
            hook_thread_gated(b, (const void *)(work), (CUstream)(stream));     \
        return HOOK_REAL(export) CU_ARGS_##export;                              \
    }
#define GATED_SYNC(...)
#define GATED_ALLOC(...)
#define GATED_FREE(...)
#define GATED_INFO(...)
#define GATED_LIFE(...)
#define GATED_CAPTURE(...)
#define GATED_MEMOP(...)
#define GATED_RESOLVE(...)
/* A copy or memset's gated path: the same, without the detector's count
 * (copies are not kernels: the launch count and kernel hash are the
 * boundary detector's token, and copies would blur its period). */
#define GATED_COPY(export, base, version, pt, stream)                          \
    static __attribute__((noinline, cold)) CUresult CUDAAPI                     \
    hook_gated_##export CU_PARAMS_##export                                      \
    {                                                                           \
        hook_block_t *b = hook_tls;                                             \
        if (b == &hook_unregistered) {                                          \
            b = hook_thread_register();                                         \
            hook_add(&b->c.calls[HOOK_##export], 1);                            \
        }                                                                       \
        if (!hook_recorded((CUstream)(stream), pt))                             \
            hook_thread_gated(b, NULL, (CUstream)(stream));                     \
        return HOOK_REAL(export) CU_ARGS_##export;                              \
    }
HOOK_LIST(GATED_)

#define HOOK_WRAPPER_(cat, ...) HOOK_WRAP_##cat(__VA_ARGS__)

/* The fast path: the thread's block, count, tail-call the driver, or the
 * gated path when the thread's gate is not OPEN (an unregistered thread's
 * is not). */
#define HOOK_WRAP_LAUNCH(export, base, version, pt, work, stream)                \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_tls;                                             \
        hook_on_launch(b, HOOK_##export, (const void *)(work), (CUstream)(stream)); \
        return SCHED_SELECT(&b->s, HOOK_REAL(export), hook_gated_##export)      \
            CU_ARGS_##export;                                                   \
    }

#define HOOK_WRAP_SYNC(export, base, version, pt, kind, object, when)            \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_enter(HOOK_##export);                            \
        int waits = (when) != 0;                                                \
        if ((kind) == SCHED_SYNC_COPY)                                          \
            hook_copy_gate(b);                                                  \
        if (waits && hook_sync_blocks(kind))                                    \
            sched_sync_begin(&b->s, kind, (const void *)(object));              \
        CUresult rc = HOOK_REAL(export) CU_ARGS_##export;                       \
        if (waits)                                                              \
            hook_on_sync(b, kind, (const void *)(object), rc);                  \
        return rc;                                                              \
    }

#define HOOK_WRAP_ALLOC(export, base, version, pt, kind, out, size, dev)         \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_enter(HOOK_##export);                            \
        uint64_t bytes = (uint64_t)(size);                                      \
        mem_op_t op;                                                            \
        CUresult rc;                                                            \
        if (HOOK_VALLOC_##kind)                                                 \
            return rc;                                                          \
        rc = hook_before_alloc(kind, (int)(dev), bytes, &op);                   \
        if (rc != CUDA_SUCCESS)                                                 \
            return rc;                                                          \
        rc = HOOK_REAL(export) CU_ARGS_##export;                                \
        while (rc == CUDA_ERROR_OUT_OF_MEMORY && mem_alloc_retry(&op))          \
            rc = HOOK_REAL(export) CU_ARGS_##export;                            \
        return hook_on_alloc(b, &op, rc, rc == CUDA_SUCCESS && (out) ?          \
                             (uint64_t)(uintptr_t)*(out) : 0, bytes);           \
    }

#define HOOK_WRAP_FREE(export, base, version, pt, kind, handle)                  \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_enter(HOOK_##export);                            \
        mem_op_t op;                                                            \
        CUresult rc;                                                            \
        if (HOOK_VFREE_##kind(pt)) {                                                \
            hook_add(&b->c.frees, 1);                                           \
            return rc;                                                          \
        }                                                                       \
        mem_free_begin((kind), (uint64_t)(uintptr_t)(handle), &op);             \
        rc = HOOK_REAL(export) CU_ARGS_##export;                                \
        hook_on_free(b, &op, rc);                                               \
        return rc;                                                              \
    }

/* cuMemGetInfo_v2, cuDeviceTotalMem_v2: memory answers the process's own
 * view here (hook_info_<export>). */
#define HOOK_WRAP_INFO(export, base, version, pt)                                \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_enter(HOOK_##export);                                              \
        CUresult rc = HOOK_REAL(export) CU_ARGS_##export;                       \
        if (rc == CUDA_SUCCESS)                                                 \
            hook_info_##export CU_ARGS_##export;                                \
        return rc;                                                              \
    }

#define HOOK_WRAP_LIFE(export, base, version, pt, kind, dev)                     \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_enter(HOOK_##export);                                              \
        int dev_ = (int)(dev);                                                  \
        hook_mem_before_life(kind, dev_);                                       \
        CUresult rc = HOOK_REAL(export) CU_ARGS_##export;                       \
        hook_mem_after_life(kind, dev_, rc);                                    \
        return rc;                                                              \
    }

#define HOOK_WRAP_CAPTURE(export, base, version, pt, kind)                       \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_enter(HOOK_##export);                                              \
        hook_before_capture(kind);                                              \
        CUresult rc = HOOK_REAL(export) CU_ARGS_##export;                       \
        hook_on_capture(kind, rc);                                              \
        return rc;                                                              \
    }

/* Copies and memsets enqueue GPU work: the holder copies, a waiter's copy
 * waits, as a launch does (the fast path: count, one relaxed load of the
 * gate, tail-call). */
#define HOOK_WRAP_COPY(export, base, version, pt, stream)                        \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_tls;                                             \
        hook_add(&b->c.calls[HOOK_##export], 1);                                \
        return SCHED_SELECT(&b->s, HOOK_REAL(export), hook_gated_##export)      \
            CU_ARGS_##export;                                                   \
    }

/* Hand-written in resolver.c, and in memops.c. */
#define HOOK_WRAP_RESOLVE(export, base, version, pt)
#define HOOK_WRAP_MEMOP(export, base, version, pt)

HOOK_LIST(HOOK_WRAPPER_)

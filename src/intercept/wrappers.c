/*
 * wrappers.c - the exported wrappers of every export in hooks.list, one macro
 * per category, and the hook table (names, categories, wrapper addresses).
 *
 * Divided into: the table; the helpers the list's expressions call; the
 * category events (where the scheduler and memory admission plug in); the
 * category macros and their expansion over HOOK_LIST.
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
#include "memory/memory.h"
#include "sched/sched.h"

#include <string.h>

/* ---- the table ----------------------------------------------------------- */

#define NAME_(cat, export, ...) #export,
const char *const hook_names[HOOK_COUNT] = { HOOK_LIST(NAME_) };

#define CATEGORY_(cat, export, ...) HOOK_CAT_##cat,
const hook_category_t hook_categories[HOOK_COUNT] = { HOOK_LIST(CATEGORY_) };

const char *const hook_category_names[HOOK_CAT_COUNT] = {
    "LAUNCH", "SYNC", "ALLOC", "FREE", "INFO", "LIFE", "RESOLVE",
};

#define BASE_(cat, export, base, ...) #base,
const char *const hook_bases[HOOK_COUNT] = { HOOK_LIST(BASE_) };

#define VERSION_(cat, export, base, version, ...) version,
const int hook_versions[HOOK_COUNT] = { HOOK_LIST(VERSION_) };

#define PER_THREAD_(cat, export, base, version, pt, ...) pt,
const unsigned char hook_per_thread[HOOK_COUNT] = { HOOK_LIST(PER_THREAD_) };

/* The resolver's two entries are defined in resolver.c; cuda.h declares them. */
#define WRAPPER_(cat, export, ...) (void *)export,
void *const hook_wrappers[HOOK_COUNT] = { HOOK_LIST(WRAPPER_) };

int hook_find(const char *export_name)
{
    int lo = 0, hi = HOOK_COUNT;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(hook_names[mid], export_name);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ---- helpers of the list's expressions ----------------------------------- */

static inline CUstream hook_config_stream(const CUlaunchConfig *config)
{
    return config ? config->hStream : NULL;
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

/* ---- category events -----------------------------------------------------
 * Each wrapper calls its category's events; these are the places the next
 * modules plug in: the scheduler (launch, sync, life) and memory admission
 * (alloc, free, info, life). */

/* Before work is submitted: the fast path, given the calling thread's block.
 * The scheduler's lease gate (one relaxed load) goes here.  Keep the launch
 * path branch-free (see hook_block_t in intercept.h): a gate can, like the
 * registration, choose the table the launch is dispatched through. */
static inline __attribute__((always_inline))
void hook_on_launch(hook_block_t *b, hook_id_t id, const void *work, CUstream stream)
{
    (void)stream;
    hook_add(&b->c.calls[id], 1);
    sched_count(work);
}

/* After the host waited for the GPU: an iteration boundary candidate. */
static inline void hook_on_sync(hook_block_t *b, hook_sync_kind_t kind, const void *object,
                                CUresult rc)
{
    _Static_assert((int)HOOK_SYNC_COPY == (int)SCHED_SYNC_COPY, "sync kinds");
    (void)object;
    hook_add(&b->c.syncs, 1);
    sched_sync_end((sched_sync_kind_t)kind, rc == CUDA_SUCCESS);
}

/* Before an allocation reaches the driver: memory admission reserves `size`
 * here (or refuses it: the driver is not called) ... */
_Static_assert((int)HOOK_MEM_DEVICE == (int)MEM_KIND_DEVICE &&
               (int)HOOK_MEM_ARRAY == (int)MEM_KIND_ARRAY, "memory kinds");
static inline CUresult hook_before_alloc(hook_mem_kind_t kind, uint64_t size, mem_op_t *op)
{
    return mem_alloc_begin((mem_kind_t)kind, -1, size, op);
}

/* ... and accounts it after the call, or gives it back if the driver failed. */
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

/* The real driver's symbols, for the scheduler's own two driver calls. */
static void *hook_sched_sym(const char *name)
{
    void *h = hook_real_handle();
    return h ? hook_dlsym_real(h, name) : NULL;
}

/* Memory admission starts with the scheduler, over the real driver's own
 * functions (dormant over a fake table).  A job is admitted before its
 * context is made (SALUS_MEM_RESERVE); when a context goes away, so do its
 * allocations, unseen. */
#define HOOK_MEM_SYM(drv, field, name) \
    ((drv).field = (__typeof__((drv).field))hook_sched_sym(name))
static void hook_mem_start(void)
{
    mem_driver_t drv;
    memset(&drv, 0, sizeof drv);
    HOOK_MEM_SYM(drv, ctx_get_device, "cuCtxGetDevice");
    HOOK_MEM_SYM(drv, device_total_mem, "cuDeviceTotalMem_v2");
    if (!HOOK_MEM_SYM(drv, device_get_uuid, "cuDeviceGetUuid_v2"))
        HOOK_MEM_SYM(drv, device_get_uuid, "cuDeviceGetUuid");
    HOOK_MEM_SYM(drv, mem_get_address_range, "cuMemGetAddressRange_v2");
    HOOK_MEM_SYM(drv, mem_free, "cuMemFree_v2");
    HOOK_MEM_SYM(drv, mem_release, "cuMemRelease");
    HOOK_MEM_SYM(drv, array_destroy, "cuArrayDestroy");
    HOOK_MEM_SYM(drv, pointer_get_attribute, "cuPointerGetAttribute");
    HOOK_MEM_SYM(drv, array_get_descriptor, "cuArrayGetDescriptor_v2");
    if (drv.ctx_get_device && drv.device_total_mem)
        mem_init(&drv, NULL);
}

static inline CUresult hook_mem_before_life(hook_life_kind_t kind, int dev)
{
    if (kind == HOOK_LIFE_CREATE || kind == HOOK_LIFE_RETAIN)
        return mem_admit(dev);
    return CUDA_SUCCESS;
}

static inline void hook_mem_after_life(hook_life_kind_t kind, int dev, CUresult rc)
{
    if (rc != CUDA_SUCCESS)
        return;
    if (kind == HOOK_LIFE_INIT)
        hook_mem_start();
    else if (kind == HOOK_LIFE_RELEASE || kind == HOOK_LIFE_RESET || kind == HOOK_LIFE_DESTROY)
        mem_context_gone(dev);
}

/* The scheduler starts once a real driver is loaded (it stays dormant over a
 * fake table), and learns the devices of the contexts a process makes. */
static inline void hook_on_life(hook_life_kind_t kind, int dev, CUresult rc)
{
    if (rc != CUDA_SUCCESS)
        return;
    if (kind == HOOK_LIFE_INIT) {
        sched_driver_t drv;
        if (sched_driver_resolve(hook_sched_sym, &drv) == 0)
            sched_init(&drv);
    } else if (kind == HOOK_LIFE_CREATE || kind == HOOK_LIFE_RETAIN) {
        sched_note_context(dev);
    }
}

/* ---- the wrappers -------------------------------------------------------- */

/* Where a launch goes when the scheduler's gate is not OPEN (SCHED_SELECT
 * in the launch wrappers, branch-free): the scheduler's slow path (register,
 * wait for the lease, bookkeeping), then the thread's dispatch table.  A
 * thread's first launch also registers it here and counts the call in its
 * new block, as the first-call stub's second pass through the wrapper would. */
#define GATED_(cat, export, ...) GATED_##cat(export, __VA_ARGS__)
#define GATED_LAUNCH(export, base, version, pt, work, stream)                   \
    static __attribute__((noinline, cold)) CUresult CUDAAPI                     \
    hook_gated_##export CU_PARAMS_##export                                      \
    {                                                                           \
        sched_launch_slow((const void *)(work));                                \
        hook_block_t *b = hook_tls;                                             \
        if (b == &hook_unregistered) {                                          \
            b = hook_thread_register();                                         \
            hook_add(&b->c.calls[HOOK_##export], 1);                            \
        }                                                                       \
        return __atomic_load_n(&b->dispatch->fn.f_##export, __ATOMIC_RELAXED)   \
            CU_ARGS_##export;                                                   \
    }
#define GATED_SYNC(...)
#define GATED_ALLOC(...)
#define GATED_FREE(...)
#define GATED_INFO(...)
#define GATED_LIFE(...)
#define GATED_RESOLVE(...)
HOOK_LIST(GATED_)

#define HOOK_WRAPPER_(cat, ...) HOOK_WRAP_##cat(__VA_ARGS__)

/* The fast path: the thread's block, count, tail-call through the block's
 * dispatch table.  An unregistered thread's table holds hook_first_<export>,
 * which registers the thread and calls the wrapper again. */
#define HOOK_WRAP_LAUNCH(export, base, version, pt, work, stream)                \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_tls;                                             \
        hook_on_launch(b, HOOK_##export, (const void *)(work), (CUstream)(stream)); \
        return SCHED_SELECT(__atomic_load_n(&b->dispatch->fn.f_##export,       \
                                            __ATOMIC_RELAXED),                  \
                            hook_gated_##export) CU_ARGS_##export;              \
    }

#define HOOK_WRAP_SYNC(export, base, version, pt, kind, object, when)            \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_enter(HOOK_##export);                            \
        int waits = (when) != 0;                                                \
        if (waits)                                                              \
            sched_sync_begin();                                                 \
        CUresult rc = HOOK_REAL(export) CU_ARGS_##export;                       \
        if (waits)                                                              \
            hook_on_sync(b, kind, (const void *)(object), rc);                  \
        return rc;                                                              \
    }

#define HOOK_WRAP_ALLOC(export, base, version, pt, kind, out, size)              \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_enter(HOOK_##export);                            \
        uint64_t bytes = (uint64_t)(size);                                      \
        mem_op_t op;                                                            \
        CUresult rc = hook_before_alloc(kind, bytes, &op);                      \
        if (rc != CUDA_SUCCESS)                                                 \
            return rc;                                                          \
        rc = HOOK_REAL(export) CU_ARGS_##export;                                \
        return hook_on_alloc(b, &op, rc, rc == CUDA_SUCCESS && (out) ?          \
                             (uint64_t)(uintptr_t)*(out) : 0, bytes);           \
    }

#define HOOK_WRAP_FREE(export, base, version, pt, kind, handle)                  \
    SALUS_EXPORT CUresult CUDAAPI export CU_PARAMS_##export                     \
    {                                                                           \
        hook_block_t *b = hook_enter(HOOK_##export);                            \
        mem_op_t op;                                                            \
        mem_free_begin((mem_kind_t)(kind), (uint64_t)(uintptr_t)(handle), &op); \
        CUresult rc = HOOK_REAL(export) CU_ARGS_##export;                       \
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
        CUresult rc = hook_mem_before_life(kind, dev_);                         \
        if (rc != CUDA_SUCCESS)                                                 \
            return rc;                                                          \
        rc = HOOK_REAL(export) CU_ARGS_##export;                                \
        hook_on_life(kind, dev_, rc);                                           \
        hook_mem_after_life(kind, dev_, rc);                                    \
        return rc;                                                              \
    }

/* Hand-written in resolver.c. */
#define HOOK_WRAP_RESOLVE(export, base, version, pt)

HOOK_LIST(HOOK_WRAPPER_)

/* ---- first calls of a thread ---------------------------------------------- */

#define FIRST_(cat, export, ...) FIRST_##cat(export)
#define FIRST_LAUNCH(export)                                                    \
    static __attribute__((noinline, cold)) CUresult CUDAAPI                     \
    hook_first_##export CU_PARAMS_##export                                      \
    {                                                                           \
        hook_thread_register();                                                 \
        return export CU_ARGS_##export;                                         \
    }
#define FIRST_SYNC(export)
#define FIRST_ALLOC(export)
#define FIRST_FREE(export)
#define FIRST_INFO(export)
#define FIRST_LIFE(export)
#define FIRST_RESOLVE(export)
HOOK_LIST(FIRST_)

#define FIRST_SLOT_(cat, export, ...) FIRST_SLOT_##cat(export)
#define FIRST_SLOT_LAUNCH(export) .f_##export = hook_first_##export,
#define FIRST_SLOT_SYNC(export)
#define FIRST_SLOT_ALLOC(export)
#define FIRST_SLOT_FREE(export)
#define FIRST_SLOT_INFO(export)
#define FIRST_SLOT_LIFE(export)
#define FIRST_SLOT_RESOLVE(export)
const hook_real_t hook_first_table = { .fn = { HOOK_LIST(FIRST_SLOT_) } };

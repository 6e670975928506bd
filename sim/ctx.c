/*
 * ctx.c - contexts: the per-thread context stack, cuCtxCreate / Destroy and
 * the cuCtx* queries, and the primary context of each device.
 *
 * Divided into: the thread's stack; creating and tearing down a context;
 * cuCtx* entry points; primary contexts.
 *
 * Lock: sim_p.lock guards every context; the stack is thread-local and holds
 * handles, validated at each use, so a context destroyed by another thread
 * is refused (CUDA_ERROR_INVALID_CONTEXT) rather than dereferenced.
 *
 * A context takes device memory (SIMGPU_CTX_MEMORY, charged to its device
 * in the shared state) while it lives: a created one until destroyed, a
 * primary one while active; the process's death gives it back with the rest.
 *
 * A primary context is one object per device and process, with a stable
 * handle: retain makes it active (refcount > 0), the last release or a reset
 * frees its resources and makes it inactive; an inactive primary context is
 * not a valid context until retained again.  The CUDA runtime gets it from
 * the CUDART interface (export.c), which retains it once on the runtime's
 * behalf (rt_held) until it goes inactive.
 *
 * Before a context goes (destroy, reset, last release), the destructors of
 * its context-local storage run (cls.c), with no lock held: they call the
 * driver.  So those three take the lock twice, and look the context up
 * again the second time.
 */
#include "sim.h"
#include "loader/loader.h"

#include <stdlib.h>
#include <string.h>

/* ---- the thread's stack --------------------------------------------------
 * The epoch check voids a stack inherited through fork(). */
static __thread struct {
    uint64_t epoch;
    int depth;
    CUcontext stack[SIM_CTX_STACK];
} tls;

static void tls_check(void)
{
    if (tls.epoch != sim_p.epoch) {
        tls.epoch = sim_p.epoch;
        tls.depth = 0;
    }
}

void sim_ctx_reset_tls(void)
{
    tls.depth = 0;
}

sim_ctx_t *sim_ctx_get(CUcontext h)
{
    sim_ctx_t *c = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_CTX);
    if (!c || c->destroyed || (c->primary && !c->active))
        return NULL;
    return c;
}

sim_ctx_t *sim_ctx_current(void)
{
    tls_check();
    return tls.depth ? sim_ctx_get(tls.stack[tls.depth - 1]) : NULL;
}

CUresult sim_ctx_require(sim_ctx_t **out)
{
    sim_ctx_t *c = sim_ctx_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

static void pop_if_current(sim_ctx_t *c)
{
    tls_check();
    if (tls.depth && tls.stack[tls.depth - 1] == (CUcontext)(uintptr_t)c->handle)
        tls.depth--;
}

/* ---- creating and tearing down ----------------------------------------- */

enum { LIMIT_SHMEM_SIZE = 7, LIMIT_CIG_ENABLED = 8, LIMIT_CIG_SHMEM_FALLBACK = 9 };

static const size_t default_limit[16] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 64,
    [CU_LIMIT_PERSISTING_L2_CACHE_SIZE] = 0,
    /* CUDA 12.8's (written as numbers for older headers): no context is a
     * CIG (graphics-shared) one, so CIG_ENABLED is 0 and SHMEM_SIZE, the
     * shared memory a kernel may have, is the device's whole per-block
     * limit; the default of CIG_SHMEM_FALLBACK_ENABLED is not documented
     * (1 here: the fallback a non-CIG context never needs). */
    [LIMIT_SHMEM_SIZE] = 232448,
    [LIMIT_CIG_ENABLED] = 0,
    [LIMIT_CIG_SHMEM_FALLBACK] = 1,
};

static CUresult check_flags(unsigned flags)
{
    unsigned sched = flags & CU_CTX_SCHED_MASK;
    if (flags & ~(unsigned)CU_CTX_FLAGS_MASK)
        return CUDA_ERROR_INVALID_VALUE;
    if (sched != CU_CTX_SCHED_AUTO && sched != CU_CTX_SCHED_SPIN &&
        sched != CU_CTX_SCHED_YIELD && sched != CU_CTX_SCHED_BLOCKING_SYNC)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* Make the context's own resources: the device memory it takes
 * (SIMGPU_CTX_MEMORY; a device too full to hold it refuses the context, as
 * the driver does) and its legacy stream. */
static CUresult ctx_start(sim_ctx_t *c)
{
    CUresult rc = sim_charge(c->device, sim_p.ctx_memory);
    if (rc != CUDA_SUCCESS)
        return rc;
    c->charged = sim_p.ctx_memory;
    c->legacy = sim_stream_new(c, SIM_S_LEGACY, 0, 0);
    if (!c->legacy) {
        sim_uncharge(c->device, c->charged);
        c->charged = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->btail = c->tail = 0;
    memcpy(c->limit, default_limit, sizeof c->limit);
    return CUDA_SUCCESS;
}

/* A new context, or NULL with *rc saying why. */
static sim_ctx_t *ctx_new(int dev, unsigned flags, int primary, CUresult *rc)
{
    *rc = CUDA_ERROR_OUT_OF_MEMORY;
    sim_ctx_t *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->handle = sim_obj_new(SIM_K_CTX, c);
    if (!c->handle)
        goto out_free;
    c->id = sim_new_ctx_id();
    c->device = dev;
    c->flags = flags;
    c->primary = primary;
    if (!primary && (*rc = ctx_start(c)) != CUDA_SUCCESS)
        goto out_handle;
    *rc = CUDA_SUCCESS;
    return c;
out_handle:
    sim_obj_free(c->handle);
out_free:
    free(c);
    return NULL;
}

/* Free everything the context owns (it has no work left: callers wait). */
static void ctx_teardown(sim_ctx_t *c)
{
    sim_cls_drop(sim_cls_take(c));     /* put by destructors after they ran */
    sim_modules_destroy_ctx(c);
    sim_streams_destroy_ctx(c);        /* user, per-thread and legacy streams */
    sim_events_destroy_ctx(c);
    sim_mem_release_ctx(c);
    sim_arrays_destroy_ctx(c);
    c->legacy = NULL;
    sim_uncharge(c->device, c->charged);
    c->charged = 0;
}

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = check_flags(flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    SIM_LOCK();
    tls_check();
    sim_ctx_t *c = NULL;
    if (tls.depth == SIM_CTX_STACK) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (!(c = ctx_new(dev, flags, 0, &rc))) {
        /* rc says why */
    } else {
        tls.stack[tls.depth++] = (CUcontext)(uintptr_t)c->handle;
        *pctx = (CUcontext)(uintptr_t)c->handle;
    }
    SIM_UNLOCK();
    return rc;
}

/* ---- cuCtx* -------------------------------------------------------------- */

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice_v1 dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                                unsigned int flags, CUdevice dev)
{
    if (n < 0 || (n > 0 && !params))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);    /* affinity: every SM anyway */
}

#ifdef CU_PARAMS_cuCtxCreate_v4
CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params,
                                unsigned int flags, CUdevice dev)
{
    if (params && params->numExecAffinityParams < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}
#endif

static CUresult ctx_destroy(CUcontext h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_ctx_t *d = sim_ctx_get(h);
    int created = d && !d->primary;
    SIM_UNLOCK();
    if (created)
        sim_cls_release(h);             /* its storage's destructors, first */
    SIM_LOCK();
    sim_ctx_t *c = sim_ctx_get(h);
    CUresult rc = CUDA_SUCCESS;
    if (!c || c->primary) {
        rc = CUDA_ERROR_INVALID_CONTEXT;
        goto out_unlock;
    }
    c->destroyed = 1;                   /* refused from now on; we own it */
    sim_ctx_wait(c);
    ctx_teardown(c);
    pop_if_current(c);
    sim_obj_free(c->handle);
    free(c);
out_unlock:
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx) { return ctx_destroy(ctx); }
CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx) { return ctx_destroy(ctx); }
/* The CUDA 2.0 pair of cuCtxAttach: it drops a usage count and destroys the
 * context at zero.  simgpu has no cuCtxAttach, so the count of a created
 * context is 1: detach destroys it.  PyCUDA detaches its contexts so. */
CUresult CUDAAPI cuCtxDetach(CUcontext ctx) { return ctx_destroy(ctx); }

static CUresult ctx_push(CUcontext h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    tls_check();
    CUresult rc = CUDA_SUCCESS;
    if (!sim_ctx_get(h))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (tls.depth == SIM_CTX_STACK)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    else
        tls.stack[tls.depth++] = h;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) { return ctx_push(ctx); }
CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx) { return ctx_push(ctx); }

static CUresult ctx_pop(CUcontext *pctx)
{
    SIM_CHECK_INIT();
    tls_check();
    if (!tls.depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext top = tls.stack[--tls.depth];
    if (pctx)
        *pctx = top;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx) { return ctx_pop(pctx); }
CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx) { return ctx_pop(pctx); }

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    SIM_CHECK_INIT();
    tls_check();
    if (!ctx) {                         /* NULL pops, or does nothing */
        if (tls.depth)
            tls.depth--;
        return CUDA_SUCCESS;
    }
    SIM_LOCK();
    CUresult rc = CUDA_SUCCESS;
    if (!sim_ctx_get(ctx))
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (tls.depth)
        tls.stack[tls.depth - 1] = ctx;
    else
        tls.stack[tls.depth++] = ctx;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    tls_check();
    *pctx = tls.depth ? tls.stack[tls.depth - 1] : NULL;
    return CUDA_SUCCESS;
}

/* The context named by h, or the current one when h is NULL. */
static CUresult ctx_or_current(CUcontext h, sim_ctx_t **out)
{
    if (!h)
        return sim_ctx_require(out);
    *out = sim_ctx_get(h);
    return *out ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* The tail of a cuCtx query or setting, once its arguments are checked:
 * under the lock, find the context c (h, or the current one when h is
 * NULL), run body on it (body may set rc), and return rc. */
#define WITH_CTX(h, body) do { \
        SIM_LOCK(); \
        sim_ctx_t *c; \
        CUresult rc = ctx_or_current((h), &c); \
        if (rc == CUDA_SUCCESS) { body; } \
        SIM_UNLOCK(); \
        return rc; \
    } while (0)

static CUresult ctx_get_device(CUdevice *dev, CUcontext h)
{
    SIM_CHECK_INIT();
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_CTX(h, *dev = c->device);
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *dev) { return ctx_get_device(dev, NULL); }
#ifdef CU_PARAMS_cuCtxGetDevice_v2
CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *dev, CUcontext ctx) { return ctx_get_device(dev, ctx); }
#endif

static CUresult ctx_synchronize(CUcontext h)
{
    SIM_CHECK_INIT();
    WITH_CTX(h, if ((rc = sim_capture_unsafe()) == CUDA_SUCCESS) {
                    sim_ctx_wait(c);
                    sim_pools_trim_sync();
                });
}

CUresult CUDAAPI cuCtxSynchronize(void) { return ctx_synchronize(NULL); }
#ifdef CU_PARAMS_cuCtxSynchronize_v2
CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx) { return ctx_synchronize(ctx); }
#endif

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    SIM_CHECK_INIT();
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_CTX(NULL, *flags = c->flags);
}

#ifdef CU_PARAMS_cuCtxSetFlags
CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
    SIM_CHECK_INIT();
    CUresult bad = check_flags(flags);
    if (bad != CUDA_SUCCESS)
        return bad;
    WITH_CTX(NULL, c->flags = flags);
}
#endif

#ifdef CU_PARAMS_cuCtxGetId
CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *id)
{
    SIM_CHECK_INIT();
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_CTX(ctx, *id = c->id);
}
#endif

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    SIM_CHECK_INIT();
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_CTX(ctx, *version = 3020);     /* what drivers report for _v2 contexts */
}

static int limit_known(CUlimit limit)
{
    switch (limit) {
    case CU_LIMIT_STACK_SIZE: case CU_LIMIT_PRINTF_FIFO_SIZE:
    case CU_LIMIT_MALLOC_HEAP_SIZE: case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
    case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
    case CU_LIMIT_MAX_L2_FETCH_GRANULARITY: case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
    case LIMIT_SHMEM_SIZE: case LIMIT_CIG_ENABLED: case LIMIT_CIG_SHMEM_FALLBACK:
        return 1;
    default:
        return 0;
    }
}

/* SHMEM_SIZE and CIG_ENABLED "can only be queried" (cuda.h). */
CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
    SIM_CHECK_INIT();
    if (!limit_known(limit) || (int)limit == LIMIT_SHMEM_SIZE || (int)limit == LIMIT_CIG_ENABLED)
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    WITH_CTX(NULL, c->limit[limit] = value);
}

CUresult CUDAAPI cuCtxGetLimit(size_t *value, CUlimit limit)
{
    SIM_CHECK_INIT();
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    if (!limit_known(limit))
        return CUDA_ERROR_UNSUPPORTED_LIMIT;
    WITH_CTX(NULL, *value = c->limit[limit]);
}

/* A setting of the current context that is only stored: get and set, the
 * values an enum from 0 to max. */
#define CTX_SETTING(get, set, type, field, max) \
    CUresult CUDAAPI get(type *config) \
    { \
        SIM_CHECK_INIT(); \
        if (!config) \
            return CUDA_ERROR_INVALID_VALUE; \
        WITH_CTX(NULL, *config = (type)c->field); \
    } \
    CUresult CUDAAPI set(type config) \
    { \
        SIM_CHECK_INIT(); \
        if ((unsigned)config > (max)) \
            return CUDA_ERROR_INVALID_VALUE; \
        WITH_CTX(NULL, c->field = config); \
    }

CTX_SETTING(cuCtxGetCacheConfig, cuCtxSetCacheConfig, CUfunc_cache, cache_config,
            CU_FUNC_CACHE_PREFER_EQUAL)
CTX_SETTING(cuCtxGetSharedMemConfig, cuCtxSetSharedMemConfig, CUsharedconfig, shmem_config,
            CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    SIM_CHECK_INIT();
    if (least)
        *least = 0;
    if (greatest)
        *greatest = -5;                 /* as Hopper reports */
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxResetPersistingL2Cache(void)
{
    SIM_CHECK_INIT();
    WITH_CTX(NULL, (void)c);            /* no cache is modelled: only check */
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    SIM_CHECK_INIT();
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    WITH_CTX(NULL, sim_ctx_t *p = sim_ctx_get(peer);
                   if (!p || p == c) rc = CUDA_ERROR_INVALID_CONTEXT);
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peer)
{
    SIM_CHECK_INIT();
    WITH_CTX(NULL, if (!sim_ctx_get(peer)) rc = CUDA_ERROR_INVALID_CONTEXT);
}

/* ---- primary contexts --------------------------------------------------- */

/* The device's primary context made active (under the lock): a new one, or
 * NULL with *rc saying why. */
static sim_ctx_t *primary_activate(CUdevice dev, CUresult *rc)
{
    sim_ctx_t *c = sim_p.primary[dev];
    *rc = CUDA_SUCCESS;
    if (!c && !(c = sim_p.primary[dev] = ctx_new(dev, 0, 1, rc)))
        return NULL;
    if (!c->active) {
        if ((*rc = ctx_start(c)) != CUDA_SUCCESS)
            return NULL;
        c->active = 1;
    }
    return c;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc;
    SIM_LOCK();
    sim_ctx_t *c = primary_activate(dev, &rc);
    if (c) {
        c->refcount++;
        *pctx = (CUcontext)(uintptr_t)c->handle;
    }
    SIM_UNLOCK();
    return rc;
}

/* The runtime never retains the primary context itself: it asks the
 * CUDART interface for it (export.c) and makes it current, which needs it
 * active.  So the first ask retains it on the runtime's behalf, for the
 * process; after a reset (cudaDeviceReset) the next ask retains it again. */
CUresult sim_ctx_primary_for_runtime(CUcontext *pctx, CUdevice dev)
{
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc;
    SIM_LOCK();
    sim_ctx_t *c = primary_activate(dev, &rc);
    if (c) {
        if (!c->rt_held) {
            c->rt_held = 1;
            c->refcount++;
        }
        *pctx = (CUcontext)(uintptr_t)c->handle;
    }
    SIM_UNLOCK();
    return rc;
}

/* The latest tail of the process's other live contexts on the device. */
struct others { const sim_ctx_t *c; uint64_t tail; };
static void latest_other(void *obj, void *arg)
{
    const sim_ctx_t *o = obj;
    struct others *w = arg;
    if (o != w->c && o->device == w->c->device && !o->destroyed &&
        (!o->primary || o->active))
        w->tail = sim_max(w->tail, o->tail);
}

/* Free what the primary context owns and make it inactive.  No wait for
 * its work, which is gone with it, as on the driver (the engine cuts it);
 * the lock is held throughout, so that a retain from another
 * thread finds it either active or torn down, never half-way: the object
 * itself lives on (callbacks still queued on its streams may touch it). */
static void primary_deactivate(sim_ctx_t *c)
{
    struct others w = { c, 0 };
    sim_obj_foreach(SIM_K_CTX, latest_other, &w);
    sim_engine_cut_own(c->device, c->id, w.tail);
    c->active = 0;
    ctx_teardown(c);
    c->refcount = 0;
    c->rt_held = 0;
}

static CUresult primary_release(CUdevice dev)
{
    SIM_CHECK_INIT();
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = CUDA_SUCCESS;
    SIM_LOCK();
    sim_ctx_t *c = sim_p.primary[dev];
    int last = c && c->active && c->refcount == 1;
    SIM_UNLOCK();
    if (last)                           /* the storage's destructors, first */
        sim_cls_release((CUcontext)(uintptr_t)c->handle);
    SIM_LOCK();
    if (!c || !c->active || c->refcount <= 0)
        rc = CUDA_ERROR_INVALID_CONTEXT;
    else if (--c->refcount == 0)
        primary_deactivate(c);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) { return primary_release(dev); }
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return primary_release(dev); }

static CUresult primary_reset(CUdevice dev)
{
    SIM_CHECK_INIT();
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    SIM_LOCK();
    sim_ctx_t *c = sim_p.primary[dev];
    int active = c && c->active;
    SIM_UNLOCK();
    if (active)                         /* the storage's destructors, first */
        sim_cls_release((CUcontext)(uintptr_t)c->handle);
    SIM_LOCK();
    if (c && c->active)
        primary_deactivate(c);
    SIM_UNLOCK();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev) { return primary_reset(dev); }
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev) { return primary_reset(dev); }

static CUresult primary_set_flags(CUdevice dev, unsigned flags)
{
    SIM_CHECK_INIT();
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = check_flags(flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    SIM_LOCK();
    sim_ctx_t *c = sim_p.primary[dev];
    if (!c)
        c = sim_p.primary[dev] = ctx_new(dev, 0, 1, &rc);   /* NULL: rc says why */
    if (c)
        c->flags = flags;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return primary_set_flags(dev, flags);
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    return primary_set_flags(dev, flags);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_CHECK_INIT();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    if (!sim_device_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    SIM_LOCK();
    sim_ctx_t *c = sim_p.primary[dev];
    *flags = c ? c->flags : 0;
    *active = c ? c->active : 0;
    SIM_UNLOCK();
    return CUDA_SUCCESS;
}

/*
 * async.c - stream-ordered allocations with paging on (SALUS_SWAP=on):
 * cuMemAllocAsync, and cuMemAllocFromPoolAsync from a device's default
 * pool, are served by the virtualized allocator (alloc.c), so that they
 * page like cuMemAlloc_v2; cuMemFreeAsync of a virtualized pointer releases
 * its memory once its stream has reached the free.
 *
 * Which are virtualized (memory.h says the rule): an allocation whose
 * stream's device is the calling thread's current one, from that device's
 * default pool while it is the device's current pool, and while no stream
 * capture is in progress in the process (the interception layer checks
 * that: a captured allocation is a graph's memory node, pool.c's).  A pool
 * the program made, or the default pool once the program set another
 * device's access to it (cuMemPoolSetAccess: virtualized memory is
 * accessible from its own device only), stays the driver's.  The default
 * pool's release threshold does not matter: virtualized memory never
 * enters the driver's pool.
 *
 * The ordering argument.  An allocation needs none: its memory is mapped,
 * and its access set, by host-synchronous driver calls before the pointer
 * is returned, so any stream may use it at once.  A free needs one:
 * cuMemFreeAsync(p, s) is the program's word that every use of p is
 * ordered before that point of s (the driver's pools rely on the same).
 * An event of libsalus's own is recorded on s there; it completes when all
 * the work enqueued on s before it has completed, and with it the work of
 * other streams s was made to wait for.  p's memory goes back to jemalloc,
 * or its chunk is unmapped and released, only after cuEventQuery answers
 * that the event completed, so no later allocation, on any stream, gets
 * p's bytes while queued work may still touch them.  The deferred frees
 * are looked at when memory is wanted: at each virtualized allocation,
 * after each synchronize the program makes (mem_pools_sync), at a trim of
 * a default pool, and at a page-out, after its context synchronize (so
 * that a deferred block is never copied).  Events of one stream complete
 * in the order they were recorded, so a look stops at a stream's first
 * event not yet complete.  An allocation the device has no room for waits
 * for the deferred frees of its device before it is refused.  Before a
 * context may go, every deferred free is waited for and every idle event
 * destroyed (vmem_async_context_ending), so that no event handle of
 * libsalus's outlives its context: a stale one could name a later event
 * of the program's.
 * A host function (cuLaunchHostFunc) instead of the event would be called
 * at the right time, but may not call the driver, which unmapping does,
 * and costs a driver thread's wake-up per free; an event is recorded and
 * queried without a thread.  Unlike the driver's pool, the same stream
 * does not reuse a freed block before it is released (memory is held a
 * little longer, never reused early).
 *
 * A free recorded into a capture (the stream is capturing) would free the
 * memory when the graph runs, which only the driver's pool can do: the
 * allocation stays live (and pages with the rest) until the process ends,
 * said once.
 *
 * Divided into: the rule (which pools); events; deferred frees; the
 * interface.
 *
 * Lock: vmem_p.lock guards the deferred frees and the event cache (with
 * the rest of vmem_p, vmem_int.h).  `pending` is read without it by the
 * settle fast path (a stale 0 delays a release to the next look; a stale
 * nonzero costs a try of the lock, which a busy lock skips).  The pool
 * flags are bytes written and read with relaxed atomics: a pool call
 * racing an allocation on another thread has no order the program could
 * rely on either.
 */
#include "vmem/vmem_int.h"
#include "util/util.h"

#include <stdlib.h>
#include <string.h>

#define EVENT_CACHE 64               /* idle events kept for reuse */
#define BUSY_STREAMS 16              /* streams a look remembers as not there yet */

typedef struct pend {
    vmem_buf_t *a;                 /* out of vmem_p.allocs, still backed */
    CUevent ev;
    CUstream stream;
    CUcontext ctx;                   /* the event's */
} pend_t;

typedef struct idle_event {
    CUevent ev;
    CUcontext ctx;
} idle_event_t;

static struct {
    pend_t *pend;                    /* in the order recorded */
    size_t npend, cap;
    size_t pending;                  /* npend, for the lock-free look */
    idle_event_t idle[EVENT_CACHE];
    int nidle;
    CUmemoryPool dflt[VMEM_MAX_DEVICES];   /* the default pools, once asked */
    uint8_t custom[VMEM_MAX_DEVICES];      /* 1: the current pool is another */
    uint8_t shared[VMEM_MAX_DEVICES];      /* 1: the default pool's access was set */
} va;

/* ---- the rule ------------------------------------------------------------------ */

/* The default pool of ordinal ord, asked of the driver once; NULL unknown. */
static CUmemoryPool default_pool(int ord)
{
    CUmemoryPool h = util_load_relaxed(&va.dflt[ord]);
    if (h || !vmem_drv()->device_get_default_mem_pool ||
        vmem_drv()->device_get_default_mem_pool(&h, (CUdevice)ord) != CUDA_SUCCESS)
        return h;
    util_store_relaxed(&va.dflt[ord], h);
    return h;
}

/* Whether an allocation from `pool` (NULL: the current pool) on ordinal ord
 * is virtualized. */
static int pool_virtual(int ord, CUmemoryPool pool)
{
    if (util_load_relaxed(&va.shared[ord]))
        return 0;
    if (!pool)
        return !util_load_relaxed(&va.custom[ord]);
    return pool == default_pool(ord);
}

void vmem_async_pool_set(int device, CUmemoryPool pool)
{
    if (device < 0 || device >= VMEM_MAX_DEVICES)
        return;
    CUmemoryPool d = default_pool(device);
    util_store_relaxed(&va.custom[device], (uint8_t)(!d || pool != d));
}

/* Whether `map` gives a device other than ord access. */
static int other_device(int ord, const CUmemAccessDesc *map, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            !(map[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE && map[i].location.id == ord))
            return 1;
    return 0;
}

void vmem_async_pool_access(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count)
{
    static int said;
    for (int ord = 0; ord < VMEM_MAX_DEVICES && pool && map; ord++) {
        if (default_pool(ord) != pool || !other_device(ord, map, count))
            continue;
        util_store_relaxed(&va.shared[ord], 1);
        if (vmem_on())
            util_log_once(&said, UTIL_LOG_INFO, "memory: CUDA device %d's default memory "
                          "pool is shared with other devices (cuMemPoolSetAccess); its "
                          "stream-ordered allocations are no longer paged (those made "
                          "before stay accessible from their own device only)", ord);
    }
}

/* ---- events -------------------------------------------------------------------- */

/* An event of the current context recorded on `stream`: 0, or -1. */
static int event_record_locked(CUstream stream, CUevent *ev, CUcontext *ctx)
{
    const drv_t *d = vmem_drv();
    CUcontext c = NULL;
    CUevent e = NULL;
    if (!d->event_create || !d->event_record || !d->event_query ||
        d->ctx_get_current(&c) != CUDA_SUCCESS || !c)
        return -1;
    for (int i = va.nidle - 1; i >= 0; i--)
        if (va.idle[i].ctx == c) {
            e = va.idle[i].ev;
            va.idle[i] = va.idle[--va.nidle];
            break;
        }
    if (!e && d->event_create(&e, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return -1;
    if (d->event_record(e, stream) != CUDA_SUCCESS) {
        if (d->event_destroy)         /* a cached one of a context gone, perhaps */
            d->event_destroy(e);
        return -1;
    }
    *ev = e;
    *ctx = c;
    return 0;
}

/* An event that completed: kept for the next free, or destroyed. */
static void event_put_locked(CUevent ev, CUcontext ctx, int ok)
{
    if (ok && va.nidle < EVENT_CACHE) {
        va.idle[va.nidle++] = (idle_event_t){ ev, ctx };
        return;
    }
    if (vmem_drv()->event_destroy)
        vmem_drv()->event_destroy(ev);
}

/* ---- deferred frees --------------------------------------------------------------- */

static int defer_locked(vmem_buf_t *a, CUstream stream)
{
    pend_t p = { .a = a, .stream = stream };
    if (va.npend == va.cap) {
        size_t cap = va.cap ? 2 * va.cap : 64;
        pend_t *n = realloc(va.pend, cap * sizeof *n);
        if (!n)
            return -1;
        va.pend = n;
        va.cap = cap;
    }
    if (event_record_locked(stream, &p.ev, &p.ctx) != 0)
        return -1;
    va.pend[va.npend++] = p;
    util_store_relaxed(&va.pending, va.npend);
    return 0;
}

static int busy(const CUstream *list, int n, CUstream s)
{
    for (int i = 0; i < n; i++)
        if (list[i] == s)
            return 1;
    return 0;
}

#define WAIT_NONE (-2)
#define WAIT_ALL  (-1)

/* Release the deferred frees whose event completed; those of ordinal `wait`
 * (or every one: WAIT_ALL) are waited for, WAIT_NONE waits for none.  An
 * event the driver cannot answer for counts as completed. */
static void settle_locked(int wait)
{
    const drv_t *d = vmem_drv();
    CUstream later[BUSY_STREAMS];
    int nlater = 0;
    size_t k = 0;
    for (size_t i = 0; i < va.npend; i++) {
        pend_t *p = &va.pend[i];
        CUresult r = CUDA_ERROR_NOT_READY;
        if ((wait == WAIT_ALL || p->a->ordinal == wait) && d->event_synchronize)
            r = d->event_synchronize(p->ev);
        else if (!busy(later, nlater, p->stream))
            r = d->event_query(p->ev);
        if (r == CUDA_ERROR_NOT_READY) {
            if (nlater < BUSY_STREAMS && !busy(later, nlater, p->stream))
                later[nlater++] = p->stream;
            va.pend[k++] = *p;
            continue;
        }
        event_put_locked(p->ev, p->ctx, r == CUDA_SUCCESS);
        vmem_free_locked(p->a);
        vmem_buf_put_locked(p->a);
    }
    va.npend = k;
    util_store_relaxed(&va.pending, k);
}

/* For the allocator beneath (vmem_async_ops_p, registered at the first
 * stream-ordered allocation, before any free is deferred). */
static void settle_any_locked(void)
{
    if (va.npend)
        settle_locked(WAIT_NONE);
}

/* A fork() child forgets its parent's frees and events (core.c). */
static void forget(void)
{
    memset(&va, 0, sizeof va);
}

static const vmem_async_ops_t ops = { settle_any_locked, forget };

/* ---- the interface ---------------------------------------------------------------- */

void vmem_async_settle(void)
{
    if (__builtin_expect(!util_load_relaxed(&va.pending), 1))
        return;
    if (pthread_mutex_trylock(&vmem_p.lock) != 0)
        return;                       /* a page-out in progress settles them */
    settle_locked(WAIT_NONE);
    pthread_mutex_unlock(&vmem_p.lock);
}

/* Before a context may go (cuCtxDestroy, a primary context released or
 * reset): libsalus's events may be in it, and a handle of a context gone
 * may name a later event of the program's.  Every deferred free is waited
 * for and released, and every idle event destroyed, while their context
 * is still there; the next free makes a new event. */
void vmem_async_context_ending(void)
{
    if (__builtin_expect(!util_load_acquire(&vmem_async_ops_p), 1))
        return;                       /* no stream-ordered allocation yet */
    pthread_mutex_lock(&vmem_p.lock);
    settle_locked(WAIT_ALL);
    while (va.nidle > 0)
        event_put_locked(va.idle[--va.nidle].ev, NULL, 0);
    pthread_mutex_unlock(&vmem_p.lock);
}

CUresult vmem_alloc_async_try(CUdeviceptr *out, size_t bytes, CUmemoryPool pool, int device,
                              int bail, vmem_stuck_t *stuck)
{
    stuck->stuck = 0;
    int ord;
    if (!vmem_on() || !out || bytes == 0 || bytes > MEM_MAX_BYTES ||
        drv_current_device(vmem_drv(), &ord) != 0 || (device >= 0 && device != ord) ||
        ord < 0 || ord >= VMEM_MAX_DEVICES || !pool_virtual(ord, pool))
        return CUDA_ERROR_NOT_SUPPORTED;   /* the driver's pool serves it */
    pthread_mutex_lock(&vmem_p.lock);
    vmem_stuck_try(bail);
    util_store_release(&vmem_async_ops_p, &ops);
    settle_any_locked();
    CUresult rc = vmem_alloc_locked(ord, bytes, out);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && va.npend) {
        settle_locked(ord);           /* what this device's streams are freeing */
        rc = vmem_alloc_locked(ord, bytes, out);
    }
    int was_stuck = vmem_stuck_seen();
    pthread_mutex_unlock(&vmem_p.lock);
    stuck->stuck = rc != CUDA_SUCCESS && was_stuck;
    stuck->ordinal = ord;
    stuck->bytes = bytes;
    return rc;
}

CUresult vmem_alloc_async(CUdeviceptr *out, size_t bytes, CUmemoryPool pool, int device)
{
    vmem_stuck_t stuck;
    return vmem_alloc_async_try(out, bytes, pool, device, 0, &stuck);
}

int vmem_free_async(CUdeviceptr p, CUstream stream, int captured, CUresult *rc)
{
    static int said;
    if (!vmem_on() || !p)
        return 0;
    pthread_mutex_lock(&vmem_p.lock);
    vmem_buf_t *a = vmem_map_get(&vmem_p.allocs, p);
    if (!a)
        goto out_unlock;
    if (captured) {
        util_log_once(&said, UTIL_LOG_WARN, "memory: a stream capture frees memory that "
                      "paging serves (cuMemFreeAsync); it stays allocated until the "
                      "process ends.  Allocate it in the capture, or free it outside");
        goto out_unlock;
    }
    vmem_map_del(&vmem_p.allocs, p);
    if (defer_locked(a, stream) != 0) {
        /* No event: the stream's work is waited for here instead. */
        if (vmem_drv()->stream_synchronize(stream) != CUDA_SUCCESS)
            vmem_drv()->ctx_synchronize();
        vmem_free_locked(a);
        vmem_buf_put_locked(a);
    }
out_unlock:
    pthread_mutex_unlock(&vmem_p.lock);
    if (a)
        *rc = CUDA_SUCCESS;
    return a != NULL;
}

size_t vmem_async_pending(void)
{
    return util_load_relaxed(&va.pending);
}

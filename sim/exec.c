/*
 * exec.c - the time model and streams: the clock, stream resolution and
 * legacy-stream semantics, waiting, the cuStream* entry points.  Events and
 * host callbacks, which build on these, are in event.c.
 *
 * Divided into: clock; streams; waiting; cuStream* entry points; stream
 * attributes.
 *
 * No thread runs the GPU: each stream keeps `tail`, the time (CLOCK_MONOTONIC
 * ns) its last work ends; enqueuing work computes its start and end at once,
 * synchronizing sleeps until the tail, querying compares it with now.
 * Legacy default stream (NULL / CU_STREAM_LEGACY): its work starts after all
 * earlier work of the context's blocking streams (ctx->btail), and work on a
 * blocking stream starts after earlier legacy work (legacy->tail); streams
 * made with CU_STREAM_NON_BLOCKING ignore both.
 *
 * Lock: sim_p.lock guards streams; it is released while sleeping, and
 * objects are looked up again by handle after any sleep, since another
 * thread may have destroyed them meanwhile.
 */
#include "sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- clock -------------------------------------------------------------- */

uint64_t sim_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How long before the work ends a waiter stops sleeping and spins.  The
 * driver's default (CU_CTX_SCHED_AUTO with fewer contexts than CPUs) spins
 * while it waits, so a synchronize returns within a microsecond or two of
 * the work's end; a sleep alone returns tens of microseconds late (timer
 * slack, wake-up latency), which would make every host reaction to the
 * GPU look slower than on the hardware.  Sleeping until just before the
 * end keeps the CPU free for the rest of the wait.  SIMGPU_SYNC_SPIN_US, 0
 * to only sleep (as CU_CTX_SCHED_BLOCKING_SYNC does). */
static uint64_t spin_window_ns(void)
{
    static uint64_t ns = UINT64_MAX;
    uint64_t v = __atomic_load_n(&ns, __ATOMIC_RELAXED);
    if (v == UINT64_MAX) {
        const char *e = getenv("SIMGPU_SYNC_SPIN_US");
        char *end = NULL;
        unsigned long long us = e && *e ? strtoull(e, &end, 10) : SIM_DEFAULT_SYNC_SPIN_US;
        if (e && *e && (*end || us > 100000))
            us = SIM_DEFAULT_SYNC_SPIN_US;
        v = (uint64_t)us * 1000;
        __atomic_store_n(&ns, v, __ATOMIC_RELAXED);
    }
    return v;
}

static inline void spin_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void sim_sleep_until(uint64_t t)
{
    uint64_t spin = spin_window_ns();
    uint64_t wake = t > spin ? t - spin : 0;
    if (wake > sim_now()) {
        struct timespec ts = { (time_t)(wake / 1000000000ull), (long)(wake % 1000000000ull) };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while (sim_now() < t)
        spin_pause();
}

uint64_t sim_transfer_ns(size_t bytes, uint64_t bw)
{
    return (bytes + bw - 1) / bw;
}

/* ---- streams ------------------------------------------------------------ */

/* Per-thread default streams of this thread, by context handle; the streams
 * have handles, so one destroyed with its context is simply not found. */
#define PT_SLOTS 8
static __thread struct {
    uint64_t epoch;
    uint64_t ctx[PT_SLOTS], stream[PT_SLOTS];
    unsigned next;
} pt;

sim_stream_t *sim_stream_new(sim_ctx_t *ctx, int kind, unsigned flags, int prio)
{
    sim_stream_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->handle = sim_obj_new(SIM_K_STREAM, s);
    if (!s->handle) {
        free(s);
        return NULL;
    }
    s->ctx = ctx;
    s->kind = kind;
    s->flags = flags;
    s->priority = prio;
    s->id = kind == SIM_S_LEGACY ? 0 : sim_p.next_stream_id++;
    return s;
}

static sim_stream_t *per_thread_stream(sim_ctx_t *ctx)
{
    if (pt.epoch != sim_p.epoch) {
        memset(&pt, 0, sizeof pt);
        pt.epoch = sim_p.epoch;
    }
    for (int i = 0; i < PT_SLOTS; i++) {
        if (pt.ctx[i] != ctx->handle)
            continue;
        sim_stream_t *s = sim_obj_get(pt.stream[i], SIM_K_STREAM);
        if (s && s->ctx == ctx)
            return s;
    }
    sim_stream_t *s = sim_stream_new(ctx, SIM_S_PER_THREAD, 0, 0);
    if (!s)
        return NULL;
    unsigned i = pt.next++ % PT_SLOTS;   /* an evicted one lives on in its ctx */
    pt.ctx[i] = ctx->handle;
    pt.stream[i] = s->handle;
    return s;
}

CUresult sim_stream_resolve(CUstream h, int ptds, sim_stream_t **out)
{
    if (!h)
        h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        sim_ctx_t *ctx;
        CUresult rc = sim_ctx_require(&ctx);
        if (rc != CUDA_SUCCESS)
            return rc;
        sim_stream_t *s = h == CU_STREAM_LEGACY ? ctx->legacy : per_thread_stream(ctx);
        if (!s)
            return CUDA_ERROR_OUT_OF_MEMORY;
        *out = s;
        return CUDA_SUCCESS;
    }
    sim_stream_t *s = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_STREAM);
    if (!s || s->dead || s->kind != SIM_S_USER)
        return CUDA_ERROR_INVALID_HANDLE;
    if (s->ctx->destroyed || (s->ctx->primary && !s->ctx->active))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = s;
    return CUDA_SUCCESS;
}

static int blocking(const sim_stream_t *s)
{
    return s->kind != SIM_S_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

uint64_t sim_stream_ready(sim_stream_t *s)
{
    if (s->mw_on)                       /* work behind a wait: the host waits (memop.c) */
        sim_memop_settle(s);
    if (s->kind == SIM_S_LEGACY)
        return sim_max(s->tail, s->ctx->btail);
    if (blocking(s))
        return sim_max(s->tail, s->ctx->legacy->tail);
    return s->tail;
}

void sim_stream_done(sim_stream_t *s, uint64_t end)
{
    s->tail = sim_max(s->tail, end);
    if (blocking(s))
        s->ctx->btail = sim_max(s->ctx->btail, end);
    s->ctx->tail = sim_max(s->ctx->tail, end);
}

uint64_t sim_stream_transfer(sim_stream_t *s, uint64_t ns, int kind, const char *name)
{
    sim_engine_reap(s->ctx->device);    /* a dead peer's work is gone before ours */
    uint64_t submit = sim_now(), start = sim_max(submit, sim_stream_ready(s));
    sim_stream_done(s, start + ns);
    sim_trace(s, kind, name, submit, start, start + ns);
    return start + ns;
}

static void stream_free(sim_stream_t *s)
{
    sim_capture_drop(s);
    sim_memop_drop(s);
    sim_obj_free(s->handle);
    if (s->host_pending)
        s->dead = 1;                    /* the callback worker frees it */
    else
        free(s);
}

/* ---- waiting -------------------------------------------------------------- */

/* Sleep until t with the lock released; called and returns with it held. */
static void sleep_unlocked(uint64_t t)
{
    if (t > sim_now()) {
        SIM_UNLOCK();
        sim_sleep_until(t);
        SIM_LOCK();
    }
}

void sim_stream_wait(sim_stream_t *s)
{
    uint64_t h = s->handle;
    sim_memop_settle(s);
    if (!(s = sim_obj_get(h, SIM_K_STREAM)))
        return;
    sleep_unlocked(s->tail);
    while ((s = sim_obj_get(h, SIM_K_STREAM)) && s->host_pending)
        pthread_cond_wait(&sim_p.cond, &sim_p.lock);
}

void sim_ctx_wait(sim_ctx_t *c)
{
    uint64_t h = c->handle;
    sim_memop_settle_ctx(c);
    if (!(c = sim_obj_get(h, SIM_K_CTX)))
        return;
    sleep_unlocked(c->tail);
    while ((c = sim_obj_get(h, SIM_K_CTX)) && c->host_pending)
        pthread_cond_wait(&sim_p.cond, &sim_p.lock);
}

/* ---- cuStream* ----------------------------------------------------------- */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
    SIM_CHECK_INIT();
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    if (prio > 0)                       /* clamped to [greatest, least], as the driver */
        prio = 0;
    if (prio < -5)
        prio = -5;
    SIM_LOCK();
    sim_ctx_t *ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc == CUDA_SUCCESS) {
        sim_stream_t *s = sim_stream_new(ctx, SIM_S_USER, flags, prio);
        if (s)
            *ph = (CUstream)(uintptr_t)s->handle;
        else
            rc = CUDA_ERROR_OUT_OF_MEMORY;
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamCreate(CUstream *ph, unsigned int flags)
{
    return stream_create(ph, flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority)
{
    return stream_create(ph, flags, priority);
}

static CUresult stream_destroy(CUstream h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_STREAM);
    CUresult rc = CUDA_SUCCESS;
    if (!s || s->dead || s->kind != SIM_S_USER)
        rc = CUDA_ERROR_INVALID_HANDLE;
    else
        stream_free(s);                 /* its work, already timed, completes */
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamDestroy(CUstream h) { return stream_destroy(h); }
CUresult CUDAAPI cuStreamDestroy_v2(CUstream h) { return stream_destroy(h); }

static void destroy_if_ctx(void *obj, void *arg)
{
    sim_stream_t *s = obj;
    if (s->ctx == arg)
        stream_free(s);
}

void sim_streams_destroy_ctx(sim_ctx_t *ctx)
{
    sim_obj_foreach(SIM_K_STREAM, destroy_if_ctx, ctx);
}

static CUresult stream_query(CUstream h, int ptds)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(h, ptds, &s);
    if (rc == CUDA_SUCCESS)
        rc = sim_capture_conflict(s, 0);
    if (rc == CUDA_SUCCESS && (!sim_memop_settled(s) || s->tail > sim_now() ||
                               s->host_pending))
        rc = CUDA_ERROR_NOT_READY;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamQuery(CUstream h) { return stream_query(h, 0); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream h) { return stream_query(h, 1); }

static CUresult stream_sync(CUstream h, int ptds)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(h, ptds, &s);
    if (rc == CUDA_SUCCESS) {
        if ((rc = sim_capture_conflict(s, 0)) == CUDA_SUCCESS) {
            sim_stream_wait(s);
            sim_pools_trim_sync();
        }
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream h) { return stream_sync(h, 0); }
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream h) { return stream_sync(h, 1); }

/* The stream behind h, for the cuStreamGet* queries. */
#define STREAM_QUERY(h, ptds, out, body) do { \
        SIM_CHECK_INIT(); \
        if (!(out)) return CUDA_ERROR_INVALID_VALUE; \
        SIM_LOCK(); \
        sim_stream_t *s; \
        CUresult rc = sim_stream_resolve(h, ptds, &s); \
        if (rc == CUDA_SUCCESS) { body; } \
        SIM_UNLOCK(); \
        return rc; \
    } while (0)

CUresult CUDAAPI cuStreamGetPriority(CUstream h, int *p) { STREAM_QUERY(h, 0, p, *p = s->priority); }
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream h, int *p) { STREAM_QUERY(h, 1, p, *p = s->priority); }
CUresult CUDAAPI cuStreamGetFlags(CUstream h, unsigned int *f) { STREAM_QUERY(h, 0, f, *f = s->flags); }
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream h, unsigned int *f) { STREAM_QUERY(h, 1, f, *f = s->flags); }
CUresult CUDAAPI cuStreamGetCtx(CUstream h, CUcontext *c)
{
    STREAM_QUERY(h, 0, c, *c = (CUcontext)(uintptr_t)s->ctx->handle);
}
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream h, CUcontext *c)
{
    STREAM_QUERY(h, 1, c, *c = (CUcontext)(uintptr_t)s->ctx->handle);
}
#ifdef CU_PARAMS_cuStreamGetCtx_v2
CUresult CUDAAPI cuStreamGetCtx_v2(CUstream h, CUcontext *c, CUgreenCtx *g)
{
    STREAM_QUERY(h, 0, c, *c = (CUcontext)(uintptr_t)s->ctx->handle; if (g) *g = NULL);
}
CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream h, CUcontext *c, CUgreenCtx *g)
{
    STREAM_QUERY(h, 1, c, *c = (CUcontext)(uintptr_t)s->ctx->handle; if (g) *g = NULL);
}
#endif
#ifdef CU_PARAMS_cuStreamGetId
CUresult CUDAAPI cuStreamGetId(CUstream h, unsigned long long *id) { STREAM_QUERY(h, 0, id, *id = s->id); }
CUresult CUDAAPI cuStreamGetId_ptsz(CUstream h, unsigned long long *id) { STREAM_QUERY(h, 1, id, *id = s->id); }
#endif
#ifdef CU_PARAMS_cuStreamGetGreenCtx
/* simgpu makes no green context: every stream's is NULL, as the driver
 * documents for a stream not made in one (cuDNN asks on its streams). */
CUresult CUDAAPI cuStreamGetGreenCtx(CUstream h, CUgreenCtx *g) { STREAM_QUERY(h, 0, g, *g = NULL); }
#endif
#ifdef CU_PARAMS_cuStreamGetDevice
CUresult CUDAAPI cuStreamGetDevice(CUstream h, CUdevice *d) { STREAM_QUERY(h, 0, d, *d = s->ctx->device); }
CUresult CUDAAPI cuStreamGetDevice_ptsz(CUstream h, CUdevice *d) { STREAM_QUERY(h, 1, d, *d = s->ctx->device); }
#endif

static CUresult stream_attach(CUstream h, int ptds, CUdeviceptr p, size_t len, unsigned flags)
{
    SIM_CHECK_INIT();
    (void)flags;
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(h, ptds, &s);
    if (rc == CUDA_SUCCESS && !sim_range_find((uintptr_t)p))
        rc = CUDA_ERROR_INVALID_VALUE;
    (void)len;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamAttachMemAsync(CUstream h, CUdeviceptr p, size_t len, unsigned int flags)
{
    return stream_attach(h, 0, p, len, flags);
}

CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream h, CUdeviceptr p, size_t len, unsigned int flags)
{
    return stream_attach(h, 1, p, len, flags);
}

/* Stream attributes: the access-policy window and synchronization policy
 * are kept and reported back (they change nothing here); the priority is
 * the stream's own, clamped as at creation. */
static CUresult stream_attr(sim_stream_t *s, CUstreamAttrID id, CUstreamAttrValue *v, int set)
{
    switch ((int)id) {
    case CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        if (set)
            s->window = v->accessPolicyWindow;
        else
            v->accessPolicyWindow = s->window;
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_SYNCHRONIZATION_POLICY:
        if (set)
            s->sync_policy = v->syncPolicy;
        else
            v->syncPolicy = (CUsynchronizationPolicy)s->sync_policy;
        return CUDA_SUCCESS;
    case CU_STREAM_ATTRIBUTE_PRIORITY:
        if (set)
            s->priority = v->priority > 0 ? 0 : v->priority < -5 ? -5 : v->priority;
        else
            v->priority = s->priority;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult stream_attribute(CUstream h, int ptsz, CUstreamAttrID id,
                                 CUstreamAttrValue *v, int set)
{
    SIM_CHECK_INIT();
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(h, ptsz, &s);
    if (rc == CUDA_SUCCESS)
        rc = stream_attr(s, id, v, set);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamGetAttribute(CUstream h, CUstreamAttrID id, CUstreamAttrValue *v)
{
    return stream_attribute(h, 0, id, v, 0);
}
CUresult CUDAAPI cuStreamGetAttribute_ptsz(CUstream h, CUstreamAttrID id, CUstreamAttrValue *v)
{
    return stream_attribute(h, 1, id, v, 0);
}
CUresult CUDAAPI cuStreamSetAttribute(CUstream h, CUstreamAttrID id, const CUstreamAttrValue *v)
{
    return stream_attribute(h, 0, id, (CUstreamAttrValue *)v, 1);
}
CUresult CUDAAPI cuStreamSetAttribute_ptsz(CUstream h, CUstreamAttrID id,
                                           const CUstreamAttrValue *v)
{
    return stream_attribute(h, 1, id, (CUstreamAttrValue *)v, 1);
}

static CUresult copy_attributes(CUstream hd, CUstream hs, int ptsz)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *d, *s;
    CUresult rc = sim_stream_resolve(hd, ptsz, &d);
    if (rc == CUDA_SUCCESS)
        rc = sim_stream_resolve(hs, ptsz, &s);
    if (rc == CUDA_SUCCESS) {
        d->window = s->window;
        d->sync_policy = s->sync_policy;
        d->priority = s->priority;
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamCopyAttributes(CUstream d, CUstream s) { return copy_attributes(d, s, 0); }
CUresult CUDAAPI cuStreamCopyAttributes_ptsz(CUstream d, CUstream s)
{
    return copy_attributes(d, s, 1);
}

void sim_exec_reset_after_fork(void)
{
    memset(&pt, 0, sizeof pt);          /* the parent's per-thread streams */
    sim_hostfn_reset_after_fork();
}

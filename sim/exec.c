/*
 * exec.c - the time model: streams, events, synchronization and host
 * callbacks.
 *
 * Divided into: clock; stream resolution and legacy-stream semantics;
 * waiting; cuStream* entry points; cuEvent* entry points; host callbacks
 * (one worker thread, started on first use).
 *
 * No thread runs the GPU: each stream keeps `tail`, the time (CLOCK_MONOTONIC
 * ns) its last work ends; enqueuing work computes its start and end at once,
 * synchronizing sleeps until the tail, querying compares it with now.
 * Legacy default stream (NULL / CU_STREAM_LEGACY): its work starts after all
 * earlier work of the context's blocking streams (ctx->btail), and work on a
 * blocking stream starts after earlier legacy work (legacy->tail); streams
 * made with CU_STREAM_NON_BLOCKING ignore both.
 *
 * Lock: sim_p.lock guards streams, events and the callback queue; it is
 * released while sleeping, and objects are looked up again by handle after
 * any sleep, since another thread may have destroyed them meanwhile.
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

void sim_sleep_until(uint64_t t)
{
    struct timespec ts = { (time_t)(t / 1000000000ull), (long)(t % 1000000000ull) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
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

uint64_t sim_stream_transfer(sim_stream_t *s, uint64_t ns)
{
    uint64_t end = sim_max(sim_now(), sim_stream_ready(s)) + ns;
    sim_stream_done(s, end);
    return end;
}

static void stream_free(sim_stream_t *s)
{
    sim_obj_free(s->handle);
    if (s->host_pending)
        s->dead = 1;                    /* the callback worker frees it */
    else
        free(s);
}

/* ---- waiting -------------------------------------------------------------- */

void sim_stream_wait(sim_stream_t *s)
{
    uint64_t h = s->handle, t = s->tail;
    if (t > sim_now()) {
        SIM_UNLOCK();
        sim_sleep_until(t);
        SIM_LOCK();
    }
    while ((s = sim_obj_get(h, SIM_K_STREAM)) && s->host_pending)
        pthread_cond_wait(&sim_p.cond, &sim_p.lock);
}

void sim_ctx_wait(sim_ctx_t *c)
{
    uint64_t h = c->handle, t = c->tail;
    if (t > sim_now()) {
        SIM_UNLOCK();
        sim_sleep_until(t);
        SIM_LOCK();
    }
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

static void destroy_event_if_ctx(void *obj, void *arg)
{
    sim_event_t *e = obj;
    if (e->ctx == arg) {
        sim_obj_free(e->handle);
        free(e);
    }
}

void sim_streams_destroy_ctx(sim_ctx_t *ctx)
{
    sim_obj_foreach(SIM_K_STREAM, destroy_if_ctx, ctx);
    sim_obj_foreach(SIM_K_EVENT, destroy_event_if_ctx, ctx);
}

static CUresult stream_query(CUstream h, int ptds)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(h, ptds, &s);
    if (rc == CUDA_SUCCESS) {
        if (s->capture)
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        else if (s->tail > sim_now() || s->host_pending)
            rc = CUDA_ERROR_NOT_READY;
    }
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
        if (s->capture) {
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        } else {
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

/* ---- cuEvent* ------------------------------------------------------------ */

static sim_event_t *event_get(CUevent h)
{
    return sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_EVENT);
}

CUresult CUDAAPI cuEventCreate(CUevent *ph, unsigned int flags)
{
    SIM_CHECK_INIT();
    unsigned known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (!ph || (flags & ~known))
        return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_ctx_t *ctx;
    CUresult rc = sim_ctx_require(&ctx);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    sim_event_t *e = calloc(1, sizeof *e);
    if (!e || !(e->handle = sim_obj_new(SIM_K_EVENT, e))) {
        free(e);
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
    e->ctx = ctx;
    e->flags = flags;
    *ph = (CUevent)(uintptr_t)e->handle;
out_unlock:
    SIM_UNLOCK();
    return rc;
}

static CUresult event_destroy(CUevent h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_event_t *e = event_get(h);
    if (e) {
        sim_obj_free(e->handle);
        free(e);
    }
    SIM_UNLOCK();
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuEventDestroy(CUevent h) { return event_destroy(h); }
CUresult CUDAAPI cuEventDestroy_v2(CUevent h) { return event_destroy(h); }

/* An event completes when the work enqueued before it does. */
static CUresult event_record(CUevent h, CUstream hs, int ptds, unsigned flags)
{
    SIM_CHECK_INIT();
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_event_t *e = event_get(h);
    sim_stream_t *s;
    CUresult rc = e ? sim_stream_resolve(hs, ptds, &s) : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && !s->capture) {   /* in a capture: part of the graph */
        e->time = sim_max(sim_now(), sim_stream_ready(s));
        e->recorded = 1;
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) { return event_record(e, s, 0, 0); }
CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream s) { return event_record(e, s, 1, 0); }
CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int flags)
{
    return event_record(e, s, 0, flags);
}
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int flags)
{
    return event_record(e, s, 1, flags);
}

CUresult CUDAAPI cuEventQuery(CUevent h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_event_t *e = event_get(h);
    CUresult rc = !e ? CUDA_ERROR_INVALID_HANDLE
                : e->recorded && e->time > sim_now() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuEventSynchronize(CUevent h)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_event_t *e = event_get(h);
    uint64_t t = e && e->recorded ? e->time : 0;
    SIM_UNLOCK();
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    sim_sleep_until(t);
    SIM_LOCK();
    sim_pools_trim_sync();
    SIM_UNLOCK();
    return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent hs, CUevent he)
{
    SIM_CHECK_INIT();
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_event_t *a = event_get(hs), *b = event_get(he);
    CUresult rc = CUDA_SUCCESS;
    if (!a || !b || !a->recorded || !b->recorded ||
        ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
        rc = CUDA_ERROR_INVALID_HANDLE;
    else if (sim_max(a->time, b->time) > sim_now())
        rc = CUDA_ERROR_NOT_READY;
    else
        *ms = (float)(((double)b->time - (double)a->time) / 1e6);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent s, CUevent e) { return elapsed(ms, s, e); }
#ifdef CU_PARAMS_cuEventElapsedTime_v2
CUresult CUDAAPI cuEventElapsedTime_v2(float *ms, CUevent s, CUevent e) { return elapsed(ms, s, e); }
#endif

static CUresult stream_wait_event(CUstream hs, CUevent h, unsigned flags, int ptds)
{
    SIM_CHECK_INIT();
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_event_t *e = event_get(h);
    sim_stream_t *s;
    CUresult rc = e ? sim_stream_resolve(hs, ptds, &s) : CUDA_ERROR_INVALID_HANDLE;
    if (rc == CUDA_SUCCESS && e->recorded && !s->capture)
        sim_stream_done(s, e->time);    /* later work on s starts after the event */
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags)
{
    return stream_wait_event(s, e, flags, 0);
}

CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags)
{
    return stream_wait_event(s, e, flags, 1);
}

/* ---- host callbacks ------------------------------------------------------
 * A callback runs on the worker thread once the work enqueued before it is
 * done (its due time); the stream counts it pending until it has returned,
 * so synchronize and query wait for it.  Its own duration is not modelled:
 * later work on the stream is not delayed by a slow callback. */

typedef struct hostjob {
    uint64_t due;
    void (*fn)(void *);
    void *user;
    CUstreamCallback cb;
    CUstream cb_stream;
    sim_stream_t *s;
    struct hostjob *next;
} hostjob_t;

static hostjob_t *queue;                /* sorted by due, FIFO among equals */
static int worker_started;
static pthread_cond_t qcond;
static pthread_once_t qcond_once = PTHREAD_ONCE_INIT;

static void qcond_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&qcond, &a);
    pthread_condattr_destroy(&a);
}

static void *worker(void *arg)
{
    (void)arg;
    SIM_LOCK();
    for (;;) {
        if (!queue) {
            pthread_cond_wait(&qcond, &sim_p.lock);
            continue;
        }
        uint64_t now = sim_now();
        if (queue->due > now) {
            struct timespec ts = { (time_t)(queue->due / 1000000000ull),
                                   (long)(queue->due % 1000000000ull) };
            pthread_cond_timedwait(&qcond, &sim_p.lock, &ts);
            continue;
        }
        hostjob_t *j = queue;
        queue = j->next;
        SIM_UNLOCK();
        if (j->fn)
            j->fn(j->user);
        else
            j->cb(j->cb_stream, CUDA_SUCCESS, j->user);
        SIM_LOCK();
        sim_stream_t *s = j->s;
        s->ctx->host_pending--;
        if (--s->host_pending == 0 && s->dead)
            free(s);
        free(j);
        pthread_cond_broadcast(&sim_p.cond);
    }
    return NULL;
}

CUresult sim_hostfn_enqueue(sim_stream_t *s, void (*fn)(void *), void *user,
                            CUstreamCallback cb, CUstream cb_stream)
{
    pthread_once(&qcond_once, qcond_init);
    if (!worker_started) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int err = pthread_create(&t, &a, worker, NULL);
        pthread_attr_destroy(&a);
        if (err)
            return CUDA_ERROR_OUT_OF_MEMORY;
        worker_started = 1;
    }
    hostjob_t *j = calloc(1, sizeof *j);
    if (!j)
        return CUDA_ERROR_OUT_OF_MEMORY;
    j->due = sim_max(sim_now(), sim_stream_ready(s));
    j->fn = fn;
    j->user = user;
    j->cb = cb;
    j->cb_stream = cb_stream;
    j->s = s;
    hostjob_t **p = &queue;
    while (*p && (*p)->due <= j->due)
        p = &(*p)->next;
    j->next = *p;
    *p = j;
    s->host_pending++;
    s->ctx->host_pending++;
    pthread_cond_signal(&qcond);
    return CUDA_SUCCESS;
}

static CUresult host_func(CUstream hs, int ptds, void (*fn)(void *), void *user,
                          CUstreamCallback cb)
{
    SIM_CHECK_INIT();
    if (!fn && !cb)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(hs, ptds, &s);
    if (rc == CUDA_SUCCESS) {
        if (s->capture && fn)
            rc = sim_capture_host(s, fn, user);
        else if (s->capture)
            rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        else
            rc = sim_hostfn_enqueue(s, fn, user, cb, hs);
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream s, CUhostFn fn, void *user)
{
    return host_func(s, 0, fn, user, NULL);
}

CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *user)
{
    return host_func(s, 1, fn, user, NULL);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *user, unsigned int flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    return host_func(s, 0, NULL, user, cb);
}

CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *user,
                                          unsigned int flags)
{
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    return host_func(s, 1, NULL, user, cb);
}

void sim_exec_reset_after_fork(void)
{
    /* The worker thread did not survive fork(); its jobs were the parent's. */
    queue = NULL;
    worker_started = 0;
    memset(&pt, 0, sizeof pt);
    qcond_init();
}

/*
 * event.c - events (create, record, query, synchronize, elapsed time, wait)
 * and host callbacks (cuLaunchHostFunc, cuStreamAddCallback), on the time
 * model of exec.c.
 *
 * Divided into: cuEvent* entry points; cuStreamWaitEvent; host callbacks
 * (one worker thread, started on first use).
 *
 * An event recorded on a stream completes when the work enqueued before it
 * does: its time is max(now, when new work on the stream could start).
 * Waiting on an event moves the waiting stream's tail to the event's time.
 *
 * Lock: sim_p.lock guards events and the callback queue; the worker drops it
 * while a callback runs.
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static void destroy_event_if_ctx(void *obj, void *arg)
{
    sim_event_t *e = obj;
    if (e->ctx == arg) {
        sim_ipc_event_release(e);
        sim_obj_free(e->handle);
        free(e);
    }
}

void sim_events_destroy_ctx(sim_ctx_t *ctx)
{
    sim_obj_foreach(SIM_K_EVENT, destroy_event_if_ctx, ctx);
}

/* ---- cuEvent* ------------------------------------------------------------ */

/* An event, its state loaded from where it is shared (an interprocess
 * event: another process may have recorded it). */
static sim_event_t *event_get(CUevent h)
{
    sim_event_t *e = sim_obj_get((uint64_t)(uintptr_t)h, SIM_K_EVENT);
    if (e)
        sim_ipc_event_load(e);
    return e;
}

sim_event_t *sim_event_get(CUevent h)
{
    return event_get(h);
}

sim_event_t *sim_event_new(sim_ctx_t *ctx, unsigned flags)
{
    sim_event_t *e = calloc(1, sizeof *e);
    if (!e || !(e->handle = sim_obj_new(SIM_K_EVENT, e))) {
        free(e);
        return NULL;
    }
    e->ctx = ctx;
    e->flags = flags;
    return e;
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
    sim_event_t *e = sim_event_new(ctx, flags);
    if (!e) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
        goto out_unlock;
    }
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
        sim_ipc_event_release(e);
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
        sim_ipc_event_store(e);
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

void sim_hostfn_reset_after_fork(void)
{
    /* The worker thread did not survive fork(); its jobs were the parent's. */
    queue = NULL;
    worker_started = 0;
    qcond_init();
}

/*
 * capture.c - stream capture: beginning and ending it, recording work into
 * the capture's graph, and the driver's rules for what may be called while
 * a capture is in progress.
 *
 * Capture follows the driver's rules.  A capture has the mode it began with
 * (CU_STREAM_CAPTURE_MODE_*) and each thread an interaction mode
 * (cuThreadExchangeStreamCaptureMode, GLOBAL by default).  A thread in
 * GLOBAL mode may not make a potentially unsafe call (sim_capture_unsafe's
 * callers: cuCtxSynchronize, cuMemAlloc, cuMemFree, cuMemUnmap (which
 * waits for the range's work), synchronous copies and memsets, the legacy
 * stream) while it has a capture of its own that did not begin RELAXED, or
 * another thread has one that began GLOBAL; in
 * THREAD_LOCAL mode only its own count; in RELAXED mode none.  Waiting for
 * or querying a capturing stream is refused in every mode.  A refused call
 * answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures
 * it conflicts with: they report CU_STREAM_CAPTURE_STATUS_INVALIDATED, take
 * no more work (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) and end with that
 * error.  Stream-ordered allocations in a capture are made at once and
 * recorded as memory nodes; the graph keeps what it allocated (the driver's
 * graph memory stays reserved to the graph between launches: here, until
 * its context goes), and a captured free of memory from outside the graph
 * frees it when the graph runs.  A graph launched into a capture is
 * recorded node by node.
 *
 *
 * Lock: sim_p.lock guards the captures in progress; a thread's interaction
 * mode is its own (thread-local).
 */
#include "graph_int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next_capture_id = 1;

/* The captures in progress, every stream whose capture is set. */
#define SIM_MAX_CAPTURES 64
static sim_stream_t *captures[SIM_MAX_CAPTURES];
static int ncaptures;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ---- stream capture --------------------------------------------------------------- */

static uint64_t self_id(void)
{
    return (uint64_t)pthread_self();
}

/* Record a node into s's capture: refused once the capture is invalidated. */
CUresult sim_capture_add(sim_stream_t *s, const sim_node_t *proto)
{
    if (s->capture_invalid)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return sim_node_add(s->capture, proto, NULL);
}

CUresult sim_capture_unsafe(void)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    uint64_t me = self_id();
    int hit = 0;
    for (int i = 0; i < ncaptures; i++) {
        sim_stream_t *s = captures[i];
        int mine = s->capture_thread == me;
        if ((mine && s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            s->capture_invalid = 1;
            hit = 1;
        }
    }
    return hit ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

CUresult sim_capture_conflict(sim_stream_t *s, int blocking)
{
    if (s->capture) {
        s->capture_invalid = 1;
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (blocking || s->kind == SIM_S_LEGACY)
        return sim_capture_unsafe();
    return CUDA_SUCCESS;
}

/* Under lock: s's capture is over (ended, or its stream destroyed). */
static void capture_finish(sim_stream_t *s)
{
    for (int i = 0; i < ncaptures; i++)
        if (captures[i] == s) {
            captures[i] = captures[--ncaptures];
            break;
        }
    s->capture = NULL;
    s->capture_invalid = 0;
    s->capture_to_graph = 0;
}

void sim_capture_drop(sim_stream_t *s)
{
    if (!s->capture)
        return;
    if (!s->capture_to_graph)
        sim_graph_free(s->capture);
    capture_finish(s);
}

CUresult sim_capture_alloc(sim_stream_t *s, CUdeviceptr d)
{
    sim_node_t proto = { .type = N_MEMALLOC, .dst = d };
    return sim_capture_add(s, &proto);
}

CUresult sim_capture_free(sim_stream_t *s, CUdeviceptr d)
{
    sim_node_t proto = { .type = N_MEMFREE, .dst = d };
    for (size_t i = 0; i < s->capture->n; i++)
        if (s->capture->nodes[i]->type == N_MEMALLOC && s->capture->nodes[i]->dst == d)
            proto.own = 1;
    return sim_capture_add(s, &proto);
}

CUresult sim_capture_kernel(sim_stream_t *s, sim_func_t *f, const unsigned grid[3],
                            const unsigned block[3], unsigned shmem, const void *params,
                            size_t size)
{
    sim_node_t proto = { .type = N_KERNEL, .func = f->handle, .shmem = shmem,
                         .params = (void *)params, .psize = size };
    memcpy(proto.grid, grid, sizeof proto.grid);
    memcpy(proto.block, block, sizeof proto.block);
    return sim_capture_add(s, &proto);
}

CUresult sim_capture_memset(sim_stream_t *s, CUdeviceptr dst, size_t pitch, unsigned value,
                            unsigned elem, size_t width, size_t height)
{
    sim_node_t proto = { .type = N_MEMSET, .dst = dst, .pitch = pitch, .value = value,
                         .elem = elem, .width = width, .height = height };
    return sim_capture_add(s, &proto);
}

CUresult sim_capture_memcpy(sim_stream_t *s, void *dst, const void *src, size_t bytes,
                            uint64_t bw)
{
    sim_node_t proto = { .type = N_MEMCPY, .cdst = dst, .csrc = src, .bytes = bytes, .bw = bw };
    return sim_capture_add(s, &proto);
}

CUresult sim_capture_host(sim_stream_t *s, void (*fn)(void *), void *user)
{
    sim_node_t proto = { .type = N_HOST, .fn = fn, .user = user };
    return sim_capture_add(s, &proto);
}

/* Begin capturing on hs, into a new graph, or into the caller's graph `into`
 * (cuStreamBeginCaptureToGraph; its dependencies are validated only). */
static CUresult begin_capture(CUstream hs, int mode, int ptsz, CUgraph into)
{
    SIM_CHECK_INIT();
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_stream_t *s;
    sim_graph_t *g = NULL;
    CUresult rc = sim_stream_resolve(hs, ptsz, &s);
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    if (into && !(g = sim_obj_get((uint64_t)(uintptr_t)into, SIM_K_GRAPH))) {
        rc = CUDA_ERROR_INVALID_VALUE;
    } else if (s->kind == SIM_S_LEGACY) {
        rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    } else if (s->capture) {
        rc = CUDA_ERROR_ILLEGAL_STATE;
    } else if (ncaptures == SIM_MAX_CAPTURES || (!g && !(g = sim_graph_new(0)))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        s->capture = g;
        s->capture_to_graph = into != NULL;
        s->capture_invalid = 0;
        s->capture_mode = mode;
        s->capture_id = next_capture_id++;
        s->capture_thread = self_id();
        captures[ncaptures++] = s;
    }
out_unlock:
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream s)
{
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL, 0, NULL);
}
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream s)
{
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL, 1, NULL);
}
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    return begin_capture(s, mode, 0, NULL);
}
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    return begin_capture(s, mode, 1, NULL);
}

#ifdef CU_PARAMS_cuStreamBeginCaptureToGraph
static CUresult begin_to_graph(CUstream hs, CUgraph g, const CUgraphNode *deps, size_t n,
                               CUstreamCaptureMode mode, int ptsz)
{
    SIM_CHECK_INIT();
    if (!g || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    for (size_t i = 0; i < n; i++) {
        sim_node_t *d = sim_obj_get((uint64_t)(uintptr_t)deps[i], SIM_K_GNODE);
        if (!d || d->graph != sim_obj_get((uint64_t)(uintptr_t)g, SIM_K_GRAPH)) {
            SIM_UNLOCK();
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    SIM_UNLOCK();
    return begin_capture(hs, mode, ptsz, g);
}

CUresult CUDAAPI cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                             const CUgraphEdgeData *edges, size_t n,
                                             CUstreamCaptureMode mode)
{
    (void)edges;
    return begin_to_graph(s, g, deps, n, mode, 0);
}
CUresult CUDAAPI cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g,
                                                  const CUgraphNode *deps,
                                                  const CUgraphEdgeData *edges, size_t n,
                                                  CUstreamCaptureMode mode)
{
    (void)edges;
    return begin_to_graph(s, g, deps, n, mode, 1);
}
#endif

/* A capture not begun RELAXED ends on the thread that began it; an
 * invalidated one ends with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED and no
 * graph (what it recorded is dropped). */
static CUresult end_capture(CUstream hs, CUgraph *out, int ptsz)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(hs, ptsz, &s);
    if (rc == CUDA_SUCCESS && !s->capture)
        rc = CUDA_ERROR_ILLEGAL_STATE;
    else if (rc == CUDA_SUCCESS && s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
             s->capture_thread != self_id())
        rc = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (rc != CUDA_SUCCESS)
        goto out_unlock;
    if (s->capture_invalid) {
        sim_capture_drop(s);
        *out = NULL;
        rc = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    } else {
        *out = (CUgraph)(uintptr_t)s->capture->handle;
        capture_finish(s);
    }
out_unlock:
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph *g) { return end_capture(s, g, 0); }
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream s, CUgraph *g) { return end_capture(s, g, 1); }

static CUresult capture_info(CUstream hs, int ptsz, CUstreamCaptureStatus *status,
                             cuuint64_t *id, CUgraph *graph)
{
    SIM_CHECK_INIT();
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_stream_resolve(hs, ptsz, &s);
    if (rc == CUDA_SUCCESS) {
        *status = !s->capture ? CU_STREAM_CAPTURE_STATUS_NONE
                : s->capture_invalid ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                : CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (id && s->capture)
            *id = s->capture_id;
        if (graph)
            *graph = s->capture ? (CUgraph)(uintptr_t)s->capture->handle : NULL;
    }
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st)
{
    return capture_info(s, 0, st, NULL, NULL);
}
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *st)
{
    return capture_info(s, 1, st, NULL, NULL);
}
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id)
{
    return capture_info(s, 0, st, id, NULL);
}
CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus *st,
                                             cuuint64_t *id)
{
    return capture_info(s, 1, st, id, NULL);
}

/* Dependencies are not tracked: the capture's frontier is reported empty. */
#define CAPTURE_INFO_V2(name, ptsz) \
    CUresult CUDAAPI name(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, \
                          const CUgraphNode **deps, size_t *n) \
    { \
        CUresult rc = capture_info(s, ptsz, st, id, g); \
        if (rc == CUDA_SUCCESS && deps) *deps = NULL; \
        if (rc == CUDA_SUCCESS && n) *n = 0; \
        return rc; \
    }
CAPTURE_INFO_V2(cuStreamGetCaptureInfo_v2, 0)
CAPTURE_INFO_V2(cuStreamGetCaptureInfo_v2_ptsz, 1)

#ifdef CU_PARAMS_cuStreamGetCaptureInfo_v3
#define CAPTURE_INFO_V3(name, ptsz) \
    CUresult CUDAAPI name(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, \
                          const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *n) \
    { \
        CUresult rc = capture_info(s, ptsz, st, id, g); \
        if (rc == CUDA_SUCCESS && deps) *deps = NULL; \
        if (rc == CUDA_SUCCESS && edges) *edges = NULL; \
        if (rc == CUDA_SUCCESS && n) *n = 0; \
        return rc; \
    }
CAPTURE_INFO_V3(cuStreamGetCaptureInfo_v3, 0)
CAPTURE_INFO_V3(cuStreamGetCaptureInfo_v3_ptsz, 1)
#endif

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    SIM_CHECK_INIT();
    if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = thread_mode;
    thread_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}


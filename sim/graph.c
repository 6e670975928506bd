/*
 * graph.c - CUDA graphs: explicit construction (kernel, memset, 1D memcpy,
 * host and empty nodes), stream capture, instantiation and launch.
 *
 * Divided into: nodes; graphs; explicit construction; stream capture;
 * instantiation; launch.
 *
 * Semantics kept simple and honest: nodes run in the order they were added
 * (an order every dependency list agrees with, since a dependency must exist
 * before its dependents), one after another on the launch stream, each as
 * the same call made directly would run (kernels through the engine, copies
 * and memsets as stream transfers, host nodes on the callback thread).
 * Dependencies are validated, not otherwise used.  An executable graph is a
 * deep copy: changing or destroying the graph afterwards does not change it.
 *
 * Capture follows the driver's rules.  A capture has the mode it began with
 * (CU_STREAM_CAPTURE_MODE_*) and each thread an interaction mode
 * (cuThreadExchangeStreamCaptureMode, GLOBAL by default).  A thread in
 * GLOBAL mode may not make a potentially unsafe call (sim_capture_unsafe's
 * callers: cuCtxSynchronize, cuMemAlloc, cuMemFree, synchronous copies and
 * memsets, the legacy stream) while it has a capture of its own that did not
 * begin RELAXED, or another thread has one that began GLOBAL; in
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
 * Lock: sim_p.lock guards graphs, nodes and the captures in progress; a
 * thread's interaction mode is its own (thread-local).
 */
#include "sim.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { N_KERNEL = 1, N_MEMSET, N_MEMCPY, N_HOST, N_EMPTY, N_MEMALLOC, N_MEMFREE };

struct sim_node {
    uint64_t handle;                    /* 0 in an executable graph */
    sim_graph_t *graph;
    int type;
    uint64_t func;                      /* N_KERNEL: function handle */
    unsigned grid[3], block[3], shmem;
    void *params;
    size_t psize;
    CUdeviceptr dst;                    /* N_MEMSET, N_MEMALLOC, N_MEMFREE */
    int own;                            /* N_MEMFREE: of the graph's own allocation */
    size_t pitch, width, height;
    unsigned value, elem;
    void *cdst;                         /* N_MEMCPY */
    const void *csrc;
    size_t bytes;
    uint64_t bw;
    void (*fn)(void *);                 /* N_HOST */
    void *user;
};

struct sim_graph {
    uint64_t handle;
    int exec;                           /* an instantiated (executable) graph */
    sim_node_t **nodes;
    size_t n, cap;
};

static uint64_t next_capture_id = 1;

/* The captures in progress, every stream whose capture is set. */
#define SIM_MAX_CAPTURES 64
static sim_stream_t *captures[SIM_MAX_CAPTURES];
static int ncaptures;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ---- nodes ------------------------------------------------------------------------- */

static void node_free(sim_node_t *nd)
{
    if (nd->handle)
        sim_obj_free(nd->handle);
    free(nd->params);
    free(nd);
}

/* Append a node (its fields already set in *proto) to g. */
static CUresult node_add(sim_graph_t *g, const sim_node_t *proto, sim_node_t **out)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 16;
        sim_node_t **nn = realloc(g->nodes, cap * sizeof *nn);
        if (!nn)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->nodes = nn;
        g->cap = cap;
    }
    sim_node_t *nd = malloc(sizeof *nd);
    if (!nd)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *nd = *proto;
    nd->graph = g;
    nd->handle = 0;
    nd->params = NULL;
    if (proto->psize) {
        if (!(nd->params = malloc(proto->psize))) {
            free(nd);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(nd->params, proto->params, proto->psize);
    }
    if (!g->exec && !(nd->handle = sim_obj_new(SIM_K_GNODE, nd))) {
        node_free(nd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->nodes[g->n++] = nd;
    if (out)
        *out = nd;
    return CUDA_SUCCESS;
}

/* ---- graphs ------------------------------------------------------------------------- */

static sim_graph_t *graph_new(int exec)
{
    sim_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->exec = exec;
    if (!(g->handle = sim_obj_new(exec ? SIM_K_GEXEC : SIM_K_GRAPH, g))) {
        free(g);
        return NULL;
    }
    return g;
}

static void graph_free(sim_graph_t *g)
{
    for (size_t i = 0; i < g->n; i++)
        node_free(g->nodes[i]);
    free(g->nodes);
    sim_obj_free(g->handle);
    free(g);
}

CUresult CUDAAPI cuGraphCreate(CUgraph *pg, unsigned int flags)
{
    SIM_CHECK_INIT();
    if (!pg || flags)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_graph_t *g = graph_new(0);
    if (g)
        *pg = (CUgraph)(uintptr_t)g->handle;
    SIM_UNLOCK();
    return g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult destroy(uint64_t h, sim_kind_t kind)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_graph_t *g = sim_obj_get(h, kind);
    if (g)
        graph_free(g);
    SIM_UNLOCK();
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph g) { return destroy((uint64_t)(uintptr_t)g, SIM_K_GRAPH); }
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec g)
{
    return destroy((uint64_t)(uintptr_t)g, SIM_K_GEXEC);
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hg, CUgraphNode *nodes, size_t *count)
{
    SIM_CHECK_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_graph_t *g = sim_obj_get((uint64_t)(uintptr_t)hg, SIM_K_GRAPH);
    if (g) {
        if (nodes)
            for (size_t i = 0; i < g->n && i < *count; i++)
                nodes[i] = (CUgraphNode)(uintptr_t)g->nodes[i]->handle;
        *count = g->n;
    }
    SIM_UNLOCK();
    return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hn, CUgraphNodeType *type)
{
    static const CUgraphNodeType types[] = {
        [N_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL, [N_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
        [N_MEMCPY] = CU_GRAPH_NODE_TYPE_MEMCPY, [N_HOST] = CU_GRAPH_NODE_TYPE_HOST,
        [N_EMPTY] = CU_GRAPH_NODE_TYPE_EMPTY, [N_MEMALLOC] = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
        [N_MEMFREE] = CU_GRAPH_NODE_TYPE_MEM_FREE,
    };
    SIM_CHECK_INIT();
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_node_t *nd = sim_obj_get((uint64_t)(uintptr_t)hn, SIM_K_GNODE);
    if (nd)
        *type = types[nd->type];
    SIM_UNLOCK();
    return nd ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- explicit construction -------------------------------------------------------- */

/* Under lock: the graph, with every dependency one of its nodes. */
static CUresult graph_for_add(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                              sim_graph_t **g)
{
    if (!out || (n && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    *g = sim_obj_get((uint64_t)(uintptr_t)hg, SIM_K_GRAPH);
    if (!*g)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        sim_node_t *d = sim_obj_get((uint64_t)(uintptr_t)deps[i], SIM_K_GNODE);
        if (!d || d->graph != *g)
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult add_node(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                         const sim_node_t *proto)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_graph_t *g;
    sim_node_t *nd;
    CUresult rc = graph_for_add(out, hg, deps, n, &g);
    if (rc == CUDA_SUCCESS && (rc = node_add(g, proto, &nd)) == CUDA_SUCCESS)
        *out = (CUgraphNode)(uintptr_t)nd->handle;
    SIM_UNLOCK();
    return rc;
}

static CUresult add_kernel(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                           CUfunction hf, const unsigned grid[3], const unsigned block[3],
                           unsigned shmem, void **kp, void **extra)
{
    SIM_CHECK_INIT();
    sim_node_t proto = { .type = N_KERNEL, .func = (uint64_t)(uintptr_t)hf, .shmem = shmem };
    memcpy(proto.grid, grid, sizeof proto.grid);
    memcpy(proto.block, block, sizeof proto.block);
    SIM_LOCK();
    sim_func_t *f = sim_obj_get(proto.func, SIM_K_FUNC);
    void *buf = f ? malloc(f->param_bytes ? f->param_bytes : 1) : NULL;
    CUresult rc = !f ? CUDA_ERROR_INVALID_VALUE
                : !buf ? CUDA_ERROR_OUT_OF_MEMORY
                : sim_pack_params(f, kp, extra, buf, f->param_bytes, &proto.psize);
    SIM_UNLOCK();
    proto.params = buf;
    if (rc == CUDA_SUCCESS)
        rc = add_node(out, hg, deps, n, &proto);
    free(buf);
    return rc;
}

CUresult CUDAAPI cuGraphAddKernelNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                      size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    const unsigned block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    return add_kernel(out, g, deps, n, p->func, grid, block, p->sharedMemBytes,
                      p->kernelParams, p->extra);
}

CUresult CUDAAPI cuGraphAddKernelNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                         size_t n, const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    const unsigned block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    CUfunction f = p->func ? p->func : (CUfunction)p->kern;    /* a CUkernel is a CUfunction */
    return add_kernel(out, g, deps, n, f, grid, block, p->sharedMemBytes, p->kernelParams,
                      p->extra);
}

CUresult CUDAAPI cuGraphAddMemsetNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                      size_t n, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx)
{
    (void)ctx;
    if (!p || (p->elementSize != 1 && p->elementSize != 2 && p->elementSize != 4))
        return CUDA_ERROR_INVALID_VALUE;
    sim_node_t proto = { .type = N_MEMSET, .dst = p->dst, .pitch = p->pitch,
                         .value = p->value, .elem = p->elementSize, .width = p->width,
                         .height = p->height };
    return add_node(out, g, deps, n, &proto);
}

/* Memcpy nodes: 1D copies between host and device pointers. */
CUresult CUDAAPI cuGraphAddMemcpyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                      size_t n, const CUDA_MEMCPY3D *p, CUcontext ctx)
{
    (void)ctx;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->Height > 1 || p->Depth > 1 || p->srcMemoryType == CU_MEMORYTYPE_ARRAY ||
        p->dstMemoryType == CU_MEMORYTYPE_ARRAY)
        return CUDA_ERROR_NOT_SUPPORTED;
    const char *src = p->srcMemoryType == CU_MEMORYTYPE_HOST ? (const char *)p->srcHost
                                                             : (const char *)(uintptr_t)p->srcDevice;
    char *dst = p->dstMemoryType == CU_MEMORYTYPE_HOST ? (char *)p->dstHost
                                                       : (char *)(uintptr_t)p->dstDevice;
    if (!src || !dst)
        return CUDA_ERROR_INVALID_VALUE;
    sim_node_t proto = { .type = N_MEMCPY, .cdst = dst + p->dstXInBytes,
                         .csrc = src + p->srcXInBytes, .bytes = p->WidthInBytes,
                         .bw = p->srcMemoryType == CU_MEMORYTYPE_HOST ||
                               p->dstMemoryType == CU_MEMORYTYPE_HOST ? SIM_BW_HOST
                                                                      : SIM_BW_DEVICE };
    return add_node(out, g, deps, n, &proto);
}

CUresult CUDAAPI cuGraphAddHostNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                    size_t n, const CUDA_HOST_NODE_PARAMS *p)
{
    if (!p || !p->fn)
        return CUDA_ERROR_INVALID_VALUE;
    sim_node_t proto = { .type = N_HOST, .fn = p->fn, .user = p->userData };
    return add_node(out, g, deps, n, &proto);
}

CUresult CUDAAPI cuGraphAddEmptyNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                     size_t n)
{
    sim_node_t proto = { .type = N_EMPTY };
    return add_node(out, g, deps, n, &proto);
}

/* ---- stream capture --------------------------------------------------------------- */

static uint64_t self_id(void)
{
    return (uint64_t)pthread_self();
}

/* Record a node into s's capture: refused once the capture is invalidated. */
static CUresult capture_add(sim_stream_t *s, const sim_node_t *proto)
{
    if (s->capture_invalid)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return node_add(s->capture, proto, NULL);
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
        graph_free(s->capture);
    capture_finish(s);
}

CUresult sim_capture_alloc(sim_stream_t *s, CUdeviceptr d)
{
    sim_node_t proto = { .type = N_MEMALLOC, .dst = d };
    return capture_add(s, &proto);
}

CUresult sim_capture_free(sim_stream_t *s, CUdeviceptr d)
{
    sim_node_t proto = { .type = N_MEMFREE, .dst = d };
    for (size_t i = 0; i < s->capture->n; i++)
        if (s->capture->nodes[i]->type == N_MEMALLOC && s->capture->nodes[i]->dst == d)
            proto.own = 1;
    return capture_add(s, &proto);
}

CUresult sim_capture_kernel(sim_stream_t *s, sim_func_t *f, const unsigned grid[3],
                            const unsigned block[3], unsigned shmem, const void *params,
                            size_t size)
{
    sim_node_t proto = { .type = N_KERNEL, .func = f->handle, .shmem = shmem,
                         .params = (void *)params, .psize = size };
    memcpy(proto.grid, grid, sizeof proto.grid);
    memcpy(proto.block, block, sizeof proto.block);
    return capture_add(s, &proto);
}

CUresult sim_capture_memset(sim_stream_t *s, CUdeviceptr dst, size_t pitch, unsigned value,
                            unsigned elem, size_t width, size_t height)
{
    sim_node_t proto = { .type = N_MEMSET, .dst = dst, .pitch = pitch, .value = value,
                         .elem = elem, .width = width, .height = height };
    return capture_add(s, &proto);
}

CUresult sim_capture_memcpy(sim_stream_t *s, void *dst, const void *src, size_t bytes,
                            uint64_t bw)
{
    sim_node_t proto = { .type = N_MEMCPY, .cdst = dst, .csrc = src, .bytes = bytes, .bw = bw };
    return capture_add(s, &proto);
}

CUresult sim_capture_host(sim_stream_t *s, void (*fn)(void *), void *user)
{
    sim_node_t proto = { .type = N_HOST, .fn = fn, .user = user };
    return capture_add(s, &proto);
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
    } else if (ncaptures == SIM_MAX_CAPTURES || (!g && !(g = graph_new(0)))) {
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

/* ---- instantiation ----------------------------------------------------------------- */

static CUresult instantiate(CUgraphExec *out, CUgraph hg)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_graph_t *g = sim_obj_get((uint64_t)(uintptr_t)hg, SIM_K_GRAPH), *x = NULL;
    CUresult rc = g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && !(x = graph_new(1)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++)
        rc = node_add(x, g->nodes[i], NULL);
    if (rc == CUDA_SUCCESS)
        *out = (CUgraphExec)(uintptr_t)x->handle;
    else if (x)
        graph_free(x);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *out, CUgraph g, CUgraphNode *err, char *log,
                                    size_t len)
{
    if (log && len)
        log[0] = '\0';
    (void)err;
    return instantiate(out, g);
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *out, CUgraph g, CUgraphNode *err, char *log,
                                       size_t len)
{
    return cuGraphInstantiate(out, g, err, log, len);
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *out, CUgraph g, unsigned long long f)
{
    (void)f;
    return instantiate(out, g);
}

static CUresult instantiate_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = instantiate(out, g);
    p->hErrNode_out = NULL;
    p->result_out = rc == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                                       : CUDA_GRAPH_INSTANTIATE_ERROR;
    return rc;
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *out, CUgraph g,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    return instantiate_params(out, g, p);
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *out, CUgraph g,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *p)
{
    return instantiate_params(out, g, p);
}

/* ---- launch ------------------------------------------------------------------------ */

static CUresult run_node(const sim_node_t *nd, sim_stream_t *s)
{
    switch (nd->type) {
    case N_KERNEL: {
        sim_func_t *f = sim_obj_get(nd->func, SIM_K_FUNC);
        if (!f)                         /* its module was unloaded */
            return CUDA_ERROR_INVALID_HANDLE;
        return sim_launch_packed(f, s, nd->grid, nd->block, nd->shmem, nd->params, nd->psize);
    }
    case N_MEMSET: {
        CUresult rc = sim_memset_do(nd->dst, nd->height > 1 ? nd->pitch : nd->width * nd->elem,
                                    nd->value, nd->elem, nd->width, nd->height);
        if (rc == CUDA_SUCCESS)
            sim_stream_transfer(s, sim_transfer_ns(nd->width * nd->elem * nd->height,
                                                   SIM_BW_DEVICE), SIM_W_MEMSET, "memset");
        return rc;
    }
    case N_MEMCPY:
        if (sim_range_find((uintptr_t)nd->cdst) &&
            sim_range_check((uintptr_t)nd->cdst, nd->bytes, PROT_WRITE))
            return CUDA_ERROR_INVALID_VALUE;
        if (sim_range_find((uintptr_t)nd->csrc) &&
            sim_range_check((uintptr_t)nd->csrc, nd->bytes, PROT_READ))
            return CUDA_ERROR_INVALID_VALUE;
        memmove(nd->cdst, nd->csrc, nd->bytes);
        sim_stream_transfer(s, sim_transfer_ns(nd->bytes, nd->bw), SIM_W_COPY,
                            sim_copy_name(sim_range_find((uintptr_t)nd->cdst) != NULL,
                                          sim_range_find((uintptr_t)nd->csrc) != NULL));
        return CUDA_SUCCESS;
    case N_HOST:
        return sim_hostfn_enqueue(s, nd->fn, nd->user, NULL, NULL);
    case N_MEMFREE: {
        if (nd->own)                    /* the graph keeps its own memory */
            return CUDA_SUCCESS;
        sim_range_t *r = sim_range_find((uintptr_t)nd->dst);
        if (!r || r->base != (uintptr_t)nd->dst || r->kind != SIM_R_POOL)
            return CUDA_ERROR_INVALID_VALUE;
        sim_pool_release_block(r);
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_SUCCESS;
    }
}

static CUresult graph_launch(CUgraphExec hx, CUstream hs, int ptsz)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_graph_t *x = sim_obj_get((uint64_t)(uintptr_t)hx, SIM_K_GEXEC);
    sim_stream_t *s;
    CUresult rc = x ? sim_stream_resolve(hs, ptsz, &s) : CUDA_ERROR_INVALID_VALUE;
    int into = rc == CUDA_SUCCESS && s->capture;     /* recorded, node by node */
    for (size_t i = 0; rc == CUDA_SUCCESS && i < x->n; i++)
        rc = into ? capture_add(s, x->nodes[i]) : run_node(x->nodes[i], s);
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec x, CUstream s) { return graph_launch(x, s, 0); }
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec x, CUstream s) { return graph_launch(x, s, 1); }

CUresult CUDAAPI cuGraphUpload(CUgraphExec hx, CUstream hs)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_stream_t *s;
    CUresult rc = sim_obj_get((uint64_t)(uintptr_t)hx, SIM_K_GEXEC)
                      ? sim_stream_resolve(hs, 0, &s) : CUDA_ERROR_INVALID_VALUE;
    SIM_UNLOCK();
    return rc;
}

CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hx, CUstream hs)
{
    return cuGraphUpload(hx, hs);
}

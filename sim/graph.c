/*
 * graph.c - CUDA graphs: explicit construction (kernel, memset, 1D memcpy,
 * host and empty nodes), stream capture, instantiation and launch.
 *
 * Divided into: nodes; graphs; explicit construction; instantiation;
 * launch.
 *
 * Semantics kept simple and honest: nodes run in the order they were added
 * (an order every dependency list agrees with, since a dependency must exist
 * before its dependents), one after another on the launch stream, each as
 * the same call made directly would run (kernels through the engine, copies
 * and memsets as stream transfers, host nodes on the callback thread).
 * Dependencies are validated, not otherwise used.  An executable graph is a
 * deep copy: changing or destroying the graph afterwards does not change it.
 *
 * Stream capture is capture.c, over this file's nodes and graphs
 * (graph_int.h).
 *
 * Lock: sim_p.lock guards graphs and nodes.
 */
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- nodes ------------------------------------------------------------------------- */

static void node_free(sim_node_t *nd)
{
    if (nd->gmem)
        sim_gmem_unref(nd->gmem);
    if (nd->handle)
        sim_obj_free(nd->handle);
    free(nd->params);
    free(nd);
}

/* Append a node (its fields already set in *proto) to g. */
CUresult sim_node_add(sim_graph_t *g, const sim_node_t *proto, sim_node_t **out)
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
    nd->origin = g->exec ? proto->handle : 0;  /* instantiate copies graph nodes */
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
        nd->gmem = NULL;                    /* not yet held */
        node_free(nd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    g->nodes[g->n++] = nd;
    if (nd->gmem)
        sim_gmem_ref(nd->gmem);             /* the graph's, or an instantiation's */
    if (out)
        *out = nd;
    return CUDA_SUCCESS;
}

/* ---- graphs ------------------------------------------------------------------------- */

sim_graph_t *sim_graph_new(int exec)
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

void sim_graph_free(sim_graph_t *g)
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
    sim_graph_t *g = sim_graph_new(0);
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
        sim_graph_free(g);
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
CUresult sim_graph_for_add(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
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
    CUresult rc = sim_graph_for_add(out, hg, deps, n, &g);
    if (rc == CUDA_SUCCESS && (rc = sim_node_add(g, proto, &nd)) == CUDA_SUCCESS)
        *out = (CUgraphNode)(uintptr_t)nd->handle;
    SIM_UNLOCK();
    return rc;
}

/* Under lock: a kernel node's fields, its parameters packed into a buffer
 * of the caller's (proto->params, to be freed). */
CUresult sim_kernel_proto(sim_node_t *proto, CUfunction hf, const unsigned grid[3],
                          const unsigned block[3], unsigned shmem, void **kp, void **extra)
{
    *proto = (sim_node_t){ .type = N_KERNEL, .func = (uint64_t)(uintptr_t)hf, .shmem = shmem };
    memcpy(proto->grid, grid, sizeof proto->grid);
    memcpy(proto->block, block, sizeof proto->block);
    sim_func_t *f = sim_obj_get(proto->func, SIM_K_FUNC);
    void *buf = f ? malloc(f->param_bytes ? f->param_bytes : 1) : NULL;
    CUresult rc = !f ? CUDA_ERROR_INVALID_VALUE
                : !buf ? CUDA_ERROR_OUT_OF_MEMORY
                : sim_pack_params(f, kp, extra, buf, f->param_bytes, &proto->psize);
    proto->params = buf;
    return rc;
}

static CUresult add_kernel(CUgraphNode *out, CUgraph hg, const CUgraphNode *deps, size_t n,
                           CUfunction hf, const unsigned grid[3], const unsigned block[3],
                           unsigned shmem, void **kp, void **extra)
{
    SIM_CHECK_INIT();
    sim_node_t proto;
    SIM_LOCK();
    CUresult rc = sim_kernel_proto(&proto, hf, grid, block, shmem, kp, extra);
    SIM_UNLOCK();
    if (rc == CUDA_SUCCESS)
        rc = add_node(out, hg, deps, n, &proto);
    free(proto.params);
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
                               p->dstMemoryType == CU_MEMORYTYPE_HOST ? sim_p.pcie_bw
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

/* ---- instantiation ----------------------------------------------------------------- */

static CUresult instantiate(CUgraphExec *out, CUgraph hg)
{
    SIM_CHECK_INIT();
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_LOCK();
    sim_graph_t *g = sim_obj_get((uint64_t)(uintptr_t)hg, SIM_K_GRAPH), *x = NULL;
    CUresult rc = g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS && !(x = sim_graph_new(1)))
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < g->n; i++)
        rc = sim_node_add(x, g->nodes[i], NULL);
    if (rc == CUDA_SUCCESS)
        *out = (CUgraphExec)(uintptr_t)x->handle;
    else if (x)
        sim_graph_free(x);
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

__thread uint64_t sim_graph_running;
static uint64_t graph_launches;             /* under sim_p.lock */

static CUresult graph_launch(CUgraphExec hx, CUstream hs, int ptsz)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_graph_t *x = sim_obj_get((uint64_t)(uintptr_t)hx, SIM_K_GEXEC);
    sim_stream_t *s;
    CUresult rc = x ? sim_stream_resolve(hs, ptsz, &s) : CUDA_ERROR_INVALID_VALUE;
    int into = rc == CUDA_SUCCESS && s->capture;     /* recorded, node by node */
    sim_graph_running = rc == CUDA_SUCCESS && !into ? ++graph_launches : 0;
    for (size_t i = 0; rc == CUDA_SUCCESS && i < x->n; i++)
        rc = into ? sim_capture_add(s, x->nodes[i]) : run_node(x->nodes[i], s);
    sim_graph_running = 0;
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

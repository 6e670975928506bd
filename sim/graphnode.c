/*
 * graphnode.c - the generic node call of explicit graph construction,
 * cuGraphAddNode (CUDA 12.2) and cuGraphAddNode_v2 (12.3, with edge data):
 * one CUgraphNodeParams whose type picks the member of its union, answered
 * by the typed call of that node type (graph.c, graphmem.c), so that a node
 * is the same whichever way it was added.  XLA's command buffers build
 * their graphs this way.
 *
 * The driver's documentation (CUDA Driver API, cuGraphAddNode): the
 * parameters are those of the typed calls, in their newest versions
 * (kernel v3, memset v2, memcpy with its context, host v2); reserved0 and
 * the union's unused bytes must be zero; an allocation node writes its
 * address back into nodeParams.  simgpu adds the node types graph.c
 * models (kernel, memcpy, memset, host, empty, allocation, free); the
 * others answer CUDA_ERROR_NOT_SUPPORTED, as a driver without the feature.
 *
 * Edge data (v2): simgpu runs a graph's nodes one after another in the
 * order they were added (graph.c), which satisfies every edge type,
 * programmatic ones included, so edges are checked only for their ports
 * being the default (0) or the documented programmatic ports.
 *
 * An executable graph's kernel node takes new parameters
 * (cuGraphExecKernelNodeSetParams, its _v2, cuGraphExecNodeSetParams for
 * a kernel node): the node of the executable graph made from hNode gets
 * the new function, shape and arguments, packed at the call as a launch
 * packs them, for the launches after it; the graph itself is unchanged
 * (CUDA Driver API: "Modifying the parameters of hNode in hGraphExec does
 * not affect hGraph").  XLA updates its command buffers so, launch after
 * launch, with each execution's buffer addresses.
 *
 * Divided into: the typed parameters; the node calls; executable graphs'
 * kernel parameters.  Lock: the typed calls take sim_p.lock; the setting
 * of an executable graph's parameters holds it throughout (a launch reads
 * the nodes under it).
 */
#include "graph_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- the typed parameters ---------------------------------------------------- */

static CUresult add_kernel(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                           const CUDA_KERNEL_NODE_PARAMS_v3 *k)
{
    CUDA_KERNEL_NODE_PARAMS_v2 p = {
        .func = k->func, .gridDimX = k->gridDimX, .gridDimY = k->gridDimY,
        .gridDimZ = k->gridDimZ, .blockDimX = k->blockDimX, .blockDimY = k->blockDimY,
        .blockDimZ = k->blockDimZ, .sharedMemBytes = k->sharedMemBytes,
        .kernelParams = k->kernelParams, .extra = k->extra, .kern = k->kern, .ctx = k->ctx,
    };
    return cuGraphAddKernelNode_v2(out, g, deps, n, &p);
}

static CUresult add_memset(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                           const CUDA_MEMSET_NODE_PARAMS_v2 *m)
{
    CUDA_MEMSET_NODE_PARAMS p = { .dst = m->dst, .pitch = m->pitch, .value = m->value,
                                  .elementSize = m->elementSize, .width = m->width,
                                  .height = m->height };
    return cuGraphAddMemsetNode(out, g, deps, n, &p, m->ctx);
}

static CUresult add_memcpy(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                           const CUDA_MEMCPY_NODE_PARAMS *c)
{
    if (c->flags || c->reserved)                /* "must be zero" */
        return CUDA_ERROR_INVALID_VALUE;
    return cuGraphAddMemcpyNode(out, g, deps, n, &c->copyParams, c->copyCtx);
}

static CUresult add_host(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                         const CUDA_HOST_NODE_PARAMS_v2 *h)
{
    CUDA_HOST_NODE_PARAMS p = { .fn = h->fn, .userData = h->userData };
    return cuGraphAddHostNode(out, g, deps, n, &p);
}

static CUresult add_alloc(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                          CUDA_MEM_ALLOC_NODE_PARAMS_v2 *a)
{
    /* v1 and v2 are the same fields in the same order (cuda.h) */
    CUDA_MEM_ALLOC_NODE_PARAMS_v1 p = { .poolProps = a->poolProps,
                                        .accessDescs = a->accessDescs,
                                        .accessDescCount = a->accessDescCount,
                                        .bytesize = a->bytesize };
    CUresult rc = cuGraphAddMemAllocNode(out, g, deps, n, &p);
    if (rc == CUDA_SUCCESS)
        a->dptr = p.dptr;
    return rc;
}

/* ---- the node calls ------------------------------------------------------------ */

static CUresult add_any(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                        CUgraphNodeParams *p)
{
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2])
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
        return add_kernel(out, g, deps, n, &p->kernel);
    case CU_GRAPH_NODE_TYPE_MEMSET:
        return add_memset(out, g, deps, n, &p->memset);
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        return add_memcpy(out, g, deps, n, &p->memcpy);
    case CU_GRAPH_NODE_TYPE_HOST:
        return add_host(out, g, deps, n, &p->host);
    case CU_GRAPH_NODE_TYPE_EMPTY:
        return cuGraphAddEmptyNode(out, g, deps, n);
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
        return add_alloc(out, g, deps, n, &p->alloc);
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return cuGraphAddMemFreeNode(out, g, deps, n, p->free.dptr);
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

CUresult CUDAAPI cuGraphAddNode(CUgraphNode *out, CUgraph g, const CUgraphNode *deps, size_t n,
                                CUgraphNodeParams *p)
{
    return add_any(out, g, deps, n, p);
}

/* An edge's ports: the default (0), or for a kernel's outgoing edge the
 * programmatic and launch-completion ports (CUgraphEdgeData in cuda.h). */
static int edge_ok(const CUgraphEdgeData *e)
{
    if (e->type != CU_GRAPH_DEPENDENCY_TYPE_DEFAULT &&
        e->type != CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
        return 0;
    return e->to_port == 0 &&
           (e->from_port == CU_GRAPH_KERNEL_NODE_PORT_DEFAULT ||
            e->from_port == CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC ||
            e->from_port == CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER);
}

CUresult CUDAAPI cuGraphAddNode_v2(CUgraphNode *out, CUgraph g, const CUgraphNode *deps,
                                   const CUgraphEdgeData *edges, size_t n, CUgraphNodeParams *p)
{
    for (size_t i = 0; edges && i < n; i++)
        if (!edge_ok(&edges[i]))
            return CUDA_ERROR_INVALID_VALUE;
    return add_any(out, g, deps, n, p);
}

/* ---- executable graphs' kernel parameters ---------------------------------------- */

static CUresult exec_kernel_set(CUgraphExec hx, CUgraphNode hn, CUfunction hf,
                                const unsigned grid[3], const unsigned block[3],
                                unsigned shmem, void **kp, void **extra)
{
    SIM_CHECK_INIT();
    SIM_LOCK();
    sim_graph_t *x = sim_obj_get((uint64_t)(uintptr_t)hx, SIM_K_GEXEC);
    sim_node_t *nd = NULL;
    for (size_t i = 0; x && hn && i < x->n && !nd; i++)
        if (x->nodes[i]->origin == (uint64_t)(uintptr_t)hn)
            nd = x->nodes[i];
    sim_node_t proto = { 0 };
    CUresult rc = !nd || nd->type != N_KERNEL
                      ? CUDA_ERROR_INVALID_VALUE
                      : sim_kernel_proto(&proto, hf, grid, block, shmem, kp, extra);
    if (rc == CUDA_SUCCESS) {
        free(nd->params);
        nd->params = proto.params;          /* the node's now */
        proto.params = NULL;
        nd->psize = proto.psize;
        nd->func = proto.func;
        memcpy(nd->grid, proto.grid, sizeof nd->grid);
        memcpy(nd->block, proto.block, sizeof nd->block);
        nd->shmem = proto.shmem;
    }
    SIM_UNLOCK();
    free(proto.params);
    return rc;
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams(CUgraphExec x, CUgraphNode n,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    const unsigned block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    return exec_kernel_set(x, n, p->func, grid, block, p->sharedMemBytes, p->kernelParams,
                           p->extra);
}

CUresult CUDAAPI cuGraphExecKernelNodeSetParams_v2(CUgraphExec x, CUgraphNode n,
                                                   const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = { p->gridDimX, p->gridDimY, p->gridDimZ };
    const unsigned block[3] = { p->blockDimX, p->blockDimY, p->blockDimZ };
    CUfunction f = p->func ? p->func : (CUfunction)p->kern;    /* a CUkernel is a CUfunction */
    return exec_kernel_set(x, n, f, grid, block, p->sharedMemBytes, p->kernelParams, p->extra);
}

/* Kernel nodes only: simgpu's other executable nodes keep their parameters. */
CUresult CUDAAPI cuGraphExecNodeSetParams(CUgraphExec x, CUgraphNode n, CUgraphNodeParams *p)
{
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2])
        return CUDA_ERROR_INVALID_VALUE;
    if (p->type != CU_GRAPH_NODE_TYPE_KERNEL)
        return CUDA_ERROR_NOT_SUPPORTED;
    const CUDA_KERNEL_NODE_PARAMS_v3 *k = &p->kernel;
    const unsigned grid[3] = { k->gridDimX, k->gridDimY, k->gridDimZ };
    const unsigned block[3] = { k->blockDimX, k->blockDimY, k->blockDimZ };
    CUfunction f = k->func ? k->func : (CUfunction)k->kern;
    return exec_kernel_set(x, n, f, grid, block, k->sharedMemBytes, k->kernelParams, k->extra);
}
